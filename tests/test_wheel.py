"""The wheel: the library and every recipe with its data files, under two import names, without tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from pinbench.core.recipe import available_recipes

REPO = Path(__file__).resolve().parents[1]


def test_the_wheel_ships_recipes_and_their_data_but_no_tests(tmp_path: Path) -> None:
    """Built offline with the venv's setuptools from a copy of the sources (nothing is written here)."""
    src = tmp_path / "src"
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, src / name)
    for folder in ("common", "recipes"):
        shutil.copytree(REPO / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    code = f"from setuptools import build_meta; print(build_meta.build_wheel({str(tmp_path / 'dist')!r}))"
    subprocess.run([sys.executable, "-c", code], cwd=src, check=True, capture_output=True, text=True)
    (wheel,) = (tmp_path / "dist").glob("pinbench-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if ".dist-info/" not in n} == {"pinbench", "pinbench_recipes"}
    assert [n for n in names if "/tests/" in n or n.rsplit("/", 1)[-1].startswith(("test_", "conftest"))] == []
    assert {"pinbench/results/templates/report.html.j2", "pinbench/core/schemas/recipe.schema.json"} <= set(names)
    recipes = available_recipes()
    for recipe in recipes.values():
        package = "pinbench_recipes/" + recipe.package.rsplit(".", 1)[1]
        for file in ("recipe.yaml", "run.py", "pins.yaml", "references/fixture.yaml", "requirements.lock"):
            assert f"{package}/{file}" in names, f"{recipe.name}: {file} is not in the wheel"
