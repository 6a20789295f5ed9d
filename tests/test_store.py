"""The sample store (pinbench.core.store) and the reuse rules of the runner on it.

Each property is proven here once, on the library: one log per writer, torn tails and edited lines recomputed
with a message, fsync at most once a second, the layout of 87e8f14 still read, and a record reused only by the
same inputs and the same implementation (recipe version, code digest, image), with the reason counted.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Mapping
from pathlib import Path

import pytest
from rich.console import Console

from pinbench.core import store
from pinbench.core.config import Implementation, Shard
from pinbench.core.runner import SampleRecord, input_hash, load_records, merge_samples, run_samples
from pinbench.core.store import LogWriter, log_name, read_store, record_bytes


def tasks(n: int) -> list[dict]:
    return [{"sample_id": f"s{i:02d}", "x": i} for i in range(n)]


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


def test_an_edited_record_fails_its_digest_and_is_recomputed_with_a_message(tmp_path: Path) -> None:
    run_samples(tasks(3), Square(), tmp_path, progress=False)
    log = tmp_path / "samples" / "run.jsonl"
    log.write_text(log.read_text().replace('"square":1}', '"square":7}'))  # a hand edit of s01's score
    assert read_store(tmp_path / "samples").problems == [
        f"{log}:2: the record of sample 's01' does not match its digest (changed after it was written)"]
    console = _quiet()
    again = Square()
    summary = run_samples(tasks(3), again, tmp_path, console=console)
    assert again.calls == ["s01"] and summary.records["s01"].result == {"square": 1}
    assert "recomputing, " in console.file.getvalue() and "does not match its digest" in console.file.getvalue()


def test_a_torn_last_line_is_cut_recomputed_and_the_log_stays_sound(tmp_path: Path, capfd) -> None:
    run_samples(tasks(3), Square(), tmp_path, progress=False)
    log = tmp_path / "samples" / "run.jsonl"
    whole = log.read_bytes()
    log.write_bytes(whole[: whole.rfind(b"\n", 0, len(whole) - 1) + 1] + whole[-40:-1])  # s02's line torn
    contents = read_store(tmp_path / "samples", own="run.jsonl")
    assert contents.problems == [f"{log}:3: a torn last record (the writer stopped mid-line)"]
    assert set(contents.records) == {"s00", "s01"}
    assert read_store(tmp_path / "samples").problems == []  # another writer may still be mid-line: not a problem
    again = Square()
    run_samples(tasks(3), again, tmp_path, progress=False)
    assert again.calls == ["s02"]
    assert "cutting a torn last record" in capfd.readouterr().err
    assert read_store(tmp_path / "samples").problems == []
    assert len(log.read_text().splitlines()) == 3  # the torn bytes are gone, the new record has its own line


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
    changed[0] = {"sample_id": "s00", "x": 100}
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
