"""Paired intervals of derived values over their members (pinbench.core.members_bootstrap): the same resamples as
scipy.stats.bootstrap, the statistic as scikit-learn computes it on each, and a mean equal to the per-sample path."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import average_precision_score, roc_auc_score

from pinbench.core import members_bootstrap
from pinbench.core.members_bootstrap import MemberSeries, member_differences
from pinbench.core.metricinfo import MemberStatistic
from pinbench.core.uncertainty import difference_interval

N, RESAMPLES, SEED = 60, 499, 3
IDS = tuple(f"m{i:03d}" for i in range(N))


def _ranked_runs(seed: int = 5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Labels and two runs' scores rounded to 0.1: ties within a run, across labels too."""
    rng = np.random.default_rng(seed)
    labels = (rng.random(N) < 0.3).astype(int)
    a = np.round(rng.random(N) + 0.3 * labels, 1)
    b = np.round(np.clip(a + rng.normal(0, 0.15, N), 0, 2), 1)
    return labels, a, b


@pytest.mark.parametrize(("statistic", "sklearn_score"), [("average_precision", average_precision_score),
                                                          ("roc_auc", roc_auc_score)])
def test_ranked_statistics_are_scipys_bootstrap_of_scikit_learns_values(statistic: str, sklearn_score) -> None:
    labels, a, b = _ranked_runs()

    def paired_difference(rows: np.ndarray, axis: int = -1) -> np.ndarray:
        out = []
        for row in np.atleast_2d(rows).astype(int):
            y = labels[row]
            out.append(0.0 if y.min() == y.max() else sklearn_score(y, b[row]) - sklearn_score(y, a[row]))
        return np.array(out)

    scipy_ci = stats.bootstrap((np.arange(N),), paired_difference, vectorized=True, paired=True,
                               n_resamples=RESAMPLES, method="percentile",
                               rng=np.random.default_rng(SEED)).confidence_interval
    series = MemberSeries(MemberStatistic(statistic, "score", "label"), IDS, a, b, labels, labels)
    (d,) = member_differences([series], n_resamples=RESAMPLES, seed=SEED)
    assert d.value_a == pytest.approx(sklearn_score(labels, a), abs=1e-15)
    assert d.value_b == pytest.approx(sklearn_score(labels, b), abs=1e-15)
    assert (d.low, d.high) == (pytest.approx(scipy_ci.low, abs=1e-12), pytest.approx(scipy_ci.high, abs=1e-12))
    assert d.interval.method == "percentile" and d.interval.paired and d.interval.n_resamples == RESAMPLES


def test_a_mean_from_members_is_the_per_sample_paired_bootstrap_of_the_scaled_values() -> None:
    """A mean over members (x ``scale``) judged as difference_interval judges the scaled values (BCa, the same
    resamples); on continuous values, where float rounding cannot tie a resample with the data's own mean."""
    rng = np.random.default_rng(7)
    a = rng.random(N)
    b = a + rng.normal(0.05, 0.1, N)
    series = MemberSeries(MemberStatistic("mean", "v", scale=0.25), IDS, a, b)
    (d,) = member_differences([series], n_resamples=RESAMPLES, seed=SEED)
    want = difference_interval(dict(zip(IDS, a / 4, strict=True)), dict(zip(IDS, b / 4, strict=True)), "mean",
                               n_resamples=RESAMPLES, seed=SEED)
    assert (d.value_a, d.value_b) == (pytest.approx(want.value_a, abs=1e-15), pytest.approx(want.value_b, abs=1e-15))
    assert d.interval.method == want.interval.method == "BCa"
    assert (d.low, d.high) == (pytest.approx(want.low, abs=1e-12), pytest.approx(want.high, abs=1e-12))


def test_a_mean_of_counts_is_exact() -> None:
    """binary_acc: correct decisions (0-4) per pair x 1/4. Every resampled difference is a multiple of 1/(4N), as
    the value itself is (summed exactly), so the bounds are too."""
    rng = np.random.default_rng(7)
    a = rng.integers(0, 5, N).astype(float)
    b = np.clip(a + rng.integers(-1, 2, N), 0, 4)
    (d,) = member_differences([MemberSeries(MemberStatistic("mean", "binary_correct", scale=0.25), IDS, a, b)],
                              n_resamples=RESAMPLES, seed=SEED)
    assert (d.value_a, d.value_b) == (a.sum() / (4 * N), b.sum() / (4 * N))
    for bound in (d.low, d.high):
        assert bound * 4 * N == pytest.approx(round(bound * 4 * N), abs=1e-9)
    assert d.low < d.difference < d.high


def test_statistics_of_one_member_set_share_one_draw_and_keep_their_order() -> None:
    labels, a, b = _ranked_runs()
    rng = np.random.default_rng(8)
    x, y = rng.integers(0, 3, N).astype(float), rng.integers(0, 3, N).astype(float)
    series = [MemberSeries(MemberStatistic("roc_auc", "score", "label"), IDS, a, b, labels, labels),
              MemberSeries(MemberStatistic("mean", "q", scale=0.5), IDS, x, y),
              MemberSeries(MemberStatistic("average_precision", "score", "label"), IDS, a, b, labels, labels)]
    together = member_differences(series, n_resamples=RESAMPLES, seed=SEED)
    alone = [member_differences([s], n_resamples=RESAMPLES, seed=SEED)[0] for s in series]
    assert [(d.value_a, d.low, d.high) for d in together] == [(d.value_a, d.low, d.high) for d in alone]


def test_what_cannot_be_resampled_says_why() -> None:
    labels, a, b = _ranked_runs()
    ap = MemberStatistic("average_precision", "score", "label")
    one_class = MemberSeries(ap, IDS, a, b, np.zeros(N, int), np.zeros(N, int))
    single = MemberSeries(ap, IDS[:1], a[:1], b[:1], labels[:1], labels[:1])
    shifted = MemberSeries(MemberStatistic("mean", "v"), IDS, labels.astype(float), labels + 2.0)
    d_one, d_single, d_shift = member_differences([one_class, single, shifted], n_resamples=RESAMPLES, seed=SEED)
    assert d_one.low is None and "one class only among run A's 60 matched members" in d_one.interval.reason
    assert d_single.low is None and d_single.interval.reason == "one matched member: a bootstrap needs 2"
    assert d_shift.interval.method == "constant" and d_shift.low == d_shift.high == 2.0


def test_resamples_with_one_class_count_zero_and_are_counted() -> None:
    """Two positives among 12: some resamples draw neither; they count 0.0 and the interval says how many."""
    labels = np.array([1, 1] + [0] * 10)
    a, b = np.linspace(1, 0, 12), np.linspace(0, 1, 12)
    ids = tuple(f"m{i:02d}" for i in range(12))
    (d,) = member_differences([MemberSeries(MemberStatistic("average_precision", "score", "label"), ids, a, b,
                                            labels, labels)], n_resamples=RESAMPLES, seed=SEED)
    assert d.value_a == 1.0 and d.value_b == pytest.approx(average_precision_score(labels, b))
    note = d.interval.note
    assert "resamples held one class only in a run (counted as 0.0)" in note and "only 12 samples" in note
    assert 0 < int(note.split(" of ")[0].split("; ")[-1]) < RESAMPLES


def test_bad_series_are_refused() -> None:
    labels, a, b = _ranked_runs()
    ap = MemberStatistic("average_precision", "score", "label")
    with pytest.raises(ValueError, match="one value"):
        MemberSeries(ap, IDS, a, b[:-1], labels, labels)
    with pytest.raises(ValueError, match="labels must be 0 or 1"):
        MemberSeries(ap, IDS, a, b, labels * 2, labels)
    with pytest.raises(ValueError, match="finite"):
        MemberSeries(MemberStatistic("mean", "v"), IDS, a, np.full(N, np.nan))
    with pytest.raises(ValueError, match="label field is required by statistic roc_auc"):
        MemberStatistic("roc_auc", "score")
    with pytest.raises(ValueError, match="scale is meaningful for statistic mean only"):
        MemberStatistic("average_precision", "score", "label", scale=2.0)


def test_intervals_at_the_default_resamples_are_pinned_bit_for_bit() -> None:
    """The values ``pinbench compare`` prints for the same seed must not move when the bootstrap is made faster:
    AP and ROC AUC (scores rounded to 0.01, so ties within and across labels) and a mean of counts over 700
    members, 9,999 resamples (27 batches of indices). Recorded at commit a45b145, before the speed work of
    issue #32 item 4; checked against scikit-learn and scipy above, to 1e-12."""
    n = 700
    rng = np.random.default_rng(11)
    labels = (rng.random(n) < 0.3).astype(np.int64)
    a = np.round(rng.random(n) * 0.6 + 0.4 * labels, 2)
    b = np.round(np.clip(a + rng.normal(0.02, 0.1, n), 0, 1), 2)
    x = rng.integers(0, 5, n).astype(float)
    y = np.clip(x + rng.integers(-1, 2, n), 0, 4)
    ids = tuple(f"m{i:04d}" for i in range(n))
    series = [MemberSeries(MemberStatistic("average_precision", "score", "label"), ids, a, b, labels, labels),
              MemberSeries(MemberStatistic("roc_auc", "score", "label"), ids, a, b, labels, labels),
              MemberSeries(MemberStatistic("mean", "binary_correct", scale=0.25), ids, x, y)]
    got = [(d.value_a, d.value_b, d.low, d.high, d.interval.method) for d in member_differences(series)]
    assert got == [
        (0.9024025718636042, 0.8509533391317158, -0.075266765255977, -0.029393873512866143, "percentile"),
        (0.9436149459783914, 0.9101890756302521, -0.04910531371639714, -0.018459788978882723, "percentile"),
        (0.5260714285714285, 0.5160714285714286, -0.023571428571428573, 0.0032142857142857142, "BCa"),
    ]


def test_a_ranking_both_runs_share_is_counted_once_per_resample(monkeypatch: pytest.MonkeyPatch) -> None:
    """B's members ranked as A's (other scores, the same order and ties): one histogram per resample batch, not
    two; every resample's B - A is then 0."""
    labels, a, _ = _ranked_runs()
    counted: list[int] = []
    histogram = members_bootstrap._Ranking.histogram

    def counting(self: members_bootstrap._Ranking, idx: np.ndarray) -> np.ndarray:
        counted.append(idx.shape[0])
        return histogram(self, idx)

    monkeypatch.setattr(members_bootstrap._Ranking, "histogram", counting)
    series = MemberSeries(MemberStatistic("average_precision", "score", "label"), IDS, a, a * 2, labels, labels)
    (d,) = member_differences([series], n_resamples=RESAMPLES, seed=SEED)
    assert counted == [1, 1, RESAMPLES]   # each run's own value, then one batch of all the resamples
    assert (d.low, d.high) == (0.0, 0.0)
