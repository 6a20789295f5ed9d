"""Per-rollout scoring: one decode, decoder agreement, frame-count and frame-pair checks, options."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from pinbench.core.config import RecipeError
from pinbench.core.inputs import InputKey
from pinbench.core.recipe import get_recipe
from pinbench.media.video import read_video, write_video
from pinbench_recipes.remembench.dataset import I2V_SETTINGS
from pinbench_recipes.remembench.fixture import T2V, t2v_frames
from pinbench_recipes.remembench.prepare import RowTask
from pinbench_recipes.remembench.release import dataset_option
from pinbench_recipes.remembench.scoring import Scorer


class FixedEmbedder:
    """Test double for ClipEmbedder: unit vectors depending on the mean of each image."""

    def embed(self, images, batch: int = 32):
        vectors = np.array([[1.0, float(np.mean(i)) / 255.0, 0.3] for i in images])
        return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def rollout(tmp_path_factory) -> Path:
    frames = t2v_frames(np.random.default_rng(0))
    return write_video(tmp_path_factory.mktemp("rollout") / "scene.mp4", frames, T2V.fps, crf=18)


def test_opencv_and_pyav_decode_identical_rgb(rollout):
    """Why one decode serves the pair metrics too: the FFmpeg-based decoders agree bit for bit."""
    cv = read_video(rollout, backend="opencv").frames
    with av.open(str(rollout)) as container:
        pyav = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
    assert cv.shape == pyav.shape == (379, 48, 64, 3)
    assert np.array_equal(cv, pyav)


def _task(video: Path | None, **changes) -> RowTask:
    from pinbench_recipes.remembench.dataset import T2V_PAPER

    task = {"sample_id": "scene", "scene_id": "scene", "split": "t2v", "setting": "t2v", "group": "t2v",
            "video": InputKey(video.name, 0, "0" * 64) if video else None,
            "looked_for": ["scene.mp4", "scene/rollout.mp4"],
            "num_frames": 379, "layout": [list(c) for c in T2V_PAPER.chunk_layout()], "departure_frame": 40,
            "revisit_frame": 300, "annotation_source": "test", "decoder": "opencv", "size": [64, 48],
            "models": {}, "recipe_version": "test", "device": "cpu"}
    task.update(changes)
    return RowTask(**task)


@pytest.fixture
def scorer(tmp_path, rollout):
    from pinbench.media.lpips import load_lpips
    from pinbench_recipes.remembench.fixture import write_random_alexnet

    digest = write_random_alexnet(tmp_path / "trunk.pth")
    return Scorer(FixedEmbedder(), load_lpips(tmp_path / "trunk.pth", expected_sha256=digest), tmp_path,
                  videos=rollout.parent, poses_dir=tmp_path)


def test_scores_a_t2v_rollout(scorer, rollout, tmp_path):
    result = scorer(_task(rollout))
    assert set(result) >= {"clip", "lpips_alex", "tempssim", "drift", "departure_frame", "revisit_frame"}
    assert 0 < result["tempssim"] <= 1 and result["drift"] >= 0 and result["decoder"] == "opencv"
    assert (tmp_path / result["pair_image"]).is_file()
    assert result["at_paper_size"] is True and (result["width"], result["height"]) == (64, 48)


def test_a_rollout_at_another_resolution_is_scored_as_upstream_and_flagged(scorer, rollout):
    """score.py checks the frame count, not the size; the recipe scores it too and flags it for a warning."""
    from pinbench.core.runner import SampleRecord
    from pinbench_recipes.remembench.run import _size_warnings

    result = scorer(_task(rollout, size=[1376, 768]))
    assert result["at_paper_size"] is False and result["paper_size"] == [1376, 768] and result["clip"] is not None
    records = [SampleRecord("scene", "ok", result, None, "0" * 64, 0.0),
               SampleRecord("other", "ok", scorer(_task(rollout)), None, "0" * 64, 0.0)]
    (warning,) = _size_warnings(records)
    assert warning.startswith("1 rollout is not at their split's resolution (e.g. scene: 64x48, the split "
                              "has 1376x768)")
    assert _size_warnings(records[1:]) == []


def _i2v_task(rollout: Path, poses: Path, **changes) -> RowTask:
    from pinbench_recipes.remembench.dataset import T2V_PAPER

    return _task(rollout, split="i2v", setting="rotation_180", translation=False, poses=poses.name,
                 layout=[list(c) for c in T2V_PAPER.chunk_layout()], **changes)


@pytest.mark.parametrize("poses", [np.full((379, 4, 4), np.nan), np.tile(np.eye(4), (379, 1, 1))],
                         ids=["all-nan", "never-moves"])
def test_i2v_poses_that_cannot_pick_a_revisit_fail_the_sample(scorer, rollout, tmp_path, poses):
    """Before: turnaround = revisit = frame 0, stored ok with CLIP 1 and LPIPS 0 (frame 0 against itself)."""
    from pinbench_recipes.remembench.revisit import PoseError

    path = tmp_path / "poses.npz"
    np.savez(path, poses=poses)
    with pytest.raises(PoseError, match=r"camera poses \(file: poses.npz\): (camera poses are not finite|degenerate)"):
        scorer(_i2v_task(rollout, path))


@pytest.mark.parametrize(
    ("changes", "message"),
    [({"num_frames": 253, "split": "t2v"}, "decoded 379 frames, the t2v setting has 253"),
     ({"departure_frame": 300, "revisit_frame": 40}, r"invalid frame pair \(300, 40\)"),
     ({"revisit_frame": 379}, "invalid frame pair"),
     ({"departure_frame": None, "revisit_frame": None}, "no departure/revisit annotation for scene 'scene'")],
)
def test_bad_tasks_fail_with_a_clear_reason(scorer, rollout, changes, message):
    with pytest.raises(ValueError, match=message):
        scorer(_task(rollout, **changes))


def test_missing_rollout_and_missing_poses(scorer, rollout):
    with pytest.raises(FileNotFoundError, match="looked for"):
        scorer(_task(None))
    with pytest.raises(RuntimeError, match="no camera poses"):
        scorer(_task(rollout, split="i2v", translation=False, poses=None))


def test_options_from_flags_and_environment():
    recipe = get_recipe("remembench")

    def parse(given: dict, env: dict):
        return recipe.parse_options(given, env=env).values

    opts = parse({"split": "i2v", "settings": "translation_90,rotation_180", "device": "cpu"}, env={})
    assert opts.settings == ("translation_90", "rotation_180") and dataset_option(opts)[1].startswith("cdeabf0")
    env = {"REMEMBENCH_SETTINGS": "all", "REMEMBENCH_DATASET": "evanbuzzZ/RememBench@" + "1" * 40,
           "REMEMBENCH_DEVICE": "cpu"}
    opts = parse({}, env=env)
    assert opts.settings == I2V_SETTINGS and dataset_option(opts)[0] == "evanbuzzZ/RememBench" and opts.split == "t2v"
    assert parse({"settings": "rotation_90"}, env=env).settings == ("rotation_90",)
    assert parse({}, env={}).settings == ("rotation_180",)  # the paper scorer's default setting
    assert recipe.options["settings"].choices == I2V_SETTINGS  # the declaration names the release's settings
    for bad, message in [({"split": "v2v"}, "split"), ({"video": "x"}, "unknown"),
                         ({"settings": "rotation_45"}, r"^-o settings: .rotation_45. not in .* or .all.$")]:
        with pytest.raises(RecipeError, match=message):
            parse(bad, env={})
    with pytest.raises(RecipeError, match=r"^dataset: .*40-hex"):
        dataset_option(parse({"dataset": "mosaichunk/RememBench@main"}, env={}))
