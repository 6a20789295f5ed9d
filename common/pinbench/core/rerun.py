"""A rerun that finds nothing to do answers from a small manifest, not by reloading every record.

Why: rerunning a finished run directory with the same inputs, code and options computes nothing and keeps its
scorecard, but finding that out read every input, built and hashed every task, read every stored record and hashed
them again: 1.1-1.3 CPU s for CameraBench's 11,222 samples, 0.65-0.9x of the run itself. The finish of a run whose
every sample is ok writes ``.pinbench-rerun.json`` in the run directory, the digests of what a rerun would read:

* ``key``: the configuration (checkpoint, mode, flags, options), the implementation (recipe version, code digest,
  image, installed versions of its ``numerics:``), the library's sources (``library_digest``), the recipe's folder
  (declaration, pins, references, code: each file's size and mtime), the reference that applies, and the values of
  the environment variables the recipe declares;
* ``inputs``: each file or folder a path option names, as the run found it when it started, and each file the run
  read that no option names (``depends_on``: this machine's resolved pins), by ``tree_fingerprint`` (every file's
  path, size and mtime);
* ``run_dir``: every file of the run directory as the finish left it (path and ``FileState``: size, mtime, inode,
  ctime, as the rest of the run judges a file), but the locks and the manifests of invocations
  (``shards/*-of-*.json``), which every run rewrites. The ctime: a file rewritten at its size with its mtime put
  back (``os.utime``) is seen. A file with more than one link is the sample cache's read-only copy (a kept
  rollout, shared with the cache and other run directories): its ctime is left out, as each run that takes it from
  the cache moves it (the link, the chmod), which made a paibench-c run compute again (its samples reused) after
  another run directory took its rollouts. Such a file rewritten in place, its mtime put back, is not seen here.

A rerun whose digests are these (``unchanged``) answers with the scorecard and its diff against the reference, records
its invocation in those shard manifests (every sample reused), and writes nothing else. An input file edited in place
that keeps its size and mtime is not seen here (the input digests cache, ``pinbench.core.inputs``, sees it by its
ctime, but a rerun answered from the manifest reads none): ``--verify-inputs`` never answers from the manifest.
Never answered from it either: a shard, ``--skip-*`` (they compute a part), a ``--generator`` (its code is not the
recipe's), a run with a failed or missing sample (a rerun computes those again). Inputs a recipe finds in the cache
by their pins are named by the pins, which are the recipe's files.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pinbench.core.files import cache_root, read_json_object, tree_fingerprint, write_atomic
from pinbench.core.provenance import holds_secret
from pinbench.core.recipe import Recipe, library_digest
from pinbench.core.rundir import LOCK_DIR
from pinbench.core.shard_manifest import SHARDS_DIR

if TYPE_CHECKING:
    from pinbench.core.config import RunConfig

RERUN_FILE = ".pinbench-rerun.json"
VERSION = 1
_INVOCATION = re.compile(r"(0|[1-9][0-9]*)-of-[1-9][0-9]*\.json")
_read: set[str] = set()


def depends_on(path: Path | str) -> None:
    """Name a file this process read that no option names (this machine's resolved pins), so that the manifest
    holds its state: a rerun after it changed (or appeared) computes again."""
    _read.add(os.path.abspath(path))


def applies(cfg: RunConfig) -> bool:
    """Whether a run of ``cfg`` may answer from a manifest, and its finish write one (module docstring)."""
    return (cfg.shard is None and not cfg.skip_generation and not cfg.skip_scoring and cfg.generator is None
            and cfg.implementation is not None)


@dataclass(frozen=True)
class RerunManifest:
    """What a finished run read and left (module docstring); ``manifests``: its steps' invocation manifests."""

    key: str
    inputs: dict[str, str]
    run_dir: str
    manifests: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"version": VERSION, "key": self.key, "inputs": self.inputs, "run_dir": self.run_dir,
                "manifests": list(self.manifests)}

    @classmethod
    def read(cls, run_dir: Path) -> RerunManifest | None:
        """The manifest in ``run_dir``, or None when there is none or it is not one this version writes."""
        data = read_json_object(run_dir / RERUN_FILE)
        if not (data is not None and data.get("version") == VERSION and isinstance(data.get("key"), str)
                and isinstance(data.get("run_dir"), str) and isinstance(data.get("inputs"), dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in data["inputs"].items())
                and isinstance(data.get("manifests"), list)
                and all(isinstance(m, str) for m in data["manifests"])):
            return None
        return cls(data["key"], dict(data["inputs"]), data["run_dir"], tuple(data["manifests"]))


def run_key(recipe: Recipe, cfg: RunConfig) -> str:
    """The digest of what a run depends on beside its input files and its directory (module docstring)."""
    reference = recipe.reference_path(cfg.checkpoint, cfg.mode)
    described = {"config": cfg.to_json(), "library": library_digest(),
                 "recipe": _tree(recipe.dir, skip=("__pycache__",)),
                 "reference": tree_fingerprint(reference, mtimes=True) if reference is not None else None,
                 "cache": str(cache_root()),
                 "env": {name: hashlib.sha256(os.environ[name].encode("utf-8", "surrogateescape")).hexdigest()
                         for name in sorted(recipe.env) if name in os.environ}}
    return hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode()).hexdigest()


def input_paths(recipe: Recipe, cfg: RunConfig) -> list[str]:
    """The files and folders the path options of ``cfg`` name."""
    values = dict(cfg.options.items())
    return sorted(str(values[name]) for name, spec in recipe.options.items()
                  if spec.type == "path" and values.get(name) is not None)


def fingerprints(paths: list[str]) -> dict[str, str]:
    return {path: tree_fingerprint(path, mtimes=True) for path in paths}


def run_dir_state(run_dir: Path) -> tuple[str, tuple[str, ...]]:
    """The digest of the run directory's files (module docstring) and its invocation manifests, relative."""
    manifests: list[str] = []
    return (_tree(run_dir, skip=("__pycache__",), top=(LOCK_DIR, RERUN_FILE), invocations=manifests, changes=True),
            tuple(manifests))


def _tree(root: Path, *, skip: tuple[str, ...], top: tuple[str, ...] = (),
          invocations: list[str] | None = None, changes: bool = False) -> str:
    """SHA-256 of every file under ``root``: its path, size and mtime (one ``stat`` each), with ``changes`` its inode
    and ctime too, as ``FileState`` (no ctime where the file has other links: the module docstring);
    folders named in ``skip`` left out, and names in ``top`` at the top; a folder's invocation manifests are listed
    in ``invocations`` instead, when given."""
    entries = []
    for folder, dirs, files in os.walk(root):
        at_top = folder == str(root)
        dirs[:] = sorted(d for d in dirs if d not in skip and not (at_top and d in top))
        relative = Path(folder).relative_to(root)
        for name in files:
            if at_top and name in top:
                continue
            path = relative / name
            if invocations is not None and relative.name == SHARDS_DIR and _INVOCATION.fullmatch(name):
                invocations.append(path.as_posix())
                continue
            try:
                state = os.stat(Path(folder) / name)
                seen = [path.as_posix(), state.st_size, state.st_mtime_ns]
                if changes:   # the inode, and the ctime of a file of one link
                    seen += [state.st_ino, state.st_ctime_ns] if state.st_nlink == 1 else [state.st_ino]
                entries.append("\0".join(map(str, seen)) + "\n")
            except OSError:  # a dangling symlink: named, with no state
                entries.append(f"{path.as_posix()}\0-\n")
    if invocations is not None:
        invocations.sort()
    return hashlib.sha256("".join(sorted(entries)).encode("utf-8", "surrogateescape")).hexdigest()


def manifest_of(recipe: Recipe, cfg: RunConfig, inputs: dict[str, str]) -> RerunManifest | None:
    """The manifest of a run directory as its finish leaves it: ``inputs``, the fingerprints of its input paths
    when it started (``fingerprints``); the files it read that no option names, as they are now. None when one of
    those paths holds a secret (a token-shaped folder): the manifest keeps them whole, to fingerprint them again,
    and the run directory would hold the token; its rerun computes (its samples reused) instead."""
    read = {**inputs, **fingerprints(sorted(_read - inputs.keys()))}
    if any(holds_secret(path) for path in read):
        return None
    state, manifests = run_dir_state(cfg.out_dir)
    return RerunManifest(run_key(recipe, cfg), read, state, manifests)


def write(run_dir: Path, manifest: RerunManifest | None) -> None:
    """Write the manifest (after every other file of the finish), or remove a stale one (None)."""
    if manifest is None:
        (run_dir / RERUN_FILE).unlink(missing_ok=True)
    else:
        write_atomic(run_dir / RERUN_FILE, json.dumps(manifest.to_json(), indent=1) + "\n")


def unchanged(recipe: Recipe, cfg: RunConfig) -> RerunManifest | None:
    """The run directory's manifest when a run of ``cfg`` would read and find exactly what it says (nothing to
    compute, the scorecard kept), else None. Its invocation manifests are the run directory's own (the ones found
    there, compared), never a path read from the file."""
    if not applies(cfg) or cfg.verify_inputs:
        return None
    manifest = RerunManifest.read(cfg.out_dir)
    if manifest is None or manifest.key != run_key(recipe, cfg):
        return None
    if set(input_paths(recipe, cfg)) - manifest.inputs.keys():
        return None
    if fingerprints(sorted(manifest.inputs)) != manifest.inputs:
        return None
    return manifest if run_dir_state(cfg.out_dir) == (manifest.run_dir, manifest.manifests) else None
