"""The numbers of the metric (spec sections 3 and 4): padding, top-5% magnitude, tau, n, decisions.

Pure numpy, no model: the flow estimator hands over flow fields and everything that turns them into
a score lives here, so the arithmetic is tested on tiny hand-made arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pinbench.core.files import counted

TOP_FRACTION = 0.05
PAD_MULTIPLE = 8


def padding(height: int, width: int, multiple: int = PAD_MULTIPLE) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) to reach a multiple of 8, split as RAFT's 'sintel' padder does.

    The extra pixel of an odd amount goes to the bottom / right.
    """
    pad_h = (-height) % multiple
    pad_w = (-width) % multiple
    return pad_h // 2, pad_h - pad_h // 2, pad_w // 2, pad_w - pad_w // 2


def pad_frames(frames: np.ndarray) -> np.ndarray:
    """Edge-replicate (T, H, W, 3) frames to H, W multiples of 8 (RAFT's replicate padding)."""
    top, bottom, left, right = padding(frames.shape[1], frames.shape[2])
    if not (top or bottom or left or right):
        return frames
    return np.pad(frames, ((0, 0), (top, bottom), (left, right), (0, 0)), mode="edge")


def top_count(height: int, width: int) -> int:
    """Pixels averaged per transition: ``max(1, int(0.05 * H * W))`` of the padded field."""
    return max(1, int(TOP_FRACTION * height * width))


def top_mean_magnitude(flow: np.ndarray) -> float:
    """m: mean of the largest 5% of per-pixel flow magnitudes sqrt(u^2 + v^2) of one (2, H, W) field.

    Computed in float64 (upstream used float32 numpy; the difference is far below any threshold
    margin and float64 keeps the sum independent of summation order).
    """
    if flow.ndim != 3 or flow.shape[0] != 2:
        raise ValueError(f"flow must have shape (2, H, W), got {flow.shape}")
    u = flow[0].astype(np.float64)
    v = flow[1].astype(np.float64)
    magnitude = np.sqrt(u * u + v * v).ravel()
    cut = top_count(flow.shape[1], flow.shape[2])
    top = np.partition(magnitude, magnitude.size - cut)[magnitude.size - cut:]
    return float(np.sort(top).sum() / cut)


def motion_threshold(height: int, width: int) -> float:
    """tau = 6 * min(H, W) / 256 pixels, from the unpadded frame size."""
    return 6.0 * min(height, width) / 256.0


def count_threshold(n_sampled: int) -> int:
    """n = max(1, round(N / 4)) with N the number of sampled frames (banker's rounding, as upstream)."""
    return max(int(round(4 * (n_sampled / 16.0))), 1)


@dataclass(frozen=True)
class ClipDecision:
    """A clip's verdict: ``dynamic`` is 1/0, or None (excluded) when fewer than 2 frames were sampled."""

    dynamic: int | None
    n_active: int
    n_required: int
    error: str | None = None


def decide_clip(magnitudes: Sequence[float], n_sampled: int, tau: float) -> ClipDecision:
    """1 when at least n transitions have m strictly above tau, else 0; None for N < 2."""
    n_required = count_threshold(n_sampled)
    if n_sampled < 2:
        return ClipDecision(None, 0, n_required,
                            f"only {counted(n_sampled, 'sampled frame')}: no transition, clip excluded")
    if len(magnitudes) != n_sampled - 1:
        raise ValueError(f"{len(magnitudes)} magnitudes for {n_sampled} sampled frames")
    n_active = sum(1 for m in magnitudes if m > tau)
    return ClipDecision(int(n_active >= n_required), n_active, n_required)


def video_score(clip_scores: Sequence[int | None]) -> float | None:
    """Mean of the clips that were scored (the fraction judged dynamic); None if none was."""
    scored = [s for s in clip_scores if s is not None]
    return sum(scored) / len(scored) if scored else None
