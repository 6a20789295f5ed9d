"""A folder of input files a score-only recipe scores: every entry named like an input is a sample.

Why here: a recipe that scores "a folder of your videos" must never shrink its denominator. An empty or
broken file, a dangling symlink, a symlink loop, a directory or FIFO named ``*.mp4``, a name that cannot be
a sample id, two files with one id: each is listed with its problem and fails as its own sample, by name.
Only a folder that cannot be read at all is an error (the inputs in it could not be counted).
"""

from __future__ import annotations

import errno
import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pinbench.core.config import RecipeError
from pinbench.core.runner import sample_id_problem

VIDEO_SUFFIXES = (".mp4", ".mkv", ".webm", ".avi", ".mov")


@dataclass(frozen=True)
class InputFile:
    """One entry under the inputs folder whose name ends in one of the suffixes looked for.

    ``problem`` says why it cannot be scored (a dangling symlink, a symlink loop, a directory or other
    non-file, a vanished file); such an entry is still a sample and fails by name, never dropped.
    """

    relative: str  # the path under the folder, "/"-separated (may hold any byte the name held)
    path: Path
    problem: str | None = None

    @property
    def shown(self) -> str:
        """The relative path for messages: one line, undecodable bytes and control characters escaped."""
        text = os.fsencode(self.relative).decode("utf-8", "backslashreplace")
        return repr(text)[1:-1] if not text.isprintable() else text


def list_inputs(root: Path, suffixes: Sequence[str] = VIDEO_SUFFIXES, *, what: str = "videos") -> list[InputFile]:
    """Every entry under ``root`` named like an input (recursively, hidden ones skipped), by relative path.

    Symlinked directories are not followed. RecipeError (one line) when ``root`` is not a directory, a folder
    under it cannot be read, or nothing is named like an input; ``what`` names the inputs in those messages.
    """
    if not root.is_dir():
        raise RecipeError(f"{root}: {what} directory not found")

    def unreadable(exc: OSError) -> None:
        raise RecipeError(f"{exc.filename}: cannot list the {what} folder ({exc.strerror})")

    found = []
    for folder, dirs, files in os.walk(root, onerror=unreadable):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in (*dirs, *files):
            if name.startswith(".") or Path(name).suffix.lower() not in suffixes:
                continue
            path = Path(folder) / name
            found.append(InputFile(path.relative_to(root).as_posix(), path, _entry_problem(path)))
    if not found:
        raise RecipeError(f"{root}: no {what} found (looked for {', '.join(suffixes)})")
    return sorted(found, key=lambda v: v.relative)


def _entry_problem(path: Path) -> str | None:
    """Why a listed entry is not a file that can be opened, or None."""
    try:
        os.stat(path)
    except FileNotFoundError:
        if path.is_symlink():
            return f"dangling symlink (its target {os.readlink(path)!r} does not exist)"
        return "vanished while the folder was listed"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symlink loop (following the link never reaches a file)"
        return f"cannot be read ({exc.strerror})"
    if path.is_dir():
        return "a directory, not a file"
    if not path.is_file():
        return "not a regular file (a FIFO, socket or device)"
    return None


def sample_id(root: Path, path: Path) -> str:
    """The relative path without its suffix, folders joined by ``__`` (ids are file names)."""
    return path.relative_to(root).with_suffix("").as_posix().replace("/", "__")


def sample_ids(root: Path, inputs: list[InputFile]) -> list[tuple[str, str | None]]:
    """(sample id, name problem) per input, in order; every id unique and safe as a file name.

    The id is :func:`sample_id` unless the name cannot give one: an id that is not valid UTF-8, longer
    than the runner allows, holds a control character or a backslash, or that two inputs share
    (``x.mp4`` beside ``x.mkv``). Such an input fails alone with the reason, under the id
    ``bad-name-<hash of its relative path>``; the rest of the run is not affected.
    """
    natural = [sample_id(root, v.path) for v in inputs]
    owners: dict[str, list[str]] = {}
    for sid, entry in zip(natural, inputs, strict=True):
        owners.setdefault(sid, []).append(entry.shown)
    taken = set(natural)
    out = []
    for sid, entry in zip(natural, inputs, strict=True):
        problem = sample_id_problem(sid)
        if problem is None and len(owners[sid]) > 1:
            others = ", ".join(repr(o) for o in owners[sid] if o != entry.shown)
            problem = f"is {sid!r}, as for {others}: rename one so each input has its own id"
        if problem is None:
            out.append((sid, None))
            continue
        digest = hashlib.sha256(os.fsencode(entry.relative)).hexdigest()
        width = 16
        while f"bad-name-{digest[:width]}" in taken:
            width += 8
        fallback = f"bad-name-{digest[:width]}"
        taken.add(fallback)
        out.append((fallback, f"bad file name: its sample id {problem}"))
    return out


class UnusableInput(ValueError):
    """An input that cannot be scored at all (bad name, dangling symlink, directory, ...), named with why."""


def input_path(task: Mapping[str, Any]) -> Path:
    """The file a task of :func:`input_tasks` scores; UnusableInput (its sample fails by name) when it has a problem."""
    if task.get("problem"):
        raise UnusableInput(f"{task['name']}: {task['problem']}")
    return Path(task["path"])


def input_tasks(root: Path, inputs: list[InputFile], **fields: Any) -> list[dict[str, Any]]:
    """One task per input: its id, name, resolved ``path``, size and mtime (so an edited file is scored again),
    plus ``fields`` (the options that change results). An input that cannot be scored (its entry or its name
    has a problem) gets a task holding the ``problem`` instead of a path: scoring it fails with that reason."""
    tasks = []
    for entry, (sid, name_problem) in zip(inputs, sample_ids(root, inputs), strict=True):
        task: dict[str, Any] = {"sample_id": sid, "name": entry.shown, **fields}
        problem = name_problem or entry.problem
        if problem is None:
            try:
                stat = entry.path.stat()
                task.update(path=str(entry.path.resolve()), size=stat.st_size, mtime_ns=stat.st_mtime_ns)
            except OSError as exc:
                problem = f"cannot be read ({exc.strerror})"
        if problem is not None:
            task["problem"] = problem
        tasks.append(task)
    return tasks
