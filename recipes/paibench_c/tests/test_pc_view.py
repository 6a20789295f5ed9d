"""What ``pinbench view`` reads of a PAI-Bench-C run: each video checked against the rollout its task was scored from
(evaluated by the run or taken from the sample cache), each task's inputs and prompt from its requests' rows, and
generation records or requests unreadable are no traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from pinbench.core.files import sha256_file
from pinbench.core.recipe import get_recipe
from pinbench.ops.launch import run_recipe
from pinbench.ops.view import MediaStore
from pinbench.results.view import RunInputs, View, load_runs, view_module
from pinbench_recipes.paibench_c import fixture, view
from pinbench_recipes.paibench_c.rows import MODALITIES

TASKS = [f"task_{i:04d}" for i in range(fixture.N_TASKS)]

@pytest.fixture(scope="module")
def cached_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A on 2 tasks, B on all 4 (tasks 0 and 1 taken from the sample cache), C on all 4 (every task taken from it):
    one sample cache of their own."""
    root = tmp_path_factory.mktemp("cached")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PINBENCH_SAMPLE_CACHE", str(root / "sample-cache"))
        runs = {name: root / name for name in "ABC"}
        run_recipe(get_recipe("paibench-c").config(out_dir=runs["A"], fixture=True, env={}, limit=2))
        for name in "BC":
            assert run_recipe(get_recipe("paibench-c").config(out_dir=runs[name], fixture=True, env={})).exit_code == 0
    return runs


def _rollouts(run: Path, task: str, tmp_path: Path) -> dict[str, dict]:
    view = View(load_runs([run]), view_module("paibench-c"))
    entry = view.sample(view.ids.index(task), MediaStore(tmp_path / "previews").describe)["runs"][0]
    assert entry["status"] == "ok"
    return {r["label"]: {**r, "problems": entry["problems"]} for r in entry["rollouts"]}


@pytest.mark.parametrize(("run", "cached"), [("B", TASKS[:2]), ("C", TASKS)])
def test_every_video_is_checked_against_the_rollout_its_task_was_scored_from(cached_runs, run: str, cached: list[str],
                                                                             tmp_path: Path) -> None:
    """The digests came from each modality's ``eval_stamp.json``, which names only the tasks this run evaluated: the
    videos of the tasks taken from the sample cache (B's first two; all of C's, which has no stamp) were shown
    unchecked. Every one is checked now, against the rollout the generation step kept."""
    out = cached_runs[run]
    assert json.loads((out / "scorecard.json").read_text())["extra"]["from_sample_cache"] == cached
    assert not (out / "edge" / "eval_stamp.json").exists() or cached != TASKS
    for task in TASKS:
        shown = _rollouts(out, task, tmp_path)
        assert sorted(shown) == sorted(MODALITIES)
        for modality, rollout in shown.items():
            assert rollout["expected_sha256"] == sha256_file(out / modality / "videos" / f"{task}.mp4")
            assert "mismatch" not in rollout and not [p for p in rollout["problems"] if "digest" in p]


def test_a_cached_tasks_video_replaced_deleted_or_linked_after_the_run_is_said(cached_runs, tmp_path: Path) -> None:
    """Hostile: in a copy of B, task_0000 (taken from the sample cache) has its edge video replaced by task_0001's,
    its blur video deleted, its seg video a link to task_0001's inside the run: flagged as an evaluated task's is."""
    run = Path(shutil.copytree(cached_runs["B"], tmp_path / "B", symlinks=True))
    scored = {m: sha256_file(run / m / "videos" / "task_0000.mp4") for m in MODALITIES}
    shutil.copyfile(run / "edge/videos/task_0001.mp4", run / "edge/videos/task_0000.mp4")
    (run / "blur/videos/task_0000.mp4").unlink()
    (run / "seg/videos/task_0000.mp4").unlink()
    (run / "seg/videos/task_0000.mp4").symlink_to("task_0001.mp4")
    shown = _rollouts(run, "task_0000", tmp_path)
    other = sha256_file(run / "edge/videos/task_0001.mp4")
    assert shown["edge"]["mismatch"] == (f"{run.resolve() / 'edge/videos/task_0000.mp4'} holds other bytes (sha256 "
                                         f"{other[:12]}...) than the run scored ({scored['edge'][:12]}...)")
    assert shown["blur"]["url"] is None and "task_0000.mp4: No such file or directory" in shown["blur"]["problem"]
    assert shown["seg"]["expected_sha256"] == scored["seg"] and "holds other bytes" in shown["seg"]["mismatch"]
    assert "mismatch" not in shown["depth"]


def test_generation_records_that_cannot_be_read_are_said(cached_runs, tmp_path: Path) -> None:
    """A generation store that is not the run's own folder (a link) is refused and said on the page, and a task's
    rollout with no kept digest (its record gone) is said shown without the check: neither is a traceback."""
    run = Path(shutil.copytree(cached_runs["C"], tmp_path / "C", symlinks=True))
    store = run / "generation" / "samples"
    shutil.move(store, tmp_path / "elsewhere")
    store.symlink_to(tmp_path / "elsewhere")
    shown = _rollouts(run, "task_0000", tmp_path)
    assert all(r["expected_sha256"] is None for r in shown.values())
    [said] = [p for p in shown["edge"]["problems"] if "digest" in p]
    assert said.endswith(": the generated videos are shown without their digest check") and str(store) in said
    run = Path(shutil.copytree(cached_runs["C"], tmp_path / "C-emptied", symlinks=True))   # a path not read yet
    store = run / "generation" / "samples"
    shutil.rmtree(store)
    store.mkdir()
    shown = _rollouts(run, "task_0000", tmp_path)
    assert [p for p in shown["edge"]["problems"] if "digest" in p] == [
        f"{m}: {store} keeps no digest of the rollout of {m}.task_0000: its video is shown without the check"
        for m in MODALITIES]


def test_a_tasks_page_shows_its_input_video_controls_and_prompt(cached_runs, tmp_path: Path) -> None:
    """The rows were read from ``inputs/<modality>.jsonl``, which no run writes: every page said "task ... is not in
    .../inputs/edge.jsonl" per modality and showed no input. They are the requests' rows now, the files served from
    the dataset."""
    run = cached_runs["B"]
    view_ = View(load_runs([run]), view_module("paibench-c"))
    sample = view_.sample(view_.ids.index("task_0001"), MediaStore(tmp_path / "previews").describe)
    assert sample["runs"][0]["problems"] == []
    dataset = run / "fixture_data" / "dataset"
    videos = {i["label"]: i for i in sample["inputs"] if i["kind"] == "video"}
    assert {label: i["source"] for label, i in videos.items()} == {
        "input video (vision_path of every modality)": str(dataset / "videos/task_0001.mp4"),
        "depth control video": str(dataset / "depth_vids/task_0001.mp4"),
        "seg control video": str(dataset / "sam2_vids/task_0001.mp4")}
    assert all(i["url"] and i["sha256"] == sha256_file(Path(i["source"])) for i in videos.values())
    texts = {i["label"]: i["text"] for i in sample["inputs"] if i["kind"] == "text"}
    tasks = json.loads((dataset.parent / "tasks.json").read_text())
    assert sorted(texts) == ["blur control", "edge control", "prompt"]
    assert texts["prompt"] == tasks[1]["prompt"] and '"fixture": 1' in texts["prompt"]


def _requests(tmp_path: Path, lines: list[str]) -> Path:
    """A run directory holding only a requests file of these lines."""
    (tmp_path / "generation").mkdir(parents=True)
    (tmp_path / "generation" / "requests.jsonl").write_text("".join(lines))
    return tmp_path


def _media(run: Path, task: str = "task_0000") -> view.SampleMedia:
    card = SimpleNamespace(config={"options": {"modalities": ["edge", "depth"]}}, mode="fixture", provenance={})
    return view.sample_media(RunInputs(run, card), task, None)   # the fields the view reads


def test_a_request_cut_or_of_another_form_is_no_traceback(cached_runs, tmp_path: Path) -> None:
    """A torn line of the requests file is said in one line naming the file and line; a row whose modality is no
    object shows no control, a row that is no object shows no input, a path out of the dataset folder is not served:
    none is a traceback."""
    lines = (cached_runs["B"] / "generation" / "requests.jsonl").read_text().splitlines(keepends=True)
    edge, depth = (r for r in map(json.loads, lines) if r["id"] in ("edge.task_0000", "depth.task_0000"))
    edge["settings"]["row"]["edge"] = "canny"
    edge["settings"]["row"]["vision_path"] = "../../../etc/passwd"
    depth["settings"]["row"] = "a row"
    run = _requests(tmp_path / "forms", [json.dumps(edge) + "\n", json.dumps(depth) + "\n"])
    media = _media(run)
    assert [t.label for t in media.texts] == ["edge control", "prompt"]
    [shown] = media.inputs
    assert shown.file is None and shown.problem.startswith("../../../etc/passwd is outside the dataset folder")
    assert [p for p in media.problems if "holds no request" in p] == [
        f"depth: {run / 'generation/requests.jsonl'} holds no request depth.task_0000 with a row"]
    run = _requests(tmp_path / "unreadable", [])
    (run / "generation/requests.jsonl").unlink()
    (run / "generation/requests.jsonl").mkdir()
    media = _media(run)
    assert not media.inputs and not media.texts
    [said] = [p for p in media.problems if "is shown" in p and "digest" not in p]
    assert said.startswith(f"{run / 'generation/requests.jsonl'}: not a regular file")
    assert said.endswith(": no input video, control or prompt is shown")


def _page(run: Path, task: str, tmp_path: Path) -> dict:
    view_ = View(load_runs([run]), view_module("paibench-c"))
    return view_.sample(view_.ids.index(task), MediaStore(tmp_path / "previews").describe)


def test_a_cut_request_line_hides_its_own_tasks_inputs_only(cached_runs, tmp_path: Path) -> None:
    """One cut line of ``generation/requests.jsonl`` (edge.task_0001's, line 2) hid every task's inputs: the reader
    stopped there. Every other task's inputs are shown now, and task_0001's page names the file and line, once. A
    garbled line that names no request is said on every page (it may be any task's)."""
    run = Path(shutil.copytree(cached_runs["B"], tmp_path / "B", symlinks=True))
    requests = run / "generation" / "requests.jsonl"
    lines = requests.read_text().splitlines(keepends=True)
    requests.write_text("".join([lines[0], lines[1][:60] + "\n", *lines[2:]]))
    for task in ("task_0000", "task_0002", "task_0003"):
        page = _page(run, task, tmp_path)
        assert page["runs"][0]["problems"] == []
        assert len([i for i in page["inputs"] if i["kind"] == "video" and i["url"]]) == 3
    page = _page(run, "task_0001", tmp_path)
    [said] = page["runs"][0]["problems"]
    assert said.startswith(f"edge: {requests}:2: ") and said.endswith(
        ": its input video, control and prompt are not shown")
    assert len([i for i in page["inputs"] if i["kind"] == "video" and i["url"]]) == 3   # from blur, depth, seg
    requests.write_text("".join([lines[0], "{garbled\n", *lines[1:]]))
    for task in TASKS:
        page = _page(run, task, tmp_path)
        assert [p for p in page["runs"][0]["problems"] if p.startswith(f"{requests}:2: ")], task
        assert len([i for i in page["inputs"] if i["kind"] == "video" and i["url"]]) == 3


def test_an_input_video_changed_since_its_request_is_said(cached_runs, tmp_path: Path) -> None:
    """The input videos were shown unchecked: one changed in the dataset folder since the request recorded its SHA-256
    is flagged as a changed rollout is."""
    run = Path(shutil.copytree(cached_runs["B"], tmp_path / "B", symlinks=True))
    dataset = run / "fixture_data" / "dataset"
    recorded = sha256_file(dataset / "depth_vids/task_0000.mp4")
    shutil.copyfile(dataset / "depth_vids/task_0001.mp4", dataset / "depth_vids/task_0000.mp4")
    now = sha256_file(dataset / "depth_vids/task_0000.mp4")
    videos = {i["label"]: i for i in _page(run, "task_0000", tmp_path)["inputs"] if i["kind"] == "video"}
    assert videos["depth control video"]["mismatch"] == (
        f"{(dataset / 'depth_vids/task_0000.mp4').resolve()} holds other bytes (sha256 {now[:12]}...) than request "
        f"depth.task_0000 conditioned on ({recorded[:12]}...)")
    assert videos["input video (vision_path of every modality)"]["expected_sha256"] == sha256_file(
        dataset / "videos/task_0000.mp4")
    assert [label for label, v in videos.items() if "mismatch" in v] == ["depth control video"]


def test_a_server_sees_the_run_directory_regenerated_between_two_page_loads(cached_runs, tmp_path: Path) -> None:
    """One ``View`` (a ``pinbench view`` server) kept its first reading of the requests and generation records for
    good: a run directory regenerated under it was shown with the old rows and digests. Read again once changed."""
    run = Path(shutil.copytree(cached_runs["B"], tmp_path / "B", symlinks=True))
    view_ = View(load_runs([run]), view_module("paibench-c"))
    media = MediaStore(tmp_path / "previews")
    index = view_.ids.index("task_0000")
    first = view_.sample(index, media.describe)["runs"][0]
    assert first["problems"] == [] and all("mismatch" not in r for r in first["rollouts"])
    requests = run / "generation" / "requests.jsonl"   # being regenerated: edge.task_0000's request and records gone
    requests.write_text("".join(line for line in requests.read_text().splitlines(keepends=True)
                                if '"id":"edge.task_0000"' not in line))
    store = run / "generation" / "samples"
    shutil.rmtree(store)
    store.mkdir()
    second = view_.sample(index, media.describe)["runs"][0]
    assert f"edge: {requests} holds no request edge.task_0000 with a row" in second["problems"]
    assert f"blur: {store} keeps no digest of the rollout of blur.task_0000: its video is shown without the check" in (
        second["problems"])
    assert all(r["expected_sha256"] is None for r in second["rollouts"])
