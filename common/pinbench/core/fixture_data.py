"""A versioned folder of generated data (a recipe's ``--fixture`` data), written exactly once across processes.

Why: the shards of a job array start together and share one run directory, so each asks for the same fixture
data at the same moment. Writing it more than once repeats the work and replaces files a sibling is reading; a
writer killed half way must not leave a folder that a later run takes for complete; and a rerun must find the
data it scored before (the sample store keys inputs by their bytes, ``pinbench.core.inputs``). So: one lock
beside the folder, a stamp inside it that names the data's version, and the data written into a private
folder beside it, stamped last and renamed into place. The rename is the commit: a process that does not take
the lock sees the old folder, none, or the finished one, never a half-written one. The stamp also names every
file's SHA-256, checked at each reuse: the fixture's reference values hold for the generated data only, so a file
changed, added or removed by hand means the data is written again (said in one line), never scored as it is.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pinbench.core.files import exclusive, read_json_object, regular_sha256, write_atomic
from pinbench.core.notices import notice

FIXTURE_DIR = "fixture_data"   # where a --fixture run keeps its data, in its run directory
STAMP = "fixture.json"
FILES = "files"   # the stamp's key for {relative path: SHA-256} of every other file in the folder
NOT_REGULAR = "not a regular file"   # what the stamp's check finds for a link or a FIFO in place of a file


def build_once(root: Path | str, version: int | str, write: Callable[[Path], Mapping[str, Any] | None], *,
               stamp: str = STAMP) -> dict[str, Any]:
    """The folder ``root`` holding data of ``version``: reused when its stamp says so, else written by ``write``.

    ``write(folder)`` writes every file into ``folder`` (a private folder beside ``root``, renamed to ``root``
    afterwards: it must write no absolute path) and returns metadata to keep (JSON: weight SHA-256s, seeds).
    The stamp ``root/<stamp>`` holds ``{"version": version, "files": {path: sha256}, **metadata}``; the metadata
    is returned, read back from the stamp, so a fresh build and a reuse return equal values. A stamp that is
    missing, not JSON, not an object or of another version, or a folder whose files are not those the stamp
    names (one changed, added, removed, or not a regular file), means the folder is rebuilt and replaces ``root``.
    The lock is ``.<name>.lock`` beside ``root``; leftovers of a writer killed under it are removed.
    """
    root = Path(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(root.parent / f".{root.name}.lock"):
        found = _stamped(root / stamp, version)
        if found is not None:
            differs = _differs(root, stamp, found.pop(FILES, None))
            if not differs:
                return found
            print(f"fixture: {root} is not the data its stamp {stamp} names ({differs}): writing it again",
                  file=sys.stderr, flush=True)
        _remove_leftovers(root)  # only a holder of this lock makes them: these are a dead writer's
        folder = _private(root, "tmp")
        folder.mkdir()  # mode as any folder the process makes (mkdtemp's would be 0700)
        try:
            with notice(f"fixture: writing its data to {root}"):   # seconds of encoding, silent in a log before
                metadata = dict(write(folder) or {})
            for key in ("version", FILES):
                if key in metadata:
                    raise ValueError(f"{root}: the fixture metadata may not hold {key!r} (the stamp's own key)")
            files = _digests(folder, stamp)
            if links := [rel for rel, digest in files.items() if digest == NOT_REGULAR]:
                raise ValueError(f"{root}: the fixture's writer made {links[0]}, which is not a regular file (a link "
                                 "or a FIFO): its stamp could not tell it changed")
            write_atomic(folder / stamp, json.dumps({"version": version, FILES: files, **metadata}, indent=1) + "\n")
            _replace(folder, root)
        finally:
            _remove(folder)  # absent once renamed; a failed write leaves nothing
        found = _stamped(root / stamp, version)
        if found is None:
            raise RuntimeError(f"{root}: the stamp {stamp} is not there after the data was put in place")
        found.pop(FILES, None)
        return found


def _stamped(path: Path, version: int | str) -> dict[str, Any] | None:
    """The stamp's metadata when it names ``version``; None when it is absent, unreadable or another version."""
    saved = read_json_object(path)   # missing, a directory, a FIFO, not UTF-8, cut short: rebuilt, never a hang
    if saved is None or saved.get("version") != version:
        return None
    return {key: value for key, value in saved.items() if key != "version"}


def _digests(folder: Path, stamp: str) -> dict[str, str]:
    """{path relative to ``folder``: SHA-256} of everything in it but the stamp and the folders; an entry that is
    not a regular file (a link, a FIFO) gets ``NOT_REGULAR``, never followed: a stamp never names one (the build
    refuses a writer that makes one), so a check of it fails."""
    return {rel: _digest(path) for rel, path in _entries(folder, stamp).items()}


def _digest(path: Path) -> str:
    """The SHA-256 of a regular file, ``NOT_REGULAR`` for any other entry (never followed)."""
    return regular_sha256(path) or NOT_REGULAR


def _entries(folder: Path, stamp: str) -> dict[str, Path]:
    """{path relative to ``folder``: path} of everything in it but the stamp and the folders, sorted."""
    found = {}
    for top, dirs, names in os.walk(folder):   # links to folders are listed in dirs, never walked into
        for name in [*names, *(d for d in dirs if os.path.islink(os.path.join(top, d)))]:
            path = Path(top, name)
            rel = path.relative_to(folder).as_posix()
            if rel != stamp:
                found[rel] = path
    return dict(sorted(found.items()))


def _differs(root: Path, stamp: str, expected: Any) -> str:
    """What makes ``root``'s files other than the stamp's ``files`` names ('' when they agree), for one line. The
    names decide first, reading no file (a large stray file was hashed at every reuse); only when they agree are
    the files the stamp lists hashed."""
    if not isinstance(expected, dict):
        return f"it names no {FILES!r}"
    found = _entries(root, stamp)
    problems = [f"{rel} is missing" for rel in expected if rel not in found]
    problems += [f"{rel} is not in it" for rel in found if rel not in expected]
    if not problems:
        problems = [f"{rel} has other bytes" for rel, path in found.items()
                    if _digest(path) != expected[rel]]
    if not problems:
        return ""
    return problems[0] + (f", and {len(problems) - 1} more" if len(problems) > 1 else "")


def _private(root: Path, kind: str) -> Path:
    return root.parent / f".{root.name}.{os.getpid()}.{secrets.token_hex(4)}.{kind}"


def _remove_leftovers(root: Path) -> None:
    pattern = re.compile(rf"\.{re.escape(root.name)}\.\d+\.[0-9a-f]{{8}}\.(tmp|old)")
    for entry in root.parent.iterdir():
        if pattern.fullmatch(entry.name):
            _remove(entry)


def _replace(folder: Path, root: Path) -> None:
    """Rename ``folder`` to ``root``; whatever was at ``root`` (older data, no stamp) is moved aside and removed."""
    try:
        os.rename(folder, root)  # root absent, or an empty folder
        return
    except OSError:  # root holds something
        pass
    old = _private(root, "old")
    os.rename(root, old)  # a file or a symlink moves as itself: nothing it points to is touched
    os.rename(folder, root)
    _remove(old)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.is_symlink() or path.exists():
        path.unlink(missing_ok=True)
