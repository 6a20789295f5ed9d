"""Structural similarity (SSIM) for batches of 2-D images, numerically equal to scikit-image.

Why not call ``skimage.metrics.structural_similarity`` per frame: it filters one image at a time
(five 2-D filters per pair) and crops afterwards, so scoring every frame of hundreds of long videos is
slow. This module runs the same arithmetic (float64, ``scipy.ndimage`` filters with ``reflect``
borders, the same constants and the same expression order) over a whole batch of frames in threads,
and exposes the pieces (``window_filter``, ``ssim_from_moments``) so that callers can reuse per-frame
moments, e.g. SSIM between consecutive frames needs each frame's mean and second moment only once.

Conventions (all as scikit-image 0.26):

* images are 2-D; any leading axes are a batch. With ``channel_axis`` set, each channel is an image
  and the channel's SSIM map is returned in place, as ``structural_similarity(..., full=True)`` does;
* ``window="uniform"``: a ``win_size`` box filter (default 7); ``window="gaussian"``: a Gaussian of
  ``sigma`` truncated at 3.5 sigma (sigma 1.5 gives the 11 x 11 window);
* ``use_sample_covariance=True`` scales (co)variances by NP / (NP - 1), NP = win_size ** 2;
  ``False`` gives the population covariance of Wang et al. (2004);
* the mean SSIM ("mssim") crops ``(win_size - 1) // 2`` pixels from every border, where the map
  depends on the reflected padding; ``crop=False`` averages the full map instead (what PAI-Bench-C's
  blur metric does with ``full=True`` output).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from scipy import ndimage

__all__ = [
    "SSIMWindow",
    "make_window",
    "ssim_from_moments",
    "ssim_map",
    "ssim_mean",
    "window_filter",
]

TRUNCATE = 3.5  # scikit-image's Gaussian truncation, in units of sigma
CHUNK_BYTES = 64 << 20  # float64 bytes of one input array per worker chunk


@dataclass(frozen=True)
class SSIMWindow:
    """The local window: ``kind`` "uniform" or "gaussian", its odd side ``win_size`` and ``sigma``."""

    kind: str
    win_size: int
    sigma: float = 1.5

    @property
    def pad(self) -> int:
        """Border width whose map values depend on padding (cropped by the mean SSIM)."""
        return (self.win_size - 1) // 2

    @property
    def n_points(self) -> int:
        """NP of the sample-covariance correction: pixels in a 2-D window."""
        return self.win_size**2


def make_window(window: str = "uniform", win_size: int | None = None, sigma: float = 1.5) -> SSIMWindow:
    """Validate window settings the way scikit-image does (gaussian: the size follows from sigma)."""
    if window == "gaussian":
        if sigma <= 0:
            raise ValueError(f"sigma must be positive, got {sigma}")
        size = 2 * int(TRUNCATE * sigma + 0.5) + 1
        if win_size is not None and win_size != size:
            raise ValueError(f"a gaussian window with sigma {sigma} is {size} pixels wide, not {win_size}")
        return SSIMWindow("gaussian", size, float(sigma))
    if window == "uniform":
        size = 7 if win_size is None else int(win_size)
        if size < 1 or size % 2 == 0:
            raise ValueError(f"win_size must be a positive odd number, got {win_size}")
        return SSIMWindow("uniform", size, float(sigma))
    raise ValueError(f"window must be 'uniform' or 'gaussian', got {window!r}")


def window_filter(x: np.ndarray, win: SSIMWindow) -> np.ndarray:
    """Local window mean of float64 images ``(..., H, W)``: axis -2 then -1, reflect borders."""
    if win.kind == "gaussian":
        for axis in (-2, -1):
            x = ndimage.gaussian_filter1d(x, win.sigma, axis=axis, mode="reflect", truncate=TRUNCATE)
        return x
    for axis in (-2, -1):
        x = ndimage.uniform_filter1d(x, win.win_size, axis=axis, mode="reflect")
    return x


def ssim_from_moments(ux: np.ndarray, uy: np.ndarray, uxx: np.ndarray, uyy: np.ndarray, uxy: np.ndarray,
                      *, c1: np.ndarray | float, c2: np.ndarray | float, cov_norm: float) -> np.ndarray:
    """The SSIM map from window means of x, y, x*x, y*y and x*y.

    Bit-identical to scikit-image's expressions (``2 * ux * uy`` equals ``2 * (ux * uy)`` exactly, a
    factor of 1.0 is exact) but computed in place with four temporaries, which matters at video sizes.
    """
    num = ux * uy
    a2 = np.subtract(uxy, num)  # vxy
    if cov_norm != 1.0:
        a2 *= cov_norm
    num *= 2
    num += c1  # A1
    a2 *= 2
    a2 += c2  # A2
    num *= a2  # A1 * A2
    sx = np.multiply(ux, ux, out=a2)
    sy = uy * uy
    den = sx + sy
    den += c1  # B1
    vx = np.subtract(uxx, sx, out=sx)
    vy = np.subtract(uyy, sy, out=sy)
    if cov_norm != 1.0:
        vx *= cov_norm
        vy *= cov_norm
    vx += vy
    vx += c2  # B2
    den *= vx
    num /= den
    return num


def _constants(data_range: np.ndarray, k1: float, k2: float) -> tuple[np.ndarray, np.ndarray]:
    return (k1 * data_range) ** 2, (k2 * data_range) ** 2


def _as_image_stack(a: np.ndarray, channel_axis: int | None) -> tuple[np.ndarray, tuple[int, ...], int]:
    """(M, H, W) view/copy of ``a``, the batch shape and the channel count (1 without channels)."""
    if channel_axis is None:
        if a.ndim < 2:
            raise ValueError(f"SSIM needs 2-D images, got an array of shape {a.shape}")
        return a.reshape((-1,) + a.shape[-2:]), a.shape[:-2], 1
    if a.ndim < 3:
        raise ValueError(f"channel_axis given but the array has shape {a.shape}")
    moved = np.moveaxis(a, channel_axis, -1)  # (..., H, W, C)
    batch, (h, w, c) = moved.shape[:-3], moved.shape[-3:]
    stacked = np.moveaxis(moved, -1, -3)  # (..., C, H, W)
    return stacked.reshape((-1, h, w)), batch, c


def _per_image_range(data_range: float | np.ndarray, batch: tuple[int, ...], channels: int) -> np.ndarray:
    """data_range as one float64 per (batch element, channel), shaped (M, 1, 1)."""
    given = np.asarray(data_range, dtype=np.float64)
    try:
        per_image = np.broadcast_to(given, batch).reshape(-1)
    except ValueError:
        raise ValueError(f"data_range of shape {given.shape} does not fit the batch shape {batch}") from None
    return np.repeat(per_image, channels)[:, None, None]


def _chunks(n: int, per_chunk: int) -> list[slice]:
    return [slice(s, min(n, s + per_chunk)) for s in range(0, n, per_chunk)]


def _run_chunks(n: int, image_bytes: int, work: Callable[[slice], None], max_workers: int | None) -> None:
    per_chunk = max(1, CHUNK_BYTES // max(1, image_bytes))
    slices = _chunks(n, per_chunk)
    workers = min(len(slices), max_workers or os.cpu_count() or 1)
    if workers <= 1:
        for sl in slices:
            work(sl)
        return
    with ThreadPoolExecutor(workers) as pool:
        for future in [pool.submit(work, sl) for sl in slices]:
            future.result()


@dataclass(frozen=True)
class _Job:
    """Inputs of one SSIM call as (M, H, W) image stacks with per-image constants."""

    xs: np.ndarray
    ys: np.ndarray
    c1: np.ndarray
    c2: np.ndarray
    win: SSIMWindow
    cov_norm: float
    batch: tuple[int, ...]
    channels: int

    def maps(self, sl: slice) -> np.ndarray:
        """float64 SSIM maps of the images in ``sl`` (scikit-image's arithmetic, reflect borders)."""
        x = self.xs[sl].astype(np.float64)
        y = self.ys[sl].astype(np.float64)
        win = self.win
        return ssim_from_moments(window_filter(x, win), window_filter(y, win), window_filter(x * x, win),
                                 window_filter(y * y, win), window_filter(x * y, win),
                                 c1=self.c1[sl], c2=self.c2[sl], cov_norm=self.cov_norm)


def _job(a: np.ndarray, b: np.ndarray, data_range: float | np.ndarray, window: str, win_size: int | None,
         sigma: float, k1: float, k2: float, use_sample_covariance: bool, channel_axis: int | None) -> _Job:
    a, b = np.asarray(a), np.asarray(b)
    win = make_window(window, win_size, sigma)
    if a.shape != b.shape:
        raise ValueError(f"SSIM inputs differ in shape: {a.shape} vs {b.shape}")
    xs, batch, channels = _as_image_stack(a, channel_axis)
    ys, _, _ = _as_image_stack(b, channel_axis)
    if min(xs.shape[-2:]) < win.win_size:
        raise ValueError(f"images of {xs.shape[-2]}x{xs.shape[-1]} are smaller than "
                         f"the {win.win_size}-pixel window")
    c1, c2 = _constants(_per_image_range(data_range, batch, channels), k1, k2)
    cov_norm = win.n_points / (win.n_points - 1) if use_sample_covariance else 1.0
    return _Job(xs, ys, c1, c2, win, cov_norm, batch, channels)


def ssim_map(a: np.ndarray, b: np.ndarray, *, data_range: float | np.ndarray, window: str = "uniform",
             win_size: int | None = None, sigma: float = 1.5, K1: float = 0.01, K2: float = 0.03,  # noqa: N803
             use_sample_covariance: bool = True, channel_axis: int | None = None,
             max_workers: int | None = None) -> np.ndarray:
    """Full float64 SSIM map of every image pair, shaped like the inputs.

    Equal to ``structural_similarity(a_i, b_i, data_range=..., full=True, ...)[1]`` for each batch
    element i (reflect-padded borders included). ``data_range`` is a scalar or one value per batch
    element (e.g. per frame). Inputs are computed in float64 whatever their dtype (scikit-image keeps
    float32 inputs in float32).
    """
    job = _job(a, b, data_range, window, win_size, sigma, K1, K2, use_sample_covariance, channel_axis)
    out = np.empty(job.xs.shape, dtype=np.float64)

    def work(sl: slice) -> None:
        out[sl] = job.maps(sl)

    _run_chunks(job.xs.shape[0], job.xs[0].size * 8, work, max_workers)
    if channel_axis is None:
        return out.reshape(np.shape(a))
    h, w = job.xs.shape[-2:]
    restored = np.moveaxis(out.reshape(job.batch + (job.channels, h, w)), -3, -1)
    return np.moveaxis(restored, -1, channel_axis)


def ssim_mean(a: np.ndarray, b: np.ndarray, *, data_range: float | np.ndarray, crop: bool = True,
              window: str = "uniform", win_size: int | None = None, sigma: float = 1.5, K1: float = 0.01,  # noqa: N803
              K2: float = 0.03, use_sample_covariance: bool = True, channel_axis: int | None = None,  # noqa: N803
              max_workers: int | None = None) -> np.ndarray:
    """Mean SSIM per batch element (channels averaged), shape = the batch shape.

    ``crop=True`` is scikit-image's returned mssim (borders of ``pad`` pixels cropped); ``crop=False`` is
    the mean of the full map (what averaging ``full=True`` output gives). Maps are reduced chunk by chunk,
    so a long video never holds its whole float64 map in memory.
    """
    job = _job(a, b, data_range, window, win_size, sigma, K1, K2, use_sample_covariance, channel_axis)
    pad = job.win.pad if crop else 0
    means = np.empty(job.xs.shape[0], dtype=np.float64)

    def work(sl: slice) -> None:
        maps = job.maps(sl)
        maps = maps[:, pad : maps.shape[1] - pad, pad : maps.shape[2] - pad]
        means[sl] = maps.mean(axis=(1, 2), dtype=np.float64)

    _run_chunks(job.xs.shape[0], job.xs[0].size * 8, work, max_workers)
    return means.reshape(job.batch + (job.channels,)).mean(axis=-1)
