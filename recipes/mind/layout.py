"""MIND's directory layouts, sample keys and the frame arithmetic of ``process.py`` at 8f9c59c.

Why one module: the plan, the official run's working directory, the Result.json import and the
native cross-check must agree on what a sample is and on how many frames ``process.py`` scores. The
arithmetic here is read from the pinned code (``src/process.py``, ``src/utils/utils.py``):

* ``real_time = min(total_time - mark_time, sample_frames)``, then ``min(real_time, video_max_time)``;
* frames are read in chunks of ``process_batch_size * 10 = 100`` and the loop stops on the chunk that
  reaches ``real_time`` without scoring it, so ``100 * floor((real_time - 1) / 100)`` frames are scored
  (97 -> 0, 100 -> 0, 101 -> 100, 240 -> 200);
* frame counts are the container's ``stream.frames`` (what ``get_video_length`` returns);
* ``lcm_metric`` scores its frame pairs in sub-batches of ``process_batch_size = 10``; a sub-batch of one
  pair raises ``TypeError: 'float' object is not iterable``, which only a mirror rollout can reach: its
  ``N / 2`` pairs end in one when ``N`` is 2, 22, 42, ... (``N % 20 == 2``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import av

from pinbench.core.files import FileError, read_json_file
from pinbench.media.video import open_video

PERSPECTIVES = ("1st_data", "3rd_data")
CONTINUATION_TESTS = ("mem_test", "action_space_test")   # scored against GT from mark_time on
MIRROR_TEST = "mirror_test"                               # no GT: a rollout against its time-reversed half
TEST_TYPES = (*CONTINUATION_TESTS, MIRROR_TEST)
OFFICIAL_METRICS = ("lcm", "visual", "dino", "action", "gsc")   # process.py's --metrics names
CONTINUATION_METRICS = ("lcm", "visual", "dino", "action")
CHUNK_FRAMES = 100          # process_batch_size (10) * 10: the read and scoring unit
PROCESS_BATCH = 10          # process_batch_size: frame pairs per lcm_metric sub-batch
ONE_PAIR_BATCH_ERROR = "'float' object is not iterable"   # lcm_metric on a sub-batch of one pair
ACTION_FRAMES = 97          # action.py crops both videos to 97 frames
MIN_VALID_RPE_STEPS = 8     # action.py returns no block below this many valid steps
GT_VIDEO = "video.mp4"
GT_ACTIONS = "action.json"
GT_POSES = "images.txt"
GENERATED_VIDEO = "video.mp4"
ACTION_KEYS = ("ws", "ad", "ud", "lr")


class LayoutError(FileError):
    """A file of the GT or generated layout is unusable; ``str(e)`` is one line naming it."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(path, " ".join(str(reason).split()))


@dataclass(frozen=True, order=True)
class SampleKey:
    """One record of process.py: (perspective, test type, directory name)."""

    perspective: str
    test_type: str
    path: str

    @property
    def sample_id(self) -> str:
        """File-name-safe id; perspective and test type hold no '.', so it splits back unambiguously."""
        return f"{self.perspective}.{self.test_type}.{self.path}"

    @property
    def label(self) -> str:
        return f"{self.perspective}/{self.test_type}/{self.path}"

    @property
    def cohort(self) -> str:
        return f"{self.perspective}/{self.test_type}"


def key_from_sample_id(sample_id: str) -> SampleKey:
    perspective, test_type, path = sample_id.split(".", 2)
    return SampleKey(perspective, test_type, path)


def requested_tests(metrics: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The test directories process.py lists for these metrics (a missing one aborts its whole run)."""
    tests: list[str] = []
    if any(m in CONTINUATION_METRICS for m in metrics):
        tests += CONTINUATION_TESTS
    if "gsc" in metrics:
        tests.append(MIRROR_TEST)
    return tuple(tests)


# ---------------------------------------------------------------------------------- frame arithmetic


def real_time(mark_time: int, total_time: int, sample_frames: int, video_max_time: int | None) -> int:
    """Frames process.py reads from both videos of a continuation sample."""
    frames = min(total_time - mark_time, sample_frames)
    return min(frames, video_max_time) if video_max_time is not None else frames


def frames_scored(real: int) -> int:
    """Frames that reach the metrics: every full 100-frame chunk before the one that ends the read."""
    return CHUNK_FRAMES * ((real - 1) // CHUNK_FRAMES) if real > 0 else 0


def container_frames(path: Path, fd: int) -> int:
    """``av.open(path).streams.video[0].frames``: the count process.py uses (0 when the muxer omits it), read from
    ``fd``, a descriptor of ``path`` (``opened_video``)."""
    try:
        with open_video(path, fd) as container:
            if not container.streams.video:
                raise LayoutError(path, "no video stream")
            return int(container.streams.video[0].frames)
    except av.error.FFmpegError as exc:
        raise LayoutError(path, f"undecodable: {exc.strerror or exc}") from None


# ----------------------------------------------------------------------------------------- GT files


@dataclass(frozen=True)
class ActionFile:
    """What process.py reads from a GT ``action.json``: the two times and the action codes after mark_time."""

    mark_time: int
    total_time: int
    n_entries: int
    actions: tuple[str, ...]   # labels of data[mark_time : mark_time + 97], as extract_actions_from_json
    # the parsed 'data' list, for a generation request's codes (``continuation_codes``): the file is read once
    entries: tuple[Any, ...] = field(default=(), repr=False, compare=False)


_LABELS = {("ws", 1): "forward", ("ws", 2): "backward", ("ad", 1): "left", ("ad", 2): "right",
           ("ud", 1): "look_up", ("ud", 2): "look_down", ("lr", 1): "look_left", ("lr", 2): "look_right"}


def action_label(entry: dict[str, Any]) -> str:
    """The label extract_actions_from_json gives one entry: codes 1/2 per axis joined by '+', else no_op."""
    parts = [_LABELS[(axis, entry[axis])] for axis in ACTION_KEYS if (axis, entry[axis]) in _LABELS]
    return "+".join(parts) if parts else "no_op"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_finite_number(value: Any) -> bool:
    """A JSON number that is one: ``NaN``, ``Infinity`` and ``1e999`` (which parses as inf) are no action code."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _action_json(path: Path) -> dict[str, Any]:
    """The object of an action.json; LayoutError naming the file when there is none. Only a regular file is read
    (``read_json_file``): a FIFO would block the plan forever, a device (``/dev/zero``) fill the memory."""
    data = read_json_file(path, LayoutError)
    if not isinstance(data, dict):
        raise LayoutError(path, f"top level is a JSON {type(data).__name__}, expected an object")
    return data


def _check_codes(path: Path, entries: list[Any], start: int, stop: int) -> None:
    """Each of ``entries[start:stop]`` holds a finite number per action key; LayoutError naming the entry else."""
    for index in range(start, min(stop, len(entries))):
        entry = entries[index]
        bad = next((k for k in ACTION_KEYS if not _is_finite_number(entry.get(k))), None) \
            if isinstance(entry, dict) else "entry"
        if bad is not None:   # a NaN code was labelled no_op without a word
            found = json.dumps(entry)[:40] if not isinstance(entry, dict) else \
                f"{bad}: {json.dumps(entry[bad])[:40]}" if bad in entry else f"no {bad}"
            raise LayoutError(path, f"data[{index}] lacks finite numeric {'/'.join(ACTION_KEYS)} action codes "
                                    f"({found})")


def read_action_file(path: Path) -> ActionFile:
    """Parse and check a GT action.json; LayoutError (one line, naming the file) on anything process.py trips on."""
    data = _action_json(path)
    mark, total = data.get("mark_time"), data.get("total_time")
    if not _is_int(mark) or not _is_int(total):
        raise LayoutError(path, f"mark_time and total_time must be integers, got {mark!r} and {total!r}")
    if not 0 <= mark < total:
        raise LayoutError(path, f"need 0 <= mark_time < total_time, got mark_time={mark}, total_time={total}")
    entries = data.get("data")
    if not isinstance(entries, list):
        raise LayoutError(path, "has no 'data' list of per-frame actions")
    window = entries[mark: mark + ACTION_FRAMES]
    _check_codes(path, entries, mark, mark + ACTION_FRAMES)
    return ActionFile(mark, total, len(entries), tuple(action_label(e) for e in window), tuple(entries))


def continuation_codes(path: Path, actions: ActionFile) -> list[dict[str, Any]]:
    """The action codes of every continuation frame, ``data[mark_time:total_time]``, for a generation request.

    process.py reads only the first 97 of them (``read_action_file`` checks those); a generator follows all of
    them, so each must be there with its four codes: an entry past the 97th without one ended ``pinbench requests``
    in a KeyError, a list shorter than the continuation gave a request fewer actions than frames without a word.
    ``actions`` is what ``read_action_file`` parsed from ``path`` (named in errors); the file is not read again.
    Refused, not clipped: process.py's ``extract_actions_from_json`` clips ``data`` at its end, and the scoring
    plan does the same (``read_action_file``), but upstream makes no requests (its generation protocol is not
    released: ``specs/mind.md`` §3.5), and a clipped request would ask for frames without actions or a rollout
    shorter than the ``total_time - mark_time`` frames the plan requires."""
    entries = actions.entries
    mark, total = actions.mark_time, actions.total_time
    if len(entries) < total:
        raise LayoutError(path, f"'data' holds {len(entries)} entries: a rollout follows one action per frame of "
                                f"[mark_time, total_time) = [{mark}, {total})")
    _check_codes(path, entries, mark, total)
    return [{k: entries[i][k] for k in ACTION_KEYS} for i in range(mark, total)]


def count_pose_entries(path: Path) -> int:
    """Image entries in a COLMAP images.txt as parse_colmap_images_txt counts them (0 when absent)."""
    if not path.is_file():
        return 0
    lines = path.read_text(encoding="utf-8", errors="ignore").splitlines()
    count, i = 0, 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if not line or line.startswith("#") or len(line.split()) < 10:
            continue
        count += 1
        i += 1   # the POINTS2D line that follows every image line (ViPE writes it empty)
    return count


@dataclass(frozen=True)
class ContinuationSample:
    """A mem_test / action_space_test sample: its GT files and, when generated, its video."""

    key: SampleKey
    gt_dir: Path
    actions: ActionFile
    gt_frames: int
    gt_poses: int                 # entries of the shipped images.txt (ViPE reruns below 97)
    video: Path | None            # the generated video.mp4, None when the model produced none
    video_frames: int | None

    def real_time(self, video_max_time: int | None) -> int:
        assert self.video_frames is not None
        return real_time(self.actions.mark_time, self.actions.total_time, self.video_frames, video_max_time)

    def frames_scored(self, video_max_time: int | None) -> int:
        return frames_scored(self.real_time(video_max_time)) if self.video_frames is not None else 0


@dataclass(frozen=True)
class MirrorVideo:
    name: str
    path: Path
    frames: int

    @property
    def pairs(self) -> int:
        """Frame pairs GSC compares: frame i against frame N-1-i of the time-reversed second half."""
        return self.frames // 2


@dataclass(frozen=True)
class MirrorSample:
    """A mirror_test directory of the generated root: every ``*.mp4`` in it is a rollout (no GT)."""

    key: SampleKey
    directory: Path
    videos: tuple[MirrorVideo, ...]


Sample = ContinuationSample | MirrorSample


def mirror_fails_upstream(frames: int) -> bool:
    """True when ``lcm_metric`` meets a one-pair sub-batch on this (even) mirror rollout: ``frames % 20 == 2``."""
    return frames % 2 == 0 and (frames // 2) % PROCESS_BATCH == 1
