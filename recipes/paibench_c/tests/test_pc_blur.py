"""Blur SSIM with the PAI-Bench-C fork's semantics (pinbench_recipes.paibench_c.blur), checked against the fork's path.

The fork's path, as the spec (section 2.2) describes it: per frame, scikit-image's ``structural_similarity`` of
the blurred GT and prediction with ``full=True, channel_axis=2`` and the GT frame's data range, each map
averaged over channels, then everything over frames and pixels. The native kernel (OpenCV window sums in
float64) equals it to rounding.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from skimage.metrics import structural_similarity

from pinbench_recipes.paibench_c.blur import bilateral_blur, blur_ssim, blurred_ssim

TOL = 1e-12


def _video(seed: int, n: int = 3, h: int = 24, w: int = 32) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8)


def _reference(pred: np.ndarray, gt: np.ndarray) -> float:
    """The fork's path: per-frame skimage full map, data range from that GT frame, mean over all."""
    maps = []
    for g, p in zip(gt, pred, strict=True):
        _, full = structural_similarity(g, p, data_range=int(g.max()) - int(g.min()), full=True, channel_axis=2)
        maps.append(full.mean(axis=2))
    return float(np.mean(np.stack(maps)))


def test_bilateral_parameters_are_the_medium_preset() -> None:
    frames = _video(0)
    expected = np.stack([cv2.bilateralFilter(f, 30, 150, 100) for f in frames])
    np.testing.assert_array_equal(bilateral_blur(frames), expected)


def test_full_map_mean_equals_scikit_image_full_map() -> None:
    gt, pred = _video(1), _video(2)
    assert blurred_ssim(pred, gt) == pytest.approx(_reference(pred, gt), abs=TOL)


def test_full_map_mean_is_not_the_border_cropped_scalar() -> None:
    gt, pred = _video(3), _video(4)
    scalar = np.mean([structural_similarity(g, p, data_range=int(g.max()) - int(g.min()), channel_axis=2)
                      for g, p in zip(gt, pred, strict=True)])
    assert blurred_ssim(pred, gt) != pytest.approx(scalar, abs=1e-9)


def test_data_range_is_per_frame_from_the_ground_truth() -> None:
    gt = _video(5)
    gt[1] = (gt[1] // 8) + 100          # a low-contrast GT frame: its own data range is ~32, not 255
    pred = gt.copy()
    pred[1] = np.clip(gt[1].astype(int) + np.random.default_rng(0).integers(-6, 7, gt[1].shape), 0, 255)
    ours = blurred_ssim(pred, gt)
    global_range = np.mean([structural_similarity(g, p, data_range=255, full=True, channel_axis=2)[1].mean(axis=2)
                            for g, p in zip(gt, pred, strict=True)])
    assert ours == pytest.approx(_reference(pred, gt), abs=TOL)
    assert ours < global_range - 0.003   # the small data range makes the same error count for more


def test_identical_blurred_videos_score_exactly_one() -> None:
    frames = bilateral_blur(_video(6))
    assert blurred_ssim(frames, frames) == 1.0


def test_ground_truth_longer_than_prediction_is_cut() -> None:
    gt, pred = _video(7, n=4), _video(8, n=2)
    assert blurred_ssim(pred, gt) == pytest.approx(_reference(pred, gt[:2]), abs=TOL)


def test_prediction_of_another_size_is_resized_bilinear() -> None:
    gt, pred = _video(9), _video(10, h=36, w=48)
    resized = np.stack([cv2.resize(f, (32, 24), interpolation=cv2.INTER_LINEAR) for f in pred])
    assert blurred_ssim(pred, gt) == pytest.approx(_reference(resized, gt), abs=TOL)


def test_blur_ssim_blurs_both_sides() -> None:
    gt, pred = _video(11), _video(12)
    assert blur_ssim(pred, gt) == pytest.approx(_reference(bilateral_blur(pred), bilateral_blur(gt)), abs=TOL)
    assert blur_ssim(pred, gt) != blurred_ssim(pred, gt)


def test_constant_ground_truth_frame_gives_nan_like_the_evaluator() -> None:
    gt = np.full((1, 16, 16, 3), 90, np.uint8)
    pred = gt.copy()
    pred[0, 4, 4] = 100
    with np.errstate(invalid="ignore", divide="ignore"):
        assert np.isnan(blurred_ssim(pred, gt))


def test_frames_are_batched_without_changing_a_bit() -> None:
    gt, pred = _video(13, n=19), _video(14, n=19)      # more frames than one SSIM batch
    assert blurred_ssim(pred, gt) == pytest.approx(_reference(pred, gt), abs=TOL)


def test_frames_given_one_at_a_time_give_the_bits_of_the_whole_video() -> None:
    """blurred_ssim_of_frames (each prediction frame blurred and scored as a decoder yields it) against
    blurred_ssim of the blurred videos: the same bits, a shorter prediction against the GT's first frames, frames
    beyond the GT unread, a constant GT frame NaN, a frame of another size refused."""
    from pinbench_recipes.paibench_c.blur import blurred_ssim_of_frames

    gt, pred = _video(15, n=6), _video(16, n=6)
    gt_blur = bilateral_blur(gt)
    whole = blurred_ssim(bilateral_blur(pred), gt_blur)
    assert blurred_ssim_of_frames(iter(pred), gt_blur) == whole
    assert blurred_ssim_of_frames(iter(pred[:4]), gt_blur) == blurred_ssim(bilateral_blur(pred[:4]), gt_blur)

    def more_than_the_gt():
        yield from pred[:5]
        raise AssertionError("a frame beyond the GT's count was asked for")

    assert blurred_ssim_of_frames(more_than_the_gt(), gt_blur[:5]) == blurred_ssim(bilateral_blur(pred[:5]),
                                                                                    gt_blur[:5])
    flat = gt_blur.copy()
    flat[2] = 90
    assert np.isnan(blurred_ssim_of_frames(iter(pred), flat))
    with pytest.raises(ValueError, match=r"prediction frame 0 is uint8 \(24, 30, 3\), expected uint8 \(24, 32, 3\)"):
        blurred_ssim_of_frames(iter(pred[:, :, :30]), gt_blur)
