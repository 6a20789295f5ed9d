"""pinbench table on two RememBench fixture runs: the fixture's own annotations, and other revisit frames."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pinbench import cli
from pinbench.ops.launch import run_recipe
from pinbench_recipes.remembench.prepare import read_annotation_file
from pinbench_recipes.remembench.tests.conftest import fixture_config, replace_annotations

runner = CliRunner()
METRICS = [f"{group}/{m}" for group in ("t2v", "i2v/rotation_180", "i2v/translation_180")
           for m in ("clip", "lpips_alex", "tempssim", "drift")]


@pytest.fixture(scope="module")
def two_runs(fixture_run, built_fixture, tmp_path_factory) -> tuple[Path, Path]:
    """The shared fixture run, and one whose T2V revisits are 120 frames earlier (the block is gone there)."""
    other = tmp_path_factory.mktemp("fixture-other-revisits")
    shutil.copytree(built_fixture.root, other / "fixture_data")
    pairs = read_annotation_file(built_fixture.annotations)
    replace_annotations(other / "fixture_data", json.dumps(
        {s: {"departure_frame": d, "revisit_frame": r - 120} for s, (d, r) in pairs.items()}))
    # other pairs, other T2V scores: the fixture reference fails
    assert run_recipe(fixture_config(other)).exit_code == 1
    return fixture_run[0], other


def _cells(text: str) -> dict[str, list[str]]:
    return {line.split(" | ")[0].lstrip("| ").split(" ")[0].replace("\\_", "_"): line.split(" | ")[1:]
            for line in text.splitlines() if line.startswith("| ") and "/" in line.split(" | ")[0]}


def test_the_table_of_two_fixture_runs_in_all_three_formats(two_runs, tmp_path: Path) -> None:
    cards = [json.loads((r / "scorecard.json").read_text()) for r in two_runs]
    results = {}
    for fmt in ("markdown", "latex", "csv"):
        shown = runner.invoke(cli.app, ["table", *map(str, two_runs), "--format", fmt])
        assert shown.exit_code == 0, shown.output
        results[fmt] = shown.output
    rows = {r["metric"]: r for r in csv.DictReader(io.StringIO(results["csv"]))}
    assert list(rows) == METRICS
    labels = ["fixture (fixture) [fixture-run0]", "fixture (fixture) [fixture-other-revisits0]"]
    for name in METRICS:
        values = [card["metrics"][name]["value"] for card in cards]
        assert [float(rows[name][f"{label} value"]) for label in labels] == values
        assert [rows[name][f"{label} scored"] for label in labels] == ["3" if name.startswith("t2v") else "2"] * 2
        direction = cards[0]["metrics"][name]["direction"]
        best = (max if direction == "higher" else min)(values)
        marked = ["best" in rows[name][f"{label} note"].split("; ") for label in labels]
        assert marked == [v == best for v in values], name
    # Other revisit frames change the T2V pair metrics only; TempSSIM does not look at the pair.
    assert rows["t2v/clip"][f"{labels[0]} note"] == "best"
    assert [rows["t2v/tempssim"][f"{label} note"] for label in labels] == ["best", "best"]
    markdown = _cells(results["markdown"])
    assert markdown["t2v/clip"][0].startswith("**") and not markdown["t2v/clip"][1].startswith("**")
    assert markdown["t2v/tempssim"][0].startswith("**") and markdown["t2v/tempssim"][1].startswith("**")
    latex = results["latex"]
    assert latex.count(r"\toprule") == 1 and r"t2v/lpips\_alex $\downarrow$" in latex
    if shutil.which("pdflatex"):
        (tmp_path / "table.tex").write_text(latex)
        (tmp_path / "paper.tex").write_text("\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n"
                                            "\\input{table.tex}\n\\end{document}\n")
        done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout[-2000:]
