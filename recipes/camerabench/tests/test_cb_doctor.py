"""``pinbench doctor camerabench``: it checks exactly the inputs the run reads (data, score files, and for Script 1
the model and video pins), so a score-only run offline is never refused for pins it does not read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pinbench.core.provenance import input_states
from pinbench.core.recipe import get_recipe
from pinbench.ops import doctor
from pinbench_recipes.camerabench import data_files, fixture, inputs

RECIPE = get_recipe("camerabench")


@pytest.fixture
def pinned_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The fixture's data pinned in place of the official manifest, its counts accepted (test doubles)."""
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "empty-cache"))
    data, scores = fixture.write_fixture(tmp_path / "fx")
    manifest = data_files.DataManifest(repo="o/r", commit="c" * 40, path="camerabench/data", files={
        p.relative_to(data).as_posix(): (data_files.sha256_file(p), p.stat().st_size)
        for p in data.rglob("*") if p.is_file()})
    monkeypatch.setattr(data_files, "load_manifest", lambda: manifest)
    monkeypatch.setattr(inputs, "official_count_problems", lambda _data: [])
    return data, scores


def _diagnose(tmp_path: Path, checkpoint: str, **options: str) -> list[doctor.Finding]:
    cfg = RECIPE.config(checkpoint, out_dir=tmp_path / "run", offline=True, options=options, env={})
    return doctor.diagnose(RECIPE, cfg, gpus=None)


def test_a_score_only_run_offline_is_not_refused_for_model_or_video_pins(pinned_fixture, tmp_path: Path) -> None:
    data, scores = pinned_fixture
    findings = _diagnose(tmp_path, "my-method", scores=str(scores), data=str(data))
    assert [f.render() for f in findings if not f.ok] == []
    lines = [f.line for f in findings]
    assert ("huggingface.qwen2_5_vl_7b_cam_motion.revision, huggingface.videos.revision null, not read from the "
            "cache by this run") in lines
    assert any(line.startswith(f"score files in {scores}: 17 of 17 samples scored") for line in lines)
    # a Script 1 run reads the videos pin: its null revision stops it offline, named
    script1 = [f for f in _diagnose(tmp_path, "qwen2.5-vl-7b", data=str(data)) if not f.ok]
    assert any(f.check == "pins" and f.line.startswith("huggingface.videos.revision null in") for f in script1)
    assert not any("qwen2_5_vl_7b_cam_motion" in f.line for f in script1)     # the SFT's pin is not read


def test_doctor_checks_the_data_folder_against_the_manifest_as_the_run_does(pinned_fixture, tmp_path: Path) -> None:
    data, scores = pinned_fixture
    copy = shutil.copytree(data, tmp_path / "copy")
    split = copy / "binary_classification" / "Pan_Left.jsonl"
    split.write_bytes(split.read_bytes().replace(b"pan", b"PAN", 1))
    problems = [f for f in _diagnose(tmp_path, "my-method", scores=str(scores), data=str(copy)) if not f.ok]
    assert [f.check for f in problems] == ["inputs"]
    assert problems[0].line.startswith(f"camerabench: {split}: differs from o/r@{'c' * 40}")


def test_doctor_reads_the_score_files_as_the_run_does(pinned_fixture, tmp_path: Path) -> None:
    data, scores = pinned_fixture
    (scores / f"classification_scores_{fixture.MODEL_NAME}_Pan_Left.json").write_text("{not json")
    (bad,) = [f for f in _diagnose(tmp_path, "my-method", scores=str(scores), data=str(data)) if not f.ok]
    assert bad.check == "inputs" and "Pan_Left.json: invalid JSON at line 1" in bad.line


def test_script1_without_a_gpu_is_said_and_a_score_only_run_needs_none(pinned_fixture, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """nvidia-smi absent (this machine): Script 1's default flash_attention_2 cannot load, a PROBLEM; another kernel
    would run on CPU, a WARNING; with a GPU (its nvidia-smi answer injected) an ok line names it."""
    data, scores = pinned_fixture

    def gpu_lines(checkpoint: str, **options: str) -> list[str]:
        return [f.render() for f in _diagnose(tmp_path, checkpoint, data=str(data), **options) if f.check == "gpu"]

    monkeypatch.setattr(doctor, "visible_gpus", lambda: None)
    (line,) = gpu_lines("qwen2.5-vl-7b")
    assert line.startswith("PROBLEM gpu: no GPU visible") and "flash_attention_2, which needs a CUDA GPU" in line
    assert "-o scores=DIR" in line
    (line,) = gpu_lines("qwen2.5-vl-7b-cam-motion", attn="sdpa")
    assert line.startswith("WARNING gpu: no GPU visible") and "(sdpa) on CPU" in line
    assert gpu_lines("my-method", scores=str(scores)) == []
    monkeypatch.setattr(doctor, "visible_gpus", lambda: [("0", "NVIDIA H200", 150.7)])
    assert gpu_lines("qwen2.5-vl-7b") == ["ok      gpu: Script 1 on GPU 0 NVIDIA H200 151 GB (Qwen2.5-VL-7B in bf16, "
                                          "~17 GB of weights)"]


def test_doctor_counts_the_samples_whose_row_has_an_error_and_those_without_a_row(pinned_fixture,
                                                                               tmp_path: Path) -> None:
    """The score files' line says how many samples will fail with their Script 1 error and how many have no row,
    each with an example, as the run will count them: both failed (it said "will be missing", and the scorecard
    then counted them failed, 0 missing)."""
    import json

    data, scores = pinned_fixture
    path = scores / f"classification_scores_{fixture.MODEL_NAME}_Pan_Left.json"
    doc = json.loads(path.read_text())
    doc["scores"][0]["error"] = "CUDA out of memory"
    del doc["scores"][1]
    path.write_text(json.dumps(doc))
    (found,) = [f for f in _diagnose(tmp_path, "my-method", scores=str(scores), data=str(data))
                if f.line.startswith("score files in")]
    # a WARNING, which pinbench run shows before it starts (an "ok" line, which it hides, hid 10,096 of 11,222
    # samples without a row)
    assert found.ok and found.warning
    assert found.line == (f"score files in {scores}: 15 of 17 samples scored; 1 will fail with their Script 1 error "
                          "(e.g. binary__Pan_Left__a1.0.0); 1 have no row and will fail as missing "
                          "(e.g. binary__Pan_Left__a2.0.0)")


def test_doctor_names_every_bad_row_of_a_score_file_in_one_line(pinned_fixture, tmp_path: Path) -> None:
    """A file with many bad rows was refused at its first: a researcher fixing a file of 1,000 rows reran the doctor
    once per bad row. One line counts them, names the first five and says what is wrong with the first."""
    import json

    data, scores = pinned_fixture
    path = scores / f"classification_scores_{fixture.MODEL_NAME}_Pan_Left.json"
    doc = json.loads(path.read_text())
    doc["scores"][1]["score"] = 2.0
    doc["scores"] += [dict(doc["scores"][0], video_path=f"stray{number}.mp4") for number in range(7)]
    path.write_text(json.dumps(doc))
    rows = len(doc["scores"])
    (bad,) = [f for f in _diagnose(tmp_path, "my-method", scores=str(scores), data=str(data)) if not f.ok]
    assert bad.line == (f"camerabench: {path}: 8 bad rows: scores[1], scores[{rows - 7}], scores[{rows - 6}], "
                        f"scores[{rows - 5}], scores[{rows - 4}] and 3 more (first: scores[1]: score 2.0 is outside "
                        '[0, 1]; Script 1 writes P("Yes"), a probability)')


def test_a_scorecard_names_the_pins_its_script_read() -> None:
    """Script 1 reads the videos, its model and the base model's processor; a fixture or score-only run reads none
    of them: the upstream code alone (its other model's weights are never an input of a run)."""
    code = ["upstream/leaderboard", "upstream/leaderboard_vqa", "upstream/t2v_metrics"]
    model = inputs.SCRIPT1_CHECKPOINTS["qwen2.5-vl-7b-cam-motion"]

    assert sorted(input_states(inputs.pins_for_provenance(model, fixture=False))) == [
        "huggingface/qwen2_5_vl_7b_cam_motion", "huggingface/qwen2_5_vl_7b_instruct", "huggingface/videos", *code]
    assert sorted(input_states(inputs.pins_for_provenance(model, fixture=True))) == code
    assert sorted(input_states(inputs.pins_for_provenance(None, fixture=False))) == code


def test_score_files_without_an_official_name_are_named_in_a_warning(pinned_fixture, tmp_path: Path) -> None:
    """A misnamed score file (a capital C) or a folder of them is never read: its samples fail as missing, so the
    doctor names it in a WARNING the run prints (it was only a note inside scorecard.json)."""
    data, scores = pinned_fixture
    path = scores / f"classification_scores_{fixture.MODEL_NAME}_Pan_Left.json"
    (scores / "old").mkdir()
    shutil.copy(path, scores / "old" / path.name)
    path.rename(scores / ("C" + path.name[1:]))
    (scores / "notes.txt").write_text("not a score file")   # no .json: not named
    counts, warned = [f.render() for f in _diagnose(tmp_path, "my-method", scores=str(scores), data=str(data))
                      if f.warning]   # the first: how many samples have no row, those of the file not read
    assert counts.startswith(f"WARNING inputs: score files in {scores}: ") and "have no row" in counts
    assert warned == (f"WARNING inputs: score files in {scores}: not read, no official name "
                      "(classification_scores_*.json, vqa_retrieval_scores_*.json, caption_results_*.json, "
                      f"directly in the folder): C{path.name[1:]}, old/")
