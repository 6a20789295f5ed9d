"""The root conftest.py keeps test sessions out of the user's pinbench cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_a_session_writes_its_cache_in_a_temporary_folder_it_removes(tmp_path: Path) -> None:
    """Tests wrote <cache>/yaml/ and imports-2.json under ~/.cache/pinbench: no PINBENCH_CACHE was set."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PINBENCH_CACHE", "HF_HOME")} | {"HOME": str(home)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:randomly",
                           "tests/helpers/cache_probe.py"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    said = dict(line.lstrip(".").split(": ", 1) for line in done.stdout.splitlines() if "cache: " in line)
    cache = Path(said["cache"])
    assert cache.name.startswith("pinbench-test-cache-") and not cache.is_relative_to(home)
    assert not cache.exists()
    assert said["gpu cache"] == str(home / ".cache" / "pinbench")   # where `pinbench fetch` put the weights
    assert list(home.rglob("*")) == []
