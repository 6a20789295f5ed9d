"""Score on several GPUs: one worker process per device, each taking an interleaved shard of the videos.

Why processes: RAFT keeps one GPU busy per process; the workers write disjoint per-sample files
(the runner's shards), and the parent merges them as for any sharded run, so a killed worker loses
only the videos in flight and a rerun resumes.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from pinbench.core.config import Implementation
from pinbench.core.runner import Shard, run_samples
from pinbench_recipes.dynamic_degree.motion import ClipSource, HasMetric, score_task
from pinbench_recipes.dynamic_degree.prepare import EstimatorSpec


def score_in_workers(tasks: Sequence[Mapping[str, Any]], spec: EstimatorSpec, source: ClipSource,
                     out_dir: Path, devices: Sequence[str], metric: str, *, root: Path,
                     implementation: Implementation | None) -> int:
    """Run shard i of ``len(devices)`` on ``devices[i]`` in its own (spawned) process; return failures."""
    jobs = [(list(tasks), spec, source, root, out_dir, Shard(i, len(devices)), device, metric, implementation)
            for i, device in enumerate(devices)]
    with multiprocessing.get_context("spawn").Pool(len(devices)) as pool:
        return sum(pool.map(_score_shard, jobs))


def _score_shard(job: tuple) -> int:
    tasks, spec, source, root, out_dir, shard, device, metric, implementation = job
    estimator = spec.build(device)
    summary = run_samples(tasks, partial(score_task, estimator=estimator, source=source, root=root), out_dir,
                          shard=shard, implementation=implementation, validate=HasMetric(metric),
                          progress=shard.index == 0, step=f"dynamic degree [{device}]")
    return summary.n_failed
