"""Resumable, shardable per-sample runner: what the per-sample steps of ``pinbench.core.run.Run`` run on.

A benchmark run is a list of tasks (``pinbench.core.task.Task``: typed per recipe, each with a unique sample id)
and a function that turns one task into a result dict. ``run_samples`` calls that function for every task of a shard
and stores each outcome as soon as it exists in the step's sample store (``pinbench.core.store``: one
append-only log per writer in ``out_dir/samples/``). A killed run therefore loses at most the samples in
flight, and a rerun recomputes only what is not validly stored. ``merge_samples`` reads the records of
every writer into one list in task order, with one record per task: a task no shard produced becomes a
failed "missing" record, so nothing drops out of the denominator.

A stored record is reused when it is ok, its ``input_hash`` (the hash of the task's fields: the inputs'
identity and the options that change results) is the task's, its ``implementation`` (recipe version, a digest of
the code that scores, the container image, the installed versions of the recipe's ``numerics:``;
``pinbench.core.config.Implementation``) is this run's, and its result still validates. Anything else is computed
again, and the summary says why ("12 recomputed: code changed").

Stored results are plain JSON. JSON has no NaN or infinity, so non-finite floats in a result are
stored as ``null`` (also in memory, so a fresh record equals its reloaded copy); the scorecard counts
a null metric as not scored. A stored record that holds ``NaN``, ``Infinity`` or an overflowing
number, or fails its digest, is corrupt: it is recomputed, never reused or merged.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from stat import S_ISREG
from typing import TYPE_CHECKING, Any, cast

from pinbench.core.config import Implementation, Shard
from pinbench.core.files import atomic_path, clipped, counted, parse_finite_jsonl, read_finite_jsonl
from pinbench.core.memory import release_free_memory
from pinbench.core.notices import announced
from pinbench.core.progress import Lines, Progress, stderr_console
from pinbench.core.provenance import holds_secret, redact, secret_holder
from pinbench.core.sample_cache import SampleCache
from pinbench.core.shard_manifest import now as _now
from pinbench.core.shard_manifest import write_manifest
from pinbench.core.store import (
    SAMPLES_DIR,
    SUPERSEDED,
    LogWriter,
    StoreContents,
    Stored,
    Unread,
    log_name,
    move_aside,
    read_store,
    settle,
)
from pinbench.core.task import Task

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "MISSING_ERROR",
    "NeverComputed",
    "Reason",
    "RECORD_VERSION",
    "RunSummary",
    "SampleFailed",
    "SampleRecord",
    "StepLog",
    "canonical_json",
    "check_sample_id",
    "clean_result",
    "error_line",
    "sample_id_problem",
    "input_hash",
    "is_stand_in",
    "load_records",
    "merge_samples",
    "missing_error",
    "Pending",
    "Stale",
    "pending_tasks",
    "one_line",
    "parse_merged",
    "read_merged",
    "run_samples",
    "stand_in",
    "write_records",
]

log = logging.getLogger(__name__)
PLAIN_PROGRESS_SECONDS = 30.0
_SHOWN_S = 0.05

SampleFn = Callable[[Task], Mapping[str, Any]]
BatchFn = Callable[[list[Task]], Sequence[Mapping[str, Any]]]
Validator = Callable[[dict], bool]

RECORD_VERSION = 2
"""Bump when the record layout changes. Version 1 (87e8f14: no ``implementation``) is still read."""
READABLE_RECORD_VERSIONS = (1, 2)

MISSING_ERROR = "missing: no result from any shard"
OK, FAILED = "ok", "failed"
MAX_ID_BYTES = 200  # leaves room for ".json" and the temporary-file affixes within NAME_MAX (255)
_MAX_ERROR_CHARS = 2000


# -------------------------------------------------------------------------------------------- records


@dataclass(slots=True)
class SampleRecord:
    """The stored outcome of one sample. ``result`` is None exactly when ``status`` is "failed"."""

    sample_id: str
    status: str  # "ok" | "failed"
    result: dict | None
    error: str | None  # "ExcType: message", one line
    input_hash: str  # sha256 of the canonical JSON of the task's fields
    seconds: float
    traceback: str | None = None
    implementation: Implementation | None = None  # what computed it; None for records of 87e8f14
    # the bytes it was read with (``from_stored``, ``parse_merged``); else the JSON of its seconds and of its result, a
    # space between (``_texts``: encoded once; ``to_bytes`` joins the rest of the line around them at each call); and
    # the SHA-256 of its bytes, 32 bytes (``raw_digest``). Why not its bytes and their hex digest: held for the 112k
    # records of a 10x CameraBench run they were its largest part (70 of the 150 MB it added)
    _bytes: bytes | None = field(default=None, init=False, repr=False, compare=False)
    _json: bytes | None = field(default=None, init=False, repr=False, compare=False)
    _digest: bytes | None = field(default=None, init=False, repr=False, compare=False)
    _canonical: bool = field(default=False, init=False, repr=False, compare=False)  # its result is clean_result's:
    # sorted keys, plain JSON, so its result's JSON is the canonical one (``pinbench.core.derived`` hashes it as it is)

    def canonical_result(self) -> bytes | None:
        """The canonical JSON of an ok record's result (``canonical_json``) when its result is ``clean_result``'s (a
        record ``run_samples`` computed): its JSON as ``to_bytes`` writes it, encoded once; None otherwise."""
        if not self._canonical or self.result is None:
            return None
        return self._result_json()

    def canonical_member(self) -> bytes | None:
        """``[id, status, input hash, result, error]`` in canonical JSON (a member's entry in
        ``pinbench.core.derived.members_hash``) for an ok record ``run_samples`` computed, with its result's JSON as
        encoded once (``canonical_result``); None for any other."""
        if self.status != OK or self.error is not None or (result := self.canonical_result()) is None:
            return None
        return b"".join((("[" + _TEXT(self.sample_id) + ',"ok",' + _TEXT(self.input_hash) + ",").encode("utf-8"),
                         result, b",null]"))

    def stored_result(self) -> bytes | None:
        """An ok record's result as the bytes it was stored or read with hold it, sliced from them, or as ``to_bytes``
        writes it for a record without such bytes (the canonical JSON for every record ``run_samples`` computed);
        None for a failed record or bytes of another layout."""
        if self.result is None:
            return None
        body = self._bytes
        if body is None:
            return self._result_json()
        start, end = body.find(_OK_RESULT), body.rfind(_RESULT_END)
        return body[start + len(_OK_RESULT):end] if 0 < start < end else None

    def line(self) -> bytes | None:
        """The bytes it was read with when they are its own (a line of this record version, ``parse_merged``,
        ``from_stored``); None when it holds none (never encodes)."""
        return self._bytes

    def _texts(self) -> bytes:
        """The JSON of its seconds and of its result (``null`` for none) as ``to_bytes`` writes them, a space between
        (no number holds one), encoded once: of all the line, what costs to encode (a float's shortest repr takes
        half a microsecond)."""
        texts = self._json
        if texts is None:
            seconds, result = self.seconds, self.result
            texts = self._json = b" ".join((
                (float.__repr__(seconds) if type(seconds) is float else _VALUE(seconds)).encode("utf-8"),
                b"null" if result is None else _VALUE(result).encode("utf-8")))
        return texts

    def forget_texts(self) -> None:
        """Drop the JSON ``_texts`` holds (encoded again if asked for). A run's finish drops it once samples.jsonl
        and the members hashes are written, before the report: 2.4 MB of CameraBench's 11,222 records, which the
        report's allocations then reuse."""
        self._json = None

    def _result_json(self) -> bytes:
        """Its result's JSON as ``to_bytes`` writes it: the part of ``_texts`` after the space."""
        texts = self._texts()
        return texts[texts.index(b" ") + 1:]

    @property
    def ok(self) -> bool:
        return self.status == OK

    def to_json(self) -> dict[str, Any]:
        return {
            "record_version": RECORD_VERSION,
            "sample_id": self.sample_id,
            "status": self.status,
            "result": self.result,
            "error": self.error,
            "traceback": self.traceback,
            "input_hash": self.input_hash,
            "seconds": self.seconds,
            "implementation": self.implementation.to_json() if self.implementation else None,
        }

    def to_bytes(self) -> bytes:
        """The record's JSON bytes: one line of ``samples.jsonl``, and what its stored digest covers.

        ``record_bytes(self.to_json())``, assembled from its parts at each call (its result's JSON encoded once); a
        record read from a store or a samples file keeps the bytes it was read with (``from_stored``,
        ``parse_merged``)."""
        cached = self._bytes
        return cached if cached is not None else _encode_record(self)

    def digest(self) -> str:
        """SHA-256 of ``to_bytes()`` in hex: the digest its store line carries (``raw_digest``'s)."""
        return self.raw_digest().hex()

    def raw_digest(self) -> bytes:
        """SHA-256 of ``to_bytes()``, its 32 bytes, computed once (as 32 bytes: half the memory of its hex)."""
        cached = self._digest
        if cached is None:
            cached = self._digest = hashlib.sha256(self.to_bytes()).digest()
        return cached

    @classmethod
    def from_stored(cls, stored: Stored) -> SampleRecord:
        """The record of a store line, with the line's bytes and digest (checked when it was read) kept, so that
        it is never encoded or hashed again; ValueError as ``from_json``."""
        record = cls.from_json(stored.data)
        if stored.body.startswith(_LAYOUT):
            record._bytes, record._digest = stored.body, bytes.fromhex(stored.digest)
        return record

    @classmethod
    def from_json(cls, data: Any) -> SampleRecord:
        """Rebuild a record from its JSON form; ValueError says what is wrong with it."""
        record = cls._from_sound_json(data)
        return record if record is not None else cls._from_json_checked(data)

    @classmethod
    def _from_sound_json(cls, data: Any) -> SampleRecord | None:
        """The record, when ``data`` passes every check of ``_from_json_checked`` in one test; None otherwise.

        Why: ``pinbench check`` and every merge rebuild tens of thousands of records, and the field-by-field
        checks (built to name what is wrong) cost more than parsing the line. Anything this test does not accept
        goes through them, so a bad record gets the same message."""
        if type(data) is not dict:
            return None
        get = data.get
        version, sample_id, status, result = get("record_version"), get("sample_id"), get("status"), get("result")
        error, trace, digest, seconds = get("error"), get("traceback"), get("input_hash"), get("seconds")
        implementation = get("implementation")
        sound = (type(version) is int and version in READABLE_RECORD_VERSIONS and type(sample_id) is str
                 and ((status == OK and type(result) is dict) or (status == FAILED and result is None
                                                                  and type(error) is str and error != ""))
                 and (error is None or type(error) is str) and (trace is None or type(trace) is str)
                 and "result" in data and "error" in data and "traceback" in data and type(digest) is str
                 and _SHA256.fullmatch(digest) is not None and type(seconds) in (int, float)
                 and (type(seconds) is float or -_MAX_INT_SECONDS < seconds < _MAX_INT_SECONDS))
        if not sound:
            return None
        return cls(sample_id=sample_id, status=status, result=result, error=error, input_hash=digest,
                   seconds=float(seconds), traceback=trace,
                   implementation=None if implementation is None else Implementation.from_json(implementation))

    @classmethod
    def _from_json_checked(cls, data: Any) -> SampleRecord:
        if not isinstance(data, dict):
            raise ValueError(f"record is a JSON {type(data).__name__}, expected an object")
        version = data.get("record_version")
        if version not in READABLE_RECORD_VERSIONS or isinstance(version, bool):
            raise ValueError(f"record_version {version!r} is not one of the supported "
                             f"{', '.join(map(str, READABLE_RECORD_VERSIONS))}")
        for key, check, expected in _RECORD_FIELDS:
            if key not in data:
                raise ValueError(f"record lacks {key!r}")
            if not check(data[key]):
                raise ValueError(f"record field {key!r} must be {expected}, got {data[key]!r:.80}")
        if (data["status"] == OK) != (data["result"] is not None):
            raise ValueError(f"record with status {data['status']!r} has result {data['result']!r:.80}")
        if data["status"] == FAILED and not data["error"]:
            raise ValueError("failed record has no error")
        try:
            seconds = float(data["seconds"])
        except OverflowError:   # an integer beyond any float
            raise ValueError(f"record field 'seconds' must be a finite number, got {data['seconds']!r:.80}") from None
        implementation = data.get("implementation")
        return cls(
            sample_id=data["sample_id"],
            status=data["status"],
            result=data["result"],
            error=data["error"],
            input_hash=data["input_hash"],
            seconds=seconds,
            traceback=data["traceback"],
            implementation=None if implementation is None else Implementation.from_json(implementation),
        )


_MAX_INT_SECONDS = 2 ** 1023   # an int below it converts to a finite float
_RECORD_FIELDS: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("sample_id", lambda v: isinstance(v, str), "a string"),
    ("status", lambda v: v in (OK, FAILED), "'ok' or 'failed'"),
    ("result", lambda v: v is None or isinstance(v, dict), "an object or null"),
    ("error", lambda v: v is None or isinstance(v, str), "a string or null"),
    ("traceback", lambda v: v is None or isinstance(v, str), "a string or null"),
    ("input_hash", lambda v: _is_sha256(v), "a sha256 hex digest"),
    ("seconds", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number"),
)

_TEXT = json.encoder.encode_basestring  # a JSON string as record_bytes writes it (ensure_ascii=False)
_LAYOUT = b'{"record_version":%d,"sample_id":' % RECORD_VERSION   # how the bytes of this version begin
_OK_RESULT = b',"status":"ok","result":'
_RESULT_END = b',"error":null,"traceback":'  # its last occurrence is an ok record's own: a result's keys come before
                                              # it, and no string in a record holds an unescaped quote


def _encoder(encoder: json.JSONEncoder) -> Callable[[Any], str]:
    """``encoder.encode`` with its C encoder made once rather than on every call (``JSONEncoder.iterencode`` makes
    one per call: a quarter of the time of encoding a record), and without the check for circular references (a
    cycle is a RecursionError)."""
    make = json.encoder.c_make_encoder
    if make is None or encoder.indent is not None:
        return encoder.encode
    encode = make(None, encoder.default, json.encoder.encode_basestring_ascii if encoder.ensure_ascii else _TEXT,
                  None, encoder.key_separator, encoder.item_separator, encoder.sort_keys, encoder.skipkeys,
                  encoder.allow_nan)
    return lambda value: "".join(encode(value, 0))


_VALUE = _encoder(json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")))
_IMPLEMENTATIONS: dict[Implementation, str] = {}   # the end of a record's JSON that names it


def _encode_record(record: SampleRecord) -> bytes:
    """``record_bytes(record.to_json())``, assembled from its parts: the JSON of its seconds and result as encoded once
    (``SampleRecord._texts``), the rest joined around them (every record of a run names the same implementation,
    encoded once)."""
    global _NAMED
    implementation = record.implementation
    if implementation is None:
        named = "null}"
    elif implementation is _NAMED[0]:
        named = _NAMED[1]
    else:
        if (named := _IMPLEMENTATIONS.get(implementation)) is None:
            named = _IMPLEMENTATIONS[implementation] = _VALUE(implementation.to_json()) + "}"
        _NAMED = (implementation, named)
    texts = record._texts().decode("utf-8")
    cut = texts.index(" ")
    error, trace = record.error, record.traceback
    return "".join((
        _HEAD, _TEXT(record.sample_id), ',"status":', _TEXT(record.status), ',"result":', texts[cut + 1:],
        _NO_ERROR if error is None and trace is None else
        f',"error":{"null" if error is None else _TEXT(error)},"traceback":{"null" if trace is None else _TEXT(trace)}',
        ',"input_hash":', _TEXT(record.input_hash), ',"seconds":', texts[:cut], ',"implementation":', named,
    )).encode("utf-8")


_HEAD = f'{{"record_version":{RECORD_VERSION},"sample_id":'
_NO_ERROR = ',"error":null,"traceback":null'
_NAMED: tuple[Implementation | None, str] = (None, "")   # the implementation named last: a run's records share one


@dataclass
class RunSummary:
    """What one ``run_samples`` call did. done + reused + failed + missing == total (the tasks of this shard)."""

    n_total: int
    n_done: int  # computed successfully in this run
    n_reused: int  # valid stored results, not recomputed
    n_failed: int  # computed in this run and failed
    n_missing: int = 0  # nothing to compute them from (``NeverComputed``): missing, as the scorecard counts them
    records: dict[str, SampleRecord] = field(default_factory=dict)  # in task order
    recomputed: dict[str, int] = field(default_factory=dict)  # why stored records were not reused, with counts
    n_cached: int = 0  # of the reused, how many came from the sample cache (another run directory's)

    @property
    def ok(self) -> bool:
        return self.n_failed == self.n_missing == 0

    def covers(self, tasks: Sequence[Task]) -> bool:
        """Whether this summary holds a record of every task, in task order (an unsharded run over them)."""
        return len(self.records) == len(tasks) and all(
            task.sample_id == sid for task, sid in zip(tasks, self.records, strict=True))

    @property
    def failed_ids(self) -> list[str]:
        return [sid for sid, rec in self.records.items() if not rec.ok]


# ------------------------------------------------------------------------------------- ids and hashes


def check_sample_id(sample_id: Any, *, secrets: bool = True) -> str:
    """Return the sample id as a string that is safe as a file name, or raise ValueError naming it.

    Ints are accepted and turned into strings; ids may not contain path separators or control
    characters, may not start with "." (rules out "." / ".." and hidden files), are at most
    200 bytes of UTF-8 and hold no secret (``holds_secret``: a token's shape, a secret-named variable's value).
    ``secrets=False`` leaves an ASCII id's secret check to the caller, who makes it once for many (``_task_ids``).
    """
    if (type(sample_id) is str and sample_id.isascii() and _SAFE_ASCII_ID.fullmatch(sample_id) is not None
            and not (secrets and holds_secret(sample_id))):
        return sample_id   # the usual id: its name in one test (an ASCII id has as many bytes as characters)
    if isinstance(sample_id, int) and not isinstance(sample_id, bool):
        sample_id = str(sample_id)
    if not isinstance(sample_id, str):
        raise ValueError(f"sample id {redact(repr(sample_id))} is a {type(sample_id).__name__}, expected a string")
    problem = sample_id_problem(sample_id)
    if problem:
        # redacted: a caller's log or record may keep the message (the CLI redacts what it prints; an API caller not)
        raise ValueError(f"unsafe sample id {redact(repr(sample_id))}: {problem}; ids are used as file names")
    return sample_id


_UNSAFE = re.compile(r"[/\\\x00-\x1f\x7f]")
_SAFE_ASCII_ID = re.compile(rf"[^./\\\x00-\x1f\x7f][^/\\\x00-\x1f\x7f]{{0,{MAX_ID_BYTES - 1}}}")


def sample_id_problem(sample_id: str) -> str | None:
    """Why a string cannot be a sample id (``"is empty"``, ``"is longer than 200 bytes"``, ...), or None."""
    if not sample_id:
        return "is empty"
    if _UNSAFE.search(sample_id):
        if "/" in sample_id or "\\" in sample_id:
            return "contains a path separator"
        return "contains a control character (NUL, newline, ...)"
    if sample_id.startswith("."):
        return "starts with '.'"
    try:
        size = len(sample_id.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not valid UTF-8 (a file name with undecodable bytes)"
    if size > MAX_ID_BYTES:
        return f"is longer than {MAX_ID_BYTES} bytes"
    # an id names files, records and manifests, and is printed: none can redact it. Read with its "__" as the "/" it
    # stands for (``inputs.sample_id``): a token folder's ghp_... glued to "__a" has no token's end, so it was kept
    if holds_secret(sample_id) or "__" in sample_id and holds_secret(sample_id.replace("__", "/")):
        holder = secret_holder(sample_id)
        return f"holds the value of {holder}" if holder else "has the shape of a secret token"
    return None


def input_hash(value: Task | Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of a task's fields (``Task.to_json``), or of a mapping: sorted keys, no
    whitespace, paths as strings."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def canonical_json(value: Any) -> str:
    """The JSON text ``input_hash`` hashes: sorted keys, no whitespace, paths as strings; TypeError when ``value``
    is not JSON-serialisable."""
    try:
        return _CANONICAL(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise TypeError(f"task is not JSON-serialisable, cannot hash it: {exc}") from exc


def _hash_task(sample_id: str, task: Task) -> str:
    try:
        return input_hash(task)
    except TypeError as exc:
        raise TypeError(f"sample {sample_id!r}: {exc}") from None


def _plain(value: Any) -> Any:
    """A path as its string, a task as its ``to_json``, another dataclass (a task's typed field) as its fields."""
    convert = _PLAIN.get(type(value))
    if convert is None:   # a kind not seen before (a task holds one value of a few kinds per sample)
        convert = _PLAIN[type(value)] = _converter(type(value))
    return convert(value)


def _converter(kind: type) -> Callable[[Any], Any]:
    """How ``_plain`` turns a value of this type into JSON (TypeError when it cannot)."""
    if issubclass(kind, os.PathLike):
        return os.fspath
    if issubclass(kind, Task):
        return kind.to_json
    if is_dataclass(kind):
        names = tuple(f.name for f in fields(kind))
        return lambda value: {name: getattr(value, name) for name in names}
    raise TypeError(f"value of type {kind.__name__} is not JSON-serialisable")


_PLAIN: dict[type, Callable[[Any], Any]] = {}   # by type: ``fields`` and the ABC checks cost more than the encoding


_CANONICAL = _encoder(json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                      default=_plain))
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _is_sha256(value: Any) -> bool:
    return isinstance(value, str) and _SHA256.fullmatch(value) is not None


def _task_ids(tasks: Sequence[Task]) -> list[str]:
    """Validated ids of all tasks, in order; ValueError on a missing, unsafe or duplicate id."""
    ids: list[str] = []
    first_pos: dict[str, int] = {}
    for pos, task in enumerate(tasks):
        if not isinstance(task, Task):
            raise TypeError(f"task at position {pos} is a {type(task).__name__}, expected a pinbench.core.task.Task")
        sid = check_sample_id(task.sample_id, secrets=False)
        if sid in first_pos:
            raise ValueError(f"duplicate sample id {sid!r} at positions {first_pos[sid]} and {pos}")
        first_pos[sid] = pos
        ids.append(sid)
    if holds_secret("\n".join(ids)):   # one scan of all: an id at a time cost 1.2 us (0.14 s at 112,220 ids)
        for sid in ids:
            check_sample_id(sid)   # the first id that holds one, named
    return ids


# ------------------------------------------------------------------------------------ result handling


def _json_clean(value: Any, where: str) -> Any:
    """A JSON-ready copy of a result: NaN/inf -> None, tuples -> lists, numpy/torch values via tolist()."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                raise TypeError(f"{where} has a key {key!r} of type {type(key).__name__}, expected str")
        return {key: _json_clean(value[key], f"{where}[{key!r}]") for key in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [_json_clean(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if callable(getattr(value, "tolist", None)):  # numpy arrays and scalars, torch tensors
        return _json_clean(value.tolist(), where)
    raise TypeError(f"{where} is a {type(value).__name__}, which is not JSON-serialisable")


def clean_result(result: Any) -> dict:
    """A result as stored: JSON-ready, non-finite floats as None, every object's keys in sorted order (so that its
    JSON is the canonical one: ``pinbench.core.derived`` hashes it as it is stored); TypeError for a non-dict or
    unstorable value."""
    if type(result) is dict:
        try:
            return _plain_dict(result)
        except _NotPlain:
            pass
    if not isinstance(result, Mapping):
        raise TypeError(f"result is a {type(result).__name__}, expected a dict")
    return _json_clean(result, "result")


class _NotPlain(Exception):
    """A value ``_plain_dict`` leaves to ``_json_clean``: not a dict, list, str, int, float, bool or None."""


def _plain_dict(value: dict) -> dict:
    """``_json_clean`` of a dict of plain JSON types (the usual result), by exact type and without the path it
    builds for its messages: 4x faster. _NotPlain for anything else (a tuple, a numpy value, a key not a str)."""
    clean = {}
    try:
        keys = sorted(value) if len(value) > 1 else value
    except TypeError:   # keys of several types: _json_clean names the one that is not a str
        raise _NotPlain from None
    for key in keys:
        if type(key) is not str:
            raise _NotPlain
        item = value[key]
        kind = type(item)
        if kind is float:
            clean[key] = item if item - item == 0.0 else None   # inf - inf and nan - nan are nan
        elif kind is str or kind is int or kind is bool or item is None:
            clean[key] = item
        elif kind is dict:
            clean[key] = _plain_dict(item)
        elif kind is list:
            clean[key] = _plain_list(item)
        else:
            raise _NotPlain
    return clean


def _plain_list(value: list) -> list:
    clean = []
    for item in value:
        kind = type(item)
        if kind is float:
            clean.append(item if item - item == 0.0 else None)
        elif kind is str or kind is int or kind is bool or item is None:
            clean.append(item)
        elif kind is dict:
            clean.append(_plain_dict(item))
        elif kind is list:
            clean.append(_plain_list(item))
        else:
            raise _NotPlain
    return clean


def _is_dict(result: dict) -> bool:
    return isinstance(result, dict)


class SampleFailed(Exception):
    """Raised by a per-sample function for a failure its message says all of (the sample has no Script 1 output, its
    input is absent): the record keeps "ExcType: message" and no traceback.

    Why: formatting a traceback costs about 0.3 ms, more than scoring a sample, and a partial score set fails most
    of its samples this way (10,096 of a 10 % CameraBench run); any other exception keeps its traceback."""


class Reason(SampleFailed):
    """A ``SampleFailed`` whose message is the whole reason, said as it is: the record keeps no class name before it
    (``NotGenerated: ...`` or ``ValueError: invalid rollout: ...`` told the reader a Python name, not what happened)."""


class NeverComputed(SampleFailed):
    """Raised by a per-sample function for a sample there is nothing to compute from (no run generated its rollout),
    the message saying why: its record is the one ``stand_in`` makes, so the store alone says it counts missing
    (``pinbench status`` of a run in flight), as the scorecard counts it, not failed."""


class Stale(ValueError):
    """Raised by a validator: this stored result may not be reused, for the reason given (the summary says it)."""


def _passes(validate: Validator, result: dict) -> tuple[bool, str]:
    """(accepted, reason); a validator that raises rejects the result."""
    try:
        return bool(validate(result)), "validate() returned False"
    except Stale as exc:
        return False, str(exc)
    except Exception as exc:  # a broken validator must not crash the run
        return False, f"validate() raised {error_line(exc)}"


def error_line(exc: BaseException) -> str:
    """``"ExcType: message"`` (a ``Reason``'s message alone) on one line (message newlines become spaces, long
    messages are cut)."""
    message = str(exc)
    if isinstance(exc, NeverComputed):
        return one_line(missing_error([message]))
    if isinstance(exc, Reason):
        return one_line(message)
    return one_line(f"{type(exc).__name__}: {message}" if message.strip() else type(exc).__name__)


def one_line(text: str) -> str:
    """``text`` with secrets redacted, whitespace runs (newlines too) as one space, cut to the stored length."""
    return clipped(" ".join(redact(text).split()), _MAX_ERROR_CHARS)


# -------------------------------------------------------------------------------------------- storage


def _as_record(stored: Stored) -> SampleRecord | None:
    try:
        return SampleRecord.from_stored(stored)
    except ValueError:
        return None


@dataclass(frozen=True)
class _Judgement:
    """What the store holds for one task: the record to reuse, else the newest failed one and why not reused."""

    reusable: SampleRecord | None
    failed: SampleRecord | None
    reason: str  # "" when reusable; "new" when nothing is stored; else the newest record's reason
    refused: str = ""  # why the validator refused an ok record of these inputs and code ("generator changed")


def _judge(candidates: Sequence[Stored], task_hash: str, implementation: Implementation | None,
           validate: Validator) -> _Judgement:
    """Walk a task's stored records, newest first: the first ok record of this input and implementation that
    validates."""
    if not candidates:
        return _NEW
    reason, failed, refused = "new", None, ""
    for stored in candidates:
        record = _as_record(stored)
        if record is None:
            why = "unreadable record"
        elif record.input_hash != task_hash:
            why = "inputs or options changed"
        elif implementation is not None and (change := implementation.change_from(record.implementation)) is not None:
            why = change
        elif not record.ok:
            why = "failed before"
            failed = failed or record
        elif not (passed := _passes(validate, record.result))[0]:
            why = passed[1]
            refused = refused or why
        else:
            return _Judgement(record, failed, "")
        if reason == "new":
            reason = why
    return _Judgement(None, failed, reason, refused)


_NEW = _Judgement(None, None, "new")   # a task nothing is stored for (every task of a fresh run)
UNREAD = "its stored record was damaged or contradicted"


def _settled(samples_dir: Path, own: str, every_log: bool, console: Console | Lines, label: str
             ) -> tuple[StoreContents, set[str]]:
    """The store as a writer finds it once it has moved aside what no run reads (``pinbench.core.store.settle``:
    from its own log; from every log when ``every_log``), each move and each line it had to leave (another
    writer's) said on ``console``; and the samples whose records were not read."""
    contents = read_store(samples_dir, own=own)
    unread = {u.sample_id for u in contents.unread if u.sample_id is not None and (not u.torn or u.log.name == own)}
    said = [f"{label}: {line}" for line in settle(samples_dir, contents, own=own, every_log=every_log)]
    if said:
        contents = read_store(samples_dir, own=own)
    said += [f"{label}: not read: {problem}" for problem in contents.problems]
    for line in said[:5]:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    if len(said) > 5:
        console.print(f"{label}: ... and {len(said) - 5} more store lines not read", markup=False, highlight=False)
    return contents, unread


def load_records(out_dir: Path | str) -> dict[str, SampleRecord]:
    """The newest readable record of every sample in ``out_dir``'s store, by sample id (sorted)."""
    contents = read_store(Path(out_dir) / SAMPLES_DIR)
    records = {}
    for sid in sorted(contents.records):
        record = next((r for r in map(_as_record, contents.records[sid]) if r is not None), None)
        if record is not None:
            records[sid] = record
    return records


@dataclass(frozen=True)
class Pending:
    """What is still to compute: ``mine``, the tasks of this shard without a reusable record, stored or in the
    sample cache (what ``run_samples`` would compute); ``stored``, this shard's tasks with a stored one; ``cached``,
    those whose record only the sample cache holds (held by it for ``run_samples``); ``unscored``, the input
    hash of every task of any shard without either, by id; ``kept``, the reusable stored record of each of
    ``stored``, by id (``Run.store`` takes it for a task it did not send the external tool)."""

    mine: list[Task]
    stored: list[Task]
    unscored: dict[str, str]
    cached: list[Task] = field(default_factory=list)
    kept: dict[str, SampleRecord] = field(default_factory=dict)


def pending_tasks(out_dir: Path | str, tasks: Sequence[Task], *, shard: Shard | None = None,
                  implementation: Implementation | None = None, validate: Validator | None = None,
                  cache: SampleCache | None = None) -> Pending:
    """The tasks without a reusable stored record, this shard's and every shard's (one read of the store). With
    ``cache``, a task whose record the sample cache holds (another run directory's, of the same key) is not
    pending: an external tool (MIND's process.py, hours) computed every sample of a new run directory again."""
    ids = _task_ids(tasks)
    contents = read_store(Path(out_dir) / SAMPLES_DIR)
    validate = validate or _is_dict
    unscored, cached, kept = {}, set(), {}
    owned = range(len(tasks)) if shard is None else shard.select(range(len(tasks)))
    mine = set(owned)
    for pos, (sid, task) in enumerate(zip(ids, tasks, strict=True)):
        task_hash = _hash_task(sid, task)
        reusable = _judge(contents.records.get(sid, []), task_hash, implementation, validate).reusable
        if reusable is not None:
            if pos in mine:
                kept[sid] = reusable
        else:
            found = None if cache is None else cache.record_of(sid, task_hash, hold=pos in mine)
            if found is not None and _judge([found], task_hash, implementation, validate).reusable is not None:
                cached.add(sid)
            else:
                unscored[sid] = task_hash
    return Pending([tasks[pos] for pos in owned if ids[pos] in unscored],
                   [tasks[pos] for pos in owned if ids[pos] not in unscored and ids[pos] not in cached],
                   unscored, [tasks[pos] for pos in owned if ids[pos] in cached], kept)


# ------------------------------------------------------------------------------------------- running


def run_samples(
    tasks: Sequence[Task],
    fn: SampleFn,
    out_dir: Path | str,
    *,
    validate: Validator | None = None,
    shard: Shard | None = None,
    implementation: Implementation | None = None,
    progress: bool = True,
    step: str = "score",
    batch_size: int = 1,
    batch_fn: BatchFn | None = None,
    console: Console | None = None,
    cache: SampleCache | None = None,
) -> RunSummary:
    """Run ``fn`` over the tasks of ``shard`` (all tasks if None), resuming from the store in ``out_dir/samples``.

    A stored sample is reused only if its record is "ok", its input_hash equals the hash of the task
    fields, it was computed by ``implementation`` (when given: a recipe run always gives its
    ``cfg.implementation``) and ``validate(result)`` holds (default: the result is a dict); everything else,
    failed samples included, is computed again, and the summary counts why. An ``Exception`` from ``fn``
    fails only its own sample (recorded as "ExcType: message" plus traceback); KeyboardInterrupt and
    SystemExit propagate.
    Samples run sequentially in task order. With ``batch_fn``, pending tasks go to it
    ``batch_size`` at a time (it returns one result per task, in order); if a batch raises, its tasks
    are retried one by one with ``fn`` so a bad sample stays isolated. A batch's seconds are split
    evenly over its samples. The progress bar (on ``console``, default stderr; terminals only) is
    labelled ``step`` and counts done / reused / failed. With ``cache`` (``pinbench.core.sample_cache``), a task
    without a reusable record here takes the one another run directory computed from the same inputs and code
    (stored here too, counted as reused), and what this call computes is offered to the cache. Before anything
    is computed, what no run reads is moved out of the store (``pinbench.core.store.settle``): from this writer's
    own log, and, unsharded, from every log, so an unsharded call must be the folder's only writer (a run's claim
    of its directory, ``pinbench.core.rundir``, makes it so).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if batch_size > 1 and batch_fn is None:
        raise ValueError("batch_size > 1 needs a batch_fn")
    validate = validate or _is_dict
    ids = _task_ids(tasks)
    positions: Sequence[int] = range(len(tasks))   # not a list: 112k int objects at 10x
    if shard is not None:
        positions = shard.select(positions)
    samples_dir = Path(out_dir) / SAMPLES_DIR
    # The manifest names every task and this call's share of them, for `pinbench status`.
    hashes = [_hash_task(sid, task) for sid, task in zip(ids, tasks, strict=True)]
    manifest = {"out_dir": Path(out_dir), "index": shard.index if shard else 0, "count": shard.count if shard else 1,
                "step": step, "sample_ids": ids, "input_hashes": hashes, "started": _now()}
    write_manifest(**manifest)
    label = step if shard is None else f"{step} [shard {shard}]"
    if console is None:
        console = stderr_console()
    own_log = log_name(shard)
    contents, unread = _settled(samples_dir, own_log, shard is None, console, label)

    records: dict[str, SampleRecord | None] = {}
    pending: list[tuple[str, Task, str]] = []
    refused: dict[str, str] = {}
    recomputed: dict[str, int] = {}
    cached: list[SampleRecord] = []
    replaced: list[tuple[str, Task, str]] = []   # the pending tasks and those taken from the cache: a new record each
    for pos in positions:
        sid, task, task_hash = ids[pos], tasks[pos], hashes[pos]
        judged = _judge(contents.records.get(sid, []), task_hash, implementation, validate)
        records[sid] = judged.reusable  # None keeps task order; filled in below
        if judged.reusable is None and judged.refused:
            refused[sid] = judged.refused
        if judged.reusable is None and cache is not None:
            found = cache.record_of(sid, task_hash)
            taken = None if found is None else _judge([found], task_hash, implementation, validate)
            if taken is not None and taken.reusable is not None:
                records[sid] = _as_record(found)
                cached.append(records[sid])
                replaced.append((sid, task, task_hash))
                continue
            if taken is not None:
                cache.refused(task_hash, taken.reason)
        if judged.reusable is None:
            pending.append((sid, task, task_hash))
            replaced.append((sid, task, task_hash))
            reason = UNREAD if judged.reason == "new" and sid in unread else judged.reason
            if reason != "new":
                recomputed[reason] = recomputed.get(reason, 0) + 1

    _replace_refused(samples_dir, contents, replaced, refused, implementation, own=own_log, every_log=shard is None,
                     label=label)
    n_reused = len(records) - len(pending)
    counts = {"done": 0, "failed": 0}   # and "missing" once a stand-in is stored: the bar shows it only then
    started = time.perf_counter()
    plain = progress and not console.is_terminal  # CI and container logs: a line every 30 s instead of a bar
    shown = Progress(label, len(pending), unit="computed", counters=("done", "reused", "failed"), console=console,
                     every_s=PLAIN_PROGRESS_SECONDS, enabled=progress, final_line=False)
    shown.counters["reused"] = n_reused
    release_free_memory()   # what reading the inputs freed: the records below never reuse it (pinbench.core.memory)
    # Opened only when there is something to store: a run that reuses everything it holds writes nothing.
    with LogWriter(samples_dir, own_log) if pending or cached else contextlib.nullcontext() as store, shown:
        if cached:   # kept here too: the run directory holds every record it is computed from
            store.append_all([record.to_bytes() for record in cached])
        shown_at = time.monotonic()
        for record, task_hash in _computed(pending, fn, batch_fn, batch_size, validate, implementation):
            record._digest = store.append(record.to_bytes())   # stored before the next starts: a kill keeps it
            if cache is not None and record.ok and record.seconds >= cache.min_seconds:
                cache.put(task_hash, record.to_bytes())
            records[record.sample_id] = record
            outcome = "done" if record.ok else "missing" if is_stand_in(record) else "failed"
            counts[outcome] = counts.get(outcome, 0) + 1
            if time.monotonic() - shown_at >= _SHOWN_S:   # the bar moves 20 times a second at most
                shown.update(sum(counts.values()), **counts)
                shown_at = time.monotonic()
        shown.update(sum(counts.values()), **counts)

    from_cache = f" ({len(cached)} from the sample cache)" if cached else ""
    n_missing = counts.pop("missing", 0)
    summary = (f"{label}: {counted(len(records), 'sample')}: {counts['done']} done, {n_reused} reused{from_cache}, "
               f"{lost_text(counts['failed'], n_missing)} in {time.perf_counter() - started:.1f}s")
    if recomputed:
        summary += f"; {recomputed_text(recomputed)}"
    if plain or (progress and (recomputed or cached)):
        console.print(summary, markup=False, highlight=False, soft_wrap=True)
    log.info(summary)
    final = cast(dict[str, SampleRecord], records)   # every placeholder filled by now (no copy: 112k entries at 10x)
    write_manifest(**manifest, summary={"total": len(final), "done": counts["done"], "reused": n_reused,
                                        "failed": counts["failed"], **({"missing": n_missing} if n_missing else {})})
    return RunSummary(
        n_total=len(final),
        n_done=counts["done"],
        n_reused=n_reused,
        n_failed=counts["failed"],
        n_missing=n_missing,
        records=final,
        recomputed=recomputed,
        n_cached=len(cached),
    )


def lost_text(n_failed: int, n_missing: int) -> str:
    """``"3 failed"``, ``"3 missing (no run generated their rollouts)"`` or both: a step's samples not computed.

    Why: a sample with nothing to compute from (``NeverComputed``) counts missing in the scorecard, ``pinbench
    check`` and ``pinbench status``; the step's own line must not call it failed."""
    missing = f"{n_missing} missing (no run generated their rollouts)" if n_missing else ""
    return ", ".join(part for part in (f"{n_failed} failed" if n_failed or not n_missing else "", missing) if part)


def recomputed_text(recomputed: Mapping[str, int]) -> str:
    """``"12 recomputed: code changed; 3 recomputed: failed before"``, largest count first."""
    return "; ".join(f"{n} recomputed: {why}" for why, n in sorted(recomputed.items(), key=lambda kv: (-kv[1], kv[0])))


class StepLog:
    """The records of a step whose work runs outside ``run_samples``, in batches the caller launches.

    Why: some results come from a tool that ``run_samples`` cannot drive sample by sample (PAI-Bench-C's pinned
    evaluator, run once per modality over every video; ``pinbench.core.run.Run.store`` records such results through
    here); ``pinbench status`` still needs its shards' done / failed / pending counts. Like ``run_samples`` it
    writes the shard manifest when it starts (every task, with input hashes) and completes it with the counts in
    ``close``, and the caller stores each sample's outcome with ``record`` as soon as it is known. A process that
    dies leaves the manifest unfinished and the samples it had not recorded pending.
    """

    def __init__(self, tasks: Sequence[Task], out_dir: Path | str, *, step: str, shard: Shard | None = None,
                 implementation: Implementation | None = None) -> None:
        ids = _task_ids(tasks)
        self.samples_dir = Path(out_dir) / SAMPLES_DIR
        self._log = log_name(shard)
        self._label = step if shard is None else f"{step} [shard {shard}]"
        self._unsharded = shard is None
        self._implementation = implementation
        self._hashes = {sid: _hash_task(sid, task) for sid, task in zip(ids, tasks, strict=True)}
        index, count = (shard.index, shard.count) if shard else (0, 1)
        self.mine: list[Task] = shard.select(tasks) if shard else list(tasks)
        self._mine = {task.sample_id for task in self.mine}
        self._manifest = {"out_dir": Path(out_dir), "index": index, "count": count, "step": step,
                          "sample_ids": ids, "input_hashes": list(self._hashes.values()), "started": _now()}
        write_manifest(**self._manifest)
        self.records: dict[str, SampleRecord] = {}
        self._reused: set[str] = set()
        self._store: StoreContents | None = None

    def record(self, sample_id: str, result: Mapping[str, Any] | None, *, error: str | None = None,
               seconds: float = 0.0, reused: bool = False) -> SampleRecord:
        """Store one of this shard's samples: ok with ``result``, or failed with ``error`` (exactly one of them)."""
        if sample_id not in self._mine:
            raise ValueError(f"sample {sample_id!r} is not one of this shard's tasks")
        if (result is None) == (error is None):
            raise ValueError(f"sample {sample_id!r}: give a result or an error, not both or neither")
        task_hash = self._hashes[sample_id]
        contents = self._contents()  # settled before the first record is appended
        if error is not None:
            record = SampleRecord(sample_id, FAILED, None, one_line(error) or "failed", task_hash, seconds,
                                  implementation=self._implementation)
        else:
            record = _finish(sample_id, task_hash, result, seconds, _is_dict, self._implementation)
        stored = contents.newest(sample_id) if reused and record.ok else None
        kept = _as_record(stored) if stored is not None else None
        if kept is not None and _same_outcome(kept, record):
            record = kept   # the stored record stands (with its own timing): a rerun appends nothing
        else:
            self._supersede(record, contents)
            with LogWriter(self.samples_dir, self._log) as store:  # a handful of records per launch: one open each
                store.append(record.to_bytes())
        self.records[sample_id] = record
        (self._reused.add if reused and record.ok else self._reused.discard)(sample_id)
        return record

    def keep(self, record: SampleRecord) -> None:
        """Take the stored record of one of this shard's samples as it stands (``Pending.kept``: the external tool
        was not sent that sample); nothing is appended."""
        if record.sample_id not in self._mine:
            raise ValueError(f"sample {record.sample_id!r} is not one of this shard's tasks")
        self.records[record.sample_id] = record
        self._reused.add(record.sample_id)

    def _supersede(self, record: SampleRecord, contents: StoreContents) -> None:
        """Move aside the stored records a new ok one replaces (the same inputs and code, another result: a video
        generated again), so the store never holds two records that contradict each other (``read_store`` would
        read neither)."""
        replaced = [Unread(s.log, s.line, f"{s.where}: replaced by a new record of sample {record.sample_id!r} of the "
                                          "same inputs and code", record.sample_id, SUPERSEDED)
                    for s in _same_task(contents, record.sample_id, record.input_hash, record.implementation)
                    if record.ok and s.data.get("result") != record.result]
        if replaced:
            for line in move_aside(self.samples_dir, contents, replaced, own=self._log, every_log=self._unsharded):
                print(f"{self._label}: {line}", file=sys.stderr, flush=True)
            self._store = None  # the logs were rewritten: read again when next needed

    def _contents(self) -> StoreContents:
        """The store, read once (and settled: ``_settled``) before this log first reads or writes it."""
        if self._store is None:
            self._store = _settled(self.samples_dir, self._log, self._unsharded, stderr_console(), self._label)[0]
        return self._store

    def close(self) -> RunSummary:
        """Complete the manifest with the counts; ValueError when a sample of this shard was never recorded."""
        unrecorded = sorted(self._mine - self.records.keys())
        if unrecorded:
            raise ValueError(f"{counted(len(unrecorded), 'sample')} of this shard never recorded "
                             f"(e.g. {unrecorded[0]!r})")
        missing = sum(is_stand_in(r) for r in self.records.values())
        failed = sum(not r.ok for r in self.records.values()) - missing
        reused = len(self._reused)
        done = len(self.records) - failed - missing - reused
        write_manifest(**self._manifest, summary={"total": len(self.records), "done": done, "reused": reused,
                                                  "failed": failed, **({"missing": missing} if missing else {})})
        return RunSummary(n_total=len(self.records), n_done=done, n_reused=reused, n_failed=failed,
                          n_missing=missing, records=dict(self.records))


def _same_task(contents: StoreContents, sample_id: str, input_hash: str,
               implementation: Implementation | None) -> list[Stored]:
    """The ok records of a sample stored in a log for these inputs and this code: the ones a new record of them
    would contradict unless its result is theirs."""
    code = implementation.to_json() if implementation is not None else None
    return [s for s in contents.records.get(sample_id, []) if s.log is not None and s.data.get("status") == OK
            and s.data.get("input_hash") == input_hash and s.data.get("implementation") == code]


def _replace_refused(samples_dir: Path, contents: StoreContents, pending: Sequence[tuple[str, Task, str]],
                     why: Mapping[str, str], implementation: Implementation | None, *, own: str, every_log: bool,
                     label: str) -> None:
    """Move aside, before a pending task is computed again or its record taken from the sample cache (generator A,
    B, then A again: A's rollouts come back from it), the ok records of its inputs and code that were not
    reused (the validator refused them: a generator changed, a rollout file changed), said on stderr with ``why``
    (by sample; before, the line said only "of the same inputs and code", as if nothing had changed): the new
    record replaces them on purpose, and beside them it would be a contradiction that leaves both unread
    (``pinbench.core.store.contradictions``). Unsharded, from every log; a shard, from its own."""
    refused = [Unread(s.log, s.line, f"{s.where}: not reused ({why.get(sid, 'unreadable record')}), replaced by a "
                                     f"new record of sample {sid!r}", sid, SUPERSEDED)
               for sid, _, task_hash in pending for s in _same_task(contents, sid, task_hash, implementation)]
    said = [f"{label}: {line}" for line in move_aside(samples_dir, contents, refused, own=own, every_log=every_log)]
    for line in said[:5]:
        print(line, file=sys.stderr, flush=True)
    if len(said) > 5:
        print(f"{label}: ... and {len(said) - 5} more replaced records moved aside", file=sys.stderr, flush=True)


def _same_outcome(stored: SampleRecord, new: SampleRecord) -> bool:
    """Whether a stored record says what a new one would, but its timing: the same inputs, code and outcome."""
    return (stored.sample_id, stored.status, stored.result, stored.error, stored.input_hash,
            stored.implementation) == (new.sample_id, new.status, new.result, new.error, new.input_hash,
                                       new.implementation)


def _computed(pending: list[tuple[str, Task, str]], fn: SampleFn, batch_fn: BatchFn | None, batch_size: int,
              validate: Validator, implementation: Implementation | None) -> Iterator[tuple[SampleRecord, str]]:
    """Each pending task's record as it is computed, with the task's input hash: one by one, or ``batch_size`` at
    a time through ``batch_fn``."""
    if batch_fn is None:
        for sid, task, task_hash in pending:
            yield _compute_one(sid, task, task_hash, fn, validate, implementation), task_hash
        return
    for start in range(0, len(pending), batch_size):
        chunk = pending[start:start + batch_size]
        yield from zip(_compute(chunk, fn, batch_fn, validate, implementation), [h for _, _, h in chunk], strict=True)


def _compute(chunk: list[tuple[str, Task, str]], fn: SampleFn, batch_fn: BatchFn | None, validate: Validator,
             implementation: Implementation | None) -> list[SampleRecord]:
    """Records for one chunk of pending tasks: batched if possible, else (or on failure) one by one."""
    if batch_fn is not None:
        started = time.perf_counter()
        try:
            results = list(batch_fn([task for _, task, _ in chunk]))
            if len(results) != len(chunk):
                raise ValueError(f"batch_fn returned {len(results)} results for {len(chunk)} tasks")
        except Exception as exc:  # retried per sample below, so a bad sample stays isolated
            log.warning(
                "batch of %d samples (%s, ...) failed with %s; retrying one by one",
                len(chunk), chunk[0][0], error_line(exc),
            )
        else:
            seconds = (time.perf_counter() - started) / len(chunk)
            return [
                _finish(sid, task_hash, result, seconds, validate, implementation)
                for (sid, _, task_hash), result in zip(chunk, results, strict=True)
            ]
    return [_compute_one(sid, task, task_hash, fn, validate, implementation) for sid, task, task_hash in chunk]


def _compute_one(sid: str, task: Task, task_hash: str, fn: SampleFn, validate: Validator,
                 implementation: Implementation | None) -> SampleRecord:
    started = time.perf_counter()
    try:
        result = fn(task)
    except SampleFailed as exc:  # its message says it all: no traceback
        return SampleRecord(sid, FAILED, None, error_line(exc), task_hash, time.perf_counter() - started,
                            implementation=implementation)
    except Exception as exc:  # failure isolation is the point; BaseException propagates
        return SampleRecord(
            sid, FAILED, None, error_line(exc), task_hash, time.perf_counter() - started,
            redact(traceback.format_exc()), implementation=implementation,
        )
    return _finish(sid, task_hash, result, time.perf_counter() - started, validate, implementation)


def _finish(sid: str, task_hash: str, result: Any, seconds: float, validate: Validator,
            implementation: Implementation | None) -> SampleRecord:
    """An ok record for a JSON-clean, validated result, else a failed one saying why."""
    try:
        clean = clean_result(result)
    except TypeError as exc:
        return SampleRecord(sid, FAILED, None, error_line(exc), task_hash, seconds, implementation=implementation)
    accepted, reason = _passes(validate, clean)
    if not accepted:
        return SampleRecord(sid, FAILED, None, f"ValueError: result rejected: {reason}", task_hash, seconds,
                            implementation=implementation)
    record = SampleRecord(sid, OK, clean, None, task_hash, seconds, implementation=implementation)
    record._canonical = True
    return record


# ------------------------------------------------------------------------------------------- merging


@announced(lambda out_dirs, tasks, **kw: f"samples: collecting the records of {counted(len(tasks), 'task')}")
def merge_samples(
    out_dirs: Sequence[Path | str],
    tasks: Sequence[Task],
    *,
    dest: Path | str | None = None,
    validate: Validator | None = None,
    implementation: Implementation | None = None,
) -> list[SampleRecord]:
    """Every task's record from the stores of ``out_dirs`` (all their shards' logs), in task order.

    For each task the first directory (in the given order) holding a reusable record (ok, same input_hash
    and implementation, passes ``validate``) wins; failing that, the newest failed record of the same input and
    implementation. A task with neither gets a failed record whose error starts with "missing: no result from any
    shard" and says what was stored instead, so the list always has exactly one record per task. With
    ``dest``, the records are also written there as JSONL (one ``SampleRecord.to_bytes()`` per line).
    """
    validate = validate or _is_dict
    ids = _task_ids(tasks)
    stores = [(Path(d) / SAMPLES_DIR, read_store(Path(d) / SAMPLES_DIR)) for d in out_dirs]
    merged = [_pick(sid, _hash_task(sid, task), stores, validate, implementation)
              for sid, task in zip(ids, tasks, strict=True)]
    if dest is not None:
        write_records(merged, Path(dest))
    return merged


def write_records(records: Sequence[SampleRecord], path: Path) -> Path:
    """Records as JSONL, one record's bytes per line (the bytes their stored digests cover), written atomically
    as they come (no joined copy of them all)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as out:
        for record in records:
            out.write(record.to_bytes())
            out.write(b"\n")
    return path


def holds_records(path: Path, records: Sequence[SampleRecord]) -> bool:
    """Whether ``path`` is a regular file holding exactly what ``write_records`` would write there (compared a
    record at a time: no copy of them all)."""
    try:
        if not S_ISREG(path.lstat().st_mode):
            return False
        with open(path, "rb") as held:
            for record in records:
                body = record.to_bytes()
                if held.read(len(body)) != body or held.read(1) != b"\n":
                    return False
            return held.read(1) == b""
    except OSError:
        return False


def _pick(sid: str, task_hash: str, stores: Sequence[tuple[Path, StoreContents]], validate: Validator,
          implementation: Implementation | None) -> SampleRecord:
    failed: SampleRecord | None = None
    reasons: list[str] = []
    for samples_dir, contents in stores:
        candidates = contents.records.get(sid, [])
        judged = _judge(candidates, task_hash, implementation, validate)
        if judged.reusable is not None:
            return judged.reusable
        failed = failed or judged.failed
        if judged.reason not in ("new", "failed before"):
            reasons.append(f"{samples_dir}: stored record not used ({judged.reason})")
        reasons += contents.problems_of.get(sid, [])
    if failed is not None:
        return failed
    return stand_in(sid, task_hash, implementation, reasons)


def stand_in(sample_id: str, input_hash: str, implementation: Implementation | None,
             reasons: Sequence[str] = ()) -> SampleRecord:
    """The record of a sample never computed (no shard stored it, no run generated its rollout): failed, its error
    ``MISSING_ERROR`` and why, so that it counts missing (``is_stand_in``) while it keeps its
    place in samples.jsonl."""
    return SampleRecord(sample_id, FAILED, None, missing_error(reasons), input_hash, 0.0,
                        implementation=implementation)


def is_stand_in(record: SampleRecord | Mapping[str, Any]) -> bool:
    """Whether a sample record (object or JSON) is a stand-in (``stand_in``, the merge's for a task no shard stored,
    a step's for a sample no run generated): failed, no result, its error ``MISSING_ERROR`` (the one text every
    counter reads).

    Why: such a sample was never computed, so it counts missing, never failed; the stand-in still stays in
    samples.jsonl, where derived records (CameraBench's splits) name their members."""
    if not isinstance(record, SampleRecord) and isinstance(record, Mapping):   # a Mapping check is the slow one
        status, result, error = record.get("status"), record.get("result"), record.get("error")
    else:
        status, result, error = record.status, record.result, record.error
    return status == FAILED and result is None and isinstance(error, str) and error.startswith(MISSING_ERROR)


def missing_error(reasons: Sequence[str]) -> str:
    """A stand-in's error: ``MISSING_ERROR`` and why, the text ``is_stand_in`` reads."""
    return MISSING_ERROR + (f" ({'; '.join(reasons)})" if reasons else "")


def read_merged(path: Path | str) -> list[SampleRecord]:
    """Read a JSONL file written by ``merge_samples`` / ``write_records``; ValueError names the file and line."""
    return read_finite_jsonl(path, SampleRecord.from_json, "sample record")


def parse_merged(data: bytes, path: Path | str) -> list[SampleRecord]:
    """``read_merged`` of the bytes already read from ``path``; each record keeps the bytes of its line as its own
    (``to_bytes``: never encoded again) when they are of this record version. UnicodeDecodeError for bytes that are
    not UTF-8."""
    records = parse_finite_jsonl(data.decode("utf-8"), Path(path), SampleRecord.from_json, "sample record")
    # parse_finite_jsonl ends lines at \n, \r\n and \r only, as bytes.splitlines() does, and skips blank ones
    for record, line in zip(records, [line for line in data.splitlines() if line.strip()], strict=True):
        if line.startswith(_LAYOUT):
            record._bytes = line
    return records
