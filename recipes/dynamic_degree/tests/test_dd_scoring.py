"""tau, n, top-5% magnitude, padding and the per-clip / per-video decisions (spec sections 3-4)."""

from __future__ import annotations

import numpy as np
import pytest

from pinbench_recipes.dynamic_degree.scoring import (
    count_threshold,
    decide_clip,
    motion_threshold,
    pad_frames,
    padding,
    top_count,
    top_mean_magnitude,
    video_score,
)


def test_tau_uses_the_unpadded_short_side() -> None:
    assert motion_threshold(480, 832) == pytest.approx(11.25)
    assert motion_threshold(256, 256) == 6.0
    assert motion_threshold(52, 68) == pytest.approx(6 * 52 / 256)


@pytest.mark.parametrize(
    ("n_sampled", "n_required"),
    [(0, 1), (1, 1), (2, 1), (3, 1), (4, 1), (6, 2), (10, 2), (12, 3), (14, 4), (15, 4), (16, 4),
     (17, 4), (18, 4), (20, 5)],
)
def test_count_threshold_rounds_half_to_even_and_is_at_least_one(n_sampled: int, n_required: int) -> None:
    # N = 2: round(0.5) = 0 -> max(1, 0) = 1 (VBench lacks the max and would call any clip moving)
    assert count_threshold(n_sampled) == n_required


def test_clip_with_two_sampled_frames_needs_its_one_transition_above_tau() -> None:
    assert decide_clip([5.0], 2, tau=4.0).dynamic == 1
    assert decide_clip([3.0], 2, tau=4.0).dynamic == 0


def test_threshold_is_strict() -> None:
    decision = decide_clip([4.0, 4.0, 4.0], 4, tau=4.0)
    assert (decision.dynamic, decision.n_active, decision.n_required) == (0, 0, 1)


def test_clip_needs_n_transitions_above_tau() -> None:
    m = [9.0, 9.0, 9.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]  # N = 16, n = 4
    assert decide_clip(m, 16, tau=5.0).dynamic == 0
    m[3] = 9.0
    assert decide_clip(m, 16, tau=5.0).dynamic == 1


@pytest.mark.parametrize("n_sampled", [0, 1])
def test_clip_with_fewer_than_two_sampled_frames_is_excluded_with_a_reason(n_sampled: int) -> None:
    decision = decide_clip([], n_sampled, tau=1.0)
    assert decision.dynamic is None
    assert "clip excluded" in (decision.error or "")


def test_magnitude_count_must_match_transitions() -> None:
    with pytest.raises(ValueError, match="2 magnitudes for 4 sampled frames"):
        decide_clip([1.0, 2.0], 4, tau=1.0)


def test_top_count_is_five_percent_of_the_padded_field_and_at_least_one() -> None:
    assert top_count(480, 832) == int(0.05 * 480 * 832)
    assert top_count(4, 4) == 1  # 0.8 -> 0 -> 1
    assert top_count(8, 8) == 3  # 3.2 -> 3


def test_top_mean_on_a_tiny_field() -> None:
    flow = np.zeros((2, 4, 4), np.float32)  # 16 px -> top 1 pixel
    flow[0, 1, 2], flow[1, 1, 2] = 3.0, 4.0  # magnitude 5
    flow[0, 0, 0] = 2.0
    assert top_mean_magnitude(flow) == 5.0


def test_top_mean_averages_the_largest_pixels() -> None:
    flow = np.zeros((2, 8, 8), np.float32)  # 64 px -> top 3 pixels
    flow[0].flat[:5] = [10.0, 8.0, 6.0, 4.0, 2.0]
    assert top_mean_magnitude(flow) == pytest.approx(8.0)
    flow[1].flat[:5] = [0.0, 6.0, 8.0, 0.0, 0.0]  # magnitudes 10, 10, 10, 4, 2
    assert top_mean_magnitude(flow) == pytest.approx(10.0)


def test_top_mean_of_uniform_translation_is_the_speed() -> None:
    flow = np.stack([np.full((16, 24), 3.0), np.full((16, 24), -4.0)]).astype(np.float32)
    assert top_mean_magnitude(flow) == pytest.approx(5.0)


def test_top_mean_rejects_wrong_shape() -> None:
    with pytest.raises(ValueError, match=r"\(2, H, W\)"):
        top_mean_magnitude(np.zeros((4, 4, 2), np.float32))


@pytest.mark.parametrize(
    ("size", "pads"),
    [((480, 832), (0, 0, 0, 0)), ((52, 68), (2, 2, 2, 2)), ((49, 67), (3, 4, 2, 3)), ((1, 1), (3, 4, 3, 4))],
)
def test_padding_is_split_like_the_sintel_padder(size: tuple[int, int], pads: tuple[int, ...]) -> None:
    assert padding(*size) == pads


def test_pad_frames_replicates_edges() -> None:
    frames = np.arange(2 * 5 * 6 * 3, dtype=np.uint8).reshape(2, 5, 6, 3)
    padded = pad_frames(frames)  # 5x6 -> 8x8: top 1, bottom 2, left 1, right 1
    assert padded.shape == (2, 8, 8, 3)
    np.testing.assert_array_equal(padded[:, 1:6, 1:7], frames)
    np.testing.assert_array_equal(padded[:, 0, 1:7], frames[:, 0])
    np.testing.assert_array_equal(padded[:, 7, 1:7], frames[:, -1])
    np.testing.assert_array_equal(padded[:, 1:6, 0], frames[:, :, 0])
    assert padded[0, 0, 0].tolist() == frames[0, 0, 0].tolist()


def test_pad_frames_leaves_multiples_of_eight_alone() -> None:
    frames = np.zeros((1, 16, 24, 3), np.uint8)
    assert pad_frames(frames) is frames


def test_video_score_is_the_mean_over_scored_clips() -> None:
    assert video_score([1, 0, 1, None]) == pytest.approx(2 / 3)
    assert video_score([0, 0]) == 0.0
    assert video_score([None]) is None
