"""The test-set loader (ids, labels, malformed files) and the pinned data files (manifest, fetch, verify)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pinbench.core.files import sha256_file
from pinbench.ops.cache import url_path
from pinbench.ops.downloads import NotFetchedError
from pinbench_recipes.camerabench import data_files, dataset, fixture
from pinbench_recipes.camerabench.data_files import DataFilesError, DataManifest, load_manifest, verify_data_dir
from pinbench_recipes.camerabench.dataset import DatasetError, load_dataset, official_count_problems


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return fixture.write_fixture(tmp_path)[0]


def test_loads_every_family_with_stable_ids(data_dir: Path) -> None:
    data = load_dataset(data_dir)
    assert data.splits == ["Move_In", "Pan_Left", "Static"]
    move_in = data.split_samples("Move_In")
    assert [s.sample_id for s in move_in][:2] == ["binary__Move_In__a1.0.0", "binary__Move_In__a2.0.0"]
    assert [s.label for s in move_in] == [1, 1, 0, 0, 0]
    assert data.skills == ["complex_description", "motion_direction"]
    pairs = data.skill_pairs("motion_direction")
    assert [p.sample_id for p in pairs] == ["vqa__motion_direction__pan_left_vs_pan_right__0000",
                                            "vqa__motion_direction__pan_left_vs_pan_right__0001",
                                            "vqa__motion_direction__tilt_up_vs_tilt_down__0000"]
    assert data.captions[1].sample_id == "caption__a2.0.0"
    assert data.video_names() == ["a1.0.0.mp4", "a2.0.0.mp4", "a3.0.0.mp4", "a4.0.0.mp4", "a5.0.0.mp4", "b1.0.0.mp4"]


def test_a_video_named_by_many_samples_is_held_once(data_dir: Path) -> None:
    """A run holds the dataset through its finish: each video name and question is one object, however many rows
    name it (JSON parsing makes one per row)."""
    data = load_dataset(data_dir)
    binary = [s.video for s in data.binary if s.video == "a1.0.0.mp4"]
    vqa = [v for p in data.vqa for v in (p.pos_video, p.neg_video)]
    assert len(binary) > 1 and all(v is binary[0] for v in binary)
    assert len(vqa) > len(set(vqa)) and all(v is binary[0] for v in vqa if v == "a1.0.0.mp4")
    assert len({id(v) for v in vqa}) == len(set(vqa))


def test_families_can_be_loaded_alone(data_dir: Path) -> None:
    data = load_dataset(data_dir, families=["caption"])
    assert (len(data.binary), len(data.vqa), len(data.captions)) == (0, 0, 3)
    with pytest.raises(DatasetError, match="unknown families"):
        load_dataset(data_dir, families=["binary", "retrieval"])


def _rewrite(path: Path, edit) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    edit(rows)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize(("edit", "message"), [
    (lambda rows: rows[0].update(label="yes"), "neither 'Yes' nor 'No'"),
    (lambda rows: rows[1].update(image=rows[0]["image"]), "already at line 1"),
    (lambda rows: rows[0].update(image="../x.mp4"), "not a plain .mp4 file name"),
    (lambda rows: rows[0].update(image="clip.avi"), "not a plain .mp4 file name"),
    (lambda rows: rows[0].update(image="sub/x.mp4"), "not a plain .mp4 file name"),
    (lambda rows: rows[0].update(image="sub\\x.mp4"), "not a plain .mp4 file name"),
    (lambda rows: rows[0].update(image=".x.mp4"), "not a plain .mp4 file name"),
    (lambda rows: rows[0].update(image="a\x01.mp4"), "unsafe sample id"),
    (lambda rows: rows[0].pop("question"), "field 'question' must be a non-empty string"),
])
def test_malformed_binary_rows_name_file_and_line(data_dir: Path, edit, message: str) -> None:
    path = data_dir / "binary_classification" / "Move_In.jsonl"
    _rewrite(path, edit)
    with pytest.raises(DatasetError, match=message) as info:
        load_dataset(data_dir)
    assert str(path) in str(info.value)


def test_jsonl_lines_are_read_as_json_loads_reads_each_alone(data_dir: Path) -> None:
    """Blank lines and spaces around an object change nothing; a line that is not one object alone (two objects,
    ``1,2``, a list) is refused by its line number, whatever a parse of more than that line would make of it."""
    path = data_dir / "binary_classification" / "Move_In.jsonl"
    samples = load_dataset(data_dir).binary
    lines = path.read_text().splitlines()
    path.write_text("\n".join(["", "  " + lines[0], lines[1] + " \t", "   ", *lines[2:]]) + "\n")
    assert load_dataset(data_dir).binary == samples
    for bad, message in [(lines[1] + "," + lines[2], f"invalid JSON: Extra data (column {len(lines[1]) + 1})"),
                         ("1,2", "invalid JSON: Extra data (column 2)"),
                         ("[" + lines[1] + "]", "expected a JSON object, got list"),
                         ("\ufeff" + lines[1],
                          "invalid JSON: Unexpected UTF-8 BOM (decode using utf-8-sig) (column 1)")]:
        path.write_text("\n".join(["", lines[0], bad, *lines[1:]]) + "\n")
        with pytest.raises(DatasetError) as info:
            load_dataset(data_dir)
        assert str(info.value) == f"{path}:3: {message}"


def test_a_raw_line_separator_inside_a_question_stays_in_its_row(data_dir: Path) -> None:
    """``str.splitlines`` split a row at a raw U+2028 (as ``json.dumps(ensure_ascii=False)`` writes it): the load
    refused the file as an unterminated string."""
    path = data_dir / "binary_classification" / "Move_In.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[1]["question"] = "Does the camera\u2028move in?"
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    samples = load_dataset(data_dir).split_samples("Move_In")
    assert len(samples) == len(rows) and samples[1].question == "Does the camera\u2028move in?"


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_non_finite_number_in_a_row_is_refused_naming_file_and_line(data_dir: Path, value: float) -> None:
    """Before: NaN and Infinity were taken as numbers, and a row holding one loaded as if it were sound."""
    path = data_dir / "vqa_and_retrieval" / "complex_description" / "all.jsonl"
    _rewrite(path, lambda rows: rows[1].update(score=value))
    with pytest.raises(DatasetError) as info:
        load_dataset(data_dir)
    literal = json.dumps(value)
    assert str(info.value) == f"{path}:2: holds the non-finite number {literal}; only finite numbers are allowed"


@pytest.mark.parametrize(("edit", "message"), [
    (lambda rows: rows[1].update(neg_video="sub/x.mp4"), "neg_video 'sub/x.mp4' is not a plain .mp4 file name"),
    (lambda rows: rows[1].update(pos_video="sub\\x.mp4"), "pos_video 'sub\\\\x.mp4' is not a plain .mp4 file name"),
    (lambda rows: rows[1].update(pos_video=7), "field 'pos_video' must be a non-empty string, got 7"),
    (lambda rows: rows[1].update(neg_question=""), "field 'neg_question' must be a non-empty string, got ''"),
    (lambda rows: rows[1].pop("pos_question"), "field 'pos_question' must be a non-empty string, got None"),
])
def test_malformed_vqa_rows_name_file_and_line(data_dir: Path, edit, message: str) -> None:
    path = data_dir / "vqa_and_retrieval" / "complex_description" / "all.jsonl"
    _rewrite(path, edit)
    with pytest.raises(DatasetError) as info:
        load_dataset(data_dir)
    assert str(info.value) == f"{path}:2: {message}"


def test_a_bad_row_after_a_blank_line_is_named_by_its_line_in_the_file(data_dir: Path) -> None:
    """Rows were named by their count (index + 1), one line short of the file's line after each blank line."""
    path = data_dir / "binary_classification" / "Move_In.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "", lines[1], lines[1]]) + "\n")
    with pytest.raises(DatasetError) as info:
        load_dataset(data_dir)
    assert str(info.value).startswith(f"{path}:4: video ") and "already at line 3;" in str(info.value)


def test_a_vqa_task_file_name_too_long_for_a_sample_id_is_refused(data_dir: Path) -> None:
    folder = data_dir / "vqa_and_retrieval" / "motion_direction"
    path = (folder / "tilt_up_vs_tilt_down.jsonl").rename(folder / ("t" * 190 + ".jsonl"))
    with pytest.raises(DatasetError) as info:
        load_dataset(data_dir)
    assert str(info.value) == (f"{path}:1: unsafe sample id 'vqa__motion_direction__{'t' * 190}__0000': is longer "
                               "than 200 bytes; ids are used as file names")


@pytest.mark.parametrize(("video", "refused"), [
    ("v" * 183 + ".mp4", False), ("v" * 184 + ".mp4", True),   # ids of 200 and 201 characters
    ("caf\u00e9.0.mp4", False), ("\u00e9" * 92 + ".mp4", True),  # non-ASCII: 109 characters, 201 bytes
    ("a\x7f.mp4", True),
])
def test_a_binary_sample_id_is_taken_up_to_200_bytes_of_safe_text(data_dir: Path, video: str, refused: bool) -> None:
    """The id of a row (``binary__<Split>__`` and the video's stem) is checked as ``check_sample_id`` checks it,
    whether or not the row is read by the one-test path (plain ASCII names only)."""
    path = data_dir / "binary_classification" / "Move_In.jsonl"
    _rewrite(path, lambda rows: rows[0].update(image=video))
    sample_id = "binary__Move_In__" + video[:-4]
    if not refused:
        assert load_dataset(data_dir).split_samples("Move_In")[0].sample_id == sample_id
        return
    with pytest.raises(DatasetError) as info:
        load_dataset(data_dir)
    problem = ("contains a control character (NUL, newline, ...)" if "\x7f" in video else
               "is longer than 200 bytes")
    assert str(info.value) == f"{path}:1: unsafe sample id {sample_id!r}: {problem}; ids are used as file names"


@pytest.mark.parametrize("length", [171, 172])   # ids of 200 and 201 bytes
def test_a_vqa_sample_id_is_taken_up_to_200_bytes(data_dir: Path, length: int) -> None:
    folder = data_dir / "vqa_and_retrieval" / "motion_direction"
    path = (folder / "tilt_up_vs_tilt_down.jsonl").rename(folder / ("t" * length + ".jsonl"))
    sample_id = f"vqa__motion_direction__{'t' * length}__0000"
    if length == 171:
        assert sample_id in {p.sample_id for p in load_dataset(data_dir).vqa}
        return
    with pytest.raises(DatasetError) as info:
        load_dataset(data_dir)
    assert str(info.value) == (f"{path}:1: unsafe sample id {sample_id!r}: is longer than 200 bytes; ids are used "
                               "as file names")


def test_a_frozen_maker_makes_what_the_class_makes() -> None:
    """The load and the score files make their samples and scores without the frozen ``__init__``: the same
    values, as equal, hashable, immutable and copyable as the class's own."""
    import copy
    import dataclasses

    from pinbench_recipes.camerabench.dataset import VqaPair, frozen_maker
    from pinbench_recipes.camerabench.official_json import Combos, VqaScores

    fields = ("vqa__s__t__0000", "s", "t", 0, "a.mp4", "b.mp4", "Up?", "Down?")
    combos = (0.1, 0.2, 0.3, 0.4)
    for cls, values in [(VqaPair, fields), (Combos, combos), (VqaScores, (Combos(*combos), Combos(*combos[::-1])))]:
        made, expected = frozen_maker(cls)(*values), cls(*values)
        assert type(made) is cls and made == expected and hash(made) == hash(expected)
        assert repr(made) == repr(expected) and dataclasses.astuple(made) == dataclasses.astuple(expected)
        assert copy.copy(made) == expected and copy.deepcopy(made) == expected
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.__setattr__(dataclasses.fields(cls)[0].name, None)


def test_broken_json_and_missing_parts(data_dir: Path) -> None:
    (data_dir / "binary_classification" / "Static.jsonl").write_text('{"image": "a.mp4"\n')
    with pytest.raises(DatasetError, match=r"Static.jsonl:1: invalid JSON"):
        load_dataset(data_dir)
    with pytest.raises(DatasetError, match="caption_data.json: file not found"):
        (data_dir / "caption_data.json").unlink()
        load_dataset(data_dir, families=["caption"])
    with pytest.raises(DatasetError, match="data directory not found"):
        load_dataset(data_dir / "nope")


def test_duplicate_vqa_pair_is_refused(data_dir: Path) -> None:
    path = data_dir / "vqa_and_retrieval" / "complex_description" / "all.jsonl"
    _rewrite(path, lambda rows: rows.append(dict(rows[0])))
    with pytest.raises(DatasetError, match="same videos and questions"):
        load_dataset(data_dir)


def test_a_vqa_pair_repeated_in_another_task_file_names_both_lines(data_dir: Path) -> None:
    folder = data_dir / "vqa_and_retrieval" / "motion_direction"
    first, second = folder / "pan_left_vs_pan_right.jsonl", folder / "tilt_up_vs_tilt_down.jsonl"
    _rewrite(second, lambda rows: rows.append(json.loads(first.read_text().splitlines()[1])))
    with pytest.raises(DatasetError) as info:
        load_dataset(data_dir)
    assert str(info.value) == (f"{second}:2: same videos and questions as {first}:2; "
                               "score file rows could not be told apart")


def test_limit_keeps_the_first_samples_of_every_group(data_dir: Path) -> None:
    small = dataset.limit_dataset(load_dataset(data_dir), 2)
    assert [s.sample_id for s in small.split_samples("Static")] == ["binary__Static__a1.0.0", "binary__Static__a5.0.0"]
    assert len(small.binary) == 6 and len(small.skill_pairs("motion_direction")) == 2 and len(small.captions) == 2
    with pytest.raises(DatasetError, match=">= 1"):
        dataset.limit_dataset(small, 0)


def test_official_count_problems_compare_with_the_benchmark(data_dir: Path) -> None:
    problems = official_count_problems(load_dataset(data_dir))
    assert "binary Move_In: 5 samples / 2 positives, official 549 / 161" in problems
    assert any(p.startswith("vqa has_motion: 0 task files / 0 pairs") for p in problems)
    assert "caption: 3 samples, official 1071" in problems


def test_official_counts_add_up() -> None:
    assert sum(n for n, _ in dataset.BINARY_SPLITS.values()) == 7679
    assert sum(n for _, n in dataset.VQA_SKILLS.values()) == 3543
    assert sorted(dataset.LEADERBOARD_SPLITS) == sorted(dataset.BINARY_SPLITS)


# -------------------------------------------------------------------------------------- pinned files


def test_manifest_pins_every_data_file_at_the_commit() -> None:
    manifest = load_manifest()
    assert manifest.commit == "7c062088c08e6fbbb9c2f8095c86d4f9bc8a7fb7"
    files = manifest.data_files
    assert len([f for f in files if f.startswith("binary_classification/")]) == 15
    n_task_files = sum(n for n, _ in dataset.VQA_SKILLS.values())
    assert len([f for f in files if f.startswith("vqa_and_retrieval/")]) == n_task_files
    assert "caption_data.json" in files and "README.md" not in files
    pin = manifest.url_pins()["caption_data.json"]
    assert pin.url == ("https://raw.githubusercontent.com/linzhiqiu/t2v_metrics/"
                       "7c062088c08e6fbbb9c2f8095c86d4f9bc8a7fb7/camerabench/data/caption_data.json")
    assert len(pin.sha256) == 64


def _manifest_for(root: Path) -> DataManifest:
    files = {p.relative_to(root).as_posix(): (sha256_file(p), p.stat().st_size)
             for p in sorted(root.rglob("*")) if p.is_file()}
    return DataManifest(repo="o/r", commit="c" * 40, path="camerabench/data", files=files)


def test_verify_data_dir(data_dir: Path) -> None:
    manifest = _manifest_for(data_dir)
    verify_data_dir(data_dir, manifest)
    extra = data_dir / "binary_classification" / "Zoom_In.jsonl"
    extra.write_text("")
    with pytest.raises(DataFilesError, match="Zoom_In.jsonl: not in the pinned data"):
        verify_data_dir(data_dir, manifest)
    extra.unlink()
    caption = data_dir / "caption_data.json"
    text = caption.read_text()
    caption.write_text(text.replace("pans left", "pans lefT", 1))  # same size, other content
    with pytest.raises(DataFilesError, match="caption_data.json: differs from o/r@c"):
        verify_data_dir(data_dir, manifest)
    (data_dir / "caption_data.json").unlink()
    with pytest.raises(DataFilesError, match="caption_data.json: missing"):
        verify_data_dir(data_dir, manifest)
    os.mkfifo(data_dir / "caption_data.json")   # there, but no file: said as what it is
    with pytest.raises(DataFilesError, match=r"caption_data.json: a FIFO \(named pipe\), not a regular file; "
                                             "expected the file at o/r@c"):
        verify_data_dir(data_dir, manifest)
    (data_dir / "caption_data.json").unlink()
    (data_dir / "caption_data.json").mkdir()
    with pytest.raises(DataFilesError, match="caption_data.json: is a directory, not a regular file"):
        verify_data_dir(data_dir, manifest)


def test_fetch_assembles_a_verified_directory_from_commit_pinned_urls(data_dir: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = _manifest_for(data_dir)
    monkeypatch.setattr(data_files, "_RAW_URL", "file://" + str(data_dir) + "/{rel}")
    cache = tmp_path / "cache"
    with pytest.raises(NotFetchedError):
        data_files.locate_data(manifest, cache)
    assembled = data_files.fetch_data(manifest, cache)
    assert assembled == cache / "camerabench" / f"data-{'c' * 40}"
    verify_data_dir(assembled, manifest)
    assert [s.label for s in load_dataset(assembled).binary] == [s.label for s in load_dataset(data_dir).binary]
    assert data_files.locate_data(manifest, cache) == assembled
    # a tampered cached file is caught when the directory is located again
    (assembled / "caption_data.json").write_text("[]")
    with pytest.raises(DataFilesError, match="differs"):
        data_files.locate_data(manifest, cache)


def test_a_download_with_the_wrong_digest_is_refused(data_dir: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = _manifest_for(data_dir)
    rel = "caption_data.json"
    manifest.files[rel] = ("0" * 64, manifest.files[rel][1])
    monkeypatch.setattr(data_files, "_RAW_URL", "file://" + str(data_dir) + "/{rel}")
    with pytest.raises(Exception, match="sha256 mismatch"):
        data_files.fetch_data(manifest, tmp_path / "cache")
    assert not url_path(manifest.url_pins()[rel], tmp_path / "cache").exists()
