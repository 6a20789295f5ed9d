"""Score one video: decode the needed frames once, split into clips, run flow, decide each clip.

The per-video record keeps every intermediate number (clip frame ranges, sampled frames, m per
transition, tau, n, active count), so a score of 0 can be explained from the JSONL alone.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pinbench.core.files import sha256_fd
from pinbench.core.inputs import InputTask
from pinbench.media.video import (
    VideoInfo,
    named_video_info,
    opened_video,
    read_video,
    write_video,
)
from pinbench_recipes.dynamic_degree import clips as clipping
from pinbench_recipes.dynamic_degree import scoring
from pinbench_recipes.dynamic_degree.flow import PREVIEW_LABEL, FlowEstimator

OFFICIAL_METRIC = "dynamic_degree"
PREVIEW_METRIC = "preview/dynamic_degree"


def metric_name(estimator: FlowEstimator) -> str:
    """Official RAFT scores and preview scores never share a metric name."""
    return OFFICIAL_METRIC if estimator.official else PREVIEW_METRIC


@dataclass(frozen=True)
class ClipSource:
    """Which frames the flow sees: decoded frames (default) or each clip re-encoded to MP4 first.

    The re-encode mirrors the worldarena pipeline, which writes every clip to MP4 and decodes it
    again; its writer's codec settings are not known, so libx264 / yuv420p / ``crf`` are ours.
    """

    reencode: bool = False
    crf: int = 23
    decoder: str = "pyav"

    def describe(self) -> str:
        if not self.reencode:
            return f"frames decoded with {self.decoder} (no re-encode)"
        return (f"frames decoded with {self.decoder}, per-clip MP4 re-encode (libx264 without mbtree, yuv420p, "
                f"crf {self.crf})")


@dataclass
class ClipFrames:
    """One clip's padded sampled frames, as rows of a shared array (no copies), and a key per transition.

    Transitions with the same key (the overlapping tail clip re-using frame pairs) are computed once.
    """

    clip: clipping.Clip
    sampled: list[int]
    source: np.ndarray  # (M, H_pad, W_pad, 3) uint8, possibly shared by several clips
    rows: list[int]  # rows of ``source`` holding this clip's sampled frames, in order
    keys: list[Hashable]

    def frame(self, j: int) -> np.ndarray:
        return self.source[self.rows[j]]


@dataclass(frozen=True)
class HasMetric:
    """Runner validator (picklable): a stored result is reusable only if it holds this metric, as a score in [0, 1]
    or None (no clip scored), and the fields its figure and caption read, of their types. A line of the store whose
    digest fits can still be written by hand: a score of 1e300 or -3 was averaged into the scorecard, and a score
    that is no number ended the merge with "Unknown format code 'f' for object of type 'str'"."""

    metric: str

    def __call__(self, result: dict[str, Any]) -> bool:
        score = result.get(self.metric, "absent")
        if score is not None and not (_real(score) and 0 <= score <= 1):
            return False
        if not (all(_real(result.get(k)) and result[k] > 0 for k in ("fps", "tau"))
                and all(type(result.get(k)) is int for k in ("n_clips", "clip_length", "sampling_interval"))
                and isinstance(result.get("clip_source"), str) and isinstance(result.get("clips"), list)):
            return False
        return all(isinstance(c, dict) and _real(c.get("start")) and _real(c.get("stop"))
                   and isinstance(c.get("sampled"), list) and isinstance(c.get("m"), list)
                   and all(_real(v) for v in (*c["sampled"], *c["m"])) for c in result["clips"])


def _real(value: Any) -> bool:
    """A finite number that JSON gave as one (a boolean is none)."""
    return type(value) in (int, float) and math.isfinite(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class VideoTask(InputTask):
    """One video to score, and what changes its score besides its bytes: the flow estimator, how clips are read,
    the recipe's version."""

    flow: dict[str, Any]
    clip_source: str
    recipe_version: str


def score_task(task: VideoTask, *, estimator: FlowEstimator, source: ClipSource, root: Path) -> dict[str, Any]:
    """The runner's per-sample function: one task (under ``root``) -> its record; a video whose bytes changed
    since its task was keyed fails (its record would not be the key's)."""
    record = score_video(task.path(root), estimator, source)
    keyed = task.input.sha256 if task.input else ""
    if record["video_sha256"] != keyed:
        raise ValueError(f"{task.name}: changed since the run read it (SHA-256 {keyed[:12]}... "
                         f"then, {record['video_sha256'][:12]}... now); run again")
    return record


def unscorable(info: VideoInfo) -> str | None:
    """Why no clip of the video has a transition to score (each has under 2 sampled frames), else None. It needs
    only the container's frame count and rate, so the doctor says it before a run: a 1-frame video passed the
    doctor, then failed in scoring."""
    clip_list = clipping.split_clips(info.n_frames, info.fps)
    if any(len(clipping.sampled_frames(clip, info.fps)) >= 2 for clip in clip_list):
        return None
    return (f"no clip has 2 or more sampled frames ({info.n_frames} frames at {info.fps:g} fps, "
            f"sampling interval {clipping.sampling_interval(info.fps)})")


def load_clips(path: Path, source: ClipSource, fd: int | None = None) -> tuple[VideoInfo, list[ClipFrames], str]:
    """The video's facts, its clips' padded sampled frames, and the decoder backend used. Read from ``fd``, a
    descriptor of ``path`` (``opened_video``), when given, else from one open of ``path``: the file checked is the
    file decoded."""
    with opened_video(path, fd) as fd:
        info = named_video_info(path, fd=fd)
        clip_list = clipping.split_clips(info.n_frames, info.fps)
        if source.reencode:
            clip_frames, backend = _reencoded_clips(path, fd, info, clip_list, source)
        else:
            clip_frames, backend = _decoded_clips(path, fd, info, clip_list, source.decoder)
    return info, clip_frames, backend


def score_video(path: Path, estimator: FlowEstimator, source: ClipSource | None = None) -> dict[str, Any]:
    """The per-video record; raises (VideoError, ValueError) with a one-line reason naming the file."""
    path = Path(path)
    source = source or ClipSource()
    with opened_video(path) as fd:  # one open: the file checked, decoded and hashed is one file
        info, clip_frames, backend = load_clips(path, source, fd)
        digest = sha256_fd(fd)
    if (reason := unscorable(info)) is not None:
        raise ValueError(f"{path}: {reason}")
    magnitudes = transition_magnitudes(clip_frames, estimator)
    tau = scoring.motion_threshold(info.height, info.width)

    clip_records = []
    for item in clip_frames:
        m = [magnitudes[key] for key in item.keys]
        decision = scoring.decide_clip(m, len(item.sampled), tau)
        clip_records.append({
            "name": item.clip.name, "start": item.clip.start, "stop": item.clip.stop,
            "sampled": item.sampled, "n_sampled": len(item.sampled), "n_required": decision.n_required,
            "m": m, "n_active": decision.n_active, "dynamic": decision.dynamic, "error": decision.error,
        })
    clip_scores = [c["dynamic"] for c in clip_records]
    score = scoring.video_score(clip_scores)
    padded_h, padded_w = clip_frames[0].source.shape[1:3]
    record: dict[str, Any] = {
        metric_name(estimator): score,
        "video": path.name,
        "video_sha256": digest,
        "n_frames": info.n_frames, "fps": info.fps, "width": info.width, "height": info.height,
        "duration_s": info.duration_s,
        "clip_length": clipping.clip_length(info.fps),
        "sampling_interval": clipping.sampling_interval(info.fps),
        "tau": tau,
        "padded_size": [padded_h, padded_w],
        "top_count": scoring.top_count(padded_h, padded_w),
        "n_clips": len(clip_records),
        "n_scored_clips": sum(s is not None for s in clip_scores),
        "clip_scores": clip_scores,
        "clips": clip_records,
        "flow_backend": estimator.name,
        "official": estimator.official,
        "clip_source": source.describe(),
        "decode_backend": backend,
    }
    if not estimator.official:
        record["notice"] = PREVIEW_LABEL
    return record


def _decoded_clips(path: Path, fd: int, info: VideoInfo, clip_list: list[clipping.Clip],
                   decoder: str) -> tuple[list[ClipFrames], str]:
    """Decode only the sampled frames of all clips, in one pass; overlapping clips share frames."""
    sampled = [clipping.sampled_frames(c, info.fps) for c in clip_list]
    needed = sorted({i for indices in sampled for i in indices})
    decoded = read_video(path, indices=needed, backend=decoder, fd=fd)
    padded = scoring.pad_frames(decoded.frames)
    position = {index: pos for pos, index in enumerate(needed)}
    out = []
    for clip, indices in zip(clip_list, sampled, strict=True):
        keys: list[Hashable] = list(zip(indices[:-1], indices[1:], strict=True))
        out.append(ClipFrames(clip, indices, padded, [position[i] for i in indices], keys))
    return out, decoded.backend


def _reencoded_clips(path: Path, fd: int, info: VideoInfo, clip_list: list[clipping.Clip],
                     source: ClipSource) -> tuple[list[ClipFrames], str]:
    """Write each clip's frames to MP4 at the video's fps, decode it again, sample that (worldarena)."""
    needed = sorted({i for c in clip_list for i in range(c.start, c.stop)})
    decoded = read_video(path, indices=needed, backend=source.decoder, fd=fd)
    position = {index: pos for pos, index in enumerate(needed)}
    out = []
    with tempfile.TemporaryDirectory(prefix="dd-clips-") as tmp:
        for clip in clip_list:
            frames = decoded.frames[[position[i] for i in range(clip.start, clip.stop)]]
            clip_path = write_video(Path(tmp) / f"{path.stem}_{clip.name}.mp4", frames, info.fps, crf=source.crf)
            again = read_video(clip_path, backend=source.decoder)
            local = list(range(0, len(again.frames), clipping.sampling_interval(again.fps)))
            sampled = [clip.start + i for i in local]
            keys: list[Hashable] = [(clip.index, j) for j in range(len(local) - 1)]
            frames = scoring.pad_frames(again.frames[local])
            out.append(ClipFrames(clip, sampled, frames, list(range(len(local))), keys))
    return out, decoded.backend


def transition_magnitudes(clip_frames: list[ClipFrames], estimator: FlowEstimator) -> dict[Hashable, float]:
    """m for every distinct transition of the video, flow computed in batches of the estimator's size."""
    pending: dict[Hashable, tuple[np.ndarray, np.ndarray]] = {}
    for item in clip_frames:
        for j, key in enumerate(item.keys):
            pending.setdefault(key, (item.frame(j), item.frame(j + 1)))
    keys = list(pending)
    result: dict[Hashable, float] = {}
    for start in range(0, len(keys), estimator.batch_size):
        batch = keys[start:start + estimator.batch_size]
        first = np.stack([pending[k][0] for k in batch])
        second = np.stack([pending[k][1] for k in batch])
        flows = estimator.flow(first, second)
        for key, field in zip(batch, flows, strict=True):
            result[key] = scoring.top_mean_magnitude(field)
    return result
