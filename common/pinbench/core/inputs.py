"""Inputs a recipe scores: a folder's entries as samples, and each input file keyed by what it is.

A folder of inputs never shrinks its denominator: an empty or broken file, a dangling symlink, a symlink loop,
a directory or FIFO named ``*.mp4``, a name that cannot be a sample id, two files with one id: each is listed
with its problem and fails as its own sample, by name. Only a folder that cannot be read at all is an error
(the inputs in it could not be counted).

A task names an input by its path under the input root, its size and the SHA-256 of its bytes, not by its
absolute path and mtime (the key before #24): the same videos mounted elsewhere (another node of a cluster,
``/inputs/videos`` in an image, the fixture written into another run directory) recomputed every sample, while a
key that names a path still said nothing of the file. The path relative to the root keeps two equal files apart.

A full SHA-256, not a sampled fingerprint: reading a file once costs far less than decoding and scoring it. Each file is
hashed once per run directory: its digest is cached in ``.pinbench-input-digests.json`` there, keyed by the SHA-256 of
the file's absolute path (``_path_key``) with its size, mtime_ns, inode and ctime_ns (``FileState``), so a rerun
reads no input again unless one of those changed (an edit in place that puts the mtime back moves the ctime;
``pinbench run --verify-inputs`` ignores the cache and hashes every input). Shards of one run build their tasks
under one lock: the first hashes, the others read.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from stat import S_ISREG
from typing import Any, TypeVar

from pinbench.core.config import RecipeError
from pinbench.core.files import (
    FileError,
    FileState,
    NotRegularFile,
    exclusive,
    mistyped_path,
    not_a_folder,
    open_regular,
    read_json_cache,
    regular_sha256,
    sha256_fd,
    shown_name,
    write_json_cache,
)
from pinbench.core.runner import sample_id_problem
from pinbench.core.task import Task

VIDEO_SUFFIXES = (".mp4", ".mkv", ".webm", ".avi", ".mov")
DIGESTS_FILE = ".pinbench-input-digests.json"
# what an entry that cannot be scored is (``InputFile.kind``; ``PAST_SUFFIX``: ``x.mp4.``), and ``bad name``: its name
# gives no sample id of its own
PAST_SUFFIX = "name past its suffix"
SPACED_SUFFIX = "space in its suffix"   # ``x. mp4``: its id would be ``x``, as for ``x.mp4``
ENTRY_KINDS = ("dangling link", "symlink loop", "unreadable", "vanished", "folder", "special file", PAST_SUFFIX,
               SPACED_SUFFIX, "bad name")
_LOCK = Path(".pinbench-locks") / ".input-digests"
_FORMAT = 3   # 1: without ctime_ns; 2: keyed by the absolute path itself


@dataclass(frozen=True)
class InputFile:
    """One entry under the inputs folder whose name ends in one of the suffixes looked for.

    ``problem`` says why it cannot be scored (a dangling symlink, a symlink loop, a directory or other
    non-file, a vanished file, a name that runs past its suffix: ``x.mp4.`` or ``x.mp4 ``) and ``kind`` what it is
    then (one of ``ENTRY_KINDS``: the doctor counts each kind apart); such an entry is still a sample and fails by
    name, never dropped.
    """

    relative: str  # the path under the folder, "/"-separated (may hold any byte the name held)
    path: Path
    problem: str | None = None
    kind: str | None = None

    @property
    def shown(self) -> str:
        """The relative path for messages: one line, undecodable bytes and control characters escaped."""
        return shown_name(self.relative)


def folder_not_found(root: Path, what: str) -> str:
    """The line for an inputs folder that is not there, with the closest folder beside it: a mistyped
    ``-o videos=my_vidoes`` names ``my_videos``; a dangling symlink, its target (``ls`` shows the link there)."""
    if os.path.islink(root):
        return f"{root}: {what} directory not found: a dangling symlink (to {os.readlink(root)!r})"
    return f"{root}: {what} directory not found{mistyped_path(root)}"


def list_inputs(root: Path, suffixes: Sequence[str] = VIDEO_SUFFIXES, *, what: str = "videos") -> list[InputFile]:
    """Every entry under ``root`` named like an input (recursively, hidden ones skipped), by relative path.

    Symlinked directories are not followed: each is an entry that fails by name (its inputs would otherwise
    vanish from the count without a word; under ``--runtime docker`` its target is not mounted). RecipeError (one
    line) when ``root`` is absent or no directory (a file or FIFO is named as what it is), a folder under it cannot
    be read, or nothing is named like an input; ``what`` names the inputs in those messages.
    """
    try:
        kind = not_a_folder(os.stat(root).st_mode)
    except FileNotFoundError:
        raise RecipeError(folder_not_found(root, what)) from None
    except OSError as exc:  # a symlink loop (its bare strerror gave no way on), a folder above it unreadable
        loop = exc.errno == errno.ELOOP
        way_on = f": a symlink loop; name the real folder that holds the {what}" if loop else ""
        raise RecipeError(f"{root}: cannot open the {what} directory ({exc.strerror}){way_on}") from None
    if kind:  # a video file or a FIFO named where its folder belongs: not "not found"
        raise RecipeError(f"{root}: {kind}, not a directory; name the folder that holds the {what}")

    def unreadable(exc: OSError) -> None:
        raise RecipeError(f"{exc.filename}: cannot list the {what} folder ({exc.strerror})")

    found = []
    for folder, dirs, files in os.walk(root, onerror=unreadable):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in (*dirs, *files):
            path = Path(folder) / name
            linked_folder = name in dirs and path.is_symlink()   # not walked: its inputs would go unseen
            if name.startswith("."):
                continue
            if Path(name).suffix.lower() in suffixes or linked_folder:
                found.append(InputFile(path.relative_to(root).as_posix(), path, *entry_problem(path)))
            elif (past := _past_suffix(name, suffixes)) is not None:   # skipped, it went unseen beside the rest
                # a folder so named (dir. mp4/) is one as dir.mp4/ is: renamed, it would be no video either
                found.append(InputFile(path.relative_to(root).as_posix(), path,
                                       *(entry_problem(path) if name in dirs else past)))
    if not found:
        raise RecipeError(f"{root}: no {what} found (looked for {', '.join(suffixes)})")
    return sorted(found, key=lambda v: v.relative)


def _past_suffix(name: str, suffixes: Sequence[str]) -> tuple[str, str] | None:
    """Why a name that ends in dots or spaces after an input's suffix (``x.mp4.``, ``x.mp4 ``: a typo a shell or
    Windows hides) or holds spaces inside it (``x. mp4``) is no input of the run, and its kind (``PAST_SUFFIX``,
    ``SPACED_SUFFIX``); None for any other name. A space is any Unicode one or an invisible format character (a
    no-break space or a zero-width space pasted from a web page hides as well)."""
    stripped = name
    while stripped and (stripped[-1] == "." or _space(stripped[-1])):
        stripped = stripped[:-1]
    spaced = Path(stripped).suffix
    suffix = "".join(c for c in spaced if not _space(c))
    if stripped == name and suffix == spaced or suffix.lower() not in suffixes or suffix == ".":
        return None
    renamed = stripped.removesuffix(spaced) + suffix
    if stripped != name:
        return (f"its name ends in {name[len(stripped):]!r} after {spaced}, so it is not read as a {suffix} file: "
                f"rename it to {renamed!r}"), PAST_SUFFIX
    return (f"its suffix {spaced!r} holds a space, so it is not read as a {suffix} file: rename it to {renamed!r}",
            SPACED_SUFFIX)


def _space(char: str) -> bool:
    """Whether ``char`` hides as a space in a listing: any Unicode space, or an invisible format character."""
    return char.isspace() or unicodedata.category(char) == "Cf"


def entry_problem(path: Path) -> tuple[str, str] | tuple[None, None]:
    """Why an entry is not a file that can be opened, and what it is then (``ENTRY_KINDS``), or Nones."""
    try:
        os.stat(path)
    except FileNotFoundError:
        if path.is_symlink():
            return f"dangling symlink (its target {os.readlink(path)!r} does not exist)", "dangling link"
        return "vanished while the folder was listed", "vanished"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symlink loop (following the link never reaches a file)", "symlink loop"
        return f"cannot be read ({exc.strerror})", "unreadable"
    if path.is_dir():
        if path.is_symlink():
            return ("a symlink to a folder, not followed, so nothing under it is scored: copy or move its videos "
                    "in, or score that folder on its own"), "folder"
        return "a directory, not a file", "folder"
    if not path.is_file():
        return "not a regular file (a FIFO, socket or device)", "special file"
    return None, None


def sample_id(root: Path, path: Path) -> str:
    """The relative path without its suffix, folders joined by ``__`` (ids are file names)."""
    return path.relative_to(root).with_suffix("").as_posix().replace("/", "__")


def sample_ids(root: Path, inputs: list[InputFile]) -> list[tuple[str, str | None]]:
    """(sample id, name problem) per input, in order; every id unique and safe as a file name.

    The id is :func:`sample_id` unless the name cannot give one: an id that is not valid UTF-8, longer
    than the runner allows, holds a control character or a backslash, or that two inputs share
    (``x.mp4`` beside ``x.mkv``, ``café.mp4`` composed beside ``café.mp4`` decomposed, or ``x .mp4`` beside
    ``x.mp4``: two ids that read the same in every table, ``_reads_as``). Such an input fails alone with the reason,
    under the id ``bad-name-<hash of its relative path>``; the rest of the run is not affected. So does an entry
    listed as a name past its suffix or with a space in it (``x.mp4 ``, ``x. mp4``, whose id would be ``x``, as for
    ``x.mp4``), its entry's problem saying why.
    """
    natural = [None if v.kind in (PAST_SUFFIX, SPACED_SUFFIX) else sample_id(root, v.path) for v in inputs]
    owners: dict[str, list[tuple[str, str]]] = {}   # what an id reads as -> (id, shown name) of each input that does
    for sid, entry in zip(natural, inputs, strict=True):
        if sid is not None:
            owners.setdefault(_reads_as(sid), []).append((sid, entry.shown))
    taken = {sid for sid in natural if sid is not None}
    out: list[tuple[str, str | None]] = []
    for sid, entry in zip(natural, inputs, strict=True):
        problem = None if sid is None else sample_id_problem(sid)
        shared = [] if sid is None else owners[_reads_as(sid)]
        if problem is None and len(shared) > 1:
            others = ", ".join(repr(shown) for _, shown in shared if shown != entry.shown)
            apart = [o for o, _ in shared if o != sid]
            why = ("" if not apart else " (composed otherwise in Unicode, NFC/NFD)"
                   if all(unicodedata.normalize("NFC", o) == unicodedata.normalize("NFC", sid) for o in apart)
                   else " (apart from spaces at an end or invisible characters)")
            problem = f"is {sid!r}, as for {others}{why}: rename one so each input has its own id"
        if sid is not None and problem is None:
            out.append((sid, None))
            continue
        digest = hashlib.sha256(os.fsencode(entry.relative)).hexdigest()
        width = 16
        while f"bad-name-{digest[:width]}" in taken:
            width += 8
        fallback = f"bad-name-{digest[:width]}"
        taken.add(fallback)
        out.append((fallback, None if problem is None else f"bad file name: its sample id {problem}"))
    return out


def _reads_as(sid: str) -> str:
    """What a sample id reads as in a table: composed (NFC), without its invisible format characters and the spaces
    at its ends (``x .mp4`` beside ``x.mp4`` gave the ids ``'x '`` and ``'x'``, two rows that read as one)."""
    return "".join(c for c in unicodedata.normalize("NFC", sid) if unicodedata.category(c) != "Cf").strip()


class UnusableInput(ValueError):
    """An input that cannot be scored at all (bad name, dangling symlink, directory, ...), named with why."""


@dataclass(frozen=True, slots=True)
class InputKey:
    """What a task holds of its input file: the path under its root ("/"-separated), its size and SHA-256."""

    path: str
    size: int
    sha256: str


@dataclass(frozen=True, slots=True, kw_only=True)
class InputTask(Task):
    """A task that scores one input file (:func:`input_tasks`): its shown name and key, or the problem that makes
    it unscorable instead of a key. A recipe subclasses it with what else changes its results."""

    name: str
    input: InputKey | None = None
    problem: str | None = None

    def path(self, root: Path) -> Path:
        """The file this task scores, under its ``root``; UnusableInput (its sample fails by name) when it has a
        problem, named under ``root`` as a file that does not decode is (``videos/d/loop``, not ``d/loop``): one
        failures.tsv named them two ways."""
        if self.input is None:
            raise UnusableInput(f"{Path(root) / self.name}: {self.problem}")
        return Path(root) / self.input.path


_T = TypeVar("_T", bound=InputTask)


def input_tasks(root: Path, inputs: list[InputFile], *, digests: InputDigests, make: type[_T],
                **fields: Any) -> list[_T]:
    """One ``make`` task per input: its id, name and ``input`` key (:meth:`InputDigests.key`: an edited file is
    scored again, the same files under another root are not), plus ``fields`` (what else changes results). An
    input that cannot be scored (its entry or its name has a problem) gets a task holding the ``problem`` instead
    of a key: scoring it fails with that reason."""
    tasks = []
    for entry, (sid, name_problem) in zip(inputs, sample_ids(root, inputs), strict=True):
        key, problem = None, name_problem or entry.problem
        if problem is None:
            try:
                key = digests.key(entry.path, root)
            except InputFileError as exc:
                problem = exc.reason
        tasks.append(make(sample_id=sid, name=entry.shown, input=key, problem=problem, **fields))
    return tasks


class InputFileError(ValueError):
    """An input is not a regular file under its root (one line naming it); ``reason`` is the line without it."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.reason = reason


class InputDigests:
    """SHA-256 of input files, each computed once per run directory (see the module docstring)."""

    def __init__(self, run_dir: Path | str, *, verify: bool = False) -> None:
        self.path = Path(run_dir) / DIGESTS_FILE
        self.verify = verify
        self.hashed = 0   # files read in full by this process
        self._cache: dict[str, tuple[FileState, str]] = {} if verify else _load(self.path)
        self._changed = False

    def sha256(self, path: Path | str) -> str:
        """The hex SHA-256 of a regular file's bytes (a symlink counts as its target); InputFileError otherwise."""
        return self.state_and_sha256(path)[1]

    def state_and_sha256(self, path: Path | str) -> tuple[FileState, str]:
        """``sha256`` and the file's state before it was read: a caller that reads the file again (a copy) tells
        by its state then whether it still read those bytes."""
        where = _path_key(path)
        cached = self._cache.get(where)
        if cached is not None and cached[0] == FileState.of(_regular_stat(path)):
            return cached
        try:   # the file the stat saw may have been swapped since (a FIFO there would block a plain open)
            fd = open_regular(path)
        except FileError as exc:
            raise InputFileError(path, "not a regular file" if isinstance(exc, NotRegularFile) else
                                 f"cannot be read ({exc.reason})") from None
        try:
            before = FileState.of(os.fstat(fd))
            digest = sha256_fd(fd)
            self.hashed += 1
            self._keep(where, before, FileState.of(os.fstat(fd)), digest)
        finally:
            os.close(fd)
        return before, digest

    def regular(self, path: Path) -> str | None:
        """``regular_sha256(path)``: None where no regular file is there (a symlink is not followed, a FIFO never
        opened), the file read only when its state changed since this run directory hashed it (a generation
        step's kept rollouts: an unchanged rerun reads none of them again)."""
        try:
            before = FileState.of(st := path.lstat())
        except OSError:
            return None
        if not S_ISREG(st.st_mode):
            return None
        where = _path_key(path)
        cached = self._cache.get(where)
        if cached is not None and cached[0] == before:
            return cached[1]
        digest = regular_sha256(path)
        if digest is not None:
            with contextlib.suppress(OSError):
                self._keep(where, before, FileState.of(path.lstat()), digest)
        return digest

    def keep_renamed(self, path: Path, hashed: FileState, digest: str) -> None:
        """Remember ``digest`` for ``path``: a file this process hashed (in state ``hashed``) under a temporary name,
        then renamed there (a copy it checked byte for byte), so that a rerun does not read it again. Kept only while
        ``path`` is still that file: its inode, size and mtime (the rename moved its ctime)."""
        try:
            now = FileState.of(path.lstat())
        except OSError:
            return
        if (now.inode, now.size, now.mtime_ns) == (hashed.inode, hashed.size, hashed.mtime_ns):
            self._keep(_path_key(path), now, now, digest)

    def _keep(self, where: str, before: FileState, after: FileState, digest: str) -> None:
        if after == before:   # not being written while it was read
            self._cache[where] = (before, digest)
            self._changed = True

    def key(self, path: Path | str, root: Path | str) -> InputKey:
        """What a task holds of the file at ``path`` under ``root``."""
        path, root = Path(path), Path(root)
        try:
            relative = path.relative_to(root).as_posix()
        except ValueError:
            raise InputFileError(path, f"not under its input root {root}") from None
        digest = self.sha256(path)
        return InputKey(relative, os.stat(path).st_size, digest)

    def save(self) -> None:
        """Write the cache when this process added to it (atomically; the caller holds the run's digest lock)."""
        if not self._changed:
            return
        merged = _load(self.path)   # entries another process wrote since this one read the file
        merged.update(self._cache)
        entries = {where: {**asdict(seen), "sha256": digest} for where, (seen, digest) in merged.items()}
        write_json_cache(self.path, _FORMAT, entries)
        self._changed = False

    def save_locked(self) -> None:
        """``save`` under the run directory's digest lock, for digests taken after ``input_digests``' block: the
        rollouts a generation step hashed while it ran (it holds no lock that long: its shards generate at once)."""
        with exclusive(self.path.parent / _LOCK):
            self.save()


@contextmanager
def input_digests(run_dir: Path | str, *, verify: bool = False) -> Iterator[InputDigests]:
    """An ``InputDigests`` for the run directory, held under its lock and saved at the end of the block."""
    run_dir = Path(run_dir)
    with exclusive(run_dir / _LOCK):
        digests = InputDigests(run_dir, verify=verify)
        yield digests
        digests.save()


def _path_key(path: Path | str) -> str:
    """What the cache keeps a file under: the SHA-256 of its absolute path. The path itself wrote the name of every
    folder above an input into the run directory (a token-shaped one too), where the cache needs only to find it."""
    return hashlib.sha256(os.fsencode(os.path.abspath(path))).hexdigest()


def _regular_stat(path: Path | str) -> os.stat_result:
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise InputFileError(path, f"cannot be read ({exc.strerror})") from None
    if not os.path.isfile(path):
        raise InputFileError(path, "not a regular file")
    return stat


def _load(path: Path) -> dict[str, tuple[FileState, str]]:
    """The cache as stored; an unreadable or foreign file is an empty cache (it only saves time)."""
    return read_json_cache(path, _FORMAT, _digest_entries)


_STATE_FIELDS = [f.name for f in fields(FileState)]


def _digest_entries(files: Mapping[str, Any]) -> dict[str, tuple[FileState, str]]:
    return {where: (FileState(*(int(e[name]) for name in _STATE_FIELDS)), str(e["sha256"]))
            for where, e in files.items()
            if isinstance(e, dict) and isinstance(e.get("sha256"), str) and len(e["sha256"]) == 64}
