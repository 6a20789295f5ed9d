"""Native cross-check of the long-context-memory (LCM) and general-scene-consistency (GSC) blocks.

Same frames as ``process.py`` (``ingest``), independent arithmetic: per-frame MSE, PSNR and SSIM are
computed here in float64 with torchmetrics' defaults written out (data range 1, Gaussian window 11 x 11
with sigma 1.5, k1 0.01, k2 0.03, reflection padding of 5 pixels, population (co)variances, the map
averaged over channels and the whole padded-to-size image, as torchmetrics 1.8 / 1.9 does), and LPIPS-alex
v0.1 on inputs rescaled to [-1, 1] from the local, SHA-256-verified AlexNet trunk. The official code calls
torchmetrics and lpips on the GPU in float32; ``tests/test_mind_native.py`` measures this module against
torchmetrics on the same inputs. Everything runs on the LPIPS model's device: the CPU in the fixture, a
GPU for the official 720x1280 canvas (about 2 s per frame pair on one CPU core).

A sample's block has the fields of the official one (``length, mse, avg_mse, psnr, avg_psnr, ssim,
avg_ssim, lpips, avg_lpips``); identical frames give PSNR ``inf`` as upstream.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from pinbench_recipes.mind.ingest import OFFICIAL_CANVAS, Canvas, ingest, iter_frames, read_frames
from pinbench_recipes.mind.layout import LayoutError, frames_scored, real_time

SSIM_SIGMA = 1.5
SSIM_KERNEL = 2 * int(3.5 * SSIM_SIGMA + 0.5) + 1   # torchmetrics' Gaussian size for sigma 1.5: 11
SSIM_K1, SSIM_K2 = 0.01, 0.03
BATCH = 10        # process.py's process_batch_size: frames per model call
BLOCK_FIELDS = ("mse", "psnr", "ssim", "lpips")


def _gaussian(size: int, sigma: float) -> torch.Tensor:
    offsets = torch.arange(size, dtype=torch.float64) - (size - 1) / 2
    weights = torch.exp(-0.5 * (offsets / sigma) ** 2)
    return weights / weights.sum()


_WINDOW = _gaussian(SSIM_KERNEL, SSIM_SIGMA)


def _blur(x: torch.Tensor) -> torch.Tensor:
    """Separable Gaussian filter of (..., H, W) float64 images, 'valid' on already padded input.

    Written as weighted sums of shifted slices: float64 depthwise convolution is ~10x slower on CPU.
    """
    weights = _WINDOW.tolist()
    size = len(weights)
    width = x.shape[-1] - size + 1
    rows = x[..., :, :width] * weights[0]
    for k in range(1, size):
        rows.add_(x[..., :, k: k + width], alpha=weights[k])
    height = x.shape[-2] - size + 1
    out = rows[..., :height, :] * weights[0]
    for k in range(1, size):
        out.add_(rows[..., k: k + height, :], alpha=weights[k])
    return out


def ssim(pred: torch.Tensor, gt: torch.Tensor) -> torch.Tensor:
    """Per-image SSIM of (N, C, H, W) images in [0, 1] (float64 result, shape (N,))."""
    pad = (SSIM_KERNEL - 1) // 2
    p = F.pad(pred.double(), (pad, pad, pad, pad), mode="reflect")
    g = F.pad(gt.double(), (pad, pad, pad, pad), mode="reflect")
    n = p.shape[0]
    mu_p, mu_g, pp, gg, pg = _blur(torch.cat([p, g, p * p, g * g, p * g])).split(n)
    var_p = torch.clamp(pp - mu_p**2, min=0.0)
    var_g = torch.clamp(gg - mu_g**2, min=0.0)
    cov = pg - mu_p * mu_g
    c1, c2 = SSIM_K1**2, SSIM_K2**2
    index = ((2 * mu_p * mu_g + c1) * (2 * cov + c2)) / ((mu_p**2 + mu_g**2 + c1) * (var_p + var_g + c2))
    return index.flatten(1).mean(1).cpu()


def mse(pred: torch.Tensor, gt: torch.Tensor) -> torch.Tensor:
    """Per-image mean of squared differences over C, H, W (float64)."""
    return ((pred.double() - gt.double()) ** 2).flatten(1).mean(1).cpu()


def psnr_from_mse(values: torch.Tensor) -> list[float]:
    """10 log10(1 / MSE) in dB for data range 1; +inf for identical images, as upstream."""
    return [math.inf if v == 0 else -10.0 * math.log10(v) for v in values.tolist()]


@torch.no_grad()
def lpips_pairs(model: torch.nn.Module, pred: torch.Tensor, gt: torch.Tensor) -> list[float]:
    """LPIPS of each pair of [0, 1] images, fed as ``x * 2 - 1`` like lcm_metric."""
    device = next(model.parameters()).device
    out = model(pred.to(device) * 2 - 1, gt.to(device) * 2 - 1)
    return out.reshape(out.shape[0]).double().cpu().tolist()


def frame_metrics(pred: torch.Tensor, gt: torch.Tensor, lpips_model: torch.nn.Module) -> dict[str, list[float]]:
    """All four per-frame metrics of one batch of aligned frames, on the LPIPS model's device."""
    device = next(lpips_model.parameters()).device
    pred, gt = pred.to(device), gt.to(device)
    errors = mse(pred, gt)
    return {"mse": errors.tolist(), "psnr": psnr_from_mse(errors), "ssim": ssim(pred, gt).tolist(),
            "lpips": lpips_pairs(lpips_model, pred, gt)}


def block_from_frames(per_frame: dict[str, list[float]]) -> dict[str, Any]:
    """The official block layout: per-frame lists and their plain means (inf stays inf)."""
    length = len(per_frame["mse"])
    block: dict[str, Any] = {"length": length}
    for name in BLOCK_FIELDS:
        values = per_frame[name]
        block[name] = values
        block[f"avg_{name}"] = (sum(values) / len(values)) if values else None
    return block


INFINITY = "Infinity"   # how a +inf frame is stored (the runner's JSON has no infinities; it would store null)


def storable(block: dict[str, Any] | None) -> dict[str, Any] | None:
    """A block with +inf PSNR frames (identical frames) kept as the string "Infinity" for JSON storage."""
    if block is None:
        return None
    return {k: ([INFINITY if isinstance(x, float) and math.isinf(x) else x for x in v] if isinstance(v, list)
                else (INFINITY if isinstance(v, float) and math.isinf(v) else v)) for k, v in block.items()}


def restored(block: dict[str, Any] | None) -> dict[str, Any] | None:
    """The inverse of :func:`storable`."""
    if block is None:
        return None
    return {k: ([math.inf if x == INFINITY else x for x in v] if isinstance(v, list)
                else (math.inf if v == INFINITY else v)) for k, v in block.items()}


def _batches(frames: Iterator[np.ndarray], size: int) -> Iterator[np.ndarray]:
    batch: list[np.ndarray] = []
    for frame in frames:
        batch.append(frame)
        if len(batch) == size:
            yield np.stack(batch)
            batch = []
    if batch:
        yield np.stack(batch)


def continuation_block(gt_video: Path, generated_video: Path, *, mark_time: int, total_time: int,
                       generated_frames: int, video_max_time: int | None, lpips_model: torch.nn.Module,
                       canvas: Canvas = OFFICIAL_CANVAS) -> dict[str, Any] | None:
    """The LCM block of one mem_test / action_space_test sample; None when process.py scores no frame.

    Generated frame i is compared with GT frame ``mark_time + i`` for the frames process.py scores.
    """
    count = frames_scored(real_time(mark_time, total_time, generated_frames, video_max_time))
    if count == 0:
        return None
    per_frame: dict[str, list[float]] = {name: [] for name in BLOCK_FIELDS}
    gt_batches = _batches(iter_frames(gt_video, mark_time, count), BATCH)
    seen = 0
    for generated in _batches(iter_frames(generated_video, 0, count), BATCH):
        gt = next(gt_batches, None)
        if gt is None or len(gt) != len(generated):
            raise LayoutError(gt_video, f"stream ended before frame {mark_time + seen + len(generated)}")
        for name, values in frame_metrics(ingest(generated, canvas), ingest(gt, canvas), lpips_model).items():
            per_frame[name] += values
        seen += len(generated)
    if seen != count:
        raise LayoutError(generated_video, f"stream ended after {seen} frames, {count} are scored")
    return block_from_frames(per_frame)


def mirror_block(video: Path, *, frames: int, lpips_model: torch.nn.Module,
                 canvas: Canvas = OFFICIAL_CANVAS) -> dict[str, Any]:
    """The GSC block of one mirror rollout of an even number of frames: frame i against frame N-1-i."""
    if frames < 2 or frames % 2:
        raise ValueError(f"{video}: a mirror rollout needs an even number (>= 2) of frames, got {frames}")
    decoded = read_frames(video, 0, frames)
    half = frames // 2
    origin, mirrored = decoded[:half], decoded[half:][::-1]
    per_frame: dict[str, list[float]] = {name: [] for name in BLOCK_FIELDS}
    for start in range(0, half, BATCH):
        a, b = origin[start: start + BATCH], mirrored[start: start + BATCH]
        for name, values in frame_metrics(ingest(a, canvas), ingest(b, canvas), lpips_model).items():
            per_frame[name] += values
    return block_from_frames(per_frame)
