"""Shards of one run start together and share its fixture: it is built by one of them while the others wait."""

from __future__ import annotations

import fcntl
import threading
import time
from pathlib import Path

import pytest

from pinbench.core.files import exclusive
from pinbench_recipes.remembench import fixture


def test_exclusive_holds_an_flock_that_others_cannot_take(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    with exclusive(lock), open(lock, "a+b") as other:
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with open(lock, "a+b") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when the block ends


def test_concurrent_builders_of_one_fixture_run_one_at_a_time(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    inside, most, calls = [0], [0], []
    guard = threading.Lock()

    def slow_build(root: Path) -> str:
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.2)
        with guard:
            inside[0] -= 1
            calls.append(root)
        return "built"

    monkeypatch.setattr(fixture, "_build_fixture", slow_build)
    threads = [threading.Thread(target=fixture.build_fixture, args=(tmp_path / "fixture_data",)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 3 and most[0] == 1
