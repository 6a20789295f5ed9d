"""pinbench compare: two runs matched sample by sample, paired intervals, verdicts, exit codes."""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
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


def test_a_verdict_on_few_units_says_its_interval_undercovers(tmp_path: Path) -> None:
    """A verdict over 2 matched samples is "better" whenever both moved the same way (half the time by chance), and
    exits 1: the paired interval's own note (below 20 units it undercovers) was dropped, the table showed a verdict
    as firm as one over 600 samples."""
    result = compare_runs(load_run(write_run(tmp_path, "A")), load_run(write_run(tmp_path, "B", shift=0.03, seed=2)))
    assert {r.name: r.verdict for r in result.metrics}["hard/f1"] == "better"
    assert ("judged on an interval that undercovers, 1 metric (only 8 groups: bootstrap intervals undercover "
            "below 20 units): scene/f1") in result.notes
    assert ("judged on an interval that undercovers, 1 metric (only 10 samples: bootstrap intervals undercover "
            "below 20 units): hard/f1") in result.notes
    assert not any(note.endswith((": f1", ": err")) for note in result.notes)   # 40 samples each: no caveat
    assert "judged on an interval that undercovers" in render_comparison(result)

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


def test_a_comparison_names_what_the_runs_ran_differently(tmp_path: Path) -> None:
    a = write_run(tmp_path, "A")
    b = write_run(tmp_path, "B", seed=2)
    card = json.loads((b / "scorecard.json").read_text())
    card["provenance"]["driver"] = "560.35.03"
    (b / "scorecard.json").write_text(json.dumps(card))
    result = compare_runs(load_run(a), load_run(b))
    assert "ran differently: driver: A 580.00, B 560.35.03" in result.notes
    assert "  - ran differently: driver: A 580.00, B 560.35.03" in render_comparison(result).splitlines()
    assert not [n for n in compare_runs(load_run(a), load_run(write_run(tmp_path, "C", seed=3))).notes
                if n.startswith("ran differently")]


def test_a_comparison_names_the_samples_computed_from_other_inputs(tmp_path: Path) -> None:
    """A score file edited in place, or a video re-encoded under its own name, changes no option and no provenance:
    the comparison said nothing of why the numbers moved. The samples whose task's input hash differs are named, in
    two runs of one checkpoint: two models' runs score other rollouts by design (PAI-Bench-C's tasks name theirs)."""
    a, b = (write_run(tmp_path, name, seed=seed, checkpoint="ckpt") for name, seed in (("A", 1), ("B", 2)))
    other = write_run(tmp_path, "other-model", seed=2)
    assert not [n for n in compare_runs(load_run(a), load_run(b)).notes if n.startswith("other inputs")]
    for run in (b, other):
        lines = (run / "samples.jsonl").read_text().splitlines()
        for i in (3, 7):
            record = json.loads(lines[i])
            lines[i] = json.dumps({**record, "input_hash": "1" * 64})
        (run / "samples.jsonl").write_text("\n".join(lines) + "\n")
    result = compare_runs(load_run(a), load_run(b))
    note = ("other inputs: 2 of 40 samples were computed from other inputs in A and B (the input hash of its task "
            "differs: an input file's content or an option): t03, t07")
    assert note in result.notes and f"  - {note}" in render_comparison(result).splitlines()
    assert not [n for n in compare_runs(load_run(a), load_run(other)).notes if n.startswith("other inputs")]


def test_a_comparison_names_the_options_the_runs_ran_with_differently(tmp_path: Path) -> None:
    """What changes numbers that a scorecard's config holds, not its provenance (--limit, -o, the recipe's code), is
    named as the command line names it; where each ran from is not (was: no line at all)."""
    a, b = write_run(tmp_path, "A"), write_run(tmp_path, "B", seed=2)
    card = json.loads((b / "scorecard.json").read_text())
    card["config"] = {**card["config"], "limit": 2, "out_dir": "elsewhere", "options": {"flow": "raft"},
                      "implementation": {"recipe_version": "1.0", "code": "c" * 64}}
    (b / "scorecard.json").write_text(json.dumps(card))
    notes = [n for n in compare_runs(load_run(a), load_run(b)).notes if n.startswith("ran differently")]
    assert notes == ["ran differently: --limit: A none, B 2", "ran differently: -o flow: A none, B raft",
                     "ran differently: recipe version: A none, B 1.0",
                     "ran differently: recipe code: A none, B cccccccccccc"]


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


def test_a_report_names_two_runs_of_one_checkpoint_by_their_folders(tmp_path: Path) -> None:
    a = write_run(tmp_path / "one", "A").rename(tmp_path / "base")
    b = write_run(tmp_path / "two", "A", shift=-0.01, seed=2).rename(tmp_path / "tuned")
    runner.invoke(cli.app, ["compare", str(a), str(b), "--report", str(tmp_path / "r")])
    page = (tmp_path / "r" / "index.html").read_text()
    assert page.count("Comparison: B - A (A tuned - A base)") == 2  # its entry in the contents and its heading


def test_a_report_folder_compare_cannot_write_is_refused_before_the_verdict(tmp_path: Path) -> None:
    """``compare A B --report FILE`` printed the whole comparison ending in "result: ... (exit 1; ...)", then
    refused the folder and exited 2: the printed exit was not the exit."""
    a, b = write_run(tmp_path, "A"), write_run(tmp_path, "B", shift=-0.01, seed=2)
    (tmp_path / "afile").write_text("mine")
    result = runner.invoke(cli.app, ["compare", str(a), str(b), "--report", str(tmp_path / "afile")])
    assert result.output == ""   # pinbench's main prints the refusal, one line, and exits 2
    assert str(result.exception) == (f"{tmp_path / 'afile'}: a regular file, not a folder; name a new folder for the "
                                     "report")


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


def test_cli_compare_runs_without_the_cycle_collector_and_restores_it(tmp_path: Path, monkeypatch) -> None:
    """#32: the runs are read and compared with the collector off (it walked their records again at every full
    collection), and it is on again afterwards, after a refused run too; a caller's disabled collector stays off."""
    import pinbench.results.compare as compare_module

    a, b = write_run(tmp_path, "A"), write_run(tmp_path, "B", shift=-0.01, seed=2)
    seen = []
    real = compare_module.load_run
    monkeypatch.setattr(compare_module, "load_run", lambda path: (seen.append(gc.isenabled()), real(path))[1])
    assert runner.invoke(cli.app, ["compare", str(a), str(b)]).exit_code == 1
    assert seen == [False, False] and gc.isenabled()
    (b / "samples.jsonl").unlink()
    refused = runner.invoke(cli.app, ["compare", str(a), str(b)])
    assert isinstance(refused.exception, CompareError) and gc.isenabled()
    gc.disable()
    try:
        runner.invoke(cli.app, ["compare", str(a), str(a)])
        assert not gc.isenabled()
    finally:
        gc.enable()

@pytest.mark.parametrize(("chosen", "threads"), [(None, "1"), ("2", "2")])
def test_compare_loads_numpy_without_blas_worker_threads_unless_the_user_chose(chosen: str | None,
                                                                              threads: str) -> None:
    """#32: OpenBLAS's worker threads cost compare 0.03 s CPU and do nothing for it: numpy is loaded with none (the
    process has one thread), and the variable that says so is gone again; a user's OPENBLAS_NUM_THREADS is kept."""
    code = ("import os, pinbench.cli as cli\nwith cli._one_blas_thread(): import numpy\n"
            "status = open('/proc/self/status').read(); "
            "print(status.split('Threads:')[1].split()[0], os.environ.get('OPENBLAS_NUM_THREADS'))")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    if chosen is not None:
        env["OPENBLAS_NUM_THREADS"] = chosen
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [threads, str(chosen)]

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


# ----------------------------------------------------------------------- derived values judged over their members

def _split_run(root: Path, name: str, *, lift: float, seed: int, fail: tuple[str, ...] = (),
               from_members: bool = True) -> Path:
    """A run of 80 samples (label, score, correct 0-2) and derived records: split__x (AP, ROC AUC, acc = mean of
    correct / 2, spread) over every sample, and split__y (spread) over the first ten; ``lift`` raises the
    positives' scores; ``fail`` samples failed (their split's record then fails, as a recipe's strict one does)."""
    from sklearn.metrics import average_precision_score, roc_auc_score
    from toy_runs import PROVENANCE

    from pinbench.core.derived import derive, write_derived
    from pinbench.core.metricinfo import MemberStatistic
    from pinbench.core.runner import SampleRecord
    from pinbench.core.scorecard import build_scorecard, write_scorecard

    shared = np.random.default_rng(0)
    labels, base = (shared.random(80) < 0.3).astype(int), shared.random(80)
    rng = np.random.default_rng(seed)
    records = []
    for i in range(80):
        sid = f"s{i:02d}"
        if sid in fail:
            records.append(SampleRecord(sid, "failed", None, "OSError: unreadable", "0" * 64, 0.0))
            continue
        score = round(float(np.clip(base[i] + lift * labels[i] + rng.normal(0, 0.05), 0, 1.5)), 2)
        records.append(SampleRecord(sid, "ok", {"label": int(labels[i]), "score": score,
                                                "correct": int(rng.integers(0, 3))}, None, "0" * 64, 0.0))

    def split(members: list) -> dict:
        if any(not m.ok for m in members):
            raise ValueError("a member did not score")
        y, s = [m.result["label"] for m in members], [m.result["score"] for m in members]
        return {"average_precision": average_precision_score(y, s), "roc_auc": roc_auc_score(y, s),
                "acc": sum(m.result["correct"] for m in members) / (2 * len(members)), "spread": float(np.std(s))}

    derived = [derive("split__x", records, split), derive("split__y", records[:10], split)]
    declared = {"average_precision": MemberStatistic("average_precision", "score", "label"),
                "roc_auc": MemberStatistic("roc_auc", "score", "label"),
                "acc": MemberStatistic("mean", "correct", scale=0.5)}
    metrics = [MetricSpec(f"{split}/{key}", "none", key=key, sample_ids=[f"split__{split}"], derived=True,
                          direction="higher", from_members=declared.get(key) if from_members else None)
               for split, keys in (("x", ("average_precision", "roc_auc", "acc", "spread")), ("y", ("spread",)))
               for key in keys]
    card = build_scorecard(recipe="toy-bench", recipe_version="1.0.0", checkpoint=name, mode="full", metrics=metrics,
                           records=records, n_expected=80, provenance=PROVENANCE, config={}, timings={},
                           derived=derived)
    run = root / name
    write_scorecard(card, run / "scorecard.json")
    (run / "samples.jsonl").write_text("".join(json.dumps(r.to_json()) + "\n" for r in records))
    write_derived(derived, run / "derived.jsonl")
    return run


def test_a_derived_value_declared_from_members_is_judged_by_resampling_its_members(tmp_path: Path) -> None:
    """A split's AP and ROC AUC and a mean accuracy: over the matched members, with the paired bootstrap of
    members_bootstrap (the same interval as calling it directly); a derived value without the declaration is
    not judged, and that reason is said once for every metric it applies to."""
    from pinbench.core.members_bootstrap import MemberSeries, member_differences

    a, b = load_run(_split_run(tmp_path, "A", lift=0.1, seed=1)), load_run(_split_run(tmp_path, "B", lift=0.6, seed=2))
    result = compare_runs(a, b)
    rows = {r.name: r for r in result.metrics}
    for key in ("average_precision", "roc_auc", "acc"):
        row = rows[f"x/{key}"]
        assert (row.n_matched, row.n_cohort) == (80, 80) and row.difference.interval.paired
        assert row.difference.value_a == pytest.approx(a.card.metrics[f"x/{key}"].value, abs=1e-15)
        assert row.difference.value_b == pytest.approx(b.card.metrics[f"x/{key}"].value, abs=1e-15)
    ap = rows["x/average_precision"]
    assert ap.verdict == "better" and 0 < ap.difference.low < ap.difference.difference < ap.difference.high
    assert rows["x/roc_auc"].verdict == "better" and rows["x/acc"].verdict == "within noise"
    ids = tuple(f"s{i:02d}" for i in range(80))

    def column(run, key):
        return np.array([run.samples[i].result[key] for i in ids])

    (direct,) = member_differences([MemberSeries(a.card.metrics["x/average_precision"].from_members, ids,
                                                 column(a, "score"), column(b, "score"), column(a, "label"),
                                                 column(b, "label"))])
    assert (ap.difference.low, ap.difference.high) == (direct.low, direct.high)
    assert [n for n in result.notes if "not judged" in n] == [
        "not judged, 2 metrics (aggregation none: one suite-level value computed over the samples at once, not an "
        "aggregate of per-sample values; nothing to resample): x/spread, y/spread"]
    assert render_comparison(result).count("nothing to resample") == 1


def test_members_edited_since_the_scorecard_are_refused_not_resampled(tmp_path: Path) -> None:
    """A split's AP is recomputed from its members' records: one score edited in samples.jsonl gave the edited AP
    beside the scorecard's own, with no word (the view showed the edited score). The derived record's members hash
    must hold for the records read."""
    run = _split_run(tmp_path, "A", lift=0.1, seed=1)
    load_run(run)
    lines = (run / "samples.jsonl").read_text().splitlines()
    record = json.loads(lines[5])
    record["result"]["score"] = round(record["result"]["score"] + 0.3, 2)
    (run / "samples.jsonl").write_text("\n".join([*lines[:5], json.dumps(record), *lines[6:]]) + "\n")
    with pytest.raises(CompareError) as info:
        load_run(run)
    assert str(info.value) == (f"{run / 'samples.jsonl'}: derived record 'split__x' was computed from other records "
                               "of its 80 samples than the samples file holds; the samples file is not the one the "
                               "scorecard was computed from")


def test_unmatched_members_are_named_and_an_older_scorecard_is_compared_as_one_value(tmp_path: Path) -> None:
    """A member that failed in B leaves the derived record failed there, yet the split is compared over the 79
    members both scored, the one left out named with B's reason. Without the declaration (a scorecard from
    before it), the value is one number: not judged."""
    a = load_run(_split_run(tmp_path, "A", lift=0.1, seed=1))
    b = load_run(_split_run(tmp_path, "B", lift=0.1, seed=2, fail=("s07",)))
    result = compare_runs(a, b)
    ap = {r.name: r for r in result.metrics}["x/average_precision"]
    assert (ap.n_matched, ap.n_cohort) == (79, 80) and ap.only_a == {"s07": "B: OSError: unreadable"}
    assert ap.difference.interval.n_units == 79
    assert "x/average_precision: 79 of 80 samples matched (1 scored in A only, 0 in B only, 0 in neither)" in \
        result.problems and result.exit_code == 2
    old = compare_runs(a, load_run(_split_run(tmp_path, "C", lift=0.6, seed=2, from_members=False)))
    assert {r.name: r.verdict for r in old.metrics}["x/average_precision"] == "not judged"


def test_a_metric_a_partial_run_did_not_compute_shows_as_not_computed(tmp_path: Path) -> None:
    """B's scorecard has no value for the split's AP (a member failed, so its derived record did): the table and the
    report showed B's AP over the 79 members both runs scored, a number B never reported. B - A over those members
    stays; A, which computed it, shows its value. No verdict: B, lifted well above A, was called "better" on a value
    it never reported; it is not judged, "not computed in B"."""
    a = _split_run(tmp_path, "A", lift=0.1, seed=1)
    b = _split_run(tmp_path, "B", lift=0.9, seed=2, fail=("s07",))
    result = compare_runs(load_run(a), load_run(b))
    assert load_run(b).card.metrics["x/average_precision"].value is None
    ap = {r.name: r for r in result.metrics}["x/average_precision"]
    assert ap.shown() == (ap.difference.value_a, "not computed") and ap.difference.value_b is not None
    assert ap.difference.low > 0 and (ap.verdict, ap.reason) == ("not judged", "not computed in B")
    assert [r.verdict for r in result.metrics] == ["not judged"] * 5
    assert "not judged, 5 metrics (not computed in B): x/average_precision, x/roc_auc, x/acc, x/spread, y/spread" \
        in result.notes
    assert render_comparison(result).endswith("(exit 2; 0 better, 0 worse, 0 within noise; fail on any)")
    swapped = compare_runs(load_run(b), load_run(a))
    assert {r.reason for r in swapped.metrics} == {"not computed in A"}
    row = next(line for line in render_comparison(result).splitlines() if line.startswith("  x/average_precision"))
    assert row.split()[1:3] == [f"{ap.difference.value_a:.6g}", "not"]
    assert f"{ap.difference.value_b:.6g}" not in row
    assert runner.invoke(cli.app, ["compare", str(a), str(b), "--report", str(tmp_path / "r")]).exit_code == 2
    page = (tmp_path / "r" / "index.html").read_text()
    cells = re.search(r"<code>x/average_precision</code></td>(.*?)</tr>", page, re.S)[1]
    assert re.findall(r'<td class="num">([^<]*)</td>', cells)[:2] == [f"{ap.difference.value_a:.6g}", "not computed"]


def test_the_difference_plot_is_to_scale() -> None:
    """Two metrics without an interval, B - A = -0.0009 and -0.116, sit at their own distances from 0 (a row scaled
    to itself drew both at the same place), a lower-is-better metric turned so that right is better, all on one
    ticked axis."""
    from pinbench.results.report_svg import DifferenceRow, differences_svg

    rows = [DifferenceRow("small", "not judged", -0.0009, None, True, "-0.0009"),
            DifferenceRow("large", "not judged", -0.116, None, True, "-0.116"),
            DifferenceRow("err", "better", -0.05, (-0.08, -0.02), False, "-0.05 [-0.08, -0.02]")]
    svg = str(differences_svg(rows, "B - A"))
    zero = float(re.search(r'<line x1="([\d.]+)" y1="[\d.]+" x2="\1"', svg).group(1))
    dots = [float(x) - zero for x in re.findall(r'<circle cx="([-\d.]+)"', svg)]
    per_unit = -dots[1] / 0.116   # pixels per unit of B - A, from the large one
    assert dots[0] == pytest.approx(-0.0009 * per_unit, abs=0.1) and dots[0] < 0   # coordinates have 0.1 px
    assert dots[2] == pytest.approx(0.05 * per_unit, abs=0.1)
    assert ">0.1<" in svg and ">-0.1<" in svg and "to scale" in svg


def test_the_terminal_table_names_no_token_shaped_folder_of_a_run(tmp_path: Path) -> None:
    """The header named each run by its path, printed whole: a run kept under a token-shaped folder showed the token
    in the terminal and in the CI log that holds it."""
    token = "hf_" + "Ab3De6Gh9Jk2Mn5Pq8St"
    result = compare_runs(load_run(write_run(tmp_path / token, "A")), load_run(write_run(tmp_path, "B")))
    text = render_comparison(result)
    assert token not in text and f"{tmp_path}/***/A" in text
