"""pinbench.core.uncertainty: scorecard intervals against a closed form, their coverage, determinism, grouping."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from pinbench.core.reference import diff, reference_from_dict
from pinbench.core.runner import SampleRecord
from pinbench.core.scorecard import (
    MetricSpec,
    Scorecard,
    ScorecardError,
    build_scorecard,
    load_scorecard,
    validate_scorecard,
)
from pinbench.core.uncertainty import aggregate_interval, difference_interval

FAST = 1999  # resamples in the replication tests; the scorecard default is 9999
# Test double: the fixed provenance block of the committed golden scorecard.
PROVENANCE = json.loads((Path(__file__).parent / "golden" / "scorecard.json").read_text())["provenance"]


def _ids(n: int) -> list[str]:
    return [f"t{i:04d}" for i in range(n)]


def test_mean_interval_matches_the_normal_closed_form() -> None:
    """Mean of a normal sample: the interval is mean ± z(0.975) * sd / sqrt(n) up to resampling error."""
    x = np.random.default_rng(7).normal(0.6, 0.1, 400)
    got = aggregate_interval(list(x), _ids(400), "mean")
    half = 1.959963984540054 * x.std(ddof=1) / math.sqrt(x.size)  # z(0.975), written out
    assert got.method == "BCa" and got.unit == "sample" and got.n_units == 400
    assert got.low == pytest.approx(x.mean() - half, abs=0.05 * half)
    assert got.high == pytest.approx(x.mean() + half, abs=0.05 * half)
    assert (got.n_resamples, got.seed, got.level) == (9999, 0, 0.95)
    assert got.implementation.startswith("pinbench batched bootstrap")


@pytest.mark.parametrize("aggregation", ["mean", "median"])
def test_coverage_on_200_seeded_replications(aggregation: str) -> None:
    """About 95% of the intervals contain the true value (mean = median = 0.5 of N(0.5, 0.1))."""
    hits = 0
    for k in range(200):
        x = np.random.default_rng(10_000 + k).normal(0.5, 0.1, 60)
        got = aggregate_interval(list(x), _ids(60), aggregation, n_resamples=FAST, seed=k)
        hits += got.low <= 0.5 <= got.high
    assert 0.91 <= hits / 200 <= 0.99, hits  # binomial sd at p=0.95 over 200 runs: 0.015


def test_mean_then_median_coverage_resamples_groups() -> None:
    """Scenes with a shared effect: the true median of scene means is 0.5; about 95% coverage."""
    hits = 0
    for k in range(200):
        rng = np.random.default_rng(20_000 + k)
        effects = rng.normal(0.5, 0.1, 40)
        values = np.repeat(effects, 5) + rng.normal(0, 0.02, 200)
        groups = np.repeat([f"scene{g}" for g in range(40)], 5)
        got = aggregate_interval(list(values), _ids(200), "mean_then_median", list(groups), n_resamples=FAST, seed=k)
        hits += got.low <= 0.5 <= got.high
    assert 0.91 <= hits / 200 <= 0.99, hits


def test_mean_then_median_resamples_whole_groups() -> None:
    """8 scenes x 50 correlated samples: the interval is the median bootstrap of the 8 scene means."""
    rng = np.random.default_rng(3)
    effects = rng.normal(0.5, 0.1, 8)
    values = np.repeat(effects, 50) + rng.normal(0, 0.01, 400)
    groups = [f"g{g}" for g in np.repeat(np.arange(8), 50)]
    got = aggregate_interval(list(values), _ids(400), "mean_then_median", groups)
    assert (got.unit, got.n_units, got.method) == ("group", 8, "percentile")
    means = np.array([values[50 * g: 50 * (g + 1)].mean() for g in range(8)])
    by_hand = stats.bootstrap((means,), np.median, n_resamples=9999, method="percentile",
                              rng=np.random.default_rng(0)).confidence_interval
    assert (got.low, got.high) == pytest.approx((by_hand.low, by_hand.high), rel=1e-12)
    per_sample = aggregate_interval(list(values), _ids(400), "median")  # what ignoring the grouping gives
    assert got.high - got.low > 3 * (per_sample.high - per_sample.low)
    assert "only 8 groups" in got.note


@pytest.mark.parametrize("aggregation", ["mean", "median"])
def test_the_same_scores_give_the_same_interval_in_any_order(aggregation: str) -> None:
    x = list(np.random.default_rng(1).normal(0, 1, 51))
    ids = _ids(51)
    first = aggregate_interval(x, ids, aggregation)
    assert aggregate_interval(x, ids, aggregation) == first
    order = np.random.default_rng(2).permutation(51)
    shuffled = aggregate_interval([x[i] for i in order], [ids[i] for i in order], aggregation)
    assert shuffled == first
    assert aggregate_interval(x, ids, aggregation, seed=1) != first  # the seed is what fixes it


def test_no_number_where_nothing_can_be_resampled() -> None:
    assert aggregate_interval([0.3], ["suite"], "none").to_json() == {
        "low": None, "high": None, "level": 0.95,
        "reason": "aggregation none: one suite-level value computed over the samples at once, not an aggregate "
                  "of per-sample values; nothing to resample"}
    assert aggregate_interval([0.3], ["a"], "mean").reason == "one sample: a bootstrap needs at least 2 units"
    assert aggregate_interval([], [], "mean").reason == "nothing scored"
    two_groups_one = aggregate_interval([0.1, 0.2], ["a", "b"], "mean_then_median", ["g", "g"])
    assert two_groups_one.reason == "one group: a bootstrap needs at least 2 units"
    constant = aggregate_interval([0.25] * 4, _ids(4), "median")
    assert (constant.low, constant.high, constant.method) == (0.25, 0.25, "constant")


def test_median_of_tied_values_gets_a_finite_interval() -> None:
    """BCa gives NaN for the median of tied values (measured); the percentile method does not."""
    x = list(np.random.default_rng(5).binomial(4, 0.5, 31) / 4)
    got = aggregate_interval(x, _ids(31), "median")
    assert got.method == "percentile" and math.isfinite(got.low) and got.low <= 0.5 <= got.high


def test_paired_is_narrower_than_unpaired_on_correlated_runs() -> None:
    """Two checkpoints on the same 200 tasks: task difficulty dominates, B is better by 0.01."""
    rng = np.random.default_rng(11)
    difficulty = rng.normal(0.5, 0.2, 200)
    a = dict(zip(_ids(200), difficulty + rng.normal(0, 0.01, 200), strict=True))
    b = dict(zip(_ids(200), difficulty + 0.01 + rng.normal(0, 0.01, 200), strict=True))
    paired = difference_interval(a, b, "mean")
    unpaired = difference_interval(a, b, "mean", paired=False)
    assert paired.difference == pytest.approx(unpaired.difference)
    assert 0 < paired.low < paired.high  # paired: B is better beyond noise
    assert unpaired.low < 0 < unpaired.high  # unpaired: the same data look like noise
    assert (paired.high - paired.low) * 5 < unpaired.high - unpaired.low
    assert paired.interval.paired is True and unpaired.interval.paired is False


def test_paired_difference_uses_matched_samples_only() -> None:
    a = {"x": 1.0, "y": 2.0, "z": 3.0, "only_a": 100.0}
    b = {"x": 1.5, "y": 2.5, "z": 3.5, "only_b": -100.0}
    d = difference_interval(a, b, "mean")
    assert (d.value_a, d.value_b, d.difference) == (2.0, 2.5, 0.5)
    assert (d.low, d.high, d.interval.method) == (0.5, 0.5, "constant")  # every task moved by 0.5


# ------------------------------------------------------------------------------------ scorecards


def _card(values: list[float], **kw) -> Scorecard:
    records = [SampleRecord(f"s{i:02d}", "ok", {"v": v, "scene": f"g{i % 3}"}, None, "0" * 64, 0.1)
               for i, v in enumerate(values)]
    metrics = kw.pop("metrics", [MetricSpec("v", "mean", direction="higher")])
    return build_scorecard(recipe="toy-bench", recipe_version="1.0.0", checkpoint="Toy-Nano", mode="fixture",
                           metrics=metrics, records=records, n_expected=len(values), provenance=PROVENANCE,
                           config={}, timings={})


def test_every_scorecard_metric_carries_its_interval_and_cohort() -> None:
    card = _card([0.1, 0.4, 0.2, 0.8, 0.5, 0.3], metrics=[
        MetricSpec("v", "mean", direction="higher"),
        MetricSpec("g/v", "mean_then_median", group_by="scene", key="v", direction="higher"),
        MetricSpec("c/v", "median", key="v", direction="lower", sample_ids=["s00", "s01", "s02"]),
        MetricSpec("suite", "none", key="v", direction="higher", sample_ids=["s05"])])
    m = card.metrics
    assert card.schema_version == "2.3"
    assert m["v"].interval.unit == "sample" and m["v"].interval.n_units == 6
    assert m["g/v"].interval.unit == "group" and m["g/v"].interval.n_units == 3
    assert m["c/v"].sample_ids == ("s00", "s01", "s02") and m["c/v"].interval.n_units == 3
    assert m["suite"].interval.low is None and "suite-level" in m["suite"].interval.reason
    assert m["v"].sample_ids is None and "sample_ids" not in m["v"].to_json()
    validate_scorecard(card.to_json())


def test_a_schema_2_0_scorecard_still_loads_and_diffs(tmp_path: Path) -> None:
    card = _card([0.5, 0.6, 0.7])
    legacy = card.to_json()
    legacy["schema_version"] = "2.0"
    del legacy["metrics"]["v"]["interval"]
    path = tmp_path / "scorecard.json"
    path.write_text(json.dumps(legacy))
    loaded = load_scorecard(path)
    ref = reference_from_dict({"recipe": "toy-bench", "recipe_version": "1.0.0", "checkpoint": "Toy-Nano",
                               "mode": "fixture", "n_samples": 3, "tier": "same_hw", "source": {"kind": "fixture"},
                               "metrics": {"v": {"value": 0.6, "direction": "higher", "tolerance": {"abs": 0.01},
                                                 "primary": True}}})
    result = diff(loaded, ref)
    assert result.exit_code == 0 and "v: no interval (scorecard schema 2.0)" in result.notes
    assert result.rows[0].reading == "noise unknown"
    for claimed in ("2.1", "2.2", "2.3"):  # the same card claiming 2.1 or later must carry its intervals
        legacy["schema_version"] = claimed
        with pytest.raises(ScorecardError, match=r"must contain \['interval'\]"):
            validate_scorecard(legacy)


def test_a_non_finite_interval_bound_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "scorecard.json"
    text = json.dumps(_card([0.5, 0.6, 0.7]).to_json())
    path.write_text(text.replace('"low": ', '"low": NaN, "was": ', 1))
    with pytest.raises(ScorecardError, match="non-finite number NaN"):
        load_scorecard(path)


# ------------------------------------------------------------------------- batched, and equal to scipy's


def _scipy_interval(samples, reduce, method, paired, seed):
    import warnings

    def statistic(*data, axis=-1):
        return reduce(data[0], axis=axis) if len(data) == 1 else reduce(data[1], axis=axis) - reduce(data[0], axis=axis)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ci = stats.bootstrap(samples, statistic, n_resamples=FAST, method=method, paired=paired, vectorized=True,
                             rng=np.random.default_rng(seed)).confidence_interval
    return float(ci.low), float(ci.high)


@pytest.mark.parametrize("n", [2, 5, 31, 400])
@pytest.mark.parametrize("aggregation", ["mean", "median"])
@pytest.mark.parametrize("shape", ["one run", "paired", "unpaired"])
def test_the_batched_bootstrap_gives_scipys_bounds(n: int, aggregation: str, shape: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Same resamples, same BCa, same quantiles as scipy.stats.bootstrap, to 1e-12, however the batches are cut."""
    from pinbench.core import uncertainty

    rng = np.random.default_rng(n)
    a = rng.normal(0.5, 0.2, n)
    b = a + rng.normal(0.02, 0.05, n) if shape == "paired" else rng.normal(0.55, 0.2, n + 3)
    samples = (a,) if shape == "one run" else (a, b)
    reduce, method = (np.mean, "BCa") if aggregation == "mean" else (np.median, "percentile")
    for batch_values in (1, 97, uncertainty.BATCH_VALUES, 1 << 30):  # a resample per batch, odd cuts, ..., one batch
        monkeypatch.setattr(uncertainty, "BATCH_VALUES", batch_values)
        low, high, _ = uncertainty._run_bootstrap(samples, reduce, method, paired=shape == "paired",
                                                  n_resamples=FAST, seed=4)
        want = _scipy_interval(samples, reduce, method, shape == "paired", 4)
        assert low == pytest.approx(want[0], rel=1e-12, abs=1e-15)
        assert high == pytest.approx(want[1], rel=1e-12, abs=1e-15)


def test_the_quantile_is_scipys_to_the_last_bit() -> None:
    from pinbench.core.uncertainty import _quantile

    values = np.sort(np.random.default_rng(1).random(10))
    for level in (0.0, 0.025, 0.0312345, 0.5, 0.975, 1.0):
        assert _quantile(values, level) == float(stats.quantile(values, level))
