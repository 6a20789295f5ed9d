"""pinbench compare: two runs matched sample by sample, paired intervals, verdicts, exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from toy_runs import N, write_toy_run
from typer.testing import CliRunner

from pinbench import cli
from pinbench.core.scorecard import MetricSpec
from pinbench.results.compare import CompareError, compare_runs, load_run, render_comparison

runner = CliRunner()
METRICS = [MetricSpec("f1", "mean", direction="higher"),
           MetricSpec("err", "median", direction="lower"),
           MetricSpec("scene/f1", "mean_then_median", group_by="scene", key="f1", direction="higher"),
           MetricSpec("hard/f1", "mean", key="f1", direction="higher", sample_ids=[f"t{i:02d}" for i in range(10)])]


def write_run(root: Path, name: str, *, metrics: list[MetricSpec] = METRICS, **options: Any) -> Path:
    return write_toy_run(root, name, metrics, **options)


def test_a_clearly_better_checkpoint(tmp_path: Path) -> None:
    result = compare_runs(load_run(write_run(tmp_path, "A")), load_run(write_run(tmp_path, "B", shift=0.03, seed=2)))
    rows = {r.name: r for r in result.metrics}
    assert {name: r.verdict for name, r in rows.items()} == {
        "f1": "better", "err": "better", "scene/f1": "better", "hard/f1": "better"}
    f1 = rows["f1"].difference
    assert f1.difference == pytest.approx(0.03, abs=0.003) and 0 < f1.low < f1.difference < f1.high
    assert rows["hard/f1"].n_matched == rows["hard/f1"].n_cohort == 10  # the cohort, not all 40 tasks
    assert rows["scene/f1"].difference.interval.unit == "group"
    assert result.exit_code == 1 and not result.problems
    assert compare_runs(result.a, result.b, fail_on="worse").exit_code == 0  # better is not a regression
    text = render_comparison(result)
    assert "better is" in text and "result: DIFFERENT (exit 1; 4 better, 0 worse, 0 within noise" in text


def test_a_worse_checkpoint_fails_either_way(tmp_path: Path) -> None:
    a, b = load_run(write_run(tmp_path, "A")), load_run(write_run(tmp_path, "B", shift=-0.03, seed=2))
    for fail_on in ("any", "worse"):
        result = compare_runs(a, b, fail_on=fail_on)
        assert result.exit_code == 1 and {r.verdict for r in result.metrics} == {"worse"}


def test_reruns_of_one_checkpoint_are_within_noise(tmp_path: Path) -> None:
    result = compare_runs(load_run(write_run(tmp_path, "A")), load_run(write_run(tmp_path, "A2", seed=2)))
    assert {r.verdict for r in result.metrics} == {"within noise"} and result.exit_code == 0
    same = compare_runs(result.a, result.a)
    assert same.exit_code == 0 and "A and B are the same scorecard" in same.notes[0]
    assert all(r.difference.difference == 0 and r.difference.low == r.difference.high == 0 for r in same.metrics)


def test_unmatched_samples_are_named_and_the_comparison_is_incomplete(tmp_path: Path) -> None:
    a = write_run(tmp_path, "A", failed={"t03": "OSError: decode failed"})
    b = write_run(tmp_path, "B", shift=0.01, seed=2, failed={"t03": "OSError: also here"},
                  drop=("t05",))
    result = compare_runs(load_run(a), load_run(b))
    rows = {r.name: r for r in result.metrics}
    assert (rows["f1"].n_matched, rows["f1"].n_cohort) == (38, 40)
    assert rows["f1"].only_a == {"t05": "B: missing: no result from any shard"}
    assert rows["f1"].neither == {"t03": "A: OSError: decode failed; B: OSError: also here"}
    assert result.exit_code == 2
    assert "f1: 38 of 40 samples matched (1 scored in A only, 0 in B only, 1 in neither)" in result.problems
    text = render_comparison(result)
    assert "t05: scored in A only (B: missing: no result from any shard); all metrics" in text
    assert "t03: scored in neither (A: OSError: decode failed; B: OSError: also here); all metrics" in text
    assert "38/40" in text


def test_other_recipe_versions_are_not_compared(tmp_path: Path) -> None:
    result = compare_runs(load_run(write_run(tmp_path, "A")), load_run(write_run(tmp_path, "B", version="1.1.0")))
    assert result.exit_code == 3 and result.metrics == []
    assert "recipe_version differs: A is '1.0.0', B is '1.1.0'" in result.problems[0]


def test_runs_of_other_recipes_are_not_compared(tmp_path: Path) -> None:
    result = compare_runs(load_run(write_run(tmp_path, "A")), load_run(write_run(tmp_path, "B", recipe="other-bench")))
    assert result.exit_code == 3 and result.metrics == []
    assert result.problems == ["recipe differs: A is 'toy-bench', B is 'other-bench'; runs of one recipe version only"]
    assert "result: MISMATCH (exit 3" in render_comparison(result)


def test_runs_with_no_sample_in_common_are_not_judged_and_every_sample_is_named(tmp_path: Path) -> None:
    """Same recipe version, disjoint sample ids: nothing is compared, nothing is called within noise."""
    whole = METRICS[:3]  # the hard/ cohort names t-ids, which the u-run does not have
    a = load_run(write_run(tmp_path, "A", metrics=whole))
    b = load_run(write_run(tmp_path, "B", shift=0.05, prefix="u", metrics=whole))
    result = compare_runs(a, b)
    assert result.exit_code == 2
    for row in result.metrics:
        assert (row.n_matched, row.n_cohort, row.verdict) == (0, 2 * N, "not judged")
        assert row.reason == "no matched samples" and row.difference.low is None
        assert set(row.only_a) == {f"t{i:02d}" for i in range(N)} and set(row.only_b) == {f"u{i:02d}" for i in range(N)}
    assert f"f1: 0 of {2 * N} samples matched ({N} scored in A only, {N} in B only, 0 in neither)" in result.problems
    text = render_comparison(result)
    assert "result: INCOMPLETE (exit 2; 0 better, 0 worse, 0 within noise" in text
    assert "u07: scored in B only (A: no record); all metrics" in text


def test_a_metric_in_one_run_only_or_with_another_direction_is_refused(tmp_path: Path) -> None:
    a = load_run(write_run(tmp_path, "A"))
    fewer = load_run(write_run(tmp_path, "B", seed=2, metrics=[m for m in METRICS if m.name != "err"]))
    result = compare_runs(a, fewer)
    assert result.exit_code == 2 and "err: in run A only" in result.problems
    assert [r.name for r in result.metrics] == ["f1", "scene/f1", "hard/f1"]
    flipped = write_run(tmp_path, "C", seed=2)
    card = json.loads((flipped / "scorecard.json").read_text())
    card["metrics"]["err"]["direction"] = "higher"
    (flipped / "scorecard.json").write_text(json.dumps(card))
    result = compare_runs(a, load_run(flipped))
    assert result.exit_code == 3 and result.metrics == []
    assert "err: direction differs between the scorecards; the recipe declaration changed" in result.problems


def test_a_samples_file_that_is_not_the_scorecards_is_refused(tmp_path: Path) -> None:
    run = write_run(tmp_path, "A")
    lines = (run / "samples.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    record["result"]["f1"] += 0.5
    (run / "samples.jsonl").write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    with pytest.raises(CompareError, match="metric f1: its samples file gives 40 scored samples"):
        load_run(run)
    (run / "samples.jsonl").unlink()
    with pytest.raises(CompareError, match=r"samples\.jsonl: not a file"):
        load_run(run / "scorecard.json")


def test_cli_compare_table_report_and_exit_code(tmp_path: Path) -> None:
    a, b = write_run(tmp_path, "A"), write_run(tmp_path, "B", shift=-0.01, seed=2)
    result = runner.invoke(cli.app, ["compare", str(a), str(b / "scorecard.json"), "--report", str(tmp_path / "r")])
    assert result.exit_code == 1, result.output
    assert "* f1" not in result.output and "  f1 " in result.output and "worse" in result.output
    page = (tmp_path / "r" / "index.html").read_text()
    assert "Comparison: B - A (B - A)" in page and '<svg xmlns="http://www.w3.org/2000/svg" class="plot"' in page
    assert not list((tmp_path / "r" / "figures").iterdir())  # the report's own figures are inline SVG
    # worse beyond noise: a red badge that says so (it read DIFFERENT, in red, for an improvement too)
    assert 'Result: <span class="badge worse">DIFFERENT: 4 worse</span>' in page
    bad = runner.invoke(cli.app, ["compare", str(a), str(b), "--fail-on", "better"])
    assert bad.exit_code == 2 and "--fail-on 'better'" in bad.output


def test_diff_compare_and_report_import_no_torch(tmp_path: Path) -> None:
    """The result commands stay light: no torch, video decoders, hub client, plotting library, recipe code or
    scipy (the intervals are numpy and the standard library; the report draws its figures as SVG text)."""
    import subprocess
    import sys

    a, b = write_run(tmp_path, "A"), write_run(tmp_path, "B", seed=2)
    golden = Path(__file__).parent / "golden"
    code = ("import sys\nfrom pinbench.cli import main\n"
            f"for argv in (['diff', {str(golden / 'scorecard.json')!r}, '--reference', "
            f"{str(golden / 'reference.yaml')!r}], ['compare', {str(a)!r}, {str(b)!r}, '--report', "
            f"{str(tmp_path / 'r')!r}], ['report', {str(a / 'scorecard.json')!r}, '--out', {str(tmp_path / 'q')!r}]):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'cv2', 'av', 'decord', "
            "'huggingface_hub', 'docker', 'jsonschema', 'matplotlib') or m.startswith('pinbench_recipes.'))\n"
            "print('HEAVY', heavy, 'scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY [] False" in out, out.splitlines()[-1]
    assert (tmp_path / "r" / "index.html").is_file() and (tmp_path / "q" / "index.html").is_file()


@pytest.mark.parametrize(("shift", "badge"), [
    (0.03, '<span class="badge better">DIFFERENT: 4 better</span>'),
    (-0.03, '<span class="badge worse">DIFFERENT: 4 worse</span>'),
    (0.0, '<span class="badge within_noise">SAME: within noise</span>'),
])
def test_the_report_colours_a_comparison_by_direction(tmp_path: Path, shift: float, badge: str) -> None:
    """Better beyond noise is green, worse red, within noise grey (the CSS of those classes); every metric's own
    badge too."""
    from pinbench.results.report import write_report

    a = load_run(write_run(tmp_path, "A"))
    b = load_run(write_run(tmp_path, "B", shift=shift, seed=2 if shift else 1))
    result = compare_runs(a, b)
    page = write_report([a.path, b.path], tmp_path / "r", comparisons=[result]).read_text()
    assert f"Result: {badge}" in page
    css = {"better": "#1a7f37", "worse": "#cf222e", "within_noise": "#57606a"}
    assert {cls: _css_colour(page, cls) for cls in css} == css
    verdicts = {r.verdict for r in result.metrics}
    for verdict in verdicts:
        assert f'<span class="badge {verdict.replace(" ", "_")}">{verdict}</span>' in page


def _css_colour(page: str, cls: str) -> str | None:
    """The background colour the page's CSS gives ``.badge.<cls>`` (selectors may be grouped)."""
    for selectors, body in re.findall(r"([^{}]+)\{([^}]*)\}", page.split("<style>", 1)[1].split("</style>", 1)[0]):
        if f".badge.{cls}" in [sel.strip() for sel in selectors.split(",")] and "background:" in body:
            return body.split("background:", 1)[1].split(";")[0].strip()
    return None
