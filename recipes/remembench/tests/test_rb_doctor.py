"""``pinbench doctor remembench``: the rollouts the cohort expects are counted and decoded before any model loads."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import pinbench_recipes.remembench.doctor as doctor_module
from pinbench.core.recipe import get_recipe
from pinbench_recipes.remembench.fixture import build_fixture


def test_no_rollouts_stop_the_run_and_a_broken_one_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fx = build_fixture(tmp_path / "fx")
    monkeypatch.setattr(doctor_module, "PAPER", fx.paper)   # the fixture's small paper settings
    videos = tmp_path / "rollouts"
    videos.mkdir()
    options = {"videos": str(videos), "dataset_dir": str(fx.dataset_dir), "clip_dir": str(fx.clip_dir),
               "lpips_trunk": str(fx.lpips_trunk), "split": "t2v"}
    cfg = get_recipe("remembench").config("t2v-base-1chunk", options=options, env={})
    inputs = [f.line for f in doctor_module.doctor(cfg, None) if f.check == "inputs"]
    match = re.fullmatch(rf"0 of (\d+) rollouts found under {re.escape(str(videos))}", inputs[0])
    assert len(inputs) == 1 and match, inputs
    n = int(match.group(1))

    for video in fx.videos.glob("*.mp4"):      # every rollout present, every one cut short
        (videos / video.name).write_bytes(video.read_bytes()[:200])
    inputs = [f for f in doctor_module.doctor(cfg, None) if f.check == "inputs"]
    assert len(inputs) == 1 and not inputs[0].ok
    assert inputs[0].line.startswith(f"{n} of {n} rollouts are unusable under {videos} ({n} do not decode): ")
    for video in fx.videos.glob("*.mp4"):
        shutil.copy(video, videos / video.name)
    inputs = [f for f in doctor_module.doctor(cfg, None) if f.check == "inputs"]
    assert inputs[0].ok and inputs[0].line == f"{n} of {n} rollouts found under {videos}, all decode with opencv"
    (videos / "t2v-001").mkdir()   # a second rollout of one sample: the run would fail it, the doctor says so first
    shutil.copy(fx.videos / "t2v-002.mp4", videos / "t2v-001/rollout.mp4")
    inputs = [f.line for f in doctor_module.doctor(cfg, None) if f.check == "inputs" and not f.ok]
    assert inputs == [f"1 sample has two rollouts under {videos} (<id>.mp4 and <id>/rollout.mp4), and each "
                      "would fail: t2v-001"]


def test_a_generating_run_looks_for_no_rollouts_and_a_scoring_one_for_the_stored_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With --generator the rollouts are not made yet; with --skip-generation they are the ones stored in the run
    directory (was: "0 of N rollouts found under (no -o videos= given)" stopped both runs before they started)."""
    fx = build_fixture(tmp_path / "fx")
    monkeypatch.setattr(doctor_module, "PAPER", fx.paper)
    options = {"dataset_dir": str(fx.dataset_dir), "clip_dir": str(fx.clip_dir), "lpips_trunk": str(fx.lpips_trunk),
               "split": "t2v", "annotations": str(fx.annotations)}
    recipe, out = get_recipe("remembench"), tmp_path / "run"
    generating = recipe.config("t2v-base-1chunk", out_dir=out, options=options, generator="static", env={})
    assert [f for f in doctor_module.doctor(generating, None) if f.check == "inputs"] == []
    scoring = recipe.config("t2v-base-1chunk", out_dir=out, options=options, skip_generation=True, env={})
    inputs = [f.line for f in doctor_module.doctor(scoring, None) if f.check == "inputs"]
    assert len(inputs) == 1 and re.fullmatch(rf"0 of \d+ rollouts found under {re.escape(str(out / 'rollouts'))}",
                                             inputs[0]), inputs
    shutil.copytree(fx.videos, out / "rollouts")
    inputs = [f for f in doctor_module.doctor(scoring, None) if f.check == "inputs"]
    assert len(inputs) == 1 and inputs[0].ok
    assert inputs[0].line.endswith(f"rollouts found under {out / 'rollouts'}, all decode with opencv")


def test_a_videos_folder_that_is_not_there_is_named_before_the_release_is_fetched(tmp_path: Path) -> None:
    """With the release not fetched yet (no rows to count), ``-o videos=`` naming nothing was not said at all: the
    doctor listed only the downloads, and the missing folder came up once they were done."""
    options = {"videos": str(tmp_path / "no-such-rollouts"), "dataset_dir": str(tmp_path / "no-release")}
    cfg = get_recipe("remembench").config("mine", options=options, env={})
    inputs = [f.line for f in doctor_module.doctor(cfg, None) if f.check == "inputs"]
    assert inputs == [f"{tmp_path / 'no-such-rollouts'}: videos directory not found"]
    (tmp_path / "my-rollouts").mkdir()   # a mistyped folder names the one beside it
    cfg = get_recipe("remembench").config("mine", options={**options, "videos": str(tmp_path / "my-rollout")}, env={})
    inputs = [f.line for f in doctor_module.doctor(cfg, None) if f.check == "inputs"]
    assert inputs == [f"{tmp_path / 'my-rollout'}: videos directory not found "
                      f"(did you mean '{tmp_path / 'my-rollouts'}'?)"]
    (tmp_path / "rollout.mp4").write_bytes(b"")
    cfg = get_recipe("remembench").config("mine", options={**options, "videos": str(tmp_path / "rollout.mp4")}, env={})
    inputs = [f.line for f in doctor_module.doctor(cfg, None) if f.check == "inputs"]
    assert inputs == [f"{tmp_path / 'rollout.mp4'}: not a directory; name the folder that holds the rollouts"]


def test_t2v_pairs_that_cannot_be_read_are_named_before_the_release_is_fetched(tmp_path: Path) -> None:
    """A missing, invalid or absent ``-o annotations=`` was not said by the doctor at all: the run found it only
    once the release and the evaluator weights had been downloaded."""
    videos = tmp_path / "rollouts"
    videos.mkdir()
    base = {"videos": str(videos), "dataset_dir": str(tmp_path / "no-release")}
    (tmp_path / "bad.json").write_text("[1\n")

    def options_problems(**options: str) -> list[str]:
        cfg = get_recipe("remembench").config("mine", options={**base, **options}, env={})
        return [f.line for f in doctor_module.doctor(cfg, None) if f.check == "options"]

    assert options_problems(annotations=str(tmp_path / "pairs.json")) == [f"{tmp_path / 'pairs.json'}: file not found"]
    assert options_problems(annotations=str(tmp_path / "bad.json")) == [
        f"{tmp_path / 'bad.json'}: invalid JSON at line 2, column 1: Expecting ',' delimiter"]
    assert options_problems()[0].startswith("T2V needs departure/revisit annotations of your rollouts")
    (tmp_path / "pairs.json").write_text('{"t2v-001": {"departure_frame": 3, "revisit_frame": 9}}')
    assert options_problems(annotations=str(tmp_path / "pairs.json")) == []
    assert options_problems(split="i2v") == []   # I2V finds its own revisit frames


def test_a_paper_arm_that_is_not_published_is_named_before_the_release_is_fetched(tmp_path: Path) -> None:
    """``-o annotations=paper:Mosaichunk:1`` (a method misspelt, a budget the paper has not) passed the doctor and
    was refused only once the release had been downloaded."""
    videos = tmp_path / "rollouts"
    videos.mkdir()
    base = {"videos": str(videos), "dataset_dir": str(tmp_path / "no-release")}

    def options_problems(spec: str) -> list[str]:
        cfg = get_recipe("remembench").config("mine", options={**base, "annotations": spec}, env={})
        return [f.line for f in doctor_module.doctor(cfg, None) if f.check == "options"]

    for spec in ("paper:Mosaichunk:1", "paper:MosaiChunk:3", "paper:MosaiChunk:1.5", "paper:MosaiChunk"):
        assert options_problems(spec) == [f"annotations {spec!r}: expected paper:<Base|MoC|MosaiChunk>:<1|2>"]
    assert options_problems("paper:MosaiChunk:2") == []
    assert options_problems("paper:MoC:1") == []
