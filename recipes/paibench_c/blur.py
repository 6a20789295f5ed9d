"""Blur-control adherence: SSIM between bilateral-blurred prediction and ground truth.

Semantics follow the PAI-Bench-C evaluator fork (trungtpham/pai-bench-c-cosmos3 @ 5864378), so the
number is comparable with the published tables:

* both videos are blurred frame by frame with ``cv2.bilateralFilter(d=30, sigmaColor=150,
  sigmaSpace=100)``, one pass, on RGB uint8 frames (the "medium" training preset);
* frame alignment: a GT longer than the prediction is cut to the prediction's length; a prediction
  whose shape still differs is resized to the GT size with bilinear interpolation and cut to the GT
  length;
* per frame, SSIM with scikit-image's defaults (7x7 uniform window, K1 0.01, K2 0.03, sample
  covariance) and ``data_range`` = max - min of *that blurred GT frame*; computed with the shared
  kernel ``pinbench.media.ssim`` (equal to ``structural_similarity(..., full=True)`` to rounding, which the
  small per-frame data range of a near-flat frame amplifies: up to 3.3e-12 on frames of values 200-202, see
  that module), band by band without a float64 copy of either video;
* the value is the mean of the **full SSIM map** (channels first, then frames and pixels). This is
  not skimage's scalar ``mssim``, which crops a 3-pixel border, so it differs from "standard" SSIM.
  Every frame has the same number of pixels, so it is the mean of the per-frame full-map means;
* a blurred GT frame of a single value has data range 0, so C1 = C2 = 0 and scikit-image divides 0 by 0
  wherever the prediction's window is flat too: the evaluator's value is NaN (finite only if no window
  of the prediction is flat, and then made of rounding noise). Such a video scores NaN here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import cv2
import numpy as np

from pinbench.media.ssim import ssim_mean

BILATERAL_D = 30
BILATERAL_SIGMA_COLOR = 150.0
BILATERAL_SIGMA_SPACE = 100.0


def _check_frames(frames: np.ndarray, name: str) -> None:
    if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"{name} must be (T, H, W, 3) uint8 RGB, got {frames.dtype} {frames.shape}")


def bilateral_blur(frames: np.ndarray, d: int = BILATERAL_D, sigma_color: float = BILATERAL_SIGMA_COLOR,
                   sigma_space: float = BILATERAL_SIGMA_SPACE) -> np.ndarray:
    """Bilateral-filter every RGB uint8 frame once (the evaluator's ``blur_type="bilateral"``)."""
    _check_frames(frames, "frames")
    out = np.empty_like(frames)
    for i, frame in enumerate(frames):
        out[i] = cv2.bilateralFilter(frame, d, sigma_color, sigma_space)
    return out


def blurred_ssim(pred_blur: np.ndarray, gt_blur: np.ndarray, max_workers: int | None = None) -> float:
    """Mean full-map SSIM of already-blurred videos, with the evaluator's frame and size alignment.

    ``max_workers`` bounds the kernel's threads (default: every core).
    """
    _check_frames(pred_blur, "pred_blur")
    _check_frames(gt_blur, "gt_blur")
    n_frames, height, width = gt_blur.shape[:3]
    if n_frames > pred_blur.shape[0]:
        n_frames = pred_blur.shape[0]
        gt_blur = gt_blur[:n_frames]
    if gt_blur.shape != pred_blur.shape:
        pred_blur = np.stack([cv2.resize(f, (width, height), interpolation=cv2.INTER_LINEAR)
                              for f in pred_blur])[:n_frames]
    if n_frames == 0:
        raise ValueError("blurred_ssim: no frames to compare")
    data_range = (gt_blur.max(axis=(1, 2, 3)).astype(np.int64) - gt_blur.min(axis=(1, 2, 3))).astype(np.float64)
    if not data_range.all():  # a constant GT frame: C1 = C2 = 0, and the evaluator's map divides 0 by 0
        return math.nan
    per_frame = ssim_mean(gt_blur, pred_blur, data_range=data_range, channel_axis=3, crop=False,
                          max_workers=max_workers)
    return float(np.mean(per_frame))


def blurred_ssim_of_frames(pred_frames: Iterable[np.ndarray], gt_blur: np.ndarray,
                           max_workers: int | None = None) -> float:
    """:func:`blurred_ssim` of ``bilateral_blur(pred)`` for prediction frames given one at a time, each blurred and
    compared with its blurred GT frame as it arrives: fed by a decoder's reader thread
    (``pinbench.media.video.read_ahead``), the next frames decode meanwhile. The frames must already have the
    GT's size (the evaluator's resize is the caller's); frames beyond the GT's count are not read, a shorter
    prediction is compared with the GT's first frames. The same bits as :func:`blurred_ssim`: every frame is the
    same one-frame SSIM, and the frames' values are averaged in order."""
    _check_frames(gt_blur, "gt_blur")
    values: list[float] = []
    for t, frame in zip(range(len(gt_blur)), pred_frames, strict=False):   # never asks for a frame past the GT's
        if frame.shape != gt_blur.shape[1:] or frame.dtype != np.uint8:
            raise ValueError(f"prediction frame {t} is {frame.dtype} {frame.shape}, expected uint8 "
                             f"{gt_blur.shape[1:]} (the blurred GT's size)")
        data_range = float(int(gt_blur[t].max()) - int(gt_blur[t].min()))
        if data_range == 0:  # as blurred_ssim: a constant GT frame makes the video's value NaN
            values.append(math.nan)
            continue
        values.append(float(ssim_mean(gt_blur[t], bilateral_blur(frame[None])[0], data_range=data_range,
                                      channel_axis=2, crop=False, max_workers=max_workers)))
    if not values:
        raise ValueError("blurred_ssim_of_frames: no frames to compare")
    return float(np.mean(values)) if all(math.isfinite(v) for v in values) else math.nan


def blur_ssim(pred_frames: np.ndarray, gt_frames: np.ndarray) -> float:
    """Bilateral-blur both RGB videos, then :func:`blurred_ssim`."""
    return blurred_ssim(bilateral_blur(pred_frames), bilateral_blur(gt_frames))
