"""pinbench.media.ssim against scikit-image's structural_similarity frame by frame, and against exact arithmetic."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

# pinbench.media.ssim filters with OpenCV, which CameraBench's image (no scikit-image either) lacks: skipped there,
# not a collection error
pytest.importorskip("cv2", reason="pinbench.media.ssim needs OpenCV (cv2), not installed here")

from skimage.metrics import structural_similarity  # noqa: E402

from pinbench.media import ssim as ssim_mod  # noqa: E402
from pinbench.media import ssim_numba as numba_mod  # noqa: E402
from pinbench.media.ssim import make_window, ssim_map, ssim_mean  # noqa: E402
from pinbench.media.ssim_numba import consecutive_ssim  # noqa: E402

# Means (the values the recipes report): float64 on both sides, scikit-image's expression order; OpenCV's and
# scipy's window filters differ by rounding only.
TOL = 1e-12
# Single map pixels: scipy's running-sum filter accumulates rounding, which the variance's cancellation
# magnifies in flat regions (one pixel of `realish` is 1.1e-12 from the exact value in scikit-image, 6e-14
# here; see test_map_pixels_equal_exact_rational_arithmetic).
PIXEL_TOL = 1e-11


def _torch_kernel() -> Any:
    """``consecutive_ssim_torch``, its test skipped, saying why, where torch does not import: MIND's image has none,
    and its import at this file's top stopped the whole file in a collection error there."""
    pytest.importorskip("torch", reason="pinbench.media.ssim_torch needs torch, not installed here")
    from pinbench.media.ssim_torch import consecutive_ssim_torch

    return consecutive_ssim_torch


def _noisy_pair(rng: np.random.Generator, shape: tuple[int, ...],
                spread: int = 25) -> tuple[np.ndarray, np.ndarray]:
    a = rng.integers(0, 256, shape, dtype=np.uint8)
    noise = rng.integers(-spread, spread + 1, shape)
    return a, np.clip(a.astype(int) + noise, 0, 255).astype(np.uint8)


@pytest.fixture
def realish(synthetic_frames) -> tuple[np.ndarray, np.ndarray]:
    """Smooth coloured frames with a moving square, and the same frames shifted and darkened."""
    a = synthetic_frames(5, height=48, width=64, seed=3)
    b = np.clip(np.roll(a, 2, axis=2).astype(int) - 12, 0, 255).astype(np.uint8)
    return a, b


def test_paibench_rgb_full_map_with_per_frame_range(realish):
    """PAI-Bench-C blur SSIM: RGB, 7x7 uniform, sample covariance, data_range per frame, full map."""
    a, b = realish
    ranges = np.array([float(f.max()) - float(f.min()) for f in a])
    maps = ssim_map(a, b, data_range=ranges, channel_axis=-1)
    full_means = ssim_mean(a, b, data_range=ranges, channel_axis=-1, crop=False)
    assert maps.shape == a.shape and maps.dtype == np.float64
    for i in range(len(a)):
        mssim, expected = structural_similarity(a[i], b[i], data_range=ranges[i], full=True, channel_axis=2)
        np.testing.assert_allclose(maps[i], expected, rtol=0, atol=PIXEL_TOL)
        assert full_means[i] == pytest.approx(expected.mean(), abs=TOL)
        assert ssim_mean(a[i], b[i], data_range=ranges[i], channel_axis=-1) == pytest.approx(mssim, abs=TOL)


def test_tempssim_settings_match_skimage_cropped_mean():
    """RememBench TempSSIM: grayscale, 11x11 Gaussian sigma 1.5, population covariance, valid crop."""
    rng = np.random.default_rng(0)
    a, b = _noisy_pair(rng, (4, 96, 128), spread=12)
    got = ssim_mean(a, b, data_range=255, window="gaussian", sigma=1.5, use_sample_covariance=False)
    for i in range(len(a)):
        expected = structural_similarity(a[i], b[i], data_range=255, gaussian_weights=True, sigma=1.5,
                                         use_sample_covariance=False)
        assert got[i] == pytest.approx(expected, abs=TOL)


def test_gaussian_with_sample_covariance_and_float_input():
    rng = np.random.default_rng(1)
    a, b = _noisy_pair(rng, (2, 33, 41))
    af, bf = a.astype(np.float64) / 255, b.astype(np.float64) / 255
    got = ssim_map(af, bf, data_range=1.0, window="gaussian")
    for i in range(2):
        _, expected = structural_similarity(af[i], bf[i], data_range=1.0, gaussian_weights=True, full=True)
        np.testing.assert_allclose(got[i], expected, rtol=0, atol=PIXEL_TOL)


def test_channels_first_and_single_image():
    rng = np.random.default_rng(2)
    a, b = _noisy_pair(rng, (3, 30, 40))  # channels first, no batch
    mssim, expected = structural_similarity(a, b, data_range=255, full=True, channel_axis=0)
    np.testing.assert_allclose(ssim_map(a, b, data_range=255, channel_axis=0), expected, rtol=0, atol=PIXEL_TOL)
    assert ssim_mean(a, b, data_range=255, channel_axis=0) == pytest.approx(mssim, abs=TOL)
    gray_a, gray_b = a[0], b[0]
    assert float(ssim_mean(gray_a, gray_b, data_range=255)) == pytest.approx(
        structural_similarity(gray_a, gray_b, data_range=255), abs=TOL)


def test_chunked_threads_give_identical_results(monkeypatch):
    rng = np.random.default_rng(4)
    a, b = _noisy_pair(rng, (7, 24, 32, 3))
    serial = ssim_map(a, b, data_range=255, channel_axis=-1, max_workers=1)
    serial_means = ssim_mean(a, b, data_range=255, channel_axis=-1, crop=False, max_workers=1)
    monkeypatch.setattr(ssim_mod, "BAND_ROWS", 5)  # several bands per image, their seams included
    threaded = ssim_map(a, b, data_range=255, channel_axis=-1, max_workers=3)
    assert np.array_equal(serial, threaded)
    chunked_means = ssim_mean(a, b, data_range=255, channel_axis=-1, crop=False, max_workers=3)
    assert np.array_equal(serial_means, chunked_means)
    np.testing.assert_allclose(chunked_means, serial.mean(axis=(1, 2, 3)), rtol=0, atol=1e-12)


def test_identical_images_score_one():
    frame = np.random.default_rng(5).integers(0, 256, (2, 20, 20), dtype=np.uint8)
    np.testing.assert_allclose(ssim_mean(frame, frame, data_range=255, window="gaussian"), 1.0, atol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"window": "box"}, "window must be"),
        ({"window": "uniform", "win_size": 4}, "odd"),
        ({"window": "gaussian", "win_size": 7}, "11 pixels wide"),
        ({"window": "gaussian", "sigma": float("nan")}, "positive and finite, got nan"),
        ({"window": "gaussian", "sigma": float("inf")}, "positive and finite, got inf"),
    ],
)
def test_bad_window_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_window(**kwargs)


@pytest.mark.parametrize("kernel", ["numba", "mean", "torch"])
@pytest.mark.parametrize("window", [{"win_size": 1}, {"window": "gaussian", "sigma": 0.1}])
def test_a_one_pixel_window_has_no_sample_covariance(window, kernel):
    """NP / (NP - 1) with NP = 1 was a bare ZeroDivisionError in every kernel; without the correction it scores."""
    frames = np.random.default_rng(12).integers(0, 256, (3, 16, 16), dtype=np.uint8)
    if kernel == "torch":
        on_torch = _torch_kernel()

        def score(**k):
            return on_torch(frames, device="cpu", **k)
    elif kernel == "mean":
        def score(**k):
            return ssim_mean(frames[:2], frames[1:], **k)
    else:
        def score(**k):
            return consecutive_ssim(frames, **k)
    with pytest.raises(ValueError, match="1-pixel window has no sample covariance"):
        score(data_range=255, **window)
    assert np.isfinite(score(data_range=255, **window, use_sample_covariance=False)).all()


def test_shape_and_range_errors():
    a = np.zeros((2, 16, 16), np.uint8)
    with pytest.raises(ValueError, match="differ in shape"):
        ssim_map(a, a[:, :8], data_range=255)
    with pytest.raises(ValueError, match="fit the batch shape"):
        ssim_map(a, a, data_range=np.ones(3))
    with pytest.raises(ValueError, match="smaller than"):
        ssim_map(a[:, :5, :5], a[:, :5, :5], data_range=255)


def _exact_ssim(x: np.ndarray, y: np.ndarray, row: int, col: int, taps: np.ndarray, data_range: float,
                cov_norm: Fraction) -> float:
    """One SSIM map pixel in exact rational arithmetic: reflect padding, the float64 taps taken as exact."""
    pad = len(taps) // 2
    xp, yp = (np.pad(v.astype(int), pad, mode="symmetric") for v in (x, y))  # numpy's symmetric = scipy's reflect
    wx, wy = xp[row:row + len(taps), col:col + len(taps)], yp[row:row + len(taps), col:col + len(taps)]
    weights = [[Fraction(a) * Fraction(b) for b in taps] for a in taps]

    def mean(window: np.ndarray) -> Fraction:
        return sum((weights[i][j] * int(window[i, j]) for i in range(len(taps)) for j in range(len(taps))),
                   Fraction(0))

    ux, uy, uxx, uyy, uxy = mean(wx), mean(wy), mean(wx * wx), mean(wy * wy), mean(wx * wy)
    c1, c2 = (Fraction(0.01) * Fraction(data_range)) ** 2, (Fraction(0.03) * Fraction(data_range)) ** 2
    vx, vy, vxy = cov_norm * (uxx - ux * ux), cov_norm * (uyy - uy * uy), cov_norm * (uxy - ux * uy)
    return float((2 * ux * uy + c1) * (2 * vxy + c2) / ((ux * ux + uy * uy + c1) * (vx + vy + c2)))


def test_map_pixels_equal_exact_rational_arithmetic(realish):
    """Border pixels (reflect padding), the flat pixel where scikit-image is 1.1e-12 off, and Gaussian weights."""
    a, b = realish
    x, y = a[1, ..., 0], b[1, ..., 0]
    data_range = float(a[1].max()) - float(a[1].min())
    uniform = ssim_map(x, y, data_range=data_range)
    gaussian = ssim_map(x, y, data_range=data_range, window="gaussian", use_sample_covariance=False)
    for row, col in [(0, 0), (8, 63), (47, 31), (20, 2), (30, 40)]:
        exact = _exact_ssim(x, y, row, col, make_window().taps(), data_range, Fraction(49, 48))
        assert abs(uniform[row, col] - exact) < 2e-13, (row, col)
        exact = _exact_ssim(x, y, row, col, make_window("gaussian").taps(), data_range, Fraction(1))
        assert abs(gaussian[row, col] - exact) < 2e-13, (row, col)


def _skimage_consecutive(frames: np.ndarray, **kwargs) -> np.ndarray:
    return np.array([structural_similarity(frames[t], frames[t + 1], **kwargs) for t in range(len(frames) - 1)])


def test_consecutive_frames_match_scikit_image_pair_by_pair(monkeypatch, synthetic_frames):
    gray = synthetic_frames(9, height=40, width=52, seed=5)[..., 1]
    tempssim = {"data_range": 255, "window": "gaussian", "sigma": 1.5, "use_sample_covariance": False}
    one_band = consecutive_ssim(gray, **tempssim)
    monkeypatch.setattr(ssim_mod, "BAND_ROWS", 5)  # several bands per frame, their seams included
    expected = _skimage_consecutive(gray, data_range=255, gaussian_weights=True, sigma=1.5,
                                    use_sample_covariance=False)
    serial = consecutive_ssim(gray, **tempssim, max_workers=1)
    np.testing.assert_allclose(serial, expected, rtol=0, atol=TOL)
    assert np.array_equal(serial, one_band)
    assert np.array_equal(serial, consecutive_ssim(gray, **tempssim, max_workers=3))  # bands x runs of frames
    floats = consecutive_ssim(gray.astype(np.float64), **tempssim)
    np.testing.assert_allclose(floats, expected, rtol=0, atol=TOL)
    for dtype in (np.float16, np.longdouble, np.int16):   # numba compiles no float16 or longdouble: held as float64
        assert np.array_equal(consecutive_ssim(gray.astype(dtype), **tempssim), floats), dtype

    rgb = synthetic_frames(5, height=30, width=40, seed=6)
    expected_rgb = _skimage_consecutive(rgb, data_range=255, channel_axis=2)
    np.testing.assert_allclose(consecutive_ssim(rgb, data_range=255), expected_rgb, rtol=0, atol=TOL)
    assert not np.allclose(consecutive_ssim(gray, data_range=255), expected, atol=1e-3)  # the window matters


@pytest.mark.parametrize("n_frames", [2, 3, 4, 7, 8])
def test_frames_given_one_at_a_time_give_the_same_bits_at_every_run_boundary(monkeypatch, synthetic_frames,
                                                                           n_frames):
    """ConsecutiveSSIM takes frames in runs of CHUNK_FRAMES (3 here): a video of 2 frames, one run, a run and a
    frame, ... gives each pair the bits of the whole-video computation (runs of frames per band), with any
    thread count; scikit-image agrees to TOL."""
    monkeypatch.setattr(ssim_mod, "BAND_ROWS", 7)
    gray = synthetic_frames(n_frames, height=40, width=52, seed=11)[..., 2]
    settings = {"data_range": 255, "window": "gaussian", "use_sample_covariance": False}
    whole = consecutive_ssim(gray, **settings, max_workers=3)
    monkeypatch.setattr(numba_mod, "CHUNK_FRAMES", 3)
    for workers in (1, 2):
        with numba_mod.ConsecutiveSSIM(gray.shape[1:], gray.dtype, **settings, max_workers=workers) as stream:
            for frame in gray:
                stream.add(frame)
            assert np.array_equal(stream.result(), whole)
    expected = _skimage_consecutive(gray, data_range=255, gaussian_weights=True, sigma=1.5,
                                    use_sample_covariance=False)
    np.testing.assert_allclose(whole, expected, rtol=0, atol=TOL)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="compares two x86-64 targets")
def test_the_compiled_kernel_gives_the_same_bits_whatever_the_cpu_vector_width():
    """numba compiles for the host's CPU (here AVX-512) unless told otherwise; a generic x86-64 has 2-wide SSE2 and
    no fused multiply-add. Without fast-math the two give the same bits, as a GPU CI host and a laptop must."""
    code = ("import numpy as np\nfrom pinbench.media.ssim_numba import consecutive_ssim\n"
            "f = np.random.default_rng(3).integers(0, 256, (4, 37, 61), dtype=np.uint8)\n"
            "print([v.hex() for v in consecutive_ssim(f, data_range=255, window='gaussian', "
            "use_sample_covariance=False)])")
    host = {k: v for k, v in os.environ.items() if k != "NUMBA_CPU_NAME"}
    values = {subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             check=True).stdout.strip() for env in (host, {**host, "NUMBA_CPU_NAME": "generic"})}
    assert len(values) == 1, values


def test_a_stream_refuses_a_frame_unlike_the_first_and_a_result_before_two():
    with numba_mod.ConsecutiveSSIM((16, 16), np.uint8, data_range=255) as stream:
        stream.add(np.zeros((16, 16), np.uint8))
        with pytest.raises(ValueError, match="at least 2 frames, got 1"):
            stream.result()
        with pytest.raises(ValueError, match=r"frame 1: uint8 \(16, 17\), expected uint8 \(16, 16\) like the first"):
            stream.add(np.zeros((16, 17), np.uint8))
        with pytest.raises(ValueError, match="float64"):
            stream.add(np.zeros((16, 16)))


def test_consecutive_frames_in_torch_equal_the_cpu_kernel(synthetic_frames):
    """The device implementation on CPU, chunked (one frame of overlap); GPU CI runs it on CUDA below."""
    consecutive_ssim_torch = _torch_kernel()
    gray = synthetic_frames(11, height=40, width=52, seed=7)[..., 0]
    settings = {"data_range": 255, "window": "gaussian", "use_sample_covariance": False}
    cpu = consecutive_ssim(gray, **settings)
    for chunk_pixels in (3 * 40 * 52, 1 << 25):
        on_torch = consecutive_ssim_torch(gray, **settings, device="cpu", chunk_pixels=chunk_pixels)
        assert on_torch.shape == (10,) and on_torch.dtype == np.float64
        np.testing.assert_allclose(on_torch, cpu, rtol=0, atol=TOL)
    rgb = synthetic_frames(4, height=24, width=32, seed=8)
    np.testing.assert_allclose(consecutive_ssim_torch(rgb, data_range=255, device="cpu"),
                               consecutive_ssim(rgb, data_range=255), rtol=0, atol=TOL)


@pytest.mark.gpu
def test_consecutive_frames_on_cuda_equal_the_cpu_kernel(synthetic_frames):  # pragma: no cover - GPU CI
    consecutive_ssim_torch = _torch_kernel()
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    gray = synthetic_frames(33, height=768, width=1376, seed=9)[..., 0]
    settings = {"data_range": 255, "window": "gaussian", "use_sample_covariance": False}
    np.testing.assert_allclose(consecutive_ssim_torch(gray, **settings, device="cuda"),
                               consecutive_ssim(gray, **settings), rtol=0, atol=1e-6)


def test_consecutive_frames_refuse_what_they_cannot_score():
    frames = np.zeros((3, 16, 16), np.uint8)
    for bad, message in [(frames[:1], "T >= 2"), (frames[0], "T >= 2"), (frames[:, :5, :5], "smaller than"),
                         (frames.astype(complex), "real-valued")]:
        with pytest.raises(ValueError, match=message):
            consecutive_ssim(bad, data_range=255)
    with pytest.raises(ValueError, match=r"got frame shape \(16, 16, 0\)"):   # no channel: nan, unsaid
        consecutive_ssim(np.zeros((3, 16, 16, 0), np.uint8), data_range=255)


def test_consecutive_frames_in_torch_refuse_what_they_cannot_score():
    consecutive_ssim_torch = _torch_kernel()
    frames = np.zeros((3, 16, 16), np.uint8)
    for bad, message in [(frames[:1], "T >= 2"), (frames[0], "T >= 2"), (frames[:, :5, :5], "smaller than"),
                         (frames.astype(complex), "real-valued")]:
        with pytest.raises(ValueError, match=message):
            consecutive_ssim_torch(bad, data_range=255, device="cpu")


@pytest.mark.parametrize("data_range", [0.0, -1.0, float("nan"), float("inf")])
def test_a_data_range_that_is_not_positive_and_finite_is_refused(data_range):
    frames = np.random.default_rng(10).integers(0, 256, (3, 16, 16), dtype=np.uint8)
    with pytest.raises(ValueError, match="data_range must be positive and finite"):
        ssim_mean(frames[:2], frames[1:], data_range=np.array([255.0, data_range]))
    with pytest.raises(ValueError, match="data_range must be positive and finite"):
        consecutive_ssim(frames, data_range=data_range)


@pytest.mark.parametrize("data_range", [0.0, -1.0, float("nan"), float("inf")])
def test_a_data_range_that_is_not_positive_and_finite_is_refused_in_torch(data_range):
    consecutive_ssim_torch = _torch_kernel()
    frames = np.random.default_rng(10).integers(0, 256, (3, 16, 16), dtype=np.uint8)
    with pytest.raises(ValueError, match="data_range must be positive and finite"):
        consecutive_ssim_torch(frames, data_range=data_range, device="cpu")


def test_the_default_thread_count_is_the_cores_this_process_may_use(monkeypatch):
    """Pinned to one core (taskset), the kernels run one thread: extra threads there only take turns."""
    monkeypatch.setattr(ssim_mod.os, "sched_getaffinity", lambda pid: {3}, raising=False)
    assert ssim_mod.available_cpus() == 1
    with numba_mod.ConsecutiveSSIM((32, 32), np.uint8, data_range=255) as stream:
        assert stream._pool is None
    monkeypatch.setattr(ssim_mod.os, "sched_getaffinity", lambda pid: {0, 1, 5}, raising=False)
    assert ssim_mod.available_cpus() == 3


EPS = 2.0 ** -53


def _rounding_unit(a: np.ndarray, b: np.ndarray, data_range: float) -> float:
    """m^2 * 2^-53 / C2: a variance's rounding over the map's smallest denominator (pinbench.media.ssim)."""
    m = float(max(int(a.max()), int(b.max()), 1))
    return m * m * EPS / (0.03 * data_range) ** 2


def test_near_flat_bright_frames_stay_within_the_stated_bound_not_within_1e_12():
    """RGB frames of values 200-202 scored with their own data range (2), as PAI-Bench-C's blur metric scores a
    near-flat frame: the mean differs from scikit-image's by more than 1e-12 (what this module claimed before)
    and within 4 units of m^2 * 2^-53 / C2, every map pixel within 64 (what its docstring states)."""
    rng = np.random.default_rng(1)
    a = rng.integers(200, 203, (176, 320, 3), dtype=np.uint8)
    b = np.clip(a.astype(int) + rng.integers(-1, 2, a.shape), 0, 255).astype(np.uint8)
    data_range = float(int(a.max()) - int(a.min()))
    _, full = structural_similarity(a, b, full=True, data_range=data_range, channel_axis=2)
    unit = _rounding_unit(a, b, data_range)
    mean = abs(float(ssim_mean(a, b, data_range=data_range, channel_axis=2, crop=False)) - float(full.mean()))
    assert 1e-12 < mean <= 4 * unit
    assert float(np.abs(ssim_map(a, b, data_range=data_range, channel_axis=2) - full).max()) <= 64 * unit


def test_the_stated_bound_holds_over_seeded_near_flat_and_random_pairs():
    """The sweep behind the module docstring's numbers, smaller: gray and RGB, uniform and Gaussian windows, data
    ranges 1 to 255; every map pixel within 64 and every mean (cropped and full) within 4 rounding units."""
    rng = np.random.default_rng(3)
    for trial in range(120):
        flat = trial % 2 == 0
        low, span = (int(rng.integers(150, 256)), int(rng.integers(0, 4))) if flat else (0, 255)
        channel = trial % 4 < 2
        shape = (int(rng.integers(16, 48)), int(rng.integers(16, 56))) + ((3,) if channel else ())
        a = rng.integers(low, min(255, low + span) + 1, shape, dtype=np.uint8)
        b = np.clip(a.astype(int) + rng.integers(-2, 3, a.shape), 0, 255).astype(np.uint8)
        data_range = float(rng.choice([1, 2, 3, 10, 255])) if flat else 255.0
        gaussian = trial % 3 == 0
        ours = {"data_range": data_range, "channel_axis": 2 if channel else None}
        theirs = {"data_range": data_range, "channel_axis": 2 if channel else None}
        if gaussian:
            ours.update(window="gaussian", use_sample_covariance=False)
            theirs.update(gaussian_weights=True, sigma=1.5, use_sample_covariance=False)
        mssim, full = structural_similarity(a, b, full=True, **theirs)
        unit = _rounding_unit(a, b, data_range)
        assert float(np.abs(ssim_map(a, b, **ours) - full).max()) <= 64 * unit, trial
        assert abs(float(ssim_mean(a, b, **ours)) - mssim) <= 4 * unit, trial
        assert abs(float(ssim_mean(a, b, crop=False, **ours)) - float(full.mean())) <= 4 * unit, trial
