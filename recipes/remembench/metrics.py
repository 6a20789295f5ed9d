"""RememBench's four per-scene metrics on one decoded rollout.

* CLIP: cosine of the L2-normalised embeddings of the departure and revisit frames (RGB);
* LPIPS: AlexNet v0.1 on the two RGB frames at native resolution, scaled to [-1, 1];
* TempSSIM: grayscale SSIM of every consecutive frame pair (11 x 11 Gaussian, sigma 1.5, constants
  (0.01*255)^2 and (0.03*255)^2, population covariance, valid window), averaged over pairs;
* Drift: each backbone chunk is the re-normalised mean of the normalised CLIP embeddings of four evenly
  spaced frames; Drift is the mean of 1 - cosine between adjacent chunks. As published, the frames go
  to CLIP as OpenCV BGR arrays; RGB would give other numbers.

The paper's precision settings are kept on a GPU: cuDNN TF32 on for the pair metrics, TF32 off for
TempSSIM/Drift (CPU runs are unaffected). TempSSIM is computed in float64 (the paper: float32 on GPU);
README "Changes vs upstream" gives the measured difference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np
import torch

from pinbench.media.lpips import lpips_distance
from pinbench.media.precision import tf32
from pinbench.media.ssim_numba import ConsecutiveSSIM, consecutive_ssim
from pinbench.media.ssim_torch import consecutive_ssim_torch
from pinbench.media.video import iter_frames, named_video_info, opened_video, read_ahead
from pinbench_recipes.remembench.clip_model import ClipEmbedder

DATA_RANGE = 255.0
# scikit-image's settings for the paper's TempSSIM: 11 x 11 Gaussian of sigma 1.5, population covariance
TEMPSSIM = {"data_range": DATA_RANGE, "window": "gaussian", "sigma": 1.5, "use_sample_covariance": False}
FRAMES_PER_CHUNK = 4


def to_gray(frames_rgb: np.ndarray) -> np.ndarray:
    """(T, H, W) uint8 luma of RGB frames; equal to OpenCV's BGR2GRAY on the BGR decode."""
    t, h, w, _ = frames_rgb.shape
    return cv2.cvtColor(frames_rgb.reshape(t * h, w, 3), cv2.COLOR_RGB2GRAY).reshape(t, h, w)


def tempssim_pairs(gray: np.ndarray, max_workers: int | None = None, device: str = "cpu") -> np.ndarray:
    """SSIM of every consecutive pair of (T, H, W) grayscale frames, shape (T - 1,), float64.

    ``device`` is the recipe's device option. On the CPU: the shared kernel (OpenCV filters in threads, each
    frame's moments reused for both of its pairs; the result does not depend on the thread count). On any
    other torch device (a GPU): the same arithmetic in float64 torch, equal to rounding.
    """
    if gray.ndim != 3:
        raise ValueError(f"TempSSIM needs (T >= 2, H, W) grayscale frames, got {gray.shape}")
    if torch.device(device).type == "cpu":
        return consecutive_ssim(gray, **TEMPSSIM, max_workers=max_workers)
    return consecutive_ssim_torch(gray, **TEMPSSIM, device=device)


def decode_with_tempssim(path: Path, backend: str, device: str = "cpu",
                         max_workers: int | None = None) -> tuple[np.ndarray, float | None]:
    """Every RGB frame of a rollout, decoded once, and its TempSSIM when ``device`` is the CPU (else None: the
    device computes it from the frames).

    Why: decoding then scoring costs their sum; here a reader thread decodes (``read_ahead``) while each frame's
    gray moments and the pair it ends are computed (``ConsecutiveSSIM``), so on two free cores the whole costs
    about the larger of the two (tools/bench_kernels.py). The value is :func:`tempssim`'s of the same frames."""
    frames: np.ndarray | None = None
    stream: ConsecutiveSSIM | None = None
    with opened_video(path) as fd:   # one open: the file checked is the file decoded
        n = named_video_info(path, fd=fd).n_frames   # the stream stops there, or raises VideoError (truncated)
        try:
            for index, frame in enumerate(read_ahead(iter_frames(path, backend=backend, fd=fd))):
                if frames is None:
                    frames = np.empty((n, *frame.shape), np.uint8)
                    if torch.device(device).type == "cpu":
                        stream = ConsecutiveSSIM(frame.shape[:2], np.uint8, **TEMPSSIM, max_workers=max_workers)
                frames[index] = frame
                if stream is not None:
                    stream.add(cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY))
            if frames is None:
                raise ValueError(f"{path}: no frame decoded")
            return frames, float(stream.result().mean()) if stream is not None else None
        finally:
            if stream is not None:
                stream.close()


def tempssim(gray: np.ndarray, device: str = "cpu") -> float:
    """Mean SSIM over consecutive pairs (the per-video TempSSIM)."""
    return float(tempssim_pairs(gray, device=device).mean())


def drift_frames(layout: Sequence[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """Frame indices (round(linspace(lo, hi, min(4, n))) per chunk) and the chunk each belongs to."""
    indices: list[int] = []
    owners: list[int] = []
    for chunk, (lo, hi) in enumerate(layout):
        picked = np.linspace(lo, hi, min(FRAMES_PER_CHUNK, hi - lo + 1)).round().astype(int)
        indices.extend(int(i) for i in picked)
        owners.extend([chunk] * len(picked))
    return indices, owners


def drift_from_embeddings(embeddings: np.ndarray, owners: Sequence[int]) -> float:
    """Mean over adjacent chunks of 1 - cos(chunk descriptors); descriptors are re-normalised means."""
    owners_arr = np.asarray(owners)
    chunks = sorted(set(owners_arr.tolist()))
    if len(chunks) < 2:
        raise ValueError("Drift needs at least two chunks")
    # Sums with math.fsum (exactly rounded), not numpy's BLAS dot (np.linalg.norm): OpenBLAS picks its kernel by
    # CPU (Haswell, SkylakeX, ...), and two kernels round differently, so the host and an image, or two nodes of a
    # cluster, disagreed in the last bit.
    pooled = []
    for chunk in chunks:
        rows = embeddings[owners_arr == chunk].astype(np.float64)
        mean = np.array([math.fsum(column) / len(rows) for column in rows.T])
        pooled.append(mean / math.sqrt(math.fsum(mean * mean)))
    cosines = [math.fsum(a * b) for a, b in zip(pooled[1:], pooled[:-1], strict=True)]
    return math.fsum(1.0 - c for c in cosines) / len(cosines)


def pair_metrics(clip: ClipEmbedder, lpips_model: torch.nn.Module, frames_rgb: np.ndarray, departure: int,
                 revisit: int) -> dict[str, float]:
    """CLIP cosine and LPIPS between two frames of one rollout (TF32 as in the paper's pair metrics)."""
    a, b = frames_rgb[departure], frames_rgb[revisit]
    with tf32(cudnn=True, matmul=False):  # torch's default matmul setting, cuDNN switched on
        embeddings = clip.embed([a, b])
        lpips_value = float(lpips_distance(lpips_model, a[None], b[None])[0])
    return {"clip": float(np.dot(embeddings[0], embeddings[1])), "lpips_alex": lpips_value}


def quality_metrics(clip: ClipEmbedder, frames_rgb: np.ndarray, layout: Sequence[tuple[int, int]],
                    device: str = "cpu", computed_tempssim: float | None = None) -> dict:
    """TempSSIM (on ``device``, unless ``computed_tempssim`` is already known: ``decode_with_tempssim``) and
    Drift of one rollout (TF32 off, as in the paper's quality pass)."""
    indices, owners = drift_frames(layout)
    with tf32(cudnn=False, matmul=False):
        embeddings = clip.embed([np.ascontiguousarray(frames_rgb[i][..., ::-1]) for i in indices])  # BGR
    value = computed_tempssim if computed_tempssim is not None else tempssim(to_gray(frames_rgb), device=device)
    return {"tempssim": value, "drift": drift_from_embeddings(embeddings, owners)}
