"""tasks.json loading and the cosmos-framework input rows, field by field."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pinbench_recipes.paibench_c.rows import (
    MODALITIES,
    SAMPLING,
    TaskListError,
    build_row,
    build_rows,
    load_tasks,
    select_tasks,
    write_jsonl,
)


def task_row(index: int, **overrides: object) -> dict:
    task = f"task_{index:04d}"
    row = {"task_id": task, "video_path": f"videos/{task}.mp4", "canny_path": f"canny/{task}.mp4",
           "blur_path": f"blur/{task}.mp4", "depth_path": f"depth_vids/{task}.mp4",
           "seg_path": f"sam2_vids/{task}.mp4", "negative_prompt": '{"bad": "blurry"}',
           "aspect_ratio": "16,9" if index % 2 else "4,3", "fps": 24 + index, "seed": 2025 + index,
           "prompt": json.dumps({"subjects": [f"thing {index}"]})}
    row.update(overrides)
    return row


def write_tasks(path: Path, rows: list[dict]) -> Path:
    path.write_text(json.dumps(rows))
    return path


@pytest.fixture
def tasks_file(tmp_path: Path) -> Path:
    # Written out of order: the loader sorts by id, as the upstream recipe selects tasks.
    return write_tasks(tmp_path / "tasks.json", [task_row(2), task_row(0), task_row(1)])


def test_tasks_are_sorted_and_limit_takes_the_first(tasks_file: Path) -> None:
    tasks = load_tasks(tasks_file)
    assert [t.task_id for t in tasks] == ["task_0000", "task_0001", "task_0002"]
    assert [t.task_id for t in select_tasks(tasks, 2)] == ["task_0000", "task_0001"]
    assert len(select_tasks(tasks, None)) == 3


SETTINGS = {  # the seed's "Sampling Settings" table and the transfer-spec fields, same for every modality
    "model_mode": "video2video", "resolution": "720", "num_frames": 121, "num_steps": 50, "guidance": 3.0,
    "shift": 10.0, "num_video_frames_per_chunk": 121, "num_conditional_frames": 1,
    "num_first_chunk_conditional_frames": 0, "share_vision_temporal_positions": True,
    "negative_metadata_mode": "none", "negative_prompt_keep_metadata": False,
    "emphasize_control_in_prompt": False, "video_save_quality": 10, "num_outputs": 1,
}


@pytest.mark.parametrize("modality", MODALITIES)
def test_row_fields(tasks_file: Path, tmp_path: Path, modality: str) -> None:
    dataset = tmp_path / "dataset"
    task = load_tasks(tasks_file)[1]
    row = build_row(task, modality, dataset)
    for key, value in SETTINGS.items():
        assert row[key] == value, key
        assert type(row[key]) is type(value), key
    assert row["name"] == "task_0001"
    assert (row["aspect_ratio"], row["fps"], row["seed"]) == ("16,9", 25, 2026)   # per task, not defaults
    assert row["prompt"] == task.prompt and row["negative_prompt"] == task.negative_prompt
    assert row["control_guidance"] == (2.0 if modality == "seg" else 1.5)
    assert row["vision_path"] == str(dataset / "videos/task_0001.mp4")      # GT video for every modality
    hint = row[modality]
    if modality == "edge":
        assert hint == {"preset_edge_threshold": "medium"}
    elif modality == "blur":
        assert hint == {"preset_blur_strength": "medium"}
    elif modality == "depth":
        assert hint == {"control_path": str(dataset / "depth_vids/task_0001.mp4")}
    else:
        assert hint == {"control_path": str(dataset / "sam2_vids/task_0001.mp4")}
    others = set(MODALITIES) - {modality}
    assert not others & set(row), "exactly one control hint per row"
    expected_keys = {"name", *SETTINGS, "aspect_ratio", "fps", "seed", "prompt", "negative_prompt",
                     "control_guidance", "vision_path", modality}
    assert set(row) == expected_keys


def test_emphasize_control_is_false_in_every_row(tasks_file: Path, tmp_path: Path) -> None:
    for modality in MODALITIES:
        for row in build_rows(load_tasks(tasks_file), modality, tmp_path):
            assert row["emphasize_control_in_prompt"] is False
    assert SAMPLING["emphasize_control_in_prompt"] is False


def test_rows_round_trip_as_jsonl(tasks_file: Path, tmp_path: Path) -> None:
    rows = build_rows(load_tasks(tasks_file), "seg", tmp_path / "d")
    path = write_jsonl(rows, tmp_path / "out" / "seg.jsonl")
    assert [json.loads(line) for line in path.read_text().splitlines()] == rows
    assert not list(path.parent.glob(".*.tmp"))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"seed": 2025.0}, "seed 2025.0 must be an integer"),
        ({"seed": True}, "seed True must be an integer"),
        ({"fps": 0}, "fps 0 must be an integer >= 1"),
        ({"aspect_ratio": "21,9"}, "aspect_ratio '21,9'"),
        ({"video_path": "../videos/x.mp4"}, "video_path '../videos/x.mp4' is not a relative path"),
        ({"prompt": "  "}, "prompt must be a non-empty string"),
        ({"task_id": "task_7"}, "task_id 'task_7' is not task_NNNN"),
        ({"seg_path": "sam2_vids/x\x00.mp4"}, "seg_path 'sam2_vids/x\\x00.mp4' holds a control character"),
        ({"video_path": "videos/a\nb.mp4"}, "video_path 'videos/a\\nb.mp4' holds a control character"),
    ],
)
def test_bad_rows_name_the_file_the_task_and_the_field(tmp_path: Path, override: dict, message: str) -> None:
    path = write_tasks(tmp_path / "tasks.json", [task_row(0), task_row(1, **override)])
    with pytest.raises(TaskListError) as info:
        load_tasks(path)
    text = str(info.value)
    assert text.startswith(str(path)) and message in text and "\n" not in text


def test_missing_field_and_duplicate_id(tmp_path: Path) -> None:
    row = task_row(0)
    del row["negative_prompt"]
    with pytest.raises(TaskListError, match=r"task_0000: missing field\(s\) negative_prompt"):
        load_tasks(write_tasks(tmp_path / "a.json", [row]))
    with pytest.raises(TaskListError, match="task_0000: duplicate task_id"):
        load_tasks(write_tasks(tmp_path / "b.json", [task_row(0), task_row(0)]))


def test_unreadable_task_lists(tmp_path: Path) -> None:
    with pytest.raises(TaskListError, match="file not found"):
        load_tasks(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("[{")
    with pytest.raises(TaskListError, match=r"bad\.json: invalid JSON at line 1, column 3: "):
        load_tasks(tmp_path / "bad.json")
    (tmp_path / "empty.json").write_text("[]")
    with pytest.raises(TaskListError, match="non-empty JSON list"):
        load_tasks(tmp_path / "empty.json")


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail instead of hanging: a FIFO nobody writes blocks its reader forever."""
    def on_alarm(signum, frame):  # noqa: ANN001
        raise TimeoutError("load_tasks blocked")
    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(("make", "words"), [
    (lambda p: p.mkdir(), "is a directory, not a file"),
    (os.mkfifo, "a FIFO (named pipe), not a regular file"),   # read_text blocked on it for good
    (lambda p: p.write_bytes(b"[\xff]"), "not UTF-8"),
    (lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "nested too deeply"),   # a RecursionError, no file
    # read by the library's JSON reader (files.read_json_file) as every other data file: both were taken
    (lambda p: p.write_text(json.dumps([task_row(0, note=float("nan"))])), "holds the non-finite number NaN"),
    (lambda p: p.write_text(json.dumps([task_row(0)], indent=1).replace("thing 0", "\\ud800")),
     "tasks.json: line 13: a string holds the lone surrogate \\ud800"),
])
def test_a_task_list_that_cannot_be_read_is_one_line_naming_it(tmp_path: Path, make, words: str) -> None:
    path = tmp_path / "tasks.json"
    make(path)
    with pytest.raises(TaskListError) as info, deadline(5):
        load_tasks(path)
    text = str(info.value)
    assert text.startswith(str(path)) and words in text and "\n" not in text, text


def test_unknown_modality_is_refused(tasks_file: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown modality 'wsm'"):
        build_row(load_tasks(tasks_file)[0], "wsm", tmp_path)
