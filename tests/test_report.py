"""pinbench.results.report: the static HTML report renders every state of a run honestly and safely."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from pinbench.core.reference import load_reference
from pinbench.core.runner import SampleRecord
from pinbench.core.scorecard import MetricSpec, Scorecard, build_scorecard, write_scorecard
from pinbench.results.report import FIGURES_INDEX, ReportError, record_figures, run_figures, write_report


def Spec(name: str, aggregation: str = "mean", *args, direction: str = "higher", **kwargs) -> MetricSpec:  # noqa: N802
    return MetricSpec(name, aggregation, *args, direction=direction, **kwargs)  # as a recipe.yaml declares it


TOKEN = "hf_abcdefghijKLMNOPQRST123456"
SHAPED = "ghs_" + "Zz09" * 9   # a GitHub token no variable holds: hidden by its shape
EVIL_ID = "<script>alert(1)</script>"
EVIL_ERROR = 'ValueError: frame <b>7</b> & "more"'
METRICS = [
    Spec("edge/canny_f1"),
    Spec("edge/depth_si_rmse", aggregation="median", direction="lower"),
    Spec("vis/dover", key="dover_score"),
    Spec("overall"),
]


def _provenance(dirty: bool = True) -> dict:
    return {
        "timestamp": "2026-01-01T00:00:00Z",
        "pinbench": {"version": "0.1.0", "commit": "a" * 40, "dirty": dirty},
        "container": {"in_container": True, "image_digest": "sha256:" + "b" * 64},
        "python": "3.11.2",
        "packages": {"torch": "2.14.1", "cuda": None, "distributions_sha256": "c" * 64},
        "gpus": [],
        "pins": {"upstream": {"evaluator": {"repo": "owner/name", "commit": "d" * 40}}},
        "inputs": {
            "upstream/evaluator": {"kind": "git", "state": "verified"},
            "urls/sam2": {"kind": "url", "state": "unverified", "reason": "no sha256 (resolve it)"},
        },
        "seeds": {"global": 0},
    }


def _records(n: int, failed: dict[str, str] | None = None) -> list[SampleRecord]:
    """n deterministic records; ids in ``failed`` become failed records with that error."""
    rng = np.random.default_rng(0)
    ids = [f"s{i:03d}" for i in range(n - len(failed or {}))] + list(failed or {})
    out = []
    for sid in ids:
        if failed and sid in failed:
            out.append(SampleRecord(sid, "failed", None, failed[sid], "0" * 64, 0.1))
            continue
        result = {"edge/canny_f1": 0.49 + 0.01 * rng.standard_normal(),
                  "edge/depth_si_rmse": 0.55 + 0.02 * rng.standard_normal(),
                  "dover_score": 10 + rng.standard_normal(), "overall": 0.5}
        out.append(SampleRecord(sid, "ok", result, None, "0" * 64, 0.1))
    return out


def _card(records: list[SampleRecord], n_expected: int, **kw) -> Scorecard:
    return build_scorecard(
        recipe=kw.get("recipe", "paibench-c"), recipe_version="1.0.0", checkpoint="Nano",
        mode=kw.get("mode", "full"), metrics=kw.get("metrics", METRICS), records=records,
        n_expected=n_expected,
        provenance=_provenance(), config={"hf_token": TOKEN, "note": f"used {TOKEN}", "endpoint": SHAPED},
        timings={"score": 1.5},
    )


def _reference(card: Scorecard, shift: float = 0.0) -> dict:
    """Reference YAML dict matching ``card``; ``shift`` moves canny_f1 outside its tolerance."""
    values = {name: m.value for name, m in card.metrics.items()}
    return {
        "recipe": card.recipe, "recipe_version": card.recipe_version, "checkpoint": card.checkpoint,
        "mode": card.mode, "n_samples": card.samples.n_expected, "tier": "cross_hw",
        "source": {"kind": "trusted_run", "provenance": {"note": f"token {TOKEN}"}},
        "metrics": {
            "edge/canny_f1": {"value": values["edge/canny_f1"] + shift, "direction": "higher",
                              "tolerance": {"abs": 0.01}, "primary": True},
            "edge/depth_si_rmse": {"value": values["edge/depth_si_rmse"], "direction": "lower",
                                   "tolerance": {"rel": 0.05}},
            "vis/dover": {"value": values["vis/dover"], "direction": "higher", "tolerance": {"abs": 0.5}},
            "overall": {"value": values["overall"], "direction": "higher", "tolerance": {"abs": 0.0}},
        },
    }


def _row(page: str, metric: str) -> str:
    """The HTML of the row for ``metric`` in the table of every metric (the primary ones are tabled above it too),
    where a metric is named after its group's heading (the full name is its title)."""
    page = page.split('-scores">Every metric', 1)[-1].replace("<wbr>", "")  # metric names may wrap after each "/"
    match = re.search(rf"<tr><td class=\"metric\"><code title=\"{re.escape(metric)}\">[^<]*</code>.*?</tr>", page,
                      re.S)
    assert match, metric
    return match.group(0)


def _assert_page(index: Path) -> list[Path]:
    """A self-contained page: no script, nothing fetched; its figures inline SVG whose every text is at least 11 px,
    the PNGs it links (recipe figures) valid files next to it. Returns those PNGs."""
    page = index.read_text()
    assert "<script" not in page.lower() and 'src="http' not in page
    sizes = [float(v) for svg in re.findall(r"<svg .*?</svg>", page, re.S)
             for v in re.findall(r'<text [^>]*font-size="([\d.]+)"', svg)]
    assert all(size >= 11 for size in sizes), sorted(sizes)[:3]
    pngs = []
    for src in re.findall(r'<img src="([^"]+)"', page):
        assert not src.startswith(("/", "http:", "https:", "data:")), src
        path = index.parent / src
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        with Image.open(path) as im:
            im.verify()
        pngs.append(path)
    return pngs


def _figures(page: str, kind: str) -> list[str]:
    """The captions of the inline figures of one kind: ``deviations`` (one per group) or ``panel`` (a histogram)."""
    if kind == "deviations":
        return re.findall(r'<figure class="plotgroup"><figcaption><strong>([^<]*)</strong>', page)
    return re.findall(r'<figure class="panel"><figcaption>([^<]*)</figcaption>', page)


def test_complete_scorecard_with_reference(tmp_path: Path) -> None:
    records = _records(12, failed={EVIL_ID: EVIL_ERROR})
    ok_records = [r for r in records if r.status == "ok"]
    complete = _card(ok_records, len(ok_records))
    assert complete.status == "complete"
    index = write_report([complete], tmp_path / "r", references={"paibench-c": _reference(complete, 0.05)},
                         samples={0: ok_records})
    page = index.read_text()
    assert index == tmp_path / "r" / "index.html"
    assert _assert_page(index) == []  # no PNG: the report's figures are inline SVG
    assert _figures(page, "deviations") == ["edge", "vis", "top level"]  # one per group, the primary's first
    assert _figures(page, "panel") == ["canny_f1", "depth_si_rmse", "dover"]  # the top level holds a constant
    for name in complete.metrics:
        assert f"<code>{name}</code>" in page
    assert "COMPLETE" in page and "PARTIAL" not in page
    assert ">FAIL</span>" in _row(page, "edge/canny_f1") and ">-0.05<" in _row(page, "edge/canny_f1")
    assert ">-5<" in _row(page, "edge/canny_f1")  # delta / tolerance
    assert ">PASS</span>" in _row(page, "edge/depth_si_rmse")
    assert "↓ median" in _row(page, "edge/depth_si_rmse")
    assert "★" in _row(page, "edge/canny_f1")
    scores = page.split('-scores">Every metric', 1)[1]
    first, second = '<code title="edge/canny_f1">canny_f1 ★</code>', '<code title="edge/depth_si_rmse">depth_si_rmse'
    assert scores.index(first) < scores.index(second)  # the primary first
    assert scores.index('<tr class="group" id="s01-g-edge">') < scores.index(first)
    assert re.search(r"<td class=\"nowrap\"[^>]*>\[0\.4\d+, 0\.4\d+\]</td>", _row(page, "edge/canny_f1"))
    assert 'Verdict: <span class="badge FAIL">FAIL</span>' in page
    assert "DIRTY" in page and "a" * 40 in page and "sha256:" + "b" * 64 in page
    assert "1 of 2 pinned inputs verified" in page and "no sha256 (resolve it)" in page
    assert TOKEN not in page and "***" in page and SHAPED not in page and "Zz09Zz09" not in page

    # With the failed record the denominator stays 12 (partial); its id and error are shown escaped.
    card = _card(records, 12)
    index2 = write_report([card], tmp_path / "p", references={0: _reference(card)}, samples={0: records})
    page2 = index2.read_text()
    _assert_page(index2)
    assert EVIL_ID not in page2 and "&lt;script&gt;alert(1)&lt;/script&gt;" in page2
    assert "frame &lt;b&gt;7&lt;/b&gt; &amp; &#34;more&#34;" in page2  # Jinja2 escapes " as &#34;
    assert "all 4" in page2  # one failed record costs every metric
    # Fixed column widths: a long reason no longer squeezes the sample id into one letter per line.
    assert "table.failures{width:100%;table-layout:fixed}" in page2 and '<table class="failures"><colgroup>' in page2


def test_the_page_says_what_ran_differently_from_the_references_run_as_pinbench_diff_does(tmp_path: Path) -> None:
    """refdiff77: pinbench diff and the view named the options and the samples of other inputs than a recorded
    reference's run (``ran_differently``); the report, judged by the same diff, said neither."""
    from pinbench.core.reference import diff, input_hashes, recorded_inputs, reference_from_dict

    records = [dataclasses.replace(r, input_hash=f"{i:064x}") for i, r in enumerate(_records(4))]
    card = _card(records, 4)
    card.config["options"] = {"fps": 8}
    reference = _reference(card)
    kept = input_hashes(records)
    kept["s002"] = "f" * 64   # its run's input was another: a video re-encoded under its own name
    reference["source"].update(config={"options": {"fps": 16}}, inputs=recorded_inputs(kept))
    page = write_report([card], tmp_path, references={0: reference}, samples={0: records}).read_text()
    said = [line for line in diff(card, reference_from_dict(reference), inputs=input_hashes(records)).ran_differently
            if "-o fps" in line or "other inputs" in line]
    assert said == [
        "from the reference's run: -o fps: reference 16, this run 8",
        "from the reference's run: other inputs: 1 of 4 samples was computed from other inputs in the reference's "
        "run and this run (the input hash of its task differs: an input file's content or an option): s002"]
    listed = re.findall(r"<li>(.*?)</li>", page.split('<ul class="ran-differently">', 1)[1].split("</ul>", 1)[0])
    assert [line for line in listed if "-o fps" in line or "other inputs" in line] == [
        line.replace("'", "&#39;") for line in said]
    assert "f" * 64 not in page and f"{1:064x}" not in page   # the reference's sample hashes: not listed
    assert recorded_inputs(kept)["sha256"] in page   # their digest is


def test_partial_scorecard_is_marked_and_never_passes(tmp_path: Path) -> None:
    records = _records(6, failed={"s-bad": f"OSError: 401 fetching with {TOKEN}"})
    cohort = Spec("i2v/revisit", key="overall", sample_ids=["s000", "s001", "zz-never-run"])
    card = _card(records, 8, metrics=[*METRICS, cohort])  # five ok, one failed, two never ran
    assert card.status == "partial"
    index = write_report([card], tmp_path, references={"paibench-c": _reference(card)})
    page = index.read_text()
    assert '<div class="banner partial"><strong>PARTIAL</strong>' in page
    assert "5/8 samples ok, 1 failed, 2 missing" in page
    assert ">INCOMPLETE</span>" in _row(page, "edge/canny_f1")
    assert ">PASS</span>" not in page
    assert "scorecard status is partial" in page
    assert 'Verdict: <span class="badge INCOMPLETE">INCOMPLETE</span>' in page
    assert "2 samples have no record" in page
    assert "OSError: 401 fetching with ***" in page and TOKEN not in page
    # A cohort metric names its missing sample; the others only count theirs.
    assert re.search(r"zz-never-run</code></td><td><pre>missing: [^<]*</pre></td><td>i2v/revisit<", page)
    assert "(1 failed, 2 missing)" in _row(page, "overall")


def test_failed_scorecard_renders_with_nothing_scored(tmp_path: Path) -> None:
    good = _card(_records(3), 3)
    records = _records(3, failed={f"f{i}": "RuntimeError: model OOM" for i in range(3)})
    card = _card(records, 3)
    assert card.status == "failed"
    index = write_report([card], tmp_path, references={0: _reference(good)}, samples={0: records})
    page = index.read_text()
    assert '<div class="banner failed"><strong>FAILED</strong>' in page
    assert ">MISSING</span>" in _row(page, "edge/canny_f1")
    assert "no numeric per-sample values" in page and page.count("RuntimeError: model OOM") == 3
    _assert_page(index)


def test_without_reference_shows_values_and_judges_nothing(tmp_path: Path) -> None:
    card = _card(_records(5), 5, mode="fixture")
    index = write_report([card], tmp_path)
    page = index.read_text()
    assert "Verdict" not in page
    assert "No reference (the recipe&#39;s reference for this run was not given): measured values" in page
    assert "FIXTURE run on synthetic data" in page
    assert ">PASS</span>" not in page.split("</table>", 1)[1]  # only the TOC status badge is green
    assert "No per-sample records given" in page
    assert not list((tmp_path / "figures").glob("*-compare-*"))
    for name, m in card.metrics.items():
        assert f"</td><td class=\"num\">{m.value:.6g}</td>" in _row(page, name)


def test_the_first_table_says_why_a_run_has_no_reference(tmp_path: Path) -> None:
    """As the view and pinbench diff say it: a NO REFERENCE badge alone sent the reader to the terminal."""
    page = write_report([_card(_records(4), 4, mode="smoke")], tmp_path).read_text()
    top = page.split('<nav class="toc">', 1)[0]
    assert re.findall(r"<li>([^<]*)</li>", top) == ["no smoke reference for paibench-c / Nano"]


def test_loaded_reference_with_mismatches(tmp_path: Path) -> None:
    """A Reference loaded from YAML works like the dict; mode / sample-count mismatches are shown, and the values
    beside the reference's are not judged (MISMATCH, not PASS)."""
    card = _card(_records(4), 4, mode="smoke")
    data = _reference(card)
    data.update(mode="full", n_samples=600)
    data["metrics"]["edge/absent"] = {"value": 1.0, "direction": "lower", "tolerance": {"rel": 0.1}}
    del data["metrics"]["vis/dover"]
    ref_path = tmp_path / "Nano.yaml"
    ref_path.write_text(yaml.safe_dump(data))
    page = write_report([card], tmp_path / "out", references={0: load_reference(ref_path)}).read_text()
    assert ">MISMATCH</span>" in _row(page, "edge/canny_f1")
    assert ">MISSING</span>" in _row(page, "edge/absent")
    assert "no reference" in _row(page, "vis/dover")
    assert "mode mismatch: reference (Nano.yaml)" in page and "n_samples=600" in page  # outside a recipe: its name
    assert 'Verdict: <span class="badge FAIL">MISMATCH</span>' in page
    top = page.split('<nav class="toc">', 1)[0]  # the first table says why, where a badge stood alone
    reasons = re.findall(r"<li>([^<]*)</li>", top)
    assert reasons[0].startswith("mode mismatch: ") and "n_samples=600" in reasons[1], reasons
    assert len(reasons) == 2 and "more</a>" not in top
    data["recipe_version"], data["checkpoint"] = "0.9.0", "Other"  # four problems: three said, a link to the rest
    ref_path.write_text(yaml.safe_dump(data))
    page = write_report([card], tmp_path / "out", references={0: load_reference(ref_path)}).read_text()
    top = page.split('<nav class="toc">', 1)[0]
    assert [line.split(":")[0] for line in re.findall(r"<li>([^<]*)</li>", top)] == [
        "recipe_version mismatch", "checkpoint mismatch", "mode mismatch"]
    assert '<li><a href="#s01-deviations">1 more</a></li></ul>' in top
    with pytest.raises(ReportError, match="expected a pinbench.core.reference.Reference"):
        write_report([card], tmp_path / "bad", references={0: ["not", "a", "reference"]})


def test_a_recipes_reference_is_named_from_the_recipes_folder(tmp_path: Path) -> None:
    """A report is shared: the reference's absolute path (in the first table's reasons, the problems and its
    source) named nothing where it was read, and told this machine's folder layout."""
    from pinbench.core.recipe import get_recipe

    recipes = get_recipe("paibench-c").dir.parent
    ref = load_reference(recipes / "paibench_c" / "references" / "fixture.yaml")
    page = write_report([_card(_records(4), 4)], tmp_path, references={0: ref}).read_text()
    top = page.split('<nav class="toc">', 1)[0]
    assert "<li>checkpoint mismatch: reference (paibench_c/references/fixture.yaml) is for " in top
    assert "<th>file</th><td>paibench_c/references/fixture.yaml</td>" in page
    assert str(recipes) not in page


def test_extra_figures_are_copied_and_captioned(tmp_path: Path) -> None:
    src = tmp_path / "m over time.png"
    Image.new("RGB", (32, 16), (200, 30, 30)).save(src)
    card = _card(_records(3), 3)
    out = tmp_path / "report"
    extras = {"paibench-c": [("m over <time>", src, "caption & notes")]}
    page = write_report([card], out, extra_figures=extras).read_text()
    copied = out / "figures" / "s01-extra-01-m_over_time.png"
    assert copied.read_bytes() == src.read_bytes()
    assert 'src="figures/s01-extra-01-m_over_time.png"' in page
    assert "m over &lt;time&gt;" in page and "caption &amp; notes" in page
    assert _assert_page(out / "index.html") == [copied]

    not_png = tmp_path / "x.png"
    not_png.write_text("hello")
    with pytest.raises(ReportError, match=r"x\.png: extra figure is not a PNG file"):
        write_report([card], tmp_path / "bad", extra_figures={0: [("x", not_png, "")]})
    with pytest.raises(ReportError, match=r"missing\.png: extra figure not readable"):
        write_report([card], tmp_path / "bad", extra_figures={0: [("x", tmp_path / "missing.png", "")]})
    assert not (tmp_path / "bad").exists()  # inputs are checked before anything is written


def test_the_figures_a_run_recorded_are_in_every_report_of_it_and_a_bad_index_is_one_line(tmp_path: Path) -> None:
    """record_figures writes figures.json beside the scorecard; a report of that scorecard file shows them without
    being told. An index naming a file outside the run, a FIFO, a folder or no PNG is refused, naming the index."""
    import json
    import os

    run = tmp_path / "run"
    card = _card(_records(3), 3)
    write_scorecard(card, run / "scorecard.json")
    (run / "figures").mkdir()
    png = run / "figures" / "s-0.png"
    Image.new("RGB", (32, 16), (200, 30, 30)).save(png)
    Image.new("RGB", (32, 16), (30, 30, 200)).save(run / "figures" / "all.png")
    record_figures(run, [("of s-0", png, "one sample", "s-0"), ("the run", run / "figures" / "all.png", "")])
    index = json.loads((run / FIGURES_INDEX).read_text())
    assert [f["png"] for f in index["figures"]] == ["figures/s-0.png", "figures/all.png"]
    assert [(e.title, e.src, e.sample_id) for e in run_figures(run / "scorecard.json")] == [
        ("of s-0", png, "s-0"), ("the run", run / "figures" / "all.png", None)]
    page = write_report([run / "scorecard.json"], tmp_path / "report").read_text()
    assert "of s-0" in page and "the run" in page and len(list((tmp_path / "report" / "figures").iterdir())) == 2
    assert "<title>paibench-c 1.0.0: Nano (full)</title>" in page  # the run's title, as its own report has
    with pytest.raises(ReportError, match="must be inside it"):
        record_figures(run, [("elsewhere", _png(tmp_path / "elsewhere.png"), "")])
    record_figures(run, [])
    assert not (run / FIGURES_INDEX).exists() and run_figures(run / "scorecard.json") == []

    outside = _png(tmp_path / "outside.png")
    (run / "figures" / "link.png").symlink_to(outside)
    os.mkfifo(run / "figures" / "fifo.png")
    (run / "figures" / "dir.png").mkdir()
    (run / "figures" / "text.png").write_text("hello")
    for png_path, problem in (("../outside.png", "is not a file inside"), ("/etc/passwd", "is not a file inside"),
                              ("figures/link.png", "is not a file inside"), ("figures/fifo.png", "not a regular file"),
                              ("figures/dir.png", "not a regular file"), ("figures/text.png", "not a PNG file"),
                              ("figures/none.png", "not readable")):
        (run / FIGURES_INDEX).write_text(json.dumps({"format": 1, "figures": [
            {"title": "t", "png": png_path, "caption": ""}]}))
        with pytest.raises(ReportError, match=f"^{run / FIGURES_INDEX}: .*{problem}"):
            write_report([run / "scorecard.json"], tmp_path / "bad")
    for text, problem in (("{not json", "invalid|Expecting"), ('{"format": 2, "figures": []}', "format"),
                          ('{"format": 1, "figures": [{"png": "figures/s-0.png"}]}', "lacks 'title'")):
        (run / FIGURES_INDEX).write_text(text)
        with pytest.raises(ReportError, match=f"^{run / FIGURES_INDEX}: .*({problem})"):
            run_figures(run / "scorecard.json")
    (run / FIGURES_INDEX).unlink()
    os.mkfifo(run / FIGURES_INDEX)
    with pytest.raises(ReportError, match="not a readable UTF-8 regular file"):
        run_figures(run / "scorecard.json")
    assert not (tmp_path / "bad").exists()


def _png(path: Path) -> Path:
    Image.new("RGB", (8, 8), (0, 0, 0)).save(path)
    return path


def test_multiple_scorecards_one_index(tmp_path: Path) -> None:
    a = _card(_records(4), 4, recipe="paibench-c")
    b = _card(_records(3, failed={"x": "OSError: gone"}), 3, recipe="remembench", mode="fixture")
    path_b = write_scorecard(b, tmp_path / "b" / "scorecard.json")
    index = write_report([a, path_b], tmp_path / "out", references={"paibench-c": _reference(a)},
                         samples={"remembench": _records(3, failed={"x": "OSError: gone"})},
                         title="demo <all>")
    page = index.read_text()
    assert page.count("<section ") == 2
    assert '<a href="#s01">paibench-c · Nano · full</a>' in page
    assert '<a href="#s02">remembench · Nano · fixture</a>' in page
    assert "<title>demo &lt;all&gt;</title>" in page
    s1, s2 = page.split('<section id="s02">')
    assert 'Verdict: <span class="badge PASS">PASS</span>' in s1 and "Verdict" not in s2
    assert '<strong>PARTIAL</strong>' in s2 and "<td>b/scorecard.json</td>" in s2
    assert _figures(s1, "deviations") and not _figures(s2, "deviations")  # s02 has no reference
    assert _figures(s2, "panel") and not _figures(s1, "panel")  # only s02 came with its records
    _assert_page(index)


def test_two_runs_of_one_checkpoint_are_named_apart(tmp_path: Path) -> None:
    """By their folders' names, else by their places: two sections named alike, a PASS and a FAIL, read as one."""
    card = _card(_records(4), 4)
    files = [write_scorecard(card, tmp_path / name / "scorecard.json") for name in ("base", "tuned")]
    page = write_report(files, tmp_path / "out").read_text()
    assert '<a href="#s01">paibench-c · Nano · full base</a>' in page
    assert '<a href="#s02">paibench-c · Nano · full tuned</a>' in page
    page = write_report([card, card], tmp_path / "memory").read_text()
    assert '<a href="#s01">paibench-c · Nano · full #1</a>' in page
    assert '<a href="#s02">paibench-c · Nano · full #2</a>' in page


def test_the_run_directory_is_named_by_its_folder_not_this_machines_path(tmp_path: Path) -> None:
    """The summary's scorecard and the config's out_dir name the run's folder, as its label does: a report copied
    elsewhere named the author's folders."""
    run = tmp_path / "home" / "alice" / "tuned"
    card = dataclasses.replace(_card(_records(4), 4), config={"out_dir": str(run), "limit": None})
    page = write_report([write_scorecard(card, run / "scorecard.json")], tmp_path / "out").read_text()
    assert "<th>scorecard</th><td>tuned/scorecard.json</td>" in page
    assert "<th>out_dir</th><td>tuned</td>" in page
    assert str(tmp_path) not in page


def test_deterministic_and_stale_plots_removed(tmp_path: Path) -> None:
    records = _records(6)
    card = _card(records, 6)
    kwargs = {"references": {0: _reference(card)}, "samples": {0: records}}
    png = tmp_path / "v.png"
    Image.new("RGB", (8, 8)).save(png)
    kwargs["extra_figures"] = {0: [("video", png, "caption")]}
    one = write_report([card], tmp_path / "one", **kwargs)
    two = write_report([card], tmp_path / "two", **kwargs)
    assert one.read_text() == two.read_text()
    copied = tmp_path / "one" / "figures" / "s01-extra-01-v.png"
    stamps = (one.stat().st_mtime_ns, copied.stat().st_mtime_ns)
    write_report([card], tmp_path / "one", **kwargs)  # nothing changed: nothing is rewritten
    assert (one.stat().st_mtime_ns, copied.stat().st_mtime_ns) == stamps
    write_report([card], tmp_path / "one")  # no samples, no reference, no extra figure now: all dropped
    assert list((tmp_path / "one" / "figures").iterdir()) == []
    assert not _figures(one.read_text(), "deviations") and not _figures(one.read_text(), "panel")


def test_bad_inputs_give_one_line_errors(tmp_path: Path) -> None:
    card = _card(_records(2), 2)
    with pytest.raises(ReportError, match=r"references: key\(s\) nosuch match no scorecard"):
        write_report([card], tmp_path, references={"nosuch": _reference(card)})
    broken = dataclasses.replace(card, status="complete", samples=dataclasses.replace(card.samples, n_ok=1))
    with pytest.raises(ReportError, match=r"scorecard #0 \(paibench-c / Nano\): "):
        write_report([broken], tmp_path)
    bad_json = tmp_path / "scorecard.json"
    bad_json.write_text("{not json")
    with pytest.raises(ValueError, match=r"scorecard\.json: invalid JSON"):
        write_report([bad_json], tmp_path)
    with pytest.raises(ReportError, match=r"reference for scorecard #0 \(paibench-c / Nano\): .*recipe"):
        write_report([card], tmp_path, references={0: {"metrics": {"overall": {"value": None}}}})


# ------------------------------------------------------------------- issue 10, item 10: a report that reads right


def _stats_row(page: str, metric: str) -> list[str]:
    """The cells of the distribution stats row of ``metric`` (n, mean, median, min, max)."""
    match = re.search(rf'<tr><td><code>{re.escape(metric)}</code>(?: <span[^>]*>[^<]*</span>)?</td>'
                      r'((?:<td class="num">[^<]*</td>\s*)+)</tr>', page)
    assert match, metric
    return re.findall(r'<td class="num">([^<]*)</td>', match.group(1))


def test_distributions_use_each_metrics_own_cohort(tmp_path: Path) -> None:
    """Seven records, two cohorts of 3 and 4: each histogram and its counts cover its own cohort only."""
    records = [SampleRecord(f"s{i}", "ok", {"clip": float(i)}, None, "0" * 64, 0.1) for i in range(7)]
    metrics = [Spec("t2v/clip", aggregation="median", key="clip", sample_ids=["s0", "s1", "s2"]),
               Spec("i2v/clip", aggregation="median", key="clip", sample_ids=["s3", "s4", "s5", "s6"])]
    card = _card(records, 7, metrics=metrics)
    page = write_report([card], tmp_path, samples={0: records}).read_text()
    assert _stats_row(page, "t2v/clip") == ["3", "1", "1", "0", "2"]
    assert _stats_row(page, "i2v/clip") == ["4", "4.5", "4.5", "3", "6"]
    assert "(n=7)" not in page


def test_a_single_value_or_equal_values_are_tabled_not_drawn(tmp_path: Path) -> None:
    """A histogram of one value, or of values all equal, is one bar: such a metric is listed, not plotted."""
    records = _records(5)
    metrics = [*METRICS, Spec("one/f1", key="edge/canny_f1", sample_ids=["s002"])]
    card = _card(records, 5, metrics=metrics)
    page = write_report([card], tmp_path, samples={0: records}).read_text()
    assert _figures(page, "panel") == ["canny_f1", "depth_si_rmse", "dover"]
    assert _stats_row(page, "overall") == ["5", "0.5", "0.5", "0.5", "0.5"]
    assert "<code>overall</code> <span class=\"small muted\">not plotted: all 5 equal</span>" in page
    assert "<code>one/f1</code> <span class=\"small muted\">not plotted: one value</span>" in page
    assert _stats_row(page, "one/f1")[0] == "1" and "<code>edge/canny_f1</code></td>" in page  # drawn: no note


def test_a_not_applicable_interval_is_n_a_in_its_row_and_its_reason_is_said_once(tmp_path: Path) -> None:
    """An n/a reason is a sentence: in every row it pushed the status column off the page (1724 px wide at
    1280), so the row says n/a (the reason on hover) and each distinct reason is listed once under the table."""
    records = _records(4)
    card = _card(records, 4, metrics=[Spec("edge/canny_f1"), *(Spec(f"suite{k}", aggregation="none", key="overall",
                                                                   sample_ids=["s000"]) for k in (1, 2))])
    page = write_report([card], tmp_path).read_text()
    from pinbench.core.uncertainty import NONE_REASON as reason
    assert f'<td class="nowrap" title="{reason}">n/a</td>' in _row(page, "suite1")
    assert page.count(reason) == 3  # two rows' hover text, one line under the table
    assert f"n/a intervals: {reason} (2 metrics)." in page
    assert re.search(r'<td class="nowrap" title="[^"]*">\[[^]]+\]</td>', _row(page, "edge/canny_f1"))


def test_deviations_are_drawn_per_group_with_short_labels(tmp_path: Path) -> None:
    """MIND's 81 metrics made one plot 81 rows tall in one column: a group per split and perspective now."""
    metrics = [Spec(f"{split}/{view}/m{k}", key="overall") for split in ("1st", "3rd") for view in ("mem", "act")
               for k in range(3)]
    card = _card(_records(4), 4, metrics=metrics)
    ref = {"recipe": "paibench-c", "recipe_version": "1.0.0", "checkpoint": "Nano", "mode": "full", "n_samples": 4,
           "tier": "cross_hw", "source": {"kind": "fixture"},
           "metrics": {m.name: {"value": 0.5, "direction": "higher", "tolerance": {"abs": 0.1},
                                "primary": m.name == "3rd/act/m2"} for m in metrics}}
    page = write_report([card], tmp_path, references={0: ref}).read_text()
    assert _figures(page, "deviations") == ["3rd/act", "1st/mem", "1st/act", "3rd/mem"]  # the primary's group first
    first = page.split('<figure class="plotgroup">', 2)[1]
    labels = re.findall(r'<text [^>]*text-anchor="end"[^>]*>([^<]*)</text>', first)
    assert labels == ["m2 ★ ↑", "m0 ↑", "m1 ↑"]  # the group's name is said once, above its plot
    assert list((tmp_path / "figures").iterdir()) == []


def test_a_clipped_interval_bar_ends_in_an_arrow(tmp_path: Path) -> None:
    """A run interval far past the axis (±10 tolerances) is drawn to the edge and ends in an arrow, on that side."""
    rng = np.random.default_rng(1)
    records = [SampleRecord(f"s{i}", "ok", {"wide": float(rng.normal(0.5, 5.0)), "tight": 0.5 + 1e-4 * i}, None,
                            "0" * 64, 0.1) for i in range(30)]
    card = _card(records, 30, metrics=[Spec("g/wide", key="wide"), Spec("g/tight", key="tight")])
    ref = {"recipe": "paibench-c", "recipe_version": "1.0.0", "checkpoint": "Nano", "mode": "full", "n_samples": 30,
           "tier": "cross_hw", "source": {"kind": "fixture"},
           "metrics": {"g/wide": {"value": card.metrics["g/wide"].value, "direction": "higher",
                                  "tolerance": {"abs": 0.01}, "primary": True},
                       "g/tight": {"value": 0.5, "direction": "higher", "tolerance": {"abs": 0.01}}}}
    page = write_report([card], tmp_path, references={0: ref}).read_text()
    rows = re.findall(r'<g class="row">(.*?)</g>', page.split('<figure class="plotgroup">', 1)[1])
    wide, tight = rows
    assert "wide ★ ↑" in wide and wide.count('class="clipped"') == 2  # both ends run past the axis
    assert "tight ↑" in tight and 'class="clipped"' not in tight


def test_tick_labels_are_plain_numbers() -> None:
    from pinbench.results.report_svg import ticks

    labels = [label for _, label in ticks(0.7 - 1e-9, 0.7 + 1e-9)]
    assert labels and all("e" not in label and "+" not in label for label in labels), labels
    assert len(set(labels)) == len(labels)
    assert [label for _, label in ticks(0.0, 1.0)] == ["0", "0.25", "0.50", "0.75", "1.00"]
    assert [label for _, label in ticks(-2.0, 2.0)] == ["-2", "-1", "0", "1", "2"]


def test_a_table_of_contents_links_every_part_and_every_link_lands(tmp_path: Path) -> None:
    records = _records(6, failed={"bad": "ValueError: x"})
    card = _card(records, 6)
    page = write_report([card], tmp_path, references={0: _reference(card)}, samples={0: records}).read_text()
    toc = page.split('<nav class="toc">', 1)[1].split("</nav>", 1)[0]
    targets = re.findall(r'href="#([^"]+)"', toc)
    for part in ("s01-primary", "s01-deviations", "s01-scores", "s01-g-edge", "s01-g-vis", "s01-failures",
                 "s01-distributions", "s01-provenance"):
        assert part in targets, part
    ids = set(re.findall(r'id="([^"]+)"', page))
    assert set(targets) <= ids, set(targets) - ids


def test_writing_a_report_imports_no_plotting_library(tmp_path: Path) -> None:
    """With every figure drawn (a reference, the records): SVG text, no matplotlib (nor PIL) in the process."""
    import json
    import subprocess
    import sys

    records = _records(6)
    card = _card(records, 6)
    path = write_scorecard(card, tmp_path / "run" / "scorecard.json")
    (tmp_path / "run" / "samples.jsonl").write_text("".join(json.dumps(r.to_json()) + "\n" for r in records))
    code = ("import json, sys\nfrom pathlib import Path\nfrom pinbench.core.runner import read_merged\n"
            "from pinbench.results.report import write_report\n"
            f"records = read_merged(Path({str(tmp_path / 'run' / 'samples.jsonl')!r}))\n"
            f"page = write_report([Path({str(path)!r})], Path({str(tmp_path / 'r')!r}), "
            f"references={{0: json.loads({json.dumps(_reference(card))!r})}}, samples={{0: records}})\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'PIL')), "
            "page.read_text().count('<svg '))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    modules, svgs = out.strip().rsplit(" ", 1)
    assert modules == "[]" and int(svgs) >= 6  # deviations of 3 groups, 3 histograms
