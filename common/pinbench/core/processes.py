"""Child processes waited for without ``Popen``'s wait lock.

Why: Python 3.11's ``Popen.wait(timeout=...)`` and ``poll()`` take that lock without blocking, then enter the
``try`` that gives it back; Ctrl-C or SIGTERM's ``Terminated`` raised between the two left it taken, and the next
wait without a timeout (``subprocess.run``'s ``Popen.__exit__``, a stop's last wait) waited on it forever: a run
that neither Ctrl-C nor SIGTERM ended. Here an exception anywhere leaves nothing half done.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence


def exited(proc: subprocess.Popen, timeout_s: float) -> bool:
    """Whether ``proc`` has ended, waiting up to ``timeout_s`` for it; left for ``reap`` (``WNOWAIT``), so that
    signals sent after a False go to no other process that took its pid."""
    deadline, delay = time.monotonic() + timeout_s, 0.001
    while True:
        try:
            if proc.returncode is not None or os.waitid(os.P_PID, proc.pid,
                                                        os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:   # reaped
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.05)


def reap(proc: subprocess.Popen) -> int | None:
    """``proc``'s exit status, once it has ended or will (``exited``, a SIGKILL): waited for without the Popen's
    wait lock. None where it was reaped already and its status lost (an exception between that wait and its
    store)."""
    if proc.returncode is None:
        with contextlib.suppress(ChildProcessError):
            proc.returncode = os.waitstatus_to_exitcode(os.waitpid(proc.pid, 0)[1])
    return proc.returncode


def run(argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """``subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env)`` without the wait lock:
    its output goes to temporary files (no pipe to drain while waiting), and the child is killed and reaped on its
    time limit (``subprocess.TimeoutExpired``) or on any exception (Ctrl-C, ``Terminated``), which goes on up.
    Output is decoded as UTF-8, an invalid byte replaced. ``OSError`` where ``argv[0]`` cannot be run."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                env=None if env is None else dict(env))
        try:
            if not exited(proc, timeout_s):
                raise subprocess.TimeoutExpired(list(argv), timeout_s)
        finally:
            if not exited(proc, 0):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
            reap(proc)
        texts = []
        for file in (out, err):
            file.seek(0)
            texts.append(file.read().decode("utf-8", errors="replace"))
    code = -1 if proc.returncode is None else proc.returncode   # reaped by another, its status lost: a failure
    return subprocess.CompletedProcess(list(argv), code, *texts)
