"""The sample store: one append-only JSONL log per writer in a step's ``samples/`` folder.

Each process that computes samples (an unsharded run, or shard I of N) appends to its own log,
``samples/run.jsonl`` or ``samples/shard-I-of-N.jsonl``, one line per finished sample::

    {"digest":"<sha256 of the record's bytes>","record":{...the record's JSON...}}

Why this design, measured on this project's machine (11,222 CameraBench-sized records, one run):

* one fsync'd file per sample (the layout of 87e8f14) wrote them in 3.1 s, 2.25 ms each;
* this log, one ``write`` per record and an fsync at most once a second, in 0.07 s, and read and
  verified them in 0.06 s;
* SQLite in WAL mode with a commit a second was as fast (0.08 s write, 0.05 s read), but WAL needs shared
  memory between its readers and is documented as unsafe on network file systems, where Slurm shards write;
  a log per writer never shares a file, and stays readable with ``cat`` and ``jq``.

Guarantees:

* a record is handed to the kernel with one ``write`` as soon as it exists, so kill -9 of the process loses
  nothing already stored; a crash of the machine loses at most the last ``FSYNC_SECONDS``;
* a torn last line (a machine crash mid-write) or any line whose digest does not match its bytes (an edit)
  is never read as a record: the sample is recomputed and the reason is printed; a writer reopening its
  log cuts a torn tail first, so the next record starts on a line of its own;
* shards on a shared file system each write only their own file; readers read every log;
* ``samples/<id>.json`` files of the previous layout (87e8f14) are still read, below every log.

When one sample has several records (a failed one retried, a rerun after a code change), the caller decides
which it may reuse (``pinbench.core.runner``); this module only says, per sample, what is stored, newest
first: the writer's own log, then the other logs by name, then the previous layout.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pinbench.core.files import creation_mode, loads_finite_json

SAMPLES_DIR = "samples"
LOG_SUFFIX = ".jsonl"
UNSHARDED_LOG = "run"
FSYNC_SECONDS = 1.0
SETTLED_S = 2.0
_PREFIX = b'{"digest":"'
_MIDDLE = b'","record":'
_BODY_START = len(_PREFIX) + 64 + len(_MIDDLE)


def log_name(shard: Any) -> str:
    """``run.jsonl`` for an unsharded writer, ``shard-I-of-N.jsonl`` for shard I of N."""
    stem = UNSHARDED_LOG if shard is None else f"shard-{shard.index}-of-{shard.count}"
    return stem + LOG_SUFFIX


def record_bytes(data: dict[str, Any]) -> bytes:
    """The canonical bytes of a record's JSON: what the digest covers and ``samples.jsonl`` holds per line."""
    return json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


def digest_of(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def encode_line(body: bytes) -> bytes:
    """One log line holding a record's bytes and their digest."""
    return _PREFIX + digest_of(body).encode("ascii") + _MIDDLE + body + b"}\n"


@dataclass(frozen=True)
class Stored:
    """One record as stored: its JSON, the digest of its bytes, and where it is (``samples/run.jsonl:12``)."""

    data: dict[str, Any]
    digest: str
    where: str


@dataclass
class StoreContents:
    """Everything a step's store holds: per sample id, its records newest first; and what could not be read."""

    records: dict[str, list[Stored]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    problems_of: dict[str, list[str]] = field(default_factory=dict)  # those that name their sample, by its id
    legacy: int = 0  # records read from samples/<id>.json files (the layout before the logs)

    def _problem(self, reason: str, sample_id: str | None) -> None:
        self.problems.append(reason)
        if sample_id is not None:
            self.problems_of.setdefault(sample_id, []).append(reason)

    def newest(self, sample_id: str) -> Stored | None:
        found = self.records.get(sample_id)
        return found[0] if found else None


def decode_line(line: bytes, where: str) -> tuple[Stored | None, str, str | None]:
    """(record, "", its id) for a sound log line, else (None, the reason in words, the id it seems to name)."""
    if not (line.startswith(_PREFIX) and line[_BODY_START - len(_MIDDLE):_BODY_START] == _MIDDLE
            and line.endswith(b"}")):
        return None, f"{where}: not a store line (torn or edited)", None
    body = line[_BODY_START:-1]
    claimed = line[len(_PREFIX):len(_PREFIX) + 64].decode("ascii", errors="replace")
    if digest_of(body) != claimed:
        named = _named_sample(body)
        return None, f"{where}: the record{_of(named)} does not match its digest (changed after it was written)", named
    try:
        data = loads_finite_json(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        named = _named_sample(body)
        return None, f"{where}: unreadable record{_of(named)} ({' '.join(str(exc).split())})", named
    if not isinstance(data, dict) or not isinstance(data.get("sample_id"), str):
        return None, f"{where}: the record names no sample", None
    return Stored(data, claimed, where), "", data["sample_id"]


def _of(sample_id: str | None) -> str:
    return f" of sample {sample_id!r}" if sample_id is not None else ""


def _named_sample(body: bytes) -> str | None:
    """The sample id a damaged record body names, read leniently (for the message), or None."""
    try:
        data = json.loads(body.decode("utf-8", errors="replace"))
    except ValueError:
        return None
    return data.get("sample_id") if isinstance(data, dict) and isinstance(data.get("sample_id"), str) else None


def _log_lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes without the newline, whether the line was complete) of a log."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    for number, line in enumerate(lines, start=1):
        complete = number < len(lines)
        if line or complete:
            yield number, line, complete


def logs(samples_dir: Path) -> list[Path]:
    """Every writer's log in a samples folder, by name."""
    return sorted(p for p in samples_dir.glob(f"*{LOG_SUFFIX}") if not p.name.startswith(".") and p.is_file())


@dataclass(frozen=True)
class _ParsedLog:
    records: list[Stored]
    problems: list[tuple[str, str | None]]  # (reason, the sample it seems to name)
    torn: str | None  # the torn last line, when there is one


_PARSED: dict[Path, tuple[tuple[int, int, int], _ParsedLog]] = {}


def _parsed_log(path: Path) -> _ParsedLog:
    """One log's lines, parsed and checked once per process while its size, mtime and inode hold (a run reads
    its store when it starts and again when it merges). Only a log untouched for ``SETTLED_S`` is kept: an edit
    after that changes its mtime even on a file system with coarse timestamps."""
    stat = path.stat()
    key = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
    cached = _PARSED.get(path)
    if cached is not None and cached[0] == key:
        return cached[1]
    records: list[Stored] = []
    problems: list[tuple[str, str | None]] = []
    torn = None
    for number, line, complete in _log_lines(path):
        where = f"{path}:{number}"
        if not complete:
            torn = f"{where}: a torn last record (the writer stopped mid-line)"
            continue
        stored, reason, named = decode_line(line, where)
        if stored is None:
            problems.append((reason, named))
        else:
            records.append(stored)
    parsed = _ParsedLog(records, problems, torn)
    if time.time_ns() - stat.st_mtime_ns > SETTLED_S * 1e9:
        _PARSED[path] = (key, parsed)
    return parsed


def read_store(samples_dir: Path | str, *, own: str | None = None) -> StoreContents:
    """Every record of a samples folder, per sample newest first (see the module docstring for the order).

    A line that is torn or fails its digest is left out and named in ``problems``, except a torn last line of a
    log some other process may still be writing (only the own log's torn tail is certain to be one).
    """
    samples_dir = Path(samples_dir)
    contents = StoreContents()
    if not samples_dir.is_dir():
        return contents
    ordered = logs(samples_dir)
    if own is not None:
        ordered = [p for p in ordered if p.name == own] + [p for p in ordered if p.name != own]
    for path in ordered:
        try:
            parsed = _parsed_log(path)
        except OSError as exc:
            contents._problem(f"{path}: unreadable ({exc.strerror})", None)
            continue
        if parsed.torn is not None and path.name == own:
            contents._problem(parsed.torn, None)
        for reason, named in parsed.problems:
            contents._problem(reason, named)
        for stored in reversed(parsed.records):  # later lines of one log are newer
            contents.records.setdefault(stored.data["sample_id"], []).append(stored)
    _read_legacy(samples_dir, contents)
    return contents


def stored_bodies(samples_dir: Path | str) -> tuple[set[bytes], list[str]]:
    """The record bytes of every sound line of every log (each checked against its digest, none parsed), and the
    lines that fail: what ``pinbench check`` needs to tell whether the store holds a record byte for byte."""
    bodies: set[bytes] = set()
    problems: list[str] = []
    for path in logs(Path(samples_dir)):
        for number, line, complete in _log_lines(path):
            if not complete:
                continue  # a torn tail: the writer that reopens the log cuts it; a run recomputes that sample
            claimed = line[len(_PREFIX):len(_PREFIX) + 64].decode("ascii", errors="replace")
            body = line[_BODY_START:-1]
            sound = (line.startswith(_PREFIX) and line[_BODY_START - len(_MIDDLE):_BODY_START] == _MIDDLE
                     and line.endswith(b"}") and digest_of(body) == claimed)
            if sound:
                bodies.add(body)
            else:
                problems.append(decode_line(line, f"{path}:{number}")[1] or f"{path}:{number}: unreadable")
    return bodies, problems


def legacy_files(samples_dir: Path | str) -> bool:
    """Whether a samples folder holds per-sample files of the layout before the logs."""
    return any(not p.name.startswith(".") for p in Path(samples_dir).glob("*.json"))


def _read_legacy(samples_dir: Path, contents: StoreContents) -> None:
    """The per-sample files of the layout before the logs (``samples/<id>.json``), oldest of all."""
    for path in sorted(samples_dir.glob("*.json")):
        if path.name.startswith(".") or not path.is_file():
            continue
        try:
            data = loads_finite_json(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            contents._problem(f"{path}: unreadable record ({' '.join(str(exc).split())})", path.stem)
            continue
        if not isinstance(data, dict) or data.get("sample_id") != path.stem:
            contents._problem(f"{path}: the record is not for sample {path.stem!r}", path.stem)
            continue
        contents.records.setdefault(path.stem, []).append(Stored(data, digest_of(record_bytes(data)), str(path)))
        contents.legacy += 1


class LogWriter:
    """Appends records to one writer's log: one ``write`` per record, an fsync at most every FSYNC_SECONDS.

    Opening cuts a torn last line (say why on stderr) so every record starts on a line of its own. Use as a
    context manager; closing fsyncs what is still pending.
    """

    def __init__(self, samples_dir: Path | str, name: str) -> None:
        self.path = Path(samples_dir) / name
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._cut_torn_tail()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, creation_mode())
        self._synced = time.monotonic()
        self._dirty = False

    def _cut_torn_tail(self) -> None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size == 0:
            return
        with open(self.path, "rb+") as fh:
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return
            keep = 0
            for start in range(size - 1, -1, -(1 << 20)):  # back to the last complete line
                fh.seek(max(0, start - (1 << 20)))
                block = fh.read(start - max(0, start - (1 << 20)))
                if b"\n" in block:
                    keep = max(0, start - (1 << 20)) + block.rfind(b"\n") + 1
                    break
            print(f"pinbench: {self.path}: cutting a torn last record ({size - keep} bytes; that sample is "
                  "computed again)", file=sys.stderr, flush=True)
            fh.truncate(keep)
            os.fsync(fh.fileno())

    def append(self, body: bytes) -> str:
        """Store one record's bytes; returns their digest."""
        line = encode_line(body)
        written = os.write(self._fd, line)
        while written < len(line):  # a short write on a full disk or a signal: finish the line or fail
            written += os.write(self._fd, line[written:])
        self._dirty = True
        if time.monotonic() - self._synced >= FSYNC_SECONDS:
            self.sync()
        return line[len(_PREFIX):len(_PREFIX) + 64].decode("ascii")

    def sync(self) -> None:
        if self._dirty:
            os.fsync(self._fd)
            self._dirty = False
        self._synced = time.monotonic()

    def close(self) -> None:
        if self._fd >= 0:
            try:
                self.sync()
            finally:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
