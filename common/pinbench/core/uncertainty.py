"""95% confidence intervals for scorecard aggregates and for paired differences of two runs.

Why: a point value cannot say whether "B beats A" is more than the benchmark's own sampling noise. Every
aggregate therefore carries a seeded bootstrap interval over the benchmark's sampling unit: the sample
(task, scene, video) for ``mean`` and ``median``; the group for ``mean_then_median``, whose groups are
resampled whole (the statistic is the median of the resampled group means). ``none`` (one suite-level
value) has nothing to resample and says so instead of printing a number.

Resampling draws ``N_RESAMPLES`` resamples with seed ``SEED`` (both recorded) exactly as ``scipy.stats.bootstrap``
does, the same indices from the same generator, but in batches of at most ``BATCH_VALUES`` resampled values, and
with the mean's jackknife in closed form. Why not scipy's function itself: it holds every resample at once (and
BCa's n x (n - 1) jackknife), 3.0 GB and 5.7 s for one interval over CameraBench's 11,222 samples, 4.9 GB for a
paired difference. The bounds agree with scipy's to 1e-12 (tests/test_uncertainty.py), so the coverage measured
below (``tools/interval_coverage.py``, with this implementation) is scipy's. The method depends on the statistic,
as measured on 200 seeded replications each:

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
import statistics
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pinbench.core.jsonfields import COUNT, TEXT, JsonBlock, one_of, spec

if TYPE_CHECKING:   # numpy is imported by the functions that compute: reading a scorecard needs none of it
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
class Interval(JsonBlock, where="interval"):
    """A 95% interval of a value: its bounds and how they were computed, or null bounds and the ``reason`` there
    are none. Every field but the bounds and the level is optional and, in its JSON form, present only when set:
    the bootstrap's (``method`` ... ``implementation``, ``note``), ``reason``, and ``paired`` (a difference's)."""

    low: float | None
    high: float | None
    level: float
    method: str | None = None  # BCa | percentile | constant (a reference's: also "union of k runs' intervals")
    unit: str | None = spec(one_of("sample", "group"), default=None)
    n_units: int | None = spec(COUNT, default=None)
    n_resamples: int | None = spec(COUNT, default=None)
    seed: int | None = spec(COUNT, default=None)
    implementation: str | None = spec(TEXT, default=None)
    note: str | None = None
    reason: str | None = spec(TEXT, default=None)  # why there is no interval
    paired: bool | None = None  # a difference of two runs: resampled paired or each run on its own

    @property
    def bounded(self) -> bool:
        return self.low is not None and self.high is not None


@dataclass(frozen=True)
class Units:
    """What the bootstrap resamples: one value per sampling unit, sorted by the unit's id."""

    ids: tuple[str, ...]
    values: np.ndarray
    kind: str  # "sample" | "group"


def _reducer(aggregation: str) -> Callable[..., Any]:
    import numpy as np
    # mean_then_median: the group means are the units, so the statistic over units is their median.
    return np.mean if aggregation == "mean" else np.median


def sampling_units(values: Sequence[float], ids: Sequence[str], aggregation: str,
                   groups: Sequence[Any] | None = None) -> Units:
    """Per-sample values as the units the aggregation's interval resamples."""
    import numpy as np
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


def not_resampled(reason: str) -> Interval:
    """The interval of a metric that has none, with the reason in words."""
    return Interval(None, None, LEVEL, reason=reason)


IMPLEMENTATION = "pinbench batched bootstrap (scipy.stats.bootstrap's resamples, BCa and quantiles)"
# Resampled values held at once per sample (2 MiB of float64): 2^21 held 34 MB of indices and values for 1,071
# caption samples (a caption run's peak memory) and was 2.3x slower there than batches that fit in the cache.
BATCH_VALUES = 1 << 18


def _batches(rng: np.random.Generator, n: int, n_resamples: int) -> Iterator[np.ndarray]:
    """Resample indices, batch by batch; the stream is the same however it is cut (numpy draws row-major)."""
    size = max(1, BATCH_VALUES // n)
    for start in range(0, n_resamples, size):
        yield rng.integers(0, n, (min(size, n_resamples - start), n))


def _statistic(samples: tuple[np.ndarray, ...], reduce: Callable[..., Any]) -> float:
    """The statistic of the data itself: the aggregate of one run, or B minus A of two."""
    return float(reduce(samples[0])) if len(samples) == 1 else float(reduce(samples[1]) - reduce(samples[0]))


class _Resampled:
    """One statistic (mean or median) of many resamples of one sample, computed row by row from their indices.

    The median takes one selection of the middle rank per row over the sample's ranks (small integers) instead of
    ``np.median``'s float partition of both middle elements: the same value (the mean of the two middle values
    for an even size), about 4x faster at 11,222 units."""

    def __init__(self, values: np.ndarray, reduce: Callable[..., Any]) -> None:
        import numpy as np
        self.values, self.median = values, reduce is np.median
        if self.median:
            order = np.argsort(values, kind="stable")
            self.sorted = values[order]
            self.rank = np.empty(values.size, np.int16 if values.size <= np.iinfo(np.int16).max else np.int32)
            self.rank[order] = np.arange(values.size)
        elif reduce is not np.mean:
            raise ValueError("the bootstrap resamples means and medians only")

    def __call__(self, idx: np.ndarray) -> np.ndarray:
        if not self.median:
            return self.values[idx].mean(axis=-1)
        n = self.values.size
        low, high = (n - 1) // 2, n // 2
        ranks = self.rank[idx]
        ranks.partition(low, axis=-1)
        below = self.sorted[ranks[:, low]]
        if high == low:
            return below
        return 0.5 * (below + self.sorted[ranks[:, high:].min(axis=-1)])


def _distribution(samples: tuple[np.ndarray, ...], reduce: Callable[..., Any], *, paired: bool, n_resamples: int,
                  seed: int) -> np.ndarray:
    """The bootstrap distribution of the statistic, drawn as scipy draws it."""
    import numpy as np
    rng = np.random.default_rng(seed)

    def resampled(values: np.ndarray) -> np.ndarray:
        import numpy as np
        statistic = _Resampled(values, reduce)
        return np.concatenate([statistic(idx) for idx in _batches(rng, values.size, n_resamples)])

    if len(samples) == 1:
        return resampled(samples[0])
    a, b = samples
    if paired:  # one index draw serves both runs (each its own mean: a mean of differences rounds otherwise)
        run_a, run_b = _Resampled(a, reduce), _Resampled(b, reduce)
        return np.concatenate([run_b(idx) - run_a(idx) for idx in _batches(rng, a.size, n_resamples)])
    run_a = resampled(a)  # scipy draws every resample of A, then every resample of B, from one generator
    return resampled(b) - run_a


def _jackknife_means(values: np.ndarray) -> np.ndarray:
    """The mean of ``values`` without each one, in closed form (scipy averages n - 1 values n times)."""
    import numpy as np
    return (np.sum(values) - values) / (values.size - 1)


def _bca_levels(samples: tuple[np.ndarray, ...], theta_b: np.ndarray, *, paired: bool,
                alpha: float) -> tuple[float, float]:
    """BCa's two quantile levels for a mean (Efron and Tibshirani 14.3, 15.4; scipy's formulas)."""
    import numpy as np
    theta_hat = _statistic(samples, np.mean)
    z0 = ndtri((np.count_nonzero(theta_b < theta_hat) + np.count_nonzero(theta_b <= theta_hat)) / (2 * theta_b.size))
    if len(samples) == 1:
        jackknives = [_jackknife_means(samples[0])]
    elif paired:  # leave one matched unit out of both runs
        jackknives = [_jackknife_means(samples[1]) - _jackknife_means(samples[0])]
    else:  # leave one unit out of each run in turn, the other whole
        jackknives = [np.mean(samples[1]) - _jackknife_means(samples[0]),
                      _jackknife_means(samples[1]) - np.mean(samples[0])]
    nums, dens = [], []
    for theta_i in jackknives:
        n = float(theta_i.size)
        u = (n - 1) * (np.mean(theta_i) - theta_i)
        nums.append(np.sum(u**3) / n**3)
        dens.append(np.sum(u**2) / n**2)
    with np.errstate(divide="ignore", invalid="ignore"):
        a_hat = 1 / 6 * sum(nums) / sum(dens) ** (3 / 2)
        z_alpha = float(ndtri(alpha))
        num1, num2 = z0 + z_alpha, z0 - z_alpha
        return float(ndtr(z0 + num1 / (1 - a_hat * num1))), float(ndtr(z0 + num2 / (1 - a_hat * num2)))


def ndtr(x: float) -> float:
    """The standard normal CDF, as scipy.special.ndtr computes it (``erfc``), without importing scipy (0.3 s)."""
    return 0.5 * math.erfc(-x / math.sqrt(2))


def ndtri(p: float) -> float:
    """The standard normal quantile (inverse of ``ndtr``), infinite at 0 and 1 as scipy's."""
    if not 0 < p < 1:
        return -math.inf if p == 0 else math.inf if p == 1 else math.nan
    return statistics.NormalDist().inv_cdf(p)


def _quantile(sorted_values: np.ndarray, level: float) -> float:
    """The linear (Hyndman and Fan type 7) quantile, computed as ``scipy.stats.quantile`` computes it."""
    import numpy as np
    if not math.isfinite(level):
        return math.nan
    n = sorted_values.size
    level = np.float64(level)
    jg = level * n + (1 - level)
    jp1 = jg // 1
    j = jp1 - 1
    g = 0.0 if j < 0 else jg % 1
    j, jp1 = int(min(max(j, 0), n - 1)), int(min(max(jp1, 0), n - 1))
    return float((1 - g) * sorted_values[j] + g * sorted_values[jp1])


def _run_bootstrap(samples: tuple[np.ndarray, ...], reduce: Callable[..., Any], method: str, *, paired: bool,
                   n_resamples: int, seed: int) -> tuple[float, float, str | None]:
    """(low, high, a warning or None) of the 95% interval of the statistic (see the module docstring)."""
    import numpy as np
    theta_b = _distribution(samples, reduce, paired=paired, n_resamples=n_resamples, seed=seed)
    alpha = (1 - LEVEL) / 2
    if method == "BCa":
        if reduce is not np.mean:
            raise ValueError("BCa is implemented for means only")
        levels = _bca_levels(samples, theta_b, paired=paired, alpha=alpha)
    else:
        levels = (alpha, 1 - alpha)
    ordered = np.sort(theta_b)
    low, high = (_quantile(ordered, level) for level in levels)
    warning = None
    if not (math.isfinite(low) and math.isfinite(high)):
        warning = "BCa cannot be computed here: a degenerate distribution (every jackknife value is equal)"
    return low, high, warning


def _entry(low: float, high: float, method: str, unit: str, n_units: int, n_resamples: int, seed: int,
           notes: list[str], paired: bool | None = None) -> Interval:
    return Interval(low, high, LEVEL, method=method, unit=unit, n_units=n_units, n_resamples=n_resamples, seed=seed,
                    implementation=IMPLEMENTATION, note="; ".join(notes) if notes else None, paired=paired)


def _few_units_note(n: int, kind: str) -> list[str]:
    return [f"only {n} {kind}s: bootstrap intervals undercover below {FEW_UNITS} units"] if n < FEW_UNITS else []


def aggregate_interval(values: Sequence[float], ids: Sequence[str], aggregation: str,
                       groups: Sequence[Any] | None = None, *, n_resamples: int = N_RESAMPLES,
                       seed: int = SEED) -> Interval:
    """The scorecard ``interval`` of one metric's aggregate over its scored samples."""
    import numpy as np
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
    """B minus A for one metric over matched units, with its interval (a scorecard's, and whether it is paired)."""

    value_a: float
    value_b: float
    difference: float
    interval: Interval

    @property
    def low(self) -> float | None:
        return self.interval.low

    @property
    def high(self) -> float | None:
        return self.interval.high


def difference_interval(a: Mapping[str, float], b: Mapping[str, float], aggregation: str,
                        groups: Mapping[str, Any] | None = None, *, paired: bool = True,
                        n_resamples: int = N_RESAMPLES, seed: int = SEED) -> Difference:
    """``aggregate(b) - aggregate(a)`` with a bootstrap interval.

    ``a`` and ``b`` map sample id to value. Paired (the default, for two runs of the same samples): only
    ids in both are used and each resample draws the same units from both runs, so what the two runs share
    (easy and hard tasks) cancels. Unpaired resamples each run on its own; it is wider on correlated runs.
    ``groups`` maps sample id to its group for ``mean_then_median`` (the units are then groups).
    """
    import numpy as np
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
    low, high, warning = _run_bootstrap((ua.values, ub.values), reduce, method, paired=paired,
                                        n_resamples=n_resamples, seed=seed)
    if not (math.isfinite(low) and math.isfinite(high)):
        # Percentile intervals are finite by construction; BCa is not when every jackknife value is equal.
        if np.all(ua.values == ua.values[0]) and np.all(ub.values == ub.values[0]):
            return Difference(value_a, value_b, delta, _entry(
                delta, delta, "constant", ua.kind, n, 0, seed, ["both runs are constant over their units"]))
        return Difference(value_a, value_b, delta, not_resampled(
            f"the {method} bootstrap gave a non-finite bound ({warning or 'no warning'})"))
    notes = _few_units_note(n, ua.kind) + ([warning] if warning else [])
    return Difference(value_a, value_b, delta, _entry(low, high, method, ua.kind, n, n_resamples, seed, notes,
                                                      paired=paired))


def has_interval(interval: Interval | None) -> bool:
    return interval is not None and interval.bounded


def describe(interval: Interval | None, spec: str = ".4g") -> str:
    """``[low, high]`` or ``n/a (reason)``, for tables."""
    if interval is None:
        return "n/a (no interval recorded)"
    if not interval.bounded:
        return f"n/a ({interval.reason or 'no interval'})"
    return f"[{format(interval.low, spec)}, {format(interval.high, spec)}]"
