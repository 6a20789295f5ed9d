"""WorldFoundry's normaliser: each rule, the group scores and mind_average, against hand-computed values."""

from __future__ import annotations

import math

import pytest

from pinbench_recipes.mind.worldfoundry import (
    COMPONENTS,
    METRIC_GROUPS,
    aggregate,
    block_value,
    mean_finite,
    normalise,
)


@pytest.mark.parametrize(("metric_id", "raw", "expected"), [
    ("lcm_psnr", 25.0, 0.5),                 # psnr_db: x / 50
    ("gsc_psnr", 60.0, 1.0),                 # clamped
    ("lcm_ssim", 0.7, 0.7),                  # unit
    ("imaging_quality", 1.3, 1.0),           # unit, clamped
    ("lcm_mse", 0.2, 0.8),                   # unit_inverse: 1 - x
    ("gsc_lpips", 1.4, 0.0),                 # clamped at 0
    ("dino_mse", 2.0 / 768.0, 0.5),          # 1 - x / (4/768)
    ("action_rpe_rot_mean_deg", 45.0, 0.75),  # degrees: 1 - x / 180
    ("action_rpe_rot_median_deg", 270.0, 0.0),
    ("action_rpe_trans_mean", 1.0, 0.5),     # inverse_offset: 1 / (1 + max(0, x))
    ("action_rpe_trans_median", 3.0, 0.25),
    ("action_translation_rpe_trans_mean", -3.0, 1.0),   # negative raw: max(0, x) = 0
])
def test_each_normalisation_rule(metric_id: str, raw: float, expected: float) -> None:
    assert normalise(metric_id, raw) == pytest.approx(expected)


def test_none_stays_none() -> None:
    assert normalise("lcm_mse", None) is None


def test_components_are_the_thirteen_group_members() -> None:
    assert len(COMPONENTS) == 13 and set(METRIC_GROUPS) == {"memory_consistency", "visual_quality",
                                                           "action_control", "scene_consistency"}


def test_normalisation_applies_to_the_mean_not_per_sample() -> None:
    """inverse_offset is not linear: 1/(1+mean) differs from mean(1/(1+x))."""
    table = aggregate([{"action_rpe_trans_mean": 0.0}, {"action_rpe_trans_mean": 2.0}])
    assert table["action_rpe_trans_mean"]["raw"] == pytest.approx(1.0)
    assert table["action_rpe_trans_mean"]["normalised"] == pytest.approx(0.5)      # not (1 + 1/3) / 2
    assert table["action_rpe_trans_mean"]["n_samples"] == 2


def test_groups_and_mind_average_by_hand() -> None:
    samples = [
        {"lcm_psnr": 20.0, "lcm_ssim": 0.6, "lcm_lpips": 0.3, "lcm_mse": 0.02, "dino_mse": 1.0 / 768.0,
         "imaging_quality": 0.5, "aesthetic_quality": 0.4, "action_rpe_trans_mean": 0.5,
         "action_rpe_rot_mean_deg": 18.0},
        {"lcm_psnr": 30.0, "lcm_ssim": 0.8, "lcm_lpips": 0.1, "lcm_mse": 0.04, "dino_mse": 3.0 / 768.0,
         "imaging_quality": 0.7, "aesthetic_quality": 0.6, "action_rpe_trans_mean": 1.5,
         "action_rpe_rot_mean_deg": 54.0},
        {"gsc_psnr": 40.0, "gsc_ssim": 0.9, "gsc_lpips": 0.05, "gsc_mse": 0.001},
    ]
    table = aggregate(samples)
    # memory: psnr 25/50 = 0.5, ssim 0.7, lpips 1-0.2 = 0.8, mse 1-0.03 = 0.97, dino 1-(2/768)/(4/768) = 0.5
    memory = (0.5 + 0.7 + 0.8 + 0.97 + 0.5) / 5
    visual = (0.6 + 0.5) / 2
    action = (1 / (1 + 1.0) + (1 - 36.0 / 180)) / 2           # trans mean 1.0, rot mean 36
    scene = (40 / 50 + 0.9 + 0.95 + 0.999) / 4
    assert table["memory_consistency_score"]["value"] == pytest.approx(memory)
    assert table["visual_quality_score"]["value"] == pytest.approx(visual)
    assert table["action_control_score"]["value"] == pytest.approx(action)
    assert table["scene_consistency_score"]["value"] == pytest.approx(scene)
    assert table["mind_average"]["value"] == pytest.approx((memory + visual + action + scene) / 4)


def test_missing_components_and_groups_are_left_out_not_zeroed() -> None:
    table = aggregate([{"lcm_ssim": 0.6, "lcm_mse": 0.1, "imaging_quality": 0.8}])
    assert table["memory_consistency_score"]["value"] == pytest.approx((0.6 + 0.9) / 2)
    assert table["memory_consistency_score"]["missing_components"] == ["lcm_psnr", "lcm_lpips", "dino_mse"]
    assert table["visual_quality_score"]["value"] == pytest.approx(0.8)
    assert table["action_control_score"]["value"] is None
    assert table["mind_average"]["value"] == pytest.approx(((0.6 + 0.9) / 2 + 0.8) / 2)
    assert table["mind_average"]["groups"] == ["memory_consistency_score", "visual_quality_score"]


def test_non_finite_sample_values_do_not_count() -> None:
    table = aggregate([{"lcm_psnr": math.inf}, {"lcm_psnr": 30.0}, {"lcm_psnr": None}, {"lcm_psnr": math.nan}])
    assert table["lcm_psnr"]["raw"] == pytest.approx(30.0) and table["lcm_psnr"]["n_samples"] == 1


def test_nothing_gives_nothing() -> None:
    table = aggregate([])
    assert table["mind_average"]["value"] is None and table["lcm_mse"]["raw"] is None


def test_block_value_prefers_the_finite_average_then_the_finite_frames() -> None:
    assert block_value({"avg_psnr": 31.0, "psnr": [1.0]}, "avg_psnr", "psnr") == 31.0
    assert block_value({"avg_psnr": math.inf, "psnr": [math.inf, 20.0, 40.0]}, "avg_psnr", "psnr") == 30.0
    assert block_value({"avg_psnr": math.nan, "psnr": [math.inf]}, "avg_psnr", "psnr") is None
    assert block_value({"psnr": "20"}, "avg_psnr", "psnr") is None


def test_mean_finite_ignores_booleans_and_strings() -> None:
    assert mean_finite([True, "3", 2.0, 4]) == 3.0
