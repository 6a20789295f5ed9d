"""Import the official Result.json: one outcome per expected sample, failures named, nothing dropped.

What ``process.py`` (8f9c59c) writes, and what this module does about it:

* ``json.dump`` without ``allow_nan=False``: identical frames give PSNR ``Infinity`` (``NaN`` is possible
  too). Python's parser accepts both tokens; non-finite values are handled per metric downstream.
* ``data`` is in completion order (nondeterministic with several GPUs): records are keyed by
  (perspective, test type, path), mirror rollouts additionally by video name.
* A record with ``error`` set failed after four attempts: the sample is failed with that error, whatever
  partial blocks the last attempt left (they may cover fewer frames).
* The early-exception hazard: an exception raised before ``result = data.copy()`` (a missing or bad GT
  ``action.json``) is written onto the worker's *previous* record, which is appended again with the new
  error. The failing sample then has no record, and another sample has an extra copy carrying an error
  that is not its own. A key with exactly one error-free record keeps it; its error copies are listed as
  stale copies; a sample with no record is failed by name, and when a stale copy's error names its
  directory, the reason says so.
* A record with ``error: null`` but without a requested block (no frame scored, action.py gave up) keeps
  what it has; each missing metric is failed for that sample by ``metrics.sample_values``.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pinbench.core.files import FileError, counted, json_error, read_data_file
from pinbench_recipes.mind.layout import MIRROR_TEST, PERSPECTIVES, TEST_TYPES, SampleKey


class ResultFileError(FileError):
    """The Result.json cannot be used at all; ``str(e)`` is one line naming the file."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(path, " ".join(str(reason).split()))


@dataclass(frozen=True)
class ResultFile:
    """A parsed Result.json: its ``video_max_time`` and its records in file order."""

    path: Path
    video_max_time: int | None
    records: list[tuple[SampleKey, dict[str, Any]]]


def results_option(value: str | Path) -> Path:
    """``-o results=``: a regular file, checked before anything reads it (a FIFO would block the run forever);
    ResultFileError names the option and the path."""
    path = Path(value)
    where = f"-o results={path}"
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise ResultFileError(where, "file not found") from None
    except OSError as exc:
        raise ResultFileError(where, f"cannot be read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise ResultFileError(where, "is a directory, expected process.py's Result.json file")
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
        raise ResultFileError(where, f"is {kind}, not a regular file (reading it could block forever)")
    return path


def load_result_file(path: Path) -> ResultFile:
    """Read a Result.json written by process.py (``Infinity`` / ``NaN`` accepted); ResultFileError otherwise."""
    text = read_data_file(path, ResultFileError)   # a FIFO put there after results_option's check: refused unread
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        ends_early = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        cut = " (cut short? process.py rewrites it in place while it runs)" if ends_early else ""
        raise ResultFileError(path, f"{json_error(exc)}{cut}") from None
    except RecursionError:   # [[[...]]] thousands deep: the parser's own limit, which named no file
        raise ResultFileError(path, "invalid JSON: nested too deeply to parse") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        raise ResultFileError(path, "not a MIND result: expected an object with a 'data' list")
    vmt = payload.get("video_max_time")
    if vmt is not None and (isinstance(vmt, bool) or not isinstance(vmt, int)):
        raise ResultFileError(path, f"video_max_time {vmt!r} is neither an integer nor null")
    records = []
    for index, record in enumerate(payload["data"]):
        key = _record_key(path, index, record)
        negative = _negative_error(record)
        if negative is not None:
            raise ResultFileError(path, f"data[{index}] ({key.path!r}): {negative[0]} is {negative[1]!r}, a negative "
                                        "error or distance, which process.py cannot write (edited by hand?)")
        records.append((key, record))
    return ResultFile(path=path, video_max_time=vmt, records=records)


# A record's errors and distances (pixel and DINO MSE, LPIPS, the RPE of action.py): never negative as process.py
# computes them, so a negative one is a file edited or damaged, which would move the score it is averaged into.
_NON_NEGATIVE_PIXEL = ("avg_mse", "mse", "avg_lpips", "lpips", "avg_dino_mse", "dino_mse")
_NON_NEGATIVE_ACTION = ("rpe_trans_mean", "rpe_rot_mean_deg", "rpe_trans_median", "rpe_rot_median_deg")


def _negative_error(record: Mapping[str, Any]) -> tuple[str, float] | None:
    """The first negative error or distance of a record, as (field path, value), or None."""
    entries = record.get("video_results")
    blocks = [(name, record.get(name), _NON_NEGATIVE_PIXEL) for name in ("lcm", "dino")]
    blocks += [(f"video_results[{i}].gsc", entry.get("gsc"), _NON_NEGATIVE_PIXEL)
               for i, entry in enumerate(entries if isinstance(entries, list) else []) if isinstance(entry, dict)]
    action = record.get("action")
    blocks += [(f"action.{bucket}", stats, _NON_NEGATIVE_ACTION)
               for bucket, stats in (action.items() if isinstance(action, dict) else [])]
    for where, block, fields in blocks:
        if not isinstance(block, dict):
            continue
        for name in fields:
            value = block.get(name)
            listed = isinstance(value, list)
            for i, v in enumerate(value if listed else [value]):
                if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
                    return f"{where}.{name}{f'[{i}]' if listed else ''}", v
    return None


def check_run_settings(result: ResultFile, video_max_time: int | None) -> None:
    """A results file scored with another ``--video_max_time`` scores other frames: refuse it."""
    if result.video_max_time != video_max_time:
        raise ResultFileError(result.path, f"video_max_time is {result.video_max_time}, this run asks for "
                                           f"{video_max_time} (set -o video_max_time to match, or rescore)")


def _record_key(path: Path, index: int, record: Any) -> SampleKey:
    if not isinstance(record, dict):
        raise ResultFileError(path, f"data[{index}] is a JSON {type(record).__name__}, expected an object")
    name, perspective, test = record.get("path"), record.get("perspective"), record.get("test_type")
    if not isinstance(name, str) or not name:
        raise ResultFileError(path, f"data[{index}] has no 'path' string")
    if name in (".", "..") or any(c in name for c in "/\\") or any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        # process.py writes os.listdir names; anything else would become a file name here
        raise ResultFileError(path, f"data[{index}]: path {name!r:.80} is not a directory name")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:   # a \udcXX escape: a sample id is a UTF-8 file name (the plan refuses such names)
        raise ResultFileError(path, f"data[{index}]: path {name!r:.80} is not valid UTF-8") from None
    if perspective not in PERSPECTIVES or test not in TEST_TYPES:
        raise ResultFileError(path, f"data[{index}] ({name!r}): perspective {perspective!r} / test_type {test!r} "
                                    f"not in {PERSPECTIVES} x {TEST_TYPES}")
    error = record.get("error")
    if error is not None and not isinstance(error, str):
        raise ResultFileError(path, f"data[{index}] ({name!r}): error {error!r:.60} is neither a string nor null")
    return SampleKey(perspective, test, name)


@dataclass
class Imported:
    """One expected sample's official outcome: the record to use, or why there is none."""

    key: SampleKey
    record: dict[str, Any] | None
    failure: str | None        # the sample failed as a whole (error set, no record, conflicting records)
    notes: list[str] = field(default_factory=list)
    source: Path | None = None  # the Result.json the record was read from (a reason about its values names it)

    @property
    def ok(self) -> bool:
        return self.failure is None


@dataclass
class ImportReport:
    """Every expected sample's outcome plus what did not fit the plan (reported, never silently used)."""

    source: Path
    samples: dict[SampleKey, Imported]
    unexpected: list[str] = field(default_factory=list)
    stale_copies: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        failed = {k.sample_id: i.failure for k, i in self.samples.items() if not i.ok}
        return {"source": str(self.source), "n_expected": len(self.samples), "n_failed": len(failed),
                "failed": failed, "unexpected_records": self.unexpected, "stale_copies": self.stale_copies}


def _without_error(record: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != "error"}


def _stale_names(key: SampleKey, error: str) -> bool:
    """Whether an error message names this sample's GT or generated directory."""
    return any(f"{key.perspective}/{middle}{key.test_type}/{key.path}/" in error.replace("\\", "/")
               for middle in ("test/", ""))


def import_results(result: ResultFile, expected: Sequence[SampleKey]) -> ImportReport:
    """Resolve the file's records against the expected samples (see the module doc for the rules)."""
    by_key: dict[SampleKey, list[tuple[int, dict[str, Any]]]] = {}
    for index, (key, record) in enumerate(result.records):
        by_key.setdefault(key, []).append((index, record))
    errors = [(key, index, record["error"]) for index, (key, record) in enumerate(result.records)
              if record.get("error") is not None]
    wanted = set(expected)
    report = ImportReport(source=result.path, samples={})
    report.unexpected = sorted(k.label for k in by_key if k not in wanted)
    for key in expected:
        found = by_key.get(key)
        report.samples[key] = _resolve(key, found, report) if found else _missing(key, errors)
    return report


def _missing(key: SampleKey, errors: list[tuple[SampleKey, int, str]]) -> Imported:
    """A sample without any record; an error written onto another sample's record may name it."""
    failure = "no record in the Result.json (process.py never wrote one)"
    named = [(other, index, error) for other, index, error in errors if other != key and _stale_names(key, error)]
    if named:
        other, index, error = named[0]
        failure += (f"; it raised before creating its record, and the error went onto a copy of "
                    f"{other.label} (data[{index}]): {error}")
    return Imported(key, None, failure)


def _resolve(key: SampleKey, found: list[tuple[int, dict[str, Any]]], report: ImportReport) -> Imported:
    clean = [(i, r) for i, r in found if r.get("error") is None]
    errored = [(i, r) for i, r in found if r.get("error") is not None]
    if clean:
        first = _without_error(clean[0][1])
        if any(_without_error(r) != first for _, r in clean[1:]):
            where = ", ".join(f"data[{i}]" for i, _ in clean)
            return Imported(key, None, f"{len(clean)} different error-free records ({where}); cannot tell which "
                                       "is this sample's")
        imported = Imported(key, clean[0][1], None, source=report.source)
        if len(clean) > 1:
            imported.notes.append(f"{len(clean)} identical records")
        for index, record in errored:
            report.stale_copies.append({"copy_of": key.label, "index": index, "error": record["error"]})
            imported.notes.append(f"data[{index}] is a stale copy of this record carrying another sample's error")
        return imported
    index, record = errored[-1]
    failure = f"process.py gave up after 4 attempts: {record['error']}"
    if len(errored) > 1:
        failure += f" (and {counted(len(errored) - 1, 'more error record')} for this key)"
    return Imported(key, record, failure)


def mirror_keys(result: ResultFile) -> list[SampleKey]:
    """The mirror_test samples a results file holds, in plan order (used when no generated root is given)."""
    keys = {key for key, _ in result.records if key.test_type == MIRROR_TEST}
    return sorted(keys, key=lambda k: (PERSPECTIVES.index(k.perspective), k.path))
