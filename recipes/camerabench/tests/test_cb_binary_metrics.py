"""Split AP and ROC AUC: hand-computed cases (ties, single class, non-finite), an independent reference, and
scikit-learn's own functions (what upstream calls), equal to the bit."""

from __future__ import annotations

import numpy as np
import pytest

from pinbench_recipes.camerabench.binary_metrics import split_metrics


def test_tied_scores_enter_together_at_one_threshold() -> None:
    # The research note's example: a per-item AP over a stable sort gives 1.0, scikit-learn 0.5.
    m = split_metrics([1, 1, 0, 0, 0], [0.5, 0.5, 0.5, 0.5, 0.1])
    assert m["average_precision"] == pytest.approx(0.5)
    assert m["roc_auc"] == pytest.approx(2 / 3)  # (0.5 + 0.5 + 1) per positive, ties count half
    assert m["n_tied"] == 3


def test_saturated_scores_at_one_tie() -> None:
    m = split_metrics([1, 0, 1, 0], [1.0, 1.0, 0.9, 0.2])
    assert m["average_precision"] == pytest.approx(0.5 * 0.5 + 0.5 * 2 / 3)
    assert m["roc_auc"] == pytest.approx(0.625)


def test_auc_needs_neither_numpy_trapezoid_nor_trapz(monkeypatch: pytest.MonkeyPatch) -> None:
    """The recipe's lock pins numpy 1.26.4, which has np.trapz and no np.trapezoid (numpy 2.4 the other way): the
    exported recipe installed from it scored no binary split ('module numpy has no attribute trapezoid')."""
    monkeypatch.delattr(np, "trapezoid", raising=False)
    monkeypatch.delattr(np, "trapz", raising=False)
    m = split_metrics([1, 0, 1, 0], [1.0, 1.0, 0.9, 0.2])
    assert m["roc_auc"] == pytest.approx(0.625)


def test_single_class_split_scores_zero_and_keeps_its_counts() -> None:
    for labels in ([0, 0, 0], [1, 1]):
        m = split_metrics(labels, [0.9] * len(labels))
        assert (m["average_precision"], m["roc_auc"], m["single_class"]) == (0.0, 0.0, True)
    assert split_metrics([0, 0, 0], [0.1, 0.2, 0.3])["num_negative"] == 3


def test_nonfinite_scores_rank_last() -> None:
    # nan and +inf become -1e10: the positive with nan ranks below every negative
    m = split_metrics([1, 0, 1, 0], [float("nan"), 0.3, 0.8, float("inf")])
    assert m["n_nonfinite"] == 2
    # ranking: 0.8 (pos), 0.3 (neg), then nan and inf tied at -1e10 (pos, neg)
    assert m["average_precision"] == pytest.approx(0.5 * 1.0 + 0.5 * 0.5)
    assert m["roc_auc"] == pytest.approx((1 + 1 + 0 + 0.5) / 4)


def _reference_ap(labels: np.ndarray, scores: np.ndarray) -> float:
    """Step-wise AP written out: at each distinct threshold, (recall gain) x precision."""
    ap, total_pos, prev_recall = 0.0, labels.sum(), 0.0
    for threshold in np.unique(scores)[::-1]:
        predicted = scores >= threshold
        tp = (labels & predicted).sum()
        recall = tp / total_pos
        ap += (recall - prev_recall) * tp / predicted.sum()
        prev_recall = recall
    return ap


def _reference_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    pos, neg = scores[labels == 1], scores[labels == 0]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return wins / (len(pos) * len(neg))


@pytest.mark.parametrize("seed", range(5))
def test_matches_written_out_formulas_on_tie_heavy_data(seed: int) -> None:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, 300)
    labels[:2] = (0, 1)
    scores = np.round(rng.random(300), 1)  # 11 distinct values: ties everywhere
    scores[rng.random(300) < 0.2] = 1.0
    m = split_metrics(labels.tolist(), scores.tolist())
    assert m["average_precision"] == pytest.approx(_reference_ap(labels, scores), abs=1e-12)
    assert m["roc_auc"] == pytest.approx(_reference_auc(labels, scores), abs=1e-12)
    assert (m["num_samples"], m["num_positive"]) == (300, int(labels.sum()))


@pytest.mark.parametrize("case", ["ties", "saturated", "distinct", "two", "one positive", "extreme"])
@pytest.mark.parametrize("seed", range(20))
def test_equals_scikit_learn_to_the_bit(case: str, seed: int) -> None:
    """The recipe computes AP and AUC itself (scikit-learn's import costs more than the run); the value must be the
    float upstream's scikit-learn call returns, not one close to it."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    rng = np.random.default_rng(seed)
    n = {"two": 2, "extreme": 2000}.get(case, int(rng.integers(3, 1500)))
    labels = rng.integers(0, 2, n)
    labels[:2] = (0, 1)
    if case == "one positive":
        labels[:] = 0
        labels[rng.integers(n)] = 1
    scores = {"ties": np.round(rng.random(n), 2), "saturated": np.minimum(1.0, rng.random(n) * 1.5),
              "extreme": np.where(rng.random(n) < 0.3, -1e10, rng.random(n) * 1e-300)}.get(case, rng.random(n))
    m = split_metrics(labels.tolist(), scores.tolist())
    assert m["average_precision"] == average_precision_score(labels, scores)
    assert m["roc_auc"] == roc_auc_score(labels, scores)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        split_metrics([], [])
    with pytest.raises(ValueError, match="equal-length"):
        split_metrics([1, 0], [0.5])
    with pytest.raises(ValueError, match="0 or 1"):
        split_metrics([2, 0], [0.5, 0.1])
