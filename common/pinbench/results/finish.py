"""The last steps every recipe shares: samples file, scorecard, diff against the reference, report.

Kept in one place so that every recipe applies the same rules: a run without a matching reference is
reported, not diffed; a partial run never exits 0; the diff table and report sit next to the scorecard; a
rerun that changed nothing recomputes nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from pinbench.core.config import RunConfig, RunOutcome
from pinbench.core.derived import DERIVED_PATH, DerivedRecord, write_derived
from pinbench.core.files import write_atomic, write_if_changed
from pinbench.core.provenance import collect_provenance, redact, to_jsonable
from pinbench.core.recipe import Recipe, library_digest
from pinbench.core.reference import EXIT_INCOMPLETE, diff, load_reference, render_diff, render_results
from pinbench.core.runner import RunSummary, SampleRecord, merge_samples
from pinbench.core.scorecard import (
    MetricSpec,
    Scorecard,
    ScorecardError,
    build_scorecard,
    load_scorecard,
    write_scorecard,
)
from pinbench.results.report import record_figures, write_report


def collect_records(cfg: RunConfig, tasks: Sequence[Mapping[str, Any]], summary: RunSummary | None = None, *,
                    id_key: str = "sample_id") -> list[SampleRecord]:
    """Every task's record, in task order, missing ones marked failed; ``finish_run`` writes them to
    ``samples.jsonl``. ``summary``: what an unsharded ``run_samples`` over these very tasks just ended with (it
    judged every stored record already, so the store is not read again); otherwise the records of every shard are
    read from ``cfg.out_dir``'s store."""
    if summary is not None and summary.covers(tasks, id_key):
        return list(summary.records.values())
    return merge_samples([cfg.out_dir], tasks, id_key=id_key, implementation=cfg.implementation)


FAILURES_FILE = "failures.tsv"
REPORT = PurePosixPath("report", "index.html")
Figures = Sequence[tuple[str, Path, str] | tuple[str, Path, str, str]]
FAILURES_SHOWN = 5


def summarize_failures(card: Scorecard, out_dir: Path) -> list[str]:
    """Every failed or missing (sample, metric) of a scorecard into ``failures.tsv``; the lines to print:
    how many samples failed, up to five of them with their one-line reason, and where the full list is."""
    rows: list[tuple[str, str, str]] = []
    for name, metric in card.metrics.items():
        rows += [(f.sample_id, name, f.error) for f in metric.failed]
        rows += [(sample, name, "missing: no record for this sample") for sample in metric.missing or ()]
    path = out_dir / FAILURES_FILE
    if not rows:
        path.unlink(missing_ok=True)
        return []
    clean = [(sample, metric, redact(" ".join(str(reason).split()))) for sample, metric, reason in rows]
    write_if_changed(path, "sample_id\tmetric\treason\n" + "".join("\t".join(row) + "\n" for row in clean))
    first: dict[str, tuple[str, str]] = {}
    for sample, metric, reason in clean:
        first.setdefault(sample, (metric, reason))
    lines = [f"failed: {len(first)} sample(s) in {len({m for _, m, _ in clean})} metric(s); "
             f"full list: {path}"]
    lines += [f"  {sample} ({metric}): {reason[:200]}" for sample, (metric, reason) in list(first.items())[
        :FAILURES_SHOWN]]
    if len(first) > FAILURES_SHOWN:
        lines.append(f"  ... and {len(first) - FAILURES_SHOWN} more")
    return lines


def finish_shard(cfg: RunConfig, summary: RunSummary | None) -> RunOutcome:
    """The end of one shard of many: its samples are stored, and nothing shared is written.

    Shards of one run share its directory and may run at the same time (``pinbench submit``'s job
    array), so the scorecard, diff and report are left to the merge, an unsharded run over the same
    directory (the finish job). Exit 0 when every sample of this shard is ok, else 2 (incomplete).
    ``summary`` is None when this shard had no per-sample work (its inputs are read by the merge).
    """
    summary = summary or RunSummary(n_total=0, n_done=0, n_reused=0, n_failed=0)
    failed = summary.failed_ids
    message = (f"shard {cfg.shard} of {cfg.recipe}: {summary.n_total} samples: {summary.n_done} done, "
               f"{summary.n_reused} reused, {summary.n_failed} failed"
               + (f" ({', '.join(failed[:5])}{', ...' if len(failed) > 5 else ''})" if failed else "")
               + "; the scorecard is written by the merge (an unsharded run over this directory)")
    print(message, flush=True)
    return RunOutcome(scorecard_path=None, exit_code=EXIT_INCOMPLETE if failed else 0, message=message)


def finish_run(
    recipe: Recipe,
    cfg: RunConfig,
    *,
    metrics: Sequence[MetricSpec],
    records: Sequence[SampleRecord],
    n_expected: int,
    pins: Mapping[str, Any] | None,
    timings: Mapping[str, float],
    seeds: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    provenance_extra: Mapping[str, Any] | None = None,
    extra_figures: Figures | Callable[[], Figures] = (),
    derived: Sequence[DerivedRecord] | Callable[[], Sequence[DerivedRecord]] = (),
) -> RunOutcome:
    """Write ``samples.jsonl`` (exactly the records aggregated) and ``scorecard.json``, diff it against the
    recipe's reference, and write ``report/``.

    ``n_expected`` counts samples only. ``derived`` are the records computed from them at finish time
    (``pinbench.core.derived``): written to ``derived.jsonl`` and counted apart, never as samples.
    ``extra_figures`` are (title, png, caption) for the run, or (title, png, caption, sample_id) for one
    sample: the report shows failures and the worst and best few of those, and names the rest. Both may be
    given as functions, called only when the scorecard is computed.

    A rerun whose scorecard would be computed from exactly what the existing one was (the same records,
    configuration, declaration, reference and library: ``computed_from``) keeps that scorecard and its report
    and computes neither again; the diff is always given afresh. The standalone ``pinbench check`` is what
    recounts a directory from its files; the run does not re-read what it has just computed.

    The exit code is the diff's when a reference exists for this checkpoint and mode; otherwise 0
    for a complete run and non-zero for a partial or failed one.
    """
    described = [spec.with_info(recipe.metric_info(spec.name)) for spec in metrics]
    samples_bytes = b"".join(record.to_bytes() + b"\n" for record in records)
    ref_path = recipe.reference_path(cfg.checkpoint, cfg.mode)
    computed_from = _computed_from(recipe, cfg, samples_bytes, described, n_expected, ref_path,
                                   {"pins": pins, "seeds": seeds, "extra": extra, "provenance": provenance_extra})
    scorecard_path = cfg.out_dir / "scorecard.json"
    report_path = cfg.out_dir / REPORT
    card = _unchanged(scorecard_path, report_path, computed_from)
    kept = card is not None
    if card is not None:
        print(f"{recipe.name}: nothing changed since the scorecard of {card.provenance['timestamp']}: "
              "scorecard and report kept", flush=True)
        write_if_changed(cfg.out_dir / card.samples.path, samples_bytes)  # edited or removed since: put back
    else:
        derived = list(derived() if callable(derived) else derived)
        provenance = collect_provenance(pins=dict(pins or {}), seeds=dict(seeds or {}),
                                        extra=dict(provenance_extra or {}))
        card = build_scorecard(
            recipe=recipe.name, recipe_version=recipe.version, checkpoint=cfg.checkpoint, mode=cfg.mode,
            metrics=described, records=records, n_expected=n_expected, provenance=provenance,
            config=cfg.to_json(), timings=dict(timings), extra=dict(extra) if extra else None, derived=derived,
        )
        card = dataclasses.replace(card, computed_from=computed_from)
        write_atomic(cfg.out_dir / card.samples.path, samples_bytes)
        if card.derived is not None:
            write_derived(derived, cfg.out_dir / card.derived.path)
        else:
            (cfg.out_dir / DERIVED_PATH).unlink(missing_ok=True)  # an earlier version's, which no scorecard names
        write_scorecard(card, scorecard_path)

    reference = load_reference(ref_path, recipe=recipe) if ref_path is not None else None
    result = diff(card, reference) if reference is not None else None
    if result is None:
        exit_code = 0 if card.status == "complete" else EXIT_INCOMPLETE
        message = render_results(card, f"no {cfg.mode} reference for {recipe.name} / {cfg.checkpoint}")
    else:
        exit_code = result.exit_code
        message = render_diff(result)
    write_if_changed(cfg.out_dir / "diff.txt", message + "\n")
    print(message, flush=True)
    for line in summarize_failures(card, cfg.out_dir):
        print(line, flush=True)
    if not kept:  # the figures are recorded beside the scorecard: `pinbench report` of the run shows them too
        record_figures(cfg.out_dir, extra_figures() if callable(extra_figures) else extra_figures)
        report_path = write_report(
            [scorecard_path], cfg.out_dir / "report",
            references={recipe.name: reference} if reference is not None else None,
            samples={recipe.name: [*records, *derived]},
        )
    return RunOutcome(scorecard_path=scorecard_path, exit_code=exit_code, diff=result,
                      report_path=report_path, message=message)


def _computed_from(recipe: Recipe, cfg: RunConfig, samples_bytes: bytes, metrics: Sequence[MetricSpec],
                   n_expected: int, reference: Path | None, context: Mapping[str, Any]) -> str:
    """SHA-256 of everything a scorecard and its report are computed from, but the clock: the records' bytes,
    the configuration, the metrics and the declaration, the reference that applies, the recipe's code (in
    ``cfg.implementation``) and the library's (``library_digest``), and what the recipe describes."""
    digest = hashlib.sha256()
    parts = [json.dumps(to_jsonable({"config": cfg.to_json(), "n_expected": n_expected, "context": context,
                                     "metrics": [spec.__dict__ for spec in metrics], "library": library_digest()}),
                        sort_keys=True, default=str).encode(),
             (recipe.dir / "recipe.yaml").read_bytes(), reference.read_bytes() if reference else b"", samples_bytes]
    for part in parts:
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


def _unchanged(scorecard: Path, report: Path, computed_from: str) -> Scorecard | None:
    """The existing scorecard when it is valid and was computed from exactly this, and its report exists."""
    if not (scorecard.is_file() and report.is_file()):
        return None
    try:
        card = load_scorecard(scorecard)
    except ScorecardError:
        return None
    return card if card.computed_from == computed_from else None

