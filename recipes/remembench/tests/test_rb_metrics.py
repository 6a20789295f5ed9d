"""TempSSIM against scikit-image, Drift on synthetic chunks, the BGR convention and precision switches."""

from __future__ import annotations

import os

import cv2
import numpy as np
import pytest
from fifo_swap import check_then_swap, within
from skimage.metrics import structural_similarity

from pinbench.media import ssim as ssim_mod
from pinbench.media import ssim_numba as numba_mod
from pinbench_recipes.remembench import metrics
from pinbench_recipes.remembench.dataset import I2V_PAPER, T2V_PAPER
from pinbench_recipes.remembench.metrics import (
    drift_frames,
    drift_from_embeddings,
    quality_metrics,
    tempssim,
    tempssim_pairs,
    to_gray,
)


def skimage_tempssim(gray: np.ndarray) -> np.ndarray:
    """The paper's settings expressed for scikit-image: Gaussian 1.5, population covariance, range 255."""
    return np.array([structural_similarity(gray[i], gray[i + 1], data_range=255, gaussian_weights=True,
                                           sigma=1.5, use_sample_covariance=False) for i in range(len(gray) - 1)])


def moving_frames(n: int = 12, height: int = 40, width: int = 56) -> np.ndarray:
    rng = np.random.default_rng(7)
    base = cv2.resize(rng.uniform(0, 255, (10, 14, 3)).astype(np.float32), (width + 2 * n, height))
    frames = np.stack([base[:, 2 * t : 2 * t + width] for t in range(n)])
    noise = rng.normal(0, 4, frames.shape)
    return np.clip(frames + noise, 0, 255).astype(np.uint8)


def test_tempssim_matches_skimage_on_random_and_realistic_frames(monkeypatch):
    rng = np.random.default_rng(0)
    noisy = rng.integers(0, 256, (9, 33, 47), dtype=np.uint8)
    smooth = to_gray(moving_frames())
    monkeypatch.setattr(ssim_mod, "BAND_ROWS", 5)  # several bands, their seams included
    for gray in (noisy, smooth):
        expected = skimage_tempssim(gray)
        got = tempssim_pairs(gray, max_workers=2)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
        assert np.array_equal(got, tempssim_pairs(gray, max_workers=1))  # thread count changes nothing
        assert tempssim(gray) == pytest.approx(expected.mean(), abs=1e-12)


def test_tempssim_is_one_for_a_still_video_and_checks_shapes():
    still = np.repeat(np.random.default_rng(1).integers(0, 256, (1, 20, 20), dtype=np.uint8), 4, axis=0)
    assert tempssim(still) == pytest.approx(1.0, abs=1e-12)
    with pytest.raises(ValueError, match="T >= 2"):
        tempssim_pairs(still[:1])
    with pytest.raises(ValueError, match="smaller than the 11-pixel window"):
        tempssim_pairs(still[:, :8, :8])
    with pytest.raises(ValueError, match="grayscale"):
        tempssim_pairs(np.repeat(still[..., None], 3, axis=3))


def test_the_device_option_chooses_the_torch_tempssim(monkeypatch):
    """A GPU device runs TempSSIM in torch; here the same code on CPU, through a recording test double."""
    calls = []
    torch_ssim = metrics.consecutive_ssim_torch

    def recording_torch_ssim(gray, *, device, **settings):
        calls.append(device)
        return torch_ssim(gray, device="cpu", **settings)

    monkeypatch.setattr(metrics, "consecutive_ssim_torch", recording_torch_ssim)
    gray = to_gray(moving_frames())
    on_device = tempssim_pairs(gray, device="cuda:1")
    assert calls == ["cuda:1"]
    np.testing.assert_allclose(on_device, skimage_tempssim(gray), rtol=0, atol=1e-12)
    tempssim_pairs(gray, device="cpu")
    assert calls == ["cuda:1"]      # the CPU kernel, not torch


def test_gray_is_opencv_bgr2gray_of_the_bgr_decode():
    rgb = moving_frames(3)
    bgr = rgb[..., ::-1]
    expected = np.stack([cv2.cvtColor(np.ascontiguousarray(f), cv2.COLOR_BGR2GRAY) for f in bgr])
    np.testing.assert_array_equal(to_gray(rgb), expected)


def test_drift_frames_follow_the_chunk_layouts():
    t2v, owners = drift_frames(T2V_PAPER.chunk_layout())
    assert len(t2v) == 92 and t2v[:8] == [0, 1, 3, 4, 5, 10, 16, 21] and t2v[-4:] == [362, 367, 373, 378]
    assert owners[:8] == [0, 0, 0, 0, 1, 1, 1, 1] and owners[-1] == 22
    i2v, owners = drift_frames(I2V_PAPER.chunk_layout())
    assert len(i2v) == 64 and i2v[:8] == [0, 4, 8, 12, 13, 18, 23, 28] and owners[-1] == 15
    assert drift_frames([(0, 1), (2, 2)]) == ([0, 1, 2], [0, 0, 1])  # short chunks take every frame


def _unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v)


def test_drift_on_synthetic_chunks():
    same = np.tile(_unit([1, 2, 3]), (12, 1))
    assert drift_from_embeddings(same, [0] * 4 + [1] * 4 + [2] * 4) == pytest.approx(0.0, abs=1e-12)
    orthogonal = np.array([[1, 0, 0]] * 4 + [[0, 1, 0]] * 4, dtype=float)
    assert drift_from_embeddings(orthogonal, [0] * 4 + [1] * 4) == pytest.approx(1.0)
    # chunk 0 mixes two directions: its descriptor is their re-normalised mean (45 degrees)
    mixed = np.array([[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 1, 0], [1, 0, 0], [1, 0, 0], [1, 0, 0], [1, 0, 0],
                      [0, 1, 0], [0, 1, 0], [0, 1, 0], [0, 1, 0]], dtype=float)
    expected = np.mean([1 - np.cos(np.pi / 4), 1 - np.cos(np.pi / 2)])
    assert drift_from_embeddings(mixed, [0] * 4 + [1] * 4 + [2] * 4) == pytest.approx(expected)
    with pytest.raises(ValueError, match="two chunks"):
        drift_from_embeddings(same[:4], [0] * 4)


class RecordingEmbedder:
    """Test double for ClipEmbedder: records the arrays it receives, returns fixed unit vectors."""

    def __init__(self):
        self.calls: list[list[np.ndarray]] = []

    def embed(self, images, batch: int = 32):
        self.calls.append([np.array(i) for i in images])
        return np.stack([_unit([1.0, i % 3, 0.5]) for i in range(len(images))]).astype(np.float32)


def test_drift_feeds_bgr_frames_to_clip():
    rgb = moving_frames(20, height=24, width=24)
    layout = [(0, 4), (5, 9), (10, 14), (15, 19)]
    embedder = RecordingEmbedder()
    values = quality_metrics(embedder, rgb, layout)
    (received,) = embedder.calls
    indices, _ = drift_frames(layout)
    assert len(received) == len(indices)
    for array, index in zip(received, indices, strict=True):
        np.testing.assert_array_equal(array, rgb[index][..., ::-1])
    assert set(values) == {"tempssim", "drift"}


def _avx512() -> bool:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return "avx512f" in cpuinfo.read().split()
    except OSError:
        return False


@pytest.mark.skipif(not _avx512(), reason="needs a CPU on which OpenBLAS can run both its Haswell and SkylakeX kernels")
def test_drift_is_the_same_whichever_blas_kernel_the_cpu_gets() -> None:
    """OpenBLAS picks its kernel by CPU; with numpy's BLAS norm, Haswell and SkylakeX rounded seed 13's drift apart
    (as a host with OPENBLAS_CORETYPE=Haswell and an image without it did). Exactly rounded sums agree."""
    import subprocess
    import sys

    code = ("import numpy as np\nfrom pinbench_recipes.remembench.metrics import drift_from_embeddings\n"
            "e = np.random.default_rng(13).normal(size=(92, 16)).astype(np.float32)\n"
            "e /= np.linalg.norm(e, axis=1, keepdims=True)\n"
            "print(drift_from_embeddings(e, [i // 4 for i in range(92)]).hex())")
    values = {subprocess.run([sys.executable, "-c", code], env={**os.environ, "OPENBLAS_CORETYPE": core},
                             capture_output=True, text=True, check=True).stdout.strip()
              for core in ("Haswell", "SkylakeX")}
    assert len(values) == 1, values


def test_decoding_with_tempssim_gives_the_frames_and_the_value_of_decode_then_score(tmp_path, monkeypatch):
    """The reader-thread path returns what read_video returns and tempssim's value of those frames, to the bit;
    on another device it leaves TempSSIM to that device."""
    from pinbench.media.video import read_video, write_video

    monkeypatch.setattr(numba_mod, "CHUNK_FRAMES", 4)  # runs of frames that do not divide the video
    path = write_video(tmp_path / "rollout.mp4", moving_frames(11), 8, crf=0)
    frames, value = metrics.decode_with_tempssim(path, "opencv")
    decoded = read_video(path, backend="opencv").frames
    assert np.array_equal(frames, decoded)
    assert value == tempssim(to_gray(decoded))
    assert metrics.decode_with_tempssim(path, "opencv", device="meta")[1] is None


def test_a_rollout_in_a_container_its_name_does_not_name_is_refused(tmp_path):
    """A Matroska file named ``.mp4`` under -o videos was scored, where the same bytes from a generator were refused
    (``check_rollout``): it fails in one line naming the file and the container found."""
    from pinbench.media.video import VideoError, write_video

    made = write_video(tmp_path / "rollout.mkv", moving_frames(5), 8, crf=0)
    named = tmp_path / "rollout.mp4"
    os.link(made, named)
    with pytest.raises(VideoError) as refused:
        metrics.decode_with_tempssim(named, "opencv")
    assert str(refused.value) == (f"{named}: a matroska,webm container under the extension .mp4 (which names mp4): "
                                  "rename it to its format's extension")


def test_decoding_with_tempssim_decodes_the_file_it_checked(tmp_path, monkeypatch):
    """It checked the rollout (named_video_info) and then decoded it again by its path: a FIFO put there in between was
    what it decoded. It decodes the descriptor it checked."""
    from pinbench.media.video import read_video, write_video

    path = write_video(tmp_path / "rollout.mp4", moving_frames(11), 8, crf=0)
    want = read_video(path, backend="opencv").frames
    monkeypatch.setattr(metrics, "named_video_info", check_then_swap(metrics.named_video_info, path))
    frames, _ = within(10, path, lambda: metrics.decode_with_tempssim(path, "opencv"))
    assert np.array_equal(frames, want)
