"""``--fixture``: the whole recipe on CPU, on a small synthetic dataset in the real layout.

What is real here: the task list schema and loader, the input rows, resume-by-validity and byte-exact
collection, frame alignment and the resize rules, Canny F1, blur SSIM, the si-RMSE and mIoU / recall
arithmetic, the scorecard, the diff against ``references/fixture.yaml`` and the report.

What is replaced, by clearly named test doubles (no GPU, no weights):
* :class:`PerturbedCopyGenerator` stands in for cosmos-framework: it writes a perturbed, upscaled copy of
  each row's GT video (``vision_path``) where the framework would write ``vision.mp4``;
* :class:`LumaDepthDouble` stands in for Video-Depth-Anything (depth from luminance);
* :class:`ColorKeySegDouble` stands in for GroundingDINO + SAM2 (one object per known colour).

A GT-versus-GT sanity pass scores every GT video against itself and must give Canny F1 1, SSIM 1,
si-RMSE 0, mIoU 1 and recall 1; otherwise the run fails.
"""

from __future__ import annotations

import json
import math
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from pinbench.core.config import RunConfig, RunOutcome
from pinbench.core.files import write_atomic
from pinbench.core.inputs import input_digests
from pinbench.core.recipe import get_recipe
from pinbench.core.runner import run_samples
from pinbench.core.scorecard import MetricSpec
from pinbench.media.video import read_video, write_video
from pinbench.results.finish import collect_records, finish_run
from pinbench_recipes.paibench_c.generate import collect_videos, generate_and_record, vision_path
from pinbench_recipes.paibench_c.native_metrics import (
    DECODE_BACKEND,
    MAX_FRAMES,
    SegDetection,
    align_pred_to_gt,
    depth_si_rmse,
    seg_miou_recall,
)
from pinbench_recipes.paibench_c.rows import MODALITIES, build_rows, load_tasks, select_tasks, write_jsonl

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
    """Write the synthetic dataset (real layout) and its tasks.json under ``root``; return the dataset dir.

    Every file is written atomically and the content is deterministic, so shards building it at once
    (a job array of fixture runs on one ``--out``) write the same bytes and never read half a file.
    """
    from pinbench_recipes.paibench_c.blur import bilateral_blur
    from pinbench_recipes.paibench_c.edges import canny_edges

    dataset = root / "dataset"
    stamp = root / "fixture_version"
    if stamp.is_file() and stamp.read_text().strip() == str(FIXTURE_VERSION):
        return dataset
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
    write_atomic(stamp, str(FIXTURE_VERSION))
    return dataset


# ------------------------------------------------------------------------------------- test doubles


class PerturbedCopyGenerator:
    """TEST DOUBLE for cosmos-framework: a noisy, shifted, upscaled copy of the row's GT video."""

    name = "perturbed-copy test double"

    def describe(self) -> dict[str, Any]:
        return {"generator": self.name, "perturbation": PERTURBATION, "size": PRED_SIZE}

    def generate(self, rows: Sequence[Mapping[str, Any]], raw_dir: Path, work_dir: Path) -> None:
        for row in rows:
            modality = next(m for m in MODALITIES if m in row)
            sigma, shift, gain = PERTURBATION[modality]
            rng = np.random.default_rng(zlib.crc32(f"{row['name']}/{modality}".encode()))
            gt = read_video(row["vision_path"], backend=DECODE_BACKEND).frames.astype(np.float64)
            moved = np.roll(gt, shift, axis=2) * gain + rng.normal(0, sigma, gt.shape)
            frames = np.clip(moved, 0, 255).astype(np.uint8)
            frames = np.stack([cv2.resize(f, PRED_SIZE[::-1], interpolation=cv2.INTER_LINEAR) for f in frames])
            write_video(vision_path(raw_dir, row["name"]), frames, row["fps"], codec=FIXTURE_CODEC)


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


# ------------------------------------------------------------------------------------------- scoring


def score_pair(gt: np.ndarray, pred_native: np.ndarray) -> dict[str, float | None]:
    """All fixture metrics of one GT / prediction pair, in the evaluator's order of operations."""
    from pinbench_recipes.paibench_c.blur import bilateral_blur, blurred_ssim
    from pinbench_recipes.paibench_c.edges import canny_edges, edge_scores

    pred = align_pred_to_gt(pred_native, gt)
    edges = edge_scores(canny_edges(pred), canny_edges(gt))
    ssim = blurred_ssim(bilateral_blur(pred), bilateral_blur(gt))
    depth = LumaDepthDouble()
    m_iou, recall = seg_miou_recall(ColorKeySegDouble()(gt), ColorKeySegDouble()(pred_native), max_frames=len(gt))
    return {"canny_f1_score": edges.f1, "canny_precision": edges.precision, "canny_recall": edges.recall,
            "blur_ssim": ssim if math.isfinite(ssim) else None,
            "depth_si_rmse": depth_si_rmse(depth(pred_native), depth(gt)), "seg_m_iou": m_iou, "seg_recall": recall}


def _decode(path: str, decoder: str = DECODE_BACKEND) -> np.ndarray:
    return read_video(path, max_frames=MAX_FRAMES, backend=decoder).frames


def score_task(task: Mapping[str, Any], *, dataset: Path, run_dir: Path) -> dict[str, Any]:
    """Runner fn: every modality of one fixture task (the GT is decoded once); the task's paths are relative to
    the dataset (GT) and the run directory (predictions)."""
    gt = _decode(str(dataset / task["gt_video"]["path"]), task["decoder"])
    result: dict[str, Any] = {}
    for modality, pred_path in task["preds"].items():
        for metric, value in score_pair(gt, _decode(str(run_dir / pred_path), task["decoder"])).items():
            result[f"{modality}/{metric}"] = value
    return result


@dataclass(frozen=True)
class Sanity:
    """GT-versus-GT check: every metric at its perfect value."""

    ok: bool
    values: dict[str, dict[str, float | None]]
    problems: list[str]


PERFECT = {"canny_f1_score": 1.0, "canny_precision": 1.0, "canny_recall": 1.0, "blur_ssim": 1.0,
           "depth_si_rmse": 0.0, "seg_m_iou": 1.0, "seg_recall": 1.0}


def gt_vs_gt(gt_videos: Mapping[str, Path], decoder: str = DECODE_BACKEND) -> Sanity:
    values, problems = {}, []
    for task, path in gt_videos.items():
        gt = _decode(str(path), decoder)
        values[task] = score_pair(gt, gt)
        for metric, perfect in PERFECT.items():
            got = values[task][metric]
            if got is None or abs(got - perfect) > 1e-9:
                problems.append(f"{task} {metric}: {got} (expected {perfect})")
    return Sanity(ok=not problems, values=values, problems=problems)


def fixture_metrics(modalities: Sequence[str] = MODALITIES) -> list[MetricSpec]:
    return [MetricSpec(f"{m}/{metric}") for m in modalities for metric in FIXTURE_METRICS]


def run_fixture(cfg: RunConfig) -> RunOutcome:
    """Build the data, generate with the test double, score natively, diff against references/fixture.yaml.

    It honours what a real run honours: ``-o modalities`` and ``-o decoder``, ``--limit`` (the first N
    tasks), ``--shard I/N`` (generation and scoring of every N-th task; shards share one ``--out`` and an
    unsharded run then merges them), ``--skip-generation`` and ``--skip-scoring``. The options it does
    not use are refused by the core (``fixture: false`` in recipe.yaml).
    """
    modalities, decoder = list(cfg.options["modalities"]), cfg.options["decoder"]
    timings: dict[str, float] = {}
    start = time.perf_counter()
    data_root = cfg.out_dir / "fixture_data"
    dataset = build_fixture_dataset(data_root)
    all_tasks = load_tasks(data_root / "tasks.json")
    tasks = select_tasks(all_tasks, cfg.limit)
    rows = {m: build_rows(tasks, m, dataset) for m in modalities}
    for modality, modality_rows in rows.items():
        write_jsonl(modality_rows, cfg.out_dir / "inputs" / f"{modality}.jsonl")
    timings["prepare"] = time.perf_counter() - start

    start = time.perf_counter()
    generator = PerturbedCopyGenerator()
    known = {t.task_id for t in all_tasks}  # videos of tasks outside --limit are not strays here
    mine = cfg.shard.select(tasks) if cfg.shard else tasks  # this process's share of the work
    if not cfg.skip_generation:  # this shard's videos, each recorded for `pinbench status`
        generate_and_record(generator, rows, cfg.out_dir, dataset_root=dataset, shard=cfg.shard,
                            implementation=cfg.implementation, min_frames=N_FRAMES, known=known)
    collected = {m: collect_videos(modality_rows, cfg.out_dir / m / "raw", cfg.out_dir / m / "videos", N_FRAMES,
                                   known=known) for m, modality_rows in rows.items()}
    timings["generate"] = time.perf_counter() - start
    if cfg.skip_scoring:
        missing = [f"{m}/{t.task_id}" for m in modalities for t in mine if not collected[m][t.task_id].ok]
        message = (f"generation: {len(missing)} video(s) missing, e.g. {missing[0]}: "
                   f"{collected[missing[0].split('/')[0]][missing[0].split('/')[1]].error}") if missing \
            else f"generation complete ({len(mine)} task(s) x {len(modalities)} modalities)"
        print(message, flush=True)
        return RunOutcome(scorecard_path=None, exit_code=1 if missing else 0, message=message)

    start = time.perf_counter()
    sample_tasks = []
    with input_digests(cfg.out_dir, verify=cfg.verify_inputs) as digests:
        for task in tasks:
            preds = {m: f"{m}/videos/{task.task_id}.mp4" for m in modalities if collected[m][task.task_id].ok}
            sample_tasks.append({"sample_id": task.task_id, "gt_video": digests.key(dataset / task.video_path, dataset),
                                 "preds": preds, "pred_sha256": {m: collected[m][task.task_id].sha256 for m in preds},
                                 "decoder": decoder, "fixture_version": FIXTURE_VERSION})
    run_samples(sample_tasks, partial(score_task, dataset=dataset, run_dir=cfg.out_dir), cfg.out_dir,
                shard=cfg.shard, implementation=cfg.implementation,
                stage="fixture score", progress=False)
    records = collect_records(cfg, sample_tasks)
    sanity = gt_vs_gt({t.task_id: dataset / t.video_path for t in mine}, decoder)
    timings["score"] = time.perf_counter() - start

    extra = {"generator": generator.describe(), "modalities": modalities, "decoder": decoder,
             "sanity_gt_vs_gt": {"ok": sanity.ok, "problems": sanity.problems, "values": sanity.values}}
    outcome = finish_run(get_recipe(cfg.recipe), cfg, metrics=fixture_metrics(modalities), records=records,
                         n_expected=len(tasks), pins=None, timings=timings, seeds={"fixture": SEED}, extra=extra,
                         provenance_extra={"fixture_version": FIXTURE_VERSION})
    if not sanity.ok:
        outcome.exit_code = max(outcome.exit_code, 1)
        outcome.message += "\nGT-vs-GT sanity failed: " + "; ".join(sanity.problems)
    return outcome
