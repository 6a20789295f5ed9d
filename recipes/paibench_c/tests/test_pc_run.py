"""``run()`` top to bottom on CPU: pinned inputs in a cache, fake framework and fake evaluator (test doubles).

What is real: pins loading and offline location, rows, resume by validity, collection, GT cache and its
reuse across modalities, evaluator invocation, metrics.json parsing with counts, the native cross-check,
scorecard, smoke/full reference rules and the diff.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from functools import partial
from pathlib import Path

import pytest
import yaml

import pinbench_recipes.paibench_c.fetch as fetch_module
import pinbench_recipes.paibench_c.requests as requests_module
from pinbench.core.config import RecipeError, RunConfig, Shard
from pinbench.core.pins import HFPin
from pinbench.core.recipe import get_recipe
from pinbench.core.run import Run
from pinbench.core.runner import load_records
from pinbench.media.video import write_video
from pinbench.ops.cache import hf_snapshot_dir
from pinbench.ops.launch import run_recipe
from pinbench.ops.machine_pins import RESOLVED_NOTE, MachinePins, machine_pins_path
from pinbench.ops.status import render, run_status
from pinbench_recipes.paibench_c.evaluate import REVISION_STAMP, WEIGHT_PATHS
from pinbench_recipes.paibench_c.generate import SOURCES_FILE
from pinbench_recipes.paibench_c.tests.conftest import clip

DATASET_REV, NANO_REV, DINO_REV = "a" * 40, "b" * 40, "c" * 40
N_TASKS = 3


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def world(tmp_path: Path, fake_framework, fake_evaluator, monkeypatch: pytest.MonkeyPatch) -> dict:
    """A cache holding the pinned inputs, a pins file naming them, the fake framework and evaluator."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("PINBENCH_CACHE", str(cache))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("PINBENCH_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for key in ("MODALITIES", "GT", "LAUNCH", "NATIVE", "NATIVE_WORKERS"):
        monkeypatch.delenv(f"PAIBENCH_C_{key}", raising=False)
    dataset = hf_snapshot_dir(HFPin("shi-labs/physical-ai-bench-conditional-generation", DATASET_REV, "dataset"),
                              cache)
    rows = []
    for i in range(N_TASKS):
        task = f"task_{i:04d}"
        write_video(dataset / "videos" / f"{task}.mp4", clip(12, seed=i), 30, codec="mpeg4")
        for folder in ("depth_vids", "sam2_vids"):
            write_video(dataset / folder / f"{task}.mp4", clip(12, seed=9), 30, codec="mpeg4")
        (dataset / "captions").mkdir(exist_ok=True)
        (dataset / "captions" / f"{task}.json").write_text(json.dumps({task: "a yellow box"}))
        rows.append({"task_id": task, "video_path": f"videos/{task}.mp4", "canny_path": f"canny/{task}.mp4",
                     "blur_path": f"blur/{task}.mp4", "depth_path": f"depth_vids/{task}.mp4",
                     "seg_path": f"sam2_vids/{task}.mp4", "prompt": "{}", "negative_prompt": "{}",
                     "aspect_ratio": "4,3", "fps": 30, "seed": 2025})
    tasks_src = tmp_path / "tasks.json"
    tasks_src.write_text(json.dumps(rows))
    tasks_sha = _sha(tasks_src)
    (cache / "urls" / tasks_sha[:16]).mkdir(parents=True)
    (cache / "urls" / tasks_sha[:16] / "tasks.json").write_bytes(tasks_src.read_bytes())
    hf_snapshot_dir(HFPin("nvidia/Cosmos3-Nano", NANO_REV), cache).mkdir(parents=True)

    evaluator_root, evaluator_python = fake_evaluator
    urls = {}
    for name in ("sam2_hiera_large", "dover", "video_depth_anything_small"):
        target = evaluator_root / WEIGHT_PATHS[name]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(name.encode())
        urls[name] = {"url": f"https://example.invalid/{target.name}", "sha256": _sha(target),
                      "filename": target.name}
    dino = evaluator_root / WEIGHT_PATHS["grounding_dino_tiny"]
    dino.mkdir(parents=True)
    (dino / "config.json").write_text("{}")
    (dino / REVISION_STAMP).write_text(DINO_REV)
    pins = {
        "recipe": "paibench-c",
        "upstream": {"evaluator": {"repo": "trungtpham/pai-bench-c-cosmos3",
                                   "commit": "5864378a0e13e527336d916cc8e018afb0ef5fe3"},
                     "cosmos_framework": {"repo": "NVIDIA/cosmos-framework",
                                          "commit": "5eee9ed574255f017b192161bfbb5a10253d65cf"}},
        # The dataset revision is null in pins.yaml, as in the package: a first fetch resolved it on this machine.
        "huggingface": {"dataset": {"repo_id": "shi-labs/physical-ai-bench-conditional-generation",
                                    "repo_type": "dataset", "revision": None, "resolve": "required"},
                        "cosmos3_nano": {"repo_id": "nvidia/Cosmos3-Nano", "revision": NANO_REV},
                        "cosmos3_super": {"repo_id": "nvidia/Cosmos3-Super", "revision": "d" * 40},
                        "grounding_dino_tiny": {"repo_id": "IDEA-Research/grounding-dino-tiny", "revision": DINO_REV}},
        "urls": {"tasks_json": {"url": tasks_src.as_uri(), "sha256": tasks_sha, "filename": "tasks.json"}, **urls},
    }
    pins_path = tmp_path / "pins.yaml"
    pins_path.write_text(yaml.safe_dump(pins))
    monkeypatch.setattr(fetch_module, "PINS_PATH", pins_path)
    recipe = get_recipe("paibench-c")
    machine = MachinePins(machine_pins_path(recipe.name, recipe.version, cache), recipe.name, recipe.version)
    machine.set(("huggingface", "dataset", "revision"), DATASET_REV, "test: as a first connected fetch records it")
    machine.save()

    # Test double for the 720 tier's sizes: the fake framework writes 32x24 (1104x832 videos made every test
    # here minutes long); the run still checks each rollout against the size its request asks.
    monkeypatch.setattr(requests_module, "SIZE_720", {"4,3": (32, 24), "16,9": (32, 24)})
    framework_dir, framework_python = fake_framework
    (framework_dir / ".pinbench-commit").write_text("5eee9ed574255f017b192161bfbb5a10253d65cf\n")
    monkeypatch.setenv("PAIBENCH_C_FRAMEWORK_DIR", str(framework_dir))
    monkeypatch.setenv("PAIBENCH_C_FRAMEWORK_PYTHON", str(framework_python))
    monkeypatch.setenv("PAIBENCH_C_EVALUATOR_DIR", str(evaluator_root))
    monkeypatch.setenv("PAIBENCH_C_EVALUATOR_PYTHON", str(evaluator_python))
    eval_log = tmp_path / "evaluator_calls.jsonl"
    monkeypatch.setenv("FAKE_EVAL_LOG", str(eval_log))
    return {"tmp": tmp_path, "eval_log": eval_log, "evaluator_root": evaluator_root}


def _cfg(world: dict, name: str, *, limit: int | None = N_TASKS, **options: str) -> RunConfig:
    return get_recipe("paibench-c").config("Cosmos3-Nano", out_dir=world["tmp"] / name, limit=limit, gpus=2,
                                           options={"native_workers": "1", **options}, env={})


def _calls(world: dict) -> list[dict]:
    log = world["eval_log"]
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_full_procedure_then_resume_without_recomputing(world: dict) -> None:
    cfg = _cfg(world, "run", modalities="edge,seg", native_workers="2")   # the process-pool path
    outcome = run_recipe(cfg)
    assert outcome.exit_code == 0, outcome.message
    card = json.loads(outcome.scorecard_path.read_text())
    assert (card["status"], card["mode"], card["samples"]["n_expected"]) == ("complete", "smoke", N_TASKS)
    assert "reported, not diffed" in (cfg.out_dir / "diff.txt").read_text()   # smoke never meets the 600-task ref
    assert card["metrics"]["edge/canny_f1_score"]["n_scored"] == N_TASKS
    assert card["metrics"]["seg/native/seg_m_iou"]["n_scored"] == N_TASKS
    rows = [json.loads(x) for x in (cfg.out_dir / "samples.jsonl").read_text().splitlines()]  # named in the card
    assert [r["sample_id"] for r in rows] == ["task_0000", "task_0001", "task_0002"]
    assert all(r["status"] == "ok" and "edge/canny_f1_score" in r["result"] for r in rows)

    calls = _calls(world)
    assert [(c["videos"].rsplit("/", 1)[-1], c["force"]) for c in calls] == [("edge", True), ("seg", False)]
    assert all(c["nproc"] == "2" and c["gpus"] == "0,1" and c["offline"] == "1" for c in calls)
    assert all(c["batch"] is None for c in calls)                       # unset: the evaluator's own default
    assert all(c["cwd"] == str(world["evaluator_root"]) for c in calls)
    dataset_input = card["provenance"]["inputs"]["huggingface/dataset"]
    assert dataset_input["state"] == "resolved" and RESOLVED_NOTE in dataset_input["reason"]
    assert dataset_input["revision"] == DATASET_REV
    assert card["provenance"]["pins"]["resolved_at_run_time"]["huggingface.dataset.revision"]["value"] == DATASET_REV
    # the pins the run read: Cosmos3-Nano (its checkpoint) through cosmos-framework, never Cosmos3-Super
    pins = card["provenance"]["pins"]
    assert (sorted(pins["upstream"]), sorted(pins["huggingface"])) == (
        ["cosmos_framework", "evaluator"], ["cosmos3_nano", "dataset", "grounding_dino_tiny"])
    assert sorted(pins["urls"]) == ["dover", "sam2_hiera_large", "tasks_json", "video_depth_anything_small"]
    gt = card["provenance"]["extra"]["gt_cache"]
    assert gt["n_files"] == 2 * N_TASKS and gt["computed_in"] == ["edge", "seg"]
    for name, check in card["extra"]["cross_check"].items():
        assert check["n_disagree"] == 0 and check["n_compared"] == N_TASKS, name
    requests = [json.loads(x) for x in (cfg.out_dir / "generation" / "requests.jsonl").read_text().splitlines()]
    seg = [r for r in requests if r["id"].startswith("seg.")]
    assert [r["settings"]["row"]["name"] for r in seg] == ["task_0000", "task_0001", "task_0002"]
    assert seg[0]["settings"]["row"]["seg"]["control_path"].endswith("sam2_vids/task_0000.mp4")
    assert [c["role"] for c in seg[0]["conditioning"]] == ["context", "control"]
    assert (seg[0]["width"], seg[0]["height"], seg[0]["frames"]) == (32, 24, 121)   # the test double's 4:3 size

    invocations = (cfg.out_dir / "rollouts" / "edge" / "raw" / "invocations.jsonl").read_text().splitlines()
    again = run_recipe(cfg)
    assert again.exit_code == 0
    assert len(_calls(world)) == 2                                   # both modalities' metrics.json reused
    assert (cfg.out_dir / "rollouts" / "edge" / "raw" / "invocations.jsonl").read_text().splitlines() == invocations
    card2 = json.loads(again.scorecard_path.read_text())
    assert {k: v["value"] for k, v in card2["metrics"].items()} == {k: v["value"] for k, v in card["metrics"].items()}


def test_a_run_of_a_generators_rollouts_records_neither_cosmos3_nor_its_framework(world: dict) -> None:
    """Before: every pin of pins.yaml, both Cosmos3 checkpoints and cosmos-framework, though --generator made the
    rollouts."""
    cfg = get_recipe("paibench-c").config("Cosmos3-Nano", out_dir=world["tmp"] / "static", limit=1, gpus=1,
                                          options={"modalities": "edge", "native": "false"}, env={},
                                          generator="static")
    outcome = run_recipe(cfg)
    assert outcome.exit_code == 0, outcome.message
    provenance = json.loads(outcome.scorecard_path.read_text())["provenance"]
    assert (sorted(provenance["pins"]["upstream"]), sorted(provenance["pins"]["huggingface"])) == (
        ["evaluator"], ["dataset", "grounding_dino_tiny"])
    assert not {"upstream/cosmos_framework", "huggingface/cosmos3_nano"} & set(provenance["inputs"])


def test_pinbench_status_counts_each_generation_shard(world: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #13: generation shards record each (modality, task) video, so status has their done/failed/pending."""
    recipe = get_recipe("paibench-c")
    out = world["tmp"] / "status"

    def shard(index: int) -> int:
        cfg = recipe.config("Cosmos3-Nano", out_dir=out, limit=N_TASKS, gpus=1, shard=Shard(index, 2),
                            skip_scoring=True, options={"native_workers": "1", "modalities": "edge,blur"}, env={})
        return run_recipe(cfg).exit_code

    monkeypatch.setenv("FAKE_FAIL", "task_0002")
    assert shard(0) == 2        # shard 0 owns the requests at positions 0, 2, 4: edge of task 0 and 2, blur of task 1
    status = run_status(out, ask_slurm=False)
    assert status.n_tasks == 2 * N_TASKS
    first, second = status.shards
    assert sorted(first.done) == ["blur.task_0001", "edge.task_0000"]
    assert [sid for sid, _ in first.failed] == ["edge.task_0002"]
    assert first.failed[0][1].startswith("edge: cosmos-framework failed")
    assert (first.finished, second.started, sorted(second.pending)) == (True, False, ["blur.task_0000",
                                                                                      "blur.task_0002",
                                                                                      "edge.task_0001"])
    text = render(status)
    assert "6 tasks: 2 done, 1 failed, 0 missing, 3 pending" in text
    assert "edge.task_0002 (shard 0/2): edge: cosmos-framework failed" in text

    monkeypatch.delenv("FAKE_FAIL")
    assert shard(1) == 0 and shard(0) == 0
    status = run_status(out, ask_slurm=False)
    assert status.counts == {"done": 6, "failed": 0, "missing": 0, "pending": 0}
    summary = json.loads((out / "generation" / "shards" / "0-of-2.json").read_text())["summary"]
    assert summary == {"total": 3, "done": 1, "reused": 2, "failed": 0}   # the rollouts made before were kept
    record = load_records(out / "generation")["edge.task_0001"]
    assert record.result["sha256"] == _sha(out / "rollouts" / "edge" / "task_0001.mp4")


def test_a_task_the_evaluator_drops_makes_the_run_partial(world: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_EVAL_DROP", "task_0001")
    outcome = run_recipe(_cfg(world, "dropped", modalities="edge", native="off"))
    card = json.loads(outcome.scorecard_path.read_text())
    f1 = card["metrics"]["edge/canny_f1_score"]
    assert (f1["n_scored"], f1["n_failed"]) == (2, 1) and card["status"] == "partial"
    assert outcome.exit_code != 0


def test_a_run_whose_metrics_failed_for_every_task_does_not_call_its_samples_ok(
        world: dict, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Every task's record is ok but the evaluator dropped every task, so its metrics failed for each: the status
    line said "(3/3 samples ok, 0 failed, 0 missing)" beside "failed: 3 sample(s) in 1 metric(s)" (a real run whose
    every metric failed: "4/4 samples ok" beside "failed: 4 sample(s) in 10 metric(s)")."""
    monkeypatch.setenv("FAKE_EVAL_DROP", ",".join(f"task_{i:04d}" for i in range(N_TASKS)))
    outcome = run_recipe(_cfg(world, "all-dropped", modalities="edge", native="off"))
    card = json.loads(outcome.scorecard_path.read_text())
    assert card["samples"]["n_ok"] == N_TASKS and outcome.exit_code != 0
    failing = len([m for m in card["metrics"].values() if m["n_failed"]])
    said = capsys.readouterr().out.splitlines()
    assert failing == 1
    assert f"status     {card['status']} ({N_TASKS}/{N_TASKS} samples stored, 0 failed, 0 missing, but 1 " \
           f"metric failed for {N_TASKS} samples)" in said, said
    assert f"failed: {N_TASKS} samples in 1 metric; full list: {outcome.scorecard_path.parent}" \
           "/failures.tsv" in said


def test_failed_generation_is_counted_not_dropped(world: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_FAIL", "task_0002")
    outcome = run_recipe(_cfg(world, "genfail", modalities="edge", native="off"))
    card = json.loads(outcome.scorecard_path.read_text())
    assert card["metrics"]["edge/dover_tech_score"]["n_scored"] == 2
    assert card["status"] == "partial" and outcome.exit_code != 0
    assert any(p.startswith("1 rollout failed (e.g. edge.task_0002: no rollout: edge: cosmos-framework failed: ")
               for p in card["extra"]["problems"])
    record = load_records(world["tmp"] / "genfail")["task_0002"]   # its only rollout not made: a failed sample
    assert record.status == "failed" and card["samples"]["n_failed"] == 1
    assert record.error.startswith("no rollout: edge: cosmos-framework failed: ")


def test_force_policy_recomputes_gt_in_every_modality(world: dict) -> None:
    run_recipe(_cfg(world, "force", modalities="edge,blur", gt="force", native="off"))
    assert [c["force"] for c in _calls(world)] == [True, True]


def test_the_evaluator_batch_size_reaches_the_evaluator(world: dict) -> None:
    """Issue #9.3: -o eval_batch_size (or PAIBENCH_C_EVAL_BATCH_SIZE, its twin) is the evaluator's RAM knob."""
    outcome = run_recipe(_cfg(world, "batch", modalities="edge", native="off", eval_batch_size="2"))
    assert outcome.exit_code == 0, outcome.message
    assert [c["batch"] for c in _calls(world)] == ["2"]


def test_a_full_run_with_fewer_tasks_is_never_passed_against_the_600_task_reference(world: dict) -> None:
    outcome = run_recipe(_cfg(world, "full", limit=None, modalities="edge", native="off"))
    assert outcome.exit_code == 3                                    # reference applies to 600 samples only
    assert "sample count mismatch" in (world["tmp"] / "full" / "diff.txt").read_text()


def test_bad_options_are_refused_in_one_line(world: dict) -> None:
    with pytest.raises(RecipeError, match="unknown option"):
        _cfg(world, "x", colour="red")
    with pytest.raises(RecipeError, match=r"-o modalities: 'wsm' not in edge, blur, depth, seg"):
        _cfg(world, "x", modalities="edge,wsm")
    with pytest.raises(RecipeError, match="-o gt: 'sometimes' is not one of reuse, force"):
        _cfg(world, "x", gt="sometimes")


def test_force_policy_cross_checks_seg_only_against_the_gt_still_on_disk(world: dict) -> None:
    outcome = run_recipe(_cfg(world, "force-native", modalities="edge,seg", gt="force"))
    card = json.loads(outcome.scorecard_path.read_text())
    assert card["status"] == "complete" and outcome.exit_code == 0, outcome.message
    seg_checks = {name: c for name, c in card["extra"]["cross_check"].items() if "seg_" in name}
    assert seg_checks and all(name.startswith("seg/") for name in seg_checks)


def test_the_native_cross_check_keys_its_videos_by_place_under_their_roots(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """native_all (the GPU run's CPU cross-check) on the fixture's videos in two run directories: the same tasks
    and results, so a run directory moved to another node, or mounted in an image, reuses them."""
    from pinbench.core.files import sha256_file
    from pinbench.core.runner import load_records
    from pinbench_recipes.paibench_c.evaluate import GTCache
    from pinbench_recipes.paibench_c.fetch import Inputs
    from pinbench_recipes.paibench_c.generate import Collected
    from pinbench_recipes.paibench_c.rows import MODALITIES, load_tasks
    from pinbench_recipes.paibench_c.run import native_all

    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    recipe = get_recipe("paibench-c")
    stored = []
    for out in (tmp_path / "a", tmp_path / "b" / "elsewhere"):
        cfg = recipe.config(fixture=True, out_dir=out, offline=True, options={"native_workers": "1"})
        assert run_recipe(cfg).exit_code == 0
        tasks = load_tasks(out / "fixture_data" / "tasks.json")
        collected = {m: {t.task_id: Collected(t.task_id, sha256_file(out / m / "videos" / f"{t.task_id}.mp4"))
                         for t in tasks} for m in MODALITIES}
        inputs = Inputs(out / "fixture_data" / "tasks.json", tasks, out / "fixture_data" / "dataset", None)
        results = native_all(Run(recipe, cfg), inputs, GTCache(out / "gt" / "k", "k"), collected,
                             dict.fromkeys(MODALITIES), {t.task_id for t in tasks})  # no evaluator ran: no seg
        assert sorted(results) == sorted(t.task_id for t in tasks)
        stored.append(load_records(out / "native"))
    here, there = stored
    assert {k: (r.input_hash, r.result) for k, r in here.items()} == {k: (r.input_hash, r.result)
                                                                       for k, r in there.items()}


def test_the_cross_check_keys_the_gt_masks_by_their_bytes_not_their_folder(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The GT folder is named by the evaluator build's key, which differs between the host and an image running the
    same code on the same data: the seg cross-check's tasks must not change with it, and a mask file edited after
    its task was keyed fails its sample by name."""
    from pinbench.core.files import sha256_file
    from pinbench.core.inputs import InputKey
    from pinbench.core.runner import load_records
    from pinbench_recipes.paibench_c.evaluate import GTCache
    from pinbench_recipes.paibench_c.fetch import Inputs
    from pinbench_recipes.paibench_c.generate import Collected
    from pinbench_recipes.paibench_c.native_metrics import NativeTask, native_sample
    from pinbench_recipes.paibench_c.rows import MODALITIES, load_tasks
    from pinbench_recipes.paibench_c.run import native_all

    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    recipe = get_recipe("paibench-c")
    stored, gts = [], []
    for out, renamed in ((tmp_path / "a", None), (tmp_path / "b", "another-build")):
        cfg = recipe.config(fixture=True, out_dir=out, offline=True, options={"native_workers": "1"})
        assert run_recipe(cfg).exit_code == 0
        (gt_root,) = (out / "gt").iterdir()
        if renamed:
            gt_root = gt_root.rename(gt_root.with_name(renamed))
        tasks = load_tasks(out / "fixture_data" / "tasks.json")
        collected = {m: {t.task_id: Collected(t.task_id, sha256_file(out / m / "videos" / f"{t.task_id}.mp4"))
                         for t in tasks} for m in MODALITIES}
        inputs = Inputs(out / "fixture_data" / "tasks.json", tasks, out / "fixture_data" / "dataset", None)
        shutil.rmtree(out / "native")
        results = native_all(Run(recipe, cfg), inputs, GTCache(gt_root, gt_root.name), collected,
                             dict.fromkeys(MODALITIES, "parsed"), {t.task_id for t in tasks})   # metrics read
        assert all(f"{m}/native/seg_m_iou" in results[t.task_id].result for t in tasks for m in MODALITIES)
        stored.append(load_records(out / "native"))
        gts.append(gt_root)
    here, there = stored
    assert {k: (r.input_hash, r.result) for k, r in here.items()} == {k: (r.input_hash, r.result)
                                                                       for k, r in there.items()}
    sample = NativeTask(sample_id="task_0000", gt_video=InputKey("videos/task_0000.mp4", 0, "0" * 64), preds={},
                        pred_sha256={}, native_version=1, seg_sha256={"edge": ["0" * 64, "0" * 64]})
    with pytest.raises(ValueError, match=r"sam2_pkls/task_0000\.pkl: changed since the run read it"):
        native_sample(sample, dataset_dir=tmp_path / "a" / "fixture_data" / "dataset", run_dir=tmp_path / "a",
                      gt_dir=gts[0])


@pytest.mark.parametrize(("visible", "gpus", "devices"), [
    (None, 2, ["0", "1"]), ("5,3,7", 2, ["5", "3"]), ("GPU-aa,GPU-bb", 1, ["GPU-aa"]), ("4", 0, []),
    ("4", 2, "makes 1 GPU"), ("0,x y", 1, "is not a device index or UUID")])
def test_the_devices_of_gpus_are_those_every_recipe_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          visible: str | None, gpus: int,
                                                          devices: list[str] | str) -> None:
    """The generator's and the evaluator's devices come from the one parser of CUDA_VISIBLE_DEVICES
    (``core.config.gpu_devices``): in its order, as many as --gpus, and a malformed or short list refused."""
    from pinbench_recipes.paibench_c.run import gpu_ids

    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    cfg = get_recipe("paibench-c").config(fixture=True, out_dir=tmp_path, gpus=gpus)
    if isinstance(devices, str):
        with pytest.raises(RecipeError, match=devices):
            gpu_ids(cfg)
    else:
        assert gpu_ids(cfg) == devices


def test_a_scoring_run_of_rollouts_a_generator_stored_records_neither_cosmos3_nor_its_framework(world: dict) -> None:
    """--skip-generation without --generator scores the rollouts an earlier --generator run stored: its scorecard
    recorded Cosmos3-Nano and cosmos-framework, which made none of them (the run has no --generator of its own),
    and kept a record of the tokenizer cosmos-framework used (generation_sources.json) for rollouts it never made."""
    config = partial(get_recipe("paibench-c").config, "Cosmos3-Nano", out_dir=world["tmp"] / "later", limit=1, gpus=1,
                     options={"modalities": "edge", "native": "false"}, env={})
    assert run_recipe(config(generator="static", skip_scoring=True)).exit_code == 0
    outcome = run_recipe(config(skip_generation=True))
    assert outcome.exit_code == 0, outcome.message
    provenance = json.loads(outcome.scorecard_path.read_text())["provenance"]
    assert provenance["extra"]["generation"]["generator"] == "static"
    assert (sorted(provenance["pins"]["upstream"]), sorted(provenance["pins"]["huggingface"])) == (
        ["evaluator"], ["dataset", "grounding_dino_tiny"])
    assert not (world["tmp"] / "later" / SOURCES_FILE).exists()
