"""Canny edge maps and pooled edge F1 with the PAI-Bench-C fork's semantics (pinbench_recipes.paibench_c.edges)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from pinbench_recipes.paibench_c.edges import (
    CANNY_PRESETS,
    DegenerateEdgeMapError,
    canny_edges,
    canny_scores,
    edge_scores,
)


def _frames(seed: int = 0, n: int = 3, h: int = 32, w: int = 40) -> np.ndarray:
    rng = np.random.default_rng(seed)
    frames = np.zeros((n, h, w, 3), np.uint8)
    for t in range(n):
        frames[t] = rng.integers(40, 80, (h, w, 3))
        cv2.rectangle(frames[t], (5 + t, 6), (20 + t, 20), (230, 40, 200), -1)
    return frames


def test_presets_match_the_evaluator() -> None:
    assert CANNY_PRESETS["medium"] == (100, 200)
    assert CANNY_PRESETS["very_low"] == (20, 50) and CANNY_PRESETS["very_high"] == (300, 400)


def test_canny_converts_rgb_to_gray_before_canny() -> None:
    frames = _frames()
    expected = np.stack([cv2.Canny(cv2.cvtColor(f, cv2.COLOR_RGB2GRAY), 100, 200) for f in frames])
    np.testing.assert_array_equal(canny_edges(frames), expected)


def test_gray_conversion_differs_from_upstream_multichannel_canny() -> None:
    # A red/blue boundary of equal luminance-weighted contrast for BGR but not for RGB: the fork's fix
    # (explicit RGB->GRAY) must not reproduce upstream's 3-channel Canny.
    frame = np.zeros((1, 24, 24, 3), np.uint8)
    frame[0, :, :12] = (200, 0, 0)
    frame[0, :, 12:] = (0, 0, 200)
    ours = canny_edges(frame)
    upstream = cv2.Canny(frame[0], 100, 200)[None]
    assert not np.array_equal(ours, upstream)


def test_scores_are_pooled_over_all_frames_not_averaged_per_frame() -> None:
    gt = np.zeros((2, 2, 4), np.uint8)
    pred = np.zeros((2, 2, 4), np.uint8)
    # frame 0: gt 4 edge pixels, pred hits 2 of them and adds 2 false positives
    gt[0, 0, :] = 255
    pred[0, 0, :2] = 255
    pred[0, 1, :2] = 255
    # frame 1: gt 1 edge pixel, pred hits it exactly
    gt[1, 1, 3] = 255
    pred[1, 1, 3] = 255
    scores = edge_scores(pred, gt)
    tp, fp, fn = 3, 2, 2
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    assert scores.precision == pytest.approx(precision, abs=0)
    assert scores.recall == pytest.approx(recall, abs=0)
    assert scores.f1 == 2 * (precision * recall) / (precision + recall)
    per_frame_mean_f1 = (0.5 + 1.0) / 2
    assert scores.f1 != pytest.approx(per_frame_mean_f1)


def test_ground_truth_longer_than_prediction_is_cut() -> None:
    gt = np.zeros((3, 4, 4), np.uint8)
    gt[:, 1, 1] = 255
    gt[2, 0, 0] = 255           # only in the frame the prediction does not have
    pred = np.zeros((2, 4, 4), np.uint8)
    pred[:, 1, 1] = 255
    assert edge_scores(pred, gt).recall == 1.0


def test_prediction_of_another_size_is_resized_nearest_and_cut() -> None:
    gt = np.zeros((1, 4, 4), np.uint8)
    gt[0, :2, :2] = 255
    pred = np.zeros((2, 8, 8), np.uint8)
    pred[:, :4, :4] = 255       # nearest-neighbour shrink maps this block onto gt's 2x2 block
    scores = edge_scores(pred, gt)
    assert (scores.f1, scores.precision, scores.recall) == (1.0, 1.0, 1.0)


@pytest.mark.parametrize("fill", [0, 255])
def test_map_without_edges_or_without_background_is_refused(fill: int) -> None:
    gt = np.zeros((1, 4, 4), np.uint8)
    gt[0, 0, 0] = 255
    pred = np.full((1, 4, 4), fill, np.uint8)
    with pytest.raises(DegenerateEdgeMapError):
        edge_scores(pred, gt)
    with pytest.raises(DegenerateEdgeMapError):
        edge_scores(gt, pred)


def test_identical_videos_score_one_and_perturbed_less() -> None:
    frames = _frames()
    assert canny_scores(frames, frames).f1 == 1.0
    shifted = np.roll(frames, 3, axis=2)
    assert canny_scores(shifted, frames).f1 < 1.0


def test_bad_frame_arrays_are_rejected() -> None:
    with pytest.raises(ValueError, match="uint8 RGB"):
        canny_edges(np.zeros((2, 4, 4), np.uint8))
    with pytest.raises(ValueError, match="uint8 RGB"):
        canny_scores(np.zeros((1, 4, 4, 3), np.float32), np.zeros((1, 4, 4, 3), np.uint8))
