"""Progress of stages that run as subprocesses and write only to log files: one watcher for all of them.

Why: cosmos-framework generation and the PAI-Bench-C evaluator run for hours as child processes; the parent
only waits. The watcher shows what can be observed from outside (finished videos, the evaluator's per-task
outputs, downloaded bytes): a rich progress bar on a terminal, a plain line every minute in a log, and, when a
stage fails, the last lines of its logs, so the reason is on screen and not only in a file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from pinbench.core.provenance import redact

TAIL_LINES = 20
LOG_EVERY_S = 60.0
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
        print(f"---- last {len(lines)} line(s) of {log} ----", file=out)
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


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def _amount(value: float, unit: str) -> str:
    if unit != "bytes":
        return f"{int(value)}"
    for scale, name in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if value >= scale:
            return f"{value / scale:.1f} {name}"
    return f"{int(value)} B"


class Watcher:
    """Observe ``count()`` (units done, out of ``total`` when known) while a stage runs.

    On a terminal: a rich bar refreshed every ``TTY_REFRESH_S``; otherwise a plain line every ``log_every_s``
    (``<stage>: 12/600 tasks (2%), 3.1/min, ETA 3h10m``) and one at the end. ``detail()`` may add a short
    breakdown (e.g. per evaluator step). Use as a context manager around the wait.
    """

    def __init__(self, stage: str, count: Callable[[], int], total: int | None = None, *, unit: str = "tasks",
                 detail: Callable[[], str] | None = None, stream: IO[str] | None = None,
                 log_every_s: float = LOG_EVERY_S, tty: bool | None = None) -> None:
        self.stage, self.count, self.total, self.unit, self.detail = stage, count, total, unit, detail
        self.stream = stream or sys.stderr
        self.log_every_s = log_every_s
        self.tty = self.stream.isatty() if tty is None else tty
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = time.monotonic()
        self._bar: Any = None

    # --------------------------------------------------------------------------------------- lines

    def line(self) -> str:
        done = self.count()
        elapsed = max(time.monotonic() - self._start, 1e-9)
        text = f"{self.stage}: {_amount(done, self.unit)}"
        if self.total:
            text += f"/{_amount(self.total, self.unit)}"
        if self.unit != "bytes":
            text += f" {self.unit}"
        if self.total:
            text += f" ({100 * done / self.total:.0f}%)"
        if self.unit == "bytes":
            text += f", {_amount(done / elapsed, 'bytes')}/s"
        elif done:
            text += f", {60 * done / elapsed:.1f}/min"
        if self.total and 0 < done < self.total:
            text += f", ETA {_duration(elapsed * (self.total - done) / done)}"
        text += f", {_duration(elapsed)} elapsed"
        if self.detail is not None:
            extra = self.detail()
            if extra:
                text += f" [{extra}]"
        return text

    def _loop(self) -> None:
        interval = TTY_REFRESH_S if self.tty else self.log_every_s
        while not self._stop.wait(interval):
            if self._bar is not None:
                self._update_bar()
            else:
                print(self.line(), file=self.stream, flush=True)

    def _update_bar(self) -> None:
        progress, task = self._bar
        extra = self.detail() if self.detail is not None else ""
        progress.update(task, completed=self.count(), description=f"{self.stage}" + (f" [{extra}]" if extra else ""))

    # ------------------------------------------------------------------------------------ context

    def __enter__(self) -> Watcher:
        self._start = time.monotonic()
        if self.tty:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), TimeRemainingColumn(), console=Console(file=self.stream),
                                transient=False)
            progress.start()
            self._bar = (progress, progress.add_task(self.stage, total=self.total, completed=self.count()))
        self._thread = threading.Thread(target=self._loop, name=f"watch {self.stage}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._bar is not None:
            self._update_bar()
            self._bar[0].stop()
        elif exc[0] is None or self.count():  # a stage that failed before doing anything leaves its error alone
            print(self.line(), file=self.stream, flush=True)


def wait_watched(procs: Sequence[tuple[subprocess.Popen, Path]], watcher: Watcher,
                 stream: IO[str] | None = None) -> list[int]:
    """Wait for every process under ``watcher``; print the last lines of the log of each one that failed."""
    with watcher:
        codes = [proc.wait() for proc, _ in procs]
    failed = [log for (_, log), code in zip(procs, codes, strict=True) if code != 0]
    if failed:
        print_tails(failed, stream)
    return codes
