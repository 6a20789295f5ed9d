"""A real (not ``--fixture``) scored run records in its scorecard only the pins it read (``pins_for_provenance``):
here a T2V run on the fixture's data, the fixture's tiny CLIP and LPIPS trunk standing in for the pinned weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinbench.core.recipe import get_recipe
from pinbench.ops.launch import run_recipe
from pinbench_recipes.remembench import models, prepare
from pinbench_recipes.remembench.fixture import build_fixture


def test_a_t2v_run_records_clip_and_the_lpips_trunk_but_not_pi3x(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: every pin of pins.yaml, Pi3X's code and weights too, though a T2V run never loads Pi3X."""
    data = build_fixture(tmp_path / "fixture_data")
    monkeypatch.setattr(prepare, "PAPER", data.paper)   # the fixture's rows are small, not the paper's size
    model_files = models.model_files
    monkeypatch.setattr(models, "model_files", lambda opts, fixture, **kw: model_files(opts, data, **kw))
    cfg = get_recipe("remembench").config("mine", out_dir=tmp_path / "run", offline=True, env={}, options={
        "device": "cpu", "dataset_dir": str(data.dataset_dir), "videos": str(data.videos),
        "annotations": str(data.annotations)})
    outcome = run_recipe(cfg)
    assert outcome.exit_code == 0, outcome.message
    provenance = json.loads(outcome.scorecard_path.read_text())["provenance"]
    pins = provenance["pins"]
    assert (list(pins["upstream"]), list(pins["huggingface"]), list(pins["urls"])) == (
        ["mosaichunk"], ["dataset", "clip"], ["alexnet"])
    assert sorted(provenance["inputs"]) == ["huggingface/clip", "huggingface/dataset", "upstream/mosaichunk",
                                            "urls/alexnet"]
