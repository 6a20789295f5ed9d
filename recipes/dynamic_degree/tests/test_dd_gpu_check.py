"""The torchvision-vs-original RAFT comparison (gpu_check.py).

GPU CI runs it on real videos with the real weights; the CPU variant runs it with seeded random
weights wherever a princeton-vl/RAFT checkout is provided (PINBENCH_RAFT_ORIGINAL_SRC).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from pinbench.media.video import write_video
from pinbench_recipes.dynamic_degree import gpu_check
from pinbench_recipes.dynamic_degree.fixture import FixtureVideo, render
from pinbench_recipes.dynamic_degree.flow import RaftSettings, settings_grid

ORIGINAL_SRC = os.environ.get("PINBENCH_RAFT_ORIGINAL_SRC")


def _videos(root: Path) -> Path:
    root.mkdir()
    video = FixtureVideo("moving", 8.0, 3, (3, 1), 3, 0.0)
    write_video(root / "moving.mp4", render(video, np.random.default_rng(0), height=128, width=136), 8.0)
    return root


@pytest.mark.skipif(not ORIGINAL_SRC, reason="needs PINBENCH_RAFT_ORIGINAL_SRC (princeton-vl/RAFT checkout)")
def test_random_weight_comparison_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    code = gpu_check.main(["--videos", str(_videos(tmp_path / "videos")), "--original-src", ORIGINAL_SRC,
                           "--random-weights", "1", "--device", "cpu", "--max-clips", "1", "--batch-sizes", "2",
                           "--out", str(out)])
    report = json.loads(out.read_text())
    assert code == 0, report["failures"]
    (video,) = report["videos"]
    assert video["n_transitions"] == 2 and video["n_transitions_on_cpu"] == 2
    expected = {s.label for s in settings_grid((2,))} | {RaftSettings().label}
    assert set(video["variants"]) == expected and report["recipe_setting"] == RaftSettings().label
    recipe = report["summary"][RaftSettings().label]
    assert recipe["vs_cpu_clip_flips"] == 0 and recipe["vs_cpu_max_abs_dm"] == 0.0   # the same CPU computation
    assert report["adopt"] in expected and all(row["pairs_per_s"] > 0 for row in report["summary"].values())


@pytest.mark.gpu
def test_torchvision_raft_matches_original_on_real_videos(tmp_path: Path) -> None:
    import torch

    needed = ("PINBENCH_DD_CHECK_VIDEOS", "PINBENCH_RAFT_ORIGINAL_SRC", "PINBENCH_RAFT_THINGS_ORIGINAL")
    if not torch.cuda.is_available() or not all(os.environ.get(v) for v in needed):
        pytest.skip(f"needs CUDA and {', '.join(needed)}")
    out = tmp_path / "check.json"
    code = gpu_check.main(["--device", "cuda", "--out", str(out)])
    report = json.loads(out.read_text())
    assert code == 0, report["failures"]
    assert report["weights"]["max_abs_difference"] is not None
