"""``--fixture``: the synthetic data a CPU run works on, and the test doubles run.py drives in the GPU stack's place.

``run.py`` runs its real procedure on this data (rows, resume by validity, byte-exact collection, the GT cache,
metrics.json parsing with counts, the native cross-check, the scorecard, the diff against
``references/fixture.yaml``, the report). What is replaced, by clearly named test doubles (no GPU, no weights):

* :class:`PerturbedCopyGenerator` stands in for cosmos-framework: it writes a perturbed, upscaled copy of
  each row's GT video (``vision_path``) where the framework would write ``vision.mp4``;
* :class:`EvaluatorDouble` stands in for the evaluator's ``compute_metrics.py calculate-metrics``, with the
  evaluator's inputs and outputs; inside it
* :class:`LumaDepthDouble` stands in for Video-Depth-Anything (depth from luminance) and
* :class:`ColorKeySegDouble` for GroundingDINO + SAM2 (one object per known colour).
"""

from __future__ import annotations

import io
import json
import math
import pickle
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from pinbench.core.files import write_atomic
from pinbench.core.fixture_data import build_once
from pinbench.core.generation import Capabilities, Request, Signature
from pinbench.media.video import read_video, write_video
from pinbench_recipes.paibench_c.edges import DegenerateEdgeMapError
from pinbench_recipes.paibench_c.fetch import Inputs
from pinbench_recipes.paibench_c.metrics_json import CANNY_METRICS, task_id_of
from pinbench_recipes.paibench_c.native_metrics import (
    DECODE_BACKEND,
    MAX_FRAMES,
    SegDetection,
    align_pred_to_gt,
    depth_si_rmse,
    load_sam_detections,
    seg_miou_recall,
)
from pinbench_recipes.paibench_c.rows import load_tasks, select_tasks

FIXTURE_VERSION = 1          # bump when the synthetic data changes (the reference must be re-recorded)
N_TASKS = 4
N_FRAMES = 9
GT_SIZE = (48, 64)           # (H, W): GT is smaller than the prediction, as 480p GT vs 720p output
PRED_SIZE = (72, 96)
FPS = 30
SEED = 2025
# libx264 through PyAV with automatic threading was seen to give different bytes for the same frames
# (about one run in three); the fixture must be bit-reproducible, so it writes MPEG-4 Part 2.
FIXTURE_CODEC = "mpeg4"
# What the evaluator double reports: the evaluator's metrics but DOVER (no stand-in for it).
FIXTURE_METRICS = ("canny_f1_score", "canny_precision", "canny_recall", "blur_ssim", "depth_si_rmse",
                   "seg_m_iou", "seg_recall")
# Saturated colours the segmentation double keys on; the background never reaches them.
OBJECTS = {"red box": (220, 30, 30), "blue disk": (30, 40, 220), "green bar": (30, 200, 60)}
# Perturbation per modality: (noise sigma, pixel shift, gain). Different strengths give distinct scores.
PERTURBATION = {"edge": (4.0, 0, 1.0), "blur": (7.0, 1, 0.95), "depth": (10.0, 1, 1.05), "seg": (14.0, 2, 0.9)}


# ------------------------------------------------------------------------------------- synthetic data


def _gt_frames(index: int) -> np.ndarray:
    """Deterministic GT clip: textured gradient background with three moving coloured objects."""
    rng = np.random.default_rng(SEED + index)
    height, width = GT_SIZE
    yy, xx = np.mgrid[0:height, 0:width]
    base = 90 + 40 * (xx / width) + 20 * (yy / height) + rng.normal(0, 6, (height, width))
    frames = []
    for t in range(N_FRAMES):
        frame = np.repeat(np.clip(base + 3 * t, 0, 255)[..., None], 3, axis=2).astype(np.uint8)
        x0 = 6 + 2 * t + 3 * index
        cv2.rectangle(frame, (x0, 8), (x0 + 12, 20), OBJECTS["red box"], -1)
        cv2.circle(frame, (44 - t, 30 + index), 6, OBJECTS["blue disk"], -1)
        cv2.rectangle(frame, (10, 36 - (t % 3)), (30 + index, 40 - (t % 3)), OBJECTS["green bar"], -1)
        frames.append(frame)
    return np.stack(frames)


def _task_row(index: int) -> dict[str, Any]:
    task = f"task_{index:04d}"
    prompt = json.dumps({"subjects": [{"description": name} for name in OBJECTS], "fixture": index})
    return {"task_id": task, "video_path": f"videos/{task}.mp4", "canny_path": f"canny/{task}.mp4",
            "blur_path": f"blur/{task}.mp4", "depth_path": f"depth_vids/{task}.mp4",
            "seg_path": f"sam2_vids/{task}.mp4", "negative_prompt": json.dumps({"quality": "low"}),
            "aspect_ratio": "4,3", "fps": FPS, "seed": SEED, "prompt": prompt}


def build_fixture_dataset(root: Path) -> Path:
    """The synthetic dataset (real layout) and its tasks.json under ``root``, written once per fixture version
    (``build_once``: the shards of a job array of fixture runs on one ``--out`` write it once); the dataset dir."""
    build_once(root, FIXTURE_VERSION, _write_dataset)
    return root / "dataset"


def _write_dataset(root: Path) -> dict[str, int]:
    """Every file of the synthetic dataset and tasks.json under ``root`` (deterministic)."""
    from pinbench_recipes.paibench_c.blur import bilateral_blur
    from pinbench_recipes.paibench_c.edges import canny_edges

    dataset = root / "dataset"
    rows = [_task_row(i) for i in range(N_TASKS)]
    for i, row in enumerate(rows):
        frames = _gt_frames(i)
        write_video(dataset / row["video_path"], frames, FPS, codec=FIXTURE_CODEC)
        edges = canny_edges(frames)
        write_video(dataset / row["canny_path"], np.repeat(edges[..., None], 3, axis=3), FPS, codec=FIXTURE_CODEC)
        write_video(dataset / row["blur_path"], bilateral_blur(frames), FPS, codec=FIXTURE_CODEC)
        depth = LumaDepthDouble()(frames)
        depth_u8 = np.clip(depth / depth.max() * 255, 0, 255).astype(np.uint8)
        write_video(dataset / row["depth_path"], np.repeat(depth_u8[..., None], 3, axis=3), FPS, codec=FIXTURE_CODEC)
        seg_vis = np.zeros_like(frames)
        for det in ColorKeySegDouble()(frames):
            seg_vis[det.mask] = OBJECTS[det.phrase]
        write_video(dataset / row["seg_path"], seg_vis, FPS, codec=FIXTURE_CODEC)
        caption = dataset / "captions" / f"{row['task_id']}.json"
        write_atomic(caption, json.dumps({row["task_id"]: "a red box, a blue disk and a green bar"}))
    write_atomic(root / "tasks.json", json.dumps(rows, indent=1))
    return {"seed": SEED}


def fixture_inputs(root: Path, limit: int | None) -> Inputs:
    """The fixture's counterpart of ``fetch.locate_inputs``: its dataset and task list, written if missing."""
    dataset = build_fixture_dataset(root)
    tasks_json = root / "tasks.json"
    return Inputs(tasks_json=tasks_json, tasks=select_tasks(load_tasks(tasks_json), limit), dataset_dir=dataset,
                  checkpoint_dir=None)


# ------------------------------------------------------------------------------------- test doubles


class PerturbedCopyGenerator:
    """TEST DOUBLE for Cosmos3: a noisy, shifted, upscaled copy of the request's GT video (its context)."""

    name = "perturbed-copy test double"
    capabilities = Capabilities(kinds=frozenset({"control-video"}), conditioning=frozenset({"context", "control"}))

    def describe(self) -> dict[str, Any]:
        return {"generator": self.name, "perturbation": PERTURBATION, "size": PRED_SIZE}

    def signature(self) -> Signature:
        return Signature(model=self.name, weights="none", settings=self.describe())

    def generate(self, request: Request, out: Path) -> None:
        modality, task = request.settings["modality"], request.settings["row"]["name"]
        sigma, shift, gain = PERTURBATION[modality]
        rng = np.random.default_rng(zlib.crc32(f"{task}/{modality}".encode()))
        gt = read_video(request.path("context"), backend=DECODE_BACKEND).frames.astype(np.float64)
        moved = np.roll(gt, shift, axis=2) * gain + rng.normal(0, sigma, gt.shape)
        frames = np.clip(moved, 0, 255).astype(np.uint8)
        frames = np.stack([cv2.resize(f, PRED_SIZE[::-1], interpolation=cv2.INTER_LINEAR) for f in frames])
        write_video(out, frames, request.fps, codec=FIXTURE_CODEC)


class LumaDepthDouble:
    """TEST DOUBLE for Video-Depth-Anything: relative depth from luminance, strictly positive."""

    def __call__(self, frames: np.ndarray) -> np.ndarray:
        luma = np.stack([cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in frames]).astype(np.float64)
        return 1.0 + 9.0 * (1.0 - luma / 255.0)


class ColorKeySegDouble:
    """TEST DOUBLE for GroundingDINO + SAM2: one detection per known object colour present in frame 0."""

    tolerance = 60

    def __call__(self, frames: np.ndarray) -> list[SegDetection]:
        detections = []
        for phrase, colour in OBJECTS.items():
            distance = np.abs(frames.astype(np.int16) - np.array(colour, np.int16)).max(axis=3)
            mask = distance < self.tolerance
            if mask[0].sum() > 10:   # the evaluator drops frame-0 masks of <= 10 pixels
                detections.append(SegDetection(phrase, mask))
        return detections


class EvaluatorDouble:
    """TEST DOUBLE for the evaluator's ``compute_metrics.py calculate-metrics`` (GPU models), on CPU.

    It keeps the evaluator's contract (spec sections 1.2-1.5), so run.py scores with it as with the real one:
    every ``<videos_parent>/videos/*.mp4`` against ``<gt_dir>/videos/<id>.mp4``, both decoded with OpenCV; the
    GT seg (``sam2_pkls/``) and depth (``depth_npzs/``) computed into ``gt_dir`` when forced or missing and read
    from there otherwise; each prediction's masks written to ``<videos_parent>/segmentation/<name>.pkl``; and
    ``metrics.json`` with ``global`` and ``per_video``. Canny and blur SSIM are the recipe's own code, depth
    comes from :class:`LumaDepthDouble`, masks from :class:`ColorKeySegDouble`. It has no DOVER: it reports
    :data:`FIXTURE_METRICS`.
    """

    name = "evaluator test double (native Canny and blur SSIM, LumaDepthDouble, ColorKeySegDouble; no DOVER)"
    commit = f"fixture-evaluator-{FIXTURE_VERSION}"
    metrics = FIXTURE_METRICS

    def describe(self) -> dict[str, Any]:
        return {"evaluator": self.name, "commit": self.commit}

    def calculate_metrics(self, *, modality_dir: Path, videos_parent: Path, gt_dir: Path, output: Path,
                          task_ids: Sequence[str], gpu_ids: Sequence[str], force_gt: bool,
                          batch_size: int | None) -> list[str]:
        per_video = []
        for video in sorted((videos_parent / "videos").glob("*.mp4")):
            task = task_id_of(video.name)
            if not (gt_dir / "videos" / f"{task}.mp4").is_file():
                continue  # the evaluator logs a prediction without GT and skips it
            gt = _decode(gt_dir / "videos" / f"{task}.mp4")
            seg_file, depth_file = gt_dir / "sam2_pkls" / f"{task}.pkl", gt_dir / "depth_npzs" / f"{task}.npz"
            if force_gt or not seg_file.is_file():
                write_detections(seg_file, ColorKeySegDouble()(gt))
            if force_gt or not depth_file.is_file():
                _write_npz(depth_file, LumaDepthDouble()(gt))
            pred = _decode(video)
            pred_seg = ColorKeySegDouble()(pred)
            write_detections(videos_parent / "segmentation" / f"{video.stem}.pkl", pred_seg)
            with np.load(depth_file) as depth:
                values, canny_error = video_metrics(gt, pred, gt_depth=depth["data"],
                                                    gt_seg=load_sam_detections(seg_file), pred_seg=pred_seg)
            if canny_error is not None:   # as the evaluator's canny step: its line in the log, the video kept
                with open(modality_dir / "evaluator.log", "a", encoding="utf-8") as log:
                    log.write(f"Got exception {video.name}: {canny_error} for compute_canny_error_video_f1\n")
            per_video.append({"pred_video_uuid": video.stem, **values})
        means: dict[str, float | None] = {}
        for metric in self.metrics:   # as the evaluator's global (a pandas mean): None skipped
            found = [v[metric] for v in per_video if v[metric] is not None]
            means[metric] = math.fsum(found) / len(found) if found else None
        output.write_text(json.dumps({"global": means, "per_video": per_video}, indent=4), encoding="utf-8")
        return [type(self).__name__, "--videos_path", str(videos_parent), "--gt_path", str(gt_dir),
                "--output_path", str(output), f"--{'' if force_gt else 'no_'}force_recompute_gt"]


def video_metrics(gt: np.ndarray, pred_native: np.ndarray, *, gt_depth: np.ndarray, gt_seg: Sequence[SegDetection],
                  pred_seg: Sequence[SegDetection]) -> tuple[dict[str, float | None], str | None]:
    """The fixture metrics of one GT / prediction pair, in the evaluator's order of operations, and why the Canny
    ones are null: like the evaluator's canny step, a degenerate edge map (a uniform-colour rollout) nulls those
    three and keeps the rest (the double had dropped the video, and every metric failed without a reason)."""
    from pinbench_recipes.paibench_c.blur import bilateral_blur, blurred_ssim
    from pinbench_recipes.paibench_c.edges import canny_edges, edge_scores

    pred = align_pred_to_gt(pred_native, gt)
    try:
        edges = edge_scores(canny_edges(pred), canny_edges(gt))
        canny, error = [edges.f1, edges.precision, edges.recall], None
    except DegenerateEdgeMapError as exc:
        canny, error = [None, None, None], f"{type(exc).__name__} ({exc})"
    ssim = blurred_ssim(bilateral_blur(pred), bilateral_blur(gt))
    m_iou, recall = seg_miou_recall(gt_seg, pred_seg, max_frames=len(gt))
    values = {**dict(zip(CANNY_METRICS, canny, strict=True)),
              "blur_ssim": ssim if math.isfinite(ssim) else None,
              "depth_si_rmse": depth_si_rmse(LumaDepthDouble()(pred_native), gt_depth), "seg_m_iou": m_iou,
              "seg_recall": recall}
    return {k: None if v is None else float(v) for k, v in values.items()}, error


def _decode(path: Path) -> np.ndarray:
    return read_video(path, max_frames=MAX_FRAMES, backend=DECODE_BACKEND).frames


def write_detections(path: Path, detections: Sequence[SegDetection]) -> None:
    """Masks in the evaluator's pickle layout: a list of phrase + RLE of the (T, H, W) mask (plain data only)."""
    items = []
    for det in detections:
        flat = det.mask.reshape(-1)
        bounds = np.concatenate([[0], np.flatnonzero(flat[1:] != flat[:-1]) + 1, [flat.size]])
        runs = ([0] if flat[0] else []) + np.diff(bounds).tolist()   # runs alternate, background first
        items.append({"phrase": det.phrase, "segmentation_mask_rle": {
            "data": {"size": [flat.size, 1], "counts": runs}, "mask_shape": list(det.mask.shape)}})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(items))


def _write_npz(path: Path, data: np.ndarray) -> None:
    """``np.savez`` with key ``data`` (the evaluator's layout), but with a fixed zip date: the same bytes each run."""
    buffer = io.BytesIO()
    np.save(buffer, data)
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(zipfile.ZipInfo("data.npy"), buffer.getvalue())
