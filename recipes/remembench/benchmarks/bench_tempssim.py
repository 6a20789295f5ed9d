"""Benchmark: TempSSIM of one paper-sized T2V rollout (379 frames, 1376 x 768) against a scikit-image loop.

Runs on CPU; not part of the test suite (it takes a minute or two). In one run it writes a synthetic
video, decodes it once, then times

* the recipe's TempSSIM (remembench.metrics.tempssim_pairs: per-frame moments reused, threads; also
  with one thread, to show how it scales with cores), and
* the baseline: ``skimage.metrics.structural_similarity`` per consecutive pair with the same settings,

and prints both times, their ratio, the decode time (the floor a decode-once pipeline cannot beat) and
the largest per-pair difference. It also measures how far a float32 valid-convolution implementation
(the paper's GPU path, here on CPU) is from the float64 value the recipe reports.

    python recipes/remembench/benchmarks/bench_tempssim.py [--frames 379] [--width 1376] [--height 768]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import torch
from skimage.metrics import structural_similarity

from pinbench.media.video import read_video, write_video
from pinbench_recipes.remembench.metrics import tempssim_pairs, to_gray


def synthetic_video(path: Path, n: int, width: int, height: int) -> Path:
    """A slow pan over a smooth texture with moving shapes and sensor noise (not a flat field)."""
    rng = np.random.default_rng(0)
    coarse = rng.uniform(0, 255, (height // 24, (width + 2 * n) // 24, 3)).astype(np.float32)
    texture = cv2.resize(coarse, (width + 2 * n, height), interpolation=cv2.INTER_CUBIC)

    def frames():
        for t in range(n):
            frame = texture[:, 2 * t : 2 * t + width].copy()
            cv2.circle(frame, (int(width / 2 + width / 3 * np.sin(t / 20)), height // 2), height // 8,
                       (250, 240, 30), -1)
            yield np.clip(frame + rng.normal(0, 3, frame.shape), 0, 255).astype(np.uint8)

    return write_video(path, frames(), 24, crf=18)


def skimage_loop(gray: np.ndarray) -> np.ndarray:
    return np.array([structural_similarity(gray[i], gray[i + 1], data_range=255, gaussian_weights=True,
                                           sigma=1.5, use_sample_covariance=False) for i in range(len(gray) - 1)])


def float32_valid_conv(gray: np.ndarray, batch: int = 16) -> np.ndarray:
    """SSIM with an 11 x 11 Gaussian by valid 2-D convolution in float32 (the paper's GPU arithmetic)."""
    taps = torch.arange(11, dtype=torch.float32) - 5
    g = torch.exp(-(taps**2) / (2 * 1.5**2))
    g = g / g.sum()
    window = (g[:, None] @ g[None, :])[None, None]
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    out = []
    frames = torch.from_numpy(gray).float()
    for s in range(0, len(gray) - 1, batch):
        a = frames[s : s + batch][:, None]
        b = frames[s + 1 : s + batch + 1][:, None]
        a = a[: len(b)]
        conv = torch.nn.functional.conv2d
        mu_a, mu_b = conv(a, window), conv(b, window)
        var_a = conv(a * a, window) - mu_a * mu_a
        var_b = conv(b * b, window) - mu_b * mu_b
        cov = conv(a * b, window) - mu_a * mu_b
        ssim = (2 * mu_a * mu_b + c1) * (2 * cov + c2) / ((mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2))
        out.append(ssim.mean(dim=(1, 2, 3)).double())
    return torch.cat(out).numpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=379)
    parser.add_argument("--width", type=int, default=1376)
    parser.add_argument("--height", type=int, default=768)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        video = synthetic_video(Path(tmp) / "rollout.mp4", args.frames, args.width, args.height)
        print(f"wrote {args.frames} frames {args.width}x{args.height} in {time.perf_counter() - started:.1f}s")
        started = time.perf_counter()
        frames = read_video(video, backend="opencv").frames
        decode = time.perf_counter() - started
    started = time.perf_counter()
    gray = to_gray(frames)
    ours = tempssim_pairs(gray)
    ours_s = time.perf_counter() - started
    started = time.perf_counter()
    single = tempssim_pairs(gray, max_workers=1)
    single_s = time.perf_counter() - started
    started = time.perf_counter()
    baseline = skimage_loop(gray)
    baseline_s = time.perf_counter() - started
    paper32 = float32_valid_conv(gray)
    print(f"decode (OpenCV, once):      {decode:8.2f} s")
    print(f"recipe TempSSIM:            {ours_s:8.2f} s  (gray conversion included, {os.cpu_count()} threads)")
    print(f"recipe TempSSIM, 1 thread:  {single_s:8.2f} s  (thread scaling {single_s / ours_s:.2f} x)")
    print(f"scikit-image per-pair loop: {baseline_s:8.2f} s")
    print(f"speed-up vs scikit-image:   {baseline_s / ours_s:8.2f} x")
    print(f"recipe / decode time:       {ours_s / decode:8.2f}")
    print(f"max |recipe - skimage| per pair: {np.abs(ours - baseline).max():.3e} "
          f"(1 thread vs threads identical: {np.array_equal(single, ours)})")
    print(f"video TempSSIM: recipe {ours.mean():.10f}, skimage {baseline.mean():.10f}, "
          f"float32 valid conv {paper32.mean():.10f} (|diff| {abs(paper32.mean() - ours.mean()):.2e}, "
          f"max per pair {np.abs(paper32 - ours).max():.2e})")


if __name__ == "__main__":
    main()
