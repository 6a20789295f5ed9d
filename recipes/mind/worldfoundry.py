"""WorldFoundry's MIND normaliser (iChubai/WorldFoundry@4c8036b, ``runners/mind/mind_metrics.py``), restated.

MIND publishes no composite score. WorldFoundry derives one, and this module computes it the same way so
that the numbers can be compared; the scorecard labels every number from here ``derived``, not official:

1. per sample, a raw value per metric id: ``avg_<x>`` of the block when finite, else the mean of the
   finite per-frame values (so an ``Infinity`` PSNR average falls back to the finite frames); a mirror
   directory's ``gsc_*`` is the mean over its rollouts;
2. per metric id, ``raw = mean over the samples that have a value`` (sample-weighted), then
   ``normalised = rule(raw)`` clamped to [0, 1] (the rule is applied to the mean, never per sample);
3. ``<group>_score`` = unweighted mean of the group's available normalised components;
4. ``mind_average`` = unweighted mean of the available group scores.

One difference is deliberate and documented in the README: WorldFoundry also averages the blocks of
records whose ``error`` is set and the rollouts it could not score are skipped; here those samples are
failed by name and carry no value, so they never enter a mean.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

PSNR_SATURATION_DB = 50.0
DINO_MSE_MAX = 4.0 / 768.0     # unit-norm 768-d patch tokens: squared distance <= 4 per token

# metric id -> (normalisation rule, higher is better on the raw scale)
METRIC_RULES: dict[str, tuple[str, bool]] = {
    "lcm_psnr": ("psnr_db", True),
    "lcm_ssim": ("unit", True),
    "lcm_lpips": ("unit_inverse", False),
    "lcm_mse": ("unit_inverse", False),
    "dino_mse": ("dino_feature_mse", False),
    "imaging_quality": ("unit", True),
    "aesthetic_quality": ("unit", True),
    "action_rpe_trans_mean": ("inverse_offset", False),
    "action_rpe_rot_mean_deg": ("degrees", False),
    "action_rpe_trans_median": ("inverse_offset", False),
    "action_rpe_rot_median_deg": ("degrees", False),
    "action_translation_rpe_trans_mean": ("inverse_offset", False),
    "action_rotation_rpe_rot_mean_deg": ("degrees", False),
    "gsc_psnr": ("psnr_db", True),
    "gsc_ssim": ("unit", True),
    "gsc_lpips": ("unit_inverse", False),
    "gsc_mse": ("unit_inverse", False),
}
METRIC_GROUPS: dict[str, tuple[str, ...]] = {
    "memory_consistency": ("lcm_psnr", "lcm_ssim", "lcm_lpips", "lcm_mse", "dino_mse"),
    "visual_quality": ("imaging_quality", "aesthetic_quality"),
    "action_control": ("action_rpe_trans_mean", "action_rpe_rot_mean_deg"),
    "scene_consistency": ("gsc_psnr", "gsc_ssim", "gsc_lpips", "gsc_mse"),
}
GROUP_SCORES = tuple(f"{group}_score" for group in METRIC_GROUPS)
PRIMARY = "mind_average"
COMPONENTS = tuple(m for members in METRIC_GROUPS.values() for m in members)


def finite(value: Any) -> float | None:
    """A JSON value as a finite float, else None (booleans, strings, NaN and infinities are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def mean_finite(values: Iterable[Any]) -> float | None:
    """Mean of the finite numbers among ``values``; None when there is none."""
    numbers = [v for v in (finite(x) for x in values) if v is not None]
    return math.fsum(numbers) / len(numbers) if numbers else None


def block_value(block: Mapping[str, Any], average_key: str, frames_key: str) -> float | None:
    """``block[average_key]`` when finite, else the mean of the finite values of ``block[frames_key]``."""
    value = finite(block.get(average_key))
    if value is None:
        frames = block.get(frames_key)
        value = mean_finite(frames) if isinstance(frames, list) else None
    return value


def _clamp01(value: float) -> float:
    return max(0.0, min(1.0, value))


def normalise(metric_id: str, raw: float | None) -> float | None:
    """Map a raw mean onto [0, 1], higher better, by the metric's rule (None stays None)."""
    if raw is None:
        return None
    rule = METRIC_RULES[metric_id][0]
    if rule == "unit":
        return _clamp01(raw)
    if rule == "unit_inverse":
        return _clamp01(1.0 - raw)
    if rule == "psnr_db":
        return _clamp01(raw / PSNR_SATURATION_DB)
    if rule == "dino_feature_mse":
        return _clamp01(1.0 - raw / DINO_MSE_MAX)
    if rule == "degrees":
        return _clamp01(1.0 - raw / 180.0)
    if rule == "inverse_offset":
        return _clamp01(1.0 / (1.0 + max(0.0, raw)))
    raise ValueError(f"unknown normalisation rule {rule!r}")


def aggregate(per_sample: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The WorldFoundry table from per-sample raw values: per metric id, group scores, ``mind_average``.

    Every row has ``raw``, ``normalised`` and ``n_samples``; groups and the average list the components
    they could use. Absent or non-finite per-sample values do not count.
    """
    buckets: dict[str, list[float]] = {m: [] for m in METRIC_RULES}
    for values in per_sample:
        for metric_id in METRIC_RULES:
            value = finite(values.get(metric_id))
            if value is not None:
                buckets[metric_id].append(value)
    table: dict[str, Any] = {}
    for metric_id, values in buckets.items():
        raw = math.fsum(values) / len(values) if values else None
        table[metric_id] = {"raw": raw, "normalised": normalise(metric_id, raw), "n_samples": len(values),
                            "rule": METRIC_RULES[metric_id][0]}
    for group, members in METRIC_GROUPS.items():
        available = [table[m]["normalised"] for m in members if table[m]["normalised"] is not None]
        table[f"{group}_score"] = {
            "value": math.fsum(available) / len(available) if available else None,
            "components": [m for m in members if table[m]["normalised"] is not None],
            "missing_components": [m for m in members if table[m]["normalised"] is None],
        }
    groups = [table[g]["value"] for g in GROUP_SCORES if table[g]["value"] is not None]
    table[PRIMARY] = {"value": math.fsum(groups) / len(groups) if groups else None,
                      "groups": [g for g in GROUP_SCORES if table[g]["value"] is not None]}
    return table
