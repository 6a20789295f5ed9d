"""A call that may hang on a FIFO swapped in for a file, run so that the hang fails the test instead."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")


def within(seconds: float, fifo: Path, call: Callable[[], T]) -> T:
    """``call()`` in a thread: a hang on ``fifo`` (an open waiting for a writer) fails instead of hanging. An
    exception of ``call`` is raised here."""
    got: list[T] = []
    raised: list[BaseException] = []

    def run() -> None:
        try:
            got.append(call())
        except BaseException as exc:  # handed to the test's thread
            raised.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():  # a writer lets the blocked open() return
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(seconds)
        pytest.fail(f"hung on the FIFO at {fifo}")
    if raised:
        raise raised[0]
    return got[0]


def swap_in_fifo(path: Path) -> None:
    """Put a FIFO where the file ``path`` was."""
    path.unlink()
    os.mkfifo(path)


def check_then_swap(checked: Callable[..., T], path: Path) -> Callable[..., T]:
    """``checked`` (a ``video_info``), which then puts a FIFO at ``path``: the swap lands in the window after the
    check, before whatever reads the file next."""

    def check_then_swap(asked: Path, fd: int | None = None) -> T:
        found = checked(asked, fd=fd)
        swap_in_fifo(path)
        return found

    return check_then_swap
