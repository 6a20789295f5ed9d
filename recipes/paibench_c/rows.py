"""The 600 PAI-Bench-C tasks and the cosmos-framework input rows built from them, per modality.

Why here and explicit: the generation settings are the benchmark's contract (seed document, "Sampling
Settings"), and cosmos-framework silently fills anything a row omits with defaults that changed over
time (e.g. ``emphasize_control_in_prompt`` defaults to True since 469c102, ``num_video_frames_per_chunk``
to 93). Every setting is therefore written into every row, and the per-task fields (seed, fps, aspect
ratio, prompts) come from the pinned ``tasks.json`` exactly as the upstream recipe overlays them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pinbench.core.files import loads_finite_json, read_json_file, write_if_changed

MODALITIES = ("edge", "blur", "depth", "seg")
TASK_ID = re.compile(r"task_\d{4}")
ASPECT_RATIOS = ("1,1", "4,3", "3,4", "16,9", "9,16")
CONTROL_PATH_FIELD = {"edge": "canny_path", "blur": "blur_path", "depth": "depth_path", "seg": "seg_path"}
# edge and blur controls are computed by cosmos-framework from vision_path (the upstream recipe passes no
# control_path for them); depth and seg need the dataset's precomputed control videos.
PRECOMPUTED_CONTROL = frozenset({"depth", "seg"})
NUM_FRAMES = 121

# The seed's "Sampling Settings" table plus the transfer-spec fields the upstream recipe starts from
# (cookbooks/cosmos3/generator/transfer/specs/<modality>.json). fps, aspect_ratio and seed are per task.
SAMPLING: dict[str, Any] = {
    "model_mode": "video2video",
    "resolution": "720",
    "num_frames": NUM_FRAMES,
    "num_steps": 50,
    "guidance": 3.0,
    "shift": 10.0,
    "num_video_frames_per_chunk": NUM_FRAMES,
    "num_conditional_frames": 1,
    "num_first_chunk_conditional_frames": 0,
    "share_vision_temporal_positions": True,
    "negative_metadata_mode": "none",
    "negative_prompt_keep_metadata": False,
    "emphasize_control_in_prompt": False,
    # The video2video default at the pinned framework commit; written out because the encoder setting
    # changes every score computed from the file (DOVER, SAM, depth).
    "video_save_quality": 10,
    "num_outputs": 1,
}
CONTROL_GUIDANCE = {"edge": 1.5, "blur": 1.5, "depth": 1.5, "seg": 2.0}
HINT_SETTINGS: dict[str, dict[str, Any]] = {
    "edge": {"preset_edge_threshold": "medium"},
    "blur": {"preset_blur_strength": "medium"},
    "depth": {},
    "seg": {},
}
_TASK_FIELDS = ("task_id", "video_path", "canny_path", "blur_path", "depth_path", "seg_path", "prompt",
                "negative_prompt", "aspect_ratio", "fps", "seed")


class TaskListError(ValueError):
    """tasks.json is unusable; the message is one line naming the file, the task and the field."""


@dataclass(frozen=True)
class Task:
    """One row of tasks.json, validated."""

    task_id: str
    video_path: str
    canny_path: str
    blur_path: str
    depth_path: str
    seg_path: str
    prompt: str
    negative_prompt: str
    aspect_ratio: str
    fps: int
    seed: int

    def control_path(self, modality: str) -> str:
        return getattr(self, CONTROL_PATH_FIELD[modality])


def _relative_path(value: Any) -> bool:
    if not isinstance(value, str) or not value:
        return False
    parts = PurePosixPath(value).parts
    return not value.startswith("/") and ".." not in parts


def _check_row(path: Path, index: int, row: Any) -> Task:
    where = f"{path}: task #{index}"
    if not isinstance(row, Mapping):
        raise TaskListError(f"{where}: expected an object, got {type(row).__name__}")
    task_id = row.get("task_id")
    if isinstance(task_id, str) and TASK_ID.fullmatch(task_id):
        where = f"{path}: {task_id}"
    missing = [f for f in _TASK_FIELDS if f not in row]
    if missing:
        raise TaskListError(f"{where}: missing field(s) {', '.join(missing)}")
    if not (isinstance(task_id, str) and TASK_ID.fullmatch(task_id)):
        raise TaskListError(f"{where}: task_id {task_id!r} is not task_NNNN")
    for name in ("video_path", "canny_path", "blur_path", "depth_path", "seg_path"):
        if isinstance(row[name], str) and any(ord(c) < 0x20 or ord(c) == 0x7F for c in row[name]):
            # a NUL ended the request digests in "embedded null byte", naming neither file nor task
            raise TaskListError(f"{where}: {name} {row[name]!r} holds a control character")
        if not _relative_path(row[name]):
            raise TaskListError(f"{where}: {name} {row[name]!r} is not a relative path inside the dataset")
    for name in ("prompt", "negative_prompt"):
        if not isinstance(row[name], str) or not row[name].strip():
            raise TaskListError(f"{where}: {name} must be a non-empty string")
    if row["aspect_ratio"] not in ASPECT_RATIOS:
        raise TaskListError(f"{where}: aspect_ratio {row['aspect_ratio']!r} is not one of {', '.join(ASPECT_RATIOS)}")
    for name in ("fps", "seed"):
        value = row[name]
        minimum = 1 if name == "fps" else 0
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise TaskListError(f"{where}: {name} {value!r} must be an integer >= {minimum}")
    return Task(**{name: row[name] for name in _TASK_FIELDS})


def load_tasks(path: Path | str) -> list[Task]:
    """Read and validate tasks.json; tasks sorted by id, as the upstream recipe selects them."""
    path = Path(path)
    data = read_json_file(path, TaskListError, parse=loads_finite_json)
    if not isinstance(data, list) or not data:
        raise TaskListError(f"{path}: expected a non-empty JSON list of tasks")
    tasks = [_check_row(path, i, row) for i, row in enumerate(data)]
    seen: set[str] = set()
    for task in tasks:
        if task.task_id in seen:
            raise TaskListError(f"{path}: {task.task_id}: duplicate task_id")
        seen.add(task.task_id)
    return sorted(tasks, key=lambda t: t.task_id)


def select_tasks(tasks: Sequence[Task], limit: int | None) -> list[Task]:
    """The first ``limit`` tasks in id order (all with None), like PAIBENCH_C_NUM_SAMPLES upstream."""
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    return list(tasks if limit is None else tasks[:limit])


def build_row(task: Task, modality: str, dataset_root: Path | str) -> dict[str, Any]:
    """One cosmos-framework input row: sampling settings, the task's own fields, vision and control."""
    if modality not in MODALITIES:
        raise ValueError(f"unknown modality {modality!r}; expected one of {', '.join(MODALITIES)}")
    root = Path(dataset_root)
    row: dict[str, Any] = {"name": task.task_id, **SAMPLING}
    row.update(
        aspect_ratio=task.aspect_ratio,
        fps=task.fps,
        seed=task.seed,
        prompt=task.prompt,
        negative_prompt=task.negative_prompt,
        control_guidance=CONTROL_GUIDANCE[modality],
        # Every modality passes the GT video, "to match the internal run" (upstream recipe).
        vision_path=str(root / task.video_path),
    )
    hint = dict(HINT_SETTINGS[modality])
    if modality in PRECOMPUTED_CONTROL:
        hint["control_path"] = str(root / task.control_path(modality))
    row[modality] = hint
    return row


def build_rows(tasks: Sequence[Task], modality: str, dataset_root: Path | str) -> list[dict[str, Any]]:
    return [build_row(task, modality, dataset_root) for task in tasks]


def write_jsonl(rows: Sequence[Mapping[str, Any]], path: Path | str) -> Path:
    """Write rows as JSONL atomically (temp file, then rename), unless the file holds them already."""
    return write_if_changed(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
