"""``pinbench compare RUN_A RUN_B``: is B better or worse than A by more than the benchmark's sampling noise?

Two runs of one recipe version (two checkpoints, or one checkpoint twice) are matched sample by sample:
per metric only the samples scored in both count (a paired comparison: what both runs find easy or hard
cancels, so the interval is narrower than comparing two independent scorecards), and every sample
scored in only one of them, or in neither, is named. Per metric: the value of each run over the matched
samples, B - A with its 95% paired bootstrap interval (``pinbench.core.uncertainty``), the direction the
scorecard copied from the recipe's declaration, and a verdict: ``better`` or ``worse`` when the interval
excludes 0, ``within noise`` when it contains 0, ``not judged`` when there is no interval (one suite-level
value, or fewer than two matched units) or a run's scorecard has no value for it (``not computed in B``: its value
over the matched samples is one that run never reported); each reason a metric is not judged is said once, naming
its metrics, and so is each verdict's interval over fewer than ``FEW_UNITS`` units (a note: such an
interval undercovers).

A derived value the recipe declares ``from_members`` (CameraBench's per-split AP and ROC AUC, per-skill
accuracies) is recomputed over its members matched in both runs and judged by resampling those members, with the
same paired bootstrap (``pinbench.core.members_bootstrap``); its unmatched members are named like samples.
Each run's records are indexed once (``RecordIndex``) and every metric reads its own through that index.

Exit codes, in the spirit of ``diff``:

* 0 (EXIT_SAME): every judged metric is within noise;
* 1 (EXIT_DIFFERENT): a metric differs beyond noise (with ``fail_on="worse"``: only a worse one counts);
* 2 (EXIT_INCOMPLETE): a run is not complete, a sample is scored in only one run or in neither, or a
  metric is in one run only; the verdicts are then about the matched samples only;
* 3 (EXIT_MISMATCH): the runs are of different recipes or recipe versions: nothing is compared.

The highest code that applies wins.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from pinbench.core.derived import DerivedRecord, derived_problems
from pinbench.core.files import aligned, counted, no_file_at, read_regular_bytes
from pinbench.core.generation import Generated, generation_differences
from pinbench.core.members_bootstrap import RANKED, MemberSeries, member_differences
from pinbench.core.provenance import redact
from pinbench.core.reference import EXIT_FAIL, EXIT_INCOMPLETE, EXIT_MISMATCH, EXIT_PASS
from pinbench.core.reference import other_inputs as input_differences
from pinbench.core.scorecard import (
    MetricResult,
    RecordIndex,
    Scorecard,
    aggregate,
    load_scorecard,
    metric_samples,
    run_derived,
    scorecard_file,
)
from pinbench.core.uncertainty import FEW_UNITS, Difference, describe, difference_interval, has_interval

EXIT_SAME, EXIT_DIFFERENT = EXIT_PASS, EXIT_FAIL
VERDICT_NAMES = {EXIT_SAME: "SAME", EXIT_DIFFERENT: "DIFFERENT", EXIT_INCOMPLETE: "INCOMPLETE",
                 EXIT_MISMATCH: "MISMATCH"}
FAIL_ON = ("any", "worse")
NAMES_SHOWN = 50


class CompareError(ValueError):
    """A run cannot be compared (one line naming the file and what is wrong)."""


@dataclass
class Run:
    """A scorecard and its own per-sample records (and derived records, ``pinbench.core.derived``, when it has any),
    indexed once: by kind and id (``index``), every sample record by id, every derived record by id."""

    path: Path
    card: Scorecard
    records: list[Any]
    index: RecordIndex = field(init=False)
    samples: dict[str, Any] = field(init=False)
    derived: dict[str, DerivedRecord] = field(init=False)
    _member_results: dict[str, dict[str, Mapping[str, Any] | str]] = field(init=False, default_factory=dict)
    _member_values: dict[tuple[str, str, str | None], MemberValues] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.index = RecordIndex(self.records)
        self.samples, self.derived = {}, {}
        for (derived, i), position in self.index.position.items():  # the first record of an id, as the index reads it
            (self.derived if derived else self.samples)[i] = self.records[position]

    @property
    def label(self) -> str:
        return f"{self.card.checkpoint} ({self.card.mode}) {self.path}"

    def member_values(self, derived_id: str, field_name: str, label: str | None) -> MemberValues:
        """What each member of a derived record contributes to a statistic of ``field_name`` (and ``label``): its
        (value, label), or why nothing; read once per record and field (AP and ROC AUC share them), each member's
        record once per derived record (a skill's five accuracies share it)."""
        key = (derived_id, field_name, label)
        found = self._member_values.get(key)
        if found is None:
            results = self._member_results.get(derived_id)
            if results is None:
                results = self._member_results[derived_id] = {
                    i: _member_result(self.samples.get(i)) for i in self.derived[derived_id].members}
            found = self._member_values[key] = MemberValues({}, {})
            for i, result in results.items():
                value = result if type(result) is str else _member_value(result, field_name, label)
                if type(value) is str:
                    found.failed[i] = value
                else:
                    found.scored[i] = value
        return found


@dataclass(frozen=True)
class MemberValues:
    """A derived record's members as one statistic reads them: (value, label) of each it can use (label 0 without
    a label field), why not for each other."""

    scored: dict[str, tuple[float, int]]
    failed: dict[str, str]


def samples_file(scorecard: Path, card: Scorecard) -> Path:
    """The samples.jsonl the scorecard names, which must exist: without it a command would read a scorecard alone
    and say nothing of the records it lacks."""
    name = card.samples.path
    if not name:
        raise CompareError(f"{scorecard}: names no samples file (its per-sample records are needed here)")
    samples = scorecard.parent / name
    if (kind := no_file_at(samples)) is not None:
        raise CompareError(f"{samples}: {'not a file' if kind == 'nothing' else kind}; it holds the per-sample records "
                           "the scorecard names (needed here)")
    return samples


def load_run(path: Path | str) -> Run:
    """A run directory or its scorecard.json, with the samples.jsonl the scorecard names."""
    from pinbench.core.runner import parse_merged

    path = Path(path)
    scorecard = scorecard_file(path)
    card = load_scorecard(scorecard)
    samples = samples_file(scorecard, card)
    try:
        records = parse_merged(read_regular_bytes(samples), samples)   # each record keeps its line: hashed as read
    except UnicodeDecodeError:
        raise CompareError(f"{samples}: not UTF-8 text") from None
    derived = run_derived(scorecard.parent, card, CompareError)
    _check_members(samples, card, records, derived)
    run = Run(scorecard, card, [*records, *derived])
    _check_records_agree(run)
    return run


def _check_members(samples: Path, card: Scorecard, records: Sequence[Any], derived: Sequence[DerivedRecord]) -> None:
    """The derived records whose statistics are recomputed from their members (``from_members``) must have been
    computed from these very member records: an edited samples.jsonl had given a split's AP from the edited scores
    beside the scorecard's own, with no word."""
    resampled = {m.sample_ids[0] for m in card.metrics.values()
                 if m.from_members is not None and m.reads_derived and m.sample_ids and len(m.sample_ids) == 1}
    problems = derived_problems([record for record in derived if record.derived_id in resampled], records)
    if problems:
        raise CompareError(f"{samples}: {problems[0]}; the samples file is not the one the scorecard was computed "
                           "from")


def _check_records_agree(run: Run) -> None:
    """The records must be the ones the scorecard was computed from (not a newer or older samples.jsonl)."""
    for name, metric in run.card.metrics.items():
        scored, _ = metric_samples(name, metric, run.index)
        values = [v for v, _ in scored.values()]
        groups = [g for _, g in scored.values()] if metric.group_by else None
        again = aggregate(values, metric.aggregation, groups)
        same = (again is None and metric.value is None) or (
            again is not None and metric.value is not None
            and math.isclose(again, metric.value, rel_tol=1e-9, abs_tol=1e-12))
        if len(scored) != metric.n_scored or not same:
            raise CompareError(f"{run.path}: metric {name}: its samples file gives {len(scored)} scored samples "
                               f"and value {again}, the scorecard {metric.n_scored} and {metric.value}; "
                               "the samples file is not the one this scorecard was computed from")


NOT_COMPUTED = "not computed"


@dataclass
class MetricComparison:
    name: str
    direction: str
    aggregation: str
    kind: str
    primary: bool
    n_matched: int
    n_cohort: int  # samples of the metric in either run (scored, failed or missing)
    only_a: dict[str, str]  # scored in A only: sample id -> why B has no value
    only_b: dict[str, str]
    neither: dict[str, str]  # in the metric's samples, scored in neither run
    difference: Difference | None
    verdict: str  # better | worse | within noise | not judged
    reason: str = ""
    computed: tuple[bool, bool] = (True, True)   # whether A's and B's scorecard hold a value for it

    @property
    def unmatched(self) -> int:
        return len(self.only_a) + len(self.only_b) + len(self.neither)

    def shown(self) -> tuple[float | str | None, float | str | None]:
        """A and B as a comparison shows them: over the matched samples, or ``NOT_COMPUTED`` where the run's
        scorecard has no value (a failed member failed the derived metric: the matched members gave a number the
        run never reported)."""
        d = self.difference
        values = (d.value_a, d.value_b) if d is not None else (None, None)
        return (values[0] if self.computed[0] else NOT_COMPUTED, values[1] if self.computed[1] else NOT_COMPUTED)


@dataclass
class Comparison:
    a: Run
    b: Run
    metrics: list[MetricComparison]
    problems: list[str]
    notes: list[str]
    exit_code: int
    fail_on: str = "any"
    header: dict[str, str] = field(default_factory=dict)


def _why_missing(sample_id: str, failed: Mapping[str, str], run: str) -> str:
    return f"{run}: {failed[sample_id]}" if sample_id in failed else f"{run}: no record"


def _verdict(diff: Difference, direction: str) -> tuple[str, str]:
    if not has_interval(diff.interval):
        return "not judged", diff.interval.reason or "no interval"
    if diff.low <= 0 <= diff.high:
        return "within noise", ""
    b_higher = diff.low > 0
    return ("better" if b_higher == (direction == "higher") else "worse"), ""


def _compare_metric(name: str, ma: MetricResult, mb: MetricResult, a: Run, b: Run,
                    problems: list[str]) -> MetricComparison:
    scored_a, failed_a = metric_samples(name, ma, a.index)
    scored_b, failed_b = metric_samples(name, mb, b.index)
    cohort = list(dict.fromkeys([*(ma.sample_ids if ma.sample_ids is not None else a.samples),
                                 *(mb.sample_ids if mb.sample_ids is not None else b.samples)]))
    matched = [i for i in cohort if i in scored_a and i in scored_b]
    if ma.group_by:
        regrouped = [i for i in matched if scored_a[i][1] != scored_b[i][1]]
        if regrouped:
            problems.append(f"{name}: {counted(len(regrouped), 'sample')} {'is' if len(regrouped) == 1 else 'are'} in "
                            f"different {ma.group_by} groups in the two runs (e.g. {regrouped[0]}); they are left out")
            left_out = set(regrouped)
            matched = [i for i in matched if i not in left_out]
    matched_set = set(matched)
    only_a = {i: _why_missing(i, failed_b, "B") for i in cohort if i in scored_a and i not in matched_set}
    only_b = {i: _why_missing(i, failed_a, "A") for i in cohort if i in scored_b and i not in matched_set}
    neither = {i: "; ".join((_why_missing(i, failed_a, "A"), _why_missing(i, failed_b, "B")))
               for i in cohort if i not in scored_a and i not in scored_b}
    groups = {i: scored_a[i][1] for i in matched} if ma.group_by else None
    diff = difference_interval({i: scored_a[i][0] for i in matched}, {i: scored_b[i][0] for i in matched},
                               ma.aggregation, groups)
    verdict, reason = _verdict(diff, ma.direction)
    return MetricComparison(name=name, direction=ma.direction, aggregation=ma.aggregation, kind=ma.kind,
                            primary=ma.primary, n_matched=len(matched), n_cohort=len(cohort), only_a=only_a,
                            only_b=only_b, neither=neither, difference=diff, verdict=verdict, reason=reason)


@dataclass
class _FromMembers:
    """A derived metric compared over its members: who matched, who did not and why, and what is resampled."""

    name: str
    metric: MetricResult
    cohort: list[str]
    only_a: dict[str, str]
    only_b: dict[str, str]
    neither: dict[str, str]
    series: MemberSeries

    def compared(self, diff: Difference) -> MetricComparison:
        verdict, reason = _verdict(diff, self.metric.direction)
        m = self.metric
        return MetricComparison(name=self.name, direction=m.direction, aggregation=m.aggregation, kind=m.kind,
                                primary=m.primary, n_matched=len(self.series.members), n_cohort=len(self.cohort),
                                only_a=self.only_a, only_b=self.only_b, neither=self.neither, difference=diff,
                                verdict=verdict, reason=reason)


def _member_result(record: Any) -> Mapping[str, Any] | str:
    """A member's result, or why it has none."""
    if record is None:
        return "no record"
    if record.status != "ok":
        return record.error or f"sample status {record.status!r}"
    result = record.result
    return result if type(result) is dict or isinstance(result, Mapping) else {}  # the ABC check costs 1 µs


def _member_value(result: Mapping[str, Any], field_name: str, label: str | None) -> tuple[float, int] | str:
    """(value, label) a member's result contributes, or why it contributes none."""
    value = result.get(field_name)
    kind = type(value)   # exact types first: isinstance costs more, x 50,788 members at CameraBench's size
    if not (kind is float or kind is int or (kind is not bool and isinstance(value, (int, float)))) or not \
            math.isfinite(value):
        return f"{field_name!r} is not a finite number: {value!r:.40}"
    if label is None:
        return float(value), 0
    tag = result.get(label)
    if type(tag) is bool or tag not in (0, 1):
        return f"label {label!r} is not 0 or 1: {tag!r:.40}"
    return float(value), int(tag)


def _from_members(name: str, ma: MetricResult, mb: MetricResult, a: Run, b: Run) -> _FromMembers | None:
    """A derived metric both scorecards declare ``from_members`` for, over the members of its derived record in
    each run; None when it cannot be (an older scorecard, no derived record): it is then compared as one value."""
    statistic = ma.from_members
    ids = ma.sample_ids
    if (statistic is None or statistic != mb.from_members or not (ma.reads_derived and mb.reads_derived)
            or ids is None or len(ids) != 1 or ids != mb.sample_ids):
        return None
    record_a, record_b = a.derived.get(ids[0]), b.derived.get(ids[0])
    if record_a is None or record_b is None:
        return None
    cohort = list(dict.fromkeys([*record_a.members, *record_b.members]))
    runs = []
    for run in (a, b):
        values = run.member_values(ids[0], statistic.field, statistic.label)
        failed = values.failed
        if len(values.scored) + len(failed) != len(cohort):   # a member of the other run's record only
            failed = {**failed, **{i: f"not a member of its {ids[0]}" for i in cohort
                                   if i not in values.scored and i not in failed}}
        runs.append((values.scored, failed))
    (scored_a, failed_a), (scored_b, failed_b) = runs
    if len(scored_a) == len(scored_b) == len(cohort):   # every member scored in both runs (no failure to name)
        matched, only_a, only_b, neither = sorted(cohort), {}, {}, {}
    else:
        matched = sorted(i for i in cohort if i in scored_a and i in scored_b)
        only_a = {i: f"B: {failed_b[i]}" for i in cohort if i in scored_a and i in failed_b}
        only_b = {i: f"A: {failed_a[i]}" for i in cohort if i in scored_b and i in failed_a}
        neither = {i: f"A: {failed_a[i]}; B: {failed_b[i]}" for i in cohort if i in failed_a and i in failed_b}
    ranked = statistic.statistic in RANKED

    def columns(scored: Mapping[str, tuple[float, int]]) -> tuple[np.ndarray, np.ndarray | None]:
        values = [scored[i] for i in matched]
        return (np.array([v for v, _ in values], dtype=np.float64),
                np.array([tag for _, tag in values], dtype=np.int64) if ranked else None)

    (values_a, labels_a), (values_b, labels_b) = columns(scored_a), columns(scored_b)
    series = MemberSeries(statistic, tuple(matched), values_a, values_b, labels_a, labels_b)
    return _FromMembers(name, ma, cohort, only_a, only_b, neither, series)


def _computed(row: MetricComparison, computed: tuple[bool, bool]) -> MetricComparison:
    """``row`` with whether each run's scorecard holds its value; one a run did not compute is not judged, saying
    which (its value over the matched samples is a number that run never reported: a verdict on it judged nothing
    the run claims)."""
    uncomputed = " or ".join(label for label, done in zip("AB", computed, strict=True) if not done)
    if not uncomputed:
        return replace(row, computed=computed)
    return replace(row, computed=computed, verdict="not judged", reason=f"not computed in {uncomputed}")


def other_inputs(a: Run, b: Run) -> list[str]:
    """The samples of two runs of one checkpoint whose task's input hash differs (an input's content or an option:
    never its path), named: a score file edited in place or a video re-encoded under its own name changes no option
    and no provenance, and a comparison of those runs had said nothing of why their numbers differ. Two checkpoints'
    runs score other rollouts by design (PAI-Bench-C's tasks name theirs): nothing to say."""
    if a.card.checkpoint != b.card.checkpoint:
        return []
    return input_differences(*({i: record.input_hash for i, record in run.samples.items()} for run in (a, b)),
                             ("A", "B"))


def compare_runs(a: Run, b: Run, *, fail_on: str = "any") -> Comparison:
    """Compare two loaded runs; see the module docstring for the verdicts and exit codes."""
    if fail_on not in FAIL_ON:
        raise ValueError(f"fail_on {fail_on!r} is not one of {', '.join(FAIL_ON)}")
    ca, cb = a.card, b.card
    problems: list[str] = []
    notes: list[str] = []
    header = {"A": f"{ca.recipe} {ca.recipe_version}, {a.label}, {ca.status}",
              "B": f"{cb.recipe} {cb.recipe_version}, {b.label}, {cb.status}"}
    for key in ("recipe", "recipe_version"):
        if getattr(ca, key) != getattr(cb, key):
            problems.append(f"{key} differs: A is {getattr(ca, key)!r}, B is {getattr(cb, key)!r}; runs of one "
                            "recipe version only")
    if problems:
        return Comparison(a, b, [], problems, notes, EXIT_MISMATCH, fail_on, header)
    if a.path.resolve() == b.path.resolve():
        notes.append(f"A and B are the same scorecard ({a.path}): every difference is 0")
    notes += [f"generation: {line}" for line in
              generation_differences([("A", Generated.of(ca.provenance)), ("B", Generated.of(cb.provenance))])]
    notes += [f"ran differently: {line}" for line in ca.ran_differently(cb, ("A", "B"))]
    notes += other_inputs(a, b)
    code = EXIT_SAME
    for run, label in ((ca, "A"), (cb, "B")):
        if run.status != "complete":
            problems.append(f"run {label} is {run.status}: verdicts cover the matched samples only")
            code = EXIT_INCOMPLETE
    for name in ca.metrics:
        if name not in cb.metrics:
            problems.append(f"{name}: in run A only")
            code = EXIT_INCOMPLETE
    for name in cb.metrics:
        if name not in ca.metrics:
            problems.append(f"{name}: in run B only")
            code = EXIT_INCOMPLETE
        if name in ca.metrics and ca.metrics[name].direction != cb.metrics[name].direction:
            problems.append(f"{name}: direction differs between the scorecards; the recipe declaration changed")
            code = EXIT_MISMATCH
    if code == EXIT_MISMATCH:
        return Comparison(a, b, [], problems, notes, code, fail_on, header)
    found: list[MetricComparison | _FromMembers] = []
    for name in ca.metrics:
        if name in cb.metrics:
            ma, mb = ca.metrics[name], cb.metrics[name]
            found.append(_from_members(name, ma, mb, a, b) or _compare_metric(name, ma, mb, a, b, problems))
    pending = [row for row in found if isinstance(row, _FromMembers)]
    resampled = dict(zip((id(row) for row in pending), member_differences([row.series for row in pending]),
                         strict=True))
    rows = [_computed(row.compared(resampled[id(row)]) if isinstance(row, _FromMembers) else row,
                      (ca.metrics[row.name].value is not None, cb.metrics[row.name].value is not None))
            for row in found]
    not_judged: dict[str, list[str]] = {}
    undercovers: dict[str, list[str]] = {}   # a verdict on fewer than FEW_UNITS units, by its interval's note
    for row in rows:
        if row.unmatched:
            problems.append(f"{row.name}: {row.n_matched} of {row.n_cohort} samples matched "
                            f"({len(row.only_a)} scored in A only, {len(row.only_b)} in B only, "
                            f"{len(row.neither)} in neither)")
            code = max(code, EXIT_INCOMPLETE)
        if row.verdict == "not judged":
            not_judged.setdefault(row.reason, []).append(row.name)
            continue
        if row.difference is not None and (row.difference.interval.n_units or FEW_UNITS) < FEW_UNITS:
            undercovers.setdefault(row.difference.interval.note or "", []).append(row.name)
        if row.verdict == "worse" or (row.verdict == "better" and fail_on == "any"):
            code = max(code, EXIT_DIFFERENT)
    notes += [f"not judged, {counted(len(names), 'metric')} ({reason}): {', '.join(names)}" for reason, names in
              not_judged.items()]
    notes += [f"judged on an interval that undercovers, {counted(len(names), 'metric')} ({note}): {', '.join(names)}"
              for note, names in undercovers.items()]
    return Comparison(a, b, rows, problems, notes, code, fail_on, header)


def _fmt(value: float | None, spec: str = ".6g", sign: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return format(value, ("+" if sign else "") + spec)


def unmatched_samples(rows: Sequence[MetricComparison]) -> dict[str, tuple[str, list[str]]]:
    """Each unmatched sample once: (why, the metrics it is missing from), in first-seen order."""
    out: dict[str, tuple[str, list[str]]] = {}
    for row in rows:
        for kind, entries in (("scored in A only", row.only_a), ("scored in B only", row.only_b),
                              ("scored in neither", row.neither)):
            for sample_id, why in entries.items():
                out.setdefault(sample_id, (f"{kind} ({why})", []))[1].append(row.name)
    return out


def render_comparison(result: Comparison) -> str:
    """The terminal table: plain text, the same in a log, redacted (a run's path in the header named its folders,
    a token-shaped one too)."""
    lines = [f"{key:<3} {value}" for key, value in result.header.items()]
    columns = ["  metric", "A", "B", "B - A", "95% CI (paired)", "better is", "verdict", "matched"]
    table = [columns]
    for r in result.metrics:
        d = r.difference
        table.append([("* " if r.primary else "  ") + r.name,
                      *(value if isinstance(value, str) else _fmt(value) for value in r.shown()),
                      _fmt(d.difference if d else None, sign=True),
                      describe(d.interval) if d and has_interval(d.interval) else "n/a", r.direction, r.verdict,
                      f"{r.n_matched}/{r.n_cohort}"])
    lines += ["", *aligned(table)]
    lines.append("(* primary metric; A and B over the matched samples; verdict: the paired interval of B - A "
                 "excludes 0 (better/worse by the metric's direction) or contains it (within noise))")
    lines.append("")
    lines.append("problems:" if result.problems else "problems: none")
    lines.extend(f"  - {p}" for p in result.problems)
    unmatched = unmatched_samples(result.metrics)
    if unmatched:
        lines.append(f"unmatched samples ({len(unmatched)}):")
        for sample_id, (why, names) in list(unmatched.items())[:NAMES_SHOWN]:
            which = "all metrics" if len(names) == len(result.metrics) else ", ".join(names)
            lines.append(f"  - {sample_id}: {why}; {which}")
        if len(unmatched) > NAMES_SHOWN:
            lines.append(f"  - ... {len(unmatched) - NAMES_SHOWN} more (every one is named in the --report page)")
    if result.notes:
        lines.append("notes:")
        lines.extend(f"  - {n}" for n in result.notes)
    counts = {v: sum(1 for r in result.metrics if r.verdict == v) for v in ("better", "worse", "within noise")}
    summary = ", ".join(f"{n} {v}" for v, n in counts.items())
    lines.append(f"result: {VERDICT_NAMES[result.exit_code]} (exit {result.exit_code}; {summary}; "
                 f"fail on {result.fail_on})")
    return redact("\n".join(lines))
