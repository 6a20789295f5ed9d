"""The dynamic-degree recipe, top to bottom: prepare, (no generation), score, aggregate, diff, report.

It scores a directory of videos a model already generated (``-o videos=DIR``), or with
``--fixture`` a small synthetic set it writes itself, and files the suite score (mean over videos of
the fraction of 2 s clips judged dynamic) in a scorecard.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from pinbench.core.config import RunConfig, RunOutcome
from pinbench.core.inputs import input_digests
from pinbench.core.recipe import get_recipe
from pinbench.core.runner import SampleRecord, run_samples
from pinbench.core.scorecard import MetricSpec
from pinbench.results.finish import collect_records, finish_run, finish_shard
from pinbench_recipes.dynamic_degree import fixture, prepare
from pinbench_recipes.dynamic_degree.flow import PREVIEW_LABEL, FlowEstimator
from pinbench_recipes.dynamic_degree.motion import ClipSource, HasMetric, metric_name, score_task
from pinbench_recipes.dynamic_degree.parallel import score_in_workers


def run(cfg: RunConfig) -> RunOutcome:
    recipe = get_recipe(cfg.recipe)
    timings: dict[str, float] = {}
    started = time.perf_counter()

    # 1. prepare: options, the videos, the flow estimator, one task per video
    options, source = cfg.options, prepare.clip_source(cfg.options)
    if cfg.fixture:
        videos_dir = cfg.out_dir / "fixture_data"
        fixture.write_fixture(videos_dir)
    else:
        videos_dir = options.videos
    videos = prepare.list_videos(videos_dir)[: cfg.limit]
    spec = prepare.estimator_spec(cfg, recipe.pins_path)
    estimator = spec.build()
    metric = metric_name(estimator)
    with input_digests(cfg.out_dir, verify=cfg.verify_inputs) as digests:
        tasks = prepare.video_tasks(videos_dir, videos, flow=estimator.describe(), source=source,
                                    recipe_version=recipe.version, digests=digests)
    timings["prepare"] = time.perf_counter() - started

    # 2. generate: nothing to do; this recipe scores videos that a model already generated

    # 3. score: one record per video, stored as soon as it exists; a rerun resumes
    started = time.perf_counter()
    devices = prepare.worker_devices(cfg, spec)
    summary = None
    if devices and not cfg.skip_scoring:  # --gpus N: one worker process per GPU, interleaved shards
        score_in_workers(tasks, spec, source, cfg.out_dir, devices, metric, root=videos_dir,
                         implementation=cfg.implementation)
    elif not cfg.skip_scoring:
        summary = run_samples(tasks, partial(score_task, estimator=estimator, source=source, root=videos_dir),
                              cfg.out_dir,
                              shard=cfg.shard, implementation=cfg.implementation, validate=HasMetric(metric),
                              step="dynamic degree")
        if cfg.shard is not None:  # one shard of many: the merge (an unsharded run) writes the scorecard
            return finish_shard(cfg, summary)
    records = collect_records(cfg, tasks, summary)
    timings["score"] = time.perf_counter() - started

    # 4. aggregate (suite mean over videos), diff against the reference if one exists, report
    return finish_run(
        recipe, cfg,
        metrics=[MetricSpec(metric, aggregation="mean")],
        records=records, n_expected=len(tasks),
        pins=prepare.pins_for_provenance(recipe.pins_path, estimator, options, recipe.name),
        timings=timings,
        seeds={"fixture": fixture.SEED} if cfg.fixture else None,
        extra=_extra(estimator, source, records, metric),
        provenance_extra={"flow": estimator.describe(), "clip_source": source.describe(),
                          "devices": devices or [getattr(estimator, "device", "cpu")]},
        extra_figures=lambda: _motion_figures(records, cfg.out_dir / "figures", metric),
    )


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


def _motion_figures(records: Sequence[SampleRecord], out_dir: Path,
                    metric: str) -> list[tuple[str, Path, str, str]]:
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
                   f"every {result['sampling_interval']} frame(s) sampled; {result['clip_source']}")
        figures.append((f"m over time: {record.sample_id}", png, caption, record.sample_id))
    for stale in set(out_dir.glob("*.png")) - keep if out_dir.is_dir() else ():
        stale.unlink()
    return figures
