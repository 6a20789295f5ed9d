"""Measure what pinbench.core.uncertainty's method choices rest on: coverage of 95% bootstrap intervals.

Prints, over 200 seeded replications each (seeds 10000 + k), how often the interval contains the true value:

* the mean of N(0.5, 0.1) samples at n = 5, 10, 20, 30 with pinbench's interval (BCa), which is why an
  interval over fewer than 20 units carries a note;
* the mean of Exp(1) samples (n = 30), BCa against percentile;
* the median of N(0.5, 0.1) samples (n = 60) with pinbench's interval (percentile);
* the median of 31 tied values in {0, .25, .5, .75, 1} (Binomial(4, 0.5) / 4, true median 0.5), BCa against
  percentile, with how many BCa intervals have a NaN bound: why medians use the percentile method.

Run: ``.venv/bin/python tools/interval_coverage.py`` (about a minute on one core).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import stats

from pinbench.core.uncertainty import aggregate_interval

REPLICATIONS = 200
N_RESAMPLES = 9999


def _scipy(x: np.ndarray, statistic, method: str, seed: int) -> tuple[float, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ci = stats.bootstrap((x,), statistic, n_resamples=N_RESAMPLES, method=method, confidence_level=0.95,
                             rng=np.random.default_rng(seed)).confidence_interval
    return float(ci.low), float(ci.high)


def main() -> None:
    for n in (5, 10, 20, 30):
        hits = 0
        for k in range(REPLICATIONS):
            x = np.random.default_rng(10_000 + k).normal(0.5, 0.1, n)
            got = aggregate_interval(list(x), [f"t{i:03d}" for i in range(n)], "mean", seed=k)
            hits += got.low <= 0.5 <= got.high
        print(f"normal mean, n={n}, pinbench ({got.method}): {hits}/{REPLICATIONS} cover the true mean")
    hits = 0
    for k in range(REPLICATIONS):
        x = np.random.default_rng(10_000 + k).normal(0.5, 0.1, 60)
        got = aggregate_interval(list(x), [f"t{i:03d}" for i in range(60)], "median", seed=k)
        hits += got.low <= 0.5 <= got.high
    print(f"normal median, n=60, pinbench ({got.method}): {hits}/{REPLICATIONS} cover the true median")
    for method in ("BCa", "percentile"):
        hits = 0
        for k in range(REPLICATIONS):
            x = np.random.default_rng(10_000 + k).exponential(1.0, 30)
            low, high = _scipy(x, np.mean, method, k)
            hits += low <= 1.0 <= high
        print(f"exponential mean, n=30, {method}: {hits}/{REPLICATIONS} cover the true mean")
    for method in ("BCa", "percentile"):
        hits = nan = 0
        for k in range(REPLICATIONS):
            x = np.random.default_rng(10_000 + k).binomial(4, 0.5, 31) / 4
            low, high = _scipy(x, np.median, method, k)
            nan += not (np.isfinite(low) and np.isfinite(high))
            hits += low <= 0.5 <= high
        print(f"median of 31 tied values, {method}: {hits}/{REPLICATIONS} cover the true median, "
              f"{nan} with a NaN bound")


if __name__ == "__main__":
    main()
