"""Script 2 end to end on the fixture: per-sample records, strict group records, metrics, the composite."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from recipe_files import build_context

from pinbench.core.derived import DerivedRecord
from pinbench.core.recipe import get_recipe
from pinbench.core.runner import MISSING_ERROR, SampleRecord, input_hash, run_samples
from pinbench.core.scorecard import build_scorecard
from pinbench_recipes.camerabench import aggregate, fixture
from pinbench_recipes.camerabench.dataset import CameraBenchData, load_dataset
from pinbench_recipes.camerabench.official_json import BinaryScore, Failure, Script1Outputs, read_score_dir
from pinbench_recipes.camerabench.script2 import NO_OUTPUT, Script2Task, score_sample, script2_tasks


@pytest.fixture
def fx(tmp_path: Path) -> tuple[CameraBenchData, Script1Outputs]:
    data_dir, scores = fixture.write_fixture(tmp_path)
    data = load_dataset(data_dir)
    return data, read_score_dir(scores, data)


def _records(tasks: list[Script2Task], judge=None) -> dict[str, SampleRecord]:
    records = {}
    for task in tasks:
        try:
            result = score_sample(task, judge)
            records[task.sample_id] = SampleRecord(task.sample_id, "ok", result, None, input_hash(task), 0.0)
        except Exception as exc:  # what the runner records
            records[task.sample_id] = SampleRecord(task.sample_id, "failed", None,
                                                   f"{type(exc).__name__}: {exc}", input_hash(task), 0.0)
    return records


def _declared(data: CameraBenchData, judged: bool = False) -> list:
    """The metric specs described by recipe.yaml (a spec whose aggregation contradicts it raises)."""
    recipe = get_recipe("camerabench")
    return [spec.with_info(recipe.metric_info(spec.name)) for spec in aggregate.metric_specs(data, judged=judged)]


def _groups(data: CameraBenchData, outputs: Script1Outputs) -> dict[str, DerivedRecord]:
    return {g.sample_id: g for g in aggregate.group_records(data, _records(script2_tasks(data, outputs)))}


def test_fixture_values_by_construction(fx) -> None:
    data, outputs = fx
    groups = _groups(data, outputs)
    assert groups["binary_split__Move_In"].result["average_precision"] == pytest.approx(1 / 2)
    assert groups["binary_split__Move_In"].result["roc_auc"] == pytest.approx(2 / 3)
    assert groups["binary_split__Pan_Left"].result["average_precision"] == pytest.approx(7 / 12)
    assert groups["binary_split__Static"].result["single_class"] is True
    md = groups["vqa_skill__motion_direction"].result
    assert [md[k] for k in ("binary_acc", "question_acc", "text", "image", "group")] == \
        pytest.approx([1 / 2, 1 / 2, 1 / 3, 2 / 3, 1 / 3])
    cd = groups["vqa_skill__complex_description"].result
    assert [cd[k] for k in ("binary_acc", "question_acc", "text", "image", "group")] == \
        pytest.approx([7 / 8, 3 / 4, 1, 1 / 2, 1 / 2])
    avg = groups["camerabench_average"].result
    assert avg["camera_motion_average_precision"] == pytest.approx(13 / 36)
    assert avg["camera_motion_roc_auc"] == pytest.approx(31 / 72)
    assert avg["camera_vqa_accuracy"] == pytest.approx((11 / 16 + 5 / 8) / 2)
    assert avg["camera_retrieval_accuracy"] == pytest.approx((2 / 3 + 7 / 12 + 5 / 12) / 3)
    caption = groups["caption_family"].result
    assert caption["camera_caption_score"] == pytest.approx(caption["lexical_mean"])
    assert avg["camerabench_average"] == pytest.approx(
        (13 / 36 + 31 / 72 + (11 / 16 + 5 / 8) / 2 + (2 / 3 + 7 / 12 + 5 / 12) / 3 + caption["lexical_mean"]) / 5)
    assert avg["official"] is False


def test_every_metric_is_declared_with_its_aggregation(fx) -> None:
    data, _ = fx
    specs = {s.name: s for s in _declared(data, judged=True)}
    assert specs["binary/overall_average_precision"].primary and specs["vqa/overall_question_acc"].primary
    assert specs["binary/Move_In/average_precision"].aggregation == "none"
    assert specs["camerabench_average"].kind == "derived"
    assert specs["caption/word_f1"].kind == "official" and specs["caption/gen_match"].aggregation == "mean"


def test_scorecard_metrics_from_the_records(fx) -> None:
    data, outputs = fx
    tasks = script2_tasks(data, outputs)
    samples = _records(tasks)
    groups = aggregate.group_records(data, samples)
    card = build_scorecard(recipe="camerabench", recipe_version="0", checkpoint="fixture", mode="fixture",
                           metrics=_declared(data), records=list(samples.values()), n_expected=len(tasks),
                           provenance={}, config={}, timings={}, derived=groups)
    m = card.metrics
    assert card.status == "complete"
    assert card.samples.n_expected == 20 and card.derived.n_records == len(groups) == 7  # 3+2+1+1
    assert m["binary/overall_average_precision"].value == pytest.approx(float(Fraction(13, 36)))
    assert m["binary/overall_average_precision"].n_expected == 3
    assert m["binary/Pan_Left/roc_auc"].value == pytest.approx(0.625)
    assert m["vqa/overall_question_acc"].value == pytest.approx(5 / 8)
    assert m["retrieval/overall_image"].value == pytest.approx(7 / 12)
    assert m["retrieval/skill_based_text"].value == pytest.approx(1 / 3)
    assert m["retrieval/caption_based_group"].value == pytest.approx(1 / 2)
    assert m["caption/word_f1"].n_expected == 3
    assert "caption/gen_match" not in m
    assert m["camerabench_average"].value == pytest.approx(
        groups[-1].result["camerabench_average"])
    assert m["binary/overall_average_precision"].records == "derived" and m["caption/word_f1"].records is None


def test_one_failed_sample_fails_its_split_and_leaves_the_overall_partial(fx) -> None:
    data, outputs = fx
    outputs.binary["binary__Move_In__a3.0.0"] = Failure("Script 1 error in x.json: CUDA out of memory")
    samples = _records(script2_tasks(data, outputs))
    groups = {g.sample_id: g for g in aggregate.group_records(data, samples)}
    move_in = groups["binary_split__Move_In"]
    assert not move_in.ok
    assert move_in.error.startswith("1 of 5 samples not scored: binary__Move_In__a3.0.0 (Script1Failed: ")
    assert "CUDA out of memory" in move_in.error
    # upstream drops the row: labels 1 1 0 0 with scores .5 .5 .5 .1 -> AP 2/3
    assert "would report AP 0.6667" in move_in.error
    assert groups["binary_split__Pan_Left"].ok
    assert not groups["camerabench_average"].ok
    card = build_scorecard(recipe="camerabench", recipe_version="0", checkpoint="fixture", mode="fixture",
                           metrics=_declared(data), records=list(samples.values()), n_expected=len(samples),
                           provenance={}, config={}, timings={}, derived=list(groups.values()))
    overall = card.metrics["binary/overall_average_precision"]
    assert card.status == "partial"
    assert (overall.n_scored, overall.n_failed) == (2, 1)
    assert overall.failed[0].sample_id == "binary_split__Move_In"


def test_a_sample_without_any_output_is_missing_by_name(fx) -> None:
    data, outputs = fx
    del outputs.vqa["vqa__motion_direction__pan_left_vs_pan_right__0001"]
    samples = _records(script2_tasks(data, outputs))
    assert samples["vqa__motion_direction__pan_left_vs_pan_right__0001"].error == f"Script1Failed: {NO_OUTPUT}"
    groups = {g.sample_id: g for g in aggregate.group_records(data, samples)}
    assert "1 of 3 samples not scored: vqa__motion_direction__pan_left_vs_pan_right__0001" in \
        groups["vqa_skill__motion_direction"].error
    # a record that never made it to disk at all
    samples.pop("caption__a1.0.0")
    caption = {g.sample_id: g for g in aggregate.group_records(data, samples)}["caption_family"]
    assert f"caption__a1.0.0 ({MISSING_ERROR})" in caption.error


def test_group_hash_follows_its_members(fx) -> None:
    data, outputs = fx
    before = _groups(data, outputs)["binary_split__Pan_Left"].members_hash
    outputs.binary["binary__Pan_Left__a4.0.0"] = BinaryScore(0.25)
    assert _groups(data, outputs)["binary_split__Pan_Left"].members_hash != before
    assert _groups(data, outputs)["binary_split__Move_In"].members_hash == _groups(data, outputs)[
        "binary_split__Move_In"].members_hash


def test_judge_scores_go_into_the_caption_family(fx) -> None:
    data, outputs = fx
    calls = []

    def judge(reference: str, caption: str) -> dict:
        calls.append(caption)
        return {"gen_match": 1.0 if reference == caption else 0.0, "judge_model": "gpt-4o-test"}

    tasks = script2_tasks(data, outputs, judge={"model": "gpt-4o"})
    samples = _records(tasks, judge)
    groups = {g.sample_id: g for g in aggregate.group_records(data, samples, judged=True)}
    family = groups["caption_family"].result
    assert family["gen_match"] == pytest.approx(1 / 3)
    assert family["camera_caption_score"] == pytest.approx((family["lexical_mean"] + 1 / 3) / 2)
    assert len(calls) == 3
    assert "caption/gen_match" in {s.name for s in _declared(data, judged=True)}


def test_runner_round_trip_resumes_and_retries_only_failures(fx, tmp_path: Path) -> None:
    data, outputs = fx
    tasks = script2_tasks(data, outputs)
    first = run_samples(tasks, score_sample, tmp_path / "run", progress=False)
    assert first.n_failed == 0 and first.n_done == len(tasks)
    outputs.binary["binary__Move_In__a1.0.0"] = BinaryScore(0.75)
    second = run_samples(script2_tasks(data, outputs), score_sample, tmp_path / "run", progress=False)
    assert (second.n_done, second.n_reused) == (1, len(tasks) - 1)


def test_upstream_view_keeps_nonfinite_rows_as_upstream_does(tmp_path: Path) -> None:
    """Upstream Script 2 keeps a non-finite row (its error is null): binary ranks it at -1e10, VQA compares it as
    it is. The failed group's message must say what upstream computes with that row, not without it."""
    import json

    data_dir, scores = fixture.write_fixture(tmp_path)
    pan_left = scores / f"classification_scores_{fixture.MODEL_NAME}_Pan_Left.json"
    doc = json.loads(pan_left.read_text())
    doc["scores"][2]["score"] = float("inf")                # a3: "Yes", 0.9 -> +inf
    pan_left.write_text(json.dumps(doc))
    motion = scores / f"vqa_retrieval_scores_{fixture.MODEL_NAME}_motion_direction_pan_left_vs_pan_right.json"
    doc = json.loads(motion.read_text())
    doc["scores"][0]["yes_scores"]["pos_text_pos_image"] = float("nan")
    motion.write_text(json.dumps(doc))
    data = load_dataset(data_dir)
    outputs = read_score_dir(scores, data)
    groups = aggregate.group_records(data, _records(script2_tasks(data, outputs)), kept_upstream=outputs.kept_upstream)
    by_id = {g.sample_id: g for g in groups}
    # labels 1 0 1 0, scores 1.0 1.0 -1e10 .2: AP = 1/2 * 1/2 + 1/2 * 2/4 = 0.5; AUC = (.5 + 1 + 0 + 0) / 4 = 0.375
    # (without the row: labels 1 0 0, scores 1.0 1.0 .2 -> AUC 0.75 over 3)
    assert by_id["binary_split__Pan_Left"].error.endswith(
        "Upstream keeps the 1 non-finite score ranked at -1e10 and would report AP 0.5000, AUC 0.3750 over 4")
    # pair 1: NaN > 0.2 is false, so its pos question is wrong and its neg question right (1 of 2); pairs 2 and 3
    # give 0 and 1: question_acc (1 + 0 + 1) / 6 over 3 pairs (without the pair: 1/4 over 2)
    assert by_id["vqa_skill__motion_direction"].error.endswith(
        "Upstream keeps the 1 pair with non-finite scores as they are and would report question_acc 0.3333 "
        "over 3 pairs")


def test_a_single_class_split_says_so_in_its_record_and_the_readme(fx) -> None:
    """Static is all "No": 0.0 as upstream computes it, and the record says AP and AUC are undefined there and that
    upstream's CLI crashes (numpy int64 into json.dump, run on this split at the pinned commit)."""
    data, outputs = fx
    groups = _groups(data, outputs)
    static = groups["binary_split__Static"].result
    assert (static["average_precision"], static["roc_auc"], static["single_class"]) == (0.0, 0.0, True)
    assert static["note"].startswith("one class only (0 of 3 labels Yes): AP and ROC AUC are undefined")
    assert "not JSON serializable" in static["note"]
    assert "note" not in groups["binary_split__Pan_Left"].result
    readme = (build_context(Path(aggregate.__file__).parent) / "README.md").read_text()
    changes = readme.split("## Changes vs upstream", 1)[1].split("\n## ", 1)[0]
    (row,) = [line for line in changes.splitlines() if line.startswith("| single-class split |")]
    assert "not JSON serializable" in row and "`note`" in row
