"""Reading the evaluator's ``metrics.json`` per task, with counts, never trusting its ``global`` block.

Why: ``global`` is ``pandas.DataFrame(per_video)[METRICS].mean()``, which silently skips None/NaN, so a
task whose metric raised is dropped from the denominator instead of failing the run. Here every
expected task is looked up in ``per_video``; a missing task or a null / NaN / non-finite value is counted
as not scored for that metric, and the scorecard recomputes the means from the per-task values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pinbench.core.files import FileError, MissingFile, read_json_file

EVALUATOR_METRICS = ("dover_tech_score", "blur_ssim", "canny_f1_score", "canny_precision", "canny_recall",
                     "depth_si_rmse", "seg_m_iou", "seg_recall")
CANNY_METRICS = ("canny_f1_score", "canny_precision", "canny_recall")   # its Canny step's: null together when it raises
NULL_VALUE = "null/NaN in metrics.json (the evaluator's step raised)"   # a null's failure, where its log says no more


# What a value can be by its definition (README, Native cross-check): F1 / precision / recall / IoU are fractions,
# SSIM lies in [-1, 1], si-RMSE is a root mean square. A value outside is no score of this evaluator.
VALUE_RANGES: dict[str, tuple[float, float]] = {
    "canny_f1_score": (0.0, 1.0), "canny_precision": (0.0, 1.0), "canny_recall": (0.0, 1.0),
    "blur_ssim": (-1.0, 1.0), "seg_m_iou": (0.0, 1.0), "seg_recall": (0.0, 1.0), "depth_si_rmse": (0.0, math.inf),
}


class MetricsFileError(ValueError):
    """metrics.json is unreadable or malformed; one line naming the file and the problem."""


def task_id_of(pred_name: str) -> str:
    """The evaluator's id rule: the part before ``__`` if any (seed variants), else the stem."""
    stem = pred_name[:-4] if pred_name.endswith(".mp4") else pred_name
    return stem.split("__")[0] if "__" in stem else stem


@dataclass
class ModalityMetrics:
    """One modality's evaluator results restricted to the expected tasks."""

    path: Path
    per_task: dict[str, dict[str, float | None]]   # expected task -> metric -> value (None: not scored)
    missing: list[str]                               # expected tasks absent from per_video
    unexpected: list[str]                            # per_video entries that are not expected tasks
    evaluator_global: dict[str, float | None]        # what the evaluator reported, for the record only
    counts: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, dict[str, str]] = field(default_factory=dict)   # task -> metric -> why its value is None

    def mean(self, metric: str) -> float | None:
        values = [v[metric] for v in self.per_task.values() if v.get(metric) is not None]
        return math.fsum(values) / len(values) if values else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _why_not_scored(metric: str, value: Any) -> str | None:
    """Why a per-task value counts as not scored (None: it is a score)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NULL_VALUE
    number = _number(value)
    if number is None:
        return f"{value!r:.40} in metrics.json is not a finite number"
    low, high = VALUE_RANGES.get(metric, (-math.inf, math.inf))
    if not low <= number <= high:
        return f"{number!r} in metrics.json is outside [{low:g}, {high:g}], the range of {metric}"
    return None


def parse_metrics_json(path: Path | str, expected_tasks: Sequence[str],
                       metrics: Sequence[str] = EVALUATOR_METRICS) -> ModalityMetrics:
    """Parse one metrics.json against the tasks this run expects and the metrics its evaluator reports."""
    path = Path(path)
    try:   # the library's reader, not loads_finite_json: the NaN tokens pandas writes are values counted not scored
        data = read_json_file(path)
    except MissingFile:
        raise MetricsFileError(f"{path}: file not found (the evaluator did not finish)") from None
    except FileError as exc:
        raise MetricsFileError(str(exc)) from None
    if not isinstance(data, Mapping) or not isinstance(data.get("per_video"), list):
        raise MetricsFileError(f"{path}: no 'per_video' list")
    found: dict[str, Mapping[str, Any]] = {}
    unexpected = []
    expected = set(expected_tasks)
    for i, entry in enumerate(data["per_video"]):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("pred_video_uuid"), str):
            raise MetricsFileError(f"{path}: per_video[{i}] has no pred_video_uuid")
        task = task_id_of(entry["pred_video_uuid"])
        if task not in expected:
            unexpected.append(entry["pred_video_uuid"])
            continue
        if task in found:
            raise MetricsFileError(f"{path}: {task} appears twice in per_video (seed variants are not "
                                   "part of this recipe)")
        found[task] = entry
    reasons = {task: {m: why for m in metrics if (why := "absent from metrics.json" if m not in found[task]
                                                  else _why_not_scored(m, found[task][m]))}
               for task in expected_tasks if task in found}
    per_task = {task: {m: None if m in reasons[task] else _number(found[task].get(m)) for m in metrics}
                for task in expected_tasks if task in found}
    raw_global = data.get("global") if isinstance(data.get("global"), Mapping) else {}
    result = ModalityMetrics(
        path=path, per_task=per_task, missing=[t for t in expected_tasks if t not in found],
        unexpected=unexpected, evaluator_global={m: _number(raw_global.get(m)) for m in metrics},
    )
    result.counts = {m: sum(1 for v in per_task.values() if v[m] is not None) for m in metrics}
    result.reasons = {task: why for task, why in reasons.items() if why}
    return result
