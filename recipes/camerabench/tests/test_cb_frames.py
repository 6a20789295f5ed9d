"""Frame sampling: the pinned rule by hand, and qwen-vl-utils (decord forced) against it on real videos."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pinbench_recipes.camerabench import frames
from pinbench_recipes.camerabench.fixture import read_bits


@pytest.mark.parametrize(("total", "fps", "expected"), [
    (20, 8.0, 20),     # 2.5 s at 8 fps: every frame
    (100, 30.0, 26),   # 3.33 s -> 26.67 -> floor to even
    (9, 24.0, 4),      # 0.375 s -> 3 -> at least 4
    (7, 8.0, 6),       # 7 wanted, capped by floor_even(7) = 6
    (3, 8.0, 2),       # at least 4, but at most floor_even(3) = 2
    (2000, 30.0, 532),  # 66.7 s -> 533.3 -> 532
    (4000, 30.0, 768),  # capped at 768
])
def test_sampled_frame_count(total: int, fps: float, expected: int) -> None:
    assert frames.sampled_frame_count(total, fps) == expected


def test_too_short_a_video_cannot_be_sampled() -> None:
    with pytest.raises(ValueError, match="need 2..1"):
        frames.sampled_frame_count(1, 8.0)


def test_indices_span_first_to_last_frame() -> None:
    assert frames.sampled_frame_indices(9, 4) == [0, 3, 5, 8]  # linspace 0, 2.67, 5.33, 8
    assert frames.sampled_frame_indices(100, 26)[:4] == [0, 4, 8, 12]  # 99/25 = 3.96 per step
    assert frames.sampled_frame_indices(100, 26)[-1] == 99


@pytest.mark.parametrize(("size", "n", "expected"), [
    ((48, 64), 20, (280, 392)),      # too small: scaled up to >= 100,352 px (28 * 28 multiples)
    ((720, 1280), 16, (280, 504)),   # too large: scaled down to <= 151,200 px
    ((480, 640), 40, (336, 448)),    # beta = sqrt(307200 / 151200): 12.03 -> 12, 16.04 -> 16 patches
    ((360, 640), 40, (280, 504)),    # 16:9: 10.42 -> 10, 18.52 -> 18 patches
    ((336, 448), 8, (336, 448)),     # already in range and a multiple of 28: unchanged
])
def test_resized_size(size: tuple[int, int], n: int, expected: tuple[int, int]) -> None:
    assert frames.resized_size(*size, n) == expected
    h, w = expected
    assert h % 28 == 0 and w % 28 == 0 and frames.VIDEO_MIN_PIXELS <= h * w <= frames.MAX_PIXELS


@pytest.mark.parametrize(("n_frames", "fps", "size"), [
    (20, 8.0, (48, 64)),
    (40, 30.0, (48, 64)),
    (13, 24.0, (96, 64)),
    (90, 12.5, (56, 96)),
])
def test_qwen_vl_utils_samples_exactly_the_pinned_frames(bit_video: Callable[..., Path], n_frames: int,
                                                        fps: float, size: tuple[int, int]) -> None:
    pytest.importorskip("decord")
    from pinbench_recipes.camerabench.qwen_scorer import video_element, vision_process

    try:
        vp = vision_process()  # sets the reader before qwen_vl_utils is first imported
    except ModuleNotFoundError:
        pytest.skip("qwen-vl-utils is not installed")
    path = bit_video(f"v{n_frames}", n_frames, fps, *size)
    video, sample_fps = vp.fetch_video(video_element(path), return_video_sample_fps=True)
    n = frames.sampled_frame_count(n_frames, fps)
    assert tuple(video.shape) == (n, 3, *frames.resized_size(*size, n))
    assert [read_bits(frame.numpy()) for frame in video] == frames.sampled_frame_indices(n_frames, n)
    assert sample_fps == pytest.approx(n / n_frames * fps)
