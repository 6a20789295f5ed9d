"""The installed versions of what a recipe computes with are part of every record's reuse key (``numerics:``).

On the host no image digest changes when OpenCV or torch is upgraded, and records computed with the old versions were
reused (from the run directory and from the sample cache) under a scorecard whose provenance names the new ones.

* A rerun after a version of a declared distribution changed computes every sample again and says why; the same
  versions reuse every one; a record written before the versions were recorded is computed again once.
* The sample cache finds no record of other versions.
* Every recipe declares the numeric libraries its scoring code (and the ``pinbench.media`` modules it imports)
  imports.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import importlib.metadata
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from loose_task import LooseTask
from toy_recipe import toy_recipe

from pinbench.core import provenance
from pinbench.core.config import Implementation
from pinbench.core.imports import library_closure
from pinbench.core.recipe import MEDIA_DIR, Recipe, available_recipes
from pinbench.core.rerun import run_key
from pinbench.core.run import Run
from pinbench.core.runner import run_samples
from pinbench.core.sample_cache import SampleCache

TASKS = [LooseTask(f"s{i}", x=i) for i in range(4)]
NUMERICS = ["numpy", "opencv-python-headless"]
# the libraries whose versions change numbers (distribution names); opencv-python, the other wheel of cv2, is
# declared beside opencv-python-headless by the recipes but need not be installed here
NUMERIC_DISTRIBUTIONS = ("numpy", "torch", "torchvision", "opencv-python-headless", "scikit-image", "scipy",
                         "scikit-learn", "lpips", "open_clip_torch", "av", "decord", "pillow", "numba", "transformers")


def slow_score(task: dict) -> dict:
    time.sleep(0.012)   # longer than the sample cache's MIN_SECONDS: kept there
    return {"f1": 0.5 + 0.1 * task["x"]}


@pytest.fixture
def toy(tmp_path: Path) -> Recipe:
    return toy_recipe(tmp_path / "recipes", numerics=NUMERICS)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "sample-cache"
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(root))
    return root


def _installed_as(monkeypatch: pytest.MonkeyPatch, **versions: str) -> Callable[[], None]:
    """Make ``versions`` (normalised name: version) the installed ones, as the scan of sys.path finds them."""
    found = provenance._distributions()
    monkeypatch.setattr(provenance, "_distributions", lambda: [(name, versions.get(name, version))
                                                               for name, version in found])
    return lambda: monkeypatch.setattr(provenance, "_distributions", lambda: found)


def _compute(recipe: Recipe, out: Path, fn=slow_score):
    return Run(recipe, recipe.config("Toy-Nano", out_dir=out, limit=4, env={})).compute(TASKS, fn)


def test_a_declared_distribution_of_another_version_recomputes_every_sample_and_says_why(
        toy: Recipe, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", "off")
    assert _compute(toy, tmp_path / "run").n_done == 4
    _installed_as(monkeypatch, numpy="0.0.1")
    upgraded = _compute(toy, tmp_path / "run")
    assert (upgraded.n_done, upgraded.n_reused) == (4, 0)
    [why] = upgraded.recomputed
    assert why.startswith("installed packages changed (now ") and "numpy==0.0.1" in why
    assert f"4 recomputed: {why}" in capsys.readouterr().err
    again = _compute(toy, tmp_path / "run", fn=lambda task: pytest.fail("computed with the same versions"))
    assert (again.n_done, again.n_reused) == (0, 4)


def test_the_recomputation_names_each_changed_version_when_the_scorecard_recorded_the_old_ones(
        toy: Recipe, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: "installed packages changed (now numpy==0.0.2, opencv-python-headless==...)", the new versions alone,
    though the run directory's scorecard named the old ones."""
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", "off")
    _installed_as(monkeypatch, numpy="0.0.1")
    _compute(toy, tmp_path / "run")
    provenance_of_that_run = {"packages": {"distributions": provenance.installed_distributions()}}
    (tmp_path / "run" / "scorecard.json").write_text(json.dumps({"provenance": provenance_of_that_run}))
    _installed_as(monkeypatch, numpy="0.0.2")
    assert _compute(toy, tmp_path / "run").recomputed == {"installed packages changed (numpy 0.0.1 -> 0.0.2)": 4}


def test_a_change_names_the_old_versions_only_when_they_are_those_of_the_record() -> None:
    old = Implementation.installed("1", "code", None, ["numpy==1.26.4", "scipy==1.13.0", "torch==2.3.0"])
    new = Implementation.installed("1", "code", None, ["numpy==2.0.0", "scipy==1.13.0", "torch==2.4.0"])
    known = dataclasses.replace(new, earlier=("numpy==1.26.4", "scipy==1.13.0", "torch==2.3.0"))
    assert known.change_from(old) == "installed packages changed (numpy 1.26.4 -> 2.0.0, torch 2.3.0 -> 2.4.0)"
    # the scorecard's versions are not those the record was computed with: the new ones alone, nothing guessed
    other = dataclasses.replace(new, earlier=("numpy==1.25.0", "scipy==1.13.0", "torch==2.3.0"))
    assert other.change_from(old) == "installed packages changed (now numpy==2.0.0, scipy==1.13.0, torch==2.4.0)"
    assert known.change_from(known) is None and known == new   # never part of the key


def test_an_undeclared_distribution_of_another_version_reuses_every_sample(
        toy: Recipe, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", "off")
    _compute(toy, tmp_path / "run")
    _installed_as(monkeypatch, pyyaml="0.0.1", torch="0.0.1")
    again = _compute(toy, tmp_path / "run", fn=lambda task: pytest.fail("computed after an unrelated install"))
    assert (again.n_done, again.n_reused) == (0, 4)


def test_a_declared_distribution_installed_or_removed_changes_the_key(toy: Recipe, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    here = toy.config("Toy-Nano", out_dir=tmp_path / "x", env={}).implementation
    monkeypatch.setattr(provenance, "_distributions", list)   # nothing installed
    gone = toy.config("Toy-Nano", out_dir=tmp_path / "x", env={}).implementation
    assert gone is not None and gone.versions == ("numpy==absent", "opencv-python-headless==absent")
    assert gone.change_from(here) is not None and gone.to_json()["packages"] != here.to_json()["packages"]


def test_a_finished_run_is_not_answered_from_its_rerun_manifest_after_an_upgrade(
        toy: Recipe, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The manifest's key holds the run's implementation, versions included: a stale scorecard is never kept."""
    before = run_key(toy, toy.config("Toy-Nano", out_dir=tmp_path / "run", env={}))
    _installed_as(monkeypatch, numpy="0.0.1")
    assert run_key(toy, toy.config("Toy-Nano", out_dir=tmp_path / "run", env={})) != before


def test_a_record_written_before_versions_were_recorded_is_computed_again_once(toy: Recipe, tmp_path: Path) -> None:
    now = toy.config("Toy-Nano", out_dir=tmp_path / "x", env={}).implementation
    assert now is not None
    before = Implementation(now.recipe_version, now.code, now.image)   # its JSON has no "packages"
    assert "packages" not in before.to_json()
    run_samples(TASKS, slow_score, tmp_path / "run", implementation=before, progress=False)
    first = run_samples(TASKS, slow_score, tmp_path / "run", implementation=now, progress=False)
    assert (first.n_done, first.recomputed) == (4, {"installed packages not recorded (a record from before they "
                                                    "were)": 4})
    second = run_samples(TASKS, slow_score, tmp_path / "run", implementation=now, progress=False)
    assert (second.n_done, second.n_reused) == (0, 4)


def test_the_sample_cache_finds_no_record_of_other_versions(toy: Recipe, tmp_path: Path, cache: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    assert _compute(toy, tmp_path / "a").n_done == 4
    restore = _installed_as(monkeypatch, **{"opencv-python-headless": "0.0.1"})
    upgraded = _compute(toy, tmp_path / "b")
    assert (upgraded.n_done, upgraded.n_cached) == (4, 0)
    restore()
    same = _compute(toy, tmp_path / "c", fn=lambda task: pytest.fail("computed with the same versions"))
    assert (same.n_done, same.n_cached) == (0, 4)


def test_a_generation_records_key_is_the_one_it_had_before_versions_were_recorded(tmp_path: Path) -> None:
    """Generation's implementation records no versions (a rollout is keyed by its generator): its record and sample
    cache key are unchanged, so no rollout is generated again."""
    generation = Implementation("generation-1", "g" * 64, None)
    assert generation.to_json() == {"recipe_version": "generation-1", "code": "g" * 64, "image": None}
    key = hashlib.sha256(f"mind/rollouts\0generation-1\0{'g' * 64}\0None\0{'0' * 64}".encode()).hexdigest()
    assert SampleCache(tmp_path, "mind/rollouts", generation).key("0" * 64) == key


def _imported(path: Path) -> set[str]:
    """The top-level names of the modules a file imports (absolute imports, at any depth)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.partition(".")[0])
    return names


@pytest.mark.parametrize("recipe", sorted(available_recipes()))
def test_every_numeric_library_a_recipe_imports_is_declared(recipe: str) -> None:
    declared = available_recipes()[recipe]
    providers = importlib.metadata.packages_distributions()
    modules = {module: sorted(set(dists) & set(NUMERIC_DISTRIBUTIONS)) for module, dists in providers.items()}
    missing_here = set(NUMERIC_DISTRIBUTIONS) - {d for dists in modules.values() for d in dists}
    assert not missing_here, f"not installed here, so their modules cannot be named: {sorted(missing_here)}"
    sources = [p for p in declared.dir.rglob("*.py") if "tests" not in p.relative_to(declared.dir).parts]
    media = [p for p in library_closure(declared.dir, sources=sources) if p.parent == MEDIA_DIR]
    undeclared = {f"{module} ({', '.join(modules[module])}) in {path.name}"
                  for path in sources + media for module in _imported(path)
                  if modules.get(module) and not set(modules[module]) <= set(declared.numerics)}
    assert not undeclared, f"{declared.dir / 'recipe.yaml'}: numerics: lacks {sorted(undeclared)}"
