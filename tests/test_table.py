"""pinbench table: metrics x runs in Markdown, LaTeX (booktabs) and CSV; best, ties, partial runs, footnotes."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from toy_runs import write_toy_run
from typer.testing import CliRunner

from pinbench import cli
from pinbench.core.scorecard import MetricSpec
from pinbench.results.compare import compare_runs, load_run
from pinbench.results.table import TableError, build_table, latex_text, load_columns, render

GOLDEN = Path(__file__).parent / "golden"
HARD = [f"t{i:02d}" for i in range(10)]
ALL_METRICS = [MetricSpec("f1", "mean", direction="higher", primary=True),
               MetricSpec("err", "median", direction="lower"),
               MetricSpec("hard/f1_x", "mean", key="f1", direction="higher", sample_ids=HARD)]
CAPTION = r"Toy & friends: 100% of $x_1$ {a} ~ ^ \ <b> | # *c* [d](e)"
runner = CliRunner()


def write_run(root: Path, name: str, shift: float, seed: int, *, failed: tuple[str, ...] = (),
              metrics: list[MetricSpec] = ALL_METRICS, **options: Any) -> Path:
    """A toy run (``tests/helpers/toy_runs.py``) whose ``failed`` samples fail with a decode error."""
    return write_toy_run(root, name, metrics, shift=shift, seed=seed, failed=dict.fromkeys(failed, "decode error"),
                         **options)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[Path]:
    """Base_A (no hard/f1_x), Model-B (best f1), Model-C (within noise of B), Model-D (partial, highest f1)."""
    root = tmp_path_factory.mktemp("table-runs")
    return [write_run(root, "Base_A", 0.0, 1, metrics=ALL_METRICS[:2]), write_run(root, "Model-B", 0.05, 2),
            write_run(root, "Model-C", 0.0495, 3), write_run(root, "Model-D", 0.2, 4, failed=("t03", "t07"))]


def table(paths, **options):
    return build_table(load_columns(paths), **options)


def cards(paths) -> list[dict]:
    return [json.loads((p / "scorecard.json").read_text()) for p in paths]


# ------------------------------------------------------------------------------ what the table says


def test_best_per_metric_by_direction_among_complete_runs(runs) -> None:
    built = table(runs)
    rows = {r.metric: r for r in built.rows}
    values = {name: [c["metrics"].get(name, {}).get("value") for c in cards(runs)] for name in rows}
    # f1 is higher-is-better: Model-D's is the highest, but D is partial, so B (the highest complete) is bold
    assert values["f1"][3] > values["f1"][1] > values["f1"][2] > values["f1"][0]
    assert [c.best for c in rows["f1"].cells] == [False, True, False, False]
    # err is lower-is-better: C's is the lowest complete one
    assert values["err"][2] < values["err"][1] < values["err"][0]
    assert [c.best for c in rows["err"].cells] == [False, False, True, False]
    assert not any(c.best or c.tied for row in built.rows for c in row.cells[3:])


def test_ties_are_the_paired_test_of_compare(runs) -> None:
    built = table(runs)
    rows = {r.metric: r for r in built.rows}
    b, c, a = (load_run(p) for p in (runs[1], runs[2], runs[0]))
    verdict = {m.name: m.verdict for m in compare_runs(b, c).metrics}
    assert verdict["f1"] == "within noise" and rows["f1"].cells[2].tied
    assert {m.name: m.verdict for m in compare_runs(b, a).metrics}["f1"] == "worse"
    assert not rows["f1"].cells[0].tied
    assert rows["err"].cells[1].tied and rows["hard/f1_x"].cells[2].tied


def test_a_partial_run_is_never_best_even_on_a_metric_it_scored_fully(runs, tmp_path: Path) -> None:
    """Its failure (t20) is outside the hard/f1_x cohort (t00-t09): that metric has every sample, the run does not."""
    partial = write_run(tmp_path, "Model-P", 0.2, 4, failed=("t20",))
    card = cards([partial])[0]
    assert card["status"] == "partial" and card["metrics"]["hard/f1_x"]["n_scored"] == 10
    assert card["metrics"]["hard/f1_x"]["value"] > cards([runs[1]])[0]["metrics"]["hard/f1_x"]["value"]
    built = table([runs[1], partial])
    hard = next(r for r in built.rows if r.metric == "hard/f1_x")
    assert [(c.best, c.tied) for c in hard.cells] == [(True, False), (False, False)]
    assert not any(row.cells[1].best or row.cells[1].tied for row in built.rows)
    row = next(line for line in render(built, "markdown").splitlines() if line.startswith("| hard/f1\\_x"))
    assert _markdown_cells(row)[1].startswith("**") and not _markdown_cells(row)[2].startswith("**")


def _limited(run: Path, n: int) -> Path:
    """``run`` cut to its first ``n`` samples, as ``--limit n`` leaves a run: complete, over fewer samples."""
    from toy_runs import PROVENANCE

    from pinbench.core.runner import SampleRecord
    from pinbench.core.scorecard import build_scorecard, write_scorecard

    rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()][:n]
    records = [SampleRecord(r["sample_id"], r["status"], r["result"], r["error"], r["input_hash"], r["seconds"])
               for r in rows]
    card = build_scorecard(recipe="toy-bench", recipe_version="1.0.0", checkpoint=run.name, mode="full",
                           metrics=ALL_METRICS[:2], records=records, n_expected=n, provenance=PROVENANCE, config={},
                           timings={})
    write_scorecard(card, run / "scorecard.json")
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_a_run_over_fewer_samples_is_never_ranked_against_a_full_one(runs, tmp_path: Path) -> None:
    """A ``--limit`` run is complete, but its value is over other samples: never best, never tied."""
    limited = _limited(write_run(tmp_path, "Model-L", 0.3, 6, metrics=ALL_METRICS[:2]), 10)
    card = cards([limited])[0]
    assert card["status"] == "complete" and card["metrics"]["f1"]["n_expected"] == 10
    assert card["metrics"]["f1"]["value"] > cards([runs[1]])[0]["metrics"]["f1"]["value"]
    built = table([runs[1], limited])
    f1 = next(r for r in built.rows if r.metric == "f1")
    assert [(c.best, c.tied) for c in f1.cells] == [(True, False), (False, False)]
    assert "over other samples than Model-B (10 expected, there 40)" in built.footnotes[f1.cells[1].notes[0] - 1]
    assert "**" not in _markdown_cells(next(line for line in render(built, "markdown").splitlines()
                                           if line.startswith("| f1 ")))[2]


def test_the_generation_footnote_names_the_runs_by_their_place_not_their_labels(runs) -> None:
    """Every header carries it, so it names each run by its column (#1 leftmost), not by its label: a long run
    directory's label was repeated once per generator and twice per setting that differs."""
    from pinbench.core.generation import Generated, Signature

    columns = load_columns(runs[1:3])
    for column, frame in zip(columns, ("initial", "last"), strict=True):
        signature = Signature(model="baseline", weights="w", settings={"frame": frame})
        column.generated = Generated(generator="static", signature=signature, requests="r" * 64, n_requests=5)
    built = build_table(columns)
    assert built.footnotes == ["rollouts made differently (#1: the leftmost run): different generators: #1 static "
                               "(baseline, weights w); #2 static (baseline, weights w); settings that differ: frame "
                               "(#1 initial, #2 last)"]
    assert built.column_notes == {0: [1], 1: [1]}


def test_partial_runs_and_missing_metrics_are_footnoted(runs) -> None:
    built = table(runs)
    partial = built.footnotes[built.column_notes[3][0] - 1]
    assert partial.startswith("this run is partial (f1: 38/40 scored (2 failed, 0 missing)")
    assert "never marked best or tied" in partial and list(built.column_notes) == [3]
    hard = next(r for r in built.rows if r.metric == "hard/f1_x")
    assert hard.cells[0].result is None and built.footnotes[hard.cells[0].notes[0] - 1] == \
        "not in this run's scorecard"
    text = render(built, "markdown")
    assert "| Model-D¹ |" in text and "| –² |" in text and "¹ this run is partial" in text
    assert "0.686 +0.037/-0.039 (38/40)" in text  # shown with its counts, never bold


def test_metrics_primary_only_digits_and_interval_style(runs) -> None:
    assert [r.metric for r in table(runs, metrics=["err", "f1"]).rows] == ["err", "f1"]
    assert [r.metric for r in table(runs, primary_only=True).rows] == ["f1"]
    text = render(table(runs, metrics=["f1"], digits=1, interval="range"), "markdown")
    assert "**0.5** [0.5, 0.6] (40/40)" in text
    with pytest.raises(TableError, match="--metrics: nope in none of the runs"):
        table(runs, metrics=["nope"])
    with pytest.raises(TableError, match="--primary-only: none of the chosen metrics is primary"):
        table(runs, metrics=["err"], primary_only=True)
    with pytest.raises(TableError, match="--interval"):
        table(runs, interval="sd")


def test_an_interval_that_excludes_its_value_is_shown_as_a_range(tmp_path: Path) -> None:
    run = write_run(tmp_path, "Odd", 0.0, 1, metrics=ALL_METRICS[:1])
    card = json.loads((run / "scorecard.json").read_text())
    value = card["metrics"]["f1"]["value"]
    card["metrics"]["f1"]["interval"].update(low=value + 0.01, high=value + 0.02)
    (run / "scorecard.json").write_text(json.dumps(card))
    text = render(table([run]), "markdown")
    assert f"[{value + 0.01:.3f}, {value + 0.02:.3f}]" in text and "+-" not in text


@pytest.mark.parametrize(("value", "shown"), [(1e-7, "1.0e-07"), (-4e-4, "-4.0e-04"), (-4e-5, "-4.0e-05")])
def test_a_value_that_rounds_to_zero_is_never_shown_as_zero(tmp_path: Path, value: float, shown: str) -> None:
    run = write_run(tmp_path, "Tiny", 0.0, 1, metrics=ALL_METRICS[:1])
    card = json.loads((run / "scorecard.json").read_text())
    card["metrics"]["f1"].update(value=value)
    card["metrics"]["f1"]["interval"].update(low=value - 1e-7, high=value + 2e-7)
    (run / "scorecard.json").write_text(json.dumps(card))
    built = table([run])
    assert f"**{shown}** +2.0e-07/-1.0e-07 (40/40)" in render(built, "markdown")
    assert f"{shown}," in render(table([run], digits=3), "csv")
    assert _latex_problems(render(built, "latex")) == []
    assert "0.000" not in render(built, "markdown").split("\n")[2]


def test_runs_of_another_recipe_or_twice_or_without_samples(runs, tmp_path: Path) -> None:
    other = write_run(tmp_path, "Other", 0.0, 5, recipe="other-bench")
    with pytest.raises(TableError, match="recipe 'other-bench', but .* has 'toy-bench'"):
        load_columns([runs[0], other])
    with pytest.raises(TableError, match="given twice"):
        load_columns([runs[0], runs[0] / "scorecard.json"])
    bare = write_run(tmp_path, "Model-E", 0.0495, 3, samples=False)
    built = table([runs[1], bare])
    f1 = next(r for r in built.rows if r.metric == "f1")
    assert not f1.cells[1].tied and "not tested for a tie with the best: Model-E:" in built.footnotes[
        f1.cells[1].notes[0] - 1]


def test_the_same_checkpoint_twice_gets_its_folder_in_the_label(tmp_path: Path) -> None:
    one, two = (write_run(tmp_path / d, "Same", 0.0, 1) for d in ("first", "second"))
    assert [c.label for c in load_columns([one, two])] == ["Same [first/Same]", "Same [second/Same]"]


# ------------------------------------------------------------------------------ the three formats


@pytest.mark.parametrize(("fmt", "name"), [("markdown", "table.md"), ("latex", "table.tex"), ("csv", "table.csv")])
def test_goldens(runs, fmt: str, name: str) -> None:
    """Reviewed snapshots of the four runs (PINBENCH_REGENERATE_GOLDEN=1 rewrites them after a change)."""
    text = render(table(runs, caption=None if fmt == "csv" else CAPTION), fmt)
    if os.environ.get("PINBENCH_REGENERATE_GOLDEN"):
        (GOLDEN / name).write_text(text)
    assert text == (GOLDEN / name).read_text()


def _markdown_cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]


def test_markdown_rows_have_one_cell_per_run_and_the_caption_is_escaped(runs) -> None:
    text = render(table(runs, caption=CAPTION), "markdown")
    lines = text.splitlines()
    assert lines[0] == r"Table: Toy & friends: 100% of \$x\_1\$ {a} \~ ^ \\ \<b\> \| # \*c\* \[d\](e)"
    rows = [line for line in lines if line.startswith("|")]
    assert len(rows) == 2 + 3 and {len(_markdown_cells(r)) for r in rows} == {5}
    assert _markdown_cells(rows[2])[:3] == ["f1 \\* ↑", "0.491 +0.036/-0.037 (40/40)",
                                            "**0.541** +0.035/-0.037 (40/40)"]


def _latex_problems(text: str) -> list[str]:
    """Unbalanced environments, braces or inline math, and unescaped specials outside commands."""
    problems, stack = [], []
    for kind, name in re.findall(r"\\(begin|end)\{([^}]*)\}", text):
        if kind == "begin":
            stack.append(name)
        elif not stack or stack.pop() != name:
            problems.append(f"\\end{{{name}}} closes nothing open")
    problems += [f"\\begin{{{name}}} never ends" for name in stack]
    plain = re.sub(r"\\[\\{}$&%#_]", "", text)  # escaped characters (and the \\ line break)
    depth = 0
    for char in plain:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            problems.append("a } closes nothing")
            break
    if depth > 0:
        problems.append(f"{depth} {{ never closed")
    if plain.count("$") % 2:
        problems.append("an odd number of $")
    for char in "%#":  # & separates cells
        problems += [f"unescaped {char}: {line}" for line in plain.splitlines() if char in line]
    return problems


def test_latex_is_booktabs_balanced_and_escaped(runs) -> None:
    text = render(table(runs, caption=CAPTION), "latex")
    assert _latex_problems(text) == []
    assert r"\toprule" in text and r"\midrule" in text and r"\bottomrule" in text and r"\hline" not in text
    caption = next(line for line in text.splitlines() if line.startswith(r"\caption"))
    assert caption == (r"\caption{Toy \& friends: 100\% of \$x\_1\$ \{a\} \textasciitilde{} \textasciicircum{} "
                       r"\textbackslash{} \textless{}b\textgreater{} \textbar{} \# *c* [d](e)}")
    assert r"Base\_A" in text and r"hard/f1\_x" in text
    body = [line for line in text.splitlines() if line.endswith(r"\\") and "&" in line]
    assert {line.count("&") for line in body} == {4}  # metric + four runs on every row


def test_the_latex_checker_finds_what_it_looks_for() -> None:
    """The balance check can fail: each planted mistake is reported."""
    assert _latex_problems(r"\begin{table}\begin{tabular}{l}\end{table}")
    assert _latex_problems(r"\textbf{0.5")
    assert _latex_problems(r"$\pm 0.1")
    assert _latex_problems(r"100% done")
    assert _latex_problems(latex_text(r"100% {x} $ # & _ \ ~ ^")) == []


def test_the_golden_latex_compiles(tmp_path: Path) -> None:
    """With Debian's texlive (.ci/run installs texlive-latex-base and -recommended, which has booktabs)."""
    _compile((GOLDEN / "table.tex").read_text(), tmp_path)


def test_csv_holds_full_precision_values_and_notes(runs) -> None:
    rows = list(csv.DictReader(io.StringIO(render(table(runs), "csv"))))
    assert [r["metric"] for r in rows] == ["f1", "err", "hard/f1_x"]
    card = cards(runs)[1]["metrics"]["f1"]
    f1 = rows[0]
    assert float(f1["Model-B value"]) == card["value"] and float(f1["Model-B low"]) == card["interval"]["low"]
    assert (f1["Model-B scored"], f1["Model-B expected"], f1["Model-B note"]) == ("40", "40", "best")
    assert f1["Model-C note"] == "tied with the best" and f1["Base_A note"] == ""
    assert f1["Model-D note"].startswith("this run is partial") and f1["Model-D scored"] == "38"
    assert rows[2]["Base_A value"] == "" and rows[2]["Base_A note"] == "not in this run's scorecard"
    rounded = list(csv.DictReader(io.StringIO(render(table(runs, digits=2), "csv"))))
    assert rounded[0]["Model-B value"] == "0.54"


# ------------------------------------------------------------------------------ text from scorecards and folders

FORMULAS = ["=cmd|' /C calc'!A0", "+1+cmd", "-2+3", "@SUM(A1)"]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> list[Path]:
    """Two runs of one checkpoint (so their folders label them): one folder's name holds a newline and a form
    feed, the other starts with '='; their metric names are spreadsheet formulas."""
    root = tmp_path_factory.mktemp("table-hostile")
    metrics = [MetricSpec(name, "mean", key="f1", direction="higher", primary=i == 0) for i, name in
               enumerate(FORMULAS)]
    return [write_run(root / "line\nbreak\fhere", "Same", 0.0, 1, metrics=metrics),
            write_run(root / "=HYPERLINK(1)", "Same", 0.05, 2, metrics=metrics)]


def test_csv_cells_that_would_be_formulas_are_neutralised(hostile) -> None:
    """OWASP's rule: a text cell starting with = + - @ gets a leading ' ; the numbers stay numbers."""
    text = render(table(hostile), "csv")
    cells = [cell for row in csv.reader(io.StringIO(text)) for cell in row]
    formulas = [cell for cell in cells if cell.startswith(("=", "+", "@")) or
                (cell.startswith("-") and not re.fullmatch(r"-?[0-9.e+-]+", cell))]
    assert formulas == []
    rows = list(csv.reader(io.StringIO(text)))
    assert [row[0] for row in rows[1:]] == ["'" + name for name in FORMULAS]
    values = [row[3] for row in rows[1:]]
    assert all(float(v) > 0 for v in values)  # numeric cells, untouched


def test_a_newline_in_a_folder_name_never_reaches_a_markdown_row(hostile) -> None:
    text = render(table(hostile, caption="two\nlines\n\nand a paragraph"), "markdown")
    lines = text.splitlines()
    rows = [line for line in lines if line.startswith("|")]
    assert len(rows) == 2 + len(FORMULAS) and {len(_markdown_cells(r)) for r in rows} == {3}
    assert lines[0] == "Table: two lines  and a paragraph"
    header = _markdown_cells(rows[0])
    assert header[1:] == [r"Same \[line break here/Same\]", r"Same \[=HYPERLINK(1)/Same\]"]
    assert not any("\f" in line or "\x0b" in line for line in lines)


def test_a_caption_or_label_with_a_blank_line_forms_no_latex_paragraph(hostile, tmp_path: Path) -> None:
    """A blank line (or a form feed, LaTeX's \\par) inside \\caption{...} or a cell stops pdflatex."""
    text = render(table(hostile, caption="first paragraph\n\nsecond paragraph\fthird"), "latex")
    assert _latex_problems(text) == []
    assert r"\caption{first paragraph  second paragraph third}" in text
    assert "\n\n" not in text and "\f" not in text
    _compile(text, tmp_path)


def _compile(table_tex: str, where: Path) -> None:
    """pdflatex on a document holding ``table_tex``; fails the test with the end of its log when it stops."""
    if shutil.which("pdflatex") is None:
        pytest.skip("needs pdflatex: apt-get install texlive-latex-base texlive-latex-recommended (.ci/run does)")
    (where / "table.tex").write_text(table_tex)
    (where / "paper.tex").write_text("\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n"
                                     "\\input{table.tex}\n\\end{document}\n")
    done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape",
                           "paper.tex"], cwd=where, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:]
    log = (where / "paper.log").read_text(errors="replace")
    assert "Missing character" not in log and "Undefined control sequence" not in log
    assert (where / "paper.pdf").stat().st_size > 1000


def test_the_command(runs) -> None:
    for fmt, first in (("markdown", "| metric |"), ("latex", r"\begin{table}[t]"), ("csv", "metric,direction")):
        result = runner.invoke(cli.app, ["table", *map(str, runs), "--format", fmt])
        assert result.exit_code == 0 and result.output.startswith(first), result.output
    shown = runner.invoke(cli.app, ["table", *map(str, runs), "--metrics", "err", "--digits", "2"])
    assert shown.exit_code == 0 and "| err ↓ |" in shown.output and "f1" not in shown.output.split("\n\n")[0]
    for args, message in ((["--format", "html"], "--format 'html'"), (["--format", "csv", "--caption", "x"],
                                                                        "a csv table has no caption"),
                          (["--metrics", "nope"], "--metrics: nope in none of the runs")):
        result = runner.invoke(cli.app, ["table", *map(str, runs), *args])
        assert result.exit_code == 2 and message in result.output, result.output
