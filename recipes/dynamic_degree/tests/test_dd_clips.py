"""Clip splitting and frame sampling (spec sections 2-3), including the banker's-rounding cases."""

from __future__ import annotations

import pytest

from pinbench_recipes.dynamic_degree.clips import Clip, clip_length, sampled_frames, sampling_interval, split_clips

# fps -> (frames per 2 s clip S, sampling interval k, sampled frames N per full clip)
EXPECTED = {
    8.0: (16, 1, 16),
    12.0: (24, 2, 12),   # 12 / 8 = 1.5 -> 2 (half to even)
    16.0: (32, 2, 16),
    20.0: (40, 2, 20),   # 20 / 8 = 2.5 -> 2 (half to even; half-up would give 3)
    24.0: (48, 3, 16),
    29.97: (60, 4, 15),  # 59.94 -> 60; 3.746 -> 4
    30.0: (60, 4, 15),
}


@pytest.mark.parametrize("fps", sorted(EXPECTED))
def test_clip_length_interval_and_sampled_count(fps: float) -> None:
    size, k, n = EXPECTED[fps]
    assert clip_length(fps) == size
    assert sampling_interval(fps) == k
    clip = Clip(0, 0, size, "000")
    assert len(sampled_frames(clip, fps)) == n


@pytest.mark.parametrize("fps", sorted(EXPECTED))
def test_long_video_is_split_into_back_to_back_clips_plus_a_tail(fps: float) -> None:
    size = EXPECTED[fps][0]
    n_frames = 3 * size + size // 3  # three full clips and a leftover
    clips = split_clips(n_frames, fps)
    assert [(c.start, c.stop) for c in clips[:3]] == [(0, size), (size, 2 * size), (2 * size, 3 * size)]
    tail = clips[3]
    assert (tail.start, tail.stop) == (n_frames - size, n_frames)  # the last S frames, overlapping
    assert all(c.n_frames == size for c in clips)
    assert [c.name for c in clips] == ["000", "001", "002", "003"]


@pytest.mark.parametrize("fps", sorted(EXPECTED))
def test_exact_multiple_has_no_tail_clip(fps: float) -> None:
    size = EXPECTED[fps][0]
    clips = split_clips(4 * size, fps)
    assert len(clips) == 4 and clips[-1].stop == 4 * size


@pytest.mark.parametrize("fps", sorted(EXPECTED))
def test_video_shorter_than_a_clip_is_one_full_clip(fps: float) -> None:
    size = EXPECTED[fps][0]
    clips = split_clips(size - 1, fps)
    assert clips == [Clip(0, 0, size - 1, "full")]
    assert split_clips(1, fps) == [Clip(0, 0, 1, "full")]


def test_sampling_starts_at_each_clips_first_frame() -> None:
    clips = split_clips(100, 24.0)  # S = 48: [0,48) [48,96) and the tail [52,100)
    assert sampled_frames(clips[0], 24.0) == list(range(0, 48, 3))
    assert sampled_frames(clips[2], 24.0) == list(range(52, 100, 3))


def test_short_video_sampling() -> None:
    (clip,) = split_clips(3, 30.0)  # k = 4 -> only frame 0
    assert sampled_frames(clip, 30.0) == [0]
    (clip,) = split_clips(10, 8.0)
    assert sampled_frames(clip, 8.0) == list(range(10))


def test_worked_example_60s_at_16fps() -> None:
    clips = split_clips(960, 16.0)  # spec section 4: 30 clips of 32 frames, N = 16
    assert len(clips) == 30 and all(c.n_frames == 32 for c in clips)
    assert all(len(sampled_frames(c, 16.0)) == 16 for c in clips)


@pytest.mark.parametrize(("fps", "k"), [(4.0, 1), (6.0, 1), (10.0, 1), (28.0, 4), (36.0, 4), (60.0, 8)])
def test_rounding_of_the_interval_is_half_to_even(fps: float, k: int) -> None:
    assert sampling_interval(fps) == k


def test_clip_length_rounds_half_to_even() -> None:
    assert clip_length(12.25) == 24  # 24.5 -> 24
    assert clip_length(12.75) == 26  # 25.5 -> 26


@pytest.mark.parametrize("fps", [0.0, -8.0, float("nan"), float("inf")])
def test_bad_frame_rate_is_refused(fps: float) -> None:
    with pytest.raises(ValueError, match="frame rate"):
        split_clips(10, fps)


def test_zero_frames_is_refused() -> None:
    with pytest.raises(ValueError, match="0 frames"):
        split_clips(0, 8.0)
