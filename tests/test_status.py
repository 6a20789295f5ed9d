"""pinbench status without a cluster: shard manifests, done / failed / pending from the records, Slurm's answers.

The Slurm answers parsed here are lines a real slurmctld (22.05, Debian 12) printed for an array job; the
live path is covered in test_slurm_cluster.py.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
from loose_task import LooseTask

from pinbench.core import files, shard_manifest
from pinbench.core.config import MAX_SHARDS, Shard
from pinbench.core.runner import MISSING_ERROR, StepLog, merge_samples, run_samples, stand_in, write_records
from pinbench.core.shard_manifest import read_manifests, write_manifest
from pinbench.core.store import encode_line, record_bytes
from pinbench.ops import slurm
from pinbench.ops.status import RunStatus, exit_code, render, run_status
from pinbench.ops.submit import Submission, append_submission, last_submission

TASKS = [LooseTask(f"s{i}", x=i) for i in range(7)]


def _square(task: Mapping) -> dict:
    if task["x"] == 4:
        raise ValueError("x=4 is unlucky")
    return {"y": task["x"] ** 2}


class Boom(BaseException):
    """Stands in for a kill: escapes run_samples like SIGTERM's SystemExit would."""


def _crash_after_first(task: Mapping) -> dict:
    if task["x"] > 2:
        raise Boom()
    return {"y": task["x"] ** 2}


def _layout(out: Path) -> None:
    """Shard 0 of 3 complete, shard 1 complete with one failure, shard 2 killed after its first sample."""
    run_samples(TASKS, _square, out, shard=Shard(0, 3), progress=False)
    run_samples(TASKS, _square, out, shard=Shard(1, 3), progress=False)
    with pytest.raises(Boom):
        run_samples(TASKS, _crash_after_first, out, shard=Shard(2, 3), progress=False)


def test_status_never_loads_the_docker_sdk(tmp_path: Path) -> None:
    """``pinbench status`` is polled (a CI loop): the docker SDK was 94 ms of its 144 ms of imports,
    for a command that never asks the engine anything."""
    _layout(tmp_path)
    code = ("import sys\nfrom pinbench.cli import main\n"
            f"try:\n    main(['status', {str(tmp_path)!r}])\nexcept SystemExit:\n    pass\n"
            "print('DOCKER', sorted(m for m in sys.modules if m.split('.')[0] in ('docker', 'requests')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "samples    7 tasks: 5 done, 1 failed, 0 missing, 1 pending" in out and "DOCKER []" in out, out


def test_manifests_name_every_task_and_say_whether_the_process_finished(tmp_path: Path) -> None:
    _layout(tmp_path)
    manifests = {m.index: m for m in read_manifests(tmp_path)}
    assert set(manifests) == {0, 1, 2} and all(m.count == 3 for m in manifests.values())
    assert manifests[1].sample_ids == tuple(t["sample_id"] for t in TASKS)
    assert manifests[1].owned() == [1, 4] and manifests[2].owned(0) == [0, 3, 6]
    assert manifests[0].finished and manifests[0].summary == {"total": 3, "done": 3, "reused": 0, "failed": 0}
    assert manifests[2].finished is None and manifests[2].summary is None  # killed


def test_status_counts_done_failed_and_pending_per_shard(tmp_path: Path) -> None:
    _layout(tmp_path)
    status = run_status(tmp_path, ask_slurm=False)
    by_shard = {s.index: s for s in status.shards}
    assert by_shard[0].done == ["s0", "s3", "s6"] and not by_shard[0].failed and not by_shard[0].pending
    assert by_shard[1].done == ["s1"] and by_shard[1].failed == [("s4", "ValueError: x=4 is unlucky")]
    assert by_shard[2].done == ["s2"] and by_shard[2].pending == ["s5"] and not by_shard[2].finished
    assert status.counts == {"done": 5, "failed": 1, "missing": 0, "pending": 1} and status.n_tasks == 7
    text = render(status)
    assert "s4 (shard 1/3): ValueError: x=4 is unlucky" in text and "pending samples: s5 (shard 2/3)" in text
    assert "scorecard  not written yet" in text


def test_a_folder_of_manifests_alone_has_them_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no scorecard, identity file or submissions, the check that the folder is a run directory read every
    shard manifest, and the status read them all again. Counted with a counting test double of ``read_manifests``
    put where both read it."""
    from pinbench.core import rundir
    from pinbench.ops import status as status_module

    _layout(tmp_path)
    reads = []

    def counting_read_manifests(out_dir: Path) -> list:   # test double: the real reader, counted
        reads.append(out_dir)
        return read_manifests(out_dir)

    monkeypatch.setattr(rundir, "read_manifests", counting_read_manifests)
    monkeypatch.setattr(status_module, "read_manifests", counting_read_manifests)
    assert run_status(tmp_path, ask_slurm=False).counts == {"done": 5, "failed": 1, "missing": 0, "pending": 1}
    assert reads == [tmp_path]


def test_a_run_whose_shards_all_finished_without_a_scorecard_says_how_to_write_it(tmp_path: Path) -> None:
    """--skip-scoring or every shard done: "not written yet" alone left the reader waiting for nothing."""
    from pinbench.ops.status import RunStatus, ShardStatus

    done = ShardStatus(0, 1, done=["s0"], started=True, finished_at="2026-12-06T10:00:00+00:00")
    status = RunStatus(tmp_path, None, [done], 1, 1, {}, "", None)
    assert render(status).endswith("scorecard  not written yet: every shard has finished; the same pinbench run "
                                   "without --shard and --skip-scoring scores what they stored and writes it")
    going = RunStatus(tmp_path, None, [dataclasses.replace(done, finished_at=None, pending=["s1"])], 1, 2, {}, "", None)
    assert render(going).endswith("scorecard  not written yet")


def test_a_shard_that_did_not_finish_is_running_stopped_or_unknown_by_its_lock(tmp_path: Path) -> None:
    """A shard killed by hand showed as "started" next to one still running: only Slurm's column told them apart,
    and a shard run by hand has none."""
    from pinbench.core.rundir import LOCK_DIR, this_process

    _layout(tmp_path)
    lock = tmp_path / LOCK_DIR / "shard-2-of-3.lock"

    def process() -> str:
        status = run_status(tmp_path, ask_slurm=False)
        row = next(line.split() for line in render(status).splitlines() if line.startswith("2/3 "))
        return row[5]

    assert process() == "stopped"   # no lock: its process has ended
    lock.parent.mkdir()
    lock.write_text(json.dumps(this_process()))
    assert process() == "running"
    lock.write_text(json.dumps({**this_process(), "pid": 2**22 + 1}))
    assert process() == "stopped"   # a lock left by a killed process
    lock.write_text(json.dumps({**this_process(), "host": "another-node"}))
    assert process() == "started"   # cannot be checked from here
    assert {s.index: s.process for s in run_status(tmp_path, ask_slurm=False).shards} == {
        0: "finished", 1: "finished", 2: "started"}


def test_a_shard_still_in_an_earlier_step_is_running_by_its_lock(tmp_path: Path) -> None:
    """Status judges the newest step's manifests: a shard still generating (its lock held) while another had
    moved on to scoring showed "not started", as the lock was checked only for shards with a manifest there; and
    still did when a run on another host held it."""
    from pinbench.core.rundir import LOCK_DIR, this_process

    run_samples(TASKS, _square, tmp_path / "gen", shard=Shard(0, 2), step="generate", progress=False)
    with pytest.raises(Boom):   # shard 1 is still generating: a manifest of that step, not finished
        run_samples(TASKS, _crash_after_first, tmp_path / "gen", shard=Shard(1, 2), step="generate", progress=False)
    run_samples(TASKS, _square, tmp_path, shard=Shard(0, 2), progress=False)   # shard 0 went on to score

    def processes() -> dict[int, str]:
        return {s.index: s.process for s in run_status(tmp_path, ask_slurm=False).shards}

    assert processes() == {0: "finished", 1: "not started"}   # no lock: nothing holds it
    lock = tmp_path / LOCK_DIR / "shard-1-of-2.lock"
    lock.parent.mkdir(exist_ok=True)
    lock.write_text(json.dumps(this_process()))
    assert processes() == {0: "finished", 1: "running"}
    assert exit_code(run_status(tmp_path, ask_slurm=False)) == 0   # live: plain status exited 2, as for an ended run
    lock.write_text(json.dumps({**this_process(), "pid": 2**22 + 1}))
    assert processes() == {0: "finished", 1: "not started"}   # a lock left by a killed process
    assert exit_code(run_status(tmp_path, ask_slurm=False)) == 2
    # a run on another node holds it: "not started" sent the user to start a second run of that shard
    lock.write_text(json.dumps({**this_process(), "host": "gpu-node-7"}))
    assert processes() == {0: "finished", 1: "locked on host gpu-node-7"}
    assert "\n1/2    0     0       0        3        locked on host gpu-node-7  -\n" in render(
        run_status(tmp_path, ask_slurm=False))
    shard = run_status(tmp_path, ask_slurm=False).shards[1]   # a job Slurm saw end left the lock: its state says
    shard.slurm = slurm.JobState("7", 1, "FAILED", exit_code="1:0")
    assert shard.process == "ended (no manifest)"


def test_a_started_shard_without_a_lock_is_what_slurm_says_of_its_job(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A started shard with no lock here (on a node-local disk, or removed by hand) read "stopped" beside its job's
    RUNNING (a real slurmctld 22.05's array task); and, Slurm not asked or not reachable, "stopped" below a line saying
    its job may still run. Slurm's word where it has one; where it has none, only what is known."""
    from pinbench.core.rundir import LOCK_DIR, this_process

    _layout(tmp_path)   # shard 2 of 3 started, not finished, no lock
    append_submission(tmp_path, Submission(submitted="2026-01-01T00:00:00+00:00", recipe="toy", recipe_version="1",
                                           checkpoint="c", mode="fixture", shards=3, container="none",
                                           jobs=[{"phase": "shards", "sharded": True, "job_id": "7", "script": "x"}],
                                           command="pinbench submit toy --shards 3"))

    def asked(state: str) -> tuple[dict[str, list[slurm.JobState]], str]:
        return {"7": [slurm.JobState("7", 0, "COMPLETED", exit_code="0:0", node="n1"),
                      slurm.JobState("7", 1, "COMPLETED", exit_code="0:0", node="n1"),
                      slurm.JobState("7", 2, state, exit_code="0:0" if state == "RUNNING" else "1:0", node="n2")]}, ""

    running = run_status(tmp_path, asked=asked("RUNNING"))
    assert _rows(render(running))["2/3"][-2:] == ["running (Slurm)", "RUNNING on n2"] and exit_code(running) == 0
    assert [s.process for s in run_status(tmp_path, asked=asked("PENDING")).shards][2] == "pending (Slurm)"
    ended = run_status(tmp_path, asked=asked("FAILED"))
    assert _rows(render(ended))["2/3"][-2] == "stopped" and exit_code(ended) == 2
    lock = tmp_path / LOCK_DIR / "shard-2-of-3.lock"   # a lock a killed process left: Slurm's word still wins
    lock.parent.mkdir()
    lock.write_text(json.dumps({**this_process(), "pid": 2**22 + 1}))
    assert [s.process for s in run_status(tmp_path, asked=asked("RUNNING")).shards][2] == "running (Slurm)"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))   # no scontrol here
    for status, why in [(run_status(tmp_path, ask_slurm=False), "Slurm not asked"),
                        (run_status(tmp_path), "Slurm not reachable")]:
        text = render(status)
        assert _rows(text)["2/3"][-2:] == [f"no lock ({why})", "-"] and "jobs of this run may still be running" in text
        assert "stopped" not in text and exit_code(status) == 2
    assert [s.process for s in run_status(tmp_path, ask_slurm=False).shards][:2] == ["finished", "finished"]
    (tmp_path / "slurm" / "submissions.jsonl").unlink()   # run by hand: no job to ask of, and no lock is stopped
    assert [s.process for s in run_status(tmp_path).shards][2] == "stopped"


def test_a_shard_locked_on_another_host_is_what_slurm_says_once_its_job_ended(tmp_path: Path) -> None:
    """review91: a started shard whose lock another host holds read "started" after Slurm said its job FAILED
    (one with no manifest read Slurm's ended word); and, Slurm not asked or not reachable, a submitted shard with no
    manifest read "not started" though its job may have been running it."""
    from pinbench.core.rundir import LOCK_DIR, this_process

    _layout(tmp_path)
    append_submission(tmp_path, Submission(submitted="2026-01-01T00:00:00+00:00", recipe="toy", recipe_version="1",
                                           checkpoint="c", mode="fixture", shards=3, container="none",
                                           jobs=[{"phase": "shards", "sharded": True, "job_id": "7", "script": "x"}],
                                           command="pinbench submit toy --shards 3"))
    lock = tmp_path / LOCK_DIR / "shard-2-of-3.lock"
    lock.parent.mkdir()
    lock.write_text(json.dumps({**this_process(), "host": "another-node"}))

    def process(state: str) -> str:
        asked = ({"7": [slurm.JobState("7", 2, state, exit_code="1:0")]}, "")
        return run_status(tmp_path, asked=asked).shards[2].process

    assert process("RUNNING") == "started" and process("FAILED") == "stopped" and process("TIMEOUT") == "stopped"
    assert run_status(tmp_path, ask_slurm=False).shards[2].process == "started"
    # a shard whose job has written no manifest yet: not asked, it is not known not to be started
    fresh = tmp_path / "fresh"
    append_submission(fresh, Submission(submitted="2026-01-01T00:00:00+00:00", recipe="toy", recipe_version="1",
                                        checkpoint="c", mode="fixture", shards=2, container="none",
                                        jobs=[{"phase": "shards", "sharded": True, "job_id": "8", "script": "x"}],
                                        command="pinbench submit toy --shards 2"))
    assert [s.process for s in run_status(fresh, ask_slurm=False).shards] == ["no manifest (Slurm not asked)"] * 2
    assert [s.process for s in run_status(fresh, asked=({"8": [slurm.JobState("8", 0, "PENDING")]}, "")).shards] == [
        "not started", "unknown"]


def test_plain_status_exits_0_while_a_shard_run_by_hand_is_running(tmp_path: Path) -> None:
    """Shards run by hand (no Slurm) hold their own locks, not run.lock: plain ``status`` exited 2 while one still
    ran, as for a run that had ended partial (review70). A shard's lock another host holds is not known live."""
    from pinbench.core.rundir import LOCK_DIR, this_process
    from pinbench.ops import status as status_module

    _layout(tmp_path)
    lock = tmp_path / LOCK_DIR / "shard-2-of-3.lock"
    lock.parent.mkdir()
    lock.write_text(json.dumps(this_process()))
    assert status_module.exit_code(run_status(tmp_path, ask_slurm=False)) == 0
    for holder in ({**this_process(), "pid": 2**22 + 1}, {**this_process(), "host": "another-node"}):
        lock.write_text(json.dumps(holder))
        assert status_module.exit_code(run_status(tmp_path, ask_slurm=False)) == 2


def test_a_live_unsharded_run_is_running_from_its_first_moment(tmp_path: Path) -> None:
    """An unsharded run holds ``run.lock``, not ``shard-0-of-1.lock``: status called every live plain run
    "stopped"; and before its first manifest (importing, making fixture data) it called the directory "not a run
    directory" though its identity file and live lock were there."""
    from pinbench.core.rundir import IDENTITY_FILE, LOCK_DIR, this_process

    (tmp_path / IDENTITY_FILE).write_text("{}")
    lock = tmp_path / LOCK_DIR / "run.lock"
    lock.parent.mkdir()
    lock.write_text(json.dumps(this_process()))
    early = render(run_status(tmp_path, ask_slurm=False))
    assert "(no shard manifest yet" in early and "\n0/1    0     0       0        0        running" in early
    with pytest.raises(Boom):
        run_samples(TASKS, _crash_after_first, tmp_path, progress=False)   # started, not finished: a live run
    lock.write_text(json.dumps(this_process()))   # the run's exit released its lock: the live run holds it again
    assert [s.process for s in run_status(tmp_path, ask_slurm=False).shards] == ["running"]
    lock.unlink()
    assert [s.process for s in run_status(tmp_path, ask_slurm=False).shards] == ["stopped"]

def test_a_live_run_past_its_last_finished_step_is_writing_its_scorecard_not_waiting_for_one(tmp_path: Path) -> None:
    """A plain run whose step has finished its manifest but which is still live (scoring next, computing the
    scorecard, the report) was told "every shard has finished; the same pinbench run ... writes it", a second run
    asked for while the first was writing it (seen with mind's fixture between generation and scoring)."""
    from pinbench.core.rundir import IDENTITY_FILE, LOCK_DIR, this_process

    (tmp_path / IDENTITY_FILE).write_text("{}")
    run_samples(TASKS, _square, tmp_path, progress=False)   # its one step, finished
    lock = tmp_path / LOCK_DIR / "run.lock"
    lock.parent.mkdir(exist_ok=True)
    lock.write_text(json.dumps(this_process()))   # the run itself is still live
    assert render(run_status(tmp_path, ask_slurm=False)).endswith(
        f"scorecard  not written yet: the run holding {lock} is still running")
    lock.unlink()   # it ended without one (--skip-scoring): the way to write it
    ended = render(run_status(tmp_path, ask_slurm=False))
    assert ended.endswith("the same pinbench run without --shard and --skip-scoring scores what they stored and "
                          "writes it")


def test_a_run_lock_held_on_another_host_is_not_said_to_be_running(tmp_path: Path) -> None:
    """A run.lock another host holds was reported "still running": from here it cannot be checked."""
    from pinbench.core.rundir import IDENTITY_FILE, LOCK_DIR

    (tmp_path / IDENTITY_FILE).write_text("{}")
    run_samples(TASKS, _square, tmp_path, progress=False)
    lock = tmp_path / LOCK_DIR / "run.lock"
    lock.parent.mkdir(exist_ok=True)
    lock.write_text(json.dumps({"pid": 4242, "host": "gpu-node-7", "process_start": "1"}))
    assert render(run_status(tmp_path, ask_slurm=False)).endswith(
        f"scorecard  not written yet: {lock} is held by a run on host gpu-node-7 (pid 4242), which cannot be "
        "checked from here: see there whether it still runs")


def test_a_record_for_another_input_is_pending_not_done(tmp_path: Path) -> None:
    _layout(tmp_path)
    log = tmp_path / "samples" / "shard-0-of-3.jsonl"
    s0, _, s6 = (json.loads(line)["record"] for line in log.read_text().splitlines())
    s0["input_hash"] = "0" * 64  # stored for an older task input (a sound line, with its digest)
    broken = encode_line(record_bytes(s6)).replace(b'"y":36', b'"y":37')  # fails its digest
    log.write_bytes(encode_line(record_bytes(s0)) + broken)  # and s3's line is gone
    shard0 = run_status(tmp_path, ask_slurm=False).shards[0]
    assert shard0.done == [] and shard0.pending == ["s0", "s3", "s6"]


def test_a_shard_that_never_started_is_judged_from_another_shards_manifest(tmp_path: Path) -> None:
    run_samples(TASKS, _square, tmp_path, shard=Shard(0, 2), progress=False)
    status = run_status(tmp_path, ask_slurm=False)
    assert [s.started for s in status.shards] == [True, False]
    assert status.shards[1].pending == ["s1", "s3", "s5"]
    assert "not started" in render(status)


@pytest.mark.parametrize("chunk", [4 << 20, 37], ids=["one-read", "lines-cut-across-reads"])
def test_the_samples_a_merge_counted_missing_are_missing_not_pending(tmp_path: Path, chunk: int,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Shard 1 of 2 never ran and the merge wrote its samples' stand-ins (is_stand_in): the scorecard counts them
    missing, status said pending. A stand-in of another input than the manifest's is still pending. The file is read
    a few MiB at a time: here also 37 bytes at a time, every line cut across reads."""
    monkeypatch.setattr(files, "JSONL_CHUNK", chunk)
    run_samples(TASKS, _square, tmp_path, shard=Shard(0, 2), progress=False)
    records = merge_samples([tmp_path], TASKS)
    write_records([r if r.sample_id != "s5" else dataclasses.replace(r, input_hash="0" * 64) for r in records],
                  tmp_path / "samples.jsonl")
    status = run_status(tmp_path, ask_slurm=False)
    assert status.counts == {"done": 3, "failed": 1, "missing": 2, "pending": 1}
    assert [sid for sid, _ in status.shards[1].missing] == ["s1", "s3"] and status.shards[1].pending == ["s5"]
    text = render(status)
    assert "7 tasks: 3 done, 1 failed, 2 missing, 1 pending" in text
    assert f"  s1 (shard 1/2): {MISSING_ERROR}" in text and "failed samples:\n  s4 (shard 0/2)" in text


def test_shards_that_own_no_task_are_one_line_and_every_task_is_counted(tmp_path: Path) -> None:
    """7 tasks in the most shards a run accepts: a row per shard that owns a task or ran (one past the last task
    that ran is still listed), the others one line (it was 4,000,000 rows); the counts still hold every task."""
    run_samples(TASKS, _square, tmp_path, shard=Shard(0, MAX_SHARDS), progress=False)
    run_samples(TASKS, _square, tmp_path, shard=Shard(MAX_SHARDS - 1, MAX_SHARDS), progress=False)
    status = run_status(tmp_path, ask_slurm=False)
    assert [s.index for s in status.shards] == [*range(7), MAX_SHARDS - 1] and status.n_shards == MAX_SHARDS
    assert status.counts == {"done": 1, "failed": 0, "missing": 0, "pending": 6} and status.n_tasks == 7
    assert [(s.started, s.finished) for s in status.shards[::7]] == [(True, True), (True, True)]
    text = render(status)
    assert f"{MAX_SHARDS - 8} other shards of {MAX_SHARDS} own no task and have not started" in text
    assert "7 tasks: 1 done, 0 failed, 0 missing, 6 pending" in text and len(text.splitlines()) < 30


def test_the_layout_of_the_last_submission_is_shown(tmp_path: Path) -> None:
    run_samples(TASKS, _square, tmp_path, shard=Shard(0, 2), progress=False)  # an older layout
    append_submission(tmp_path, Submission(submitted="2026-01-01T00:00:00+00:00", recipe="toy", recipe_version="1",
                                           checkpoint="c", mode="fixture", shards=3, container="none",
                                           jobs=[{"phase": "shards", "sharded": True, "job_id": "7", "script": "x"}],
                                           command="pinbench submit toy --shards 3"))
    status = run_status(tmp_path, ask_slurm=False)
    assert len(status.shards) == 3 and status.n_tasks is None  # no shard of 3 has started yet
    assert "no shard manifest yet" in render(status)
    assert "recipe     toy 1 (c, fixture), 3 shards, container none" in render(status)
    assert last_submission(tmp_path).job_ids == ["7"]
    fixture = dataclasses.replace(last_submission(tmp_path), checkpoint="fixture")   # said once: "(fixture, fixture)"
    assert fixture.which == "fixture"


def test_a_failed_job_is_named_with_its_log(tmp_path: Path) -> None:
    """Array tasks failing before their first sample (their node could not read the input folder, on a real Slurm)
    showed 0 samples everywhere and "no shard manifest yet"; the reason was in logs status never named."""
    append_submission(tmp_path, Submission(submitted="2026-01-01T00:00:00+00:00", recipe="toy", recipe_version="1",
                                           checkpoint="c", mode="fixture", shards=2, container="none",
                                           jobs=[{"phase": "shards", "sharded": True, "job_id": "7", "script": "x"},
                                                 {"phase": "finish", "sharded": False, "job_id": "8", "script": "y"}],
                                           command="pinbench submit toy --shards 2"))
    logs = tmp_path / "slurm" / "logs"
    logs.mkdir()
    for name in ("shards-7_0.log", "shards-7_1.log", "finish-8.log"):
        (logs / name).write_text("PROBLEM inputs: /data/videos: videos directory not found\n")
    asked = ({"7": [slurm.JobState("7", 1, "FAILED", exit_code="2:0"), slurm.JobState("7", 0, "TIMEOUT", "", "0:15")],
              "8": [slurm.JobState("8", None, "CANCELLED", exit_code="0:15")]}, "")
    text = render(run_status(tmp_path, asked=asked))
    block = text.split("failed jobs (each log says why):\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert block == [f"  job 7_0 (shards) TIMEOUT exit 0:15: log {logs / 'shards-7_0.log'}",
                     f"  job 7_1 (shards) FAILED exit 2:0: log {logs / 'shards-7_1.log'}",
                     f"  job 8 (finish) CANCELLED exit 0:15: log {logs / 'finish-8.log'}"]
    (logs / "finish-8.log").unlink()   # cancelled while it pended: sbatch never opened its log
    text = render(run_status(tmp_path, asked=asked))
    assert "  job 8 (finish) CANCELLED exit 0:15: no log (it never started)" in text
    # every job has ended: no manifest is coming ("yet" was said after such a run had ended, and of CameraBench's
    # fixture, whose array has nothing per sample, beside its complete scorecard)
    assert "(no shard manifest: every job has ended, and no shard reached a per-sample step)" in text
    asked[0]["8"] = [slurm.JobState("8", None, "PENDING", "Dependency")]
    assert "(no shard manifest yet: a shard writes one" in render(run_status(tmp_path, asked=asked))


def _rows(text: str) -> dict[str, list[str]]:
    """The shard table's rows by shard, split on the runs of spaces between its columns."""
    return {cells[0]: cells[1:] for line in text.splitlines()
            if (cells := [c for c in line.split("  ") if c.strip()]) and "/" in cells[0]
            and cells[0].split("/")[0].strip().isdigit()}


def test_a_shard_without_a_manifest_says_what_slurm_knows_of_it(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """CameraBench's fixture array writes no manifest: its COMPLETED tasks read "not started". A pending task
    cancelled alone drops out of scontrol and squeue (a real slurmctld 22.05 kept no record of it), and its row
    read "-" beside the same "not started"; one cancelled with its pending array is CANCELLED with no node."""
    append_submission(tmp_path, Submission(submitted="2026-01-01T00:00:00+00:00", recipe="toy", recipe_version="1",
                                           checkpoint="c", mode="fixture", shards=4, container="none",
                                           jobs=[{"phase": "shards", "sharded": True, "job_id": "7", "script": "x"}],
                                           command="pinbench submit toy --shards 4"))
    asked = ({"7": [slurm.JobState("7", 0, "COMPLETED", exit_code="0:0", node="localhost"),
                    slurm.JobState("7", 2, "CANCELLED", exit_code="0:0"),
                    slurm.JobState("7", 3, "PENDING", "Priority")]}, "")
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))   # no sacct, as on many small clusters
    rows = _rows(render(run_status(tmp_path, asked=asked)))
    assert [row[-2:] for row in rows.values()] == [["ended (no manifest)", "COMPLETED on localhost"],
                                                   ["unknown", "UNKNOWN (not in squeue; no sacct)"],
                                                   ["cancelled before it started", "CANCELLED"],
                                                   ["not started", "PENDING (Priority)"]]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sacct").write_text("#!/bin/sh\n")
    (bin_dir / "sacct").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert _rows(render(run_status(tmp_path, asked=asked)))["1/4"][-1] == "UNKNOWN (not in squeue)"


@pytest.mark.parametrize(("finished_at", "since"), [("2026-02-01T00:00:00+00:00", True), (None, False),
                                                     ("yesterday", False), (1767225600, False)])
def test_a_shard_finished_since_the_submission_by_its_manifests_time(finished_at: object, since: bool) -> None:
    """A manifest's time is as the file says: one that is no ISO time (edited by hand) is not since the submission,
    where status would stop on the parser's error naming no file."""
    from pinbench.ops.status import ShardStatus, _finished_since

    shard = ShardStatus(1, 3, finished_at=finished_at)  # type: ignore[arg-type]
    assert _finished_since(shard, "2026-01-01T00:00:00+00:00") is since


def test_a_job_that_ended_with_failed_samples_is_named_apart_from_failed_jobs(tmp_path: Path) -> None:
    """Exit 2 after a shard ran to its end with a failed sample (shard 1 of ``_layout``), or after the finish wrote a
    scorecard counting failed samples, was listed under "failed jobs" beside crashes. Exit 2 alone says no more than
    "incomplete" (a bad input exits 2): shard 2, which never finished, and a scorecard or a shard's manifest from
    before the submission leave their jobs failed."""
    from toy_runs import write_toy_run

    from pinbench.core.scorecard import MetricSpec

    out = write_toy_run(tmp_path, "run", [MetricSpec("f1", "mean", direction="higher")],
                        failed={"t03": "ValueError: decode"})
    _layout(out)
    logs = out / "slurm" / "logs"
    logs.mkdir(parents=True)
    for name in ("shards-7_1.log", "shards-7_2.log", "finish-8.log"):
        (logs / name).write_text("...\n")

    def block(submitted: str) -> list[str]:
        (out / "slurm" / "submissions.jsonl").unlink(missing_ok=True)
        append_submission(out, Submission(
            submitted=submitted, recipe="toy", recipe_version="1", checkpoint="c", mode="fixture", shards=3,
            container="none", jobs=[{"phase": "shards", "sharded": True, "job_id": "7", "script": "x"},
                                    {"phase": "finish", "sharded": False, "job_id": "8", "script": "y"}],
            command="pinbench submit toy --shards 3"))
        asked = ({"7": [slurm.JobState("7", 0, "COMPLETED", exit_code="0:0"),
                        slurm.JobState("7", 1, "FAILED", exit_code="2:0"), slurm.JobState("7", 2, "FAILED", "", "2:0")],
                  "8": [slurm.JobState("8", None, "FAILED", exit_code="2:0")]}, "")
        text = render(run_status(out, asked=asked))
        return [line for part in text.split("\n\n") if part.startswith(("ended with", "failed jobs"))
                for line in part.splitlines()]

    assert block("2026-01-01T00:00:00+00:00") == [
        "ended with failed samples (the job ran to its end; its failed samples are listed below):",
        f"  job 7_1 (shards) FAILED exit 2:0: log {logs / 'shards-7_1.log'}",
        f"  job 8 (finish) FAILED exit 2:0: log {logs / 'finish-8.log'}",
        "failed jobs (each log says why):",
        f"  job 7_2 (shards) FAILED exit 2:0: log {logs / 'shards-7_2.log'}"]
    # its scorecard and shard 1's manifest are older: an earlier submission's (a job of this one exiting 2 at once
    # for a bad input was listed as ended with failed samples by shard 1's old manifest)
    assert block("2999-01-01T00:00:00+00:00") == [
        "failed jobs (each log says why):",
        f"  job 7_1 (shards) FAILED exit 2:0: log {logs / 'shards-7_1.log'}",
        f"  job 7_2 (shards) FAILED exit 2:0: log {logs / 'shards-7_2.log'}",
        f"  job 8 (finish) FAILED exit 2:0: log {logs / 'finish-8.log'}"]


def test_wait_asks_slurm_each_look_and_reads_the_samples_once(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, every look of ``--wait`` (each 5 s) read every record of the store to count samples it never printed:
    3.5 CPU s a look on a 112,220-sample run; and the status shown at the end came from a fourth question to Slurm.
    Slurm here is a test double: running, running, then completed."""
    from pinbench.ops import status as status_module

    _layout(tmp_path)
    append_submission(tmp_path, Submission(submitted="2026-01-01T00:00:00+00:00", recipe="toy", recipe_version="1",
                                           checkpoint="c", mode="fixture", shards=3, container="none",
                                           jobs=[{"phase": "shards", "sharded": True, "job_id": "7", "script": "x"}],
                                           command="pinbench submit toy --shards 3"))
    looks = ["RUNNING", "RUNNING", "COMPLETED"]   # and COMPLETED from then on
    asked = []
    monkeypatch.setattr(slurm, "missing_client", lambda names: "")
    monkeypatch.setattr(slurm, "job_states", lambda ids: asked.append(1) or {"7": [slurm.JobState(
        "7", 0, looks.pop(0) if len(looks) > 1 else looks[0], exit_code="0:0")]})
    reads = []
    real_read = status_module.newest_records
    monkeypatch.setattr(status_module, "newest_records", lambda *a, **k: reads.append(1) or real_read(*a, **k))
    status, code = status_module.wait(tmp_path, poll_s=0.01)
    assert code == 0 and not status.live and len(reads) == 1
    assert len(asked) == 3   # the look that saw it end is the status shown: Slurm is not asked once more
    assert status.counts == {"done": 5, "failed": 1, "missing": 0, "pending": 1}


@pytest.mark.parametrize("poll_s", [1e10, 1e300])
def test_wait_with_a_poll_past_the_longest_sleep_looks_again_without_a_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, poll_s: float) -> None:
    """``--poll 1e10`` (317 years) or ``1e300`` is finite, so it was taken; after the first look that saw a job
    running, ``time.sleep`` ended the wait with an OverflowError traceback. Slurm is a test double:
    running, then completed; a sleep the real one could take returns at once."""
    from pinbench.ops import status as status_module

    _layout(tmp_path)
    append_submission(tmp_path, Submission(submitted="2026-01-01T00:00:00+00:00", recipe="toy", recipe_version="1",
                                           checkpoint="c", mode="fixture", shards=3, container="none",
                                           jobs=[{"phase": "shards", "sharded": True, "job_id": "7", "script": "x"}],
                                           command="pinbench submit toy --shards 3"))
    looks = ["RUNNING", "COMPLETED"]
    monkeypatch.setattr(slurm, "missing_client", lambda names: "")
    monkeypatch.setattr(slurm, "job_states", lambda ids: {"7": [slurm.JobState(
        "7", 0, looks.pop(0) if len(looks) > 1 else looks[0], exit_code="0:0")]})
    real_sleep = time.sleep
    slept = []
    monkeypatch.setattr(status_module.time, "sleep",
                        lambda s: slept.append(s) or real_sleep(0 if s <= 9e9 else s))   # up to 9e9 s it takes
    status, code = status_module.wait(tmp_path, poll_s=poll_s)
    assert code == 0 and not status.live and len(slept) == 1


@pytest.mark.parametrize(("option", "value"), [("--poll", "nan"), ("--poll", "inf"), ("--poll", "0"),
                                                ("--timeout", "nan"), ("--timeout", "-1")])
def test_wait_refuses_a_poll_or_timeout_that_is_not_a_finite_number_of_seconds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str) -> None:
    """Before: time.sleep(nan) failed after the first look, sleep(inf) raised a traceback, a NaN deadline never
    came; now one line naming the option, before Slurm is asked anything."""
    from pinbench import cli

    append_submission(tmp_path, Submission(submitted="2026-01-01T00:00:00+00:00", recipe="toy", recipe_version="1",
                                           checkpoint="c", mode="fixture", shards=2, container="none",
                                           jobs=[{"phase": "shards", "sharded": True, "job_id": "7", "script": "x"}],
                                           command="pinbench submit toy --shards 2"))
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["status", str(tmp_path), "--wait", option, value])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and err.startswith(f"error: {option} ") and "\n" not in err, err


def test_not_a_run_directory_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a run directory"):
        run_status(tmp_path / "nope", ask_slurm=False)
    with pytest.raises(ValueError, match="no shard manifests, submissions or scorecard"):
        run_status(tmp_path, ask_slurm=False)
    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / "0-of-2.json").write_text("{}")
    with pytest.raises(ValueError, match="unreadable shard manifest"):
        run_status(tmp_path, ask_slurm=False)
    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / "submissions.jsonl").write_text("[1,2]\n")
    with pytest.raises(ValueError, match="unreadable submission record"):
        last_submission(tmp_path)


def _submitted(out: Path, **fields) -> dict:
    record = {"submitted": "2026-01-01T00:00:00+00:00", "recipe": "toy", "recipe_version": "1", "checkpoint": "c",
              "mode": "fixture", "shards": 2, "container": "none", "command": "pinbench submit toy --shards 2",
              "jobs": [{"phase": "shards", "sharded": True, "job_id": "7", "script": "x"}], **fields}
    (out / "slurm").mkdir(exist_ok=True)
    (out / "slurm" / "submissions.jsonl").write_text(json.dumps(record) + "\n")
    return record


@pytest.mark.parametrize(("fields", "why"), [
    ({"shards": 10 ** 9}, "shards"), ({"shards": 0}, "shards"), ({"shards": True}, "shards"),
    ({"jobs": [{"phase": "shards"}]}, "jobs"), ({"jobs": "7"}, "jobs"), ({"recipe": 3}, "recipe")])
def test_a_submission_record_of_the_wrong_shape_is_one_line(tmp_path: Path, fields: dict, why: str) -> None:
    """Before, a record claiming 10**9 shards hung ``pinbench status`` building a row per shard, 0 shards was shown as
    a layout without shards, and a job without its id ended in KeyError."""
    run_samples(TASKS, _square, tmp_path, shard=Shard(0, 2), progress=False)
    _submitted(tmp_path, **fields)
    with pytest.raises(ValueError, match=rf"submissions.jsonl:1: unreadable submission record \({why}"):
        run_status(tmp_path, ask_slurm=False)


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_submissions_file_or_scorecard_that_is_no_regular_file_never_hangs_status(tmp_path: Path,
                                                                                   kind: str) -> None:
    """Before, a FIFO at ``slurm/submissions.jsonl`` or ``scorecard.json`` hung ``pinbench status`` (and ``--wait``)
    reading it, a folder there ended it with "[Errno 21] Is a directory", and a scorecard.json that is no scorecard
    was shown as "not written yet"."""
    import os

    run_samples(TASKS, _square, tmp_path, shard=Shard(0, 2), progress=False)
    (tmp_path / "slurm").mkdir()
    for path in (tmp_path / "slurm" / "submissions.jsonl", tmp_path / "scorecard.json"):
        os.mkfifo(path) if kind == "fifo" else path.mkdir()
    with pytest.raises(ValueError, match=r"submissions.jsonl: (a FIFO|is a directory)"):
        run_status(tmp_path, ask_slurm=False)
    (tmp_path / "slurm" / "submissions.jsonl").rmdir() if kind == "folder" else (
        tmp_path / "slurm" / "submissions.jsonl").unlink()
    line = render(run_status(tmp_path, ask_slurm=False)).splitlines()[-1]
    assert line.startswith(f"scorecard  unreadable: {tmp_path / 'scorecard.json'}: "), line
    (tmp_path / "scorecard.json").rmdir() if kind == "folder" else (tmp_path / "scorecard.json").unlink()
    (tmp_path / "scorecard.json").write_text("[]")
    line = render(run_status(tmp_path, ask_slurm=False)).splitlines()[-1]
    assert line.startswith("scorecard  unreadable: ") and "not written yet" not in line, line


def test_the_scorecard_line_does_not_call_samples_ok_whose_metric_failed(tmp_path: Path) -> None:
    """The golden scorecard: 4 sample records ok, seg/miou failed for each of them; the line said "4/4 ok, 0 failed"."""
    import shutil

    shutil.copyfile(Path(__file__).parent / "golden" / "scorecard.json", tmp_path / "scorecard.json")
    line = render(run_status(tmp_path, ask_slurm=False)).splitlines()[-1]
    assert line.startswith("scorecard  partial: 4/4 samples stored, 0 failed, 0 missing, but 1 metric failed for "
                           "4 samples; written "), line


def test_shard_manifests_that_disagree_on_the_tasks_are_one_line(tmp_path: Path) -> None:
    """Before, a manifest listing fewer tasks than its layout's newest gave per-shard counts that added up to neither
    ("7 tasks: 5 done, 1 failed, 0 pending")."""
    run_samples(TASKS, _square, tmp_path, shard=Shard(0, 2), progress=False)
    run_samples(TASKS, _square, tmp_path, shard=Shard(1, 2), progress=False)
    path = tmp_path / "shards" / "0-of-2.json"
    data = json.loads(path.read_text())
    data["samples"] = data["samples"][:3]
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=rf"^{path}: lists 3 tasks, .*1-of-2.json 7: the shards of one run "
                                         "disagree"):
        run_status(tmp_path, ask_slurm=False)


# ----------------------------------------------------------------------------------- Slurm's answers


# `scontrol show job -o 3` on the local test cluster: a pending array, then the same array after it ran.
PENDING = ("JobId=3 ArrayJobId=3 ArrayTaskId=0-2 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A "
           "Priority=4294901757 Nice=0 Account=(null) QOS=(null) JobState=PENDING Reason=None Dependency=(null) "
           "Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=01:00:00 "
           "NodeList= NumNodes=1 NumCPUs=1")
ENDED = [
    "JobId=3 ArrayJobId=3 ArrayTaskId=2 JobName=wrap JobState=FAILED Reason=NonZeroExitCode Dependency=(null) "
    "ExitCode=2:0 RunTime=00:00:02 NodeList=localhost BatchHost=localhost",
    "JobId=5 ArrayJobId=3 ArrayTaskId=1 JobName=wrap JobState=CANCELLED Reason=None ExitCode=0:15 "
    "NodeList=localhost",
    "JobId=4 ArrayJobId=3 ArrayTaskId=0 JobName=wrap JobState=COMPLETED Reason=None ExitCode=0:0 NodeList=localhost",
]


def test_scontrol_records_become_one_state_per_array_task() -> None:
    pending = slurm.parse_scontrol("3", PENDING)
    assert [(s.array_task, s.state) for s in pending] == [(0, "PENDING"), (1, "PENDING"), (2, "PENDING")]
    assert not any(s.ended for s in pending) and pending[0].describe() == "PENDING"
    ended = {s.array_task: s for line in ENDED for s in slurm.parse_scontrol("3", line)}
    assert ended[2].exit_status == 2 and ended[2].describe() == "FAILED exit 2:0 on localhost"
    assert ended[1].exit_status is None  # killed by a signal
    assert ended[0].exit_status == 0 and ended[0].describe() == "COMPLETED on localhost"
    held = slurm.parse_scontrol("9", "JobId=9 JobName=f JobState=PENDING Reason=Dependency ExitCode=0:0 NodeList=")
    assert held[0].array_task is None and held[0].describe() == "PENDING (Dependency)"


@pytest.mark.parametrize(("text", "indices"), [
    ("0-2", [0, 1, 2]), ("1,3", [1, 3]), ("0-9:3", [0, 3, 6, 9]), ("0-3%2", [0, 1, 2, 3]), ("[4-5]", [4, 5]),
    ("7", [7]), ("", []),
])
def test_array_index_expressions_expand(text: str, indices: list[int]) -> None:
    assert slurm.expand_indices(text) == indices


def test_a_refusal_is_the_last_error_line_without_the_program_prefix() -> None:
    proc = subprocess.CompletedProcess(["sbatch"], 1, "", "sbatch: error: invalid partition specified: nope\n"
                                       "sbatch: error: Batch job submission failed: Invalid partition name specified\n")
    assert slurm.refusal(proc) == "Batch job submission failed: Invalid partition name specified"
    proc = subprocess.CompletedProcess(["sbatch"], 1, "",
                                       "allocation failure: More processors requested than permitted\n")
    assert slurm.refusal(proc) == "allocation failure: More processors requested than permitted"


def test_without_slurm_clients_status_says_so_and_submit_refuses(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    run_samples(TASKS, _square, tmp_path, shard=Shard(0, 1), progress=False)
    append_submission(tmp_path, Submission(submitted="2026-01-01T00:00:00+00:00", recipe="toy", recipe_version="1",
                                           checkpoint="c", mode="fixture", shards=1, container="none",
                                           jobs=[{"phase": "shards", "sharded": True, "job_id": "7", "script": "x"}],
                                           command="x"))
    status = run_status(tmp_path)
    assert status.slurm_note == "Slurm not reachable: scontrol not found on PATH (run this on a Slurm login node)"
    assert slurm.missing_client() == "sbatch, scontrol, scancel not found on PATH (run this on a Slurm login node)"


def test_a_step_that_keeps_its_records_in_its_own_folder_is_found(tmp_path: Path) -> None:
    """CameraBench's Script 1 runs into script1/: its manifests and records sit there."""
    run_samples(TASKS, _square, tmp_path / "script1", shard=Shard(0, 2), progress=False)
    run_samples(TASKS[:1], _square, tmp_path, progress=False)  # an unsharded step at the top (another layout)
    status = run_status(tmp_path, ask_slurm=False)  # no submission: the newest layout, the 0-of-1 one
    assert len(status.shards) == 1 and status.n_tasks == 1
    append_submission(tmp_path, Submission(submitted="2026-01-01T00:00:00+00:00", recipe="toy", recipe_version="1",
                                           checkpoint="c", mode="fixture", shards=2, container="none",
                                           jobs=[{"phase": "a", "sharded": True, "job_id": "7", "script": "x"}],
                                           command="x"))
    shards = run_status(tmp_path, ask_slurm=False).shards
    assert shards[0].done == ["s0", "s2", "s6"] and shards[0].failed == [("s4", "ValueError: x=4 is unlucky")]
    assert shards[1].pending == ["s1", "s3", "s5"]


# ------------------------------------------------------- a step recorded outside run_samples (StepLog)

_WRITE_SAMPLES = shard_manifest._write_samples
GROUPED = [LooseTask(f"{m}.t{j}", m=m, j=j) for m in ("a", "b") for j in range(3)]


def test_a_step_log_gives_status_its_shards(tmp_path: Path) -> None:
    log = StepLog(GROUPED, tmp_path / "gen", step="generate", shard=Shard(0, 2))
    assert [t.sample_id for t in log.mine] == ["a.t0", "a.t2", "b.t1"]
    log.record("a.t0", {"sha256": "0" * 64})
    log.record("a.t2", None, error="generation failed:\n no output")
    status = run_status(tmp_path, ask_slurm=False)                  # running: two recorded, the rest pending
    first, second = status.shards
    assert (first.done, first.failed, first.pending) == (["a.t0"], [("a.t2", "generation failed: no output")],
                                                         ["b.t1"])
    assert (first.started, first.finished, second.started, second.pending) == (True, False, False,
                                                                                ["a.t1", "b.t0", "b.t2"])
    with pytest.raises(ValueError, match=r"1 sample of this shard never recorded \(e.g. 'b.t1'\)"):
        log.close()
    log.record("b.t1", {"sha256": "1" * 64}, reused=True)
    summary = log.close()
    assert (summary.n_total, summary.n_done, summary.n_reused, summary.n_failed) == (3, 1, 1, 1)
    manifest = read_manifests(tmp_path)[0]
    assert manifest.finished and manifest.summary == {"total": 3, "done": 1, "reused": 1, "failed": 1}
    assert manifest.owned(1) == [1, 3, 5]


def test_a_step_log_refuses_what_it_cannot_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = StepLog(GROUPED, tmp_path, step="generate", shard=Shard(1, 2))
    with pytest.raises(ValueError, match="'a.t0' is not one of this shard's tasks"):
        log.record("a.t0", {"sha256": "0" * 64})
    with pytest.raises(ValueError, match="a result or an error, not both or neither"):
        log.record("a.t1", {"x": 1}, error="no")
    with pytest.raises(ValueError, match="a result or an error, not both or neither"):
        log.record("a.t1", None)
    monkeypatch.setenv("HF_TOKEN", "hf_secretsecretsecret")
    record = log.record("a.t1", None, error="fetch with hf_secretsecretsecret failed")
    assert record.error == "fetch with *** failed"
    assert "secret" not in (tmp_path / "samples" / "shard-1-of-2.jsonl").read_text()
    assert log.record("b.t0", {"bad": float("nan")}).result == {"bad": None}   # cleaned as run_samples does


@pytest.mark.parametrize(("block", "entries"), [(1 << 20, 4096), (5, 2), (12, 1)])
def test_a_manifest_is_the_compact_json_of_its_fields_and_each_call_writes_its_own_samples(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int, entries: int) -> None:
    """#32: a call's last manifest keeps the samples list its first one wrote (not encoded twice); the file stays
    exactly json.dumps of its fields, and another call's list (another start) is never taken for it. The list is
    written and copied a few entries, a block of bytes, at a time (an entry's key across two blocks counted once)."""
    encoded = []
    monkeypatch.setattr(shard_manifest, "_write_samples", lambda *ls: encoded.append(ls) or _WRITE_SAMPLES(*ls))
    monkeypatch.setattr(shard_manifest, "_BLOCK", block)
    monkeypatch.setattr(shard_manifest, "_ENTRIES", entries)
    ids, hashes = ["s0", "é \"sample_id\":1", "s2"], ["a" * 64, "b" * 64, "c" * 64]
    for summary in (None, {"total": 3}):
        path = write_manifest(tmp_path, 0, 1, step="score", sample_ids=ids, input_hashes=hashes, started="t",
                              summary=summary)
        text = path.read_text()
        data = json.loads(text)
        assert text == json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"
        assert data["summary"] == summary and data["samples"] == [
            {"sample_id": sid, "input_hash": h} for sid, h in zip(ids, hashes, strict=True)]
    assert len(encoded) == 1   # the last write copied the first one's list
    write_manifest(tmp_path, 0, 1, step="score", sample_ids=ids, input_hashes=hashes, started="t")
    other = write_manifest(tmp_path, 0, 1, step="score", sample_ids=["t0"], input_hashes=["d" * 64], started="u",
                           summary={"total": 1})
    assert [s["sample_id"] for s in json.loads(other.read_text())["samples"]] == ["t0"]


@pytest.mark.parametrize("edit", ["another process", "finished", "a sample less"])
def test_the_last_manifest_of_a_call_copies_only_its_own_first_one(tmp_path: Path, edit: str) -> None:
    """#32: the samples list is copied only from the manifest this call wrote first (same start, same process,
    unfinished, as many samples); anything else there is replaced by the call's own lists."""
    ids, hashes = ["s0", "s1"], ["a" * 64, "b" * 64]
    path = write_manifest(tmp_path, 0, 1, step="score", sample_ids=ids, input_hashes=hashes, started="t")
    data = json.loads(path.read_text())
    if edit == "another process":
        data["pid"] += 1
    elif edit == "finished":
        data["finished"] = "t"
    data["samples"] = data["samples"][:1] if edit == "a sample less" else [{**s, "input_hash": "f" * 64}
                                                                            for s in data["samples"]]
    path.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    write_manifest(tmp_path, 0, 1, step="score", sample_ids=ids, input_hashes=hashes, started="t",
                   summary={"total": 2})
    assert [(s["sample_id"], s["input_hash"]) for s in json.loads(path.read_text())["samples"]] == [
        ("s0", "a" * 64), ("s1", "b" * 64)]


def test_the_store_alone_says_which_samples_were_never_computed(tmp_path: Path) -> None:
    """A run in flight (no samples.jsonl yet) stored a never-generated sample as its stand-in (Run.store) and an ok one
    with a value never computed: missing and partly missing, in the scorecard's words; they were failed and done."""
    log = StepLog(GROUPED, tmp_path, step="score")
    never = stand_in("a.t0", "", None, ["generation: no run stored a/t0.mp4"]).error
    log.record("a.t0", None, error=never)
    log.record("a.t1", {"edge": 0.5, "seg": None, "never_computed": {"seg": "generation: no run stored seg/t1.mp4"}})
    status = run_status(tmp_path, ask_slurm=False)
    (shard,) = status.shards
    assert (shard.missing, shard.done, shard.failed) == ([("a.t0", never)], ["a.t1"], [])
    assert shard.partly_missing == [("a.t1", "missing: generation: no run stored seg/t1.mp4")]
    assert "6 tasks: 1 done (1 partly missing), 0 failed, 1 missing, 4 pending" in render(status)


def test_a_run_of_one_task_says_one_task(tmp_path: Path) -> None:
    log = StepLog(GROUPED[:1], tmp_path, step="score")
    log.record("a.t0", {"edge": 0.5, "seg": 0.25})
    assert "samples    1 task: 1 done, 0 failed, 0 missing, 0 pending" in render(run_status(tmp_path, ask_slurm=False))


def test_status_judges_each_sample_by_its_newest_readable_uncontradicted_record(tmp_path: Path) -> None:
    """What status reads of the store, record by record, is what ``read_store`` would give: the newest readable
    record of the sample's input, two ok records of one input and code whose results differ both left unread."""
    run_samples(TASKS, _square, tmp_path, progress=False)
    log = tmp_path / "samples" / "run.jsonl"
    rows = {row["sample_id"]: row for row in (json.loads(line)["record"] for line in log.read_text().splitlines())}
    again = {
        "s0": {**rows["s0"], "result": {"y": 1}},   # contradicts the first: neither is read
        "s1": {**rows["s1"], "seconds": 9.0},   # the same result, another timing: stands
        "s2": {**rows["s2"], "result": {"y": 4}, "seconds": "soon"},   # unreadable as a record: the older one counts
        "s3": {**rows["s3"], "status": "failed", "result": None, "error": "RuntimeError: lost"},   # newer, failed
        "s4": {**rows["s4"], "status": "ok", "result": {"y": 16}, "error": None, "traceback": None},  # retried, ok
    }
    with log.open("ab") as fh:
        fh.writelines(encode_line(record_bytes(record)) for record in again.values())
    (shard,) = run_status(tmp_path, ask_slurm=False).shards
    assert shard.done == ["s1", "s2", "s4", "s5", "s6"] and shard.pending == ["s0"]
    assert shard.failed == [("s3", "RuntimeError: lost")]


def _status_and_its_peak(run_dir: Path) -> tuple[RunStatus, int]:
    """``run_status`` of ``run_dir`` and the most memory it held at once (tracemalloc)."""
    import tracemalloc

    tracemalloc.start()
    try:
        return run_status(run_dir, ask_slurm=False), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_status_streams_the_store_instead_of_holding_it(tmp_path: Path) -> None:
    """Status held every record of the store (the log's bytes, each line's, each record's parsed copy): 494 MiB
    peak for a 10x CameraBench run of 112,220 samples. Now it reads a record at a time and keeps what it shows:
    here its peak (tracemalloc) stays below half of the log's size; it was three times the log's size."""
    bulky = [LooseTask(f"b{i}", x=i) for i in range(2000)]
    run_samples(bulky, lambda task: {"y": str(task["x"]) * 4000}, tmp_path, progress=False)
    size = (tmp_path / "samples" / "run.jsonl").stat().st_size
    status, peak = _status_and_its_peak(tmp_path)
    assert status.counts["done"] == 2000 and size > 8_000_000
    assert peak < size / 2, (peak, size)


def test_status_keeps_only_the_stand_ins_of_the_merged_samples(tmp_path: Path) -> None:
    """A sample not done is looked up among the finish's stand-ins (``samples.jsonl``): status held every merged
    record to keep a few (257 MiB peak RSS for the 10x CameraBench run with its store cut to 1,000 records, against
    131 MiB with all done). Now it reads the file a few MiB at a time and keeps only the stand-ins: here its peak
    (tracemalloc) is below the file's size; it was three times the file's size."""
    bulky = [LooseTask(f"b{i}", x=i) for i in range(2000)]
    run_samples(bulky, lambda task: {"y": str(task["x"]) * 4000}, tmp_path, progress=False)
    merged = merge_samples([tmp_path], bulky)
    write_records(merged, tmp_path / "samples.jsonl")
    (tmp_path / "samples" / "run.jsonl").write_bytes(b"")   # every sample pending: its stand-in is looked up
    size = (tmp_path / "samples.jsonl").stat().st_size
    status, peak = _status_and_its_peak(tmp_path)
    assert status.counts["pending"] == 2000 and size > 8_000_000
    assert peak < size, (peak, size)


def test_more_failed_samples_than_listed_are_counted_by_reason(tmp_path: Path) -> None:
    """25 failed samples: the block counts them by reason before naming the first 20 (it named 20 and '... and 5
    more', whatever they failed for)."""
    def fail(task: Mapping) -> dict:
        n = int(task["x"])
        raise ValueError(f"invalid rollout: v{n}.mp4: not a regular file" if n % 5 else "decoder crashed")

    run_samples([LooseTask(f"s{i:02d}", x=i) for i in range(25)], fail, tmp_path, progress=False)
    text = render(run_status(tmp_path, ask_slurm=False))
    block = text[text.index("failed samples:\n"):].splitlines()
    assert block[1:3] == ["  by reason: 20 x ValueError: invalid rollout: <file>: not a regular file",
                          "  by reason: 5 x ValueError: decoder crashed"]
    assert block[3].startswith("  s00 (shard 0/1): ") and block[23] == "  ... and 5 more"


@pytest.mark.parametrize(("failed", "finish", "code"), [
    ({"t03": "ValueError: decode"}, "FAILED", 2),    # every job ended, the scorecard partial: a gate must not pass
    ({"t03": "ValueError: decode"}, "RUNNING", 0),   # the finish job still runs: a progress view
    ({}, "COMPLETED", 0),                            # ended, complete
])
def test_plain_status_exits_2_once_nothing_is_live_and_the_scorecard_is_not_complete(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        failed: dict, finish: str, code: int) -> None:
    """Plain ``status`` exited 0 for a run whose jobs had all ended with a partial scorecard (a failed finish job),
    where ``--wait``, ``check`` and ``diff`` exit 2: a CI script gating on it passed the partial run."""
    from toy_runs import write_toy_run

    from pinbench import cli
    from pinbench.core.scorecard import MetricSpec
    from pinbench.ops import status as status_module

    out = write_toy_run(tmp_path, "run", [MetricSpec("f1", "mean", direction="higher")], failed=failed)
    append_submission(out, Submission(
        submitted="2026-01-01T00:00:00+00:00", recipe="toy", recipe_version="1", checkpoint="c", mode="fixture",
        shards=1, container="none", jobs=[{"phase": "shards", "sharded": True, "job_id": "7", "script": "x"},
                                          {"phase": "finish", "sharded": False, "job_id": "8", "script": "y"}],
        command="pinbench submit toy --shards 1"))
    ended = finish != "RUNNING"
    asked = ({"7": [slurm.JobState("7", 0, "COMPLETED", exit_code="0:0")],
              "8": [slurm.JobState("8", None, finish, exit_code=("2:0" if finish == "FAILED" else "0:0") if ended
                                   else "")]}, "")
    monkeypatch.setattr(status_module, "_slurm_states", lambda _submission: asked)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["status", str(out)])
    assert exit_info.value.code == code, capsys.readouterr()
    assert status_module.exit_code(run_status(out, asked=asked)) == code
    if failed:   # --no-slurm: no job is known live, and the scorecard is partial
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            cli.main(["status", str(out), "--no-slurm"])
        assert exit_info.value.code == 2
        # secrets74: it says that the jobs were not asked of and may still run (it said nothing of them)
        assert "Slurm not asked (--no-slurm); jobs of this run may still be running" in capsys.readouterr().out


def test_status_without_slurm_s_answer_says_the_jobs_may_still_run_and_tells_no_one_to_score_by_hand(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--no-slurm, or no Slurm client here: every shard finished and no scorecard read as a run left to score by
    hand ("the same pinbench run ... writes it") while the finish job may be queued or writing it, and nothing said
    that the jobs had not been asked of (secrets74). The exit code stays 2: no job is known live."""
    from pinbench.ops import status as status_module

    run_samples(TASKS, _square, tmp_path, shard=Shard(0, 1), progress=False)
    append_submission(tmp_path, Submission(submitted="2026-01-01T00:00:00+00:00", recipe="toy", recipe_version="1",
                                           checkpoint="c", mode="fixture", shards=1, container="none",
                                           jobs=[{"phase": "shards", "sharded": True, "job_id": "7", "script": "x"},
                                                 {"phase": "finish", "sharded": False, "job_id": "8", "script": "y"}],
                                           command="pinbench submit toy --shards 1"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    unreachable = "Slurm not reachable: scontrol not found on PATH (run this on a Slurm login node)"
    for status, note in [(run_status(tmp_path, ask_slurm=False), "Slurm not asked (--no-slurm)"),
                         (run_status(tmp_path), unreachable)]:
        lines = render(status).splitlines()
        assert status.slurm_note == note and f"{note}; jobs of this run may still be running" in lines
        assert lines[-1] == "scorecard  not written yet" and status_module.exit_code(status) == 2
        assert not any(word in line for line in lines for word in ("stopped", "abandoned"))
