"""Structural similarity (SSIM) for batches of image pairs, equal to scikit-image.

Why not call ``skimage.metrics.structural_similarity`` per frame: it converts each image to float64, runs
five scipy filters per pair (the vertical pass strided through memory) and evaluates the map with
full-size temporaries, so scoring every frame of hundreds of long videos is slow. This module computes
the same quantities with three changes that do not change the arithmetic beyond rounding:

* the window means come from OpenCV's filters in float64 (``cv2.boxFilter``: exact integer window sums
  times one rounded 1 / NP for the uniform window; ``cv2.sepFilter2D`` with scipy's Gaussian taps),
  reading uint8 images and their uint16 squares and products directly;
* images are processed in bands of rows (plus the window's margin), which keeps the working set small,
  bands run in threads (OpenCV and numpy release the GIL), and a mean sums each map row, then the rows in
  order, so neither the bands nor the thread count change a bit;
* an image's own moments (mean, mean squared, variance) are computed once for the pair.

SSIM of consecutive video frames, where each frame's moments serve two pairs, is
:func:`pinbench.media.ssim_numba.consecutive_ssim`: the same arithmetic in one compiled pass a frame.

The map itself follows scikit-image's expressions (the order of two positive sums aside). OpenCV's window
means differ from scipy's by rounding only (about 1e-16 relative), but a variance E[x^2] - mu^2 cancels: its
rounding is of the order of m^2 * 2^-53 (m the largest pixel value) and the map divides it by about C2 =
(K2 * data_range)^2. Measured against scikit-image (tests/test_ssim.py, 400 seeded pairs of 8-bit images,
near-flat bright ones and random ones, data ranges 1 to 255): a map pixel within 32 and a mean within 1.8 of
m^2 * 2^-53 / C2; the tests hold 64 and 4 of them. At data range 255 that is 8e-12 a pixel and 5e-13 a mean
(TempSSIM's 379 pairs: 3.4e-15); near-flat bright frames (values 200-202) with their own range of 2, as
PAI-Bench-C's per-frame data range makes them, differ by up to 3.3e-12 a mean and 2.3e-10 a pixel. Single map
pixels are within 2e-13 of exact rational arithmetic on the tests' frames.

Conventions (all as scikit-image 0.26):

* images are 2-D; any leading axes are a batch. With ``channel_axis`` set, each channel is an image
  and the channel's SSIM map is returned in place, as ``structural_similarity(..., full=True)`` does;
* ``window="uniform"``: a ``win_size`` box filter (default 7); ``window="gaussian"``: a Gaussian of
  ``sigma`` truncated at 3.5 sigma (sigma 1.5 gives the 11 x 11 window);
* ``use_sample_covariance=True`` scales (co)variances by NP / (NP - 1), NP = win_size ** 2;
  ``False`` gives the population covariance of Wang et al. (2004);
* borders are reflected (scipy's ``reflect``, OpenCV's ``BORDER_REFLECT``); the mean SSIM ("mssim")
  crops ``(win_size - 1) // 2`` pixels from every border, where the map depends on that padding;
  ``crop=False`` averages the full map instead (what PAI-Bench-C's blur metric does with ``full=True``).

:func:`pinbench.media.ssim_torch.consecutive_ssim_torch` is the consecutive-frame SSIM in torch, for a GPU, in a
module of its own so that this one never imports torch.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

__all__ = [
    "SSIMWindow",
    "make_window",
    "ssim_map",
    "ssim_mean",
    "stabilisers",
    "window_filter",
]

TRUNCATE = 3.5  # scikit-image's Gaussian truncation, in units of sigma
BAND_ROWS = 64  # output rows per work item (of 16, 32, 64 and 128, 64 was the fastest at 1376x768 here)


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

    def cov_norm(self, use_sample_covariance: bool) -> float:
        """The (co)variances' scale: NP / (NP - 1) for the sample covariance, else 1 (a 1-pixel window has none)."""
        if not use_sample_covariance:
            return 1.0
        if self.n_points < 2:
            raise ValueError(f"a {self.win_size}-pixel window has no sample covariance (NP - 1 = 0): give a wider "
                             "window or use_sample_covariance=False")
        return self.n_points / (self.n_points - 1)

    def check_fits(self, height: int, width: int) -> None:
        """ValueError when images of ``height`` x ``width`` are smaller than the window."""
        if min(height, width) < self.win_size:
            raise ValueError(f"images of {height}x{width} are smaller than the {self.win_size}-pixel window")

    def taps(self) -> np.ndarray:
        """The 1-D float64 weights, applied along each axis (scipy's normalised Gaussian, or 1 / size)."""
        if self.kind == "gaussian":
            x = np.arange(-self.pad, self.pad + 1, dtype=np.float64)
            weights = np.exp(-0.5 / (self.sigma * self.sigma) * x**2)
            return weights / weights.sum()
        return np.full(self.win_size, 1.0 / self.win_size)


def make_window(window: str = "uniform", win_size: int | None = None, sigma: float = 1.5) -> SSIMWindow:
    """Validate window settings the way scikit-image does (gaussian: the size follows from sigma)."""
    if window == "gaussian":
        if not (math.isfinite(sigma) and sigma > 0):
            raise ValueError(f"sigma must be positive and finite, got {sigma}")
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


def window_filter(image: np.ndarray, win: SSIMWindow, out: np.ndarray | None = None) -> np.ndarray:
    """float64 window means of one image, (H, W) or (H, W, C) with channels filtered apart; reflect borders.

    uint8, uint16 and float64 images are read as they are (no float64 copy of the input).
    """
    if win.kind == "uniform":
        size = (win.win_size, win.win_size)
        return cv2.boxFilter(image, cv2.CV_64F, size, dst=out, normalize=True, borderType=cv2.BORDER_REFLECT)
    taps = win.taps()
    return cv2.sepFilter2D(image, cv2.CV_64F, taps, taps, dst=out, borderType=cv2.BORDER_REFLECT)


def available_cpus() -> int:
    """The cores this process may run on (its affinity: ``taskset``, a container's cpuset), not the machine's."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:   # no affinity call on this platform
        return os.cpu_count() or 1


# ------------------------------------------------------------------------------------------ the kernel


@dataclass(frozen=True)
class _Band:
    """Output rows [top, bottom) of an image, computed from input rows [first, last) (the window's margin)."""

    top: int
    bottom: int
    first: int
    last: int

    @property
    def keep(self) -> slice:
        """The output rows within the filtered input rows."""
        return slice(self.top - self.first, self.bottom - self.first)


def _bands(height: int, pad: int, crop: bool) -> list[_Band]:
    """Row bands of ``BAND_ROWS`` covering the output rows; with ``crop`` only rows whose window lies inside."""
    start, stop = (pad, height - pad) if crop else (0, height)
    return [_Band(top, min(stop, top + BAND_ROWS), max(0, top - pad), min(height, min(stop, top + BAND_ROWS) + pad))
            for top in range(start, stop, BAND_ROWS)]


@dataclass(frozen=True)
class _Kernel:
    """SSIM settings with the image geometry: what every band of every image pair shares."""

    win: SSIMWindow
    cov_norm: float
    height: int
    width: int
    channels: tuple[int, ...]  # () for 2-D images, (C,) for (H, W, C)
    crop: bool
    square_dtype: type

    @property
    def columns(self) -> slice:
        pad = self.win.pad
        return slice(pad, self.width - pad) if self.crop else slice(0, self.width)

    def out_shape(self, band: _Band) -> tuple[int, ...]:
        cols = self.columns
        return (band.bottom - band.top, cols.stop - cols.start, *self.channels)

    def in_shape(self, band: _Band) -> tuple[int, ...]:
        return (band.last - band.first, self.width, *self.channels)


class _Buffers:
    """One thread's reusable float64 buffers, sized for the largest band (page faults cost as much as math)."""

    def __init__(self) -> None:
        self._arrays: dict[tuple[str, np.dtype], np.ndarray] = {}

    def get(self, name: str, shape: tuple[int, ...], dtype: Any = np.float64) -> np.ndarray:
        key = (name, np.dtype(dtype))
        size = int(np.prod(shape))
        array = self._arrays.get(key)
        if array is None or array.size < size:
            array = self._arrays[key] = np.empty(size, dtype)
        return array[:size].reshape(shape)


class _Moments:
    """One image band's window moments."""

    def __init__(self, kernel: _Kernel, band: _Band, buffers: _Buffers, tag: str) -> None:
        in_shape, out_shape = kernel.in_shape(band), kernel.out_shape(band)
        self.kernel, self.band = kernel, band
        self._means = buffers.get(f"{tag}.means", in_shape)
        self._seconds = buffers.get(f"{tag}.seconds", in_shape)
        self._square = buffers.get(f"{tag}.square", in_shape, kernel.square_dtype)
        self._input = buffers.get(f"{tag}.input", in_shape) if kernel.square_dtype is np.float64 else None
        self.squared_mean = buffers.get(f"{tag}.squared_mean", out_shape)   # ux ** 2
        self.variance = buffers.get(f"{tag}.variance", out_shape)           # cov_norm * (uxx - ux * ux)
        self.image: np.ndarray = self._means
        self.mean: np.ndarray = self._means

    def update(self, image: np.ndarray) -> None:
        """Moments of ``image`` (the band's input rows, every column)."""
        kernel = self.kernel
        if self._input is None:                   # uint8: read as it is, squares exact in uint16
            self.image = np.ascontiguousarray(image)
            np.multiply(self.image, self.image, out=self._square, dtype=np.uint16)
        else:
            np.copyto(self._input, image, casting="unsafe")
            self.image = self._input
            np.multiply(self._input, self._input, out=self._square)
        window_filter(self.image, kernel.win, out=self._means)
        window_filter(self._square, kernel.win, out=self._seconds)
        keep = (self.band.keep, kernel.columns)
        self.mean = self._means[keep]
        np.multiply(self.mean, self.mean, out=self.squared_mean)
        np.subtract(self._seconds[keep], self.squared_mean, out=self.variance)
        if kernel.cov_norm != 1.0:
            self.variance *= kernel.cov_norm


def _pair_map(x: _Moments, y: _Moments, c1: float, c2: float, buffers: _Buffers,
              out: np.ndarray | None = None) -> np.ndarray:
    """The SSIM map of one band of a pair, with scikit-image's expressions, from the two images' moments."""
    kernel, band = x.kernel, x.band
    in_shape, out_shape = kernel.in_shape(band), kernel.out_shape(band)
    if kernel.square_dtype is np.uint16:
        product = np.multiply(x.image, y.image, out=buffers.get("product", in_shape, np.uint16), dtype=np.uint16)
    else:
        product = np.multiply(x.image, y.image, out=buffers.get("product", in_shape))
    cross = window_filter(product, kernel.win, out=buffers.get("cross", in_shape))[band.keep, kernel.columns]
    # One pass per line (OpenCV's fused multiply-with-scale and weighted sums). Scaling by 2 is exact, so a1 and
    # a2 are rounded as scikit-image's 2 * ux * uy and 2 * vxy; B1 and B2 add their (non-negative) terms in
    # OpenCV's order, u + (v + C), which differs from scikit-image's (u + v) + C by rounding only.
    a1 = cv2.multiply(x.mean, y.mean, dst=buffers.get("a1", out_shape), scale=2.0)   # 2 * ux * uy
    a2 = cv2.addWeighted(cross, 2.0, a1, -1.0, 0.0, dst=buffers.get("a2", out_shape))  # 2 * (uxy - ux * uy)
    if kernel.cov_norm != 1.0:
        a2 *= kernel.cov_norm                     # 2 * vxy
    a2 += c2
    a1 += c1
    a1 *= a2                                      # A1 * A2
    b1 = cv2.addWeighted(x.squared_mean, 1.0, y.squared_mean, 1.0, c1, dst=a2)
    b2 = cv2.addWeighted(x.variance, 1.0, y.variance, 1.0, c2, dst=buffers.get("b2", out_shape))
    b1 *= b2                                      # D = B1 * B2
    return np.divide(a1, b1, out=out if out is not None else b2)


def _run(items: Sequence[Any], work: Callable[[Any, _Buffers], None], max_workers: int | None) -> None:
    """``work(item, buffers)`` for every item, in threads with one set of buffers per thread."""
    workers = min(len(items), max_workers or available_cpus())
    if workers <= 1:
        buffers = _Buffers()
        for item in items:
            work(item, buffers)
        return
    local = threading.local()

    def run(item: Any) -> None:
        if not hasattr(local, "buffers"):
            local.buffers = _Buffers()
        work(item, local.buffers)

    with ThreadPoolExecutor(workers) as pool:
        for future in [pool.submit(run, item) for item in items]:
            future.result()


# ------------------------------------------------------------------------------------------ inputs


def _check_real(a: np.ndarray) -> None:
    if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        raise ValueError(f"SSIM needs real-valued images, got dtype {a.dtype}")


def _as_image_stack(a: np.ndarray, channel_axis: int | None) -> tuple[np.ndarray, tuple[int, ...]]:
    """(M, H, W) or (M, H, W, C) view/copy of ``a`` and the batch shape."""
    _check_real(a)
    if channel_axis is None:
        if a.ndim < 2:
            raise ValueError(f"SSIM needs 2-D images, got an array of shape {a.shape}")
        return a.reshape((-1,) + a.shape[-2:]), a.shape[:-2]
    if a.ndim < 3:
        raise ValueError(f"channel_axis given but the array has shape {a.shape}")
    moved = np.moveaxis(a, channel_axis, -1)  # (..., H, W, C)
    return moved.reshape((-1,) + moved.shape[-3:]), moved.shape[:-3]


def _per_image_range(data_range: float | np.ndarray, batch: tuple[int, ...]) -> np.ndarray:
    """data_range as one float64 per batch element, flattened to (M,)."""
    given = np.asarray(data_range, dtype=np.float64)
    try:
        ranges = np.broadcast_to(given, batch).reshape(-1)
    except ValueError:
        raise ValueError(f"data_range of shape {given.shape} does not fit the batch shape {batch}") from None
    return _check_range(ranges)


def _check_range(ranges: np.ndarray) -> np.ndarray:
    """A data range of 0 makes C1 = C2 = 0 and flat windows 0 / 0 (scikit-image's NaN then hangs on rounding)."""
    bad = ranges[~(np.isfinite(ranges) & (ranges > 0))]
    if bad.size:
        raise ValueError(f"data_range must be positive and finite, got {bad[0]}")
    return ranges


def stabilisers(data_range: float, k1: float, k2: float) -> tuple[float, float]:
    """C1 = (K1 * L)^2 and C2 = (K2 * L)^2 for one data range L (ValueError unless it is positive and finite)."""
    data = float(_check_range(np.array([data_range], dtype=np.float64))[0])
    return (k1 * data) ** 2, (k2 * data) ** 2


@dataclass(frozen=True)
class _Job:
    """Inputs of one pairwise SSIM call as image stacks, with per-image constants and the kernel."""

    xs: np.ndarray
    ys: np.ndarray
    c1: np.ndarray
    c2: np.ndarray
    batch: tuple[int, ...]
    kernel: _Kernel

    def bands(self) -> list[_Band]:
        return _bands(self.kernel.height, self.kernel.win.pad, self.kernel.crop)

    def band_map(self, i: int, band: _Band, buffers: _Buffers, out: np.ndarray | None = None) -> np.ndarray:
        x = _Moments(self.kernel, band, buffers, "x")
        y = _Moments(self.kernel, band, buffers, "y")
        x.update(self.xs[i, band.first:band.last])
        y.update(self.ys[i, band.first:band.last])
        return _pair_map(x, y, float(self.c1[i]), float(self.c2[i]), buffers, out)


def _kernel(win: SSIMWindow, use_sample_covariance: bool, shape: tuple[int, ...], dtype: np.dtype,
            crop: bool) -> _Kernel:
    height, width = shape[:2]
    win.check_fits(height, width)
    cov_norm = win.cov_norm(use_sample_covariance)
    return _Kernel(win, cov_norm, height, width, tuple(shape[2:]), crop,
                   np.uint16 if dtype == np.uint8 else np.float64)


def _job(a: np.ndarray, b: np.ndarray, data_range: float | np.ndarray, window: str, win_size: int | None,
         sigma: float, k1: float, k2: float, use_sample_covariance: bool, channel_axis: int | None,
         crop: bool) -> _Job:
    a, b = np.asarray(a), np.asarray(b)
    win = make_window(window, win_size, sigma)
    if a.shape != b.shape:
        raise ValueError(f"SSIM inputs differ in shape: {a.shape} vs {b.shape}")
    xs, batch = _as_image_stack(a, channel_axis)
    ys, _ = _as_image_stack(b, channel_axis)
    if a.dtype != b.dtype:
        xs, ys = xs.astype(np.float64), ys.astype(np.float64)
    data = _per_image_range(data_range, batch)
    kernel = _kernel(win, use_sample_covariance, xs.shape[1:], xs.dtype, crop)
    return _Job(xs, ys, (k1 * data) ** 2, (k2 * data) ** 2, batch, kernel)


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
    job = _job(a, b, data_range, window, win_size, sigma, K1, K2, use_sample_covariance, channel_axis, False)
    out = np.empty(job.xs.shape, dtype=np.float64)

    def work(item: tuple[int, _Band], buffers: _Buffers) -> None:
        i, band = item
        job.band_map(i, band, buffers, out=out[i, band.top:band.bottom])

    _run([(i, band) for i in range(len(job.xs)) for band in job.bands()], work, max_workers)
    if channel_axis is None:
        return out.reshape(np.shape(a))
    return np.moveaxis(out.reshape(job.batch + job.xs.shape[1:]), -1, channel_axis)


def ssim_mean(a: np.ndarray, b: np.ndarray, *, data_range: float | np.ndarray, crop: bool = True,
              window: str = "uniform", win_size: int | None = None, sigma: float = 1.5, K1: float = 0.01,  # noqa: N803
              K2: float = 0.03, use_sample_covariance: bool = True, channel_axis: int | None = None,  # noqa: N803
              max_workers: int | None = None) -> np.ndarray:
    """Mean SSIM per batch element (channels averaged), shape = the batch shape.

    ``crop=True`` is scikit-image's returned mssim (borders of ``pad`` pixels cropped); ``crop=False`` is
    the mean of the full map (what averaging ``full=True`` output gives). Maps are reduced band by band,
    so a long video never holds a float64 map in memory; each map row is summed, then the rows in order, so
    neither the bands nor the thread count change a bit.
    """
    job = _job(a, b, data_range, window, win_size, sigma, K1, K2, use_sample_covariance, channel_axis, crop)
    bands = job.bands()
    first = bands[0].top
    sums = np.empty((len(job.xs), bands[-1].bottom - first))   # per map row

    def work(item: tuple[int, int], buffers: _Buffers) -> None:
        i, b = item
        band = bands[b]
        rows = job.band_map(i, band, buffers)
        sums[i, band.top - first:band.bottom - first] = rows.reshape(len(rows), -1).sum(axis=1)

    _run([(i, b) for i in range(len(job.xs)) for b in range(len(bands))], work, max_workers)
    count = sum(int(np.prod(job.kernel.out_shape(band))) for band in bands)
    return (sums.sum(axis=1) / count).reshape(job.batch)


# ------------------------------------------------------------------------------- consecutive frames


def _check_frames(frames: np.ndarray) -> np.ndarray:
    frames = np.asarray(frames)
    _check_real(frames)
    if frames.ndim not in (3, 4) or len(frames) < 2:
        raise ValueError(f"SSIM of consecutive frames needs (T >= 2, H, W[, C]) frames, got {frames.shape}")
    return frames
