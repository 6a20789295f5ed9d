"""A child process stood still where it is, for a test to look at what it has written so far."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path


def stop(proc: subprocess.Popen) -> None:
    """SIGSTOP, and wait until Linux says the process stands still (the signal is delivered asynchronously)."""
    proc.send_signal(signal.SIGSTOP)
    stat = Path(f"/proc/{proc.pid}/stat")
    while proc.poll() is None and stat.read_text().rpartition(")")[2].split()[0] not in ("T", "t", "Z"):
        time.sleep(0.001)
