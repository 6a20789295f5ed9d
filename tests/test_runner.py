"""Tests for pinbench.core.runner: resume, failure isolation, sharding/merging, record safety."""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import FrozenInstanceError, dataclass
from pathlib import Path

import numpy as np
import pytest
from loose_task import LooseTask
from rich.console import Console
from stopped import stop

from pinbench.core import memory, runner
from pinbench.core.config import Implementation
from pinbench.core.inputs import InputKey
from pinbench.core.runner import (
    MISSING_ERROR,
    NeverComputed,
    SampleFailed,
    SampleRecord,
    Shard,
    canonical_json,
    check_sample_id,
    clean_result,
    input_hash,
    load_records,
    merge_samples,
    read_merged,
    run_samples,
)
from pinbench.core.shard_manifest import read_manifests
from pinbench.core.store import encode_line, record_bytes
from pinbench.core.task import Task

HELPER = Path(__file__).parent / "helpers" / "slow_runner.py"


def make_tasks(n: int) -> list[dict]:
    return [LooseTask(f"s{i:02d}", x=i) for i in range(n)]


class CountingFn:
    """Test double for a per-sample scorer: squares x, records every call, fails on chosen ids."""

    def __init__(self, fail_ids: set[str] | None = None) -> None:
        self.calls: list[str] = []
        self.fail_ids = set(fail_ids or ())

    def __call__(self, task: Mapping) -> dict:
        self.calls.append(task["sample_id"])
        if task["sample_id"] in self.fail_ids:
            raise ValueError(f"bad frame count\nin {task['sample_id']}")
        return {"square": task["x"] ** 2, "half": task["x"] / 2}


def comparable(records) -> list[dict]:
    """Record dicts without timing (and traceback, which carries line numbers of the caller)."""
    values = records.values() if isinstance(records, dict) else records
    out = []
    for rec in values:
        data = rec.to_json()
        del data["seconds"], data["traceback"]
        out.append(data)
    return out


# ---------------------------------------------------------------------------------------------- shards


def test_shard_parse_and_select_interleaved() -> None:
    shard = Shard.parse(" 1/3 ")
    assert shard == Shard(1, 3) and str(shard) == "1/3"
    items = list(range(10))
    assert shard.select(items) == [1, 4, 7]
    parts = [Shard(i, 3).select(items) for i in range(3)]
    assert sorted(x for part in parts for x in part) == items
    assert Shard.parse("0/1").select(items) == items


@pytest.mark.parametrize("text", ["4/4", "-1/4", "1/0", "a/b", "1", "1/2/3", "", "/", "1.5/4",
                                  "0/99999999999999999999", "0/4000001"])
def test_shard_parse_rejects_bad_text(text: str) -> None:
    with pytest.raises(ValueError, match=r"0-based index I < N") as info:
        Shard.parse(text)
    assert repr(text) in str(info.value)


def test_shard_constructor_validates() -> None:
    with pytest.raises(ValueError, match="0-based index"):
        Shard(3, 3)
    with pytest.raises(ValueError, match="N <= 4000000"):   # 0/1e20 was taken; status then built a row per shard
        Shard(0, 10 ** 20)
    assert Shard.parse("3999999/4000000") == Shard(3999999, 4000000)


# ------------------------------------------------------------------------------------------------- ids


@pytest.mark.parametrize("bad", ["a/b", "..", "../x", ".", "a\x00b", "", ".hidden", "a\\b", "line\nbreak",
                                 "x" * 201])
def test_unsafe_sample_ids_rejected_before_any_work(tmp_path: Path, bad: str) -> None:
    tasks = [*make_tasks(2), LooseTask(bad, x=9)]
    fn = CountingFn()
    with pytest.raises(ValueError, match="unsafe sample id") as info:
        run_samples(tasks, fn, tmp_path / "out", progress=False)
    assert repr(bad)[:40] in str(info.value)
    assert fn.calls == [] and not (tmp_path / "out").exists()


def test_sample_id_type_and_int_ids() -> None:
    assert check_sample_id(7) == "7"
    assert check_sample_id("clip_001.mp4") == "clip_001.mp4"
    with pytest.raises(ValueError, match="expected a string"):
        check_sample_id(None)


@pytest.mark.parametrize(("sample_id", "problem"), [
    ("hf_" + "Ab3De6Gh9Jk2Mn5Pq8St" * 2, "has the shape of a secret token"),
    ("clip_sekrit-value-42_b", "holds the value of the environment variable HF_TOKEN")], ids=["shape", "value"])
def test_an_ascii_id_holding_a_secret_is_refused_as_any_other(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sample_id: str, problem: str) -> None:
    """A plain ASCII id took the fast path, which returned before the secret check ``sample_id_problem`` makes: an id
    with a token's shape or a secret-named variable's value reached the run's records and file names unredacted."""
    monkeypatch.setenv("HF_TOKEN", "sekrit-value-42")
    with pytest.raises(ValueError, match=f"unsafe sample id .*: {problem}"):
        check_sample_id(sample_id)
    fn = CountingFn()
    with pytest.raises(ValueError, match=problem):
        run_samples([*make_tasks(2), LooseTask(sample_id)], fn, tmp_path / "out", progress=False)
    assert fn.calls == [] and not (tmp_path / "out").exists()


SHAPED_TOKEN = "hf_" + "Ab3De6Gh9Jk2Mn5Pq8St" * 2


@pytest.mark.parametrize("sample_id", ["x_" + SHAPED_TOKEN, "clip/" + SHAPED_TOKEN, ("clip_" + SHAPED_TOKEN).encode()],
                         ids=["shape", "separator", "bytes"])
def test_a_refused_ids_message_holds_no_secret(sample_id: object) -> None:
    """check_sample_id's ValueError showed the id whole (unsafe sample id 'x_hf_...'): the CLI redacts what it
    prints, but a recipe author's script that logs or records the message kept the token."""
    with pytest.raises(ValueError, match="sample id") as info:
        check_sample_id(sample_id)
    assert SHAPED_TOKEN not in str(info.value) and "***" in str(info.value)


def test_duplicate_ids_and_untyped_tasks(tmp_path: Path) -> None:
    fn = CountingFn()
    with pytest.raises(ValueError, match=r"duplicate sample id 's01' at positions 1 and 3"):
        run_samples([*make_tasks(3), LooseTask("s01", x=5)], fn, tmp_path, progress=False)
    with pytest.raises(TypeError, match=r"task at position 1 is a dict, expected a pinbench.core.task.Task"):
        run_samples([LooseTask("a"), {"sample_id": "b"}], fn, tmp_path, progress=False)
    assert fn.calls == []


# -------------------------------------------------------------------------------------- run and resume


def test_run_writes_records_and_rerun_reuses_them(tmp_path: Path) -> None:
    tasks = make_tasks(5)
    fn = CountingFn()
    first = run_samples(tasks, fn, tmp_path)  # progress=True under pytest (no terminal): must not crash
    assert (first.n_total, first.n_done, first.n_reused, first.n_failed) == (5, 5, 0, 0)
    assert list(first.records) == [t["sample_id"] for t in tasks]
    rec = first.records["s03"]
    assert rec.ok and rec.result == {"square": 9, "half": 1.5} and rec.error is None
    assert rec.input_hash == input_hash(tasks[3]) and rec.seconds >= 0
    assert sorted(p.name for p in (tmp_path / "samples").iterdir()) == ["run.jsonl"]  # one log, no temp files
    stored = [json.loads(line)["record"] for line in (tmp_path / "samples" / "run.jsonl").read_text().splitlines()]
    assert [r["sample_id"] for r in stored] == [t["sample_id"] for t in tasks]
    assert stored[3]["record_version"] == 2 and stored[3]["status"] == "ok" and stored[3]["result"]["square"] == 9

    second = run_samples(tasks, fn, tmp_path, progress=False)
    assert (second.n_done, second.n_reused, second.n_failed) == (0, 5, 0)
    assert fn.calls == [t["sample_id"] for t in tasks]  # nothing recomputed
    assert comparable(second.records) == comparable(first.records)
    assert load_records(tmp_path).keys() == first.records.keys()


def test_failure_is_isolated_and_recorded(tmp_path: Path) -> None:
    fn = CountingFn(fail_ids={"s02"})
    summary = run_samples(make_tasks(5), fn, tmp_path, progress=False)
    assert (summary.n_done, summary.n_failed) == (4, 1) and not summary.ok
    assert summary.failed_ids == ["s02"]
    failed = summary.records["s02"]
    assert failed.status == "failed" and failed.result is None
    assert failed.error == "ValueError: bad frame count in s02"  # one line
    assert "Traceback" in failed.traceback and "bad frame count" in failed.traceback
    assert load_records(tmp_path)["s02"].error == failed.error
    assert all(summary.records[s].ok for s in ("s00", "s01", "s03", "s04"))


def test_failed_samples_are_retried_on_rerun(tmp_path: Path) -> None:
    tasks = make_tasks(4)
    run_samples(tasks, CountingFn(fail_ids={"s01", "s03"}), tmp_path, progress=False)
    fn = CountingFn()
    summary = run_samples(tasks, fn, tmp_path, progress=False)
    assert fn.calls == ["s01", "s03"]
    assert (summary.n_done, summary.n_reused, summary.n_failed) == (2, 2, 0)
    assert all(rec.ok for rec in load_records(tmp_path).values())


def test_changed_task_payload_is_recomputed(tmp_path: Path) -> None:
    tasks = make_tasks(3)
    run_samples(tasks, CountingFn(), tmp_path, progress=False)
    tasks[1] = LooseTask("s01", x=10)
    fn = CountingFn()
    summary = run_samples(tasks, fn, tmp_path, progress=False)
    assert fn.calls == ["s01"] and summary.records["s01"].result["square"] == 100
    assert summary.records["s01"].input_hash == input_hash(tasks[1])


def test_input_hash_is_canonical() -> None:
    assert input_hash({"a": 1, "b": [1, 2]}) == input_hash({"b": [1, 2], "a": 1})
    assert input_hash({"a": 1}) != input_hash({"a": 2})
    assert input_hash({"p": Path("/x/y.mp4")}) == input_hash({"p": "/x/y.mp4"})
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        input_hash({"a": object()})


@dataclass(frozen=True, slots=True)
class _Clip(Task):
    """A recipe's task as recipes declare them (tests only)."""

    video: InputKey
    fps: float
    note: str | None = None


def test_a_task_hashes_its_fields_by_name_and_a_none_field_as_absent() -> None:
    key = InputKey("a/clip.mp4", 10, "0" * 64)
    clip = _Clip("c1", key, 8.0)
    # the hash is the canonical JSON of the fields, typed ones (a key) as their own fields; None is not hashed
    text = '{"fps":8.0,"sample_id":"c1","video":{"path":"a/clip.mp4","sha256":"' + "0" * 64 + '","size":10}}'
    assert input_hash(clip) == hashlib.sha256(text.encode()).hexdigest()
    assert input_hash(_Clip("c1", key, 8.0, note=None)) == input_hash(clip)
    assert input_hash(_Clip("c1", key, 8.0, note="x")) != input_hash(clip)
    assert input_hash(_Clip("c1", key, 8.5)) != input_hash(clip)
    assert input_hash(_Clip("c1", InputKey("a/clip.mp4", 10, "1" * 64), 8.0)) != input_hash(clip)
    with pytest.raises(FrozenInstanceError):
        clip.fps = 9.0   # type: ignore[misc]


def test_stored_result_rejected_by_validate_is_recomputed(tmp_path: Path) -> None:
    tasks = make_tasks(3)
    run_samples(tasks, CountingFn(), tmp_path, progress=False)
    fn = CountingFn()
    summary = run_samples(tasks, fn, tmp_path, validate=lambda r: r["square"] != 1, progress=False)
    assert fn.calls == ["s01"]
    # the fresh result is rejected too, so it is stored as a failure with the reason
    assert summary.records["s01"].error == "ValueError: result rejected: validate() returned False"
    assert summary.n_failed == 1 and summary.n_reused == 2


def test_a_record_the_validator_refused_is_replaced_not_contradicted(tmp_path: Path, capsys) -> None:
    """A record refused by the validator (a generator changed) is computed again with another result: the new
    record replaces it (moved to quarantine), so the next read reuses the new one instead of reading neither. The
    line saying so names why it was refused (it said "of the same inputs and code", as if nothing had changed)."""
    tasks = make_tasks(3)
    run_samples(tasks, CountingFn(), tmp_path, progress=False)

    class Cubes(CountingFn):
        def __call__(self, task: Mapping) -> dict:
            return {**super().__call__(task), "cube": task["x"] ** 3}

    def cubed(result: Mapping) -> bool:
        if "cube" not in result:
            raise runner.Stale("generator changed")
        return True

    capsys.readouterr()
    summary = run_samples(tasks, Cubes(), tmp_path, validate=cubed, progress=False)
    assert summary.n_done == 3
    log = tmp_path / "samples" / "run.jsonl"
    assert f"{log}:1: not reused (generator changed), replaced by a new record of sample 's00': moved to" in (
        capsys.readouterr().err)
    again = CountingFn()
    summary = run_samples(tasks, again, tmp_path, validate=cubed, progress=False)
    assert again.calls == [] and summary.n_reused == 3                  # was: all 3 computed a third time
    assert {sid: r.result["cube"] for sid, r in load_records(tmp_path).items()} == {"s00": 0, "s01": 1, "s02": 8}
    moved = (tmp_path / "samples" / "quarantine" / "run.jsonl").read_text().splitlines()
    assert len(moved) == 3 and all("not reused (generator changed), replaced by a new record" in json.loads(m)["why"]
                                   for m in moved)


def test_validator_that_raises_rejects(tmp_path: Path) -> None:
    summary = run_samples(make_tasks(1), CountingFn(), tmp_path, validate=lambda r: r["nope"], progress=False)
    assert summary.records["s00"].error == "ValueError: result rejected: validate() raised KeyError: 'nope'"


def test_corrupt_or_foreign_legacy_record_files_are_recomputed(tmp_path: Path) -> None:
    """The per-sample files of 87e8f14's layout are still read; a bad one is recomputed, never reused."""
    tasks = make_tasks(5)
    samples = tmp_path / "samples"
    samples.mkdir()
    legacy = {t["sample_id"]: {**SampleRecord(t["sample_id"], "ok", {"square": t["x"] ** 2, "half": t["x"] / 2}, None,
                                              input_hash(t), 0.1).to_json(), "record_version": 1}
              for t in tasks}
    for sid, data in legacy.items():
        del data["implementation"]
        (samples / f"{sid}.json").write_text(json.dumps(data))
    (samples / "s00.json").write_text('{"record_version": 1, "sample_id": "s0')  # half-written
    (samples / "s01.json").write_bytes(b"\xff\xfe\x00garbage")
    (samples / "s02.json").write_text(json.dumps(legacy["s03"]))  # a record for another sample
    (samples / "s04.json").write_text(json.dumps({**legacy["s04"], "record_version": 0}))
    (samples / ".s03.json.abc.tmp").write_text("{")  # leftover temp file of a killed writer
    assert set(load_records(tmp_path)) == {"s03"}

    fn = CountingFn()
    summary = run_samples(tasks, fn, tmp_path, progress=False)
    assert fn.calls == ["s00", "s01", "s02", "s04"] and summary.n_reused == 1
    assert all(rec.ok for rec in load_records(tmp_path).values()) and len(load_records(tmp_path)) == 5


def test_nonfinite_floats_stored_as_null_and_numpy_converted(tmp_path: Path) -> None:
    def fn(task: Mapping) -> dict:
        return {"nan": math.nan, "inf": np.float32(np.inf), "f": np.float64(0.25), "pair": (1, 2),
                "arr": np.array([1.5, np.nan]), "nested": {"ninf": -math.inf}, "path": Path("a/b")}

    summary = run_samples(make_tasks(1), fn, tmp_path, progress=False)
    expected = {"nan": None, "inf": None, "f": 0.25, "pair": [1, 2], "arr": [1.5, None],
                "nested": {"ninf": None}, "path": "a/b"}
    assert summary.records["s00"].result == expected

    def no_constants(name: str) -> None:
        raise AssertionError(f"non-standard JSON constant {name}")

    text = (tmp_path / "samples" / "run.jsonl").read_text()
    assert json.loads(text, parse_constant=no_constants)["record"]["result"] == expected


@pytest.mark.parametrize(
    ("result", "error"),
    [
        ({"x": object()}, "TypeError: result['x'] is a object, which is not JSON-serialisable"),
        ([1, 2], "TypeError: result is a list, expected a dict"),
        ({1: 2}, "TypeError: result has a key 1 of type int, expected str"),
    ],
)
def test_bad_result_fails_only_its_sample(tmp_path: Path, result: object, error: str) -> None:
    summary = run_samples(make_tasks(2), lambda t: result if t["x"] == 1 else {"ok": 1}, tmp_path,
                          progress=False)
    assert summary.records["s00"].ok
    assert summary.records["s01"].error == error


def test_keyboard_interrupt_propagates_and_keeps_finished_samples(tmp_path: Path) -> None:
    def fn(task: Mapping) -> dict:
        if task["x"] == 2:
            raise KeyboardInterrupt
        return {"x": task["x"]}

    with pytest.raises(KeyboardInterrupt):
        run_samples(make_tasks(5), fn, tmp_path, progress=False)
    assert sorted(load_records(tmp_path)) == ["s00", "s01"]


class StoredBefore:
    """Test double for a per-sample scorer: sleeps ``seconds``, and notes how many records the log held when it was
    called."""

    def __init__(self, out: Path, seconds: float) -> None:
        self.log, self.seconds, self.seen = out / "samples" / "run.jsonl", seconds, []

    def __call__(self, task: Mapping) -> dict:
        self.seen.append(self.log.read_bytes().count(b"\n") if self.log.exists() else 0)
        time.sleep(self.seconds)
        return {"x": task["x"]}


def test_every_sample_is_stored_before_the_next_starts(tmp_path: Path) -> None:
    """A kill loses only the sample in flight: fast samples are not held back to be written together."""
    fn = StoredBefore(tmp_path, 0.0)
    run_samples(make_tasks(5), fn, tmp_path, progress=False)
    assert fn.seen == [0, 1, 2, 3, 4]


def test_system_exit_propagates(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        run_samples(make_tasks(2), lambda t: sys.exit(3), tmp_path, progress=False)


# ------------------------------------------------------------------------------------------- batching


def test_batch_fn_gives_same_records_as_per_sample(tmp_path: Path) -> None:
    tasks = make_tasks(7)
    batches: list[list[str]] = []

    def batch_fn(batch: list[Mapping]) -> list[dict]:
        batches.append([t["sample_id"] for t in batch])
        return [{"square": t["x"] ** 2, "half": t["x"] / 2} for t in batch]

    fn = CountingFn()
    batched = run_samples(tasks, fn, tmp_path / "b", batch_size=3, batch_fn=batch_fn, progress=False)
    assert [len(b) for b in batches] == [3, 3, 1] and fn.calls == []
    single = run_samples(tasks, CountingFn(), tmp_path / "s", progress=False)
    assert comparable(batched.records) == comparable(single.records)


def test_failing_batch_falls_back_to_isolated_samples(tmp_path: Path) -> None:
    def batch_fn(batch: list[Mapping]) -> list[dict]:
        if any(t["x"] == 4 for t in batch):
            raise RuntimeError("CUDA error in batch")
        if len(batch) == 2:
            return [{"square": 0}]  # wrong length: also falls back
        return [{"square": t["x"] ** 2, "half": t["x"] / 2} for t in batch]

    fn = CountingFn(fail_ids={"s04"})
    summary = run_samples(make_tasks(8), fn, tmp_path, batch_size=3, batch_fn=batch_fn, progress=False)
    assert fn.calls == ["s03", "s04", "s05", "s06", "s07"]
    assert summary.failed_ids == ["s04"] and summary.n_done == 7
    assert summary.records["s06"].result == {"square": 36, "half": 3.0}


def test_batch_arguments_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        run_samples(make_tasks(1), CountingFn(), tmp_path, batch_size=0)
    with pytest.raises(ValueError, match="needs a batch_fn"):
        run_samples(make_tasks(1), CountingFn(), tmp_path, batch_size=2)


# ------------------------------------------------------------------------------------ shard and merge


def test_shards_merged_equal_unsharded_run(tmp_path: Path) -> None:
    tasks = make_tasks(10)
    fn = CountingFn(fail_ids={"s05"})
    full = run_samples(tasks, fn, tmp_path / "full", progress=False)
    full_merged = merge_samples([tmp_path / "full"], tasks, dest=tmp_path / "full.jsonl")

    shard_dirs = []
    for i in range(3):
        out = tmp_path / f"shard{i}"
        summary = run_samples(tasks, CountingFn(fail_ids={"s05"}), out, shard=Shard(i, 3), progress=False)
        assert list(summary.records) == [t["sample_id"] for t in tasks[i::3]]
        shard_dirs.append(out)
    merged = merge_samples(shard_dirs, tasks, dest=tmp_path / "merged.jsonl")

    assert comparable(merged) == comparable(full.records) == comparable(full_merged)
    assert comparable(read_merged(tmp_path / "merged.jsonl")) == comparable(merged)
    assert [r.sample_id for r in merged] == [t["sample_id"] for t in tasks]

    # shards may also share one directory
    for i in range(3):
        fn = CountingFn(fail_ids={"s05"})
        run_samples(tasks, fn, tmp_path / "shared", shard=Shard(i, 3), progress=False)
    shared = merge_samples([tmp_path / "shared"], tasks, dest=tmp_path / "shared.jsonl")
    assert comparable(shared) == comparable(merged)


def test_missing_shard_gives_failed_missing_records(tmp_path: Path) -> None:
    tasks = make_tasks(9)
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "never_ran"]
    for i in range(2):
        run_samples(tasks, CountingFn(), dirs[i], shard=Shard(i, 3), progress=False)
    merged = merge_samples(dirs, tasks, dest=tmp_path / "out" / "samples.jsonl")
    assert len(merged) == 9
    missing = [r for r in merged if not r.ok]
    assert [r.sample_id for r in missing] == ["s02", "s05", "s08"]
    assert all(r.error == MISSING_ERROR and r.result is None for r in missing)
    assert missing[0].input_hash == input_hash(tasks[2])
    lines = (tmp_path / "out" / "samples.jsonl").read_text().splitlines()
    assert [json.loads(line)["sample_id"] for line in lines] == [t["sample_id"] for t in tasks]


def test_merge_picks_ok_over_failed_and_names_stale_records(tmp_path: Path) -> None:
    tasks = make_tasks(3)
    run_samples(tasks, CountingFn(fail_ids={"s00"}), tmp_path / "first", progress=False)
    run_samples(tasks[:1], CountingFn(), tmp_path / "second", progress=False)
    changed = [tasks[0], LooseTask("s01", x=99), tasks[2]]
    merged = merge_samples([tmp_path / "first", tmp_path / "second"], changed, dest=tmp_path / "m.jsonl")
    assert merged[0].ok  # the failed record in "first" loses to the ok one in "second"
    assert merged[1].error.startswith(MISSING_ERROR) and "inputs or options changed" in merged[1].error
    assert "first/samples" in merged[1].error
    assert merged[2].ok


def test_merge_keeps_failed_record_when_no_shard_succeeded(tmp_path: Path) -> None:
    tasks = make_tasks(2)
    run_samples(tasks, CountingFn(fail_ids={"s01"}), tmp_path / "a", progress=False)
    merged = merge_samples([tmp_path / "a"], tasks, dest=tmp_path / "m.jsonl")
    assert merged[1].error == "ValueError: bad frame count in s01"


def test_read_merged_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    good = SampleRecord("a", "ok", {"v": 1}, None, "0" * 64, 0.1).to_json()
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "status": "ok", "result": None}) + "\n")
    with pytest.raises(ValueError, match=r"samples\.jsonl:2: bad sample record"):
        read_merged(path)


def test_record_from_json_rejects_inconsistent_records() -> None:
    good = SampleRecord("a", "failed", None, "E: x", "a" * 64, 0.0).to_json()
    assert SampleRecord.from_json(good).error == "E: x"
    for bad, message in [
        ({**good, "error": None}, "no error"),
        ({**good, "status": "done"}, "'status'"),
        ({**good, "input_hash": "xyz"}, "sha256"),
        ({k: v for k, v in good.items() if k != "seconds"}, "lacks 'seconds'"),
        ([good], "expected an object"),
    ]:
        with pytest.raises(ValueError, match=message):
            SampleRecord.from_json(bad)


def _record_variants() -> list[object]:
    """Sound records of both versions and statuses, and each of them broken one field at a time."""
    impl = {"recipe_version": "1.0", "code": "c" * 64, "image": None}
    sound = [SampleRecord("a", "ok", {"v": 1.5, "s": "x"}, None, "a" * 64, 0.25, implementation=Implementation(
        "1.0", "c" * 64)).to_json(),
             SampleRecord("b", "failed", None, "E: x", "b" * 64, 0, traceback="Traceback").to_json(),
             {**SampleRecord("c", "ok", {}, None, "c" * 64, 1).to_json(), "record_version": 1, "extra": 1}]
    swaps: dict[str, list[object]] = {
        "record_version": [None, True, 1.0, 3, "2"],
        "sample_id": [None, 1, ""],
        "status": [None, "done", "OK", 1],
        "result": [None, [], "x", {"v": None}],
        "error": [None, "", 1, "E: y"],
        "traceback": [None, 1, "t"],
        "input_hash": [None, "xyz", "A" * 64, "a" * 63, "a" * 65, 64],
        "seconds": [None, True, "1", 2, 1e300, 10 ** 20],
        "implementation": [None, [], {}, impl, {**impl, "image": 1}, {**impl, "code": None}, {**impl, "x": 1}],
    }
    variants: list[object] = [[sound[0]], None, "x", {}]
    for good in sound:
        variants.append(good)
        for key, values in swaps.items():
            variants.append({k: v for k, v in good.items() if k != key})
            variants += [{**good, key: value} for value in values]
    return variants


@pytest.mark.parametrize("data", _record_variants())
def test_record_from_json_fast_path_gives_what_the_field_checks_give(data: object) -> None:
    """from_json first tries one test for a sound record; it must build the record, or raise the message, that the
    field-by-field checks give for every record (sound, or broken in any one field)."""
    def outcome(read):
        try:
            record = read(data)
        except ValueError as exc:
            return ("error", str(exc))
        return ("record", record, type(record.seconds), record.to_json())

    assert outcome(SampleRecord.from_json) == outcome(SampleRecord._from_json_checked)


# --------------------------------------------------------------------------------------------- progress


def test_progress_bar_shows_counts_on_a_terminal(tmp_path: Path) -> None:
    tasks = make_tasks(4)
    run_samples(tasks[:2], CountingFn(), tmp_path, progress=False)
    console = Console(file=io.StringIO(), force_terminal=True, width=160, record=True)
    run_samples(tasks, CountingFn(fail_ids={"s03"}), tmp_path, step="generate", console=console)
    text = console.export_text()
    assert "generate" in text and "ETA" in text
    assert "generate (done 1, reused 2, failed 1)" in text and "2/2" in text  # computed samples; reused apart

    quiet = Console(file=io.StringIO(), force_terminal=True, record=True)
    run_samples(tasks, CountingFn(), tmp_path, console=quiet, progress=False)
    assert quiet.export_text() == ""


def test_a_run_logging_to_a_file_says_its_lines_without_rich(tmp_path: Path) -> None:
    """stderr no terminal (CI, a container's log, a pipe): the summary is a plain line, and rich (1.7 MB held for the
    process's life) is never imported; with FORCE_COLOR rich decides, and takes it for a terminal."""
    code = ("import sys\nfrom pinbench.core.runner import run_samples\nfrom pinbench.core.task import Task\n"
            f"run_samples([Task(f's{{i}}') for i in range(3)], lambda task: {{'v': 1}}, {str(tmp_path / 'out')!r})\n"
            "print('RICH', 'rich' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert found.stdout == "RICH False\n"
    assert found.stderr.startswith("score: 3 samples: 3 done, 0 reused, 0 failed in "), found.stderr
    assert found.stderr.count("\n") == 1

    forced = subprocess.run([sys.executable, "-c", code.replace("'out'", "'forced'")], capture_output=True, text=True,
                            check=True, env={**env, "FORCE_COLOR": "1"})
    assert forced.stdout == "RICH True\n" and "score" in forced.stderr


# ------------------------------------------------------------------------------------ kill and resume


def _run_helper(out_dir: Path, side_log: Path, n: int, sleep_s: float) -> dict:
    proc = subprocess.run([sys.executable, str(HELPER), str(out_dir), str(side_log), str(n), str(sleep_s)],
                          capture_output=True, text=True, timeout=60, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_resume_after_sigkill_recomputes_only_unfinished(tmp_path: Path) -> None:
    n = 20
    out, side_log = tmp_path / "killed", tmp_path / "killed.log"
    proc = subprocess.Popen([sys.executable, str(HELPER), str(out), str(side_log), str(n), "0.1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    samples = out / "samples"
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:   # looked at while it stands still: a loaded machine's helper went on
            stop(proc)                        # to its end between a look and the kill
            if proc.poll() is not None or ((samples / "run.jsonl").is_file()
                                           and (samples / "run.jsonl").read_bytes().count(b"\n") >= 3):
                break
            proc.send_signal(signal.SIGCONT)
            time.sleep(0.01)
        assert proc.poll() is None, f"helper ended early: {proc.stderr.read().decode()}"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL

    finished_before_kill = set(load_records(out))
    assert 3 <= len(finished_before_kill) < n
    resumed = _run_helper(out, side_log, n, 0)
    assert resumed == {"total": n, "done": n - len(finished_before_kill),
                       "reused": len(finished_before_kill), "failed": 0}

    calls = side_log.read_text().split()
    for sid in finished_before_kill:
        assert calls.count(sid) == 1, f"{sid} finished before the kill but was recomputed"
    assert set(calls) == {f"s{i:02d}" for i in range(n)}

    clean_out = tmp_path / "clean"
    assert _run_helper(clean_out, tmp_path / "clean.log", n, 0)["done"] == n
    tasks = make_tasks(n)
    resumed_merged = merge_samples([out], tasks, dest=out / "samples.jsonl")
    clean_merged = merge_samples([clean_out], tasks, dest=clean_out / "samples.jsonl")
    assert comparable(resumed_merged) == comparable(clean_merged)
    assert all(r.ok for r in resumed_merged)
    assert resumed_merged[0].result["ratio"] is None  # inf stored as null


def test_errors_and_tracebacks_are_redacted_in_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_leakyleakyleaky123456")

    def boom(task: Mapping) -> dict:
        raise RuntimeError(f"request failed with token {os.environ['HF_TOKEN']}")

    summary = run_samples([LooseTask("a")], boom, tmp_path, progress=False)
    assert summary.n_failed == 1
    merge_samples([tmp_path], [LooseTask("a")], dest=tmp_path / "samples.jsonl")
    for path in [tmp_path / "samples" / "run.jsonl", tmp_path / "samples.jsonl"]:
        assert "hf_leakyleakyleaky123456" not in path.read_text()


def test_plain_progress_lines_when_not_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pinbench.core.runner as runner_module

    monkeypatch.setattr(runner_module, "PLAIN_PROGRESS_SECONDS", 0.0)
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=False, width=200)
    tasks = [LooseTask(f"s{i}") for i in range(3)]
    run_samples(tasks, lambda task: {"v": 1}, tmp_path, console=console, step="score")
    lines = stream.getvalue().splitlines()
    assert any("computed (" in line and "(done " in line and "elapsed" in line for line in lines)
    assert lines[-1].startswith("score: 3 samples: 3 done, 0 reused, 0 failed")


def test_a_result_string_holding_a_unicode_line_separator_reads_back(tmp_path: Path) -> None:
    """Records are written with ensure_ascii=False, which leaves U+2028 and its kin raw inside strings (a VLM's
    caption may hold one): the samples file still reads as one record per line, and a blank line is ASCII."""
    from pinbench.core.runner import read_merged

    text = "a\u2028b\u2029c\x85d\x1ce"
    record = SampleRecord("s1", "ok", {"caption": text}, None, "0" * 64, 0.5)
    path = tmp_path / "samples.jsonl"
    path.write_bytes(record.to_bytes() + b"\n\r\n" + record.to_bytes().replace(b"s1", b"s2") + b"\n")
    assert [(r.sample_id, r.result) for r in read_merged(path)] == [("s1", {"caption": text}),
                                                                     ("s2", {"caption": text})]
    path.write_bytes(record.to_bytes() + "\n\u00a0\n".encode())          # a line of a no-break space is no record
    with pytest.raises(ValueError, match=r"samples.jsonl:2: bad"):
        read_merged(path)


def test_a_seconds_integer_beyond_any_float_is_a_bad_record_not_a_crash() -> None:
    data = SampleRecord("s1", "ok", {"x": 1.0}, None, "0" * 64, 0.5).to_json()
    with pytest.raises(ValueError, match="'seconds' must be a finite number"):
        SampleRecord.from_json({**data, "seconds": 10 ** 400})
    assert SampleRecord.from_json({**data, "seconds": 10 ** 300}).seconds == 1e300


def test_a_step_log_keeps_a_reused_record_and_stores_one_whose_outcome_or_inputs_changed(tmp_path: Path) -> None:
    """StepLog (work launched outside run_samples): a rerun that reuses an output appends nothing, so the stored
    record keeps its own timing; a reused output with another result, or a task with other inputs, is stored."""
    from stored import store_snapshot

    from pinbench.core.runner import StepLog
    from pinbench.core.store import read_store

    tasks = [LooseTask("a", row=1), LooseTask("b", row=2)]
    first = StepLog(tasks, tmp_path, step="generate")
    first.record("a", {"sha256": "1" * 64}, seconds=3.0)
    first.record("b", {"sha256": "2" * 64}, seconds=4.0)
    first.close()
    stored = store_snapshot(tmp_path / "samples")

    again = StepLog(tasks, tmp_path, step="generate")
    kept = again.record("a", {"sha256": "1" * 64}, reused=True)
    again.record("b", {"sha256": "2" * 64}, reused=True)
    assert kept.seconds == 3.0 and again.close().n_reused == 2
    assert store_snapshot(tmp_path / "samples") == stored          # nothing appended

    changed = StepLog([tasks[0], LooseTask("b", row=3)], tmp_path, step="generate")
    assert changed.record("a", {"sha256": "9" * 64}, reused=True).result == {"sha256": "9" * 64}
    assert changed.record("b", {"sha256": "2" * 64}, reused=True).seconds == 0.0   # other inputs: a new record
    newest = read_store(tmp_path / "samples").records
    assert newest["a"][0].data["result"] == {"sha256": "9" * 64} and newest["b"][0].data["seconds"] == 0.0


def test_a_sample_failed_on_purpose_keeps_its_message_and_no_traceback(tmp_path: Path) -> None:
    """#32: a failure whose message says it all (SampleFailed: a sample without Script 1 output) stores no
    traceback; any other exception keeps one."""

    class NoOutput(SampleFailed):
        pass

    def fn(task: Mapping) -> dict:
        if task["x"] == 1:
            raise NoOutput("missing: no output for this sample")
        if task["x"] == 2:
            raise KeyError("frames")
        return {"x": task["x"]}

    records = run_samples(make_tasks(3), fn, tmp_path, progress=False).records
    assert (records["s01"].error, records["s01"].traceback) == ("NoOutput: missing: no output for this sample", None)
    assert records["s02"].error == "KeyError: 'frames'" and "Traceback" in records["s02"].traceback
    assert load_records(tmp_path)["s01"].traceback is None


def test_a_sample_never_computed_is_stored_as_its_stand_in(tmp_path: Path) -> None:
    """NeverComputed (no run generated the sample's rollout, ``Run.compute``): stored as the merge's stand-in, so the
    store alone counts it missing (``is_stand_in``, what pinbench status reads), not failed 'NeverComputed: ...'; the
    summary counts it missing too (it said 1 failed), beside a sample that did fail."""
    from pinbench.core.scorecard import is_stand_in

    def fn(task: Mapping) -> dict:
        if task["x"] == 1:
            raise NeverComputed("generation: no run stored s01.mp4 or a record of it")
        if task["x"] == 2:
            raise ValueError("bad")
        return {"x": task["x"]}

    summary = run_samples(make_tasks(3), fn, tmp_path, progress=False)
    assert (summary.n_done, summary.n_failed, summary.n_missing, summary.ok) == (1, 1, 1, False)
    assert read_manifests(tmp_path)[0].summary == {"total": 3, "done": 1, "reused": 0, "failed": 1,
                                                                  "missing": 1}
    stored = load_records(tmp_path)["s01"]
    assert stored.error == f"{MISSING_ERROR} (generation: no run stored s01.mp4 or a record of it)"
    assert is_stand_in(stored) and stored.traceback is None and stored.result is None


RECORDS = [
    SampleRecord("s1", "ok", {"b": 1.5, "a": [1, None, "x"], "n": {"z": True, "y": None}}, None, "0" * 64, 0.25),
    SampleRecord("ü \"quoted\" \u2028", "failed", None, "ValueError: ü \\ \"q\"", "f" * 64, 3,
                 traceback="Traceback\n  line \"1\"\n", implementation=Implementation("1.0", "c" * 64, "sha256:i")),
    SampleRecord("s3", "ok", {}, None, "a" * 64, 1e-7, implementation=Implementation("2", "d" * 64)),
]


@pytest.mark.parametrize("record", RECORDS, ids=["ok", "failed", "empty"])
def test_a_record_is_encoded_as_its_json_says(record: SampleRecord) -> None:
    """The bytes assembled from a record's parts are ``record_bytes(record.to_json())`` exactly, and its digest is
    theirs."""
    assert record.to_bytes() == record_bytes(record.to_json())
    assert record.digest() == hashlib.sha256(record.to_bytes()).hexdigest()
    assert SampleRecord.from_json(json.loads(record.to_bytes())) == record


def test_a_computed_record_holds_its_seconds_and_result_json_and_assembles_its_line_each_time(tmp_path: Path) -> None:
    """#32: a record run_samples computed keeps no line (112k of them held 70 MB at 10x), only the JSON of its seconds
    and result; the bytes assembled from it at each call are the stored line's, ``record_bytes`` of its JSON, with
    the digest stored beside them; its result's canonical JSON and its member entry come from the same JSON."""
    results = {"s00": {"t": "a b \u00e9 \"q\"", "n": [1.5, None], "z": {"y": 2}}, "s01": {}}

    def fn(task: Mapping) -> dict:
        if task["sample_id"] == "s02":
            raise ValueError("no frames, a b")
        return results[task["sample_id"]]

    records = run_samples(make_tasks(3), fn, tmp_path, progress=False).records
    stored = {json.loads(line)["record"]["sample_id"]: line
              for line in (tmp_path / "samples" / "run.jsonl").read_bytes().splitlines()}
    for sid, record in records.items():
        body = record.to_bytes()
        assert record.line() is None and record.to_bytes() == body == record_bytes(record.to_json())
        assert stored[sid] == encode_line(body).rstrip(b"\n")
        assert record.raw_digest() == hashlib.sha256(body).digest() and record.digest() == record.raw_digest().hex()
    for sid in results:
        canonical = canonical_json(results[sid]).encode()
        assert records[sid].canonical_result() == records[sid].stored_result() == canonical
        assert records[sid].canonical_member() == (
            f'["{sid}","ok",{json.dumps(records[sid].input_hash)},'.encode() + canonical + b",null]")
    assert records["s02"].canonical_result() is records["s02"].stored_result() is None


@pytest.mark.parametrize("result", [
    {"b": 2, "a": {"d": [1.5, math.inf, {"y": 1, "x": -math.nan}], "c": None}, "e": "t", "f": True},
    {"k": (1, 2), "n": np.float64(0.5), "m": {"z": np.int64(3), "a": 1}},
    {"only": math.inf},
])
def test_a_clean_result_is_the_slow_paths_value_with_sorted_keys(result: dict) -> None:
    """The fast path of ``clean_result`` (plain types) gives what ``_json_clean`` gives, keys sorted at every
    level, so a result's JSON is its canonical JSON."""
    from pinbench.core.runner import _json_clean

    clean = clean_result(result)
    assert clean == _json_clean(result, "result")
    assert json.dumps(clean, separators=(",", ":")) == json.dumps(clean, sort_keys=True, separators=(",", ":"))


def test_a_record_reused_from_the_store_keeps_the_stored_bytes(tmp_path: Path) -> None:
    """A reused record is the stored line's bytes and digest: never encoded again (a line another encoder wrote in
    this version's layout gives the same line in samples.jsonl)."""
    run_samples(make_tasks(2), CountingFn(), tmp_path, progress=False)
    log = tmp_path / "samples" / "run.jsonl"
    lines = log.read_bytes().splitlines()
    data = json.loads(lines[0])["record"]
    body = json.dumps({**data, "seconds": 1}, separators=(",", ":")).encode()   # re-encoded, it would say 1.0
    log.write_bytes(encode_line(body) + b"\n" + lines[1] + b"\n")
    summary = run_samples(make_tasks(2), CountingFn(), tmp_path, progress=False)
    assert summary.n_reused == 2
    assert summary.records["s00"].to_bytes() == body
    assert summary.records["s00"].digest() == hashlib.sha256(body).hexdigest()


def test_run_samples_gives_back_the_memory_its_inputs_freed_before_it_computes(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """#32: the records a run computes are Python's small objects, which never reuse the C heap's free memory; the
    heap is trimmed once, before the first sample (``pinbench.core.memory``)."""
    events: list[str] = []
    monkeypatch.setattr(runner, "release_free_memory", lambda: events.append("trim"))
    run_samples(make_tasks(2), lambda task: events.append(task["sample_id"]) or {"x": 1}, tmp_path, progress=False)
    assert events == ["trim", "s00", "s01"]


def test_release_free_memory_calls_malloc_trim_where_the_c_library_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """glibc's ``malloc_trim(0)``, harmless to call at any time; nothing where the C library has none."""
    assert memory.release_free_memory() is memory.release_free_memory() is (platform.libc_ver()[0] == "glibc")
    calls: list[int] = []
    monkeypatch.setattr(memory, "_malloc_trim", lambda: calls.append)
    assert memory.release_free_memory() and calls == [0]
    monkeypatch.setattr(memory, "_malloc_trim", lambda: None)
    assert not memory.release_free_memory()
