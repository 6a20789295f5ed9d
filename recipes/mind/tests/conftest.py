"""Small MIND layouts written on the fly (CPU, offline): GT samples, generated videos, mirror rollouts."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from pinbench.media.video import write_video
from pinbench_recipes.mind.official import CACHE_WEIGHTS, COMMIT_STAMP, Runtime

SIZE = (36, 64)          # 16:9, like MIND-Data


def clip(n_frames: int, seed: int = 0, size: tuple[int, int] = SIZE) -> np.ndarray:
    """Deterministic RGB clip: a textured background with a square moving across it."""
    rng = np.random.default_rng(seed)
    base = rng.integers(40, 200, (1, size[0], size[1], 3), dtype=np.uint8)
    frames = np.repeat(base, n_frames, axis=0)
    for t in range(n_frames):
        x = (2 * t) % max(1, size[1] - 8)
        frames[t, 4:12, x: x + 8] = (240, 230, 30)
    return frames


def write_clip(path: Path, n_frames: int, seed: int = 0, size: tuple[int, int] = SIZE) -> Path:
    return write_video(path, clip(n_frames, seed, size), 24, codec="mpeg4")


def action_json(mark: int, total: int, **overrides: Any) -> dict[str, Any]:
    data = [{"time": t / 24, "ws": 1, "ad": 0, "ud": 0, "lr": 2 if t % 2 else 0} for t in range(total)]
    return {"mark_time": mark, "total_time": total, "caption": "test", "data": data, **overrides}


def images_txt(n: int) -> str:
    return "".join(f"{i + 1} 1 0 0 0 0 0 {i * 0.1} 1 images/frame_{i:06d}.jpg\n\n" for i in range(n))


@dataclass
class Layout:
    """A GT root and a generated root in the official layouts."""

    gt_root: Path
    generated_root: Path

    def gt(self, perspective: str, test: str, name: str) -> Path:
        return self.gt_root / perspective / "test" / test / name

    def generated(self, perspective: str, test: str, name: str) -> Path:
        return self.generated_root / perspective / test / name

    def add_gt(self, perspective: str, test: str, name: str, mark: int = 10, total: int = 122, poses: int = 97,
               seed: int = 0) -> Path:
        folder = self.gt(perspective, test, name)
        write_clip(folder / "video.mp4", total, seed)
        (folder / "action.json").write_text(json.dumps(action_json(mark, total)))
        if poses:
            (folder / "images.txt").write_text(images_txt(poses))
        return folder

    def add_generated(self, perspective: str, test: str, name: str, frames: int = 112, seed: int = 1) -> Path:
        return write_clip(self.generated(perspective, test, name) / "video.mp4", frames, seed)

    def add_mirror(self, perspective: str, directory: str, video: str = "path-1.mp4", frames: int = 12,
                   seed: int = 2) -> Path:
        return write_clip(self.generated(perspective, "mirror_test", directory) / video, frames, seed)


def _base_layout(root: Path) -> Layout:
    layout = Layout(root / "MIND-Data", root / "generated")
    for perspective in ("1st_data", "3rd_data"):
        for test in ("mem_test", "action_space_test", "mirror_test"):
            (layout.generated_root / perspective / test).mkdir(parents=True)
        for test in ("mem_test", "action_space_test"):
            (layout.gt_root / perspective / "test" / test).mkdir(parents=True)
    layout.add_gt("1st_data", "mem_test", "data-1", mark=10, total=122)
    layout.add_generated("1st_data", "mem_test", "data-1", frames=112)
    layout.add_gt("1st_data", "action_space_test", "data-2", mark=5, total=220, poses=0)
    layout.add_generated("1st_data", "action_space_test", "data-2", frames=215)
    layout.add_gt("3rd_data", "mem_test", "data-3", mark=0, total=105)
    layout.add_generated("3rd_data", "mem_test", "data-3", frames=105)
    layout.add_mirror("1st_data", "loop-1", "path-1.mp4", 12)
    layout.add_mirror("1st_data", "loop-1", "path-2.mp4", 8, seed=3)
    layout.add_mirror("3rd_data", "loop-1", "path-1.mp4", 10)
    return layout


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """Tiny frames: one thread beats the per-call threading overhead (10x on a loaded 2-core machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def base_layout_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mind-base")
    _base_layout(root)
    return root


@pytest.fixture
def layout(base_layout_dir: Path, tmp_path: Path) -> Layout:
    """A fresh copy of a small valid layout: 3 continuation samples (one per cohort but 3rd action) and
    2 mirror directories (3 rollouts)."""
    shutil.copytree(base_layout_dir, tmp_path / "data")
    return Layout(tmp_path / "data" / "MIND-Data", tmp_path / "data" / "generated")


ALL_METRICS = ("lcm", "visual", "dino", "action", "gsc")


def lcm_block(length: int, mse: float = 0.01, psnr: float = 20.0, ssim: float = 0.8, lpips: float = 0.3,
              **overrides: Any) -> dict[str, Any]:
    """An lcm/gsc block of constant per-frame values (override lists to vary them)."""
    block: dict[str, Any] = {"length": length}
    for name, value in (("mse", mse), ("psnr", psnr), ("ssim", ssim), ("lpips", lpips)):
        block[name] = [value] * length
        block[f"avg_{name}"] = value
    block.update(overrides)
    return block


def continuation_record(name: str, perspective: str = "1st_data", test: str = "mem_test", *, mark: int = 10,
                        total: int = 122, frames: int = 112, scored: int = 100, **blocks: Any) -> dict[str, Any]:
    """A record the way process.py writes a scored mem/action sample (all blocks unless overridden)."""
    record: dict[str, Any] = {"path": name, "perspective": perspective, "test_type": test, "error": None,
                              "mark_time": mark, "total_time": total, "sample_frames": frames,
                              "lcm": lcm_block(scored),
                              "visual_quality": {"imaging": [0.5] * scored, "avg_imaging": 0.5,
                                                 "aesthetic": [0.4] * scored, "avg_aesthetic": 0.4},
                              "dino": {"dino_mse": [0.001] * scored, "avg_dino_mse": 0.001},
                              "action": {"__overall__": {"count": 90, "rpe_trans_mean": 0.1, "rpe_trans_median": 0.08,
                                                         "rpe_rot_mean_deg": 2.0, "rpe_rot_median_deg": 1.5},
                                         "other": {"count": 90, "rpe_trans_mean": 0.1, "rpe_trans_median": 0.08,
                                                   "rpe_rot_mean_deg": 2.0, "rpe_rot_median_deg": 1.5}}}
    for key, value in blocks.items():
        if value is None:
            record.pop(key, None)
        else:
            record[key] = value
    return record


def mirror_record(name: str, perspective: str = "1st_data", videos: dict[str, int] | None = None,
                  **per_video: dict[str, Any]) -> dict[str, Any]:
    videos = videos or {"path-1.mp4": 12}
    results = []
    for video, frames in videos.items():
        entry = {"video_name": video, "error": None, "mark_time": frames // 2, "sample_frames": frames,
                 "gsc": lcm_block(frames // 2)}
        entry.update(per_video.get(video.replace(".mp4", "").replace("-", "_"), {}))
        results.append(entry)
    return {"path": name, "perspective": perspective, "test_type": "mirror_test", "video_results": results,
            "videos": list(videos), "error": None}


@pytest.fixture
def write_result(tmp_path: Path) -> Callable[..., Path]:
    """Write a Result.json the way process.py does (json.dump, indent 2, NaN/Infinity allowed)."""
    def _write(records: list[dict[str, Any]], video_max_time: int | None = None, name: str = "Result.json") -> Path:
        path = tmp_path / name
        path.write_text(json.dumps({"data": records, "video_max_time": video_max_time}, indent=2))
        return path
    return _write


PIN = "8f9c59c621f9c9d16f5db2fc0b7f042cf2505aa7"


@pytest.fixture
def runtime(tmp_path: Path) -> Runtime:
    """A stand-in runtime tree: the files process.py's working directory links to (no real weights)."""
    mind = tmp_path / "MIND"
    (mind / "src").mkdir(parents=True)
    (mind / "src" / "process.py").write_text("# stand-in\n")
    (mind / "vipe" / "scripts").mkdir(parents=True)
    (mind / "vipe" / "scripts" / "vipe_to_colmap.py").write_text("# stand-in\n")
    (mind / COMMIT_STAMP).write_text(PIN + "\n")
    dino = tmp_path / "dinov3"
    dino.mkdir()
    (dino / "config.json").write_text("{}")
    weights = {}
    for name in CACHE_WEIGHTS:
        weights[name] = tmp_path / "weights" / f"{name}.bin"
        weights[name].parent.mkdir(exist_ok=True)
        weights[name].write_bytes(name.encode())
    return Runtime(mind_dir=mind, python=Path(sys.executable), dino_dir=dino, weights=weights,
                   torch_home=tmp_path / "torch", hf_home=tmp_path / "hf")
