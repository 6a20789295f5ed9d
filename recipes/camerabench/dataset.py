"""The CameraBench test set as t2v_metrics ships it (``camerabench/data`` at the pinned commit).

Layout of a data directory::

    binary_classification/<Split>.jsonl        one object per line: image, question, label (Yes/No), ...
    vqa_and_retrieval/<skill>/<task>.jsonl     pos_video, neg_video, pos_question, neg_question, ...
    caption_data.json                          a list of {video, question, answer}

Every sample gets a stable id that names its record: ``binary__<Split>__<video stem>``,
``vqa__<skill>__<task>__<line>`` and ``caption__<video stem>`` (video names are unique within a split
and within the caption list; checked on load). The skill of a VQA pair is its folder name, as the
official Script 1 uses it (the ``skill`` field inside the files can differ).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from functools import cached_property
from itertools import groupby
from operator import attrgetter
from pathlib import Path
from typing import Any, TypeVar

from pinbench.core.files import iter_jsonl, read_json_file
from pinbench.core.memory import cycle_collection_paused
from pinbench.core.runner import MAX_ID_BYTES, check_sample_id

FAMILIES = ("binary", "vqa", "caption")
VIDEO_SUFFIX = ".mp4"
CAPTION_SKILL = "complex_description"

# Official counts, read from the data files at the pinned t2v_metrics commit (they match the research
# note's table): split -> (samples, positives). A run on the official data must see exactly these.
BINARY_SPLITS: dict[str, tuple[int, int]] = {
    "Move_Down": (430, 37), "Move_In": (549, 161), "Move_Left": (488, 56), "Move_Out": (549, 53),
    "Move_Right": (487, 77), "Move_Up": (430, 29), "Pan_Left": (512, 79), "Pan_Right": (512, 77),
    "Roll_Clockwise": (470, 42), "Roll_Counterclockwise": (470, 48), "Static": (966, 94),
    "Tilt_Down": (456, 35), "Tilt_Up": (458, 58), "Zoom_In": (450, 50), "Zoom_Out": (452, 46),
}
# skill folder -> (task files, pairs)
VQA_SKILLS: dict[str, tuple[int, int]] = {
    "complex_description": (1, 1071), "confusable_motion": (10, 75), "has_motion": (24, 1011),
    "motion_and_steadiness": (4, 296), "motion_direction": (12, 447), "motion_speed": (2, 87),
    "only_motion": (14, 139), "scene_dynamics": (2, 87), "tracking_shot": (12, 330),
}
N_CAPTIONS = 1071
# The leaderboard's column order (leaderboard/table.html): translation, zooming, rotation, static.
LEADERBOARD_SPLITS = ("Move_In", "Move_Out", "Move_Up", "Move_Down", "Move_Right", "Move_Left",
                      "Zoom_In", "Zoom_Out", "Pan_Right", "Pan_Left", "Tilt_Up", "Tilt_Down",
                      "Roll_Clockwise", "Roll_Counterclockwise", "Static")


T = TypeVar("T")


def frozen_maker(cls: type[T]) -> Callable[..., T]:
    """A function making ``cls`` (a frozen slots dataclass, no defaults, no ``__post_init__``) from its fields in
    order: the same instance ``cls(*fields)`` makes, as immutable and hashable, in half the time. Why: the frozen
    ``__init__`` sets each field by name through ``object.__setattr__``; this sets the slots through their
    descriptors (at 10x, making the 112,220 samples that way was a sixth of the load)."""
    names = [f.name for f in fields(cls)]
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls}
    namespace.update((f"set_{name}", getattr(cls, name).__set__) for name in names)
    body = "".join(f"    set_{name}(obj, {name})\n" for name in names)
    exec(f"def make({', '.join(names)}):\n    obj = new(cls)\n{body}    return obj\n", namespace)  # noqa: S102
    return namespace["make"]


class DatasetError(ValueError):
    """A data file is missing or malformed; the message is one line naming the file."""


@dataclass(frozen=True, slots=True)
class BinarySample:
    sample_id: str
    split: str
    index: int  # row number in <Split>.jsonl, 0-based (blank lines not counted)
    video: str
    question: str
    label: int  # 1 for "Yes", 0 for "No"


@dataclass(frozen=True, slots=True)
class VqaPair:
    """Two videos and two questions: the pos question is true of the pos video, the neg question of the neg."""

    sample_id: str
    skill: str  # folder name
    task: str  # file stem
    index: int
    pos_video: str
    neg_video: str
    pos_question: str
    neg_question: str

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What identifies the pair in a score file row."""
        return (self.pos_video, self.neg_video, self.pos_question, self.neg_question)


_binary_sample = frozen_maker(BinarySample)
_vqa_pair = frozen_maker(VqaPair)


@dataclass(frozen=True, slots=True)
class CaptionSample:
    sample_id: str
    index: int
    video: str
    question: str
    reference: str


_SPLIT = attrgetter("split")


@dataclass(frozen=True)
class CameraBenchData:
    root: Path
    binary: tuple[BinarySample, ...]
    vqa: tuple[VqaPair, ...]
    captions: tuple[CaptionSample, ...]

    @cached_property
    def by_split(self) -> dict[str, tuple[BinarySample, ...]]:
        """The binary samples of each split, in dataset order, splits sorted: grouped once (every score file, the
        aggregation and the official files read a split's samples; at 10x a pass over all of them for each was
        a tenth of the parse)."""
        groups: dict[str, list[BinarySample]] = {}
        for split, run in groupby(self.binary, key=_SPLIT):   # in runs: a split's samples are loaded together
            groups.setdefault(split, []).extend(run)
        return {split: tuple(groups[split]) for split in sorted(groups)}

    @property
    def splits(self) -> list[str]:
        return list(self.by_split)

    @property
    def skills(self) -> list[str]:
        return sorted({p.skill for p in self.vqa})

    def split_samples(self, split: str) -> list[BinarySample]:
        return list(self.by_split.get(split, ()))

    def skill_pairs(self, skill: str) -> list[VqaPair]:
        return [p for p in self.vqa if p.skill == skill]

    def video_names(self) -> list[str]:
        """Every video any loaded sample refers to, sorted."""
        names = {s.video for s in self.binary} | {s.video for s in self.captions}
        for pair in self.vqa:
            names.update((pair.pos_video, pair.neg_video))
        return sorted(names)


def load_dataset(root: Path | str, families: Iterable[str] = FAMILIES) -> CameraBenchData:
    """Read the data directory (only the families asked for); DatasetError on any malformed file."""
    root = Path(root)
    families = tuple(families)
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        raise DatasetError(f"unknown families {unknown}; expected some of {list(FAMILIES)}")
    if not root.is_dir():
        raise DatasetError(f"{root}: data directory not found")
    with cycle_collection_paused():
        return CameraBenchData(
            root=root,
            binary=tuple(_load_binary(root / "binary_classification")) if "binary" in families else (),
            vqa=tuple(_load_vqa(root / "vqa_and_retrieval")) if "vqa" in families else (),
            captions=tuple(_load_captions(root / "caption_data.json")) if "caption" in families else (),
        )


def limit_dataset(data: CameraBenchData, n: int) -> CameraBenchData:
    """A smoke subset: the first ``n`` samples of every split, the first ``n`` pairs of every skill, ``n`` captions."""
    if n < 1:
        raise DatasetError(f"limit must be >= 1, got {n}")
    binary = [s for split in data.splits for s in data.split_samples(split)[:n]]
    vqa = [p for skill in data.skills for p in data.skill_pairs(skill)[:n]]
    return CameraBenchData(root=data.root, binary=tuple(binary), vqa=tuple(vqa), captions=data.captions[:n])


def official_count_problems(data: CameraBenchData) -> list[str]:
    """How the loaded data differs from the official counts (empty when it matches for its families)."""
    problems = []
    if data.binary:
        for split, (n, pos) in BINARY_SPLITS.items():
            samples = data.split_samples(split)
            got = (len(samples), sum(s.label for s in samples))
            if got != (n, pos):
                problems.append(f"binary {split}: {got[0]} samples / {got[1]} positives, official {n} / {pos}")
        extra = sorted(set(data.splits) - set(BINARY_SPLITS))
        if extra:
            problems.append(f"binary: splits not in the benchmark: {extra}")
    if data.vqa:
        for skill, (n_tasks, n_pairs) in VQA_SKILLS.items():
            pairs = data.skill_pairs(skill)
            got = (len({p.task for p in pairs}), len(pairs))
            if got != (n_tasks, n_pairs):
                problems.append(f"vqa {skill}: {got[0]} task files / {got[1]} pairs, "
                                f"official {n_tasks} / {n_pairs}")
        extra = sorted(set(data.skills) - set(VQA_SKILLS))
        if extra:
            problems.append(f"vqa: skills not in the benchmark: {extra}")
    if data.captions and len(data.captions) != N_CAPTIONS:
        problems.append(f"caption: {len(data.captions)} samples, official {N_CAPTIONS}")
    return problems


# ------------------------------------------------------------------------------------------- loading


def video_stem(name: str) -> str:
    """``4uGfFYzxWEg.5.0.mp4`` -> ``4uGfFYzxWEg.5.0`` (the part of a sample id naming the video)."""
    return name[: -len(VIDEO_SUFFIX)] if name.endswith(VIDEO_SUFFIX) else name


def _field(row: dict[str, Any], key: str, where: str) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value:
        raise DatasetError(f"{where}: field {key!r} must be a non-empty string, got {value!r:.60}")
    return value


def _text(row: dict[str, Any], key: str, where: str) -> str:
    """A question: one object per distinct text (15 binary questions for 7,679 samples; 873 VQA ones for 7,086)."""
    return sys.intern(_field(row, key, where))


def _video(row: dict[str, Any], key: str, where: str) -> str:
    """A video's file name: one object per distinct name, as ``_text`` (969 binary videos for 7,679 samples; 1,071
    VQA ones for 7,086), held through a run's finish."""
    name = _field(row, key, where)
    if "/" in name or "\\" in name or name.startswith(".") or not name.endswith(VIDEO_SUFFIX):
        raise DatasetError(f"{where}: {key} {name!r} is not a plain .mp4 file name")
    return sys.intern(name)


def _sample_id(text: str, where: str) -> str:
    try:
        return check_sample_id(text)
    except ValueError as exc:
        raise DatasetError(f"{where}: {exc}") from None


def _jsonl_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise DatasetError(f"{folder}: folder not found")
    files = sorted(folder.glob("*.jsonl"))
    if not files:
        raise DatasetError(f"{folder}: no .jsonl files")
    for path in files:
        if not path.is_file():
            raise DatasetError(f"{path}: not a regular file")
    return files


def _id_room(prefix: str) -> int:
    """How many characters of printable ASCII with no path separator may follow ``prefix`` in a safe sample id; -1
    when the prefix itself is not such text or unsafe. Checked once per file, so that a row's id needs only its
    length (``check_sample_id`` on every id was a fifth of the rows' checks)."""
    if not (prefix.isascii() and prefix.isprintable()):
        return -1
    try:
        check_sample_id(prefix)
    except ValueError:
        return -1
    return MAX_ID_BYTES - len(prefix)


def _load_binary(folder: Path) -> list[BinarySample]:
    """Each row is taken in one test when it passes every check of ``_checked_binary`` (why: those checks, built to
    name what is wrong, cost about as much as parsing the row); any other goes through them for the message."""
    samples = []
    intern = sys.intern
    for path in _jsonl_files(folder):
        split = path.stem
        prefix = f"binary__{split}__"
        room = _id_room(prefix)
        seen: dict[str, int] = {}   # video -> its line
        for index, (line, row) in enumerate(iter_jsonl(path, error=DatasetError)):
            get = row.get
            video, question, label = get("image"), get("question"), get("label")
            if (type(video) is str and video.endswith(VIDEO_SUFFIX) and "/" not in video and "\\" not in video
                    and video[0] != "." and video.isascii() and video.isprintable()   # the id, less its length
                    and len(video) - len(VIDEO_SUFFIX) <= room and video not in seen
                    and (label == "Yes" or label == "No") and type(question) is str and question):
                video = intern(video)
                sample = _binary_sample(prefix + video[: -len(VIDEO_SUFFIX)], split, index, video,
                                        intern(question), 1 if label == "Yes" else 0)
            else:
                sample = _checked_binary(row, f"{path}:{line}", split, index, seen)
            seen[sample.video] = line
            samples.append(sample)
    return samples


def _checked_binary(row: dict[str, Any], where: str, split: str, index: int, seen: dict[str, int]) -> BinarySample:
    """The sample, checked field by field: DatasetError naming ``where`` (file:line) and the first thing wrong."""
    video = _video(row, "image", where)
    label_text = _field(row, "label", where)
    if label_text not in ("Yes", "No"):
        raise DatasetError(f"{where}: label {label_text!r} is neither 'Yes' nor 'No'")
    if video in seen:
        raise DatasetError(f"{where}: video {video} already at line {seen[video]}; "
                           "sample ids need unique videos within a split")
    return BinarySample(
        sample_id=_sample_id(f"binary__{split}__{video_stem(video)}", where), split=split,
        index=index, video=video, question=_text(row, "question", where),
        label=1 if label_text == "Yes" else 0)


def _load_vqa(folder: Path) -> list[VqaPair]:
    """Each row is taken in one test when it passes every check of ``_checked_pair`` (as in ``_load_binary``)."""
    if not folder.is_dir():
        raise DatasetError(f"{folder}: folder not found")
    skills = sorted(p for p in folder.iterdir() if p.is_dir())
    if not skills:
        raise DatasetError(f"{folder}: no skill folders")
    pairs = []
    intern = sys.intern
    for skill_dir in skills:
        seen: dict[tuple[str, str, str, str], tuple[Path, int]] = {}   # pair key -> the file and line it is on
        skill = skill_dir.name
        for path in _jsonl_files(skill_dir):
            task = path.stem   # once per file: a Path's stem is computed anew on every access
            prefix = f"vqa__{skill}__{task}__"
            longest = len(prefix) + _id_room(prefix)   # shorter than any id when the prefix is unsafe
            for index, (line, row) in enumerate(iter_jsonl(path, error=DatasetError)):
                get = row.get
                pos_video, neg_video = get("pos_video"), get("neg_video")
                pos_question, neg_question = get("pos_question"), get("neg_question")
                sample_id = f"{prefix}{index:04d}"
                if (type(pos_video) is str and pos_video.endswith(VIDEO_SUFFIX) and "/" not in pos_video
                        and "\\" not in pos_video and pos_video[0] != "."
                        and type(neg_video) is str and neg_video.endswith(VIDEO_SUFFIX) and "/" not in neg_video
                        and "\\" not in neg_video and neg_video[0] != "."
                        and type(pos_question) is str and pos_question
                        and type(neg_question) is str and neg_question and len(sample_id) <= longest):
                    key = (intern(pos_video), intern(neg_video), intern(pos_question), intern(neg_question))
                    pair = _vqa_pair(sample_id, skill, task, index, *key)
                else:
                    pair = _checked_pair(row, f"{path}:{line}", skill, task, index)
                    key = pair.key
                first = seen.get(key)
                if first is not None:
                    raise DatasetError(f"{path}:{line}: same videos and questions as {first[0]}:{first[1]}; "
                                       "score file rows could not be told apart")
                seen[key] = (path, line)
                pairs.append(pair)
    return pairs


def _checked_pair(row: dict[str, Any], where: str, skill: str, task: str, index: int) -> VqaPair:
    """The pair, checked field by field: DatasetError naming ``where`` (file:line) and the first thing wrong."""
    return VqaPair(
        sample_id=_sample_id(f"vqa__{skill}__{task}__{index:04d}", where),
        skill=skill, task=task, index=index,
        pos_video=_video(row, "pos_video", where), neg_video=_video(row, "neg_video", where),
        pos_question=_text(row, "pos_question", where),
        neg_question=_text(row, "neg_question", where))


def _load_captions(path: Path) -> list[CaptionSample]:
    data = read_json_file(path, DatasetError)
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a JSON list, got {type(data).__name__}")
    samples = []
    seen: dict[str, int] = {}
    for index, row in enumerate(data):
        where = f"{path}[{index}]"
        if not isinstance(row, dict):
            raise DatasetError(f"{where}: expected an object, got {type(row).__name__}")
        video = _video(row, "video", where)
        if video in seen:
            raise DatasetError(f"{where}: video {video} already at [{seen[video]}]")
        seen[video] = index
        samples.append(CaptionSample(
            sample_id=_sample_id(f"caption__{video_stem(video)}", where), index=index, video=video,
            question=_field(row, "question", where), reference=_field(row, "answer", where)))
    return samples
