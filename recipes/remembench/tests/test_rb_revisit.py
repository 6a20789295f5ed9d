"""I2V revisit selection on constructed camera sequences; Pi3X input sizing; poses files."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pinbench_recipes.remembench.revisit import (
    PoseError,
    check_poses,
    heading_degrees,
    load_poses,
    pi3x_input_size,
    reconstruction_input,
    save_poses,
    select_revisit,
)


def cameras(yaw_degrees: list[float], x_positions: list[float] | None = None) -> np.ndarray:
    """Camera-to-world poses turned by ``yaw`` about the y axis: the +z axis is (sin yaw, 0, cos yaw)."""
    angles = np.radians(yaw_degrees)
    poses = np.repeat(np.eye(4)[None], len(angles), axis=0)
    cos, sin = np.cos(angles), np.sin(angles)
    poses[:, 0, 0], poses[:, 0, 2], poses[:, 2, 0], poses[:, 2, 2] = cos, sin, -sin, cos
    if x_positions is not None:
        poses[:, 0, 3] = x_positions
    return poses


def test_full_turn_uses_the_unsigned_heading():
    """A 360-degree turn: 175 degrees is the farthest view; 355 is closer to the start than 385."""
    choice = select_revisit(cameras([0, 90, 175, 260, 355, 385]), translation=False)
    assert (choice.turnaround, choice.revisit) == (2, 4)
    # the paper's +1e-9 in the cosine's denominator leaves frame 0 at 0.0026 degrees, not 0
    np.testing.assert_allclose(choice.heading_deg, [0, 90, 175, 100, 5, 25], atol=3e-3)


def test_translation_turnaround_is_the_farthest_position():
    choice = select_revisit(cameras([0, 150, 100, 2, 20], x_positions=[0, 1, 2, 1, 0]), translation=True)
    assert (choice.turnaround, choice.revisit) == (2, 3)
    np.testing.assert_allclose(choice.departure, [0, 1, 2, 1, 0])


def test_rotation_and_back_with_an_overshoot():
    yaw = list(np.linspace(0, 180, 50)) + list(np.linspace(180, -20, 60))  # ends 20 degrees past the start
    choice = select_revisit(cameras(yaw), translation=False)
    assert choice.turnaround == 49
    assert choice.revisit == 50 + int(np.argmin(np.abs(np.linspace(180, -20, 60))))


def test_ties_take_the_first_frame():
    choice = select_revisit(cameras([0, 90, 90, 10, 10, 50]), translation=False)
    assert (choice.turnaround, choice.revisit) == (1, 3)


def test_revisit_never_before_turnaround():
    """Frame 0 itself has heading 0, but the search starts at the turnaround."""
    choice = select_revisit(cameras([0, 30, 60, 40]), translation=False)
    assert (choice.turnaround, choice.revisit) == (2, 3)


def test_heading_ignores_scale_and_bad_shapes():
    poses = cameras([0, 45])
    poses[1, :3, 2] *= 3.0
    np.testing.assert_allclose(heading_degrees(poses), [0, 45], atol=3e-3)
    with pytest.raises(ValueError, match="poses must be"):
        select_revisit(np.eye(4)[None], translation=False)


@pytest.mark.parametrize("translation", [False, True])
def test_non_finite_poses_fail_instead_of_scoring_frame_0_against_itself(translation):
    """All-NaN poses used to give turnaround = revisit = 0 (argmax of NaN), a perfect score for nothing."""
    with pytest.raises(PoseError, match=r"not finite \(NaN or infinity\) in 5 of 5 frames, first in frame 0"):
        select_revisit(np.full((5, 4, 4), np.nan), translation=translation)
    poses = cameras([0, 30, 60, 30, 0])
    poses[3, 1, 3] = np.inf
    with pytest.raises(PoseError, match="in 1 of 5 frames, first in frame 3"):
        select_revisit(poses, translation=translation)


@pytest.mark.parametrize(
    ("damage", "message"),
    [(lambda p: p[2, :3, 2].__imul__(3.0), r"frame 2's pose has no rotation: max \|R\^T R - I\| = 8"),
     (lambda p: p[1, :3, :3].__imul__(0.0), "frame 1's pose has no rotation"),
     (lambda p: p[4, :3, 0].__imul__(-1.0), r"frame 4's pose has no rotation: .*det R = -1"),  # a mirror
     (lambda p: p[3, 3].__setitem__(slice(None), [0.0, 0.0, 0.0, 2.0]), "frame 3's pose is not a camera-to-world")],
)
def test_poses_that_are_not_rigid_camera_poses_fail(damage, message):
    poses = cameras([0, 30, 60, 30, 0])
    damage(poses)
    with pytest.raises(PoseError, match=message):
        select_revisit(poses, translation=False)
    check_poses(cameras([0, 30, 60, 30, 0]) + 1e-7)  # float32-level noise of a real reconstruction passes


def test_a_camera_that_never_departs_is_a_degenerate_revisit_not_a_perfect_one():
    with pytest.raises(PoseError, match="degenerate revisit: the camera's viewing direction never departs"):
        select_revisit(cameras([0, 0, 0, 0]), translation=False)
    with pytest.raises(PoseError, match="degenerate revisit: the camera's position never departs"):
        select_revisit(cameras([0, 40, 80, 0]), translation=True)  # turns but never moves
    choice = select_revisit(cameras([0, 0, 0, 0], x_positions=[0, 1, 2, 0]), translation=True)
    assert (choice.turnaround, choice.revisit) == (2, 2)  # moves without turning: the first frame on the way back


def test_pi3x_input_size_matches_the_paper():
    assert pi3x_input_size(832, 480) == (658, 378)
    assert pi3x_input_size(1376, 768) == (672, 378)
    w, h = pi3x_input_size(64, 48)
    assert w % 14 == 0 and h % 14 == 0
    frames = np.zeros((2, 48, 64, 3), np.uint8)
    assert reconstruction_input(frames).shape == (2, h, w, 3)


def test_pose_files_round_trip_and_errors(tmp_path):
    poses = cameras([0, 10, 20])
    save_poses(tmp_path / "p.npz", poses)
    np.testing.assert_array_equal(load_poses(tmp_path / "p.npz", 3), poses)
    with np.load(tmp_path / "p.npz") as data:
        np.testing.assert_array_equal(data["idx"], [0, 1, 2])
    with pytest.raises(ValueError, match=r"p.npz: poses are \(3, 4, 4\), expected \(4, 4, 4\)"):
        load_poses(tmp_path / "p.npz", 4)
    with pytest.raises(ValueError, match="camera poses not found"):
        load_poses(tmp_path / "absent.npz", 3)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="Pi3X needs CUDA and its pinned weights")
def test_pi3x_reconstruction_of_a_turn_gpu():  # pragma: no cover - GPU CI
    """Real Pi3X (cache from `pinbench fetch remembench`): a pan out and back gives a revisit near the end."""
    from pinbench_recipes.remembench.fixture import i2v_frames, i2v_poses
    from pinbench_recipes.remembench.revisit import Pi3XReconstructor
    from pinbench_recipes.remembench.weights import load_recipe_pins, resolve_pi3x

    path, _ = resolve_pi3x(load_recipe_pins(), None, None, download=False)
    rng = np.random.default_rng(0)
    frames = i2v_frames(rng, i2v_poses(rng, "rotation_90", "left", 40), translation=False)
    poses = Pi3XReconstructor(path).poses(frames)
    assert poses.shape == (40, 4, 4) and np.isfinite(poses).all()
    choice = select_revisit(poses, translation=False)
    assert choice.turnaround < choice.revisit
