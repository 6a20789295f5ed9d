"""``pinbench compare RUN_A RUN_B``: is B better or worse than A by more than the benchmark's sampling noise?

Two runs of one recipe version (two checkpoints, or one checkpoint twice) are matched sample by sample:
per metric only the samples scored in both count (a paired comparison: what both runs find easy or hard
cancels, so the interval is narrower than comparing two independent scorecards), and every sample
scored in only one of them, or in neither, is named. Per metric: the value of each run over the matched
samples, B - A with its 95% paired bootstrap interval (``pinbench.core.uncertainty``), the direction the
scorecard copied from the recipe's declaration, and a verdict: ``better`` or ``worse`` when the interval
excludes 0, ``within noise`` when it contains 0, ``not judged`` when there is no interval (one suite-level
value, or fewer than two matched units).

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pinbench.core.derived import is_derived
from pinbench.core.reference import EXIT_FAIL, EXIT_INCOMPLETE, EXIT_MISMATCH, EXIT_PASS
from pinbench.core.scorecard import MetricResult, Scorecard, aggregate, load_scorecard, metric_samples, run_derived
from pinbench.core.uncertainty import Difference, describe, difference_interval, has_interval

EXIT_SAME, EXIT_DIFFERENT = EXIT_PASS, EXIT_FAIL
VERDICT_NAMES = {EXIT_SAME: "SAME", EXIT_DIFFERENT: "DIFFERENT", EXIT_INCOMPLETE: "INCOMPLETE",
                 EXIT_MISMATCH: "MISMATCH"}
FAIL_ON = ("any", "worse")
NAMES_SHOWN = 50


class CompareError(ValueError):
    """A run cannot be compared (one line naming the file and what is wrong)."""


@dataclass
class Run:
    """A scorecard and its own per-sample records (and derived records, ``pinbench.core.derived``, when it has any)."""

    path: Path
    card: Scorecard
    records: list[Any]

    @property
    def label(self) -> str:
        return f"{self.card.checkpoint} ({self.card.mode}) {self.path}"


def load_run(path: Path | str) -> Run:
    """A run directory or its scorecard.json, with the samples.jsonl the scorecard names."""
    from pinbench.core.runner import read_merged

    path = Path(path)
    scorecard = path / "scorecard.json" if path.is_dir() else path
    card = load_scorecard(scorecard)
    name = card.samples.path
    if not name:
        raise CompareError(f"{scorecard}: names no samples file; compare needs per-sample records")
    samples = scorecard.parent / name
    if not samples.is_file():
        raise CompareError(f"{samples}: not a file; compare needs the per-sample records the scorecard names")
    run = Run(scorecard, card, [*read_merged(samples), *run_derived(scorecard.parent, card, CompareError)])
    _check_records_agree(run)
    return run


def _check_records_agree(run: Run) -> None:
    """The records must be the ones the scorecard was computed from (not a newer or older samples.jsonl)."""
    for name, metric in run.card.metrics.items():
        scored, _ = metric_samples(name, metric, run.records)
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

    @property
    def unmatched(self) -> int:
        return len(self.only_a) + len(self.only_b) + len(self.neither)


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
    scored_a, failed_a = metric_samples(name, ma, a.records)
    scored_b, failed_b = metric_samples(name, mb, b.records)
    cohort = list(dict.fromkeys([*(ma.sample_ids or ()), *(mb.sample_ids or ()),
                                 *(str(r.sample_id) for r in a.records if ma.sample_ids is None
                                   and not is_derived(r)),
                                 *(str(r.sample_id) for r in b.records if mb.sample_ids is None
                                   and not is_derived(r))]))
    matched = [i for i in cohort if i in scored_a and i in scored_b]
    if ma.group_by:
        regrouped = [i for i in matched if scored_a[i][1] != scored_b[i][1]]
        if regrouped:
            problems.append(f"{name}: {len(regrouped)} sample(s) are in different {ma.group_by} groups in the "
                            f"two runs (e.g. {regrouped[0]}); they are left out")
            matched = [i for i in matched if i not in set(regrouped)]
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
    rows = [_compare_metric(name, ca.metrics[name], cb.metrics[name], a, b, problems)
            for name in ca.metrics if name in cb.metrics]
    for row in rows:
        if row.unmatched:
            problems.append(f"{row.name}: {row.n_matched} of {row.n_cohort} samples matched "
                            f"({len(row.only_a)} scored in A only, {len(row.only_b)} in B only, "
                            f"{len(row.neither)} in neither)")
            code = max(code, EXIT_INCOMPLETE)
        if row.verdict == "not judged":
            notes.append(f"{row.name}: not judged ({row.reason})")
        elif row.verdict == "worse" or (row.verdict == "better" and fail_on == "any"):
            code = max(code, EXIT_DIFFERENT)
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
    """The terminal table: plain text, the same in a log."""
    lines = [f"{key:<3} {value}" for key, value in result.header.items()]
    columns = ["metric", "A", "B", "B - A", "95% CI (paired)", "better is", "verdict", "matched"]
    table = [columns]
    for r in result.metrics:
        d = r.difference
        table.append([("* " if r.primary else "  ") + r.name, _fmt(d.value_a if d else None),
                      _fmt(d.value_b if d else None), _fmt(d.difference if d else None, sign=True),
                      describe(d.interval) if d and has_interval(d.interval) else "n/a", r.direction, r.verdict,
                      f"{r.n_matched}/{r.n_cohort}"])
    table[0][0] = "  " + table[0][0]
    widths = [max(len(row[i]) for row in table) for i in range(len(columns))]
    lines.append("")
    for i, row in enumerate(table):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
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
    return "\n".join(lines)
