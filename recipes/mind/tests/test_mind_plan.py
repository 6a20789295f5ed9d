"""Plan: one line per problem, naming the file, before any GPU work; the plan of what is scored."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import av
import numpy as np
import pytest
from fifo_swap import swap_in_fifo, within

from pinbench.media.video import write_video
from pinbench_recipes.mind.layout import ContinuationSample, MirrorSample, frames_scored, real_time
from pinbench_recipes.mind.plan import Plan, make_plan
from pinbench_recipes.mind.tests.conftest import ALL_METRICS, Layout, action_json, write_clip


def check(layout: Layout, metrics=ALL_METRICS, video_max_time=None, limit=None) -> Plan:
    return make_plan(layout.gt_root, layout.generated_root, metrics=metrics, video_max_time=video_max_time,
                         limit=limit)


def only_problem(pre: Plan, path: Path, *words: str) -> str:
    """The single problem line, which must name ``path`` and contain every word."""
    assert len(pre.problems) == 1, pre.problems
    line = pre.problems[0]
    assert "\n" not in line and str(path) in line, line
    for word in words:
        assert word in line, line
    return line


def test_valid_layout_has_no_problem_and_a_plan(layout: Layout) -> None:
    pre = check(layout)
    assert pre.ok, pre.problems
    assert [s.key.label for s in pre.samples] == [
        "1st_data/mem_test/data-1", "1st_data/action_space_test/data-2", "1st_data/mirror_test/loop-1",
        "3rd_data/mem_test/data-3", "3rd_data/mirror_test/loop-1"]
    plan = "\n".join(pre.plan_lines())
    assert "1st_data/mem_test: 1/1 sample generated; 100 of 112 frame pairs scored" in plan
    assert "1st_data/action_space_test: 1/1 sample generated; 200 of 215 frame pairs scored" in plan
    assert "1st_data/mirror_test: 1 directory, 2 rollouts, 10 mirrored frame pairs" in plan
    # data-2 ships no images.txt: ViPE will write one into the run's GT copy
    assert any("data-2/images.txt: 0 of 97 poses" in note for note in pre.notes)


@pytest.mark.parametrize(("real", "scored"), [(97, 0), (100, 0), (101, 100), (200, 100), (201, 200), (240, 200),
                                              (300, 200), (480, 400)])
def test_frames_scored_drops_the_chunk_that_ends_the_read(real: int, scored: int) -> None:
    assert frames_scored(real) == scored


def test_real_time_is_capped_by_video_and_video_max_time() -> None:
    assert real_time(10, 122, 500, None) == 112
    assert real_time(10, 122, 105, None) == 105
    assert real_time(10, 122, 500, 101) == 101


def test_missing_generated_test_directory(layout: Layout) -> None:
    shutil.rmtree(layout.generated_root / "3rd_data" / "action_space_test")
    only_problem(check(layout), layout.generated_root / "3rd_data" / "action_space_test", "missing", "aborts")


def test_missing_mirror_directory_only_matters_for_gsc(layout: Layout) -> None:
    shutil.rmtree(layout.generated_root / "1st_data" / "mirror_test")
    assert check(layout, metrics=("lcm",)).ok
    only_problem(check(layout), layout.generated_root / "1st_data" / "mirror_test", "missing")


def test_generated_name_not_in_gt(layout: Layout) -> None:
    layout.add_generated("1st_data", "mem_test", "data-99", frames=112)
    only_problem(check(layout), layout.generated("1st_data", "mem_test", "data-99"), "no GT sample")


def test_hidden_file_in_a_continuation_directory_is_harmless(layout: Layout) -> None:
    (layout.generated_root / "1st_data" / "mem_test" / ".DS_Store").write_text("x")
    assert check(layout).ok


def test_generated_video_shorter_than_the_gt_continuation(layout: Layout) -> None:
    video = layout.add_generated("1st_data", "mem_test", "data-1", frames=111)
    only_problem(check(layout), video, "111 frames", "fewer than the GT continuation", "112")


def test_generated_video_of_100_frames_scores_nothing(layout: Layout) -> None:
    layout.add_gt("1st_data", "mem_test", "data-1", mark=10, total=110)
    video = layout.add_generated("1st_data", "mem_test", "data-1", frames=100)
    pre = check(layout)
    assert len(pre.problems) == 2, pre.problems   # the GT continuation (100) and the video (100)
    assert any(str(video) in p and "scores nothing at or below 100" in p for p in pre.problems)
    assert any("action.json" in p and "total_time - mark_time = 100 <= 100" in p for p in pre.problems)


def test_gt_continuation_of_100_frames_or_fewer(layout: Layout) -> None:
    folder = layout.add_gt("3rd_data", "mem_test", "data-3", mark=5, total=105)
    only_problem(check(layout), folder / "action.json", "= 100 <= 100", "scores nothing")


@pytest.mark.parametrize("value", [100, 50, 1])
def test_video_max_time_must_exceed_100(layout: Layout, value: int) -> None:
    pre = check(layout, video_max_time=value)
    assert len(pre.problems) == 1 and f"video_max_time={value}" in pre.problems[0]
    assert "must be above 100" in pre.problems[0]


def test_video_max_time_101_is_accepted_and_shortens_the_plan(layout: Layout) -> None:
    pre = check(layout, video_max_time=101)
    assert pre.ok, pre.problems
    sample = next(s for s in pre.samples if s.key.path == "data-2")
    assert isinstance(sample, ContinuationSample)
    assert sample.real_time(101) == 101 and sample.frames_scored(101) == 100


def test_odd_mirror_rollout(layout: Layout) -> None:
    video = layout.add_mirror("1st_data", "loop-1", "path-3.mp4", frames=11)
    only_problem(check(layout), video, "11 frames", "odd")


def test_stray_file_in_mirror_test(layout: Layout) -> None:
    stray = layout.generated_root / "1st_data" / "mirror_test" / ".DS_Store"
    stray.write_text("x")
    only_problem(check(layout), stray, "stray file")


def test_mirror_directory_without_rollouts(layout: Layout) -> None:
    empty = layout.generated_root / "3rd_data" / "mirror_test" / "loop-2"
    empty.mkdir()
    (empty / "notes.txt").write_text("x")
    only_problem(check(layout), empty, "no .mp4")


def test_a_mirror_directory_that_cannot_be_listed_is_one_problem(layout: Layout, monkeypatch) -> None:
    """A mirror directory another user's umask made unreadable ended the plan in a PermissionError traceback."""
    locked = layout.generated_root / "3rd_data" / "mirror_test" / "loop-1"
    listdir = os.listdir

    def refuse(path):  # noqa: ANN001, ANN202 (os.listdir's stand-in; root reads any folder, so chmod cannot)
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return listdir(path)
    monkeypatch.setattr(os, "listdir", refuse)
    only_problem(check(layout), locked, "cannot list mirror directory: Permission denied")


def test_unusual_mirror_names_are_noted_not_refused(layout: Layout) -> None:
    layout.add_mirror("3rd_data", "loop-1", "take-7.mp4", frames=6)
    pre = check(layout)
    assert pre.ok and any("take-7.mp4" in n and "every .mp4" in n for n in pre.notes)


def _action_with(index: int, key: str, literal: str) -> str:
    """A valid action.json whose ``data[index][key]`` is the JSON literal ``literal``."""
    data = action_json(10, 122)
    data["data"][index][key] = "@"
    return json.dumps(data).replace('"@"', literal)


@pytest.mark.parametrize(("content", "words"), [
    ("{not json", ["invalid JSON at line 1"]),
    (json.dumps({"mark_time": 130, "total_time": 122, "data": []}), ["mark_time < total_time"]),
    (json.dumps({"mark_time": "10", "total_time": 122, "data": []}), ["must be integers"]),
    (json.dumps({"mark_time": 10, "total_time": 122}), ["no 'data' list"]),
    (json.dumps(action_json(10, 122) | {"data": [{"ws": 1}] * 122}), ["data[10]", "ws/ad/ud/lr"]),
    (json.dumps([1, 2]), ["JSON list"]),
    # a NaN or infinite code was labelled no_op without a word; a deep nest ended the plan naming no file
    (_action_with(10, "ws", "NaN"), ["data[10]", "ws: NaN"]),
    (_action_with(11, "lr", "1e999"), ["data[11]", "lr: Infinity"]),
    ('{"data": ' + "[" * 100_000 + "]" * 100_000 + "}", ["nested too deeply"]),
])
def test_bad_gt_action_json(layout: Layout, content: str, words: list[str]) -> None:
    path = layout.gt("1st_data", "mem_test", "data-1") / "action.json"
    path.write_text(content)
    only_problem(check(layout), path, *words)


def test_too_few_actions_for_the_action_metric(layout: Layout) -> None:
    path = layout.gt("1st_data", "mem_test", "data-1") / "action.json"
    path.write_text(json.dumps(action_json(10, 122) | {"data": action_json(10, 15)["data"]}))
    assert check(layout, metrics=("lcm",)).ok
    only_problem(check(layout), path, "only 5 action entries")


def test_truncated_generated_video(layout: Layout) -> None:
    """A cut or empty MP4 is named as what it is (``video_info``), where both read "undecodable: Invalid data found
    when processing input", PyAV's words, which leave the user guessing."""
    video = layout.generated("1st_data", "mem_test", "data-1") / "video.mp4"
    whole = video.read_bytes()
    video.write_bytes(whole[: len(whole) // 2])
    only_problem(check(layout), video, "truncated")
    video.write_bytes(b"")
    only_problem(check(layout), video, "empty file (0 bytes)")


def test_a_generated_video_under_a_near_name_is_named(layout: Layout) -> None:
    """``Video.mp4`` where ``video.mp4`` belongs read "generated video is missing", the file beside it unsaid (as
    ``pinbench rollouts check`` and the ``folder`` generator name it)."""
    video = layout.generated("1st_data", "mem_test", "data-1") / "video.mp4"
    video.rename(video.with_name("Video.mp4"))
    only_problem(check(layout), video, "generated video is missing; 'Video.mp4' beside it differs only in case")


def test_directory_posing_as_the_video(layout: Layout) -> None:
    video = layout.generated("1st_data", "mem_test", "data-1") / "video.mp4"
    video.unlink()
    video.mkdir()
    only_problem(check(layout), video, "not a regular file")


def test_dangling_symlink_video(layout: Layout, tmp_path: Path) -> None:
    video = layout.generated("1st_data", "mem_test", "data-1") / "video.mp4"
    video.unlink()
    video.symlink_to(tmp_path / "gone.mp4")
    only_problem(check(layout), video, "dangling symlink")


def test_symlinked_video_is_fine(layout: Layout, tmp_path: Path) -> None:
    video = layout.generated("1st_data", "mem_test", "data-1") / "video.mp4"
    target = tmp_path / "elsewhere.mp4"
    shutil.move(video, target)
    video.symlink_to(target)
    assert check(layout).ok


def test_gt_video_too_short_for_the_compared_frames(layout: Layout) -> None:
    gt_video = layout.gt("1st_data", "mem_test", "data-1") / "video.mp4"
    write_clip(gt_video, 60)
    only_problem(check(layout), gt_video, "60 frames", "122")


def test_missing_gt_test_directory(layout: Layout) -> None:
    shutil.rmtree(layout.gt_root / "3rd_data" / "test" / "action_space_test")
    only_problem(check(layout), layout.gt_root / "3rd_data" / "test" / "action_space_test", "missing")


def _mux(video: Path, container_format: str, options: dict[str, str] | None = None, n_frames: int = 112) -> None:
    """``n_frames`` of 64x36 at 24 fps in ``container_format``, written at ``video`` whatever its name says."""
    video.unlink(missing_ok=True)
    with av.open(str(video), mode="w", format=container_format, options=options or {}) as container:
        stream = container.add_stream("mpeg4", rate=24)
        stream.width, stream.height, stream.pix_fmt = 64, 36, "yuv420p"
        for i in range(n_frames):
            frame = av.VideoFrame.from_ndarray(np.full((36, 64, 3), i, np.uint8), format="rgb24")
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))


def test_container_without_frame_count(layout: Layout) -> None:
    """A fragmented MP4 declares no frame count: process.py would read 0 frames."""
    video = layout.generated("1st_data", "mem_test", "data-1") / "video.mp4"
    _mux(video, "mp4", {"movflags": "frag_keyframe+empty_moov"})
    only_problem(check(layout), video, "no frame count")


@pytest.mark.parametrize("where", ["gt", "generated"])
@pytest.mark.parametrize("container_format", ["matroska", "avi"])
def test_a_container_its_name_does_not_name_is_refused(layout: Layout, where: str, container_format: str) -> None:
    """A Matroska or AVI file named ``video.mp4`` is refused in one line naming the file and the container found
    (``named_video_info``): an AVI declares its frame count, so it passed, and process.py's reader of the container
    was given another than its name says; a GT video refused here is never asked of a generator."""
    folder = layout.gt if where == "gt" else layout.generated
    video = folder("1st_data", "mem_test", "data-1") / "video.mp4"
    _mux(video, container_format, n_frames=122 if where == "gt" else 112)
    found = "matroska,webm" if container_format == "matroska" else "avi"
    only_problem(check(layout), video, f"{found} container under the extension .mp4 (which names mp4): rename it")


def test_control_character_in_a_name(layout: Layout) -> None:
    weird = layout.generated_root / "1st_data" / "mirror_test" / "bad\nname"
    write_clip(weird / "path-1.mp4", 4)
    pre = check(layout)
    assert len(pre.problems) == 1 and "\n" not in pre.problems[0], pre.problems
    assert "mirror_test/bad\\nname: has a control character" in pre.problems[0]


def test_missing_generated_sample_is_counted_not_refused(layout: Layout) -> None:
    shutil.rmtree(layout.generated("1st_data", "mem_test", "data-1"))
    pre = check(layout)
    assert pre.ok, pre.problems
    assert [k.label for k in pre.missing] == ["1st_data/mem_test/data-1"]
    assert "no generated video (counted failed): 1st_data/mem_test/data-1" in "\n".join(pre.plan_lines())


def test_limit_keeps_the_first_samples_in_plan_order(layout: Layout) -> None:
    pre = check(layout, limit=3)
    assert [s.key.label for s in pre.samples] == [
        "1st_data/mem_test/data-1", "1st_data/action_space_test/data-2", "1st_data/mirror_test/loop-1"]
    assert pre.n_available == 5 and "--limit: the first 3 of 5" in pre.plan_lines()[0]
    assert isinstance(pre.samples[2], MirrorSample) and len(pre.samples[2].videos) == 2


def test_metric_subset_skips_tests_it_does_not_need(layout: Layout) -> None:
    pre = check(layout, metrics=("gsc",))
    assert pre.ok and {s.key.test_type for s in pre.samples} == {"mirror_test"}


def test_unknown_metric(layout: Layout) -> None:
    pre = check(layout, metrics=("lcm", "fvd"))
    assert len(pre.problems) == 1 and "fvd" in pre.problems[0]


def test_roots_must_be_directories(layout: Layout, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    pre = make_plan(missing, layout.generated_root, metrics=ALL_METRICS, video_max_time=None)
    only_problem(pre, missing, "GT root")
    pre = make_plan(layout.gt_root, missing, metrics=ALL_METRICS, video_max_time=None)
    only_problem(pre, missing, "generated root")


def test_every_problem_is_reported_at_once(layout: Layout) -> None:
    layout.add_generated("1st_data", "mem_test", "data-1", frames=111)
    layout.add_mirror("3rd_data", "loop-1", "path-2.mp4", frames=7)
    (layout.generated_root / "3rd_data" / "mirror_test" / "stray.txt").write_text("x")
    assert len(check(layout).problems) == 3


def test_gt_only_plan_does_not_call_everything_missing(layout: Layout) -> None:
    pre = make_plan(layout.gt_root, None, metrics=ALL_METRICS, video_max_time=None)
    assert pre.ok and pre.missing == []
    plan = "\n".join(pre.plan_lines())
    assert "1st_data/mem_test: 1 sample; generated videos not checked" in plan and "counted failed" not in plan


@pytest.mark.parametrize("where", ["gt", "generated", "mirror directory", "mirror rollout"])
def test_non_utf8_name_is_one_printable_line(layout: Layout, where: str) -> None:
    """A name of undecodable bytes (a lone surrogate to Python) stopped the run with "'utf-8' codec can't encode
    character '\\udcff'" and no file named."""
    name = os.fsdecode(b"bad\xffname")
    if where == "gt":
        path = layout.gt("1st_data", "mem_test", name)
        path.mkdir()
    elif where == "generated":
        path = layout.generated("1st_data", "mem_test", name)
        path.mkdir()
    elif where == "mirror directory":
        path = layout.generated("1st_data", "mirror_test", name)
        write_clip(path / "path-1.mp4", 4)
    else:
        path = layout.generated("1st_data", "mirror_test", "loop-1") / f"{name}.mp4"
        write_clip(path, 4)
    pre = check(layout)
    assert len(pre.problems) == 1, pre.problems
    line = pre.problems[0]
    assert "bad\\udcffname" in line and "not valid UTF-8" in line, line
    line.encode("utf-8")                                   # printable


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_action_json_that_is_no_regular_file_is_refused_unread(layout: Layout, kind: str) -> None:
    """A FIFO named action.json blocked the plan forever (read_text waits for a writer); /dev/zero never ends."""
    action = layout.gt("1st_data", "mem_test", "data-1") / "action.json"
    action.unlink()
    if kind == "fifo":
        os.mkfifo(action)
    else:
        action.symlink_to("/dev/zero")
    previous = signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("blocked on action.json")))
    signal.alarm(20)
    try:
        pre = check(layout)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    only_problem(pre, action, "not a regular file")


def test_the_doctor_checks_the_layouts_the_run_plans(layout: Layout, tmp_path: Path) -> None:
    """``pinbench doctor mind`` checked neither ``-o gt`` nor ``-o videos``: a layout the plan refuses stopped the run
    only once started. It says the plan's own problems, and the samples the run would count failed."""
    from pinbench.core.recipe import get_recipe
    from pinbench.ops import doctor

    recipe = get_recipe("mind")

    def inputs(**options: str) -> list[str]:
        cfg = recipe.config("m", out_dir=tmp_path / "run", offline=True, gpus=0, env={},
                            options={"gt": str(layout.gt_root), "videos": str(layout.generated_root), **options})
        return [f.render() for f in doctor.diagnose(recipe, cfg, gpus=None) if f.check == "inputs"]

    assert inputs() == [f"ok      inputs: {check(layout).plan_lines()[0]}"]
    absent = tmp_path / "absent"
    (line,) = inputs(gt=str(absent))
    assert line.startswith(f"PROBLEM inputs: layout: {absent}: GT root is not a directory")
    shutil.rmtree(layout.generated("1st_data", "mem_test", "data-1"))
    (line,) = inputs()
    assert line.startswith(f"PROBLEM inputs: 1 of 5 samples has no generated video under {layout.generated_root}: "
                           "1st_data/mem_test/data-1; fix or replace them")
    (layout.generated("1st_data", "mem_test", "stray")).mkdir()   # no GT: process.py would fail on it
    (line, _) = inputs()
    assert line.startswith(f"PROBLEM inputs: layout: {layout.generated('1st_data', 'mem_test', 'stray')}")


def test_a_video_is_counted_and_checked_in_one_open(tmp_path: Path, monkeypatch) -> None:
    """process.py's frame count and the structural check opened the video by its path one after the other: a FIFO
    put there in between was checked instead of the video that was counted."""
    from pinbench_recipes.mind import plan

    path = write_video(tmp_path / "video.mp4", np.zeros((4, 48, 64, 3), np.uint8), 8, crf=0)
    counted = plan.container_frames

    def count_then_swap(asked: Path, *fd: int) -> int:
        found = counted(asked, *fd)
        swap_in_fifo(path)
        return found

    monkeypatch.setattr(plan, "container_frames", count_then_swap)
    problems: list[str] = []
    assert within(10, path, lambda: plan._video_frames(path, problems)) == 4
    assert problems == []
