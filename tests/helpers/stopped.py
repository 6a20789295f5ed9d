"""A process stood still where it is, for a test to look at what it has written so far."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def stop(proc: subprocess.Popen) -> None:
    """SIGSTOP, and wait until Linux says the process stands still (the signal is delivered asynchronously)."""
    proc.send_signal(signal.SIGSTOP)
    while proc.poll() is None and not _still(proc.pid):
        time.sleep(0.001)


def stop_pid(pid: int) -> None:
    """``stop`` for a process this one did not start (a Slurm job's): one that has ended already is left be."""
    try:
        os.kill(pid, signal.SIGSTOP)
        while not _still(pid):
            time.sleep(0.001)
    except (ProcessLookupError, FileNotFoundError):
        pass


def _still(pid: int) -> bool:
    """Stopped, traced or a zombie, as /proc says."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] in ("T", "t", "Z")
