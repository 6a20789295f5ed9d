"""pinbench.core.files: atomic writes leave files as readable as any new file, and no temporary behind; JSON with
finite numbers only parses as json.loads with its hooks."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from pinbench.core import files
from pinbench.core.config import RunConfig
from pinbench.core.files import atomic_path, loads_finite_json, write_atomic
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


@pytest.mark.parametrize("text", ['{"a": 1.5, "b": [1, -2e-7, "x"]}', '  [1.0] ', "\ufeff{}", '{"a": NaN}',
                                  '{"a": -Infinity}', "[1e999]", "[-1e999, 2]", '{"a": 1', "", "{} []",
                                  b'{"a": 0.5}', b"\xef\xbb\xbf[1.0]", '"\u2028"'])
def test_loads_finite_json_is_json_loads_with_its_hooks(text: str | bytes) -> None:
    """One decoder serves every call (json.loads with hooks built one per call): the same values and the same
    errors as json.loads with the finite-number hooks, a byte-order mark and bytes included."""
    def outcome(parse):
        try:
            value = parse(text)
        except ValueError as exc:
            return type(exc), str(exc)
        return value, [type(v) for v in (value if isinstance(value, list) else [value])]

    expected = outcome(lambda t: json.loads(t, parse_constant=files._non_finite_constant,
                                            parse_float=files._finite_number))
    assert outcome(loads_finite_json) == expected
