"""The report as a reader sees it: rendered by a real headless Chromium (Debian's ``chromium``; .ci/run installs it).

The page is measured after layout (tests/helpers/headless_chromium.py): every text drawn at 11 px or more, figure
labels included (they are SVG text in the DOM, not pixels of an image), and nothing wider than a 1280 px window.
Screenshots are saved as test artifacts: under ``$PINBENCH_TEST_ARTIFACTS/report/`` when set, else the test's
temporary directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from headless_chromium import chromium, measure, screenshot
from PIL import Image

from pinbench.core.runner import SampleRecord
from pinbench.core.scorecard import MetricSpec, Scorecard, build_scorecard, write_scorecard
from pinbench.results.compare import compare_runs, load_run
from pinbench.results.report import write_report

pytestmark = pytest.mark.skipif(chromium() is None, reason="needs a chromium on PATH (.ci/run installs Debian's)")

PROVENANCE = json.loads((Path(__file__).parent / "golden" / "scorecard.json").read_text())["provenance"]
# MIND's shape: splits x tests x metrics, with its longest names (they once pushed the page past 1280 px)
SPLITS, TESTS = ("1st_data", "3rd_data"), ("mem_test", "action_space_test")
NAMES = ("lcm_mse", "lcm_psnr", "dino_mse", "action_rpe_rot_median_deg", "native/lcm_ssim")


def _artifacts(tmp_path: Path) -> Path:
    root = os.environ.get("PINBENCH_TEST_ARTIFACTS")
    return Path(root) / "report" if root else tmp_path / "shots"


def _mind_like_run(root: Path, name: str, shift: float = 0.0, n: int = 24, *, one_failed: bool = True
                   ) -> tuple[Path, dict, list]:
    rng = np.random.default_rng(7)
    metrics = [MetricSpec(f"{split}/{test}/{metric}", "mean", key=metric.replace("/", "_"),
                          direction="lower" if metric.endswith(("mse", "deg")) else "higher",
                          primary=metric == "lcm_mse") for split in SPLITS for test in TESTS for metric in NAMES]
    records = [SampleRecord(f"s{i:02d}", "ok", {m.replace("/", "_"): float(rng.normal(0.5, 0.1)) + shift
                                               for m in NAMES}, None, "0" * 64, 0.1)
               for i in range(n - one_failed)]
    if one_failed:
        records.append(SampleRecord(f"s{n - 1:02d}", "failed", None, "RuntimeError: decode failed at frame 7",
                                    "0" * 64, 0.1))
    card = build_scorecard(recipe="toy-bench", recipe_version="1.0.0", checkpoint=name, mode="full", metrics=metrics,
                           records=records, n_expected=n, provenance=PROVENANCE, config={}, timings={})
    run = root / name
    write_scorecard(card, run / "scorecard.json")
    (run / "samples.jsonl").write_text("".join(json.dumps(r.to_json()) + "\n" for r in records))
    return run, card, records


def _reference(card: Scorecard) -> dict:
    """A reference of the card's values, with tight tolerances on a few metrics: their bars run past the axis."""
    metrics = {}
    for k, (name, m) in enumerate(card.metrics.items()):
        value = m.value + (0.02 if k % 7 == 3 else 0.0)
        metrics[name] = {"value": value, "direction": m.direction, "primary": m.primary,
                         "tolerance": {"abs": 0.001 if k % 5 == 1 else 0.05}}
    return {"recipe": card.recipe, "recipe_version": card.recipe_version, "checkpoint": card.checkpoint,
            "mode": card.mode, "n_samples": card.samples.n_expected, "tier": "cross_hw",
            "source": {"kind": "fixture"}, "metrics": metrics}


def _readable(index: Path, min_svg_texts: int) -> dict:
    page = measure(index)
    small = [s for s in page["sizes"] if s["size"] < 11]
    assert not small, small[:5]
    svg_texts = [s for s in page["sizes"] if s["tag"] == "text"]
    assert len(svg_texts) >= min_svg_texts, len(svg_texts)  # the figures' labels are text in the page
    assert page["scroll_width"] <= page["viewport_width"] == 1280, page["scroll_width"]  # no sideways scrolling
    return page


def test_a_run_report_reads_at_100_percent(tmp_path: Path) -> None:
    run, card, records = _mind_like_run(tmp_path, "model-a")
    png = tmp_path / "over_time.png"
    Image.new("RGB", (320, 120), (240, 240, 240)).save(png)
    index = write_report([run / "scorecard.json"], tmp_path / "report", references={0: _reference(card)},
                         samples={0: records}, extra_figures={0: [("m over time", png, "a recipe figure")]})
    page = _readable(index, min_svg_texts=len(card.metrics) * 2)
    assert page["svgs"] >= 4 + 4  # a deviation plot and a set of histograms per group
    shots = _artifacts(tmp_path)
    for fragment, name in (("", "run-top"), ("s01-deviations", "run-deviations"), ("s01-scores", "run-scores"),
                           ("s01-distributions", "run-distributions")):
        shot = screenshot(index, shots / f"{name}.png", fragment=fragment)
        with Image.open(shot) as image:
            assert image.size == (1280, 1400)


def test_a_compare_report_reads_at_100_percent_and_colours_by_direction(tmp_path: Path) -> None:
    a, _, _ = _mind_like_run(tmp_path, "model-a", one_failed=False)
    b, _, _ = _mind_like_run(tmp_path, "model-b", shift=0.05, one_failed=False)
    result = compare_runs(load_run(a), load_run(b))
    index = write_report([a / "scorecard.json", b / "scorecard.json"], tmp_path / "compare", comparisons=[result],
                         title="compare: model-a vs model-b")
    _readable(index, min_svg_texts=len(result.metrics))
    html = index.read_text()
    better = sum(1 for r in result.metrics if r.verdict == "better")
    worse = sum(1 for r in result.metrics if r.verdict == "worse")
    assert better and worse  # higher-is-better metrics improved, lower-is-better ones got worse
    assert f'<span class="badge worse">DIFFERENT: {better} better, {worse} worse</span>' in html
    screenshot(index, _artifacts(tmp_path) / "compare-top.png")
