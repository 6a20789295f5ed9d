"""Issue 21, the first ten minutes of a new user: what the real ``pinbench`` command prints when you score your own
videos, on this machine, in fresh processes (no CliRunner: stdout, stderr and exit codes as a shell sees them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def pinbench(*args: str, cwd: Path, env: dict[str, str] | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``pinbench ARGS`` in a fresh process, with this checkout's interpreter."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    for name in ("PINBENCH_OFFLINE", "HF_HUB_OFFLINE", "PINBENCH_DD_VIDEOS", "PINBENCH_RAFT_WEIGHTS"):
        if env is None or name not in env:
            full_env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "pinbench", *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of five small videos, as a user would have (dynamic-degree's fixture writer makes them)."""
    from pinbench_recipes.dynamic_degree.fixture import write_fixture

    folder = tmp_path_factory.mktemp("my_videos")
    write_fixture(folder)
    (folder / "fixture.json").unlink()
    return folder


# ------------------------------------------------------------------------------ 1: the results table


def _table_row(text: str, metric: str) -> list[str]:
    (line,) = [line for line in text.splitlines() if line.lstrip("* ").startswith(metric + " ")]
    return line.lstrip("* ").split()


def test_a_run_without_a_reference_ends_with_the_results_table_and_diff_prints_it(tmp_path: Path,
                                                                                   videos: Path) -> None:
    out = tmp_path / "run"
    done = pinbench("run", "dynamic-degree", "--checkpoint", "mine", "-o", f"videos={videos}", "-o", "flow=farneback",
                    "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    header = "metric value 95% CI scored direction".split()
    assert any(line.split() == header for line in done.stdout.splitlines()), done.stdout
    # the fixture videos score 0.7 by construction; its interval and the count come with it
    assert _table_row(done.stdout, "preview/dynamic_degree") == ["preview/dynamic_degree", "0.7", "[0.3,", "1]",
                                                                  "5/5", "higher"]
    assert "reported, not diffed (status complete)" in done.stdout

    shown = pinbench("diff", str(out / "scorecard.json"), cwd=tmp_path)
    assert shown.returncode == 0, shown.stdout + shown.stderr  # the README: 0 for complete, no reference
    assert _table_row(shown.stdout, "preview/dynamic_degree")[1:] == ["0.7", "[0.3,", "1]", "5/5", "higher"]
    assert "no full reference for dynamic-degree / mine" in shown.stdout and not shown.stderr


def test_a_run_with_a_reference_shows_every_metric_beside_the_diff_columns(tmp_path: Path) -> None:
    done = pinbench("run", "dynamic-degree", "--fixture", "--out", str(tmp_path / "fx"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    header = "metric value 95% CI scored direction reference delta vs ref tolerance status ref 95% CI noise".split()
    assert any(line.split() == header for line in done.stdout.splitlines()), done.stdout
    row = _table_row(done.stdout, "preview/dynamic_degree")
    assert row[:9] == ["preview/dynamic_degree", "0.7", "[0.3,", "1]", "5/5", "higher", "0.7", "+0", "same"]
    assert "PASS" in row
