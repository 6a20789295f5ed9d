"""tools/bench_scale.py's comparison with WorldFoundry (--peer): its numbers read under the scorecard's names, and
every value that differs named; the bf16 rounding that makes ties. No timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import bench_scale
import numpy as np
import pytest
from shared_data import shared_data


def _peer_output(out: Path, ap: float) -> Path:
    """WorldFoundry's output folder as its score-dir run writes it (the fields bench_scale reads)."""
    (out / "upstream").mkdir(parents=True)
    results = {
        "results_by_split": {
            "binary:m_Pan_Left": {"average_precision": ap, "roc_auc": 0.75, "metadata": {"split_name": "Pan_Left"}},
            "vqa_retrieval:m_only motion": {"metadata": {"skill_name": "only motion"},
                                            "vqa": {"binary_acc": 0.5, "question_acc": 0.25},
                                            "retrieval": {"text": 0.3, "image": 0.2, "group": 0.1}}},
        "overall_average_precision": ap, "overall_roc_auc": 0.75, "overall_binary_acc": 0.5,
        "overall_question_acc": 0.25, "overall_retrieval_text": 0.3, "overall_retrieval_image": 0.2,
        "overall_retrieval_group": 0.1,
        "results": [{"spice": 0.6, "cider": 0.7, "bleu2": 0.3, "rouge_l": 0.5, "meteor": 0.4, "gen_match": None}]}
    (out / "upstream" / "camerabench_all_results.json").write_text(json.dumps(results))
    (out / "scorecard.json").write_text(json.dumps({"metrics": {"leaderboard": {"camerabench_average": 0.5}}}))
    return out


def test_peer_values_use_the_scorecards_names_and_every_difference_is_named(tmp_path: Path) -> None:
    theirs = bench_scale.peer_values(_peer_output(tmp_path / "wf", ap=0.41))
    assert theirs["binary/Pan_Left/average_precision"] == 0.41 and theirs["binary/overall_average_precision"] == 0.41
    assert theirs["vqa/only_motion/question_acc"] == 0.25 and theirs["retrieval/only_motion/group"] == 0.1
    assert theirs["caption/word_f1"] == 0.6 and theirs["caption/meteor_simplified"] == 0.4
    assert "caption/gen_match" not in theirs and theirs["composite/camerabench_average"] == 0.5
    ours = dict(theirs, **{"binary/Pan_Left/average_precision": 0.4, "only/ours": 1.0})
    ours["vqa/only_motion/question_acc"] += 1e-13    # rounding: equal
    lines = bench_scale.value_diff(ours, theirs)
    assert lines[0] == (f"  values: {len(theirs)} numbers in both, {len(theirs) - 1} equal (max abs difference "
                        "1e-13), 1 differ:")
    assert lines[1:] == ["    binary/Pan_Left/average_precision: ours 0.4, WorldFoundry 0.41 (difference -0.01)"]


def test_our_values_add_the_composites_components(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "scorecard.json").write_text(json.dumps({"metrics": {"binary/overall_average_precision": {"value": 0.4},
                                                                "caption/bleu2": {"value": None}}}))
    (run / "derived.jsonl").write_text(json.dumps({"derived_id": "camerabench_average", "result": {
        "camera_motion_average_precision": 0.4, "camerabench_average": 0.45, "official": False}}) + "\n")
    assert bench_scale.our_values(run) == {"binary/overall_average_precision": 0.4,
                                           "composite/camera_motion_average_precision": 0.4,
                                           "composite/camerabench_average": 0.45}


def test_bf16_rounding_keeps_8_significant_bits_and_makes_ties(tmp_path: Path) -> None:
    scores = [0.123456789, 0.123450000, 0.9999, 0.5]
    path = tmp_path / "classification_scores_m_Pan_Left.json"
    path.write_text(json.dumps({"scores": [{"score": s} for s in scores]}))
    bench_scale.round_to_bf16(tmp_path)
    rounded = [r["score"] for r in json.loads(path.read_text())["scores"]]
    assert rounded[0] == rounded[1] and rounded[2] == 1.0 and rounded[3] == 0.5
    for value, was in zip(rounded, scores, strict=True):
        mantissa, _ = np.frexp(value)
        assert float(mantissa * 256) == round(mantissa * 256) and abs(value - was) <= abs(was) * 2**-8


DATA = shared_data("camerabench")


@pytest.mark.skipif(DATA is None, reason="../shared/data/camerabench (the pinned data) is not beside this checkout")
def test_a_replica_holds_every_row_k_times_under_new_ids_and_its_run_checks_it_as_the_pinned_set(
        tmp_path: Path) -> None:
    """#32's 10x rows: the data folder and the score files replicated (replica r of a row names its videos
    ``<stem>.r<r>.mp4``), every score kept; the pinbench process of those rows (``--replica``) checks the replica as
    it checks the pinned set: its manifest byte for byte, the official counts times k."""
    from pinbench_recipes.camerabench.data_files import load_manifest, verify_data_dir
    from pinbench_recipes.camerabench.dataset import load_dataset
    from pinbench_recipes.camerabench.official_json import read_score_dir

    scores = tmp_path / "scores"
    n = bench_scale.write_scores(1.0, scores)
    data, copies = tmp_path / "replica" / "data", tmp_path / "copies"
    assert bench_scale.replicate(2, scores, data, copies) == 2 * n
    verify_data_dir(data, load_manifest(data.parent / bench_scale.REPLICA_MANIFEST))
    whole, pinned = load_dataset(data, ["binary", "vqa"]), load_dataset(DATA, ["binary", "vqa"])
    ids = [s.sample_id for s in whole.binary] + [p.sample_id for p in whole.vqa]
    assert len(ids) == len(set(ids)) == 2 * n
    assert len(whole.video_names()) == 2 * len(pinned.video_names())   # every video of a replica is its own
    assert [sum(getattr(p, side).endswith(".r1.mp4") for p in whole.vqa) for side in ("pos_video", "neg_video")] \
        == [len(pinned.vqa)] * 2
    outputs = read_score_dir(copies, whole, ["binary", "vqa"])
    original = pinned.binary[0]
    copy = next(s for s in whole.binary if s.video == bench_scale.replica_name(original.video, 1))
    assert outputs.binary[copy.sample_id] == outputs.binary[original.sample_id]
    assert len(outputs.binary) + len(outputs.vqa) == 2 * n
    doctor = subprocess.run([sys.executable, str(Path(bench_scale.__file__)), "--replica", str(data), "2", "--",
                             "doctor", "camerabench", "--checkpoint", "m", "-o", f"scores={copies}", "-o",
                             f"data={data}"], capture_output=True, text=True)
    assert doctor.returncode == 0 and f"{2 * n} of {2 * n} samples scored" in doctor.stdout + doctor.stderr, \
        doctor.stdout + doctor.stderr
