"""Can this process write everything a run will write under its output folder, and what makes it so.

Why: in a container the run's user (the image's 10001, or ``--user``) meets folders someone else made. Docker
creates a missing bind-mount source as root, and a host ``make demo`` run as root leaves ``runs/demo`` and every
lock file in it root's. A check of the top folder alone let the demo start and fail in every recipe at its first
lock file (``.pinbench-locks/.mutex``), all on one line, and its advice (a ``chown`` of one folder, or ``--user
"$(id -u):$(id -g)"``, which is ``0:0`` for root) did not fix it. So the whole tree is checked before anything
runs, each cause gets its own line, and the fix is one command that works as written.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

_SHOWN = 3
CPU_IMAGE_RUNS = Path("/opt/pinbench/runs")   # where images/README.md mounts runs/ into the CPU image


@dataclass(frozen=True)
class Unwritable:
    """A folder this process cannot add to, or a file it cannot rewrite, with its owner."""

    path: Path
    kind: str  # "folder" | "file"
    owner: int


def unwritable(directory: Path) -> list[Unwritable]:
    """Everything under ``directory`` (the folder itself, or the nearest existing one above it when it is not
    there yet) that this process cannot write: folders need write and search, files write. Symlinks are not
    followed (the run does not write through them)."""
    probe = Path(directory)
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    found: list[Unwritable] = []

    def check(path: Path, st: os.stat_result) -> None:
        if stat.S_ISDIR(st.st_mode):
            if not os.access(path, os.W_OK | os.X_OK):
                found.append(Unwritable(path, "folder", st.st_uid))
        elif stat.S_ISREG(st.st_mode) and not os.access(path, os.W_OK):
            found.append(Unwritable(path, "file", st.st_uid))

    check(probe, probe.lstat())
    if probe == Path(directory) and probe.is_dir():
        for parent, dirs, files in os.walk(probe):
            dirs.sort()   # a stable order for the lines
            for name in sorted(dirs + files):
                path = Path(parent) / name
                check(path, path.lstat())
    return found


def mount_point(path: Path, mountinfo: Path = Path("/proc/self/mountinfo")) -> Path | None:
    """The mount point holding ``path`` (a bind mount in a container), or None when it is the root file system
    or the table cannot be read."""
    try:
        lines = mountinfo.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    resolved = Path(os.path.realpath(path))
    points = []
    for line in lines:
        fields = line.split()
        if len(fields) > 4:   # field 5 is the mount point, with spaces and the like as octal escapes
            points.append(Path(fields[4].encode().decode("unicode_escape")))
    inside = [p for p in points if resolved == p or p in resolved.parents]
    best = max(inside, key=lambda p: len(p.parts), default=None)
    return None if best is None or best == Path("/") else best


def writable_problems(directory: Path, *, in_container: bool) -> list[str]:
    """One line per cause (owner and kind) of what this process cannot write under ``directory``, then one line
    with the command that fixes all of them; [] when everything is writable."""
    found = unwritable(directory)
    if not found:
        return []
    uid, gid = os.getuid(), os.getgid()
    lines = []
    groups: dict[tuple[int, str], list[Unwritable]] = {}
    for item in found:
        groups.setdefault((item.owner, item.kind), []).append(item)
    for (owner, kind), items in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] != "folder")):
        shown = ", ".join(str(i.path) for i in items[:_SHOWN]) + (f" and {len(items) - _SHOWN} more"
                                                                  if len(items) > _SHOWN else "")
        lines.append(f"{directory}: {len(items)} {kind}{'s' if len(items) > 1 else ''} owned by uid {owner} that "
                     f"uid {uid} cannot write: {shown}")
    top = min((i.path for i in found), key=lambda p: len(p.parts))
    mounted = mount_point(top) if in_container else None
    if mounted is None:   # on the host (a non-root user: root can write anything)
        lines.append(f"fix: `sudo {_fix(uid, gid, str(top.resolve()))}`, or choose another --out")
        return lines
    host = "runs" if mounted == CPU_IMAGE_RUNS else f"<the host folder you mounted at {mounted}>"
    lines.append(f"fix: on the host, as root: `{_fix(uid, gid, host)}`"
                 + (" (the folder of the README's `-v \"$PWD/runs:/opt/pinbench/runs\"`)" if host == "runs" else "")
                 + "; or, if you are not root there, start the container with `--user \"$(id -u):$(id -g)\"` on a "
                   "folder you own")
    return lines


def _fix(uid: int, gid: int, target: str) -> str:
    """Owner first, then the owner's write bit on everything (a file made read-only stays so after a chown)."""
    return f"chown -R {uid}:{gid} {target} && chmod -R u+rwX {target}"
