"""The last steps every recipe shares: samples file, scorecard, diff against the reference, report, check.

Kept in one place so that every recipe applies the same rules: a run without a matching reference is
reported, not diffed; a partial run never exits 0; the diff table and report sit next to the scorecard.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pinbench.core.check import check_run
from pinbench.core.config import RunConfig, RunOutcome
from pinbench.core.derived import DERIVED_PATH, DerivedRecord, write_derived
from pinbench.core.files import write_atomic
from pinbench.core.provenance import collect_provenance, redact
from pinbench.core.recipe import Recipe
from pinbench.core.reference import EXIT_INCOMPLETE, diff, load_reference, render_diff, render_results
from pinbench.core.runner import RunSummary, SampleRecord, merge_samples
from pinbench.core.scorecard import MetricSpec, build_scorecard, write_scorecard
from pinbench.results.report import write_report


def collect_records(cfg: RunConfig, tasks: Sequence[Mapping[str, Any]], *,
                    id_key: str = "sample_id") -> list[SampleRecord]:
    """Every task's stored record from ``cfg.out_dir`` (all shards), missing ones marked failed."""
    return merge_samples([cfg.out_dir], tasks, id_key=id_key, dest=cfg.out_dir / "samples.jsonl")


FAILURES_FILE = "failures.tsv"
FAILURES_SHOWN = 5


def summarize_failures(card: Mapping[str, Any], out_dir: Path) -> list[str]:
    """Every failed or missing (sample, metric) of a scorecard into ``failures.tsv``; the lines to print:
    how many samples failed, up to five of them with their one-line reason, and where the full list is."""
    rows: list[tuple[str, str, str]] = []
    for name, metric in card["metrics"].items():
        rows += [(f["sample_id"], name, f["error"]) for f in metric.get("failed", [])]
        rows += [(sample, name, "missing: no record for this sample") for sample in metric.get("missing", [])]
    path = out_dir / FAILURES_FILE
    if not rows:
        path.unlink(missing_ok=True)
        return []
    clean = [(sample, metric, redact(" ".join(str(reason).split()))) for sample, metric, reason in rows]
    write_atomic(path, "sample_id\tmetric\treason\n" + "".join("\t".join(row) + "\n" for row in clean))
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
    extra_figures: Sequence[tuple[str, Path, str] | tuple[str, Path, str, str]] = (),
    derived: Sequence[DerivedRecord] = (),
) -> RunOutcome:
    """Write ``samples.jsonl`` (exactly the records aggregated) and ``scorecard.json``, diff it against the
    recipe's reference, write ``report/``, then ``pinbench check`` the directory (unsharded runs).

    ``n_expected`` counts samples only. ``derived`` are the records computed from them at finish time
    (``pinbench.core.derived``): written to ``derived.jsonl`` and counted apart, never as samples.

    ``extra_figures`` are (title, png, caption) for the run, or (title, png, caption, sample_id) for one
    sample: the report shows failures and the worst and best few of those, and names the rest.

    The exit code is the diff's when a reference exists for this checkpoint and mode; otherwise 0
    for a complete run and non-zero for a partial or failed one. A problem the check finds is printed
    and makes the exit code non-zero (at least 2).
    """
    described = [spec.with_info(recipe.metric_info(spec.name)) for spec in metrics]
    provenance = collect_provenance(pins=dict(pins or {}), seeds=dict(seeds or {}),
                                    extra=dict(provenance_extra or {}))
    card = build_scorecard(
        recipe=recipe.name, recipe_version=recipe.version, checkpoint=cfg.checkpoint, mode=cfg.mode,
        metrics=described, records=records, n_expected=n_expected, provenance=provenance,
        config=cfg.to_json(), timings=dict(timings), extra=dict(extra) if extra else None, derived=derived,
    )
    write_samples(records, cfg.out_dir / card["samples"]["path"])
    if "derived" in card:
        write_derived(derived, cfg.out_dir / card["derived"]["path"])
    else:
        (cfg.out_dir / DERIVED_PATH).unlink(missing_ok=True)  # an earlier version's, which no scorecard names
    scorecard_path = write_scorecard(card, cfg.out_dir / "scorecard.json")

    ref_path = recipe.reference_path(cfg.checkpoint, cfg.mode)
    result = None
    references = None
    if ref_path is None:
        exit_code = 0 if card["status"] == "complete" else EXIT_INCOMPLETE
        message = render_results(card, f"no {cfg.mode} reference for {recipe.name} / {cfg.checkpoint}")
    else:
        reference = load_reference(ref_path, recipe=recipe)
        references = {recipe.name: reference}
        result = diff(card, reference)
        exit_code = result.exit_code
        message = render_diff(result)
    write_atomic(cfg.out_dir / "diff.txt", message + "\n")
    print(message, flush=True)
    for line in summarize_failures(card, cfg.out_dir):
        print(line, flush=True)

    report_path = write_report(
        [scorecard_path], cfg.out_dir / "report", references=references,
        samples={recipe.name: [*records, *derived]},
        extra_figures={recipe.name: list(extra_figures)} if extra_figures else None,
        title=f"{recipe.name} {recipe.version}: {cfg.checkpoint} ({cfg.mode})",
    )
    if cfg.shard is None:  # a shard's directory is checked by the run that merges the shards
        checked = check_run(cfg.out_dir)
        print("\n".join(checked.lines()), flush=True)
        message = "\n".join([message, *checked.lines()])
        if checked.problems:
            exit_code = max(exit_code, checked.exit_code)
    return RunOutcome(scorecard_path=scorecard_path, exit_code=exit_code, diff=result,
                      report_path=report_path, message=message)


def write_samples(records: Sequence[SampleRecord | Mapping[str, Any]], path: Path) -> Path:
    """The per-sample records a scorecard aggregates, as the JSONL file it names (one record per line)."""
    lines = [json.dumps(r.to_json() if isinstance(r, SampleRecord) else dict(r), ensure_ascii=False,
                        allow_nan=False) + "\n" for r in records]
    return write_atomic(path, "".join(lines))
