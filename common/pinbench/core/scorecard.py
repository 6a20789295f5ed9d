"""Scorecards: one JSON per run with aggregates, their denominators, a status and provenance.

A scorecard never shrinks the denominator. Every metric carries ``n_expected`` (the full task count
the recipe defines), ``n_scored``, ``n_failed`` (with each failed sample id and its reason) and
``n_missing`` (samples never computed: no record at all, the stand-in a merge keeps for a shard that never
ran, ``is_stand_in``, or a value its record names in ``result["never_computed"]``, ``never_computed``). The status
follows from them:

* ``complete``: every metric has ``n_expected > 0`` and ``n_scored == n_expected``;
* ``failed``: no metric scored anything;
* ``partial``: anything in between. A partial scorecard is never diffed as if complete.

A metric value is null when nothing scored. Aggregations: ``mean``, ``median``,
``mean_then_median`` (mean within ``group_by`` groups, then median over the groups) and ``none``
(the single value of a one-sample metric, e.g. a suite-level number an upstream evaluator computes).

Schema 2.1 adds to every metric its 95% ``interval`` (a seeded bootstrap over the sampling unit, see
``pinbench.core.uncertainty``; or null bounds and the reason there is none) and, for a metric restricted to a
cohort, its ``sample_ids``, so a report or a comparison reads exactly the samples the value was computed
from. Schema 2.2 adds derived records (``pinbench.core.derived``): values computed from many samples at finish
time (a split's AP, a composite), counted in their own ``derived`` block and never as samples; a metric
read from them says ``"records": "derived"`` and its ``sample_ids`` are their ids. Schema 2.3 adds ``store``: the
sample stores' logs as the finish left them (``pinbench.core.store.seal``: lines, bytes, SHA-256 of each), so
``pinbench check`` names any line added or changed after it; and a metric's ``degenerate`` values: scored records
whose value a rule defines rather than a measurement (a split with one class has AP 0 by upstream's rule), which a
record declares in ``result["degenerate"][key]`` with its reason, so a run whose mean is made of them says so
instead of ending "complete" on it; and to a derived metric the recipe's ``from_members`` declaration
(``pinbench.core.metricinfo.MemberStatistic``): how its value follows from its members' results, which ``pinbench
compare`` resamples. Scorecards of schema 2.0 (no intervals), 2.1 and 2.2 still load.

In memory a scorecard is a ``Scorecard`` (its metrics ``MetricResult``, their intervals
``pinbench.core.uncertainty.Interval``); ``to_json()`` is its JSON form (what ``write_scorecard`` writes once
secrets are scrubbed), and ``from_json`` reads one back: ``to_json(from_json(x)) == x``, key order included.
Provenance, config, timings and extra are free-form blocks and stay plain JSON mappings.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import statistics
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from pinbench.core.derived import DERIVED_PATH, DerivedRecord, is_derived, read_derived
from pinbench.core.files import (
    FileError,
    MissingFile,
    clipped,
    counted,
    json_error,
    loads_finite_json,
    mistyped_path,
    read_regular_bytes,
    write_atomic,
)
from pinbench.core.jsonfields import COUNT, TEXT, JsonBlock, one_of, spec
from pinbench.core.metricinfo import AGGREGATIONS, DIRECTIONS, KINDS, MemberStatistic, MetricInfo
from pinbench.core.names import checkpoint_name_problem, recipe_name_problem
from pinbench.core.notices import announced
from pinbench.core.provenance import config_differences, differences, scrub, to_jsonable
from pinbench.core.rundir import IDENTITY_FILE
from pinbench.core.runner import SampleRecord, is_stand_in
from pinbench.core.schema import schema_error
from pinbench.core.store import StorePins
from pinbench.core.uncertainty import Interval, aggregate_interval

SCHEMA_VERSION = "2.3"
READABLE_SCHEMA_VERSIONS = ("2.0", "2.1", "2.2", "2.3")
MODES = ("full", "smoke", "fixture")
STATUSES = ("complete", "partial", "failed")
DEFAULT_SAMPLES_PATH = "samples.jsonl"
DERIVED_RECORDS = "derived"
DEGENERATE = "degenerate"  # result["degenerate"][key]: why a record's value of key is defined by a rule
NEVER_COMPUTED = "never_computed"  # result["never_computed"][key or group]: why a value was never computed
_SHOWN = 4


class ScorecardError(FileError):
    """A scorecard file is unreadable or invalid."""


# ------------------------------------------------------------------------------------------ the scorecard


@dataclass(frozen=True)
class Failure(JsonBlock, where="failed"):
    """A sample (or derived record) a metric could not score, and why."""

    sample_id: str
    error: str


@dataclass(frozen=True)
class Degenerate(JsonBlock, where="degenerate"):
    """A scored record whose value is defined by a rule, not measured, and the reason its record gives."""

    sample_id: str
    reason: str = spec(TEXT)


@dataclass(frozen=True, kw_only=True)
class MetricResult(JsonBlock, where="metric"):
    """One metric of a scorecard: its value, how it was aggregated and described, and its denominators.

    ``missing`` and ``sample_ids`` are set for a metric restricted to a cohort; ``records`` is ``"derived"`` for one
    read from derived records; ``interval`` is None only in a scorecard of schema 2.0; ``degenerate`` names the
    scored values a rule defined. Optional fields are absent from the JSON form when unset (or empty).
    """

    value: float | None
    aggregation: str = spec(one_of(*AGGREGATIONS))
    direction: str = spec(one_of(*DIRECTIONS))
    kind: str = spec(one_of(*KINDS))
    primary: bool
    unit: str | None = spec(TEXT, default=None)
    key: str | None = spec(TEXT, default=None)
    group_by: str | None = spec(TEXT, default=None)
    n_groups: int | None = spec(COUNT, default=None)
    n_expected: int = spec(COUNT)
    n_scored: int = spec(COUNT)
    n_failed: int = spec(COUNT)
    n_missing: int = spec(COUNT)
    failed: tuple[Failure, ...]
    missing: tuple[str, ...] | None = None
    sample_ids: tuple[str, ...] | None = None
    records: str | None = spec(one_of(DERIVED_RECORDS), default=None)
    interval: Interval | None = None
    degenerate: tuple[Degenerate, ...] = spec((lambda v: isinstance(v, list) and len(v) > 0, "a non-empty list"),
                                              default=())
    from_members: MemberStatistic | None = None

    @property
    def reads_derived(self) -> bool:
        return self.records == DERIVED_RECORDS


@dataclass(frozen=True)
class SampleCounts(JsonBlock, where="samples"):
    """A scorecard's ``samples`` block: how many samples the run defines, how many have an ok or failed record, how
    many were never computed (no record, or a merge's stand-in: ``is_stand_in``), and the file of their records (None:
    not written)."""

    n_expected: int = spec(COUNT)
    n_ok: int = spec(COUNT)
    n_failed: int = spec(COUNT)
    n_missing: int = spec(COUNT)
    path: str | None


@dataclass(frozen=True)
class DerivedCounts(JsonBlock, where="derived"):
    """A scorecard's ``derived`` block: its derived records (``pinbench.core.derived``), counted apart from samples."""

    n_records: int = spec(COUNT)
    n_ok: int = spec(COUNT)
    n_failed: int = spec(COUNT)
    path: str = spec(TEXT)


@dataclass(frozen=True)
class Scorecard(JsonBlock, where="$"):
    """One run of one recipe on one checkpoint (see the module docstring). ``derived``, ``extra``,
    ``computed_from`` (what ``Run.finish`` computed it from) and ``store`` (the sample stores it pinned) are None
    when absent. ``from_json`` checks types only: ``validate_scorecard`` checks the schema and the counts."""

    schema_version: str = spec(one_of(*READABLE_SCHEMA_VERSIONS))
    recipe: str = spec(TEXT)
    recipe_version: str = spec(TEXT)
    checkpoint: str = spec(TEXT)
    mode: str = spec(one_of(*MODES))
    status: str = spec(one_of(*STATUSES))
    status_reasons: tuple[str, ...]
    samples: SampleCounts
    metrics: Mapping[str, MetricResult]
    provenance: Mapping[str, Any]
    config: Mapping[str, Any]
    timings: Mapping[str, Any]
    derived: DerivedCounts | None = None
    extra: Mapping[str, Any] | None = None
    computed_from: str | None = None
    store: StorePins | None = None

    def ran_differently(self, other: Scorecard, labels: tuple[str, str]) -> list[str]:
        """How this run and ``other`` differ in what changes their numbers: their config's lines, then their
        provenance's (what the rerun's aside lines, ``compare`` and the view each say)."""
        return [*config_differences(self.config, other.config, labels),
                *differences(self.provenance, other.provenance, labels)]


@dataclass(frozen=True)
class MetricSpec:
    """How one metric is read from per-sample results, aggregated and described.

    ``key`` is the field in each sample's result dict (default: ``name``). ``sample_ids`` restricts
    the metric to a cohort (e.g. only the I2V scenes); its length is then the metric's
    ``n_expected``, and ids with no record are listed as missing by name. ``derived``: the metric reads
    derived records (``pinbench.core.derived``), never samples; ``sample_ids`` then names those records.
    Aggregation, direction, kind and unit come from the recipe's declaration (``with_info``); a scorecard
    never guesses them.
    """

    name: str
    aggregation: str | None = None
    group_by: str | None = None
    key: str | None = None
    sample_ids: Collection[str] | None = None
    direction: str | None = None
    kind: str = "official"
    primary: bool = False
    unit: str | None = None
    derived: bool = False
    from_members: MemberStatistic | None = None

    def __post_init__(self) -> None:
        if self.aggregation is not None and self.aggregation not in AGGREGATIONS:
            raise ValueError(f"metric {self.name!r}: unknown aggregation {self.aggregation!r}; "
                             f"expected one of {', '.join(AGGREGATIONS)}")
        if self.aggregation is not None and (self.aggregation == "mean_then_median") != (self.group_by is not None):
            raise ValueError(f"metric {self.name!r}: group_by is required by mean_then_median "
                             f"and meaningless for {self.aggregation}")
        if self.direction is not None and self.direction not in DIRECTIONS:
            raise ValueError(f"metric {self.name!r}: direction {self.direction!r} is not higher or lower")
        if self.kind not in KINDS:
            raise ValueError(f"metric {self.name!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.derived and self.sample_ids is None:
            raise ValueError(f"metric {self.name!r}: a metric of derived records names them in sample_ids")
        if self.from_members is not None and not (self.derived and self.aggregation in (None, "none")):
            raise ValueError(f"metric {self.name!r}: from_members describes one derived value (aggregation none)")
        if self.sample_ids is not None:
            ids = tuple(self.sample_ids)
            if len(set(ids)) != len(ids):
                raise ValueError(f"metric {self.name!r}: sample_ids has duplicates")
            object.__setattr__(self, "sample_ids", ids)

    @property
    def result_key(self) -> str:
        return self.key or self.name

    def with_info(self, info: MetricInfo) -> MetricSpec:
        """This metric described by its declaration (aggregation, group_by, direction, kind, primary, unit)."""
        if self.aggregation is not None and self.aggregation != info.aggregation:
            raise ValueError(f"metric {self.name!r}: aggregation {self.aggregation!r} contradicts the declared "
                             f"{info.aggregation!r}")
        return replace(self, aggregation=info.aggregation, group_by=info.group_by, direction=info.direction,
                       kind=info.kind, primary=info.primary, unit=info.unit,
                       from_members=info.from_members if self.derived else None)


def _get(record: Any, field: str) -> Any:
    """Read a SampleRecord attribute, or the same key of a record loaded from JSON."""
    if isinstance(record, (SampleRecord, DerivedRecord)):  # the common cases first: a Mapping check is slow
        return getattr(record, field)
    return record.get(field) if isinstance(record, Mapping) else getattr(record, field)


def record_counts(records: Sequence[Any]) -> tuple[int, int]:
    """(ok, failed) among sample records, a stand-in (``is_stand_in``) in neither: it counts missing. What
    ``build_scorecard`` counts and ``pinbench check`` recounts."""
    n_ok = n_failed = 0
    for record in records:
        if _get(record, "status") == "ok":
            n_ok += 1
        elif not is_stand_in(record):
            n_failed += 1
    return n_ok, n_failed


def record_id(record: Any) -> str:
    """The id of a sample record, or of a derived record (``derived_id``), object or JSON alike."""
    kind = type(record)   # the common cases first: a scorecard reads each of 112k records' ids twice at 10x
    if kind is SampleRecord:
        return record.sample_id
    if kind is DerivedRecord:
        return record.derived_id
    return str(_get(record, "derived_id" if is_derived(record) else "sample_id"))


class RecordIndex:
    """A run's records split once into samples and derived records, each by id, with its position.

    Why: a scorecard has up to hundreds of metrics (CameraBench: 178, most of them one split's derived value)
    over up to tens of thousands of samples; scanning every record for every metric was 3 million calls.
    A metric with a cohort reads exactly its members; one without reads its kind of records once.
    """

    def __init__(self, records: Sequence[Any]) -> None:
        self.samples: list[Any] = []
        self.derived: list[Any] = []
        self.position: dict[tuple[bool, str], int] = {}
        for position, record in enumerate(records):
            derived = type(record) is DerivedRecord or (type(record) is not SampleRecord and is_derived(record))
            (self.derived if derived else self.samples).append(record)
            self.position.setdefault((derived, record_id(record)), position)
        self._records = list(records)

    def read_by(self, derived: bool, cohort: Collection[str] | None) -> list[Any]:
        """The records a metric reads, in record order: every sample (or derived record), or its cohort's."""
        if cohort is None:
            return self.derived if derived else self.samples
        found = sorted(p for i in cohort if (p := self.position.get((derived, i))) is not None)
        return [self._records[p] for p in found]


def _index(records: Sequence[Any] | RecordIndex) -> RecordIndex:
    return records if isinstance(records, RecordIndex) else RecordIndex(records)


def _with_reason(what: str, result: Mapping[str, Any], key: str, default: str = "") -> str:
    """``what``, followed by the reason the recipe recorded for this key (``result["errors"][key]``), else for
    the group it belongs to (``edge`` of ``edge/canny_f1_score``: a modality that was not evaluated), if any."""
    reason = _reason_of(result.get("errors"), key)
    return what + default if reason is None else f"{what}: {reason}"


def _reason_of(reasons: Any, key: str) -> str | None:
    """The reason ``reasons`` (a mapping, else none) gives for ``key``, else for the group it belongs to."""
    if not isinstance(reasons, Mapping):
        return None
    parts = key.split("/")
    for n in range(len(parts), 0, -1):
        reason = reasons.get("/".join(parts[:n]))
        if isinstance(reason, str) and reason:
            return reason
    return None


def never_computed(record: Any, key: str) -> str | None:
    """Why a record has no value of ``key`` because it was never computed (``result["never_computed"]`` names the
    key or its group: PAI-Bench-C's ``seg`` of a task whose seg rollout no run generated), else None.

    Why: such a value counts missing, as a stand-in's sample does (``is_stand_in``), not failed (charged to the
    model), while the record's other values are scored."""
    result = _get(record, "result")
    if not isinstance(result, Mapping) or result.get(key) is not None:
        return None
    return _reason_of(result.get(NEVER_COMPUTED), key)


def missing_reason(record: Any, key: str) -> str | None:
    """``never_computed``'s reason as the one line a reader sees (``missing: <why>``), else None: failures.tsv, a
    comparison and ``pinbench view`` say a value never computed is missing, not what its record lacks."""
    why = never_computed(record, key)
    return None if why is None else f"missing: {why}"


def _metric_value(spec: MetricSpec, record: Any) -> tuple[float | None, Any, str | None]:
    """(value, group, None) for a scored sample, or (None, None, reason) for a failed one."""
    if _get(record, "status") != "ok":
        return None, None, _get(record, "error") or f"sample status {_get(record, 'status')!r}"
    result = _get(record, "result")
    if not isinstance(result, Mapping):
        return None, None, "sample has no result"
    key = spec.result_key
    if key not in result:
        return None, None, _with_reason(f"no value for {key!r} in result", result, key)
    value = result[key]
    if value is None:
        return None, None, _with_reason(f"{key!r} is null", result, key, default=" (NaN or not computed)")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None, None, f"{key!r} is not a number: {clipped(repr(value), 60)}"
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        return None, None, f"{key!r} is not finite: {clipped(repr(value), 60)}"
    group = None
    if spec.group_by is not None:
        group = result.get(spec.group_by)
        if group is None:
            return None, None, f"no group field {spec.group_by!r} in result"
        if isinstance(group, bool) or not isinstance(group, (str, int)):
            return None, None, f"group field {spec.group_by!r} is not a string or integer: {clipped(repr(group), 60)}"
    return number, group, None


def aggregate(values: Sequence[float], aggregation: str, groups: Sequence[Any] | None = None) -> float | None:
    """Aggregate scored values; None when there are none. Order-independent (exact summation).

    ValueError when finite values aggregate to a non-finite number (a sum or a median midpoint beyond the
    float range): such a value is never written as a score.
    """
    if not values:
        return None
    try:
        value = _aggregate(values, aggregation, groups)
    except OverflowError:  # math.fsum of values near the float maximum
        value = math.inf
    if not math.isfinite(value):
        raise ValueError(f"the {aggregation} of {len(values)} finite values overflows the float range")
    return value


def _aggregate(values: Sequence[float], aggregation: str, groups: Sequence[Any] | None) -> float:
    if aggregation == "mean":
        return math.fsum(values) / len(values)
    if aggregation == "median":
        return float(statistics.median(values))
    if aggregation == "mean_then_median":
        if groups is None or len(groups) != len(values):
            raise ValueError("mean_then_median needs one group per value")
        by_group: dict[Any, list[float]] = {}
        for group, value in zip(groups, values, strict=True):
            by_group.setdefault(group, []).append(value)
        return float(statistics.median(math.fsum(v) / len(v) for v in by_group.values()))
    if aggregation == "none":
        if len(values) != 1:
            raise ValueError(f"aggregation 'none' takes exactly one value, got {len(values)}")
        return values[0]
    raise ValueError(f"unknown aggregation {aggregation!r}")


def score_metric(spec: MetricSpec, records: Sequence[Any] | RecordIndex, n_expected: int) -> MetricResult:
    """One metric of a scorecard from per-sample records (``pinbench check`` recounts with it too).

    ``records`` may be a ``RecordIndex`` built once for all metrics of a scorecard."""
    cohort = set(spec.sample_ids) if spec.sample_ids is not None else None
    expected = len(cohort) if cohort is not None else n_expected
    if spec.derived and cohort is None:
        raise ValueError(f"metric {spec.name!r}: a metric of derived records names them in sample_ids")
    if spec.aggregation == "none" and expected != 1:
        raise ValueError(f"metric {spec.name!r}: aggregation 'none' needs exactly one expected sample "
                         f"(pass sample_ids with one id), got n_expected={expected}")
    values: list[float] = []
    ids: list[str] = []
    groups: list[Any] = []
    failed: list[Failure] = []
    degenerate: list[Degenerate] = []
    seen: set[str] = set()
    for record in _index(records).read_by(spec.derived, cohort):
        value, group, error = _metric_value(spec, record)
        if error is not None and not spec.derived and (is_stand_in(record) or never_computed(record, spec.result_key)):
            continue   # never computed: missing, as a sample with no record
        sample_id = record_id(record)
        seen.add(sample_id)
        if error is not None:
            failed.append(Failure(sample_id, error))
        else:
            values.append(value)
            ids.append(sample_id)
            groups.append(group)
            reason = _degenerate_reason(_get(record, "result"), spec.result_key)
            if reason is not None:
                degenerate.append(Degenerate(sample_id, reason))
    n_missing = expected - len(values) - len(failed)
    if n_missing < 0:
        raise ValueError(f"metric {spec.name!r}: {len(values) + len(failed)} records for "
                         f"n_expected={expected}; n_expected must be the full task count")
    try:
        value = aggregate(values, spec.aggregation, groups if spec.group_by else None)
    except ValueError as exc:
        raise ValueError(f"metric {spec.name!r}: {exc}") from None
    return MetricResult(
        value=value, aggregation=spec.aggregation, direction=spec.direction, kind=spec.kind, primary=spec.primary,
        n_expected=expected, n_scored=len(values), n_failed=len(failed), n_missing=n_missing, failed=tuple(failed),
        unit=spec.unit, key=spec.key, group_by=spec.group_by,
        n_groups=len(set(groups)) if spec.group_by is not None else None,
        missing=tuple(i for i in spec.sample_ids if i not in seen) if cohort is not None else None,
        sample_ids=tuple(spec.sample_ids) if cohort is not None else None,
        records=DERIVED_RECORDS if spec.derived else None,
        interval=aggregate_interval(values, ids, spec.aggregation, groups if spec.group_by else None),
        degenerate=tuple(degenerate),
        from_members=spec.from_members,
    )


def _degenerate_reason(result: Mapping[str, Any], key: str) -> str | None:
    """The reason a scored record gives for its ``key`` being defined by a rule (``result["degenerate"][key]``)."""
    marked = result.get(DEGENERATE)
    reason = marked.get(key) if isinstance(marked, Mapping) else None
    return " ".join(reason.split()) if isinstance(reason, str) and reason.strip() else None


def samples_text(card: Scorecard) -> str:
    """How a scorecard's samples fared, in words: "4/4 samples ok, 0 failed, 0 missing"; when a metric failed for a
    sample whose record is ok, "stored" for "ok" and how many metrics failed for how many samples (a PAI-Bench-C run
    whose every metric failed said "4/4 samples ok, 0 failed" beside "failed: 4 sample(s) in 10 metric(s)")."""
    samples = card.samples
    failing = {name: {f.sample_id for f in m.failed} for name, m in card.metrics.items()
               if m.failed and not m.reads_derived}
    ids = set().union(*failing.values())
    if len(ids) <= samples.n_failed:   # every failed metric's sample is a failed record: "ok" holds
        return f"{samples.n_ok}/{samples.n_expected} samples ok, {samples.n_failed} failed, {samples.n_missing} missing"
    return (f"{samples.n_ok}/{samples.n_expected} samples stored, {samples.n_failed} failed, {samples.n_missing} "
            f"missing, but {counted(len(failing), 'metric')} failed for {counted(len(ids), 'sample')}")


def degenerate_notes(card: Scorecard) -> list[str]:
    """One line per metric with degenerate values, an aggregate's counted (``14 of its 15 values``), and one line per
    reason for the single-value metrics (a split's own AP): what the console, the diff and the report say."""
    notes: list[str] = []
    single: dict[str, list[str]] = {}
    for name, metric in card.metrics.items():
        reasons = list(dict.fromkeys(d.reason for d in metric.degenerate))
        if not reasons:
            continue
        if metric.n_scored > 1:
            count = len(metric.degenerate)
            notes.append(f"{name}: {count} of its {metric.n_scored} values {'is' if count == 1 else 'are'} "
                         f"degenerate ({'; '.join(reasons)})")
        else:
            for reason in reasons:
                single.setdefault(reason, []).append(name)
    for reason, names in single.items():
        shown = ", ".join(names[:_SHOWN]) + (f", ... {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")
        are = "is" if len(names) == 1 else "are"
        notes.append(f"{counted(len(names), 'single-value metric')} {are} degenerate ({reason}): {shown}")
    return notes


def metric_samples(name: str, metric: MetricResult, records: Sequence[Any] | RecordIndex
                   ) -> tuple[dict[str, tuple[float, Any]], dict[str, str]]:
    """A scorecard metric's per-sample values read back from its run's records, the way it was scored.

    Returns ``({sample_id: (value, group)}, {sample_id: reason})`` for the metric's own samples only (its
    cohort when it has one), so a report or a comparison never mixes in another cohort's samples. The reasons are
    of every sample without a value: a failed one's error, or, for one never computed (a merge's stand-in, a value
    ``never_computed``), ``missing: <why>``, so that no reader takes it for a failure of the model.
    """
    spec = MetricSpec(name, metric.aggregation, group_by=metric.group_by, key=metric.key, direction=metric.direction)
    cohort = set(metric.sample_ids) if metric.sample_ids is not None else None
    scored: dict[str, tuple[float, Any]] = {}
    failed: dict[str, str] = {}
    for record in _index(records).read_by(metric.reads_derived, cohort):
        sample_id = record_id(record)
        value, group, error = _metric_value(spec, record)
        if error is not None:
            failed[sample_id] = (None if metric.reads_derived else missing_reason(record, spec.result_key)) or error
        else:
            scored[sample_id] = (value, group)
    return scored, failed


def derive_status(metrics: Mapping[str, MetricResult]) -> tuple[str, list[str]]:
    """(status, reasons) from per-metric counts; the single rule every scorecard obeys."""
    return _status({name: (m.n_expected, m.n_scored, m.n_failed, m.n_missing) for name, m in metrics.items()})


def _status(counts: Mapping[str, tuple[int, int, int, int]]) -> tuple[str, list[str]]:
    """``derive_status`` of (n_expected, n_scored, n_failed, n_missing) per metric, as a file's or a built card's."""
    reasons = []
    for name, (n_expected, n_scored, n_failed, n_missing) in counts.items():
        if n_expected == 0:
            reasons.append(f"{name}: n_expected is 0")
        elif n_scored != n_expected:
            reasons.append(f"{name}: {n_scored}/{n_expected} scored ({n_failed} failed, {n_missing} missing)")
    if not any(n_scored > 0 for _, n_scored, _, _ in counts.values()):
        return "failed", reasons or ["no metric scored any sample"]
    return ("partial" if reasons else "complete"), reasons


@announced(lambda **kw: f"scorecard: {counted(len(kw['metrics']), 'metric')} with 95% intervals over "
                        f"{counted(len(kw['records']), 'record')}")
def build_scorecard(*, recipe: str, recipe_version: str, checkpoint: str, mode: str,
                    metrics: Sequence[MetricSpec], records: Sequence[Any], n_expected: int,
                    provenance: Mapping[str, Any], config: Mapping[str, Any],
                    timings: Mapping[str, float], extra: Mapping[str, Any] | None = None,
                    samples_path: str | None = DEFAULT_SAMPLES_PATH, derived: Sequence[Any] = (),
                    derived_path: str = DERIVED_PATH) -> Scorecard:
    """Aggregate per-sample records into a scorecard (validate / write with write_scorecard).

    ``n_expected`` is the task count the recipe defines for this mode (all 600 tasks of a full run
    even when this process saw one shard), never the number of records it happened to get.
    ``records`` are SampleRecords (or their JSON dicts) in task order; ``derived`` the derived records
    (``pinbench.core.derived``) that the ``derived`` metrics read, counted apart from the samples.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    if not metrics:
        raise ValueError("a scorecard needs at least one metric")
    if n_expected < 0:
        raise ValueError(f"n_expected must be >= 0, got {n_expected}")
    names = [m.name for m in metrics]
    undescribed = [m.name for m in metrics if m.aggregation is None or m.direction is None]
    if undescribed:
        raise ValueError(f"metric(s) {', '.join(undescribed)} have no declared aggregation/direction "
                         "(declare them in the recipe's recipe.yaml)")
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate metric names in {names}")
    if any(is_derived(r) for r in records) or not all(is_derived(r) for r in derived):
        raise ValueError("derived records go in derived=, sample records in records=")
    ids = [record_id(r) for r in records]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"duplicate sample ids in records: {', '.join(dupes[:5])}")
    derived_ids = [record_id(r) for r in derived]
    clash = sorted({i for i, n in Counter(derived_ids).items() if n > 1} | (set(derived_ids) & set(ids)))
    if clash:
        raise ValueError(f"derived record ids repeat or name a sample: {', '.join(clash[:5])}")
    n_ok, n_failed = record_counts(records)
    n_missing = n_expected - n_ok - n_failed   # a stand-in's sample too (``is_stand_in``)
    if n_expected < len(records):
        raise ValueError(f"{len(records)} records for n_expected={n_expected}; "
                         "n_expected must be the full task count")

    index = RecordIndex([*records, *derived])
    per_metric = {spec.name: score_metric(spec, index, n_expected) for spec in metrics}
    status, reasons = derive_status(per_metric)
    derived_counts = None
    if derived or any(spec.derived for spec in metrics):
        n_derived_ok = sum(1 for r in derived if _get(r, "status") == "ok")
        derived_counts = DerivedCounts(n_records=len(derived), n_ok=n_derived_ok, n_failed=len(derived) - n_derived_ok,
                                       path=derived_path)
    return Scorecard(
        schema_version=SCHEMA_VERSION, recipe=recipe, recipe_version=recipe_version, checkpoint=checkpoint, mode=mode,
        status=status, status_reasons=tuple(reasons),
        samples=SampleCounts(n_expected=n_expected, n_ok=n_ok, n_failed=n_failed, n_missing=n_missing,
                             path=samples_path),
        metrics=per_metric, provenance=to_jsonable(provenance), config=to_jsonable(config),
        timings=to_jsonable(timings), derived=derived_counts,
        extra=to_jsonable(extra) if extra is not None else None,
    )


def _count_errors(card: Mapping[str, Any]) -> list[str]:
    """Arithmetic the schema cannot express: counts add up, null iff nothing scored, status fits."""
    errors = []
    s = card["samples"]
    if s["n_ok"] + s["n_failed"] + s["n_missing"] != s["n_expected"]:
        errors.append("samples: n_ok + n_failed + n_missing != n_expected")
    derived = card.get("derived")
    if derived is not None and derived["n_ok"] + derived["n_failed"] != derived["n_records"]:
        errors.append("derived: n_ok + n_failed != n_records")
    for name, m in card["metrics"].items():
        if m["n_scored"] + m["n_failed"] + m["n_missing"] != m["n_expected"]:
            errors.append(f"metric {name}: n_scored + n_failed + n_missing != n_expected")
        if len(m["failed"]) != m["n_failed"]:
            errors.append(f"metric {name}: {len(m['failed'])} failed entries but n_failed={m['n_failed']}")
        if "missing" in m and len(m["missing"]) != m["n_missing"]:
            errors.append(f"metric {name}: {len(m['missing'])} missing ids but n_missing={m['n_missing']}")
        if m.get("records") == DERIVED_RECORDS and (derived is None or m.get("sample_ids") is None):
            errors.append(f"metric {name}: reads derived records, but the scorecard "
                          + ("has no derived block" if derived is None else "names none in its sample_ids"))
        if m.get("sample_ids") is not None:
            errors += _cohort_errors(name, m)
        if (m["value"] is None) != (m["n_scored"] == 0):
            errors.append(f"metric {name}: value must be null exactly when nothing scored")
        interval = m.get("interval")
        if interval and interval["low"] is not None:
            bounds = (interval["low"], interval["high"])
            if not all(math.isfinite(b) for b in bounds) or bounds[0] > bounds[1]:
                errors.append(f"metric {name}: interval [{bounds[0]}, {bounds[1]}] is not finite low <= high")
            if m["value"] is None:
                errors.append(f"metric {name}: an interval without a value")
    status, _ = _status({name: (m["n_expected"], m["n_scored"], m["n_failed"], m["n_missing"])
                         for name, m in card["metrics"].items()})
    if status != card["status"]:
        errors.append(f"status {card['status']!r} contradicts the counts (they give {status!r})")
    return errors


def non_finite_problem(value: Any, where: str = "$") -> str | None:
    """Where the first NaN or infinity in a JSON-like value sits (``$.metrics.f1.value``), or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where} is not finite ({value})"
    if isinstance(value, Mapping):
        for key, item in value.items():
            found = non_finite_problem(item, f"{where}.{key}")
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = non_finite_problem(item, f"{where}[{i}]")
            if found:
                return found
    return None


def _cohort_errors(name: str, m: Mapping[str, Any]) -> list[str]:
    """A cohort metric's ids: as many as it expects, and every sample it names failed or missing among them."""
    ids = m["sample_ids"]
    if len(ids) != m["n_expected"]:
        return [f"metric {name}: {len(ids)} sample_ids but n_expected={m['n_expected']}"]
    members = set(ids)
    outside = [f["sample_id"] for f in m["failed"] if f["sample_id"] not in members]
    outside += [i for i in m.get("missing", []) if i not in members]
    return [f"metric {name}: sample {outside[0]!r} is named but not in its sample_ids"] if outside else []


def outside_run_dir(name: str) -> bool:
    """Whether a file name a scorecard gives (``samples.path``, ``derived.path``) is no name inside its run
    directory: absolute, with ``..``, with a backslash, or with a NUL (no file has one: opening it raised)."""
    relative = PurePosixPath(name)
    return relative.is_absolute() or ".." in relative.parts or "\\" in name or "\0" in name


def _outside_problem(card: Mapping[str, Any]) -> str | None:
    """Why: a rerun wrote the run's records to the file such a ``samples.path`` named (another run's
    samples.jsonl, any file), and view, compare, report and table read it as this run's."""
    for block in ("samples", "derived"):
        name = (card.get(block) or {}).get("path")
        if isinstance(name, str) and outside_run_dir(name):
            return f"{block}.path {name!r} is not a file inside the run directory"
    return None


def validate_scorecard(card: Mapping[str, Any], *, path: Path | str | None = None) -> None:
    """Raise ScorecardError (one line) unless ``card`` matches the schema, holds finite numbers only (values,
    timings, provenance alike), names its files inside its run directory and its counts add up."""
    problem = schema_error("scorecard", card)
    if problem is None:
        problem = (non_finite_problem(card) or recipe_name_problem(card["recipe"])
                   or checkpoint_name_problem(card["checkpoint"]) or _outside_problem(card))
    if problem is None:
        errors = _count_errors(card)
        problem = errors[0] if errors else None
    if problem is not None:
        raise ScorecardError(path, problem)


def write_scorecard(card: Scorecard, path: Path | str) -> Path:
    """Scrub secrets, validate, then write atomically; returns the path."""
    path = Path(path)
    clean = scrub(card.to_json())
    validate_scorecard(clean, path=path)
    return write_atomic(path, json.dumps(clean, indent=2, allow_nan=False) + "\n")


def scorecard_file(path: Path | str) -> Path:
    """The scorecard a command reads for ``path``: a run directory's ``scorecard.json``, or ``path`` itself."""
    path = Path(path)
    return path / "scorecard.json" if path.is_dir() else path


def load_scorecard(path: Path | str) -> Scorecard:
    """Read and validate a scorecard (schema and counts, on its JSON); ScorecardError naming the file on any
    problem."""
    path = Path(path)
    try:
        text = read_regular_bytes(path).decode("utf-8")
    except MissingFile as exc:   # a run directory without one yet said only "file not found"
        if not os.path.lexists(path.parent if path.name == "scorecard.json" else path):   # a mistyped run: no "file"
            raise ScorecardError(path, f"no such run directory or scorecard file{mistyped_path(path)}") from None
        unfinished = (path.parent / IDENTITY_FILE).is_file()
        raise ScorecardError(path, exc.reason + (f": no scorecard yet (its run is still going, was stopped, or its "
                                                 f"shards await the merge: pinbench status {path.parent})"
                                                 if unfinished else "")) from None
    except FileError as exc:   # a folder, unreadable
        raise ScorecardError(path, exc.reason) from None
    except UnicodeDecodeError as exc:   # a video given where a run belongs said only "not UTF-8 text (byte 43)"
        raise _not_a_scorecard(path, f"not UTF-8 text, byte {exc.start}") from None
    if text.strip() and not text.lstrip().startswith("{"):   # markdown, a list: no damaged scorecard either
        raise _not_a_scorecard(path, "not a JSON object")
    try:
        card = loads_finite_json(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" and text[:exc.pos].rstrip().endswith("}"):   # samples.jsonl, requests.jsonl
            raise _not_a_scorecard(path, f"JSON Lines: a second value at line {exc.lineno}; a scorecard is one "
                                         "object, a run's scorecard.json") from None
        # as every file's (an empty one: "no JSON value: the file is empty", was "not a scorecard")
        raise ScorecardError(path, json_error(exc)) from None
    except ValueError as exc:  # NaN, Infinity, 1e999
        raise ScorecardError(path, f"{exc} (a scorecard holds finite numbers only)") from None
    validate_scorecard(card, path=path)
    try:
        return Scorecard.from_json(card)
    except ValueError as exc:  # the schema admits it but the types do not: a bug here, said in one line
        raise ScorecardError(path, str(exc)) from None


def _not_a_scorecard(path: Path, why: str) -> ScorecardError:
    """A file that is no scorecard at all (a video given where a run belongs), said so rather than how it fails."""
    return ScorecardError(path, f"not a scorecard ({why})")


def run_derived(run_dir: Path, card: Scorecard, error: type[Exception] = ValueError) -> list[DerivedRecord]:
    """The derived records a scorecard in ``run_dir`` names ([] when it names none); ``error`` (one line) when
    the file is not inside the run directory, absent or bad."""
    if card.derived is None:
        return []
    name = str(card.derived.path)
    relative = PurePosixPath(name)
    path = Path(run_dir) / relative
    if relative.is_absolute() or ".." in relative.parts or "\\" in name:
        raise error(f"{run_dir}: the scorecard's derived.path {name!r} is not a file inside the run directory")
    if not path.is_file():
        raise error(f"{path}: not a file; the scorecard names it as its derived records")
    try:
        return read_derived(path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise error(" ".join(str(exc).split())) from None
