"""I2V revisit selection from camera poses, and the Pi3X reconstruction that produces those poses.

Why: an I2V rollout's departure is its conditioning frame (frame 0); its revisit is the frame where
the camera is back, judged from the rollout's own reconstructed cameras. The rule (paper, score.py):
the turnaround is the first frame whose viewing direction is farthest from frame 0's (rotation
settings) or whose camera centre is farthest from frame 0's (translation settings); from the
turnaround on, the revisit is the first frame with the smallest unsigned viewing-direction angle
to frame 0.

Pi3X (``yyfz/Pi3`` at the pinned commit, weights ``yyfz233/Pi3X`` at the pinned revision) runs on a
GPU in the recipe image: all decoded frames in one forward pass, resized to about 255,000 pixels with
sides rounded to multiples of 14 (PIL Lanczos), values in [0, 1], bf16 autocast, no priors.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pinbench.core.files import FileError, MissingFile, atomic_path, read_regular_bytes

PIXEL_LIMIT = 255_000
PATCH = 14
# How far a pose may be from a rigid camera-to-world matrix. Pi3X orthogonalises its rotations by SVD in
# float32, so real reconstructions are within ~1e-6; 1e-3 only rejects what is not a camera pose at all.
RIGID_TOLERANCE = 1e-3


class PoseError(ValueError):
    """Camera poses that cannot pick a revisit: not finite, not rigid, or a camera that never departs."""


@dataclass(frozen=True)
class RevisitChoice:
    turnaround: int
    revisit: int
    heading_deg: np.ndarray  # unsigned angle of each frame's viewing direction to frame 0's
    departure: np.ndarray  # the signal whose argmax is the turnaround


def heading_degrees(poses: np.ndarray) -> np.ndarray:
    """Unsigned angle (degrees, 0..180) between each camera's +z axis in world and frame 0's."""
    forward = np.asarray(poses, dtype=np.float64)[:, :3, 2]
    # Elementwise sums, not BLAS (``@``, ``np.linalg.norm`` of a vector): OpenBLAS rounds by the kernel it picks
    # for the CPU, and the headings land in every I2V result.
    lengths = np.sqrt(np.sum(forward * forward, axis=1))
    cosine = np.sum(forward * forward[0], axis=1) / (lengths * lengths[0] + 1e-9)
    return np.degrees(np.arccos(np.clip(cosine, -1.0, 1.0)))


def check_poses(poses: np.ndarray) -> np.ndarray:
    """(N, 4, 4) float64 camera-to-world poses, or PoseError saying which frame is not a rigid pose and why.

    Why: NaN poses make every heading NaN, ``argmax`` then returns frame 0 for the turnaround and the
    revisit alike, and frame 0 compared with itself scores as a perfect revisit (CLIP 1, LPIPS 0).
    """
    poses = np.asarray(poses, dtype=np.float64)
    if poses.ndim != 3 or poses.shape[1:] != (4, 4) or len(poses) < 2:
        raise PoseError(f"poses must be (N >= 2, 4, 4), got {poses.shape}")
    finite = np.isfinite(poses).all(axis=(1, 2))
    if not finite.all():
        bad = np.flatnonzero(~finite)
        raise PoseError(f"camera poses are not finite (NaN or infinity) in {len(bad)} of {len(poses)} frames, "
                        f"first in frame {bad[0]}")
    bottom = np.abs(poses[:, 3, :] - [0.0, 0.0, 0.0, 1.0]).max(axis=1)
    rotations = poses[:, :3, :3]
    skew = np.abs(np.swapaxes(rotations, 1, 2) @ rotations - np.eye(3)).max(axis=(1, 2))
    det = np.linalg.det(rotations)
    for frame in range(len(poses)):
        if bottom[frame] > RIGID_TOLERANCE:
            raise PoseError(f"frame {frame}'s pose is not a camera-to-world matrix: its last row is "
                            f"{np.round(poses[frame, 3], 6).tolist()}, not [0, 0, 0, 1]")
        if skew[frame] > RIGID_TOLERANCE or abs(det[frame] - 1.0) > RIGID_TOLERANCE:
            raise PoseError(f"frame {frame}'s pose has no rotation: max |R^T R - I| = {skew[frame]:.3g}, "
                            f"det R = {det[frame]:.6g} (a rotation has 0 and 1)")
    return poses


def select_revisit(poses: np.ndarray, translation: bool) -> RevisitChoice:
    """Turnaround then revisit frame of a (N, 4, 4) camera-to-world sequence (first extreme wins ties).

    PoseError for poses :func:`check_poses` rejects, and for a camera that never departs from frame 0
    (every heading, or every position, equal to frame 0's): the turnaround would be frame 0, and so the
    revisit, and frame 0 compared with itself would score as a perfect revisit.
    """
    poses = check_poses(poses)
    heading = heading_degrees(poses)
    departure = np.linalg.norm(poses[:, :3, 3] - poses[0, :3, 3], axis=1) if translation else heading
    turnaround = int(np.argmax(departure))
    if turnaround == 0:
        kind = "position" if translation else "viewing direction"
        raise PoseError(f"degenerate revisit: the camera's {kind} never departs from frame 0's (largest "
                        f"departure {departure.max():.3g}{'' if translation else ' degrees'}), so the turnaround "
                        "and the revisit would both be frame 0, compared with itself")
    revisit = turnaround + int(np.argmin(heading[turnaround:]))
    return RevisitChoice(turnaround=turnaround, revisit=revisit, heading_deg=heading, departure=departure)


def pi3x_input_size(width: int, height: int, pixel_limit: int = PIXEL_LIMIT) -> tuple[int, int]:
    """(W, H) for reconstruction: scale to ~``pixel_limit`` pixels, round each side to a multiple of 14.

    Plain rounding as in the paper's scorer (832 x 480 -> 658 x 378); unlike Pi3's own loader there is
    no loop shrinking the result below the limit.
    """
    scale = (pixel_limit / float(width * height)) ** 0.5
    return (max(PATCH, int(round(width * scale / PATCH)) * PATCH),
            max(PATCH, int(round(height * scale / PATCH)) * PATCH))


def reconstruction_input(frames: np.ndarray) -> np.ndarray:
    """(N, H', W', 3) uint8: every RGB frame resized with PIL Lanczos to ``pi3x_input_size``."""
    from PIL import Image

    height, width = frames.shape[1:3]
    size = pi3x_input_size(width, height)
    return np.stack([np.asarray(Image.fromarray(f).resize(size, Image.Resampling.LANCZOS)) for f in frames])


def save_poses(path: Path, poses: np.ndarray) -> None:
    """The paper's ``pi3_poses.npz`` layout (``poses``, ``idx``), written atomically."""
    with atomic_path(path, suffix=".npz") as tmp:
        np.savez_compressed(tmp, poses=np.asarray(poses, dtype=np.float64), idx=np.arange(len(poses)))


def load_poses(path: Path, n_frames: int) -> np.ndarray:
    """Camera poses of one rollout from a ``pi3_poses.npz``-style file; ValueError names the file.

    Read as a regular file (``np.load`` of a FIFO blocks for ever); poses must be real numbers: a complex
    array's imaginary parts would be dropped by the float cast, a warning and no error."""
    try:
        raw = read_regular_bytes(path)
    except FileError as exc:
        raise ValueError(f"{path}: camera poses not found" if isinstance(exc, MissingFile)
                         else f"{path}: unreadable camera poses ({exc.reason})") from None
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as data:
            stored = data["poses"]
    except (KeyError, EOFError, OSError, ValueError, TypeError) as exc:
        raise ValueError(f"{path}: unreadable camera poses ({type(exc).__name__}: {exc})") from None
    if stored.dtype.kind not in "fiu":
        raise ValueError(f"{path}: camera poses are {stored.dtype}, not real numbers")
    poses = stored.astype(np.float64)
    if poses.shape != (n_frames, 4, 4):
        raise ValueError(f"{path}: poses are {poses.shape}, expected ({n_frames}, 4, 4) for the decoded video")
    return poses


class Pi3XReconstructor:  # pragma: no cover - needs CUDA and the Pi3 code (recipe image, GPU CI)
    """Pi3X with strictly loaded, SHA-256-verified weights; ``poses(frames)`` -> (N, 4, 4) float64."""

    def __init__(self, weights: Path, device: str = "cuda"):
        import torch
        from pi3.models.pi3x import Pi3X  # the pinned yyfz/Pi3 code installed in the recipe image
        from safetensors.torch import load_file

        if not torch.cuda.is_available():
            raise RuntimeError("Pi3X reconstruction needs a CUDA GPU (or pass -o poses_dir= with poses)")
        self.torch = torch
        self.device = device
        model = Pi3X()
        model.load_state_dict(load_file(str(weights)), strict=True)
        self.model = model.to(device).eval()

    def poses(self, frames: np.ndarray) -> np.ndarray:
        torch = self.torch
        resized = reconstruction_input(frames)
        inputs = torch.from_numpy(resized).permute(0, 3, 1, 2).float().div_(255.0)
        with torch.no_grad(), torch.amp.autocast("cuda", dtype=torch.bfloat16):
            result = self.model(inputs[None].to(self.device))
        poses = result["camera_poses"][0].float().cpu().numpy().astype(np.float64)
        del result
        torch.cuda.empty_cache()
        return poses
