"""``pinbench check RUN_DIR``: is a run directory what its scorecard says it is?

In the spirit of MLPerf's submission checker for a results directory, every claim the scorecard makes is
checked against the files beside it:

* ``scorecard.json`` validates (schema, finite numbers, counts that add up, allowed names);
* the directory's identity (``pinbench-run.json``) is the scorecard's recipe, checkpoint and mode, and no
  other process is still writing in it;
* the samples file it names exists inside the directory, and recounting it gives every metric's
  n_expected / n_scored / n_failed / n_missing, the named failures (each with its record), the value and the
  95% interval (seeded, so recomputed exactly);
* the sample store that reruns reuse (``samples/``, ``pinbench.core.store``) has no line that fails its digest,
  holds every record of the samples file byte for byte, and no other record a rerun would take for one of them
  (a second record of the same inputs and code that says otherwise);
* every sample store (``samples/`` and each step's ``<step>/samples/``) is as the finish pinned it in the
  scorecard: no log, line or store added, cut or changed since (each named, with its line), no file in it that
  is no writer's log; what a run moved into a store's ``quarantine/`` is listed as a note;
* the derived records it names (``derived.jsonl``, ``pinbench.core.derived``) were computed from exactly those
  sample records (the digest of their members' records), and recount the metrics read from them;
* the files the recipe writes beside them are as the records say (its ``check:`` entry: RememBench's
  ``scenes.jsonl``);
* every rollout the generation step kept (``generation/samples/``: its newest ok record of each sample) is still
  the file it recorded: ``rollouts/<output>`` present, a regular file of the recorded SHA-256 (``_check_rollouts``);
* ``report/index.html`` exists;
* the reference that applies to the run (the recipe's for this checkpoint and mode) is for the same recipe
  version, checkpoint, mode and sample count, and ``diff.txt`` gives the verdict the diff gives now.

A partial or failed run is a problem too (it is not a result). Inputs whose pin is still unverified are
listed as notes. One line per problem; ``CheckResult.exit_code`` is 0 when there is none, 2 otherwise, as
``pinbench diff`` uses 2 for a run that cannot be trusted as complete. ``Run.finish`` calls it at the end of
every unsharded run. It reads JSON and YAML only: no torch, no plotting.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pinbench.core.config import RecipeError
from pinbench.core.derived import DerivedRecord, derived_problems, read_derived
from pinbench.core.files import (
    FileError,
    counted,
    first_names,
    loads_finite_json,
    not_regular,
    read_regular_bytes,
    read_regular_text,
    regular_sha256,
    symlink_on_the_way,
)
from pinbench.core.generation import PARTIAL_ROLLOUT, REQUESTS_FILE, RequestError, read_requests, unasked_lines
from pinbench.core.notices import announced
from pinbench.core.progress import amount
from pinbench.core.recipe import Recipe, get_recipe
from pinbench.core.reference import diff, load_reference, result_line, verdict_line
from pinbench.core.run import GENERATION, ROLLOUTS
from pinbench.core.rundir import (
    IDENTITY_FILE,
    RunDirError,
    aside_owner,
    not_a_run_directory,
    other_live_runs,
    read_identity,
)
from pinbench.core.runner import SampleRecord, load_records, parse_merged
from pinbench.core.scorecard import (
    MetricSpec,
    RecordIndex,
    Scorecard,
    is_stand_in,
    load_scorecard,
    record_counts,
    score_metric,
)
from pinbench.core.store import (
    QUARANTINE_DIR,
    SAMPLES_DIR,
    LogPin,
    StoreError,
    decode_line,
    legacy_files,
    log_lines,
    pin_problems,
    read_log,
    read_store,
    sound_body,
    store_files,
    store_folders,
)
from pinbench.core.uncertainty import Interval

SCORECARD = "scorecard.json"
REPORT = PurePosixPath("report", "index.html")
DIFF = "diff.txt"
# why a diff.txt can disagree with the diff of now, and the way on (``pinbench diff`` prints, never writes it)
STALE_DIFF = ("the run's reference changed since (recorded, edited or removed), or diff.txt did: the same "
              "`pinbench run` command again rewrites it, every sample reused")
EXIT_CLEAN = 0
EXIT_PROBLEMS = 2
_COUNTS = ("n_expected", "n_scored", "n_failed", "n_missing")


@dataclass
class CheckResult:
    run_dir: Path
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # the problems that are a records file not there or not readable: its values could not be compared at all
    unread: list[str] = field(default_factory=list)

    def cannot_read(self, problem: str) -> None:
        self.problems.append(problem)
        self.unread.append(problem)

    @property
    def exit_code(self) -> int:
        return EXIT_PROBLEMS if self.problems else EXIT_CLEAN

    def lines(self) -> list[str]:
        """What ``pinbench check`` prints: problems, notes, then one summary line."""
        summary = (f"check: {counted(len(self.problems), 'problem')} in {self.run_dir}" if self.problems
                   else f"check: {self.run_dir} is consistent")
        return [f"problem: {p}" for p in self.problems] + [f"note: {n}" for n in self.notes] + [summary]


@announced(lambda run_dir: f"check: {run_dir} against its scorecard")
def check_run(run_dir: Path | str) -> CheckResult:
    """Check a run directory (or the directory of a scorecard.json given instead); never raises for bad input."""
    run_dir = Path(run_dir)
    if run_dir.name == SCORECARD and run_dir.is_file():
        run_dir = run_dir.parent
    result = CheckResult(run_dir)
    problem = not_a_run_directory(run_dir)   # what ``pinbench status`` says of it, not "scorecard.json: not found"
    card: Scorecard | FileError | None = None
    if not problem:
        try:
            card = load_scorecard(run_dir / SCORECARD)
        except FileError as exc:
            card = exc
    if run_dir.is_dir():   # noted in any folder: a run killed while making them may have written nothing else
        _partial_rollouts(run_dir, result)
        _unasked_rollouts(run_dir, result, card.config if isinstance(card, Scorecard) else {})
    if problem:
        result.problems.append(problem)
        return result
    if not isinstance(card, Scorecard):
        result.problems.append(str(card))
        return result
    try:
        owner = aside_owner(run_dir)
    except RunDirError as exc:   # whose directory it was kept aside in is unknown: no check against either
        result.problems.append(str(exc))
        return result
    if owner not in (None, card.recipe):   # moved there by hand: not checked against another recipe's files
        result.problems.append(f"{run_dir.parent / IDENTITY_FILE}: the directory belongs to recipe {owner!r}, the "
                               f"scorecard kept aside in it ({run_dir / SCORECARD}) is for {card.recipe!r}")
        return result
    if owner is not None:   # its stores, rollouts and report are the run directory's: "absent" here
        result.notes.append(f"{run_dir}: a scorecard a rerun kept aside, with its records files alone: its values are "
                            f"checked against them; its stores, rollouts and report are {run_dir.parent}'s "
                            f"(pinbench check {run_dir.parent})")
        result.problems += values_check(run_dir, card).problems
        return result
    _check_identity(run_dir, card, result)
    if card.status != "complete":
        reasons = card.status_reasons
        more = f"; +{len(reasons) - 3} more" if len(reasons) > 3 else ""
        result.problems.append(f"{run_dir / SCORECARD}: status {card.status}: {'; '.join(reasons[:3])}{more}")
    records, lines = _samples(run_dir, card, result)
    # the stores are read before the derived records (a log read whole beside them was check's peak RSS, 364 MB of
    # a 10x CameraBench run's 317 MB without them), their problems said after the derived records', as ever
    stores = CheckResult(run_dir)
    if records is not None:
        _check_stores(run_dir, card, records, lines, stores)
    derived = _derived(run_dir, card, records, result)
    result.problems += stores.problems
    result.notes += stores.notes
    if records is not None and derived is not None:
        _recount(run_dir, card, records, derived, result)
    if records is not None:
        _check_recipe_files(run_dir, card, records, result)
    _check_rollouts(run_dir, result)
    if not (run_dir / REPORT).is_file():
        result.problems.append(f"{run_dir / REPORT}: {_state(run_dir / REPORT)} (every run writes its report)")
    _check_reference(run_dir, card, result)
    inputs = card.provenance.get("inputs") or {}
    for name, state in inputs.items():
        if isinstance(state, Mapping) and state.get("state") != "verified":
            reason = state.get("reason") or f"{state.get('kind', 'input')} without a full pin (revision or SHA-256)"
            result.notes.append(f"unverified input {name}: {reason}")
    return result


def values_check(run_dir: Path, card: Scorecard) -> CheckResult:
    """What ``check_run`` finds between a scorecard and the records beside it (the samples and derived files, every
    count and value recomputed); no problems when they agree, or when its samples file is not there (a scorecard
    copied alone; not in a run directory, where removing it let an edited value through). Its ``unread`` tells a
    records file that is missing from records that disagree. Why: ``record-reference`` took a value edited in
    scorecard.json as the reference's."""
    result = CheckResult(run_dir)
    if card.samples.path and not os.path.lexists(run_dir / card.samples.path):   # a null path: _samples names it
        if os.path.lexists(run_dir / IDENTITY_FILE):
            result.cannot_read(f"{run_dir / card.samples.path}: absent from the run directory ({IDENTITY_FILE})")
        return result
    records, _ = _samples(run_dir, card, result)
    derived = _derived(run_dir, card, records, result)
    if records is not None and derived is not None:
        _recount(run_dir, card, records, derived, result)
    return result


# ------------------------------------------------------------------------------------------- the parts


def _check_identity(run_dir: Path, card: Scorecard, result: CheckResult) -> None:
    try:
        identity, source = read_identity(run_dir)
    except RunDirError as exc:
        result.problems.append(str(exc))
        return
    if identity is None or not source.endswith(IDENTITY_FILE):
        result.notes.append(f"{run_dir / IDENTITY_FILE}: absent (a directory from before run identities)")
    else:
        for key in ("recipe", "checkpoint", "mode"):
            if identity[key] != getattr(card, key):
                result.problems.append(f"{source}: the directory belongs to {key} {identity[key]!r}, "
                                       f"the scorecard is for {getattr(card, key)!r}")
    for holder in other_live_runs(run_dir):
        result.problems.append(f"{run_dir}: a run is still writing here: {holder}")


def _run_file(run_dir: Path, block: str, name: str | None, what: str, result: CheckResult) -> Path | None:
    """The file a scorecard block names, when it is a file inside the run directory (``load_scorecard`` refuses a
    name outside it)."""
    if not name:
        result.cannot_read(f"{run_dir / SCORECARD}: names no {what} file ({block}.path is null)")
        return None
    path = run_dir / PurePosixPath(name)
    if path.is_symlink():  # the records must travel with the directory, not point into another run
        result.cannot_read(f"{path}: a symlink (to {os.readlink(path)}); a run directory holds its own "
                           "per-sample records")
        return None
    if not path.is_file():
        result.cannot_read(f"{path}: {_state(path)} (the scorecard names it as its {what} records)")
        return None
    return path


def _state(path: Path) -> str:
    """Why a path that should be a regular file is not one: ``missing``, ``a FIFO (named pipe), not a regular file``."""
    try:
        kind = not_regular(path.stat().st_mode)
    except OSError:
        return "missing"
    if kind == "is a directory":
        return "is a directory, not a file"
    return f"{kind}, not a regular file" if kind is not None else "unreadable"


def _samples(run_dir: Path, card: Scorecard, result: CheckResult) -> tuple[list[SampleRecord] | None, list[bytes]]:
    """The records of the samples file and the bytes of their lines (the store check compares them with the
    store's lines, the derived check hashes them): each record's own when it keeps its line (``parse_merged``),
    the file's split again only when one does not (a line of another layout)."""
    path = _run_file(run_dir, "samples", card.samples.path, "per-sample", result)
    if path is None:
        return None, []
    try:
        data = read_regular_bytes(path, follow_symlinks=False)
        records = parse_merged(data, path)
    except (UnicodeDecodeError, ValueError) as exc:  # FileError (a FIFO since the look) is a ValueError
        result.cannot_read(" ".join(str(exc).split()))
        return None, []
    lines = [record.line() for record in records]
    if None in lines:
        lines = [line for line in data.splitlines() if line.strip()]
    return records, lines


def _derived(run_dir: Path, card: Scorecard, records: Sequence[SampleRecord] | None,
             result: CheckResult) -> list[DerivedRecord] | None:
    """The derived records the scorecard names ([] when it names none), checked against the sample records."""
    block = card.derived
    if block is None:
        return []
    path = _run_file(run_dir, "derived", block.path, "derived", result)
    if path is None:
        return None
    try:
        derived = read_derived(path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        result.cannot_read(" ".join(str(exc).split()))
        return None
    n_ok = sum(r.ok for r in derived)
    found = {"n_records": len(derived), "n_ok": n_ok, "n_failed": len(derived) - n_ok}
    wrong = [f"{key} {getattr(block, key)} (the file gives {found[key]})" for key in found
             if getattr(block, key) != found[key]]
    if wrong:
        result.problems.append(f"{path}: the scorecard's derived block says {', '.join(wrong)}")
    if records is not None:
        result.problems += [f"{path}: {problem}" for problem in derived_problems(derived, records)]
    return derived


def _check_stores(run_dir: Path, card: Scorecard, records: Sequence[SampleRecord], lines: Sequence[bytes],
                  result: CheckResult) -> None:
    """Every sample store of the run directory as the finish pinned it, every line sound and read; the ``samples``
    store holding exactly the records of ``samples.jsonl`` (``_check_records``)."""
    try:
        folders = store_folders(run_dir)
    except StoreError as exc:
        result.problems.append(str(exc))
        return
    pins = card.store
    if pins is None:
        result.notes.append(f"{run_dir / SCORECARD}: schema {card.schema_version} pins no sample store (2.3 does): "
                            "a line added after the finish is seen only when it contradicts a record it counts")
    else:
        result.problems += [f"{folders[name]}: a sample store the finish did not pin (written after it)"
                            for name in sorted(folders.keys() - pins.keys())]
        result.problems += [f"{run_dir / name}: a sample store the finish pinned ({counted(len(logs), 'log')}), now "
                            "absent"
                            for name, logs in sorted(pins.items()) if name not in folders and logs]
    for name, folder in folders.items():
        pinned = None if pins is None else {log.log: log for log in pins.get(name, ())}
        if name == SAMPLES_DIR:
            bodies = _store_lines(folder, pinned, result, damage=not legacy_files(folder), same=lines)
            if bodies is not None:
                _check_records(folder, bodies, records, lines, result)
        elif _store_lines(folder, pinned, result, damage=False) is not None:
            try:
                result.problems += [f"sample store: {problem}" for problem in read_store(folder).problems]
            except StoreError as exc:  # changed since the look
                result.problems.append(str(exc))
    if SAMPLES_DIR not in folders:
        _check_records(run_dir / SAMPLES_DIR, {}, records, lines, result)


def _store_lines(folder: Path, pinned: Mapping[str, LogPin] | None, result: CheckResult, *, damage: bool,
                 same: Sequence[bytes] = ()) -> dict[bytes, str] | None:
    """The record bytes of every sound line of a store's logs (not parsed), each with where it first is; on the way
    its lines that fail their digest (``damage``), its stray files and what differs from the pins are problems, its
    quarantine a note. None when the store cannot be read. Bytes equal to one of ``same`` (the lines of
    samples.jsonl) are held as that one, not as a copy of their own: the copies were 43 MB of check's 407 MB peak
    RSS at 112,220 samples."""
    held = {line: line for line in same}
    try:
        files = store_files(folder)
    except StoreError as exc:
        result.problems.append(str(exc))
        return None
    result.problems += [f"{stray}: not a log any writer keeps (run.jsonl, shard-I-of-N.jsonl), never read (a run "
                        f"moves it into {folder / QUARANTINE_DIR})" for stray in files.strays]
    result.problems += [str(refusal) for refusal in files.refused.values()]
    quarantine = folder / QUARANTINE_DIR
    if quarantine.is_dir() and not quarantine.is_symlink():
        moved = sorted(p.name for p in quarantine.iterdir())
        result.notes.append(f"{quarantine}: what runs moved out of the store, never read ({', '.join(moved[:5])}"
                            f"{', ...' if len(moved) > 5 else ''}): records a rerun replaced on purpose (another "
                            "generator, a changed rollout), damaged or contradicting lines, stray files")
    bodies: dict[bytes, str] = {}
    for path in files.logs:
        try:
            data = read_log(path)[0]
        except StoreError as exc:
            result.problems.append(str(exc))
            continue
        if pinned is not None:
            result.problems += pin_problems(folder, path.name, data, pinned.get(path.name))
        for number, line, complete in log_lines(data):
            if not complete:
                continue  # a torn tail: the writer that reopens the log cuts it; a run recomputes that sample
            body = sound_body(line)
            if body is not None:
                bodies.setdefault(held.get(body, body), f"{path}:{number}")
            elif damage:
                result.problems.append(f"sample store: {decode_line(line, f'{path}:{number}')[1]}")
    present = {path.name for path in [*files.logs, *files.refused]}
    result.problems += [f"{folder / name}: pinned by the finish ({counted(log.lines, 'line')}), now absent"
                        for name, log in sorted((pinned or {}).items()) if name not in present]
    return bodies


def _check_records(samples_dir: Path, bodies: Mapping[bytes, str], records: Sequence[SampleRecord],
                   lines: Sequence[bytes], result: CheckResult) -> None:
    """The sample store that reruns reuse holds exactly the records of ``samples.jsonl``, and no other a rerun would
    take for one of them.

    Why: a record edited in the store (or the store's only record of a sample deleted) would pass every count of
    the scorecard, and a rerun would reuse the edit; a second record of the same inputs and code that says
    otherwise makes the store contradict itself. Each record of ``samples.jsonl`` that is not a missing one must
    be one the store holds, byte for byte (compared with the bytes of the lines whose digest holds; a store of
    the layout before the logs, by content); each other sound line is read, only to see whether it is such a
    second record."""
    if legacy_files(samples_dir):
        try:
            contents = read_store(samples_dir)
        except StoreError as exc:
            result.problems.append(str(exc))
            return
        result.problems += [f"sample store: {problem}" for problem in contents.problems]
        held = {r.sample_id: any(_same_record(c.data, r.to_json()) for c in contents.records.get(r.sample_id, []))
                for r in records}
    else:
        held = {r.sample_id: line in bodies for r, line in zip(records, lines, strict=True)}
        counted = {r.sample_id: r for r in records if r.ok}
        codes = _codes(counted.values())
        used = set(lines)
        for body, where in bodies.items():
            if body not in used and _may_be_of(body, codes) and (second := _second_record(body, counted)) is not None:
                result.problems.append(f"{where}: a second record of sample {second!r}, of the same inputs and code "
                                       "as the one the scorecard counts, that says otherwise (a rerun would compute "
                                       "the sample again)")
    missing = [r for r in records if not held[r.sample_id] and not is_stand_in(r)]
    try:
        stored = read_store(samples_dir).records if missing else {}
    except StoreError:  # said where the store was read
        stored = {}
    for record in missing:
        others = [s.where for s in stored.get(record.sample_id, [])]
        state = f"holds other records of it ({', '.join(others[:3])})" if others else "holds no record of it"
        result.problems.append(f"{samples_dir}: sample {record.sample_id!r} is in samples.jsonl, but the store "
                               f"{state} (a rerun would not reuse what the scorecard counts)")


# Counted records of more codes than this are looked for by parsing every other line (a rerun after a code change
# holds two: the old records and the new)
_FEW_CODES = 8


def _codes(records: Iterable[SampleRecord]) -> list[bytes] | None:
    """The code digests of ``records``' implementations, as bytes: what a second record of one of them spells; None
    when one has no implementation (a record of 87e8f14: its second records are its own, with none) or there are
    more than ``_FEW_CODES``."""
    codes = set()
    for record in records:
        if record.implementation is None:
            return None
        codes.add(record.implementation.code.encode("utf-8"))
    return sorted(codes) if len(codes) <= _FEW_CODES else None


def _may_be_of(body: bytes, codes: Sequence[bytes] | None) -> bool:
    """Whether a stored record's bytes may be a second record of a record of one of ``codes`` (``_codes``): a body
    with no backslash spells each of its strings as it is, so one that holds none of the codes is of other code.
    Why: a rerun after a code change stores every sample again, and parsing each line of the old code to see
    that was two fifths of ``pinbench check``'s store check (11,222 lines of CameraBench)."""
    return codes is None or b"\\" in body or any(code in body for code in codes)


def _second_record(body: bytes, counted: Mapping[str, SampleRecord]) -> str | None:
    """The sample id when a stored record's bytes are an ok record of a counted sample with the same input hash and
    implementation but another result, else None."""
    try:
        data = loads_finite_json(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    record = counted.get(data.get("sample_id")) if isinstance(data, dict) else None
    if record is None or data.get("status") != "ok":
        return None
    implementation = record.implementation.to_json() if record.implementation is not None else None
    same_task = data.get("input_hash") == record.input_hash and data.get("implementation") == implementation
    return record.sample_id if same_task and data.get("result") != record.result else None


def _same_record(stored: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """A stored record (of either record version) is the one ``samples.jsonl`` holds."""
    try:
        return SampleRecord.from_json(dict(stored)).to_json() == wanted
    except ValueError:
        return False


def _recount(run_dir: Path, card: Scorecard, records: Sequence[SampleRecord], derived: Sequence[DerivedRecord],
             result: CheckResult) -> None:
    """Every count and value of the scorecard, recomputed from the records (the rules of build_scorecard); a
    metric's problem names the file it is recounted from (derived.jsonl for a derived metric)."""
    problems = result.problems
    samples_path = run_dir / card.samples.path
    derived_path = run_dir / card.derived.path if card.derived is not None else samples_path
    ids = [r.sample_id for r in [*records, *derived]]
    if len(set(ids)) != len(ids):
        problems.append(f"{samples_path}: sample {next(i for i in ids if ids.count(i) > 1)!r} has more than one "
                        "record")
        return
    s = card.samples
    n_ok, n_failed = record_counts(records)   # a merge's stand-in counts missing (is_stand_in)
    found = {"": n_ok + n_failed, "ok ": n_ok, "failed ": n_failed}
    claimed = {"": s.n_expected - s.n_missing, "ok ": s.n_ok, "failed ": s.n_failed}
    for kind in found:
        if found[kind] != claimed[kind]:
            problems.append(f"{samples_path}: {found[kind]} {kind}records, the scorecard counts {claimed[kind]}")
    by_id = {r.sample_id: r for r in [*records, *derived]}
    index = RecordIndex([*records, *derived])
    for name, m in card.metrics.items():
        path = derived_path if m.reads_derived else samples_path
        for failure in m.failed:
            if failure.sample_id not in by_id:
                problems.append(f"{path}: metric {name}: failed sample {failure.sample_id!r} has no record")
        if m.missing is not None and m.sample_ids is None:
            result.notes.append(f"metric {name}: its cohort's sample_ids are not recorded (a scorecard from before "
                                "they were); only its named failures were checked")
            continue
        try:
            spec = MetricSpec(name, aggregation=m.aggregation, group_by=m.group_by, key=m.key,
                              sample_ids=m.sample_ids, direction=m.direction, kind=m.kind,
                              primary=m.primary, unit=m.unit, derived=m.reads_derived)
            again = score_metric(spec, index, s.n_expected)
        except ValueError as exc:
            problems.append(f"{path}: metric {name}: cannot be recounted: {exc}")
            continue
        wrong = [f"{key} {getattr(m, key)} (records give {getattr(again, key)})" for key in _COUNTS
                 if getattr(m, key) != getattr(again, key)]
        if wrong:
            problems.append(f"{path}: metric {name}: the scorecard says {', '.join(wrong)}")
            continue
        named = {f.sample_id: f.error for f in m.failed}
        recounted = {f.sample_id: f.error for f in again.failed}
        if named != recounted:
            sid = next(i for i in sorted(set(named) | set(recounted)) if named.get(i) != recounted.get(i))
            problems.append(f"{path}: metric {name}: sample {sid!r} is {_failure_text(named.get(sid))} in the "
                            f"scorecard but {_failure_text(recounted.get(sid))} in its record")
        elif (m.missing or ()) != (again.missing or ()):
            problems.append(f"{path}: metric {name}: the missing samples named differ from the records")
        elif m.value != again.value:
            problems.append(f"{path}: metric {name}: value {m.value!r} in the scorecard, {again.value!r} "
                            "recomputed from the records")
        elif m.degenerate != again.degenerate and card.schema_version not in ("2.0", "2.1", "2.2"):
            problems.append(f"{path}: metric {name}: {counted(len(m.degenerate), 'degenerate value')} in the "
                            f"scorecard, {len(again.degenerate)} in the records")
        elif m.interval is not None and not _same_bounds(m.interval, again.interval):
            problems.append(f"{path}: metric {name}: interval {_bounds(m.interval)} in the scorecard, "
                            f"{_bounds(again.interval)} recomputed from the records (seeded, so the same)")


def _bounds(interval: Interval | None) -> tuple[Any, Any, Any]:
    """What an interval claims: its bounds and how they were computed."""
    return (interval.low, interval.high, interval.method) if interval is not None else (None, None, None)


def _same_bounds(claimed: Interval | None, again: Interval | None) -> bool:
    """The same method and bounds to 1e-9 (relative): the same seeded resamples give them; the last digits may
    differ between versions of the arithmetic (a quantile, the normal CDF), an edit does not look like that."""
    (low, high, method), (low2, high2, method2) = _bounds(claimed), _bounds(again)
    if method != method2 or (low is None) != (low2 is None) or (high is None) != (high2 is None):
        return False
    return all(a is None or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) for a, b in ((low, low2), (high, high2)))


def _failure_text(error: str | None) -> str:
    return "scored" if error is None else f"failed ({error[:80]})"


def _partial_rollouts(run_dir: Path, result: CheckResult) -> None:
    """A note of the hidden files a run killed while making rollouts left in ``rollouts/`` (``PARTIAL_ROLLOUT``):
    never scored, they took disk unseen. A generating run alone in the folder removes them all
    (``pinbench.ops.generation``); MIND's ``--skip-generation`` removes them too (seen: a run killed mid-rollout, then
    each)."""
    sizes = {}
    for path in sorted((run_dir / ROLLOUTS).rglob(".*")):
        if PARTIAL_ROLLOUT.fullmatch(path.name):
            with contextlib.suppress(OSError):   # gone since: not counted
                sizes[path] = path.lstat().st_size
    if sizes:
        result.notes.append(f"{run_dir / ROLLOUTS}: {counted(len(sizes), 'hidden partial rollout')} "
                            f"({amount(sum(sizes.values()), 'bytes')}; e.g. {next(iter(sizes)).relative_to(run_dir)}): "
                            "what a run killed while making rollouts leaves, never scored; the next run that generates "
                            "alone in this folder removes them, or delete them")


def _unasked_rollouts(run_dir: Path, result: CheckResult, config: Mapping[str, Any]) -> None:
    """A note of each video in ``rollouts/`` that none of the run's requests names (``unasked_lines``): never scored
    (a generator that wrote under another name than its out, an earlier run's larger --limit), which the run said
    once as its generation step ended and ``pinbench check`` did not say at all. A note, not a problem: the run's
    scores are of the files its requests name. Without a readable requests file nothing is said. ``config``: the
    scorecard's, as ``check_run`` loaded it (none without a valid one)."""
    requests, rollouts = run_dir / GENERATION / REQUESTS_FILE, run_dir / ROLLOUTS
    if not rollouts.is_dir() or not requests.is_file():
        return
    try:
        asked = read_requests(requests)
    except RequestError:
        return
    # under --limit (the scorecard's config says) the file may be a good rollout of a request the limit cut
    limit = config.get("limit")
    result.notes.extend(unasked_lines(rollouts, asked, limit if type(limit) is int and limit > 0 else None))


def _check_rollouts(run_dir: Path, result: CheckResult) -> None:
    """Each rollout the generation step kept is the file it recorded (one problem per rollout changed or missing,
    naming it): a rollout changed after scoring (one inode with the sample cache and other run directories, written
    by root or an owner who made it writable again) left the run checking clean over scores of other bytes.

    Hashed by default, not behind a ``--rollouts`` flag: a clean check must mean the scored rollouts are still
    there, and the cost falls only on generating runs. A run without generation records (score-only: CameraBench's
    11,222 samples) pays one stat of ``generation/samples``, nothing per sample. A generating run pays one read of
    its rollouts per ``pinbench check``; the check at a run's finish reads none again, as the generation step (or a
    ``--skip-generation`` run's check before scoring) hashed them in the same process (``regular_sha256``)."""
    store = run_dir / GENERATION
    if not (store / SAMPLES_DIR).is_dir():
        return
    try:
        records = load_records(store)
    except (StoreError, ValueError) as exc:
        result.problems.append(" ".join(str(exc).split()))
        return
    rollouts = run_dir / ROLLOUTS
    links: dict[PurePosixPath, Path | None] = {}   # each folder of rollouts: the symlink on the way to it, if any
    through: dict[Path, list[str]] = {}   # each such symlink: the samples whose kept rollouts it leads to
    for sid, record in records.items():
        kept = record.result if record.ok and isinstance(record.result, Mapping) else {}
        output, sha256 = kept.get("output"), kept.get("sha256")
        if not (isinstance(output, str) and isinstance(sha256, str)):
            continue
        relative = PurePosixPath(output)
        if relative.is_absolute() or ".." in relative.parts or not relative.parts or "\0" in output:
            result.problems.append(f"{store / SAMPLES_DIR}: the record of {sid} names {output!r}, not a rollout "
                                   f"inside {rollouts}")
            continue
        folder = PurePosixPath(ROLLOUTS) / relative.parent
        if folder not in links:
            links[folder] = symlink_on_the_way(run_dir, folder)
        link = links[folder]
        if link is not None:   # its bytes may match: they are still files outside the run, anyone's to change
            through.setdefault(link, []).append(sid)
            continue
        path = rollouts / relative
        now = regular_sha256(path)
        if now == sha256:
            continue
        if not os.path.lexists(path):
            result.problems.append(f"{path}: rollout missing (generation kept it for {sid}, SHA-256 {sha256[:12]}...)")
        else:
            state = (f"SHA-256 {now[:12]}..." if now is not None
                     else f"a symlink (to {os.readlink(path)!r}), not the file kept" if path.is_symlink()
                     else _state(path))
            result.problems.append(f"{path}: rollout changed since generation kept it for {sid} ({state}, kept "
                                   f"{sha256[:12]}...)")
    for link, sids in through.items():
        result.problems.append(f"{link}: a symlink (to {os.readlink(link)!r}) on the way to {len(sids)} kept "
                               f"rollout{'s' * (len(sids) > 1)} ({first_names(sorted(sids))}); a kept rollout is a "
                               f"regular file reached without symlinks inside {run_dir}")


def _check_recipe_files(run_dir: Path, card: Scorecard, records: Sequence[SampleRecord], result: CheckResult) -> None:
    """The files the recipe writes beside the scorecard (RememBench's scenes.jsonl), by the recipe's own ``check:``
    entry; a recipe not installed here is a note of ``_check_reference``'s."""
    try:
        recipe = get_recipe(card.recipe)
    except RecipeError:
        return
    result.problems += recipe.check_files(run_dir, card, records)


def _check_reference(run_dir: Path, card: Scorecard, result: CheckResult) -> None:
    """The reference that applies to this run matches it, and diff.txt holds the verdict it gives now."""
    try:
        recipe: Recipe = get_recipe(card.recipe)
    except RecipeError as exc:
        result.notes.append(f"reference not checked: {exc}")
        return
    ref_path = recipe.reference_of(card)
    diff_text = read_regular_text(run_dir / DIFF)  # a FIFO there: no text, never a hang
    if diff_text is None and os.path.lexists(run_dir / DIFF) and ref_path is None:
        result.problems.append(f"{run_dir / DIFF}: {_state(run_dir / DIFF)} (the run's results table)")
    if ref_path is None:
        result.notes.append(f"{recipe.no_reference_of(card)}: reported, not diffed")
        if diff_text is not None and "\nresult: " in f"\n{diff_text}":
            result.problems.append(f"{run_dir / DIFF}: holds a diff verdict, but no reference applies to this run: "
                                   f"{STALE_DIFF}")
        return
    try:
        ref = load_reference(ref_path, recipe=recipe)
    except FileError as exc:
        result.problems.append(str(exc))
        return
    for key, theirs, ours in (("recipe_version", ref.recipe_version, card.recipe_version),
                              ("checkpoint", ref.checkpoint, card.checkpoint), ("mode", ref.mode, card.mode),
                              ("sample count", ref.n_samples, card.samples.n_expected)):
        if theirs != ours:
            result.problems.append(f"{ref_path}: the reference is for {key} {theirs!r}, the run has {ours!r}")
    now = diff(card, ref)
    expected = result_line(now)
    if diff_text is None:
        result.problems.append(f"{run_dir / DIFF}: {_state(run_dir / DIFF)} (the run's diff against {ref_path})")
        return
    said = [line for line in diff_text.splitlines() if line.startswith("result: ")]
    # a run diffed before the result line said why a reference does not apply wrote the verdict alone
    if said not in ([expected], [verdict_line(now)]):
        result.problems.append(f"{run_dir / DIFF}: says {said[-1] if said else 'no result'!r}, the diff against "
                               f"{ref_path} now gives {expected!r}: {STALE_DIFF}")
