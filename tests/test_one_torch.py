"""One torch (issue 21.9): the development and CI environment (uv.lock), the CPU image and every recipe image built on
a CPU base resolve the same torch and torchvision, so a reference recorded in one was recorded in the others' too.

Recipes on a CUDA base (camerabench, mind, paibench-c) pin the torch of their upstream stack; those are GPU
environments with references of their own, and are not compared here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("torch", "torchvision")


def _uv_lock_versions(name: str) -> set[str]:
    tomllib = pytest.importorskip("tomllib")
    lock = tomllib.loads((REPO / "uv.lock").read_text())
    return {p["version"] for p in lock["package"] if p["name"] == name}


def _requirements_versions(path: Path, name: str) -> set[str]:
    return set(re.findall(rf"^{re.escape(name)}==([^\s;\\]+)", path.read_text(), flags=re.M))


def _cpu_recipe_locks() -> list[Path]:
    """requirements.lock of every recipe whose image starts from a base that is not a CUDA image and installs
    torch (a recipe without torch, as `pinbench new-recipe` writes, has no torch to agree on)."""
    locks = []
    for dockerfile in sorted(REPO.glob("recipes/*/Dockerfile")):
        base = re.search(r"^ARG BASE_IMAGE=(\S+)", dockerfile.read_text(), flags=re.M)
        assert base, dockerfile
        lock = dockerfile.parent / "requirements.lock"
        if not base.group(1).startswith("nvidia/cuda:") and _requirements_versions(lock, "torch"):
            locks.append(lock)
    return locks


def test_the_cpu_recipes_are_the_ones_expected() -> None:
    assert [p.parent.name for p in _cpu_recipe_locks()] == ["dynamic_degree", "remembench"]


@pytest.mark.parametrize("name", PACKAGES)
def test_one_version_across_uv_lock_the_cpu_image_and_the_cpu_recipes(name: str) -> None:
    (dev,) = _uv_lock_versions(name)  # one version: requires-python >= 3.11 leaves no other Python fork
    found = {"images/cpu/requirements.lock": _requirements_versions(REPO / "images/cpu/requirements.lock", name)}
    for lock in _cpu_recipe_locks():
        found[str(lock.relative_to(REPO))] = _requirements_versions(lock, name)
    assert all(versions == {dev} for versions in found.values()), (dev, found)
