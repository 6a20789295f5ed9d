"""The scenes an annotation session offers: the dataset's T2V rows, each with its rollout, and the prefill.

Each scene carries its four prompts and where their segments nominally begin, the rollout found for it in
the videos folder (probed and hashed: its marks belong to exactly that file) or why there is none, and,
for rollouts of the paper's backbone, the dataset's departure frame. That departure is shared across
methods within a scene (the paper's seed usage guide), so it is the one mark the dataset can give a new
rollout of the same backbone and seed; the revisit is always the annotator's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pinbench.core.files import sha256_fd
from pinbench.core.names import CHECKPOINT_NAME
from pinbench.media.video import VideoError, VideoInfo, named_video_info, opened_video
from pinbench.ops.localweb import PathRefused, resolve_inside
from pinbench_recipes.remembench.annotation_store import AnnotationError, AnnotationStore, Rollout
from pinbench_recipes.remembench.dataset import DatasetError, PaperSettings, T2VRow, iter_jsonl, read_rows
from pinbench_recipes.remembench.prepare import TEST_FILES, find_video
from pinbench_recipes.remembench.release import Release
from pinbench_recipes.remembench.summary import PAIRS_FILE, read_pairs

PAPER_BACKBONE = "H3-AR (MiniMax-H3 with the RAVEN streaming LoRA)"


@dataclass(frozen=True)
class SegmentStart:
    """Where a prompt's segment nominally begins: seconds in the schedule, the frame showing that time."""

    seconds: float
    frame: int
    prompt: str


@dataclass(frozen=True)
class Scene:
    """One T2V scene of the dataset and the rollout found for it (or why there is none to annotate)."""

    row: T2VRow
    video: Path | None
    looked_for: tuple[str, ...]
    info: VideoInfo | None
    problem: str | None
    rollout: Rollout | None
    prefill: int | None
    prefill_note: str | None

    @property
    def scene_id(self) -> str:
        return self.row.scene_id

    @property
    def starts(self) -> tuple[SegmentStart, ...]:
        fps = self.info.fps if self.info else self.row.fps
        return tuple(SegmentStart(s, math.floor(s * fps + 1e-9), p)
                     for s, p in zip(self.row.prompt_start_seconds, self.row.prompts, strict=True))

    @property
    def warning(self) -> str | None:
        """Why the scorer would fail this rollout even when it is annotated."""
        if self.info is not None and self.info.n_frames != self.row.num_frames:
            return (f"{self.info.n_frames} frames, the T2V setting has {self.row.num_frames}: the scorer fails "
                    "this rollout")
        return None


@dataclass(frozen=True)
class Session:
    scenes: list[Scene]
    videos: Path
    unmatched_videos: list[str]  # files in the videos folder that are no scene of the dataset
    i2v_videos: list[str]  # rollouts of the dataset's I2V samples: Pi3X's camera poses pick their revisits
    decoder: str
    release: Release
    prefill_source: str | None

    @property
    def by_id(self) -> dict[str, Scene]:
        return {s.scene_id: s for s in self.scenes}

    def provenance(self) -> dict[str, Any]:
        """What a session records in the sidecar: where the videos and the dataset came from, the decoder."""
        return {"videos": str(self.videos.resolve()), "decoder": self.decoder, "dataset": self.release.provenance(),
                "prefill": self.prefill_source}


def _scene_id_problem(scene_id: str) -> str | None:
    """Scene ids name files (``<scene_id>.mp4``): nothing that could leave the videos folder."""
    if not CHECKPOINT_NAME.fullmatch(scene_id) or ".." in scene_id:
        return (f"scene id {scene_id!r} cannot name a video file (letters, digits, '.', '_', '-'; no '..'); "
                "it is not offered for annotation")
    return None


def dataset_departures(release: Release) -> tuple[dict[str, int], dict[str, str]]:
    """Each scene's published departure frame (one frame shared by every method and budget), and notes for
    scenes whose published rows disagree (no prefill for those)."""
    frames: dict[str, set[int]] = {}
    for row in read_pairs(release.path(PAIRS_FILE)):
        frames.setdefault(row.scene_id, set()).add(row.departure_frame)
    agreed = {s: next(iter(f)) for s, f in frames.items() if len(f) == 1}
    notes = {s: f"the dataset's rows disagree on its departure ({', '.join(map(str, sorted(f)))}); not prefilled"
             for s, f in frames.items() if len(f) > 1}
    return agreed, notes


def _rollouts_of_none(videos: Path, ids: set[str]) -> list[str]:
    """The rollouts (``<id>.mp4``, ``<id>/rollout.mp4``) in ``videos`` whose id is none of ``ids``."""
    found = [p.name for p in videos.glob("*.mp4") if p.stem not in ids]
    found += [f"{p.parent.name}/rollout.mp4" for p in videos.glob("*/rollout.mp4") if p.parent.name not in ids]
    return sorted(found)


def _i2v_ids(release: Release) -> set[str]:
    """The sample ids of the dataset's I2V rows, read only to tell their rollouts from strangers in a folder that
    holds both splits (the fixture's does); an I2V file that cannot be read tells nothing (annotation is T2V's)."""
    try:
        rows = iter_jsonl(release.path(TEST_FILES["i2v"]))
        return {data["sample_id"] for _, data in rows if isinstance(data.get("sample_id"), str)}
    except DatasetError:
        return set()


def open_session(videos: Path, release: Release, paper: PaperSettings, *, decoder: str,
                 paper_backbone: bool) -> Session:
    """The dataset's T2V scenes, each with its rollout in ``videos`` (probed, hashed) and the prefill."""
    if not videos.is_dir():
        raise AnnotationError(f"{videos}: the videos folder is not a directory")
    rows = [r for r in read_rows(release.path(TEST_FILES["t2v"]), "t2v", paper) if isinstance(r, T2VRow)]
    departures, notes = dataset_departures(release) if paper_backbone else ({}, {})
    scenes = []
    for row in rows:
        problem = _scene_id_problem(row.scene_id)
        video, looked = (None, []) if problem else find_video(videos, row.scene_id)
        info = rollout = None
        if problem is None and video is None:
            problem = "no video: looked for " + ", ".join(looked)
        elif video is not None:
            try:
                # the page serves its frames: never a file a link leads to outside the folder (/etc/shadow, $HOME)
                resolve_inside(videos, video.relative_to(videos).as_posix())
                with opened_video(video) as fd:  # one open: the file checked is the file hashed
                    info = named_video_info(video, fd=fd)
                    rollout = Rollout(video.relative_to(videos).as_posix(), sha256_fd(fd), info.n_frames)
            except (PathRefused, VideoError) as exc:
                problem, info = f"unusable video: {exc}", None
        scenes.append(Scene(row, video if rollout else None, tuple(looked), info, problem, rollout,
                            departures.get(row.scene_id), notes.get(row.scene_id)))
    source = (f"{release.repo_id}@{release.revision}:{PAIRS_FILE} (the paper's departure frames, shared across "
              f"methods; valid for rollouts of the paper's backbone, {PAPER_BACKBONE})") if paper_backbone else None
    t2v = {r.scene_id for r in rows}
    strangers = _rollouts_of_none(videos, t2v | _i2v_ids(release))
    i2v_videos = [v for v in _rollouts_of_none(videos, t2v) if v not in strangers]
    return Session(scenes, videos, strangers, i2v_videos, decoder, release, source)


def prefill_departures(session: Session, store: AnnotationStore) -> int:
    """The dataset's departure for every scene with a rollout and no departure yet; returns how many."""
    filled = 0
    for scene in session.scenes:
        if scene.prefill is None or scene.rollout is None or store.scene(scene.scene_id).departure is not None:
            continue
        if scene.prefill >= scene.rollout.n_frames:
            continue  # the page lists it as a rollout shorter than the paper's
        store.set_mark(scene.scene_id, "departure", scene.prefill, source="dataset", by=session.prefill_source)
        filled += 1
    return filled
