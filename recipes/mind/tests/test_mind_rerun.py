"""A rerun keeps the official sources of the records it reuses, and the working directories of killed invocations
are reused or removed, each said on stderr."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pinbench.core.recipe import get_recipe
from pinbench_recipes.mind import steps
from pinbench_recipes.mind.official import KILLED, WorkDir, invocation_state, new_work_dir
from pinbench_recipes.mind.tests.test_mind_steps import FakeProcessPy, plan

RECIPE = get_recipe("mind")


def _card(out: Path) -> dict:
    return json.loads((out / "scorecard.json").read_text())


def _dead_owner(work: WorkDir) -> None:
    """Make ``work`` look like the directory of an invocation whose process is gone (a pid that has exited)."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    owner = json.loads(work.owner.read_text())
    owner.update(pid=int(proc.stdout), process_start=None)
    work.owner.write_text(json.dumps(owner))
    work.finished.unlink(missing_ok=True)

def test_a_killed_invocation_with_nothing_reusable_is_removed_and_said(tmp_path: Path, layout, runtime,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    pre, tasks = plan(layout)
    steps.run_official(tmp_path, pre, tasks, runtime=runtime, score=FakeProcessPy(pre))   # run-001, ended
    killed = new_work_dir(tmp_path / "official")                                         # run-002, killed early
    killed.plan.write_text(json.dumps({"samples": {tasks[0].sample_id: "0" * 64}}))
    _dead_owner(killed)
    assert invocation_state(killed) == KILLED
    live = new_work_dir(tmp_path / "official")                                           # run-003, this process
    capsys.readouterr()
    fake = FakeProcessPy(pre)
    steps.run_official(tmp_path, pre, tasks, runtime=runtime, score=fake)
    assert fake.calls == []                                                 # all reused from run-001
    assert not killed.root.exists() and live.root.exists() and (tmp_path / "official" / "run-001").exists()
    assert (f"official: removed {killed.root}, an invocation killed before it ended, with nothing reusable "
            "(no Result.json)") in capsys.readouterr().err


def test_a_killed_invocation_with_reusable_scores_is_reused_kept_and_said(tmp_path: Path, layout, runtime,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    pre, tasks = plan(layout)
    steps.run_official(tmp_path, pre, tasks, runtime=runtime, score=FakeProcessPy(pre))
    work = WorkDir(tmp_path / "official" / "run-001")
    _dead_owner(work)                           # killed after process.py wrote its Result.json, before our records
    capsys.readouterr()
    fake = FakeProcessPy(pre)
    official = steps.run_official(tmp_path, pre, tasks, runtime=runtime, score=fake)
    assert fake.calls == [] and all(i.ok for i in official.samples.values())
    assert work.finished.is_file() and sorted(p.name for p in (tmp_path / "official").iterdir()) == ["run-001"]
    assert (f"official: reused {len(tasks)} samples from {work.root}, an invocation killed before it ended; kept "
            "as their source") in capsys.readouterr().err


def test_a_live_invocations_directory_is_left_alone(tmp_path: Path, layout, runtime) -> None:
    """Another shard of this run (a live process) is writing its directory: neither reused nor removed."""
    pre, tasks = plan(layout)
    other = new_work_dir(tmp_path / "official")          # owned by this (live) process, no plan yet
    steps.run_official(tmp_path, pre, tasks, runtime=runtime, score=FakeProcessPy(pre))
    assert other.root.exists() and not other.finished.exists()
    shutil.rmtree(other.root)


def test_the_import_summary_is_read_only_from_a_regular_file_of_its_own_directory(tmp_path: Path) -> None:
    """What a rerun names as a work directory's source: its imported.json when that is a JSON object written for
    this very directory; anything else (a FIFO, which read_text would wait on; another directory's) is None."""
    import os
    import threading

    work = WorkDir(tmp_path / "run-001")
    work.root.mkdir()
    work.imported.write_text(json.dumps({"work_dir": str(work.root), "n_expected": 7}))
    assert steps._imported(work) == {"work_dir": str(work.root), "n_expected": 7}
    work.imported.write_text(json.dumps({"work_dir": str(tmp_path / "elsewhere"), "n_expected": 7}))
    assert steps._imported(work) is None
    work.imported.unlink()
    os.mkfifo(work.imported)
    found: list = []
    reader = threading.Thread(target=lambda: found.append(steps._imported(work)), daemon=True)
    reader.start()
    reader.join(timeout=20)
    assert found == [None]
