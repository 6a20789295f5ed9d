"""Binary camera-motion classification: AP and ROC AUC of one split, as the official Script 2 computes them.

``binary_classification_evaluation.py`` (t2v_metrics ``camerabench/``) scores each split with
scikit-learn: ``average_precision_score`` (step-wise AP over distinct thresholds; tied scores enter
together, no interpolation) and ``roc_auc_score`` (ties count half). This module computes both from one
sort, in scikit-learn's order of floating-point operations, so the values are the same to the bit
(tests/test_cb_binary.py compares them with scikit-learn's on tied and untied splits): importing
scikit-learn alone takes longer than a whole score-only run of the 11,222 samples. Ties matter here: bf16
probabilities saturate at exactly 1.0 for many videos. A split with one class only gets 0.0 for both
and still counts in the mean (upstream's CLI then crashes writing its JSON, so its record says so);
non-finite scores are replaced by -1e10 first. The leaderboard shows
AP x 100; the official JSON, and this recipe, keep fractions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

NONFINITE_SCORE = -1e10
SINGLE_CLASS = "a split with one class only: AP and ROC AUC are 0.0 by upstream's rule, and count in the means"


def split_metrics(labels: Sequence[int], scores: Sequence[float]) -> dict[str, Any]:
    """AP, ROC AUC and counts of one split (labels 1 = "Yes"); ValueError on empty or mismatched input."""
    import numpy as np  # 12 MB, imported when a scorecard is computed: not held through the samples' scoring

    y = np.asarray(labels)
    s = np.asarray(scores, dtype=np.float64)
    if y.ndim != 1 or y.shape != s.shape:
        raise ValueError(f"labels {y.shape} and scores {s.shape} must be equal-length vectors")
    if y.size == 0:
        raise ValueError("a split needs at least one sample")
    if not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0 or 1")
    y = y.astype(np.int64)
    n_pos = int(y.sum())
    finite = np.isfinite(s)
    single_class = n_pos in (0, y.size)
    if single_class:
        ap = auc = 0.0  # upstream returns 0.0 for both and keeps the split in the mean
    else:
        ap, auc = ranking_scores(y, np.where(finite, s, NONFINITE_SCORE))
    single_class_note = {"note": (
        f"one class only ({n_pos} of {y.size} labels Yes): AP and ROC AUC are undefined; upstream's "
        "compute_binary_classification_metrics returns 0.0 for both and keeps the split in the mean, then its "
        "CLI crashes writing the results (numpy int64 is not JSON serializable); reported here as 0.0, the value "
        "upstream computes")} if single_class else {}
    # the same reason for every such split, so that the scorecard, the console and the report count them
    degenerate = {"degenerate": dict.fromkeys(("average_precision", "roc_auc"), SINGLE_CLASS)} if single_class else {}
    return {
        "average_precision": ap,
        "roc_auc": auc,
        "num_samples": int(y.size),
        "num_positive": n_pos,
        "num_negative": int(y.size - n_pos),
        "positive_ratio": n_pos / y.size,
        "single_class": single_class,
        "n_nonfinite": int((~finite).sum()),
        # how many scores share their value with another sample (saturated probabilities tie)
        "n_tied": int(finite.sum() - _distinct(s[finite])) if finite.any() else 0,
        **single_class_note,
        **degenerate,
    }


def _distinct(values: np.ndarray) -> int:
    """How many distinct values (``np.unique(values).size`` without importing ``numpy.ma``, 8 ms, as it does)."""
    import numpy as np

    return 1 + int(np.count_nonzero(np.diff(np.sort(values)))) if values.size else 0


def ranking_scores(labels: np.ndarray, scores: np.ndarray) -> tuple[float, float]:
    """(average precision, ROC AUC) of finite scores with both classes present, as scikit-learn 1.x defines them.

    One descending sort; at each distinct score (the last index of each tie group) the true and false
    positives above it. AP is the step integral -sum(diff(recall) * precision) over the curve reversed and
    closed at (recall 0, precision 1); AUC the trapezoid area under (FPR, TPR) from (0, 0), after dropping the
    points collinear with both neighbours (second differences of FP and TP both zero), as ``roc_curve`` does
    by default: dropping them changes the rounding, not the area.
    """
    import numpy as np

    order = np.argsort(scores, kind="stable")[::-1]
    ranked = scores[order]
    last_of_tie = np.concatenate([np.flatnonzero(np.diff(ranked)), [ranked.size - 1]])
    tps = np.cumsum(labels[order].astype(np.float64))[last_of_tie]
    fps = 1 + last_of_tie.astype(np.float64) - tps
    precision = np.concatenate([(tps / (tps + fps))[::-1], [1.0]])
    recall = np.concatenate([(tps / tps[-1])[::-1], [0.0]])
    ap = max(0.0, float(-np.sum(np.diff(recall) * precision[:-1])))
    if fps.size > 2:
        corner = np.concatenate([[True], np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), [True]])
        fps, tps = fps[corner], tps[corner]
    fpr = np.concatenate([[0.0], fps]) / fps[-1]
    tpr = np.concatenate([[0.0], tps]) / tps[-1]
    # numpy's trapezoid rule written out, in its order of operations (scikit-learn's AUC to the bit): the lock's
    # numpy 1.26 has no np.trapezoid, numpy 2.4 no np.trapz.
    return ap, float((np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2.0).sum())
