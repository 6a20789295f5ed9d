"""The recipe end to end through run_recipe(cfg): the CPU fixture against its reference, resume, partial runs,
bad input before any work, one run per directory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pinbench.core.config import RecipeError, RunConfig
from pinbench.core.recipe import get_recipe
from pinbench.core.reference import EXIT_INCOMPLETE
from pinbench.ops.launch import run_recipe
from pinbench_recipes.mind.tests.conftest import Layout, continuation_record, mirror_record

RECIPE = get_recipe("mind")


def _cfg(out: Path, *, checkpoint: str = "", options: dict | None = None, **kwargs) -> RunConfig:
    if not kwargs.get("fixture"):
        checkpoint = checkpoint or "my-model"
    return RECIPE.config(checkpoint, out_dir=out, offline=True, options=options or {}, env={}, **kwargs)


def _card(out: Path) -> dict:
    return json.loads((out / "scorecard.json").read_text())


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("mind") / "fixture"
    return out, run_recipe(_cfg(out, fixture=True))


def test_fixture_passes_against_its_reference(fixture_run) -> None:
    out, outcome = fixture_run
    assert outcome.exit_code == 0, outcome.message
    assert outcome.diff is not None and outcome.diff.ok
    card = _card(out)
    assert card["status"] == "complete" and card["samples"]["n_expected"] == 7    # 5 continuations, 2 mirror dirs
    assert card["derived"]["n_records"] == 1 and card["metrics"]["mind_average"]["records"] == "derived"
    assert "suite" not in (out / "samples.jsonl").read_text() and not (out / "samples" / "suite.json").exists()
    assert card["metrics"]["1st_data/action_space_test/lcm_mse"]["n_expected"] == 1
    # the test double and the fixture's LPIPS trunk read none of the real weights: only the code it follows
    assert sorted(card["provenance"]["inputs"]) == ["upstream/mind", "upstream/vipe", "upstream/worldfoundry"]
    # the fixture shows the uncertainty a run carries: two first-person memory scenes give an interval
    interval = card["metrics"]["1st_data/mem_test/lcm_mse"]["interval"]
    assert (interval["unit"], interval["n_units"], interval["method"]) == ("sample", 2, "BCa")
    assert interval["low"] < card["metrics"]["1st_data/mem_test/lcm_mse"]["value"] < interval["high"]
    assert "one sample" in card["metrics"]["3rd_data/mem_test/lcm_mse"]["interval"]["reason"]
    assert card["metrics"]["mind_average"]["kind"] == "derived"
    assert card["metrics"]["1st_data/mem_test/native/lcm_ssim"]["kind"] == "cross_check"
    assert "ProcessPyCpuDouble" in card["extra"]["test_double"]
    # the official numbers (the double's torchmetrics) and the native ones agree frame by frame everywhere
    cross = card["extra"]["cross_check"]
    assert len(cross) == 24 and all(entry["disagree"] == [] for entry in cross.values()), cross
    # Infinity travelled end to end: path-2's identical first pair is an infinite PSNR frame, not a failure
    lines = (out / "samples.jsonl").read_text().splitlines()
    rows = {row["sample_id"]: row for row in map(json.loads, lines)}
    assert rows["1st_data.mirror_test.loop-1"]["result"]["errors"] == {}
    assert (out / "official" / "run-001" / "Result.json").read_text().count("Infinity") >= 1

def _records(layout: Layout) -> list[dict]:
    return [continuation_record("data-1", mark=10, total=122, frames=112, scored=100),
            continuation_record("data-2", "1st_data", "action_space_test", mark=5, total=220, frames=215, scored=200),
            mirror_record("loop-1", videos={"path-1.mp4": 12, "path-2.mp4": 8}),
            mirror_record("loop-1", "3rd_data", videos={"path-1.mp4": 10})]   # 3rd_data/mem_test/data-3 missing


def test_imported_results_with_a_missing_sample_are_partial_and_exit_non_zero(tmp_path: Path, layout: Layout,
                                                                               write_result) -> None:
    results = write_result(_records(layout))
    out = tmp_path / "run"
    outcome = run_recipe(_cfg(out, options={"gt": str(layout.gt_root), "videos": str(layout.generated_root),
                                     "results": str(results), "native": "0"}))
    assert outcome.exit_code == EXIT_INCOMPLETE
    card = _card(out)
    assert card["status"] == "partial"
    metric = card["metrics"]["3rd_data/mem_test/lcm_mse"]
    assert (metric["n_expected"], metric["n_scored"], metric["n_failed"]) == (1, 0, 1)
    assert "no record in the Result.json" in metric["failed"][0]["error"]
    assert card["metrics"]["1st_data/mem_test/lcm_mse"]["n_scored"] == 1
    assert card["metrics"]["mind_average"]["value"] is not None      # derived over what was scored, labelled


def test_a_complete_result_file_imported_without_videos_is_complete_with_its_mirror_directories(
        tmp_path: Path, layout: Layout, write_result) -> None:
    """-o results without -o videos: nothing to cross-check natively, and the file's mirror_test records are the
    mirror samples (no other source names them): a complete file gives a complete scorecard with GSC."""
    records = [*_records(layout), continuation_record("data-3", "3rd_data", "mem_test", mark=0, total=105,
                                                      frames=105, scored=100)]
    out = tmp_path / "run"
    outcome = run_recipe(_cfg(out, options={"gt": str(layout.gt_root), "results": str(write_result(records))}))
    card = _card(out)
    assert card["status"] == "complete", [n for n, m in card["metrics"].items() if m["n_scored"] != m["n_expected"]]
    assert outcome.exit_code == 0
    assert not [name for name in card["metrics"] if "/native/" in name]
    for perspective in ("1st_data", "3rd_data"):
        metric = card["metrics"][f"{perspective}/mirror_test/gsc_mse"]
        assert (metric["n_expected"], metric["n_scored"]) == (1, 1)
    assert card["metrics"]["scene_consistency_score"]["value"] is not None
    assert sorted(card["provenance"]["inputs"]) == ["upstream/mind", "upstream/vipe", "upstream/worldfoundry"]


def test_layout_problems_stop_the_run_before_any_work(tmp_path: Path, layout: Layout, capsys) -> None:
    layout.add_mirror("1st_data", "loop-1", "path-3.mp4", frames=7)
    shutil.rmtree(layout.generated_root / "3rd_data" / "action_space_test")
    out = tmp_path / "run"
    with pytest.raises(RecipeError, match="the layouts have 2 problem") as info:
        run_recipe(_cfg(out, options={"gt": str(layout.gt_root), "videos": str(layout.generated_root)}))
    assert "\n" not in str(info.value)
    err = capsys.readouterr().err
    assert "path-3.mp4: 7 frames, an odd count" in err and "action_space_test: generated test directory" in err
    assert not (out / "official").exists() and not (out / "scorecard.json").exists()


@pytest.mark.parametrize(("options", "words"), [
    ({"videos": "/x"}, r"option gt is required \(-o gt=\.\.\. or \$MIND_GT\)"),
    ({"gt": "/x"}, r"option videos is required unless -o results is given \(-o videos=\.\.\. or \$MIND_VIDEOS\)"),
])
def test_missing_inputs_are_one_line_errors(tmp_path: Path, options: dict, words: str) -> None:
    """Refused when the options are parsed (recipe.yaml: required, required_unless), before the run starts."""
    with pytest.raises(RecipeError, match=words):
        _cfg(tmp_path / "run", options=options)
    _cfg(tmp_path / "run", options={"gt": "/x", "results": "/r.json"})  # results stands in for videos


def test_video_max_time_at_or_below_100_is_refused_by_the_option(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="below the minimum 101"):
        _cfg(tmp_path / "run", options={"video_max_time": "100", "gt": "/x", "videos": "/v"})


def test_official_run_without_its_runtime_is_one_line(tmp_path: Path, layout: Layout,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside the image nothing was fetched: the run stops before laying out any work, naming the fetch."""
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "empty-cache"))
    out = tmp_path / "run"
    with pytest.raises(RecipeError, match=r"^official runtime: .*pinbench fetch mind") as info:
        run_recipe(_cfg(out, options={"gt": str(layout.gt_root), "videos": str(layout.generated_root), "native": "0"}))
    assert "\n" not in str(info.value) and not (out / "official").exists()
