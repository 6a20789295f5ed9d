"""Derived records: numbers computed from many samples at finish time, kept apart so they never count as one.

Why: a split's average precision or WorldFoundry's composite is computed from the per-sample records; stored
as a sample itself it inflated the run's sample count (MIND's 250 samples were counted as 251) and its
denominators. A derived record is computed by the run that writes the scorecard (an unsharded run, the merge
of a sharded one) from the merged per-sample records it aggregates, and is written beside ``samples.jsonl``
in ``derived.jsonl``. It names its members, the samples it was computed from, with a digest of their records,
so ``pinbench check`` can tell it describes exactly the records of ``samples.jsonl``.

The scorecard counts samples in ``samples`` and derived records in ``derived``; a metric read from derived
records says so (``"records": "derived"``) and its counts are of those records, never of samples.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pinbench.core.files import atomic_path, read_finite_jsonl
from pinbench.core.jsonfields import COUNT, TEXT, JsonBlock, one_of, spec
from pinbench.core.runner import SampleRecord, canonical_json, check_sample_id, clean_result, one_line

_TEXT = json.encoder.encode_basestring  # a JSON string as canonical_json writes it (ensure_ascii=False)

DERIVED_PATH = "derived.jsonl"
DERIVED_VERSION = 1
OK, FAILED = "ok", "failed"


class DerivedFailure(Exception):
    """The derived value does not exist for these members (say why in one line: it is stored as the error)."""


@dataclass(frozen=True, kw_only=True)
class DerivedRecord(JsonBlock, where="$"):
    """One derived value set: its result (None exactly when failed), and the samples it was computed from. Its
    JSON form also says its format's version and how many members it names (``n_members``)."""

    derived_version: int = field(init=False, default=DERIVED_VERSION)
    derived_id: str = spec(TEXT)
    status: str = spec(one_of(OK, FAILED))
    result: dict[str, Any] | None
    error: str | None
    n_members: int = field(init=False)
    n_members_ok: int = spec(COUNT)
    members_hash: str = spec((lambda v: isinstance(v, str) and len(v) == 64, "a sha256 hex digest"))
    members: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_members", len(self.members))
        if (self.status == OK) != (self.result is not None) or (self.status == FAILED) != bool(self.error):
            raise ValueError(f"status {self.status!r} with result {self.result!r:.60} and error {self.error!r:.60}")
        if self.n_members_ok > len(self.members):
            raise ValueError(f"n_members_ok {self.n_members_ok} exceeds its {len(self.members)} members")

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def sample_id(self) -> str:
        """The id a scorecard names this record by (a metric's ``sample_ids``, its ``failed`` entries)."""
        return self.derived_id


def is_derived(record: Any) -> bool:
    """Whether a record (object or JSON dict) is a derived record rather than a sample's."""
    if isinstance(record, (DerivedRecord, SampleRecord)):  # the common cases first: a Mapping check is slow
        return isinstance(record, DerivedRecord)
    return isinstance(record, Mapping) and "derived_id" in record


def members_hash(members: Sequence[SampleRecord]) -> str:
    """sha256 of what a derived value depends on: each member's id, status, input hash, result and error.

    It is ``input_hash({"members": [[id, status, input hash, result, error], ...]})``, written a member at a time
    (``_member_part``): a result ``run_samples`` computed is sliced from its record's bytes, never encoded again."""
    return _hash_of_parts(_member_part(m) for m in members)


def _member_part(member: SampleRecord, *, as_stored: bool = False) -> bytes:
    """One member's entry in the list ``members_hash`` hashes: its result sliced from its record's bytes when they
    hold its canonical JSON (``SampleRecord.canonical_result``), or as they hold it (``as_stored``), else encoded."""
    if not as_stored and (entry := member.canonical_member()) is not None:
        return entry
    result = member.stored_result() if as_stored else member.canonical_result()
    if result is None:
        result = b"null" if member.result is None else canonical_json(member.result).encode("utf-8")
    error = b"null" if member.error is None else _TEXT(member.error).encode("utf-8")
    return b"".join((b"[", _TEXT(member.sample_id).encode("utf-8"), b",", _TEXT(member.status).encode("utf-8"), b",",
                     _TEXT(member.input_hash).encode("utf-8"), b",", result, b",", error, b"]"))


# Parts hashed per update: a composite names every sample, so no joined copy of them all; 4,096 at a time (the
# parts, their join and the join after the separator) raised a CameraBench run's peak RSS by 5 MB.
_PARTS_PER_UPDATE = 256


def _hash_of_parts(parts: Iterable[bytes]) -> str:
    # The canonical JSON of {"members": [a, b, ...]}: one key, and a list's items joined by "," (no whitespace),
    # hashed a few hundred parts at a time.
    digest = hashlib.sha256(b'{"members":[')
    batch: list[bytes] = []
    separator = b""
    for part in parts:
        batch.append(part)
        if len(batch) == _PARTS_PER_UPDATE:
            digest.update(separator)
            digest.update(b",".join(batch))
            batch, separator = [], b","
    if batch:
        digest.update(separator)
        digest.update(b",".join(batch))
    digest.update(b"]}")
    return digest.hexdigest()


def derive(derived_id: str, members: Sequence[SampleRecord],
           compute: Callable[[Sequence[SampleRecord]], Mapping[str, Any]]) -> DerivedRecord:
    """The derived record ``derived_id`` computed by ``compute`` from ``members`` (all of them: failed ones too,
    so the value can say what it lacks). ``compute`` raises DerivedFailure when the value does not exist; any
    other exception fails the record too (one line), so a bad input never costs the run its scorecard."""
    derived_id = check_sample_id(derived_id)
    ids = [m.sample_id for m in members]
    if len(set(ids)) != len(ids):
        raise ValueError(f"derived record {derived_id!r}: a member is named twice")
    status, result, error = OK, None, None
    try:
        result = clean_result(compute(members))
    except Exception as exc:  # isolation is the point: the record fails and says why
        message = str(exc)
        if not isinstance(exc, DerivedFailure):
            message = f"{type(exc).__name__}: {message}" if message.strip() else type(exc).__name__
        status, error = FAILED, one_line(message) or "failed"
    return DerivedRecord(derived_id=derived_id, status=status, result=result, error=error, members=tuple(ids),
                         members_hash=members_hash(members), n_members_ok=sum(m.ok for m in members))


def write_derived(records: Sequence[DerivedRecord], path: Path) -> Path:
    """The derived records a scorecard aggregates, one JSON line each, written atomically a record at a time (a
    composite names every sample: at 10x CameraBench the file is 10 MB, and a joined copy of its lines raised a run's
    peak RSS by 13 MB)."""
    path = Path(path)
    with atomic_path(path) as tmp, open(tmp, "wb") as out:
        for record in records:
            out.write(json.dumps(record.to_json(), ensure_ascii=False, allow_nan=False).encode("utf-8"))
            out.write(b"\n")
    return path


def read_derived(path: Path | str) -> list[DerivedRecord]:
    """Read ``derived.jsonl``; ValueError names the file and line."""
    return read_finite_jsonl(path, DerivedRecord.from_json, "derived record")


def derived_problems(derived: Sequence[DerivedRecord], samples: Sequence[SampleRecord]) -> list[str]:
    """Why derived records were not computed from exactly these sample records (one line each; [] when they were).

    Each member's result is hashed as its record's bytes hold it (``samples.jsonl``'s lines, read with them), and
    encoded canonically only when that does not give the hash: the results of a version that did not store them in
    canonical order."""
    by_id = {r.sample_id: r for r in samples}
    parts: dict[str, bytes] = {}  # a sample's part of a members hash, written once however many records name it

    def part(sample_id: str) -> bytes:
        found = parts.get(sample_id)
        if found is None:
            found = parts[sample_id] = _member_part(by_id[sample_id], as_stored=True)
        return found

    problems = []
    for record in derived:
        if record.derived_id in by_id:
            problems.append(f"derived record {record.derived_id!r} has the id of a sample")
            continue
        absent = [m for m in record.members if m not in by_id]
        if absent:
            problems.append(f"derived record {record.derived_id!r} names sample {absent[0]!r}, which has no record "
                            f"({len(absent)} such)")
        elif (_hash_of_parts(part(m) for m in record.members) != record.members_hash   # as the samples file holds
              and _hash_of_parts(_member_part(by_id[m]) for m in record.members) != record.members_hash):
            # (the results of a run before they were stored in canonical order were hashed in it)
            problems.append(f"derived record {record.derived_id!r} was computed from other records of its "
                            f"{len(record.members)} samples than the samples file holds")
    return problems
