"""The fixture mode end to end: synthetic data -> test-double generation -> native scoring -> diff -> report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stored import store_snapshot, stored_ids

import pinbench_recipes.paibench_c.fixture as fixture
from pinbench.core.config import RecipeError, RunConfig
from pinbench.core.recipe import get_recipe
from pinbench.core.runner import Shard
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
    before = (video.stat().st_mtime_ns, store_snapshot(out / "samples"))
    again = run(_cfg(out))
    assert again.exit_code == 0
    assert (video.stat().st_mtime_ns, store_snapshot(out / "samples")) == before


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


def _per_sample(out: Path) -> dict[str, tuple]:
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return {r["sample_id"]: (r["status"], r["result"], r["error"]) for r in rows}


def test_fixture_writes_samples_jsonl(first_run) -> None:
    out, _ = first_run
    assert list(_per_sample(out)) == [f"task_{i:04d}" for i in range(fixture.N_TASKS)]
    assert all(status == "ok" for status, _, _ in _per_sample(out).values())


def test_sharded_fixture_runs_then_a_merging_run_equal_one_plain_run(first_run, tmp_path: Path) -> None:
    plain, _ = first_run
    out = tmp_path / "sharded"
    recipe = get_recipe("paibench-c")
    first = run(recipe.config(out_dir=out, fixture=True, shard=Shard(0, 2), env={}))
    assert first.exit_code == 2   # half the tasks: partial
    assert len(list((out / "edge" / "videos").glob("*.mp4"))) == fixture.N_TASKS // 2  # only its share generated
    assert len(stored_ids(out / "samples")) == fixture.N_TASKS // 2
    run(recipe.config(out_dir=out, fixture=True, shard=Shard(1, 2), env={}))
    stamps = store_snapshot(out / "samples")
    merged = run(_cfg(out))
    assert merged.exit_code == 0, merged.message
    assert store_snapshot(out / "samples") == stamps  # nothing redone
    cards = [json.loads((d / "scorecard.json").read_text()) for d in (out, plain)]
    assert cards[0]["metrics"] == cards[1]["metrics"] and cards[0]["samples"] == cards[1]["samples"]
    assert _per_sample(out) == _per_sample(plain)


def test_fixture_honours_limit_skip_scoring_modalities_and_decoder(tmp_path: Path) -> None:
    recipe = get_recipe("paibench-c")
    skipped = run(recipe.config(out_dir=tmp_path / "gen", fixture=True, skip_scoring=True, env={}))
    assert skipped.exit_code == 0 and skipped.scorecard_path is None
    assert not (tmp_path / "gen" / "samples").exists()
    assert len(list((tmp_path / "gen" / "seg" / "videos").glob("*.mp4"))) == fixture.N_TASKS
    limited = run(recipe.config(out_dir=tmp_path / "gen", fixture=True, limit=1, env={},
                                options={"modalities": "edge", "decoder": "pyav"}))
    card = json.loads(limited.scorecard_path.read_text())
    assert card["samples"]["n_expected"] == 1 and set(card["metrics"]) == {
        f"edge/{m}" for m in fixture.FIXTURE_METRICS}
    assert card["extra"]["decoder"] == "pyav" and limited.exit_code == 3  # the 4-task reference does not apply
    assert list(_per_sample(tmp_path / "gen")) == ["task_0000"]


def test_options_the_fixture_does_not_use_are_refused() -> None:
    recipe = get_recipe("paibench-c")
    for option in ("gt", "launch", "native", "native_workers", "eval_batch_size", "evaluator_weights", "model"):
        value = {"gt": "force", "launch": "torchrun", "evaluator_weights": "on"}.get(option, "1")
        with pytest.raises(RecipeError, match=f"-o {option} does not apply to paibench-c --fixture runs"):
            recipe.config(fixture=True, options={option: value}, env={})
