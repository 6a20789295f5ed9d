"""A run directory belongs to one recipe, checkpoint and mode, and to one live process per shard.

Why: two runs sharing an ``--out`` mixed their samples (a second recipe scored the first one's files) or
tripped over each other's files. Every run goes through ``claim_run_dir`` (``pinbench.ops.launch.run_recipe`` and
the docker runtime call it before any recipe code runs), which

* records the directory's identity in ``pinbench-run.json`` (recipe, checkpoint, mode, a fingerprint of each
  input) on first use and refuses, in one line, a run of anything else there (a directory from before this file
  existed is judged by its ``scorecard.json``); beside it ``.pinbench-input-files.json`` lists each input folder's
  files (path, size) so that a refusal names the files that changed, while the identity stays small for a folder of
  tens of thousands;
* takes a lock per shard in ``.pinbench-locks/``: ``run.lock`` for an unsharded run, ``shard-I-of-N.lock``
  for ``--shard I/N``. Shards of one run share the directory at the same time (one process per GPU, or
  Slurm array tasks, then one unsharded run merges), so a second process for the same shard is refused,
  an unsharded run is refused while any shard is live, a shard is refused while an unsharded run is live,
  and shards that split the tasks differently (``0/2`` beside ``1/4``) are refused too.

A lock names its holder (pid, host, start time, command). A lock whose process is gone (same host, pid dead
or reused by another process) is stale: it is taken over with a message on stderr. A lock held on another
host cannot be checked from here; the refusal says which file to delete once that process is known gone.
A child process (the container of ``--runtime docker``) inherits its parent's lock through the
``PINBENCH_RUN_LOCK`` variable instead of refusing itself.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from pinbench.core.config import RecipeError
from pinbench.core.files import (
    FileError,
    blocking_parent,
    creation_mode,
    enclosing,
    first_names,
    loads_json,
    mistyped_path,
    no_folder_at,
    not_regular,
    open_regular,
    read_json_object,
    read_regular_bytes,
    read_regular_text,
    shown_name,
    sweep_temporaries,
    topmost_missing,
    tree_listing,
    write_atomic,
)
from pinbench.core.fixture_data import FIXTURE_DIR
from pinbench.core.provenance import REDACTED, holds_secret, redact
from pinbench.core.shard_manifest import ShardManifest, manifest_path, read_manifests
from pinbench.core.store import SAMPLES_DIR, log_name, store_folders

if TYPE_CHECKING:
    from pinbench.core.config import RunConfig

IDENTITY_FILE = "pinbench-run.json"
INPUT_FILES = ".pinbench-input-files.json"
_INPUT_FILES_VERSION = 1
_SHOWN_FILES = 3   # files a refusal names per changed input, then how many more
LOCK_DIR = ".pinbench-locks"
SLURM_DIR = "slurm"   # ``pinbench submit``'s scripts and logs, written before its jobs claim the directory
SUBMISSIONS = "submissions.jsonl"   # in SLURM_DIR: one line per ``pinbench submit``
TOKEN_ENV = "PINBENCH_RUN_LOCK"
UNSHARDED = "run"
IDENTITY_KEYS = ("recipe", "checkpoint", "mode")


class RunDirError(RecipeError):
    """The run directory belongs to another run, or is in use (one-line message)."""


class Refused(RecipeError):
    """A run refused before it computed anything (one-line message): what its claim created goes with it
    (``discard_refused``)."""


@dataclass(frozen=True)
class Claim:
    """What ``claim_run_dir`` holds: the lock file, its token (for child processes), whether it is ours, and the
    topmost folder the claim made (the run directory, or a parent of it; None when the directory was there)."""

    out_dir: Path
    lock: Path
    token: str
    inherited: bool
    created: Path | None = None


# ------------------------------------------------------------------------------------------- identity


def run_identity(cfg: RunConfig) -> dict[str, Any]:
    """Whose directory this is: recipe, checkpoint, mode, and the inputs it scores (``Recipe.input_identity``)."""
    return {"recipe": cfg.recipe, "checkpoint": cfg.checkpoint, "mode": cfg.mode, "inputs": dict(cfg.inputs)}


def input_paths(cfg: RunConfig, cwd: Path | None = None) -> dict[str, Path]:
    """The path options of the run's input identity, by option name; relative ones read against ``cwd`` when it is
    given (``pinbench submit``'s folder)."""
    return {name: (cwd or Path()) / value for name, value in cfg.options.items()
            if name in cfg.inputs and isinstance(value, Path)}


def check_out_dir_outside(cfg: RunConfig, inputs: Mapping[str, Path], cwd: Path | None = None) -> None:
    """RunDirError when the run directory is inside a folder a path option of the run names (``--out run`` with
    ``-o videos=.``): every file the run wrote there changed that input, and each rerun was refused as "holds the
    run of other inputs"; or inside another run's directory (``enclosing_run``): that run's ``pinbench check``
    counted this one's sample store as its own unpinned files, and its ``--move-aside`` took this run along.
    ``inputs``: its input folders (``input_paths``, read against ``cwd``); ``cwd``: what a relative ``--out`` is
    read against (``pinbench submit``'s), else this process's working directory."""
    if (name := enclosing(cfg.out_dir, inputs)) is not None:
        raise RunDirError(f"--out {cfg.out_dir}: inside -o {name}={getattr(cfg.options, name)}, an input of the run; "
                          "what the run writes there would change that input and every rerun be refused: name a "
                          "folder outside it")
    if (run := enclosing_run((cwd or Path()) / cfg.out_dir)) is not None:
        raise RunDirError(f"--out {cfg.out_dir}: inside {run[0]}, another run's directory ({run[1]}); its check would "
                          "count this run's files as its own and its --move-aside take this run along: name a "
                          "folder outside it")


def run_marker(folder: Path) -> str | None:
    """The file that says ``folder`` holds a run (its identity file, or a scorecard naming one: ``read_identity``; an
    unreadable identity file still marks one), or None; None too for a folder this user may not look into (another
    user's, mode 0700: ``Path.exists`` raises PermissionError there), where the run's own mkdir says why it stops."""
    try:
        return read_identity(folder)[1] or None
    except RunDirError:
        return str(folder / IDENTITY_FILE)
    except OSError:
        return None


def enclosing_run(path: Path) -> tuple[Path, str] | None:
    """The nearest folder above ``path`` (by real paths) that holds a run, and the file that says so
    (``run_marker``); None when no folder above it does."""
    return next(((parent, where) for parent in Path(os.path.realpath(path)).parents
                 if (where := run_marker(parent)) is not None), None)


def read_identity(out_dir: Path) -> tuple[dict[str, Any] | None, str]:
    """(identity, where it came from) of a run directory; (None, "") for a fresh one.

    RunDirError when the identity file is unreadable: a directory whose owner is unknown is not reused.
    """
    path = out_dir / IDENTITY_FILE
    if path.exists() or path.is_symlink():
        try:
            data = loads_json(read_regular_bytes(path))
        except FileError as exc:  # a FIFO, a device, a folder: named, never waited on
            raise RunDirError(f"{path}: {exc.reason}; it says which run owns {out_dir}: fix or delete it") from None
        except (UnicodeDecodeError, ValueError) as exc:
            raise RunDirError(f"{path}: unreadable ({type(exc).__name__}); it says which run owns {out_dir}: "
                              "fix or delete it") from None
        if not isinstance(data, dict) or any(not isinstance(data.get(k), str) for k in IDENTITY_KEYS):
            raise RunDirError(f"{path}: expected an object with string fields {', '.join(IDENTITY_KEYS)}")
        return data, str(path)
    scorecard = out_dir / "scorecard.json"
    data = read_json_object(scorecard)
    if data is not None and all(isinstance(data.get(k), str) for k in IDENTITY_KEYS):
        return data, str(scorecard)
    return None, ""


def _describe(identity: Mapping[str, Any]) -> str:
    return f"{identity['recipe']} / {identity['checkpoint']} ({identity['mode']})"


def check_owner(out_dir: Path, wanted: Mapping[str, Any], paths: Mapping[str, Path]) -> dict[str, Any] | None:
    """The identity a directory holds (None for a fresh one); RunDirError when it is another recipe's, checkpoint's
    or mode's, or keeps results of other inputs (``wanted`` as ``run_identity``, ``paths`` as ``input_paths``):
    ``pinbench submit`` asks before it writes or queues anything, where each job was refused once scheduled."""
    found, source = read_identity(out_dir)
    _refuse_other_run(out_dir, found, source, wanted)
    if found is not None and _holds_results(out_dir):
        differs = input_changes(found.get("inputs"), wanted["inputs"], out_dir, paths)
        if differs:
            # by hand: `pinbench run --move-aside` moves it, then runs the whole recipe here, unsharded
            raise RunDirError(f"{_other_inputs(out_dir, differs)}: pass another --out, or move this one aside first "
                              f"(mv {shlex.quote(str(out_dir))} {shlex.quote(str(aside_path(out_dir)))}; nothing is "
                              "deleted), then submit again")
    return found


def _other_inputs(out_dir: Path, differs: list[str]) -> str:
    return (f"{out_dir}: holds the run of other inputs ({'; '.join(differs)}); a run directory belongs to one set of "
            "inputs")


def _same_owner(found: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether an identity is of the recipe, checkpoint and mode ``wanted`` names."""
    return all(found[k] == wanted[k] for k in IDENTITY_KEYS)


def _refuse_other_run(out_dir: Path, found: Mapping[str, Any] | None, source: str, wanted: Mapping[str, Any]) -> None:
    if found is not None and not _same_owner(found, wanted):
        raise RunDirError(f"{out_dir}: holds the run of {_describe(found)} ({source}), not {_describe(wanted)}; "
                          "a run directory belongs to one recipe, checkpoint and mode: pass another --out")


def _check_identity(out_dir: Path, wanted: Mapping[str, Any], lock_dir: Path, paths: Mapping[str, Path]) -> None:
    found, source = read_identity(out_dir)
    if found is not None and not _holds_results(out_dir) and not _live_locks(lock_dir, take_over=False):
        if not _same_owner(found, wanted):
            # said only of another recipe, checkpoint or mode: every retry of one refused early (a generator not
            # found, -o metrics corrected) said it of itself
            print(f"pinbench: {out_dir}: held the run of {_describe(found)}, which kept nothing (no samples, no "
                  "scorecard): now this run's", file=sys.stderr, flush=True)
        found = None   # a run that stopped before it kept anything (its inputs refused, say) binds nothing
    _refuse_other_run(out_dir, found, source, wanted)
    if found is None:
        _write_identity(out_dir, wanted, paths)
        return
    differs = input_changes(found.get("inputs"), wanted["inputs"], out_dir, paths)
    if differs:
        raise RunDirError(f"{_other_inputs(out_dir, differs)}: pass another --out, or --move-aside to move the earlier "
                          f"results to {aside_path(out_dir).name} beside it (nothing is deleted)")
    if not (out_dir / IDENTITY_FILE).exists() or "inputs" not in found:
        _write_identity(out_dir, wanted, paths)


def _write_identity(out_dir: Path, wanted: Mapping[str, Any], paths: Mapping[str, Path]) -> None:
    """Write the identity, after the listing of its input folders' files (a claim killed between the two leaves
    an identity without a listing, whose refusals say only that a folder's content changed)."""
    if paths:
        options = {name: {"fingerprint": wanted["inputs"][name]["fingerprint"], "files": _input_listing(path)}
                   for name, path in sorted(paths.items())}
        write_atomic(out_dir / INPUT_FILES, json.dumps({"version": _INPUT_FILES_VERSION, "options": options},
                                                       separators=(",", ":")) + "\n")
    write_atomic(out_dir / IDENTITY_FILE, json.dumps(dict(wanted), indent=2) + "\n")


def _input_listing(path: Path) -> dict[str, int]:
    """``tree_listing`` with each path holding a secret (an input named like a token) kept as ``*** <SHA-256 of the
    path, 12 digits>``: the listing stays in the run directory, and a change in such a file is still named apart."""
    return {(f"{REDACTED} {hashlib.sha256(name.encode('utf-8', 'surrogateescape')).hexdigest()[:12]}"
             if holds_secret(name) else name): size for name, size in tree_listing(path).items()}


def _read_input_files(out_dir: Path) -> dict[str, tuple[str, dict[str, int]]]:
    """(fingerprint, files) of each input the listing in ``out_dir`` names; empty when there is none (a directory
    from before it) or it is not one this version writes."""
    data = read_json_object(out_dir / INPUT_FILES)
    if not (data is not None and data.get("version") == _INPUT_FILES_VERSION
            and isinstance(data.get("options"), dict)):
        return {}
    listed = {}
    for name, entry in data["options"].items():
        if (isinstance(entry, dict) and isinstance(entry.get("fingerprint"), str)
                and isinstance(files := entry.get("files"), dict)
                and all(type(size) is int for size in files.values())):
            listed[name] = (entry["fingerprint"], files)
    return listed


def not_a_run_directory(out_dir: Path, read: Callable[[Path], list[ShardManifest]] | None = None) -> str | None:
    """The one line ``pinbench status`` and ``pinbench check`` both say of a folder no run claimed, wrote a manifest
    or scorecard in, or submitted to; None for a run directory (one whose manifest or submissions file is corrupt
    included: their readers name that). A submissions file of blank lines, or none, records no submission: it made
    a run that status showed as 0 tasks and check as a missing scorecard. ``read``: how to read the manifests (a
    caller that reads them next passes a cached reader, so they are read once)."""
    if not out_dir.is_dir():   # what is there instead: a loop was "no such directory, or not a directory"
        what = no_folder_at(out_dir) or "no such directory"
        return f"{out_dir}: not a run directory ({what}){mistyped_path(out_dir)}"
    submissions = out_dir / SLURM_DIR / SUBMISSIONS
    if ((out_dir / "scorecard.json").is_file() or (out_dir / IDENTITY_FILE).is_file()
            or (os.path.lexists(submissions) and ((text := read_regular_text(submissions)) is None or text.strip()))):
        return None
    try:
        if (read or read_manifests)(out_dir):
            return None
    except ValueError:
        return None
    return f"{out_dir}: not a run directory (no shard manifests, submissions or scorecard)"


def _holds_results(out_dir: Path) -> bool:
    """Whether a run directory keeps anything a run made: a sample store (``samples``, a step's), a scorecard."""
    try:
        stores = store_folders(out_dir)
    except FileError:   # a step's store linked from elsewhere: the claim's checks name it
        return True
    return bool(stores) or os.path.lexists(out_dir / "scorecard.json")


def _refuse_foreign(out_dir: Path) -> None:
    """RunDirError for an ``--out`` that is a folder of the user's: it holds files and none of a run's (a run
    writes scorecard.json, samples.jsonl, report/ there, over whatever has those names). Before, a folder holding
    the user's own scorecard.json had it replaced, exit 0, and ``--out /`` wrote a run into /."""
    try:
        entries = sorted(os.listdir(out_dir))
    except OSError:   # absent, or no folder: claim_run_dir names it
        return
    ours = (IDENTITY_FILE, INPUT_FILES, LOCK_DIR, SAMPLES_DIR, SLURM_DIR, FIXTURE_DIR)
    if not entries or any(e in ours or e.startswith((f".{IDENTITY_FILE}.", f".{INPUT_FILES}.", f".{FIXTURE_DIR}."))
                          for e in entries):
        return
    if read_identity(out_dir)[0] is not None:   # a run directory from before pinbench-run.json: its scorecard says
        return
    raise RunDirError(f"{out_dir}: a folder that is no run directory (it holds {first_names(entries)}); a run writes "
                      "scorecard.json, samples.jsonl and report/ there: pass a new or empty folder as --out")


def input_changes(found: Any, wanted: Mapping[str, Mapping[str, str]], out_dir: Path | None = None,
                  paths: Mapping[str, Path] | None = None) -> list[str]:
    """How the inputs a directory was run on differ from this run's, one phrase per option (of options both
    know; a directory from before input identities, without any, takes this run's). Where the same path's content
    changed and ``out_dir`` lists the files it had then (``INPUT_FILES``), the phrase names the files added,
    removed or changed under it now (``paths``): read only then, a listing may be large."""
    if not isinstance(found, Mapping):
        return []
    changes = []
    listed: dict[str, tuple[str, dict[str, int]]] | None = None
    for name in sorted(found.keys() & wanted.keys()):
        old, new = found[name], wanted[name]
        if isinstance(old, Mapping) and old.get("fingerprint") != new["fingerprint"]:
            phrase = f"-o {name}={old.get('value')} then, {new['value']} now"
            if old.get("value") == new["value"]:
                if listed is None:
                    listed = _read_input_files(out_dir) if out_dir is not None else {}
                then, path = listed.get(name), (paths or {}).get(name)
                files = (_file_changes(then[1], _input_listing(path))
                         if then is not None and path is not None and then[0] == old.get("fingerprint") else "")
                phrase += f" (its content changed{f': {files}' if files else ''})"
            changes.append(phrase)
    return changes


def _file_changes(then: Mapping[str, int], now: Mapping[str, int]) -> str:
    """The files added, removed or changed (in size) between two listings, the first few by path and how many more."""
    changed = [f"{shown_name(name)} {'added' if name not in then else 'removed' if name not in now else 'changed'}"
               for name in sorted(then.keys() | now.keys()) if then.get(name) != now.get(name)]
    more = len(changed) - _SHOWN_FILES
    return ", ".join(changed[:_SHOWN_FILES]) + (f"; and {more} more" if more > 0 else "")


_ASIDE_TRIES = 100   # names a move aside tries: <out>.aside-<time>, then -2, -3, ...


def aside_path(out_dir: Path) -> Path:
    """Where ``--move-aside`` puts a run directory: beside it, named by the time (UTC) it was moved."""
    return out_dir.with_name(f"{out_dir.name}.aside-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}")


def is_aside_name(name: str, of: str) -> bool:
    """Whether ``name`` is one ``aside_names`` gives for a path named ``of``."""
    return re.fullmatch(rf"{re.escape(of)}\.aside-[0-9]{{8}}T[0-9]{{6}}Z(-[0-9]+)?", name) is not None


def aside_owner(folder: Path) -> str | None:
    """The recipe of the run directory ``folder`` is a kept-aside scorecard folder of (``run._keep_aside``: inside a
    run directory, with scorecard.json and its records files alone; a run given it as --out is checked whole), as
    the directory's identity file names it; None when it is no such folder. A scorecard kept aside is read with the
    rollouts, stores and report of ``folder.parent``, as they stand since, only when this names its own recipe: one
    moved by hand into another recipe's directory is not read against that directory's files. RunDirError when that
    file is unreadable (check named what the folder lacked as a run of its own, and not that file)."""
    if not is_aside_name(folder.name, "scorecard") or os.path.lexists(folder / IDENTITY_FILE) \
            or not os.path.lexists(folder.parent / IDENTITY_FILE):
        return None
    identity, _ = read_identity(folder.parent)   # the identity file's, which it reads first
    return identity["recipe"] if identity is not None else None


def aside_names(path: Path) -> Iterator[Path]:
    """The names a move aside of ``path`` tries, in order: ``aside_path``, then ``-2``, ``-3``, ... (a second move
    within the same second), ``_ASIDE_TRIES`` in all; ``--move-aside`` and a finish's earlier scorecard take them."""
    first = aside_path(path)
    yield first
    for n in range(2, _ASIDE_TRIES + 1):
        yield first.with_name(f"{first.name}-{n}")


def holds_run(out_dir: Path, cfg: RunConfig) -> bool:
    """Whether ``out_dir`` is the directory of this very run (recipe, checkpoint, mode and inputs): a shard's
    ``--move-aside`` leaves it, for it holds what the other shards stored (it moved them aside, one task after the
    other, and the merge found half the samples missing). An unreadable identity is no such run."""
    try:
        found, _ = read_identity(Path(out_dir))
    except RunDirError:
        return False
    wanted = run_identity(cfg)
    return (found is not None and _same_owner(found, wanted)
            and not input_changes(found.get("inputs"), wanted["inputs"], Path(out_dir), input_paths(cfg)))


def move_aside(out_dir: Path) -> Path | None:
    """Move a run directory out of the way (never delete it); None when there is nothing there. RunDirError when
    a run is still writing in it, or it cannot be moved. A name already taken (a move earlier in the same second)
    gets ``-2``, ``-3``, ... after it."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir() or not any(out_dir.iterdir()):
        return None
    live = other_live_runs(out_dir)
    if live:
        raise RunDirError(f"{out_dir}: not moved aside, a run is still writing in it: {live[0]}")
    for target in aside_names(out_dir):   # a second move within the same second: "Directory not empty", unsaid
        try:
            out_dir.rename(target)   # an empty folder there is replaced (nothing is lost)
            return target
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR):
                raise RunDirError(f"{out_dir}: not moved aside to {target} ({exc.strerror or exc})") from None
    raise RunDirError(f"{out_dir}: not moved aside, {aside_path(out_dir)} and {_ASIDE_TRIES - 1} names after it are "
                      "taken")


# ---------------------------------------------------------------------------------------------- locks


def lock_name(shard: Any) -> str:
    """``run`` for an unsharded run, ``shard-I-of-N`` for shard I of N."""
    return UNSHARDED if shard is None else f"shard-{shard.index}-of-{shard.count}"


def process_stat(pid: int | str) -> list[str] | None:
    """A process's fields in /proc/PID/stat (Linux) after its name: ``[0]`` its state, ``[1]`` its parent's pid,
    ``[19]`` its start time; None where it cannot be read (gone, or no /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2:].split()


def _process_start(pid: int) -> str | None:
    """The kernel's start time of a process (Linux /proc), to tell a live holder from a reused pid."""
    fields = process_stat(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def this_process() -> dict[str, Any]:
    """Who this process is, as :func:`process_alive` checks it later: pid, host, the kernel's start time."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "process_start": _process_start(os.getpid())}


def process_alive(holder: Mapping[str, Any]) -> bool | None:
    """True / False for a holder on this host; None when it runs on another host (cannot be checked)."""
    if holder.get("host") != socket.gethostname():
        return None
    pid = holder.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):   # OverflowError: past any pid_t (a lock's hand edit), no process
        return False
    except PermissionError:  # another user's live process
        pass
    recorded = holder.get("process_start")
    return recorded is None or _process_start(pid) in (None, recorded)


_ARGS = 12   # of a holder's command, kept in its lock


def held_command(argv: list[str]) -> list[str]:
    """A holder's command as its lock keeps it: its first arguments, secrets redacted, and how many are left out."""
    kept = [redact(arg) for arg in argv[:_ARGS]]
    return kept + [f"... ({len(argv) - _ARGS} more)"] if len(argv) > _ARGS else kept


class LockHeld(Exception):
    """Another process holds a named lock (``hold_named``): ``who`` says which, or None where it has not yet named
    itself."""

    def __init__(self, who: str | None) -> None:
        super().__init__(who or "a process starting")
        self.who = who


def hold_named(path: Path, mode: int) -> int:
    """An exclusive flock on ``path`` (made with ``mode`` where missing), its record naming this process and its
    command; the descriptor, which holds it until closed. LockHeld naming the holder (exports into one DEST and
    bundles into one folder take turns); ``open_regular``'s FileError for a FIFO or a place no file can be made. The
    kernel drops a killed holder's flock: its record is taken over. A file its holder removed as it ended is made
    again, so one waiting on the removed file never holds a lock no other process sees."""
    import fcntl

    while True:
        fd = open_regular(path, os.O_RDWR | os.O_CREAT, follow_symlinks=False, mode=mode)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = read_json_object(path)
            raise LockHeld(f"{_holder_who(holder)}: {_holder_argv(holder)}" if holder else None) from None
        try:
            same = os.path.samestat(os.fstat(fd), os.lstat(path))
        except FileNotFoundError:
            same = False
        if same:
            started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps({**this_process(), "started": started, "argv": held_command(sys.argv)}).encode())
            return fd
        os.close(fd)


def release_named(path: Path, fd: int) -> None:
    """Let go of ``hold_named``'s lock: its file removed first, and only while it is still the one ``fd`` holds (one
    waiting on it then makes a new one), so no empty lock file stays behind (a bundle is copied to a web server). A
    path that names no file (its folder removed, replaced by a file or a symlink loop) cannot be the one held: it is
    let go as it is, where it was a traceback at the end of a finished command. One that cannot be looked at or
    removed (its folder made unreadable since, EACCES) is let go too, and stderr says its file may stay."""
    try:
        if os.path.samestat(os.fstat(fd), os.lstat(path)):
            os.unlink(path)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            print(f"pinbench: could not remove the lock file {path} ({exc.strerror}): the lock is let go; the file "
                  "may stay", file=sys.stderr, flush=True)
    finally:
        os.close(fd)


def _holder_text(holder: Mapping[str, Any]) -> str:
    shard = holder.get("shard") or "unsharded"
    return f"{_holder_who(holder)} ({shard}: {_holder_argv(holder) or '?'})"


def _holder_who(holder: Mapping[str, Any]) -> str:
    """A lock's holder as every message names it: its process, host and start."""
    return f"pid {holder.get('pid')} on {holder.get('host')} since {holder.get('started')}"


def _holder_argv(holder: Mapping[str, Any]) -> str:
    """A holder's command in one line; an ``argv`` that is no list (a lock's hand edit) names none: 5 was
    "'int' object is not iterable"."""
    argv = holder.get("argv")
    return " ".join(map(str, argv)) if isinstance(argv, list) else ""


def _unreadable(lock: Path) -> str:
    """A lock that names no holder, and why when it is not a file at all (a FIFO, a device)."""
    try:
        kind = not_regular(lock.stat().st_mode)
    except OSError:
        kind = None
    return f"unreadable lock {lock}" + (f" ({kind}, not a regular file)" if kind else "")


def _live_locks(lock_dir: Path, *, take_over: bool = True) -> dict[str, tuple[Path, dict[str, Any] | None]]:
    """Every lock in the directory that may still be held, by lock name; stale ones are removed on the way
    (``take_over``) or just left out."""
    live: dict[str, tuple[Path, dict[str, Any] | None]] = {}
    for path in sorted(lock_dir.glob("*.lock")):
        holder = read_json_object(path)
        reused = holder is not None and _reused_pid(holder)
        if holder is not None and (reused or process_alive(holder) is False):
            if take_over:
                gone = "names this pid but no claim token, so a process gone wrote it" if reused else \
                    "is no longer running"
                print(f"pinbench: taking over the stale lock {path}: {_holder_text(holder)} {gone}",
                      file=sys.stderr, flush=True)
                path.unlink(missing_ok=True)
            continue
        live[path.stem] = (path, holder)
    return live


def other_live_runs(out_dir: Path, env: Mapping[str, str] | None = None) -> list[str]:
    """Who else may be writing in ``out_dir`` now (not this process, nor the parent whose claim it inherited),
    one description each; changes nothing."""
    env = os.environ if env is None else env
    lock_dir = Path(out_dir) / LOCK_DIR
    if not lock_dir.is_dir():
        return []
    found = []
    for path, holder in _live_locks(lock_dir, take_over=False).values():
        if holder is None:
            found.append(_unreadable(path))
        elif not _ours(holder, env):
            found.append(_holder_text(holder))
    return found


def claim_conflict(cfg: RunConfig) -> str | None:
    """Why another live process keeps this run from claiming ``cfg.out_dir`` now (what the claim would refuse), or
    None; changes nothing. A stopped run asks it: then its own claim, if it made one, is already released."""
    lock_dir = Path(cfg.out_dir) / LOCK_DIR
    if not lock_dir.is_dir():
        return None
    others = {name: (path, holder) for name, (path, holder) in _live_locks(lock_dir, take_over=False).items()
              if holder is None or not _ours(holder, os.environ)}
    return _conflict(lock_name(cfg.shard), cfg.shard, others)


def _names_this_process(holder: Mapping[str, Any]) -> bool:
    return holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname()


def _reused_pid(holder: Mapping[str, Any]) -> bool:
    """Whether a lock names this process but no token: every claim this process makes names one, so a process gone
    whose pid this one now has wrote it (a container's pids repeat). It was taken for this process's own claim,
    which then failed on a KeyError."""
    return holder.get("token") is None and _names_this_process(holder)


def _ours(holder: Mapping[str, Any], env: Mapping[str, str]) -> bool:
    """Whether a lock is this process's claim or the parent's it inherited (its token in ``env``). A lock naming no
    token is another's: ``None == None`` took it for ours where ``env`` has none."""
    token = holder.get("token")
    return (token is not None and token == env.get(TOKEN_ENV)) or _names_this_process(holder)


@contextlib.contextmanager
def alone_in(out_dir: Path) -> Iterator[bool]:
    """Whether no other process may be writing in ``out_dir`` (``other_live_runs``), true until the block ends:
    it holds the claims' mutex, so no run claims the directory between the look and what the block does."""
    with _mutex(Path(out_dir) / LOCK_DIR):
        yield not other_live_runs(out_dir)


def _conflict(mine: str, shard: Any, live: Mapping[str, tuple[Path, dict[str, Any] | None]]) -> str | None:
    """Why a lock ``mine`` cannot be taken beside the live ones, or None."""
    for name, (path, holder) in live.items():
        if holder is None:
            who, where = _unreadable(path), f"; if no run is using the directory, delete {path}"
        else:
            who = _holder_text(holder)
            where = "" if process_alive(holder) else f"; if that process is gone, delete {path}"
        if name == mine:
            return f"this {'shard' if shard else 'run'} is already running: {who}{where}"
        if shard is None:
            return f"shard {name} of a sharded run is running in it: {who}{where}"
        if name == UNSHARDED:
            return f"an unsharded run is running in it: {who}{where}"
        if not name.endswith(f"-of-{shard.count}"):
            return (f"shards of another split are running in it ({name}, this is {shard.index}/{shard.count}): "
                    f"{who}{where}")
    return None


@contextlib.contextmanager
def _mutex(lock_dir: Path) -> Iterator[None]:
    """Serialise claims of one directory (flock; where the file system has none, O_EXCL creation still holds)."""
    try:
        fd = open_regular(lock_dir / ".mutex", os.O_RDWR | os.O_CREAT, mode=0o644)
    except FileError as exc:  # a FIFO or a device in its place: named, never waited on
        raise RunDirError(f"{exc}; claims of this run directory take turns on it: delete it") from None
    try:
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
        except (ImportError, OSError):
            pass
        yield
    finally:
        os.close(fd)  # releases the flock


def _create_exclusive(path: Path, text: str) -> bool:
    """Write ``path`` with ``text`` only if it does not exist (atomic: a hard link of a finished file)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, creation_mode())  # another user's pinbench must be able to read who holds the lock
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


@contextlib.contextmanager
def claim_run_dir(cfg: RunConfig, *, env: Mapping[str, str] | None = None) -> Iterator[Claim]:
    """Hold ``cfg.out_dir`` for this run (see the module docstring); RunDirError (one line) when it cannot."""
    env = os.environ if env is None else env
    out_dir = Path(cfg.out_dir)
    lock_dir = out_dir / LOCK_DIR
    for path in (out_dir, lock_dir):  # name the entry that is in the way, not only the run directory
        if path.is_symlink() and not path.exists():
            raise RunDirError(f"{path}: a dangling symlink (to {os.readlink(path)}); --out names a run directory")
        if path.exists() and not path.is_dir():
            raise RunDirError(f"{path}: exists and is not a directory; --out names a run directory")
    if (blocked := blocking_parent(out_dir)) is not None:
        raise RunDirError(f"{out_dir}: its parent {blocked[0]} is {blocked[1]}, not a folder; --out names a run "
                          "directory")
    _refuse_foreign(out_dir)
    created = topmost_missing(out_dir)
    try:
        lock_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunDirError(f"{exc.filename or out_dir}: cannot create the run directory ({exc.strerror})") from None
    mine = lock_name(cfg.shard)
    path = lock_dir / f"{mine}.lock"
    with _mutex(lock_dir):
        for name in (IDENTITY_FILE, INPUT_FILES, path.name):  # written only under this mutex: any temporary left
            sweep_temporaries(lock_dir if name == path.name else out_dir, name)  # is a dead writer's
        _check_identity(out_dir, run_identity(cfg), lock_dir, input_paths(cfg))
        live = _live_locks(lock_dir)
        held = live.get(mine, (path, None))[1]
        if held is not None and _ours(held, env):
            claim = Claim(out_dir, path, str(held["token"]), inherited=True)  # our parent's, or our own
        else:
            problem = _conflict(mine, cfg.shard, live)
            if problem:
                raise RunDirError(f"{out_dir}: in use: {problem}")
            token = secrets.token_hex(16)
            holder = {**this_process(), "started": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                      "shard": None if cfg.shard is None else str(cfg.shard), "token": token,
                      "argv": held_command(sys.argv), **run_identity(cfg)}
            if not _create_exclusive(path, json.dumps(holder, indent=2) + "\n"):
                raise RunDirError(f"{out_dir}: in use: {path} appeared while claiming it; retry")
            claim = Claim(out_dir, path, token, inherited=False, created=created)
            _sweep(out_dir, cfg.shard)
    try:
        _refuse_wrong_kinds(out_dir, cfg.shard)
        with terminate_as_exit():
            yield claim
    finally:
        if not claim.inherited:
            _release(claim)


@contextlib.contextmanager
def terminate_as_exit() -> Iterator[None]:
    """While a claim is held, SIGTERM (Slurm's time limit, preemption, ``scancel``) and SIGHUP (a lost SSH session or
    terminal) end the process as SystemExit (exit 143, 129), so the claim is released and a ``--runtime docker``
    stage's container stopped. Before, the lock stayed: a resubmitted array task that Slurm placed on another node
    was refused ("held on another host") until someone deleted it by hand; on SIGHUP the container ran on. A SIGHUP
    that is ignored (``nohup``) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = [signal.SIGTERM, *([signal.SIGHUP] if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN else [])]
    previous = {signum: signal.signal(signum, _exit_on_term) for signum in caught}
    previous[signal.SIGALRM] = signal.signal(signal.SIGALRM, _deferred)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        late, _pending[:] = _pending[:], []
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if late:   # the block ended before a deferred signal was raised (``_exit_on_term``): it ends here, also when
            raise Terminated(late[0][0])   # an exception ended it (kept as the context), which a caller might catch


class Terminated(SystemExit):
    """SIGTERM or SIGHUP while a claim is held: exit 128 + the signal, the claim released on the way out; the CLI
    names the signal and what is kept (the process ended with no word, so a Slurm log did not say why it stopped)."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signal_name = signal.Signals(signum).name


# the signal whose Terminated waits for a frame where no C code can swallow it, and until when it may wait
_pending: list[tuple[int, float]] = []
RETRY_S = 0.01
DEFER_S = 2.0   # the longest it waits: a process that works inside an import is still ended


def _exit_on_term(signum: int, frame: FrameType | None) -> None:
    """Raise Terminated, unless ``frame`` is inside an import, a finaliser or a ctypes callback: there C code clears
    the exception (an extension module's creation runs ``importlib``'s Python code and drops what it raises; a
    ``__del__``'s or a callback's is only printed), and the process ran on as if never signalled (``pinbench
    requests`` finished and exited 0 in 7 of 120 tries when SIGTERM came as MIND's fixture imported ``numpy.random``).
    Then it is raised by ``_deferred``, RETRY_S later, from the first frame outside them, or from where it is once
    DEFER_S have passed, but never inside a ctypes callback: there it is always lost, and while a compile runs in C
    the Python code that runs between is mostly callbacks (under load, 2 s of numba's compile went by in them and the
    process exited 0)."""
    until = _pending[0][1] if _pending else time.monotonic() + DEFER_S
    where = _swallower(frame)
    if where == "callback" or where is not None and time.monotonic() < until:
        _pending[:] = [(signum, until)]
        signal.setitimer(signal.ITIMER_REAL, RETRY_S)
        return
    _pending.clear()
    raise Terminated(signum)


def _deferred(_: int, frame: FrameType | None) -> None:
    if _pending:
        _exit_on_term(_pending[0][0], frame)


# Python functions C code calls as ctypes callbacks, which only print what they raise: llvmlite's object cache hooks,
# run as numba compiles (a SIGTERM during TempSSIM's first compile printed "Exception ignored on calling ctypes
# callback function" and consecutive_ssim went on to exit 0, in 2 of 10 tries)
_C_CALLBACKS = frozenset({"_raw_object_cache_notify", "_raw_object_cache_getbuffer"})


def _swallower(frame: FrameType | None) -> str | None:
    """What below ``frame`` may drop an exception raised there: ``"callback"`` (one of ``_C_CALLBACKS``, anywhere in
    the chain: there it is always lost), ``"import"`` (an import or a ``__del__``), None (nothing)."""
    found = None
    while frame is not None:
        code = frame.f_code
        if code.co_name in _C_CALLBACKS:
            return "callback"
        if code.co_filename.startswith("<frozen importlib") or code.co_name == "__del__":
            found = "import"
        frame = frame.f_back
    return found


# what a run writes in its directory (docs/run-directory.md), by kind: a shard only its manifest under shards/
_FOLDERS = ("report", "report/figures", "figures")
_FILES = ("scorecard.json", "samples.jsonl", "derived.jsonl", "diff.txt", "failures.tsv", "figures.json",
          "report/index.html", ".pinbench-rerun.json", ".pinbench-input-digests.json")


def _refuse_wrong_kinds(out_dir: Path, shard: Any) -> None:
    """RunDirError naming the first entry this run will write that is of the other kind: a folder where it renames a
    file into place, anything else where it keeps a folder. Before, the run computed every sample and then ended
    with "[Errno 21] Is a directory: '.scorecard.json.x.tmp' -> ..." or "[Errno 17] File exists: '.../shards'"."""
    folders = ["shards", *(_FOLDERS if shard is None else ())]
    files = [str(manifest_path(Path(), *((0, 1) if shard is None else (shard.index, shard.count)))),
             *(_FILES if shard is None else ())]
    for name in folders:
        path = out_dir / name
        if (kind := no_folder_at(path)) is not None:
            raise RunDirError(f"{path}: {kind} where the run keeps a folder; move it away")
    for name in files:
        path = out_dir / name
        if path.is_dir() and not path.is_symlink():
            raise RunDirError(f"{path}: a folder where the run writes a file; move it away")


def _sweep(out_dir: Path, shard: Any) -> None:
    """Remove the temporary files that writers killed in this run directory left (``sweep_temporaries``): with
    an unsharded claim no other run writes here, so every one in the directory and two folders down; with a
    shard's, those of the files only that shard writes (its manifest, its logs)."""
    if shard is None:
        children = _folders(out_dir)
        for folder in [out_dir, *children, *(grandchild for child in children for grandchild in _folders(child))]:
            sweep_temporaries(folder)
        return
    manifest = manifest_path(out_dir, shard.index, shard.count)
    sweep_temporaries(manifest.parent, manifest.name)
    for store in [out_dir / SAMPLES_DIR, *out_dir.glob(f"*/{SAMPLES_DIR}")]:
        sweep_temporaries(store, log_name(shard))


def _folders(folder: Path) -> list[Path]:
    """The folders in a folder (not through a symlink)."""
    try:
        return [Path(e.path) for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def discard_refused(claim: Claim) -> None:
    """Remove what a refused run made (a generator that cannot honour its requests): the folders its claim created,
    whatever it wrote in them (requests, staged inputs, fixture data), unless another process holds a lock there now.
    Before, ``runs/<recipe>/fixture-fixture/`` stayed behind holding the requests of a run that never ran."""
    if claim.created is None or claim.inherited:
        return
    lock_dir = claim.out_dir / LOCK_DIR
    with _mutex(lock_dir):
        if set(_live_locks(lock_dir, take_over=False)) <= {claim.lock.stem}:
            shutil.rmtree(claim.created, ignore_errors=True)


def _release(claim: Claim) -> None:
    holder = read_json_object(claim.lock)
    if holder is not None and holder.get("token") == claim.token:
        claim.lock.unlink(missing_ok=True)
