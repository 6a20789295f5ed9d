"""Export writes a recipe directory that runs alone, holding exactly the library code it imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pinbench.export import ExportError, export_recipe, library_closure, library_root
from pinbench.recipe import get_recipe

REPO = Path(__file__).resolve().parents[1]


def test_closure_follows_imports_transitively(tmp_path: Path) -> None:
    recipe_dir = tmp_path / "toy"
    recipe_dir.mkdir()
    (recipe_dir / "__init__.py").write_text("")
    (recipe_dir / "score.py").write_text("from pinbench.video import read_video\n")
    root = library_root()
    files = {p.relative_to(root).as_posix() for p in library_closure(recipe_dir, root)}
    assert {"__init__.py", "video.py"} <= files
    assert "cli.py" not in files and "export.py" not in files


def test_closure_handles_relative_imports_inside_the_library(tmp_path: Path) -> None:
    root = tmp_path / "pinbench"
    (root / "metrics").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "metrics" / "__init__.py").write_text("")
    (root / "metrics" / "a.py").write_text("from . import b\nfrom ..util import helper\n")
    (root / "metrics" / "b.py").write_text("")
    (root / "util.py").write_text("")
    (root / "unused.py").write_text("")
    recipe_dir = tmp_path / "toy"
    recipe_dir.mkdir()
    (recipe_dir / "run.py").write_text("import pinbench.metrics.a\n")
    files = {p.relative_to(root).as_posix() for p in library_closure(recipe_dir, root)}
    assert files == {"__init__.py", "metrics/__init__.py", "metrics/a.py", "metrics/b.py", "util.py"}


def test_export_refuses_to_overwrite(tmp_path: Path) -> None:
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(ExportError, match="already exists"):
        export_recipe(get_recipe("dynamic-degree"), dest)


def test_exported_recipe_runs_its_fixture_alone(tmp_path: Path) -> None:
    recipe = get_recipe("dynamic-degree")
    dest = export_recipe(recipe, tmp_path / "export")

    top = {p.name for p in dest.iterdir()}
    assert {"pinbench", "pinbench_recipes", "pyproject.toml", "Makefile", "Dockerfile", "README.md",
            "requirements.lock"} <= top
    assert (dest / "pinbench_recipes" / "dynamic_degree" / "recipe.yaml").is_file()
    assert (dest / "pinbench" / "schemas" / "scorecard.schema.json").is_file()
    # Exactly what it imports: another recipe's metric code stays behind.
    assert not (dest / "pinbench_recipes" / "paibench_c").exists()
    assert not (dest / "pinbench" / "metrics" / "lpips.py").exists()

    # Nothing in the export points back into this repository.
    for path in dest.rglob("*"):
        if path.is_file() and path.suffix in {".py", ".toml", ".md", ".yaml", ".txt", ""}:
            text = path.read_text(errors="ignore")
            assert str(REPO) not in text, path
            assert "common/pinbench" not in text, path

    # Run the fixture from the export with only the export on the import path; the installed
    # pinbench must not be the one that runs.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(dest)
    probe = subprocess.run([sys.executable, "-c", "import pinbench, pinbench_recipes.dynamic_degree as r; "
                            "print(pinbench.__file__); print(r.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert all(line.startswith(str(dest)) for line in probe.stdout.split()), probe.stdout
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", recipe.package, "run", "--fixture", "--out", str(out)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    card = json.loads((out / "scorecard.json").read_text())
    assert card["status"] == "complete" and card["mode"] == "fixture"
    assert card["provenance"]["pinbench"]["commit"] is None  # an export is not inside this repository's git


def test_force_replaces_only_an_earlier_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recipe = get_recipe("dynamic-degree")
    dest = export_recipe(recipe, tmp_path / "export")
    assert export_recipe(recipe, dest, force=True) == dest
    foreign = tmp_path / "my-repo"
    (foreign / "src").mkdir(parents=True)
    with pytest.raises(ExportError, match="not an earlier pinbench export"):
        export_recipe(recipe, foreign, force=True)
    assert (foreign / "src").is_dir()
    monkeypatch.chdir(dest)
    with pytest.raises(ExportError, match="refusing"):
        export_recipe(recipe, tmp_path, force=True)
