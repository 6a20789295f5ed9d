"""Test helper: ``make`` targets of an exported recipe as a researcher runs them, nothing of this environment seen.

No PYTHONPATH, no VIRTUAL_ENV, this venv's bin off PATH; PYTHON is the interpreter the development venv was made
from, so ``make setup`` builds a new venv from the export's hashed lock alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def clean_env() -> dict[str, str]:
    dev_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != dev_bin)
    env["PYTHON"] = str(Path(sys._base_executable))
    return env


def make(dest: Path, *args: str, env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess:
    """``make -C dest ARGS``; a failure fails the test with the end of its output (an assertion would cut it)."""
    proc = subprocess.run(["make", "-C", str(dest), *args], env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        pytest.fail(f"make {' '.join(args)}: exit {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n"
                    f"--- stderr\n{proc.stderr[-3000:]}", pytrace=False)
    return proc
