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

* a record is handed to the kernel with one ``write`` as soon as it exists (records taken from the sample cache:
  all of them in one, ``LogWriter.append_all``), so kill -9 of the process loses nothing already computed; a crash
  of the machine loses at most the last ``FSYNC_SECONDS``;
* a torn last line (a machine crash mid-write) or any line whose digest does not match its bytes (an edit)
  is never read as a record: the sample is recomputed and the reason is printed; a writer opening its log
  cuts a torn tail first, so the next record starts on a line of its own;
* shards on a shared file system each write only their own file; readers read every log, and only the logs:
  a ``*.jsonl`` file of any other name is no writer's and is never read;
* ``samples/<id>.json`` files of the previous layout (87e8f14) are still read, below every log;
* the digest is a checksum, not a signature: anyone who can write the folder can add a line whose digest fits.
  So two records of one sample that a run would both reuse (ok, the same input hash and implementation) but
  whose results differ are both left unread (``contradictions``): the store cannot say which is true, and the
  sample is computed again. A writer that replaces a record on purpose (a video generated again) moves the old
  one aside first (``move_aside``);
* what is not read (a damaged line, contradicting records, a file that is no writer's log) does not stay in the
  store: a writer moves it into ``samples/quarantine/`` (``settle``), from its own log, and from every log when it
  is an unsharded run (the run directory's lock keeps every shard away then); a run's finish settles every store
  and pins its logs in the scorecard (``seal``: lines, bytes, SHA-256), so ``pinbench check`` names any line
  added or changed after it;
* the store and its logs are the run directory's own: a symlink, a FIFO or a device in their place is refused in
  one line naming it (``StoreError``), never followed, read or written.

When one sample has several records (a failed one retried, a rerun after a code change), the caller decides
which it may reuse (``pinbench.core.runner``); this module only says, per sample, what is stored, newest
first: the writer's own log, then the other logs by name, then the previous layout; and what it does not read.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from binascii import hexlify, unhexlify
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from pinbench.core.files import (
    FileError,
    FileState,
    counted,
    creation_mode,
    loads_finite_json,
    not_regular,
    open_regular,
    read_regular_bytes,
    write_atomic,
)
from pinbench.core.jsonfields import COUNT, TEXT, JsonBlock, spec

SAMPLES_DIR = "samples"
QUARANTINE_DIR = "quarantine"
LOG_SUFFIX = ".jsonl"
UNSHARDED_LOG = "run"
_WRITER_LOG = re.compile(r"run\.jsonl|shard-(0|[1-9][0-9]*)-of-([1-9][0-9]*)\.jsonl")
FSYNC_SECONDS = 1.0
SETTLED_S = 2.0
_PREFIX = b'{"digest":"'
_MIDDLE = b'","record":'
_BODY_START = len(_PREFIX) + 64 + len(_MIDDLE)
_CLOSE = ord("}")


class StoreError(FileError):
    """A sample store, or a log in it, that is not the run directory's own regular file or folder (one line)."""


def log_name(shard: Any) -> str:
    """``run.jsonl`` for an unsharded writer, ``shard-I-of-N.jsonl`` for shard I of N."""
    stem = UNSHARDED_LOG if shard is None else f"shard-{shard.index}-of-{shard.count}"
    return stem + LOG_SUFFIX


def is_writer_log(name: str) -> bool:
    """Whether a file name is one a writer's log has: ``run.jsonl``, or ``shard-I-of-N.jsonl`` with I < N."""
    match = _WRITER_LOG.fullmatch(name)
    return match is not None and (match.group(1) is None or int(match.group(1)) < int(match.group(2)))


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
    """One record as stored: its JSON, the digest of its bytes, and where it is (``samples/run.jsonl:12``: the
    log and the line number, for a record of a log); ``body``, the bytes the digest covers (empty for a record of
    the layout before the logs), so a record reused is never encoded again."""

    data: dict[str, Any]
    digest: str
    where: str
    log: Path | None = None
    line: int = 0
    body: bytes = b""


TORN, DAMAGED, CONTRADICTING, SUPERSEDED = "torn", "damaged", "contradicting", "superseded"


@dataclass(frozen=True)
class Unread:
    """A line of a log that no run reads as a record, and why. ``kind``: ``TORN``, the log's last line without its
    newline (perhaps still being written, unless the log is the reader's own or no other writer can be running);
    ``DAMAGED``, edited or unreadable; ``CONTRADICTING``, a record another record of its sample contradicts;
    ``SUPERSEDED``, a record its writer replaced by a new one of the same inputs and code (``move_aside``)."""

    log: Path
    line: int
    reason: str
    sample_id: str | None
    kind: str = DAMAGED

    @property
    def torn(self) -> bool:
        return self.kind == TORN


@dataclass
class StoreContents:
    """Everything a step's store holds: per sample id, its records newest first; and what could not be read."""

    records: dict[str, list[Stored]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    problems_of: dict[str, list[str]] = field(default_factory=dict)  # those that name their sample, by its id
    legacy: int = 0  # records read from samples/<id>.json files (the layout before the logs)
    unread: list[Unread] = field(default_factory=list)  # every log line not read as a record, torn tails included
    strays: list[Path] = field(default_factory=list)  # ``*.jsonl`` files that are no writer's log: never read
    refused: list[Path] = field(default_factory=list)  # logs that are not regular files (``StoreFiles``): never read
    states: dict[Path, FileState] = field(default_factory=dict)  # each log as it was read

    def _problem(self, reason: str, sample_id: str | None) -> None:
        self.problems.append(reason)
        if sample_id is not None:
            self.problems_of.setdefault(sample_id, []).append(reason)

    def newest(self, sample_id: str) -> Stored | None:
        found = self.records.get(sample_id)
        return found[0] if found else None


def decode_line(line: bytes, where: str, log: Path | None = None, number: int = 0
                ) -> tuple[Stored | None, str, str | None]:
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
    return Stored(data, claimed, where, log, number, body), "", data["sample_id"]


def sound_body(line: bytes) -> bytes | None:
    """The record bytes of a log line whose digest holds (not parsed), else None."""
    body = line[_BODY_START:-1]
    if (line.startswith(_PREFIX) and line[_BODY_START - len(_MIDDLE):_BODY_START] == _MIDDLE
            and line.endswith(b"}") and digest_of(body).encode("ascii") == line[len(_PREFIX):len(_PREFIX) + 64]):
        return body
    return None


def _of(sample_id: str | None) -> str:
    return f" of sample {sample_id!r}" if sample_id is not None else ""


def _named_sample(body: bytes) -> str | None:
    """The sample id a damaged record body names, read leniently (for the message), or None."""
    try:
        data = json.loads(body.decode("utf-8", errors="replace"))
    except ValueError:
        return None
    return data.get("sample_id") if isinstance(data, dict) and isinstance(data.get("sample_id"), str) else None


def log_lines(data: bytes) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes without the newline, whether the line was complete) of a log's bytes, a line at a time
    (no list of them all: a log of 112,220 records is 70 MB)."""
    start, number, find = 0, 0, data.find
    while (end := find(b"\n", start)) >= 0:
        number += 1
        yield number, data[start:end], True
        start = end + 1
    if start < len(data):
        yield number + 1, data[start:], False


# ------------------------------------------------------------------------------------ what is in the folder


def _store_dir(samples_dir: Path) -> bool:
    """Whether the store folder exists; StoreError when something else is in its place."""
    try:
        mode = os.lstat(samples_dir).st_mode
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StoreError(samples_dir, f"unreadable: {exc.strerror}") from None
    if os.path.islink(samples_dir):
        raise StoreError(samples_dir, f"a symlink (to {os.readlink(samples_dir)}); a run directory holds its own "
                                      "sample store, never another's")
    kind = not_regular(mode)
    if kind != "is a directory":
        raise StoreError(samples_dir, f"{kind or 'a file'}, not a folder; the sample store is a folder of logs")
    return True


@dataclass(frozen=True)
class StoreFiles:
    """What a store folder holds: the writers' logs; entries named as one that are not the folder's own regular file
    (a symlink, a FIFO, a folder), each with why; and the ``*.jsonl`` files that are no writer's. Only the logs are
    ever read."""

    logs: list[Path]
    refused: dict[Path, StoreError]
    strays: list[Path]


def store_files(samples_dir: Path | str) -> StoreFiles:
    """What a store folder holds (``StoreFiles``), by name; StoreError when the folder is not one (a symlink: another
    run's store, a FIFO, a file)."""
    samples_dir = Path(samples_dir)
    if not _store_dir(samples_dir):
        return StoreFiles([], {}, [])
    found: list[Path] = []
    refused: dict[Path, StoreError] = {}
    strays: list[Path] = []
    for entry in sorted(os.scandir(samples_dir), key=lambda e: e.name):
        path = Path(entry.path)
        if entry.name.startswith(".") or not entry.name.endswith(LOG_SUFFIX):
            continue
        if not is_writer_log(entry.name):
            strays.append(path)
        elif entry.is_symlink():
            refused[path] = StoreError(path, f"a symlink (to {os.readlink(path)}); a run directory holds its own "
                                             "sample store, never another's")
        elif (kind := not_regular(entry.stat(follow_symlinks=False).st_mode)) is not None:
            refused[path] = StoreError(path, f"{'is a directory' if kind == 'is a directory' else kind}, not a "
                                             "regular file; a sample store's log is a file of lines")
        else:
            found.append(path)
    return StoreFiles(found, refused, strays)


def logs(samples_dir: Path | str) -> list[Path]:
    """Every writer's log in a samples folder that is a regular file, by name (``store_files``)."""
    return store_files(samples_dir).logs


def _open_log(path: Path) -> int:
    """A log opened to read, never following a symlink: a FIFO or a device is StoreError."""
    try:
        return open_regular(path, follow_symlinks=False)
    except FileError as exc:
        raise StoreError(path, exc.reason) from None


def read_log(path: Path) -> tuple[bytes, FileState]:
    """A log's bytes and its state as read (``_open_log``)."""
    fd = _open_log(path)
    try:
        stat = os.fstat(fd)
        state = FileState.of(stat)
        # one read of the size it has (one buffer, not chunks and their joined copy: a 10x CameraBench log is 69 MB),
        # then whatever a writer appended since, in chunks
        data = os.read(fd, stat.st_size + 1) if stat.st_size else b""
        chunks = [data]
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return data if len(chunks) == 1 else b"".join(chunks), state
    except OSError as exc:
        raise StoreError(path, f"unreadable: {exc.strerror}") from None
    finally:
        os.close(fd)


@dataclass(frozen=True)
class _ParsedLog:
    records: list[Stored]
    unread: list[Unread]  # damaged lines, the torn last line included
    state: FileState


_PARSED: dict[Path, _ParsedLog] = {}


def _parsed_log(path: Path) -> _ParsedLog:
    """One log's lines, parsed and checked once per process while its ``FileState`` holds (a run reads
    its store when it starts and again when it merges). Only a log untouched for ``SETTLED_S`` is kept: an edit
    after that changes its mtime even on a file system with coarse timestamps."""
    cached = _PARSED.get(path)
    if cached is not None:
        try:
            if FileState.of(os.stat(path, follow_symlinks=False)) == cached.state:
                return cached
        except OSError:
            pass
    data, state = read_log(path)
    records: list[Stored] = []
    unread: list[Unread] = []
    for number, line, complete in log_lines(data):
        where = f"{path}:{number}"
        if not complete:
            unread.append(Unread(path, number, f"{where}: a torn last record (the writer stopped mid-line)",
                                 _named_sample(line[_BODY_START:]), TORN))
            continue
        stored, reason, named = decode_line(line, where, path, number)
        if stored is None:
            unread.append(Unread(path, number, reason, named))
        else:
            records.append(stored)
    parsed = _ParsedLog(records, unread, state)
    if time.time_ns() - state.mtime_ns > SETTLED_S * 1e9:
        _PARSED[path] = parsed
    return parsed


def read_store(samples_dir: Path | str, *, own: str | None = None) -> StoreContents:
    """Every record of a samples folder, per sample newest first (see the module docstring for the order).

    A line that is torn or fails its digest is left out and named in ``problems``, except a torn last line of a
    log some other process may still be writing (only the own log's torn tail is certain to be one); so are
    records that contradict each other (``contradictions``) and a log that is not a regular file (``refused``).
    Every line left out is in ``unread``, every file that is no writer's log in ``strays``. StoreError when the
    folder, or the writer's own log ``own``, is not the run directory's own regular file or folder.
    """
    samples_dir = Path(samples_dir)
    contents = StoreContents()
    found = store_files(samples_dir)
    contents.strays = found.strays
    for path, refusal in found.refused.items():
        if path.name == own:  # what this writer would append to
            raise refusal
        contents.refused.append(path)
        contents._problem(f"{refusal}: not read", None)
    ordered = found.logs
    if own is not None:
        ordered = [p for p in ordered if p.name == own] + [p for p in ordered if p.name != own]
    for path in ordered:
        parsed = _parsed_log(path)
        contents.states[path] = parsed.state
        for unread in parsed.unread:
            contents.unread.append(unread)
            if not unread.torn or path.name == own:
                contents._problem(unread.reason, unread.sample_id)
        for stored in reversed(parsed.records):  # later lines of one log are newer
            contents.records.setdefault(stored.data["sample_id"], []).append(stored)
    for unread in contradictions(contents.records):
        contents.unread.append(unread)
        contents._problem(unread.reason, unread.sample_id)
    _read_legacy(samples_dir, contents)
    return contents


def contradictions(records: dict[str, list[Stored]]) -> list[Unread]:
    """The records that a run would reuse in place of one another (ok, the same input hash and implementation)
    but whose results differ: taken out of ``records`` (neither can be trusted over the other) and returned, one
    ``Unread`` per line. Records that say the same thing (a timing apart) stand."""
    found: list[Unread] = []
    for sample_id in [sid for sid, stored in records.items() if len(stored) > 1]:
        ok = [s for s in records[sample_id] if s.data.get("status") == "ok"]
        clashing = {id(s): s for a in ok for s in ok if s is not a and _same_task(a, s)
                    and a.data.get("result") != s.data.get("result")}
        if not clashing:
            continue
        records[sample_id] = [s for s in records[sample_id] if id(s) not in clashing]
        if not records[sample_id]:
            del records[sample_id]
        clashed = sorted(clashing.values(), key=lambda s: (str(s.log), s.line))
        wheres = [s.where for s in clashed]
        for stored in clashed:
            others = ", ".join(w for w in wheres if w != stored.where)
            found.append(Unread(stored.log or Path(stored.where), stored.line,
                                f"{stored.where}: a record of sample {sample_id!r} that another record of the same "
                                f"inputs and code contradicts ({others}): neither is read", sample_id,
                                CONTRADICTING))
    return found


def _same_task(a: Stored, b: Stored) -> bool:
    return a.data.get("input_hash") == b.data.get("input_hash") and \
        a.data.get("implementation") == b.data.get("implementation")


# ------------------------------------------------------------------------------------ moving aside, pinning


def settle(samples_dir: Path | str, contents: StoreContents, *, own: str, every_log: bool,
           keep: Callable[[], Iterable[bytes]] | None = None) -> list[str]:
    """Move what no run reads out of the store into ``samples/quarantine/``: the unread lines (damaged, torn,
    contradicting: ``contents.unread``) of the writer's own log ``own`` (records that contradict one in another log
    stay with it); with ``every_log``, of every log, and the files that are no writer's log or not a regular file
    too. A line holding one of the records ``keep`` gives (asked only when a log is rewritten) stays. Returns one
    line per move, to print.

    Only a writer that no other writer of the folder runs beside may pass ``every_log`` (an unsharded run, which
    holds its run directory): a log is rewritten without the lines it loses, which would lose what another
    writer appended meanwhile.
    """
    samples_dir = Path(samples_dir)
    lines = contents.unread
    if not every_log:  # records that contradict each other go together: the one left behind would be read again
        elsewhere = {u.sample_id for u in lines if u.kind == CONTRADICTING and u.log.name != own}
        lines = [u for u in lines if u.kind != CONTRADICTING or u.sample_id not in elsewhere]
    messages = move_aside(samples_dir, contents, lines, own=own, every_log=every_log, keep=keep)
    moved = [(path, "not a log any writer keeps (run.jsonl, shard-I-of-N.jsonl), never read")
             for path in contents.strays] + [(path, "not a regular file, never read") for path in contents.refused]
    for path, why in moved if every_log else ():
        # never under a log's name: quarantine/<log> is where that writer moves its lines, and a FIFO or a symlink
        # there stopped it ("not a regular file") on every later run
        name = f"{path.name}.moved" if _WRITER_LOG.fullmatch(path.name) else path.name
        target = _quarantine(samples_dir) / name
        number = 1
        while os.path.lexists(target):
            number += 1
            target = target.with_name(f"{name}.{number}")
        os.rename(path, target)  # a symlink or a FIFO moves as itself: nothing it points to is touched
        messages.append(f"{path}: {why}: moved to {target}")
    return messages


def move_aside(samples_dir: Path | str, contents: StoreContents, lines: Collection[Unread], *, own: str,
               every_log: bool, keep: Callable[[], Iterable[bytes]] | None = None) -> list[str]:
    """Move ``lines`` of the store's logs (as ``contents`` read them) into ``samples/quarantine/<own>``, a JSON line
    each (where it was, when and why it was moved, its text), then rewrite each log without them (atomically):
    those of the writer's own log ``own``, of every log with ``every_log`` (see ``settle``). A line holding one of
    the records ``keep`` gives stays: asked only when a log is to be rewritten (why: a finish's records, 112k at 10x,
    are assembled each time their bytes are asked for). Returns one line per move, to print."""
    by_log: dict[Path, list[Unread]] = {}
    for unread in lines:
        if every_log or unread.log.name == own:
            by_log.setdefault(unread.log, []).append(unread)
    messages: list[str] = []
    kept = set(keep()) if keep is not None and by_log else set()
    for log, unread in by_log.items():
        messages += _move_lines(log, unread, contents.states.get(log), Path(samples_dir), own, kept)
    return messages


def _quarantine(samples_dir: Path) -> Path:
    folder = samples_dir / QUARANTINE_DIR
    if not _store_dir(folder):
        folder.mkdir()
    return folder


def _move_lines(log: Path, unread: list[Unread], state: FileState | None, samples_dir: Path, own: str,
                keep: set[bytes]) -> list[str]:
    data, now = read_log(log)
    if state is not None and now != state:
        return [f"{log}: changed since it was read; its unread lines stay there for the next run to move"]
    lines = data.split(b"\n")  # the last item is b"" after a final newline, else the torn last line
    moving = {u.line: u for u in unread}
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    target = samples_dir / QUARANTINE_DIR / own
    kept, entries, messages = [], [], []
    for number, line in enumerate(lines, start=1):
        why = moving.get(number)
        if why is None or (not why.torn and sound_body(line) in keep):
            kept.append(line if number == len(lines) else line + b"\n")
            continue
        entries.append(json.dumps({"line": f"{log.name}:{number}", "moved": stamp, "why": why.reason,
                                   "text": line.decode("utf-8", errors="backslashreplace")}, ensure_ascii=False))
        messages.append(f"{why.reason}: moved to {target}")
    if not entries:
        return []
    _quarantine(samples_dir)
    try:
        fd = open_regular(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, follow_symlinks=False, mode=creation_mode())
    except FileError as exc:
        raise StoreError(target, exc.reason) from None
    try:
        _write_all(fd, "".join(entry + "\n" for entry in entries).encode("utf-8"))
        os.fsync(fd)  # kept there before it leaves the log
    finally:
        os.close(fd)
    write_atomic(log, b"".join(kept))
    return messages


def _write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)
    while written < len(data):  # a short write on a full disk or a signal: finish the line or fail
        written += os.write(fd, data[written:])


def store_folders(run_dir: Path | str) -> dict[str, Path]:
    """The sample stores of a run directory, by their path in it: ``samples`` when anything is there, and each
    step's ``<step>/samples`` that holds a ``*.jsonl`` file or is a symlink (``store_files`` refuses it). StoreError
    for a step folder that is a symlink to a store (another run's)."""
    run_dir = Path(run_dir)
    root = run_dir / SAMPLES_DIR
    found = {SAMPLES_DIR: root} if os.path.lexists(root) else {}
    for folder in sorted(run_dir.glob(f"*/{SAMPLES_DIR}")):
        if folder.parent.is_symlink():
            raise StoreError(folder.parent, f"a symlink (to {os.readlink(folder.parent)}) to a sample store; a run "
                                            "directory holds its own sample stores, never another's")
        if folder.is_symlink() or (folder.is_dir() and any(folder.glob(f"*{LOG_SUFFIX}"))):
            found[folder.relative_to(run_dir).as_posix()] = folder
    return found


@dataclass(frozen=True)
class LogPin(JsonBlock, where="store"):
    """A log as a run's finish left it: its complete lines, its size and the SHA-256 of its bytes."""

    log: str = spec(TEXT)
    lines: int = spec(COUNT)
    bytes: int = spec(COUNT)
    sha256: str = spec(TEXT)


StorePins = dict[str, tuple[LogPin, ...]]


def pin_log(data: bytes, name: str) -> LogPin:
    """The pin of a log's bytes."""
    return LogPin(name, data.count(b"\n"), len(data), hashlib.sha256(data).hexdigest())


class Counted(Protocol):
    """A record a scorecard counts, as ``seal`` finds it in a log (``pinbench.core.runner.SampleRecord``)."""

    sample_id: str

    def to_bytes(self) -> bytes: ...


def seal(run_dir: Path | str, counted: Mapping[bytes, Counted]) -> tuple[StorePins, list[str]]:
    """A finish's last word on the sample stores of ``run_dir``, which it holds (no other writer runs): ``settle``
    each with ``every_log`` (``counted``: the records the scorecard counts by their digest's 32 bytes, of the
    ``samples`` store: kept, and neither parsed nor hashed again), then pin every log. Returns the pins and the moves to
    print."""
    pins: StorePins = {}
    messages: list[str] = []
    for name, folder in store_folders(run_dir).items():
        known = counted if name == SAMPLES_DIR else {}
        contents, read = _unread(folder, known)
        moved = settle(folder, contents, own=log_name(None), every_log=True,
                       keep=lambda known=known: (record.to_bytes() for record in known.values()))
        messages += moved
        # each log as read, unless something was moved (the logs rewritten)
        pins[name] = tuple(read[path] if not moved and path in read else pin_log(read_log(path)[0], path.name)
                           for path in logs(folder))
    return pins, messages


_BLOCK = 1 << 18   # how much of a log ``_unread`` holds at a time


def _unread(samples_dir: Path, known: Mapping[bytes, Counted]) -> tuple[StoreContents, dict[Path, LogPin]]:
    """What ``settle`` needs of a store: its unread lines, its stray and refused files, its logs' states, as
    ``read_store`` finds them, and each log's pin as read; a line holding one of the ``known`` records (by its
    digest, the line's body hashing to it) is neither copied, parsed nor encoded again, only the others and those of a
    sample with more than one line (``contradictions``). A log is read a block at a time (a 10x CameraBench log is
    69 MB); the lines of a sample with several are read again, from a log that must still hash to its pin."""
    contents = StoreContents()
    found = store_files(samples_dir)
    contents.strays, contents.refused = found.strays, list(found.refused)
    sha256 = hashlib.sha256
    first: dict[str, int] = {}   # sample id -> its first line, as _line_at packs it (one int: 112k of them at 10x)
    several: dict[str, list[int]] = {}
    pins: dict[Path, LogPin] = {}
    for log_index, path in enumerate(found.logs):
        fd = _open_log(path)
        try:
            contents.states[path] = FileState.of(os.fstat(fd))
            digest, size, lines, number, data, base = hashlib.sha256(), 0, 0, 0, b"", 0   # data: from byte base on
            while True:
                try:
                    block = os.read(fd, _BLOCK)
                except OSError as exc:
                    raise StoreError(path, f"unreadable: {exc.strerror}") from None
                digest.update(block)
                size, lines = size + len(block), lines + block.count(b"\n")
                data = data + block if data else block
                last = len(data) if not block else data.rfind(b"\n") + 1   # up to the last whole line (all at EOF)
                start, find, startswith = 0, data.find, data.startswith
                while start < last:
                    end, number = find(b"\n", start, last), number + 1
                    if end < 0:
                        named = _named_sample(data[start + _BODY_START:])
                        contents.unread.append(Unread(path, number, f"{path}:{number}: a torn last record (the "
                                                                    "writer stopped mid-line)", named, TORN))
                        break
                    claimed = data[start + len(_PREFIX):start + len(_PREFIX) + 64]
                    try:
                        raw = unhexlify(claimed)
                    except ValueError:   # not hex: no record's
                        raw = b""
                    entry = known.get(raw)
                    if entry is not None and hexlify(raw) != claimed:   # its hex in capitals: not as written
                        entry = None
                    if (entry is not None and startswith(_PREFIX, start) and data[end - 1] == _CLOSE
                            and startswith(_MIDDLE, start + _BODY_START - len(_MIDDLE))
                            and sha256(data[start + _BODY_START:end - 1]).digest() == raw):   # its very bytes
                        sample_id = entry.sample_id
                    else:
                        stored, reason, sample_id = decode_line(data[start:end], f"{path}:{number}", path, number)
                        if stored is None:
                            contents.unread.append(Unread(path, number, reason, sample_id))
                            start = end + 1
                            continue
                    where = _line_at(log_index, number)
                    if (earlier := first.setdefault(sample_id, where)) != where:
                        several.setdefault(sample_id, [earlier]).append(where)
                    start = end + 1
                if not block:
                    break
                data, base = data[last:], base + last
        finally:
            os.close(fd)
        pins[path] = LogPin(path.name, lines, size, digest.hexdigest())   # pin_log's
    contents.unread += contradictions(_lines_of(several, found.logs, pins))
    return contents, pins


_LINES = 1 << 40   # more lines than a log holds


def _line_at(log_index: int, number: int) -> int:
    return log_index * _LINES + number


def _lines_of(several: Mapping[str, list[int]], paths: list[Path],
              pins: Mapping[Path, LogPin]) -> dict[str, list[Stored]]:
    """The records of each sample's lines (``_unread``), from their logs read again and checked against their pins."""
    lines_of: dict[int, list[bytes]] = {}
    for log_index in sorted({where // _LINES for lines in several.values() for where in lines}):
        path = paths[log_index]
        data = read_log(path)[0]
        if pin_log(data, path.name) != pins[path]:
            raise StoreError(path, "changed while the finish read it; a finish holds its run directory")
        lines_of[log_index] = data.split(b"\n")
    found: dict[str, list[Stored]] = {}
    for sample_id, lines in several.items():
        for where in lines:
            (log_index, number), path = divmod(where, _LINES), paths[where // _LINES]
            stored = decode_line(lines_of[log_index][number - 1], f"{path}:{number}", path, number)[0]
            found.setdefault(sample_id, []).append(stored)
    return found


def pin_problems(folder: Path, log: str, data: bytes, pinned: LogPin | None) -> list[str]:
    """How a log's bytes differ from what the finish pinned: appended lines (each named, a few), cut or changed
    bytes, a log it never saw."""
    path = folder / log
    if pinned is None:
        lines = data.count(b"\n")
        return [f"{path}: a log the finish did not pin (written after it; {counted(lines, 'line')})"]
    problems = []
    if len(data) < pinned.bytes:
        problems.append(f"{path}: {pinned.bytes - len(data)} bytes shorter than the finish left it ({pinned.lines} "
                        "lines): cut or edited after it")
    elif hashlib.sha256(data[:pinned.bytes]).hexdigest() != pinned.sha256:
        problems.append(f"{path}: changed after the finish within its first {counted(pinned.lines, 'line')} "
                        "(their SHA-256 is not the one the scorecard pins)")
    if len(data) > pinned.bytes:
        after = [(n, line) for n, line, _ in log_lines(data)][pinned.lines:]
        for number, line in after[:3]:
            named = _named_sample(line[_BODY_START:-1])
            problems.append(f"{path}:{number}: appended after the finish"
                            + (f" (a record of sample {named!r})" if named is not None else ""))
        if len(after) > 3:
            problems.append(f"{path}: ... and {counted(len(after) - 3, 'more line')} appended after the finish")
    return problems


def legacy_files(samples_dir: Path | str) -> bool:
    """Whether a samples folder holds per-sample files of the layout before the logs."""
    return any(not p.name.startswith(".") for p in Path(samples_dir).glob("*.json"))


def _read_legacy(samples_dir: Path, contents: StoreContents) -> None:
    """The per-sample files of the layout before the logs (``samples/<id>.json``), oldest of all."""
    for path, stored, problem in _legacy(samples_dir):
        if stored is None:
            contents._problem(problem, path.stem)
            continue
        contents.records.setdefault(path.stem, []).append(stored)
        contents.legacy += 1


def _legacy(samples_dir: Path) -> Iterator[tuple[Path, Stored | None, str]]:
    """Each per-sample file of the layout before the logs, by name: (its path, its record, "") or (its path, None,
    why it is none)."""
    for path in sorted(samples_dir.glob("*.json")):
        if path.name.startswith(".") or not path.is_file() or path.is_symlink():
            continue
        try:
            data = loads_finite_json(read_regular_bytes(path, follow_symlinks=False).decode("utf-8"))
        except (FileError, UnicodeDecodeError, ValueError) as exc:
            yield path, None, f"{path}: unreadable record ({' '.join(str(exc).split())})"
            continue
        if not isinstance(data, dict) or data.get("sample_id") != path.stem:
            yield path, None, f"{path}: the record is not for sample {path.stem!r}"
            continue
        yield path, Stored(data, digest_of(record_bytes(data)), str(path)), ""


def sound_records(samples_dir: Path | str) -> Iterator[tuple[tuple[int, int], Stored]]:
    """Every record ``read_store`` reads (contradicting ones included: ``contradictions`` is the caller's), one at a
    time, each with its rank: of two records of a sample, ``read_store`` lists the one of smaller rank first (for
    ``newest_records``). A log is read a line at a time; StoreError as ``read_store`` for one it cannot read."""
    samples_dir = Path(samples_dir)
    found = store_files(samples_dir)
    for index, path in enumerate(found.logs):
        fd = _open_log(path)
        with os.fdopen(fd, "rb", buffering=1 << 20) as fh:
            try:
                for number, line in enumerate(fh, 1):
                    if not line.endswith(b"\n"):   # a torn last line
                        break
                    stored, _, _ = decode_line(line[:-1], f"{path}:{number}", path, number)
                    if stored is not None:
                        yield (index, -number), stored   # later lines of one log are newer
            except OSError as exc:
                raise StoreError(path, f"unreadable: {exc.strerror}") from None
    for number, (_, stored, _) in enumerate(_legacy(samples_dir)):
        if stored is not None:
            yield (len(found.logs), number), stored


J = TypeVar("J", bound=Hashable)


@dataclass(frozen=True, slots=True)
class _Seen(Generic[J]):
    """A record of a wanted task as ``newest_records`` streamed the store: its rank, what a contradiction is judged
    on besides its result (read again only for a task with two ok records of one code), and its judgement."""

    rank: tuple[int, int]    # ``sound_records``: smaller is newer
    ok: bool                 # its status says ok (whether or not the judge reads it)
    code: Hashable           # its implementation, as ``_code_key`` gives it
    judged: J | None         # the judge's; None: passed over


def _code_key(implementation: Any) -> Hashable:
    """A key of a record's implementation, equal where the implementations are (``contradictions`` compares them):
    its items, sorted (writing each as sorted JSON was 0.45 s of status' 2.8 s at 112,220 records), else, for
    one that holds a list or an object (no hash), that JSON."""
    key = tuple(sorted(implementation.items())) if isinstance(implementation, dict) else implementation
    try:
        hash(key)
    except TypeError:
        return json.dumps(implementation, sort_keys=True)
    return key


def newest_records(samples_dir: Path | str, wanted: Collection[tuple[str, str]],
                   judge: Callable[[dict[str, Any]], J | None]) -> dict[tuple[str, str], J]:
    """Per (sample id, input hash) in ``wanted``: ``judge`` of the newest record of it that ``read_store`` reads
    (contradicting ones left out) and ``judge`` does not make None. Streamed (``sound_records``), keeping each
    judgement once and no record: ``pinbench status`` held the whole store, 494 MiB peak RSS at 112,220 records; the
    results of a task's two ok records of one code are read again, in a second pass, for ``contradictions``."""
    seen: dict[tuple[str, str], list[_Seen[J]]] = {}
    codes: dict[Hashable, Hashable] = {}   # each implementation once, not once per record
    judgements: dict[J, J] = {}            # each judgement once: most are alike
    for rank, stored in sound_records(samples_dir):
        data = stored.data
        task = (data["sample_id"], data.get("input_hash"))
        if not isinstance(task[1], str) or task not in wanted:
            continue
        code = _code_key(data.get("implementation"))
        judged = judge(data)
        seen.setdefault(task, []).append(_Seen(rank, data.get("status") == "ok", codes.setdefault(code, code),
                                               judged if judged is None else judgements.setdefault(judged, judged)))
    clashing = _contradicting(samples_dir, seen)
    newest: dict[tuple[str, str], J] = {}
    for task, found in seen.items():
        judged = next((s.judged for s in sorted(found, key=lambda s: s.rank) if s.judged is not None
                       and s.rank not in clashing), None)
        if judged is not None:
            newest[task] = judged
    return newest


def _contradicting(samples_dir: Path | str, seen: Mapping[tuple[str, str], list[_Seen]]) -> set[tuple[int, int]]:
    """The ranks of the ok records that another ok record of the same task and code contradicts (``contradictions``,
    applied to those records only, read again)."""
    suspects = {s.rank: task for task, found in seen.items() if len(found) > 1 for s in found
                if s.ok and sum(o.ok and o.code == s.code for o in found) > 1}
    if not suspects:
        return set()
    by_sample: dict[str, list[Stored]] = {}
    rank_of: dict[int, tuple[int, int]] = {}
    for rank, stored in sound_records(samples_dir):
        if suspects.get(rank) == (stored.data["sample_id"], stored.data.get("input_hash")):
            by_sample.setdefault(stored.data["sample_id"], []).append(stored)
            rank_of[id(stored)] = rank
    contradictions(by_sample)   # takes the contradicting records out of by_sample
    kept = {id(stored) for found in by_sample.values() for stored in found}
    return {rank for key, rank in rank_of.items() if key not in kept}


class LogWriter:
    """Appends records to one writer's log: one ``write`` per record or per batch of them, an fsync at most every
    FSYNC_SECONDS.

    Opening cuts a torn last line (say why on stderr) so every record starts on a line of its own. Use as a
    context manager; closing fsyncs what is still pending.
    """

    def __init__(self, samples_dir: Path | str, name: str) -> None:
        self.path = Path(samples_dir) / name
        if not _store_dir(self.path.parent):
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:  # never through a symlink, never a FIFO or a device: the run directory's own file or nothing
            self._fd = open_regular(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, follow_symlinks=False,
                                    mode=creation_mode())
        except FileError as exc:
            raise StoreError(self.path, f"{exc.reason}; a sample store's log is a file of lines") from None
        self._cut_torn_tail()
        self._synced = time.monotonic()
        self._dirty = False

    def _cut_torn_tail(self) -> None:
        size = os.fstat(self._fd).st_size
        if size == 0 or os.pread(self._fd, 1, size - 1) == b"\n":
            return
        keep = 0
        for end in range(size - 1, 0, -(1 << 20)):  # back to the last complete line
            start = max(0, end - (1 << 20))
            block = os.pread(self._fd, end - start, start)
            if b"\n" in block:
                keep = start + block.rfind(b"\n") + 1
                break
        print(f"pinbench: {self.path}: cutting a torn last record ({size - keep} bytes; that sample is "
              "computed again)", file=sys.stderr, flush=True)
        os.ftruncate(self._fd, keep)
        os.fsync(self._fd)

    def append(self, body: bytes) -> bytes:
        """Store one record's bytes; returns their SHA-256 (32 bytes)."""
        digest = hashlib.sha256(body).digest()
        self._write(b"".join((_PREFIX, hexlify(digest), _MIDDLE, body, b"}\n")))
        return digest

    def append_all(self, bodies: Sequence[bytes]) -> list[bytes]:
        """Store several records' bytes with one ``write`` (the lines ``append`` writes one by one); their digests.

        Why: a rerun taking 11,222 records from the sample cache stores them in one system call, not 11,222; a kill
        mid-write leaves a torn last line, which the next writer cuts, and whole lines before it, which are stored.
        The digests are the 32 bytes of each SHA-256 (``encode_line`` writes their hex)."""
        digests = [hashlib.sha256(body).digest() for body in bodies]
        if digests:
            self._write(b"".join(b"".join((_PREFIX, hexlify(digest), _MIDDLE, body, b"}\n"))
                                 for digest, body in zip(digests, bodies, strict=True)))
        return digests

    def _write(self, lines: bytes) -> None:
        _write_all(self._fd, lines)
        self._dirty = True
        if time.monotonic() - self._synced >= FSYNC_SECONDS:
            self.sync()

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
