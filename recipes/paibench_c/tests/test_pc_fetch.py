"""`pinbench fetch paibench-c`: only the selected tasks' files, the chosen checkpoint, weights when needed."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

import pinbench_recipes.paibench_c.fetch as fetch_module
from pinbench.core.config import RunConfig
from pinbench.core.pins import load_pins
from pinbench.core.recipe import get_recipe
from pinbench_recipes.paibench_c.fixture import build_fixture_dataset
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


def test_the_doctor_decodes_the_stored_videos_with_the_runs_decoder(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A scoring run's doctor reads its stored videos with ``-o decoder=``, the run's own: the default (OpenCV)
    decodes the fixture's MPEG-4 Part 2 videos; a decoder not installed here is one line naming the option."""
    root = tmp_path / "fx"
    dataset = build_fixture_dataset(root)
    monkeypatch.setattr(fetch_module, "locate", lambda pin, **kw: root / "tasks.json")   # test double: tasks.json
    pins, out = load_pins(fetch_module.PINS_PATH), tmp_path / "run"
    videos = out / "edge" / "videos"
    videos.mkdir(parents=True)
    for task in load_tasks(root / "tasks.json")[:2]:   # the fixture's GT videos stand for the stored ones
        shutil.copy(dataset / task.video_path, videos / f"{task.task_id}.mp4")

    def video_lines(**options: str) -> list[str]:
        cfg = get_recipe("paibench-c").config("Cosmos3-Nano", out_dir=out, limit=2, skip_generation=True,
                                              options={"modalities": "edge", **options}, env={})
        return [f"{f.ok} {f.line}" for f in fetch_module.doctor(cfg, pins) if f.check == "inputs"]

    assert video_lines() == [f"True 2 of 2 edge videos found under {videos}, all decode with opencv"]
    assert video_lines(decoder="pyav") == [f"True 2 of 2 edge videos found under {videos}, all decode with pyav"]
    monkeypatch.setitem(sys.modules, "decord", None)   # test double: decord's import fails (as on aarch64)
    (line,) = video_lines(decoder="decord")
    assert line.startswith("False video decoder 'decord' is not available here") and "\n" not in line
    assert line.endswith("choose another with -o decoder=<pyav, opencv>")


def test_a_generator_run_needs_no_cosmos3_and_takes_any_checkpoint_name(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`run paibench-c --checkpoint my-model --generator ...` (what `run --help` says: any other name scores your own
    model) was refused by the doctor, "unknown checkpoint 'my-model'", and without it at prepare: the Cosmos3
    weights and cosmos-framework were required of rollouts a --generator makes."""
    monkeypatch.setenv("PAIBENCH_C_FRAMEWORK_DIR", str(tmp_path / "no-framework-here"))
    pins = load_pins(fetch_module.PINS_PATH)

    def findings(checkpoint: str, generator: str | None) -> list[str]:
        cfg = get_recipe("paibench-c").config(checkpoint, out_dir=tmp_path / "run", limit=2, generator=generator,
                                              env={})
        assert fetch_module.makes_cosmos3(cfg) is (generator is None)
        return [f"{f.check} {f.line}" for f in fetch_module.doctor(cfg, pins) if not f.ok]

    own = findings("my-model", "folder")
    assert not [line for line in own if "my-model" in line or "Cosmos3" in line or "cosmos-framework" in line], own
    assert [line for line in findings("Cosmos3-Nano", "folder") if "Cosmos3-Nano" in line] == []
    (refused,) = findings("my-model", None)   # Cosmos3 makes them: the name must be one of its checkpoints
    assert refused == "inputs unknown checkpoint 'my-model'; known: Cosmos3-Nano, Cosmos3-Super"
    assert any("nvidia/Cosmos3-Nano@" in line for line in findings("Cosmos3-Nano", None))
