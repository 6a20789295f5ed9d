"""The sample cache (pinbench.core.sample_cache): a record computed in one run directory is found by another run of
the same inputs and code, never by other inputs or other code, never from a damaged or planted entry, and the cache
stays within its bound, least recently used first."""

from __future__ import annotations

import errno
import os
import re
import threading
import time
from pathlib import Path

import pytest
from loose_task import LooseTask
from toy_recipe import toy_recipe

from pinbench.core import sample_cache
from pinbench.core.config import Implementation
from pinbench.core.recipe import Recipe
from pinbench.core.run import Run
from pinbench.core.runner import SampleRecord, input_hash, run_samples
from pinbench.core.sample_cache import SUFFIX, SampleCache, cache_dir, prune
from pinbench.core.store import encode_line

TASKS = [LooseTask(f"s{i}", x=i) for i in range(4)]
CODE = Implementation("1.0.0", "a" * 64)


def slow_score(task: dict) -> dict:
    time.sleep(0.012)   # longer than MIN_SECONDS: worth keeping
    return {"f1": 0.5 + 0.1 * task["x"]}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "sample-cache"
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(root))
    return root


@pytest.fixture
def toy(tmp_path: Path) -> Recipe:
    return toy_recipe(tmp_path / "recipes")


def _compute(recipe: Recipe, out: Path, fn=slow_score, **flags):
    return Run(recipe, recipe.config("Toy-Nano", out_dir=out, limit=4, env={}, **flags)).compute(TASKS, fn)


def test_another_run_directory_reuses_what_one_computed(toy: Recipe, tmp_path: Path, cache: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    first = _compute(toy, tmp_path / "a")
    assert (first.n_done, first.n_cached) == (4, 0) and len(list(cache.rglob(f"*{SUFFIX}"))) == 4
    calls = []
    second = _compute(toy, tmp_path / "b", fn=lambda task: calls.append(task) or {"f1": -1.0})
    assert (second.n_done, second.n_reused, second.n_cached, calls) == (0, 4, 4, [])
    assert "4 samples: 0 done, 4 reused (4 from the sample cache), 0 failed" in capsys.readouterr().err
    assert [r.to_bytes() for r in second.records.values()] == [r.to_bytes() for r in first.records.values()]
    third = _compute(toy, tmp_path / "b", fn=lambda task: calls.append(task) or {"f1": -1.0})
    assert (third.n_reused, third.n_cached, calls) == (4, 0, [])   # the directory holds them now


def test_other_code_or_other_inputs_never_find_a_record(toy: Recipe, tmp_path: Path, cache: Path) -> None:
    _compute(toy, tmp_path / "a")
    other = SampleCache(cache, "toy-bench/", Implementation("1.0.0", "b" * 64))
    same = SampleCache(cache, "toy-bench/", toy.config("Toy-Nano", out_dir=tmp_path / "x", env={}).implementation)
    assert same.get(input_hash(TASKS[0])) is not None
    assert other.get(input_hash(TASKS[0])) is None                      # an edited scoring constant
    assert same.get(input_hash(LooseTask("s0", x=9))) is None           # an edited input


def test_fast_results_and_failures_are_not_kept(toy: Recipe, tmp_path: Path, cache: Path) -> None:
    def mixed(task: dict) -> dict:
        if task["x"] == 0:
            raise ValueError("bad frame")
        return slow_score(task) if task["x"] == 1 else {"f1": 0.0}
    _compute(toy, tmp_path / "a", fn=mixed)
    assert len(list(cache.rglob(f"*{SUFFIX}"))) == 1


def test_an_external_tools_records_are_kept_and_not_pending_in_another_run_directory(toy: Recipe, tmp_path: Path,
                                                                                      cache: Path) -> None:
    """A step whose fn only assembles what an external tool computed (MIND's process.py: hours; its records a
    millisecond) keeps every record with ``min_seconds=0``, and another run directory's ``pending`` names none of
    them for the tool, but a task of other inputs; ``compute`` then takes them from the cache."""
    def assembled(task: dict) -> dict:
        return {"f1": 0.5 + 0.1 * task["x"]}
    recipe_run = Run(toy, toy.config("Toy-Nano", out_dir=tmp_path / "a", limit=4, env={}))
    first = recipe_run.compute(TASKS, assembled, min_seconds=0)
    assert len(list(cache.rglob(f"*{SUFFIX}"))) == 4
    other = Run(toy, toy.config("Toy-Nano", out_dir=tmp_path / "b", limit=4, env={}))
    tasks = [*TASKS[:3], LooseTask("s3", x=9)]   # s3's input changed
    pending = other.pending(tasks)
    assert ([t["sample_id"] for t in pending.mine], [t["sample_id"] for t in pending.cached]) == (
        ["s3"], ["s0", "s1", "s2"])
    assert pending.stored == [] and list(pending.unscored) == ["s3"]
    assert other.pending(tasks, cache=False).mine == tasks
    second = other.compute(tasks, assembled, min_seconds=0)
    assert (second.n_done, second.n_cached) == (1, 3)
    assert [second.records[f"s{i}"].to_bytes() for i in range(3)] == [first.records[f"s{i}"].to_bytes()
                                                                      for i in range(3)]
    assert [t["sample_id"] for t in other.pending(tasks).stored] == ["s0", "s1", "s2", "s3"]


def test_store_sends_the_tool_only_the_pending_and_keeps_each_records_seconds(toy: Recipe, tmp_path: Path,
                                                                             cache: Path) -> None:
    """``Run.store`` after ``Run.pending`` (PAI-Bench-C's evaluator, run over the pending tasks' videos alone): a
    record keeps the seconds the tool took for its sample (they were 0), one taken from the cache the seconds it
    took where it was computed (also 0: its record was rebuilt without them), and a task whose record the directory
    holds needs no result (it failed "no result": the tool was sent every task again)."""
    def run_in(out: Path) -> Run:
        return Run(toy, toy.config("Toy-Nano", out_dir=out, limit=4, env={}))
    first = run_in(tmp_path / "a")
    held = first.pending(TASKS[:2])
    first.store(TASKS[:2], {t["sample_id"]: {"f1": t["x"]} for t in held.mine}, pending=held,
                seconds={"s0": 7.5, "s1": 2.0})
    second = run_in(tmp_path / "b")
    held = second.pending(TASKS)
    assert [t["sample_id"] for t in held.mine] == ["s2", "s3"]
    records = second.store(TASKS, {t["sample_id"]: {"f1": t["x"]} for t in held.mine}, pending=held,
                           seconds={"s2": 3.0, "s3": 4.0})
    assert [(r.sample_id, r.ok, r.seconds) for r in records] == [("s0", True, 7.5), ("s1", True, 2.0),
                                                                 ("s2", True, 3.0), ("s3", True, 4.0)]
    held = second.pending([*TASKS[:3], LooseTask("s3", x=9)])   # s3's input changed: it alone is sent the tool
    assert [t["sample_id"] for t in held.mine] == ["s3"] and sorted(held.kept) == ["s0", "s1", "s2"]
    records = second.store([*TASKS[:3], LooseTask("s3", x=9)], {"s3": {"f1": 9}}, pending=held, seconds={"s3": 1.0})
    assert [(r.sample_id, r.ok, r.result, r.seconds) for r in records] == [
        ("s0", True, {"f1": 0}, 7.5), ("s1", True, {"f1": 1}, 2.0), ("s2", True, {"f1": 2}, 3.0),
        ("s3", True, {"f1": 9}, 1.0)]


def test_a_damaged_planted_or_unreadable_entry_is_computed_again(toy: Recipe, tmp_path: Path, cache: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Each is computed again and named in one line (they were passed over unsaid)."""
    _compute(toy, tmp_path / "a")
    capsys.readouterr()
    implementation = toy.config("Toy-Nano", out_dir=tmp_path / "x", env={}).implementation
    samples = SampleCache(cache, "toy-bench/", implementation)
    entries = [samples._path(samples.key(input_hash(task))) for task in TASKS]
    entries[0].write_bytes(entries[0].read_bytes().replace(b"0.5", b"0.9"))     # edited: its digest fails
    entries[1].write_bytes(entries[1].read_bytes()[:40])                        # torn
    planted = entries[3].read_bytes()                                          # a sound record of s3 at s2's key
    entries[2].write_bytes(planted)
    entries[3].unlink()
    os.mkfifo(entries[3])                                                      # a FIFO: a miss, not a hang
    done: list = []
    worker = threading.Thread(target=lambda: done.append(_compute(toy, tmp_path / "b")), daemon=True)
    worker.start()
    worker.join(20)
    assert done, "the run hung on the FIFO in the cache"
    assert (done[0].n_done, done[0].n_cached) == (4, 0)
    assert [r.result["f1"] for r in done[0].records.values()] == [0.5, 0.6, 0.7, 0.8]
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("sample cache:")]
    assert said == [f"sample cache: {entries[0]}: the record of sample 's0' does not match its digest (changed after "
                    "it was written); not used, computed again",
                    f"sample cache: {entries[1]}: not a store line (torn or edited); not used, computed again",
                    f"sample cache: {entries[2]}: the record of 's3' is not of this key's inputs and code; not used, "
                    "computed again",
                    "sample cache: more unusable entries of this step, not named; each computed again"]


def test_pending_asked_twice_still_holds_what_it_found_for_compute(toy: Recipe, tmp_path: Path, cache: Path) -> None:
    """A recipe asking ``run.pending`` twice before ``compute`` (the second call took what the first held and held
    nothing): a prune between them and ``compute`` then left ``compute`` to compute again every sample the external
    tool had not been sent, where MIND's results step fails each."""
    def assembled(task: dict) -> dict:
        return {"f1": 0.5 + 0.1 * task["x"]}
    Run(toy, toy.config("Toy-Nano", out_dir=tmp_path / "a", limit=4, env={})).compute(TASKS, assembled, min_seconds=0)
    other = Run(toy, toy.config("Toy-Nano", out_dir=tmp_path / "b", limit=4, env={}))
    for _ in range(2):
        assert [t["sample_id"] for t in other.pending(TASKS).cached] == ["s0", "s1", "s2", "s3"]
    assert prune(cache, 0).removed == 4
    calls: list = []
    second = other.compute(TASKS, lambda task: calls.append(task) or assembled(task), min_seconds=0)
    assert (second.n_cached, calls) == (4, [])


def test_a_planted_record_of_another_sample_id_is_no_hit(toy: Recipe, tmp_path: Path, cache: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A sound record naming s1 at s0's key, of s0's inputs and code (only a planted one: the hash covers the id): it
    was taken for s0 (dynamic-degree then ended with "duplicate sample ids in records", its store holding it)."""
    _compute(toy, tmp_path / "a")
    implementation = toy.config("Toy-Nano", out_dir=tmp_path / "x", env={}).implementation
    samples = SampleCache(cache, "toy-bench/", implementation)
    entry = samples._path(samples.key(input_hash(TASKS[0])))
    entry.write_bytes(encode_line(SampleRecord("s1", "ok", {"f1": -1.0}, None, input_hash(TASKS[0]), 0.02,
                                               implementation=implementation).to_bytes()))
    capsys.readouterr()
    again = _compute(toy, tmp_path / "b")
    assert (again.n_done, again.n_cached) == (1, 3)
    assert [(r.sample_id, r.result["f1"]) for r in again.records.values()] == [
        ("s0", 0.5), ("s1", 0.6), ("s2", 0.7), ("s3", 0.8)]
    assert (f"sample cache: {entry}: the record of 's1' is not of 's0'; not used, computed again"
            in capsys.readouterr().err.splitlines())


def test_a_huge_file_at_an_entrys_name_is_not_read(toy: Recipe, tmp_path: Path, cache: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A 2 GiB file (sparse: no disk used) planted at an entry's name was read whole into memory before its digest
    failed; now its size refuses it, none of it read, and the run computes that sample again and replaces it."""
    import pinbench.core.files as files

    _compute(toy, tmp_path / "a")
    implementation = toy.config("Toy-Nano", out_dir=tmp_path / "x", env={}).implementation
    samples = SampleCache(cache, "toy-bench/", implementation)
    entry = samples._path(samples.key(input_hash(TASKS[0])))
    os.truncate(entry, 2 << 30)
    read = os.read
    given: list[int] = []

    def counted(fd: int, n: int) -> bytes:
        given.append(len(chunk := read(fd, n)))
        return chunk

    monkeypatch.setattr(files.os, "read", counted)
    capsys.readouterr()
    again = _compute(toy, tmp_path / "b")
    assert (again.n_done, again.n_cached) == (1, 3) and again.records["s0"].result["f1"] == 0.5
    assert sum(given) < 4096   # the three sound entries only
    assert (f"sample cache: {entry}: {2 << 30} bytes, more than the {64 << 20} such a file holds; not used, computed "
            "again") in capsys.readouterr().err.splitlines()
    assert entry.stat().st_size < 1 << 20   # replaced by the record computed again


def test_a_record_larger_than_an_entry_may_be_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Kept, it was refused by every run after, each saying so."""
    monkeypatch.setattr(sample_cache, "RECORD_BYTES", 200)
    samples = SampleCache(tmp_path / "c", "toy-bench/", CODE)
    samples.put("h" * 64, b"x" * 300)
    assert (samples.stored, list((tmp_path / "c").rglob("*"))) == (0, [])
    (line,) = capsys.readouterr().err.splitlines()
    assert re.fullmatch(r"sample cache: \S+\.jsonl: not kept \(3\d\d bytes, more than the 200 such a file holds\); "
                        "the run goes on, keeping what it can", line)


@pytest.mark.parametrize("kind", ["symlink", "folder"])
def test_a_symlink_or_folder_at_an_entrys_name_is_no_hit_and_is_named(
        kind: str, toy: Recipe, tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A symlink was followed and its target reused as the entry (a FIFO or ``/dev/zero`` behind one is never
    opened now); a folder blocked its key unsaid, every run computing that sample again."""
    _compute(toy, tmp_path / "a")
    implementation = toy.config("Toy-Nano", out_dir=tmp_path / "x", env={}).implementation
    samples = SampleCache(cache, "toy-bench/", implementation)
    entry = samples._path(samples.key(input_hash(TASKS[0])))
    elsewhere = tmp_path / "elsewhere.jsonl"
    entry.rename(elsewhere)   # a sound record of this very task
    if kind == "symlink":
        entry.symlink_to(elsewhere)
    else:
        entry.mkdir()
    capsys.readouterr()
    again = _compute(toy, tmp_path / "b")
    assert (again.n_done, again.n_cached) == (1, 3)
    what = f"a symlink (to {elsewhere}), not a regular file" if kind == "symlink" else "is a directory, not a file"
    assert (f"sample cache: {entry}: {what} (`pinbench cache prune` removes it); not used, computed again"
            in capsys.readouterr().err.splitlines())


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EACCES, errno.EROFS])
def test_a_cache_that_cannot_be_written_costs_a_line_never_the_run(
        error: int, toy: Recipe, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A full, read-only or another user's cache: the run computes and scores every sample, and says once that it
    could not keep them (it kept nothing without a word)."""
    import pinbench.core.files as files

    replace = files.os.replace

    def refused(source, target):
        if Path(target).is_relative_to(cache):
            raise OSError(error, os.strerror(error))
        replace(source, target)

    monkeypatch.setattr(files.os, "replace", refused)
    done = _compute(toy, tmp_path / "a")
    assert (done.n_done, done.n_failed) == (4, 0)
    assert [r.result["f1"] for r in done.records.values()] == [0.5, 0.6, 0.7, 0.8]
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("sample cache:")]
    assert len(said) == 1 and said[0].endswith(f": not kept ({os.strerror(error)}); the run goes on, keeping what "
                                               "it can")
    assert list(cache.rglob("*.jsonl*")) == []   # no temporary file left either


def test_a_symlink_at_a_subfolders_name_is_never_followed(toy: Recipe, tmp_path: Path, cache: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """``<root>/<key[:2]>`` as a symlink to elsewhere: its records were read and written through it, while ``prune``
    skipped it, so they were neither counted nor removed (the bound did not hold) and ``cache show`` said nothing."""
    from pinbench.cli import main

    _compute(toy, tmp_path / "a")
    implementation = toy.config("Toy-Nano", out_dir=tmp_path / "x", env={}).implementation
    samples = SampleCache(cache, "toy-bench/", implementation)
    bucket = samples._path(samples.key(input_hash(TASKS[0]))).parent
    elsewhere = tmp_path / "elsewhere"
    bucket.rename(elsewhere)   # sound records, this run's own
    bucket.symlink_to(elsewhere)
    held = sorted(elsewhere.iterdir())
    capsys.readouterr()
    again = _compute(toy, tmp_path / "b")
    assert again.n_done == len(held) and again.n_failed == 0
    err = capsys.readouterr().err.splitlines()
    assert (f"sample cache: {bucket}: a symlink where a folder of the cache belongs (`pinbench cache prune` removes "
            "it); not used, computed again") in err
    assert sorted(elsewhere.iterdir()) == held   # nothing written through it
    with pytest.raises(SystemExit):
        main(["cache", "prune"])
    assert (f"removed 1 thing where an entry or a subfolder of the cache belongs: {bucket}: a symlink"
            in capsys.readouterr().out)
    assert not os.path.lexists(bucket) and sorted(elsewhere.iterdir()) == held


def test_a_file_at_a_subfolders_name_is_named_by_the_run_and_removed_by_prune(
        toy: Recipe, tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A regular file or FIFO at ``<root>/<key[:2]>`` blocked every key of it for good: the run said "not kept
    (File exists)" of an entry, and ``cache show`` and ``cache prune`` passed over it unsaid."""
    from pinbench.cli import main

    implementation = toy.config("Toy-Nano", out_dir=tmp_path / "x", env={}).implementation
    samples = SampleCache(cache, "toy-bench/", implementation)
    buckets = list(dict.fromkeys(samples._path(samples.key(input_hash(task))).parent for task in TASKS))
    cache.mkdir()
    buckets[0].write_text("not a folder")
    for bucket in buckets[1:]:
        os.mkfifo(bucket)
    first = _compute(toy, tmp_path / "a")
    assert (first.n_done, first.n_failed) == (4, 0)
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("sample cache:")]
    assert said[0] == (f"sample cache: {buckets[0]}: a regular file where a folder of the cache belongs "
                       "(`pinbench cache prune` removes it); not used, computed again")
    assert f"sample cache: {buckets[1]}: a FIFO (named pipe) where a folder of the cache belongs" in said[1]
    assert sorted(prune(cache, float("inf"), clear=False).planted) == sorted(
        [f"{buckets[0]}: a regular file", *(f"{bucket}: a FIFO (named pipe)" for bucket in buckets[1:])])
    with pytest.raises(SystemExit):
        main(["cache", "prune"])
    assert (f"removed {len(buckets)} things where an entry or a subfolder of the cache belongs: "
            in capsys.readouterr().out)
    assert not any(os.path.lexists(b) for b in buckets)
    _compute(toy, tmp_path / "b")
    assert len(list(cache.rglob(f"*{SUFFIX}"))) == 4   # kept again


def test_a_cache_folder_that_cannot_be_listed_costs_the_bound_a_line_never_the_run(
        toy: Recipe, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A folder others may write in but not list (a cluster's drop box, mode 0733, which root here cannot make
    refuse it): the prune after the run raised PermissionError, ending it after every sample was computed, and
    ``cache show`` with a traceback."""
    from pinbench.cli import main

    iterdir = Path.iterdir

    def unlisted(folder: Path):
        if folder == cache:
            raise PermissionError(errno.EACCES, "Permission denied", str(folder))
        return iterdir(folder)

    monkeypatch.setattr(Path, "iterdir", unlisted)
    done = _compute(toy, tmp_path / "a")
    assert (done.n_done, done.n_failed) == (4, 0)
    assert (f"sample cache: {cache}: cannot be listed (Permission denied); not pruned to its bound"
            in capsys.readouterr().err.splitlines())
    for action in ("show", "prune"):
        with pytest.raises(SystemExit) as stop:
            main(["cache", action])
        assert stop.value.code == 2
        assert capsys.readouterr().err == f"error: {cache}: cannot be listed (Permission denied)\n"


def _slow_on(device: str):
    """The scorer of one device worker (spawned: it must pickle)."""
    return slow_score


def test_a_run_on_several_devices_keeps_the_cache_within_its_bound(toy: Recipe, tmp_path: Path, cache: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Its workers store into their own copies of the cache object: the run's copy stored nothing, so the run never
    pruned and the cache grew past its bound with every multi-GPU run."""
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE_MB", "0")
    run = Run(toy, toy.config("Toy-Nano", out_dir=tmp_path / "a", limit=4, env={}))
    done = run.compute(TASKS, _slow_on, devices=["cpu", "cpu"])
    assert (done.n_done, done.n_failed) == (4, 0)
    assert list(cache.rglob(f"*{SUFFIX}")) == []


class _Sent(Exception):
    """Raised by ``_CapturingContext``'s pool once it has the jobs: what the workers were to be sent."""


class _CapturingContext:
    """A stand-in for the spawn context that keeps the jobs ``Run.compute`` sends its device workers."""

    def __init__(self, jobs: list[tuple]) -> None:
        self.jobs = jobs

    def Pool(self, *args, **kwargs):   # noqa: N802 (multiprocessing's name)
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def map(self, fn, jobs):
        self.jobs.extend(jobs)
        raise _Sent


def test_a_device_worker_is_sent_only_the_held_records_of_its_own_tasks(
        toy: Recipe, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``Run.pending`` held (``record_of(hold=True)``) was in the cache object copied into every device worker,
    every record once per device: each worker is sent those of its own tasks alone, and no folder listing. The
    workers still take them: the run computes none."""
    import multiprocessing

    _compute(toy, tmp_path / "a")
    run = Run(toy, toy.config("Toy-Nano", out_dir=tmp_path / "b", limit=4, env={}))
    assert len(run.pending(TASKS).cached) == 4   # held for the compute below
    jobs: list[tuple] = []
    with monkeypatch.context() as patched:
        patched.setattr(multiprocessing, "get_context", lambda method: _CapturingContext(jobs))
        with pytest.raises(_Sent):
            run.compute(TASKS, _slow_on, devices=["cpu", "cpu"])
    hashes = [input_hash(task) for task in TASKS]
    sent = [(job[3], job[8]) for job in jobs]   # each worker's part of the tasks and its cache
    assert [sorted(part_cache._held) for _, part_cache in sent] == [sorted(part.select(hashes)) for part, _ in sent]
    assert all(part_cache._listed == {} for _, part_cache in sent)
    done = run.compute(TASKS, _slow_on, devices=["cpu", "cpu"])
    assert (done.n_done, done.n_cached, done.n_failed) == (0, 4, 0)


def _record(i: int) -> bytes:
    """The bytes of a sound record of task hash ``{i:064x}`` computed by ``CODE``."""
    return SampleRecord(f"s{i}", "ok", {"f1": 0.5}, None, f"{i:064x}", 0.02, implementation=CODE).to_bytes()


def test_prune_keeps_the_most_recently_used_within_the_bound(tmp_path: Path) -> None:
    samples = SampleCache(tmp_path / "c", "r/", CODE)
    for i in range(5):
        samples.put(f"{i:064x}", _record(i))
        path = samples._path(samples.key(f"{i:064x}"))
        os.utime(path, ns=(i * 10**9, i * 10**9))
    size = len(encode_line(_record(0)))
    assert samples.get(f"{0:064x}") is not None      # used now: the newest
    pruned = prune(tmp_path / "c", 3 * size)
    assert (pruned.removed, pruned.kept, pruned.kept_bytes) == (2, 3, 3 * size)
    fresh = SampleCache(tmp_path / "c", "r/", CODE)
    assert [fresh.get(f"{i:064x}") is not None for i in range(5)] == [True, False, False, True, True]


def test_a_prune_beside_another_prune_skips_what_the_other_removed(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Two prunes of one folder at once (runs, or a job array's shards on a shared cache, ending together): an entry
    the other removed between this one's listing and its stat, or its unlink, is skipped, not a FileNotFoundError
    (which ended a run after it had computed every sample), and is not counted as removed here."""
    import pinbench.core.sample_cache as sample_cache

    samples = SampleCache(tmp_path, "r/", CODE)
    for i in range(4):
        samples.put(f"{i:064x}", b'{"sample_id":"s%d"}' % i)
    paths = sorted(tmp_path.rglob(f"*{SUFFIX}"))
    listed, unlink = os.scandir, os.unlink

    def other_prune_first(folder):   # the other prune removes the first entry of each bucket this one lists
        entries = list(listed(folder))
        unlink(entries[0].path)
        return iter(entries)

    monkeypatch.setattr(sample_cache.os, "scandir", other_prune_first)
    buckets = {path.parent for path in paths}
    assert prune(tmp_path, 0).removed == len(paths) - len(buckets)   # the other prune took one of each bucket
    monkeypatch.undo()
    for i in range(4):
        samples.put(f"{i:064x}", b'{"sample_id":"s%d"}' % i)
    taken = paths[1]

    def other_prune_meanwhile(path):   # the other prune removes one entry while this one is removing
        if os.path.exists(taken):
            unlink(taken)
        unlink(path)

    monkeypatch.setattr(sample_cache.os, "unlink", other_prune_meanwhile)
    pruned = prune(tmp_path, 0)
    assert (pruned.removed, pruned.kept, pruned.kept_bytes) == (3, 0, 0)
    assert list(tmp_path.rglob(f"*{SUFFIX}")) == []


def test_an_entry_a_prune_may_not_remove_is_kept_and_the_run_that_stored_finishes(
        toy: Recipe, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shared cache (a cluster's) holds folders of other users', and may be read-only in part: an entry this prune
    may not remove ended, with its PermissionError, the run that had stored something and pruned after computing
    every sample, before its scorecard, as did a folder it may not list. Now such an entry is kept and counted (the
    command names the first one), and such a folder skipped."""
    from typer.testing import CliRunner

    import pinbench.core.sample_cache as sample_cache
    from pinbench.cli import app

    _compute(toy, tmp_path / "a")
    theirs = sorted(cache.rglob(f"*{SUFFIX}"))[0]
    unlink = os.unlink

    def not_ours(path):
        if Path(path) == theirs:
            raise PermissionError(13, "Permission denied")
        unlink(path)

    scandir = os.scandir
    (cache / "ff").mkdir()

    def listed(folder):
        if Path(folder).name == "ff":   # a bucket another user may read only
            raise PermissionError(13, "Permission denied", str(folder))
        return scandir(folder)

    monkeypatch.setattr(sample_cache.os, "unlink", not_ours)
    monkeypatch.setattr(sample_cache.os, "scandir", listed)
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE_MB", "0")
    others = [LooseTask(f"t{i}", x=10 + i) for i in range(4)]   # computed and stored: then the run prunes
    again = Run(toy, toy.config("Toy-Nano", out_dir=tmp_path / "b", limit=4, env={})).compute(others, slow_score)
    assert (again.n_done, again.n_failed) == (4, 0) and sorted(cache.rglob(f"*{SUFFIX}")) == [theirs]
    pruned = CliRunner().invoke(app, ["cache", "prune", "--max-mb", "0"])
    assert pruned.exit_code == 0, pruned.output
    assert f"kept 1 record it may not remove (first: {theirs}: Permission denied)" in pruned.output
    assert ": 1 record" in pruned.output


def test_off_means_no_cache_and_the_default_is_under_the_cache_root(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", "off")
    assert cache_dir() is None
    for word in ("0", "false", "No", "none"):   # each made a folder of that name in the working directory
        monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", word)
        with pytest.raises(ValueError, match=rf"^\$PINBENCH_SAMPLE_CACHE='{word}': a folder or 'off', not a switch; "):
            cache_dir()
    monkeypatch.delenv("PINBENCH_SAMPLE_CACHE")
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path))
    assert cache_dir() == tmp_path / "samples"


def test_the_runner_alone_uses_no_cache(tmp_path: Path, cache: Path) -> None:
    """Only a Run shares records between directories; the runner's own loop keeps to its directory."""
    run_samples(TASKS, slow_score, tmp_path / "a", implementation=CODE, progress=False)
    assert not cache.exists()


def test_the_command_shows_and_prunes_the_cache(toy: Recipe, tmp_path: Path, cache: Path) -> None:
    from typer.testing import CliRunner

    from pinbench.cli import app

    _compute(toy, tmp_path / "a")
    runner = CliRunner()
    shown = runner.invoke(app, ["cache", "show"])
    assert shown.exit_code == 0 and f"{cache}: 4 records" in shown.output
    assert shown.output.strip().endswith("MiB (bound 2048 MiB)")   # the unit --max-mb and the variable are in
    assert runner.invoke(app, ["cache", "show"], env={"PINBENCH_SAMPLE_CACHE_MB": "1.5"}).output.strip().endswith(
        "(bound 1.5 MiB)")
    assert runner.invoke(app, ["cache", "prune", "--max-mb", "nan"]).exit_code == 2
    pruned = runner.invoke(app, ["cache", "prune", "--max-mb", "0"])
    assert pruned.exit_code == 0 and "removed 4 records" in pruned.output and ": 0 records" in pruned.output
    assert list(cache.rglob(f"*{SUFFIX}")) == []


@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "-5", "abc"])
def test_a_bound_that_is_no_size_stops_a_run_before_it_computes_and_the_command_in_one_line(
        value: str, toy: Recipe, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``PINBENCH_SAMPLE_CACHE_MB`` is a number of MiB, 0 or more. Before, ``inf`` ended a run that had computed and
    stored its samples with an OverflowError traceback, ``nan`` with "cannot convert float NaN to integer", a
    negative bound emptied the cache after every run and ``abc`` was read as the default."""
    from pinbench.cli import main

    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE_MB", value)
    computed: list[str] = []

    def score(task: LooseTask) -> dict:
        computed.append(task.sample_id)
        return slow_score(task)

    with pytest.raises(ValueError, match=rf"^\$PINBENCH_SAMPLE_CACHE_MB='{value}': the sample cache's bound must"):
        _compute(toy, tmp_path / "a", fn=score)
    assert computed == [] and not cache.exists()
    with pytest.raises(SystemExit) as stop:
        main(["cache", "show"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: $PINBENCH_SAMPLE_CACHE_MB='{value}': the sample cache's bound must be")


def test_a_bound_too_large_for_a_float_of_bytes_is_no_bound() -> None:
    """1e303 MiB is a finite number of MiB, but no float of bytes (it is past 1.8e308): the bound's int() ended
    ``cache show`` and each run with an OverflowError traceback. It bounds nothing, as the largest bound does."""
    from pinbench.core.sample_cache import size_bound

    assert size_bound({"PINBENCH_SAMPLE_CACHE_MB": "1e303"}) >= 1 << 62


def test_a_max_mb_too_large_for_a_float_of_bytes_is_no_bound(cache: Path) -> None:
    """``--max-mb 1e303`` passed its finite check, then ``int(inf)`` ended ``cache prune`` and ``cache show`` with
    an OverflowError traceback, as ``$PINBENCH_SAMPLE_CACHE_MB=1e303`` had: it bounds nothing, so prunes nothing."""
    from typer.testing import CliRunner

    from pinbench.cli import app

    for action in ("prune", "show"):
        said = CliRunner().invoke(app, ["cache", action, "--max-mb", "1e303"])
        assert said.exit_code == 0 and "(bound " in said.output, (said.output, said.exception)


@pytest.mark.parametrize("kind", ["file", "fifo", "dangling symlink"])
def test_a_cache_path_that_is_no_folder_stops_a_run_and_the_command_in_one_line(
        kind: str, toy: Recipe, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``PINBENCH_SAMPLE_CACHE`` names a folder. Before, a regular file or a FIFO there was taken silently: ``cache
    show`` and ``prune`` reported "0 record(s)" with exit 0, and every run computed every sample again without a
    word (each write into it failed and was dropped). So was a symlink to nothing (an unmounted shared folder)."""
    from pinbench.cli import main

    root = tmp_path / "not-a-folder"
    if kind == "dangling symlink":
        root.symlink_to(tmp_path / "unmounted" / "samples")
    else:
        root.write_text("") if kind == "file" else os.mkfifo(root)
    said = (f"a symlink to {tmp_path}/unmounted/samples, which does not exist" if kind == "dangling symlink" else
            "not a folder but a ")
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(root))
    computed: list[str] = []

    def score(task: LooseTask) -> dict:
        computed.append(task.sample_id)
        return slow_score(task)

    with pytest.raises(ValueError, match=rf"^\$PINBENCH_SAMPLE_CACHE={root}: {said}"):
        _compute(toy, tmp_path / "a", fn=score)
    assert computed == []
    for action in ("show", "prune"):
        with pytest.raises(SystemExit) as stop:
            main(["cache", action])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.count("\n") == 1 and str(root) in err and said in err


class _Unentered:
    """A ``os.DirEntry`` of a folder that may be listed but not entered (mode 0644, ``r`` without ``x``): its name
    and type come from the listing, its ``stat`` is refused."""

    def __init__(self, entry: os.DirEntry) -> None:
        self.name, self.path, self.is_file = entry.name, entry.path, entry.is_file

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        raise PermissionError(errno.EACCES, "Permission denied", self.path)


def test_a_subfolder_that_can_be_listed_but_not_entered_costs_a_line_never_the_prune(
        toy: Recipe, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Its entries' ``stat`` raised PermissionError, which ended ``cache prune`` and the run that pruned after storing
    (after computing every sample). Root, as these tests run, ignores the mode bits, so the refused ``stat`` is
    simulated (``_Unentered``). Now that folder is named in one line and the others are pruned."""
    from pinbench.cli import main

    _compute(toy, tmp_path / "a")
    shut = min(cache.iterdir())
    scandir = os.scandir

    def listed(folder):
        return iter([_Unentered(entry) for entry in scandir(folder)]) if Path(folder) == shut else scandir(folder)

    monkeypatch.setattr(sample_cache.os, "scandir", listed)
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE_MB", "0")
    capsys.readouterr()
    again = Run(toy, toy.config("Toy-Nano", out_dir=tmp_path / "b", limit=4, env={})).compute(
        [LooseTask(f"t{i}", x=10 + i) for i in range(4)], slow_score)
    assert (again.n_done, again.n_failed) == (4, 0)
    line = (f"sample cache: {shut}: cannot be entered (Permission denied); its entries are neither counted nor "
            "removed")
    assert capsys.readouterr().err.splitlines().count(line) == 1
    assert [b for b in sorted(cache.iterdir()) if any(n.endswith(SUFFIX) for n in os.listdir(b))] == [shut]
    with pytest.raises(SystemExit) as stop:
        main(["cache", "prune"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.splitlines()[0] == line.removeprefix("sample cache: ")


def test_prune_removes_only_the_caches_own_entries(tmp_path: Path) -> None:
    """``PINBENCH_SAMPLE_CACHE`` named a folder that also held a run directory (``runs/``, or the run directory
    itself): a prune took every ``*/*.jsonl`` for an entry and deleted that run's ``samples/run.jsonl`` (its
    finished samples; ``pinbench check`` then named every one). Only ``<key[:2]>/<key>.jsonl`` is an entry."""
    samples = SampleCache(tmp_path, "r/", CODE)
    samples.put(f"{1:064x}", b'{"sample_id":"s1"}')
    (tmp_path / "samples").mkdir()
    log = tmp_path / "samples" / "run.jsonl"
    log.write_bytes(encode_line(b'{"sample_id":"s0"}'))
    stray = tmp_path / "ab" / "notes.jsonl"    # a bucket's name, but no key's
    stray.parent.mkdir()
    stray.write_text("{}\n")
    pruned = prune(tmp_path, 0)
    assert (pruned.removed, pruned.kept) == (1, 0)
    assert log.exists() and stray.exists()


@pytest.mark.parametrize("inside", ["cache", ".", "samples/cache"])
def test_a_cache_inside_the_run_directory_is_refused_before_anything_is_computed(
        inside: str, toy: Recipe, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache is every run's: with it inside run A's directory, run B keeping or using an entry there changed a
    file of A, and A's rerun, which its manifest would have answered, computed again. One line, nothing computed;
    a cache beside the run, or in a folder that holds it, is taken."""
    run = tmp_path / "run"
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(run / inside))
    computed: list[str] = []

    def score(task: LooseTask) -> dict:
        computed.append(task.sample_id)
        return slow_score(task)

    with pytest.raises(ValueError, match=rf"^\$PINBENCH_SAMPLE_CACHE={run / inside}: inside the run directory "
                                         rf"{run}; the sample cache is shared by every run, name a folder outside it$"):
        _compute(toy, run, fn=score)
    assert computed == []
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(tmp_path / "run-cache"))    # beside it: a prefix, not a parent
    assert cache_dir(run) == tmp_path / "run-cache"
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(tmp_path))                  # a folder that holds the run
    assert cache_dir(run) == tmp_path


def test_a_cache_inside_the_run_directory_through_a_symlink_is_refused(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "run")
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(tmp_path / "link" / "cache"))
    with pytest.raises(ValueError, match="inside the run directory"):
        cache_dir(tmp_path / "run")


def test_cache_show_names_what_is_planted_at_an_entrys_name_and_prune_removes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder, FIFO or symlink at ``<key>.file`` (or ``<key>.jsonl``) was passed over by ``cache prune``, and a
    folder there blocked its key for good. ``cache show`` names each; ``cache prune`` removes each, whatever the
    bound, never following a link (what it points to is left as it is)."""
    from typer.testing import CliRunner

    from pinbench.cli import app

    cache = tmp_path / "cache"
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(cache))
    (cache / "ab").mkdir(parents=True)
    folder, fifo, link = (cache / "ab" / f"ab{c * 62}{suffix}" for c, suffix in (("0", ".file"), ("1", ".file"),
                                                                                   ("2", SUFFIX)))
    folder.mkdir()
    (folder / "inside").write_text("x")
    os.mkfifo(fifo)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "keep").write_text("someone's")
    link.symlink_to(theirs)
    runner = CliRunner()
    shown = runner.invoke(app, ["cache", "show"])
    assert shown.exit_code == 0, shown.output
    assert (f"found (prune removes them) 3 things where an entry or a subfolder of the cache belongs: "
            f"{folder}: is a directory; {fifo}: a FIFO (named pipe); {link}: a symlink") in shown.output
    assert all(os.path.lexists(p) for p in (folder, fifo, link))
    pruned = runner.invoke(app, ["cache", "prune"])   # under the bound: they go all the same
    assert pruned.exit_code == 0 and "removed 3 things where an entry or a subfolder" in pruned.output, pruned.output
    assert not any(os.path.lexists(p) for p in (folder, fifo, link))
    assert (theirs / "keep").read_text() == "someone's" and prune(cache, 0).planted == ()


def test_a_record_taken_from_the_cache_replaces_the_stored_one_it_was_chosen_over(
        toy: Recipe, tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Generator A, then B, then A again on one run directory: A's records come back from its cache, and B's stored
    records of the same inputs and code, which the validator refused, are moved aside first (was: both were kept, so
    they contradicted each other and the finish moved every one of them to the quarantine, "neither is read")."""
    from pinbench.core.runner import Stale
    from pinbench.core.store import read_store

    def made_by(name: str):
        def score(task: dict) -> dict:
            time.sleep(0.012)
            return {"f1": 0.1 * task["x"], "by": name}

        def validate(result: dict) -> bool:
            if result.get("by") != name:
                raise Stale("generator changed")
            return True
        return score, validate

    out = tmp_path / "run"
    for name in ("A", "B", "A"):
        score, validate = made_by(name)
        run = Run(toy, toy.config("Toy-Nano", out_dir=out, limit=4, env={}))
        own = SampleCache(cache, f"toy/{name}", run.cfg.implementation)   # keyed by its generator, as rollouts are
        summary = run.compute(TASKS, score, validate=validate, cache=own)
    assert (summary.n_done, summary.n_cached) == (0, 4)
    said = capsys.readouterr().err
    assert said.count("not reused (generator changed), replaced by a new record") == 8   # B's turn, then A's again
    stored = read_store(out / "samples")
    assert stored.unread == [] and {stored.newest(t.sample_id).data["result"]["by"] for t in TASKS} == {"A"}


@pytest.mark.parametrize(("status", "result", "error", "said"), [
    ("failed", None, "ValueError: bad frame", "failed before"), ("failed", None, None, "unreadable record")])
def test_a_sound_entry_whose_record_the_runner_refuses_is_said_once(
        toy: Recipe, tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str],
        status: str, result: dict | None, error: str | None, said: str) -> None:
    """A sound entry of s0's key, inputs and code holding a failed record, or one the runner cannot read as a record
    (only a planted or hand-edited one: a run keeps ok records only): it was computed again unsaid, where every other
    unusable entry is named."""
    _compute(toy, tmp_path / "a")
    implementation = toy.config("Toy-Nano", out_dir=tmp_path / "x", env={}).implementation
    samples = SampleCache(cache, "toy-bench/", implementation)
    entry = samples._path(samples.key(input_hash(TASKS[0])))
    entry.write_bytes(encode_line(SampleRecord("s0", status, result, error, input_hash(TASKS[0]), 0.02,
                                               implementation=implementation).to_bytes()))
    capsys.readouterr()
    again = _compute(toy, tmp_path / "b")
    assert (again.n_done, again.n_cached, again.records["s0"].result["f1"]) == (1, 3, 0.5)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("sample cache:")]
    assert lines == [f"sample cache: {entry}: the record is refused ({said}); not used, computed again"]
