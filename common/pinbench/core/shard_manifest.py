"""Which samples each process of a run owns, written when it starts and again when it ends.

Why: ``pinbench status`` must say done / failed / pending per shard while shards are still running, after
one was killed, or before one has started, from the run directory alone. Per-sample records say what is
done; this manifest says what was expected. The runner (``run_samples``, ``StepLog``) writes
``shards/<I>-of-<N>.json`` (an unsharded call writes ``0-of-1``) with the ordered ids and input hashes of *every*
task, so one manifest of a layout is enough to know every shard's samples (task i belongs to shard i mod N), and
who ran it (host, pid, Slurm job). A manifest with ``finished: null`` belongs to a process that is running or died.
A step whose samples come in groups that one shard owns together gives each sample its group's ``unit``
(``StepLog``'s ``units``), and the sample belongs to shard unit mod N.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO

from pinbench.core.files import FileState, atomic_path, write_atomic

SHARDS_DIR = "shards"
MANIFEST_VERSION = 1
_SLURM_VARS = {"job_id": "SLURM_JOB_ID", "array_job_id": "SLURM_ARRAY_JOB_ID", "array_task_id": "SLURM_ARRAY_TASK_ID"}


@dataclass(frozen=True)
class ShardManifest:
    """One process's view of a run: the full task list and the shard (index of count) it computed."""

    index: int
    count: int
    step: str  # the per-sample step ("score", "generate"); "stage" in the file, as written since 87e8f14
    sample_ids: tuple[str, ...]
    input_hashes: tuple[str, ...]
    started: str
    finished: str | None
    summary: dict[str, int] | None
    host: str
    pid: int
    slurm: dict[str, str]
    path: Path
    units: tuple[int, ...] | None = None  # per sample, the number whose i mod N names its shard (None: position)

    @property
    def samples_dir(self) -> Path:
        """Where the records of this manifest's samples are: ``samples/`` beside its ``shards/``."""
        return self.path.parent.parent / "samples"

    def owned(self, index: int | None = None) -> list[int]:
        """Positions of the tasks that shard ``index`` (default: this manifest's) owns."""
        index = self.index if index is None else index
        if self.units is None:
            return list(range(index, len(self.sample_ids), self.count))
        return [pos for pos, unit in enumerate(self.units) if unit % self.count == index]


def manifest_path(out_dir: Path, index: int, count: int) -> Path:
    return Path(out_dir) / SHARDS_DIR / f"{index}-of-{count}.json"


def write_manifest(out_dir: Path, index: int, count: int, *, step: str, sample_ids: Sequence[str],
                   input_hashes: Sequence[str], started: str, summary: dict[str, int] | None = None,
                   units: Sequence[int] | None = None) -> Path:
    """Write (or, with ``summary``, complete) the manifest of shard ``index`` of ``count``."""
    data: dict[str, Any] = {
        "manifest_version": MANIFEST_VERSION,
        "shard": f"{index}/{count}",
        "stage": step,
        "started": started,
        "finished": now() if summary is not None else None,
        "summary": summary,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "slurm": {key: os.environ[var] for key, var in _SLURM_VARS.items() if os.environ.get(var)},
    }
    head = json.dumps(data, ensure_ascii=False, separators=(",", ":"))  # 11k ids: compact
    path = manifest_path(out_dir, index, count)
    prefix = f'{head[:-1]},"samples":['.encode()
    global _last_samples
    last, _last_samples = _last_samples, None
    with atomic_path(path) as tmp, tmp.open("wb") as out:
        out.write(prefix)
        length = _copy_samples(last, sample_ids, input_hashes, units, out)
        if length is None:
            samples = _samples_bytes(sample_ids, input_hashes, units)
            out.write(samples)
            length = len(samples)
        out.write(b"]}\n")
    if summary is None:   # the call's first manifest: its samples list is copied from it into the last
        _last_samples = _Written(sample_ids, input_hashes, units, path, len(prefix), length,
                                 FileState.of(os.stat(path)))
    return path


def renew_manifest(path: Path) -> None:
    """Record another invocation in a finished manifest: its start and end, host, pid and Slurm job, every sample
    reused (a rerun answered from its run directory's manifest, ``pinbench.core.rerun``); the samples list is kept
    as it is written. A manifest that cannot be read is left as it is."""
    try:
        text = path.read_text(encoding="utf-8")
        cut = text.find(',"samples":[')
        head = json.loads(text[:cut] + "}") if cut > 0 else None
    except (OSError, UnicodeDecodeError, ValueError):
        return
    total = (head.get("summary") or {}).get("total") if isinstance(head, dict) else None
    if not isinstance(total, int):
        return
    started = now()
    head.update(started=started, finished=started, summary={"total": total, "done": 0, "reused": total, "failed": 0},
                host=socket.gethostname(), pid=os.getpid(),
                slurm={key: os.environ[var] for key, var in _SLURM_VARS.items() if os.environ.get(var)})
    write_atomic(path, json.dumps(head, ensure_ascii=False, separators=(",", ":"))[:-1] + text[cut:])


@dataclass(frozen=True)
class _Written:
    """Where the ``samples`` list of a call's first manifest lies, to be copied into its last one (the same lists):
    never encoded twice, never held while the call runs (1.5 MB for CameraBench, 15 MB at 10x)."""

    sample_ids: Sequence[str]
    input_hashes: Sequence[str]
    units: Sequence[int] | None
    path: Path
    start: int
    length: int
    state: FileState


_last_samples: _Written | None = None


def _copy_samples(last: _Written | None, sample_ids: Sequence[str], input_hashes: Sequence[str],
                  units: Sequence[int] | None, out: BinaryIO) -> int | None:
    """Copy the samples list of the first manifest when it is of these lists and its file is as written; its
    length, or None when it is not."""
    if (last is None or last.sample_ids is not sample_ids or last.input_hashes is not input_hashes
            or last.units is not units):
        return None
    try:
        held = last.path.open("rb")
    except OSError:
        return None
    with held:
        if FileState.of(os.fstat(held.fileno())) != last.state:
            return None
        held.seek(last.start)
        left = last.length
        while left and (chunk := held.read(min(left, 1 << 20))):
            out.write(chunk)
            left -= len(chunk)
    if left:   # what was written out is not a manifest: the write fails, the manifest left as it was
        raise OSError(f"{last.path}: shorter than when written")
    return last.length


def _samples_bytes(sample_ids: Sequence[str], input_hashes: Sequence[str], units: Sequence[int] | None) -> bytes:
    """The manifest's ``samples`` list as JSON (without its brackets)."""
    text = _TEXT
    if units is None:
        entries = [f'{{"sample_id":{text(sid)},"input_hash":{text(h)}}}'
                   for sid, h in zip(sample_ids, input_hashes, strict=True)]
    else:
        entries = [f'{{"sample_id":{text(sid)},"input_hash":{text(h)},"unit":{int(unit)}}}'
                   for sid, h, unit in zip(sample_ids, input_hashes, units, strict=True)]
    return ",".join(entries).encode("utf-8")


_TEXT = json.encoder.encode_basestring   # a JSON string as json.dumps(ensure_ascii=False) writes it


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def read_manifests(out_dir: Path) -> list[ShardManifest]:
    """Every manifest of the run, oldest start first; ValueError names a corrupt one.

    Also one folder down: a step that keeps its records in a folder of its own (CameraBench's ``script1/``)
    writes its manifests there, next to its ``samples/``.
    """
    manifests = []
    out_dir = Path(out_dir)
    paths = [*out_dir.glob(f"{SHARDS_DIR}/*-of-*.json"), *out_dir.glob(f"*/{SHARDS_DIR}/*-of-*.json")]
    for path in sorted(paths):
        if path.name.startswith(".") or not path.is_file():
            continue
        manifests.append(_parse(path))
    return sorted(manifests, key=lambda m: (m.started, m.count, m.index))


def _parse(path: Path) -> ShardManifest:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        index, count = (int(x) for x in data["shard"].split("/"))
        samples = data["samples"]
        ids = tuple(str(s["sample_id"]) for s in samples)
        hashes = tuple(str(s["input_hash"]) for s in samples)
        units = _units(samples)
        if data.get("manifest_version") != MANIFEST_VERSION or not 0 <= index < count:
            raise ValueError(f"manifest_version {data.get('manifest_version')!r}, shard {data['shard']!r}")
        return ShardManifest(index=index, count=count, step=str(data["stage"]), sample_ids=ids,
                             input_hashes=hashes, started=str(data["started"]), finished=data.get("finished"),
                             summary=data.get("summary"), host=str(data.get("host", "?")),
                             pid=int(data.get("pid", 0)), slurm=dict(data.get("slurm") or {}), path=path,
                             units=units)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: unreadable shard manifest ({type(exc).__name__}: {exc})") from None


def _units(samples: list[dict[str, Any]]) -> tuple[int, ...] | None:
    """Every sample's ``unit`` (a whole number, 0 or more), or None when no sample has one."""
    if not any("unit" in s for s in samples):
        return None
    units = tuple(s.get("unit") for s in samples)
    if not all(isinstance(u, int) and not isinstance(u, bool) and u >= 0 for u in units):
        raise ValueError("every sample needs a whole-number 'unit' of 0 or more when one has it")
    return units  # type: ignore[return-value]
