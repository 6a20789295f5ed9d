"""Binary camera-motion classification: AP and ROC AUC of one split, as the official Script 2 computes them.

``binary_classification_evaluation.py`` (t2v_metrics ``camerabench/``) scores each split with
scikit-learn: ``average_precision_score`` (step-wise AP over distinct thresholds; tied scores enter
together, no interpolation) and ``roc_auc_score`` (ties count half). Ties matter here: bf16
probabilities saturate at exactly 1.0 for many videos. A split with one class only gets 0.0 for both
and still counts in the mean (upstream's CLI then crashes writing its JSON, so its record says so);
non-finite scores are replaced by -1e10 first. The leaderboard shows
AP x 100; the official JSON, and this recipe, keep fractions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

NONFINITE_SCORE = -1e10


def split_metrics(labels: Sequence[int], scores: Sequence[float]) -> dict[str, Any]:
    """AP, ROC AUC and counts of one split (labels 1 = "Yes"); ValueError on empty or mismatched input."""
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
        from sklearn.metrics import average_precision_score, roc_auc_score  # 1 s to import: only where computed

        s = np.where(finite, s, NONFINITE_SCORE)
        ap = float(average_precision_score(y, s))
        auc = float(roc_auc_score(y, s))
    single_class_note = {"note": (
        f"one class only ({n_pos} of {y.size} labels Yes): AP and ROC AUC are undefined; upstream's "
        "compute_binary_classification_metrics returns 0.0 for both and keeps the split in the mean, then its "
        "CLI crashes writing the results (numpy int64 is not JSON serializable); reported here as 0.0, the value "
        "upstream computes")} if single_class else {}
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
        "n_tied": int(y.size - np.unique(s[finite]).size - (~finite).sum()) if finite.any() else 0,
        **single_class_note,
    }
