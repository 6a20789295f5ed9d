"""Progress of a step, shown one way everywhere: a rich bar on a terminal, plain lines in a log.

Why one implementation: the runner (samples pushed as they finish) and the watcher of subprocess steps
(cosmos-framework generation, the evaluator, downloads: units observed by polling) used to draw their own bars
and write their own lines. Here a step has a label, a count of units done out of a total when known, and named
counters beside it (done / reused / failed). On a terminal it is a rich bar, refreshed as it changes; elsewhere
(CI, container and Slurm logs) a line every ``every_s`` seconds and one when the step ends::

    generate edge: 12/600 tasks (2%), 3.1/min, ETA 3h10m, 3m52s elapsed [step 2 of 4]
    script 2: 5120/11222 samples (46%) (done 5100, reused 0, failed 20), 41202.0/min, ETA 9s, 7s elapsed
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

LOG_EVERY_S = 60.0


def duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def amount(value: float, unit: str) -> str:
    if unit != "bytes":
        return f"{int(value)}"
    for scale, name in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if value >= scale:
            return f"{value / scale:.1f} {name}"
    return f"{int(value)} B"


class Lines:
    """What a step says on stderr when it is no terminal (a log, CI, a pipe): each message a plain line, as a rich
    console there prints one (``print``, ``is_terminal``, ``file``: what the runner uses of one), without rich's
    imports (1.7 MB held for the process's life, 14 ms)."""

    is_terminal = False

    @property
    def file(self) -> IO[str]:
        return sys.stderr

    def print(self, text: str, **_: Any) -> None:
        print(text, file=sys.stderr, flush=True)


def stderr_console() -> Console | Lines:
    """A rich console on stderr where rich could take it for a terminal (a tty, or FORCE_COLOR or TTY_COMPATIBLE
    set: rich decides), plain ``Lines`` elsewhere."""
    if sys.stderr.isatty() or "FORCE_COLOR" in os.environ or "TTY_COMPATIBLE" in os.environ:
        from rich.console import Console

        return Console(stderr=True)
    return Lines()


class Progress:
    """One step's progress (see the module docstring); use as a context manager around the work.

    ``update(completed, **counters)`` sets the units completed (and any counters); ``detail`` adds a short
    breakdown to every line. ``enabled=False`` shows nothing (a step that should stay quiet); ``final_line=False``
    leaves the line at the end to the caller (the runner ends with its own summary). ``console``: a rich console
    to draw the bar on (default: one on ``stream``).
    """

    def __init__(self, label: str, total: int | None = None, *, unit: str = "samples", counters: tuple[str, ...] = (),
                 detail: Callable[[], str] | None = None, stream: IO[str] | None = None,
                 every_s: float = LOG_EVERY_S, tty: bool | None = None, enabled: bool = True,
                 final_line: bool = True, console: Any = None) -> None:
        self.label, self.total, self.unit, self.detail = label, total, unit, detail
        self.stream = stream or (console.file if console is not None else sys.stderr)
        self.every_s, self.enabled, self.final_line, self.console = every_s, enabled, final_line, console
        if tty is None:
            tty = console.is_terminal if console is not None else getattr(self.stream, "isatty", lambda: False)()
        self.tty = tty and enabled
        self.done = 0
        self.counters = dict.fromkeys(counters, 0)
        self._start = self._last_line = time.monotonic()
        self._bar: Any = None

    # ------------------------------------------------------------------------------------------ lines

    def line(self) -> str:
        elapsed = max(time.monotonic() - self._start, 1e-9)
        text = f"{self.label}: {amount(self.done, self.unit)}"
        if self.total is not None:
            text += f"/{amount(self.total, self.unit)}"
        if self.unit != "bytes":
            text += f" {self.unit}"
        if self.total:
            text += f" ({100 * self.done / self.total:.0f}%)"
        if self.counters:
            text += " (" + ", ".join(f"{name} {value}" for name, value in self.counters.items()) + ")"
        if self.unit == "bytes":
            text += f", {amount(self.done / elapsed, 'bytes')}/s"
        elif self.done:
            text += f", {60 * self.done / elapsed:.1f}/min"
        if self.total and 0 < self.done < self.total:
            text += f", ETA {duration(elapsed * (self.total - self.done) / self.done)}"
        text += f", {duration(elapsed)} elapsed"
        extra = self.detail() if self.detail is not None else ""
        return text + (f" [{extra}]" if extra else "")

    def update(self, completed: int, **counters: int) -> None:
        """The units completed so far (and counters): the bar moves; a plain line is written when it is time."""
        self.done = completed
        self.counters.update(counters)
        if not self.enabled:
            return
        if self._bar is not None:
            self._draw()
        elif time.monotonic() - self._last_line >= self.every_s:
            self._last_line = time.monotonic()
            print(self.line(), file=self.stream, flush=True)

    def _draw(self) -> None:
        progress, task = self._bar
        shown = ", ".join(f"{name} {value}" for name, value in self.counters.items())
        extra = self.detail() if self.detail is not None else ""
        description = self.label + (f" ({shown})" if shown else "") + (f" [{extra}]" if extra else "")
        progress.update(task, completed=self.done, description=description)

    # ---------------------------------------------------------------------------------------- context

    def __enter__(self) -> Progress:
        self._start = self._last_line = time.monotonic()
        if self.tty:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
            from rich.progress import Progress as Bar

            bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("ETA"), TimeRemainingColumn(), console=self.console or Console(file=self.stream),
                      transient=False)
            bar.start()
            self._bar = (bar, bar.add_task(self.label, total=self.total, completed=self.done))
            self._draw()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._draw()
            self._bar[0].stop()
            self._bar = None
        elif self.enabled and self.final_line and (exc[0] is None or self.done):  # a failure before any unit
            print(self.line(), file=self.stream, flush=True)  # keeps its own error as the last line
