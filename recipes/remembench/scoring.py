"""Score one rollout: decode it once, find its departure/revisit pair, compute all four metrics.

Why one decode: TempSSIM needs every frame, Drift 64-92 of them, the pair metrics two, and the I2V
revisit selection reconstructs every frame; decoding the video once (OpenCV, the decoder the paper
used for frame counting, Pi3X, I2V LPIPS, TempSSIM and Drift) and sharing the frames is the cost floor.
On the CPU TempSSIM is computed while the video decodes (``metrics.decode_with_tempssim``).
The paper read the two pair frames a second time with imageio/FFmpeg; both decoders go through
FFmpeg's swscale and give bit-identical RGB for yuv420p H.264 (tests/test_scoring.py checks this
against PyAV), so the recipe uses the one decode for everything (README, "Changes vs upstream").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch

from pinbench.core.files import atomic_path
from pinbench.core.inputs import InputKey
from pinbench_recipes.remembench.clip_model import ClipEmbedder
from pinbench_recipes.remembench.metrics import decode_with_tempssim, pair_metrics, quality_metrics
from pinbench_recipes.remembench.prepare import RowTask
from pinbench_recipes.remembench.revisit import (
    Pi3XReconstructor,
    PoseError,
    load_poses,
    save_poses,
    select_revisit,
)

PAIR_IMAGE_WIDTH = 320  # width of each frame in the saved departure | revisit strip
POSES_DIR = "pi3_poses"
PAIRS_DIR = "pairs"


class Scorer:
    """Callable for ``Run.score``: task -> result dict (models are loaded once, by the run)."""

    def __init__(self, clip: ClipEmbedder, lpips_model: torch.nn.Module, out_dir: Path, *,
                 videos: Path | None = None, poses_dir: Path | None = None, pi3x_weights: Path | None = None,
                 device: str = "cpu"):
        self.clip, self.lpips, self.out_dir = clip, lpips_model, out_dir
        self.videos, self.poses_dir = videos, poses_dir  # the roots the tasks' relative paths are under
        self.pi3x_weights, self.device = pi3x_weights, device
        self._pi3x: Pi3XReconstructor | None = None

    def _reconstruct(self, task: RowTask, video: InputKey, frames: np.ndarray) -> tuple[np.ndarray, str]:
        """I2V camera poses: a user file, a cached reconstruction of this exact video, or Pi3X now."""
        if task.poses is not None:
            return load_poses(self._under(self.poses_dir, _name(task.poses), "poses_dir"), len(frames)), "file"
        cache = self.out_dir / POSES_DIR / f"{task.sample_id}.{video.sha256[:16]}.npz"
        if cache.is_file():
            return load_poses(cache, len(frames)), "pi3x (cached)"
        if self.pi3x_weights is None:
            raise RuntimeError("no camera poses for this I2V rollout: give -o poses_dir= or run where Pi3X "
                               "weights and a GPU are available")
        if self._pi3x is None:
            self._pi3x = Pi3XReconstructor(self.pi3x_weights, device=self.device)
        poses = self._pi3x.poses(frames)
        save_poses(cache, poses)
        return poses, "pi3x"

    def _save_pair(self, sample_id: str, frames: np.ndarray, departure: int, revisit: int) -> str:
        """A small departure | revisit strip for the report; returns its path relative to out_dir."""
        height, width = frames.shape[1:3]
        size = (PAIR_IMAGE_WIDTH, max(1, round(height * PAIR_IMAGE_WIDTH / width)))
        strip = np.concatenate([cv2.resize(frames[i], size, interpolation=cv2.INTER_AREA)
                                for i in (departure, revisit)], axis=1)
        rel = Path(PAIRS_DIR) / f"{sample_id}.png"
        (self.out_dir / PAIRS_DIR).mkdir(parents=True, exist_ok=True)
        with atomic_path(self.out_dir / rel, suffix=".png") as tmp:  # a name unique to this process
            if not cv2.imwrite(str(tmp), cv2.cvtColor(strip, cv2.COLOR_RGB2BGR)):
                raise OSError(f"could not write {self.out_dir / rel}")
        return rel.as_posix()

    @staticmethod
    def _under(root: Path | None, relative: str, option: str) -> Path:
        if root is None:
            raise ValueError(f"the task names {relative!r} under -o {option}, and this run has none")
        return root / relative

    def __call__(self, task: RowTask) -> dict[str, Any]:
        video = task.video
        # the folder by name: a --skip-generation run's is the run's rollouts/, no -o videos
        where = "-o videos" if self.videos is None else str(self.videos)
        if task.rollouts:  # scoring the first would score a rollout chosen by a rule the user may not know
            raise ValueError(f"{' and '.join(task.rollouts)} are both under {where}: two rollouts of "
                             f"{task.sample_id}; keep the one to score")
        if video is None:
            raise FileNotFoundError(f"rollout not found: looked for {' and '.join(task.looked_for)} under {where}")
        name = video.path
        frames, computed_tempssim = decode_with_tempssim(self._under(self.videos, name, "videos"), task.decoder,
                                                         device=self.device)
        if len(frames) != task.num_frames:
            raise ValueError(f"{name}: decoded {len(frames)} frames, the {task.split} setting "
                             f"has {task.num_frames}")
        turnaround = revisit_heading = None
        poses_source = None
        if task.split == "i2v":
            poses, poses_source = self._reconstruct(task, video, frames)
            try:
                choice = select_revisit(poses, translation=bool(task.translation))
            except PoseError as exc:
                named = f": {_name(task.poses)}" if task.poses is not None else ""
                raise PoseError(f"camera poses ({poses_source}{named}): {exc}") from None
            departure, revisit, turnaround = 0, choice.revisit, choice.turnaround
            revisit_heading = float(choice.heading_deg[revisit])
        else:
            departure, revisit = task.departure_frame, task.revisit_frame
            if departure is None or revisit is None:
                raise ValueError(f"no departure/revisit annotation for scene {task.scene_id!r} "
                                 f"in {task.annotation_source}")
        if not 0 <= departure <= revisit < len(frames):
            raise ValueError(f"invalid frame pair ({departure}, {revisit}) for a {len(frames)}-frame video")
        result: dict[str, Any] = pair_metrics(self.clip, self.lpips, frames, departure, revisit)
        result.update(quality_metrics(self.clip, frames, [tuple(c) for c in task.layout], device=self.device,
                                      computed_tempssim=computed_tempssim))
        height, width = (int(n) for n in frames.shape[1:3])
        result.update(
            departure_frame=int(departure), revisit_frame=int(revisit), turnaround_frame=turnaround,
            revisit_heading_deg=revisit_heading, paper_size=list(task.size),
            at_paper_size=[width, height] == list(task.size),
            scene_id=task.scene_id, split=task.split, setting=task.setting,
            video_sha256=video.sha256, n_frames=int(len(frames)), height=height,
            width=width, decoder=task.decoder, poses_source=poses_source,
            pair_image=self._save_pair(task.sample_id, frames, departure, revisit),
        )
        return result


def _name(poses: InputKey | str) -> str:
    return poses.path if isinstance(poses, InputKey) else poses
