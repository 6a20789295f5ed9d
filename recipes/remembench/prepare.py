"""Turn the release, the options and the user's rollouts into scoring tasks (one per scene).

A task holds everything its result depends on (video SHA-256, frame pair, poses file, model labels,
recipe version), so a stored result is reused only when none of it changed. A rollout that is missing
still gets a task: it fails at scoring with the paths looked for, and stays in the denominator.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from pinbench.core.config import RecipeError, RunConfig
from pinbench.core.files import loads_json, read_json_file
from pinbench.core.inputs import InputDigests, InputKey
from pinbench.core.options import OptionValues, did_you_mean
from pinbench.core.runner import sample_id_problem
from pinbench.core.task import Task
from pinbench_recipes.remembench.dataset import (
    I2V_SETTINGS,
    PAPER,
    DatasetError,
    I2VRow,
    PaperSettings,
    Row,
    T2VRow,
    cohort_report,
    read_rows,
    select_settings,
)
from pinbench_recipes.remembench.fixture import SETTINGS as FIXTURE_SETTINGS
from pinbench_recipes.remembench.fixture import FixtureData
from pinbench_recipes.remembench.release import Release
from pinbench_recipes.remembench.summary import (
    BUDGETS,
    METHODS,
    PAIRS_FILE,
    PAPER_PAIRS_WARNING,
    annotations_for,
    group_name,
    read_pairs,
)
from pinbench_recipes.remembench.trajectory import load_trajectory

TEST_FILES = {"t2v": "data/t2v/test.jsonl", "i2v": "data/i2v/test.jsonl"}
REFERENCE_PAIRS_CHECKPOINT = "t2v-reference-pairs"


@dataclass
class Group:
    """Rows scored together and aggregated into one set of medians (a split, or an I2V setting)."""

    split: str
    setting: str | None
    paper: PaperSettings
    rows: list[Row]

    @property
    def prefix(self) -> str:
        return self.split if self.setting is None else f"{self.split}/{self.setting}"


@dataclass(frozen=True)
class Annotations:
    pairs: dict[str, tuple[int, int]]
    source: str  # where they came from, for the scorecard (a file's path as given)
    warning: str | None = None
    label: str | None = None  # the same without where it lies (a file's name), for tasks; default: source

    @property
    def task_label(self) -> str:
        return self.label or self.source


def arm_checkpoints() -> dict[str, tuple[str, int]]:
    """Checkpoint name -> (method, budget) of the paper's T2V arms (``t2v-mosaichunk-2chunk``)."""
    return {f"t2v-{group_name(m, b)}": (m, b) for m in METHODS for b in (1, 2)}


def load_groups(release: Release, split: str, settings: Sequence[str],
                paper: Mapping[str, PaperSettings] = PAPER) -> tuple[list[Group], list[Row]]:
    """Groups to score (I2V: in the order of ``I2V_SETTINGS``, whatever the order given), and every row of the
    split's test file (for the cohort report)."""
    path = release.path(TEST_FILES[split])
    all_rows = read_rows(path, split, paper[split])
    for row in all_rows:  # the annotation page skips such a scene; a run stores samples by id, so it cannot
        problem = sample_id_problem(row.sample_id)
        if problem:
            raise DatasetError(f"{path}:{row.line}: id {row.sample_id!r} {problem}; a sample id names files "
                               "(its rollout, its stored record)")
    if split == "t2v":
        return [Group("t2v", None, paper["t2v"], list(all_rows))], all_rows
    ordered = sorted(settings, key=lambda s: I2V_SETTINGS.index(s) if s in I2V_SETTINGS else len(I2V_SETTINGS))
    groups = [Group("i2v", s, paper["i2v"], select_settings(all_rows, [s])) for s in ordered]
    for row in (r for g in groups for r in g.rows if isinstance(r, I2VRow)):
        check_trajectory(release, row)
    return [g for g in groups if g.rows], all_rows


def cohort(release: Release, fixture: FixtureData | None, options: OptionValues,
           limit: int | None) -> tuple[list[Group], dict[str, dict[str, Any]]]:
    """The groups a run scores (the fixture: both splits; ``--limit``: the first rows) and, per split, the cohort
    report (which rows of the test set, and how they compare with the paper's)."""
    splits = ("t2v", "i2v") if fixture else (options.split,)
    settings = FIXTURE_SETTINGS if fixture else options.settings
    paper = fixture.paper if fixture else PAPER
    all_groups, all_rows = [], {}
    for split in splits:
        split_groups, all_rows[split] = load_groups(release, split, settings, paper)
        all_groups += split_groups
    groups = limit_groups(all_groups, limit)
    return groups, {split: cohort_report(all_rows[split], [r for g in groups if g.split == split for r in g.rows],
                                         paper[split]) for split in splits}


def check_trajectory(release: Release, row: I2VRow) -> None:
    """An I2V row's trajectory file is in the release, checksum-verified, with the row's pose count."""
    path = release.path(row.trajectory_path)
    trajectory = load_trajectory(path)
    if len(trajectory.poses) != row.pose_samples:
        raise DatasetError(f"{path}: {len(trajectory.poses)} poses, but {TEST_FILES['i2v']}:{row.line} "
                           f"says pose_samples={row.pose_samples}")


def limit_groups(groups: Sequence[Group], limit: int | None) -> list[Group]:
    """The first ``limit`` rows over all groups in order (a smoke run); groups left empty are dropped."""
    if limit is None:
        return list(groups)
    kept, left = [], limit
    for group in groups:
        if left <= 0:
            break
        kept.append(Group(group.split, group.setting, group.paper, list(group.rows[:left])))
        left -= len(kept[-1].rows)
    return kept


def read_annotation_file(path: Path) -> dict[str, tuple[int, int]]:
    """``{scene_id: {"departure_frame": int, "revisit_frame": int}}`` (0-based), validated.

    Read as a regular file (a FIFO would block the run forever), as UTF-8, and with each scene once: of two
    pairs for one scene, JSON keeps the last without a word, so the one scored would be a guess."""
    data = read_json_file(path, RecipeError, parse=partial(loads_json, object_pairs_hook=_unique_keys))
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: expected an object scene_id -> {{departure_frame, revisit_frame}}")
    pairs = {}
    for scene, entry in data.items():
        frames = [entry.get(k) if isinstance(entry, dict) else None for k in ("departure_frame", "revisit_frame")]
        if any(isinstance(f, bool) or not isinstance(f, int) for f in frames) or not 0 <= frames[0] <= frames[1]:
            raise RecipeError(f"{path}: scene {scene!r}: need integers 0 <= departure_frame <= revisit_frame, "
                              f"got {entry!r}")
        pairs[scene] = (frames[0], frames[1])
    return pairs


class _DuplicateKey(ValueError):
    """A JSON object that names one key twice."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' ``object_pairs_hook``: the object, or _DuplicateKey naming the key given twice."""
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise _DuplicateKey(f"{key!r} is given twice (JSON would keep the last without a word)")
        data[key] = value
    return data


def annotation_spec(spec: str | None, checkpoint: str) -> str:
    """Where the T2V pairs come from: ``spec``, else the paper's pairs of a paper arm's checkpoint. Known from the
    command line alone, so a run that cannot find them is refused before anything is downloaded."""
    if spec is not None:
        return spec
    arm = arm_checkpoints().get(checkpoint)
    if arm is not None:
        return f"paper:{arm[0]}:{arm[1]}"
    hint = did_you_mean(checkpoint, [*arm_checkpoints(), REFERENCE_PAIRS_CHECKPOINT])
    raise RecipeError("T2V needs departure/revisit annotations of your rollouts: -o annotations=FILE.json "
                      "({scene_id: {departure_frame, revisit_frame}}, 0-based)"
                      + (f"; --checkpoint {checkpoint!r} is not a paper arm{hint}" if hint else ""))


def check_annotations(cfg: RunConfig) -> None:
    """RecipeError when the T2V pairs a run needs cannot be read: none given for a checkpoint that is no paper arm,
    or a file that is missing or invalid. Said by the doctor and before any download (a mistyped path was found
    only once the release and the evaluator weights had been fetched)."""
    if cfg.fixture or cfg.options.split != "t2v" or cfg.checkpoint == REFERENCE_PAIRS_CHECKPOINT:
        return
    spec = annotation_spec(cfg.options.annotations, cfg.checkpoint)
    if spec.startswith("paper:"):
        _paper_arm(spec)
    else:
        read_annotation_file(Path(spec).expanduser())


def _paper_arm(spec: str) -> tuple[str, int]:
    """(method, budget) of ``paper:<Method>:<budget>``, or RecipeError: known without the release (a misspelt
    method passed the doctor and was refused only once the release had been downloaded)."""
    parts = spec.split(":")
    if len(parts) != 3 or parts[1] not in METHODS or parts[2] not in {str(b) for b in BUDGETS}:
        raise RecipeError(f"annotations {spec!r}: expected paper:<Base|MoC|MosaiChunk>:<1|2>")
    return parts[1], int(parts[2])


def load_annotations(spec: str | None, release: Release, checkpoint: str) -> Annotations:
    """T2V departure/revisit pairs from a file, or ``paper:<Method>:<budget>`` (the published ones)."""
    spec = annotation_spec(spec, checkpoint)
    if not spec.startswith("paper:"):
        path = Path(spec).expanduser()
        return Annotations(read_annotation_file(path), str(path), label=path.name)
    method, budget = _paper_arm(spec)
    try:
        pairs = annotations_for(read_pairs(release.path(PAIRS_FILE)), method, budget)
    except DatasetError as exc:
        raise RecipeError(f"annotations {spec!r}: expected paper:<Base|MoC|MosaiChunk>:<1|2> ({exc})") from None
    return Annotations(pairs, f"{release.repo_id}@{release.revision}:{PAIRS_FILE} ({method}, budget {budget})",
                       warning=PAPER_PAIRS_WARNING)


def find_video(videos: Path | None, sample_id: str) -> tuple[Path | None, list[str]]:
    """The rollout of one sample (``<id>.mp4`` or ``<id>/rollout.mp4``) and the names looked for under ``videos``."""
    names = [f"{sample_id}.mp4", f"{sample_id}/rollout.mp4"]
    if videos is None:
        return None, names
    found = next((videos / name for name in names if (videos / name).is_file()), None)
    return found, names


@dataclass(frozen=True, slots=True, kw_only=True)
class RowTask(Task):
    """One release row to score, with everything its record depends on. Input files are keyed by what they are
    (``pinbench.core.inputs.InputKey``), never by where their folders are; the device's kind is part of the key
    (CLIP, LPIPS and Pi3X on CPU and on CUDA differ in the last bits)."""

    scene_id: str
    split: str                      # "t2v" | "i2v"
    setting: str | None             # the I2V setting; None for T2V
    group: str
    video: InputKey | None          # None: not found under -o videos (``looked_for`` names what was tried)
    looked_for: list[str]
    num_frames: int
    size: list[int]                 # [width, height] of the paper's rollouts
    layout: list[list[int]]         # the paper's chunk layout
    models: dict[str, str]
    recipe_version: str
    decoder: str
    device: str
    departure_frame: int | None = None   # T2V: the annotated pair
    revisit_frame: int | None = None
    annotation_source: str | None = None
    translation: bool | None = None      # I2V: the row's trajectory kind
    poses: InputKey | str | None = None  # I2V: the poses file's key, or its name when -o poses_dir lacks it
    rollouts: list[str] | None = None    # every name of ``looked_for`` found, when more than one: which is it?


def build_tasks(groups: Sequence[Group], *, videos: Path | None, annotations: Annotations | None,
                poses_dir: Path | None, models: Mapping[str, str], recipe_version: str, digests: InputDigests,
                device: str, decoder: str = "opencv", not_generated: Collection[str] = ()) -> list[RowTask]:
    """One task per row, in group order. ``not_generated``: the samples whose rollouts this run's generation step
    did not make (``Run.generation_failures``): keyed without a video, so that a rollout another generator left in
    their place is never taken, with its stored score, for this generator's."""
    tasks = []
    for group in groups:
        layout = [list(c) for c in group.paper.chunk_layout()]
        for row in group.rows:
            video, looked = find_video(videos, row.sample_id)
            found = [name for name in looked if videos is not None and (videos / name).is_file()]
            if row.sample_id in not_generated:
                video, found = None, []
            split: dict[str, Any] = {}
            if isinstance(row, T2VRow):
                pair = annotations.pairs.get(row.scene_id) if annotations else None
                split = {"departure_frame": pair[0] if pair else None, "revisit_frame": pair[1] if pair else None,
                         "annotation_source": annotations.task_label if annotations else None}
            elif isinstance(row, I2VRow):
                poses = poses_dir / f"{row.sample_id}.npz" if poses_dir else None
                split = {"translation": row.translation,
                         "poses": (digests.key(poses, poses_dir) if poses.is_file() else poses.name)
                         if poses and poses_dir else None}
            tasks.append(RowTask(
                sample_id=row.sample_id, scene_id=row.scene_id, split=group.split, setting=group.setting,
                group=group.prefix, video=digests.key(video, videos) if video and videos else None,
                looked_for=looked, num_frames=group.paper.num_frames, size=[group.paper.width, group.paper.height],
                layout=layout, models=dict(models), recipe_version=recipe_version, decoder=decoder,
                device=device.partition(":")[0], rollouts=found if len(found) > 1 else None, **split))
    return tasks
