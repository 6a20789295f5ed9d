"""The score-only path on the real pinned data folder (``../shared/data/camerabench``, a byte copy that matches
data_manifest.json): every one of its 11,222 samples, offline, through the doctor, as a user with Script 1
outputs and no network would run it.

No per-sample Script 1 outputs are published, so the score files are seeded draws in the official shapes
(``synthetic.write_synthetic_scores``); the data, the manifest check and the official counts are the real ones.
The expected values are computed here from the score files with scikit-learn and the Script 2 formulas,
independently of the recipe's reader, runner and aggregation.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from shared_data import shared_data
from sklearn.metrics import average_precision_score
from typer.testing import CliRunner

from pinbench import cli
from pinbench_recipes.camerabench import aggregate
from pinbench_recipes.camerabench.dataset import LEADERBOARD_SPLITS, load_dataset
from pinbench_recipes.camerabench.official_json import read_score_dir
from pinbench_recipes.camerabench.script2 import script2_tasks
from pinbench_recipes.camerabench.synthetic import MODEL_NAME, write_synthetic_scores
from pinbench_recipes.camerabench.tests.test_cb_aggregate import _records

DATA = shared_data("camerabench")
pytestmark = pytest.mark.skipif(DATA is None, reason="../shared/data/camerabench (the pinned data folder, see "
                                                     "shared/data/README.md) is not beside this checkout")


def _expected_ap(scores: Path) -> dict[str, float]:
    """AP of every split straight from its score file (sklearn, as upstream Script 2 calls it)."""
    out = {}
    for path in scores.glob("classification_scores_*.json"):
        doc = json.loads(path.read_text())
        rows = [r for r in doc["scores"] if r["error"] is None]
        out[doc["metadata"]["split_name"]] = float(average_precision_score(
            [int(r["ground_truth_label"] == "Yes") for r in rows], [r["score"] for r in rows]))
    return out


def _expected_question_acc(scores: Path) -> float:
    """Q-Acc: per skill file, questions right on both videos / (2 x pairs), then the unweighted mean of skills."""
    per_skill = []
    for path in scores.glob("vqa_retrieval_scores_*.json"):
        rows = json.loads(path.read_text())["scores"]
        right = 0
        for r in rows:
            yes, no = r["yes_scores"], r["no_scores"]
            right += (yes["pos_text_pos_image"] > no["pos_text_pos_image"]
                      and no["pos_text_neg_image"] > yes["pos_text_neg_image"])
            right += (no["neg_text_pos_image"] > yes["neg_text_pos_image"]
                      and yes["neg_text_neg_image"] > no["neg_text_neg_image"])
        per_skill.append(right / (2 * len(rows)))
    return sum(per_skill) / len(per_skill)


def test_the_whole_real_data_folder_runs_offline_through_the_doctor(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "empty-cache"))   # nothing fetched: no model, no video
    for var in ("CAMERABENCH_DATA", "CAMERABENCH_SCORES", "CAMERABENCH_FAMILIES", "CAMERABENCH_VIDEOS"):
        monkeypatch.delenv(var, raising=False)
    scores, out = tmp_path / "scores", tmp_path / "run"
    assert len(write_synthetic_scores(DATA, scores, seed=0)) == 15 + 9
    result = CliRunner().invoke(cli.app, ["run", "camerabench", "--checkpoint", MODEL_NAME, "--offline",
                                          "--out", str(out), "-o", f"scores={scores}", "-o", f"data={DATA}"])
    assert result.exit_code == 0, result.output[-3000:]
    assert "PROBLEM" not in result.output
    card = json.loads((out / "scorecard.json").read_text())
    assert card["status"] == "complete"
    assert card["samples"]["n_expected"] == 11222 and card["derived"]["n_records"] == 15 + 9 + 1
    assert all(m["n_failed"] == 0 and m["n_scored"] == m["n_expected"] for m in card["metrics"].values())
    assert sum(1 for line in (out / "samples.jsonl").read_text().splitlines()
               if json.loads(line)["status"] != "ok") == 0

    expected = _expected_ap(scores)
    for split, ap in expected.items():
        assert card["metrics"][f"binary/{split}/average_precision"]["value"] == pytest.approx(ap, abs=1e-15)
    average = sum(expected.values()) / len(expected)
    assert card["metrics"]["binary/overall_average_precision"]["value"] == pytest.approx(average, abs=1e-15)
    question_acc = _expected_question_acc(scores)
    assert card["metrics"]["vqa/overall_question_acc"]["value"] == pytest.approx(question_acc, abs=1e-15)

    # the leaderboard's shape: AP x 100 in table.html's column order and the Avg; then Q-Acc x 100
    lines = (out / "leaderboard.md").read_text().splitlines()
    assert lines[0] == "| " + " | ".join([*LEADERBOARD_SPLITS, "Avg"]) + " |"
    assert lines[2] == "| " + " | ".join(f"{100 * v:.1f}" for v in
                                         [*(expected[s] for s in LEADERBOARD_SPLITS), average]) + " |"
    assert lines[-1] == f"| {100 * question_acc:.1f} |"


def test_nonfinite_rows_on_the_real_data_get_the_numbers_upstream_prints(tmp_path: Path) -> None:
    """Roll_Clockwise row 0 ("Yes", 1.0) set to +inf and only_motion pair 0 with one NaN yes score, on the seed-0
    files: upstream Script 2 at t2v_metrics 7c06208 (binary_classification_evaluation.py and
    vqa_and_retrieval_evaluation.py --mode vqa, run on these two files) printed Roll_Clockwise mAP = 0.4202,
    AUC = 0.7323 (470 samples) and only motion Question = 0.2698 (139 samples)."""
    scores = tmp_path / "scores"
    write_synthetic_scores(DATA, scores, seed=0)
    roll = scores / f"classification_scores_{MODEL_NAME}_Roll_Clockwise.json"
    doc = json.loads(roll.read_text())
    assert (doc["scores"][0]["ground_truth_label"], doc["scores"][0]["score"]) == ("Yes", 1.0)
    doc["scores"][0]["score"] = float("inf")
    roll.write_text(json.dumps(doc))
    motion = scores / f"vqa_retrieval_scores_{MODEL_NAME}_only_motion.json"
    doc = json.loads(motion.read_text())
    doc["scores"][0]["yes_scores"]["pos_text_pos_image"] = float("nan")
    motion.write_text(json.dumps(doc))
    data = load_dataset(DATA, ["binary", "vqa"])
    outputs = read_score_dir(scores, data, ["binary", "vqa"])
    groups = {g.derived_id: g for g in aggregate.group_records(data, _records(script2_tasks(data, outputs)),
                                                               kept_upstream=outputs.kept_upstream)}
    assert re.search(r"would report AP 0\.4202, AUC 0\.7323 over 470$", groups["binary_split__Roll_Clockwise"].error)
    assert re.search(r"would report question_acc 0\.2698 over 139 pairs$", groups["vqa_skill__only_motion"].error)
