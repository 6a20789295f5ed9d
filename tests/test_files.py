"""pinbench.core.files: atomic writes leave files as readable as any new file, and no temporary behind; the
exclusive lock holds."""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from pinbench.core.config import RunConfig
from pinbench.core.files import atomic_path, exclusive, write_atomic
from pinbench.core.rundir import LOCK_DIR, claim_run_dir


@pytest.fixture
def umask() -> Iterator[int]:
    old = os.umask(0o022)
    yield 0o022
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_an_atomic_write_gets_the_mode_of_a_new_file_not_0600(tmp_path: Path, umask: int) -> None:
    """mkstemp made every scorecard, report and reference 0600: unreadable by a colleague sharing the runs."""
    written = write_atomic(tmp_path / "scorecard.json", "{}")
    (tmp_path / "plain.json").write_text("{}")
    assert _mode(written) == _mode(tmp_path / "plain.json") == 0o644
    with atomic_path(tmp_path / "clip.mp4", suffix=".mp4") as tmp:
        tmp.write_bytes(b"x")
    assert _mode(tmp_path / "clip.mp4") == 0o644
    os.umask(0o077)
    assert _mode(write_atomic(tmp_path / "private.json", "{}")) == 0o600  # a stricter umask is honoured
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.mp4", "plain.json", "private.json", "scorecard.json"]


def test_a_run_lock_is_readable_by_other_users(tmp_path: Path, umask: int) -> None:
    cfg = RunConfig(recipe="toy-bench", checkpoint="Toy-Nano", out_dir=tmp_path / "run", limit=3)
    with claim_run_dir(cfg, env={}) as claim:
        assert _mode(claim.lock) == 0o644 and claim.lock.parent.name == LOCK_DIR


def test_exclusive_holds_an_flock_that_others_cannot_take(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    with exclusive(lock), open(lock, "a+b") as other:
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with open(lock, "a+b") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when the block ends


def test_write_if_changed_leaves_a_file_holding_the_bytes_alone(tmp_path: Path) -> None:
    from pinbench.core.files import write_if_changed

    path = tmp_path / "out.json"
    write_if_changed(path, "a\n")
    os.utime(path, ns=(1, 1))
    write_if_changed(path, b"a\n")
    assert path.stat().st_mtime_ns == 1                  # the same bytes: not written again
    write_if_changed(path, "b\n")
    assert path.read_text() == "b\n" and path.stat().st_mtime_ns != 1
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("b\n")
    path.unlink()
    path.symlink_to(elsewhere)                           # a link holding the bytes is replaced by a file
    write_if_changed(path, "b\n")
    assert not path.is_symlink() and path.read_text() == "b\n" and elsewhere.read_text() == "b\n"
