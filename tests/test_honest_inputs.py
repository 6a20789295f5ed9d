"""Hostile inputs at every entry point: non-finite numbers and names that would escape their folders.

Each case goes through ``pinbench.cli.main`` (what the console script runs), so the exit code and the single
``error:`` line are what a user sees; the programmatic cases call the library the way a recipe does.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from loose_task import LooseTask

from pinbench import cli
from pinbench.core.config import RecipeError
from pinbench.core.provenance import collect_provenance
from pinbench.core.recipe import get_recipe
from pinbench.core.reference import MetricReference, diff, load_reference
from pinbench.core.runner import SampleRecord, load_records, merge_samples, read_merged, run_samples
from pinbench.core.scorecard import MetricSpec, Scorecard, ScorecardError, aggregate, build_scorecard, write_scorecard
from pinbench.core.store import encode_line


def _card(values: tuple[float, ...] = (0.5, 0.75, 1.0), **changes: Any) -> Scorecard:
    """A complete smoke scorecard of the installed dynamic-degree recipe."""
    recipe = get_recipe("dynamic-degree")
    records = [SampleRecord(f"v{i}", "ok", {"dynamic_degree": v}, None, "0" * 64, 0.1) for i, v in enumerate(values)]
    card = build_scorecard(
        recipe=recipe.name, recipe_version=recipe.version, checkpoint="Toy-Nano", mode="smoke",
        metrics=[MetricSpec("dynamic_degree").with_info(recipe.metric_info("dynamic_degree"))], records=records,
        n_expected=len(records), provenance=collect_provenance(pins={}), config={"limit": 3}, timings={"score": 1.0},
    )
    return dataclasses.replace(card, **changes)


def _pinbench(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the pinbench CLI as the console script does: (exit code, stdout, stderr)."""
    try:
        cli.main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def _with_literal(tmp_path: Path, literal: str, where: str = "value") -> Path:
    """A valid scorecard file whose metric value (or score timing) is replaced by a raw JSON literal."""
    card = _card()
    text = json.dumps(card.to_json(), indent=2)
    old = f'"value": {json.dumps(card.metrics["dynamic_degree"].value)}' if where == "value" \
        else '"score": 1.0'
    assert old in text
    path = tmp_path / "scorecard.json"
    path.write_text(text.replace(old, old.split(":")[0] + ": " + literal, 1))
    return path


# ------------------------------------------------------------------------------------ non-finite numbers


@pytest.mark.parametrize("literal", ["Infinity", "-Infinity", "NaN", "1e999"])
@pytest.mark.parametrize("where", ["value", "timing"])
def test_diff_of_a_non_finite_scorecard_is_invalid_input(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         literal: str, where: str) -> None:
    path = _with_literal(tmp_path, literal, where)
    reference = tmp_path / "ref.yaml"
    assert _pinbench(capsys, "record-reference", _card_file(tmp_path / "good"), "--out", reference)[0] == 0
    code, out, err = _pinbench(capsys, "diff", path, "--reference", reference)
    assert code == 2 and "PASS" not in out and "FAIL" not in out
    line = _one_error_line(err)
    assert str(path) in line and f"non-finite number {literal}" in line


@pytest.mark.parametrize("literal", ["Infinity", "NaN", "1e999"])
def test_report_and_record_reference_refuse_a_non_finite_scorecard(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str],
                                                                   literal: str) -> None:
    path = _with_literal(tmp_path, literal)
    code, _, err = _pinbench(capsys, "report", path, "--out", tmp_path / "report")
    assert code == 2 and str(path) in _one_error_line(err)
    assert not (tmp_path / "report" / "index.html").exists()  # no PASS badge anywhere
    code, _, err = _pinbench(capsys, "record-reference", path, "--out", tmp_path / "ref.yaml")
    assert code == 2 and str(path) in _one_error_line(err)
    assert not (tmp_path / "ref.yaml").exists()


@pytest.mark.parametrize(("tolerance", "message"), [
    ("dynamic_degree=abs:nan", "finite"),
    ("dynamic_degree=rel:inf", "finite"),
    ("dynamic_degree=abs:1e999", "finite"),
    ("psnr=abs:0.001", "not in the scorecard: psnr"),
])
def test_record_reference_refuses_non_finite_and_unknown_tolerances(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str],
                                                                     tolerance: str, message: str) -> None:
    out = tmp_path / "ref.yaml"
    code, _, err = _pinbench(capsys, "record-reference", _card_file(tmp_path), "--out", out, "--tolerance", tolerance)
    assert code == 2 and message in _one_error_line(err) and not out.exists()


@pytest.mark.parametrize(("recipe", "message"), [
    ("no-such-bench", "unknown recipe 'no-such-bench'"),
    ("remembench", "metric 'dynamic_degree' is not declared by its recipe 'remembench'"),
])
def test_record_reference_names_a_scorecard_whose_recipe_was_edited(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str],
                                                                     recipe: str, message: str) -> None:
    out = tmp_path / "ref.yaml"
    path = _card_file(tmp_path / "edited", recipe=recipe)
    code, _, err = _pinbench(capsys, "record-reference", path, "--out", out)
    assert code == 2 and _one_error_line(err).startswith(f"error: {path}: {message}") and not out.exists()
    good = _card_file(tmp_path / "good")   # the second of two runs: the one of another recipe is named
    code, _, err = _pinbench(capsys, "record-reference", good, path, "--out", out)
    assert code == 2 and _one_error_line(err).startswith(f"error: {path}: a scorecard of {recipe!r}, {good} one of "
                                                         "'dynamic-degree'") and not out.exists()


@pytest.mark.parametrize("value", [".inf", ".nan", "1e999", "true"])
def test_diff_against_a_non_finite_reference_is_invalid_input(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              value: str) -> None:
    reference = tmp_path / "ref.yaml"
    card = _card_file(tmp_path)
    assert _pinbench(capsys, "record-reference", card, "--out", reference)[0] == 0
    text = reference.read_text()
    recorded = yaml.safe_load(text)["metrics"]["dynamic_degree"]["value"]
    reference.write_text(text.replace(f"value: {recorded}", f"value: {value}", 1))
    code, out, err = _pinbench(capsys, "diff", card, "--reference", reference)
    assert code == 2 and "PASS" not in out and str(reference) in _one_error_line(err)


def test_in_memory_scorecards_and_references_are_checked_too(tmp_path: Path) -> None:
    good = _card()
    reference = load_reference(_reference_file(tmp_path, good))
    bad = dataclasses.replace(good, metrics={
        "dynamic_degree": dataclasses.replace(good.metrics["dynamic_degree"], value=math.inf)})
    with pytest.raises(ScorecardError, match=r"\$\.metrics\.dynamic_degree\.value is not finite"):
        diff(bad, reference)
    with pytest.raises(ScorecardError, match=r"\$\.timings\.score is not finite"):
        write_scorecard(_card(timings={"score": math.nan}), tmp_path / "scorecard.json")
    assert not (tmp_path / "scorecard.json").exists()
    for value in (math.inf, math.nan, True):
        with pytest.raises(ValueError, match="finite number"):
            MetricReference(value=value, direction="higher", tolerance=reference.metrics["dynamic_degree"].tolerance)


def test_aggregates_that_overflow_are_refused_not_written() -> None:
    for aggregation in ("mean", "median"):
        with pytest.raises(ValueError, match="overflows"):
            aggregate([1e308, 1.5e308], aggregation)
    with pytest.raises(ValueError, match="'dynamic_degree'.*overflows"):
        _card(values=(1.7e308, 1.7e308))


def test_a_boolean_or_huge_integer_result_is_a_failed_sample_not_a_score() -> None:
    card = _card(values=(True, 10**400, 0.5))  # type: ignore[arg-type]
    metric = card.metrics["dynamic_degree"]
    assert metric.n_scored == 1 and metric.value == 0.5
    reasons = {f.sample_id: f.error for f in metric.failed}
    assert "not a number" in reasons["v0"] and "not finite" in reasons["v1"]


@pytest.mark.parametrize("literal", ["Infinity", "NaN", "1e999"])
def test_a_stored_result_holding_a_non_finite_number_is_recomputed_and_merges(tmp_path: Path, literal: str) -> None:
    tasks = [LooseTask(f"s{i}", x=i) for i in range(3)]
    calls: list[str] = []

    def score(task: dict) -> dict:
        calls.append(task["sample_id"])
        return {"v": task["x"] / 2}

    run_samples(tasks, score, tmp_path, progress=False)
    log = tmp_path / "samples" / "run.jsonl"
    first = log.read_bytes()

    def store_non_finite() -> None:
        """Rewrite s1's line as another tool might: a non-finite value, with a digest that matches it."""
        lines = log.read_bytes().splitlines()
        body = lines[1][len(b'{"digest":"') + 64 + len(b'","record":'):-1].replace(b'"v":0.5', literal.encode().join(
            [b'"v":', b""]))
        log.write_bytes(b"\n".join([lines[0], encode_line(body).rstrip(b"\n"), *lines[2:]]) + b"\n")

    store_non_finite()
    assert set(load_records(tmp_path)) == {"s0", "s2"}  # the edited record is corrupt, not a result
    calls.clear()
    run_samples(tasks, score, tmp_path, progress=False)
    assert calls == ["s1"]
    assert f"non-finite number {literal}" in (tmp_path / "samples" / "quarantine" / "run.jsonl").read_text()
    log.write_bytes(first)  # the recomputed line dropped again, the corrupt one back
    store_non_finite()
    merged = merge_samples([tmp_path], tasks, dest=tmp_path / "samples.jsonl")  # no crash on writing JSONL
    assert merged[1].error.startswith("missing: no result") and f"non-finite number {literal}" in merged[1].error
    assert "record of sample 's1'" in merged[1].error
    lines = (tmp_path / "samples.jsonl").read_text().splitlines()
    lines[0] = lines[0].replace('"v":0.0', f'"v":{literal}')
    (tmp_path / "samples.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"samples\.jsonl:1: bad sample record"):
        read_merged(tmp_path / "samples.jsonl")


# ------------------------------------------------------------------------------------------------ names


HOSTILE_CHECKPOINTS = ["../../x", "", ".x", "..", "a/b", "a\\b", "x" * 101]


@pytest.mark.parametrize("checkpoint", HOSTILE_CHECKPOINTS)
def test_record_reference_of_a_hostile_scorecard_writes_nothing_anywhere(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str],
                                                                         checkpoint: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "a" / "b" / "c"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    path = _card_file(work, checkpoint=checkpoint, mode="full")
    before = _tree(tmp_path)
    references = get_recipe("dynamic-degree").dir / "references"
    refs_before = sorted(p.name for p in references.iterdir())
    for command in (["record-reference", path], ["diff", path], ["report", path, "--out", work / "report"]):
        code, out, err = _pinbench(capsys, *command)
        assert code == 2 and "checkpoint" in _one_error_line(err) and "Traceback" not in out + err
    assert _tree(tmp_path) == before
    assert sorted(p.name for p in references.iterdir()) == refs_before


@pytest.mark.parametrize("recipe", ["", ".x", "..", "../x", "Dynamic_Degree/.."])
def test_a_scorecard_naming_a_hostile_recipe_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        recipe: str) -> None:
    path = _card_file(tmp_path, recipe=recipe)
    for command in (["record-reference", path], ["diff", path], ["report", path, "--out", tmp_path / "report"]):
        code, _, err = _pinbench(capsys, *command)
        assert code == 2 and "recipe" in _one_error_line(err)
    assert not (tmp_path / "report").exists()


@pytest.mark.parametrize("checkpoint", HOSTILE_CHECKPOINTS[:-1])
def test_run_and_fetch_refuse_hostile_checkpoints_before_writing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                 checkpoint: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    videos = tmp_path / "videos"
    videos.mkdir()
    for command in (["run", "dynamic-degree", "--checkpoint", checkpoint, "-o", f"videos={videos}"],
                    ["run", "remembench", "--checkpoint", checkpoint, "--offline"],
                    ["fetch", "paibench-c", "--checkpoint", checkpoint, "--limit", "1"]):
        if checkpoint == "" and command[0] == "fetch":
            continue  # fetch without --checkpoint fetches what every checkpoint shares
        code, out, err = _pinbench(capsys, *command)
        line = _one_error_line(err)
        assert code == 2 and ("not allowed" in line or "--checkpoint is required" in line), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["videos"]  # no runs/ folder, nothing above it


@pytest.mark.parametrize("name", ["", ".x", "..", "../x", "a/b"])
def test_recipe_names_are_one_line_errors_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     name: str) -> None:
    for command in (["run", name, "--checkpoint", "a"], ["fetch", name], ["export", name, tmp_path / "e"],
                    ["build", name, "--build-dir", tmp_path / "b"], ["demo", "--recipe", name, "--out", tmp_path]):
        code, _, err = _pinbench(capsys, *command)
        assert code == 2 and "recipe" in _one_error_line(err)
    assert sorted(os.listdir(tmp_path)) == []
    with pytest.raises(RecipeError):
        get_recipe(name)


def test_reference_and_out_paths_of_the_recipe_stay_inside_its_folders() -> None:
    recipe = get_recipe("dynamic-degree")
    for checkpoint in [*HOSTILE_CHECKPOINTS, "v1..2"]:  # the rule says "without '..'", inside a name too
        with pytest.raises(RecipeError, match="not allowed"):
            recipe.reference_file(checkpoint, "full")
        with pytest.raises(RecipeError, match="not allowed"):
            recipe.default_out_dir(checkpoint, "smoke")
        with pytest.raises(RecipeError, match="not allowed|required"):
            recipe.config(checkpoint)

# -------------------------------------------------------------------------------------------- helpers


def _card_file(folder: Path, **changes: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "scorecard.json"
    card = _card().to_json()
    card.update(changes)
    path.write_text(json.dumps(card))  # as a hand-edited file: written without validation
    return path


def _reference_file(tmp_path: Path, card: Scorecard) -> Path:
    from pinbench.core.proposal import record_reference

    return record_reference(card, tmp_path / "ref.yaml", recipe=get_recipe("dynamic-degree"), tier="same_hw")


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))
