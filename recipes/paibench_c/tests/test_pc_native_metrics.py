"""Native PAI-Bench-C arithmetic against hand-computed small cases (and pycocotools for the RLE format)."""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import cv2
import numpy as np
import pytest
from fifo_swap import check_then_swap, within

from pinbench.media.video import read_video, write_video
from pinbench_recipes.paibench_c.blur import bilateral_blur, blurred_ssim
from pinbench_recipes.paibench_c.edges import canny_edges, edge_scores
from pinbench_recipes.paibench_c.native_metrics import (
    SegDetection,
    SegmentationError,
    align_pred_to_gt,
    decode_rle,
    depth_si_rmse,
    instance_map,
    iou_matrix,
    load_sam_detections,
    rle_counts,
    score_task,
    seg_miou_recall,
)
from pinbench_recipes.paibench_c.tests.conftest import clip

# ------------------------------------------------------------------------------------------ alignment


def test_pred_is_cut_to_gt_frames_then_resized_area_down_linear_up() -> None:
    gt = np.zeros((3, 8, 10, 3), np.uint8)
    big = np.random.default_rng(0).integers(0, 255, (5, 16, 20, 3), dtype=np.uint8)
    out = align_pred_to_gt(big, gt)
    expected = np.stack([cv2.resize(f, (10, 8), interpolation=cv2.INTER_AREA) for f in big[:3]])
    np.testing.assert_array_equal(out, expected)
    small = big[:, :4, :5]
    expected = np.stack([cv2.resize(f, (10, 8), interpolation=cv2.INTER_LINEAR) for f in small[:3]])
    np.testing.assert_array_equal(align_pred_to_gt(small, gt), expected)
    same = big[:2, :8, :10]
    assert align_pred_to_gt(same, gt) is not None and align_pred_to_gt(same, gt).shape == (2, 8, 10, 3)


# ---------------------------------------------------------------------------------------------- depth


def _depth_case() -> tuple[np.ndarray, np.ndarray]:
    gt = np.array([[[2, 4], [0, 8]], [[1, 1], [1, 1]], [[0, 0], [0, 0]]], np.float64)
    pred = np.array([[[1, 2], [3, 4]], [[1, 2], [3, 100]], [[1, 1], [1, 1]]], np.float64)
    return pred, gt


def test_si_rmse_hand_case_with_cap_and_an_invalid_frame() -> None:
    pred, gt = _depth_case()
    # frame 0: valid (2,1),(4,2),(8,4): ratio 4/2 = 2, residuals 0 -> 0
    # frame 1: ratio 1/2.5 = 0.4: residuals 0.6, 0.2, -0.2, -39 -> capped at -10
    # frame 2: no valid pixel -> 0, still in the denominator
    frame1 = math.sqrt((0.6**2 + 0.2**2 + 0.2**2 + 10.0**2) / 4)
    assert depth_si_rmse(pred, gt) == pytest.approx((0 + frame1 + 0) / 3, rel=1e-12)
    uncapped = math.sqrt((0.6**2 + 0.2**2 + 0.2**2 + 39.0**2) / 4)
    assert depth_si_rmse(pred, gt, per_pixel_error_cap=None) == pytest.approx(uncapped / 3, rel=1e-12)


def test_si_rmse_is_scale_invariant_and_zero_without_valid_pixels() -> None:
    gt = np.random.default_rng(1).uniform(1, 5, (2, 6, 6))
    assert depth_si_rmse(gt * 3.7, gt) == pytest.approx(0, abs=1e-12)
    assert depth_si_rmse(gt, np.zeros_like(gt)) == 0.0


def test_si_rmse_resizes_pred_area_down_and_cuts_gt() -> None:
    gt = np.random.default_rng(2).uniform(1, 5, (3, 4, 4))
    pred = np.random.default_rng(3).uniform(1, 5, (2, 8, 8))
    resized = np.stack([cv2.resize(f, (4, 4), interpolation=cv2.INTER_AREA) for f in pred])
    assert depth_si_rmse(pred, gt) == depth_si_rmse(resized, gt[:2])


# ----------------------------------------------------------------------------------------- segmentation


def mask(cells: list[tuple[int, int]], shape: tuple[int, int, int] = (1, 2, 4)) -> np.ndarray:
    m = np.zeros(shape, bool)
    for r, c in cells:
        m[:, r, c] = True
    return m


def test_miou_and_recall_hand_case() -> None:
    gt = [SegDetection("cup", mask([(0, 0), (0, 1)])), SegDetection("table", mask([(1, 0), (1, 1), (1, 2), (1, 3)]))]
    pred = [SegDetection("cup", mask([(0, 0), (0, 1), (0, 2)])), SegDetection("chair", mask([(1, 0), (1, 1)]))]
    m_iou, recall = seg_miou_recall(gt, pred, max_frames=1)
    assert m_iou == pytest.approx((2 / 3 + 0.5) / 2, rel=1e-6)
    assert recall == 1.0


def test_matches_at_or_below_threshold_are_dropped_and_recall_divides_by_matched_pairs() -> None:
    row = (1, 1, 20)
    gt = [SegDetection("a", mask([(0, 0)], row)), SegDetection("b", mask([(0, c) for c in range(10, 20)], row))]
    # pred "x" overlaps "a" fully; pred "y" covers 1 of 11 pixels of its union with "b" (IoU 1/11 < 0.1)
    pred = [SegDetection("x", mask([(0, 0)], row)), SegDetection("y", mask([(0, c) for c in range(9, 11)], row))]
    m_iou, recall = seg_miou_recall(gt, pred, max_frames=1)
    assert (m_iou, recall) == (1.0, 0.5)
    # Three GT phrases, one prediction: the denominator is min(3, 1) = 1 matched pair.
    gt3 = [*gt, SegDetection("c", mask([(0, 5)], row))]
    assert seg_miou_recall(gt3, pred[:1], max_frames=1) == (1.0, 1.0)


def test_same_phrase_objects_are_unioned_and_later_objects_overwrite_earlier() -> None:
    whole = mask([(0, c) for c in range(4)] + [(1, c) for c in range(4)])
    gt = [SegDetection("floor", whole), SegDetection("rug", mask([(1, 0), (1, 1)]))]
    inst = instance_map(gt, max_frames=1)
    assert inst[0].tolist() == [[1, 1, 1, 1], [2, 2, 1, 1]]
    pred = [SegDetection("floor", mask([(0, 0), (0, 1)])),
            SegDetection("floor", mask([(0, 2), (0, 3), (1, 2), (1, 3)])),
            SegDetection("rug", mask([(1, 0), (1, 1)]))]
    m_iou, recall = seg_miou_recall(gt, pred, max_frames=1)
    assert (m_iou, recall) == (1.0, 1.0)


def test_empty_detection_lists_score_zero_and_all_empty_masks_are_refused() -> None:
    det = [SegDetection("cup", mask([(0, 0)]))]
    assert seg_miou_recall([], det, max_frames=1) == (0.0, 0.0)
    assert seg_miou_recall(det, [], max_frames=1) == (0.0, 0.0)
    with pytest.raises(SegmentationError, match="every prediction phrase mask is empty"):
        seg_miou_recall(det, [SegDetection("cup", mask([]))], max_frames=1)
    with pytest.raises(SegmentationError, match="fewer than the 3 GT frames"):
        seg_miou_recall(det, det, max_frames=3)


def test_pred_masks_are_resized_nearest_to_the_gt_size() -> None:
    gt = [SegDetection("cup", mask([(0, 0), (0, 1)]))]
    big = np.zeros((1, 4, 8), bool)
    big[0, :2, :4] = True
    m_iou, _ = seg_miou_recall(gt, [SegDetection("cup", big)], max_frames=1)
    assert m_iou == 1.0


def test_iou_matrix_is_float32_like_the_evaluator() -> None:
    a = np.zeros((5000, 5000), bool)
    a[:, :4000] = True
    b = np.ones_like(a)
    iou = iou_matrix([a], [b])
    assert iou.dtype == np.float32 and iou[0, 0] == np.float32(20_000_000) / np.float32(25_000_000)


# ----------------------------------------------------------------------------------- pickles and RLE


def test_rle_counts_hand_case_and_list_form() -> None:
    # COCO's compressed form of runs [2, 3, 1]: each value < 32 is one char chr(v + 48).
    assert rle_counts(b"231") == [2, 3, 1]
    assert decode_rle({"size": [6, 1], "counts": [2, 3, 1]}).tolist() == [False, False, True, True, True, False]
    with pytest.raises(ValueError, match="sum to 6 for size"):
        decode_rle({"size": [7, 1], "counts": [2, 3, 1]})


def test_rle_decoding_matches_pycocotools() -> None:
    mask_utils = pytest.importorskip("pycocotools.mask")
    rng = np.random.default_rng(4)
    volume = rng.random((3, 9, 11)) > 0.7
    volume[1] = False
    rle = mask_utils.encode(np.asfortranarray(volume.reshape(-1, 1).astype(np.uint8)))  # the evaluator's layout
    assert isinstance(rle["counts"], bytes) and max(rle_counts(rle["counts"])) > 31       # multi-char numbers
    np.testing.assert_array_equal(decode_rle(rle).reshape(volume.shape), volume)
    np.testing.assert_array_equal(decode_rle(rle), mask_utils.decode(rle).astype(bool).reshape(-1))


def test_sam_pickles_load_as_plain_data_only(tmp_path: Path) -> None:
    mask_utils = pytest.importorskip("pycocotools.mask")
    volume = np.zeros((2, 4, 5), bool)
    volume[:, 1:3, 1:4] = True
    rle = mask_utils.encode(np.asfortranarray(volume.reshape(-1, 1).astype(np.uint8)))
    items = [{"phrase": "cup", "segmentation_mask_rle": {"data": rle, "mask_shape": (2, 4, 5)}},
             {"phrase": "", "segmentation_mask_rle": {"data": rle, "mask_shape": (2, 4, 5)}}]
    good = tmp_path / "task_0000.pkl"
    good.write_bytes(pickle.dumps(items))
    [det] = load_sam_detections(good)
    assert det.phrase == "cup"
    np.testing.assert_array_equal(det.mask, volume)
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(pickle.dumps([Path("/etc/passwd")]))
    with pytest.raises(ValueError, match="refusing to load"):
        load_sam_detections(evil)


# ------------------------------------------------------------------------------------ one task, videos


def test_score_task_decodes_once_and_matches_the_kernels(tmp_path: Path) -> None:
    gt_frames = clip(6, seed=1)
    pred_frames = np.clip(clip(8, seed=1, height=36, width=48).astype(int) + 9, 0, 255).astype(np.uint8)
    gt = write_video(tmp_path / "gt.mp4", gt_frames, 30, codec="mpeg4")
    pred = write_video(tmp_path / "pred.mp4", pred_frames, 30, codec="mpeg4")
    result = score_task(gt, {"edge": pred, "blur": pred})
    from pinbench.media.video import read_video

    g = read_video(gt, backend="opencv").frames
    p = align_pred_to_gt(read_video(pred, backend="opencv").frames, g)
    scores = edge_scores(canny_edges(p), canny_edges(g))
    assert result["edge/native/canny_f1_score"] == scores.f1
    assert result["blur/native/blur_ssim"] == blurred_ssim(bilateral_blur(p), bilateral_blur(g))
    assert result["native_errors"] == {}
    assert 0 < result["edge/native/canny_f1_score"] < 1


def test_a_canny_exception_names_its_video_under_the_run_and_the_reason(tmp_path: Path) -> None:
    """The cross-check recorded "prediction edge map has no edge pixel; F1 is undefined" alone: no video named."""
    gt = write_video(tmp_path / "gt.mp4", clip(6, seed=1), 30, codec="mpeg4")
    (tmp_path / "run" / "edge" / "videos").mkdir(parents=True)
    flat = write_video(tmp_path / "run" / "edge" / "videos" / "t1.mp4", np.full((6, 32, 32, 3), 90, np.uint8), 30,
                       codec="mpeg4")
    result = score_task(gt, {"edge": flat}, run_dir=tmp_path / "run")
    assert result["edge/native/canny_f1_score"] is None
    assert result["native_errors"] == {"edge/canny": "Canny raised on edge/videos/t1.mp4: DegenerateEdgeMapError "
                                                     "(prediction edge map has no edge pixel; F1 is undefined)"}


def test_the_gt_is_blurred_once_for_all_modalities_and_each_prediction_once(tmp_path: Path, monkeypatch) -> None:
    from pinbench_recipes.paibench_c import native_metrics

    gt = write_video(tmp_path / "gt.mp4", clip(5, seed=2), 30, codec="mpeg4")
    preds = {}
    for i, modality in enumerate(("edge", "blur", "depth")):
        frames = np.clip(clip(5, seed=2).astype(int) + 3 * (i + 1), 0, 255).astype(np.uint8)
        preds[modality] = write_video(tmp_path / f"{modality}.mp4", frames, 30, codec="mpeg4")
    from pinbench_recipes.paibench_c import blur as blur_module

    blurred: list[np.ndarray] = []

    def counting_blur(frames: np.ndarray) -> np.ndarray:
        blurred.append(frames)
        return bilateral_blur(frames)

    monkeypatch.setattr(native_metrics, "bilateral_blur", counting_blur)
    monkeypatch.setattr(blur_module, "bilateral_blur", counting_blur)   # a prediction's frames, as they decode
    result = score_task(gt, preds)
    assert [len(f) for f in blurred] == [5] + [1] * 15   # the GT once, then each prediction frame once
    values = [result[f"{m}/native/blur_ssim"] for m in preds]
    assert all(v < 1.0 for v in values) and len(set(values)) == 3


def test_the_prediction_aligned_is_the_file_checked(tmp_path: Path, monkeypatch) -> None:
    """Its frames were checked (video_info) and then decoded again by the path: a FIFO put there in between was what
    was decoded. They are decoded from the descriptor that was checked."""
    from pinbench_recipes.paibench_c import native_metrics

    pred = write_video(tmp_path / "pred.mp4", clip(5, seed=2), 30, codec="mpeg4")
    want = read_video(pred, backend="pyav").frames
    monkeypatch.setattr(native_metrics, "video_info", check_then_swap(native_metrics.video_info, pred))
    got = within(10, pred, lambda: np.stack(list(native_metrics._aligned_frames(pred, want.shape, "pyav"))))
    assert np.array_equal(got, want)
