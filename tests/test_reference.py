"""References as data: loading with clear errors, the diff and its exit codes, recording, the golden table."""

from __future__ import annotations

import copy
import datetime
import difflib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from toy_recipe import toy_recipe

from pinbench.core.config import RecipeError
from pinbench.core.metricinfo import Tolerance
from pinbench.core.proposal import record_reference
from pinbench.core.reference import (
    EXIT_FAIL,
    EXIT_INCOMPLETE,
    EXIT_MISMATCH,
    EXIT_PASS,
    DiffResult,
    ReferenceFileError,
    load_reference,
    reference_from_dict,
    render_diff,
    result_line,
)
from pinbench.core.reference import diff as diff_scorecard
from pinbench.core.runner import SampleRecord
from pinbench.core.scorecard import MetricSpec, Scorecard, build_scorecard, load_scorecard


def Spec(name: str, aggregation: str = "mean", *args, direction: str = "higher", **kwargs) -> MetricSpec:  # noqa: N802
    return MetricSpec(name, aggregation, *args, direction=direction, **kwargs)  # as a recipe.yaml declares it


GOLDEN = Path(__file__).parent / "golden"
# Test double: the fixed provenance block of the committed golden scorecard.
FIXED_PROVENANCE: dict[str, Any] = json.loads((GOLDEN / "scorecard.json").read_text())["provenance"]

REFERENCE: dict[str, Any] = {
    "recipe": "toy",
    "recipe_version": "1.0.0",
    "checkpoint": "ckpt",
    "mode": "full",
    "n_samples": 3,
    "tier": "cross_hw",
    "source": {"kind": "paper_table", "citation": "Toy et al. 2026, Table 2"},
    "metrics": {
        "f1": {"value": 0.5, "direction": "higher", "tolerance": {"abs": 0.01}, "primary": True},
        "rmse": {"value": 2.0, "direction": "lower", "tolerance": {"rel": 0.05}},
    },
}


def ok(sample_id: str, **result: Any) -> SampleRecord:
    return SampleRecord(sample_id, "ok", result, None, "0" * 64, 0.1)


def failed(sample_id: str, error: str) -> SampleRecord:
    return SampleRecord(sample_id, "failed", None, error, "0" * 64, 0.1)


def make_card(f1: list[float | None], rmse: list[float | None], *, n_expected: int | None = None,
              **kw: Any) -> Scorecard:
    """A scorecard from per-sample values; a None sample is a failed record."""
    records: list[Any] = []
    for i, (a, b) in enumerate(zip(f1, rmse, strict=True)):
        records.append(failed(f"s{i}", "ValueError: bad") if a is None else ok(f"s{i}", f1=a, rmse=b))
    args: dict[str, Any] = dict(recipe="toy", recipe_version="1.0.0", checkpoint="ckpt", mode="full",
                                metrics=[Spec("f1"), Spec("rmse", direction="lower")], records=records,
                                n_expected=len(records) if n_expected is None else n_expected,
                                provenance=FIXED_PROVENANCE, config={}, timings={})
    args.update(kw)
    return build_scorecard(**args)


def ref(**changes: Any) -> Any:
    data = copy.deepcopy(REFERENCE)
    data.update(changes)
    return reference_from_dict(data)


def write_yaml(tmp_path: Path, data: Any, name: str = "ckpt.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


# --------------------------------------------------------------------------------------------- diff


def test_pass() -> None:
    result = diff_scorecard(make_card([0.5, 0.51, 0.49], [2.0, 2.05, 2.0]), ref())
    assert (result.exit_code, result.ok, result.problems) == (EXIT_PASS, True, [])
    assert [(r.metric, r.status) for r in result.rows] == [("f1", "PASS"), ("rmse", "PASS")]
    rmse = result.rows[1]
    assert rmse.delta == pytest.approx(0.05 / 3)
    # lower is better and the measured value is higher, by a sixth of the tolerance: was "worse" beside its PASS
    assert rmse.verdict == "within tolerance"
    assert rmse.scored == "3/3" and rmse.tolerance_text == "±5% (±0.1)"


def test_fail_is_two_sided_and_marks_better_or_worse() -> None:
    result = diff_scorecard(make_card([0.6] * 3, [1.5] * 3), ref())
    assert result.exit_code == EXIT_FAIL and not result.ok
    f1, rmse = result.rows
    assert (f1.status, f1.verdict, f1.delta) == ("FAIL", "better", pytest.approx(0.1))
    assert (rmse.status, rmse.verdict) == ("FAIL", "better")
    assert result.problems[0] == ("f1: measured 0.6 vs reference 0.5 (delta +0.1, better) is outside ±0.01, "
                                 "and outside the noise (±0)")
    worse = diff_scorecard(make_card([0.4] * 3, [2.0] * 3), ref())
    assert worse.rows[0].verdict == "worse" and worse.exit_code == EXIT_FAIL


def test_boundary_and_exact_tolerances() -> None:
    assert diff_scorecard(make_card([0.51] * 3, [2.1] * 3), ref()).exit_code == EXIT_PASS
    assert diff_scorecard(make_card([0.5101] * 3, [2.0] * 3), ref()).exit_code == EXIT_FAIL
    exact = copy.deepcopy(REFERENCE["metrics"])
    exact["f1"]["tolerance"] = {"abs": 0}
    card = make_card([0.1, 0.2, 0.3], [2.0] * 3)  # mean 0.2 (with float rounding)
    exact["f1"]["value"] = (0.1 + 0.2 + 0.3) / 3
    assert diff_scorecard(card, ref(metrics=exact)).exit_code == EXIT_PASS
    exact["f1"]["value"] = 0.2001
    assert diff_scorecard(card, ref(metrics=exact)).exit_code == EXIT_FAIL


def test_a_delta_of_float_noise_is_the_same_not_better_or_worse() -> None:
    """The fixture diffs showed ``-2.22045e-16 worse`` beside PASS: an exact match summed in another order."""
    card = make_card([0.1, 0.2, 0.3], [2.0] * 3)
    metrics = copy.deepcopy(REFERENCE["metrics"])
    metrics["f1"]["value"] = 0.2
    row = diff_scorecard(card, ref(metrics=metrics)).rows[0]
    assert row.delta != 0 and abs(row.delta) < 1e-15
    assert (row.status, row.verdict) == ("PASS", "same")
    metrics["f1"]["value"] = 0.2 - 1e-9
    assert diff_scorecard(card, ref(metrics=metrics)).rows[0].verdict == "within tolerance"
    metrics["f1"]["tolerance"] = {"abs": 1e-10}
    assert diff_scorecard(card, ref(metrics=metrics)).rows[0].verdict == "better"


def test_partial_run_is_incomplete_even_when_values_pass() -> None:
    result = diff_scorecard(make_card([0.5, None, 0.5], [2.0, None, 2.0]), ref())
    assert result.exit_code == EXIT_INCOMPLETE
    assert all(r.status == "PASS" for r in result.rows)
    assert result.problems[0].startswith("scorecard status is partial: f1: 2/3 scored (1 failed")
    assert result.rows[0].scored == "2/3"


def test_failed_run_and_null_metric() -> None:
    result = diff_scorecard(make_card([None] * 3, [None] * 3), ref())
    assert result.exit_code == EXIT_INCOMPLETE
    assert [r.status for r in result.rows] == ["MISSING", "MISSING"]
    assert "f1: no value, nothing scored (0/3)" in result.problems


def test_missing_metric() -> None:
    card = make_card([0.5] * 3, [2.0] * 3, metrics=[Spec("f1")])
    result = diff_scorecard(card, ref())
    assert result.exit_code == EXIT_INCOMPLETE
    assert result.rows[1].status == "MISSING" and result.rows[1].measured is None
    assert result.problems == ["rmse: missing from the scorecard"]


def test_extra_scorecard_metric_is_a_note_not_a_failure() -> None:
    records = [ok(f"s{i}", f1=0.5, rmse=2.0, precision=0.3) for i in range(3)]
    card = make_card([], [], records=records, n_expected=3,
                     metrics=[Spec("f1"), Spec("rmse", direction="lower"), Spec("precision")])
    result = diff_scorecard(card, ref())
    assert result.exit_code == EXIT_PASS
    assert result.notes == ["precision: no reference value (reported, not checked)"]


def test_a_recorded_reference_without_a_primary_metric_of_the_run_does_not_apply(tmp_path: Path) -> None:
    """A reference recorded from runs holds every metric they scored: one that dropped a primary metric was edited,
    and passed with that metric "not checked". A paper table publishes what it publishes: a note names the primary
    it lacks (RememBench's MosaiChunk-Pose arm: CLIP of one I2V setting only)."""
    records = [ok(f"s{i}", f1=0.5, rmse=2.0, recall=0.3) for i in range(3)]
    card = make_card([], [], records=records, n_expected=3,
                     metrics=[Spec("f1"), Spec("rmse", direction="lower"), Spec("recall", primary=True)])
    recorded = copy.deepcopy(REFERENCE)
    recorded["source"] = {"kind": "trusted_run", "citation": "scorecard of toy / ckpt", "provenance": {}}
    path = write_yaml(tmp_path, recorded)
    result = diff_scorecard(card, load_reference(path))
    assert result.exit_code == EXIT_MISMATCH and not result.ok
    assert result.problems == [f"recall: primary metric of the run has no value in the reference {path}, recorded "
                               "from runs that scored it (edited since?)"]
    published = diff_scorecard(card, load_reference(write_yaml(tmp_path, REFERENCE, "paper.yaml")))
    assert published.exit_code == EXIT_PASS and published.problems == []
    assert "recall: primary metric, not in this paper_table (reported, not checked)" in published.notes


@pytest.mark.parametrize("field, value, message", [
    ("recipe_version", "1.1.0", "recipe_version mismatch: reference is for '1.1.0', scorecard is '1.0.0'"),
    ("recipe", "other", "recipe mismatch"),
    ("checkpoint", "Other-Ckpt", "checkpoint mismatch"),
    ("mode", "smoke", "mode mismatch"),
    ("n_samples", 600, "sample count mismatch: reference has n_samples=600, scorecard n_expected=3"),
])
def test_reference_mismatch(field: str, value: Any, message: str) -> None:
    result = diff_scorecard(make_card([0.5] * 3, [2.0] * 3), ref(**{field: value}))
    assert result.exit_code == EXIT_MISMATCH
    assert result.problems[0].startswith(message)


def test_exit_code_precedence() -> None:
    failing_partial = make_card([0.9, None, 0.9], [2.0, None, 2.0])
    assert diff_scorecard(failing_partial, ref()).exit_code == EXIT_INCOMPLETE
    assert diff_scorecard(failing_partial, ref(mode="smoke")).exit_code == EXIT_MISMATCH
    # a smoke run over 4 tasks against a full 600-task reference never passes
    smoke = make_card([0.5] * 3, [2.0] * 3, mode="smoke")
    full = ref(n_samples=600)
    result = diff_scorecard(smoke, full)
    assert result.exit_code == EXIT_MISMATCH and len(result.problems) == 2


def test_a_run_the_reference_does_not_apply_to_is_shown_beside_it_never_judged() -> None:
    """A --limit smoke run against the full reference: its values beside the reference's, each row MISMATCH, no
    FAIL line per metric and no line per metric the subset lacks (they read as a comparison that was made)."""
    smoke = make_card([0.9] * 3, [2.0] * 3, metrics=[Spec("f1", primary=True)])   # f1 far outside ±0.01; no rmse
    result = diff_scorecard(smoke, ref(n_samples=600))
    assert result.exit_code == EXIT_MISMATCH
    assert result.problems == ["sample count mismatch: reference has n_samples=600, scorecard n_expected=3"]
    assert [(row.metric, row.status, row.delta, row.verdict) for row in result.rows] == [
        ("f1", "MISMATCH", pytest.approx(0.4), ""), ("rmse", "MISSING", None, "")]
    assert result.notes[0] == ("the reference does not apply to this run (problems above): its values are shown "
                               "beside the run's, not judged; 1 reference metric without a value in this run (rmse)")


@pytest.mark.parametrize("card, changes, said", [
    ({"config": {"limit": 3, "options": {"metrics": ["lcm"], "native": True},
                 "option_sources": {"metrics": "cli", "native": "default"}}}, {"n_samples": 7},
     "result: MISMATCH (exit 3): the reference is of 7 samples, this run has 3 (--limit 3 -o metrics=lcm)"),
    ({}, {"n_samples": 1}, "result: MISMATCH (exit 3): the reference is of 1 sample, this run has 3"),
    ({"mode": "smoke"}, {}, "result: MISMATCH (exit 3): the reference is for mode 'full', this run 'smoke'"),
    ({}, {"recipe_version": "1.1.0"},
     "result: MISMATCH (exit 3): the reference is for recipe version '1.1.0', this run '1.0.0'"),
    ({}, {}, "result: PASS (exit 0)"),
])
def test_the_result_line_says_why_the_reference_does_not_apply(card: dict[str, Any], changes: dict[str, Any],
                                                               said: str) -> None:
    """The last line of a diff says why a reference does not apply (a subset of metrics, --limit), where it said
    "MISMATCH (exit 3)" alone and the reason was among the problems above the table."""
    assert result_line(diff_scorecard(make_card([0.5] * 3, [2.0] * 3, **card), ref(**changes))) == said


# ------------------------------------------------------------------------------------------ loading


def test_load_valid(tmp_path: Path) -> None:
    reference = load_reference(write_yaml(tmp_path, REFERENCE))
    assert [name for name, m in reference.metrics.items() if m.primary] == ["f1"]
    assert reference.metrics["rmse"].tolerance.rel == 0.05
    assert reference.metrics["rmse"].tolerance.bound(2.0) == pytest.approx(0.1)
    assert reference.metrics["f1"].tolerance.as_dict() == {"abs": 0.01}
    assert reference.path == tmp_path / "ckpt.yaml"


def _broken(mutate: Any) -> dict[str, Any]:
    data = copy.deepcopy(REFERENCE)
    mutate(data)
    return data


@pytest.mark.parametrize("data, expected", [
    ("recipe: toy\nmetrics: [\n", "invalid YAML at line 3, column 1"),
    ("recipe: toy\nrecipe: again\n", "invalid YAML at line 2, column 1: duplicate key 'recipe'"),
    ("- just\n- a list\n", "expected a mapping at top level, got list"),
    ("recipe: toy\nb0: &b0 [" + ",".join(["x"] * 10) + "]\n"   # 10**9 values from 100 written: 'a YAML bomb'
     + "".join(f"b{i}: &b{i} [{','.join([f'*b{i - 1}'] * 10)}]\n" for i in range(1, 10)),
     "invalid YAML: its aliases repeat more than 1,000,000 values (each *name repeats its anchor's)"),
    (_broken(lambda d: d["metrics"]["rmse"].update(direction="down")),
     "schema violation at $.metrics.rmse.direction: must be one of ['higher', 'lower']"),
    (_broken(lambda d: d["metrics"]["f1"].update(tolerance={"abs": 0.01, "rel": 0.1})),
     "schema violation at $.metrics.f1.tolerance"),
    (_broken(lambda d: d["metrics"]["f1"].update(tolerance={})),
     "schema violation at $.metrics.f1.tolerance"),
    (_broken(lambda d: d["metrics"]["f1"].update(tolerance={"abs": -1})),
     "schema violation at $.metrics.f1.tolerance.abs"),
    (_broken(lambda d: d["metrics"]["f1"].pop("direction")), "$.metrics.f1: must contain ['direction'] properties"),
    (_broken(lambda d: d["metrics"]["f1"].update(value=float("nan"))), "metric f1: value must be finite"),
    (_broken(lambda d: d["metrics"]["f1"].update(primary=False)), "no metric is marked primary: true"),
    (_broken(lambda d: d.update(recipe_version=1.0)), "schema violation at $.recipe_version"),
    (_broken(lambda d: d.update(mode="nightly")), "schema violation at $.mode"),
    (_broken(lambda d: d.update(source={"kind": "trusted_run"})), "$.source: must contain ['provenance'] properties"),
    (_broken(lambda d: d.update(source={"kind": "upstream_readme"})), "$.source: must contain ['citation'] properties"),
    (_broken(lambda d: d.pop("n_samples")), "$: must contain ['n_samples'] properties"),
])
def test_load_errors_are_one_line_naming_the_file(tmp_path: Path, data: Any, expected: str) -> None:
    path = write_yaml(tmp_path, data)
    with pytest.raises(ReferenceFileError) as info:
        load_reference(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert expected in message
    assert "\n" not in message


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ReferenceFileError, match=r"absent\.yaml: file not found"):
        load_reference(tmp_path / "absent.yaml")


# ---------------------------------------------------------------------------------------- recording

@pytest.fixture
def toy(tmp_path: Path) -> Any:
    return toy_recipe(tmp_path / "recipes", name="toy")


def test_record_reference_round_trip(tmp_path: Path, toy: Any) -> None:
    card = make_card([0.1, 0.2, 0.7], [1.25, 2.5, 3.333333333333333])
    path = record_reference(card, tmp_path / "refs" / "ckpt.yaml", recipe=toy, tier="same_hw", note="H200 nightly")
    reference = load_reference(path, recipe=toy)
    assert reference.source["kind"] == "trusted_run"
    assert reference.source["provenance"] == FIXED_PROVENANCE
    assert (reference.tier, reference.note) == ("same_hw", "H200 nightly")
    assert (reference.n_samples, reference.mode) == (3, "full")
    assert reference.metrics["f1"].value == card.metrics["f1"].value  # exact float round trip
    # Directions, primary flags and tolerances come from the declaration, not from another reference.
    assert reference.metrics["rmse"].direction == "lower"
    assert [name for name, m in reference.metrics.items() if m.primary] == ["f1"]
    assert reference.metrics["f1"].tolerance.as_dict() == {"abs": 0.01}
    assert reference.metrics["rmse"].tolerance.as_dict() == {"rel": 0.05}
    result = diff_scorecard(card, reference)
    assert result.exit_code == EXIT_PASS
    assert all(r.delta == 0 and r.verdict == "same" for r in result.rows)
    assert path.read_text().startswith("# Recorded by pinbench record-reference")


def test_a_diff_against_a_recorded_run_says_what_ran_differently(tmp_path: Path, toy: Any) -> None:
    """A FAIL against a trusted run names what differs from that run (another torch, another GPU): the why a
    researcher looks for first. A reference without provenance (a paper's table) has no such line."""
    path = record_reference(make_card([0.5] * 3, [2.0] * 3), tmp_path / "ckpt.yaml", recipe=toy, tier="same_hw")
    moved = copy.deepcopy(FIXED_PROVENANCE)
    moved["packages"]["torch"], moved["gpus"] = "2.15.0", ["NVIDIA A100-SXM4-80GB"]
    result = diff_scorecard(make_card([0.6] * 3, [2.0] * 3, provenance=moved), load_reference(path, recipe=toy))
    assert result.exit_code == EXIT_FAIL
    assert [n for n in result.notes if n.startswith("ran differently")] == [
        "ran differently from the reference's run: packages.torch: reference 2.14.1, this run 2.15.0",
        'ran differently from the reference\'s run: gpus: reference ["NVIDIA H200"], this run '
        '["NVIDIA A100-SXM4-80GB"]']
    assert "  - ran differently from the reference's run: packages.torch: reference 2.14.1, this run 2.15.0" in (
        render_diff(result).splitlines())
    assert not [n for n in diff_scorecard(make_card([0.6] * 3, [2.0] * 3, provenance=moved), ref()).notes
                if n.startswith("ran differently")]
    edited = yaml.safe_load(path.read_text())   # a date written by hand reads as a date, not text
    edited["source"]["provenance"]["extra"] = {"calibrated": datetime.date(2026, 1, 2)}
    path.write_text(yaml.safe_dump(edited))
    assert "ran differently from the reference's run: extra.calibrated: reference 2026-01-02, this run none" in (
        diff_scorecard(make_card([0.5] * 3, [2.0] * 3), load_reference(path, recipe=toy)).notes)


def test_record_reference_narrows_but_never_widens(tmp_path: Path, toy: Any) -> None:
    card = make_card([0.5] * 3, [2.0] * 3)
    path = record_reference(card, tmp_path / "a.yaml", recipe=toy, tier="cross_hw",
                            overrides={"f1": Tolerance(abs=0.001)})
    assert load_reference(path, recipe=toy).metrics["f1"].tolerance.as_dict() == {"abs": 0.001}
    with pytest.raises(ValueError, match="wider than toy's cross_hw default"):
        record_reference(card, tmp_path / "b.yaml", recipe=toy, tier="cross_hw", overrides={"f1": Tolerance(abs=0.2)})
    with pytest.raises(ValueError, match="not in the scorecard: psnr"):
        record_reference(card, tmp_path / "c.yaml", recipe=toy, tier="cross_hw", overrides={"psnr": Tolerance(abs=0)})
    assert not (tmp_path / "b.yaml").exists() and not (tmp_path / "c.yaml").exists()


def test_record_reference_refuses_partial(tmp_path: Path, toy: Any) -> None:
    card = make_card([0.5, None, 0.5], [2.0, None, 2.0])
    with pytest.raises(ValueError, match="refusing to record a reference from a partial scorecard"):
        record_reference(card, tmp_path / "r.yaml", recipe=toy, tier="same_hw")
    assert not (tmp_path / "r.yaml").exists()


def test_record_reference_refuses_an_undeclared_metric_and_an_unknown_tier(tmp_path: Path, toy: Any) -> None:
    records = [ok(f"s{i}", f1=0.5, rmse=2.0, psnr=30.0) for i in range(3)]
    card = make_card([], [], records=records, n_expected=3,
                     metrics=[Spec("f1"), Spec("rmse", direction="lower"), Spec("psnr")])
    with pytest.raises(RecipeError, match="metric 'psnr' is not declared"):
        record_reference(card, tmp_path / "r.yaml", recipe=toy, tier="same_hw")
    with pytest.raises(ValueError, match="unknown tier"):
        record_reference(make_card([0.5] * 3, [2.0] * 3), tmp_path / "r.yaml", recipe=toy, tier="any_hw")
    assert not (tmp_path / "r.yaml").exists()


def test_a_reference_is_checked_against_the_declaration(tmp_path: Path, toy: Any) -> None:
    wide = copy.deepcopy(REFERENCE)
    wide["metrics"]["f1"]["tolerance"] = {"abs": 0.5}
    with pytest.raises(ReferenceFileError, match="wider than toy's cross_hw default"):
        load_reference(write_yaml(tmp_path, wide), recipe=toy)
    flipped = copy.deepcopy(REFERENCE)
    flipped["metrics"]["rmse"]["direction"] = "higher"
    with pytest.raises(ReferenceFileError, match="contradicts the recipe's declared lower"):
        load_reference(write_yaml(tmp_path, flipped), recipe=toy)
    promoted = copy.deepcopy(REFERENCE)  # which metrics are primary is the declaration's to say
    promoted["metrics"]["rmse"]["primary"] = True
    with pytest.raises(ReferenceFileError, match="rmse: primary: true contradicts the recipe.s declared primary"):
        load_reference(write_yaml(tmp_path, promoted), recipe=toy)
    unknown = copy.deepcopy(REFERENCE)
    unknown["metrics"]["psnr"] = {"value": 30.0, "direction": "higher", "tolerance": {"abs": 0.1}}
    with pytest.raises(ReferenceFileError, match="psnr is not declared by toy"):
        load_reference(write_yaml(tmp_path, unknown), recipe=toy)


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_non_finite_values_and_tolerances_are_invalid(tmp_path: Path, value: str) -> None:
    text = yaml.safe_dump(REFERENCE, sort_keys=False)
    for old in ("value: 0.5", "abs: 0.01"):
        path = write_yaml(tmp_path, text.replace(old, old.split(":")[0] + ": " + value))
        with pytest.raises(ReferenceFileError, match="finite"):
            load_reference(path)


# ------------------------------------------------------------------------------------------- golden


def test_render_diff_golden(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rendered table for a committed scorecard + reference is stable text (a log-file contract).

    To update after an intended change, rerun render_diff on tests/golden/{scorecard.json,reference.yaml}
    from inside tests/golden and review the new diff_table.txt by eye.
    """
    monkeypatch.chdir(GOLDEN)
    result = diff_scorecard(load_scorecard("scorecard.json"), load_reference("reference.yaml"))
    assert result.exit_code == EXIT_INCOMPLETE
    rendered = render_diff(result) + "\n"
    expected = (GOLDEN / "diff_table.txt").read_text()
    assert rendered == expected, "".join(difflib.unified_diff(
        expected.splitlines(keepends=True), rendered.splitlines(keepends=True), "expected", "rendered"))


def test_a_note_naming_many_metrics_reads_them_as_patterns() -> None:
    """CameraBench's 72 metrics without a published value were one note of 72 names (three such notes buried the
    problems); past 12 names, the metrics of one kind over every split read as ``a/*/c (n)``."""
    splits = ["Move_In", "Move_Out", "Pan_Left", "Pan_Right", "Tilt_Up", "Tilt_Down", "Zoom_In", "Zoom_Out"]
    names = [*(f"binary/{s}/roc_auc" for s in splits), "binary/overall_roc_auc",
             *(f"vqa/{s}/question_acc" for s in splits[:5]), "camerabench_average"]
    result = DiffResult(rows=[], problems=[], ok=True, exit_code=EXIT_PASS,
                        notes=[f"{n}: no reference value (reported, not checked)" for n in names])
    assert ("  - no reference value (reported, not checked): 15 metrics: binary/*/roc_auc (8), "
            "binary/overall_roc_auc, vqa/*/question_acc (5), camerabench_average") in render_diff(result).splitlines()
    few = DiffResult(rows=[], problems=[], ok=True, exit_code=EXIT_PASS,
                     notes=[f"{n}: no reference value (reported, not checked)" for n in names[:12]])
    assert f"  - no reference value (reported, not checked): {', '.join(names[:12])}" in render_diff(few).splitlines()
