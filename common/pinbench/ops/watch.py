"""Progress of steps that run as subprocesses and write only to log files: one watcher for all of them.

Why: cosmos-framework generation and the PAI-Bench-C evaluator run for hours as child processes; the parent
only waits. The watcher shows what can be observed from outside (finished videos, the evaluator's per-task
outputs, downloaded bytes): a rich progress bar on a terminal, a plain line every minute in a log, and, when a
step fails, the last lines of its logs, so the reason is on screen and not only in a file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from pinbench.core.files import counted
from pinbench.core.progress import LOG_EVERY_S, Progress
from pinbench.core.provenance import redact

TAIL_LINES = 20
TTY_REFRESH_S = 2.0


def tail(path: Path, n: int = TAIL_LINES, max_bytes: int = 1 << 16) -> list[str]:
    """The last ``n`` lines of a text file (reading at most its last ``max_bytes``); [] when unreadable."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            data = fh.read()
    except OSError:
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    return lines[-n:]


def print_tails(logs: Sequence[Path], stream: IO[str] | None = None, n: int = TAIL_LINES) -> None:
    """The last lines of each log (tokens redacted), under a header naming the file."""
    out = stream or sys.stderr
    for log in logs:
        lines = tail(log, n)
        print(f"---- last {counted(len(lines), 'line')} of {log} ----", file=out)
        for line in lines:
            print(redact(line), file=out)
    out.flush()


def files_since(folder: Path, since: float, pattern: str = "*") -> int:
    """Files under ``folder`` matching ``pattern`` modified at or after ``since`` (an observation of progress)."""
    try:
        return sum(1 for p in folder.glob(pattern) if p.is_file() and p.stat().st_mtime >= since)
    except OSError:
        return 0


def bytes_under(folder: Path) -> int:
    """Total size of the files under ``folder`` (downloads in progress included)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name), follow_symlinks=False).st_size
            except OSError:
                continue
    return total


class Watcher:
    """Observe ``count()`` (units done, out of ``total`` when known) while a step runs: a thread polls it into
    the shared progress display (``pinbench.core.progress``), every ``TTY_REFRESH_S`` on a terminal and every
    ``log_every_s`` in a log (``<label>: 12/600 tasks (2%), 3.1/min, ETA 3h10m``), with one line at the end.
    ``detail()`` may add a short breakdown (e.g. per evaluator step). Use as a context manager around the wait.
    """

    def __init__(self, label: str, count: Callable[[], int], total: int | None = None, *, unit: str = "tasks",
                 detail: Callable[[], str] | None = None, stream: IO[str] | None = None,
                 log_every_s: float = LOG_EVERY_S, tty: bool | None = None) -> None:
        self.count = count
        self.progress = Progress(label, total, unit=unit, detail=detail, stream=stream, every_s=log_every_s, tty=tty)
        self._interval = TTY_REFRESH_S if self.progress.tty else log_every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def line(self) -> str:
        self.progress.done = self.count()
        return self.progress.line()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.progress.update(self.count())

    def __enter__(self) -> Watcher:
        self.progress.done = self.count()
        self.progress.__enter__()
        self._thread = threading.Thread(target=self._loop, name=f"watch {self.progress.label}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.progress.done = self.count()
        self.progress.__exit__(*exc)


def wait_watched(procs: Sequence[tuple[subprocess.Popen, Path]], watcher: Watcher,
                 stream: IO[str] | None = None) -> list[int]:
    """Wait for every process under ``watcher``; print the last lines of the log of each one that failed."""
    with watcher:
        codes = [proc.wait() for proc, _ in procs]
    failed = [log for (_, log), code in zip(procs, codes, strict=True) if code != 0]
    if failed:
        print_tails(failed, stream)
    return codes
