"""pinbench.media.ssim against scikit-image's structural_similarity, frame by frame."""

from __future__ import annotations

import numpy as np
import pytest
from skimage.metrics import structural_similarity

from pinbench.media import ssim as ssim_mod
from pinbench.media.ssim import make_window, ssim_map, ssim_mean

TOL = 1e-10  # both sides are float64 with the same expression order; differences are rounding only


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
        np.testing.assert_allclose(maps[i], expected, rtol=0, atol=TOL)
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
        np.testing.assert_allclose(got[i], expected, rtol=0, atol=TOL)


def test_channels_first_and_single_image():
    rng = np.random.default_rng(2)
    a, b = _noisy_pair(rng, (3, 30, 40))  # channels first, no batch
    mssim, expected = structural_similarity(a, b, data_range=255, full=True, channel_axis=0)
    np.testing.assert_allclose(ssim_map(a, b, data_range=255, channel_axis=0), expected, rtol=0, atol=TOL)
    assert ssim_mean(a, b, data_range=255, channel_axis=0) == pytest.approx(mssim, abs=TOL)
    gray_a, gray_b = a[0], b[0]
    assert float(ssim_mean(gray_a, gray_b, data_range=255)) == pytest.approx(
        structural_similarity(gray_a, gray_b, data_range=255), abs=TOL)


def test_chunked_threads_give_identical_results(monkeypatch):
    rng = np.random.default_rng(4)
    a, b = _noisy_pair(rng, (7, 24, 32, 3))
    serial = ssim_map(a, b, data_range=255, channel_axis=-1, max_workers=1)
    serial_means = ssim_mean(a, b, data_range=255, channel_axis=-1, crop=False, max_workers=1)
    monkeypatch.setattr(ssim_mod, "CHUNK_BYTES", 24 * 32 * 8 * 2)  # two images per chunk
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
    ],
)
def test_bad_window_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_window(**kwargs)


def test_shape_and_range_errors():
    a = np.zeros((2, 16, 16), np.uint8)
    with pytest.raises(ValueError, match="differ in shape"):
        ssim_map(a, a[:, :8], data_range=255)
    with pytest.raises(ValueError, match="fit the batch shape"):
        ssim_map(a, a, data_range=np.ones(3))
    with pytest.raises(ValueError, match="smaller than"):
        ssim_map(a[:, :5, :5], a[:, :5, :5], data_range=255)
