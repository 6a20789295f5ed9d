"""SSIM of consecutive video frames in one compiled pass a frame (numba): RememBench's TempSSIM on a CPU.

Why compiled: with OpenCV filters and numpy expressions (:mod:`pinbench.media.ssim`) each new frame costs three
separable float64 filters and about ten passes over float64 maps, each through memory: 18-19 ms a 1376x768 pair
on one core here. Here each output row goes from the frame through the vertical and horizontal window sums to the
map and its sum while it is in cache: 7 ms (docs/performance-notes.md, "TempSSIM in one compiled pass").

The arithmetic is scikit-image's (the pairwise module states it, with its error bounds): float64 window means of
x, x * x and x * y with scipy's Gaussian taps (or 1 / size), each symmetric tap applied to the sum of its two
mirrored inputs (the products of 8-bit pixels are exact), the map's expressions in scikit-image's order, the
cropped mean. It is compiled without fast-math: no fused multiply-add and no reordering, and a row is summed in
``LANES`` interleaved partial sums added in order, so the bits do not depend on the CPU's vector width (a test
compiles it for a generic x86-64 and for this host), nor on the row bands or the thread count.

Apart from :mod:`pinbench.media.ssim` so that a recipe that needs only the pairwise SSIM (PAI-Bench-C) never
imports numba. The first call in a process compiles the kernel for its frame dtype (about 1 s).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numba
import numpy as np

from pinbench.media.ssim import _bands, _check_frames, _check_real, available_cpus, make_window, stabilisers

__all__ = ["ConsecutiveSSIM", "consecutive_ssim"]

LANES = 8  # partial sums of a row (the widest vector of float64 on x86 holds 8)
CHUNK_FRAMES = 16  # frames a band takes at a time (its moments stay in cache from one frame to the next)
# frame dtypes the kernel reads as they are; others (float16, longdouble: numba compiles neither) are held as float64
NATIVE = frozenset(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64,
                                         np.int64, np.float32, np.float64))


@numba.njit(nogil=True, boundscheck=False, cache=False)
def _band_frames(frames: np.ndarray, previous: np.ndarray, paired: bool, taps: tuple[float, ...], cov_norm: float,
                 c1: float, c2: float, top: int, bottom: int, moments: np.ndarray, slot: int,
                 sums: np.ndarray) -> None:
    """Output rows [top, bottom) of every frame of ``frames`` (K, H, W): each frame's window mean and variance
    into ``moments[slot]`` (slots alternate frame by frame), and when a frame ends a pair (``paired`` tells for the
    first: ``previous`` was the frame before it) the pair's SSIM map summed per row into ``sums[k, row - top]``."""
    n_frames, _, width = frames.shape
    pad = (len(taps) - 1) // 2
    span = 2 * pad + 1
    out_width = width - 2 * pad
    ring = np.empty((3, span, width))   # x, x * x and x * y of the last `span` input rows; row i at i % span
    vertical = np.empty((3, width))     # the window's vertical sums of one output row
    cross = np.empty(out_width)         # E[xy] of the row
    lanes = np.empty(LANES)
    centre = taps[pad]
    for k in range(n_frames):
        x = frames[k]
        y = frames[k - 1] if k > 0 else previous
        pair = k > 0 or paired
        current = (slot + k) % 2
        for i in range(top - pad, bottom + pad):
            row = i % span
            for c in range(width):
                a = np.float64(x[i, c])
                b = np.float64(y[i, c])
                ring[0, row, c] = a
                ring[1, row, c] = a * a
                ring[2, row, c] = a * b
            if i < top + pad:   # the first output row's window is not complete yet
                continue
            r = i - pad
            for q in range(3 if pair else 2):
                source, sums_q = ring[q], vertical[q]
                middle = source[r % span]
                for c in range(width):
                    total = centre * middle[c]
                    for j in range(1, pad + 1):
                        total += taps[pad + j] * (source[(r - j) % span, c] + source[(r + j) % span, c])
                    sums_q[c] = total
            vx, vxx, vxy = vertical[0], vertical[1], vertical[2]
            mean, variance = moments[current, 0, r - top], moments[current, 1, r - top]
            for c in range(out_width):
                m = c + pad
                ux = centre * vx[m]
                uxx = centre * vxx[m]
                uxy = centre * vxy[m]
                for j in range(1, pad + 1):
                    ux += taps[pad + j] * (vx[m - j] + vx[m + j])
                    uxx += taps[pad + j] * (vxx[m - j] + vxx[m + j])
                    uxy += taps[pad + j] * (vxy[m - j] + vxy[m + j])
                mean[c] = ux
                variance[c] = cov_norm * (uxx - ux * ux)
                cross[c] = uxy
            if not pair:
                continue
            mean_y, variance_y = moments[1 - current, 0, r - top], moments[1 - current, 1, r - top]
            for c in range(out_width):
                ux, uy = mean[c], mean_y[c]
                a1 = 2 * ux * uy + c1
                a2 = 2 * (cov_norm * (cross[c] - ux * uy)) + c2
                b1 = ux * ux + uy * uy + c1
                b2 = variance[c] + variance_y[c] + c2
                cross[c] = (a1 * a2) / (b1 * b2)
            lanes[:] = 0.0
            whole = out_width - out_width % LANES
            for c in range(0, whole, LANES):
                for lane in range(LANES):
                    lanes[lane] += cross[c + lane]
            for c in range(whole, out_width):
                lanes[c - whole] += cross[c]
            sums[k, r - top] = lanes.sum()


class ConsecutiveSSIM:
    """:func:`consecutive_ssim` of frames given one at a time, as a decoder yields them.

    Why: decoding a rollout and computing its TempSSIM one after the other costs their sum; fed from a reader
    thread (``pinbench.media.video.read_ahead``) the next frames decode while these are scored, so on two free
    cores the whole costs about the larger of the two. Frames are taken in runs of ``CHUNK_FRAMES``, each row band
    of a run in one thread item (``max_workers``, default every core this process may use); between runs each band
    keeps its last frame's moments and the stream its last frame, never the video.

    Use it as a context manager (or call ``close``): it owns a thread pool.
    """

    def __init__(self, shape: Sequence[int], dtype: Any, *, data_range: float, window: str = "uniform",
                 win_size: int | None = None, sigma: float = 1.5, K1: float = 0.01,  # noqa: N803
                 K2: float = 0.03, use_sample_covariance: bool = True,  # noqa: N803
                 max_workers: int | None = None) -> None:
        win = make_window(window, win_size, sigma)
        self.dtype = np.dtype(dtype)
        _check_real(np.empty(0, self.dtype))
        self.shape = tuple(int(n) for n in shape)
        if len(self.shape) not in (2, 3) or 0 in self.shape[2:]:
            raise ValueError(f"SSIM of consecutive frames needs (H, W[, C]) frames, got frame shape {self.shape}")
        height, width = self.shape[:2]
        win.check_fits(height, width)
        self._constants = (tuple(float(t) for t in win.taps()), win.cov_norm(use_sample_covariance),
                           *stabilisers(data_range, K1, K2))
        channels = self.shape[2] if len(self.shape) == 3 else 1
        out_height, out_width = height - 2 * win.pad, width - 2 * win.pad
        self.out_height = out_height
        self.count = out_height * out_width * channels
        self.bands = _bands(height, win.pad, True)
        # per channel and band: [frame slot, mean / variance, row, column]
        self._moments = [[np.empty((2, 2, band.bottom - band.top, out_width)) for band in self.bands]
                         for _ in range(channels)]
        held = self.dtype if self.dtype in NATIVE else np.dtype(np.float64)
        self._run = np.empty((channels, CHUNK_FRAMES, height, width), held)   # channel planes, C-contiguous
        self._previous = np.empty((channels, height, width), held)
        self._sums: list[np.ndarray] = []   # each run's pair sums
        self._pending = 0
        self._frames = 0
        workers = min(len(self.bands), max_workers or available_cpus())
        self._pool = ThreadPoolExecutor(workers) if workers > 1 else None

    def __enter__(self) -> ConsecutiveSSIM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def add(self, frame: np.ndarray) -> None:
        """The next frame (computed with the run of frames it belongs to)."""
        frame = np.asarray(frame)
        if frame.shape != self.shape or frame.dtype != self.dtype:
            raise ValueError(f"frame {self._frames + self._pending}: {frame.dtype} {frame.shape}, expected "
                             f"{self.dtype} {self.shape} like the first")
        planes = frame[np.newaxis] if frame.ndim == 2 else np.moveaxis(frame, -1, 0)
        self._run[:, self._pending] = planes
        self._pending += 1
        if self._pending == CHUNK_FRAMES:
            self._flush()

    def _flush(self) -> None:
        """Moments of the pending frames and the SSIM of every pair they end, band by band."""
        n, first = self._pending, self._frames
        taps, cov_norm, c1, c2 = self._constants
        sums = np.empty((n, len(self._moments), self.out_height))

        def work(b: int) -> None:
            band = self.bands[b]
            rows = slice(band.top - self.bands[0].top, band.bottom - self.bands[0].top)
            for channel, moments in enumerate(self._moments):
                _band_frames(self._run[channel, :n], self._previous[channel], first > 0, taps, cov_norm, c1, c2,
                             band.top, band.bottom, moments[b], first % 2, sums[:, channel, rows])

        if self._pool is None:
            for b in range(len(self.bands)):
                work(b)
        else:
            for future in [self._pool.submit(work, b) for b in range(len(self.bands))]:
                future.result()
        pairs = sums if first > 0 else sums[1:]
        self._sums.append(pairs.reshape(len(pairs), sums[0].size).sum(axis=1))   # channels and rows in order
        self._previous[:] = self._run[:, n - 1]
        self._frames += n
        self._pending = 0

    def result(self) -> np.ndarray:
        """Mean SSIM of every consecutive pair so far, shape (frames - 1,); ValueError before two frames."""
        if self._pending:
            self._flush()
        if self._frames < 2:
            raise ValueError(f"SSIM of consecutive frames needs at least 2 frames, got {self._frames}")
        return np.concatenate(self._sums) / self.count


def consecutive_ssim(frames: np.ndarray, *, data_range: float, window: str = "uniform",
                     win_size: int | None = None, sigma: float = 1.5, K1: float = 0.01,  # noqa: N803
                     K2: float = 0.03, use_sample_covariance: bool = True,  # noqa: N803
                     max_workers: int | None = None) -> np.ndarray:
    """Mean SSIM (scikit-image's cropped mssim) of every consecutive pair of frames, shape (T - 1,).

    ``frames`` is (T, H, W) or (T, H, W, C) with channels last. Equal to
    ``structural_similarity(frames[t], frames[t + 1], ...)`` for every t, to rounding: :class:`ConsecutiveSSIM` fed
    the frames in order (each frame's moments computed once for both pairs it belongs to).
    """
    frames = _check_frames(frames)
    stream = ConsecutiveSSIM(frames.shape[1:], frames.dtype, data_range=data_range, window=window,
                             win_size=win_size, sigma=sigma, K1=K1, K2=K2,
                             use_sample_covariance=use_sample_covariance, max_workers=max_workers)
    with stream:
        for frame in frames:
            stream.add(frame)
    return stream.result()
