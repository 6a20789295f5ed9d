"""The annotation page's files: the pairs ``-o annotations=`` reads, and a sidecar saying who marked what, when.

``pairs.json`` is exactly ``{"<scene_id>": {"departure_frame": D, "revisit_frame": R}}`` (0-based), holding
the scenes whose pair is complete and valid (``0 <= D <= R < frames``); nothing else is in it, so the
scorer reads it as it is. ``pairs.provenance.json`` (the sidecar) is the record of everything: each mark
with its frame, source (the annotator, or the dataset's prefilled departure), who and when; every change
in order (``history``); each session (annotator, videos, dataset, decoder); and where the page was.

Every change is written at once, atomically: the sidecar first, then the pairs. A kill between the two
leaves a sidecar one change ahead; the next session sees that the pairs file is the one the sidecar's
previous state wrote (``previous_pairs_sha256``) and writes the current one. A pairs file that matches
neither was edited by something else and is refused, never overwritten. One session at a time holds a
file (an flock beside it); the marks of a rollout are refused for another rollout (the video's SHA-256). A save
killed between writing its temporary file and renaming it leaves that file; the next session removes it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pinbench.core.files import (
    FileError,
    blocking_parent,
    loads_finite_json,
    open_regular,
    read_data_file,
    read_json_file,
    sweep_temporaries,
    write_atomic,
)

KIND = "pinbench remembench revisit annotations"
SCHEMA = 1
MARKS = ("departure", "revisit")
SOURCES = ("annotator", "dataset")
MAX_NAME = 100


class AnnotationError(ValueError):
    """A problem with the annotation files or a mark (one line naming the file or the scene)."""


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def sidecar_path(out: Path) -> Path:
    """``pairs.json`` -> ``pairs.provenance.json`` beside it."""
    return out.with_name(f"{out.stem}.provenance.json")


def check_annotator(name: str) -> str:
    """An annotator name as it is recorded: printable, one line, 1..100 characters."""
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME or not name.isprintable():
        raise AnnotationError(f"annotator {name!r}: give a printable name of 1 to {MAX_NAME} characters")
    return name.strip()


@dataclass(frozen=True)
class Mark:
    frame: int
    source: str  # "annotator" | "dataset"
    by: str
    at: str

    def to_json(self) -> dict[str, Any]:
        return {"frame": self.frame, "source": self.source, "by": self.by, "at": self.at}


@dataclass(frozen=True)
class Rollout:
    """The video a scene's marks belong to (file name in the videos folder, SHA-256, decoded frame count)."""

    video: str
    sha256: str
    n_frames: int


@dataclass
class SceneMarks:
    rollout: Rollout | None = None
    departure: Mark | None = None
    revisit: Mark | None = None

    def mark(self, name: str) -> Mark | None:
        return self.departure if name == "departure" else self.revisit

    @property
    def pair(self) -> tuple[int, int] | None:
        """(departure, revisit) when both are marked in the scorer's order, else None."""
        if self.departure is None or self.revisit is None or self.departure.frame > self.revisit.frame:
            return None
        return self.departure.frame, self.revisit.frame

    @property
    def state(self) -> str:
        if self.pair is not None:
            return "complete"
        if self.departure is not None and self.revisit is not None:
            return "revisit before departure"
        if self.departure is not None:
            return "departure only"
        return "revisit only" if self.revisit is not None else "not annotated"

    def to_json(self) -> dict[str, Any]:
        return {"video": self.rollout.video if self.rollout else None,
                "video_sha256": self.rollout.sha256 if self.rollout else None,
                "n_frames": self.rollout.n_frames if self.rollout else None,
                **{name: (m.to_json() if (m := self.mark(name)) else None) for name in MARKS}}


@dataclass(frozen=True)
class Change:
    at: str
    by: str
    scene_id: str
    mark: str
    frame: int
    source: str
    previous: int | None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Position:
    scene_id: str
    frame: int


def render_pairs(pairs: Mapping[str, tuple[int, int]]) -> str:
    """The ``-o annotations=`` file: scene order as given, two fields each, nothing else."""
    body = {scene: {"departure_frame": d, "revisit_frame": r} for scene, (d, r) in pairs.items()}
    return json.dumps(body, indent=2) + "\n"


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------------------------- reading


class _Reader:
    """Typed reads of the sidecar's JSON; every problem names the file and where in it."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, where: str, problem: str) -> AnnotationError:
        return AnnotationError(f"{self.path}: {where}: {problem}")

    def obj(self, value: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected an object, got {type(value).__name__}")
        return value

    def integer(self, value: Any, where: str, low: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self.fail(where, f"expected an integer >= {low}, got {value!r}")
        return value

    def text(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(where, f"expected a non-empty string, got {value!r}")
        return value

    def mark(self, value: Any, where: str, n_frames: int | None) -> Mark | None:
        if value is None:
            return None
        data = self.obj(value, where)
        frame = self.integer(data.get("frame"), f"{where}.frame")
        if n_frames is not None and frame >= n_frames:
            raise self.fail(f"{where}.frame", f"frame {frame} is outside the rollout's {n_frames} frames")
        source = data.get("source")
        if source not in SOURCES:
            raise self.fail(f"{where}.source", f"expected one of {', '.join(SOURCES)}, got {source!r}")
        return Mark(frame, source, self.text(data.get("by"), f"{where}.by"), self.text(data.get("at"), f"{where}.at"))

    def scene(self, value: Any, where: str) -> SceneMarks:
        data = self.obj(value, where)
        rollout = None
        if data.get("video") is not None:
            n_frames = self.integer(data.get("n_frames"), f"{where}.n_frames", low=1)
            rollout = Rollout(self.text(data["video"], f"{where}.video"),
                              self.text(data.get("video_sha256"), f"{where}.video_sha256"), n_frames)
        n = rollout.n_frames if rollout else None
        return SceneMarks(rollout, *(self.mark(data.get(name), f"{where}.{name}", n) for name in MARKS))

    def change(self, value: Any, where: str) -> Change:
        data = self.obj(value, where)
        previous = data.get("previous")
        return Change(at=self.text(data.get("at"), f"{where}.at"), by=self.text(data.get("by"), f"{where}.by"),
                      scene_id=self.text(data.get("scene_id"), f"{where}.scene_id"),
                      mark=self.text(data.get("mark"), f"{where}.mark"),
                      frame=self.integer(data.get("frame"), f"{where}.frame"),
                      source=self.text(data.get("source"), f"{where}.source"),
                      previous=None if previous is None else self.integer(previous, f"{where}.previous"))


@dataclass
class Sidecar:
    scenes: dict[str, SceneMarks] = field(default_factory=dict)
    history: list[Change] = field(default_factory=list)
    sessions: list[dict[str, Any]] = field(default_factory=list)
    position: Position | None = None
    pairs_sha256: str | None = None
    previous_pairs_sha256: str | None = None


def read_sidecar(path: Path) -> Sidecar:
    reader = _Reader(path)
    data = read_json_file(path, AnnotationError, parse=loads_finite_json)
    top = reader.obj(data, "$")
    if top.get("kind") != KIND or top.get("schema") != SCHEMA:
        raise AnnotationError(f"{path}: not a sidecar of this annotation page (kind {top.get('kind')!r}, "
                              f"schema {top.get('schema')!r}; expected {KIND!r}, {SCHEMA})")
    scenes = {str(k): reader.scene(v, f"scenes.{k}") for k, v in reader.obj(top.get("scenes"), "scenes").items()}
    history = top.get("history")
    if not isinstance(history, list):
        raise reader.fail("history", "expected a list")
    sessions = top.get("sessions")
    if not isinstance(sessions, list) or not all(isinstance(s, dict) for s in sessions):
        raise reader.fail("sessions", "expected a list of objects")
    position = None
    if top.get("position") is not None:
        where = reader.obj(top["position"], "position")
        position = Position(reader.text(where.get("scene_id"), "position.scene_id"),
                            reader.integer(where.get("frame"), "position.frame"))
    hashes = [top.get(k) for k in ("pairs_sha256", "previous_pairs_sha256")]
    if not all(h is None or isinstance(h, str) for h in hashes):
        raise reader.fail("pairs_sha256", "expected hex strings or null")
    return Sidecar(scenes, [reader.change(c, f"history[{i}]") for i, c in enumerate(history)], list(sessions),
                   position, *hashes)


# ------------------------------------------------------------------------------------------- the store


def _regular_or_absent(path: Path, what: str) -> None:
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise AnnotationError(f"{path}: the {what} must be a regular file (not a link, folder or pipe)")


class AnnotationStore:
    """The marks of one annotation file, written through to disk on every change.

    ``rollouts`` maps each scene of the dataset (in its order) to the rollout found for it now, or None.
    Call ``close()`` (or use it as a context manager) to release the file for another session.
    """

    def __init__(self, out: Path, *, annotator: str, rollouts: Mapping[str, Rollout | None],
                 session: Mapping[str, Any], clock: Callable[[], str] = utc_now):
        self.out = Path(out)
        self.sidecar = sidecar_path(self.out)
        if self.out.suffix != ".json":
            raise AnnotationError(f"{self.out}: the annotations file must end in .json")
        self.annotator = check_annotator(annotator)
        self.clock = clock
        self.order = list(rollouts)
        for path, what in ((self.out, "annotations file"), (self.sidecar, "sidecar")):
            _regular_or_absent(path, what)
        if (blocked := blocking_parent(self.out)) is not None:   # mkdir said "[Errno 17] File exists: '<it>'"
            raise AnnotationError(f"{self.out}: {blocked[0]} is {blocked[1]}, not a folder")
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self._lock = self._acquire()
        for path in (self.out, self.sidecar):  # a save killed between its temporary file and the rename: no writer now
            sweep_temporaries(path.parent, path.name)
        try:
            self.data = self._load(rollouts)
            self.data.sessions.append({"started": self.clock(), "annotator": self.annotator, **session})
            self._save()
        except BaseException:
            self.close()
            raise

    # -- life cycle

    def _acquire(self) -> int:
        lock = self.out.with_name(f".{self.out.name}.lock")
        try:
            fd = open_regular(lock, os.O_RDWR | os.O_CREAT, mode=0o644)
        except FileError as exc:  # a FIFO or a device in its place: named, never waited on
            raise AnnotationError(f"{exc}; sessions of {self.out.name} take turns on it: delete it") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise AnnotationError(f"{self.out}: another annotation session has this file open; finish that one "
                                  "first (two sessions would overwrite each other's marks)") from None
        return fd

    def close(self) -> None:
        if self._lock is not None:
            os.close(self._lock)  # releases the flock
            self._lock = None

    def __enter__(self) -> AnnotationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _load(self, rollouts: Mapping[str, Rollout | None]) -> Sidecar:
        if not self.sidecar.exists():
            if self.out.exists():
                raise AnnotationError(f"{self.out}: exists without {self.sidecar.name}, so it was not written by "
                                      "this page; give another --out (the page never overwrites such a file)")
            data = Sidecar()
        else:
            data = read_sidecar(self.sidecar)
            self._check_pairs_file(data)
        for scene_id, marks in data.scenes.items():
            if scene_id not in rollouts:
                raise AnnotationError(f"{self.sidecar}: scene {scene_id!r} is not among the dataset's T2V scenes "
                                      "(annotated against another dataset?)")
            now = rollouts[scene_id]
            if marks.rollout and now and marks.rollout.sha256 != now.sha256:
                raise AnnotationError(
                    f"{self.sidecar}: scene {scene_id!r}: its video {now.video} is not the rollout that was "
                    f"annotated (sha256 {marks.rollout.sha256[:12]}..., now {now.sha256[:12]}...); marks of one "
                    "rollout do not apply to another: annotate the new rollouts into a new --out")
        for scene_id in self.order:
            marks = data.scenes.setdefault(scene_id, SceneMarks())
            if marks.rollout is None and rollouts[scene_id] is not None:
                marks.rollout = rollouts[scene_id]
        data.scenes = {s: data.scenes[s] for s in self.order}  # the dataset's order
        if data.position is not None and data.position.scene_id not in data.scenes:
            data.position = None
        return data

    def _check_pairs_file(self, data: Sidecar) -> None:
        """The pairs file is the sidecar's (or, after a kill between the two writes, its previous state's)."""
        if not self.out.exists():
            return
        found = _sha256_text(read_data_file(self.out, AnnotationError))
        if found not in (data.pairs_sha256, data.previous_pairs_sha256):
            raise AnnotationError(f"{self.out}: changed outside the annotation page (it is not what "
                                  f"{self.sidecar.name} records); move it or the sidecar away to go on")

    # -- reading

    def scene(self, scene_id: str) -> SceneMarks:
        try:
            return self.data.scenes[scene_id]
        except KeyError:
            raise AnnotationError(f"unknown scene {scene_id!r}") from None

    @property
    def position(self) -> Position | None:
        return self.data.position

    def pairs(self) -> dict[str, tuple[int, int]]:
        return {s: pair for s, marks in self.data.scenes.items() if (pair := marks.pair) is not None}

    def counts(self) -> dict[str, int]:
        states: dict[str, int] = {}
        for marks in self.data.scenes.values():
            states[marks.state] = states.get(marks.state, 0) + 1
        return states

    # -- changing

    def set_mark(self, scene_id: str, name: str, frame: int, *, source: str = "annotator",
                 by: str | None = None) -> SceneMarks:
        """Mark a frame of a scene's rollout and save; AnnotationError for a frame the rollout does not have."""
        if name not in MARKS:
            raise AnnotationError(f"mark {name!r}: expected one of {', '.join(MARKS)}")
        if source not in SOURCES:
            raise AnnotationError(f"source {source!r}: expected one of {', '.join(SOURCES)}")
        marks = self.scene(scene_id)
        if marks.rollout is None:
            raise AnnotationError(f"scene {scene_id!r} has no video to mark")
        if isinstance(frame, bool) or not isinstance(frame, int) or not 0 <= frame < marks.rollout.n_frames:
            raise AnnotationError(f"scene {scene_id!r}: frame {frame!r} is not a frame of its rollout "
                                  f"(0 to {marks.rollout.n_frames - 1})")
        previous = marks.mark(name)
        new = Mark(frame, source, by or self.annotator, self.clock())
        setattr(marks, name, new)
        self.data.history.append(Change(new.at, new.by, scene_id, name, frame, source,
                                        previous.frame if previous else None))

        def undo() -> None:
            setattr(marks, name, previous)
            self.data.history.pop()

        self._save_or_undo(undo)
        return marks

    def move(self, scene_id: str, frame: int) -> None:
        """Remember where the page is (the next session opens there)."""
        marks = self.scene(scene_id)
        limit = marks.rollout.n_frames if marks.rollout else 1
        if isinstance(frame, bool) or not isinstance(frame, int) or not 0 <= frame < limit:
            raise AnnotationError(f"scene {scene_id!r}: frame {frame!r} is outside 0 to {limit - 1}")
        before = self.data.position
        self.data.position = Position(scene_id, frame)
        self._save_or_undo(lambda: setattr(self.data, "position", before))

    def _save_or_undo(self, undo: Callable[[], None]) -> None:
        """Save the change just made, or undo it in memory when the disk refuses (full, read-only): one line for
        the page instead of a 500, and no mark in memory that a later save would write as if it had been kept."""
        try:
            self._save()
        except OSError as exc:
            undo()
            raise AnnotationError(f"{self.sidecar}: not saved ({exc.strerror or exc}); the change is undone") from None

    def _save(self) -> None:
        text = render_pairs(self.pairs())
        digest = _sha256_text(text)
        if digest != self.data.pairs_sha256:
            self.data.previous_pairs_sha256, self.data.pairs_sha256 = self.data.pairs_sha256, digest
        sidecar = {
            "kind": KIND, "schema": SCHEMA, "pairs_file": self.out.name,
            "pairs_sha256": self.data.pairs_sha256, "previous_pairs_sha256": self.data.previous_pairs_sha256,
            "position": self.data.position.__dict__ if self.data.position else None,
            "sessions": self.data.sessions,
            "scenes": {s: marks.to_json() for s, marks in self.data.scenes.items()},
            "history": [c.to_json() for c in self.data.history],
        }
        write_atomic(self.sidecar, json.dumps(sidecar, indent=2, allow_nan=False) + "\n")
        write_atomic(self.out, text)

