"""`pinbench new-recipe` writes a recipe that passes what every recipe passes, so the template cannot rot.

The recipe is written into a copy of this repository, which the commands import first (PYTHONPATH: a folder whose
``pinbench`` and ``pinbench_recipes`` point into the copy), so nothing is written here. On it: its fixture, its
own tests and ruff, ``pinbench docs --check``, the Dockerfile and export policy tests of tests/, and its lock made
again by the command its header names.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fresh_venv import clean_env, make

from pinbench.core.config import RecipeError
from pinbench.ops.newrecipe import REFERENCE_NOTE, new_recipe

REPO = Path(__file__).resolve().parents[1]
NAME, PACKAGE = "temporal-flickering", "temporal_flickering"   # 19 characters: long names lint too
COPIED = ["common", "recipes", "tests", "tools", "images", "docs", "pyproject.toml", "setup.py", "uv.lock",
          "README.md", "conftest.py", "LICENSE", "Makefile"]
# The fixture's three videos score 0, 255/7 and 255 by construction (flat black and white frames, lossless).
FIXTURE_MEAN = (0 + 255 / 7 + 255) / 3


class Checkout:
    """A copy of the repository and the environment whose Python imports pinbench and its recipes from it."""

    def __init__(self, root: Path) -> None:
        self.root = root / "repo"
        for name in COPIED:
            source, target = REPO / name, self.root / name
            if source.is_dir():
                shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
        site = root / "site"
        site.mkdir()
        (site / "pinbench").symlink_to(self.root / "common" / "pinbench")
        (site / "pinbench_recipes").symlink_to(self.root / "recipes")
        self.env = {**os.environ, "PYTHONPATH": str(site), "PINBENCH_OFFLINE": "1",
                    "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
        self.summary = ""  # what `pinbench new-recipe` printed

    def run(self, *argv: str, cwd: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), cwd=cwd or self.root, env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def pinbench(self, *argv: str) -> subprocess.CompletedProcess:
        return self.run(sys.executable, "-m", "pinbench", *argv)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Checkout:
    made = Checkout(tmp_path_factory.mktemp("new-recipe"))
    done = made.pinbench("new-recipe", NAME)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    made.summary = done.stdout
    return made


def test_the_folder_is_the_registration_and_the_reference_is_recorded_from_its_fixture(checkout: Checkout) -> None:
    folder = checkout.root / "recipes" / PACKAGE
    assert f"wrote recipes/{PACKAGE}/ (13 files) and recorded recipes/{PACKAGE}/references/fixture.yaml" \
        in checkout.summary
    assert f"| `{NAME}` | " in checkout.summary  # the one line left to add outside the folder, printed exactly
    assert f"{NAME} 0.1.0: " in checkout.pinbench("list").stdout
    reference = yaml.safe_load((folder / "references" / "fixture.yaml").read_text())
    assert reference["source"]["kind"] == "trusted_run" and reference["note"] == REFERENCE_NOTE
    assert reference["source"]["citation"].startswith(f"scorecard of {NAME} / fixture (fixture), run at ")
    assert reference["n_samples"] == 3
    assert reference["metrics"]["flicker"]["value"] == pytest.approx(FIXTURE_MEAN, abs=1e-12)
    assert not [p for p in (checkout.root / "recipes").iterdir() if p.name.startswith(".")]  # no staging left


def test_its_fixture_passes_against_that_reference(checkout: Checkout, tmp_path: Path) -> None:
    done = checkout.pinbench("run", NAME, "--fixture", "--out", str(tmp_path / "fixture"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "result: PASS (exit 0)" in done.stdout


def test_its_tests_ruff_and_docs_check_pass(checkout: Checkout) -> None:
    tests = checkout.run(sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", f"recipes/{PACKAGE}/tests")
    assert tests.returncode == 0 and "2 passed" in tests.stdout, tests.stdout[-3000:]
    lint = checkout.run(str(Path(sys.executable).parent / "ruff"), "check", "--no-cache", f"recipes/{PACKAGE}")
    assert lint.returncode == 0, lint.stdout[-3000:]
    docs = checkout.pinbench("docs", "--check")
    assert docs.returncode == 0, docs.stdout + docs.stderr


def test_the_dockerfile_export_and_readme_tests_pass_on_it(checkout: Checkout) -> None:
    """tests/test_dockerfiles.py (image policy, hadolint, what the image installs), tests/test_export.py (the export
    stands alone, installs what it imports, its own tests are collected there) and tests/test_readme.py (its
    README states its version), on it alone."""
    done = checkout.run(sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-m", "not slow",
                        "-k", f"{NAME} or {PACKAGE}", "tests/test_dockerfiles.py", "tests/test_export.py",
                        "tests/test_readme.py", timeout=600)
    assert done.returncode == 0 and "\n13 passed," in done.stdout, done.stdout[-3000:]


def test_a_renamed_metric_is_recorded_again_in_one_step(checkout: Checkout, tmp_path: Path) -> None:
    """After the metric is renamed, `pinbench record-reference --fixture` runs the fixture and records the
    reference again, and the fixture passes against it (the recipe is renamed back afterwards)."""
    folder = checkout.root / "recipes" / PACKAGE
    files = [folder / "recipe.yaml", folder / "run.py"]
    texts = [path.read_text() for path in files]
    try:
        for path, text in zip(files, texts, strict=True):
            path.write_text(text.replace("flicker:", "frame_difference:").replace('METRIC = "flicker"',
                                                                                  'METRIC = "frame_difference"'))
        assert checkout.pinbench("record-reference", "--fixture", NAME).returncode == 2   # it exists: --force
        done = checkout.pinbench("record-reference", "--fixture", NAME, "--force")
        assert done.returncode == 0, done.stdout + done.stderr
        reference = yaml.safe_load((folder / "references" / "fixture.yaml").read_text())
        assert list(reference["metrics"]) == ["frame_difference"]
        again = checkout.pinbench("run", NAME, "--fixture", "--out", str(tmp_path / "renamed"))
        assert again.returncode == 0 and "result: PASS (exit 0)" in again.stdout, again.stdout[-2000:]
    finally:
        for path, text in zip(files, texts, strict=True):
            path.write_text(text)
        assert checkout.pinbench("record-reference", "--fixture", NAME, "--force").returncode == 0


def test_its_lock_is_what_the_command_in_its_header_makes(checkout: Checkout) -> None:
    folder = checkout.root / "recipes" / PACKAGE
    lock = (folder / "requirements.lock").read_text()
    command = lock.splitlines()[1].removeprefix("#").strip()
    done = checkout.run("bash", "-c", command, cwd=folder)
    assert done.returncode == 0, done.stderr
    assert (folder / "requirements.lock").read_text() == lock
    assert "torch" not in lock and "\nav==" in lock and "\ndocker==" in lock
    assert "\nsetuptools==" in lock  # what `make setup` of its export builds the package with, offline


@pytest.mark.slow
def test_its_export_sets_up_from_its_lock_alone_and_passes_its_tests(checkout: Checkout, tmp_path: Path) -> None:
    """README "Adding a recipe", step 5: the export's `make setup` builds a fresh venv from the generated lock only
    (pip --no-build-isolation --no-index: setuptools must be in it, or `invalid command 'bdist_wheel'`), then
    its own tests pass there and its fixture passes against the reference new-recipe recorded. Slow: the lock is
    installed from the package index."""
    if sys.version_info[:2] != (3, 11):
        pytest.skip("the generated lock is for Python 3.11")
    dest = tmp_path / "export"
    done = checkout.pinbench("export", NAME, str(dest))
    assert done.returncode == 0, done.stderr
    env = clean_env()
    make(dest, "setup", env=env, timeout=1500)
    assert "\n2 passed" in make(dest, "test", env=env).stdout
    make(dest, "fixture", env=env)
    assert "result: PASS (exit 0)" in make(dest, "diff", "CHECKPOINT=fixture", env=env).stdout


@pytest.mark.parametrize(("name", "message"), [
    ("Frame", "recipe name 'Frame' is not allowed"),
    ("frame--change", "recipe name 'frame--change' is not allowed"),
    ("2frames", "recipe name '2frames' is not allowed: lowercase letters and digits in '-'-separated words, starting "
                "with a letter"),   # it read as if '2frames' kept the rule
    ("../x", "recipe name '../x' is not allowed"),
    ("a" * 65, f"recipe name '{'a' * 65}' is not allowed: lowercase letters and digits in '-'-separated words, "
               "starting with a letter, at most 64 characters"),   # a 240-letter name left a half-made recipe
    ("import", "recipe name 'import' is not allowed: its package name 'import' is a Python keyword"),
    ("tests", "recipe name 'tests' is not allowed: its package name 'tests' is reserved: the name of the test folders"),
    ("common", "recipe name 'common' is not allowed: its package name 'common' is reserved"),
    ("references", "recipe name 'references' is not allowed: its package name 'references' is reserved"),
    ("pinbench-recipes", "recipe name 'pinbench-recipes' is not allowed: its package name 'pinbench_recipes' is "
                         "reserved"),
    ("json", "recipe name 'json' is not allowed: its package name 'json' is a module of Python's standard library"),
    ("av", "recipe name 'av' is not allowed: its package name 'av' is a module of the installed distribution av, "
           "which a recipe of that name would shadow"),   # `import av` in recipes/ found the recipe, not PyAV
    ("dynamic-degree", "recipe 'dynamic-degree' exists already"),
])
def test_a_name_that_cannot_be_a_new_recipe_is_refused_before_anything_is_written(name: str, message: str) -> None:
    before = sorted(p.name for p in (REPO / "recipes").iterdir())
    with pytest.raises(RecipeError, match="^" + message.replace("(", r"\(").replace(".", r"\.")):
        new_recipe(name)
    assert sorted(p.name for p in (REPO / "recipes").iterdir()) == before


def test_a_dest_that_is_not_where_recipes_are_found_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match=f"^--dest {tmp_path}: not where pinbench_recipes is imported from"):
        new_recipe(NAME, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_its_python_files_lint_with_the_longest_name_allowed(tmp_path: Path) -> None:
    # a 38-letter name (64 are allowed) wrote docstrings of 127 to 140 characters, and ruff failed on its new folder
    from pinbench.core.names import RECIPE_NAME_CHARS, recipe_name_problem
    from pinbench.ops.newrecipe import FILES, TEMPLATE, _render

    name = ("a-b" * RECIPE_NAME_CHARS)[:RECIPE_NAME_CHARS - 1] + "c"
    assert len(name) == RECIPE_NAME_CHARS and recipe_name_problem(name) is None
    package = name.replace("-", "_")
    values = {"name": name, "package": package, "date": "2026-01-01", "base_image": "python@sha256:" + "0" * 64}
    for template, relative in FILES.items():
        if relative.endswith(".py"):
            path = tmp_path / relative.format(package=package)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(_render((TEMPLATE / template).read_text(encoding="utf-8"), values), encoding="utf-8")
    lint = subprocess.run([str(Path(sys.executable).parent / "ruff"), "check", "--no-cache", "--config",
                           str(REPO / "pyproject.toml"), str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert lint.returncode == 0, lint.stdout
