"""Trajectory resampling (SLERP + linear translation) and relative poses, against hand-built cameras."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from pinbench_recipes.remembench.dataset import DatasetError
from pinbench_recipes.remembench.trajectory import (
    continuous_quaternions,
    load_trajectory,
    main,
    relative_poses,
    resample_poses,
    scale_intrinsics,
)


def yaw_poses(degrees: list[float], positions: list[list[float]] | None = None) -> np.ndarray:
    poses = np.tile(np.eye(4), (len(degrees), 1, 1))
    poses[:, :3, :3] = Rotation.from_euler("z", np.radians(degrees)[:, None]).as_matrix()
    if positions is not None:
        poses[:, :3, 3] = positions
    return poses


def yaw_of(poses: np.ndarray) -> np.ndarray:
    return np.degrees(np.arctan2(poses[:, 1, 0], poses[:, 0, 0]))


def test_slerp_halves_each_step_and_keeps_both_endpoints():
    source = yaw_poses([0, 20, 40, 60, 80], positions=[[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 2, 0], [4, 4, 0]])
    out = resample_poses(source, 9)
    np.testing.assert_allclose(yaw_of(out), np.arange(0, 81, 10), atol=1e-9)
    np.testing.assert_allclose(out[0], source[0], atol=1e-12)
    np.testing.assert_allclose(out[-1], source[-1], atol=1e-12)
    np.testing.assert_allclose(out[:, 0, 3], np.arange(0, 4.5, 0.5), atol=1e-12)
    np.testing.assert_allclose(out[:, 1, 3], [0, 0, 0, 0, 0, 1, 2, 3, 4], atol=1e-12)
    np.testing.assert_allclose(out[:, 3], np.tile([0, 0, 0, 1.0], (9, 1)))


def test_resample_over_the_whole_sequence_at_uneven_positions():
    """257 source poses of a steady turn resampled to 64: position i sits at i * 256 / 63."""
    source = yaw_poses(list(np.linspace(0.0, 256.0 * 0.5, 257)))  # 0.5 degree per source step
    out = resample_poses(source, 64)
    expected = np.linspace(0, 256, 64) * 0.5
    np.testing.assert_allclose(yaw_of(out), expected, atol=1e-9)


def test_full_turn_takes_the_short_way_per_step():
    """A 360-degree turn in 60-degree steps: every in-between pose lies between its neighbours."""
    source = yaw_poses([0, 60, 120, 180, 240, 300, 360])
    out = resample_poses(source, 13)
    wrapped = (np.arange(13) * 30 + 180) % 360 - 180
    np.testing.assert_allclose(np.cos(np.radians(yaw_of(out) - wrapped)), 1.0, atol=1e-12)


def test_quaternion_sign_continuity():
    rotations = Rotation.from_euler("z", np.radians([0, 170, 190, 350, 370])[:, None]).as_matrix()
    quats = continuous_quaternions(rotations)
    assert all(np.dot(quats[i], quats[i - 1]) >= 0 for i in range(1, len(quats)))
    raw = Rotation.from_matrix(rotations).as_quat()
    assert any(np.dot(raw[i], raw[i - 1]) < 0 for i in range(1, len(raw)))  # the pass had work to do


def test_relative_poses_normalise_by_the_largest_step():
    source = yaw_poses([0, 0, 90, 90], positions=[[0, 0, 0], [1, 0, 0], [3, 0, 0], [3, 4, 0]])
    rel = relative_poses(source)
    np.testing.assert_allclose(rel[0], np.eye(4), atol=1e-12)
    steps = np.linalg.norm(rel[:, :3, 3], axis=1)
    np.testing.assert_allclose(steps, [0, 0.25, 0.5, 1.0], atol=1e-12)  # raw steps 1, 2, 4
    # the last step moves 4 along world y, which is the camera x axis after the 90-degree turn
    np.testing.assert_allclose(rel[3, :3, 3], [1.0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(yaw_of(rel), [0, 0, 90, 0], atol=1e-9)
    raw = relative_poses(source, normalize_translation=False)
    np.testing.assert_allclose(np.linalg.norm(raw[:, :3, 3], axis=1), [0, 1, 2, 4], atol=1e-12)


def test_relative_poses_ignore_where_the_path_starts():
    source = yaw_poses([0, 30, 45], positions=[[0, 0, 0], [1, 1, 0], [2, 0, 1]])
    moved = np.eye(4)
    moved[:3, :3] = Rotation.from_euler("xyz", [0.3, -0.2, 1.1]).as_matrix()
    moved[:3, 3] = [5, -2, 1.5]
    np.testing.assert_allclose(relative_poses(moved @ source), relative_poses(source), atol=1e-12)
    still = np.tile(np.eye(4), (3, 1, 1))
    np.testing.assert_allclose(relative_poses(still), still)  # nothing moves: no division by zero


def test_load_trajectory_and_cli(tmp_path):
    poses = yaw_poses(list(np.linspace(0, 90, 257))).astype(np.float32)
    intrinsics = np.array([[500, 500, 416, 240], [1, 1, 1, 1]], np.float32)
    np.savez(tmp_path / "t.npz", poses=poses, intrinsics=intrinsics)
    traj = load_trajectory(tmp_path / "t.npz")
    np.testing.assert_array_equal(traj.intrinsics, [500, 500, 416, 240])
    np.testing.assert_allclose(scale_intrinsics(traj.intrinsics, (832, 480), (416, 240)), [250, 250, 208, 120])
    main([str(tmp_path / "t.npz"), str(tmp_path / "out.npz")])
    with np.load(tmp_path / "out.npz") as out:
        assert out["poses"].shape == (64, 4, 4) and out["relative"].shape == (64, 4, 4)
    np.savez(tmp_path / "bad.npz", poses=poses[:, :3])
    with pytest.raises(DatasetError, match="bad.npz: needs arrays"):
        load_trajectory(tmp_path / "bad.npz")
    np.savez(tmp_path / "bad2.npz", poses=poses[:, :3], intrinsics=intrinsics)
    with pytest.raises(DatasetError, match=r"bad2.npz: poses must be \(T >= 2, 4, 4\)"):
        load_trajectory(tmp_path / "bad2.npz")
    with pytest.raises(DatasetError, match="trajectory not found"):
        load_trajectory(tmp_path / "absent.npz")
