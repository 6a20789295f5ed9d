"""Scoring whole videos: known motion -> 1, static -> 0, per-clip records, bad files fail alone."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from fifo_swap import check_then_swap, within
from loose_task import LooseTask

from pinbench.core.runner import run_samples
from pinbench.media.video import VideoError, write_video
from pinbench_recipes.dynamic_degree.flow import FarnebackPreview, RaftThings
from pinbench_recipes.dynamic_degree.motion import OFFICIAL_METRIC, PREVIEW_METRIC, ClipSource, score_video
from pinbench_recipes.dynamic_degree.tests.conftest import random_raft_state

PREVIEW = FarnebackPreview()


def test_translating_texture_above_tau_scores_one(texture_video: Callable[..., Path]) -> None:
    path = texture_video("moving", fps=8.0, n_frames=40, velocity=(3, 0))
    result = score_video(path, PREVIEW)
    assert result[PREVIEW_METRIC] == 1.0
    assert OFFICIAL_METRIC not in result  # a preview number is never filed as the official metric
    assert result["official"] is False and "not the official metric" in result["notice"]
    assert result["tau"] == pytest.approx(6 * 52 / 256)
    assert result["padded_size"] == [56, 72]
    assert [(c["start"], c["stop"]) for c in result["clips"]] == [(0, 16), (16, 32), (24, 40)]
    for clip in result["clips"]:
        assert clip["n_sampled"] == 16 and clip["n_required"] == 4 and len(clip["m"]) == 15
        assert min(clip["m"]) > 2 * result["tau"]
        assert clip["n_active"] == 15 and clip["dynamic"] == 1


def test_static_texture_scores_zero(texture_video: Callable[..., Path]) -> None:
    path = texture_video("static", fps=8.0, n_frames=32, velocity=(0, 0))
    result = score_video(path, PREVIEW)
    assert result[PREVIEW_METRIC] == 0.0
    assert result["clip_scores"] == [0, 0]
    assert max(m for c in result["clips"] for m in c["m"]) < 0.2 * result["tau"]


def test_slow_motion_below_tau_scores_zero(texture_video: Callable[..., Path]) -> None:
    # 1 px per sampled transition against tau = 6 * 128 / 256 = 3 px
    path = texture_video("slow", fps=8.0, n_frames=16, velocity=(1, 0), height=128, width=128)
    result = score_video(path, PREVIEW)
    assert result["tau"] == 3.0
    assert result[PREVIEW_METRIC] == 0.0


def test_sampling_follows_the_frame_rate(texture_video: Callable[..., Path]) -> None:
    path = texture_video("fast24", fps=24.0, n_frames=48, velocity=(1, 0))
    result = score_video(path, PREVIEW)
    (clip,) = result["clips"]
    assert result["sampling_interval"] == 3 and clip["sampled"] == list(range(0, 48, 3))
    assert min(clip["m"]) > 2.0  # 3 frames apart: 3 px per transition


def test_short_video_is_one_full_clip(texture_video: Callable[..., Path]) -> None:
    result = score_video(texture_video("short", fps=8.0, n_frames=5), PREVIEW)
    assert [c["name"] for c in result["clips"]] == ["full"]
    assert result["clips"][0]["n_sampled"] == 5 and result["clips"][0]["n_required"] == 1


def test_video_with_a_single_sampled_frame_fails_clearly(texture_video: Callable[..., Path]) -> None:
    path = texture_video("tiny", fps=30.0, n_frames=3)  # k = 4 -> only frame 0 sampled
    with pytest.raises(ValueError, match=r"tiny\.mp4: no clip has 2 or more sampled frames"):
        score_video(path, PREVIEW)


def test_reencode_option_scores_and_is_recorded(texture_video: Callable[..., Path]) -> None:
    path = texture_video("reencode", fps=8.0, n_frames=20, velocity=(3, 0))
    direct = score_video(path, PREVIEW)
    again = score_video(path, PREVIEW, ClipSource(reencode=True, crf=23))
    assert direct["clip_source"] == "frames decoded with pyav (no re-encode)"
    assert again["clip_source"] == ("frames decoded with pyav, per-clip MP4 re-encode (libx264 without mbtree, "
                                    "yuv420p, crf 23)")
    assert again[PREVIEW_METRIC] == 1.0
    assert [c["sampled"] for c in again["clips"]] == [c["sampled"] for c in direct["clips"]]


def test_scores_are_deterministic(texture_video: Callable[..., Path]) -> None:
    path = texture_video("det", fps=12.0, n_frames=30, velocity=(1, 1))
    assert score_video(path, PREVIEW) == score_video(path, PREVIEW)


def test_raft_scores_a_video_end_to_end(tmp_path: Path, texture_video: Callable[..., Path]) -> None:
    weights = tmp_path / "raft.pth"
    torch.save(random_raft_state(seed=3), weights)
    raft = RaftThings(weights, device="cpu", batch_size=4, iters=2)
    path = texture_video("raft", fps=8.0, n_frames=4, velocity=(2, 0), height=122, width=130)
    result = score_video(path, raft)
    assert OFFICIAL_METRIC in result and result["official"] is True
    assert result["padded_size"] == [128, 136] and result["top_count"] == int(0.05 * 128 * 136)
    assert len(result["clips"][0]["m"]) == 3
    assert result["flow_backend"] == "raft_things"


# --------------------------------------------------------------------------------------- bad files


def _bad_files(tmp_path: Path, good: Path) -> dict[str, Path]:
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    truncated = tmp_path / "truncated.mp4"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    garbage = tmp_path / "garbage.mp4"
    garbage.write_bytes(b"\x00\x00\x00\x18ftypisom" + bytes(range(256)) * 4)
    return {"empty": empty, "truncated": truncated, "garbage": garbage}


def test_corrupt_and_zero_frame_videos_give_one_line_errors(tmp_path: Path,
                                                            texture_video: Callable[..., Path]) -> None:
    bad = _bad_files(tmp_path, texture_video("good", n_frames=16))
    for name, path in bad.items():
        with pytest.raises(VideoError) as info:
            score_video(path, PREVIEW)
        message = str(info.value)
        assert message.startswith(str(path)) and "\n" not in message, name
    with pytest.raises(VideoError, match="empty file"):
        score_video(bad["empty"], PREVIEW)


def test_an_input_whose_container_is_not_what_its_extension_names_is_refused(
        tmp_path: Path, texture_video: Callable[..., Path]) -> None:
    """A Matroska file named ``.mp4`` was scored as a video: it is refused in one line naming the file, its extension
    and the container found; the same frames as a real MKV, WebM or MOV are scored alike."""
    import av

    good = texture_video("good", n_frames=16)
    expected = score_video(good, PREVIEW)[PREVIEW_METRIC]
    for suffix, codec in ((".mkv", "libx264"), (".webm", "libvpx-vp9"), (".mov", "libx264")):
        with av.open(str(good)) as source:
            frames = np.stack([frame.to_ndarray(format="rgb24") for frame in source.decode(video=0)])
        made = write_video(tmp_path / f"real{suffix}", frames, 8.0, codec=codec)
        assert score_video(made, PREVIEW)[PREVIEW_METRIC] == expected, suffix
    misnamed = tmp_path / "misnamed.mp4"
    os.link(tmp_path / "real.mkv", misnamed)
    with pytest.raises(VideoError) as refused:
        score_video(misnamed, PREVIEW)
    assert str(refused.value) == (f"{misnamed}: a matroska,webm container under the extension .mp4 (which names mp4): "
                                  "rename it to its format's extension")


def test_bad_videos_do_not_stop_the_others(tmp_path: Path, texture_video: Callable[..., Path]) -> None:
    good = texture_video("good", n_frames=16)
    bad = _bad_files(tmp_path, good)
    tasks = [LooseTask("good", video=str(good))] + [LooseTask(name, video=str(path)) for name, path in bad.items()]
    summary = run_samples(tasks, lambda t: score_video(Path(t["video"]), PREVIEW), tmp_path / "run",
                          progress=False)
    assert summary.n_done == 1 and summary.n_failed == 3
    assert summary.records["good"].ok
    for name in bad:
        error = summary.records[name].error or ""
        assert error.startswith("VideoError: ") and f"{name}.mp4" in error


@pytest.mark.parametrize("reencode", [False, True])
def test_the_video_scored_is_the_one_checked(texture_video: Callable[..., Path], monkeypatch, reencode: bool) -> None:
    """The video was checked (named_video_info), then decoded and hashed again by its path: a FIFO put there in
    between was what was decoded (a refusal of a video that was fine) and hashed (a hang). Both read the descriptor
    checked."""
    from pinbench_recipes.dynamic_degree import motion

    path = texture_video("swapped", fps=8.0, n_frames=20, velocity=(3, 0))
    source = ClipSource(reencode=reencode, crf=23)
    want = score_video(path, PREVIEW, source)
    monkeypatch.setattr(motion, "named_video_info", check_then_swap(motion.named_video_info, path))
    got = within(10, path, lambda: score_video(path, PREVIEW, source))
    assert (got[PREVIEW_METRIC], got["clips"]) == (want[PREVIEW_METRIC], want["clips"])
