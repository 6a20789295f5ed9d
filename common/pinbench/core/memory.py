"""Memory a process freed, given back to the system between a run's phases.

Why: Python keeps its small objects (a record, its result, its strings) in arenas of its own, mapped apart from the C
heap, while larger blocks (a score file read whole, a list of 100k entries, a long string) come from the C heap. What
the heap frees stays resident: glibc returns it to the system only from the heap's top. A run's scoring step, which
makes 112k records of small objects at 10x CameraBench, never reuses the heap memory its recipe freed when it parsed its
inputs, so both counted in its peak. ``release_free_memory`` gives that memory back (``malloc_trim``: that peak 251 ->
235 MB); where the C library is not glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache


def release_free_memory() -> bool:
    """Return the C heap's free memory to the system (glibc's ``malloc_trim(0)``); whether there was one to call."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim = ctypes.CDLL(None).malloc_trim   # the process's own C library: glibc's has it, musl's and macOS's not
    except (OSError, AttributeError, TypeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


@contextmanager
def cycle_collection_paused() -> Iterator[None]:
    """Python's cycle collector off while a block builds objects that live on, none in a cycle (a parse's samples, a
    comparison's records).

    Why: each full collection walks every tracked object kept so far again: at 10x CameraBench a quarter of reading
    the score files; in ``compare`` 0.06-0.2 s of its 1.6-2.9 s CPU, for about 1,000 objects freed of 70,000.
    Reference counting frees the rest. What the block kept goes to the oldest generation at its end (``gc.freeze``
    then ``gc.unfreeze``: two list moves): left in the youngest, the first allocation after the block walked them all
    (27 ms of ``compare``'s CPU: its two runs' 85,000 objects)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if was_enabled:
            gc.enable()
