"""The sample store (pinbench.core.store) and the reuse rules of the runner on it.

Each property is proven here once, on the library: one log per writer, torn tails and edited lines recomputed
with a message, fsync at most once a second, the layout of 87e8f14 still read, and a record reused only by the
same inputs and the same implementation (recipe version, code digest, image), with the reason counted.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

import pytest
from deadline import within
from loose_task import LooseTask
from rich.console import Console

from pinbench.core import store
from pinbench.core.config import Implementation, Shard
from pinbench.core.runner import UNREAD, SampleRecord, input_hash, load_records, merge_samples, run_samples
from pinbench.core.store import LogWriter, encode_line, log_name, read_store, record_bytes


def tasks(n: int) -> list[dict]:
    return [LooseTask(f"s{i:02d}", x=i) for i in range(n)]


class Square:
    """Test double for a scorer: squares x and remembers which samples it computed."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, task: Mapping) -> dict:
        self.calls.append(task["sample_id"])
        return {"square": task["x"] ** 2}


IMPL = Implementation("1.0.0", "a" * 64)


def _quiet() -> Console:
    return Console(file=io.StringIO(), force_terminal=False, width=300)


def test_each_writer_appends_to_its_own_log(tmp_path: Path) -> None:
    for i in range(3):
        run_samples(tasks(7), Square(), tmp_path, shard=Shard(i, 3), progress=False)
    run_samples(tasks(7), Square(), tmp_path, progress=False)  # the merge run: everything reused
    assert sorted(p.name for p in (tmp_path / "samples").iterdir()) == [
        "shard-0-of-3.jsonl", "shard-1-of-3.jsonl", "shard-2-of-3.jsonl"]
    lines = (tmp_path / "samples" / "shard-1-of-3.jsonl").read_text().splitlines()
    assert [json.loads(line)["record"]["sample_id"] for line in lines] == ["s01", "s04"]
    assert log_name(None) == "run.jsonl" and log_name(Shard(2, 5)) == "shard-2-of-5.jsonl"


def test_a_line_carries_the_digest_of_the_record_bytes_it_holds(tmp_path: Path) -> None:
    run_samples(tasks(2), Square(), tmp_path, progress=False)
    line = (tmp_path / "samples" / "run.jsonl").read_text().splitlines()[1]
    data = json.loads(line)
    body = record_bytes(data["record"])
    import hashlib

    assert data["digest"] == hashlib.sha256(body).hexdigest()
    assert line.endswith(body.decode() + "}")
    assert SampleRecord.from_json(data["record"]).to_bytes() == body  # what samples.jsonl holds, byte for byte


def test_an_edited_record_is_recomputed_once_and_moved_out_of_the_store(tmp_path: Path) -> None:
    """#30 A2: the rerun that recomputes a damaged line also moves it into samples/quarantine/, so the store is sound
    again (``pinbench check`` accepts it) and later reruns neither compute nor say anything."""
    run_samples(tasks(3), Square(), tmp_path, progress=False)
    log = tmp_path / "samples" / "run.jsonl"
    log.write_text(log.read_text().replace('"square":1}', '"square":7}'))  # a hand edit of s01's score
    damaged = f"{log}:2: the record of sample 's01' does not match its digest (changed after it was written)"
    assert read_store(tmp_path / "samples").problems == [damaged]
    console = _quiet()
    again = Square()
    summary = run_samples(tasks(3), again, tmp_path, console=console)
    assert again.calls == ["s01"] and summary.records["s01"].result == {"square": 1}
    quarantine = tmp_path / "samples" / "quarantine" / "run.jsonl"
    assert f"score: {damaged}: moved to {quarantine}" in console.file.getvalue()
    assert summary.recomputed == {UNREAD: 1}
    assert read_store(tmp_path / "samples").problems == []
    (moved,) = [json.loads(line) for line in quarantine.read_text().splitlines()]
    assert moved["line"] == "run.jsonl:2" and moved["why"] == damaged and '"square":7}' in moved["text"]
    console = _quiet()
    third = Square()
    assert run_samples(tasks(3), third, tmp_path, console=console).n_reused == 3
    said = console.file.getvalue()
    assert third.calls == [] and "3 reused" in said and not any(w in said for w in ("recomput", "not read", "moved"))


def test_a_torn_last_line_is_moved_aside_recomputed_and_the_log_stays_sound(tmp_path: Path) -> None:
    run_samples(tasks(3), Square(), tmp_path, progress=False)
    log = tmp_path / "samples" / "run.jsonl"
    whole = log.read_bytes()
    log.write_bytes(whole[: whole.rfind(b"\n", 0, len(whole) - 1) + 1] + whole[-40:-1])  # s02's line torn
    contents = read_store(tmp_path / "samples", own="run.jsonl")
    assert contents.problems == [f"{log}:3: a torn last record (the writer stopped mid-line)"]
    assert set(contents.records) == {"s00", "s01"}
    assert read_store(tmp_path / "samples").problems == []  # another writer may still be mid-line: not a problem
    again = Square()
    console = _quiet()
    run_samples(tasks(3), again, tmp_path, console=console)
    assert again.calls == ["s02"]
    assert f"{log}:3: a torn last record (the writer stopped mid-line): moved to" in console.file.getvalue()
    assert read_store(tmp_path / "samples").problems == []
    assert len(log.read_text().splitlines()) == 3  # the torn bytes are gone, the new record has its own line


def test_a_writer_still_cuts_a_torn_tail_it_opens_on(tmp_path: Path, capfd) -> None:
    """The last guard: a log torn after the run read it (another process' crash) is cut when a writer opens it."""
    log = tmp_path / "run.jsonl"
    log.write_bytes(store.encode_line(record_bytes({"sample_id": "a"})) + b'{"digest":"ab')
    with LogWriter(tmp_path, "run.jsonl") as writer:
        writer.append(record_bytes({"sample_id": "b"}))
    assert "cutting a torn last record (13 bytes" in capfd.readouterr().err
    assert [json.loads(line)["record"]["sample_id"] for line in log.read_text().splitlines()] == ["a", "b"]


def test_the_writer_fsyncs_at_most_once_a_second(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    with LogWriter(tmp_path, "run.jsonl") as writer:
        for i in range(2000):
            writer.append(record_bytes({"sample_id": f"s{i}", "v": i}))
    assert 1 <= len(calls) <= 2  # one at close, at most one more if the loop took over a second
    monkeypatch.setattr(store, "FSYNC_SECONDS", 0.0)
    calls.clear()
    with LogWriter(tmp_path, "run.jsonl") as writer:
        for i in range(5):
            writer.append(record_bytes({"sample_id": f"t{i}", "v": i}))
    assert len(calls) == 5


def test_append_all_writes_what_append_writes_in_one_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Records stored together are the lines ``append`` writes one by one, in order, each with its own digest."""
    bodies = [record_bytes({"sample_id": f"s{i}", "v": "é" * i}) for i in range(5)]
    with LogWriter(tmp_path / "one", "run.jsonl") as writer:
        one_by_one = [writer.append(body) for body in bodies]
    writes = []
    real = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: (writes.append(len(data)), real(fd, data))[1])
    with LogWriter(tmp_path / "all", "run.jsonl") as writer:
        together = writer.append_all(bodies)
        assert writer.append_all([]) == []
    assert len(writes) == 1
    assert together == one_by_one == [hashlib.sha256(body).digest() for body in bodies]
    assert (tmp_path / "all" / "run.jsonl").read_bytes() == (tmp_path / "one" / "run.jsonl").read_bytes()
    stored = read_store(tmp_path / "all").records
    assert {sid: [s.digest for s in found] for sid, found in stored.items()} == {
        f"s{i}": [digest.hex()] for i, digest in enumerate(together)}
    assert (tmp_path / "all" / "run.jsonl").read_bytes() == b"".join(encode_line(body) for body in bodies)


def test_a_store_of_87e8f14_loads_resumes_and_merges(tmp_path: Path) -> None:
    """``samples/<id>.json`` files (record version 1, no implementation) are reused on their input hash."""
    samples = tmp_path / "samples"
    samples.mkdir()
    for task in tasks(4):
        data = SampleRecord(task["sample_id"], "ok", {"square": task["x"] ** 2}, None, input_hash(task), 0.5).to_json()
        data["record_version"] = 1
        del data["implementation"]
        (samples / f"{task['sample_id']}.json").write_text(json.dumps(data, indent=1))
    assert read_store(samples).legacy == 4
    fn = Square()
    summary = run_samples(tasks(5), fn, tmp_path, implementation=IMPL, progress=False)
    assert fn.calls == ["s04"] and summary.n_reused == 4
    merged = merge_samples([tmp_path], tasks(5), implementation=IMPL)
    assert [r.ok for r in merged] == [True] * 5 and merged[4].implementation == IMPL
    assert merged[0].implementation is None and merged[0].result == {"square": 0}


@pytest.mark.parametrize(("changed", "reason"), [
    (Implementation("1.0.1", "a" * 64), "recipe version changed"),
    (Implementation("1.0.0", "b" * 64), "code changed"),
    (Implementation("1.0.0", "a" * 64, "sha256:" + "c" * 64), "image changed"),
])
def test_a_record_is_reused_only_by_the_same_implementation(tmp_path: Path, changed: Implementation,
                                                              reason: str) -> None:
    run_samples(tasks(12), Square(), tmp_path, implementation=IMPL, progress=False)
    console = _quiet()
    fn = Square()
    summary = run_samples(tasks(12), fn, tmp_path, implementation=changed, console=console)
    assert len(fn.calls) == 12 and summary.recomputed == {reason: 12}
    assert f"12 recomputed: {reason}" in console.file.getvalue()
    assert all(r.implementation == changed for r in load_records(tmp_path).values())
    again = Square()
    assert run_samples(tasks(12), again, tmp_path, implementation=changed, progress=False).n_reused == 12
    assert again.calls == []


def test_the_reasons_are_counted_apart(tmp_path: Path) -> None:
    run_samples(tasks(4), lambda t: {"v": 1} if t["x"] != 3 else 1 / 0, tmp_path, progress=False)
    changed = tasks(4)
    changed[0] = LooseTask("s00", x=100)
    summary = run_samples(changed, Square(), tmp_path, progress=False)
    assert summary.recomputed == {"inputs or options changed": 1, "failed before": 1}
    assert summary.n_reused == 2


def test_a_record_for_another_sample_or_a_broken_line_never_counts(tmp_path: Path) -> None:
    samples = tmp_path / "samples"
    samples.mkdir()
    good = SampleRecord("s00", "ok", {"square": 0}, None, input_hash(tasks(1)[0]), 0.1).to_bytes()
    (samples / "run.jsonl").write_bytes(store.encode_line(good) + b'{"digest":"x"}\n' + b"\n")
    contents = read_store(samples)
    assert set(contents.records) == {"s00"}
    assert contents.problems == [f"{samples / 'run.jsonl'}:2: not a store line (torn or edited)",
                                 f"{samples / 'run.jsonl'}:3: not a store line (torn or edited)"]


def _forged(log: Path, sample_id: str, result: dict) -> bytes:
    """A record of ``sample_id`` as the log holds it, with another result and the digest made to fit (anyone who can
    write the folder can do this: the digest is not a signature)."""
    for line in log.read_bytes().splitlines():
        record = json.loads(line)["record"]
        if record["sample_id"] == sample_id:
            return store.encode_line(record_bytes({**record, "result": result}))
    raise AssertionError(f"no record of {sample_id} in {log}")


def test_a_second_record_that_says_otherwise_is_never_reused_the_rerun_recomputes_and_moves_both(
        tmp_path: Path) -> None:
    """#30 A1: a record appended with a recomputed digest, of the same inputs and code, is sound; the store cannot
    tell it from the true one, so neither is read: the rerun says so, computes the sample again and moves both
    lines aside, and the next rerun reuses the new record without a word."""
    run_samples(tasks(3), Square(), tmp_path, implementation=IMPL, progress=False)
    log = tmp_path / "samples" / "run.jsonl"
    with log.open("ab") as fh:
        fh.write(_forged(log, "s01", {"square": 87}))
    contents = read_store(tmp_path / "samples")
    assert "s01" not in contents.records and contents.problems == [
        f"{log}:2: a record of sample 's01' that another record of the same inputs and code contradicts ({log}:4): "
        "neither is read",
        f"{log}:4: a record of sample 's01' that another record of the same inputs and code contradicts ({log}:2): "
        "neither is read"]
    console = _quiet()
    again = Square()
    summary = run_samples(tasks(3), again, tmp_path, implementation=IMPL, console=console)
    assert again.calls == ["s01"] and summary.records["s01"].result == {"square": 1}
    assert summary.recomputed == {UNREAD: 1} and "1 recomputed: " + UNREAD in console.file.getvalue()
    assert console.file.getvalue().count("contradicts") == 2
    assert len((tmp_path / "samples" / "quarantine" / "run.jsonl").read_text().splitlines()) == 2
    assert read_store(tmp_path / "samples").problems == []
    third = Square()
    assert run_samples(tasks(3), third, tmp_path, implementation=IMPL, progress=False).n_reused == 3
    assert third.calls == []


def test_records_that_say_the_same_or_that_a_run_would_not_reuse_do_not_contradict(tmp_path: Path) -> None:
    """Only records a run would take for one another and whose results differ are left unread: the same record twice,
    a failed one beside an ok one, and records of other inputs or code all stand."""
    samples = tmp_path / "samples"
    task = input_hash(tasks(1)[0])
    older = Implementation("0.9.0", "a" * 64)
    lines = [SampleRecord("s00", "ok", {"square": 0}, None, task, 0.1, implementation=IMPL).to_bytes(),
             SampleRecord("s00", "ok", {"square": 0}, None, task, 0.7, implementation=IMPL).to_bytes(),
             SampleRecord("s00", "failed", None, "ValueError: x", task, 0.1, implementation=IMPL).to_bytes(),
             SampleRecord("s00", "ok", {"square": 5}, None, "f" * 64, 0.1, implementation=IMPL).to_bytes(),
             SampleRecord("s00", "ok", {"square": 6}, None, task, 0.1, implementation=older).to_bytes()]
    samples.mkdir()
    (samples / "run.jsonl").write_bytes(b"".join(store.encode_line(line) for line in lines))
    contents = read_store(samples)
    assert contents.problems == [] and len(contents.records["s00"]) == 5


def test_a_merge_that_meets_two_records_that_contradict_takes_neither_and_says_where_they_are(tmp_path: Path) -> None:
    for i in range(2):
        run_samples(tasks(4), Square(), tmp_path, shard=Shard(i, 2), implementation=IMPL, progress=False)
    samples = tmp_path / "samples"
    with (samples / "shard-1-of-2.jsonl").open("ab") as fh:  # s00 is shard 0's sample
        fh.write(_forged(samples / "shard-0-of-2.jsonl", "s00", {"square": 60}))
    merged = merge_samples([tmp_path], tasks(4), implementation=IMPL)
    assert [r.ok for r in merged] == [False, True, True, True]
    assert merged[0].error.startswith("missing: no result from any shard (")
    assert f"{samples / 'shard-0-of-2.jsonl'}:1" in merged[0].error and \
        f"{samples / 'shard-1-of-2.jsonl'}:3" in merged[0].error
    fn = Square()   # shard 1 may not rewrite shard 0's log, nor move its own line alone (shard 0's would be read)
    run_samples(tasks(4), fn, tmp_path, shard=Shard(1, 2), implementation=IMPL, progress=False)
    assert fn.calls == [] and not (samples / "quarantine").exists()
    assert not merge_samples([tmp_path], tasks(4), implementation=IMPL)[0].ok
    fn = Square()   # the unsharded run (the merge of a Slurm run that computes) moves both and computes s00
    run_samples(tasks(4), fn, tmp_path, implementation=IMPL, progress=False)
    assert fn.calls == ["s00"] and read_store(samples).problems == []


def test_a_jsonl_file_no_writer_keeps_is_never_read_and_the_unsharded_run_moves_it(tmp_path: Path) -> None:
    """#30 A1: a stray samples/a.jsonl changed what a merge produced (it sorted before the writers' logs)."""
    run_samples(tasks(3), Square(), tmp_path, implementation=IMPL, progress=False)
    samples = tmp_path / "samples"
    (samples / "a.jsonl").write_bytes(_forged(samples / "run.jsonl", "s01", {"square": 60}))
    (samples / "shard-2-of-2.jsonl").write_bytes(_forged(samples / "run.jsonl", "s02", {"square": 60}))  # I >= N
    contents = read_store(samples)
    assert contents.problems == [] and contents.strays == [samples / "a.jsonl", samples / "shard-2-of-2.jsonl"]
    merged = merge_samples([tmp_path], tasks(3), implementation=IMPL)
    assert [r.result for r in merged] == [{"square": 0}, {"square": 1}, {"square": 4}]
    run_samples(tasks(3), Square(), tmp_path, shard=Shard(0, 2), implementation=IMPL, progress=False)
    assert (samples / "a.jsonl").exists()   # a shard leaves the folder's other files to the unsharded run
    console = _quiet()
    run_samples(tasks(3), Square(), tmp_path, implementation=IMPL, console=console)
    assert sorted(p.name for p in samples.iterdir()) == ["quarantine", "run.jsonl"]
    assert (samples / "quarantine" / "a.jsonl").exists() and "a.jsonl: not a log any writer keeps" in \
        console.file.getvalue()


@pytest.mark.parametrize("where", ["samples", "samples/run.jsonl"])
@pytest.mark.parametrize("target", ["another run", "/dev/null"])
def test_a_store_or_log_that_is_a_symlink_is_refused_in_one_line_and_never_written(tmp_path: Path, where: str,
                                                                                    target: str) -> None:
    """#30 A3, B5: a store linked elsewhere was followed (a rerun appended into the other run's store; /dev/null gave
    "[Errno 22] Invalid argument")."""
    other = tmp_path / "other"
    run_samples(tasks(2), Square(), other, progress=False)
    before = (other / "samples" / "run.jsonl").read_bytes()
    mine = tmp_path / "mine"
    (mine / "samples").mkdir(parents=True)
    link = mine / where
    if where == "samples":
        link.rmdir()
    link.symlink_to(other / where if target == "another run" else Path(target))
    refusal = f"{link}: a symlink (to {other / where if target == 'another run' else target}); a run directory " \
        "holds its own sample store, never another's"
    with pytest.raises(store.StoreError) as err:
        run_samples(tasks(3), Square(), mine, progress=False)
    assert str(err.value) == refusal
    if where == "samples":   # no reader takes a folder of another run's records for this run's
        with pytest.raises(store.StoreError, match=re.escape(refusal)):
            merge_samples([mine], tasks(3))
    else:   # a log that is another writer's is not read, and the merge says so
        assert read_store(mine / "samples").problems == [f"{refusal}: not read"]
        assert [r.ok for r in merge_samples([mine], tasks(3))] == [False] * 3
    assert (other / "samples" / "run.jsonl").read_bytes() == before


def test_read_log_of_a_fifo_is_a_store_error_never_a_hang(tmp_path: Path) -> None:
    """A log swapped for a FIFO after the store was listed: ``read_log`` names it in a StoreError (the one line a
    run's readers catch), never waiting on it."""
    run_samples(tasks(1), Square(), tmp_path, progress=False)
    log = tmp_path / "samples" / "run.jsonl"
    log.unlink()
    os.mkfifo(log)
    with pytest.raises(store.StoreError, match=re.escape(f"{log}: a FIFO (named pipe), not a regular file")):
        within(5, lambda: store.read_log(log), fifo=log)


def test_a_fifo_in_place_of_a_log_is_refused_by_its_writer_and_not_read_by_the_others(tmp_path: Path) -> None:
    """#30 B4: a FIFO at samples/run.jsonl hung the run (opening it for writing waits for a reader). Its writer
    refuses it in one line; another writer, and a merge, read the other logs and say this one is not read."""
    (tmp_path / "samples").mkdir()
    fifo = tmp_path / "samples" / "shard-0-of-2.jsonl"
    os.mkfifo(fifo)
    refusal = f"{fifo}: a FIFO (named pipe), not a regular file; a sample store's log is a file of lines"
    for step in (lambda: LogWriter(tmp_path / "samples", fifo.name),
                 lambda: run_samples(tasks(3), Square(), tmp_path, shard=Shard(0, 2), progress=False)):
        with pytest.raises(store.StoreError) as err:
            within(5, step, fifo=fifo)
        assert str(err.value) == refusal
    console = _quiet()
    fn = Square()
    within(5, lambda: run_samples(tasks(3), fn, tmp_path, shard=Shard(1, 2), console=console), fifo=fifo)
    assert fn.calls == ["s01"] and f"{refusal}: not read" in console.file.getvalue()
    assert within(5, lambda: read_store(tmp_path / "samples"), fifo=fifo).problems == [f"{refusal}: not read"]


def test_a_step_log_that_replaces_a_record_moves_the_old_one_aside(tmp_path: Path) -> None:
    """A video generated again (the same task and code, another result) replaces the stored record instead of
    contradicting it: the old line goes to the quarantine, and the store reads the new one."""
    from pinbench.core.runner import StepLog

    steps = [LooseTask("a", row=1)]
    first = StepLog(steps, tmp_path, step="generate", implementation=IMPL)
    first.record("a", {"sha256": "1" * 64})
    first.close()
    again = StepLog(steps, tmp_path, step="generate", implementation=IMPL)
    again.record("a", {"sha256": "9" * 64})
    again.close()
    contents = read_store(tmp_path / "samples")
    assert contents.problems == [] and [s.data["result"] for s in contents.records["a"]] == [{"sha256": "9" * 64}]
    (moved,) = (tmp_path / "samples" / "quarantine" / "run.jsonl").read_text().splitlines()
    assert "replaced by a new record of sample 'a'" in json.loads(moved)["why"]


def test_settle_asks_for_the_records_it_keeps_only_when_it_rewrites_a_log(tmp_path: Path) -> None:
    """#32: a finish's records (112k at 10x) assemble their bytes at each call, so ``settle`` asks for the ones it
    keeps only when it rewrites a log, and once: nothing moved, nothing asked."""
    run_samples(tasks(2), Square(), tmp_path, implementation=IMPL, progress=False)
    samples = tmp_path / "samples"
    records = load_records(tmp_path)
    asked: list[int] = []

    def keep() -> list[bytes]:
        asked.append(1)
        return [record.to_bytes() for record in records.values()]

    assert store.settle(samples, read_store(samples), own="run.jsonl", every_log=True, keep=keep) == []
    assert asked == []
    with (samples / "run.jsonl").open("ab") as fh:
        fh.write(b'{"digest":"x"}\n')
    moved = store.settle(samples, read_store(samples), own="run.jsonl", every_log=True, keep=keep)
    assert asked == [1] and len(moved) == 1 and "run.jsonl:3: not a store line" in moved[0]
    assert set(read_store(samples).records) == {"s00", "s01"} and read_store(samples).problems == []


def test_the_finish_takes_a_line_for_a_known_record_only_when_its_body_hashes_to_the_digest_it_claims(
        tmp_path: Path) -> None:
    # seal skips parsing a line whose digest names a record the finish counts; an edited body under that digest is a
    # line like any other: refused (its digest does not match) and moved aside, not taken for the counted record
    summary = run_samples(tasks(3), Square(), tmp_path, progress=False)
    log = tmp_path / "samples" / "run.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"square":1}', b'"square":7}')
    log.write_bytes(b"".join(lines))
    counted = {record.raw_digest(): record for record in summary.records.values()}
    pins, moved = store.seal(tmp_path, counted)
    assert len(moved) == 1 and "run.jsonl:2" in moved[0], moved
    assert pins["samples"][0].lines == 2


@pytest.mark.parametrize("kind", ["FIFO", "symlink"])
def test_a_log_moved_into_the_quarantine_never_takes_the_name_its_writer_quarantines_lines_under(
        tmp_path: Path, kind: str) -> None:
    """A FIFO or a symlink in place of shard-0-of-2.jsonl went to quarantine/shard-0-of-2.jsonl, where that shard
    later moves its own damaged lines: the shard then stopped on the quarantine's own entry ("a FIFO (named pipe),
    not a regular file"), or would have appended through the link. Now it is moved under another name."""
    samples = tmp_path / "samples"
    samples.mkdir()
    log = samples / "shard-0-of-2.jsonl"
    if kind == "FIFO":
        os.mkfifo(log)
    else:
        log.symlink_to(tmp_path / "elsewhere.jsonl")
    console = _quiet()
    within(5, lambda: run_samples(tasks(3), Square(), tmp_path, console=console), fifo=log if kind == "FIFO" else None)
    assert f"{log}: not a regular file, never read: moved to {samples / 'quarantine'}" in console.file.getvalue()
    log.write_bytes(b"a damaged line\n")
    console = _quiet()
    summary = within(5, lambda: run_samples(tasks(3), Square(), tmp_path, shard=Shard(0, 2), console=console),
                     fifo=samples / "quarantine" / log.name if kind == "FIFO" else None)
    assert summary.n_reused == 2 and summary.n_failed == 0
    moved = [json.loads(line) for line in (samples / "quarantine" / log.name).read_text().splitlines()]
    assert [m["line"] for m in moved] == [f"{log.name}:1"]
    assert not (tmp_path / "elsewhere.jsonl").exists()


def test_sound_records_rank_the_records_as_read_store_lists_them(tmp_path: Path) -> None:
    """A reader that streams the store (``pinbench status``) orders each sample's records by rank: that must be
    ``read_store``'s order (two logs by name, later lines first, the layout of 87e8f14 last), and it reads the same
    records (a damaged line and a torn tail in neither)."""
    samples = tmp_path / "samples"
    samples.mkdir()

    def body(sid: str, seconds: float) -> bytes:
        return record_bytes(SampleRecord(sid, "ok", {"y": 1}, None, "0" * 64, seconds).to_json())

    (samples / "shard-0-of-2.jsonl").write_bytes(encode_line(body("a", 1)) + b"damaged\n" + encode_line(body("a", 2))
                                                 + encode_line(body("b", 3)) + encode_line(body("a", 4))[:-9])
    (samples / "shard-1-of-2.jsonl").write_bytes(encode_line(body("a", 5)) + encode_line(body("b", 6)))
    (samples / "a.json").write_bytes(body("a", 7))
    ranked: dict[str, list[tuple[tuple[int, int], float]]] = {}
    for rank, stored in store.sound_records(samples):
        ranked.setdefault(stored.data["sample_id"], []).append((rank, stored.data["seconds"]))
    listed = {sid: [s.data["seconds"] for s in found] for sid, found in read_store(samples).records.items()}
    assert listed == {"a": [2, 1, 5, 7], "b": [3, 6]}
    assert {sid: [seconds for _, seconds in sorted(found)] for sid, found in ranked.items()} == listed
