"""File helpers every module shares: one atomic-write policy, one digest, one-line data-file errors.

Atomic writes: the new content goes to a temporary file with a unique name in the target's directory
(so two processes never share one), is flushed and fsynced, then renamed over the target. A crash or a
kill leaves either the old file or the new one, never half of one, and never a temporary file that a
later run could mistake for a result (temporary names start with ``.`` and end in ``.tmp``).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache, wraps
from pathlib import Path, PurePath
from stat import S_ISBLK, S_ISCHR, S_ISDIR, S_ISFIFO, S_ISLNK, S_ISREG, S_ISSOCK
from typing import Any, ParamSpec, TypeVar

from pinbench.core.options import closest, expand_user

_CHUNK = 1 << 20
T = TypeVar("T")
P = ParamSpec("P")


class FileError(ValueError):
    """A data file is unreadable or invalid; ``str(e)`` is one line naming the file (and the line, when one is
    to blame: ``x.jsonl:3: ...``) and the reason."""

    def __init__(self, path: Path | str | None, reason: str, line: int | None = None):
        self.path = Path(path) if path is not None else None
        self.reason = reason
        self.line = line
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {reason}" if path is not None else reason)


class MissingFile(FileError):
    """No file at the path (``open_regular``): a caller that says more of an absent file tells it by its class."""


class NotRegularFile(FileError):
    """Something that is no regular file at the path (a folder, a FIFO, a device; ``open_regular``)."""


@dataclass(frozen=True)
class FileState:
    """A file as a stat-keyed cache sees it, beside its absolute path: size, mtime_ns, inode, ctime_ns. A change to
    any of them is taken as a new file. The ctime, because a write moves it and ``os.utime`` cannot put it back: a
    file rewritten at its size with its mtime set back (``cp -p`` over it keeps its inode) is seen. A chmod or a hard
    link moves it too, which costs one read (the sample cache links a kept rollout and makes it read-only)."""

    size: int
    mtime_ns: int
    inode: int
    ctime_ns: int

    @classmethod
    def of(cls, stat: os.stat_result) -> FileState:
        return cls(stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_ctime_ns)


Tree = tuple[tuple[str, FileState | None], ...]


def tree_state(paths: Sequence[Path]) -> Tree:
    """Each path's ``FileState`` (None: nothing there, or unreadable) and, for a folder, every entry's under it by its
    name (folders linked inside it are not walked, as ``list_inputs`` does not): what a reading of them holds while
    it is unchanged. Stat calls only, one an entry (and a listing a folder); no file is read."""
    found: list[tuple[str, FileState | None]] = []

    def walk(path: str) -> None:
        try:
            entries = sorted(os.scandir(path), key=lambda entry: entry.name)
        except OSError:
            found.append((f"{path}/", None))   # a folder that cannot be listed, or no folder now
            return
        for entry in entries:
            try:
                found.append((entry.path, FileState.of(entry.stat())))
            except OSError:   # gone meanwhile, or a dangling link
                found.append((entry.path, None))
            if entry.is_dir(follow_symlinks=False):
                walk(entry.path)

    for path in paths:
        try:
            stat = os.stat(path)
        except OSError:
            found.append((str(path), None))
            continue
        found.append((str(path), FileState.of(stat)))
        if S_ISDIR(stat.st_mode):
            walk(str(path))
    return tuple(found)


def while_unchanged(files: Callable[P, Sequence[Path]], maxsize: int = 8) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """Cache a reader by its arguments and the ``tree_state`` of the files it reads (``files(*args)`` names them):
    a long-running ``pinbench view`` server shows a run directory or data folder as it is now (a rerun, a regenerated
    run, an edited file), where a cache by path showed what it read first until restarted. A call on unchanged files
    costs their stats (its arguments are hashable), none inside ``one_snapshot``."""
    def wrap(read: Callable[P, T]) -> Callable[P, T]:
        @lru_cache(maxsize=maxsize)
        def cached(state: Tree, *args: Any, **kwargs: Any) -> T:
            return read(*args, **kwargs)

        @wraps(read)
        def call(*args: P.args, **kwargs: P.kwargs) -> T:
            if _SNAPSHOT is None:
                return cached(tree_state(files(*args, **kwargs)), *args, **kwargs)
            key = (cached, args, tuple(sorted(kwargs.items())))
            if key not in _SNAPSHOT:
                _SNAPSHOT[key] = cached(tree_state(files(*args, **kwargs)), *args, **kwargs)
            return _SNAPSHOT[key]
        return call
    return wrap


_SNAPSHOT: dict[Any, Any] | None = None   # inside ``one_snapshot``: each ``while_unchanged`` reading, taken once


@contextmanager
def one_snapshot() -> Iterator[None]:
    """Inside it, each ``while_unchanged`` reader reads and stats its files once: a bundle written in one go (a
    report's or ``compare --report``'s sample pages) shows one state of the runs, and CameraBench's 11,222 pages,
    each stat'ing the data folder's entries again, made ``compare --report`` 18 s and 1.3 GB (3.6 s before)."""
    global _SNAPSHOT
    outer = _SNAPSHOT
    _SNAPSHOT = {} if outer is None else outer
    try:
        yield
    finally:
        _SNAPSHOT = outer


_NOT_REGULAR = ((S_ISDIR, "is a directory"), (S_ISFIFO, "a FIFO (named pipe)"), (S_ISCHR, "a character device"),
                (S_ISBLK, "a block device"), (S_ISSOCK, "a socket"), (S_ISLNK, "a symlink"))   # (of an lstat)


def not_regular(mode: int) -> str | None:
    """What a file of this mode is when it is not a regular file (``"a FIFO (named pipe)"``), else None."""
    if S_ISREG(mode):
        return None
    return next((kind for test, kind in _NOT_REGULAR if test(mode)), "not a regular file")


def not_a_folder(mode: int) -> str | None:
    """What a file of this mode is when it is no folder (``"a regular file"``, ``"a FIFO (named pipe)"``), else
    None: the words of a folder's place taken by something else (the cache root, the sample cache)."""
    if S_ISDIR(mode):
        return None
    return (not_regular(mode) or "a regular file").removeprefix("is ")


SYMLINK_LOOP = "a symlink loop"   # the words for a path whose links lead back to themselves (ELOOP), in every command


def no_folder_at(path: Path) -> str | None:
    """What stands at ``path`` where a folder belongs (``"a dangling symlink"``, ``"a symlink loop"``,
    ``not_a_folder``'s words), or None for a folder or nothing. A loop was "a dangling symlink" here and Python's
    "Symlink loop from ..." in commands that resolve the path: ``SYMLINK_LOOP`` words both."""
    if not os.path.lexists(path) or path.is_dir():
        return None
    try:
        return not_a_folder(path.stat().st_mode)
    except FileNotFoundError:
        return "a dangling symlink"
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        return SYMLINK_LOOP


def no_file_at(path: Path) -> str | None:
    """What stands at ``path`` where a regular file belongs (``"nothing"``, ``"a dangling symlink (to 'gone')"``,
    ``SYMLINK_LOOP``, ``"a directory"``, ``"a FIFO (named pipe)"``), or None for a regular file or a link to one: the
    words for a file option given something else, which "file not found" misnamed. A link's target is said, as
    ``open_regular`` says it: a folder copied with ``cp -r`` keeps its relative links, dangling in the copy."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return f"a dangling symlink (to {os.readlink(path)!r})" if path.is_symlink() else "nothing"
    except OSError as exc:   # a symlink loop, a folder on the way that may not be entered
        return SYMLINK_LOOP if exc.errno == errno.ELOOP else f"unreadable ({exc.strerror})"
    kind = not_regular(mode)
    return None if kind is None else kind.removeprefix("is ")


def symlink_on_the_way(root: Path, relative: PurePath) -> Path | None:
    """The first of ``root / relative`` and the folders to it below ``root`` that is a symlink, else None: what
    leads a path inside ``root`` out of it (``root`` itself, and the way to it, are the user's to place)."""
    path = root
    for part in relative.parts:
        path = path / part
        try:
            mode = path.lstat().st_mode
        except OSError:   # nothing there, nor further on
            return None
        if S_ISLNK(mode):
            return path
        if not S_ISDIR(mode):
            return None
    return None


def first_names(names: Sequence[str], shown: int = 3) -> str:
    """``a, b, c and 4 more``: the first few of ``names`` for a one-line message."""
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``"1 sample"``, ``"0 samples"``: one rule for counts in messages (a run of one sample said ``1 samples``);
    ``plural`` for a noun whose plural is not ``noun + "s"``."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def counted_of(n: int, total: int, noun: str, predicate: tuple[str, str] = ("is", "are"),
               plural: str | None = None) -> str:
    """``"0 of 1 rollout is"``, ``"1 of 3 rollouts is"``, ``"2 of 3 rollouts are"``: the ``predicate`` (singular,
    plural) agrees with the count, singular where either number is one (a check of one read ``0 of 1 rollout
    are``)."""
    return f"{n} of {counted(total, noun, plural)} {predicate[0] if 1 in (n, total) else predicate[1]}"


def clipped(text: str, limit: int) -> str:
    """``text``, cut to ``limit`` characters ending in ``...`` when longer: a value or reason for a one-line message."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def aligned(table: Sequence[Sequence[str]], rule: bool = True) -> list[str]:
    """The lines of a plain-text table: each column as wide as its widest cell, two spaces apart, no trailing
    space; ``rule``: a line of dashes under the first row, its header. Widths are as a terminal shows them (rich's
    ``cell_len``): a CJK character or an emoji takes two columns, a combining mark none. A table whose characters
    are all below U+0300 (ASCII, Latin, the reference table's "±") is measured by ``len`` and rich is not imported
    (the rerun of a CameraBench run imported it for its "±": 1.4 % of the rerun's instructions)."""
    text = "".join(cell for row in table for cell in row)
    if text.isascii() or max(text) < "\u0300":
        width = len
    else:
        from rich.cells import cell_len as width
    widths = [max(width(row[i]) for row in table) for i in range(len(table[0]))]
    lines = ["  ".join(cell + " " * (w - width(cell)) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in table]
    if rule:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def enclosing(path: Path, folders: Mapping[str, Path]) -> str | None:
    """The name of the first of ``folders`` that holds ``path`` (itself or below it, by real paths), or None: a run
    directory or a sample cache inside an input folder changes that input with every file it writes."""
    real = os.path.realpath(path)
    return next((name for name, folder in folders.items() if Path(real).is_relative_to(os.path.realpath(folder))),
                None)


def blocking_parent(path: Path) -> tuple[Path, str] | None:
    """The nearest existing parent of ``path`` and what it is, when it is no folder (a file, a FIFO): what stops
    ``path``'s folders being made. The mkdir said only 'Not a directory', naming ``path`` or its own child."""
    for parent in path.parents:
        try:
            mode = parent.stat().st_mode
        except (FileNotFoundError, NotADirectoryError):
            continue
        kind = not_a_folder(mode)
        return None if kind is None else (parent, kind)
    return None


def open_regular(path: Path | str, flags: int = os.O_RDONLY, *, follow_symlinks: bool = True,
                 mode: int = 0o666) -> int:
    """A descriptor of the regular file ``path`` (``flags``: ``os.O_RDONLY``, ``os.O_RDWR | os.O_CREAT``, ...), or
    FileError naming it: absent (MissingFile), a symlink (``follow_symlinks=False``), a folder, a FIFO, a device
    (NotRegularFile), unreadable.

    Why: ``open`` of a FIFO blocks until another process opens its other end, ``read`` of ``/dev/zero`` never
    ends, a seek on a FIFO fails with a message that names no file. The file is opened without blocking
    (``O_NONBLOCK``: a FIFO opens at once, or fails at once for writing) and kept only when ``fstat`` says it is
    a regular file; on a regular file ``O_NONBLOCK`` changes nothing.
    """
    flags |= os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags, mode)
    except FileNotFoundError:
        if os.path.islink(path):   # "file not found" for a link the user sees in the folder
            raise MissingFile(path, f"a dangling symlink (to {os.readlink(path)!r})") from None
        raise MissingFile(path, "file not found") from None
    except IsADirectoryError:
        raise NotRegularFile(path, "is a directory, not a file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks and os.path.islink(path):
            raise NotRegularFile(path, f"a symlink (to {os.readlink(path)}), not a regular file") from None
        if exc.errno == errno.ELOOP:
            raise FileError(path, SYMLINK_LOOP) from None
        if exc.errno == errno.ENXIO:  # a FIFO opened for writing with no reader
            raise NotRegularFile(path, "a FIFO (named pipe), not a regular file") from None
        raise FileError(path, f"unreadable: {exc.strerror}") from None
    kind = not_regular(os.fstat(fd).st_mode)
    if kind is not None:
        os.close(fd)
        raise NotRegularFile(path, "is a directory, not a file" if kind == "is a directory" else
                             f"{kind}, not a regular file")
    return fd


def read_regular_bytes(path: Path | str, *, follow_symlinks: bool = True, limit: int | None = None) -> bytes:
    """A regular file's bytes (``open_regular``); FileError, one line naming the file, when it has none to give, or
    when it holds more than ``limit`` bytes (none of them read past it: a file planted where a small one belongs,
    say 2 GiB, was read whole into memory)."""
    fd = open_regular(path, follow_symlinks=follow_symlinks)
    try:
        chunks, size = [], os.fstat(fd).st_size
        want = size + 1   # the whole file in one read, into one buffer that join returns as it is
        if limit is not None and size > limit:
            raise FileError(path, f"{size} bytes, more than the {limit} such a file holds")
        read = 0
        while chunk := os.read(fd, want if limit is None else min(want, limit + 1 - read)):
            chunks.append(chunk)
            read += len(chunk)
            if limit is not None and read > limit:   # it grew since its size was read
                raise FileError(path, f"more than the {limit} bytes such a file holds")
            want = _CHUNK
        return b"".join(chunks)
    except OSError as exc:
        raise FileError(path, f"unreadable: {exc.strerror}") from None
    finally:
        os.close(fd)


def read_regular_text(path: Path | str) -> str | None:
    """A regular file's text (UTF-8, a symlink counts as its target), or None when there is none to read: absent,
    unreadable, not UTF-8, or not a regular file (``read_regular_bytes``). For a cache file, whose problem must
    cost a cache miss, never a hung command."""
    try:
        return read_regular_bytes(path).decode("utf-8")
    except (FileError, UnicodeDecodeError):
        return None


def read_json_object(path: Path | str) -> dict[str, Any] | None:
    """The JSON object in the regular file ``path``, or None when there is none: absent, not a regular file,
    unreadable, not UTF-8 (``read_regular_text``), not JSON, or JSON of another kind. For the files a run keeps for
    itself (caches, stamps), which a kill or a hand can leave cut or changed: a bad one costs the work again, never a
    hung or failed command."""
    text = read_regular_text(path)
    if text is None:
        return None
    try:
        data = loads_json(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def read_json_cache(path: Path | str, fmt: int, entries: Callable[[Mapping[str, Any]], dict[str, T]]
                    ) -> dict[str, T]:
    """A tolerant JSON cache file ``{"format": fmt, "files": {key: entry}}`` as ``entries`` reads its files: {} when
    it holds no JSON object (``read_json_object``), is of another format, or ``entries`` fails on it (ValueError,
    TypeError, KeyError, AttributeError). A cache only saves time; a bad one is an empty one."""
    data = read_json_object(path)
    if data is None:
        return {}
    try:
        return entries(data["files"] if data.get("format") == fmt else {})
    except (ValueError, TypeError, KeyError, AttributeError):
        return {}


def write_json_cache(path: Path | str, fmt: int, files: Mapping[str, Any]) -> None:
    """Write what ``read_json_cache`` reads, ``{"format": fmt, "files": files}``, atomically (sorted keys, one
    entry a line); OSError when it cannot be written, which a cache that only saves time may ignore."""
    write_atomic(path, json.dumps({"format": fmt, "files": files}, indent=0, sort_keys=True) + "\n")


def cache_root() -> Path:
    """PINBENCH_CACHE, else HF_HOME, else ~/.cache/pinbench (HF repos live under <root>/hub). ValueError naming the
    variable when it names no folder: a FIFO or a file there was taken, the doctor promising downloads into it, and
    ``~nouser`` ended in a line naming neither variable nor path."""
    for var in ("PINBENCH_CACHE", "HF_HOME"):
        value = os.environ.get(var)
        if value:
            root = expand_user(value, f"${var}")
            try:
                mode = root.stat().st_mode
            except OSError:
                return root   # absent: made when something is stored; unreadable: the OS names it there
            if (kind := not_a_folder(mode)) is not None:
                raise ValueError(f"${var}={value}: the cache root is not a folder but {kind}")
            return root
    return Path.home() / ".cache" / "pinbench"


def file_error(error: type[Exception], path: Path | str, reason: str, line: int | None = None) -> Exception:
    """``error`` of a file (and ``line`` of it) and what is wrong with it: ``error(path, reason[, line])`` for a
    FileError class, else the one line ``error(f"{path}[:{line}]: {reason}")``. Why: a recipe's own error takes one
    string (``DatasetError(msg)``); given to a reader as ``error`` it was made with two arguments and said
    ``(PosixPath('...'), 'file not found')``."""
    if issubclass(error, FileError):
        return error(path, reason) if line is None else error(path, reason, line)
    return error(f"{path if line is None else f'{path}:{line}'}: {reason}")


def read_data_file(path: Path, error: type[Exception] = FileError) -> str:
    """A data file's text, or ``error`` naming it (``file_error``: one line) when it is missing, not a regular file
    (a folder, a FIFO: never a hang), unreadable or not UTF-8. With ``error`` FileError, what ``open_regular`` raised
    is raised as it is (MissingFile, NotRegularFile): a caller says more of an absent file by its class."""
    try:
        return read_regular_bytes(path).decode("utf-8")
    except FileError as exc:
        raise (exc if isinstance(exc, error) else file_error(error, path, exc.reason)) from None
    except UnicodeDecodeError as exc:
        raise file_error(error, path, f"not UTF-8 text (byte {exc.start})") from None


def json_error(exc: json.JSONDecodeError) -> str:
    """``invalid JSON at line 19, column 7: Unterminated string starting``: where, and what the parser says (its
    message ends in " at" where it meant to append the place: the line ended on a dangling "starting at"). JSON
    nested too deeply has no place to blame; an empty file read "invalid JSON at line 1, column 1: Expecting
    value", which sent a user looking for a bad character in a file that held none."""
    if isinstance(exc, _TooDeep):
        return f"invalid JSON: {exc.msg}"
    if not exc.doc.strip():
        return f"no JSON value: the file {'is empty' if not exc.doc else 'holds only whitespace'}"
    return f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg.removesuffix(' at')}"


def read_json_file(path: Path, error: type[Exception] = FileError, *, parse: Callable[[str], Any] | None = None
                   ) -> Any:
    """The JSON value of a data file (``parse``: ``loads_json`` unless given, e.g. ``loads_finite_json``), or
    ``error`` naming it (``file_error``: one line): what ``read_data_file`` refuses, invalid JSON (its line and
    column), nested too deeply, or what ``parse`` refuses (a non-finite number, a hook's ValueError). One reader
    for the recipes' JSON files, which each turned read and parse errors into their own line by hand."""
    text = read_data_file(path, error)
    try:
        value = (parse or loads_json)(text)
    except json.JSONDecodeError as exc:
        raise file_error(error, path, json_error(exc)) from None
    except ValueError as exc:
        raise file_error(error, path, str(exc)) from None
    if lone := lone_surrogate(text):
        raise file_error(error, path, f"line {lone[0]}: {lone[1]}")
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE_PAIR = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def lone_surrogate(text: str) -> tuple[int, str] | None:
    """Where JSON text escapes half a UTF-16 pair (``"\\ud800"``), which no UTF-8 file can hold: (line, what is
    wrong there), or None. Why: one passed the readers and failed much later, naming no file, when what it went
    into was written as UTF-8.

    Cheap: one memchr for a backslash, then one regex scan (0.3 ms of a 10k-line, 1.9 MB JSONL file that
    ``iter_jsonl`` reads in 21 ms); the exact look (``_lone_surrogate``: 9 ms there) only when the text escapes a
    surrogate at all, as ``ensure_ascii`` JSON does an emoji; line by line only once there is a lone one (no JSON
    string holds a raw newline)."""
    if "\\" not in text or _SURROGATE_ESCAPE.search(text) is None or _lone_surrogate(text) is None:
        return None
    lines = re.split(r"\r\n|\r|\n", text)   # as ``_jsonl_values`` numbers them
    number, lone = next((n, found) for n, line in enumerate(lines, 1) if (found := _lone_surrogate(line)) is not None)
    return number, f"a string holds the lone surrogate {lone} (half a UTF-16 pair), which no UTF-8 file can hold"


def _lone_surrogate(text: str) -> str | None:
    """The first surrogate escape of JSON text that is no half of a pair: escaped backslashes blanked (dropped, they
    joined the halves on either side into a pair), then pairs dropped."""
    found = _SURROGATE_ESCAPE.search(_SURROGATE_PAIR.sub("", text.replace("\\\\", "  ")))
    return found.group() if found is not None else None


def creation_mode() -> int:
    """The mode ``open()`` gives a new file: 0o666 less the umask.

    Why: ``mkstemp`` creates its file 0o600, so every atomically written scorecard, report and reference
    was readable by its owner only, hidden from a colleague (or a CI artifact server) on a shared file system.
    """
    mask = os.umask(0o022)  # the only portable way to read the umask is to set it; put it back at once
    os.umask(mask)
    return 0o666 & ~mask


NAME_MAX = 255   # bytes in one file name on the file systems runs use (ext4, xfs, btrfs, tmpfs, NFS)


def fitting_name(name: str, room: int) -> str:
    """``name``, or when ``room`` more bytes beside it do not fit one file name (``NAME_MAX``), its start with the
    first 16 hex digits of its SHA-256: the hidden file made beside a file of a valid long name (a rollout of 250
    bytes) was a "File name too long" error. Two long names cut alike stay apart by their digests."""
    raw = name.encode("utf-8", "surrogateescape")
    if len(raw) + room <= NAME_MAX:
        return name
    kept = raw[:max(NAME_MAX - room - 17, 0)].decode("utf-8", "ignore")
    return f"{kept}-{hashlib.sha256(raw).hexdigest()[:16]}"


@contextmanager
def atomic_path(path: Path | str, *, suffix: str = "", mode: int | None = None) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; renamed over ``path`` (after fsync) when the block succeeds.

    ``suffix`` keeps an extension some writers need (``.mp4`` for an encoder, ``.npz`` for numpy). On any
    error the temporary file is removed and ``path`` is left as it was. ``mode``: the file's mode
    (``creation_mode()`` when None), set before anything is written to it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    affixes = len(f"..XXXXXXXX.tmp{suffix}".encode("utf-8", "surrogateescape"))   # mkstemp's 8 random letters
    # the folder as the system reads it: mkstemp names its file by os.path.abspath, which drops "lnk/.." (a symlink
    # then ..) where the system goes to the symlink target's parent, and the file it made was then not found
    fd, name = tempfile.mkstemp(dir=os.path.realpath(path.parent), prefix=f".{fitting_name(path.name, affixes)}.",
                                suffix=f".tmp{suffix}")
    try:
        os.fchmod(fd, creation_mode() if mode is None else mode)
    finally:
        os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def system_path(path: Path, cwd: Path | None = None) -> Path:
    """``path`` as the system reads it where it holds ``..`` (a relative one from ``cwd``, else this process's
    folder): the part through its last ``..`` resolved, the rest as given. Why: after a symlink, ``..`` is the parent
    of the symlink's target for the system, where ``os.path.abspath`` and ``normpath`` (mkstemp's, a log's name,
    ``os.path.relpath``) drop both: ``--out lnk/../x`` made its folder in one place and looked for its files in
    another."""
    if ".." not in path.parts:
        return path
    parts = ((cwd or Path()) / path).parts
    last = len(parts) - parts[::-1].index("..")
    return Path(os.path.realpath(Path(*parts[:last]))).joinpath(*parts[last:])


def write_atomic(path: Path | str, data: str | bytes, *, mode: int | None = None) -> Path:
    """Write text (UTF-8) or bytes to ``path`` atomically, with ``mode`` (``creation_mode()`` when None); returns
    the path."""
    path = Path(path)
    with atomic_path(path, mode=mode) as tmp:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")
    return path


def claim_output_folder(dest: Path, mark: str, what: str, owns: str, *, folders: tuple[str, ...] = (),
                        earlier: Callable[[Path], bool] = lambda _: False) -> None:
    """Make ``dest`` the folder of a ``what`` (a bundle, a report), or FileError (one line) naming what is in the way.

    Such a folder is written whole: its own names (``owns``) replaced, its own files it no longer writes deleted. So
    it is written only where nothing else can be lost: a new or empty folder, or an earlier one of its kind (``mark``
    in it, or ``earlier(dest)`` for one from before the mark); then ``mark`` is written into it first. Why: a
    folder of the user's lost its index.html and every file under its media/ or figures/, silently, exit 0.
    ``folders``: the subfolders it empties of what it did not write, each refused when it is a symlink (the folder
    it led to lost those files) or no folder."""
    _check_output_folder(dest, mark, what, owns, earlier)
    for name in folders:
        sub = dest / name
        if sub.is_symlink() or (kind := no_folder_at(sub)) is not None:
            found = f"a symlink (to {os.readlink(sub)})" if sub.is_symlink() else kind
            raise FileError(sub, f"{found}, not a folder of the {what}'s own: a {what} deletes the files it did not "
                                 f"write under {name}/; remove it, or name a new folder")
    dest.mkdir(parents=True, exist_ok=True)
    write_if_changed(dest / mark, f"pinbench writes a {what} here\n")


@contextmanager
def filled_output_folder(dest: Path, mark: str, what: str, owns: str, *,
                         earlier: Callable[[Path], bool] = lambda _: False) -> Iterator[None]:
    """``claim_output_folder`` for a block that fills the folder, undone with what the block wrote when it raises
    (``undone_on_failure``); a folder that is refused is never walked."""
    _check_output_folder(dest, mark, what, owns, earlier)
    with undone_on_failure(dest):
        claim_output_folder(dest, mark, what, owns, earlier=earlier)
        yield


def _check_output_folder(dest: Path, mark: str, what: str, owns: str, earlier: Callable[[Path], bool]) -> None:
    if (kind := no_folder_at(dest)) is not None:
        raise FileError(dest, f"{kind}, not a folder; name a new folder for the {what}")
    entries = sorted(os.listdir(dest)) if dest.is_dir() else []
    if entries and mark not in entries and not earlier(dest):
        raise FileError(dest, f"a folder that is no earlier {what} (it holds {first_names(entries)}); a {what} "
                              f"replaces its {owns}: name a new or empty folder")


@contextmanager
def undone_on_failure(dest: Path) -> Iterator[None]:
    """Run a block that writes into the folder ``dest``; when it raises, remove what it added, then re-raise:
    ``dest`` itself (and the parents it made) when it was not there, else each entry under it that was not there
    before. What was there stays, so a user's files are never removed. Why: a ``pinbench requests`` stopped midway
    by a bad input left an empty or half-filled folder, which looked like one ready to travel."""
    top = topmost_missing(Path(dest).absolute())
    before = set() if top is not None else set(_tree_names(dest))
    try:
        yield
    except BaseException:
        if top is not None:
            _remove_entry(top)
        else:
            for name in sorted(set(_tree_names(dest)) - before):   # a new folder goes whole, before its entries
                if os.path.lexists(dest / name):
                    _remove_entry(dest / name)
        raise


def topmost_missing(path: Path) -> Path | None:
    """The outermost of ``path`` and its parents that does not exist (None when ``path`` does): the folder that
    making ``path`` creates, and removing undoes."""
    top = None
    while not os.path.lexists(path) and path != path.parent:
        top, path = path, path.parent
    return top


def mistyped_path(path: Path) -> str:
    """`` (did you mean 'runs/dynamic-degree/mine'?)`` for a ``path`` that is not there when its outermost missing
    part has a folder beside it with a close name (a mistyped recipe, checkpoint or folder anywhere in the path, not
    only its last name), the rest of the path kept; ``""`` when there is none or ``path`` exists."""
    if (top := topmost_missing(path)) is None:
        return ""
    try:
        beside = [entry.name for entry in os.scandir(top.parent) if entry.is_dir()]
    except OSError:   # unreadable: nothing to suggest
        return ""
    if (name := closest(top.name, beside)) is None:
        return ""
    return f" (did you mean {str(top.parent / name / path.relative_to(top))!r}?)"


def _tree_names(folder: Path) -> Iterator[str]:
    """Every entry under ``folder``, relative to it; links are listed, never followed."""
    for here, dirs, files in os.walk(folder):
        for name in (*dirs, *files):
            yield os.path.relpath(os.path.join(here, name), folder)


def _remove_entry(path: Path) -> None:
    with contextlib.suppress(OSError):   # best effort: the failure being raised is what the user needs to see
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def write_if_changed(path: Path | str, data: str | bytes) -> Path:
    """``write_atomic``, unless ``path`` is a regular file that already holds exactly these bytes: a rerun that
    changed nothing leaves its outputs (and their mtimes) as they were."""
    path = Path(path)
    wanted = data.encode("utf-8") if isinstance(data, str) else data
    try:
        held = path.lstat()   # a symlink is not the file it names: it is replaced, never followed
        if S_ISREG(held.st_mode) and held.st_size == len(wanted) and path.read_bytes() == wanted:
            return path
    except OSError:
        pass
    return write_atomic(path, wanted)


@contextmanager
def exclusive(lock_file: Path | str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_file`` (created if needed) for the block.

    For work that several processes of one run may start at once (the shards of a job array preparing
    the same shared inputs): the first does it, the others wait and then find it done. The kernel drops
    the lock when its holder dies, so a killed process never leaves a stale lock behind. A lock file that is
    not a regular file (a FIFO, a link to ``/dev/null``'s kind) is FileError naming it, never a hang.
    """
    import fcntl

    lock_file = Path(lock_file)
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    fd = open_regular(lock_file, os.O_RDWR | os.O_CREAT, mode=creation_mode())
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the flock


def sweep_temporaries(folder: Path | str, name: str | None = None) -> list[Path]:
    """Remove the temporary files ``atomic_path`` made in ``folder`` (for the file ``name`` only, or for any) that
    are still there: a writer killed between creating one and renaming it. Returns the paths removed.

    Only for a caller that holds what keeps every other writer of those files away (the lock they take): a live
    writer's temporary file looks the same.
    """
    stem = re.escape(name) if name is not None else r"[^/]+"
    pattern = re.compile(rf"\.{stem}\.[a-z0-9_]{{8}}\.tmp[^/]*")
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        if pattern.fullmatch(entry.name) and not entry.is_dir(follow_symlinks=False):
            try:
                os.unlink(entry.path)
            except FileNotFoundError:
                continue
            removed.append(Path(entry.path))
    return removed


def sha256_file(path: Path | str) -> str:
    """Hex SHA-256 of a file's bytes, read a chunk at a time (not hashlib.file_digest: Python 3.11, and the mind,
    camerabench and paibench_c images run pinbench on 3.10)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_fd(fd: int) -> str:
    """Hex SHA-256 of the bytes of an open file, read from its start with ``pread`` (its offset is left as it is):
    the file that was opened and checked once, not whatever its path names by the time it is read."""
    digest, offset = hashlib.sha256(), 0
    while chunk := os.pread(fd, _CHUNK, offset):
        digest.update(chunk)
        offset += len(chunk)
    return digest.hexdigest()


def sha256_regular(path: Path | str) -> str:
    """Hex SHA-256 of the regular file ``path`` names (through a symlink), streamed; FileError naming anything else
    (``open_regular``): a FIFO there is never waited on, a folder never read."""
    fd = open_regular(path)
    try:
        return sha256_fd(fd)
    finally:
        os.close(fd)


_HASHED: dict[tuple[int, FileState], str] = {}


def regular_sha256(path: Path) -> str | None:
    """The SHA-256 of ``path`` when it is a regular file, else None (a link, FIFO or folder there is never read nor
    followed: it is opened ``O_NOFOLLOW | O_NONBLOCK`` and hashed only when ``fstat`` says regular, so one swapped in
    after the ``lstat`` neither hangs nor is followed). Hashed once per process while the file (device and inode:
    every hard link to it is the same file) keeps its ``FileState``, ctime included: a file rewritten at its size with
    its mtime set back is read again. The rollouts a run's generation step hashed are not read again by the check at
    its finish, nor a rollout that the sample cache and the run directory share."""
    try:
        if not S_ISREG(path.lstat().st_mode):
            return None
        fd = open_regular(path, follow_symlinks=False)
    except (OSError, FileError):
        return None
    try:
        st = os.fstat(fd)
        key = (st.st_dev, FileState.of(st))
        if key not in _HASHED:
            digest = sha256_fd(fd)
            if FileState.of(os.fstat(fd)) != key[1]:   # written while it was read: not these bytes for long
                return digest
            _HASHED[key] = digest
        return _HASHED[key]
    except OSError:
        return None
    finally:
        os.close(fd)


def _non_finite_constant(name: str) -> None:
    raise ValueError(f"holds the non-finite number {name}; only finite numbers are allowed")


def _finite_number(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError(f"holds the non-finite number {literal} (it overflows to {value}); only finite numbers "
                         "are allowed")
    return value


# One decoder for every call: ``json.loads`` with hooks builds a new decoder (and its scanner) per call, a third of
# the cost of parsing a short line such as a sample record (``pinbench check`` parses 11,222 of them).
_FINITE_DECODER = json.JSONDecoder(parse_constant=_non_finite_constant, parse_float=_finite_number)
# A text in which no number can overflow is parsed without the float hook (a Python call per number: half the
# time of parsing a samples file): a literal reaches float's limit (1.8e308) only with an exponent of three digits
# or more, or with 200 digits or more (199 digits and an exponent of 99 stay below 1e299). An exponent is told from
# the hex digits of a digest by what ends it (a number ends at a delimiter, a digest's digit at a letter or quote).
# Both are looked for in the text with every digit made 0, E made e and + dropped: an exponent is then the literal
# "e000" (a search that skips ahead, 6 ms for CameraBench's 5.9 MB samples file, where [eE] tried at each of its
# 434,597 e's took 33 ms). Dropping + can only find more (e++000), which sends a text to the hooked parser, never
# fewer. The test reads the text's UTF-8 bytes: ``str.translate`` of a text holding one non-ASCII character leaves
# its fast path (230 ms for CameraBench's 4.8 MB of JSONL, which hold 24 such characters; 2 ms for the bytes).
_PLAIN_DECODER = json.JSONDecoder(parse_constant=_non_finite_constant)
_BIG_EXPONENT = re.compile(rb"e0000*(?:[,\]}\s]|$)")
_ZEROED = bytes.maketrans(b"123456789E", b"000000000e")


def _may_overflow(data: bytes) -> bool:
    """Whether a number in the UTF-8 ``data`` may overflow to infinity (a whole file at once: one pass each)."""
    zeroed = data.translate(_ZEROED, b"+")
    return _BIG_EXPONENT.search(zeroed) is not None or b"0" * 200 in zeroed


def loads_json(text: str | bytes, *, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> Any:
    """``json.loads``, with arrays or objects nested beyond the parser's depth a JSONDecodeError, as in
    ``loads_finite_json``: a reader's ``except ValueError`` then covers them. Why: a run's own files (its identity,
    its caches and stamps, a lock, a shard manifest) nested so deep ended ``pinbench run`` and ``status`` with
    "maximum recursion depth exceeded ...", naming no file, where a bad one is named or costs the work again."""
    try:
        return json.loads(text, object_pairs_hook=object_pairs_hook)
    except RecursionError:
        raise _too_deep(text) from None


def loads_finite_json(text: str) -> object:
    """Parse JSON that must hold finite numbers only: ``NaN``, ``Infinity`` and overflowing literals such as
    ``1e999`` (which Python's parser turns into inf) raise ValueError naming the number.

    Why: Python's json accepts all three by default, and one of them in a scorecard or a stored result would
    compare as a number (an Infinity that diffs as PASS) instead of being refused as invalid input. Arrays or
    objects nested beyond the parser's depth (``[[[...]]]`` thousands deep) are a JSONDecodeError too: the parser's
    RecursionError reached the user as its own words, naming no file.
    """
    try:
        if isinstance(text, str) and not text.startswith("\ufeff"):  # what json.loads refuses or decodes first
            return _FINITE_DECODER.decode(text)
        return json.loads(text, parse_constant=_non_finite_constant, parse_float=_finite_number)
    except RecursionError:
        raise _too_deep(text) from None


class _TooDeep(json.JSONDecodeError):
    """JSON nested beyond the parser's depth: no line or column is to blame."""


def _too_deep(text: str | bytes) -> json.JSONDecodeError:
    """The parser's RecursionError on ``[[[...]]]`` nested beyond its depth, as the JSONDecodeError a reader's
    ``except ValueError`` names its file by."""
    return _TooDeep("nested too deeply to parse", text if isinstance(text, str) else "", 0)


_ASCII_WHITESPACE = " \t\n\r\x0b\x0c"


def _json_problem(exc: ValueError) -> str:
    """What is wrong with a line json refused, without json's "line 1" (the line is named apart)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON: {exc.msg} (column {exc.colno})"
    return str(exc)   # a non-finite number (the decoders' hooks)


def _jsonl_values(text: str, path: Path | str, what: str | None, scan: Callable[[str, int], tuple[object, int]],
                  objects: bool = False, lines_before: int = 0) -> Iterator[tuple[int, Any]]:
    """(line number, value) of each non-blank line of a JSONL file's text (read from ``path``), one at a time;
    FileError naming ``path``, the line and (``"bad <what>: "``) what was wrong there otherwise, or a value that is
    no object when ``objects`` (tested here: a generator of its own for it was a tenth of iter_jsonl's time).

    Lines end at \\n, \\r\\n or \\r only, as the bytes are split: ``str.splitlines`` would also split at U+2028
    and the other Unicode separators, which ``json.dumps(ensure_ascii=False)`` leaves raw inside strings; a blank
    line is one of ASCII whitespace, as ``bytes.strip`` sees it; numbers are finite (``loads_finite_json``).
    Fast path: a value ``scan`` (a finite decoder's C scanner) reads from a line's start in the text that ends
    exactly at the line's end is the line's value, as ``decode`` would make it without its per-call wrapper (two
    whitespace matches and a check, most of the cost of a short row), and without a copy of each line (a list of
    them held a second copy of the file); any other line is decoded alone: skipped when blank, else its value or
    its problem named by line. (A value ends where it would in the line alone: JSON holds no raw newline in a
    string, and nothing after a value's last character changes it.)"""
    if "\r" in text:   # one scan; the two replaces copied a samples file's 5.9 MB twice when it held none
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    find, size = text.find, len(text)
    start, lineno = 0, lines_before
    while start <= size:
        lineno += 1
        end = find("\n", start)
        if end < 0:
            end = size
        begin, start = start, end + 1
        try:
            value, stop = scan(text, begin)
        except (StopIteration, ValueError, RecursionError):   # no value at column 0 (blank, leading space, BOM),
            # bad JSON, NaN, nested too deeply: decoded alone below, which names the problem
            stop = -1
        if stop != end:
            line = text[begin:end]
            if not line.strip(_ASCII_WHITESPACE):
                continue
            try:
                value = loads_finite_json(line)
            except ValueError as exc:
                reason = _json_problem(exc)
                raise FileError(path, f"bad {what}: {reason}" if what else reason, line=lineno) from None
        if objects and type(value) is not dict:
            reason = f"expected a JSON object, got {type(value).__name__}"
            raise FileError(path, f"bad {what}: {reason}" if what else reason, line=lineno)
        yield lineno, value


def iter_jsonl(path: Path | str, what: str | None = None, error: type[Exception] = FileError
               ) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank line of a JSONL data file, lazily: a caller that makes a small
    record of each row holds one row at a time, never a list of them. Lines, blanks and numbers as in
    ``_jsonl_values``; ``error`` (``file_error``: one line naming the file, and the line, and ``"bad <what>"``) when
    the file is missing, not a regular file (a FIFO: never a hang), not UTF-8, or a line is not one JSON object (or
    escapes a lone surrogate: ``lone_surrogate``). A recipe passes its own error class rather than converting
    FileError by hand around its loop.

    Parsed with the float hook always: a data set's rows hold few numbers, and the hook costs only per float
    literal, where the test that spares it (``_may_overflow``) costs a pass over the file (6 ms of CameraBench's
    load, which holds no float at all)."""
    path = Path(path)
    text = read_data_file(path, error)
    try:
        if lone := lone_surrogate(text):
            raise FileError(path, f"bad {what}: {lone[1]}" if what else lone[1], line=lone[0])
        yield from _jsonl_values(text, path, what, _FINITE_DECODER.scan_once, objects=True)
    except FileError as exc:
        if isinstance(exc, error):
            raise
        raise file_error(error, path, exc.reason, exc.line) from None


def parse_finite_jsonl(text: str, path: Path | str, parse: Callable[[object], T], what: str) -> list[T]:
    """Each non-blank line of a JSONL file's text (read from ``path``), parsed as ``_jsonl_values`` reads it
    and then by ``parse``; ValueError (FileError for the JSON) names the file, the line and ``what`` was bad
    there (``"sample record"``). Records hold many numbers: the float hook is used only where one may overflow."""
    return list(iter_finite_jsonl(text, path, parse, what))


def iter_finite_jsonl(text: str, path: Path | str, parse: Callable[[object], T], what: str,
                      lines_before: int = 0) -> Iterator[T]:
    """``parse_finite_jsonl``, an item at a time; ``lines_before``: the lines of the file before ``text`` (a piece of
    it), which the line numbers go on from."""
    may_overflow = _may_overflow(text.encode("utf-8", "surrogatepass"))
    scan = (_FINITE_DECODER if may_overflow else _PLAIN_DECODER).scan_once
    for lineno, value in _jsonl_values(text, path, what, scan, lines_before=lines_before):
        try:
            item = parse(value)
        except ValueError as exc:
            raise ValueError(f"{path}:{lineno}: bad {what}: {exc}") from None
        yield item


def read_finite_jsonl(path: Path | str, parse: Callable[[object], T], what: str) -> list[T]:
    """Each non-blank line of a JSONL file, parsed with finite numbers only and then by ``parse``; ValueError
    names the file, the line and ``what`` was bad there (``"sample record"``); FileError when the file cannot be
    read (``open_regular``: missing, a FIFO; not UTF-8)."""
    return list(iter_finite_jsonl_file(path, parse, what))


def iter_finite_jsonl_file(path: Path | str, parse: Callable[[object], T], what: str) -> Iterator[T]:
    """``read_finite_jsonl``, an item at a time, the file read ``JSONL_CHUNK`` bytes of whole lines at a time: for a
    reader that keeps a few (``pinbench status``, the stand-ins of a samples file: it held the file's bytes, its
    text and every record, 257 MiB peak RSS at 112,220 samples). Lines and bytes are numbered across reads. A line
    longer than a read is kept as its reads and joined once its end comes: joining and searching what was read of it
    at each read made a 20 MiB line take about 10 s in reads of 4 KiB."""
    path = Path(path)
    with os.fdopen(open_regular(path), "rb") as fh:
        rest: list[bytes] = []   # the reads since the last whole line
        lines, offset = 0, 0
        while True:
            try:
                chunk = fh.read(JSONL_CHUNK)
            except OSError as exc:
                raise FileError(path, f"unreadable: {exc.strerror}") from None
            cut = chunk.rfind(b"\n") + 1 if chunk else 0   # a cut at \n splits no \r\n and no character
            if chunk and not cut:
                rest.append(chunk)
                continue
            whole, rest = b"".join((*rest, chunk[:cut])), [chunk[cut:]]
            try:
                text = whole.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise FileError(path, f"not UTF-8 text (byte {offset + exc.start})") from None
            yield from iter_finite_jsonl(text, path, parse, what, lines)
            if not chunk:
                return
            lines += whole.count(b"\n") + whole.count(b"\r") - whole.count(b"\r\n")   # as _jsonl_values counts
            offset += len(whole)


JSONL_CHUNK = 4 << 20


def read_yaml(path: Path, error: type[FileError] = FileError) -> object:
    """Parse a YAML data file safely; a duplicate key, a syntax error, a missing file or aliases repeating more than
    ``MAX_YAML_VALUES`` values (``_repeats_too_much``) is ``error`` (one line).

    What a text parsed to is kept as JSON in ``<cache>/yaml-3/`` by the text's SHA-256 (``_kept_yaml``), so a later
    command reads it without importing or running the YAML parser: 15-20 ms of every command that reads a recipe's
    declaration, a tenth of a rerun that finds nothing to do. A value JSON cannot hold exactly is parsed each time,
    and so is a text whose kept JSON does not match the digest on its first line (``_yaml_digest``). A text holding
    a secret (``holds_secret``: a token in a generator config) is never kept, and what was kept of it before goes:
    the cache may be a folder a cluster shares, and tokens were found there; kept files are its owner's alone."""
    from pinbench.core.provenance import holds_secret  # provenance imports this module

    text = read_data_file(path, error)
    kept = _kept_yaml(text)
    if kept is not None and holds_secret(text):
        with contextlib.suppress(OSError):
            kept.unlink(missing_ok=True)
        kept = None
    if kept is not None and (held := read_regular_text(kept)) is not None:
        digest, _, body = held.partition("\n")
        if digest == _yaml_digest(kept, body):
            with contextlib.suppress(ValueError):
                return loads_json(body)
    data = _parse_yaml(path, text, error)
    if kept is not None:
        _keep_yaml(kept, data)
    return data


# 1 kept {"format": 1, "data": ...} with no digest; 2, in <cache>/yaml/, kept files as any file (0o644) and the texts
# holding a secret: its files are never read, and the first parse kept removes that folder (_drop_older_yaml_caches)
YAML_CACHE_FORMAT = 3
YAML_CACHE_DIR = f"yaml-{YAML_CACHE_FORMAT}"
_YAML_CACHE_NAME = re.compile(r"yaml(?:-(?P<format>[0-9]+))?")   # "yaml": formats 1 and 2
YAML_CACHE_FILES = 256        # the newest kept; a recipe's YAML files and references are a few dozen
YAML_CACHE_BYTES = 1 << 20    # a parsed file's JSON larger than this is not kept (aliases written out)


def _kept_yaml(text: str) -> Path | None:
    """Where the parse of ``text`` is kept, or None without a usable cache root (a bad $PINBENCH_CACHE is named by
    the commands that store there, not by every YAML read)."""
    try:
        root = cache_root()
    except ValueError:
        return None
    return root / YAML_CACHE_DIR / f"{hashlib.sha256(text.encode('utf-8', 'surrogateescape')).hexdigest()}.json"


def _keep_yaml(path: Path, data: object) -> None:
    """Keep ``data`` at ``path`` when its JSON gives it back equal (not: a date, a set, bytes, a non-finite number, a
    key that is no string), then drop the oldest beyond ``YAML_CACHE_FILES``; a cache that cannot be written is only
    slower."""
    try:
        body = json.dumps(data, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return
    if len(body) > YAML_CACHE_BYTES or json.loads(body) != data:
        return
    try:
        write_atomic(path, f"{_yaml_digest(path, body)}\n{body}", mode=0o600)
        kept = sorted(path.parent.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
        for old in kept[:-YAML_CACHE_FILES]:
            old.unlink(missing_ok=True)
        _drop_older_yaml_caches(path.parent)
    except OSError:
        pass


def _drop_older_yaml_caches(current: Path) -> None:
    """Remove the parse caches of older formats beside ``current``: a file kept before format 3 may be readable by
    all and hold a token, and no read of its text comes to tighten or remove it. Only where a parse is kept (a
    miss, after a parse of 15 ms or more), so that a hit costs no listing of the cache root. A newer format's is
    its pinbench's (another checkout sharing the cache root): removed, each removed the other's at every parse."""
    for folder in current.parent.iterdir():
        named = _YAML_CACHE_NAME.fullmatch(folder.name)
        if named and int(named["format"] or 0) < YAML_CACHE_FORMAT and folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)


def _yaml_digest(kept: Path, body: str) -> str:
    """The SHA-256 of a kept parse's JSON text, its format and the name it is kept under (the YAML text's SHA-256).
    Why: a kept value edited by hand, or another text's renamed, was given for the text as its parse (a recipe's
    declaration, a reference's values) with nothing said; it no longer matches, and the text is parsed again."""
    return hashlib.sha256(f"{YAML_CACHE_FORMAT}\n{kept.name}\n{body}".encode("utf-8", "surrogatepass")).hexdigest()


def _parse_yaml(path: Path, text: str, error: type[FileError]) -> object:
    import yaml

    class UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # the C parser when libyaml is there
        """SafeLoader that rejects duplicate keys (a repeated metric or option would silently win)."""

        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # "<<: *anchor" merges are flattened by SafeLoader itself
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    try:
        data = yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise error(path, f"invalid YAML{where}: {' '.join(str(problem).split())}") from None
    if "*" in text and _repeats_too_much(data):
        raise error(path, f"invalid YAML: its aliases repeat more than {MAX_YAML_VALUES:,} values (each *name "
                          "repeats its anchor's)")
    return data


MAX_YAML_VALUES = 1_000_000   # a data file's values as aliases repeat them; a recipe's or reference's hold thousands


def _repeats_too_much(data: object) -> bool:
    """Whether ``data`` holds more than ``MAX_YAML_VALUES`` values once its aliases are written out (one inside
    itself, ``&a [*a]``, holds them without end): ten aliases of ten aliases ... of a list, a few hundred bytes,
    held 10**9, and a diff writing a reference's provenance out ran on (stopped after 60 s). Counted without recursion,
    a value at a time, up to the bound."""
    stack, count = [data], 0
    while stack and count <= MAX_YAML_VALUES:
        node = stack.pop()
        count += 1
        stack.extend(node.values() if isinstance(node, dict) else node if isinstance(node, list) else ())
    return count > MAX_YAML_VALUES


def tree_fingerprint(path: Path | str, *, mtimes: bool = False) -> str:
    """A cheap identity of what a path holds: SHA-256 of every file's path relative to it and its size (one
    ``stat`` each, no reading), ``absent`` when nothing is there. The same files moved or mounted elsewhere keep
    it; another folder does not. Per-sample input hashes still tell files of one size apart. With ``mtimes`` it
    also changes when a file is rewritten: a key for what was read from the files in this process."""
    path = Path(path)
    if not path.exists():
        return "absent"
    digest = hashlib.sha256()
    for entry in sorted(f"{name}\0{size}{mtime}\n" for name, size, mtime in _tree_entries(path, mtimes)):
        digest.update(entry.encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def shown_name(relative: str) -> str:
    """A file's path for a one-line message: undecodable bytes and control characters escaped."""
    text = os.fsencode(relative).decode("utf-8", "backslashreplace")
    return repr(text)[1:-1] if not text.isprintable() else text


def tree_listing(path: Path | str) -> dict[str, int]:
    """What ``tree_fingerprint`` (without mtimes) digests, per file: each file's path relative to ``path`` (its
    name for a file) and its size, -1 for a dangling symlink; empty when nothing is there. Kept beside a run's
    identity so that a refusal can say which files changed, not only that the fingerprint did."""
    path = Path(path)
    return {name: size for name, size, _ in _tree_entries(path, False)} if path.exists() else {}


def _tree_entries(path: Path, mtimes: bool) -> Iterator[tuple[str, int, str]]:
    """(relative path, size, mtime field) of each file under an existing ``path``, or of ``path`` itself."""
    if path.is_file():
        stat = path.stat()
        yield path.name, stat.st_size, _mtime(stat, mtimes)
        return
    for folder, dirs, files in os.walk(path):
        dirs.sort()
        for name in files:
            file = Path(folder) / name
            try:
                stat = file.stat()
                size, mtime = stat.st_size, _mtime(stat, mtimes)
            except OSError:  # a dangling symlink: named, with no size
                size, mtime = -1, ""
            yield file.relative_to(path).as_posix(), size, mtime


def _mtime(stat: os.stat_result, wanted: bool) -> str:
    return f"\0{stat.st_mtime_ns}" if wanted else ""
