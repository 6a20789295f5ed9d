"""Each recipe's fixture at the numerics its own image installs, not only at uv.lock's.

The suite runs every recipe against uv.lock; a recipe's image installs its requirements.lock. CameraBench's lock
(numpy 1.26.4) had no ``np.trapezoid``, which the recipe called: its image scored no binary split, and CI, on
uv.lock's numpy 2.4, never saw it. Here, for each recipe whose lock pins a numerics package at another version than
uv.lock, a venv holds this checkout (editable) and uv.lock's dependencies of the recipe's extra with those packages
at the lock's versions, torch left out (its CUDA wheels are gigabytes; a fixture is CPU work), and the recipe's
fixture (for CameraBench also its score-only path: the fixture is Script 2 over official score files) must PASS.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement

from pinbench.core.recipe import available_recipes
from pinbench.ops.newrecipe import EXTRAS

REPO = Path(__file__).resolve().parents[1]
NUMERICS = ("numpy", "scipy", "scikit-learn", "av", "opencv-python", "opencv-python-headless", "pandas", "pillow")
# excluded from the venv's resolution (the CUDA wheels only it needs go with it), never overridden
TORCH = ("torch",)
PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^\s;\\]+)", flags=re.M)


@dataclass(frozen=True)
class LockDrift:
    """A recipe whose requirements.lock pins numerics packages at other versions than uv.lock (for this Python)."""
    recipe: str
    extras: tuple[str, ...]  # pinbench's extras its lock was exported from
    lock: Path
    pins: tuple[tuple[str, str], ...]  # (package, the recipe lock's version), only those that differ


def _uv() -> str:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        pytest.skip("uv not found beside this Python or on PATH (`make setup` installs it)", allow_module_level=True)
    return uv


def _extras(recipe: str) -> tuple[str, ...]:
    """The recipe's own extra in pyproject.toml; a recipe without one (as `pinbench new-recipe` writes it) has its
    lock exported from the template's extras."""
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return (recipe,) if recipe in declared else EXTRAS


def _uv_lock_export(extras: tuple[str, ...]) -> list[Requirement]:
    """uv.lock's pins for pinbench[extras], as `uv export` writes them (markers kept)."""
    done = subprocess.run([_uv(), "export", "--frozen", "--no-dev", *(f"--extra={e}" for e in extras),
                           "--no-emit-project",
                           "--no-hashes", "--no-annotate", "--no-header", "--format=requirements-txt"],
                          cwd=REPO, capture_output=True, text=True, check=True)
    return [Requirement(line) for line in done.stdout.splitlines() if line.strip() and not line.startswith("#")]


def _for_this_python(reqs: list[Requirement]) -> dict[str, str]:
    return {r.name.lower(): next(iter(r.specifier)).version for r in reqs if r.marker is None or r.marker.evaluate()}


def _drifts() -> list[LockDrift]:
    """Every recipe whose lock pins a NUMERICS package at another version than uv.lock: found from the files."""
    found = []
    for recipe in sorted(available_recipes().values(), key=lambda r: r.name):
        lock = recipe.dir / "requirements.lock"
        if not lock.is_file():
            continue
        extras = _extras(recipe.name)
        dev = _for_this_python(_uv_lock_export(extras))
        pinned = {name.lower(): version for name, version in PIN.findall(lock.read_text())}
        pins = tuple((n, pinned[n]) for n in NUMERICS if n in pinned and n in dev and dev[n] != pinned[n])
        if pins:
            found.append(LockDrift(recipe.name, extras, lock, pins))
    return found


def _pip_config() -> list[str]:
    """uv arguments for the indexes and find-links that pip is configured with (`pip config list`), as pip reads
    them when the Makefile installs uv."""
    done = subprocess.run([sys._base_executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                          check=False)
    args = []
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        option = {"extra-index-url": "--extra-index-url", "index-url": "--index-url",
                  "find-links": "--find-links"}.get(key.rsplit(".", 1)[-1])
        if option:
            args += [a for v in value.strip("'\"").split() for a in (option, v) if v not in args]
    return args


def _install(drift: LockDrift, venv: Path, tmp: Path) -> subprocess.CompletedProcess:
    uv = _uv()
    dev = [r for r in _uv_lock_export(drift.extras) if r.name.lower() not in {n for n, _ in drift.pins}]
    (tmp / "constraints.txt").write_text("".join(f"{r}\n" for r in dev))
    (tmp / "overrides.txt").write_text("".join(f"{n}=={v}\n" for n, v in drift.pins))
    (tmp / "excludes.txt").write_text("".join(f"{n}\n" for n in TORCH))
    subprocess.run([uv, "venv", "--quiet", "--python", sys._base_executable, str(venv)], check=True)
    # unsafe-best-match: a version on PyPI only (camerabench's av 14.2.0) where a local index has the package at
    # another (av 18.1.0); uv's default takes the first index that names it. --only-binary: a locked version with
    # no 3.11 wheel is a skip, not a build from source.
    return subprocess.run([uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
                           *_pip_config(), "--index-strategy", "unsafe-best-match",
                           "-c", str(tmp / "constraints.txt"), "--overrides", str(tmp / "overrides.txt"),
                           "--excludes", str(tmp / "excludes.txt"), "--only-binary", ",".join(n for n, _ in drift.pins),
                           "-e", f"{REPO}[{','.join(drift.extras)}]"],
                          capture_output=True, text=True, check=False, timeout=600)


DRIFTS = _drifts()


@pytest.mark.slow
@pytest.mark.parametrize("drift", DRIFTS, ids=[d.recipe for d in DRIFTS])
def test_a_recipe_fixture_passes_at_its_own_locks_numerics(drift: LockDrift, tmp_path: Path) -> None:
    """Slow: one uv venv per drifting recipe. Measured here (2 shared cores, PyPI reachable), the whole file with
    camerabench and paibench-c run and mind skipped (its fixture needs torch): 30-38 s with an empty uv cache
    (UV_CACHE_DIR, 1.5 GB after), 20-26 s warm (two runs each). Red with np.trapezoid back in camerabench's
    binary_metrics.py."""
    if sys.version_info[:2] != (3, 11):
        pytest.skip("the recipe locks are compiled for Python 3.11")
    venv = tmp_path / "venv"
    installed = _install(drift, venv, tmp_path)
    no_wheel = re.search(r"Because (\S+==\S+) has no usable wheels", installed.stderr)
    if installed.returncode != 0 and no_wheel:
        pytest.skip(f"{drift.lock}: {no_wheel.group(1)} has no wheel for Python 3.11 on the configured indexes")
    assert installed.returncode == 0, installed.stderr[-3000:]
    names = [n for n, _ in drift.pins]
    versions = subprocess.run([str(venv / "bin" / "python"), "-c", "import sys, importlib.metadata as m; "
                               "print(*(m.version(n) for n in sys.argv[1:]))", *names],
                              capture_output=True, text=True, check=True).stdout.split()
    assert list(zip(names, versions, strict=True)) == list(drift.pins)
    run = subprocess.run([str(venv / "bin" / "pinbench"), "run", drift.recipe, "--fixture",
                          "--out", str(tmp_path / "run")], cwd=tmp_path, capture_output=True, text=True,
                         timeout=600, check=False)
    if "ModuleNotFoundError: No module named 'torch'" in run.stderr:
        pytest.skip(f"{drift.recipe}'s fixture needs torch, which this venv leaves out (its CUDA wheels are gigabytes)")
    assert "result: PASS (exit 0)" in run.stdout, (drift.pins, run.stdout[-3000:], run.stderr[-3000:])
