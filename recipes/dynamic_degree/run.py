"""The dynamic-degree recipe, top to bottom: prepare, (no generation), score, aggregate, diff, report.

It scores a directory of videos a model already generated (``-o videos=DIR``), or with
``--fixture`` a small synthetic set it writes itself, and files the suite score (mean over videos of
the fraction of 2 s clips judged dynamic) in a scorecard.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from pinbench.core.files import counted
from pinbench.core.run import Figure, Run, RunOutcome
from pinbench.core.runner import SampleFn, SampleRecord
from pinbench.core.scorecard import MetricSpec
from pinbench_recipes.dynamic_degree import fixture, prepare
from pinbench_recipes.dynamic_degree.flow import PREVIEW_LABEL, FlowEstimator
from pinbench_recipes.dynamic_degree.motion import ClipSource, HasMetric, metric_name, score_task


def run(run: Run) -> RunOutcome:
    # 1. prepare: options, the videos, the flow estimator, one task per video
    with run.step("prepare"):
        options, source = run.options, prepare.clip_source(run.options)
        videos_dir = run.fixture(fixture.write_fixture) or options.videos
        videos = prepare.list_videos(videos_dir)[: run.cfg.limit]
        spec = prepare.estimator_spec(run.cfg, run.recipe.pins_path)
        estimator = spec.build()
        metric = metric_name(estimator)
        with run.digests() as digests:
            tasks = prepare.video_tasks(videos_dir, videos, flow=estimator.describe(), source=source,
                                        recipe_version=run.recipe.version, digests=digests)

    # 2. generate: nothing to do; this recipe scores videos that a model already generated

    # 3. score: one record per video, stored as soon as it exists; --gpus N: one worker process per GPU
    with run.step("score"):
        devices = prepare.worker_devices(run.cfg, spec)
        scorer = partial(_scorer, spec=spec, source=source, root=videos_dir) if devices else \
            partial(score_task, estimator=estimator, source=source, root=videos_dir)
        records = run.score(tasks, scorer, devices=devices, validate=HasMetric(metric), label="dynamic degree")

    # 4. aggregate (suite mean over videos), diff against the reference if one exists, report
    return run.finish(
        [MetricSpec(metric, aggregation="mean")], records,
        pins=prepare.pins_for_provenance(run.recipe.pins_path, estimator, options, run.recipe.name),
        seeds={"fixture": fixture.SEED} if run.cfg.fixture else None,
        extra=_extra(estimator, source, records, metric),
        provenance={"flow": estimator.describe(), "clip_source": source.describe(),
                    "devices": devices or [getattr(estimator, "device", "cpu")]},
        figures=lambda: _motion_figures(records, run.out_dir / "figures", metric),
    )


def _scorer(device: str, *, spec: prepare.EstimatorSpec, source: ClipSource, root: Path) -> SampleFn:
    """The per-video function of a worker on ``device`` (built in the worker: RAFT keeps one GPU busy each)."""
    return partial(score_task, estimator=spec.build(device), source=source, root=root)


def _extra(estimator: FlowEstimator, source: ClipSource, records: Sequence[SampleRecord],
           metric: str) -> dict[str, Any]:
    """What the scorecard says beyond the number: estimator, official or preview, loop-family means."""
    extra: dict[str, Any] = {
        "flow": estimator.describe(),
        "official": estimator.official,
        "clip_source": source.describe(),
        "aggregation": "video score = fraction of scored 2 s clips judged dynamic; suite = mean over videos",
    }
    if not estimator.official:
        extra["notice"] = f"{metric} uses {estimator.name} flow: {PREVIEW_LABEL}"
    families = _loop_family_means(records, metric)
    if families:
        extra["loop_families"] = families
    return extra


def _loop_family_means(records: Sequence[SampleRecord], metric: str) -> dict[str, dict[str, Any]]:
    """Mean per memory-loop family (yaw_loop_360, ...), with how many of its videos failed."""
    groups: dict[str, dict[str, Any]] = {}
    for record in records:
        family = prepare.loop_family(record.sample_id)
        if family is None:
            continue
        group = groups.setdefault(family, {"values": [], "n_failed": 0})
        value = record.result.get(metric) if record.ok and record.result else None
        if value is None:
            group["n_failed"] += 1
        else:
            group["values"].append(value)
    return {
        family: {"mean": sum(g["values"]) / len(g["values"]) if g["values"] else None,
                 "n_scored": len(g["values"]), "n_failed": g["n_failed"]}
        for family, g in sorted(groups.items())
    }


def _motion_figures(records: Sequence[SampleRecord], out_dir: Path, metric: str) -> list[Figure]:
    """One m-over-time PNG per scored video; the report shows the worst and best few and names the rest.

    A figure is named by its video and a digest of the result it draws, so a video whose result did not change
    keeps its PNG (also when it was computed again) and only changed ones are drawn; figures of results that are
    gone are removed."""
    figures = []
    keep: set[Path] = set()
    for record in records:
        if not record.ok or not record.result:
            continue
        drawn_from = json.dumps(record.result, sort_keys=True, separators=(",", ":")).encode()  # not its timing
        png = out_dir / f"{record.sample_id}.{hashlib.sha256(drawn_from).hexdigest()[:16]}.png"
        keep.add(png)
        if not png.is_file():
            from pinbench_recipes.dynamic_degree.plots import plot_motion  # matplotlib: only when one is drawn

            plot_motion(record.result, record.sample_id, png, metric)
        result = record.result
        caption = (f"tau {result['tau']:.2f} px, {result['n_clips']} clips of {result['clip_length']} frames, "
                   f"every {counted(result['sampling_interval'], 'frame')} sampled; {result['clip_source']}")
        figures.append(Figure(f"m over time: {record.sample_id}", png, caption, record.sample_id))
    for stale in set(out_dir.glob("*.png")) - keep if out_dir.is_dir() else ():
        stale.unlink()
    return figures
