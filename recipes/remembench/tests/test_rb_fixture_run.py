"""The fixture run end to end: synthetic release, rollouts and weights; scorecard, outputs, resume, failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stored import stored_ids

from pinbench.core.config import RecipeError
from pinbench.core.recipe import get_recipe
from pinbench.ops.launch import run_recipe
from pinbench_recipes.remembench.fixture import build_fixture
from pinbench_recipes.remembench.tests.conftest import fixture_config, restamp


def test_fixture_run_passes_its_reference(fixture_run):
    out, outcome = fixture_run
    assert outcome.exit_code == 0, outcome.message
    card = json.loads((out / "scorecard.json").read_text())
    assert card["status"] == "complete" and card["mode"] == "fixture" and card["samples"]["n_expected"] == 7
    assert set(card["metrics"]) == {f"{g}/{m}" for g in ("t2v", "i2v/rotation_180", "i2v/translation_180")
                                    for m in ("clip", "lpips_alex", "tempssim", "drift")}
    assert card["metrics"]["t2v/tempssim"]["n_expected"] == 3
    assert card["extra"]["cohort"]["t2v"]["n_rows"] == 3
    assert card["provenance"]["seeds"]["t2v-001"] == "18446744073709551615"
    assert (out / "report" / "index.html").is_file()


def test_the_provenance_names_no_path_of_the_run_directory(fixture_run):
    # else two fixture runs in two folders "ran differently" in pinbench compare and view
    out, _ = fixture_run
    card = json.loads((out / "scorecard.json").read_text())
    assert str(out) not in json.dumps(card["provenance"])


def test_fixture_outputs(fixture_run):
    out, _ = fixture_run
    scenes = [json.loads(line) for line in (out / "scenes.jsonl").read_text().splitlines()]
    assert len(scenes) == 7 and all(s["status"] == "ok" for s in scenes)
    i2v = [s for s in scenes if s["group"] != "t2v"]
    assert all(s["departure_frame"] == 0 and s["turnaround_frame"] < s["revisit_frame"] for s in i2v)
    scores = json.loads((out / "scores.json").read_text())
    t2v = scores["groups"]["t2v"]
    assert t2v["n_scenes"] == 3 and set(t2v["median"]) == {"clip", "lpips_alex", "tempssim", "drift"}
    assert set(t2v["scenes"]["t2v-000"]) >= {"clip", "departure_frame", "revisit_frame", "video_sha256"}
    assert scores["groups"]["i2v/rotation_180"]["scenes"]["s01"]["turnaround_frame"] == 126
    assert {p.name for p in (out / "figures").glob("*.png")} == {
        "pairs-t2v.png", "pairs-i2v-rotation_180.png", "pairs-i2v-translation_180.png"}

def test_missing_rollout_is_counted_and_named(tmp_path):
    data = build_fixture(tmp_path / "fixture_data")
    (data.videos / "t2v-001.mp4").unlink()
    restamp(data.root)
    outcome = run_recipe(fixture_config(tmp_path))
    assert outcome.exit_code != 0
    card = json.loads((tmp_path / "scorecard.json").read_text())
    assert card["status"] == "partial"
    failed = card["metrics"]["t2v/clip"]["failed"]
    assert failed[0]["sample_id"] == "t2v-001" and "t2v-001.mp4" in failed[0]["error"]
    assert card["metrics"]["i2v/rotation_180/clip"]["n_scored"] == 2
    scores = json.loads((tmp_path / "scores.json").read_text())["groups"]["t2v"]
    assert scores["n_scenes"] == 2 and scores["n_expected"] == 3 and "t2v-001" in scores["failed"]


def test_nan_camera_poses_fail_their_sample_by_name(tmp_path):
    """Before: all-NaN poses scored frame 0 against itself, stored ok with CLIP 0.99999994 and LPIPS 0."""
    import numpy as np

    data = build_fixture(tmp_path / "fixture_data")
    np.savez(data.poses_dir / "s02-rot180.npz", poses=np.full((253, 4, 4), np.nan), idx=np.arange(253))
    restamp(data.root)
    outcome = run_recipe(fixture_config(tmp_path))
    assert outcome.exit_code == 2
    metric = json.loads((tmp_path / "scorecard.json").read_text())["metrics"]["i2v/rotation_180/clip"]
    assert (metric["n_scored"], metric["n_failed"]) == (1, 1)
    (failed,) = metric["failed"]
    assert failed["sample_id"] == "s02-rot180" and "camera poses are not finite" in failed["error"]


def test_unknown_option_is_refused(tmp_path):
    with pytest.raises(RecipeError, match=r"unknown option\(s\) vidoes \(did you mean 'videos'\?\) for remembench"):
        fixture_config(tmp_path, vidoes="x")


def test_limited_run_is_not_compared_as_complete(tmp_path):
    """--limit 4 scores the first four rows (3 T2V, 1 I2V); the 7-sample reference does not apply."""
    cfg = fixture_config(tmp_path)
    cfg.limit = 4
    outcome = run_recipe(cfg)
    card = json.loads((tmp_path / "scorecard.json").read_text())
    assert card["samples"]["n_expected"] == 4 and card["status"] == "complete"
    assert set(card["metrics"]) == {f"{g}/{m}" for g in ("t2v", "i2v/rotation_180")
                                    for m in ("clip", "lpips_alex", "tempssim", "drift")}
    assert card["extra"]["cohort"]["i2v"]["selected_ids"] == ["s01-rot180"]
    assert outcome.exit_code == 3  # sample count mismatch with the full fixture reference


def _per_sample(out: Path) -> dict[str, tuple]:
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return {r["sample_id"]: (r["status"], r["result"], r["error"]) for r in rows}

def test_skip_scoring_scores_nothing(tmp_path):
    outcome = run_recipe(get_recipe("remembench").config(out_dir=tmp_path, fixture=True, offline=True,
                                                         skip_scoring=True, options={"device": "cpu"}, env={}))
    assert outcome.exit_code != 0 and not stored_ids(tmp_path / "samples")


def test_options_the_fixture_does_not_use_are_refused(tmp_path):
    with pytest.raises(RecipeError, match="-o videos does not apply to remembench --fixture runs"):
        fixture_config(tmp_path, videos=str(tmp_path))
    with pytest.raises(RecipeError, match=r"\$REMEMBENCH_SPLIT \(option split\) does not apply"):
        get_recipe("remembench").config(out_dir=tmp_path, fixture=True, env={"REMEMBENCH_SPLIT": "i2v"})


def test_the_fixture_poses_have_the_same_bytes_under_every_python(tmp_path):
    """np.savez's zip64 header differs between Python releases (3.11.7 wrote version 45, 3.11.2 version 20), and
    the poses are keyed by their SHA-256: the host and the CPU image keyed the same poses differently."""
    import zipfile

    import numpy as np

    data = build_fixture(tmp_path / "fixture")
    files = sorted(data.poses_dir.glob("*.npz"))
    assert files
    for path in files:
        with zipfile.ZipFile(path) as archive:
            assert [(m.extract_version, m.date_time, m.extra) for m in archive.infolist()] == \
                [(20, (1980, 1, 1, 0, 0, 0), b"")] * 2, path
        with np.load(path, allow_pickle=False) as poses:
            assert poses["poses"].shape[1:] == (4, 4) and poses["idx"].tolist() == list(range(len(poses["poses"])))
