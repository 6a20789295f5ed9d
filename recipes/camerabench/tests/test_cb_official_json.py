"""Reading the official Script 1 files (any method) and writing them (this recipe's own run)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from pinbench.core.files import sha256_file
from pinbench_recipes.camerabench import fixture
from pinbench_recipes.camerabench.dataset import CameraBenchData, load_dataset
from pinbench_recipes.camerabench.official_json import (
    BinaryScore,
    Caption,
    Failure,
    ScoreFileError,
    Script1Outputs,
    read_score_dir,
    write_score_dir,
)


@pytest.fixture
def fx(tmp_path: Path) -> tuple[CameraBenchData, Path]:
    data_dir, scores = fixture.write_fixture(tmp_path)
    return load_dataset(data_dir), scores


def _edit(path: Path, edit) -> None:
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


def _binary_file(scores: Path, split: str) -> Path:
    return scores / f"classification_scores_{fixture.MODEL_NAME}_{split}.json"


def test_reads_every_sample_of_the_fixture(fx) -> None:
    data, scores = fx
    out = read_score_dir(scores, data)
    assert out.binary["binary__Move_In__a5.0.0"] == BinaryScore(0.1)
    assert len(out.binary) == len(data.binary) and len(out.vqa) == len(data.vqa)
    assert out.vqa["vqa__motion_direction__tilt_up_vs_tilt_down__0000"].no_scores.neg_text_neg_image == 0.9
    assert out.caption["caption__a3.0.0"] == Caption("A static shot of a city street.")
    assert {s["family"] for s in out.sources} == {"binary", "vqa", "caption"}
    assert all(s["sha256"] == sha256_file(scores / s["file"]) for s in out.sources)


def test_per_task_files_are_pooled_and_the_upstream_loss_is_reported(fx) -> None:
    data, scores = fx
    out = read_score_dir(scores, data)
    assert len([p for p in data.vqa if p.skill == "motion_direction"]) == 3
    assert all(p.sample_id in out.vqa for p in data.vqa)
    assert any("would keep just the last task file of each skill" in note for note in out.notes)


def test_rows_match_by_content_not_position(fx) -> None:
    data, scores = fx
    _edit(_binary_file(scores, "Move_In"), lambda d: d["scores"].reverse())
    assert read_score_dir(scores, data).binary["binary__Move_In__a5.0.0"] == BinaryScore(0.1)


def test_full_paths_in_rows_are_reduced_to_names(fx) -> None:
    data, scores = fx
    _edit(_binary_file(scores, "Move_In"),
          lambda d: d["scores"][0].update(video_path="/data/videos/a1.0.0.mp4"))
    _edit(_binary_file(scores, "Pan_Left"),
          lambda d: d["scores"][0].update(video_path="C:\\videos\\a1.0.0.mp4"))
    _edit(_binary_file(scores, "Static"),   # a relative Windows path: a backslash, no drive
          lambda d: d["scores"][0].update(video_path="videos\\a1.0.0.mp4"))
    out = read_score_dir(scores, data)
    assert out.binary["binary__Move_In__a1.0.0"] == BinaryScore(0.5)
    assert out.binary["binary__Pan_Left__a1.0.0"] == BinaryScore(1.0)
    assert out.binary["binary__Static__a1.0.0"] == BinaryScore(0.7)


def test_error_rows_and_nonfinite_scores_become_failed_samples(fx) -> None:
    data, scores = fx
    def edit(doc):
        doc["scores"][0].update(score=0.0, error="Video file not found: x")
        doc["scores"][1]["score"] = float("nan")
    _edit(_binary_file(scores, "Move_In"), edit)
    out = read_score_dir(scores, data)
    assert out.binary["binary__Move_In__a1.0.0"].error.endswith("Video file not found: x")
    assert "non-finite score nan" in out.binary["binary__Move_In__a2.0.0"].error


def test_missing_rows_stay_missing(fx) -> None:
    data, scores = fx
    _edit(_binary_file(scores, "Move_In"), lambda d: d["scores"].pop())
    out = read_score_dir(scores, data)
    assert "binary__Move_In__a5.0.0" not in out.binary


def test_split_from_the_file_name_when_metadata_lacks_it(fx) -> None:
    data, scores = fx
    _edit(_binary_file(scores, "Pan_Left"), lambda d: d["metadata"].pop("split_name"))
    assert read_score_dir(scores, data).binary["binary__Pan_Left__a3.0.0"] == BinaryScore(0.9)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d["scores"][0].update(ground_truth_label="No"), "contradicts the pinned data"),
    (lambda d: d["scores"][0].update(ground_truth_label=1), r"scores\[0\]: ground_truth_label 1 is not a string"),
    (lambda d: d["scores"][0].update(ground_truth_label=None), "ground_truth_label None is not a string"),
    (lambda d: d["scores"][0].update(video_path="zz.0.0.mp4"), "video zz.0.0.mp4 is not in split Move_In"),
    (lambda d: d["scores"].append(dict(d["scores"][0])), "already scored at"),
    (lambda d: d["scores"][0].update(score="0.5"), "score must be a number"),
    # Script 1's score is P("Yes") (spec 1.2): a value outside [0, 1] is not its output
    (lambda d: d["scores"][0].update(score=1.5), r"scores\[0\]: score 1.5 is outside \[0, 1\]"),
    (lambda d: d["scores"][4].update(score=-0.2), r"scores\[4\]: score -0.2 is outside \[0, 1\]"),
    (lambda d: d["metadata"].update(split_name="Move_Sideways"), "not one of the benchmark's splits"),
    (lambda d: d["metadata"].update(model_name="another-model"), "keep one model per score directory"),
    (lambda d: d.pop("scores"), "missing list 'scores'"),
])
def test_malformed_binary_files_are_one_line_errors(fx, edit, message: str) -> None:
    data, scores = fx
    path = _binary_file(scores, "Move_In")
    _edit(path, edit)
    with pytest.raises(ScoreFileError, match=message) as info:
        read_score_dir(scores, data)
    assert "\n" not in str(info.value)


def test_two_files_for_one_split_are_refused(fx) -> None:
    data, scores = fx
    src = _binary_file(scores, "Move_In")
    (scores / "classification_scores_rerun_Move_In.json").write_text(src.read_text())
    with pytest.raises(ScoreFileError, match="second file for split Move_In"):
        read_score_dir(scores, data)


def test_invalid_json_and_directories(fx, tmp_path: Path) -> None:
    data, scores = fx
    _binary_file(scores, "Static").write_text("{")
    with pytest.raises(ScoreFileError, match="invalid JSON at line 1"):
        read_score_dir(scores, data)
    _binary_file(scores, "Static").unlink()
    (scores / "classification_scores_dir_Static.json").mkdir()
    with pytest.raises(ScoreFileError, match="not a regular file"):
        read_score_dir(scores, data)
    with pytest.raises(ScoreFileError, match="score directory not found"):
        read_score_dir(tmp_path / "none", data)


def test_a_json_error_names_the_line_as_universal_newlines_count_it(fx) -> None:
    data, scores = fx
    path = _binary_file(scores, "Static")
    for text in ('{"metadata": {},\r  x}', '{"metadata": {},\r\n  x}'):
        path.write_bytes(text.encode())
        with pytest.raises(ScoreFileError) as info:
            read_score_dir(scores, data)
        assert str(info.value) == f"{path}: invalid JSON at line 2, column 3: Expecting property name enclosed in " \
                                  "double quotes"


def test_a_file_nested_too_deeply_empty_or_not_utf8_is_named(fx) -> None:
    """A score file of ``[[[...]]]`` 100,000 deep ended the run with the parser's RecursionError, naming no file; a
    byte that is no UTF-8 was named by the codec's own words; an empty file read "invalid JSON at line 1, column 1:
    Expecting value"."""
    data, scores = fx
    path = _binary_file(scores, "Static")
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ScoreFileError) as info:
        read_score_dir(scores, data)
    assert str(info.value) == f"{path}: invalid JSON: nested too deeply to parse"
    path.write_bytes(b"")
    with pytest.raises(ScoreFileError) as info:
        read_score_dir(scores, data)
    assert str(info.value) == f"{path}: no JSON value: the file is empty"
    path.write_bytes(b'{"metadata": {"model_name": "m\xff"}}')
    with pytest.raises(ScoreFileError) as info:
        read_score_dir(scores, data)
    assert str(info.value) == f"{path}: not UTF-8 text (byte 30)"


def test_a_row_that_is_no_object_is_named_before_any_row_is_checked(fx) -> None:
    data, scores = fx
    path = _binary_file(scores, "Move_In")
    _edit(path, lambda d: (d["scores"][0].update(score="x"), d["scores"].append([1])))
    with pytest.raises(ScoreFileError) as info:
        read_score_dir(scores, data)
    assert str(info.value) == f"{path}: scores[5] is a list, expected an object"


def test_a_second_row_for_a_sample_names_the_first(fx) -> None:
    data, scores = fx
    binary, caption = _binary_file(scores, "Move_In"), next(scores.glob("caption_results_*.json"))
    per_task = scores / f"vqa_retrieval_scores_{fixture.MODEL_NAME}_motion_direction_pan_left_vs_pan_right.json"
    combined = scores / f"vqa_retrieval_scores_{fixture.MODEL_NAME}_motion_direction.json"
    doc = json.loads(per_task.read_text())
    doc["metadata"].pop("task_name")
    doc["scores"].reverse()
    combined.write_text(json.dumps(doc))
    with pytest.raises(ScoreFileError) as info:
        read_score_dir(scores, data, families=["vqa"])
    assert str(info.value) == (f"{per_task}: 2 bad rows: scores[0], scores[1] (first: scores[0]: sample "
                               f"vqa__motion_direction__pan_left_vs_pan_right__0000 already scored at {combined}: "
                               "scores[1])")   # the other row of the file too
    _edit(binary, lambda d: d["scores"].append(dict(d["scores"][2])))
    with pytest.raises(ScoreFileError) as info:
        read_score_dir(scores, data, families=["binary"])
    assert str(info.value) == (f"{binary}: scores[5]: sample binary__Move_In__a3.0.0 already scored at "
                               f"{binary}: scores[2]")
    _edit(caption, lambda d: d["captions"].append(dict(d["captions"][1])))
    with pytest.raises(ScoreFileError) as info:
        read_score_dir(scores, data, families=["caption"])
    assert str(info.value) == (f"{caption}: captions[3]: sample caption__a2.0.0 already scored at "
                               f"{caption}: captions[1]")


def test_every_bad_row_of_a_vqa_or_caption_file_is_counted_in_one_line(fx) -> None:
    """Every bad row of a file is named in the one line refusing it (it named the first alone), the first's fault
    said; a file with one bad row is refused as before."""
    data, scores = fx
    vqa = scores / f"vqa_retrieval_scores_{fixture.MODEL_NAME}_motion_direction_pan_left_vs_pan_right.json"
    _edit(vqa, lambda d: [d["scores"][i].update(pos_question=5) for i in (0, 1)])
    with pytest.raises(ScoreFileError) as info:
        read_score_dir(scores, data, families=["vqa"])
    assert str(info.value) == (f"{vqa}: 2 bad rows: scores[0], scores[1] (first: scores[0]: pos_question must be a "
                               "string, got 5)")
    caption = next(scores.glob("caption_results_*.json"))
    _edit(caption, lambda d: [d["captions"][i].update(reference_answer="other") for i in (0, 2)])
    with pytest.raises(ScoreFileError) as info:
        read_score_dir(scores, data, families=["caption"])
    video = json.loads(caption.read_text())["captions"][0]["video_path"]
    assert str(info.value) == (f"{caption}: 2 bad rows: captions[0], captions[2] (first: captions[0]: "
                               f"reference_answer differs from the pinned caption of {video})")


def test_a_second_binary_row_names_the_first_however_it_wrote_the_video(fx) -> None:
    """The first row of a sample is found again by the name it resolves to (a path, here, and a failed row)."""
    data, scores = fx
    binary = _binary_file(scores, "Move_In")

    def edit(doc: dict) -> None:
        doc["scores"].append(dict(doc["scores"][2]))
        doc["scores"][2].update(video_path="C:\\videos\\" + doc["scores"][2]["video_path"], error="boom")
    _edit(binary, edit)
    with pytest.raises(ScoreFileError) as info:
        read_score_dir(scores, data, families=["binary"])
    assert str(info.value) == (f"{binary}: scores[5]: sample binary__Move_In__a3.0.0 already scored at "
                               f"{binary}: scores[2]")


@pytest.mark.parametrize(("data_file", "field", "score_file", "message"), [
    ("binary_classification/Move_In.jsonl", "image", "classification_scores_{}_Move_In.json",
     "video a1.0.0.mp4 is not in split Move_In"),
    ("vqa_and_retrieval/complex_description/all.jsonl", "pos_video",
     "vqa_retrieval_scores_{}_complex_description_all.json", "no pair of task all has these videos and questions"),
    ("vqa_and_retrieval/complex_description/all.jsonl", "neg_video",
     "vqa_retrieval_scores_{}_complex_description_all.json", "no pair of task all has these videos and questions"),
])
def test_a_video_name_with_a_colon_is_read_as_a_windows_path(tmp_path: Path, data_file: str, field: str,
                                                               score_file: str, message: str) -> None:
    """Even where the data has that very name: the row's name is reduced to what follows the drive."""
    data_dir, scores = fixture.write_fixture(tmp_path)
    path = data_dir / data_file
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    name = rows[0][field] = "c:" + rows[0][field]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    score_path = scores / score_file.format(fixture.MODEL_NAME)
    _edit(score_path, lambda d: d["scores"][0].update({"video_path" if field == "image" else field: name}))
    with pytest.raises(ScoreFileError) as info:
        read_score_dir(scores, load_dataset(data_dir))
    assert str(info.value) == f"{score_path}: scores[0]: {message}"


def test_every_vqa_probability_is_checked_and_read_as_a_float(fx) -> None:
    data, scores = fx
    path = scores / f"vqa_retrieval_scores_{fixture.MODEL_NAME}_motion_direction_tilt_up_vs_tilt_down.json"
    pair = "vqa__motion_direction__tilt_up_vs_tilt_down__0000"
    original = path.read_text()
    for what in ("yes_scores", "no_scores"):
        for combo in ("pos_text_pos_image", "pos_text_neg_image", "neg_text_pos_image", "neg_text_neg_image"):
            for value in (1, -0.5, 1.5):
                path.write_text(original)
                _edit(path, lambda d, what=what, combo=combo, value=value: d["scores"][0][what].update({combo: value}))
                if value == 1:
                    got = getattr(getattr(read_score_dir(scores, data).vqa[pair], what), combo)
                    assert (got, type(got)) == (1.0, float), (what, combo)
                    continue
                with pytest.raises(ScoreFileError) as info:
                    read_score_dir(scores, data)
                assert str(info.value) == (f"{path}: scores[0]: {what}.{combo} is {value}, outside [0, 1]: Script 1 "
                                           "writes the probability of the answer's first token")


@pytest.mark.parametrize(("edit", "message"), [
    (lambda row: row.update(pos_video=None), "expected a video path, got None"),
    (lambda row: row.update(neg_video=5), "expected a video path, got 5"),
    (lambda row: row.update(pos_video="", neg_question=["a list"]), "expected a video path, got ''"),
    (lambda row: row.update(neg_video="", pos_question={}), "expected a video path, got ''"),
    (lambda row: row.update(neg_question=5), "neg_question must be a string, got 5"),
    (lambda row: row.update(pos_question=["a list"]), "pos_question must be a string, got ['a list']"),
    (lambda row: row.update(neg_question={"an": "object"}), "neg_question must be a string, got {'an': 'object'}"),
    (lambda row: row.update(neg_question="Is it another question?"),
     "no pair of task tilt_up_vs_tilt_down has these videos and questions"),
    (lambda row: row.update(yes_scores=[0.5] * 4), "yes_scores must be an object with pos_text_pos_image, pos_text_"
                                                   "neg_image, neg_text_pos_image, neg_text_neg_image, got list"),
    (lambda row: row.pop("no_scores"), "no_scores must be an object with pos_text_pos_image, pos_text_neg_image, "
                                       "neg_text_pos_image, neg_text_neg_image, got NoneType"),
])
def test_malformed_vqa_rows_are_one_line_errors(fx, edit, message: str) -> None:
    data, scores = fx
    path = scores / f"vqa_retrieval_scores_{fixture.MODEL_NAME}_motion_direction_tilt_up_vs_tilt_down.json"
    _edit(path, lambda d: edit(d["scores"][0]))
    with pytest.raises(ScoreFileError) as info:
        read_score_dir(scores, data)
    assert str(info.value) == f"{path}: scores[0]: {message}"


def test_vqa_rows_are_checked(fx) -> None:
    data, scores = fx
    path = scores / f"vqa_retrieval_scores_{fixture.MODEL_NAME}_motion_direction_tilt_up_vs_tilt_down.json"
    _edit(path, lambda d: d["scores"][0]["yes_scores"].update(pos_text_pos_image=float("inf")))
    pair = "vqa__motion_direction__tilt_up_vs_tilt_down__0000"
    assert "not finite" in read_score_dir(scores, data).vqa[pair].error
    _edit(path, lambda d: (d["scores"][0]["yes_scores"].update(pos_text_pos_image=0.6),
                           d["scores"][0]["no_scores"].pop("pos_text_neg_image")))
    with pytest.raises(ScoreFileError, match="no_scores.pos_text_neg_image must be a number"):
        read_score_dir(scores, data)
    # probabilities (spec 1.3): outside [0, 1] is refused, even beside a non-finite value in the same row
    _edit(path, lambda d: (d["scores"][0]["no_scores"].update(pos_text_neg_image=1.25),
                           d["scores"][0]["yes_scores"].update(neg_text_pos_image=float("nan"))))
    with pytest.raises(ScoreFileError, match=r"scores\[0\]: no_scores.pos_text_neg_image is 1.25, outside \[0, 1\]"):
        read_score_dir(scores, data)
    _edit(path, lambda d: (d["scores"][0]["no_scores"].update(pos_text_neg_image=0.5),
                           d["scores"][0]["yes_scores"].update(neg_text_pos_image=0.5)))
    _edit(path, lambda d: d["metadata"].update(task_name="pan left vs pan right"))
    with pytest.raises(ScoreFileError, match="no pair of task pan_left_vs_pan_right has these"):
        read_score_dir(scores, data)
    _edit(path, lambda d: d["metadata"].update(skill_name="camera_speed"))
    with pytest.raises(ScoreFileError, match="not one of the benchmark's skills"):
        read_score_dir(scores, data)


def test_a_combined_and_a_per_task_file_for_the_same_pairs_collide(fx) -> None:
    data, scores = fx
    src = scores / f"vqa_retrieval_scores_{fixture.MODEL_NAME}_motion_direction_tilt_up_vs_tilt_down.json"
    doc = json.loads(src.read_text())
    doc["metadata"].pop("task_name")
    (scores / f"vqa_retrieval_scores_{fixture.MODEL_NAME}_motion_direction.json").write_text(json.dumps(doc))
    with pytest.raises(ScoreFileError, match="already scored at"):
        read_score_dir(scores, data)


def test_caption_rows(fx) -> None:
    data, scores = fx
    path = next(scores.glob("caption_results_*.json"))
    _edit(path, lambda d: d["captions"][0].update(generated_caption=""))
    _edit(path, lambda d: d["captions"][1].update(error="CUDA out of memory"))
    out = read_score_dir(scores, data)
    assert "empty generated_caption" in out.caption["caption__a1.0.0"].error
    assert out.caption["caption__a2.0.0"].error.endswith("CUDA out of memory")
    _edit(path, lambda d: d["captions"][2].update(reference_answer="The camera is still."))
    with pytest.raises(ScoreFileError, match="reference_answer differs"):
        read_score_dir(scores, data)
    (scores / "caption_results_other_20260101_000000.json").write_text(path.read_text())
    with pytest.raises(ScoreFileError, match="keep exactly one"):
        read_score_dir(scores, data)


def test_unselected_families_and_stray_files_are_noted(fx) -> None:
    data, scores = fx
    (scores / "vqa_scores_old_Move_In.json").write_text("{}")
    out = read_score_dir(scores, data, families=["binary"])
    assert not out.vqa and not out.caption
    assert any("vqa_scores_old_Move_In.json" in n for n in out.notes)
    assert any("vqa files not read" in n for n in out.notes)


def test_written_files_read_back_identically_and_keep_upstream_names(fx, tmp_path: Path) -> None:
    data, scores = fx
    original = read_score_dir(scores, data)
    original.binary["binary__Static__b1.0.0"] = Failure("RuntimeError: decode failed")
    original.vqa.pop("vqa__complex_description__all__0001")
    written = write_score_dir(tmp_path / "out", data, original, model_name="qwen2.5-vl-7b",
                              checkpoint="chancharikm/qwen2.5-vl-7b-cam-motion",
                              timestamp=datetime(2026, 11, 30, 12, 0, 0), video_dir="/videos",
                              extra_metadata={"recipe": "camerabench"})
    names = sorted(p.name for p in written)
    assert "classification_scores_qwen2.5-vl-7b_chancharikm_qwen2.5-vl-7b-cam-motion_Move_In.json" in names
    assert "vqa_retrieval_scores_qwen2.5-vl-7b_chancharikm_qwen2.5-vl-7b-cam-motion_motion_direction.json" in names
    assert "caption_results_qwen2.5-vl-7b_qwen2.5-vl-7b-cam-motion_20261130_120000.json" in names
    static = json.loads((tmp_path / "out" / names[names.index(
        "classification_scores_qwen2.5-vl-7b_chancharikm_qwen2.5-vl-7b-cam-motion_Static.json")]).read_text())
    assert static["scores"][2] | {} == {"video_path": "b1.0.0.mp4", "question": data.binary[-1].question,
                                        "ground_truth_label": "No", "method":
                                        "qwen2.5-vl-7b_chancharikm/qwen2.5-vl-7b-cam-motion", "score": 0.0,
                                        "error": "RuntimeError: decode failed"}
    back = read_score_dir(tmp_path / "out", data)
    assert back.binary["binary__Static__b1.0.0"].error.endswith("RuntimeError: decode failed")
    assert {k: v for k, v in back.binary.items() if not isinstance(v, Failure)} == \
        {k: v for k, v in original.binary.items() if not isinstance(v, Failure)}
    assert back.vqa["vqa__complex_description__all__0001"].error.endswith("missing: not scored in this run")
    assert back.vqa["vqa__complex_description__all__0000"] == original.vqa["vqa__complex_description__all__0000"]
    assert back.caption == original.caption
    assert not any("per-task" in n for n in back.notes)  # written combined, as --combine_tasks


def test_rewriting_keeps_one_caption_file(fx, tmp_path: Path) -> None:
    data, scores = fx
    outputs = read_score_dir(scores, data)
    for hour in (1, 2):
        write_score_dir(tmp_path / "out", data, outputs, model_name="m", checkpoint=None,
                        timestamp=datetime(2026, 1, 1, hour), video_dir="v")
    names = [p.name for p in (tmp_path / "out").glob("caption_results_*.json")]
    assert names == ["caption_results_m_20260101_020000.json"]
    assert read_score_dir(tmp_path / "out", data).caption == outputs.caption


def test_files_are_written_through_unique_temporary_names(fx, tmp_path: Path) -> None:
    """A leftover (or a folder) at the old fixed temporary name '.<name>.tmp' no longer blocks the write."""
    data, scores = fx
    name = "caption_results_m_20260101_000000.json"
    (tmp_path / "out" / f".{name}.tmp").mkdir(parents=True)
    write_score_dir(tmp_path / "out", data, read_score_dir(scores, data), model_name="m", checkpoint=None,
                    timestamp=datetime(2026, 1, 1), video_dir="v")
    assert (tmp_path / "out" / name).is_file()
    assert [p.name for p in (tmp_path / "out").glob(".*")] == [f".{name}.tmp"]  # untouched, nothing else left


def test_an_empty_outputs_object_writes_error_rows_for_everything(fx, tmp_path: Path) -> None:
    data, _ = fx
    write_score_dir(tmp_path / "out", data, Script1Outputs(), model_name="m", checkpoint=None,
                    timestamp=datetime(2026, 1, 1), video_dir="v")
    back = read_score_dir(tmp_path / "out", data)
    assert len(back.binary) == len(data.binary) and all(isinstance(v, Failure) for v in back.binary.values())


def test_a_typed_output_is_hashed_as_the_json_its_dict_form_had() -> None:
    """The Script 2 tasks hold typed outputs; a task's input hash must stay that of the dicts earlier versions held
    (``{"score": ...}``, ``{"yes_scores": {...}, "no_scores": {...}}``, ``{"caption": ...}``, ``{"error": ...}``),
    or every stored record would be recomputed. Each kind hashed twice (the second through the cached field names)."""
    from pinbench.core.runner import input_hash
    from pinbench_recipes.camerabench.official_json import Combos, VqaScores
    from pinbench_recipes.camerabench.script2 import BinaryTask, CaptionTask, VqaTask

    yes = {"pos_text_pos_image": 0.9, "pos_text_neg_image": 0.1, "neg_text_pos_image": 0.25, "neg_text_neg_image": 0.5}
    no = {key: 1.0 - value for key, value in yes.items()}
    cases = [
        (BinaryTask(sample_id="b", label=1, output=BinaryScore(0.25)),
         {"family": "binary", "label": 1, "output": {"score": 0.25}, "sample_id": "b"}),
        (BinaryTask(sample_id="b", label=0, output=Failure("Script 1 error in x.json: OOM")),
         {"family": "binary", "label": 0, "output": {"error": "Script 1 error in x.json: OOM"}, "sample_id": "b"}),
        (VqaTask(sample_id="v", output=VqaScores(Combos.of(yes), Combos.of(no))),
         {"family": "vqa", "output": {"yes_scores": yes, "no_scores": no}, "sample_id": "v"}),
        (CaptionTask(sample_id="c", reference="A pan.", output=Caption("A pan left.")),
         {"family": "caption", "output": {"caption": "A pan left."}, "reference": "A pan.", "sample_id": "c"}),
    ]
    for task, as_dicts in cases * 2:
        assert input_hash(task) == input_hash(as_dicts), task


def test_script1_records_with_a_value_that_is_no_probability_fail_and_are_written_as_errors(tmp_path: Path) -> None:
    """A Script 1 record whose probability was not finite holds null (the store keeps JSON); it becomes a Failure
    that names it, and the official file written from the outputs says so in ``error``, with zeros where the
    numbers go (a null there would make the file unreadable by Script 2: ours and upstream's)."""
    from pinbench.core.runner import SampleRecord
    from pinbench_recipes.camerabench.script1 import outputs_from_records

    data = load_dataset(fixture.write_fixture(tmp_path)[0])
    binary, pair = data.binary[0], data.vqa[0]
    scores = dict.fromkeys(("pos_text_pos_image", "pos_text_neg_image", "neg_text_pos_image", "neg_text_neg_image"),
                           0.5)
    whole, boolean = data.binary[1], data.binary[2]
    records = [SampleRecord(binary.sample_id, "ok", {"score": None}, None, "0" * 64, 0.0),
               SampleRecord(whole.sample_id, "ok", {"score": 1}, None, "0" * 64, 0.0),
               SampleRecord(boolean.sample_id, "ok", {"score": True}, None, "0" * 64, 0.0),
               SampleRecord(pair.sample_id, "ok", {"yes_scores": {**scores, "pos_text_neg_image": None},
                                                   "no_scores": scores}, None, "0" * 64, 0.0)]
    outputs = outputs_from_records(records, data)
    assert outputs.binary[binary.sample_id] == Failure("P(Yes) is None, not a probability")
    assert outputs.binary[whole.sample_id] == BinaryScore(1.0)   # a number, as Script 2 reads it
    assert outputs.binary[boolean.sample_id] == Failure("P(Yes) is True, not a probability")
    assert outputs.vqa[pair.sample_id] == Failure("ValueError: yes_scores.pos_text_neg_image must be a number, "
                                                  "got None")
    write_score_dir(tmp_path / "out", data, outputs, model_name="m", checkpoint=None,
                    timestamp=datetime(2026, 1, 1), video_dir="videos")
    back = read_score_dir(tmp_path / "out", data)
    assert back.binary[binary.sample_id].error.endswith("P(Yes) is None, not a probability")
    assert back.vqa[pair.sample_id].error.endswith("yes_scores.pos_text_neg_image must be a number, got None")


@pytest.mark.parametrize(("key", "value"), [("model_name", ["a", "list"]), ("checkpoint", {"an": "object"}),
                                            ("model_name", 7)])
def test_a_model_name_or_checkpoint_that_is_no_string_is_a_one_line_error(fx, key: str, value: object) -> None:
    data, scores = fx
    path = _binary_file(scores, "Move_In")
    _edit(path, lambda d: d["metadata"].update({key: value}))
    with pytest.raises(ScoreFileError) as info:
        read_score_dir(scores, data)
    assert str(info.value) == f"{path}: metadata.{key} must be a string, got {value!r}"


@pytest.mark.parametrize(("value", "message"), [(None, "metadata.skill_name is missing"),
                                                (["has_motion"], "metadata.skill_name must be a string, got "
                                                                 "['has_motion']")])
def test_a_vqa_file_without_a_skill_name_string_is_named(fx, value: object, message: str) -> None:
    data, scores = fx
    path = scores / f"vqa_retrieval_scores_{fixture.MODEL_NAME}_motion_direction_tilt_up_vs_tilt_down.json"
    _edit(path, lambda d: d["metadata"].update(skill_name=value))
    with pytest.raises(ScoreFileError) as info:
        read_score_dir(scores, data)
    assert str(info.value) == f"{path}: {message}"
