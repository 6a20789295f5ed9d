"""Hostile inputs at the recipe's boundaries: each is one line naming the file and what is wrong, or a sample
that fails by name; never a hang, a traceback or a score of something other than what was given."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pinbench.core.config import RecipeError
from pinbench_recipes.remembench.dataset import DatasetError, read_rows
from pinbench_recipes.remembench.prepare import load_groups, read_annotation_file
from pinbench_recipes.remembench.release import open_release
from pinbench_recipes.remembench.tests.conftest import t2v_row, write_checksums, write_jsonl

PAIR = '{"departure_frame": 1, "revisit_frame": 2}'


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: p.write_bytes(b'\xff{"s": ' + PAIR.encode() + b"}"), "not UTF-8 text"),
    (lambda p: p.mkdir(), "is a directory, not a file"),
    (lambda p: os.mkfifo(p), "a FIFO (named pipe), not a regular file"),   # read_text blocked for ever
    (lambda p: p.symlink_to(p), "a symlink loop"),
    (lambda p: p.symlink_to(p.parent / "absent.json"), "a dangling symlink (to "),
    (lambda p: p.write_text('{"s": ' + PAIR + ', "s": {"departure_frame": 3, "revisit_frame": 4}}'),
     "'s' is given twice"),   # was read as {"s": (3, 4)}: the last pair won without a word
])
def test_a_bad_annotations_file_is_one_line_naming_it(tmp_path: Path, make, message):
    path = tmp_path / "pairs.json"
    make(path)
    with pytest.raises(RecipeError) as caught:
        read_annotation_file(path)
    text = str(caught.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text


def test_a_good_annotations_file_reads(tmp_path: Path):
    path = tmp_path / "pairs.json"
    path.write_text('{"s": ' + PAIR + ', "t": {"departure_frame": 0, "revisit_frame": 0}}')
    assert read_annotation_file(path) == {"s": (1, 2), "t": (0, 0)}


@pytest.mark.parametrize(("scene_id", "problem"), [
    ("../../escape", "contains a path separator"), (".hidden", "starts with '.'"),
    ("new\nline", "contains a control character"), ("x" * 201, "is longer than 200 bytes"),
])
def test_a_release_row_whose_id_cannot_name_files_is_refused_by_file_and_line(tmp_path: Path, scene_id, problem):
    """Before: the run loaded its models, then stopped on 'unsafe sample id ...' naming neither file nor line."""
    root = tmp_path / "RememBench"
    write_jsonl(root / "data/t2v/test.jsonl", [t2v_row(scene_id="fine"), t2v_row(scene_id=scene_id)])
    write_checksums(root)
    release = open_release("mosaichunk/RememBench", "b" * 40, local_dir=root, download=False)
    with pytest.raises(DatasetError) as caught:
        load_groups(release, "t2v", [])
    assert str(caught.value).startswith(f"{root}/data/t2v/test.jsonl:2: id {scene_id!r} {problem}")


def test_a_release_file_that_is_not_utf8_is_named(tmp_path: Path):
    path = tmp_path / "test.jsonl"
    path.write_bytes(b'{"scene_id": "caf\xe9"}\n')
    with pytest.raises(DatasetError, match=rf"^{path}: not UTF-8 text \(byte 17\)$"):
        read_rows(path, "t2v")


def test_two_rollouts_of_one_sample_fail_it_by_name(tmp_path: Path):
    """Before: with both t2v-001.mp4 and t2v-001/rollout.mp4 under -o videos, the run scored the first, ok."""
    from pinbench.ops.launch import run_recipe
    from pinbench_recipes.remembench.fixture import build_fixture
    from pinbench_recipes.remembench.tests.conftest import fixture_config, restamp

    data = build_fixture(tmp_path / "fixture_data")
    (data.videos / "t2v-001").mkdir()
    (data.videos / "t2v-001/rollout.mp4").write_bytes((data.videos / "t2v-002.mp4").read_bytes())
    restamp(data.root)
    assert run_recipe(fixture_config(tmp_path)).exit_code == 2
    card = json.loads((tmp_path / "scorecard.json").read_text())
    (failed,) = card["metrics"]["t2v/clip"]["failed"]
    assert failed["sample_id"] == "t2v-001"
    assert f"t2v-001.mp4 and t2v-001/rollout.mp4 are both under {data.videos}: two rollouts" in failed["error"]
    assert card["metrics"]["t2v/clip"]["n_scored"] == 2 and card["samples"]["n_expected"] == 7


def _complex_poses(path: Path) -> None:
    """Rigid poses with an imaginary part in one entry: the float cast dropped it, and the sample scored ok."""
    import numpy as np

    poses = np.tile(np.eye(4), (3, 1, 1)).astype(np.complex128)
    poses[1, 0, 0] += 1j
    np.savez(path, poses=poses)


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: os.mkfifo(p), "unreadable camera poses (a FIFO (named pipe), not a regular file)"),  # np.load hung
    (lambda p: p.write_bytes(b""), "unreadable camera poses (EOFError: No data left in file)"),  # named no file
    (_complex_poses, "camera poses are complex128, not real numbers"),
])
def test_unusable_poses_files_fail_naming_the_file(tmp_path: Path, make, message):
    from pinbench_recipes.remembench.revisit import load_poses

    path = tmp_path / "s.npz"
    make(path)
    with pytest.raises(ValueError) as caught:
        load_poses(path, 3)
    assert str(caught.value) == f"{path}: {message}"
