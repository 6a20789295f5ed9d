"""Benchmark: what the 95% intervals add to building a scorecard, per recipe-sized shape.

Prints, per shape, the seconds to build a scorecard with intervals and without (the baseline in the same
run: ``pinbench.core.scorecard.aggregate_interval`` replaced by one that returns no interval), and their ratio.
Run: ``.venv/bin/python tools/bench_intervals.py``.
"""

from __future__ import annotations

import time
from unittest import mock

import numpy as np

from pinbench.core import scorecard
from pinbench.core.runner import SampleRecord
from pinbench.core.scorecard import MetricSpec, build_scorecard
from pinbench.core.uncertainty import not_resampled

SHAPES = {
    # name: (samples, metrics as (name, aggregation, cohort size or None))
    "paibench-c full (600 tasks, 4 x 13 means)": (600, [(f"m{m}/k{k}", "mean", None) for m in range(4)
                                                       for k in range(13)]),
    "remembench i2v (6 settings x 100 samples, 4 medians)": (600, [(f"s{s}/k{k}", "median", 100) for s in range(6)
                                                                   for k in range(4)]),
    "dynamic-degree (1000 videos, 1 mean)": (1000, [("dynamic_degree", "mean", None)]),
}


def _build(n: int, metrics: list[tuple[str, str, int | None]]) -> None:
    rng = np.random.default_rng(0)
    records = [SampleRecord(f"t{i:05d}", "ok", {"v": float(rng.normal(0.5, 0.1))}, None, "0" * 64, 0.1)
               for i in range(n)]
    specs = [MetricSpec(name, agg, key="v", direction="higher",
                        sample_ids=[f"t{i:05d}" for i in range(k * (j % (n // k)), k * (j % (n // k) + 1))]
                        if k else None)
             for j, (name, agg, k) in enumerate(metrics)]
    build_scorecard(recipe="bench", recipe_version="1", checkpoint="c", mode="full", metrics=specs,
                    records=records, n_expected=n, provenance={}, config={}, timings={})


def main() -> None:
    for label, (n, metrics) in SHAPES.items():
        started = time.perf_counter()
        with mock.patch.object(scorecard, "aggregate_interval", lambda *a, **k: not_resampled("benchmark")):
            _build(n, metrics)
        baseline = time.perf_counter() - started
        started = time.perf_counter()
        _build(n, metrics)
        with_intervals = time.perf_counter() - started
        print(f"{label}: {with_intervals:.2f} s with intervals, {baseline:.3f} s without "
              f"({with_intervals / baseline:.0f}x; {(with_intervals - baseline) / len(metrics):.3f} s per metric)")


if __name__ == "__main__":
    main()
