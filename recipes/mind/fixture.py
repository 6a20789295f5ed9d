"""``--fixture``: the MIND recipe end to end on CPU, on a tiny synthetic MIND-Data and model output.

What is real: the GT and generated layouts (action.json, images.txt, MP4 videos of more than 100 frames
where they are scored), the plan, the official run's working directory (views, fresh cache, CWD),
the Result.json import, the native cross-check (``ingest`` + ``native``), WorldFoundry's normaliser, the
scorecard, the diff against ``references/fixture.yaml`` and the report.

What is replaced, by a clearly named test double: :class:`ProcessPyCpuDouble` stands in for ``process.py``
on GPUs. It reads the same working-directory views, reimplements process.py's reader loop for the LCM and
GSC blocks (``VideoStreamReader``'s 100-frame chunks and early break, ``transform_image`` through
torchvision, torchmetrics' PSNR / SSIM and LPIPS-alex on [-1, 1], exactly the calls of ``lcm_metric``) and
writes a Result.json in the official schema. The GPU-only blocks (MUSIQ / LAION visual quality, DINOv3,
ViPE action RPE) are **invented numbers** derived from the frames; they exercise the import and the
normaliser and mean nothing. LPIPS uses a seeded random AlexNet trunk saved to a local file and loaded
through the real, hash-checking loader.

The canvas is 72x128 instead of 720x1280 (same 16:9 rule, same code): the official size costs about
2 s per frame pair on one CPU core; the fixture scores 637 frame pairs.

The first-person memory split (``1st_data/mem_test``, the paper's Table 2 split) holds two scenes, so the
fixture's scorecard carries a bootstrap interval there (a one-sample split has none: nothing to resample).
"""

from __future__ import annotations

import json
import math
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import numpy as np
import torch

from pinbench.core.files import write_atomic
from pinbench.core.fixture_data import build_once
from pinbench.media.lpips import write_alexnet_trunk
from pinbench.media.video import write_video
from pinbench_recipes.mind.ingest import Canvas
from pinbench_recipes.mind.layout import CHUNK_FRAMES, ONE_PAIR_BATCH_ERROR, mirror_fails_upstream

FIXTURE_VERSION = 2        # bump when the synthetic data changes (references/fixture.yaml is re-recorded)
SEED = 2026
FPS = 24
CANVAS = Canvas(72, 128)
GT_SIZE = (90, 160)        # 16:9 like MIND-Data's 1080p, small
# (perspective, test, name, mark_time, total_time, generated (H, W), drift px/frame, noise sigma)
CONTINUATIONS = (
    ("1st_data", "mem_test", "scene-a", 20, 132, (72, 128), 0.05, 4.0),          # canvas size: no resize
    ("1st_data", "action_space_test", "scene-b", 30, 245, (108, 192), 0.08, 6.0),  # 2 chunks scored, 15 dropped
    ("3rd_data", "mem_test", "scene-c", 10, 121, (64, 96), 0.03, 3.0),           # 2:3: scale, then crop
    ("3rd_data", "action_space_test", "scene-d", 25, 130, (80, 120), 0.12, 8.0),  # 2:3 again, stronger drift
)
# Version 2: a second 1st_data/mem_test scene, drawn after the mirrors so version 1's data stay as they were.
SECOND_SCENES = (
    ("1st_data", "mem_test", "scene-e", 15, 127, (54, 96), 0.07, 5.0),           # 16:9 below the canvas: upscale
)
# (perspective, directory, ((rollout, frames, noise sigma, first pair identical), ...))
MIRRORS = (
    ("1st_data", "loop-1", (("path-1.mp4", 24, 5.0, False), ("path-2.mp4", 30, 3.0, True))),
    ("3rd_data", "loop-1", (("path-1.mp4", 20, 7.0, False),)),
)
POSED = {"scene-a", "scene-b", "scene-e"}  # these ship an images.txt of 97 poses; the others make ViPE run (upstream)


@dataclass(frozen=True)
class FixtureData:
    root: Path
    gt_root: Path
    generated_root: Path
    lpips_trunk: Path
    lpips_sha256: str


# ------------------------------------------------------------------------------------- synthetic data


def _world(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A smooth, textured panorama (float RGB in [0, 255]) that cameras pan across."""
    coarse = rng.uniform(30, 225, (height // 6 + 2, width // 6 + 2, 3))
    yy = np.linspace(0, coarse.shape[0] - 1.001, height)
    xx = np.linspace(0, coarse.shape[1] - 1.001, width)
    y0, x0 = yy.astype(int), xx.astype(int)
    fy, fx = (yy - y0)[:, None, None], (xx - x0)[None, :, None]
    top = coarse[y0][:, x0] * (1 - fx) + coarse[y0][:, x0 + 1] * fx
    bottom = coarse[y0 + 1][:, x0] * (1 - fx) + coarse[y0 + 1][:, x0 + 1] * fx
    world = top * (1 - fy) + bottom * fy
    world += rng.normal(0, 6, world.shape)          # fine texture for SSIM and LPIPS to see
    return np.clip(world, 0, 255)


def _view(world: np.ndarray, x: float, size: tuple[int, int]) -> np.ndarray:
    """The camera window at horizontal offset ``x`` (bilinear in x), resized to ``size`` (H, W)."""
    height = world.shape[0]
    width = round(height * 16 / 9)
    x0 = int(math.floor(x))
    frac = x - x0
    window = world[:, x0: x0 + width] * (1 - frac) + world[:, x0 + 1: x0 + 1 + width] * frac
    rows = np.linspace(0, height - 1, size[0]).round().astype(int)
    cols = np.linspace(0, width - 1, size[1]).round().astype(int)
    return window[rows][:, cols]


def _camera(t: int) -> float:
    """Leave and come back: a triangle wave over the panorama (the revisit MIND tests)."""
    period = 160
    phase = t % period
    return 2.0 + 0.5 * (phase if phase < period // 2 else period - phase)


def _action_entry(t: int) -> dict[str, Any]:
    moving_right = (t % 160) < 80
    return {"time": round(t / FPS, 4), "ws": 1 if t % 7 else 0, "ad": 0, "ud": 0, "lr": 2 if moving_right else 1,
            "actor_pos": {"x": float(t), "y": 0.0, "z": 0.0}, "actor_rpy": {"x": 0.0, "y": 0.0, "z": 0.0}}


def _images_txt(n: int) -> str:
    lines = ["# Image list with two lines of data per image:",
             "#   IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME"]
    for i in range(n):
        lines += [f"{i + 1} 1 0 0 0 {-0.05 * i:.4f} 0 0 1 images/frame_{i:06d}.jpg", ""]
    return "\n".join(lines) + "\n"


def _uint8(frames: list[np.ndarray]) -> np.ndarray:
    return np.clip(np.stack(frames), 0, 255).round().astype(np.uint8)


def _write_continuation(data: FixtureData, rng: np.random.Generator, spec: tuple) -> None:
    perspective, test, name, mark, total, gen_size, drift, sigma = spec
    world = _world(rng, GT_SIZE[0], round(GT_SIZE[0] * 16 / 9) + 100)
    gt_dir = data.gt_root / perspective / "test" / test / name
    gt_dir.mkdir(parents=True, exist_ok=True)
    write_video(gt_dir / "video.mp4", _uint8([_view(world, _camera(t), GT_SIZE) for t in range(total)]), FPS, crf=0)
    actions = {"mark_time": mark, "total_time": total, "caption": f"synthetic {name}",
               "data": [_action_entry(t) for t in range(total)]}
    write_atomic(gt_dir / "action.json", json.dumps(actions))
    if name in POSED:
        write_atomic(gt_dir / "images.txt", _images_txt(97))
    generated = []
    for i, t in enumerate(range(mark, total)):   # the prediction only: frame 0 is GT frame mark_time
        frame = _view(world, _camera(t) + drift * i, gen_size)
        generated.append(frame + rng.normal(0, sigma * (1 + i / 100), frame.shape))
    write_video(data.generated_root / perspective / test / name / "video.mp4", _uint8(generated), FPS, crf=0)


def _write_mirror(data: FixtureData, rng: np.random.Generator, spec: tuple) -> None:
    perspective, directory, rollouts = spec
    world = _world(rng, 72, 128 + 60)
    for video, frames, sigma, identical_first in rollouts:
        half = frames // 2
        out = [_view(world, 2.0 + 0.8 * i, (72, 128)) + rng.normal(0, sigma, (72, 128, 3)) for i in range(half)]
        back = [_view(world, 2.0 + 0.8 * i, (72, 128)) + rng.normal(0, sigma, (72, 128, 3))
                for i in reversed(range(half))]
        if identical_first:
            back[-1] = out[0].copy()     # last frame equals the first: PSNR +inf for that pair (lossless x264)
        write_video(data.generated_root / perspective / "mirror_test" / directory / video, _uint8(out + back),
                    FPS, crf=0)


def write_random_alexnet(path: Path, seed: int = SEED) -> str:
    """An AlexNet trunk file with seeded weights (``write_alexnet_trunk``); returns its SHA-256."""
    generator = torch.Generator().manual_seed(seed)

    def weights(kind: str, shape: tuple[int, ...]) -> torch.Tensor:
        if kind == "bias":
            return torch.randn(shape, generator=generator) * 0.01
        return torch.randn(shape, generator=generator) * math.sqrt(2.0 / math.prod(shape[1:]))
    return write_alexnet_trunk(path, weights)


def build_fixture(root: Path) -> FixtureData:
    """The synthetic data under ``root``, written once per fixture version (``build_once``): shards that start
    together write it once, and a rerun finds the very files it scored before."""
    saved = build_once(root, FIXTURE_VERSION, _write_fixture)
    return _layout(root, saved["lpips_sha256"])


def _layout(root: Path, lpips_sha256: str = "") -> FixtureData:
    return FixtureData(root=root, gt_root=root / "MIND-Data", generated_root=root / "generated",
                       lpips_trunk=root / "alexnet-random.pth", lpips_sha256=lpips_sha256)


def _write_fixture(folder: Path) -> dict[str, Any]:
    """Every fixture file under ``folder``; returns what the stamp keeps (the LPIPS trunk's SHA-256)."""
    data = _layout(folder)
    rng = np.random.default_rng(SEED)
    for spec in CONTINUATIONS:
        _write_continuation(data, rng, spec)
    for spec in MIRRORS:
        _write_mirror(data, rng, spec)
    for spec in SECOND_SCENES:
        _write_continuation(data, rng, spec)
    for perspective in ("1st_data", "3rd_data"):   # every test directory exists, as in MIND-Data
        for test in ("mem_test", "action_space_test", "mirror_test"):
            (data.generated_root / perspective / test).mkdir(parents=True, exist_ok=True)
        for test in ("mem_test", "action_space_test"):
            (data.gt_root / perspective / "test" / test).mkdir(parents=True, exist_ok=True)
    return {"seed": SEED, "lpips_sha256": write_random_alexnet(data.lpips_trunk)}


# --------------------------------------------------------------------------------------- test double


class _StreamReaderReplica:
    """process.py's VideoStreamReader: sequential PyAV decode, ``to_rgb()``, transform_image, clamp."""

    def __init__(self, path: Path, start_frame: int, total_frames: int, canvas: Canvas) -> None:
        self.container = av.open(str(path))
        self.frames = self.container.decode(video=0)
        self.total, self.current, self.canvas = total_frames, start_frame, canvas
        for _ in range(start_frame):
            if next(self.frames, None) is None:
                break

    def read_batch(self, size: int) -> tuple[bool, torch.Tensor | None]:
        if self.current >= self.total:
            return True, None
        batch = []
        for _ in range(min(size, self.total - self.current)):
            frame = next(self.frames, None)
            if frame is None:
                break
            self.current += 1
            batch.append(torch.from_numpy(frame.to_rgb().to_ndarray()).float())
        if not batch:
            return True, None
        images = self._transform(torch.stack(batch).permute(0, 3, 1, 2))
        return self.current >= self.total, torch.clamp(images, 0.0, 1.0)

    def _transform(self, images: torch.Tensor) -> torch.Tensor:
        from torchvision import transforms
        from torchvision.transforms import functional as tvf

        height, width = self.canvas.height, self.canvas.width
        _, _, h, w = images.size()
        if h * width == w * height:
            return transforms.Resize(size=(height, width), antialias=False)(images) / 255.0
        scale = max(width / w, height / h)
        images = transforms.Resize(size=(round(h * scale), round(w * scale)), antialias=False)(images)
        return tvf.center_crop(images, [height, width]) / 255.0

    def close(self) -> None:
        self.container.close()


class ProcessPyCpuDouble:
    """TEST DOUBLE for ``src/process.py`` on GPUs (see the module doc): real LCM / GSC arithmetic on CPU
    through torchmetrics and lpips, invented visual-quality, DINO and action numbers."""

    name = "ProcessPyCpuDouble (test double for process.py: LCM/GSC via torchmetrics on CPU, other blocks invented)"

    def __init__(self, lpips_model: torch.nn.Module, canvas: Canvas = CANVAS, seed: int = SEED) -> None:
        from torchmetrics.image import PeakSignalNoiseRatio, StructuralSimilarityIndexMeasure

        self.lpips = lpips_model
        self.ssim = StructuralSimilarityIndexMeasure(data_range=1.0, reduction="none")
        self.psnr = PeakSignalNoiseRatio(data_range=1.0, reduction="none", dim=[1, 2, 3])
        self.canvas, self.seed = canvas, seed

    def run(self, *, gt_root: Path, test_root: Path, metrics: Sequence[str], video_max_time: int | None,
            output: Path) -> None:
        """Score what process.py would list under the two roots and write ``output`` (Result.json)."""
        records = []
        for perspective in ("1st_data", "3rd_data"):
            if "gsc" in metrics:
                mirror_dir = test_root / perspective / "mirror_test"
                records += [self._mirror(mirror_dir, d, perspective) for d in os.listdir(mirror_dir)]
            if any(m in metrics for m in ("lcm", "visual", "dino", "action")):
                for test in ("mem_test", "action_space_test"):
                    gt_dir, test_dir = gt_root / perspective / "test" / test, test_root / perspective / test
                    records += [self._continuation(gt_dir / d, test_dir / d, perspective, test, metrics,
                                                   video_max_time) for d in os.listdir(test_dir)
                                if (gt_dir / d).exists()]
        random.Random(self.seed).shuffle(records)     # completion order is not plan order upstream either
        with output.open("w") as fh:
            json.dump({"data": records, "video_max_time": video_max_time}, fh, indent=2)

    def _lcm(self, pred: torch.Tensor, gt: torch.Tensor) -> dict[str, Any]:
        """lcm_metric: batches of 10, MSE, LPIPS on x*2-1, torchmetrics PSNR and SSIM, plain means."""
        lists: dict[str, list[float]] = {"mse": [], "psnr": [], "ssim": [], "lpips": []}
        with torch.no_grad():
            for i in range(0, len(pred), 10):
                p, g = pred[i: i + 10], gt[i: i + 10]
                lists["mse"] += ((p - g) ** 2).reshape(len(p), -1).mean(dim=1).tolist()
                lists["lpips"] += [x[0][0][0] for x in self.lpips(p * 2 - 1, g * 2 - 1).tolist()]
                lists["psnr"] += self.psnr(p, g).tolist()
                lists["ssim"] += self.ssim(p, g).tolist()
        block: dict[str, Any] = {"length": len(pred)}
        for name, values in lists.items():
            block[name] = values
            block[f"avg_{name}"] = sum(values) / len(values)
        return block

    def _merge(self, block: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
        if block is None:
            return new
        block["length"] += new["length"]
        for name in ("mse", "psnr", "ssim", "lpips"):
            block[name] += new[name]
            block[f"avg_{name}"] = sum(block[name]) / len(block[name])
        return block

    def _continuation(self, gt_dir: Path, test_dir: Path, perspective: str, test: str, metrics: Sequence[str],
                      video_max_time: int | None) -> dict[str, Any]:
        actions = json.loads((gt_dir / "action.json").read_text())
        mark, total = actions["mark_time"], actions["total_time"]
        with av.open(str(test_dir / "video.mp4")) as container:
            sample_frames = container.streams.video[0].frames
        result: dict[str, Any] = {"path": gt_dir.name, "perspective": perspective, "test_type": test, "error": None,
                                  "mark_time": mark, "total_time": total, "sample_frames": sample_frames}
        real = min(total - mark, sample_frames)
        real = min(real, video_max_time) if video_max_time is not None else real
        gt_reader = _StreamReaderReplica(gt_dir / "video.mp4", mark, mark + real, self.canvas)
        sample_reader = _StreamReaderReplica(test_dir / "video.mp4", 0, real, self.canvas)
        while True:
            ended, gt = gt_reader.read_batch(CHUNK_FRAMES)
            _, sample = sample_reader.read_batch(CHUNK_FRAMES)
            if ended or gt is None or sample is None:
                break
            if "lcm" in metrics:
                result["lcm"] = self._merge(result.get("lcm"), self._lcm(sample, gt))
            if "visual" in metrics:
                result["visual_quality"] = _merge_lists(result.get("visual_quality"), _invented_visual(sample))
            if "dino" in metrics:
                result["dino"] = _merge_lists(result.get("dino"), _invented_dino(sample, gt))
        gt_reader.close()
        sample_reader.close()
        if "action" in metrics:
            result["action"] = _invented_action(actions["data"][mark: mark + 97], self.seed + mark)
        return result

    def _mirror(self, mirror_dir: Path, directory: str, perspective: str) -> dict[str, Any]:
        path = mirror_dir / directory
        videos = [v for v in os.listdir(path) if v.endswith(".mp4")]
        result: dict[str, Any] = {"path": directory, "perspective": perspective, "test_type": "mirror_test",
                                  "video_results": [], "videos": videos, "error": None}
        for video in videos:
            with av.open(str(path / video)) as container:
                frames = container.streams.video[0].frames
            entry: dict[str, Any] = {"video_name": video, "error": None, "mark_time": frames // 2,
                                     "sample_frames": frames}
            if frames % 2 == 1:
                entry["error"] = "frame count is not an even number!"
            elif mirror_fails_upstream(frames):   # lcm_metric raises; after its retries the directory record errs
                result["error"] = ONE_PAIR_BATCH_ERROR
                break
            else:
                reader = _StreamReaderReplica(path / video, 0, frames, self.canvas)
                _, images = reader.read_batch(frames)
                reader.close()
                assert images is not None
                entry["gsc"] = self._lcm(images[: frames // 2], torch.flip(images[frames // 2:], dims=[0]))
            result["video_results"].append(entry)
        return result


def _merge_lists(block: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    if block is None:
        return new
    for key, values in new.items():
        if isinstance(values, list):
            block[key] += values
            block[f"avg_{key}"] = sum(block[key]) / len(block[key])
    return block


def _invented_visual(sample: torch.Tensor) -> dict[str, Any]:
    """INVENTED stand-in for MUSIQ-SPAQ / LAION (GPU-only): contrast and brightness, scaled into [0, 1]."""
    imaging = (0.3 + sample.std(dim=(1, 2, 3))).clamp(0, 1).tolist()
    aesthetic = (0.35 + 0.3 * sample.mean(dim=(1, 2, 3))).clamp(0, 1).tolist()
    return {"imaging": imaging, "avg_imaging": sum(imaging) / len(imaging),
            "aesthetic": aesthetic, "avg_aesthetic": sum(aesthetic) / len(aesthetic)}


def _invented_dino(sample: torch.Tensor, gt: torch.Tensor) -> dict[str, Any]:
    """INVENTED stand-in for DINOv3 patch MSE (GPU-only): pixel MSE squeezed into its [0, 4/768] range."""
    values = ((sample - gt) ** 2).reshape(len(sample), -1).mean(dim=1).mul(0.05).tolist()
    return {"dino_mse": values, "avg_dino_mse": sum(values) / len(values)}


def _invented_action(entries: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    """INVENTED stand-in for ViPE RPE (GPU-only) with upstream's labels and buckets (look_* lands in 'other')."""
    from pinbench_recipes.mind.layout import action_label

    labels = [action_label(e) for e in entries][:96]
    rng = np.random.default_rng(seed)
    trans = rng.gamma(2.0, 0.02, len(labels))
    rot = rng.gamma(2.0, 0.8, len(labels))

    def stats(index: list[int]) -> dict[str, Any]:
        t, r = trans[index], rot[index]
        return {"count": len(index), "rpe_trans_mean": float(t.mean()), "rpe_trans_median": float(np.median(t)),
                "rpe_rot_mean_deg": float(r.mean()), "rpe_rot_median_deg": float(np.median(r))}

    translation = {"w", "a", "s", "d", "forward", "backward", "left", "right"}
    buckets = ["translation" if label in translation else "other" for label in labels]
    block = {"__overall__": stats(list(range(len(labels))))}
    for bucket in ("translation", "other"):
        index = [i for i, b in enumerate(buckets) if b == bucket]
        if index:
            block[bucket] = stats(index)
    for label in sorted(set(labels)):
        block[f"act:{label}"] = stats([i for i, x in enumerate(labels) if x == label])
    return block
