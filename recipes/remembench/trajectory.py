"""I2V camera trajectories: load the bundled ``.npz``, resample, and make relative poses for generators.

Why this lives in the recipe: LingBot-World-Infinity (the paper's I2V backbone) is conditioned on 64
camera positions resampled from the full 256/257-sample source path (SLERP for rotation after a
quaternion sign-continuity pass, linear translation, both endpoints included), then on relative
consecutive poses with translation normalised by the largest step. A generator that truncates the
path to the 253 decoded frames, or resamples differently, is conditioned on another trajectory.
Poses are camera-to-world, OpenCV axes (x right, y down, z forward).

``python -m pinbench_recipes.remembench.trajectory IN.npz OUT.npz`` writes the resampled and relative poses.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation, Slerp

from pinbench_recipes.remembench.dataset import DatasetError

LATENT_POSITIONS = 64  # (253 - 1) // 4 + 1 latent frames of the paper's I2V rollouts


@dataclass(frozen=True)
class Trajectory:
    """``poses`` (T, 4, 4) camera-to-world; ``intrinsics`` [fx, fy, cx, cy] at 832 x 480 (first row)."""

    poses: np.ndarray
    intrinsics: np.ndarray


def load_trajectory(path: Path | str) -> Trajectory:
    """Read ``poses`` and the first ``intrinsics`` row (row counts may differ, as in the paper's code)."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            if "poses" not in data or "intrinsics" not in data:
                raise DatasetError(f"{path}: needs arrays 'poses' and 'intrinsics', has {sorted(data.files)}")
            poses, intrinsics = np.array(data["poses"]), np.array(data["intrinsics"])
    except FileNotFoundError:
        raise DatasetError(f"{path}: trajectory not found") from None
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{path}: unreadable trajectory: {exc}") from None
    if poses.ndim != 3 or poses.shape[1:] != (4, 4) or len(poses) < 2:
        raise DatasetError(f"{path}: poses must be (T >= 2, 4, 4), got {poses.shape}")
    intrinsics = intrinsics.reshape(-1, 4) if intrinsics.size % 4 == 0 else intrinsics
    if intrinsics.ndim != 2 or intrinsics.shape[1] != 4 or len(intrinsics) == 0:
        raise DatasetError(f"{path}: intrinsics must be rows of [fx, fy, cx, cy], got {intrinsics.shape}")
    if not np.isfinite(poses).all():
        raise DatasetError(f"{path}: poses contain NaN or infinity")
    return Trajectory(poses=poses, intrinsics=intrinsics[0].astype(np.float64))


def continuous_quaternions(rotations: np.ndarray) -> np.ndarray:
    """(T, 4) x,y,z,w quaternions of (T, 3, 3) rotations, each flipped to the previous one's hemisphere."""
    quats = Rotation.from_matrix(rotations).as_quat()
    for i in range(1, len(quats)):
        if np.dot(quats[i], quats[i - 1]) < 0:
            quats[i] = -quats[i]
    return quats


def resample_poses(poses: np.ndarray, n_positions: int = LATENT_POSITIONS) -> np.ndarray:
    """(n, 4, 4) poses at ``linspace(0, T-1, n)`` of the source indices: SLERP rotation, linear translation."""
    poses = np.asarray(poses, dtype=np.float64)
    if n_positions < 2:
        raise ValueError(f"need at least 2 positions, got {n_positions}")
    source = np.arange(len(poses), dtype=np.float64)
    targets = np.linspace(0.0, len(poses) - 1.0, n_positions)
    slerp = Slerp(source, Rotation.from_quat(continuous_quaternions(poses[:, :3, :3])))
    out = np.tile(np.eye(4), (n_positions, 1, 1))
    out[:, :3, :3] = slerp(targets).as_matrix()
    for axis in range(3):
        out[:, axis, 3] = np.interp(targets, source, poses[:, axis, 3])
    return out


def relative_poses(poses: np.ndarray, normalize_translation: bool = True) -> np.ndarray:
    """Consecutive relative poses: P_i = T_0^-1 T_i, then P'_i = P_{i-1}^-1 P_i (P'_0 = I).

    With ``normalize_translation`` every translation is divided by the largest step length, so the
    largest step has unit length (nothing changes for a trajectory that never moves).
    """
    poses = np.asarray(poses, dtype=np.float64)
    anchored = np.linalg.inv(poses[0]) @ poses
    anchored[0] = np.eye(4)
    steps = np.empty_like(anchored)
    steps[0] = np.eye(4)
    steps[1:] = np.linalg.inv(anchored[:-1]) @ anchored[1:]
    if normalize_translation:
        longest = float(np.linalg.norm(steps[:, :3, 3], axis=1).max())
        if longest > 0:
            steps[:, :3, 3] /= longest
    return steps


def scale_intrinsics(intrinsics: np.ndarray, source_size: tuple[int, int],
                     target_size: tuple[int, int]) -> np.ndarray:
    """[fx, fy, cx, cy] at ``source_size`` (W, H) rescaled to ``target_size`` (W, H)."""
    sx, sy = target_size[0] / source_size[0], target_size[1] / source_size[1]
    fx, fy, cx, cy = np.asarray(intrinsics, dtype=np.float64)
    return np.array([fx * sx, fy * sy, cx * sx, cy * sy])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pinbench_recipes.remembench.trajectory",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("trajectory", type=Path, help="a RememBench I2V .npz (poses, intrinsics)")
    parser.add_argument("out", type=Path, help="output .npz: poses (resampled), relative, intrinsics")
    parser.add_argument("--positions", type=int, default=LATENT_POSITIONS)
    args = parser.parse_args(argv)
    traj = load_trajectory(args.trajectory)
    resampled = resample_poses(traj.poses, args.positions)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(args.out, poses=resampled, relative=relative_poses(resampled), intrinsics=traj.intrinsics)
    print(f"{args.out}: {args.positions} positions from {len(traj.poses)} source poses")


if __name__ == "__main__":
    main()
