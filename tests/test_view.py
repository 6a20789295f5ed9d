"""``pinbench view`` end to end: two fixture runs of RememBench (B's rollout t2v-001 noised, s02-tr180 cut short, then
rerun) and one of dynamic-degree, made by the real command; the page data against the runs' own files, each recipe's
inputs, previews and their digests, the server's refusals, the static folder, the report's links; then the page in a
real headless Chromium (Debian's chromium and chromedriver, as recipes/remembench/tests/test_rb_annotate_browser.py):
sorting, two rollouts playing in sync, a frame step by key, the numbers shown against the scorecards, the folder from
file://, and the 11,222-sample CameraBench view's time to show its table (printed, not asserted).
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import http.client
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pytest
import stopped
from fifo_swap import within
from headless_chromium import CHROMEDRIVER, chromium, driven
from shared_data import shared_data
from sockets import listening_addresses

from pinbench.core.files import sha256_file
from pinbench.core.generation import Request, requests_text
from pinbench.core.runner import SampleRecord
from pinbench.core.scorecard import MetricSpec, build_scorecard
from pinbench.media.preview import Preview, cached_preview, make_preview, probe
from pinbench.media.video import VideoError, read_video, video_info, write_video
from pinbench.ops.view import MediaStore
from pinbench.results.view import MediaFile, RunInputs, Video, View, ViewError, load_runs, view_module
from pinbench_recipes.remembench.tests.conftest import restamp

PINBENCH = [sys.executable, "-m", "pinbench"]
needs_browser = pytest.mark.skipif(chromium() is None or CHROMEDRIVER is None,
                                   reason="needs chromium and chromedriver (.ci/run installs Debian's)")
WAIT = 60


def _pinbench(*args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*PINBENCH, *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PINBENCH_OFFLINE": "1"})
    assert done.returncode in ok, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.fixture(scope="module", autouse=True)
def own_cache(tmp_path_factory) -> Iterator[None]:
    """Previews go to a cache of this module's own, in this process and in every command it starts."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PINBENCH_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    a, b, dd = root / "rb-a", root / "rb-b", root / "dd"
    _pinbench("run", "remembench", "--fixture", "--out", str(a))
    _pinbench("run", "dynamic-degree", "--fixture", "--out", str(dd))
    shutil.copytree(a, b)
    rollouts = b / "fixture_data" / "rollouts"
    for name, amplitude in (("t2v-001", 40), ("t2v-002", 12)):  # two differences of the same sign, unequal
        video = read_video(rollouts / f"{name}.mp4", backend="pyav")
        noise = np.random.default_rng(1).integers(-amplitude, amplitude, video.frames.shape)
        write_video(rollouts / f"{name}.mp4", np.clip(video.frames + noise, 0, 255).astype(np.uint8), video.fps,
                    crf=0)
    with open(rollouts / "s02-tr180.mp4", "r+b") as cut:
        cut.truncate(3000)
    restamp(b / "fixture_data")   # edited on purpose: else the run writes the fixture's own data again
    _pinbench("run", "remembench", "--fixture", "--out", str(b), ok=(1, 2))  # B fails the fixture reference
    return {"a": a, "b": b, "dd": dd}


def _records(run: Path) -> dict[str, dict]:
    return {r["sample_id"]: r for r in map(json.loads, (run / "samples.jsonl").read_text().splitlines())}


def _card(run: Path) -> dict:
    return json.loads((run / "scorecard.json").read_text())


# ---------------------------------------------------------------------------------------------- the page's data


def test_the_numbers_are_the_scorecards_and_every_sample_is_listed(runs) -> None:
    view = View(load_runs([runs["a"], runs["b"]]), view_module("remembench"))
    summary, table = view.summary(), view.table()
    cards = [_card(runs["a"]), _card(runs["b"])]
    assert [r["status"] for r in summary["runs"]] == ["complete", "partial"]
    assert [r["verdict"] for r in summary["runs"]] == ["PASS", "INCOMPLETE"]
    for metric in summary["metrics"]:
        for card, cell in zip(cards, metric["cells"], strict=True):
            written = card["metrics"][metric["name"]]
            assert cell["value"] == written["value"] and cell["n_scored"] == written["n_scored"], metric["name"]
            assert (cell["low"], cell["high"]) == (written["interval"]["low"], written["interval"]["high"])
    assert {m["name"] for m in summary["metrics"]} == set(cards[0]["metrics"])
    records = [_records(runs["a"]), _records(runs["b"])]
    assert table["ids"] == list(records[0])
    keys = [c["key"] for c in summary["columns"]]
    assert keys == ["clip", "lpips_alex", "tempssim", "drift"]  # the primary metric's key first
    for r, by_id in enumerate(records):
        for k, sample_id in enumerate(table["ids"]):
            record = by_id[sample_id]
            assert table["status"][r][k] == (0 if record["status"] == "ok" else 1)
            for c, key in enumerate(keys):
                assert table["values"][r][c][k] == (record["result"][key] if record["result"] else None)
    broken = table["ids"].index("s02-tr180")
    assert table["errors"][1] == {str(broken): records[1]["s02-tr180"]["error"]} and table["errors"][0] == {}
    cohorts = table["facets"][0]
    assert cohorts["name"] == "cohort" and cohorts["levels"][cohorts["of"][0]] == "t2v"
    assert cohorts["levels"][cohorts["of"][broken]] == "i2v/translation_180"


def _driven_elsewhere(run: Path, to: Path) -> Path:
    """A copy of ``run`` whose scorecard says it ran under another GPU driver."""
    shutil.copytree(run, to)
    card = _card(to)
    card["provenance"]["driver"] = "560.35.03"
    (to / "scorecard.json").write_text(json.dumps(card))
    return to


def test_each_run_says_what_it_ran_differently_from_run_a(runs, tmp_path: Path) -> None:
    other = _driven_elsewhere(runs["dd"], tmp_path / "other")
    same = shutil.copytree(runs["dd"], tmp_path / "same")   # a copy: one run named twice is refused
    summary = View(load_runs([runs["dd"], other, same])).summary()
    driver = _card(runs["dd"])["provenance"]["driver"]
    assert [r["ran_differently"] for r in summary["runs"]] == [
        [], [f"from run A: driver: A {driver or 'none'}, this run 560.35.03"], []]


def _recorded_as(run: Path, to: Path, **fields: str) -> Path:
    """A copy of ``run`` whose scorecard records other ``fields`` (a recipe version, a checkpoint, a mode)."""
    shutil.copytree(run, to)
    card = _card(to)
    card.update(fields)
    (to / "scorecard.json").write_text(json.dumps(card))
    return to


def test_each_run_says_why_it_did_not_match_its_reference_or_has_none(runs, tmp_path: Path) -> None:
    """The verdict's reasons are the page's, as pinbench diff prints them: a MISMATCH badge alone (and no word for
    a run without a reference) sent the reader to the terminal to learn why."""
    other = _recorded_as(runs["dd"], tmp_path / "other", recipe_version="9.9")
    unknown = _recorded_as(runs["dd"], tmp_path / "unknown", checkpoint="nobody", mode="smoke")
    got = [(r["verdict"], r["problems"], r["reference_note"])
           for r in View(load_runs([runs["dd"], other, unknown])).summary()["runs"]]
    assert [verdict for verdict, _, _ in got] == ["PASS", "MISMATCH", "NO REFERENCE"]
    # named from the recipes' folder: a bundle is shared, where this machine's absolute paths tell its layout
    assert got[0][1] == [] and got[0][2] == "reference: dynamic_degree/references/fixture.yaml"
    assert got[1][1] == ["recipe_version mismatch: reference (dynamic_degree/references/fixture.yaml) is for "
                         f"'{_card(runs['dd'])['recipe_version']}', scorecard is '9.9'"]
    assert got[2][1:] == ([], "no smoke reference for dynamic-degree / nobody")
    partial = View(load_runs([runs["b"]])).summary()["runs"][0]
    assert partial["verdict"] == "INCOMPLETE" and partial["problems"][0].startswith("scorecard status is partial")


def test_a_reference_that_cannot_be_read_is_named_as_a_read_one_is(runs, monkeypatch) -> None:
    """The note names an unreadable reference from its recipes' folder, as it names one it read: its absolute path
    told this machine's layout on a page that is shared."""
    from pinbench.core.recipe import Recipe

    monkeypatch.setattr(Recipe, "reference_of", lambda recipe, card: recipe.dir / "references" / "broken.yaml")
    note = View(load_runs([runs["dd"]])).summary()["runs"][0]["reference_note"]
    assert note.startswith("reference not read: dynamic_degree/references/broken.yaml: "), note


def _rows(path: Path) -> dict[str, dict]:
    return {r.get("sample_id") or r["scene_id"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_remembench_and_dynamic_degree_name_the_tasks_inputs(runs) -> None:
    media = MediaStore()
    view = View(load_runs([runs["a"]]), view_module("remembench"))
    release = runs["a"] / "fixture_data" / "RememBench"
    row = _rows(release / "data/t2v/test.jsonl")["t2v-000"]
    record = _records(runs["a"])["t2v-000"]["result"]
    sample = view.sample(view.ids.index("t2v-000"), media.describe)["runs"][0]
    starts = [math.floor(s * row["fps"] + 1e-9) for s in row["prompt_start_seconds"]]
    assert [(s["start"], s["stop"]) for s in sample["spans"]] == list(zip(starts, [*starts[1:], 379], strict=True))
    assert [s["label"].split(": ", 1)[1] for s in sample["spans"]] == row["prompts"]
    assert {m["label"]: m["frame"] for m in sample["markers"]} == {"departure": record["departure_frame"],
                                                                  "revisit": record["revisit_frame"]}
    rollout = sample["rollouts"][0]
    assert rollout["sha256"] == record["video_sha256"] == sha256_file(runs["a"] / "fixture_data/rollouts/t2v-000.mp4")
    assert "mismatch" not in rollout and rollout["preview"].startswith("H.264 High 4:4:4")
    i2v = _rows(release / "data/i2v/test.jsonl")["s01-rot180"]
    inputs = view.sample(view.ids.index("s01-rot180"), media.describe)["inputs"]
    assert {"kind": "text", "label": "prompt", "text": i2v["prompt"]} in inputs
    image = next(i for i in inputs if i["kind"] == "image")
    images = runs["a"] / "fixture_data" / "i2v-images"   # prepared apart from the release, as -o images are
    assert (image["problem"], image.get("source")) == (None, str((images / i2v["image_path"]).resolve()))

    view = View(load_runs([runs["dd"]]), view_module("dynamic-degree"))
    for k, sample_id in enumerate(view.ids):
        result = _records(runs["dd"])[sample_id]["result"]
        got = view.sample(k, media.describe)["runs"][0]
        clips = [c for c in result["clips"] if c["m"]]
        assert [s["values"] for s in got["series"]] == [c["m"] for c in clips]
        assert [s["frames"] for s in got["series"]] == [c["sampled"][:-1] for c in clips]
        assert {s["threshold"] for s in got["series"]} <= {result["tau"]}
        assert [(s["start"], s["stop"]) for s in got["spans"]] == [(c["start"], c["stop"]) for c in result["clips"]]
        assert got["rollouts"][0]["source"] == str((runs["dd"] / "fixture_data" / result["video"]).resolve())


def _bare_run(root: Path, recipe: str, mode: str = "fixture", provenance: dict | None = None) -> RunInputs:
    """A run folder holding only what a view module reads (its own files are written by each test)."""
    card = build_scorecard(recipe=recipe, recipe_version="0", checkpoint="fixture", mode=mode,
                           metrics=[MetricSpec("x", "mean", direction="higher", primary=True)],
                           records=[SampleRecord("s", "ok", {"x": 1.0}, None, "0" * 64, 0.1)], n_expected=1,
                           provenance=provenance or {}, config={"options": {}}, timings={})
    return RunInputs(root, card)


def _paibench_rows(run: RunInputs, rows: dict[str, dict]) -> None:
    """The run's ``generation/requests.jsonl``: one request per modality, each with its cosmos-framework row."""
    (run.dir / "generation").mkdir(parents=True)
    (run.dir / "generation/requests.jsonl").write_text(requests_text([
        Request(id=f"{m}.{row['name']}", kind="control-video", recipe="paibench-c", output=f"{m}/{row['name']}.mp4",
                frames=9, fps=30, width=96, height=72, settings={"modality": m, "row": row})
        for m, row in rows.items()]))


def test_mind_shows_the_gt_from_its_context_boundary_and_paibench_its_controls(tmp_path: Path) -> None:
    from pinbench_recipes.mind.view import sample_media as mind_media
    from pinbench_recipes.paibench_c.view import sample_media as pai_media

    run = _bare_run(tmp_path / "mind", "mind")
    gt = run.fixture_dir / "MIND-Data/1st_data/test/mem_test/scene-a"
    gt.mkdir(parents=True)
    (gt / "action.json").write_text(json.dumps({"mark_time": 37, "total_time": 140, "data": []}))
    media = mind_media(run, "1st_data.mem_test.scene-a", {"official_frames": 100})
    assert media.rollouts[0].file == MediaFile(run.fixture_dir / "generated", "1st_data/mem_test/scene-a/video.mp4")
    assert media.inputs[0].offset_frames == 37
    assert media.inputs[0].file == MediaFile(run.fixture_dir / "MIND-Data", "1st_data/test/mem_test/scene-a/video.mp4")
    assert [(s.start, s.stop) for s in media.spans] == [(0, 100)]

    run = _bare_run(tmp_path / "pai", "paibench-c")
    dataset = run.fixture_dir / "dataset"
    row = {"name": "task_0001", "prompt": "a red box", "vision_path": str(dataset / "videos/task_0001.mp4"),
           "depth": {"control_path": "depth_vids/task_0001.mp4"}}   # absolute, or relative to the dataset
    elsewhere = {**row, "vision_path": "/etc/passwd", "edge": {"preset_edge_threshold": "medium"}}
    _paibench_rows(run, {"edge": elsewhere, "depth": row})
    media = pai_media(run, "task_0001", None)
    assert [(v.label, v.file) for v in media.rollouts if v.label in ("depth", "edge")] == [
        (m, MediaFile(run.dir, f"{m}/videos/task_0001.mp4")) for m in ("edge", "depth")]
    named = {v.label: v for v in media.inputs}
    assert named["depth control video"].file == MediaFile(dataset, "depth_vids/task_0001.mp4")
    assert [(v.file, v.problem) for v in media.inputs if v.label.startswith("input video")] == [
        (None, f"/etc/passwd is outside the dataset folder {dataset}"),  # the edge row names a path outside
        (MediaFile(dataset, "videos/task_0001.mp4"), None)]
    assert [t.text for t in media.texts if t.label == "prompt"] == ["a red box"]


def test_a_generating_run_shows_the_rollouts_it_generated_not_the_fixtures(tmp_path: Path) -> None:
    from pinbench_recipes.mind.view import sample_media as mind_media
    from pinbench_recipes.remembench.view import sample_media as rb_media

    made = {"extra": {"generation": {"generator": "static", "requests": "0" * 64, "n_requests": 1}}}
    run = _bare_run(tmp_path / "rb", "remembench", provenance=made)
    for folder in (run.dir / "rollouts", run.fixture_dir / "rollouts"):   # the fixture's own rollouts too
        folder.mkdir(parents=True)
        (folder / "t2v-000.mp4").write_bytes(b"")
    assert rb_media(run, "t2v-000", None).rollouts[0].file == MediaFile(run.dir / "rollouts", "t2v-000.mp4")
    run = _bare_run(tmp_path / "mind", "mind", provenance=made)
    assert mind_media(run, "1st_data.mem_test.scene-a", None).rollouts[0].file == MediaFile(
        run.dir / "rollouts", "1st_data/mem_test/scene-a/video.mp4")


def test_an_i2v_sample_shows_its_conditioning_image_from_the_images_folder_or_says_the_run_recorded_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full I2V run: the image comes from -o images (the release does not hold it); a run that recorded no images
    folder (one that scored rollouts it was given: only I2V generation reads it) shows the prompt and camera path,
    and says why there is no image instead of pointing at a folder it never had."""
    from pinbench_recipes.remembench import view as rb_view
    from pinbench_recipes.remembench.dataset import I2VRow

    row = I2VRow(sample_id="s01-rot180", scene_id="s01", scene_type="indoor", prompt="a hall", image_path="s01.png",
                 trajectory_path="s01.json", setting="rotation_180", rotation_degrees=180, direction="left",
                 translation=False, seed=7, seed_text="7", num_frames=81, fps=16.0, width=832, height=480,
                 num_chunks=1, latent_frames=21, denoising_steps_per_chunk=4, pose_samples=81, intrinsics_samples=1,
                 line=1)
    release = tmp_path / "release"
    monkeypatch.setattr(rb_view, "_rows", lambda root, fixture: {row.sample_id: row} if root == release else {})
    bare = _bare_run(tmp_path / "rb", "remembench", mode="full")
    for options, image, problems in (
            ({"dataset_dir": str(release), "images": str(tmp_path / "images")},
             [MediaFile(tmp_path / "images", "s01.png")], []),
            ({"dataset_dir": str(release)}, [],
             ["the conditioning image is not shown: the run recorded no images folder (-o images, which only I2V "
              "generation reads)"])):
        run = RunInputs(bare.dir, dataclasses.replace(bare.card, config={"options": options}))
        media = rb_view.sample_media(run, row.sample_id, None)
        assert [i.file for i in media.images] == image and media.problems == problems
        assert [(t.label, t.text) for t in media.texts] == [("prompt", "a hall"),
                                                             ("camera path", "rotation_180: 180 degrees left")]


def test_a_full_paibench_run_serves_its_inputs_from_the_dataset_folder_it_read(tmp_path: Path) -> None:
    from pinbench_recipes.paibench_c.view import sample_media

    dataset = tmp_path / "hub" / "datasets--nvidia--PAI-Bench-C" / "snapshots" / ("a" * 40)
    row = {"name": "task_0001", "prompt": "a red box", "vision_path": str(dataset / "videos/task_0001.mp4")}
    for provenance, expected in (({"extra": {"dataset_dir": str(dataset)}}, (MediaFile(dataset, "videos/task_0001.mp4"),
                                                                              None)),
                                 ({}, (None, "the run's scorecard records no dataset folder (provenance "
                                             "dataset_dir)"))):
        run = _bare_run(tmp_path / f"run{len(provenance)}", "paibench-c", mode="full", provenance=provenance)
        _paibench_rows(run, {"depth": row})
        video = next(v for v in sample_media(run, "task_0001", None).inputs if v.label.startswith("input video"))
        assert (video.file, video.problem) == expected


def test_a_relative_input_folder_is_read_from_where_the_run_was_started(tmp_path: Path) -> None:
    run = _bare_run(tmp_path / "lab" / "runs" / "remembench" / "mine", "remembench")
    run.dir.mkdir(parents=True)
    card = dataclasses.replace(run.card, config={"out_dir": "runs/remembench/mine",
                                                 "options": {"videos": "my_videos", "gt": "/data/gt"}})
    run = RunInputs(run.dir, card)
    assert run.option_path("videos") == (tmp_path / "lab" / "my_videos").resolve()
    assert run.option_path("gt") == Path("/data/gt") and run.option_path("absent") is None
    elsewhere = RunInputs(tmp_path / "moved", card)  # not under the out_dir it recorded: the current folder
    assert elsewhere.option_path("videos") == Path.cwd() / "my_videos"


def test_a_folder_given_inside_the_run_directory_is_found_there_after_the_run_moved(tmp_path: Path) -> None:
    """``--out runs/mine -o videos=runs/mine/vids``, then ``mv runs/mine moved``: the videos were looked for under
    the old name (from the current folder: nothing there, or another run's)."""
    bare = _bare_run(tmp_path / "moved", "remembench")
    card = dataclasses.replace(bare.card, config={"out_dir": "runs/mine", "options": {
        "videos": "runs/mine/vids", "images": "/data/runs/mine/i2v", "gt": "runs/other", "masks": "runs/mine/../b"}})
    run = RunInputs(bare.dir, card)
    assert run.option_path("videos") == (tmp_path / "moved" / "vids").resolve()
    assert run.option_path("masks") == Path.cwd() / "runs/mine/../b"   # out of the run directory: not moved with it
    assert run.option_path("images") == Path("/data/runs/mine/i2v")   # not under the out_dir as it was named
    assert run.option_path("gt") == Path.cwd() / "runs/other"
    absolute = RunInputs(bare.dir, dataclasses.replace(card, config={"out_dir": "/data/runs/mine", "options": {
        "images": "/data/runs/mine/i2v"}}))
    assert absolute.option_path("images") == (tmp_path / "moved" / "i2v").resolve()


def test_a_folder_that_is_not_there_is_said_so_by_every_recipe(tmp_path: Path) -> None:
    """A run directory moved, a -o videos folder deleted, a scorecard kept aside beside no rollouts: RememBench said
    "no rollout in ...: looked for " (nothing), CameraBench "not under", MIND "no *.mp4 under"."""
    from pinbench_recipes.camerabench.view import _video as cb_video
    from pinbench_recipes.dynamic_degree.view import sample_media as dd_media
    from pinbench_recipes.mind.view import sample_media as mind_media
    from pinbench_recipes.remembench.view import sample_media as rb_media

    made = {"extra": {"generation": {"generator": "static", "requests": "0" * 64, "n_requests": 1}}}
    run = _bare_run(tmp_path / "rb", "remembench", provenance=made)
    assert rb_media(run, "t2v-000", None).rollouts[0].problem == f"{run.dir / 'rollouts'} is not a folder here"
    assert cb_video(tmp_path / "vids", "a.mp4", "video").problem == f"a.mp4: {tmp_path / 'vids'} is not a folder here"
    run = _bare_run(tmp_path / "mind", "mind")
    assert mind_media(run, "1st_data.mirror_test.scene-a", None).rollouts[0].problem == (
        f"{run.fixture_dir / 'generated'} is not a folder here")
    run = _bare_run(tmp_path / "dd", "dynamic-degree")
    media = dd_media(run, "clip", {"video": "clip.mp4", "video_sha256": "0" * 64})
    assert [v.problem for v in media.rollouts] == [f"{run.fixture_dir} is not a folder here"] and not media.problems
    # a file named in a folder that is not there (MIND's rollout, PAI-Bench-C's): its page says the folder is not
    got = MediaStore(tmp_path / "previews").describe(0, Video("rollout", MediaFile(tmp_path / "gone", "a/video.mp4")))
    assert got["problem"] == f"{tmp_path / 'gone'} is not a folder here"


def test_camerabench_samples_are_filtered_by_family_split_and_skill() -> None:
    from pinbench_recipes.camerabench.view import facets

    assert facets("binary__Move_Down__u35WIs62R2M.1.4", None) == {"family": "binary", "split": "Move_Down"}
    assert facets("vqa__complex_description__all__0003", None) == {"family": "vqa", "skill": "complex_description"}
    assert facets("caption__abc", None) == {"family": "caption"}


# ---------------------------------------------------------------------------------------------- media and previews


def test_media_come_only_from_inside_their_folder_and_as_the_run_scored_them(runs, tmp_path: Path) -> None:
    root = runs["a"] / "fixture_data" / "rollouts"
    secret = tmp_path / "secret.mp4"
    shutil.copyfile(root / "t2v-000.mp4", secret)
    link_folder = tmp_path / "videos"
    link_folder.mkdir()
    (link_folder / "out.mp4").symlink_to(secret)
    media = MediaStore(tmp_path / "previews")
    for file in (MediaFile(root, "../../scorecard.json"), MediaFile(root, "%2e%2e/secret.mp4"),
                 MediaFile(link_folder, "out.mp4"), MediaFile(root, str(secret))):
        entry = media.describe(0, Video("rollout", file))
        assert entry["url"] is None and entry["problem"], file
    assert media.files == {}
    good = media.describe(0, Video("rollout", MediaFile(root, "t2v-002.mp4"), expected_sha256="0" * 64))
    assert good["mismatch"].startswith(f"{(root / 't2v-002.mp4').resolve()} holds other bytes")
    name = good["url"].removeprefix("media/")
    with media.file(name) as opened:
        assert opened.path == cached_preview(tmp_path / "previews", good["sha256"]).path
    assert media.file("f" * 64 + ".mp4") is None
    shutil.copyfile(root / "t2v-000.mp4", link_folder / "mine.mp4")
    mine = media.describe(0, Video("rollout", MediaFile(link_folder, "mine.mp4")))["url"].removeprefix("media/")
    shutil.copyfile(root / "t2v-001.mp4", link_folder / "mine.mp4")  # other bytes now
    assert media.file(mine) is None  # never the preview of the bytes listed, for these


def test_a_video_replaced_by_a_fifo_or_folder_after_its_listing_is_not_served(tmp_path: Path) -> None:
    """A FIFO put where a listed video was held its request (open() waits for a writer) and the server's stop for
    ever; the file must still be a regular file to be served."""
    media = MediaStore(tmp_path / "previews")
    kept = write_video(tmp_path / "kept.mp4", np.zeros((4, 48, 64, 3), np.uint8), 24, crf=23)
    video = tmp_path / "v.mp4"
    for kind, make in (("fifo", os.mkfifo), ("folder", os.mkdir), ("gone", lambda path: None)):
        shutil.copyfile(kept, video)
        name = media.describe(0, Video("rollout", MediaFile(tmp_path, "v.mp4")))["url"].removeprefix("media/")
        video.unlink()
        make(video)
        got: list[Path | None] = []
        reader = threading.Thread(target=lambda name=name, got=got: got.append(media.file(name)), daemon=True)
        reader.start()
        reader.join(10)
        if reader.is_alive():  # a writer lets the blocked open() return
            os.close(os.open(video, os.O_WRONLY | os.O_NONBLOCK))
        assert got == [None], kind
        if kind == "folder":
            video.rmdir()
        video.unlink(missing_ok=True)


def _asgi_get(app, path: str, method: str = "GET", **headers: str) -> tuple[int, bytes, dict[str, str]]:
    """``app``'s answer to one request from 127.0.0.1:8123, in this process (30 s at most: a hang fails)."""
    sent: list[dict] = []

    asked: list[bool] = []

    async def receive() -> dict:  # the request, then nothing more (no disconnect) until the answer is done
        if asked:
            await asyncio.Event().wait()
        asked.append(True)
        return {"type": "http.request", "body": b""}

    async def send(message: dict) -> None:
        sent.append(message)

    path, _, query = path.partition("?")
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "root_path": "", "query_string": query.encode(),
             "server": ("127.0.0.1", 8123), "client": ("127.0.0.1", 50000),
             "headers": [(k.encode(), v.encode()) for k, v in {"host": "127.0.0.1:8123", **headers}.items()]}
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 30))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], body, {k.decode(): v.decode() for k, v in start["headers"]}


def _media_app(media: MediaStore, token: str):
    from pinbench.ops.view import build_app

    return build_app(lambda: types.SimpleNamespace(ids=(), summary=dict, table=dict), media, token, 8123)


def _listed_video(media: MediaStore, folder: Path) -> tuple[str, bytes]:
    """A small web-ready video at ``folder/v.mp4``, listed: its media name and its bytes."""
    write_video(folder / "v.mp4", np.zeros((4, 48, 64, 3), np.uint8), 24, crf=23)
    entry = media.describe(0, Video("rollout", MediaFile(folder, "v.mp4")))
    assert entry["preview"] is None  # served as it is, no preview between
    return entry["url"].removeprefix("media/"), (folder / "v.mp4").read_bytes()


def _swap(video: Path, kind: str, secret: Path) -> None:
    video.unlink()
    os.mkfifo(video) if kind == "fifo" else video.symlink_to(secret)


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_a_video_swapped_after_its_check_is_served_from_what_was_checked(tmp_path: Path, monkeypatch, kind) -> None:
    """The server checked the file (regular, its bytes) and then opened it again by its path: a FIFO put there in
    between was a 500 (or a hung request), a link to another file served that file. What is served is the
    descriptor the check was made on."""
    media, secret = MediaStore(tmp_path / "previews"), tmp_path / "secret.mp4"
    secret.write_bytes(b"not yours")
    name, listed = _listed_video(media, tmp_path)
    checked = media.file

    def check_then_swap(asked: str):  # the swap lands in the window after the check
        found = checked(asked)
        _swap(tmp_path / "v.mp4", kind, secret)
        return found

    monkeypatch.setattr(media, "file", check_then_swap)
    token = "t" * 43
    assert _asgi_get(_media_app(media, token), f"/{token}/media/{name}")[:2] == (200, listed)


def test_a_video_swapped_for_a_fifo_after_its_path_check_fails_its_listing(tmp_path: Path, monkeypatch) -> None:
    """Listing a video checked its path and then hashed it by that path: a FIFO put there in between held the
    sample's request for ever."""
    from pinbench.ops import localweb

    resolve = localweb.resolve_inside

    def resolve_then_swap(root: Path, relative: str) -> Path:
        found = resolve(root, relative)
        _swap(found, "fifo", found)
        return found

    write_video(tmp_path / "v.mp4", np.zeros((4, 48, 64, 3), np.uint8), 24, crf=23)
    monkeypatch.setattr(localweb, "resolve_inside", resolve_then_swap)
    got: list[dict] = []
    lister = threading.Thread(target=lambda: got.append(MediaStore(tmp_path / "previews").describe(
        0, Video("rollout", MediaFile(tmp_path, "v.mp4")))), daemon=True)
    lister.start()
    lister.join(20)
    if lister.is_alive():  # a writer lets the blocked open() return
        os.close(os.open(tmp_path / "v.mp4", os.O_WRONLY | os.O_NONBLOCK))
        lister.join(20)
    assert len(got) == 1 and got[0]["url"] is None, got
    assert got[0]["problem"] == f"{tmp_path.resolve() / 'v.mp4'}: a FIFO (named pipe), not a regular file"


def test_a_video_swapped_for_a_fifo_after_its_hash_is_probed_from_what_was_hashed(tmp_path: Path,
                                                                                  monkeypatch) -> None:
    """Listing a video hashed it through its descriptor and then probed it by its path: a FIFO put there in between
    failed the listing (or held it, put there after the probe's own check)."""
    digest = MediaStore._digest

    def digest_then_swap(store: MediaStore, file):
        found = digest(store, file)
        _swap(file.path, "fifo", file.path)
        return found

    write_video(tmp_path / "v.mp4", np.zeros((4, 48, 64, 3), np.uint8), 24, crf=23)
    listed = sha256_file(tmp_path / "v.mp4")
    monkeypatch.setattr(MediaStore, "_digest", digest_then_swap)
    entry = within(20, tmp_path / "v.mp4", lambda: MediaStore(tmp_path / "previews").describe(
        0, Video("rollout", MediaFile(tmp_path, "v.mp4"))))
    assert entry["problem"] is None and entry["url"] == f"media/{listed}.mp4", entry
    assert (entry["n_frames"], entry["width"], entry["height"], entry["codec"]) == (4, 64, 48, "h264")


def test_a_video_swapped_for_a_fifo_after_its_check_is_previewed_from_what_was_checked(tmp_path: Path,
                                                                                      monkeypatch) -> None:
    """A preview was made from the video's path after the served file was checked: a FIFO put there in between held
    the request (and a bundle) for ever. It is made from the descriptor that was checked."""
    from pinbench.media import preview

    media, video = MediaStore(tmp_path / "previews"), tmp_path / "v.mp4"
    write_video(video, np.zeros((4, 48, 64, 3), np.uint8), 24, codec="mpeg4")  # no browser plays it: a preview
    entry = media.describe(0, Video("rollout", MediaFile(tmp_path, "v.mp4")))
    assert entry["preview"].startswith("mpeg4 in a .mp4 file")
    cached = preview.cached_preview

    def swap_then_look(cache: Path, source_sha256: str):  # the first step of making it, after the check
        _swap(video, "fifo", video)
        return cached(cache, source_sha256)

    monkeypatch.setattr(preview, "cached_preview", swap_then_look)
    served = within(20, video, lambda: media.file(entry["url"].removeprefix("media/")))
    with served:
        made = probe(served.path)
    assert (made.codec, made.profile, made.n_frames, made.width, made.height) == ("h264", "High", 4, 64, 48)


def test_a_video_is_served_whole_or_one_byte_range_of_it(tmp_path: Path) -> None:
    media, token = MediaStore(tmp_path / "previews"), "t" * 43
    name, listed = _listed_video(media, tmp_path)
    app, url, size = _media_app(media, token), f"/{token}/media/{name}", len(listed)
    status, body, headers = _asgi_get(app, url)
    assert (status, body, headers["content-type"], headers["accept-ranges"]) == (200, listed, "video/mp4", "bytes")
    assert headers["content-length"] == str(size)
    for asked, start, stop in (("bytes=10-19", 10, 20), ("bytes=100-", 100, size), ("bytes=-7", size - 7, size),
                               ("bytes=5-999999999", 5, size)):
        status, body, headers = _asgi_get(app, url, range=asked)
        assert (status, body, headers["content-range"]) == (206, listed[start:stop], f"bytes {start}-{stop - 1}/{size}")
        assert headers["content-length"] == str(stop - start), asked
    for ignored in ("bytes=0-1,5-6", "bytes=9-3", "items=0-1", "bytes=" + "9" * 40 + "-"):
        assert _asgi_get(app, url, range=ignored)[:2] == (200, listed), ignored
    assert _asgi_get(app, url, range="bytes=10-19", **{"if-range": '"x"'})[:2] == (200, listed)
    status, _, headers = _asgi_get(app, url, range=f"bytes={size}-")
    assert (status, headers["content-range"]) == (416, f"bytes */{size}")
    status, body, headers = _asgi_get(app, url, method="HEAD")
    assert (status, body, headers["content-length"]) == (200, b"", str(size))


def test_while_unchanged_reads_again_once_a_file_or_an_entry_under_a_folder_changed(tmp_path: Path) -> None:
    """The cache of a long-running ``pinbench view`` server: a reading is kept while the stats of what it read are
    (no file read again), and made again once a file named, or any entry under a folder named, changed."""
    import os

    from pinbench.core.files import tree_state, while_unchanged

    reads: list[Path] = []
    single, folder = tmp_path / "rows.jsonl", tmp_path / "data"

    @while_unchanged(lambda path: [path])
    def read(path: Path) -> int:
        reads.append(path)
        return len(reads)

    single.write_text("a\n")
    assert read(single) == read(single) == 1
    stat = single.stat()
    single.write_text("b\n")   # the same size, its mtime put back: its ctime says it was written
    os.utime(single, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert read(single) == 2
    assert read(folder) == 3 and tree_state([folder]) == ((str(folder), None),)   # not there yet
    (folder / "skill").mkdir(parents=True)
    assert read(folder) == 4
    (folder / "skill" / "task.jsonl").write_text("x\n")   # two levels down
    assert read(folder) == 5 == read(folder)
    (folder / "skill" / "task.jsonl").unlink()
    assert read(folder) == 6


def test_a_bundle_reads_and_stats_each_reading_once_not_once_a_sample_page(
        runs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``one_snapshot``: a bundle's sample pages each asked the recipe's ``while_unchanged`` readings for their files'
    state again: CameraBench's 11,222 pages stat'ed the data folder's entries 11,222 times (``compare --report`` 18 s
    and 1.3 GB, 3.6 s before the readings were keyed by state). Inside a bundle each reading is stat'ed once; outside
    one, a change is seen at the next call (the server)."""
    from pinbench.core import files
    from pinbench.ops.view import write_bundle
    from pinbench.results.view import view_of

    calls: list[tuple[Path, ...]] = []
    real = files.tree_state
    monkeypatch.setattr(files, "tree_state", lambda paths: calls.append(tuple(paths)) or real(paths))
    view = view_of((runs["a"],))
    calls.clear()
    write_bundle(view, tmp_path / "bundle")
    assert calls and len(calls) == len(set(calls)), calls   # 7 pages: each stat'ed its reading's files again

    reads: list[int] = []

    @files.while_unchanged(lambda path: [path])
    def read(path: Path) -> int:
        reads.append(1)
        return len(reads)

    rows = tmp_path / "rows.jsonl"
    rows.write_text("a\n")
    with files.one_snapshot():
        assert read(rows) == read(rows) == 1
        rows.write_text("bb\n")
        assert read(rows) == 1   # one state of the runs for the whole bundle
    assert read(rows) == 2


def _regenerated_camerabench(run: Path) -> tuple[RunInputs, str, Any]:
    from pinbench_recipes.camerabench.dataset import load_dataset
    from pinbench_recipes.camerabench.fixture import write_fixture

    data, _ = write_fixture(run / "fixture_data")
    card = types.SimpleNamespace(mode="fixture", config={}, provenance={})
    sample = load_dataset(data, ["binary"]).binary[0]
    rows = next((data / "binary_classification").glob("*.jsonl"))

    def regenerate() -> None:   # every label flipped, in place
        lines = [json.loads(line) for line in rows.read_text().splitlines()]
        rows.write_text("".join(json.dumps({**row, "label": not row["label"]}) + "\n" for row in lines))
    return RunInputs(run, card), sample.sample_id, regenerate


def _regenerated_dynamic_degree(run: Path, dd: Path) -> tuple[RunInputs, str, Any]:
    shutil.copytree(dd, run)
    inputs = View(load_runs([run])).runs[0].inputs

    def regenerate() -> None:   # a video added to the folder the run read
        shutil.copy(run / "fixture_data" / "static_8fps.mp4", run / "fixture_data" / "added.mp4")
    return inputs, "added", regenerate


def _regenerated_remembench(run: Path, a: Path) -> tuple[RunInputs, str, Any]:
    shutil.copytree(a, run)
    inputs = View(load_runs([run])).runs[0].inputs

    def regenerate() -> None:   # the release's T2V rows gone
        (run / "fixture_data" / "RememBench" / "data" / "t2v" / "test.jsonl").unlink()
    return inputs, "t2v-001", regenerate


def _recipes_with_a_view() -> list[str]:
    from pinbench.core.recipe import available_recipes

    return sorted(name for name in available_recipes() if view_module(name) is not None)


@pytest.mark.parametrize("recipe", _recipes_with_a_view())
def test_a_server_shows_a_sample_page_after_its_inputs_were_regenerated_between_two_page_loads(
        recipe: str, runs, tmp_path: Path) -> None:
    """A recipe view cached what it read by path (``functools.cache``): a long-running server showed the first
    reading until restarted. Each reads again once what it read changed (``while_unchanged``)."""
    module = view_module(recipe)
    if recipe == "mind":   # caches nothing: every page load reads its action.json
        assert not any(hasattr(f, "cache_info") or hasattr(f, "__wrapped__") for f in vars(module).values())
        return
    if recipe == "paibench-c":   # its run comes from its own tests' cached runs
        pytest.skip("recipes/paibench_c/tests/test_pc_view.py::test_a_server_sees_the_run_directory_regenerated_...")
    run = tmp_path / "run"
    inputs, sample_id, regenerate = {
        "camerabench": lambda: _regenerated_camerabench(run),
        "dynamic-degree": lambda: _regenerated_dynamic_degree(run, runs["dd"]),
        "remembench": lambda: _regenerated_remembench(run, runs["a"]),
    }[recipe]()
    first = module.sample_media(inputs, sample_id, None)
    regenerate()
    second = module.sample_media(inputs, sample_id, None)
    assert second != first
    assert second == module.sample_media(inputs, sample_id, None)


def test_a_server_shows_a_rewritten_scorecard_on_the_next_page_load(runs, tmp_path: Path) -> None:
    """The summary and the table were made once per server: a rerun that finished under it was not shown until
    restarted. Made again once a run's scorecard.json changed; on an unchanged one, the same data."""
    from pinbench.ops.view import build_app
    from pinbench.results.view import view_of

    run = Path(shutil.copytree(runs["dd"], tmp_path / "dd"))
    token = "t" * 43
    app = build_app(lambda: view_of((run,)), MediaStore(tmp_path / "previews"), token, 8123)
    first = json.loads(_asgi_get(app, f"/{token}/api/summary")[1])
    assert first["runs"][0]["checkpoint"] == "fixture"
    card = json.loads((run / "scorecard.json").read_text())
    (run / "scorecard.json").write_text(json.dumps({**card, "checkpoint": "rerun"}))
    second = json.loads(_asgi_get(app, f"/{token}/api/summary")[1])
    assert second["runs"][0]["checkpoint"] == "rerun"
    card["samples"]["n_expected"] = "many"   # a scorecard that cannot be read: said, and read again once mended
    (run / "scorecard.json").write_text(json.dumps(card))
    status, body, _ = _asgi_get(app, f"/{token}/api/table")
    assert status == 500 and str(run / "scorecard.json") in json.loads(body)["error"]
    card["samples"]["n_expected"] = first["runs"][0]["n_expected"]
    (run / "scorecard.json").write_text(json.dumps(card))
    assert json.loads(_asgi_get(app, f"/{token}/api/summary")[1]) == first


def test_a_sample_page_loaded_before_a_rerun_gets_the_sample_it_names_not_the_one_now_at_its_index(
        tmp_path: Path) -> None:
    """review93: the page asks for a sample by its index in the table it loaded; a rerun under the server that added
    or dropped a sample moved the others, and the page of "b" showed the sample now at b's index. The page names the
    id too: it gets that sample wherever it is now, or a line saying it is gone."""
    from pinbench.ops.view import build_app

    ids = ["a", "b", "c"]

    def current() -> types.SimpleNamespace:
        return types.SimpleNamespace(ids=list(ids), position={i: n for n, i in enumerate(ids)},
                                     sample=lambda index, media: {"id": ids[index]})
    token = "t" * 43
    app = build_app(current, MediaStore(tmp_path / "previews"), token, 8123)
    assert json.loads(_asgi_get(app, f"/{token}/api/sample/1?id=b")[1]) == {"id": "b"}
    ids.remove("a")   # the rerun: "b" is now #0, and #1 is "c"
    assert json.loads(_asgi_get(app, f"/{token}/api/sample/1?id=b")[1]) == {"id": "b"}
    ids.remove("b")
    status, body, _ = _asgi_get(app, f"/{token}/api/sample/1?id=b")
    assert (status, json.loads(body)) == (404, {"error": "no sample 'b' in these runs now (they changed since this "
                                                         "page was loaded: reload it)"})


def test_a_video_deleted_after_its_sample_was_opened_is_said_gone_by_its_name_in_the_run(tmp_path: Path) -> None:
    """Its 404 said "open its sample first, or the file changed" of a file that is simply gone."""
    from pinbench.ops.view import build_app

    media, token, run = MediaStore(tmp_path / "previews"), "t" * 43, tmp_path / "run"
    (run / "rollouts").mkdir(parents=True)
    name, _ = _listed_video(media, run / "rollouts")
    runs = [types.SimpleNamespace(run=types.SimpleNamespace(path=run / "scorecard.json"))]
    app = build_app(lambda: types.SimpleNamespace(ids=(), runs=runs, summary=dict, table=dict), media, token, 8123)
    (run / "rollouts" / "v.mp4").unlink()
    assert _asgi_get(app, f"/{token}/media/{name}")[:2] == (
        404, b"not found: rollouts/v.mp4 is gone from its run (deleted since its sample was opened)\n")
    assert _asgi_get(app, f"/{token}/media/{'0' * 64}.mp4")[:2] == (404, b"not found: open its sample first, or "
                                                                          b"the file changed\n")


def _preview(source: Path, digest: str, cache: Path) -> Preview:
    with open(source, "rb") as opened:
        return make_preview(source, digest, cache, fd=opened.fileno())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="MALLOC_PERTURB_ is glibc's")
def test_a_preview_is_the_same_bytes_whatever_fresh_memory_held(tmp_path: Path, synthetic_frames) -> None:
    """A preview made in fresh processes whose new allocations glibc fills with other bytes (MALLOC_PERTURB_) is one
    file: with x264's macroblock tree on (its AVX-512 code), this one was two. Red with ``mbtree`` on, on such a CPU."""
    source = write_video(tmp_path / "s.mp4", synthetic_frames(60), 16, crf=0, pix_fmt="yuv444p")
    assert probe(source).web_problem(".mp4")  # previewed, not served as it is
    digest = sha256_file(source)
    code = ("from pathlib import Path; from pinbench.media.preview import make_preview\n"
            f"with open({str(source)!r}, 'rb') as opened:\n"
            f"    print(make_preview(Path({str(source)!r}), {digest!r}, Path(__import__('sys').argv[1]),"
            " fd=opened.fileno()).sha256)")
    made = set()
    for perturb in (255, 85, 1):
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path / f"cache-{perturb}")], capture_output=True,
                              text=True, timeout=60, check=True, env={**os.environ, "MALLOC_PERTURB_": str(perturb)})
        made.add(done.stdout.split()[-1])
    assert len(made) == 1


def test_a_preview_is_frame_for_frame_and_never_of_other_bytes(runs, tmp_path: Path) -> None:
    source = runs["a"] / "fixture_data" / "rollouts" / "s01-rot180.mp4"
    facts = probe(source)
    assert facts.web_problem(".mp4").startswith("H.264 High 4:4:4 Predictive")
    digest = sha256_file(source)
    preview = _preview(source, digest, tmp_path)
    made = probe(preview.path)
    assert made.web_problem(".mp4") is None and (made.codec, made.profile, made.pix_fmt) == ("h264", "High", "yuv420p")
    assert (made.n_frames, made.rate, made.width, made.height) == (facts.n_frames, facts.rate, facts.width,
                                                                   facts.height)
    assert len(read_video(preview.path, backend="pyav").frames) == facts.n_frames
    record = json.loads((tmp_path / f"{digest}.json").read_text())
    assert record["source_sha256"] == digest and record["sha256"] == sha256_file(preview.path)
    stamp = preview.path.stat().st_mtime_ns
    assert _preview(source, digest, tmp_path).path.stat().st_mtime_ns == stamp  # made once
    with open(preview.path, "ab") as edit:
        edit.write(b"x")
    tampered = sha256_file(preview.path)
    assert cached_preview(tmp_path, digest) is None  # a cached preview that is not the one recorded is made again
    again = _preview(source, digest, tmp_path)
    assert again.sha256 == sha256_file(again.path) != tampered
    assert json.loads((tmp_path / f"{digest}.json").read_text())["sha256"] == again.sha256
    with pytest.raises(VideoError, match="bytes changed since it was hashed"):
        _preview(source, "0" * 64, tmp_path)
    assert not (tmp_path / f"{'0' * 64}.mp4").exists()


def test_a_preview_left_half_written_is_removed_when_it_is_made(tmp_path: Path) -> None:
    source = write_video(tmp_path / "v.mp4", np.zeros((4, 48, 64, 3), np.uint8), 24, crf=23)
    digest = sha256_file(source)
    cache = tmp_path / "cache"
    cache.mkdir()
    left = cache / f".{digest}.mp4.x1y2z3.tmp.mp4"  # a stop of pinbench view while this preview was made left it
    left.write_bytes(b"partial")
    other = cache / f".{'0' * 64}.mp4.x1y2z3.tmp.mp4"  # another source's: perhaps being written now
    other.write_bytes(b"partial")
    _preview(source, digest, cache)
    assert not left.exists() and other.exists()


def test_a_video_too_large_for_browsers_is_previewed_smaller(tmp_path: Path, monkeypatch) -> None:
    from pinbench.media import preview

    monkeypatch.setattr(preview, "MAX_SIDE", 60)  # 64x48 counts as too large; the long side is brought to <= 24
    monkeypatch.setattr(preview, "PREVIEW_SIDE", 24)
    frames = np.random.default_rng(0).integers(0, 256, (5, 48, 64, 3), dtype=np.uint8)
    source = write_video(tmp_path / "big.mp4", frames, 8, crf=23)
    assert probe(source).web_problem(".mp4") == "64x48 is larger than 60 pixels on a side"
    made = probe(_preview(source, sha256_file(source), tmp_path / "cache").path)
    assert (made.width, made.height, made.n_frames) == (22, 16, 5)  # a factor of 3: 21x16, padded to even


def test_browser_playable_videos_need_no_preview(tmp_path: Path) -> None:
    frames = np.zeros((4, 48, 64, 3), np.uint8)
    assert probe(write_video(tmp_path / "a.mp4", frames, 24, crf=23)).web_problem(".mp4") is None
    assert probe(write_video(tmp_path / "b.webm", frames, 24, codec="libvpx-vp9")).web_problem(".webm") is None
    mpeg4 = probe(write_video(tmp_path / "c.mp4", frames, 24, codec="mpeg4"))
    assert mpeg4.web_problem(".mp4").startswith("mpeg4 in a .mp4 file")
    assert probe(tmp_path / "a.mp4").web_problem(".mkv").startswith("h264 in a .mkv file")


# ---------------------------------------------------------------------------------------------- the server


@contextmanager
def served(*runs: Path) -> Iterator[str]:
    process = subprocess.Popen([*PINBENCH, "view", *map(str, runs)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    watchdog = threading.Timer(120, process.kill)
    watchdog.start()
    try:
        lines = []
        while not lines or not lines[-1].startswith("view page: "):
            line = process.stdout.readline()
            assert line, f"pinbench view exited ({process.wait()}): {''.join(lines)} {process.stderr.read()}"
            lines.append(line)
        watchdog.cancel()
        yield lines[-1].split(": ", 1)[1].strip()
    finally:
        watchdog.cancel()
        process.terminate()
        _, err = process.communicate(timeout=30)
        assert "Traceback" not in err, err


def _get(url: str, path: str, **headers: str) -> tuple[int, bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    connection.request("GET", path, headers=headers)  # the path as written: no '..' or %2F normalised away
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, body


@pytest.fixture(scope="module")
def server(runs) -> Iterator[str]:
    with served(runs["a"], runs["b"]) as url:
        yield url


def test_the_server_opens_only_for_its_token_host_and_origin(server) -> None:
    token, port = urlsplit(server).path.strip("/"), urlsplit(server).port
    assert _get(server, f"/{token}/api/summary")[0] == 200
    for path in ("/", "/api/summary", f"/{token[:-1]}/api/summary"):
        assert _get(server, path)[0] == 403, path
    assert _get(server, f"/{token}/api/summary", Host=f"attacker.example:{port}")[0] == 403
    assert _get(server, f"/{token}/api/summary", Origin="http://attacker.example")[0] == 403
    assert listening_addresses(port) == ["0100007F"]


def test_no_request_reads_a_file_by_its_path(server, runs) -> None:
    token = urlsplit(server).path.strip("/")
    secret = runs["a"] / "scorecard.json"
    probes = [f"/{token}/../scorecard.json", f"/{token}/..%2fscorecard.json", f"/{token}/%2e%2e/%2e%2e/etc/passwd",
              f"/{token}/media/..%2F..%2Fscorecard.json", f"/{token}/media/%2e%2e%2fscorecard.json",
              f"/{token}/media/{secret}", f"/{token}/media/{'0' * 64}.mp4", f"/{token}/view.py",
              f"/{token}/api/sample/99", f"/{token}/api/sample/-1", f"/{token}/api/sample/..%2f0",
              f"/{token}/api/sample/{'9' * 5000}"]  # int() of 5,000 digits: a 500 and a traceback before
    for path in probes:
        status, body = _get(server, path)
        assert status in (404, 405, 414), (path, status)
        assert b"recipe_version" not in body and b"root:" not in body, path


# ---------------------------------------------------------------------------------------------- folder, report, CLI


SLOW_PREVIEW = """import pathlib, sys, time
import pinbench.media.preview
pinbench.media.preview.make_preview = lambda *args, **kw: [pathlib.Path(sys.argv[2]).touch(),   # it has started
                                                           *(time.sleep(0.1) for _ in range(6000))]  # a long 4K one's
# (in short calls, as decoding is: the signal may reach another thread, which wakes no 600 s sleep of the main one)
from pinbench.cli import main
main(["view", sys.argv[1]])
"""


def test_a_stop_ends_the_page_while_a_preview_is_being_made(runs, tmp_path: Path) -> None:
    """Ctrl-C or SIGTERM while a preview was being made answered its request 503 after GRACE seconds, then kept the
    process until the preview was done (the stop waited for its worker thread), and a second Ctrl-C printed a
    traceback. The stop is sent once the preview says it has started (after a fixed second, a loaded machine's
    request had not reached it yet)."""
    from pinbench.ops.localweb import GRACE

    started = tmp_path / "preview-started"
    process = subprocess.Popen([sys.executable, "-c", SLOW_PREVIEW, str(runs["dd"]), str(started)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = next(line for line in process.stdout if line.startswith("view page: ")).split(": ", 1)[1].strip()
        token = urlsplit(url).path.strip("/")
        sample = json.loads(_get(url, f"/{token}/api/sample/0")[1])
        media = sample["runs"][0]["rollouts"][0]["url"]
        asked: list[int] = []
        video = threading.Thread(target=lambda: asked.append(_get(url, f"/{token}/{media}")[0]))
        video.start()
        deadline = time.monotonic() + 60
        while not started.exists():   # the preview is under way
            assert video.is_alive() and process.poll() is None and time.monotonic() < deadline, asked
            time.sleep(0.02)
        process.terminate()
        _, err = process.communicate(timeout=GRACE + 15)
        video.join(30)
    finally:
        process.kill()
    assert asked == [503] and process.returncode == 0 and "Traceback" not in err, err


@pytest.fixture(scope="module")
def bundle(runs, tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("bundle") / "view"
    done = _pinbench("view", "--bundle", str(dest), str(runs["a"]), str(runs["b"]))
    assert done.stdout.startswith(f"view: {dest / 'index.html'}")
    return dest


def test_a_bundle_of_a_video_named_like_a_token_writes_the_token_nowhere(runs, tmp_path: Path) -> None:
    """A video named like a token fails by name (its id is ``bad-name-...``), yet the page still shows it, and the
    bundle's media.json listed its source path, token and all, where every data script holds ``***``."""
    token = "hf_" + "Ab3De6Gh9Jk2Mn5Pq8St"
    videos = tmp_path / "videos"
    videos.mkdir()
    for name, source in (("ok", "texture_right_8fps"), (token, "short_8fps")):   # other bytes: two media
        shutil.copyfile(runs["dd"] / "fixture_data" / f"{source}.mp4", videos / f"{name}.mp4")
    run, dest = tmp_path / "run", tmp_path / "view"
    _pinbench("run", "dynamic-degree", "-c", "m", "-o", f"videos={videos}", "-o", "flow=farneback", "--skip-doctor",
              "--out", str(run), ok=(2,))   # the token's video fails: a partial run
    _pinbench("view", "--bundle", str(dest), str(run))
    assert "/***.mp4" in (dest / "media.json").read_text()
    assert [str(p) for p in [*run.rglob("*"), *dest.rglob("*")] if p.is_file() and token.encode() in p.read_bytes()] \
        == []


@pytest.mark.parametrize("command", ["view", "report"])
def test_a_bundle_says_which_samples_name_a_video_it_does_not_hold(runs, tmp_path: Path, command: str) -> None:
    """A run scores a video symlinked from outside its folder; the page refuses to show it (it leads out), and the
    bundle said only "2 of 2 samples", so a bundle sent on lacked a rollout that only its page named (report --view
    said nothing at all of its view/)."""
    videos, outside = tmp_path / "videos", tmp_path / "elsewhere.mp4"
    videos.mkdir()
    shutil.copyfile(runs["dd"] / "fixture_data" / "texture_right_8fps.mp4", videos / "ok.mp4")
    shutil.copyfile(runs["dd"] / "fixture_data" / "short_8fps.mp4", outside)
    (videos / "linked.mp4").symlink_to(outside)
    run = tmp_path / "run"
    _pinbench("run", "dynamic-degree", "-c", "m", "-o", f"videos={videos}", "-o", "flow=farneback", "--out", str(run))
    arguments, dest = _bundling(command, run, tmp_path)
    done = _pinbench(*arguments)
    assert done.stderr.splitlines()[-1] == (
        f"{'bundle' if command == 'view' else 'view'}: 1 sample names a video or image that is not in it "
        "(each one's page says why): linked: "
        f"{videos / 'linked.mp4'}: leads out of {videos} (to {outside})")
    assert len(json.loads((dest / "media.json").read_text())) == 1


def test_the_folder_holds_every_video_each_preview_made_from_the_rollouts_bytes(bundle, runs) -> None:
    everything = json.loads((bundle / "media.json").read_text())
    images = {n: e for n, e in everything.items() if n.endswith(".png")}   # the I2V conditioning images
    assert {e["source_sha256"] for e in images.values()} == {  # equal in A and B: one medium each, as they are
        sha256_file(p) for p in (runs["a"] / "fixture_data/i2v-images/images").glob("*.png")} and len(images) == 3
    assert not any(e["preview"] for e in images.values())
    listing = {n: e for n, e in everything.items() if n not in images}
    rollouts = [p.resolve() for run in (runs["a"], runs["b"]) for p in (run / "fixture_data/rollouts").glob("*.mp4")]
    broken = (runs["b"] / "fixture_data/rollouts/s02-tr180.mp4").resolve()
    digests = {sha256_file(p) for p in rollouts if p != broken}  # equal files of A and B are one medium
    assert {entry["source_sha256"] for entry in listing.values()} == digests and len(digests) == 9
    summary = (bundle / "data" / "summary.js").read_text()
    dirs = {run["label"]: run["dir"] for run in json.loads(summary[summary.index(",") + 1:-3])["runs"]}
    assert not any(Path(d).is_absolute() for d in dirs.values())   # from the bundle, as the media's sources are
    labels = {label: bundle / d for label, d in dirs.items()}
    assert sorted(p.resolve() for p in labels.values()) == sorted(runs[r].resolve() for r in "ab")
    for name, entry in listing.items():
        # the source as the run's label and the path from its folder: the bundle is copied elsewhere, where this
        # machine's absolute paths name nothing (was: an absolute path)
        assert not Path(entry["source"]).is_absolute() and entry["source"].startswith("fixture_data/rollouts/"), name
        source = labels[entry["run"]] / entry["source"]
        assert source.resolve() in rollouts and entry["preview"], name
        assert entry["source_sha256"] == sha256_file(source) == name.removesuffix(".mp4"), name
        file = bundle / "media" / name
        assert sha256_file(file) == entry["sha256"]
        assert video_info(file).n_frames == video_info(source).n_frames
        assert len(read_video(file, backend="pyav").frames) == video_info(source).n_frames
    assert sorted(p.name for p in (bundle / "media").iterdir()) == sorted(everything)
    for data in ("samples-0.js", "summary.js"):   # nor the page's data
        assert str(runs["a"].resolve()) not in (bundle / "data" / data).read_text()


def test_a_bundle_is_written_only_into_a_new_or_empty_folder_or_an_earlier_bundle(bundle, runs, tmp_path: Path) -> None:
    mine = tmp_path / "mine"   # a folder of the user's: its index.html was replaced and media/x.txt deleted
    (mine / "media").mkdir(parents=True)
    (mine / "index.html").write_text("my page")
    (mine / "media" / "x.txt").write_text("mine")
    done = _pinbench("view", "--bundle", str(mine), str(runs["a"]), ok=(2,))
    assert done.stderr == (f"error: {mine}: a folder that is no earlier bundle (it holds index.html, media); a bundle "
                           "replaces its index.html, data/ and media/: name a new or empty folder\n")
    assert (mine / "index.html").read_text() == "my page" and (mine / "media" / "x.txt").read_text() == "mine"
    (mine / "media.json").write_text("{}")   # a web folder's own media.json: it was taken for a bundle's
    done = _pinbench("view", "--bundle", str(mine), str(runs["a"]), ok=(2,))
    assert done.stderr.startswith(f"error: {mine}: a folder that is no earlier bundle (it holds index.html, media, ")
    assert (mine / "index.html").read_text() == "my page" and (mine / "media" / "x.txt").read_text() == "mine"
    (tmp_path / "file").write_text("x")
    done = _pinbench("view", "--bundle", str(tmp_path / "file"), str(runs["a"]), ok=(2,))
    assert done.stderr == (f"error: {tmp_path / 'file'}: a regular file, not a folder; name a new folder for the "
                           "bundle\n")
    videos = tmp_path / "videos"  # the user's, linked as an earlier bundle's media/: its files were deleted
    videos.mkdir()
    (videos / "holiday.mp4").write_text("mine")
    linked = tmp_path / "linked"
    shutil.copytree(bundle, linked)
    shutil.rmtree(linked / "media")
    (linked / "media").symlink_to(videos)
    done = _pinbench("view", "--bundle", str(linked), str(runs["a"]), ok=(2,))
    assert done.stderr == (f"error: {linked / 'media'}: a symlink (to {videos}), not a folder of the bundle's own: a "
                           "bundle deletes the files it did not write under media/; remove it, or name a new folder\n")
    assert [p.name for p in videos.iterdir()] == ["holiday.mp4"]
    (tmp_path / "empty").mkdir()
    for dest in (tmp_path / "empty", bundle):   # an empty folder, and an earlier bundle written again
        done = _pinbench("view", "--bundle", str(dest), str(runs["a"]), str(runs["b"]))
        assert done.stdout.startswith(f"view: {dest / 'index.html'}")


def test_a_bundle_written_again_replaces_a_link_or_fifo_in_its_media_never_writes_through_it(runs,
                                                                                          tmp_path: Path) -> None:
    """An earlier bundle's media/<sha>.mp4 that is a symlink (a medium 'linked to save space') had the new copy
    written through it, onto the file it led to outside the bundle; one that is a FIFO held the bundle for ever."""
    dest = tmp_path / "view"
    _pinbench("view", "--bundle", str(dest), str(runs["dd"]))
    linked, piped = sorted((dest / "media").iterdir())[:2]
    want = {p.name: p.read_bytes() for p in (linked, piped)}
    victim = tmp_path / "notes.txt"
    victim.write_text("mine")
    linked.unlink()
    linked.symlink_to(victim)
    piped.unlink()
    os.mkfifo(piped)
    done = subprocess.run([*PINBENCH, "view", "--bundle", str(dest), str(runs["dd"])], capture_output=True,
                          text=True, timeout=WAIT, env={**os.environ, "PINBENCH_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "mine"
    assert {p.name: p.read_bytes() for p in (linked, piped) if not p.is_symlink() and p.is_file()} == want


HELD_BUNDLE = """import os, sys, time
import pinbench.media.preview
made = pinbench.media.preview.make_preview
def held(*args, **kw):   # the bundle half written: its first preview waits for the test's word
    open(os.environ["HELD"], "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(os.environ["RELEASE"]) and time.monotonic() < deadline:
        time.sleep(0.02)
    return made(*args, **kw)
pinbench.media.preview.make_preview = held
from pinbench.cli import main
main(sys.argv[1:])
"""


def test_a_second_bundle_into_a_folder_being_written_is_refused_naming_the_first(runs, tmp_path: Path) -> None:
    """Two ``view --bundle`` into one folder at once mixed their index.html, data/ and media/, and the cleanup of
    one deleted the media of the other. The second is refused in one line naming the folder and the first's
    process, and leaves the first's bundle whole; the lock's file is gone from the finished bundle (it stayed
    there empty, a hidden file copied to the web server with the bundle)."""
    dest, held, release = tmp_path / "view", tmp_path / "held", tmp_path / "release"
    first = subprocess.Popen([sys.executable, "-c", HELD_BUNDLE, "view", "--bundle", str(dest), str(runs["dd"])],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PINBENCH_OFFLINE": "1", "HELD": str(held), "RELEASE": str(release)})
    try:
        deadline = time.monotonic() + WAIT
        while not held.exists():
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read() if first.stderr else ""
            time.sleep(0.02)
        second = _pinbench("view", "--bundle", str(dest), str(runs["a"]), ok=(0, 2))
        release.touch()
        out, err = first.communicate(timeout=WAIT)
    finally:
        first.kill()
    assert second.returncode == 2 and second.stderr.count("\n") == 1, second.stderr
    assert second.stderr.startswith(f"error: {dest}: another pinbench is writing a bundle into it (pid {first.pid} "
                                    f"on {os.uname().nodename} since "), second.stderr
    assert second.stderr.endswith("); retry once it has ended\n"), second.stderr
    assert first.returncode == 0 and out.startswith(f"view: {dest / 'index.html'}"), err
    listed = json.loads((dest / "media.json").read_text())
    assert sorted(p.name for p in (dest / "media").iterdir()) == sorted(listed)
    summary = (dest / "data" / "summary.js").read_text()
    assert "dynamic-degree" in summary and "remembench" not in summary   # the first's runs alone
    assert list(dest.glob(".*.lock")) == []


def test_a_lock_let_go_removes_its_file_only_while_it_is_the_one_held(tmp_path: Path) -> None:
    """``release_named`` removes the lock's file it holds; one made in its place (by a process that took over a
    removed one) stays, as does a file a symlink there points to."""
    from pinbench.core.rundir import hold_named, release_named

    lock = tmp_path / ".held.lock"
    release_named(lock, hold_named(lock, 0o644))
    assert not lock.exists()
    fd = hold_named(lock, 0o644)
    lock.unlink()
    lock.write_text("another's")
    release_named(lock, fd)
    assert lock.read_text() == "another's"
    lock.unlink()
    fd = hold_named(lock, 0o644)
    os.replace(lock, tmp_path / "target")
    lock.symlink_to(tmp_path / "target")
    release_named(lock, fd)
    assert lock.is_symlink() and (tmp_path / "target").exists()


@pytest.mark.parametrize("replacement", ["file", "symlink loop"])
def test_a_lock_whose_folder_was_replaced_is_let_go_without_a_traceback(tmp_path: Path, replacement: str) -> None:
    """The folder of a held lock replaced by a file (or a symlink loop) while held: ``release_named`` raised
    NotADirectoryError (ELOOP) at the end of a finished command. No file there can be the one held; that in the way
    stays, and the descriptor is closed."""
    from pinbench.core.rundir import hold_named, release_named

    folder = tmp_path / "bundle"
    folder.mkdir()
    fd = hold_named(folder / ".held.lock", 0o644)
    shutil.rmtree(folder)
    if replacement == "file":
        folder.write_text("x")
    else:
        folder.symlink_to(folder)
    release_named(folder / ".held.lock", fd)
    assert folder.is_symlink() if replacement != "file" else folder.read_text() == "x"
    with pytest.raises(OSError):
        os.fstat(fd)


@pytest.mark.parametrize("denied", ["lstat", "unlink"])
def test_a_lock_whose_folder_became_unreadable_is_let_go_in_one_line(tmp_path: Path, monkeypatch, capsys,
                                                                       denied: str) -> None:
    """The folder of a held lock made unreadable (or unwritable) while held: ``release_named`` raised PermissionError
    at the end of a finished command. The lock is let go, its file left, and stderr says so in one line. Root ignores
    modes, so the denial is a test double: ``os.lstat`` or ``os.unlink`` raising EACCES for the lock's path."""
    from pinbench.core.rundir import hold_named, release_named

    lock = tmp_path / ".held.lock"
    fd = hold_named(lock, 0o644)
    real = getattr(os, denied)

    def denied_double(path, *args, **kwargs):   # test double of a folder this process may not read or write
        if Path(path) == lock:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, denied, denied_double)
    release_named(lock, fd)
    monkeypatch.undo()
    assert capsys.readouterr().err == (f"pinbench: could not remove the lock file {lock} (Permission denied): the "
                                       "lock is let go; the file may stay\n")
    assert lock.is_file()
    with pytest.raises(OSError):
        os.fstat(fd)


def test_a_folder_in_a_bundles_media_is_named_and_left_as_it_is(runs, tmp_path: Path) -> None:
    """The cleanup of an earlier bundle's media/ unlinked each name it did not write: a folder there failed it at the
    end, 'Is a directory', its data written and no media.json. It is named before anything is written, and kept."""
    dest = tmp_path / "view"
    _pinbench("view", "--bundle", str(dest), str(runs["dd"]))
    (dest / "media" / "mine").mkdir()
    (dest / "media" / "mine" / "notes.txt").write_text("mine")
    (dest / "data" / "table.js").unlink()
    done = _pinbench("view", "--bundle", str(dest), str(runs["dd"]), ok=(2,))
    assert done.stderr == (f"error: {dest / 'media' / 'mine'}: a folder in the bundle's media/, where it writes only "
                           "files and deletes those it did not write: remove it, or name a new folder\n")
    assert (dest / "media" / "mine" / "notes.txt").read_text() == "mine" and not (dest / "data" / "table.js").exists()


def test_a_folder_at_a_medium_s_name_in_a_bundle_is_named_in_one_line(runs, tmp_path: Path) -> None:
    """A folder at media/<sha>.mp4 of an earlier bundle: exit 2 named the temporary file the copy was written to
    (media/.<sha>.mp4.*.tmp, which is no folder and was removed), not the folder in the way (review57). It is named
    before anything is written, as a folder at any name there is."""
    dest = tmp_path / "view"
    _pinbench("view", "--bundle", str(dest), str(runs["dd"]))
    folder = sorted((dest / "media").iterdir())[0]
    folder.unlink()
    folder.mkdir()
    done = _pinbench("view", "--bundle", str(dest), str(runs["dd"]), ok=(2,))
    assert done.stderr == (f"error: {folder}: a folder in the bundle's media/, where it writes only files and deletes "
                           "those it did not write: remove it, or name a new folder\n")
    assert not [p.name for p in (dest / "media").iterdir() if p.name.endswith(".tmp")]


def test_the_report_links_each_sample_it_names_to_its_page(runs, tmp_path: Path) -> None:
    out = tmp_path / "report"
    _pinbench("report", str(runs["b"] / "scorecard.json"), "--out", str(out), "--view")
    page = (out / "index.html").read_text()
    assert '<a href="view/index.html#/sample/s02-tr180"><code>s02-tr180</code></a>' in page
    table = (out / "view" / "data" / "table.js").read_text()
    assert '"s02-tr180"' in table
    linked = json.loads((out / "view" / "media.json").read_text())
    videos = [entry for name, entry in linked.items() if name.endswith(".mp4")]
    assert videos and all(entry["preview"] for entry in videos)  # every fixture rollout needs one
    _pinbench("compare", str(runs["a"]), str(runs["b"]), "--report", str(tmp_path / "compare"), ok=(1, 2))
    assert 'href="view/index.html#/sample/s02-tr180"' in (tmp_path / "compare" / "index.html").read_text()


def _bundling(command: str, run: Path, tmp_path: Path) -> tuple[list[str], Path]:
    """The arguments of ``command`` writing a bundle of ``run``, and the bundle's folder: view --bundle's, or the
    one ``report --view`` writes in its out/view."""
    if command == "view":
        return ["view", "--bundle", str(tmp_path / "bundle"), str(run)], tmp_path / "bundle"
    return ["report", str(run), "--out", str(tmp_path / "report"), "--view"], tmp_path / "report" / "view"


@pytest.mark.parametrize("command", ["view", "report"])
def test_a_bundle_interrupted_says_it_is_half_written(runs, tmp_path: Path, monkeypatch, command: str) -> None:
    """Ctrl-C while a bundle was written was a silent exit 130, leaving a folder that looks like a bundle (report
    --view's out/view too)."""
    from typer.testing import CliRunner

    from pinbench import cli
    from pinbench.ops import view

    def interrupted(page, dest, **kwargs):
        (dest / "data").mkdir(parents=True)
        raise KeyboardInterrupt

    monkeypatch.setattr(view, "write_bundle", interrupted)
    args, dest = _bundling(command, runs["dd"], tmp_path)
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 130
    assert result.stderr == f"interrupted: {dest} holds a bundle half written; run the same command to finish it\n"


SLOW_BUNDLE = """import sys, time
import pinbench.media.preview
pinbench.media.preview.make_preview = lambda *args, **kw: [time.sleep(0.1) for _ in range(6000)]  # a long 4K rollout's
# (in short calls, as decoding is: the signal may reach another thread, which wakes no 600 s sleep of the main one)
from pinbench.cli import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize("command", ["view", "report"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_bundle_terminated_says_it_is_half_written(runs, tmp_path: Path, signum: int, command: str) -> None:
    """SIGTERM (a job's time limit) or SIGHUP (a lost SSH session) while a bundle was written ended the process with
    no word (exit -15, -1), where Ctrl-C says the folder holds a half-written bundle (report --view's out/view too)."""
    args, dest = _bundling(command, runs["dd"], tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", SLOW_BUNDLE, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:  # looked at while it stands still: the signal lands while the bundle is being written
            stopped.stop(proc)
            if (dest / "data" / "samples-0.js").exists() or proc.poll() is not None or time.monotonic() > deadline:
                break
            proc.send_signal(signal.SIGCONT)
            time.sleep(0.05)
        assert proc.poll() is None and not (dest / "media.json").exists()
        proc.send_signal(signum)
        proc.send_signal(signal.SIGCONT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signum, err
    name = signal.Signals(signum).name
    assert err.endswith(f"terminated by {name}: {dest} holds a bundle half written; run the same command to finish "
                        "it\n"), err


def test_one_run_named_twice_is_refused_in_one_line(runs) -> None:
    """``pinbench view R R`` (or R and R/scorecard.json) showed two identical columns without a word (``load_runs``
    called here: the command serves its page until stopped when it does not refuse)."""
    with pytest.raises(ViewError) as refused:
        load_runs([runs["dd"], runs["a"], runs["dd"] / "scorecard.json"])
    assert str(refused.value) == (f"{runs['dd']} and {runs['dd'] / 'scorecard.json'} are the same scorecard "
                                  f"({runs['dd'] / 'scorecard.json'}): name each run once")


def test_runs_of_two_recipes_or_no_run_are_refused_in_one_line(runs, tmp_path: Path) -> None:
    done = _pinbench("view", str(runs["a"]), str(runs["dd"]), ok=(2,))
    assert done.stderr == "error: runs of one recipe are viewed together, these are of dynamic-degree, remembench\n"
    done = _pinbench("view", str(tmp_path / "nothing"), ok=(2,))
    assert done.stderr.count("\n") == 1 and str(tmp_path / "nothing") in done.stderr
    going = tmp_path / "going"  # a run whose scorecard is not written yet: said as "scorecard.json: file not found"
    shutil.copytree(runs["dd"], going)
    (going / "scorecard.json").unlink()
    done = _pinbench("view", str(going), ok=(2,))
    assert done.stderr == (f"error: {going / 'scorecard.json'}: file not found: no scorecard yet (its run is still "
                           f"going, was stopped, or its shards await the merge: pinbench status {going})\n")


# ---------------------------------------------------------------------------------------------- in a browser


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with driven("--window-size=1400,1000", "--autoplay-policy=no-user-gesture-required",
                "--allow-file-access-from-files") as driver:
        yield driver


def _ready(driver, url: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    WebDriverWait(driver, WAIT).until(
        lambda d: d.find_element("id", "status").get_attribute("data-state") in ("ready", "error"))
    assert driver.find_element("id", "status").get_attribute("data-state") == "ready", \
        driver.find_element("id", "status").text


def _times(driver) -> list[float]:
    return driver.execute_script("return Array.from(document.querySelectorAll('video[data-role=rollout]'))"
                                 ".map(v => v.currentTime)")


def _shown_metrics(driver, cards: list[dict]) -> None:
    """Every metric value on the page is its scorecard's, bit for bit."""
    cells = driver.execute_script("return Array.from(document.querySelectorAll('#metric-table td.metric-value'))"
                                  ".map(td => [td.closest('tr').dataset.metric, +td.dataset.run, td.dataset.value])")
    assert len(cells) == sum(len(card["metrics"]) for card in cards)
    for name, run, value in cells:
        assert float(value) == cards[run]["metrics"][name]["value"], (name, run)


def _sync(driver, fps: float, what: str) -> None:
    times = _times(driver)
    assert len(times) == 2 and abs(times[0] - times[1]) < 1 / fps, (what, times)


@needs_browser
def test_two_runs_sorted_by_difference_play_in_sync(server, runs, browser) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait

    wait = WebDriverWait(browser, WAIT)
    _ready(browser, server)
    _shown_metrics(browser, [_card(runs["a"]), _card(runs["b"])])
    Select(browser.find_element("id", "sort")).select_by_value("diff")
    wait.until(lambda d: "sort=diff" in d.current_url)
    a, b = _records(runs["a"]), _records(runs["b"])
    for key in ("lpips_alex", "clip"):  # B's noise raises LPIPS and lowers CLIP: the largest difference either way
        Select(browser.find_element("id", "value")).select_by_value(key)
        wait.until(lambda d, key=key: f"value={key}" in d.current_url and "sort=diff" in d.current_url)
        gaps = {s: abs(b[s]["result"][key] - a[s]["result"][key]) for s in a if b[s]["result"]}
        expected = sorted(gaps, key=lambda s, gaps=gaps: -gaps[s])  # ties in task order
        assert sorted(gaps.values())[-2] > 0  # two samples differ, by unequal amounts
        rows = browser.find_elements("css selector", "#sample-table tbody tr")  # s02-tr180 failed in B: last
        assert [row.get_attribute("data-id") for row in rows] == [*expected, "s02-tr180"], key
    browser.find_element("css selector", f"#sample-table tr[data-id='{expected[0]}'] a").click()
    wait.until(lambda d: d.find_element("id", "status").get_attribute("data-state") == "ready"
               and d.find_element("id", "status").text == expected[0])
    shown = browser.execute_script("return Array.from(document.querySelectorAll('#sample-metrics td[data-run]'))"
                                   ".map(td => [td.closest('tr').dataset.metric, +td.dataset.run, td.dataset.value])")
    for name, run, value in shown:
        assert float(value) == (a, b)[run][expected[0]]["result"][name.split("/")[-1]], (name, run)
    fps = float(browser.find_element("css selector", "video[data-role=rollout]").get_attribute("data-fps"))
    browser.find_element("id", "play").click()
    wait.until(lambda d: min(_times(d)) > 0.5)
    _sync(browser, fps, "playing")
    browser.find_element("id", "play").click()
    wait.until(lambda d: d.find_element("id", "play").text.endswith("play"))
    _sync(browser, fps, "paused")
    browser.execute_script("const s = document.getElementById('scrub'); s.value = 200; "
                           "s.dispatchEvent(new Event('input'));")
    wait.until(lambda d: d.find_element("id", "frame-number").text == "200")
    _sync(browser, fps, "scrubbed")
    assert all(abs(t - 200.5 / fps) < 0.5 / fps for t in _times(browser))
    ActionChains(browser).send_keys(Keys.ARROW_RIGHT).perform()
    wait.until(lambda d: d.find_element("id", "frame-number").text == "201")
    assert all(abs(t - 201.5 / fps) < 0.5 / fps for t in _times(browser))
    ActionChains(browser).key_down(Keys.SHIFT).send_keys(Keys.ARROW_LEFT).key_up(Keys.SHIFT).perform()
    wait.until(lambda d: d.find_element("id", "frame-number").text == "191")
    _sync(browser, fps, "stepped")


@needs_browser
def test_a_dynamic_degree_sample_shows_its_flow_against_tau(runs, browser) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    result = _records(runs["dd"])["stop_and_go_16fps"]["result"]
    with served(runs["dd"]) as url:
        _ready(browser, url)
        _shown_metrics(browser, [_card(runs["dd"])])
        _ready(browser, url + "#/sample/stop_and_go_16fps")
        lines = browser.find_elements("css selector", "svg.series polyline")
        assert len(lines) == len([c for c in result["clips"] if c["m"]]) == 2
        assert len(lines[0].get_attribute("points").split()) == len(result["clips"][0]["m"])
        assert f"tau = {result['tau']:.6g}" in browser.find_element("css selector", "svg.series").text
        browser.find_element("id", "play").click()
        WebDriverWait(browser, WAIT).until(lambda d: _times(d)[0] > 0.3)


@needs_browser
def test_a_sample_address_with_a_stray_percent_says_no_such_sample(server, browser) -> None:
    """``#/sample/%`` (hand-edited, or cut short) was "URI malformed" and no page when opened, and left the sample
    table on show, under the new address, when followed from the page (an uncaught URIError)."""
    from selenium.webdriver.support.ui import WebDriverWait

    for typed in ("%", "t2v-00%"):
        _ready(browser, f"{server}#/sample/{typed}")
        assert browser.find_element("id", "status").text == "no such sample"
        assert browser.find_element("css selector", "#main p.warn").text == f"no sample {typed} in these runs"
    _ready(browser, server)
    browser.execute_script("location.hash = '#/sample/%'")
    WebDriverWait(browser, WAIT).until(lambda d: d.find_element("id", "status").text == "no such sample")


@needs_browser
def test_runs_after_the_26th_are_named_aa_ab(runs, browser, tmp_path: Path) -> None:
    """The 27th run was named "[" (the character after Z) on every table of the page."""
    for k in range(28):
        shutil.copytree(runs["dd"], tmp_path / f"r{k:02d}")
    with served(*sorted(tmp_path.iterdir())) as url:
        _ready(browser, url)
        names = browser.execute_script("return Array.from(document.querySelectorAll('#runs tr[data-run] b'))"
                                       ".map(b => b.textContent)")
    assert names == [f"{chr(65 + k)} " for k in range(26)] + ["AA ", "AB "]


def _listed_per_run(browser, list_class: str) -> list[list[str]]:
    """Each row of the runs table: the items of its lists of class ``list_class``."""
    return browser.execute_script("return Array.from(document.querySelectorAll('#runs tr[data-run]'))"
                                  f".map(tr => Array.from(tr.querySelectorAll('.{list_class} li'))"
                                  ".map(li => li.textContent))")


@needs_browser
def test_the_runs_table_lists_what_a_run_ran_differently(runs, browser, tmp_path: Path) -> None:
    with served(runs["dd"], _driven_elsewhere(runs["dd"], tmp_path / "other")) as url:
        _ready(browser, url)
        shown = _listed_per_run(browser, "ran-differently")
    assert len(shown) == 2 and shown[0] == [] and len(shown[1]) == 1
    assert shown[1][0].startswith("from run A: driver: A ") and shown[1][0].endswith(", this run 560.35.03")


@needs_browser
def test_the_runs_table_says_why_a_run_did_not_match_its_reference(runs, browser, tmp_path: Path) -> None:
    with served(runs["dd"], _recorded_as(runs["dd"], tmp_path / "other", recipe_version="9.9")) as url:
        _ready(browser, url)
        shown = _listed_per_run(browser, "verdict-why")
    assert len(shown) == 2 and shown[0] == [] and len(shown[1]) == 1
    assert shown[1][0].startswith("recipe_version mismatch: ") and shown[1][0].endswith("scorecard is '9.9'")
    many = _recorded_as(runs["b"], tmp_path / "many", recipe_version="9.9")
    card = _card(many)
    for metric in card["metrics"].values():  # each metric of the reference: "the reference says higher is better"
        metric["direction"] = {"higher": "lower", "lower": "higher"}[metric["direction"]]
    (many / "scorecard.json").write_text(json.dumps(card))
    problems = View(load_runs([many])).summary()["runs"][0]["problems"]
    assert len(problems) > 4
    with served(many) as url:  # three said, the rest folded: eleven lines pushed every table off the screen
        _ready(browser, url)
        said, folded, more = browser.execute_script(
            "const ul = document.querySelector('#runs .verdict-why');"
            "return [Array.from(ul.querySelectorAll(':scope > li:not(.more)')).map(li => li.textContent),"
            "Array.from(ul.querySelectorAll('li.more details li')).map(li => li.textContent),"
            "ul.querySelector('li.more summary').textContent]")
    assert said == problems[:3] and folded == problems[3:] and more == f"{len(problems) - 3} more"


@needs_browser
def test_the_folder_opens_from_file_and_plays_its_previews(bundle, browser) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    _ready(browser, (bundle / "index.html").as_uri() + "#/sample/t2v-001")
    sources = browser.execute_script("return Array.from(document.querySelectorAll('video[data-role=rollout]'))"
                                     ".map(v => [v.currentSrc, v.readyState, v.videoWidth])")
    listing = json.loads((bundle / "media.json").read_text())
    for src, ready, width in sources:
        assert src.startswith((bundle / "media").as_uri()) and listing[src.rsplit("/", 1)[1]]["preview"]
        assert ready >= 2 and width == 64
    fps = float(browser.find_element("css selector", "video[data-role=rollout]").get_attribute("data-fps"))
    browser.find_element("id", "play").click()
    WebDriverWait(browser, WAIT).until(lambda d: min(_times(d)) > 0.5)
    _sync(browser, fps, "playing from file://")


@needs_browser
def test_the_camerabench_view_of_11222_samples_opens_quickly(browser, tmp_path: Path, capsys,
                                                              record_property) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    data = shared_data("camerabench")
    if data is None:
        pytest.skip("needs ../shared/data/camerabench (the pinned data folder tools/bench_scale.py scores)")
    from bench_scale import write_scores

    assert write_scores(1.0, tmp_path / "scores") == 11222
    run = tmp_path / "run"
    _pinbench("run", "camerabench", "--checkpoint", "gpt-4o", "-o", f"scores={tmp_path / 'scores'}", "-o",
              f"data={data}", "--offline", "--out", str(run), ok=(0, 1))
    with served(run) as url:
        started = time.perf_counter()
        browser.get(url)
        WebDriverWait(browser, WAIT).until(lambda d: d.execute_script("return document.body.dataset.tableShownMs"))
        wall = time.perf_counter() - started
        shown = int(browser.execute_script("return document.body.dataset.tableShownMs"))
        rows = browser.find_elements("css selector", "#sample-table tbody tr")
        assert len(rows) == 100 and "of 11222 (11222 in all)" in browser.find_element("id", "page-info").text
    record_property("camerabench_table_shown_ms", shown)
    with capsys.disabled():
        print(f"\nCameraBench view, 11222 samples: sample table shown {shown} ms after navigation start "
              f"(browser clock), {wall:.2f} s from driver.get to shown")


def test_a_failed_samples_video_replaced_since_is_said_not_to_be_what_failed(runs, tmp_path: Path) -> None:
    """Run B failed on its cut ``s02-tr180.mp4``; its record keeps no digest of those bytes, so the page showed the
    video put there since with no word, as if it were what failed."""
    run = tmp_path / "rb-b"
    shutil.copytree(runs["b"], run)
    video = (run / "fixture_data/rollouts/s02-tr180.mp4").resolve()
    error = _records(run)["s02-tr180"]["error"]
    assert f"{video.name}: truncated: " in error
    view = View(load_runs([run]), view_module("remembench"))
    media = MediaStore(tmp_path / "previews")
    cut = view.sample(view.ids.index("s02-tr180"), media.describe)["runs"][0]["rollouts"][0]
    assert cut["problem"].startswith(f"{video}: truncated: ") and "mismatch" not in cut   # today's file says it
    shutil.copyfile(run / "fixture_data/rollouts/t2v-000.mp4", video)
    rollout = view.sample(view.ids.index("s02-tr180"), media.describe)["runs"][0]["rollouts"][0]
    n_frames = read_video(video, backend="pyav").info.n_frames
    assert rollout["mismatch"] == (f"{video} decodes now ({n_frames} frames), but the run failed on it ({error}): it "
                                   f"holds other bytes than the run read")
    other = media.describe(0, Video("rollout", MediaFile(video.parent, video.name), failed="RuntimeError: no memory"))
    assert other["mismatch"] == (f"the run failed on this sample and kept no digest of the bytes it read: {video} is "
                                 f"shown as it is now")
    ok = view.sample(view.ids.index("t2v-000"), media.describe)["runs"][0]["rollouts"][0]
    assert "mismatch" not in ok
    # MIND's GT and rollout are both video.mp4: a sample failed on its cut GT said the rollout was replaced since
    (tmp_path / "gen/front/t1").mkdir(parents=True)
    shutil.copyfile(video, tmp_path / "gen/front/t1/video.mp4")
    gt_cut = f"VideoError: /gt/front/test/t1/video.mp4: truncated: {error.split(': truncated: ', 1)[1]}"
    rollout = media.describe(0, Video("rollout", MediaFile(tmp_path / "gen", "front/t1/video.mp4"), failed=gt_cut))
    assert rollout["mismatch"].startswith("the run failed on this sample and kept no digest of the bytes it read")


def test_a_scorecard_kept_aside_shows_its_run_directorys_rollouts_where_they_are_still_what_it_scored(
        runs, tmp_path: Path) -> None:
    """B was rerun over A's copy after its rollouts t2v-001, t2v-002 and s02-tr180 changed: A's scorecard kept aside
    in B looked for rollouts in the aside folder, "no rollout in .../rollouts: looked for " (nothing) for every
    sample. It shows B's rollouts now: checked against its records, the replaced ones said replaced since."""
    aside = next(runs["b"].glob("scorecard.aside-*"))
    view = View(load_runs([aside]), view_module("remembench"))
    assert view.runs[0].inputs.dir == runs["b"] and view.runs[0].inputs.aside
    media = MediaStore(tmp_path / "previews")
    records = _records(aside)
    rollouts = runs["b"].resolve() / "fixture_data" / "rollouts"
    same = view.sample(view.ids.index("t2v-000"), media.describe)["runs"][0]["rollouts"][0]
    assert same["sha256"] == records["t2v-000"]["result"]["video_sha256"] and "mismatch" not in same
    replaced = view.sample(view.ids.index("t2v-001"), media.describe)["runs"][0]["rollouts"][0]
    now = sha256_file(rollouts / "t2v-001.mp4")
    assert replaced["mismatch"] == (
        f"{rollouts / 't2v-001.mp4'} holds other bytes (sha256 {now[:12]}...) than the run scored "
        f"({records['t2v-001']['result']['video_sha256'][:12]}...): replaced since it was scored (this scorecard "
        "was kept aside)")
    # a recipe whose record keeps no digest (MIND; PAI-Bench-C, whose stamp is the rerun's): said shown as it is now
    unsure = media.describe(0, view._qualified(view.runs[0], Video("rollout", MediaFile(rollouts, "t2v-000.mp4")),
                                               "ok", None))
    assert unsure["mismatch"] == (f"this scorecard was kept aside, and its record keeps no digest of the bytes it "
                                  f"read: {rollouts / 't2v-000.mp4'} is shown as it is now")
    # moved by hand into a run directory of another recipe (dynamic-degree's): not read against its files
    other = tmp_path / "dd"
    other.mkdir()
    shutil.copy(runs["dd"] / "pinbench-run.json", other)
    moved = Path(shutil.copytree(aside, other / aside.name))
    inputs = View(load_runs([moved]), view_module("remembench")).runs[0].inputs
    assert inputs.dir == moved and not inputs.aside
    (other / "pinbench-run.json").write_text('{"recipe": ')   # whose directory unknown: a folder of its own
    inputs = View(load_runs([moved]), view_module("remembench")).runs[0].inputs
    assert inputs.dir == moved and not inputs.aside


def test_a_paibench_scorecard_kept_aside_reads_no_digest_from_the_reruns_generation_records(tmp_path: Path) -> None:
    from pinbench.core.store import encode_line, record_bytes
    from pinbench_recipes.paibench_c.view import sample_media as pai_media

    run = _bare_run(tmp_path / "pai", "paibench-c")
    (run.dir / "generation/samples").mkdir(parents=True)
    kept = SampleRecord("depth.task_0001", "ok", {"output": "depth/task_0001.mp4", "sha256": "1" * 64}, None,
                        "0" * 64, 0.1)
    (run.dir / "generation/samples/run.jsonl").write_bytes(encode_line(record_bytes(kept.to_json())))
    named = {v.label: v.expected_sha256 for v in pai_media(run, "task_0001", None).rollouts}
    assert named["depth"] == "1" * 64
    aside = dataclasses.replace(run, aside=True)
    assert {v.label: v.expected_sha256 for v in pai_media(aside, "task_0001", None).rollouts}["depth"] is None


def test_a_run_says_which_samples_had_other_inputs_than_its_recorded_references_run(runs, tmp_path: Path,
                                                                                      monkeypatch) -> None:
    """review76: the view judged a run against a reference keeping its run's inputs (source.inputs) without the run's
    input hashes: pinbench diff named the sample of other inputs, the page did not."""
    import yaml

    from pinbench.core.recipe import Recipe
    from pinbench.core.reference import recorded_inputs

    ref = tmp_path / "recorded.yaml"
    _pinbench("record-reference", str(runs["dd"]), "--out", str(ref), "--tier", "cross_hw")
    data = yaml.safe_load(ref.read_text())
    kept = data["source"]["inputs"]
    kept["samples"]["short_8fps"] = "0" * 64   # its run's video was another
    kept["sha256"] = recorded_inputs(kept["samples"])["sha256"]   # as its run recorded them (checked when loaded)
    ref.write_text(yaml.safe_dump(data, sort_keys=False))
    monkeypatch.setattr(Recipe, "reference_of", lambda recipe, card: ref)
    said = View(load_runs([runs["dd"]])).summary()["runs"][0]["ran_differently"]
    assert [line for line in said if "other inputs" in line] == [
        "from the reference's run: other inputs: 1 of 5 samples was computed from other inputs in the reference's "
        "run and this run (the input hash of its task differs: an input file's content or an option): short_8fps"]
