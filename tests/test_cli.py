"""The pinbench CLI: argument checks, diff exit codes, record-reference, recipe entry modules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pinbench import cli
from pinbench.provenance import collect_provenance
from pinbench.runner import SampleRecord
from pinbench.scorecard import MetricSpec, build_scorecard, write_scorecard

GOLDEN = Path(__file__).parent / "golden"
runner = CliRunner()


def _complete_scorecard(tmp_path: Path) -> Path:
    records = [SampleRecord(sample_id=f"s{i}", status="ok", result={"f1": 0.5 + 0.1 * i, "err": 0.2},
                            error=None, input_hash="0" * 64, seconds=0.1) for i in range(3)]
    card = build_scorecard(
        recipe="toy-bench", recipe_version="1.0.0", checkpoint="Toy-Nano", mode="smoke",
        metrics=[MetricSpec("f1"), MetricSpec("err", aggregation="median")], records=records, n_expected=3,
        provenance=collect_provenance(pins={}), config={"limit": 3}, timings={"score": 1.0},
    )
    return write_scorecard(card, tmp_path / "scorecard.json")


def _like(tmp_path: Path) -> Path:
    path = tmp_path / "like.yaml"
    path.write_text(yaml.safe_dump({
        "recipe": "toy-bench", "recipe_version": "1.0.0", "checkpoint": "Toy-Nano", "mode": "full",
        "n_samples": 600, "tier": "cross_hw", "source": {"kind": "paper_table", "citation": "toy table"},
        "metrics": {"f1": {"value": 0.6, "direction": "higher", "tolerance": {"abs": 0.05}, "primary": True},
                    "err": {"value": 0.2, "direction": "lower", "tolerance": {"rel": 0.1}}},
    }))
    return path


def test_diff_of_a_partial_run_exits_incomplete() -> None:
    result = runner.invoke(cli.app, ["diff", str(GOLDEN / "scorecard.json"),
                                     "--reference", str(GOLDEN / "reference.yaml")])
    assert result.exit_code == 2, result.output
    assert "INCOMPLETE" in result.output and "seg/miou" in result.output


def test_record_reference_then_diff_passes(tmp_path: Path) -> None:
    card = _complete_scorecard(tmp_path)
    out = tmp_path / "Toy-Nano.smoke.yaml"
    result = runner.invoke(cli.app, ["record-reference", str(card), "--like", str(_like(tmp_path)),
                                     "--out", str(out), "--tolerance", "f1=abs:0.001"])
    assert result.exit_code == 0, result.output
    recorded = yaml.safe_load(out.read_text())
    assert recorded["source"]["kind"] == "trusted_run" and recorded["mode"] == "smoke"
    assert recorded["n_samples"] == 3
    assert recorded["metrics"]["f1"]["tolerance"] == {"abs": 0.001}
    assert recorded["metrics"]["err"]["direction"] == "lower" and recorded["metrics"]["f1"]["primary"]
    result = runner.invoke(cli.app, ["diff", str(card), "--reference", str(out)])
    assert result.exit_code == 0, result.output
    # The 600-task reference it took directions from must not accept a 3-sample smoke run.
    result = runner.invoke(cli.app, ["diff", str(card), "--reference", str(_like(tmp_path))])
    assert result.exit_code == 3, result.output


def test_record_reference_refuses_a_partial_run(tmp_path: Path) -> None:
    result = runner.invoke(cli.app, ["record-reference", str(GOLDEN / "scorecard.json"),
                                     "--like", str(GOLDEN / "reference.yaml"), "--out", str(tmp_path / "r.yaml")])
    assert result.exit_code != 0
    assert not (tmp_path / "r.yaml").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["run", "dynamic-degree", "--checkpoint", "x", "--shard", "4/4"], "0-based"),
    (["run", "dynamic-degree"], "--checkpoint is required"),
    (["run", "dynamic-degree", "--checkpoint", "x", "--runtime", "slurm"], "--runtime must be"),
    (["run", "no-such-recipe", "--checkpoint", "x"], "unknown recipe"),
    (["run", "dynamic-degree", "--checkpoint", "x", "-o", "novalue"], "KEY=VALUE"),
])
def test_run_rejects_bad_arguments_in_one_line(args: list[str], message: str) -> None:
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 2
    assert message in result.output


def test_list_shows_every_recipe() -> None:
    result = runner.invoke(cli.app, ["list"])
    assert result.exit_code == 0, result.output
    for name in ("paibench-c", "remembench", "dynamic-degree"):
        assert name in result.output


def test_recipe_main_inserts_the_recipe_name(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    monkeypatch.setattr(cli, "main", lambda argv=None: seen.append(argv))
    cli.recipe_main("toy-bench", ["run", "--fixture"])
    cli.recipe_main("toy-bench", ["diff", "scorecard.json"])
    assert seen == [["run", "toy-bench", "--fixture"], ["diff", "scorecard.json"]]


def test_scorecard_written_by_cli_run_has_no_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_secretsecretsecret1234")
    card = _complete_scorecard(tmp_path)
    assert "hf_secretsecretsecret1234" not in card.read_text()
    assert json.loads(card.read_text())["status"] == "complete"


def test_record_reference_never_overwrites_silently_and_takes_directions(tmp_path: Path) -> None:
    card = _complete_scorecard(tmp_path)
    like = tmp_path / "like.yaml"
    like.write_text(yaml.safe_dump({
        "recipe": "toy-bench", "recipe_version": "1.0.0", "checkpoint": "Toy-Nano", "mode": "full",
        "n_samples": 600, "tier": "cross_hw", "source": {"kind": "paper_table", "citation": "toy table"},
        "metrics": {"f1": {"value": 0.6, "direction": "higher", "tolerance": {"abs": 0.05}, "primary": True}},
    }))
    out = tmp_path / "ref.yaml"
    args = ["record-reference", str(card), "--like", str(like), "--out", str(out)]
    result = runner.invoke(cli.app, args)  # no direction for a metric the template lacks
    assert isinstance(result.exception, ValueError) and "err" in str(result.exception)
    assert not out.exists()
    result = runner.invoke(cli.app, [*args, "--direction", "err=lower", "--tolerance", "err=rel:0.1"])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(out.read_text())["metrics"]["err"]["direction"] == "lower"
    before = out.read_text()
    result = runner.invoke(cli.app, [*args, "--direction", "err=lower", "--tolerance", "err=rel:0.2"])
    assert result.exit_code == 2 and "already exists" in result.output
    assert out.read_text() == before


def test_a_non_numeric_gpus_variable_only_affects_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUS", "all")
    assert runner.invoke(cli.app, ["list"]).exit_code == 0
    result = runner.invoke(cli.app, ["run", "dynamic-degree", "--fixture"])
    assert result.exit_code == 2 and "gpus" in result.output.lower()


def test_report_uses_each_runs_own_reference_and_samples(tmp_path: Path) -> None:
    runs = []
    for name in ("a", "b"):
        run_dir = tmp_path / name
        run_dir.mkdir()
        runs.append(_complete_scorecard(run_dir))
    # A stray record left in a run folder is not part of that run's samples.jsonl.
    (tmp_path / "a" / "samples").mkdir()
    (tmp_path / "a" / "samples" / "stray.json").write_text("{}")
    (tmp_path / "a" / "samples.jsonl").write_text("")
    result = runner.invoke(cli.app, ["report", *map(str, runs), "--out", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output
    html = (tmp_path / "report" / "index.html").read_text()
    assert "stray" not in html
