"""Finished samples shared by every run directory of a machine: a record is found by what it was computed from.

Why: a run directory belongs to one set of inputs (``pinbench.core.rundir``), so after fixing a folder of videos,
moving a run aside or choosing another ``--out``, every unchanged sample was computed again (hours with RAFT).
A record here is keyed by its step, the hash of its task (the inputs' content and the options that change results,
``pinbench.core.runner.input_hash``) and its implementation (recipe version, code digest, image, the installed
versions of the recipe's ``numerics:``), so any run that meets the same key reuses the record instead of computing
it; an edited scoring constant changes the code digest, an upgraded torch or OpenCV the packages digest, and so the
key.

Layout: ``<root>/<key[:2]>/<key>.jsonl``, one store line (``pinbench.core.store``: the record's bytes and their
SHA-256), written under a temporary name and renamed into place, so shards writing one key at once each leave a
whole file. A torn or edited entry, one whose record is not the task's, or one larger than any record
(``RECORD_BYTES``, not read), is named in one line and replaced. Only
ok records that took at least ``MIN_SECONDS`` to compute are kept: anything faster is cheaper to compute than to read
back; but a step whose records assemble what an external tool computed (MIND's ``process.py``) keeps them all
(``Run.compute``'s ``min_seconds=0``), and ``Run.pending`` does not send a sample the cache holds to that tool; the
step's ``compute`` then takes the record ``pending`` read (one cache object per step of a run), whatever a prune
removed since.
A hit marks its entry used (its mtime); the cache is bounded by ``PINBENCH_SAMPLE_CACHE_MB`` (MiB, default 2048),
least recently used entries first, checked after a run stored something and by ``pinbench cache prune``.
A step whose records name a file of the run directory (the generation step's rollouts) keeps that file beside its
record, ``<key>.file``, a hard link (none on another file system: a copy would fill it; a copy on another mount of
the run's file system, a container's, where no link crosses: ``pinbench.ops.generation``), so it costs the cache no
bytes while a run directory holds it too; the bound counts such a file only once no other link to it is left. Being
one inode with each run directory's, it is kept read-only (``pinbench.ops.generation._read_only``), and checked
against its record's SHA-256, and a rollout against its request (this version's checks), before it is placed.
``PINBENCH_SAMPLE_CACHE`` names the folder (default ``<cache root>/samples``, a path a cluster shares works too)
or ``off``. The entries are as trustworthy as the folder: anyone who can write there can plant a record.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import os
import re
import shutil
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from pinbench.core.config import Implementation
from pinbench.core.files import (
    FileError,
    MissingFile,
    NotRegularFile,
    atomic_path,
    cache_root,
    enclosing,
    not_a_folder,
    not_regular,
    read_regular_bytes,
)
from pinbench.core.options import expand_user, finite_at_least_zero
from pinbench.core.store import Stored, decode_line, encode_line

ENV, SIZE_ENV = "PINBENCH_SAMPLE_CACHE", "PINBENCH_SAMPLE_CACHE_MB"
DEFAULT_MB = 2048
MIN_SECONDS = 0.01
PRUNE = "`pinbench cache prune`"
SAID = 3   # unusable entries a step names, one line each
MIB = 1 << 20
RECORD_BYTES = 64 * MIB   # a record's store line is kilobytes: anything larger is not read (nor kept)
SUFFIX, FILE_SUFFIX = ".jsonl", ".file"   # an entry's record, and the file it names (when its step keeps one)
_BUCKET = re.compile(r"[0-9a-f]{2}")
_ENTRY = re.compile(r"([0-9a-f]{64})(" + re.escape(SUFFIX) + "|" + re.escape(FILE_SUFFIX) + ")")
_SWITCH_WORDS = {"0", "1", "false", "true", "no", "yes", "on", "none", "disable", "disabled", "enable", "enabled"}


def cache_dir(run_dir: Path | None = None, environ: Mapping[str, str] = os.environ,
              inputs: Mapping[str, Path] | None = None) -> Path | None:
    """The sample cache's folder (absent until a run keeps a record), or None when ``PINBENCH_SAMPLE_CACHE=off``
    (read from ``environ``: ``--runtime docker`` passes the host's on to its containers); empty or blank is the
    default, a relative path is the working directory's.
    ValueError naming the variable when the path is something other than a folder: a regular file or a FIFO there
    was taken silently, ``cache show`` counting 0 records and every run computing every sample again; and, for the
    run in ``run_dir``, when the folder is that directory or inside it: the cache is every run's, and each entry
    another run kept or used there changed a file of the directory, so its rerun manifest (``pinbench.core.rerun``)
    no longer held and the finished run computed again; so, with ``inputs`` (the run's path options by name), when it
    is inside one of them: each entry a run kept changed those inputs, and every rerun was refused as a run of
    other inputs."""
    value = environ.get(ENV, "").strip()
    if value.lower() == "off":
        return None
    if value.lower() in _SWITCH_WORDS:  # meant as a switch, it was a folder of that name in the working directory
        raise ValueError(f"${ENV}={value!r}: a folder or 'off', not a switch; 'off' turns the sample cache off, "
                         "unset it for the default")
    root = expand_user(value, f"${ENV}") if value else cache_root() / "samples"
    if run_dir is not None and Path(os.path.realpath(root)).is_relative_to(os.path.realpath(run_dir)):
        raise ValueError(f"${ENV}={root}: inside the run directory {run_dir}; the sample cache is shared by every "
                         "run, name a folder outside it")
    if (name := enclosing(root, inputs or {})) is not None:
        raise ValueError(f"${ENV}={root}: inside -o {name}={inputs[name]}, an input of the run; what the cache keeps "
                         "there would change those inputs and every rerun be refused: name a folder outside it")
    try:
        mode = root.stat().st_mode   # a symlink to a shared folder is a folder
    except FileNotFoundError:
        if os.path.islink(root):   # no folder can be made there: every run computed everything, unsaid
            raise ValueError(f"${ENV}={root}: a symlink to {os.readlink(root)}, which does not exist; name a folder "
                             "or 'off'") from None
        return root
    except OSError as exc:
        raise ValueError(f"${ENV}={root}: the sample cache cannot be read ({exc.strerror})") from None
    if (kind := not_a_folder(mode)) is not None:
        raise ValueError(f"${ENV}={root}: not a folder but {kind}; name a folder or 'off'")
    return root


def bucket_kind(folder: Path) -> str | None:
    """What stands at a subfolder's name (``<root>/<key[:2]>``) when it is no folder (``not_a_folder``'s words of its
    lstat: a symlink is never followed), else None (a folder, or nothing)."""
    try:
        return not_a_folder(folder.lstat().st_mode)
    except OSError:
        return None


def misplaced(folder: Path) -> str | None:
    """Why a subfolder's place holds no entries, in one clause, or None. A symlink there was followed: its records
    were used and kept, never counted nor pruned. A regular file or FIFO there blocked each key of it for good,
    said as "File exists" and passed over by ``prune``."""
    kind = bucket_kind(folder)
    return None if kind is None else f"{kind} where a folder of the cache belongs ({PRUNE} removes it)"


def checked_dir(run_dir: Path, environ: Mapping[str, str] = os.environ,
                inputs: Mapping[str, Path] | None = None) -> Path | None:
    """``cache_dir``, and its bound (``size_bound``) when the cache is on: what a run checks before it prepares
    anything, and ``pinbench submit`` before it writes or queues a job (each job was refused by it, once scheduled)."""
    root = cache_dir(run_dir, environ, inputs)
    if root is not None:
        size_bound(environ)
    return root


def size_bound(environ: Mapping[str, str] = os.environ) -> int:
    """The cache's bound in bytes: ``PINBENCH_SAMPLE_CACHE_MB`` MiB, else ``DEFAULT_MB``. ValueError naming the
    variable for a value that is no finite number of 0 or more (it was read as the default, or as 0 when negative,
    which emptied the cache after every run, and ``inf`` ended a run that had stored its samples with a traceback)."""
    value = environ.get(SIZE_ENV, "").strip()
    if not value:
        return DEFAULT_MB * MIB
    mebibytes = finite_at_least_zero(value)
    if mebibytes is None:
        raise ValueError(f"${SIZE_ENV}={value!r}: the sample cache's bound must be a finite number of MiB, 0 or more")
    return bound_bytes(mebibytes)


def bound_bytes(mebibytes: float) -> int:
    """A finite bound of ``mebibytes`` MiB in bytes; one too large for a float of bytes (1e303 MiB: inf) is no
    bound, as 8 EiB (``sys.maxsize``): its ``int()`` ended ``cache prune --max-mb`` and each run with a traceback."""
    return int(min(mebibytes * MIB, sys.maxsize))


class SampleCache:
    """The records of one step (``scope``: recipe and step folder) computed by one implementation."""

    min_seconds = MIN_SECONDS   # a record computed faster is not kept

    def __init__(self, root: Path, scope: str, implementation: Implementation) -> None:
        self.root, self.scope, self.implementation = root, scope, implementation
        self.stored = 0   # entries this object wrote
        packages = "" if implementation.packages is None else f"{implementation.packages}\0"   # generation's: as before
        self._prefix = (f"{scope}\0{implementation.recipe_version}\0{implementation.code}\0{implementation.image}\0"
                        f"{packages}")
        self._listed: dict[str, frozenset[str]] = {}
        self._implementation = implementation.to_json()   # as a record names it
        self._unusable = 0   # entries found but not usable (said by ``_say``)
        self._put_failed = False   # ``put`` could not keep a record (said once)
        self._held: dict[str, Stored | None] = {}   # what ``record_of(hold=True)`` found, by task hash

    def key(self, task_hash: str) -> str:
        return hashlib.sha256((self._prefix + task_hash).encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / (key + SUFFIX)

    def file(self, task_hash: str) -> Path:
        """Where the file a task's record names is kept (a step that keeps one: ``FILE_SUFFIX``)."""
        key = self.key(task_hash)
        return self.root / key[:2] / (key + FILE_SUFFIX)

    def get(self, task_hash: str) -> Stored | None:
        """The stored record of a task (its digest checked), or None. Each subfolder is listed once, so a run that finds
        nothing does not try to open a file per sample."""
        key = self.key(task_hash)
        bucket = key[:2]
        if bucket not in self._listed:
            folder = self.root / bucket
            if (why := misplaced(folder)) is not None:
                self._say(f"{folder}: {why}")
                self._listed[bucket] = frozenset()
            else:
                try:
                    self._listed[bucket] = frozenset(os.listdir(folder))
                except OSError:
                    self._listed[bucket] = frozenset()
        if key + SUFFIX not in self._listed[bucket]:
            return None
        path = self._path(key)
        stored, why = self._read(path, task_hash)
        if why:
            self._say(why)
        if stored is not None:
            with contextlib.suppress(OSError):
                os.utime(path)   # used now: the last to be pruned
        return stored

    def record_of(self, sample_id: str, task_hash: str, *, hold: bool = False) -> Stored | None:
        """``get``, for the runner: a record naming another sample is no hit (its task's hash covers the id, so only
        a planted one does; taken, it ended the run with "duplicate sample ids" and stayed in the run's store).
        With ``hold`` (``Run.pending``), what it finds, a record or none, is what this key's next call takes: a
        prune between the two removed a record the first had found, and the external tool, not sent that sample,
        left it failed; and an unusable entry was named by each. A held call keeps it held (``pending`` asked
        twice)."""
        if task_hash in self._held:
            return self._held[task_hash] if hold else self._held.pop(task_hash)
        stored = self.get(task_hash)
        if stored is not None and stored.data["sample_id"] != sample_id:
            self._say(f"{self._path(self.key(task_hash))}: the record of {stored.data['sample_id']!r} is not of "
                      f"{sample_id!r}")
            stored = None
        if hold:
            self._held[task_hash] = stored
        return stored

    def part(self, task_hashes: Collection[str]) -> SampleCache:
        """A copy for the device worker (``Run.compute``'s ``devices``, pickled into its spawned process) that computes
        the tasks of ``task_hashes``: it holds what ``record_of(hold=True)`` found for those alone, and no folder
        listings (the worker lists a folder it reads). Every worker was sent every held record and listing: memory
        once per device."""
        part = copy.copy(self)
        part._held = {task_hash: self._held[task_hash] for task_hash in task_hashes if task_hash in self._held}
        part._listed = {}
        return part

    def refused(self, task_hash: str, why: str) -> None:
        """Said for a sound entry of this task whose record the runner refused (``why``: a failure, a result the
        recipe's check refuses, a record it cannot read): it was computed again unsaid."""
        self._say(f"{self._path(self.key(task_hash))}: the record is refused ({why})")

    def _read(self, path: Path, task_hash: str) -> tuple[Stored | None, str]:
        """The entry's record when it is sound and this task's, else None and why not ("" when it is gone). A symlink
        is no entry (``prune`` removes it): it was followed and its target reused. A record of other inputs or code
        (moved, planted) is no hit: the runner refused it too, but unsaid."""
        try:
            line = read_regular_bytes(path, follow_symlinks=False, limit=RECORD_BYTES)
        except MissingFile:   # a prune removed it since the listing
            return None, ""
        except NotRegularFile as exc:   # a folder there blocks its key until a prune
            return None, f"{exc} ({PRUNE} removes it)"
        except FileError as exc:
            return None, str(exc)
        stored, why, _ = decode_line(line.rstrip(b"\n"), str(path))
        if stored is None:
            return None, why
        if (stored.data.get("input_hash") != task_hash
                or stored.data.get("implementation") != self._implementation):
            return None, f"{path}: the record of {stored.data['sample_id']!r} is not of this key's inputs and code"
        return stored, ""

    def _say(self, why: str) -> None:
        """One line per unusable entry, for the first ``SAID`` of this step, then one for the rest (each was passed over
        unsaid, and a folder there blocked its key for good)."""
        self._unusable += 1
        if self._unusable <= SAID:
            print(f"sample cache: {why}; not used, computed again", file=sys.stderr, flush=True)
        elif self._unusable == SAID + 1:
            print("sample cache: more unusable entries of this step, not named; each computed again",
                  file=sys.stderr, flush=True)

    def put(self, task_hash: str, body: bytes) -> None:
        """Keep a record's bytes under its task's key. A cache that cannot be written (full, read-only, another
        user's folder) only costs time; the step's first such failure is said in one line (none was: a run kept
        nothing and no one knew why)."""
        path = self._path(self.key(task_hash))
        line = encode_line(body)
        why = misplaced(path.parent) or (
            f"{len(line)} bytes, more than the {RECORD_BYTES} such a file holds" if len(line) > RECORD_BYTES
            else _write(path, line))
        if why:
            self._not_kept(path, why)
            return
        self.stored += 1

    def _not_kept(self, path: Path, why: str) -> None:
        """Said for the step's first entry it could not keep only."""
        if not self._put_failed:
            print(f"sample cache: {path}: not kept ({why}); the run goes on, keeping what it can",
                  file=sys.stderr, flush=True)
        self._put_failed = True


def _write(path: Path, line: bytes) -> str:
    """Put ``line`` at ``path`` whole (renamed into place); why it could not be, else ""."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            tmp.write_bytes(line)
    except OSError as exc:
        return exc.strerror or str(exc)
    return ""


def planted(path: Path) -> str | None:
    """What stands at an entry's path when it is neither absent nor a regular file (``"is a directory"``, ``"a
    symlink"``, ``"a FIFO (named pipe)"``; never followed), else None: a thing no entry is, which ``prune`` removes."""
    try:
        return not_regular(path.lstat().st_mode)
    except OSError:
        return None


@dataclass(frozen=True)
class Pruned:
    """What ``prune`` did: entries and bytes removed and kept; of the kept, those it could not remove (``refused``,
    the first one's path and reason in ``why``); ``planted``, each thing at an entry's name that is no regular file
    (a folder, a FIFO, a symlink) or no folder at a subfolder's (a symlink, a file), with what it is, removed
    unless ``prune`` was told to keep them (or refused);
    ``unlisted``, why the cache's folder could not be listed (nothing was counted nor removed), else "";
    ``unentered``, each subfolder that could be listed but not entered (mode 0644: its entries can be neither told
    apart nor removed), with why, passed over."""

    removed: int
    removed_bytes: int
    kept: int
    kept_bytes: int
    refused: int = 0
    why: str = ""
    planted: tuple[str, ...] = ()
    unlisted: str = ""
    unentered: tuple[str, ...] = ()

    def unentered_line(self) -> str:
        """``unentered`` in one line ("" when none)."""
        if not self.unentered:
            return ""
        more = f" (and {len(self.unentered) - 1} more such folders)" if len(self.unentered) > 1 else ""
        return f"{self.unentered[0]}{more}; its entries are neither counted nor removed"


def prune(root: Path, bound: float, *, clear: bool = True) -> Pruned:
    """Remove the least recently used entries until the cache holds at most ``bound`` bytes. Only the cache's own
    entries (``<key[:2]>/<key>.jsonl``) count: a run directory in the same folder (``$PINBENCH_SAMPLE_CACHE`` set to
    ``runs/``) lost its ``samples/run.jsonl``, taken for an entry. Another prune of the same folder (two runs, or
    the shards of a job array on a shared cache, ending together) may remove an entry between its listing and its
    stat or unlink: that entry is gone, not an error (it was a FileNotFoundError that ended a run after it had
    computed every sample, before its scorecard), and only what this call removed is counted as removed. An entry
    it may not remove (a shared cache's folder of another user's, a read-only one) is kept and counted in
    ``refused``: it had ended, with its OSError, the run that stored something after computing every sample.

    A thing at an entry's name that is no regular file (a folder, FIFO or symlink planted at ``<key>.file``) blocked
    that key for good: no link could be renamed over a folder, so its rollout was never kept again. Each is listed
    in ``planted`` and, with ``clear``, removed whatever the bound (a symlink, never what it points to; a folder
    with what it holds, its links not followed), or counted in ``refused`` when it may not be. So is anything but a
    folder at a subfolder's name (``misplaced``)."""
    groups: dict[str, tuple[int, int, list[str]]] = {}   # key -> (last used, bytes, its files)
    found: list[tuple[str, str]] = []   # (path, what it is)
    unentered: list[str] = []
    try:   # a folder others may write in but not list (a cluster's drop box, mode 0733): that ended the run
        buckets = sorted(root.iterdir()) if root.is_dir() else []
    except OSError as exc:
        return Pruned(0, 0, 0, 0, unlisted=f"{root}: cannot be listed ({exc.strerror or exc})")
    for bucket in buckets:
        if not _BUCKET.fullmatch(bucket.name):
            continue
        if (kind := bucket_kind(bucket)) is not None:
            found.append((str(bucket), kind))
            continue
        try:
            listed = list(os.scandir(bucket))
        except OSError:   # a folder this user may not read (another's, umask 077): none of its entries are ours
            continue
        held_here: dict[str, tuple[int, int, list[str]]] = {}   # its keys are this bucket's alone
        found_here: list[tuple[str, str]] = []
        try:
            for entry in listed:
                named = _ENTRY.fullmatch(entry.name)
                if named and entry.name.startswith(bucket.name) and not entry.is_file(follow_symlinks=False):
                    if (kind := planted(Path(entry.path))) is not None:
                        found_here.append((entry.path, kind))
                elif named and entry.name.startswith(bucket.name):
                    try:
                        stat = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    # a kept file still linked from a run directory costs the cache nothing
                    size = stat.st_size if named[2] == SUFFIX or stat.st_nlink == 1 else 0
                    used, held, paths = held_here.get(named[1], (0, 0, []))
                    held_here[named[1]] = (max(used, stat.st_mtime_ns), held + size, [*paths, entry.path])
        except OSError as exc:   # listed but not entered: the PermissionError ended the prune and the run before it
            unentered.append(f"{bucket}: cannot be entered ({exc.strerror or exc})")
            continue
        groups.update(held_here)
        found += found_here
    entries = sorted(groups.values())
    total = sum(size for _, size, _ in entries)
    removed = removed_bytes = gone = refused = 0
    why = ""
    for path, _ in found if clear else ():
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            refused, why = refused + 1, why or f"{path}: {exc.strerror or exc}"
    for _, size, paths in entries:
        if total <= bound:
            break
        unlinked, denied = 0, ""
        for path in paths:
            try:
                os.unlink(path)
                unlinked += 1
            except FileNotFoundError:
                pass
            except OSError as exc:
                denied = denied or f"{path}: {exc.strerror or exc}"
        if denied:
            refused, why = refused + 1, why or denied
            continue
        total -= size
        if not unlinked:
            gone += 1
            continue
        removed, removed_bytes = removed + 1, removed_bytes + size
    return Pruned(removed, removed_bytes, len(entries) - removed - gone, total, refused, why,
                  tuple(f"{path}: {kind}" for path, kind in sorted(found)), unentered=tuple(unentered))
