"""The fixture mode end to end: synthetic data -> test-double generation -> native scoring -> diff -> report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pinbench_recipes.paibench_c.fixture as fixture
from pinbench.recipe import RunConfig, get_recipe
from pinbench_recipes.paibench_c.run import run


def _cfg(path: Path) -> RunConfig:
    return get_recipe("paibench-c").config(out_dir=path, fixture=True, env={})


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("fixture")
    return out, run(_cfg(out))


def test_fixture_passes_its_reference_and_writes_the_report(first_run) -> None:
    out, outcome = first_run
    assert outcome.exit_code == 0, outcome.message
    card = json.loads((out / "scorecard.json").read_text())
    assert card["status"] == "complete" and card["mode"] == "fixture"
    assert len(card["metrics"]) == 4 * len(fixture.FIXTURE_METRICS)
    assert "result: PASS" in (out / "diff.txt").read_text()
    assert (out / "report" / "index.html").is_file()
    sanity = card["extra"]["sanity_gt_vs_gt"]
    assert sanity["ok"] and not sanity["problems"]
    # the layout of the real dataset and of a real run
    for folder in ("videos", "canny", "blur", "depth_vids", "sam2_vids", "captions"):
        assert len(list((out / "fixture_data" / "dataset" / folder).iterdir())) == fixture.N_TASKS
    assert len(list((out / "edge" / "videos").glob("task_*.mp4"))) == fixture.N_TASKS
    rows = [json.loads(x) for x in (out / "inputs" / "depth.jsonl").read_text().splitlines()]
    assert rows[0]["depth"]["control_path"].endswith("depth_vids/task_0000.mp4")


def test_scores_order_by_perturbation_strength(first_run) -> None:
    out, _ = first_run
    metrics = json.loads((out / "scorecard.json").read_text())["metrics"]
    f1 = [metrics[f"{m}/canny_f1_score"]["value"] for m in ("edge", "seg")]
    assert f1[0] > f1[1]          # the weakest perturbation (edge) keeps the most edges
    assert metrics["edge/depth_si_rmse"]["value"] < metrics["seg/depth_si_rmse"]["value"]


def test_rerun_resumes_without_regenerating_or_rescoring(first_run) -> None:
    out, _ = first_run
    video = out / "edge" / "raw" / "task_0000" / "vision.mp4"
    sample = out / "samples" / "task_0000.json"
    before = (video.stat().st_mtime_ns, sample.stat().st_mtime_ns)
    again = run(_cfg(out))
    assert again.exit_code == 0
    assert (video.stat().st_mtime_ns, sample.stat().st_mtime_ns) == before


def test_gt_versus_gt_is_perfect(first_run) -> None:
    out, _ = first_run
    dataset = out / "fixture_data" / "dataset"
    sanity = fixture.gt_vs_gt({f"task_{i:04d}": dataset / "videos" / f"task_{i:04d}.mp4" for i in range(2)})
    assert sanity.ok
    assert all(v["canny_f1_score"] == 1.0 and v["blur_ssim"] == 1.0 and v["depth_si_rmse"] == 0.0
               and v["seg_m_iou"] == 1.0 for v in sanity.values.values())


def test_a_changed_scoring_path_fails_the_diff(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(fixture.PERTURBATION, "edge", (25.0, 3, 1.0))
    outcome = run(_cfg(tmp_path / "changed"))
    assert outcome.exit_code == 1
    assert "edge/canny_f1_score" in (tmp_path / "changed" / "diff.txt").read_text()
