"""Canny edge maps and edge F1 / precision / recall, pooled over a whole video.

Semantics follow the PAI-Bench-C evaluator fork (trungtpham/pai-bench-c-cosmos3 @ 5864378), because
control-adherence scores are only comparable when computed the same way:

* frames are RGB uint8; each is converted with ``COLOR_RGB2GRAY`` *before* ``cv2.Canny`` (upstream
  passed the 3-channel frame straight to Canny; that is one of the fork's fixes);
* thresholds are the "medium" preset 100/200, aperture 3, L2gradient off (OpenCV defaults);
* edge maps are binarised with ``> 0`` and TP/FP/FN are counted over every pixel of every frame
  (micro-averaged per video), F1 = 2PR / (P + R), each 0 when its denominator is 0;
* frame alignment: a GT longer than the prediction is cut to the prediction's length; a prediction
  whose shape still differs is resized to the GT size with nearest neighbour and cut to the GT length;
* a map with no edge pixel at all (or no background pixel) is refused: the evaluator raises there and
  drops the video from the mean, so we raise :class:`DegenerateEdgeMapError` and let the caller count
  the video as failed instead of inventing a number.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

CANNY_PRESETS: dict[str, tuple[int, int]] = {
    "very_low": (20, 50),
    "low": (50, 100),
    "medium": (100, 200),
    "high": (200, 300),
    "very_high": (300, 400),
}
DEFAULT_THRESHOLDS = CANNY_PRESETS["medium"]


class DegenerateEdgeMapError(ValueError):
    """An edge map is all edge or all background, so F1 is undefined under the evaluator's rules."""


@dataclass(frozen=True)
class EdgeScores:
    """Video-level edge agreement of a prediction with the ground truth."""

    f1: float
    precision: float
    recall: float


def _check_frames(frames: np.ndarray, name: str) -> None:
    if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"{name} must be (T, H, W, 3) uint8 RGB, got {frames.dtype} {frames.shape}")


def canny_edges(frames: np.ndarray, thresholds: tuple[int, int] = DEFAULT_THRESHOLDS) -> np.ndarray:
    """(T, H, W) uint8 Canny maps (0 / 255) of RGB frames, gray-converted first."""
    _check_frames(frames, "frames")
    low, high = thresholds
    if len(frames) == 0:
        return np.zeros(frames.shape[:3], np.uint8)
    return np.stack([cv2.Canny(cv2.cvtColor(f, cv2.COLOR_RGB2GRAY), low, high) for f in frames])


def _binary_values(edges: np.ndarray) -> tuple[bool, bool]:
    """(has 0, has 1) of a binary uint8 map, without a full np.unique."""
    count = int(np.count_nonzero(edges))
    return count < edges.size, count > 0


def edge_scores(pred_edges: np.ndarray, gt_edges: np.ndarray) -> EdgeScores:
    """F1 / precision / recall of two (T, H, W) edge maps, pooled over all pixels of all frames."""
    if pred_edges.ndim != 3 or gt_edges.ndim != 3:
        raise ValueError(f"edge maps must be (T, H, W), got {pred_edges.shape} and {gt_edges.shape}")
    pred = (pred_edges > 0).astype(np.uint8)
    gt = (gt_edges > 0).astype(np.uint8)
    n_frames, height, width = gt.shape
    if n_frames > pred.shape[0]:
        n_frames = pred.shape[0]
        gt = gt[:n_frames]
    if gt.shape != pred.shape:
        pred = np.stack([cv2.resize(f, (width, height), interpolation=cv2.INTER_NEAREST) for f in pred])
        pred = pred[:n_frames]
    for name, edges in (("prediction", pred), ("ground truth", gt)):
        has_background, has_edges = _binary_values(edges)
        if not (has_background and has_edges):
            what = "no edge pixel" if not has_edges else "no background pixel"
            raise DegenerateEdgeMapError(f"{name} edge map has {what}; F1 is undefined")
    pred_on, gt_on = pred.astype(bool), gt.astype(bool)
    tp = int(np.count_nonzero(pred_on & gt_on))
    fp = int(np.count_nonzero(pred_on & ~gt_on))
    fn = int(np.count_nonzero(~pred_on & gt_on))
    precision = tp / (tp + fp) if tp + fp > 0 else 0.0
    recall = tp / (tp + fn) if tp + fn > 0 else 0.0
    f1 = 2 * (precision * recall) / (precision + recall) if precision + recall > 0 else 0.0
    return EdgeScores(f1=float(f1), precision=float(precision), recall=float(recall))


def canny_scores(pred_frames: np.ndarray, gt_frames: np.ndarray,
                 thresholds: tuple[int, int] = DEFAULT_THRESHOLDS) -> EdgeScores:
    """Edge agreement of RGB videos: Canny both, then :func:`edge_scores`."""
    _check_frames(pred_frames, "pred_frames")
    _check_frames(gt_frames, "gt_frames")
    return edge_scores(canny_edges(pred_frames, thresholds), canny_edges(gt_frames, thresholds))
