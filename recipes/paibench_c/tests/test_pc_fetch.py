"""`pinbench fetch paibench-c`: only the selected tasks' files, the chosen checkpoint, weights when needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pinbench_recipes.paibench_c.fetch as fetch_module
from pinbench.core.config import RunConfig
from pinbench.core.pins import load_pins
from pinbench.core.recipe import get_recipe
from pinbench_recipes.paibench_c.rows import load_tasks
from pinbench_recipes.paibench_c.tests.test_pc_rows import task_row


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list:
    """Replace the two download functions by recorders (test doubles); tasks.json is local."""
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps([task_row(i) for i in range(5)]))
    calls: list = []
    monkeypatch.setattr(fetch_module, "fetch_url", lambda pin, **kw: calls.append(("url", pin.filename)) or tasks)
    monkeypatch.setattr(fetch_module, "fetch_hf", lambda pin, **kw: calls.append(("hf", pin)) or tmp_path)
    monkeypatch.setenv("PAIBENCH_C_EVALUATOR_DIR", str(tmp_path / "no-evaluator-here"))
    return calls


def _cfg(tmp_path: Path, checkpoint: str, limit: int | None, **options: str) -> RunConfig:
    return get_recipe("paibench-c").config(checkpoint, out_dir=tmp_path, limit=limit, options=options, env={})


def test_smoke_fetch_narrows_the_dataset_to_the_selected_tasks(tmp_path: Path, recorded: list) -> None:
    fetch_module.fetch(_cfg(tmp_path, "Cosmos3-Nano", 2))
    hf = [pin for kind, pin in recorded if kind == "hf"]
    dataset = next(p for p in hf if p.repo_type == "dataset")
    assert dataset.allow_patterns == [
        "videos/task_0000.mp4", "captions/task_0000.json", "depth_vids/task_0000.mp4", "sam2_vids/task_0000.mp4",
        "videos/task_0001.mp4", "captions/task_0001.json", "depth_vids/task_0001.mp4", "sam2_vids/task_0001.mp4"]
    assert [p.repo_id for p in hf if p.repo_type == "model"] == ["IDEA-Research/grounding-dino-tiny",
                                                                 "nvidia/Cosmos3-Nano"]
    urls = [name for kind, name in recorded if kind == "url"]
    assert urls == ["tasks.json", "sam2_hiera_large.pt", "DOVER.pth", "video_depth_anything_vits.pth"]


def test_full_fetch_uses_the_pinned_globs_and_can_skip_model_and_weights(tmp_path: Path, recorded: list) -> None:
    fetch_module.fetch(_cfg(tmp_path, "Cosmos3-Super", None, model="off", evaluator_weights="off"))
    hf = [pin for kind, pin in recorded if kind == "hf"]
    assert len(hf) == 1 and hf[0].allow_patterns == ["videos/*.mp4", "captions/*.json", "depth_vids/*.mp4",
                                                     "sam2_vids/*.mp4"]
    assert [name for kind, name in recorded if kind == "url"] == ["tasks.json"]


def test_dataset_pin_for_located_runs_names_every_file(tmp_path: Path) -> None:
    pins = load_pins(fetch_module.PINS_PATH)
    (tmp_path / "t.json").write_text(json.dumps([task_row(i) for i in range(3)]))
    pin = fetch_module.dataset_pin(pins, load_tasks(tmp_path / "t.json"))
    assert len(pin.allow_patterns) == 12 and pin.revision == pins.huggingface["dataset"].revision
    with pytest.raises(ValueError, match="unknown checkpoint 'Cosmos3-Edge'"):
        fetch_module.model_pin(pins, "Cosmos3-Edge")
