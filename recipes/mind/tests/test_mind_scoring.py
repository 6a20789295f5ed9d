"""Scorecard metrics per split, the derived suite record, the cross-check summary and the partial-run guard."""

from __future__ import annotations

import pytest

from pinbench.core.recipe import get_recipe
from pinbench.core.runner import SampleRecord
from pinbench.core.scorecard import Scorecard, build_scorecard
from pinbench_recipes.mind.layout import SampleKey
from pinbench_recipes.mind.scoring import SUITE_ID, cross_check_summary, metric_specs, suite_record, suite_result

KEYS = [SampleKey("1st_data", "mem_test", "a"), SampleKey("1st_data", "mem_test", "b"),
        SampleKey("3rd_data", "action_space_test", "c"), SampleKey("1st_data", "mirror_test", "loop-1")]


def test_metric_names_per_split_with_their_cohorts() -> None:
    specs = {s.name: s for s in metric_specs(KEYS, ("lcm", "gsc"), native=True)}
    assert specs["1st_data/mem_test/lcm_mse"].sample_ids == ("1st_data.mem_test.a", "1st_data.mem_test.b")
    assert specs["1st_data/mem_test/lcm_mse"].result_key == "lcm_mse"
    assert specs["3rd_data/action_space_test/native/lcm_psnr"].result_key == "native/lcm_psnr"
    assert specs["1st_data/mirror_test/gsc_ssim"].sample_ids == ("1st_data.mirror_test.loop-1",)
    assert "1st_data/mirror_test/lcm_mse" not in specs and "1st_data/mem_test/gsc_mse" not in specs
    assert "3rd_data/mem_test/lcm_mse" not in specs               # no sample of that split in the plan
    assert specs["mind_average"].aggregation == "none" and specs["mind_average"].sample_ids == (SUITE_ID,)
    assert specs["mind_average"].derived and not specs["1st_data/mem_test/lcm_mse"].derived
    assert "memory_consistency_score" in specs and "scene_consistency_score" in specs
    assert "visual_quality_score" not in specs and "action_control_score" not in specs   # not requested
    names = {s.name for s in metric_specs(KEYS, ("dino", "action"), native=True)}
    assert "1st_data/mem_test/dino_mse" in names and "1st_data/mem_test/action_rpe_rot_mean_deg" in names
    assert not any("native" in n for n in names)                  # the native block is LCM / GSC only


def test_suite_record_is_worldfoundrys_table() -> None:
    suite = suite_result([{"lcm_mse": 0.1, "lcm_ssim": 0.5}, {"lcm_mse": 0.3, "lcm_ssim": 0.7}])
    assert suite["memory_consistency_score"] == pytest.approx(((1 - 0.2) + 0.6) / 2)
    assert suite["mind_average"] == suite["memory_consistency_score"]
    assert suite["visual_quality_score"] is None and "visual_quality_score" in suite["errors"]


def _record(sample_id: str, result: dict | None, error: str | None = None) -> SampleRecord:
    return SampleRecord(sample_id, "ok" if result is not None else "failed", result, error, "0" * 64, 0.0)


def _card(records: list[SampleRecord]) -> Scorecard:
    recipe = get_recipe("mind")
    specs = [s.with_info(recipe.metric_info(s.name)) for s in metric_specs(KEYS[:2], ("lcm",), native=False)]
    return build_scorecard(recipe="mind", recipe_version="1.0.0", checkpoint="model", mode="full", metrics=specs,
                           records=records, n_expected=2, provenance={}, config={}, timings={},
                           derived=[suite_record(records)])


def test_the_suite_is_a_derived_record_over_every_planned_sample() -> None:
    value = {"lcm_mse": 0.1, "lcm_psnr": 20.0, "lcm_ssim": 0.5, "lcm_lpips": 0.3}
    card = _card([_record("1st_data.mem_test.a", value), _record("1st_data.mem_test.b", {**value, "lcm_mse": 0.3})])
    assert card.samples.n_expected == 2 and card.derived.n_records == 1   # 2 samples, not 3
    assert card.metrics["1st_data/mem_test/lcm_mse"].n_expected == 2
    average = card.metrics["mind_average"]
    assert average.records == "derived" and (average.n_expected, average.n_scored) == (1, 1)
    assert average.value == pytest.approx(suite_result([value, {**value, "lcm_mse": 0.3}])["mind_average"])
    record = suite_record([_record("1st_data.mem_test.a", value), _record("1st_data.mem_test.b", None, "OOM")])
    assert record.members == ("1st_data.mem_test.a", "1st_data.mem_test.b") and record.n_members_ok == 1

def test_cross_check_summary_names_disagreeing_samples() -> None:
    results = {
        "1st_data.mem_test.a": {"perspective": "1st_data", "test_type": "mem_test",
                                "cross_check": {"mse": 1e-7, "ssim": 2e-6, "psnr": 1e-4, "lpips": 1e-5}},
        "1st_data.mem_test.b": {"perspective": "1st_data", "test_type": "mem_test",
                                "cross_check": {"mse": 1e-7, "ssim": 0.01, "psnr": None, "lpips": 1e-5}},
    }
    summary = cross_check_summary(results, ("lcm",))
    assert summary["1st_data/mem_test/ssim"]["disagree"] == ["1st_data.mem_test.b"]
    assert summary["1st_data/mem_test/ssim"]["max_abs_frame_diff"] == pytest.approx(0.01)
    assert summary["1st_data/mem_test/psnr"]["disagree"] == ["1st_data.mem_test.b"]
    assert summary["1st_data/mem_test/psnr"]["max_abs_frame_diff"] is None
    assert summary["1st_data/mem_test/mse"] == {"n_compared": 2, "max_abs_frame_diff": 1e-7, "tolerance": 1e-5,
                                                "disagree": []}
