"""core/processes.py: a child waited for without Popen's wait lock, killed on its time limit and on any exception."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pinbench.core import processes
from pinbench.core.rundir import Terminated, terminate_as_exit


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_run_gives_the_code_and_both_outputs_past_a_pipe_s_buffer() -> None:
    code = "import sys; sys.stdout.write('x' * 200000); sys.stderr.write('caf\\u00e9 \\udcff'[:5]); sys.exit(3)"
    done = processes.run([sys.executable, "-c", code], 30)
    assert (done.returncode, len(done.stdout), done.stderr) == (3, 200000, "café ")


def test_run_kills_and_reaps_a_child_past_its_time_limit(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    with pytest.raises(subprocess.TimeoutExpired):
        processes.run(["bash", "-c", f"echo $$ > {pid_file}; exec sleep 100"], 0.5)
    assert not _alive(int(pid_file.read_text()))


def test_sigterm_while_run_waits_kills_the_child_and_ends_as_terminated(tmp_path: Path) -> None:
    """``Terminated`` raised in the wait goes on up, the child killed and reaped on the way (not left running)."""
    pid_file = tmp_path / "pid"
    with pytest.raises(Terminated), terminate_as_exit():   # the sleep: SIGTERM once Popen() has returned
        processes.run(["bash", "-c", f"echo $$ > {pid_file}; sleep 0.5; kill -TERM $PPID; exec sleep 100"], 30)
    assert not _alive(int(pid_file.read_text()))


def test_a_program_that_cannot_be_run_is_an_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        processes.run([str(tmp_path / "missing")], 5)
