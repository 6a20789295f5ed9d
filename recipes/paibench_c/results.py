"""Per-task results of a real run: the evaluator's values per modality, the native cross-check beside them.

Scorecard metric names are ``<modality>/<evaluator field>`` (``edge/canny_f1_score``, ``depth/depth_si_rmse``)
and ``<modality>/native/<field>`` for the CPU recomputation. Every expected task has one record; a value
the evaluator did not produce is absent and counts as not scored, with its reason kept in ``errors``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pinbench.core.inputs import InputKey
from pinbench.core.scorecard import NEVER_COMPUTED, MetricSpec
from pinbench.core.task import Task
from pinbench_recipes.paibench_c.metrics_json import EVALUATOR_METRICS, NULL_VALUE, ModalityMetrics

NATIVE_METRICS = ("canny_f1_score", "canny_precision", "canny_recall", "blur_ssim", "seg_m_iou", "seg_recall")
# How close the native recomputation must be to call a task's value "agreeing". Canny and the seg
# arithmetic are exact; SSIM can move in the last digits with the blur/resize float path.
AGREEMENT_TOLERANCE = {"canny_f1_score": 1e-6, "canny_precision": 1e-6, "canny_recall": 1e-6,
                       "blur_ssim": 1e-4, "seg_m_iou": 1e-5, "seg_recall": 1e-9}


@dataclass(frozen=True, slots=True)
class ScoredTask(Task):
    """A task as the evaluator scored it: the SHA-256 of its generated video per modality, the GT files it was
    scored against (video, caption) and what else changes its values (``gt`` policy, the GT work directory's key:
    dataset revision x evaluator commit x build, ``native``, ``decoder``). Its record is reused, from this run
    directory or the sample cache, only for the same."""

    videos: dict[str, str | None]
    gt: dict[str, InputKey]
    options: dict[str, Any]


def evaluated(result: Mapping[str, Any]) -> bool:
    """Whether a stored result may stand for its task: no modality of it failed as a whole (the evaluator's run
    failed, or the video was not valid), which a later run tries again; a null value is the evaluator's answer."""
    return all("/" in key for key in result.get("errors", {}))


def metric_specs(modalities: Sequence[str], *, native: bool, native_seg: Collection[str] | None = None,
                 evaluated: Sequence[str] = EVALUATOR_METRICS) -> list[MetricSpec]:
    """The ``evaluated`` metrics (those the evaluator reports) per modality; with ``native``, the cross-check
    metrics (seg only for ``native_seg``)."""
    specs = [MetricSpec(f"{m}/{metric}") for m in modalities for metric in evaluated]
    if native:
        seg = set(modalities if native_seg is None else native_seg)
        specs += [MetricSpec(f"{m}/native/{metric}") for m in modalities for metric in NATIVE_METRICS
                  if m in seg or not metric.startswith("seg_")]
    return specs


def task_result(task_id: str, *, evaluator: Mapping[str, ModalityMetrics | None],
                modality_errors: Mapping[str, str], native: Mapping[str, Any] | None,
                never: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One task's flat result dict for the runner / scorecard; ``never``: the modalities whose rollout no run
    generated, with why (their metrics count missing: ``pinbench.core.scorecard.never_computed``)."""
    result: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for modality, parsed in evaluator.items():
        if never and modality in never:
            continue
        if parsed is None:   # the task's own reason first: with it alone to evaluate, its invalid video left none
            errors[modality] = modality_errors.get(f"{modality}/{task_id}") or modality_errors.get(modality,
                                                                                                   "not evaluated")
            continue
        values = parsed.per_task.get(task_id)
        if values is None:
            errors[modality] = modality_errors.get(f"{modality}/{task_id}") or \
                f"not in {parsed.path.name} (no valid video, or the evaluator skipped it)"
            continue
        for metric, value in values.items():
            result[f"{modality}/{metric}"] = value
            if value is None:
                errors[f"{modality}/{metric}"] = parsed.reasons.get(task_id, {}).get(metric, NULL_VALUE)
    if native is not None:
        result.update({k: v for k, v in native.items() if k != "native_errors"})
        for key, why in native.get("native_errors", {}).items():   # "edge/canny": each edge/native/canny_* metric's
            modality, _, kind = key.partition("/")                    # reason (keyed native/edge/canny, none was read)
            errors.update({f"{modality}/native/{m}": why for m in NATIVE_METRICS if m.startswith(f"{kind}_")})
    result["errors"] = errors
    if never:
        result[NEVER_COMPUTED] = dict(never)
    return result


def cross_check(modalities: Sequence[str], results: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Evaluator vs native, per modality and metric, over the tasks where both have a value."""
    summary: dict[str, Any] = {}
    for modality in modalities:
        for metric in NATIVE_METRICS:
            pairs = []
            for result in results.values():
                a, b = result.get(f"{modality}/{metric}"), result.get(f"{modality}/native/{metric}")
                if a is not None and b is not None:
                    pairs.append((a, b))
            if not pairs:
                continue
            diffs = [abs(a - b) for a, b in pairs]
            tolerance = AGREEMENT_TOLERANCE[metric]
            summary[f"{modality}/{metric}"] = {
                "n_compared": len(pairs),
                "evaluator_mean": math.fsum(a for a, _ in pairs) / len(pairs),
                "native_mean": math.fsum(b for _, b in pairs) / len(pairs),
                "max_abs_diff": max(diffs),
                "n_disagree": sum(d > tolerance for d in diffs),
                "tolerance": tolerance,
            }
    return summary
