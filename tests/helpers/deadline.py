"""Test helper: run a step that must end in time, so that a hang (an open of a FIFO) fails its test, never the suite."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def within(seconds: float, step: Callable[[], T], *, fifo: Path | None = None) -> T:
    """``step()`` in a daemon thread that must end within ``seconds``; its exception is raised here. On a hang the
    other end of ``fifo`` is opened and closed (what a blocked open or read of it waits for), so the thread ends
    instead of waiting for ever, and the test fails."""
    outcome: dict = {}

    def target() -> None:
        try:
            outcome["value"] = step()
        except BaseException as exc:  # handed to the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if fifo is not None:
            fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
            time.sleep(0.2)
            os.close(fd)
            thread.join(5)
        raise AssertionError(f"still running after {seconds} s: a hang")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")
