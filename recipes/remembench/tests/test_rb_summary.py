"""Reproducing the release's T2V summary from its pairs file (synthetic stand-ins for the real files)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pinbench.recipe import get_recipe
from pinbench_recipes.remembench.dataset import DatasetError
from pinbench_recipes.remembench.run import run
from pinbench_recipes.remembench.summary import (
    BUDGETS,
    METHODS,
    annotations_for,
    compare_summary,
    medians,
    read_pairs,
    read_summary,
)
from pinbench_recipes.remembench.tests.conftest import i2v_row, t2v_row, write_checksums, write_jsonl

TABLE = {("Base", 1): (0.755, 0.659), ("MoC", 1): (0.832, 0.594), ("MosaiChunk", 1): (0.899, 0.567),
         ("Base", 2): (0.751, 0.652), ("MoC", 2): (0.841, 0.569), ("MosaiChunk", 2): (0.936, 0.500)}


def pair_rows(n_scenes: int, seed: int = 0) -> list[dict]:
    """Pairs whose medians per arm are exactly the paper's table (values mirrored around it)."""
    rng = np.random.default_rng(seed)
    rows = []
    for (method, budget), (clip, lpips) in TABLE.items():
        offsets = np.round(rng.uniform(0.001, 0.05, n_scenes // 2), 6)
        spread = np.concatenate([offsets, -offsets])
        order = rng.permutation(n_scenes)
        for i in range(n_scenes):
            rows.append({"scene_id": f"scene-{i:03d}", "method": method, "comparison_budget_chunks": budget,
                         "source_arm": f"{method.lower()}-{budget}", "departure_frame": 10 + i,
                         "revisit_frame": 300 + i, "clip": clip + spread[order[i]],
                         "lpips_alex": lpips - spread[order[i]]})
    return rows


def nested_summary(values: dict) -> dict:
    out: dict = {}
    for (method, budget, metric), value in values.items():
        out.setdefault(method, {}).setdefault(f"{budget}_chunk", {})["lpips" if "lpips" in metric else "clip"] = value
    return {"description": "median over scenes", "n_scenes": 100, "medians": out}


def record_summary(values: dict) -> list[dict]:
    records = {}
    for (method, budget, metric), value in values.items():
        records.setdefault((method, budget), {"method": method, "comparison_budget_chunks": budget, "n": 100})[
            metric] = value
    return list(records.values())


def test_medians_and_exact_reproduction_in_two_layouts(tmp_path):
    pairs = read_pairs(write_jsonl(tmp_path / "pairs.jsonl", pair_rows(10)))
    computed = medians(pairs)
    assert len(computed) == 12
    for (method, budget), (clip, lpips) in TABLE.items():
        assert computed[(method, budget, "clip")] == pytest.approx(clip, abs=1e-12)
        assert computed[(method, budget, "lpips_alex")] == pytest.approx(lpips, abs=1e-12)
    for layout in (nested_summary(computed), record_summary(computed)):
        (tmp_path / "summary.json").write_text(json.dumps(layout))
        rows, problems = compare_summary(computed, read_summary(tmp_path / "summary.json"))
        assert problems == [] and {r["match"] for r in rows} == {"exact"}


def test_rounded_summary_matches_at_its_precision_and_a_wrong_value_fails(tmp_path):
    computed = medians(read_pairs(write_jsonl(tmp_path / "pairs.jsonl", pair_rows(10))))
    rounded = {k: round(v, 3) for k, v in computed.items()}
    (tmp_path / "summary.json").write_text(json.dumps(nested_summary(rounded)))
    nudged = {k: v + 1e-9 for k, v in computed.items()}
    rows, problems = compare_summary(nudged, read_summary(tmp_path / "summary.json"))
    assert problems == [] and {r["match"] for r in rows} == {"at published precision"}
    wrong = dict(rounded)
    wrong[("MoC", 2, "clip")] = 0.842
    (tmp_path / "summary.json").write_text(json.dumps(nested_summary(wrong)))
    _, problems = compare_summary(computed, read_summary(tmp_path / "summary.json"))
    assert problems == [f"moc-2chunk/clip: computed {computed[('MoC', 2, 'clip')]}, published 0.842"]


def test_summary_with_missing_entries_is_a_clear_error(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps({"Base": {"1_chunk": {"clip": 0.7}}}))
    with pytest.raises(DatasetError, match=r"summary.json: could not find 11 of 12 medians"):
        read_summary(tmp_path / "summary.json")


@pytest.mark.parametrize(
    ("change", "message"),
    [({"method": "Other"}, "method 'Other' is not one of"), ({"comparison_budget_chunks": 3}, "not 1 or 2"),
     ({"clip": "high"}, "'clip' must be a finite number"), ({"revisit_frame": 1}, "departure_frame <= revisit"),
     ({"scene_id": ""}, "scene_id must be")],
)
def test_bad_pair_rows(change, message, tmp_path):
    rows = pair_rows(2)
    rows[1].update(change)
    path = write_jsonl(tmp_path / "pairs.jsonl", rows)
    with pytest.raises(DatasetError, match=message) as err:
        read_pairs(path)
    assert str(err.value).startswith(f"{path}:2: ")


def test_pair_rows_need_a_clip_field_and_no_duplicates(tmp_path):
    rows = pair_rows(2)
    del rows[0]["clip"]
    with pytest.raises(DatasetError, match="no clip value"):
        read_pairs(write_jsonl(tmp_path / "a.jsonl", rows))
    rows = pair_rows(2)
    with pytest.raises(DatasetError, match="duplicate Base budget 1 scene 'scene-000'"):
        read_pairs(write_jsonl(tmp_path / "b.jsonl", rows + rows[:1]))
    pairs = read_pairs(write_jsonl(tmp_path / "c.jsonl", pair_rows(4)))
    assert annotations_for(pairs, "MosaiChunk", 2) == {f"scene-{i:03d}": (10 + i, 300 + i) for i in range(4)}


def make_release(root: Path, summary_values: dict | None = None) -> Path:
    pairs = pair_rows(100)
    write_jsonl(root / "evaluation/t2v_reference_pairs.jsonl", pairs)
    values = summary_values or medians(read_pairs(root / "evaluation/t2v_reference_pairs.jsonl"))
    (root / "evaluation/t2v_reference_summary.json").write_text(json.dumps(nested_summary(values)))
    write_jsonl(root / "data/t2v/test.jsonl", [t2v_row()])
    write_jsonl(root / "data/i2v/test.jsonl", [i2v_row()])
    write_checksums(root)
    return root


def test_reference_pairs_run_passes_against_the_paper_table(tmp_path):
    release = make_release(tmp_path / "RememBench")
    cfg = get_recipe("remembench").config("t2v-reference-pairs", out_dir=tmp_path / "run", offline=True,
                                          options={"dataset_dir": str(release)}, env={})
    outcome = run(cfg)
    assert outcome.exit_code == 0, outcome.message
    card = json.loads((tmp_path / "run" / "scorecard.json").read_text())
    assert card["status"] == "complete" and card["samples"]["n_expected"] == 600
    assert card["metrics"]["mosaichunk-2chunk/clip"]["value"] == pytest.approx(0.936, abs=1e-12)
    check = json.loads((tmp_path / "run" / "summary_check.json").read_text())
    assert check["problems"] == [] and len(check["rows"]) == len(METHODS) * len(BUDGETS) * 2
    assert "reproduced" in outcome.message


def test_reference_pairs_run_fails_when_the_summary_differs(tmp_path):
    values = medians(read_pairs(write_jsonl(tmp_path / "p.jsonl", pair_rows(100))))
    values[("Base", 1, "lpips_alex")] += 0.01
    release = make_release(tmp_path / "RememBench", values)
    cfg = get_recipe("remembench").config("t2v-reference-pairs", out_dir=tmp_path / "run", offline=True,
                                          options={"dataset_dir": str(release)}, env={})
    outcome = run(cfg)
    assert outcome.exit_code == 1 and "base-1chunk/lpips_alex" in outcome.message
