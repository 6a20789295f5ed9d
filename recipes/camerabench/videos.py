"""The 1,071 CameraBench videos: find each one the data names, by file name, in a folder or snapshot.

The official scripts join ``video_dir`` and the flat name (``4uGfFYzxWEg.5.0.mp4``). Whether the Hugging
Face dataset keeps the files flat or in a subfolder is not on record, so the folder is searched
recursively; every needed name must be found exactly once (two files with one name would make the choice
arbitrary). Hugging Face snapshots are symlinks into the blob store, so links to regular files count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_SHOWN = 5


class VideoSetError(ValueError):
    """The video folder does not hold the set the data needs; one line naming what is wrong."""


@dataclass(frozen=True)
class VideoSet:
    root: Path
    paths: dict[str, Path]  # needed name -> file
    n_unused: int  # .mp4 files found that no loaded sample refers to

    def describe(self) -> dict[str, object]:
        return {"root": str(self.root), "n_videos": len(self.paths), "n_unused": self.n_unused}


def locate_videos(root: Path | str, names: Sequence[str]) -> VideoSet:
    """Map every needed video name to its file under ``root``; VideoSetError if any is missing or ambiguous."""
    root = Path(root)
    if not root.is_dir():
        raise VideoSetError(f"{root}: video folder not found")
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.mp4")):
        if ".cache" in path.relative_to(root).parts or not path.is_file():
            continue
        if path.name in found:
            raise VideoSetError(f"{root}: two files named {path.name} ({found[path.name]} and {path}); "
                                "keep one copy")
        found[path.name] = path
    wanted = sorted(set(names))
    missing = [name for name in wanted if name not in found]
    if missing:
        shown = ", ".join(missing[:_SHOWN]) + (f" and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else "")
        raise VideoSetError(f"{root}: {len(missing)} of the {len(wanted)} videos the data needs are missing: {shown}")
    for name in wanted:
        if found[name].stat().st_size == 0:
            raise VideoSetError(f"{found[name]}: empty file")
    return VideoSet(root=root, paths={name: found[name] for name in wanted}, n_unused=len(found) - len(wanted))
