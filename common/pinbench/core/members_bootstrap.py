"""Paired bootstrap intervals of derived values recomputed from their members: a split's AP and ROC AUC, a skill's
accuracies (the ``from_members`` declarations, ``pinbench.core.metricinfo.MemberStatistic``).

Why: a derived value is one number per run, so ``pinbench compare`` had nothing to resample and left the
leaderboard's own columns (CameraBench's per-split AP, per-skill accuracy) unjudged. Its members are samples,
though: resampling them as the per-sample metrics are resampled (``pinbench.core.uncertainty``: ``N_RESAMPLES``
resamples, seed ``SEED``, the index draws of ``scipy.stats.bootstrap``, one draw serving both runs) and
recomputing the value on each resample gives B - A a paired interval.

How, at CameraBench's size (7,679 binary samples in 15 splits, 3,543 VQA pairs in 9 skills, 9,999 resamples): a
resample is a count per member, so each statistic is computed from a histogram of the resample's members over a
few codes, one gather and one ``bincount`` per run, never by sorting a resample:

* ``mean``: the code of a member is its tuple of B - A differences (the declared fields of one derived record
  together); the statistic is the histogram times the distinct tuples, / n, times ``scale``. Interval: BCa with
  the paired jackknife, as a per-sample mean's.
* ``average_precision`` and ``roc_auc``: each run's members are ranked by score (descending) into tie groups;
  a member's code is the positive tie group at or after it (its "bucket") and whether it is a positive, a
  negative tied with that group's positives, or another negative. Per bucket: the draws in it, its positives and
  its tied negatives, then cumulative sums over the buckets give scikit-learn's step-wise AP
  (sum of positives x precision at their threshold / positives) and the ROC AUC (ties count half). Interval:
  percentile, as for medians (BCa's acceleration is not validated for a ranking statistic). A resample holding
  one class only counts 0.0 (the value scikit-learn-based Script 2 reports for such a set); how many did is noted.

Statistics over the same number of members share the draws (the seed gives every one the same indices), so a
skill's five accuracies cost one draw and one histogram per run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pinbench.core.metricinfo import MemberStatistic
from pinbench.core.uncertainty import (
    LEVEL,
    N_RESAMPLES,
    SEED,
    Difference,
    Interval,
    _batches,
    _bca_levels,
    _entry,
    _few_units_note,
    _quantile,
    not_resampled,
)

RANKED = ("average_precision", "roc_auc")


@dataclass(frozen=True)
class MemberSeries:
    """One derived metric's matched members (sorted by id) as its statistic reads them in runs A and B: the
    declared field's values (the score for AP and AUC) and, for AP and AUC, each run's labels (0 or 1)."""

    statistic: MemberStatistic
    members: tuple[str, ...]
    a: np.ndarray
    b: np.ndarray
    labels_a: np.ndarray | None = None
    labels_b: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.members)
        ranked = self.statistic.statistic in RANKED
        arrays = [self.a, self.b, *((self.labels_a, self.labels_b) if ranked else ())]
        if any(x is None or np.shape(x) != (n,) for x in arrays):
            raise ValueError("one value (and for AP and AUC one label) per member, in both runs")
        if ranked and not all(np.isin(x, (0, 1)).all() for x in (self.labels_a, self.labels_b)):
            raise ValueError("labels must be 0 or 1")
        if not all(np.isfinite(x).all() for x in (self.a, self.b)):
            raise ValueError("member values must be finite")


class _Ranking:
    """One run's members as AP / ROC AUC see them: a code per member and, from a histogram of codes per resample,
    both statistics (see the module docstring)."""

    def __init__(self, scores: np.ndarray, labels: np.ndarray) -> None:
        order = np.argsort(-scores, kind="stable")
        group_sorted = np.concatenate([[0], np.cumsum(np.diff(scores[order]) != 0)])
        group = np.empty(scores.size, np.int64)
        group[order] = group_sorted
        labels = labels.astype(np.int64)
        # ascending, i.e. by descending score (np.unique would import numpy.ma, 8 ms)
        positive_groups = np.flatnonzero(np.bincount(group[labels == 1], minlength=1))
        self.m = positive_groups.size
        bucket = np.searchsorted(positive_groups, group)   # the first positive group at or after the member's
        tied = (bucket < self.m) & (group == (positive_groups[np.minimum(bucket, self.m - 1)] if self.m else -1))
        # codes j, m + j, 2m + j: bucket j's other draws, its positives, its negatives tied with them; 3m: after all
        kind = np.where(tied, np.where(labels == 1, 1, 2), 0)
        self.codes = np.where(bucket < self.m, kind * self.m + bucket, 3 * self.m)
        self.k = 3 * self.m + 1
        self.n = scores.size

    def same(self, other: _Ranking) -> bool:
        """Whether ``other`` gives every resample the statistics this one does: the same codes over as many groups.
        Why: a compare of two runs whose members are scored alike (a split no change touched) counted each
        resample's histogram twice: a quarter of its instructions on two 11,222-sample runs that agree."""
        return self.m == other.m and bool(np.array_equal(self.codes, other.codes))

    def histogram(self, idx: np.ndarray) -> np.ndarray:
        rows = idx.shape[0]
        codes = np.take(self.codes, idx)   # take: the gather in 0.16 ms, indexing 0.23 ms (262k)
        codes += (np.arange(rows) * self.k)[:, None]
        return np.bincount(codes.ravel(), minlength=rows * self.k).reshape(rows, self.k)

    def statistics(self, hist: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(AP, ROC AUC, one class only) per histogram row. AUC's numerator is an integer, computed exactly:
        per positive draw, the negatives drawn below it plus half those tied with it."""
        rows, m = hist.shape[0], self.m
        others, positives, tied_negatives = hist[:, :m], hist[:, m:2 * m], hist[:, 2 * m:3 * m]
        negatives_above = np.cumsum(others + tied_negatives, axis=1)   # negatives at or above each positive group
        true_positives = np.cumsum(positives, axis=1)
        drawn = negatives_above + true_positives
        n_pos = true_positives[:, -1] if m else np.zeros(rows, np.int64)
        n_neg = self.n - n_pos
        one_class = (n_pos == 0) | (n_neg == 0)
        # where nothing is drawn yet, no positive is either: 0 / 1 = 0, the precision such a group counts
        precision = true_positives / np.maximum(drawn, 1, out=drawn)
        twice_pairs = (2 * n_neg * n_pos - 2 * np.einsum("ij,ij->i", positives, negatives_above)
                       + np.einsum("ij,ij->i", positives, tied_negatives))
        with np.errstate(divide="ignore", invalid="ignore"):
            ap = np.einsum("ij,ij->i", positives, precision) / n_pos
            auc = twice_pairs / (2 * n_pos * n_neg)
        ap[one_class] = 0.0
        auc[one_class] = 0.0
        return ap, auc, one_class


class _Means:
    """The mean statistics over one set of members: a code per member (its tuple of B - A differences)."""

    def __init__(self, differences: np.ndarray) -> None:
        found: dict[tuple[float, ...], int] = {}
        self.codes = np.array([found.setdefault(row, len(found)) for row in map(tuple, differences.tolist())],
                              dtype=np.int64)
        self.tuples = np.array(list(found), dtype=np.float64).reshape(len(found), differences.shape[1])
        self.k = len(found)
        self.n = differences.shape[0]

    def sums(self, idx: np.ndarray) -> np.ndarray:
        """Per resample row and statistic: the sum of the drawn members' (scaled) differences."""
        rows = idx.shape[0]
        codes = np.take(self.codes, idx)   # take: the gather in 0.16 ms, indexing 0.23 ms (262k)
        codes += (np.arange(rows) * self.k)[:, None]
        hist = np.bincount(codes.ravel(), minlength=rows * self.k).reshape(rows, self.k)
        return hist.astype(np.float64) @ self.tuples


def _point(series: MemberSeries, run: str) -> float:
    values = series.a if run == "a" else series.b
    if series.statistic.statistic == "mean":
        return math.fsum(values.tolist()) / values.size * series.statistic.scale
    ranking = _Ranking(values, series.labels_a if run == "a" else series.labels_b)
    ap, auc, _ = ranking.statistics(ranking.histogram(np.arange(values.size)[None, :]))
    return float((ap if series.statistic.statistic == "average_precision" else auc)[0])


def _one_class(series: MemberSeries) -> str | None:
    if series.statistic.statistic not in RANKED:
        return None
    for run, labels in (("A", series.labels_a), ("B", series.labels_b)):
        if labels is not None and (labels.min() == labels.max()):
            return (f"one class only among run {run}'s {labels.size} matched members: "
                    f"{series.statistic.statistic} is undefined")
    return None


def member_differences(series: Sequence[MemberSeries], *, n_resamples: int = N_RESAMPLES,
                       seed: int = SEED) -> list[Difference]:
    """B - A of each derived metric over its matched members, with its paired bootstrap interval (in order)."""
    out: list[Difference | None] = [None] * len(series)
    points = [(_point(s, "a"), _point(s, "b")) if s.members else (math.nan, math.nan) for s in series]
    live: list[int] = []
    for i, s in enumerate(series):
        value_a, value_b = points[i]
        n = len(s.members)
        reason = ("no matched members" if n == 0 else "one matched member: a bootstrap needs 2" if n < 2
                  else _one_class(s))
        if reason:
            out[i] = Difference(value_a, value_b, value_b - value_a, not_resampled(reason))
        elif s.statistic.statistic == "mean" and np.all(s.b - s.a == (s.b - s.a)[0]):
            constant = float(_scaled_differences(s)[0])
            out[i] = Difference(value_a, value_b, value_b - value_a, _entry(
                constant, constant, "constant", "sample", n, 0, seed,
                ["every matched member differs by the same amount: every resample gives it"]))
        else:
            live.append(i)
    by_n: dict[int, list[int]] = {}
    for i in live:
        by_n.setdefault(len(series[i].members), []).append(i)
    for n, indices in by_n.items():
        thetas, one_class = _resampled(series, indices, n, n_resamples, seed)
        for i in indices:
            out[i] = _difference(series[i], points[i], thetas[i], one_class.get(i, 0), n_resamples, seed)
    return [d for d in out if d is not None]


def _resampled(series: Sequence[MemberSeries], indices: list[int], n: int, n_resamples: int,
               seed: int) -> tuple[dict[int, np.ndarray], dict[int, int]]:
    """The bootstrap distribution of B - A of each series of ``indices`` (all over ``n`` members), from one draw."""
    rankings: dict[tuple[tuple[str, ...], str, str | None], tuple[_Ranking, _Ranking]] = {}
    mean_groups: dict[tuple[str, ...], list[int]] = {}
    for i in indices:
        s = series[i]
        if s.statistic.statistic in RANKED:
            key = (s.members, s.statistic.field, s.statistic.label)
            if key not in rankings:
                ranking_a, ranking_b = _Ranking(s.a, s.labels_a), _Ranking(s.b, s.labels_b)
                rankings[key] = (ranking_a, ranking_a if ranking_a.same(ranking_b) else ranking_b)
        else:
            mean_groups.setdefault(s.members, []).append(i)
    means = [(_Means(np.stack([_scaled_differences(series[i]) for i in members], axis=1)), members)
             for members in mean_groups.values()]
    parts: dict[int, list[np.ndarray]] = {i: [] for i in indices}
    one_class: dict[int, int] = {}
    # a ranking both runs share (its members' scores and labels unchanged) is counted once per resample
    distinct = {id(r): r for pair in rankings.values() for r in pair}
    rng = np.random.default_rng(seed)
    for idx in _batches(rng, n, n_resamples):
        once = {key: r.statistics(r.histogram(idx)) for key, r in distinct.items()}
        ranked = {key: (once[id(a)], once[id(b)]) for key, (a, b) in rankings.items()}
        for i in indices:
            s = series[i]
            if s.statistic.statistic in RANKED:
                (ap_a, auc_a, single_a), (ap_b, auc_b, single_b) = ranked[(s.members, s.statistic.field,
                                                                            s.statistic.label)]
                parts[i].append(ap_b - ap_a if s.statistic.statistic == "average_precision" else auc_b - auc_a)
                one_class[i] = one_class.get(i, 0) + int(np.count_nonzero(single_a | single_b))
        for table, members in means:
            sums = table.sums(idx)
            for column, i in enumerate(members):
                parts[i].append(sums[:, column] / n)
    return {i: np.concatenate(p) for i, p in parts.items()}, one_class


def _scaled_differences(s: MemberSeries) -> np.ndarray:
    return (s.b - s.a) * s.statistic.scale


def _difference(s: MemberSeries, point: tuple[float, float], theta: np.ndarray, one_class: int,
                n_resamples: int, seed: int) -> Difference:
    value_a, value_b = point
    n = len(s.members)
    alpha = (1 - LEVEL) / 2
    notes = _few_units_note(n, "sample")
    if s.statistic.statistic == "mean":
        method = "BCa"
        # the paired jackknife of B - A is the jackknife of the differences; the statistic of the data itself is then
        # their mean, computed as each resample's is (an exact sum when the values are exact: counts, fractions)
        differences = _scaled_differences(s)
        levels = _bca_levels((np.zeros(n), differences), theta, paired=True, alpha=alpha)
    else:
        method = "percentile"
        levels = (alpha, 1 - alpha)
        if one_class:
            notes.append(f"{one_class} of {n_resamples} resamples held one class only in a run (counted as 0.0)")
    ordered = np.sort(theta)
    low, high = (_quantile(ordered, level) for level in levels)
    if not (math.isfinite(low) and math.isfinite(high)):
        return Difference(value_a, value_b, value_b - value_a, not_resampled(
            f"the {method} bootstrap gave a non-finite bound (a degenerate distribution)"))
    interval: Interval = _entry(low, high, method, "sample", n, n_resamples, seed, notes, paired=True)
    return Difference(value_a, value_b, value_b - value_a, interval)

