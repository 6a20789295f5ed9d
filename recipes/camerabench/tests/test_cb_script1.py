"""Script 1 end to end on CPU: fixture data, real tiny videos, the Qwen2.5-VL test double, the runner."""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

import pytest

from pinbench.core.inputs import InputDigests
from pinbench.core.runner import run_samples
from pinbench.media.video import write_video
from pinbench_recipes.camerabench import fixture
from pinbench_recipes.camerabench.dataset import load_dataset
from pinbench_recipes.camerabench.official_json import Caption, read_score_dir, write_score_dir
from pinbench_recipes.camerabench.script1 import (
    BinaryQuestion,
    Script1,
    VqaQuestions,
    has_output,
    outputs_from_records,
    script1_tasks,
)
from pinbench_recipes.camerabench.videos import VideoSetError, locate_videos


def _videos(root: Path, names: list[str]) -> Path:
    for i, name in enumerate(names):
        write_video(root / "nested" / name, fixture.bit_frames(4 + 2 * (i % 2)), 8.0, crf=0)
    return root


def test_locate_videos_flat_or_nested(tmp_path: Path) -> None:
    names = ["a.0.0.mp4", "b.0.0.mp4"]
    root = _videos(tmp_path / "v", names)
    (root / "unused.0.0.mp4").write_bytes(b"x")
    videos = locate_videos(root, names + names[:1])
    assert videos.paths == {n: root / "nested" / n for n in names}
    assert videos.n_unused == 1
    (root / "b.0.0.mp4").write_bytes(b"y")
    with pytest.raises(VideoSetError, match="two files named b.0.0.mp4"):
        locate_videos(root, names)
    with pytest.raises(VideoSetError, match=r"1 of the 3 videos the data needs are missing: c.0.0.mp4"):
        locate_videos(root / "nested", [*names, "c.0.0.mp4"])
    (root / "nested" / "a.0.0.mp4").write_bytes(b"")
    with pytest.raises(VideoSetError, match="empty file"):
        locate_videos(root / "nested", names)
    with pytest.raises(VideoSetError, match="not found"):
        locate_videos(tmp_path / "none", names)


class _CountingScorer:
    """A scripted stand-in for the VLM: P(Yes) from the question length, fixed P(No); counts calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def answer_probabilities(self, path: Path, question: str) -> dict:
        self.calls.append((Path(path).name, question))
        return {"p_yes": len(question) / 100, "p_no": 0.3, "n_frames": 12}

    def caption(self, path: Path, question: str, seed: int) -> dict:
        return {"caption": f"caption of {Path(path).name}", "seed": seed}


def test_tasks_and_outputs_with_a_scripted_scorer(tmp_path: Path) -> None:
    data = load_dataset(fixture.write_fixture(tmp_path)[0])
    videos = locate_videos(_videos(tmp_path / "videos", data.video_names()), data.video_names())
    tasks = script1_tasks(data, videos, {"checkpoint": "test"}, InputDigests(tmp_path))
    assert len(tasks) == len(data.binary) + len(data.vqa) + len(data.captions)
    binary = [t for t in tasks if isinstance(t, BinaryQuestion)]
    assert [t.video.name for t in binary] == sorted(t.video.name for t in binary)  # video-major
    scorer = _CountingScorer()
    summary = run_samples(tasks, Script1(lambda: scorer, videos), tmp_path / "script1", validate=has_output,
                          progress=False)
    assert summary.n_failed == 0
    vqa = summary.records["vqa__motion_direction__tilt_up_vs_tilt_down__0000"].result
    # (pos question, neg video) was asked of the neg video
    assert vqa["yes_scores"]["pos_text_neg_image"] == len("Does the camera tilt up?") / 100
    assert ("a5.0.0.mp4", "Does the camera tilt up?") in scorer.calls
    assert vqa["no_scores"] == dict.fromkeys(vqa["no_scores"], 0.3)
    outputs = outputs_from_records(list(summary.records.values()), data)
    assert outputs.caption["caption__a2.0.0"] == Caption("caption of a2.0.0.mp4")
    # a rerun with one changed video recomputes only that video's samples
    write_video(videos.paths["b1.0.0.mp4"], fixture.bit_frames(30), 8.0, crf=0)
    again = run_samples(script1_tasks(data, videos, {"checkpoint": "test"}, InputDigests(tmp_path)),
                        Script1(lambda: scorer, videos), tmp_path / "script1", validate=has_output, progress=False)
    uses_b1 = [t for t in tasks if "b1.0.0.mp4" in ((t.pos_video.name, t.neg_video.name)
                                                     if isinstance(t, VqaQuestions) else (t.video.name,))]
    assert again.n_done == len(uses_b1) and again.n_reused == len(tasks) - len(uses_b1)


def test_the_same_videos_in_another_folder_give_the_same_tasks(tmp_path: Path) -> None:
    """A task keys its videos by name, place under the folder, size and SHA-256: a copy elsewhere (new paths,
    mtimes and inodes) has the same input hashes, so its stored records are reused; an edited video does not."""
    from pinbench.core.runner import input_hash

    data = load_dataset(fixture.write_fixture(tmp_path)[0])
    here = _videos(tmp_path / "here" / "videos", data.video_names())
    there = tmp_path / "there" / "mnt" / "videos"
    shutil.copytree(here, there, copy_function=shutil.copyfile)

    def hashes(root: Path) -> list[str]:
        videos = locate_videos(root, data.video_names())
        return [input_hash(t) for t in script1_tasks(data, videos, {"checkpoint": "test"}, InputDigests(tmp_path))]

    assert hashes(here) == hashes(there)
    write_video(there / "nested" / "b1.0.0.mp4", fixture.bit_frames(30), 8.0, crf=0)
    assert hashes(here) != hashes(there)


def test_real_scorer_through_the_runner_to_official_files(tmp_path: Path, tiny_qwen: tuple[Path, Path]) -> None:
    from pinbench_recipes.camerabench.qwen_scorer import QwenCameraScorer, ScorerSettings

    data = load_dataset(fixture.write_fixture(tmp_path)[0], families=["binary", "vqa"])
    videos = locate_videos(_videos(tmp_path / "videos", data.video_names()), data.video_names())
    weights, processor = tiny_qwen
    scorer = QwenCameraScorer(ScorerSettings(weights, processor, attn_implementation="eager", device="cpu",
                                             dtype="float32"))
    tasks = [t for t in script1_tasks(data, videos, {"checkpoint": "tiny"}, InputDigests(tmp_path))
             if t.sample_id.startswith(("binary__Move_In", "vqa__motion_direction__tilt"))]
    summary = run_samples(tasks, Script1(lambda: scorer, videos), tmp_path / "script1", validate=has_output,
                          progress=False)
    assert summary.n_failed == 0
    record = summary.records["binary__Move_In__a1.0.0"].result
    assert 0.0 < record["score"] < 1.0 and record["second_per_grid_ts"] == [1.0]
    outputs = outputs_from_records(list(summary.records.values()), data)
    write_score_dir(tmp_path / "ours", data, outputs, model_name="qwen2.5-vl-7b", checkpoint=None,
                    timestamp=datetime(2026, 11, 30), video_dir=str(videos.root))
    back = read_score_dir(tmp_path / "ours", data, families=["binary", "vqa"])
    assert {k: v for k, v in back.binary.items() if k.startswith("binary__Move_In")} == outputs.binary
    assert back.vqa["vqa__motion_direction__tilt_up_vs_tilt_down__0000"] == \
        outputs.vqa["vqa__motion_direction__tilt_up_vs_tilt_down__0000"]
