"""Which samples each process of a run owns, written when it starts and again when it ends.

Why: ``pinbench status`` must say done / failed / pending per shard while shards are still running, after
one was killed, or before one has started, from the run directory alone. Per-sample records say what is
done; this manifest says what was expected. The runner (``run_samples``, ``StepLog``) writes
``shards/<I>-of-<N>.json`` (an unsharded call writes ``0-of-1``) with the ordered ids and input hashes of *every*
task, so one manifest of a layout is enough to know every shard's samples (task i belongs to shard i mod N), and
who ran it (host, pid, Slurm job). A manifest with ``finished: null`` belongs to a process that is running or died.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO

from pinbench.core.files import atomic_path, loads_json

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

    @property
    def samples_dir(self) -> Path:
        """Where the records of this manifest's samples are: ``samples/`` beside its ``shards/``."""
        return self.path.parent.parent / "samples"

    def owned(self, index: int | None = None) -> list[int]:
        """Positions of the tasks that shard ``index`` (default: this manifest's) owns."""
        index = self.index if index is None else index
        return list(range(index, len(self.sample_ids), self.count))


def manifest_path(out_dir: Path, index: int, count: int) -> Path:
    return Path(out_dir) / SHARDS_DIR / f"{index}-of-{count}.json"


def write_manifest(out_dir: Path, index: int, count: int, *, step: str, sample_ids: Sequence[str],
                   input_hashes: Sequence[str], started: str, summary: dict[str, int] | None = None) -> Path:
    """Write (or, with ``summary``, complete) the manifest of shard ``index`` of ``count``. Completing it keeps the
    samples list its first write left (the call's own: same start, same process) rather than encoding it again
    (1.5 MB for CameraBench, 15 MB at 10x). The list is written, or copied, a block at a time: never held whole
    (its 15 MB at 10x, with the strings that made it, were the largest transient of a 10x run's scoring step)."""
    head = json.dumps({
        "manifest_version": MANIFEST_VERSION,
        "shard": f"{index}/{count}",
        "stage": step,
        "started": started,
        "finished": now() if summary is not None else None,
        "summary": summary,
        **_invocation(),
    }, ensure_ascii=False, separators=(",", ":")).encode("utf-8")  # 11k ids: compact
    path = manifest_path(out_dir, index, count)
    with atomic_path(path) as tmp, tmp.open("wb") as out:
        out.write(head[:-1])
        if summary is None or not _copy_samples(path, started, len(sample_ids), out):
            out.write(_SAMPLES)
            _write_samples(out, sample_ids, input_hashes)
            out.write(b"]}\n")
    return path


def renew_manifest(path: Path) -> None:
    """Record another invocation in a finished manifest: its start and end, host, pid and Slurm job, every sample
    reused (a rerun answered from its run directory's manifest, ``pinbench.core.rerun``); the samples list is kept
    as it is written. A manifest that cannot be read is left as it is."""
    parts = _parts(path)
    total = (parts[0].get("summary") or {}).get("total") if parts else None
    if not isinstance(total, int):
        return
    head, body, cut = parts
    started = now()
    head.update(started=started, finished=started, summary={"total": total, "done": 0, "reused": total, "failed": 0},
                **_invocation())
    with atomic_path(path) as tmp, tmp.open("wb") as out:
        out.write(json.dumps(head, ensure_ascii=False, separators=(",", ":")).encode("utf-8")[:-1])
        out.write(memoryview(body)[cut:])


def _invocation() -> dict[str, Any]:
    """Who runs this: host, pid, Slurm job."""
    return {"host": socket.gethostname(), "pid": os.getpid(),
            "slurm": {key: os.environ[var] for key, var in _SLURM_VARS.items() if os.environ.get(var)}}


_SAMPLES = b',"samples":['


def _parts(path: Path) -> tuple[dict[str, Any], bytes, int] | None:
    """A manifest's head (every field but the samples), its bytes and where its samples list starts; None when it
    cannot be read so."""
    try:
        body = path.read_bytes()
        cut = body.find(_SAMPLES)
        head = loads_json(body[:cut] + b"}") if cut > 0 else None
    except (OSError, ValueError):
        return None
    return (head, body, cut) if isinstance(head, dict) else None


def _copy_samples(path: Path, started: str, n_samples: int, out: BinaryIO) -> bool:
    """Copy to ``out`` the samples list of the manifest at ``path`` and what follows it, a block at a time, when that
    manifest is this call's first (same start, same process, unfinished) and lists ``n_samples``; else write nothing
    and return False (the list is then written again from the call's own lists). A manifest is what
    ``pinbench status`` shows; no score is read from it."""
    mark = out.tell()
    try:
        with open(path, "rb") as held:
            body = b""
            while (cut := body.find(_SAMPLES)) < 0:
                block = held.read(_BLOCK)
                if not block:
                    return False
                body += block
            head = loads_json(body[:cut] + b"}")
            if not isinstance(head, dict) or (head.get("started"), head.get("pid"), head.get("finished")) != (
                    started, os.getpid(), None):
                return False
            # an id's own quotes are escaped in its JSON string, so this counts entries exactly; an entry's key
            # across two blocks is counted in the second, with the first's last bytes before it
            block, carry, found = body[cut:], b"", 0
            while block:
                out.write(block)
                seen = carry + block
                found += seen.count(_ENTRY)
                carry = seen[1 - len(_ENTRY):]
                block = held.read(_BLOCK)
    except (OSError, ValueError):
        found = -1
    if found == n_samples:
        return True
    out.seek(mark)
    out.truncate()
    return False


_ENTRY = b'"sample_id":'
_BLOCK = 1 << 18


def _write_samples(out: BinaryIO, sample_ids: Sequence[str], input_hashes: Sequence[str]) -> None:
    """The manifest's ``samples`` list as JSON (without its brackets), written ``_ENTRIES`` entries at a time."""
    text, pairs, separator = _TEXT, zip(sample_ids, input_hashes, strict=True), ""
    while entries := list(islice(pairs, _ENTRIES)):
        out.write((separator + ",".join(f'{{"sample_id":{text(sid)},"input_hash":{text(h)}}}'
                                        for sid, h in entries)).encode("utf-8"))
        separator = ","


_ENTRIES = 4096
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
        data = loads_json(path.read_text(encoding="utf-8"))
        index, count = (int(x) for x in data["shard"].split("/"))
        samples = data["samples"]
        ids = tuple(str(s["sample_id"]) for s in samples)
        hashes = tuple(str(s["input_hash"]) for s in samples)
        if data.get("manifest_version") != MANIFEST_VERSION or not 0 <= index < count:
            raise ValueError(f"manifest_version {data.get('manifest_version')!r}, shard {data['shard']!r}")
        return ShardManifest(index=index, count=count, step=str(data["stage"]), sample_ids=ids,
                             input_hashes=hashes, started=str(data["started"]), finished=data.get("finished"),
                             summary=data.get("summary"), host=str(data.get("host", "?")),
                             pid=int(data.get("pid", 0)), slurm=dict(data.get("slurm") or {}), path=path)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: unreadable shard manifest ({type(exc).__name__}: {exc})") from None
