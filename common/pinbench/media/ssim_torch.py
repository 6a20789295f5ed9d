"""Consecutive-frame SSIM in torch (float64, valid convolutions), for a GPU: RememBench's TempSSIM on its device.

Apart from ``pinbench.media.ssim`` so that a recipe that needs only the CPU kernel (PAI-Bench-C's blur SSIM, its
generation image) never imports torch. It equals :func:`pinbench.media.ssim_numba.consecutive_ssim` to rounding.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from pinbench.media.ssim import _check_frames, make_window, stabilisers

TORCH_CHUNK_PIXELS = 1 << 25  # pixels of one torch chunk of frames (float64 temporaries of ~0.3 GB each)


def consecutive_ssim_torch(frames: np.ndarray, *, data_range: float, device: str, window: str = "uniform",
                           win_size: int | None = None, sigma: float = 1.5, K1: float = 0.01,  # noqa: N803
                           K2: float = 0.03, use_sample_covariance: bool = True,  # noqa: N803
                           chunk_pixels: int = TORCH_CHUNK_PIXELS) -> np.ndarray:
    """:func:`consecutive_ssim` in torch on ``device`` (float64 valid convolutions), shape (T - 1,).

    For a GPU: the frames go to the device as uint8 in chunks of about ``chunk_pixels`` pixels (one frame
    of overlap between chunks) and only the per-pair sums come back. float64, so it equals the CPU kernel
    to rounding; TF32 does not apply to float64.
    """
    frames = _check_frames(frames)
    win = make_window(window, win_size, sigma)
    height, width = frames.shape[1:3]
    win.check_fits(height, width)
    cov_norm = win.cov_norm(use_sample_covariance)
    c1, c2 = stabilisers(data_range, K1, K2)
    taps = torch.from_numpy(win.taps()).to(device)
    vertical, horizontal = taps.view(1, 1, -1, 1), taps.view(1, 1, 1, -1)

    def means(x: Any) -> Any:  # (N, H, W) float64 -> (N, H - 2 pad, W - 2 pad): axis 0 then axis 1, valid
        x = torch.nn.functional.conv2d(x[:, None], vertical)
        return torch.nn.functional.conv2d(x, horizontal)[:, 0]

    def planes(chunk: np.ndarray) -> Any:  # (N, H, W[, C]) -> (N * C, H, W) float64 on the device
        tensor = torch.from_numpy(np.ascontiguousarray(chunk)).to(device)
        if tensor.ndim == 4:
            tensor = tensor.permute(0, 3, 1, 2).reshape(-1, height, width)
        return tensor.to(torch.float64)

    channels = frames.shape[3] if frames.ndim == 4 else 1
    per_chunk = max(2, chunk_pixels // (height * width * channels))
    out = []
    with torch.inference_mode():
        for start in range(0, len(frames) - 1, per_chunk - 1):
            x = planes(frames[start:start + per_chunk])
            ux, uxx = means(x), means(x * x)
            step = channels  # planes of frame t + 1 follow those of frame t
            uxy = means(x[:-step] * x[step:])
            mx, my = ux[:-step], ux[step:]
            vx = cov_norm * (uxx[:-step] - mx * mx)
            vy = cov_norm * (uxx[step:] - my * my)
            vxy = cov_norm * (uxy - mx * my)
            s = ((2 * mx * my + c1) * (2 * vxy + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))
            out.append(s.reshape(-1, channels, *s.shape[1:]).mean(dim=(1, 2, 3)).cpu())
    return torch.cat(out).numpy()
