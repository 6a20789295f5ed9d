"""Mirror rollouts of N = 2, 22, 42, ... frames (N % 20 == 2): upstream's lcm_metric meets a sub-batch of one pair and
fails ('float' object is not iterable); the directory's record carries the error. The native block must score such
a rollout, the plan must say so before the GPU run, and the scorecard must name the sample with both sides."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from recipe_files import build_context

from pinbench.core.recipe import get_recipe
from pinbench.media.video import write_video
from pinbench.ops.launch import run_recipe
from pinbench_recipes.mind import fixture, native
from pinbench_recipes.mind.ingest import Canvas, ingest
from pinbench_recipes.mind.layout import mirror_fails_upstream

RECIPE = get_recipe("mind")


def test_a_one_frame_reversed_view_is_ingested() -> None:
    """The last sub-batch of the time-reversed half of a 22-frame rollout: one frame, negative stride."""
    frames = np.arange(22 * 90 * 160 * 3, dtype=np.uint64).reshape(22, 90, 160, 3).astype(np.uint8)
    view = frames[11:][::-1][10:20]
    out = ingest(view, Canvas(72, 128))
    assert out.shape == (1, 3, 72, 128)
    assert np.array_equal(out[0].numpy(), ingest(frames[11:12].copy(), Canvas(72, 128))[0].numpy())


def test_native_mirror_block_scores_a_rollout_upstream_fails_on(tmp_path: Path) -> None:
    from pinbench.media.lpips import load_lpips

    rng = np.random.default_rng(0)
    video = write_video(tmp_path / "path-1.mp4", rng.integers(0, 255, (22, 72, 128, 3), dtype=np.uint8), 24, crf=0)
    trunk = tmp_path / "alexnet.pth"
    digest = fixture.write_random_alexnet(trunk)
    block = native.mirror_block(video, frames=22, lpips_model=load_lpips(trunk, expected_sha256=digest),
                                canvas=Canvas(72, 128))
    assert block["length"] == 11 and len(block["mse"]) == 11 and all(np.isfinite(block["mse"]))
    assert [n for n in range(2, 70, 2) if mirror_fails_upstream(n)] == [2, 22, 42, 62]


def test_the_scorecard_names_the_sample_official_error_native_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The fixture with one more mirror directory holding a 22-frame rollout (the test double fails on it as
    process.py does): the plan warns, the sample fails with upstream's error, the native value is named beside it."""
    extra = ("3rd_data", "loop-2", (("path-1.mp4", 22, 4.0, False),))
    monkeypatch.setattr(fixture, "MIRRORS", (*fixture.MIRRORS, extra))
    out = tmp_path / "fx"
    outcome = run_recipe(RECIPE.config("fixture", out_dir=out, offline=True, fixture=True, env={}))
    assert outcome.exit_code == 3    # partial, and 8 samples where the fixture reference has 7: it does not apply
    plan = capsys.readouterr().out
    assert "note: warning: " in plan and "loop-2/path-1.mp4: 22 frames, so 11 mirrored pairs" in plan
    card = json.loads((out / "scorecard.json").read_text())
    assert card["status"] == "partial"
    sample = "3rd_data.mirror_test.loop-2"
    failed = card["metrics"]["3rd_data/mirror_test/gsc_mse"]["failed"]
    assert [f["sample_id"] for f in failed] == [sample] and "'float' object is not iterable" in failed[0]["error"]
    (named,) = card["extra"]["official_failed_native_scored"]
    assert named["sample_id"] == sample and named["official"].startswith("error: ")
    assert "'float' object is not iterable" in named["official"]
    assert named["native"]["gsc_mse"] > 0 and set(named["native"]) == {"gsc_mse", "gsc_psnr", "gsc_ssim", "gsc_lpips"}


def test_the_known_quirks_table_documents_it() -> None:
    readme = (build_context(RECIPE.dir) / "README.md").read_text()
    quirks = readme.split("## Changes vs upstream / known quirks", 1)[1].split("\n## ", 1)[0]
    (row,) = [line for line in quirks.splitlines() if "'float' object is not iterable" in line]
    assert "N % 20 == 2" in row and "official_failed_native_scored" in row
