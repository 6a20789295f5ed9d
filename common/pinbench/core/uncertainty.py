"""95% confidence intervals for scorecard aggregates and for paired differences of two runs.

Why: a point value cannot say whether "B beats A" is more than the benchmark's own sampling noise. Every
aggregate therefore carries a seeded bootstrap interval over the benchmark's sampling unit: the sample
(task, scene, video) for ``mean`` and ``median``; the group for ``mean_then_median``, whose groups are
resampled whole (the statistic is the median of the resampled group means). ``none`` (one suite-level
value) has nothing to resample and says so instead of printing a number.

Resampling is ``scipy.stats.bootstrap`` with ``N_RESAMPLES`` resamples and seed ``SEED`` (both recorded).
The method depends on the statistic, as measured on 200 seeded replications each (``tools/interval_coverage.py``
prints these numbers):

* ``mean``: BCa (scipy's default). Normal data, n=30: 95.5% coverage; exponential data, n=30: BCa 92.0%,
  percentile 90.5%.
* ``median`` and ``mean_then_median``: percentile. BCa is wrong for medians of tied values: on 31 values
  in {0, .25, .5, .75, 1} it returned a NaN bound in 187 of 200 replications (every jackknife median is
  equal, so its acceleration is 0/0); percentile covered 200 of 200 there and 94.0% of normal medians (n=60).

Bootstrap intervals are too narrow for few units (normal mean, BCa: 81.0% coverage at n=5, 91.0% at n=10,
95.0% at n=20), so an interval over fewer than ``FEW_UNITS`` units carries a note saying so.

Determinism: units are sorted by sample id (group key) before resampling, so the same per-sample scores
give the same interval whatever order the records arrived in.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

LEVEL = 0.95
N_RESAMPLES = 9999
SEED = 0
FEW_UNITS = 20
METHODS = {"mean": "BCa", "median": "percentile", "mean_then_median": "percentile"}
# What an ``aggregation: none`` metric is (an AP over a split, a derived suite score): its samples are not in
# the scorecard as values a bootstrap could draw.
NONE_REASON = ("aggregation none: one suite-level value computed over the samples at once, not an aggregate of "
               "per-sample values; nothing to resample")


@dataclass(frozen=True)
class Units:
    """What the bootstrap resamples: one value per sampling unit, sorted by the unit's id."""

    ids: tuple[str, ...]
    values: np.ndarray
    kind: str  # "sample" | "group"


def _reducer(aggregation: str) -> Callable[..., Any]:
    # mean_then_median: the group means are the units, so the statistic over units is their median.
    return np.mean if aggregation == "mean" else np.median


def sampling_units(values: Sequence[float], ids: Sequence[str], aggregation: str,
                   groups: Sequence[Any] | None = None) -> Units:
    """Per-sample values as the units the aggregation's interval resamples."""
    if len(values) != len(ids):
        raise ValueError("one id per value")
    if aggregation == "mean_then_median":
        if groups is None or len(groups) != len(values):
            raise ValueError("mean_then_median needs one group per value")
        by_group: dict[str, list[float]] = {}
        for group, value in zip(groups, values, strict=True):
            by_group.setdefault(str(group), []).append(float(value))
        keys = tuple(sorted(by_group))
        return Units(keys, np.array([math.fsum(by_group[k]) / len(by_group[k]) for k in keys]), "group")
    order = sorted(range(len(ids)), key=lambda i: str(ids[i]))
    return Units(tuple(str(ids[i]) for i in order), np.array([float(values[i]) for i in order]), "sample")


def not_resampled(reason: str) -> dict[str, Any]:
    """The interval entry of a metric that has no interval, with the reason in words."""
    return {"low": None, "high": None, "level": LEVEL, "reason": reason}


def _scipy_version() -> str:
    import scipy

    return f"scipy.stats.bootstrap {scipy.__version__}"


def _run_bootstrap(data: tuple[np.ndarray, ...], statistic: Callable[..., Any], method: str, *, paired: bool,
                   n_resamples: int, seed: int) -> tuple[float, float, str | None]:
    from scipy import stats

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = stats.bootstrap(data, statistic, n_resamples=n_resamples, confidence_level=LEVEL,
                                 method=method, paired=paired, vectorized=True, rng=np.random.default_rng(seed))
    low, high = (float(v) for v in result.confidence_interval)
    warning = " ".join(str(caught[0].message).split()) if caught else None
    return low, high, warning


def _entry(low: float, high: float, method: str, unit: str, n_units: int, n_resamples: int, seed: int,
           notes: list[str]) -> dict[str, Any]:
    entry: dict[str, Any] = {"low": low, "high": high, "level": LEVEL, "method": method, "unit": unit,
                             "n_units": n_units, "n_resamples": n_resamples, "seed": seed,
                             "implementation": _scipy_version()}
    if notes:
        entry["note"] = "; ".join(notes)
    return entry


def _few_units_note(n: int, kind: str) -> list[str]:
    return [f"only {n} {kind}s: bootstrap intervals undercover below {FEW_UNITS} units"] if n < FEW_UNITS else []


def aggregate_interval(values: Sequence[float], ids: Sequence[str], aggregation: str,
                       groups: Sequence[Any] | None = None, *, n_resamples: int = N_RESAMPLES,
                       seed: int = SEED) -> dict[str, Any]:
    """The scorecard ``interval`` entry of one metric's aggregate over its scored samples."""
    if aggregation == "none":
        return not_resampled(NONE_REASON)
    if not values:
        return not_resampled("nothing scored")
    units = sampling_units(values, ids, aggregation, groups)
    n = units.values.size
    if n < 2:
        return not_resampled(f"one {units.kind}: a bootstrap needs at least 2 units")
    method = METHODS[aggregation]
    point = float(_reducer(aggregation)(units.values))
    if np.all(units.values == units.values[0]):
        return _entry(point, point, "constant", units.kind, n, 0, seed,
                      [f"all {n} {units.kind}s have the same value: every resample gives it"])
    low, high, warning = _run_bootstrap((units.values,), _reducer(aggregation), method, paired=False,
                                        n_resamples=n_resamples, seed=seed)
    if not (math.isfinite(low) and math.isfinite(high)):
        return not_resampled(f"the {method} bootstrap gave a non-finite bound ({warning or 'no warning'})")
    return _entry(low, high, method, units.kind, n, n_resamples, seed,
                  _few_units_note(n, units.kind) + ([warning] if warning else []))


@dataclass(frozen=True)
class Difference:
    """B minus A for one metric over matched units, with its interval entry (same shape as a scorecard's)."""

    value_a: float
    value_b: float
    difference: float
    interval: dict[str, Any]

    @property
    def low(self) -> float | None:
        return self.interval["low"]

    @property
    def high(self) -> float | None:
        return self.interval["high"]


def difference_interval(a: Mapping[str, float], b: Mapping[str, float], aggregation: str,
                        groups: Mapping[str, Any] | None = None, *, paired: bool = True,
                        n_resamples: int = N_RESAMPLES, seed: int = SEED) -> Difference:
    """``aggregate(b) - aggregate(a)`` with a bootstrap interval.

    ``a`` and ``b`` map sample id to value. Paired (the default, for two runs of the same samples): only
    ids in both are used and each resample draws the same units from both runs, so what the two runs share
    (easy and hard tasks) cancels. Unpaired resamples each run on its own; it is wider on correlated runs.
    ``groups`` maps sample id to its group for ``mean_then_median`` (the units are then groups).
    """
    if paired:
        a = {k: a[k] for k in a if k in b}
        b = {k: b[k] for k in a}
    if not a or not b:
        return Difference(math.nan, math.nan, math.nan, not_resampled("no matched samples"))

    def units(run: Mapping[str, float]) -> Units:
        ids = list(run)
        return sampling_units([run[i] for i in ids], ids, aggregation,
                              [groups[i] for i in ids] if aggregation == "mean_then_median" and groups else None)

    ua, ub = units(a), units(b)
    reduce = _reducer(aggregation) if aggregation != "none" else None
    value_a = float(reduce(ua.values)) if reduce else float(next(iter(a.values())))
    value_b = float(reduce(ub.values)) if reduce else float(next(iter(b.values())))
    delta = value_b - value_a
    if aggregation == "none":
        return Difference(value_a, value_b, delta, not_resampled(NONE_REASON))
    if paired and ua.ids != ub.ids:
        raise ValueError("paired runs must have the same units (groups differ between the runs)")
    n = min(ua.values.size, ub.values.size)
    if n < 2:
        return Difference(value_a, value_b, delta, not_resampled(f"one matched {ua.kind}: a bootstrap needs 2"))
    method = METHODS[aggregation]
    if paired and np.all(ub.values - ua.values == (ub.values - ua.values)[0]):
        return Difference(value_a, value_b, delta, _entry(
            delta, delta, "constant", ua.kind, n, 0, seed,
            [f"every matched {ua.kind} differs by the same amount: every resample gives it"]))

    def statistic(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return reduce(y, axis=axis) - reduce(x, axis=axis)

    low, high, warning = _run_bootstrap((ua.values, ub.values), statistic, method, paired=paired,
                                        n_resamples=n_resamples, seed=seed)
    if not (math.isfinite(low) and math.isfinite(high)):
        # Percentile intervals are finite by construction; BCa is not when every jackknife value is equal.
        if np.all(ua.values == ua.values[0]) and np.all(ub.values == ub.values[0]):
            return Difference(value_a, value_b, delta, _entry(
                delta, delta, "constant", ua.kind, n, 0, seed, ["both runs are constant over their units"]))
        return Difference(value_a, value_b, delta, not_resampled(
            f"the {method} bootstrap gave a non-finite bound ({warning or 'no warning'})"))
    notes = _few_units_note(n, ua.kind) + ([warning] if warning else [])
    entry = _entry(low, high, method, ua.kind, n, n_resamples, seed, notes)
    entry["paired"] = paired
    return Difference(value_a, value_b, delta, entry)


def has_interval(entry: Mapping[str, Any] | None) -> bool:
    return bool(entry) and entry.get("low") is not None and entry.get("high") is not None


def describe(entry: Mapping[str, Any] | None, spec: str = ".4g") -> str:
    """``[low, high]`` or ``n/a (reason)``, for tables."""
    if entry is None:
        return "n/a (no interval recorded)"
    if not has_interval(entry):
        return f"n/a ({entry.get('reason', 'no interval')})"
    return f"[{format(entry['low'], spec)}, {format(entry['high'], spec)}]"
