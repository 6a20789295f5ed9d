"""What a task says about an input file: its path under the input root, its size and the SHA-256 of its bytes.

Why not the absolute path and mtime (the key before #24): the same videos mounted elsewhere (another node of a
cluster, ``/inputs/videos`` in an image, the fixture written into another run directory) recomputed every
sample, while a key that names a path still said nothing of the file. A content digest is the file's identity
wherever it lies; the path relative to the input root keeps two equal files apart as two samples.

A full SHA-256, not a sampled fingerprint: reading a file once costs far less than decoding and scoring it. Each
file is hashed once per run directory: its digest is cached in ``.pinbench-input-digests.json`` there, keyed by
the file's absolute path, size, mtime_ns and inode, so a rerun reads no input again unless one of those changed
(an edit in place that keeps size and mtime is not seen: ``pinbench run --verify-inputs`` ignores the cache and
hashes every input). Shards of one run build their tasks under one lock: the first hashes, the others read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pinbench.core.files import exclusive, sha256_file, write_atomic

DIGESTS_FILE = ".pinbench-input-digests.json"
_LOCK = Path(".pinbench-locks") / ".input-digests"
_FORMAT = 1


class InputFileError(ValueError):
    """An input is not a regular file under its root (one line naming it)."""


@dataclass(frozen=True)
class _Seen:
    """What the cache keys a digest by, beside the absolute path: a change to any of them hashes again."""

    size: int
    mtime_ns: int
    inode: int

    @classmethod
    def of(cls, stat: os.stat_result) -> _Seen:
        return cls(stat.st_size, stat.st_mtime_ns, stat.st_ino)


class InputDigests:
    """SHA-256 of input files, each computed once per run directory (see the module docstring)."""

    def __init__(self, run_dir: Path | str, *, verify: bool = False) -> None:
        self.path = Path(run_dir) / DIGESTS_FILE
        self.verify = verify
        self.hashed = 0   # files read in full by this process
        self._cache: dict[str, tuple[_Seen, str]] = {} if verify else _load(self.path)
        self._changed = False

    def sha256(self, path: Path | str) -> str:
        """The hex SHA-256 of a regular file's bytes (a symlink counts as its target); InputFileError otherwise."""
        where = os.path.abspath(path)
        before = _regular_stat(path)
        cached = self._cache.get(where)
        if cached is not None and cached[0] == _Seen.of(before):
            return cached[1]
        digest = sha256_file(path)
        self.hashed += 1
        if _Seen.of(os.stat(path)) == _Seen.of(before):   # not being written while it was read
            self._cache[where] = (_Seen.of(before), digest)
            self._changed = True
        return digest

    def key(self, path: Path | str, root: Path | str) -> dict[str, Any]:
        """``{"path": <relative to root, "/"-separated>, "size": bytes, "sha256": hex}``: what a task holds."""
        path, root = Path(path), Path(root)
        try:
            relative = path.relative_to(root).as_posix()
        except ValueError:
            raise InputFileError(f"{path}: not under its input root {root}") from None
        digest = self.sha256(path)
        return {"path": relative, "size": os.stat(path).st_size, "sha256": digest}

    def save(self) -> None:
        """Write the cache when this process added to it (atomically; the caller holds the run's digest lock)."""
        if not self._changed:
            return
        merged = _load(self.path)   # entries another process wrote since this one read the file
        merged.update(self._cache)
        entries = {where: {"size": seen.size, "mtime_ns": seen.mtime_ns, "inode": seen.inode, "sha256": digest}
                   for where, (seen, digest) in sorted(merged.items())}
        write_atomic(self.path, json.dumps({"format": _FORMAT, "files": entries}, indent=0) + "\n")
        self._changed = False


@contextmanager
def input_digests(run_dir: Path | str, *, verify: bool = False) -> Iterator[InputDigests]:
    """An ``InputDigests`` for the run directory, held under its lock and saved at the end of the block."""
    run_dir = Path(run_dir)
    with exclusive(run_dir / _LOCK):
        digests = InputDigests(run_dir, verify=verify)
        yield digests
        digests.save()


def _regular_stat(path: Path | str) -> os.stat_result:
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise InputFileError(f"{path}: cannot be read ({exc.strerror})") from None
    if not os.path.isfile(path):
        raise InputFileError(f"{path}: not a regular file")
    return stat


def _load(path: Path) -> dict[str, tuple[_Seen, str]]:
    """The cache as stored; an unreadable or foreign file is an empty cache (it only saves time)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        files = data["files"] if data.get("format") == _FORMAT else {}
        return {where: (_Seen(int(e["size"]), int(e["mtime_ns"]), int(e["inode"])), str(e["sha256"]))
                for where, e in files.items()
                if isinstance(e, dict) and isinstance(e.get("sha256"), str) and len(e["sha256"]) == 64}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}
