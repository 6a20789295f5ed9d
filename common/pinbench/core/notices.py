"""Work that takes long says what it is doing, so that a silent wait never looks like a hang.

Why a notice after a delay instead of a line per piece of work: most take a fraction of a second, and a line for
each would bury the results table; work still running after ``NOTICE_AFTER_S`` (2 s, or ``$PINBENCH_NOTICE_S``)
prints one line on stderr saying what it is doing, and when it ends, how long it took. Functions are marked with
:func:`announced`, so the work is named where it is defined.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from pinbench.core.options import finite_at_least_zero

NOTICE_AFTER_S = 2.0
ENV = "PINBENCH_NOTICE_S"

F = TypeVar("F", bound=Callable[..., Any])


def notice_after() -> float:
    """``$PINBENCH_NOTICE_S`` seconds, else ``NOTICE_AFTER_S``. ValueError naming the variable for a value that is no
    finite number of 0 or more: ``inf`` ended every notice's timer thread with a traceback, and words or ``nan`` were
    read silently as the default or as 0 (``pinbench`` checks it once when it starts)."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return NOTICE_AFTER_S
    seconds = finite_at_least_zero(text)
    if seconds is None:
        raise ValueError(f"${ENV}={text!r}: seconds before work says what it is doing must be a finite number, 0 or "
                         f"more (0: say all of it)")
    return min(seconds, threading.TIMEOUT_MAX)   # past a timer's longest wait (292 years) its thread raised


@contextmanager
def notice(what: str) -> Iterator[None]:
    """Say ``what ...`` on stderr when the block is still running after the notice delay, then how long it took."""
    said = threading.Event()

    def say() -> None:
        said.set()
        print(f"{what} ...", file=sys.stderr, flush=True)

    start, delay = time.monotonic(), notice_after()
    timer = threading.Timer(delay, say)
    timer.daemon = True
    if delay > 0:
        timer.start()
    else:  # every phase, said when it starts
        say()
    try:
        yield
    finally:
        timer.cancel()
        if timer.is_alive():
            timer.join()   # cancelled: it ends at once; no thread of a phase outlives it
        if said.is_set():
            print(f"{what}: done in {time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)


def announced(describe: Callable[..., str]) -> Callable[[F], F]:
    """Decorate a function whose call may take long; ``describe(*args, **kwargs)`` says what it does."""

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with notice(describe(*args, **kwargs)):
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
