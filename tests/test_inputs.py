"""pinbench.core.inputs: every entry of an inputs folder named like an input is a sample, problems included."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pinbench.core.config import RecipeError
from pinbench.core.inputs import UnusableInput, input_path, input_tasks, list_inputs


def test_each_entry_named_like_an_input_is_a_task_and_a_bad_one_carries_its_problem(tmp_path: Path) -> None:
    (tmp_path / "good.mp4").write_bytes(b"x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.MOV").write_bytes(b"y")
    (tmp_path / "gone.mp4").symlink_to(tmp_path / "nowhere.mp4")
    (tmp_path / "loop.mp4").symlink_to(tmp_path / "loop.mp4")
    (tmp_path / "folder.mp4").mkdir()
    os.mkfifo(tmp_path / "pipe.mp4")
    (tmp_path / "twin.mp4").write_bytes(b"1")
    (tmp_path / "twin.mkv").write_bytes(b"2")
    (tmp_path / "notes.txt").write_text("not an input")
    (tmp_path / ".hidden.mp4").write_bytes(b"z")
    tasks = {t["name"]: t for t in input_tasks(tmp_path, list_inputs(tmp_path), decoder="pyav")}
    assert sorted(tasks) == ["folder.mp4", "gone.mp4", "good.mp4", "loop.mp4", "pipe.mp4", "sub/deep.MOV",
                             "twin.mkv", "twin.mp4"]
    good = tasks["good.mp4"]
    assert (good["sample_id"], good["path"], good["size"], good["decoder"]) == ("good", str(tmp_path / "good.mp4"),
                                                                                 1, "pyav")
    assert tasks["sub/deep.MOV"]["sample_id"] == "sub__deep" and input_path(tasks["sub/deep.MOV"]).is_file()
    problems = {name: task.get("problem") for name, task in tasks.items()}
    assert problems["gone.mp4"].startswith("dangling symlink") and problems["loop.mp4"].startswith("symlink loop")
    assert problems["folder.mp4"] == "a directory, not a file"
    assert problems["pipe.mp4"] == "not a regular file (a FIFO, socket or device)"
    assert "its sample id is 'twin', as for 'twin.mp4'" in problems["twin.mkv"]
    assert tasks["twin.mkv"]["sample_id"].startswith("bad-name-") and "path" not in tasks["twin.mkv"]
    with pytest.raises(UnusableInput, match=r"^pipe\.mp4: not a regular file"):
        input_path(tasks["pipe.mp4"])


def test_a_folder_whose_inputs_cannot_be_counted_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match=r"none: clips directory not found$"):
        list_inputs(tmp_path / "none", what="clips")
    (tmp_path / "a.txt").write_text("")
    with pytest.raises(RecipeError, match=r": no videos found \(looked for \.mp4, \.mkv, \.webm, \.avi, \.mov\)$"):
        list_inputs(tmp_path)
