"""PAI-Bench-C metric arithmetic on CPU, with the evaluator fork's exact semantics (spec sections 1.5, 2.1-2.4).

Why: the evaluator's model-free steps (Canny F1, blur SSIM) and the arithmetic behind its model-based
ones (depth si-RMSE from depth maps, segmentation mIoU / recall from masks) can be recomputed without a
GPU. Every run reports them beside the evaluator's numbers as a cross-check, and the fixture mode scores
with them end to end. Canny and blur kernels live in ``pinbench.media``; this module adds the
evaluator's pipeline around them (decode, resize rule, frame alignment) and the recipe-only metrics.
"""

from __future__ import annotations

import io
import math
import pickle
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from scipy.optimize import linear_sum_assignment

from pinbench.core.files import sha256_file
from pinbench.core.inputs import InputKey
from pinbench.core.task import Task
from pinbench.media.video import iter_frames, opened_video, read_ahead, read_video, video_info
from pinbench_recipes.paibench_c.blur import bilateral_blur, blurred_ssim_of_frames
from pinbench_recipes.paibench_c.edges import canny_edges, edge_scores
from pinbench_recipes.paibench_c.metrics_json import CANNY_METRICS

MAX_FRAMES = 121
DEPTH_ERROR_CAP = 10.0
SEG_IOU_THRESHOLD = 0.1
# The evaluator fork decodes every video with cv2.VideoCapture (its decord.py shim), so the
# cross-check does too.
DECODE_BACKEND = "opencv"


class SegmentationError(ValueError):
    """Masks the evaluator cannot score (it would crash on them); the sample is failed, not invented."""


# ------------------------------------------------------------------------------------ ground truth


@dataclass(frozen=True)
class GroundTruth:
    """A task's GT frames with what every modality is compared against, computed once for all of them.

    The bilateral blur is the cross-check's main cost (the evaluator's d=30 filter: about 0.4 s a
    1280x704 frame on two cores, tools/bench_kernels.py), so neither it nor the GT's Canny maps are
    recomputed per modality.
    """

    frames: np.ndarray
    edges: np.ndarray
    blur: np.ndarray

    @classmethod
    def from_frames(cls, frames: np.ndarray) -> GroundTruth:
        return cls(frames, canny_edges(frames), bilateral_blur(frames))


# ------------------------------------------------------------------------------------ frame alignment


def align_pred_to_gt(pred: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """The evaluator's pred resize: cut to the GT frame count, then resize to the GT size if T/H/W differ.

    Bilinear when the GT is taller than the prediction (upsampling), area otherwise. Only heights are
    compared, as upstream does.
    """
    n_gt = gt.shape[0]
    if pred.shape[0] > n_gt:
        pred = pred[:n_gt]
    if gt.shape[:3] == pred.shape[:3]:
        return pred
    height, width = gt.shape[1], gt.shape[2]
    interpolation = cv2.INTER_LINEAR if height > pred.shape[1] else cv2.INTER_AREA
    return np.stack([cv2.resize(f, (width, height), interpolation=interpolation) for f in pred])


def _aligned_frames(path: Path, gt_shape: tuple[int, ...], decoder: str) -> Iterator[np.ndarray]:
    """``align_pred_to_gt(read_video(path, max_frames=MAX_FRAMES).frames, gt)`` one frame at a time."""
    with opened_video(path) as fd:  # one open: the file checked is the file decoded
        info = video_info(path, fd=fd)
        n = min(info.n_frames, MAX_FRAMES, gt_shape[0])
        height, width = gt_shape[1], gt_shape[2]
        same = (n, info.height, info.width) == tuple(gt_shape[:3])
        interpolation = cv2.INTER_LINEAR if height > info.height else cv2.INTER_AREA
        frames = iter_frames(path, backend=decoder, fd=fd)
        try:
            for _, frame in zip(range(n), frames, strict=False):
                yield frame if same else cv2.resize(frame, (width, height), interpolation=interpolation)
        finally:
            frames.close()


def _kept(frames: Iterable[np.ndarray], kept: list[np.ndarray]) -> Iterator[np.ndarray]:
    """``frames``, each also appended to ``kept`` (the prediction's Canny maps need them all)."""
    for frame in frames:
        kept.append(frame)
        yield frame


# ----------------------------------------------------------------------------------------- depth


def depth_si_rmse(pred_depth: np.ndarray, gt_depth: np.ndarray,
                  per_pixel_error_cap: float | None = DEPTH_ERROR_CAP) -> float:
    """Scale-invariant RMSE of (T, H, W) depth maps, lower is better (fork semantics).

    Frames are aligned (GT cut to the prediction's length), the prediction is resized to the GT size
    (area when shrinking, bilinear when growing), and per frame the prediction is scaled by
    median(gt) / median(pred) over pixels valid in both (> 0); residuals are clipped to +-cap before
    squaring. The video value is the mean over all frames; a frame without valid pixels counts as 0.
    """
    pred = np.asarray(pred_depth, dtype=np.float64)
    gt = np.asarray(gt_depth, dtype=np.float64)
    if pred.ndim != 3 or gt.ndim != 3:
        raise ValueError(f"depth maps must be (T, H, W), got {pred.shape} and {gt.shape}")
    n_frames, height, width = gt.shape
    if n_frames > pred.shape[0]:
        n_frames = pred.shape[0]
        gt = gt[:n_frames]
    if gt.shape != pred.shape:
        interpolation = cv2.INTER_AREA if pred.shape[1] > height else cv2.INTER_LINEAR
        pred = np.stack([cv2.resize(f, (width, height), interpolation=interpolation) for f in pred])[:n_frames]
    valid = (gt > 0) & (pred > 0)
    if not valid.any():
        return 0.0
    frame_rmse = np.zeros(pred.shape[0])
    for t in range(pred.shape[0]):
        if not valid[t].any():
            continue
        p, g = pred[t][valid[t]], gt[t][valid[t]]
        residual = g - p * (np.median(g) / np.median(p))
        if per_pixel_error_cap is not None:
            residual = np.clip(residual, -per_pixel_error_cap, per_pixel_error_cap)
        frame_rmse[t] = np.sqrt(np.mean(residual ** 2))
    return float(np.mean(frame_rmse))


# ---------------------------------------------------------------------------------- segmentation


@dataclass(frozen=True)
class SegDetection:
    """One tracked object: its GroundingDINO phrase and its (T, H, W) boolean mask."""

    phrase: str
    mask: np.ndarray


def instance_map(detections: Sequence[SegDetection], max_frames: int) -> np.ndarray:
    """(max_frames, H, W) uint8 map, object i written as i + 1 in order (later objects overwrite)."""
    if len(detections) > 255:
        raise SegmentationError(f"{len(detections)} objects overflow the evaluator's uint8 instance map")
    shape = detections[0].mask.shape
    if max_frames > shape[0]:
        raise SegmentationError(f"masks have {shape[0]} frames, fewer than the {max_frames} GT frames "
                                "(the evaluator asserts here)")
    out = np.zeros((max_frames, *shape[1:]), np.uint8)
    for i, det in enumerate(detections):
        if det.mask.shape != shape:
            raise SegmentationError(f"mask {i} is {det.mask.shape}, the first mask is {shape}")
        out[det.mask[:max_frames]] = i + 1
    return out


def _phrase_unions(detections: Sequence[SegDetection], instances: np.ndarray) -> list[np.ndarray]:
    """One boolean volume per phrase (first-appearance order): union of its objects' instance ids."""
    groups: dict[str, list[int]] = {}
    for i, det in enumerate(detections):
        groups.setdefault(det.phrase, []).append(i + 1)
    return [np.isin(instances, ids) for ids in groups.values()]


def iou_matrix(gt_masks: Sequence[np.ndarray], pred_masks: Sequence[np.ndarray]) -> np.ndarray:
    """Volume IoU of every GT x pred pair, in float32 like the evaluator's torch code."""
    out = np.zeros((len(gt_masks), len(pred_masks)), np.float32)
    for i, a in enumerate(gt_masks):
        for j, b in enumerate(pred_masks):
            union = np.float32(np.count_nonzero(a | b))
            if union != 0:
                out[i, j] = np.float32(np.count_nonzero(a & b)) / union
    return out


def seg_miou_recall(gt: Sequence[SegDetection], pred: Sequence[SegDetection], *, max_frames: int,
                    threshold: float = SEG_IOU_THRESHOLD) -> tuple[float, float]:
    """(mIoU, recall) with the evaluator's matching: phrase unions, Hungarian, IoU > threshold.

    No detection on either side gives (0.0, 0.0), which counts. mIoU averages the matched IoUs above
    the threshold; recall divides their number by the number of matched pairs, min(#GT, #pred) phrases.
    """
    if not gt or not pred:
        return 0.0, 0.0
    gt_inst = instance_map(gt, max_frames)
    pred_inst = instance_map(pred, max_frames)
    height, width = gt_inst.shape[1:]
    if pred_inst.shape[1:] != gt_inst.shape[1:]:
        pred_inst = np.stack([cv2.resize(f, (width, height), interpolation=cv2.INTER_NEAREST) for f in pred_inst])
    if pred_inst.shape[0] < gt_inst.shape[0]:
        gt_inst = gt_inst[: pred_inst.shape[0]]
    gt_masks = [m for m in _phrase_unions(gt, gt_inst) if m.any()]
    pred_masks = [m for m in _phrase_unions(pred, pred_inst) if m.any()]
    if not gt_masks or not pred_masks:
        side = "ground truth" if not gt_masks else "prediction"
        raise SegmentationError(f"every {side} phrase mask is empty (the evaluator crashes on this)")
    ious = iou_matrix(gt_masks, pred_masks)
    rows, cols = linear_sum_assignment(1.0 - ious)
    matched = ious[rows, cols]
    if matched.size == 0:
        return 0.0, 0.0
    kept = [x for x in matched if x > threshold]
    m_iou = float(np.mean(kept)) if kept else 0.0
    return m_iou, len(kept) / len(matched)


# --------------------------------------------------- the evaluator's segmentation pickles (read safely)


class _PlainDataUnpickler(pickle.Unpickler):
    """Unpickles only plain data (dict, list, tuple, str, bytes, numbers): no class can be loaded."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: only plain data is accepted")


def rle_counts(counts: bytes | str | Sequence[int]) -> list[int]:
    """Run lengths of a COCO RLE (compressed string form, or already a list)."""
    if isinstance(counts, (list, tuple)):
        return [int(c) for c in counts]
    data = counts.encode("ascii") if isinstance(counts, str) else bytes(counts)
    runs: list[int] = []
    pos = 0
    while pos < len(data):
        value, shift, more = 0, 0, True
        while more:
            if pos >= len(data):
                raise ValueError("RLE string ends inside a number")
            chunk = data[pos] - 48
            value |= (chunk & 0x1F) << shift
            more = bool(chunk & 0x20)
            pos += 1
            shift += 5
            if not more and chunk & 0x10:
                value |= -1 << shift
        if len(runs) > 2:
            value += runs[-2]
        runs.append(value)
    return runs


def decode_rle(rle: Mapping[str, Any]) -> np.ndarray:
    """Flat boolean mask of a COCO RLE; runs alternate background / foreground, background first."""
    size = [int(s) for s in rle["size"]]
    runs = rle_counts(rle["counts"])
    if any(r < 0 for r in runs) or sum(runs) != math.prod(size):
        raise ValueError(f"RLE runs sum to {sum(runs)} for size {size}")
    return np.repeat(np.arange(len(runs)) % 2 == 1, runs)


def load_sam_detections(path: Path | str) -> list[SegDetection]:
    """The evaluator's ``segmentation/*.pkl`` / ``sam2_pkls/*.pkl``: phrase + RLE of a (T, H, W) mask."""
    path = Path(path)
    try:
        data = _PlainDataUnpickler(io.BytesIO(path.read_bytes())).load()  # noqa: S301 (classes refused)
    except FileNotFoundError:
        raise ValueError(f"{path}: file not found") from None
    except (pickle.UnpicklingError, EOFError, ValueError) as exc:
        raise ValueError(f"{path}: not a plain-data segmentation pickle: {exc}") from None
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of detections, got {type(data).__name__}")
    detections = []
    for i, item in enumerate(data):
        try:
            rle = item["segmentation_mask_rle"]
            shape = tuple(int(s) for s in rle["mask_shape"])
            mask = decode_rle(rle["data"]).reshape(shape)
            phrase = item["phrase"]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: detection {i}: {exc}") from None
        if phrase:  # the evaluator drops empty phrases before saving; be as strict on reload
            detections.append(SegDetection(str(phrase), mask))
    return detections


# ------------------------------------------------------------------------------ one task, real run


def _native_key(modality: str, metric: str) -> str:
    return f"{modality}/native/{metric}"


def score_task(gt_video: Path, preds: Mapping[str, Path], *,
               seg_pkls: Mapping[str, tuple[Path, Path]] | None = None,
               decoder: str = DECODE_BACKEND, run_dir: Path | None = None) -> dict[str, Any]:
    """Native metrics of one task for every modality given, decoding, edge-mapping and blurring the GT once.

    ``preds`` maps modality -> generated video; ``seg_pkls`` maps modality -> (GT pkl, pred pkl) written
    by the evaluator. A metric that cannot be computed is None with its reason under ``native_errors``; a Canny
    failure names its video (under ``run_dir`` when given), as the evaluator's Canny failures do.
    """
    gt = GroundTruth.from_frames(read_video(gt_video, max_frames=MAX_FRAMES, backend=decoder).frames)
    result: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for modality, pred_path in preds.items():
        aligned: list[np.ndarray] = []
        ssim = blurred_ssim_of_frames(_kept(read_ahead(_aligned_frames(pred_path, gt.frames.shape, decoder)),
                                            aligned), gt.blur)  # each frame blurred and scored as it decodes
        pred = np.stack(aligned)
        try:
            scores = edge_scores(canny_edges(pred), gt.edges)
            result.update({_native_key(modality, "canny_f1_score"): scores.f1,
                           _native_key(modality, "canny_precision"): scores.precision,
                           _native_key(modality, "canny_recall"): scores.recall})
        except ValueError as exc:
            for metric in CANNY_METRICS:
                result[_native_key(modality, metric)] = None
            video = pred_path.relative_to(run_dir) if run_dir is not None else pred_path
            errors[f"{modality}/canny"] = f"Canny raised on {video}: {type(exc).__name__} ({exc})"
        result[_native_key(modality, "blur_ssim")] = ssim if math.isfinite(ssim) else None
        if not math.isfinite(ssim):
            errors[f"{modality}/blur"] = "SSIM is not finite (a constant blurred GT frame has data range 0)"
    for modality, (gt_pkl, pred_pkl) in (seg_pkls or {}).items():
        try:
            m_iou, recall = seg_miou_recall(load_sam_detections(gt_pkl), load_sam_detections(pred_pkl),
                                            max_frames=len(gt.frames))
        except ValueError as exc:
            m_iou = recall = None
            errors[f"{modality}/seg"] = str(exc)
        result[_native_key(modality, "seg_m_iou")] = m_iou
        result[_native_key(modality, "seg_recall")] = recall
    result["native_errors"] = errors
    return result


def seg_pkls(task_id: str, modality: str, *, gt_dir: Path, run_dir: Path) -> tuple[Path, Path]:
    """Where the evaluator leaves one task's GT masks (in its ``--gt_path``) and a modality's predicted masks."""
    return gt_dir / "sam2_pkls" / f"{task_id}.pkl", run_dir / modality / "segmentation" / f"{task_id}.pkl"


@dataclass(frozen=True, slots=True, kw_only=True)
class NativeTask(Task):
    """One task's native cross-check. Files are relative (the GT video under the dataset folder, predictions under
    the run directory), so the task names no location, and keyed by their bytes; the GT masks by their bytes, not
    their folder: its name is the evaluator build's key, which differs between the host and an image running the
    same code on the same data."""

    gt_video: InputKey
    preds: dict[str, str]              # modality -> generated video under the run directory
    pred_sha256: dict[str, str]
    native_version: int
    decoder: str = DECODE_BACKEND
    seg_sha256: dict[str, list[str]]   # modality -> SHA-256 of [GT pkl, predicted pkl]


def native_sample(task: NativeTask, *, dataset_dir: Path, run_dir: Path, gt_dir: Path) -> dict[str, Any]:
    """Runner fn: the task's native values; the masks are read from :func:`seg_pkls` and must still have the bytes
    the task was keyed by."""
    seg = {}
    for modality, digests in task.seg_sha256.items():
        pkls = seg_pkls(task.sample_id, modality, gt_dir=gt_dir, run_dir=run_dir)
        for pkl, digest in zip(pkls, digests, strict=True):
            if sha256_file(pkl) != digest:
                raise ValueError(f"{pkl}: changed since the run read it (SHA-256 {digest[:12]}... then); run again")
        seg[modality] = pkls
    return score_task(dataset_dir / task.gt_video.path, {m: run_dir / p for m, p in task.preds.items()},
                      seg_pkls=seg, decoder=task.decoder, run_dir=run_dir)
