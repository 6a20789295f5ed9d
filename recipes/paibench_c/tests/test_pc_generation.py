"""PAI-Bench-C generation (#29): a fixture run goes requests -> generation -> rollout check -> scores through the
recipe's own run.py with the ``static`` baseline and with the render test double in its command form (the python
form, hostile generators, reuse and kill -9 are in tests/test_generation.py); and the 720 tier's sizes.

What a request states is checked against the fixture's tasks.json (read as raw JSON), its dataset files and the
sampling table and resolution table of ``../shared/specs/paibench_c.md`` §5.3, never against the request builder.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import render_generator
from typer.testing import CliRunner

from pinbench.cli import app
from pinbench.core.config import RecipeError
from pinbench.core.generation import read_requests
from pinbench.core.inputs import input_digests
from pinbench.core.recipe import get_recipe
from pinbench.core.run import FIXTURE_DIR
from pinbench.core.runner import load_records
from pinbench.media.video import read_video
from pinbench.ops.launch import run_recipe
from pinbench_recipes.paibench_c import requests
from pinbench_recipes.paibench_c.rows import Task

# by its import, not a path of the repository's: an export copies the helpers its tests import (tests/helpers),
# and this one is otherwise named only by its file (the command form) and module name (the Python form)
HELPERS = Path(render_generator.__file__).resolve().parent
COMMAND = f"command:{sys.executable} {HELPERS / 'render_generator.py'} --request {{request}} --out {{out}}"
MODALITIES = ("edge", "blur", "depth", "seg")
# The spec's §5.3 sampling settings (the same for every modality but control guidance) and resolution table
SAMPLING = {"num_frames": 121, "fps": 30, "resolution": "720", "num_steps": 50, "guidance": 3.0, "shift": 10.0,
            "num_video_frames_per_chunk": 121, "num_conditional_frames": 1, "num_first_chunk_conditional_frames": 0,
            "model_mode": "video2video", "share_vision_temporal_positions": True}
CONTROL_GUIDANCE = {"edge": 1.5, "blur": 1.5, "depth": 1.5, "seg": 2.0}
CONTROL_FILE = {"depth": "depth_path", "seg": "seg_path"}   # edge and blur: computed from the GT video
SIZE_720 = {"4,3": (1104, 832), "16,9": (1280, 720)}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _task(task_id: str, aspect_ratio: str) -> Task:
    return Task(task_id=task_id, video_path=f"videos/{task_id}.mp4", canny_path=f"canny/{task_id}.mp4",
                blur_path=f"blur/{task_id}.mp4", depth_path=f"depth_vids/{task_id}.mp4",
                seg_path=f"sam2_vids/{task_id}.mp4", prompt="a caption", negative_prompt="a negative prompt",
                aspect_ratio=aspect_ratio, fps=30, seed=2025)


def test_the_720_tier_sizes_are_the_resolution_tables(tmp_path: Path) -> None:
    """4:3 -> 1104x832 and 16:9 -> 1280x720 (the spec's reading of cosmos-framework's docs/inference.md), 121 frames
    at the task's rate; an aspect ratio cosmos-framework takes but whose 720 size the spec does not give (1:1, 3:4,
    9:16; tasks.json uses none) is refused in one line naming the task, never guessed."""
    dataset = tmp_path / "dataset"
    tasks = [_task("task_0000", "4,3"), _task("task_0001", "16,9")]
    for task in [*tasks, _task("task_0002", "1,1")]:
        for field in ("video_path", "depth_path", "seg_path"):
            (dataset / getattr(task, field)).parent.mkdir(parents=True, exist_ok=True)
            (dataset / getattr(task, field)).write_bytes(f"{task.task_id} {field}".encode())
    with input_digests(tmp_path) as digests:
        asked = requests.build(tasks, MODALITIES, dataset, root=tmp_path / "requests", digests=digests)
        assert {r.id: (r.width, r.height, r.frames, r.fps) for r in asked} == {
            f"{m}.{t.task_id}": (*SIZE_720[t.aspect_ratio], SAMPLING["num_frames"], SAMPLING["fps"])
            for m in MODALITIES for t in tasks}
        for aspect in ("1,1", "3,4", "9,16"):
            with pytest.raises(RecipeError, match=rf"^task_0002: aspect ratio {aspect}: its 720-tier size is not "
                                                  r"known here \(known: 4,3, 16,9\)$"):
                requests.build([_task("task_0002", aspect)], ("edge",), dataset, root=tmp_path / "requests",
                               digests=digests)


@pytest.fixture(scope="module")
def asked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``pinbench requests paibench-c --fixture``: the folder of its requests and of the fixture it read."""
    work = tmp_path_factory.mktemp("pc-requests")
    out = work / "requests"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(work)   # the fixture's data goes to the fixture run's directory, runs/paibench-c/...
        result = CliRunner().invoke(app, ["requests", "paibench-c", "--fixture", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def _fixture_data(asked: Path) -> Path:
    """The data ``asked``'s requests were made from: the fixture run's (``pinbench requests --fixture`` built it)."""
    return asked.parent / "runs" / "paibench-c" / "fixture-fixture" / FIXTURE_DIR


def _run(out: Path, generator: str, asked: Path, modalities: tuple[str, ...] = MODALITIES, **options: str):
    if not (out / FIXTURE_DIR).exists():
        shutil.copytree(_fixture_data(asked), out / FIXTURE_DIR)
    recipe = get_recipe("paibench-c")
    return run_recipe(recipe.config(fixture=True, out_dir=out, offline=True,
                                    options={"modalities": ",".join(modalities)}, generator=generator,
                                    generator_options=options, env={}))


def test_requests_state_each_task_and_modality_as_tasks_json_and_the_spec_do(asked: Path) -> None:
    fixture = _fixture_data(asked)
    tasks = json.loads((fixture / "tasks.json").read_text())
    by_id = {r.id: r for r in read_requests(asked / "requests.jsonl")}
    assert sorted(by_id) == sorted(f"{m}.{t['task_id']}" for m in MODALITIES for t in tasks)
    for modality in MODALITIES:
        for task in tasks:
            request = by_id[f"{modality}.{task['task_id']}"]
            assert request.kind == "control-video" and request.output == f"{modality}/{task['task_id']}.mp4"
            assert [p.text for p in request.prompts] == [task["prompt"]]
            assert request.negative_prompt == task["negative_prompt"]
            assert (request.fps, request.seed) == (task["fps"], str(task["seed"]))
            assert request.settings["aspect_ratio"] == task["aspect_ratio"]
            assert request.file("context").sha256 == _sha256(fixture / "dataset" / task["video_path"])
            control = request.file("control")
            if modality in CONTROL_FILE:
                assert control.sha256 == _sha256(fixture / "dataset" / task[CONTROL_FILE[modality]])
            else:
                assert control is None
            row = request.settings["row"]
            assert {k: row[k] for k in SAMPLING if k != "fps"} == {k: v for k, v in SAMPLING.items() if k != "fps"}
            assert row["control_guidance"] == CONTROL_GUIDANCE[modality]
            assert (row["seed"], row["fps"], row["aspect_ratio"]) == (task["seed"], task["fps"], task["aspect_ratio"])
            assert row["vision_path"] == task["video_path"]   # relative to the dataset: the same on every machine


def _complete_for_every_request(out: Path, modalities: tuple[str, ...] = MODALITIES) -> dict:
    """The scorecard of a complete run: every modality's every metric scored on each of its requests."""
    card = json.loads((out / "scorecard.json").read_text())
    requests = read_requests(out / "generation" / "requests.jsonl")
    assert card["status"] == "complete" and len(requests) == 4 * len(modalities)
    assert {name.partition("/")[0] for name in card["metrics"]} == set(modalities)
    assert card["samples"]["n_expected"] == card["samples"]["n_ok"] == 4
    for name, metric in card["metrics"].items():
        modality = name.partition("/")[0]
        asked = sorted(r.id.partition(".")[2] for r in requests if r.settings["modality"] == modality)
        assert metric["n_expected"] == metric["n_scored"] == len(asked) == 4 and not metric["failed"], name
    assert sorted(load_records(out)) == sorted({r.id.partition(".")[2] for r in requests})   # the samples scored
    generation = card["provenance"]["extra"]["generation"]
    assert generation["n_requests"] == len(requests) and generation["seeds"] == {r.id: "2025" for r in requests}
    assert set(generation["seconds"]) == {r.id for r in requests}
    return card


def test_the_static_baseline_is_the_context_frame_whatever_the_control(asked: Path, tmp_path: Path) -> None:
    """A static rollout repeats the first frame of the task's GT video and ignores the control, so a task's four
    rollouts are the same bytes and every metric is the same in every modality."""
    out = tmp_path / "run"
    outcome = _run(out, "static", asked)
    assert outcome.exit_code == 0, outcome.message
    card = _complete_for_every_request(out)
    assert card["provenance"]["extra"]["generation"]["signature"]["model"] == "pinbench static baseline"
    by_task: dict[str, set[str]] = {}
    for request in read_requests(out / "generation" / "requests.jsonl"):
        by_task.setdefault(request.id.partition(".")[2], set()).add(_sha256(out / "rollouts" / request.output))
    assert all(len(shas) == 1 for shas in by_task.values()) and len(by_task) == 4
    request = read_requests(out / "generation" / "requests.jsonl")[0]
    frames = read_video(out / "rollouts" / request.output, [0, request.frames - 1], backend="pyav").frames
    first = read_video(request.path("context"), [0], backend="pyav").frames[0]
    assert np.array_equal(frames[0], frames[1]) and frames.shape[1:3] == (request.height, request.width)
    assert first.shape[:2] != frames.shape[1:3]   # the GT is smaller than the rollout: resized, not cropped
    values = {name.partition("/")[2]: {} for name in card["metrics"]}
    for name, metric in card["metrics"].items():
        modality, _, key = name.partition("/")
        values[key][modality] = metric["value"]
    for key, per_modality in values.items():
        assert len(set(per_modality.values())) == 1, (key, per_modality)


def test_the_python_then_the_command_form_make_the_same_rollouts_and_scores(asked: Path, tmp_path: Path) -> None:
    """Every task in edge (a control computed from the GT video) and seg (the dataset's control video, its own
    control guidance), rendered by the python form, then by the command form in the same run directory: another
    generator, so all 8 are made again, each by its own process from its request file, and byte for byte the same;
    the scorecard is the same."""
    out, modalities = tmp_path / "run", ("edge", "seg")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", str(HELPERS))
        outcome = _run(out, "python:render_generator:render", asked, modalities)
    assert outcome.exit_code == 0, outcome.message
    card = _complete_for_every_request(out, modalities)
    text = (out / "generation" / "requests.jsonl").read_text()
    assert set(text.splitlines()) <= set((asked / "requests.jsonl").read_text().splitlines())  # `pinbench requests`'
    requests = read_requests(out / "generation" / "requests.jsonl")
    rollouts = {r.id: _sha256(out / "rollouts" / r.output) for r in requests}
    assert len(set(rollouts.values())) == 8   # each its own request

    calls = tmp_path / "calls"
    again = _run(out, f"{COMMAND} --calls {calls}", asked, modalities)
    assert again.exit_code == 0, again.message
    assert sorted(calls.read_text().split()) == sorted(rollouts)
    assert {r.id: _sha256(out / "rollouts" / r.output) for r in requests} == rollouts
    command = _complete_for_every_request(out, modalities)
    assert {k: m["value"] for k, m in command["metrics"].items()} == {k: m["value"] for k, m in
                                                                      card["metrics"].items()}
    generation = command["provenance"]["extra"]["generation"]
    assert generation["generator"] == f"{COMMAND} --calls {calls}"
    assert {sid: r.result["generator"] for sid, r in load_records(out / "generation").items()} == dict.fromkeys(
        rollouts, hashlib.sha256(json.dumps(generation["signature"], sort_keys=True, separators=(",", ":"))
                                 .encode()).hexdigest())
    checked = CliRunner().invoke(app, ["rollouts", "check", "paibench-c", str(out / "rollouts"), "--requests",
                                       str(out / "generation" / "requests.jsonl")])
    assert checked.exit_code == 0 and "8 of 8 rollouts are what their requests ask for" in checked.output


HALF = '''
from render_generator import Render


class Half(Render):
    """Test double: no edge rollout for task_0000 and task_0001, no seg rollout for task_0000."""

    def generate(self, request, out):
        modality, _, task = request.id.partition(".")
        if (modality, task) in {("edge", "task_0000"), ("edge", "task_0001"), ("seg", "task_0000")}:
            raise RuntimeError(f"no {modality} model here")
        super().generate(request, out)


def make(**options):
    return Half(**options)
'''


def test_a_rollout_not_generated_is_named_with_why_and_a_task_with_none_fails(asked: Path, tmp_path: Path) -> None:
    """task_0000 has no rollout at all: a failed sample (NotGenerated, the generator's reason), not an ok one with
    no values. task_0001 lacks its edge rollout: its seg metrics are scored and each edge metric fails with the
    generation's reason. The denominator stays 4 tasks."""
    (tmp_path / "half.py").write_text(HALF)
    out = tmp_path / "run"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", f"{tmp_path}:{HELPERS}")
        outcome = _run(out, "python:half:make", asked, ("edge", "seg"))
    assert outcome.exit_code != 0
    card = json.loads((out / "scorecard.json").read_text())
    assert card["status"] == "partial"
    assert (card["samples"]["n_expected"], card["samples"]["n_ok"], card["samples"]["n_failed"]) == (4, 3, 1)
    records = load_records(out)
    assert records["task_0000"].status == "failed"
    assert records["task_0000"].error == ("no rollout: RuntimeError: no edge model here "
                                          f"(traceback: {out / 'generation' / 'generator.log'})")
    rows = [line.split("\t") for line in (out / "failures.tsv").read_text().splitlines()[1:]]
    by_sample: dict[str, dict[str, str]] = {}
    for sample, metric, reason in rows:
        by_sample.setdefault(sample, {})[metric] = reason
    assert sorted(by_sample) == ["task_0000", "task_0001"]
    assert {m.partition("/")[0] for m in by_sample["task_0001"]} == {"edge"}   # seg scored
    assert all("no edge model here" in reason for reason in by_sample["task_0001"].values()), by_sample["task_0001"]
    for name, metric in card["metrics"].items():
        assert metric["n_expected"] == 4
        assert metric["n_scored"] == (2 if name.startswith("edge/") else 3), name


def test_rollouts_no_run_generated_count_missing_and_a_broken_rollout_still_fails(asked: Path, tmp_path: Path) -> None:
    """The scoring job after a generation array one of whose tasks never ran: the tasks of that shard (every modality
    of a task is one shard's) counted an ok sample each whose every metric failed ('generation failed: no rollout'),
    charged to the model; never computed, they count missing with the generation's reason, the run is partial (exit 2)
    and ``pinbench check`` recounts the same. A task whose seg launch never ran (its job ended between two modality
    launches) keeps its edge values and its seg metrics count missing. A rollout that was made and damaged after still
    fails its modality's metrics."""
    from pinbench.core.check import check_run
    from pinbench.core.config import Shard

    out = tmp_path / "run"
    shutil.copytree(_fixture_data(asked), out / FIXTURE_DIR)
    recipe = get_recipe("paibench-c")

    def run(**flags):
        return run_recipe(recipe.config(fixture=True, out_dir=out, offline=True, env={},
                                        options={"modalities": "edge,seg"}, **flags))

    assert run(generator=COMMAND, skip_scoring=True, shard=Shard.parse("0/2")).exit_code == 0
    never = sorted(r.id for r in read_requests(out / "generation" / "requests.jsonl")
                   if not (out / "rollouts" / r.output).exists())
    assert never == ["edge.task_0001", "edge.task_0003", "seg.task_0001", "seg.task_0003"]
    broken = out / "rollouts" / "edge" / "task_0000.mp4"
    broken.unlink()   # made, then broken: a new file in its place (a kept rollout is read-only, but to root)
    broken.write_bytes(b"not a video")
    (out / "rollouts" / "seg" / "task_0002.mp4").unlink()   # never made: no rollout, no record of it
    log = out / "generation" / "samples" / "shard-0-of-2.jsonl"
    log.write_text("".join(line for line in log.read_text().splitlines(keepends=True)
                           if json.loads(line)["record"]["sample_id"] != "seg.task_0002"))
    assert run(skip_generation=True).exit_code == 2
    card = json.loads((out / "scorecard.json").read_text())
    assert card["status"] == "partial"
    assert (card["samples"]["n_ok"], card["samples"]["n_failed"], card["samples"]["n_missing"]) == (2, 0, 2)
    # the report's modality errors say missing too (they said 'generation failed: no rollout' of each)
    said = card["extra"]["modality_errors"]
    assert {k: v for k, v in said.items() if not v.startswith("generation failed: ")} == {
        f"{m}/{t}": f"missing: generation: no run stored {m}/{t}.mp4 or a record of it"
        for m, t in (("edge", "task_0001"), ("edge", "task_0003"), ("seg", "task_0001"), ("seg", "task_0002"),
                     ("seg", "task_0003"))}, said
    assert said["edge/task_0000"].startswith("generation failed: invalid rollout"), said
    for name, metric in card["metrics"].items():
        assert (metric["n_scored"], metric["n_missing"]) == ((1, 2) if name.startswith("edge/") else (1, 3)), name
        assert [f["sample_id"] for f in metric["failed"]] == (["task_0000"] if name.startswith("edge/") else [])
    rows = [row.split("\t") for row in (out / "failures.tsv").read_text().splitlines()[1:]]
    missing = {sid: why for sid, metric, why in rows if metric == "-"}
    assert sorted(missing) == ["task_0001", "task_0003"]
    assert all(why == f"missing: no result from any shard (generation: no run stored edge/{sid}.mp4 or a record of "
                      f"it; generation: no run stored seg/{sid}.mp4 or a record of it)" for sid, why in missing.items())
    assert {(sid, metric.partition("/")[0]) for sid, metric, _ in rows if metric != "-"} == {
        ("task_0000", "edge"), ("task_0002", "seg")}
    assert {why for sid, metric, why in rows if sid == "task_0002"} == {
        "missing: generation: no run stored seg/task_0002.mp4 or a record of it"}
    problems = [p for p in check_run(out).problems if "status partial" not in p]
    assert problems == [f"{broken}: rollout changed since generation kept it for edge.task_0000 (SHA-256 "
                        f"{hashlib.sha256(b'not a video').hexdigest()[:12]}..., kept "
                        f"{load_records(out / 'generation')['edge.task_0000'].result['sha256'][:12]}...)"], problems
    # pinbench view and compare say the same: a never-generated task is missing (it was 'failed'), a value never
    # computed is missing with the generation's reason (it was "no value for 'seg/...' in result")
    from pinbench.results.compare import compare_runs, load_run
    from pinbench.results.view import View, load_runs

    samples = View(load_runs([out])).by_run[0]
    assert [samples.status(sid)[0] for sid in ("task_0000", "task_0001", "task_0002", "task_0003")] == [
        "ok", "missing", "ok", "missing"]
    seg_why = "missing: generation: no run stored seg/task_0002.mp4 or a record of it"
    assert {v["reason"] for v in samples.values["task_0002"] if v["value"] is None} == {seg_why}
    compared = next(m for m in compare_runs(load_run(out), load_run(out)).metrics if m.name == "seg/seg_m_iou")
    assert compared.neither["task_0002"] == f"A: {seg_why}; B: {seg_why}"
    # pinbench status too, from the store alone (a scoring run in flight, samples.jsonl unreadable): the never-generated
    # tasks were 'failed' (NotGenerated), the one with its seg never generated 'done'
    from pinbench.ops.status import render, run_status

    (out / "samples.jsonl").write_text("not a record\n")
    status = run_status(out, ask_slurm=False)
    assert status.counts == {"done": 2, "failed": 0, "missing": 2, "pending": 0}
    assert {sid: why for s in status.shards for sid, why in s.missing} == dict(sorted(missing.items()))
    assert [(sid, why) for s in status.shards for sid, why in s.partly_missing] == [("task_0002", seg_why)]
    assert "4 tasks: 2 done (1 partly missing), 0 failed, 2 missing, 0 pending" in render(status)


FLAT = '''
import numpy as np
from render_generator import Render
from pinbench.media.video import write_video


class Flat(Render):
    """Test double: every rollout one flat grey, so its Canny map has no edge pixel (a model that collapsed)."""

    def generate(self, request, out):
        flat = np.full((request.height, request.width, 3), 128, np.uint8)
        write_video(out, [flat] * request.frames, request.fps, crf=0, pix_fmt="yuv444p")


def make(**options):
    return Flat(**options)
'''


def test_rollouts_without_an_edge_fail_their_tasks_by_name_and_the_run_finishes(asked: Path, tmp_path: Path) -> None:
    """A flat rollout's edge F1 is undefined (edges.py: the evaluator drops that video): each task fails by name,
    counted in the denominator. The fixture's evaluator raised instead, and the whole run ended in 'error: prediction
    edge map has no edge pixel; F1 is undefined', naming no task and keeping no scorecard."""
    (tmp_path / "flat.py").write_text(FLAT)
    out = tmp_path / "run"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", f"{tmp_path}:{HELPERS}")
        outcome = _run(out, "python:flat:make", asked, ("edge",))
    assert outcome.exit_code == 2 and outcome.scorecard_path is not None, outcome.message
    card = json.loads(outcome.scorecard_path.read_text())
    failed = {f["sample_id"] for f in card["metrics"]["edge/canny_f1_score"]["failed"]}
    assert failed == {f"task_000{i}" for i in range(4)} and card["metrics"]["edge/canny_f1_score"]["n_expected"] == 4
    native = card["metrics"]["edge/native/canny_f1_score"]["failed"]
    assert {f["sample_id"] for f in native} == failed
    assert all(f["error"].endswith(f": Canny raised on edge/videos/{f['sample_id']}.mp4: DegenerateEdgeMapError "
                                   "(prediction edge map has no edge pixel; F1 is undefined)") for f in native), native
