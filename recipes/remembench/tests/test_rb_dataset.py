"""Rows, seeds, paper settings, chunk layouts, cohort report and release checksums."""

from __future__ import annotations

import json
import os
import threading

import pytest

from pinbench_recipes.remembench.dataset import (
    I2V_PAPER,
    PAPER,
    T2V_PAPER,
    DatasetError,
    cohort_report,
    parse_seed,
    read_rows,
    select_settings,
)
from pinbench_recipes.remembench.release import open_release, parse_dataset_spec, read_checksums
from pinbench_recipes.remembench.tests.conftest import i2v_row, t2v_row, write_jsonl

BIG_SEEDS = ["9007199254740993", "18446744073709551615", "340282366920938463463374607431768211457"]


@pytest.mark.parametrize("text", BIG_SEEDS)
def test_seeds_above_2_53_round_trip_exactly(text, tmp_path):
    assert str(parse_seed(text, "x")) == text
    assert int(float(text)) != int(text)  # the float route would have lost these digits
    rows = read_rows(write_jsonl(tmp_path / "t.jsonl", [t2v_row(seed=text)]), "t2v")
    assert rows[0].seed == int(text) and rows[0].seed_text == text


@pytest.mark.parametrize(
    ("seed", "message"),
    [(9007199254740993, "must be a decimal string"), ("1e5", "not all ASCII digits"), ("-3", "not all"),
     (" 12", "not all"), ("\u0661\u0662", "not all"), ("", "not all"), (1.5, "decimal string")],
)
def test_bad_seeds_are_rejected_naming_file_and_line(seed, message, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [t2v_row(scene_id="ok"), t2v_row(scene_id="bad", seed=seed)])
    with pytest.raises(DatasetError, match=message) as err:
        read_rows(path, "t2v")
    assert str(err.value).startswith(f"{path}:2: ")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"num_frames": 380}, "num_frames is 380, the t2v paper setting is 379"),
        ({"fps": 30}, "fps is 30.0"),
        ({"width": 1280}, "width is 1280"),
        ({"num_chunks": 22}, "num_chunks is 22"),
        ({"prompts": ["only", "three", "prompts"]}, "'prompts' must be a list of 4"),
        ({"prompt_start_seconds": [0.0, 3.0, 6.2, 11.2]}, "paper schedule"),
        ({"source_index": "7"}, "'source_index' must be an integer"),
        ({"num_frames": True}, "'num_frames' must be an integer"),
        ({"target_description": ""}, "non-empty string"),
    ],
)
def test_bad_t2v_rows(change, message, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [t2v_row(**change)])
    with pytest.raises(DatasetError, match=message) as err:
        read_rows(path, "t2v")
    assert str(err.value).startswith(f"{path}:1: ") and "\n" not in str(err.value)


def test_missing_field_invalid_json_duplicates_and_empty(tmp_path):
    row = t2v_row()
    del row["seed"]
    with pytest.raises(DatasetError, match=r"t.jsonl:1: missing field 'seed'"):
        read_rows(write_jsonl(tmp_path / "t.jsonl", [row]), "t2v")
    with pytest.raises(DatasetError, match=r"t2.jsonl:2: invalid JSON"):
        read_rows(write_jsonl(tmp_path / "t2.jsonl", [t2v_row(), "{not json"]), "t2v")
    with pytest.raises(DatasetError, match=r"t3.jsonl:2: duplicate id 'scene-a' \(first on line 1\)"):
        read_rows(write_jsonl(tmp_path / "t3.jsonl", [t2v_row(), t2v_row()]), "t2v")
    with pytest.raises(DatasetError, match="no rows"):
        read_rows(write_jsonl(tmp_path / "t4.jsonl", []), "t2v")
    with pytest.raises(DatasetError, match="file not found"):
        read_rows(tmp_path / "absent.jsonl", "t2v")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"setting": "rotation_45"}, "'setting' must be one of"),
        ({"translation": True}, "translation is True but setting is 'rotation_180'"),
        ({"rotation_degrees": 90}, "rotation_degrees is 90 but setting"),
        ({"direction": "up"}, "'direction' must be one of left, right"),
        ({"scene_type": "space"}, "'scene_type'"),
        ({"latent_frames": 63}, "latent_frames is 63"),
        ({"translation": "no"}, "true or false"),
        ({"pose_samples": 1}, "at least 2"),
    ],
)
def test_bad_i2v_rows(change, message, tmp_path):
    path = write_jsonl(tmp_path / "i.jsonl", [i2v_row(**change)])
    with pytest.raises(DatasetError, match=message):
        read_rows(path, "i2v")


def test_valid_i2v_row_and_setting_selection(tmp_path):
    rows = [i2v_row(), i2v_row(sample_id="abc-translation_90", setting="translation_90", translation=True,
                               rotation_degrees=90)]
    parsed = read_rows(write_jsonl(tmp_path / "i.jsonl", rows), "i2v")
    assert [r.sample_id for r in select_settings(parsed, ["translation_90"])] == ["abc-translation_90"]
    with pytest.raises(DatasetError, match="unknown I2V setting"):
        select_settings(parsed, ["rotation_45"])
    report = cohort_report(parsed, parsed[:1], I2V_PAPER)
    assert report["n_rows"] == 2 and report["paper_n_rows"] == 750 and not report["matches_paper_cohort"]
    assert report["by_setting"] == {"rotation_180": 1, "translation_90": 1}
    assert report["selected_by_setting"] == {"rotation_180": 1}
    assert report["scenes_by_type"] == {"outdoor": 1}


def test_chunk_layouts_tile_the_paper_clips():
    t2v, i2v = T2V_PAPER.chunk_layout(), I2V_PAPER.chunk_layout()
    assert len(t2v) == 23 and t2v[0] == (0, 4) and t2v[1] == (5, 21) and t2v[-1] == (362, 378)
    assert len(i2v) == 16 and i2v[0] == (0, 12) and i2v[1] == (13, 28) and i2v[-1] == (237, 252)
    for layout, n in ((t2v, 379), (i2v, 253)):
        assert [f for lo, hi in layout for f in range(lo, hi + 1)] == list(range(n))
    assert set(PAPER) == {"t2v", "i2v"}


def test_dataset_spec_requires_a_commit():
    assert parse_dataset_spec("evanbuzzZ/RememBench@" + "a" * 40) == ("evanbuzzZ/RememBench", "a" * 40)
    for bad in ("mosaichunk/RememBench", "mosaichunk/RememBench@main", "RememBench@" + "a" * 40):
        with pytest.raises(DatasetError, match="40-hex commit"):
            parse_dataset_spec(bad)


def test_release_checksums_verify_and_refuse_modified_files(release_dir):
    release = open_release("mosaichunk/RememBench", "b" * 40, local_dir=release_dir, download=False)
    assert release.path("data/t2v/test.jsonl").is_file()
    assert release.verified == {"data/t2v/test.jsonl": "verified"}
    (release_dir / "extra.txt").write_text("not in the checksums file\n")
    release.verify(["extra.txt"])
    assert release.verified["extra.txt"] == "unlisted"
    assert release.provenance()["files_unlisted"] == ["extra.txt"]
    (release_dir / "data/i2v/test.jsonl").write_text("tampered\n")
    with pytest.raises(DatasetError, match=r"i2v/test.jsonl: sha256 .* differs from checksums.sha256"):
        release.path("data/i2v/test.jsonl")
    with pytest.raises(DatasetError, match="not in the RememBench release"):
        release.path("data/absent.jsonl")


def test_checksum_file_format(tmp_path):
    path = tmp_path / "checksums.sha256"
    path.write_text(f"{'A' * 64} *./data/x.jsonl\n# comment\n\n{'b' * 64}  y.json\n")
    assert read_checksums(path) == {"data/x.jsonl": "a" * 64, "y.json": "b" * 64}
    path.write_text("not a checksum line\n")
    with pytest.raises(DatasetError, match=r"checksums.sha256:1: not a"):
        read_checksums(path)
    with pytest.raises(DatasetError, match="cannot be verified"):
        read_checksums(tmp_path / "absent")


def test_a_fifo_for_the_checksum_file_is_one_line_not_a_hang(tmp_path):
    """read_text() of a FIFO waited for a writer: a sample request of pinbench view (and the run) hung."""
    path = tmp_path / "checksums.sha256"
    os.mkfifo(path)
    got: list[str] = []

    def read() -> None:
        try:
            read_checksums(path)
        except DatasetError as exc:
            got.append(str(exc))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(20)
    if reader.is_alive():  # a writer lets the blocked open() return
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(20)
    assert got == [f"{path}: a FIFO (named pipe), not a regular file"]


def test_i2v_groups_check_each_trajectory(release_dir):
    import numpy as np

    from pinbench_recipes.remembench.prepare import load_groups

    release = open_release("mosaichunk/RememBench", "b" * 40, local_dir=release_dir, download=False)
    with pytest.raises(DatasetError, match="trajectories/abc-rotation_180.npz: not in the RememBench release"):
        load_groups(release, "i2v", ["rotation_180"])
    (release_dir / "trajectories").mkdir()
    np.savez(release_dir / "trajectories/abc-rotation_180.npz", poses=np.tile(np.eye(4), (256, 1, 1)),
             intrinsics=np.ones((1, 4)))
    release = open_release("mosaichunk/RememBench", "b" * 40, local_dir=release_dir, download=False)
    with pytest.raises(DatasetError, match=r"256 poses, but data/i2v/test.jsonl:1 says pose_samples=257"):
        load_groups(release, "i2v", ["rotation_180"])
    groups, rows = load_groups(release, "i2v", ["translation_90"])
    assert groups == [] and len(rows) == 1


def test_i2v_groups_follow_the_settings_order_whatever_the_order_given(built_fixture):
    """The order of groups decides which rows a --limit run scores: it must not depend on how -o settings is
    written."""
    from pinbench_recipes.remembench.prepare import load_groups

    release = open_release("mosaichunk/RememBench", "c" * 40, local_dir=built_fixture.dataset_dir, download=False)
    for given in (["translation_180", "rotation_180"], ["rotation_180", "translation_180"]):
        groups, _ = load_groups(release, "i2v", given, built_fixture.paper)
        assert [g.setting for g in groups] == ["rotation_180", "translation_180"]


def test_a_raw_line_separator_inside_a_text_stays_in_its_row(tmp_path):
    """``str.splitlines`` split a row at a raw U+2028 (as ``json.dumps(ensure_ascii=False)`` writes it): the row was
    refused as an unterminated string."""
    row = t2v_row(target_description="a red\u2028door")
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    (read,) = read_rows(path, "t2v")
    assert read.target_description == "a red\u2028door" and read.line == 1


@pytest.mark.parametrize("literal", ["NaN", "Infinity"])
def test_a_non_finite_number_is_refused_naming_file_and_line(tmp_path, literal):
    """Before: NaN was read as a number (``fps is nan, the paper setting is ...``, or taken where no check looks)."""
    row = t2v_row(scene_id="b")
    text = json.dumps(row).replace(f'"fps": {json.dumps(row["fps"])}', f'"fps": {literal}')
    assert literal in text
    path = write_jsonl(tmp_path / "t.jsonl", [t2v_row(), text])
    with pytest.raises(DatasetError) as err:
        read_rows(path, "t2v")
    assert str(err.value) == f"{path}:2: holds the non-finite number {literal}; only finite numbers are allowed"
