"""A versioned folder of generated data (a recipe's ``--fixture`` data), written exactly once across processes.

Why: the shards of a job array start together and share one run directory, so each asks for the same fixture
data at the same moment. Writing it more than once repeats the work and replaces files a sibling is reading; a
writer killed half way must not leave a folder that a later run takes for complete; and a rerun must find the
data it scored before (the sample store keys inputs by their bytes, ``pinbench.core.inputs``). So: one lock
beside the folder, a stamp inside it that names the data's version, and the data written into a private
folder beside it, stamped last and renamed into place. The rename is the commit: a process that does not take
the lock sees the old folder, none, or the finished one, never a half-written one.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pinbench.core.files import exclusive, read_json_object, write_atomic
from pinbench.core.notices import notice

FIXTURE_DIR = "fixture_data"   # where a --fixture run keeps its data, in its run directory
STAMP = "fixture.json"


def build_once(root: Path | str, version: int | str, write: Callable[[Path], Mapping[str, Any] | None], *,
               stamp: str = STAMP) -> dict[str, Any]:
    """The folder ``root`` holding data of ``version``: reused when its stamp says so, else written by ``write``.

    ``write(folder)`` writes every file into ``folder`` (a private folder beside ``root``, renamed to ``root``
    afterwards: it must write no absolute path) and returns metadata to keep (JSON: weight SHA-256s, seeds).
    The stamp ``root/<stamp>`` holds ``{"version": version, **metadata}``; the metadata is returned, read back
    from the stamp, so a fresh build and a reuse return equal values. A stamp that is missing, not JSON, not an
    object or of another version means the folder is rebuilt and replaces ``root`` (an older version included).
    The lock is ``.<name>.lock`` beside ``root``; leftovers of a writer killed under it are removed.
    """
    root = Path(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(root.parent / f".{root.name}.lock"):
        found = _stamped(root / stamp, version)
        if found is not None:
            return found
        _remove_leftovers(root)  # only a holder of this lock makes them: these are a dead writer's
        folder = _private(root, "tmp")
        folder.mkdir()  # mode as any folder the process makes (mkdtemp's would be 0700)
        try:
            with notice(f"fixture: writing its data to {root}"):   # seconds of encoding, silent in a log before
                metadata = dict(write(folder) or {})
            if "version" in metadata:
                raise ValueError(f"{root}: the fixture metadata may not hold 'version' (the stamp's own key)")
            write_atomic(folder / stamp, json.dumps({"version": version, **metadata}, indent=1) + "\n")
            _replace(folder, root)
        finally:
            _remove(folder)  # absent once renamed; a failed write leaves nothing
        found = _stamped(root / stamp, version)
        if found is None:
            raise RuntimeError(f"{root}: the stamp {stamp} is not there after the data was put in place")
        return found


def _stamped(path: Path, version: int | str) -> dict[str, Any] | None:
    """The stamp's metadata when it names ``version``; None when it is absent, unreadable or another version."""
    saved = read_json_object(path)   # missing, a directory, a FIFO, not UTF-8, cut short: rebuilt, never a hang
    if saved is None or saved.get("version") != version:
        return None
    return {key: value for key, value in saved.items() if key != "version"}


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
