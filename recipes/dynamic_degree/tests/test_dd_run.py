"""The recipe end to end through run_recipe(cfg): fixture, resume, partial runs, options, the CLI module."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch
from recipe_files import build_context
from stored import store_snapshot, stored_ids
from typer.testing import CliRunner

from pinbench import cli
from pinbench.core.config import RecipeError, RunConfig
from pinbench.core.inputs import InputDigests, sample_id
from pinbench.core.recipe import get_recipe
from pinbench.core.run import Run
from pinbench.core.runner import load_records, run_samples
from pinbench.media.video import write_video
from pinbench.ops.launch import run_recipe
from pinbench.ops.network import fetching_as
from pinbench_recipes.dynamic_degree.fixture import EXPECTED_SUITE_SCORE, FIXTURE_VIDEOS
from pinbench_recipes.dynamic_degree.motion import PREVIEW_METRIC, ClipSource, HasMetric, score_task
from pinbench_recipes.dynamic_degree.prepare import (
    EstimatorSpec,
    doctor,
    list_videos,
    loop_family,
    video_tasks,
    worker_devices,
)
from pinbench_recipes.dynamic_degree.run import _scorer
from pinbench_recipes.dynamic_degree.tests.conftest import random_raft_state

RECIPE = get_recipe("dynamic-degree")


def _cfg(out: Path, *, checkpoint: str = "", options: dict | None = None, **kwargs) -> RunConfig:
    if not kwargs.get("fixture"):
        checkpoint = checkpoint or "my-model"
    return RECIPE.config(checkpoint, out_dir=out, offline=True, options=options or {}, env={}, **kwargs)


def _card(out: Path) -> dict:
    return json.loads((out / "scorecard.json").read_text())


def test_fixture_run_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "fixture"
    outcome = run_recipe(_cfg(out, fixture=True))
    assert outcome.exit_code == 0, outcome.message
    card = _card(out)
    metric = card["metrics"]["preview/dynamic_degree"]
    assert card["status"] == "complete" and card["mode"] == "fixture"
    assert metric["value"] == pytest.approx(EXPECTED_SUITE_SCORE)
    assert metric["n_expected"] == metric["n_scored"] == len(FIXTURE_VIDEOS)
    assert "dynamic_degree" not in card["metrics"]
    assert "not the official metric" in card["extra"]["notice"]
    assert outcome.diff is not None and outcome.diff.ok
    assert "PASS" in (out / "diff.txt").read_text()
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    scores = {r["sample_id"]: r["result"]["preview/dynamic_degree"] for r in rows}
    assert scores == {v.name: v.expected for v in FIXTURE_VIDEOS}
    report = (out / "report" / "index.html").read_text()
    assert "m over time: stop_and_go_16fps" in report
    assert len(list((out / "figures").glob("*.png"))) == len(FIXTURE_VIDEOS)
    # the Quick start's `pinbench report` of the run is the run's own report: the same page, the same figures
    mine = CliRunner().invoke(cli.app, ["report", str(out / "scorecard.json"), "--out", str(tmp_path / "mine")])
    assert mine.exit_code == 0, mine.output
    assert (tmp_path / "mine" / "index.html").read_text() == report
    figures = {p.name: p.read_bytes() for p in (out / "report" / "figures").iterdir()}
    assert {p.name: p.read_bytes() for p in (tmp_path / "mine" / "figures").iterdir()} == figures
    assert len(figures) == len(FIXTURE_VIDEOS)  # failures, the worst and the best per-sample figures

    # a rerun reuses every stored sample and the fixture videos themselves
    stamps = store_snapshot(out / "samples")
    videos = {p.name: p.stat().st_mtime_ns for p in (out / "fixture_data").glob("*.mp4")}
    assert run_recipe(_cfg(out, fixture=True)).exit_code == 0
    assert store_snapshot(out / "samples") == stamps
    assert {p.name: p.stat().st_mtime_ns for p in (out / "fixture_data").glob("*.mp4")} == videos


def _per_sample(out: Path) -> dict[str, tuple]:
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return {r["sample_id"]: (r["status"], r["result"], r["error"]) for r in rows}

def test_fixture_honours_limit_and_skip_scoring(tmp_path: Path) -> None:
    limited = run_recipe(_cfg(tmp_path / "limited", fixture=True, limit=2))
    assert _card(tmp_path / "limited")["samples"]["n_expected"] == 2
    assert limited.exit_code == 3  # the 5-video fixture reference does not apply to 2 videos
    skipped = run_recipe(_cfg(tmp_path / "skipped", fixture=True, skip_scoring=True))
    assert skipped.exit_code != 0 and not stored_ids(tmp_path / "skipped" / "samples")


def test_directory_with_a_broken_video_is_partial_and_exits_non_zero(
        tmp_path: Path, texture_video: Callable[..., Path]) -> None:
    videos = tmp_path / "videos"
    videos.mkdir()
    texture_video("a").rename(videos / "a.mp4")
    texture_video("b", velocity=(0, 0)).rename(videos / "b.mp4")
    (videos / "broken.mp4").write_bytes(b"")
    out = tmp_path / "run"
    outcome = run_recipe(_cfg(out, options={"videos": str(videos), "flow": "farneback"}))
    assert outcome.exit_code != 0
    card = _card(out)
    metric = card["metrics"]["preview/dynamic_degree"]
    assert card["status"] == "partial"
    assert (metric["n_expected"], metric["n_scored"], metric["n_failed"]) == (3, 2, 1)
    assert metric["value"] == pytest.approx(0.5)  # mean of the scored videos, reported as partial
    assert sorted(card["provenance"]["inputs"]) == ["upstream/raft", "upstream/vbench"]   # the preview reads no RAFT
    (failure,) = metric["failed"]
    assert failure["sample_id"] == "broken" and "empty file" in failure["error"]
    assert "reported, not diffed" in (out / "diff.txt").read_text()


def _hostile_folder(videos: Path, texture_video: Callable[..., Path]) -> dict[str, str]:
    """A folder where every entry named like a video is a problem but one; name -> expected reason."""
    videos.mkdir()
    texture_video("good").rename(videos / "good.mp4")
    (videos / "dangling.mp4").symlink_to(videos / "nowhere.mp4")
    (videos / "loop.mp4").symlink_to(videos / "loop.mp4")
    (videos / "folder.mp4").mkdir()
    texture_video("x1").rename(videos / "x.mp4")
    texture_video("x2").rename(videos / "x.mkv")
    long_name = "l" * 201
    texture_video("long").rename(videos / f"{long_name}.mp4")
    texture_video("newline").rename(videos / "new\nline.mp4")
    return {"dangling.mp4": "dangling symlink", "loop.mp4": "symlink loop",
            "folder.mp4": "a directory, not a file",
            "x.mp4": "its sample id is 'x', as for 'x.mkv'", "x.mkv": "its sample id is 'x', as for 'x.mp4'",
            f"{long_name}.mp4": "its sample id is longer than 200 bytes",
            "new\\nline.mp4": "its sample id contains a control character"}


def test_every_entry_named_like_a_video_is_scored_or_fails_by_name(
        tmp_path: Path, texture_video: Callable[..., Path]) -> None:
    """Dangling symlinks, symlink loops, folders named *.mp4 and bad names are failed samples, not dropped."""
    videos = tmp_path / "videos"
    expected = _hostile_folder(videos, texture_video)
    out = tmp_path / "run"
    outcome = run_recipe(_cfg(out, options={"videos": str(videos), "flow": "farneback"}))
    assert outcome.exit_code == 2
    card = _card(out)
    metric = card["metrics"]["preview/dynamic_degree"]
    assert card["status"] == "partial"
    assert (metric["n_expected"], metric["n_scored"], metric["n_failed"]) == (1 + len(expected), 1, len(expected))
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 1 + len(expected) and len({r["sample_id"] for r in rows}) == len(rows)
    assert [r["sample_id"] for r in rows if r["status"] == "ok"] == ["good"]
    errors = [r["error"] for r in rows if r["status"] == "failed"]
    for name, reason in expected.items():
        (line,) = [e for e in errors if f": {videos}/{name}: " in e]   # under its folder, as an undecodable one
        assert reason in line and "\n" not in line, line
    assert {f["sample_id"] for f in metric["failed"]} == {r["sample_id"] for r in rows if r["status"] == "failed"}


def test_the_doctor_names_a_bad_name_once(tmp_path: Path, texture_video: Callable[..., Path]) -> None:
    """The line said 'new\\nline.mp4 (new\\nline.mp4: bad file name: ...)': the file, then its name again."""
    videos = tmp_path / "videos"
    videos.mkdir()
    texture_video("a").rename(videos / "a.mp4")
    texture_video("b").rename(videos / "new\nline.mp4")
    findings = doctor(_cfg(tmp_path / "run", options={"videos": str(videos), "flow": "farneback"}), None)
    (line,) = [f.line for f in findings if not f.ok]
    assert "own): new\\nline.mp4 (bad file name: its sample id contains a control character" in line, line


def test_the_doctor_says_a_video_too_short_to_score(tmp_path: Path, texture_video: Callable[..., Path]) -> None:
    """A 1-frame video passed the doctor, then failed in scoring with 'no clip has 2 or more sampled frames'. The
    doctor says it in the scoring's words, from the frame count an MP4 declares and from the packets an MKV holds."""
    videos = tmp_path / "videos"
    videos.mkdir()
    texture_video("a").rename(videos / "a.mp4")
    texture_video("one", n_frames=1).rename(videos / "one.mp4")
    write_video(videos / "two.mkv", np.zeros((1, 48, 64, 3), np.uint8), 8.0)
    findings = doctor(_cfg(tmp_path / "run", options={"videos": str(videos), "flow": "farneback"}), None)
    (line,) = [f.line for f in findings if not f.ok]
    assert "2 of 3 videos are unusable under" in line and "(2 are too short to score)" in line, line
    for name in ("one.mp4", "two.mkv"):
        assert (f"{name} (no clip has 2 or more sampled frames (1 frames at 8 fps, sampling interval 1))"
                in line), line


def test_the_doctor_says_a_video_whose_container_is_not_what_its_extension_names(
        tmp_path: Path, texture_video: Callable[..., Path]) -> None:
    """A Matroska file named ``.mp4`` passed the doctor, then its sample failed in scoring (``misnamed``): the
    doctor says it in the scoring's words; a WebM named ``.mkv`` shares its demuxer and passes, as in scoring."""
    videos = tmp_path / "videos"
    videos.mkdir()
    texture_video("a").rename(videos / "a.mp4")
    frames = np.zeros((16, 48, 64, 3), np.uint8)
    os.rename(write_video(tmp_path / "real.mkv", frames, 8.0), videos / "b.mp4")
    os.rename(write_video(tmp_path / "real.webm", frames, 8.0, codec="libvpx-vp9"), videos / "c.mkv")
    findings = doctor(_cfg(tmp_path / "run", options={"videos": str(videos), "flow": "farneback"}), None)
    (line,) = [f.line for f in findings if not f.ok]
    assert "1 of 3 videos is unusable under" in line and "(1 has a container its extension does not name)" in line, line
    assert ("b.mp4 (a matroska,webm container under the extension .mp4 (which names mp4): rename it to its format's "
            "extension)") in line, line
    assert "c.mkv" not in line, line


def test_the_doctor_opens_each_video_once_and_a_rerun_none(tmp_path: Path, texture_video: Callable[..., Path],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The recipe's own check (too short to score) replaced the doctor's first-frame cache: every doctor decoded
    each first frame again, and the CPU-time estimate opened each video once more."""
    from pinbench.media import video

    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    videos = tmp_path / "videos"
    videos.mkdir()
    for name in ("a", "b"):
        texture_video(name).rename(videos / f"{name}.mp4")
    opened: list[Path] = []
    real_open = video.open_regular
    monkeypatch.setattr(video, "open_regular", lambda path, *a, **k: opened.append(path) or real_open(path, *a, **k))
    cfg = _cfg(tmp_path / "run", options={"videos": str(videos), "flow": "raft", "device": "cpu"})
    findings = doctor(cfg, None)
    assert any(f.check == "cpu" and "2 videos" in f.line for f in findings)   # the estimate read both
    assert sorted(p.name for p in opened) == ["a.mp4", "b.mp4"]
    opened.clear()
    assert [f.line for f in doctor(cfg, None) if f.check in ("inputs", "cpu")] == \
        [f.line for f in findings if f.check in ("inputs", "cpu")] and opened == []   # the first frames cached


def test_a_bad_name_added_later_fails_alone_and_the_run_is_partial(
        tmp_path: Path, texture_video: Callable[..., Path]) -> None:
    videos = tmp_path / "videos"
    videos.mkdir()
    texture_video("a").rename(videos / "a.mp4")
    texture_video("b").rename(videos / "b.mp4")
    out = tmp_path / "run"
    assert run_recipe(_cfg(out, options={"videos": str(videos), "flow": "farneback"})).exit_code == 0
    assert _card(out)["status"] == "complete"
    texture_video("a2").rename(videos / "a.webm")  # the same sample id as a.mp4
    with pytest.raises(RecipeError, match="holds the run of other inputs"):   # the directory is the first set's
        run_recipe(_cfg(out, options={"videos": str(videos), "flow": "farneback"}))
    outcome = run_recipe(_cfg(tmp_path / "again", options={"videos": str(videos), "flow": "farneback"}))
    assert outcome.exit_code == 2
    card = _card(tmp_path / "again")
    assert card["status"] == "partial" and card["metrics"]["preview/dynamic_degree"]["n_failed"] == 2


def test_an_unreadable_subfolder_is_an_error_not_a_smaller_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                texture_video: Callable[..., Path]) -> None:
    videos = tmp_path / "videos"
    (videos / "locked").mkdir(parents=True)
    texture_video("a").rename(videos / "a.mp4")
    scandir = os.scandir

    def denied(path):  # what a folder without read permission does (chmod does not stop root)
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", denied)
    with pytest.raises(RecipeError, match="locked: cannot list the videos folder"):
        list_videos(videos)


def test_raft_run_with_local_weights(tmp_path: Path, texture_video: Callable[..., Path]) -> None:
    videos = tmp_path / "videos"
    videos.mkdir()
    texture_video("memory-yaw_loop_360-pool_1", n_frames=3, height=128, width=128).rename(
        videos / "memory-yaw_loop_360-pool_1.mp4")
    weights = tmp_path / "raft.pth"
    torch.save(random_raft_state(seed=5), weights)
    sha = hashlib.sha256(weights.read_bytes()).hexdigest()
    out = tmp_path / "run"
    outcome = run_recipe(_cfg(out, options={"videos": str(videos), "raft_weights": str(weights),
                                     "raft_sha256": sha.upper(), "device": "cpu"}))  # either case
    assert outcome.exit_code == 0, outcome.message
    card = _card(out)
    assert set(card["metrics"]) == {"dynamic_degree"}
    assert card["extra"]["official"] is True
    assert card["extra"]["flow"]["weights_sha256"] == sha
    assert card["provenance"]["inputs"]["urls/raft_things"]["state"] == "verified"
    assert card["provenance"]["pins"]["urls"]["raft_things"]["url"] == weights.resolve().as_uri()   # the local file
    assert set(card["extra"]["loop_families"]) == {"yaw_loop_360"}


def test_bad_options_fail_with_one_line(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="unknown option"):
        _cfg(tmp_path, options={"video": "x"})
    with pytest.raises(RecipeError, match=r"option videos is required \(-o videos=\.\.\. or \$PINBENCH_DD_VIDEOS\)"):
        _cfg(tmp_path, options={"flow": "farneback"})
    with pytest.raises(RecipeError, match="videos directory not found"):
        run_recipe(_cfg(tmp_path / "run-none", options={"videos": str(tmp_path / "none"), "flow": "farneback"}))
    with pytest.raises(RecipeError, match="'dis' is not one of raft, farneback"):
        _cfg(tmp_path, options={"videos": str(tmp_path), "flow": "dis"})
    with pytest.raises(RecipeError, match=r"^-o raft_sha256: .abc. does not match \[0-9a-fA-F\]\{64\} \(expected"):
        _cfg(tmp_path, options={"videos": str(tmp_path), "raft_sha256": "abc"})
    for device in ("gpu", "cuda:", "cuda:x", "cpu0"):
        with pytest.raises(RecipeError, match=rf"^-o device: '{device}' does not match .*cpu, cuda or cuda:N\)$"):
            _cfg(tmp_path, options={"videos": str(tmp_path), "device": device})
    assert _cfg(tmp_path, options={"videos": str(tmp_path), "device": "cuda:1"}).options.device == "cuda:1"
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecipeError, match="no videos found"):
        run_recipe(_cfg(tmp_path / "run-empty", options={"videos": str(tmp_path / "empty"), "flow": "farneback"}))


def test_missing_weights_offline_names_the_fetch_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         texture_video: Callable[..., Path]) -> None:
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PINBENCH_RAFT_WEIGHTS", raising=False)
    texture_video("a")
    with pytest.raises(RecipeError, match="pinbench fetch dynamic-degree"):
        run_recipe(_cfg(tmp_path / "run", options={"videos": str(tmp_path)}))


def test_the_preview_fetches_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """-o flow=farneback downloads nothing: its fetch stage (--runtime docker runs one) had tried the RAFT weights."""
    from pinbench_recipes.dynamic_degree.prepare import fetch

    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PINBENCH_RAFT_WEIGHTS", raising=False)
    monkeypatch.setattr("pinbench_recipes.dynamic_degree.prepare.fetch_url",
                        lambda pin: pytest.fail(f"fetched {pin}"))
    fetch(RECIPE.config("m", out_dir=tmp_path / "o", options={"videos": str(tmp_path), "flow": "farneback"}, env={}))
    assert "uses no weights; nothing to fetch" in capsys.readouterr().out


def test_fetching_for_the_preview_resolves_no_pin_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pinbench fetch dynamic-degree -o flow=farneback`` (a --runtime docker run's fetch stage) had first resolved
    the RAFT pin's null sha256, a download, and failed offline before the recipe's fetch said it needs nothing."""
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PINBENCH_OFFLINE", "1")
    monkeypatch.setattr("pinbench.ops.machine_pins.resolve_recipe_pins", lambda *a, **k: pytest.fail("resolved"))
    result = CliRunner().invoke(cli.app, ["fetch", "dynamic-degree", "-o", "flow=farneback"])
    assert result.exit_code == 0, result.output
    assert "nothing to fetch with -o flow=farneback" in result.output


def test_sample_ids_and_loop_families(tmp_path: Path) -> None:
    assert sample_id(tmp_path, tmp_path / "yaw" / "memory-yaw_loop_180-memory_pool_427.mp4") == \
        "yaw__memory-yaw_loop_180-memory_pool_427"
    assert loop_family("yaw__memory-yaw_loop_180-memory_pool_427") == "yaw_loop_180"
    assert loop_family("memory-palindrome_loop-memory_pool_281") == "palindrome_loop"
    assert loop_family("clip_0001") is None


def test_recipe_registration() -> None:
    assert RECIPE.name == "dynamic-degree" and RECIPE.package == "pinbench_recipes.dynamic_degree"
    assert (RECIPE.dir / "pins.yaml").is_file() and (build_context(RECIPE.dir) / "Dockerfile").is_file()
    assert RECIPE.reference_path("fixture", "fixture") is not None
    assert RECIPE.reference_path("any-model", "full") is None  # no published reference exists


def test_python_m_runs_the_fixture(tmp_path: Path) -> None:
    out = tmp_path / "cli"
    env = {**os.environ, "PINBENCH_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "pinbench_recipes.dynamic_degree", "run", "--fixture",
                           "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _card(out)["metrics"]["preview/dynamic_degree"]["value"] == pytest.approx(EXPECTED_SUITE_SCORE)


def test_worker_processes_score_disjoint_parts_like_one_process(
        tmp_path: Path, texture_video: Callable[..., Path]) -> None:
    """--gpus N: the recipe's per-device scorer, built in each worker (spawned: it must pickle), gives the records
    one process gives. The workers are parts of one unsharded run, each keeping its own log: what no run reads in
    another log (a damaged line of an earlier run's) is moved aside before they start."""
    for i in range(3):
        texture_video(f"v{i}", velocity=(i, 0), seed=i)
    spec = EstimatorSpec("farneback")
    tasks = video_tasks(tmp_path, list_videos(tmp_path), flow=spec.build().describe(), source=ClipSource(),
                        recipe_version="t", digests=InputDigests(tmp_path / "digests"))
    run = Run(RECIPE, _cfg(tmp_path / "workers", options={"videos": str(tmp_path), "flow": "farneback"}))
    (tmp_path / "workers" / "samples").mkdir(parents=True)
    (tmp_path / "workers" / "samples" / "run.jsonl").write_text('{"digest":"0","record":{}}\n')  # a damaged line
    workers = run.compute(tasks, partial(_scorer, spec=spec, source=ClipSource(), root=tmp_path),
                          devices=["cpu", "cpu"], validate=HasMetric(PREVIEW_METRIC))
    assert (workers.n_done, workers.n_failed) == (3, 0)
    assert sorted(p.name for p in (tmp_path / "workers" / "samples").iterdir()) == [
        "quarantine", "run.jsonl", "shard-0-of-2.jsonl", "shard-1-of-2.jsonl"]
    assert (tmp_path / "workers" / "samples" / "run.jsonl").read_bytes() == b""
    single = run_samples(tasks, partial(score_task, estimator=spec.build(), source=ClipSource(), root=tmp_path),
                         tmp_path / "single", validate=HasMetric(PREVIEW_METRIC), progress=False)
    assert {k: r.result for k, r in load_records(tmp_path / "workers").items()} == \
        {k: r.result for k, r in single.records.items()}


def test_worker_devices_only_for_raft_on_several_gpus(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, gpus=4, options={"videos": str(tmp_path)})
    assert worker_devices(cfg, EstimatorSpec("farneback")) == []
    expected = [f"cuda:{i}" for i in range(min(4, torch.cuda.device_count()))] \
        if torch.cuda.is_available() and torch.cuda.device_count() > 1 else []
    assert worker_devices(cfg, EstimatorSpec("raft", tmp_path / "w.pth")) == expected
    assert worker_devices(_cfg(tmp_path, gpus=4, options={"videos": str(tmp_path), "device": "cuda:1"}),
                          EstimatorSpec("raft", tmp_path / "w.pth", device="cuda:1")) == []


def _pins(tmp_path: Path, url: str, sha: str | None, prefix: str | None = None) -> Path:
    pins = tmp_path / "pins.yaml"
    digest = "null" if sha is None else sha
    extra = f"    sha256_prefix: {prefix}\n" if prefix else ""
    pins.write_text(f"recipe: dynamic-degree\nurls:\n  raft_things:\n    url: {url}\n    sha256: {digest}\n"
                    f"{extra}    filename: raft_things.pth\n")
    return pins


def test_pinned_weights_are_fetched_verified_then_found_offline(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from pinbench_recipes.dynamic_degree.prepare import raft_weights

    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PINBENCH_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("PINBENCH_RAFT_WEIGHTS", raising=False)
    source = tmp_path / "upstream.pth"
    torch.save(random_raft_state(seed=2), source)
    sha = hashlib.sha256(source.read_bytes()).hexdigest()
    pins = _pins(tmp_path, source.as_uri(), sha)
    online = RECIPE.config("m", out_dir=tmp_path / "o", options={"videos": str(tmp_path)}, env={})
    path, expected = raft_weights(online, pins)
    assert expected == sha and hashlib.sha256(path.read_bytes()).hexdigest() == sha
    assert path.is_relative_to(tmp_path / "cache")
    offline = RECIPE.config("m", out_dir=tmp_path / "o", offline=True, options={"videos": str(tmp_path)}, env={})
    assert raft_weights(offline, pins) == (path, sha)

    bad = _pins(tmp_path, source.as_uri(), "ab" * 32)
    with pytest.raises(RecipeError, match="sha256 mismatch"):
        raft_weights(online, bad)


def test_a_prefix_pin_runs_the_official_metric_and_records_the_full_hash(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """torchvision's 8-hex file-name prefix is enough for a first connected run; the full SHA-256 is recorded
    in this machine's resolved pins and every later run (offline too) is checked against it."""
    from pinbench.ops.machine_pins import MachinePins, machine_pins_path
    from pinbench_recipes.dynamic_degree.prepare import pins_for_provenance, raft_weights

    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    for var in ("PINBENCH_OFFLINE", "HF_HUB_OFFLINE", "PINBENCH_RAFT_WEIGHTS"):
        monkeypatch.delenv(var, raising=False)
    source = tmp_path / "upstream.pth"
    torch.save(random_raft_state(seed=4), source)
    sha = hashlib.sha256(source.read_bytes()).hexdigest()
    online = RECIPE.config("m", out_dir=tmp_path / "o", options={"videos": str(tmp_path)}, env={})
    wrong = _pins(tmp_path, source.as_uri(), None, prefix="22a6c225")
    with pytest.raises(RecipeError, match=f"expected 22a6c225... \\(prefix\\), got {sha}"):
        raft_weights(online, wrong)
    pins = _pins(tmp_path, source.as_uri(), None, prefix=sha[:8])
    path, expected = raft_weights(online, pins)
    assert expected == sha
    machine = MachinePins.load(machine_pins_path(RECIPE.name, RECIPE.version), RECIPE.name, RECIPE.version)
    assert machine.entries[("urls", "raft_things", "sha256")].value == sha
    offline = RECIPE.config("m", out_dir=tmp_path / "o", offline=True, options={"videos": str(tmp_path)}, env={})
    assert raft_weights(offline, pins) == (path, sha)
    path.write_bytes(b"tampered")
    with pytest.raises(RecipeError, match="sha256 mismatch"):
        raft_weights(offline, pins)
    official = type("Estimator", (), {"official": True})()
    prov = pins_for_provenance(pins, official, offline.options)
    assert prov["urls"]["raft_things"]["sha256"] == sha and "urls.raft_things.sha256" in prov["resolved_at_run_time"]


def test_the_shipped_raft_pin_is_torchvisions_file_name_prefix() -> None:
    """Issue #9.4: a fresh clone runs the official metric on the file whose SHA-256 starts with 22a6c225."""
    from pinbench.core.pins import load_pins

    pin = load_pins(RECIPE.pins_path).urls["raft_things"]
    assert pin.sha256_prefix == "22a6c225" and pin.filename == "raft_large_C_T_V1-22a6c225.pth"
    assert pin.url.endswith("/" + pin.filename) and pin.verifiable


def test_official_metric_refuses_weights_without_a_pinned_sha256(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from pinbench_recipes.dynamic_degree.prepare import raft_weights

    monkeypatch.delenv("PINBENCH_RAFT_WEIGHTS", raising=False)
    source = tmp_path / "upstream.pth"
    torch.save(random_raft_state(seed=3), source)
    cfg = RECIPE.config("m", out_dir=tmp_path / "o", offline=True, options={"videos": str(tmp_path)}, env={})
    unpinned = _pins(tmp_path, source.as_uri(), None)
    with pytest.raises(RecipeError, match="pins no content"):
        raft_weights(cfg, unpinned)
    prefixed = _pins(tmp_path, source.as_uri(), None, prefix="22a6c225")
    with pytest.raises(RecipeError, match="full SHA-256 is not recorded on this machine yet.*pinbench fetch"):
        raft_weights(cfg, prefixed)
    # the fetch it names first is this run's, as its ways on name it (it said a bare `pinbench fetch dynamic-degree`)
    decoding = RECIPE.config("m", out_dir=tmp_path / "o", offline=True,
                             options={"videos": str(tmp_path), "decoder": "opencv"}, env={})
    with fetching_as(RECIPE, decoding), pytest.raises(RecipeError) as info:
        raft_weights(decoding, prefixed)
    assert str(info.value).count("`pinbench fetch dynamic-degree -o decoder=opencv`") == 2, info.value
    local = RECIPE.config("m", out_dir=tmp_path / "o", options={"videos": str(tmp_path), "raft_weights": str(source)},
                          env={})
    with pytest.raises(RecipeError, match="raft_sha256"):
        raft_weights(local, unpinned)



def test_a_fixed_folder_in_a_new_out_reuses_every_unchanged_video(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  texture_video: Callable[..., Path]) -> None:
    """#28, as a new user meets it: 10 videos, 3 broken; after removing the 3 the folder is another set of inputs,
    so the run goes to a new --out, where the 7 unchanged videos come from the sample cache: none is computed."""
    from typer.testing import CliRunner

    from pinbench.cli import app

    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(tmp_path / "sample-cache"))
    videos = tmp_path / "videos"
    videos.mkdir()
    for i in range(7):
        texture_video(f"v{i}", velocity=(i % 3, 1), seed=i, n_frames=32, height=96, width=128).rename(
            videos / f"v{i}.mp4")
    (videos / "empty.mp4").write_bytes(b"")
    (videos / "text.mp4").write_text("not a video\n")
    (videos / "truncated.mp4").write_bytes((videos / "v0.mp4").read_bytes()[:300])
    runner = CliRunner()

    def run(out: str, *flags: str) -> str:
        result = runner.invoke(app, ["run", "dynamic-degree", "--checkpoint", "mine", "-o", f"videos={videos}",
                                     "-o", "flow=farneback", "--out", str(tmp_path / out), "--offline", *flags])
        return result.output
    # the doctor stops the run before anything is scored
    assert f"3 of 10 videos are unusable under {videos} (3 do not decode): empty.mp4 (" in run("first")
    first = run("first", "--skip-doctor")                   # as its message says: score the rest
    assert "10 samples: 7 done, 0 reused, 3 failed" in first
    for name in ("empty", "text", "truncated"):
        (videos / f"{name}.mp4").unlink()
    again = run("fixed")
    assert "7 samples: 0 done, 7 reused (7 from the sample cache), 0 failed" in again
    card = _card(tmp_path / "fixed")
    assert card["status"] == "complete" and card["metrics"]["preview/dynamic_degree"]["n_scored"] == 7


@pytest.mark.parametrize("planted", [1e300, -3, "x"])
def test_a_stored_score_outside_0_1_is_never_merged(tmp_path: Path, planted: object) -> None:
    """A store line whose digest fits may still be written by hand. Before, a merge (``--skip-scoring``) averaged a
    stored score of 1e300 or -3 into a complete scorecard (exit 0), and one that is no number ended it with "Unknown
    format code 'f' for object of type 'str'"; now the record is not read and its sample is named missing."""
    from pinbench.core.store import encode_line, record_bytes

    out = tmp_path / "run"
    assert run_recipe(_cfg(out, fixture=True)).exit_code == 0
    log = out / "samples" / "run.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[0])["record"]
    record["result"][PREVIEW_METRIC] = planted
    log.write_bytes(encode_line(record_bytes(record)) + b"".join(lines[1:]))

    merged = run_recipe(_cfg(out, fixture=True, skip_scoring=True))
    assert merged.exit_code == 2
    metric = _card(out)["metrics"][PREVIEW_METRIC]
    assert metric["n_scored"] == len(FIXTURE_VIDEOS) - 1 and 0 <= metric["value"] <= 1
    failed = _per_sample(out)[record["sample_id"]]
    assert failed[0] == "failed" and "validate() returned False" in failed[2]
    assert run_recipe(_cfg(out, fixture=True)).exit_code == 0   # a rerun computes it again
    assert _per_sample(out)[record["sample_id"]][1][PREVIEW_METRIC] == pytest.approx(
        {v.name: v.expected for v in FIXTURE_VIDEOS}[record["sample_id"]])


def _drawable() -> dict:
    return {PREVIEW_METRIC: 0.5, "fps": 8.0, "tau": 1.0, "n_clips": 1, "clip_length": 16, "sampling_interval": 1,
            "clip_source": "frames", "clips": [{"start": 0, "stop": 3, "sampled": [0, 1, 2], "m": [0.5, 2.0]}]}


@pytest.mark.parametrize("change", [
    {PREVIEW_METRIC: True}, {"fps": "8"}, {"tau": 0}, {"n_clips": 1.0}, {"clip_source": None}, {"clips": {}},
    {"clips": [{"start": 0, "stop": 3, "sampled": [0, 1, 2], "m": ["x"]}]}, {"clips": [[]]}])
def test_a_stored_result_its_figure_cannot_draw_is_not_reused(change: dict) -> None:
    """The merge draws every reused record's figure: a field it reads that is absent or of another type is a record
    not reused (it ended the merge with the error of whichever line read it first)."""
    validate = HasMetric(PREVIEW_METRIC)
    assert validate(_drawable()) and validate({**_drawable(), PREVIEW_METRIC: None})
    assert not validate({**_drawable(), **change})


def test_the_view_shows_a_video_in_a_subfolder_not_one_of_its_name_at_the_top(tmp_path: Path) -> None:
    """The record names the video's file name only: ``pinbench view`` of ``sub/x.mp4`` (sample ``sub__x``) looked for
    ``x.mp4`` at the top of the folder, "no such file", or showed another video of that name there as changed. The
    page now shows the video the sample is, the top one for its own sample."""
    import shutil

    from pinbench.ops.view import MediaStore
    from pinbench.results.view import View, load_runs, view_module

    fixture = tmp_path / "fixture"
    assert run_recipe(_cfg(fixture, fixture=True)).exit_code == 0
    videos = tmp_path / "videos"
    (videos / "sub").mkdir(parents=True)
    shutil.copyfile(fixture / "fixture_data" / f"{FIXTURE_VIDEOS[0].name}.mp4", videos / "sub" / "x.mp4")
    shutil.copyfile(fixture / "fixture_data" / f"{FIXTURE_VIDEOS[1].name}.mp4", videos / "x.mp4")
    out = tmp_path / "run"
    assert run_recipe(_cfg(out, options={"videos": str(videos), "flow": "farneback"})).exit_code == 0
    view = View(load_runs([out]), view_module("dynamic-degree"))
    media = MediaStore(tmp_path / "previews")
    shown = {}
    for index, sid in enumerate(view.ids):
        (video,) = view.sample(index, media.describe)["runs"][0]["rollouts"]
        shown[sid] = (video["source"], video.get("mismatch"), video["problem"])
    assert shown == {"sub__x": (str(videos / "sub" / "x.mp4"), None, None), "x": (str(videos / "x.mp4"), None, None)}


def test_reencode_crf_is_an_input_only_when_clips_are_reencoded(tmp_path: Path) -> None:
    """``-o reencode_crf=30`` without ``clip_reencode`` changes no frame, yet its run directory was refused to the
    same run at the default CRF as "the run of other inputs"."""
    def inputs(**options: str) -> dict:
        return RECIPE.config("mine", out_dir=tmp_path / "run", options={"videos": str(tmp_path), **options},
                             env={}).inputs

    assert "reencode_crf" not in inputs(reencode_crf="30")
    assert inputs(reencode_crf="30") == inputs()
    assert inputs(clip_reencode="1", reencode_crf="30")["reencode_crf"]["value"] == "30"
    assert inputs(clip_reencode="1", reencode_crf="30") != inputs(clip_reencode="1")
