"""The GPU launches end to end on CPU: ``run_recipe`` (no ``--fixture``) starts cosmos-framework (one worker per GPU,
or one ``torchrun`` job) and the evaluator (``torchrun ... compute_metrics.py calculate-metrics``) through its real
launch code, against test doubles of ``torchrun``, ``cosmos_framework.scripts.inference`` and ``compute_metrics.py``.

The ``torchrun`` double keeps torchrun's contract: its own options first (refused if unknown), then ``-m MODULE`` or
a script path resolved against the working directory, run ``--nproc_per_node`` times with RANK / LOCAL_RANK /
WORLD_SIZE set, failing if a rank fails. The evaluator double splits the tasks ``tasks[rank::world]``, gathers them
through files under ``conditional_generation/temp/`` as the fork does, reads its weights from ``checkpoint/``
relative to its CWD, writes GT seg/depth under ``--gt_path`` and rank 0 writes metrics.json in the fork's format
(``global`` then ``per_video``, ``indent=4``). Every process records what it was given.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from pinbench.core.recipe import get_recipe
from pinbench.ops.launch import run_recipe
from pinbench_recipes.paibench_c.tests.test_pc_run import N_TASKS, world  # noqa: F401 (the fixture)

TORCHRUN_DOUBLE = textwrap.dedent('''
    """TEST DOUBLE for torchrun (torch.distributed.run), single node: options, then -m MODULE or a script."""
    import os, subprocess, sys, time

    args, nproc, standalone, module = sys.argv[1:], None, False, False
    while args and args[0].startswith("-"):
        option = args.pop(0)
        name, eq, value = option.partition("=")
        if name == "--standalone":
            standalone = True
        elif name in ("--nproc_per_node", "--nproc-per-node"):
            nproc = int(value if eq else args.pop(0))
        elif name in ("-m", "--module"):
            module = True
            break
        else:
            sys.exit(f"torchrun double: unrecognized arguments: {option}")
    if not standalone or nproc is None:
        sys.exit("torchrun double: expected --standalone and --nproc_per_node")
    if not module and not os.path.isfile(args[0]):
        sys.exit(f"torchrun double: can't open file {os.path.abspath(args[0])!r}")
    command = [sys.executable, *(["-m"] if module else []), *args]
    ranks = [subprocess.Popen(command, env={**os.environ, "RANK": str(r), "LOCAL_RANK": str(r),
                                            "WORLD_SIZE": str(nproc), "LOCAL_WORLD_SIZE": str(nproc),
                                            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"})
             for r in range(nproc)]
    while None in (codes := [rank.poll() for rank in ranks]):
        if any(codes):   # a failed rank: the others are stopped, as torchrun does
            for rank in ranks:
                if rank.poll() is None:
                    rank.terminate()
        time.sleep(0.05)
    sys.exit(1 if any(codes) else 0)   # torchrun's ChildFailedError
''')

INFERENCE_DOUBLE = textwrap.dedent('''
    """TEST DOUBLE for cosmos_framework.scripts.inference: records its launch; rank 0 (or a lone worker) writes
    <out>/<name>/vision.mp4 and sample_args.json per row, as the latency preset does."""
    import json, os, sys
    from pathlib import Path
    import numpy as np
    from pinbench.media.video import write_video

    args = sys.argv[1:]
    rows_file, out = Path(args[args.index("-i") + 1]), Path(args[args.index("-o") + 1])
    assert Path(args[args.index("--checkpoint-path") + 1]).is_dir(), "no checkpoint folder"
    rank, world = os.environ.get("RANK"), int(os.environ.get("WORLD_SIZE", "1"))
    gpus = os.environ["CUDA_VISIBLE_DEVICES"].split(",")
    assert len(gpus) >= world, f"{world} ranks, {gpus} visible"
    out.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    with open(out / "launches.jsonl", "a") as log:
        log.write(json.dumps({"argv": args, "rank": rank, "world": world, "gpus": gpus, "cwd": os.getcwd(),
                              "names": [row["name"] for row in rows],
                              "env": {k: os.environ.get(k) for k in ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME",
                                                                     "MPLBACKEND", "LD_LIBRARY_PATH", "HF_HUB_OFFLINE",
                                                                     "TRANSFORMERS_OFFLINE")}}) + "\\n")
    if rank in (None, "0"):
        for row in rows:
            video = np.full((121, 24, 32, 3), 100 + int(row["name"][-1]) * 20, np.uint8)
            video[:, 5:15, 5:15] = 250
            write_video(out / row["name"] / "vision.mp4", video, row["fps"], codec="mpeg4")
            (out / row["name"] / "sample_args.json").write_text(json.dumps(row))
''')

COMPUTE_METRICS_DOUBLE = textwrap.dedent('''
    """TEST DOUBLE for the fork's compute_metrics.py calculate-metrics (5864378) under torchrun, no model."""
    import json, os, pickle, sys, time
    from pathlib import Path
    import numpy as np

    METRICS = ["dover_tech_score", "blur_ssim", "canny_f1_score", "canny_precision", "canny_recall", "depth_si_rmse",
               "seg_m_iou", "seg_recall"]
    args = sys.argv[1:]
    assert args[0] == "calculate-metrics", args
    get = lambda flag: args[args.index(flag) + 1]
    videos, gt, output = Path(get("--videos_path")), Path(get("--gt_path")), Path(get("--output_path"))
    force = {kind: f"--force_recompute_gt_{kind}" in args for kind in ("seg", "depth")}
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    for weight in ("checkpoint/sam2/sam2_hiera_large.pt", "checkpoint/DOVER/DOVER.pth",
                   "checkpoint/video_depth_anything/video_depth_anything_vits.pth",
                   "checkpoint/IDEA-Research/grounding-dino-tiny/config.json"):
        assert Path(weight).is_file(), f"{weight}: not found relative to the CWD {os.getcwd()}"
    with open(Path(os.environ["EVAL_DOUBLE_LOG"]), "a") as log:
        log.write(json.dumps({"argv": args, "rank": rank, "world": world, "cwd": os.getcwd(),
                              "gpus": os.environ["CUDA_VISIBLE_DEVICES"],
                              "env": {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
                                                                     "TORCHELASTIC_ERROR_FILE",
                                                                     "PAIBENCH_C_EVAL_BATCH_SIZE", "HF_TOKEN",
                                                                     "WANDB_API_KEY")}}) + "\\n")
    if os.environ.get("EVAL_DOUBLE_FAIL_RANK") == str(rank):
        sys.exit(f"rank {rank}: torch.OutOfMemoryError: CUDA out of memory (compute_metrics.py double)")
    tasks = sorted(p for p in (videos / "videos").glob("*.mp4"))
    mine = []
    for video in tasks[rank::world]:
        task = video.stem.split("__")[0]
        assert (gt / "videos" / f"{task}.mp4").is_file() and (gt / "captions" / f"{task}.json").is_file()
        seg, depth = gt / "sam2_pkls" / f"{task}.pkl", gt / "depth_npzs" / f"{task}.npz"
        if force["seg"] or not seg.exists():
            seg.write_bytes(pickle.dumps([]))
        if force["depth"] or not depth.exists():
            np.savez_compressed(depth, data=np.ones((2, 2, 2)))
        i = int(task[-4:])
        entry = {"pred_video_uuid": video.stem, "pred_video_file": str(video),
                 "gt_video_file": str(gt / "videos" / f"{task}.mp4"),
                 "video_caption_file": str(gt / "captions" / f"{task}.json"),
                 "pred_resized_video_file": str(videos / "videos_orig_size" / video.name),
                 "force_recompute_gt_seg": force["seg"], "force_recompute_gt_depth": force["depth"],
                 "fps": 30, "pred_fps": 30.0, "video_shape": [12, 24, 32], "max_frames": 12,
                 "gt_segmentation_pkl_file": str(seg), "gt_depth_npy_file": str(depth),
                 "pred_segmentation_pkl_file": str(videos / "segmentation" / f"{video.stem}.pkl"),
                 "pred_segmentation_mp4_file": str(videos / "segmentation" / video.name),
                 "pred_depth_mp4_file": str(videos / "depth" / video.name),
                 "pred_blur_mp4_file": str(videos / "blur" / video.name),
                 "pred_canny_mp4_file": str(videos / "canny" / video.name),
                 "pred_depth_npy_file": None, "force_recompute_pred_seg": False, "force_recompute_pred_depth": False,
                 "caption": "a yellow box", "dover_tech_score": 5.0 + i, "dover_tech_score_gt": 9.0,
                 "canny_f1_score": 0.5 + 0.1 * i, "canny_precision": 0.6, "canny_recall": 0.4 + 0.1 * i,
                 "blur_ssim": 0.9 - 0.1 * i, "blur_mse": 12.0, "depth_si_rmse": 0.25 * (i + 1),
                 "seg_m_iou": 0.3 + 0.1 * i, "seg_recall": 0.7}
        mine.append(entry)
    gather = Path("temp") / f"transfer_gather_{os.environ['MASTER_PORT']}_{videos.name}"   # the repo must be writable
    gather.mkdir(parents=True, exist_ok=True)
    part = gather / f".rank_{rank}.partial"   # renamed whole: rank 0 must never read a rank's file half written
    part.write_bytes(pickle.dumps(mine))
    os.replace(part, gather / f"rank_{rank}.pkl")
    if rank == 0:
        deadline = time.monotonic() + 60
        while len(list(gather.glob("rank_*.pkl"))) < world:
            assert time.monotonic() < deadline, "a rank never gathered"
            time.sleep(0.05)
        per_video = [e for r in range(world) for e in pickle.loads((gather / f"rank_{r}.pkl").read_bytes())]
        means = {m: sum(e[m] for e in per_video) / len(per_video) for m in METRICS}   # pandas' mean of the column
        with open(output, "w") as fh:
            json.dump({"global": means, "per_video": per_video}, fh, indent=4)
''')


def _executable(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    path.chmod(0o755)
    return path


def _venv_bin(root: Path) -> Path:
    """A venv's bin/: ``python`` (a wrapper: a linked interpreter outside its venv loses its packages) and the
    ``torchrun`` double beside it, where the recipe looks for it."""
    python = _executable(root / "bin" / "python", f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    _executable(root / "bin" / "torchrun", f"#!{sys.executable}\n{TORCHRUN_DOUBLE}")
    return python


@pytest.fixture
def doubles(world: dict, monkeypatch: pytest.MonkeyPatch) -> dict:  # noqa: F811 (the imported fixture)
    """``world`` (pinned inputs in a cache, fake checkouts) with the launch doubles in the framework's and the
    evaluator's places."""
    tmp = world["tmp"]
    framework_python = _venv_bin(tmp / "framework-venv")
    framework_dir = Path(os.environ["PAIBENCH_C_FRAMEWORK_DIR"])
    (framework_dir / "cosmos_framework" / "scripts" / "inference.py").write_text(INFERENCE_DOUBLE)
    monkeypatch.setenv("PAIBENCH_C_FRAMEWORK_PYTHON", str(framework_python))
    (world["evaluator_root"] / "compute_metrics.py").write_text(COMPUTE_METRICS_DOUBLE)
    monkeypatch.setenv("PAIBENCH_C_EVALUATOR_PYTHON", str(_venv_bin(tmp / "evaluator-venv")))
    eval_log = tmp / "compute_metrics_calls.jsonl"
    monkeypatch.setenv("EVAL_DOUBLE_LOG", str(eval_log))
    for name in ("PYTHONPATH", "PYTHONSTARTUP", "MPLBACKEND"):   # the host's, which the workers must not see
        monkeypatch.setenv(name, str(tmp / f"host-{name.lower()}"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,7")
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 34)   # scoring is offline: no secret reaches the evaluator
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
    return {**world, "framework_dir": framework_dir, "eval_log": eval_log}


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("launch", ["workers", "torchrun"])
def test_generation_and_evaluation_launch_as_upstream_and_are_read_back(doubles: dict, launch: str) -> None:
    out = doubles["tmp"] / f"run-{launch}"
    cfg = get_recipe("paibench-c").config("Cosmos3-Nano", out_dir=out, limit=N_TASKS, gpus=2, offline=True, env={},
                                          options={"modalities": "edge", "native": "off", "launch": launch})
    outcome = run_recipe(cfg)
    logs = "\n".join(p.read_text()[-1500:] for p in sorted(out.glob("**/*.log")))
    assert outcome.exit_code == 0, (outcome.message, logs)

    # generation: the GPUs of --gpus from the mask, CWD the framework, the host's Python settings scrubbed, offline
    launches = _lines(out / "rollouts" / "edge" / "raw" / "launches.jsonl")
    if launch == "workers":   # one single-GPU process per GPU, rows interleaved
        assert sorted((c["gpus"], c["names"]) for c in launches) == [(["3"], ["task_0000", "task_0002"]),
                                                                     (["5"], ["task_0001"])]
        assert {c["rank"] for c in launches} == {None}
    else:                      # one job, every rank over every row on both GPUs
        assert sorted(c["rank"] for c in launches) == ["0", "1"]
        assert all(c["gpus"] == ["3", "5"] and c["world"] == 2 and len(c["names"]) == N_TASKS for c in launches)
    for call in launches:
        assert call["cwd"] == str(doubles["framework_dir"])
        assert call["env"] == {"PYTHONPATH": None, "PYTHONSTARTUP": None, "PYTHONHOME": None, "MPLBACKEND": None,
                               "LD_LIBRARY_PATH": "", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        assert {"--parallelism-preset=latency", "--no-guardrails", "--keep-going"} <= set(call["argv"])

    # evaluation: torchrun over both GPUs from conditional_generation/, offline, GT computed into the GT work dir
    calls = _lines(doubles["eval_log"])
    assert sorted(c["rank"] for c in calls) == [0, 1]
    for call in calls:
        assert (call["world"], call["gpus"], call["cwd"]) == (2, "3,5", str(doubles["evaluator_root"]))
        assert call["env"]["HF_HUB_OFFLINE"] == "1" and call["env"]["TRANSFORMERS_OFFLINE"] == "1"
        assert call["env"]["TORCHELASTIC_ERROR_FILE"] == str(out / "edge" / "metrics.err")
        assert call["env"]["HF_TOKEN"] is None and call["env"]["WANDB_API_KEY"] is None
        assert call["argv"][call["argv"].index("--videos_path") + 1] == str(out / "edge")
        assert "--force_recompute_gt_seg" in call["argv"]   # the first modality computes the GT seg/depth
    card = json.loads((out / "scorecard.json").read_text())
    assert card["provenance"]["extra"]["gt_cache"]["n_files"] == 2 * N_TASKS
    assert not list((doubles["tmp"] / "cache").rglob("sam2_pkls/*.pkl"))   # the dataset's own folders untouched

    # read back: each task's values are the ones the evaluator wrote for it (ranks gathered), its global kept aside
    rows = {r["sample_id"]: r["result"] for r in _lines(out / "samples.jsonl")}
    for i in range(N_TASKS):
        result = rows[f"task_{i:04d}"]
        assert result["edge/canny_f1_score"] == pytest.approx(0.5 + 0.1 * i)
        assert result["edge/depth_si_rmse"] == pytest.approx(0.25 * (i + 1))
        assert result["edge/dover_tech_score"] == pytest.approx(5.0 + i)
    assert card["metrics"]["edge/blur_ssim"]["value"] == pytest.approx(0.8)
    assert card["extra"]["evaluator_global"]["by_modality"]["edge"]["seg_m_iou"] == pytest.approx(0.4)
    assert card["status"] == "complete"


def test_a_torchrun_rank_that_fails_fails_the_modality_naming_its_log(doubles: dict,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 1 dies: torchrun stops rank 0 and exits non-zero, no metrics.json; the modality fails by name."""
    monkeypatch.setenv("EVAL_DOUBLE_FAIL_RANK", "1")
    out = doubles["tmp"] / "run-broken"
    cfg = get_recipe("paibench-c").config("Cosmos3-Nano", out_dir=out, limit=N_TASKS, gpus=2, env={},
                                          options={"modalities": "edge", "native": "off"})
    outcome = run_recipe(cfg)
    assert outcome.exit_code != 0
    card = json.loads((out / "scorecard.json").read_text())
    error = card["extra"]["modality_errors"]["edge"]
    assert error.startswith("evaluator failed for edge (exit 1)") and str(out / "edge" / "evaluator.log") in error
    assert "rank 1: torch.OutOfMemoryError" in (out / "edge" / "evaluator.log").read_text()
