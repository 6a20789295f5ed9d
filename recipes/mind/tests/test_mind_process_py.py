"""The official scorer's launch end to end on CPU: ``pinbench run mind`` without ``--fixture`` drives the real
``official_runtime`` -> ``steps.process_py`` -> ``official.command``/``execute`` path against a test double of
``src/process.py`` placed in a fake MIND checkout (MIND_DIR), with stand-ins for ``vipe`` and ``ffmpeg`` on PATH.

The double takes process.py's CLI, trips where the pinned process.py (8f9c59c) trips (a missing test directory, no
``./vipe`` in the CWD, no ``vipe`` or ``python`` on PATH), runs the ViPE steps the
way it does (``vipe infer`` with CUDA_VISIBLE_DEVICES set to the worker index, ``python scripts/vipe_to_colmap.py``
from ``./vipe``), writes images.txt into a GT sample directory that has none, and writes its Result.json in
process.py's format (``data`` in completion order, ``video_max_time``, indent 2, ``Infinity``). It records what it
was given, so the test checks the argv, the environment and the working directory pinbench gave it.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from pinbench.core.config import RecipeError
from pinbench.core.recipe import get_recipe
from pinbench.core.rundir import process_stat
from pinbench.ops.launch import run_recipe
from pinbench_recipes.mind import steps
from pinbench_recipes.mind.official import COMMIT_STAMP
from pinbench_recipes.mind.tests.conftest import PIN, Layout

HUNG_TIMEOUT_S = 10   # the double starts its pool well within it
WATCHDOG_S = HUNG_TIMEOUT_S + 110   # the test's own bound: a timeout not applied would hang it for 24 h
METRICS = "lcm,action,gsc"   # no staged weight is read: visual's and dino's come from `pinbench fetch mind`

PROCESS_PY_DOUBLE = textwrap.dedent('''
    """TEST DOUBLE for MIND's src/process.py (8f9c59c): its CLI, its layout and environment needs, its Result.json."""
    import argparse, json, math, os, shutil, subprocess, sys
    from pathlib import Path

    import av

    parser = argparse.ArgumentParser()
    parser.add_argument("--gt_root", required=True)
    parser.add_argument("--test_root", required=True)
    parser.add_argument("--dino_path", default="./dinov3_vitb16")
    parser.add_argument("--num_gpus", type=int, default=1)
    parser.add_argument("--video_max_time", type=int, default=None)
    parser.add_argument("--output", default=None)
    parser.add_argument("--metrics", default="lcm,visual,dino,action,gsc")
    args = parser.parse_args()
    metrics = args.metrics.split(",")
    record_to = Path(os.environ["MIND_DOUBLE_RECORD"])
    seen = {"argv": sys.argv[1:], "cwd": os.getcwd(), "executable": sys.executable,
            "env": {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "MIND_CACHE_DIR", "PYTHONPATH", "TORCH_HOME",
                                                   "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN",
                                                   "MY_API_KEY", "PYTHONUNBUFFERED")},
            "which": {name: shutil.which(name) for name in ("python", "vipe", "ffmpeg")}, "vipe": []}

    assert Path("vipe/scripts/vipe_to_colmap.py").is_file(), "./vipe is not a ViPE checkout (relative to the CWD)"
    cache = Path(os.environ.get("MIND_CACHE_DIR", "~/.cache/mind")).expanduser()
    gpus = [g for g in os.environ["CUDA_VISIBLE_DEVICES"].split(",")]

    def frames(path):
        with av.open(str(path)) as container:
            return container.streams.video[0].frames

    def block(n, base):   # an lcm/gsc block of n scored frames; frame 0 identical (+inf PSNR), as json.dump writes it
        mse = [base * (1 + i / n) for i in range(n)]
        psnr = [math.inf] + [10 * math.log10(1 / m) for m in mse[1:]]
        ssim = [0.9 - base] * n
        lpips = [base * 3] * n
        out = {"length": n}
        for name, values in (("mse", mse), ("psnr", psnr), ("ssim", ssim), ("lpips", lpips)):
            out[name], out["avg_" + name] = values, sum(values) / n
        return out

    def vipe_poses(video, worker):   # vipe_utils: `vipe infer`, then vipe_to_colmap.py run from ./vipe
        out = cache / "vipe" / "vipe" / Path(video).parent.name
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(worker)}
        subprocess.run(["vipe", "infer", str(video), "--output", str(out), "--pipeline", "default"], env=env,
                       check=True)
        subprocess.run(["python", "scripts/vipe_to_colmap.py", str(out)], cwd=Path("vipe"), check=True)
        return (out.parent / (out.name + "_colmap") / "images.txt").read_text().count("images/")

    tasks = []
    for perspective in ("1st_data", "3rd_data"):
        if any(m in metrics for m in ("lcm", "visual", "dino", "action")):
            for test in ("mem_test", "action_space_test"):
                gt_names = set(os.listdir(Path(args.gt_root) / perspective / "test" / test))
                for name in sorted(os.listdir(Path(args.test_root) / perspective / test)):   # a missing dir aborts
                    if name in gt_names:
                        tasks.append((perspective, test, name))
        if "gsc" in metrics:
            for name in sorted(os.listdir(Path(args.test_root) / perspective / "mirror_test")):
                tasks.append((perspective, "mirror_test", name))

    if "visual" in metrics:   # ensure_all_models_downloaded: what is not in the cache would be fetched with wget
        for weight in ("pyiqa_model/musiq_spaq_ckpt-358bb6af.pth", "vitl_model/sa_0_4_vit_l_14_linear.pth",
                       "clip_model/ViT-L-14.pt"):
            assert (cache / weight).is_file(), f"wget {weight}: no network (the cache lacks it)"
    if "dino" in metrics:     # AutoModel.from_pretrained(--dino_path), resolved against the CWD
        assert (Path(args.dino_path) / "config.json").is_file(), f"{args.dino_path}: no DINOv3 snapshot"
    seen["weights"] = sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file())

    data = []
    for index, (perspective, test, name) in enumerate(tasks):
        worker = index % args.num_gpus
        sample = Path(args.test_root) / perspective / test / name
        record = {"path": name, "perspective": perspective, "test_type": test}
        if test == "mirror_test":
            videos = os.listdir(sample)
            results = []
            for video in videos:
                n = frames(sample / video)
                entry = {"video_name": video, "error": None, "mark_time": n // 2, "sample_frames": n}
                if n % 2:
                    entry["error"] = "frame count is not an even number!"
                else:
                    entry["gsc"] = block(n // 2, 0.002 * n)
                results.append(entry)
            record.update(video_results=results, videos=videos, error=None)
        else:
            gt_dir = Path(args.gt_root) / perspective / "test" / test / name
            action = json.loads((gt_dir / "action.json").read_text())
            mark, total = action["mark_time"], action["total_time"]
            sample_frames = frames(sample / "video.mp4")
            real = min(total - mark, sample_frames)
            if args.video_max_time is not None:
                real = min(real, args.video_max_time)
            scored = 100 * ((real - 1) // 100)   # the last chunk is never scored
            record.update(error=None, mark_time=mark, total_time=total, sample_frames=sample_frames)
            if "lcm" in metrics and scored:
                record["lcm"] = block(scored, 0.001 * (mark + 1))
            if "visual" in metrics and scored:
                record["visual_quality"] = {"imaging": [0.5] * scored, "avg_imaging": 0.5,
                                            "aesthetic": [0.25] * scored, "avg_aesthetic": 0.25}
            if "dino" in metrics and scored:
                record["dino"] = {"dino_mse": [0.001] * scored, "avg_dino_mse": 0.001}
            if "action" in metrics:
                poses = gt_dir / "images.txt"
                if not poses.is_file() or poses.read_text().count("images/") < 97:
                    with open(poses, "w") as fh:   # ViPE on the GT crop, written into the GT sample directory
                        fh.write("".join(f"{i + 1} 1 0 0 0 0 0 0 1 images/frame_{i:06d}.jpg\\n\\n" for i in range(97)))
                assert vipe_poses(sample / "video.mp4", worker) >= 97
                stats = {"count": 96, "rpe_trans_mean": 0.1 * (mark + 1), "rpe_trans_median": 0.05 * (mark + 1),
                         "rpe_rot_mean_deg": 2.0, "rpe_rot_median_deg": 1.5}
                record["action"] = {"__overall__": stats, "other": stats, "act:no_op": stats}
        data.append(record)
    calls = cache / "vipe_calls.jsonl"
    seen["vipe"] = [json.loads(line) for line in calls.read_text().splitlines()] if calls.is_file() else []

    data.reverse()   # completion order, not listing order
    output = Path(args.output)
    seen["scored"] = [f"{p}.{t}.{n}" for p, t, n in tasks]
    hangs_after = os.environ.get("MIND_DOUBLE_HANGS_AFTER")   # a worker lost without a word: the pool waits forever
    if hangs_after is not None:
        import multiprocessing, signal, time
        with open(output, "w") as fh:   # the monitor's rewrite after the samples finished before the hang
            json.dump({"data": data[:int(hangs_after)], "video_max_time": args.video_max_time}, fh, indent=2)
        record_to.write_text(json.dumps(seen))
        pids = cache / "pids.jsonl"

        def worker():   # a pool worker stuck in a ViPE subprocess that ignores SIGTERM
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            vipe = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 600 & wait"])
            with open(pids, "a") as fh:
                fh.write(json.dumps({"worker": os.getpid(), "vipe": vipe.pid}) + "\\n")
            vipe.wait()

        pool = [multiprocessing.get_context("fork").Process(target=worker) for _ in range(args.num_gpus)]
        for proc in pool:
            proc.start()
        with open(pids, "a") as fh:
            fh.write(json.dumps({"main": os.getpid()}) + "\\n")
        print(f"process.py double: {hangs_after} records, then hangs", flush=True)
        while True:
            time.sleep(60)
    dies_after = os.environ.get("MIND_DOUBLE_DIES_AFTER")   # a worker lost: the monitor's last rewrite stays
    if dies_after is not None:
        data = data[:int(dies_after)]
    with open(output, "w") as fh:
        json.dump({"data": data, "video_max_time": args.video_max_time}, fh, indent=2)
    record_to.write_text(json.dumps(seen))
    print(f"process.py double: {len(data)} records -> {output}")
    if dies_after is not None:
        sys.exit("RuntimeError: CUDA error: out of memory (process.py double)")
''')

VIPE_DOUBLE = textwrap.dedent('''
    """TEST DOUBLE for the `vipe` CLI: `vipe infer VIDEO --output DIR --pipeline default`, no model."""
    import json, os, sys
    from pathlib import Path

    args = sys.argv[1:]
    assert args[0] == "infer" and args[args.index("--pipeline") + 1] == "default", args
    out = Path(args[args.index("--output") + 1])
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(os.environ["MIND_CACHE_DIR"])
    with open(cache / "vipe_calls.jsonl", "a") as fh:
        fh.write(json.dumps({"video": args[1], "gpu": os.environ["CUDA_VISIBLE_DEVICES"]}) + "\\n")
''')

VIPE_TO_COLMAP_DOUBLE = textwrap.dedent('''
    """TEST DOUBLE for vipe/scripts/vipe_to_colmap.py: <out>_colmap/images.txt of 97 poses."""
    import sys
    from pathlib import Path

    out = Path(sys.argv[1])
    colmap = out.parent / (out.name + "_colmap")
    colmap.mkdir(parents=True, exist_ok=True)
    (colmap / "images.txt").write_text("".join(f"{i + 1} 1 0 0 0 0 0 0 1 images/frame_{i:06d}.jpg\\n\\n"
                                               for i in range(97)))
''')


def _executable(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    path.chmod(0o755)
    return path


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A fake MIND checkout at the pin (process.py double, ViPE in vipe/), its environment's bin/ (python, vipe)
    and an ffmpeg stand-in on PATH, set up the way the recipe image's variables name them."""
    mind = tmp_path / "MIND"
    _executable(mind / "src" / "process.py", PROCESS_PY_DOUBLE)
    _executable(mind / "vipe" / "scripts" / "vipe_to_colmap.py", VIPE_TO_COLMAP_DOUBLE)
    (mind / COMMIT_STAMP).write_text(PIN + "\n")
    env_bin = tmp_path / "official-venv" / "bin"
    # a wrapper, not a link: a linked venv interpreter outside its venv loses the venv's packages (PyAV)
    python = _executable(env_bin / "python", f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    _executable(env_bin / "vipe", f"#!{sys.executable}\n{VIPE_DOUBLE}")
    host_bin = tmp_path / "host-bin"
    _executable(host_bin / "ffmpeg", "#!/bin/sh\necho 'ffmpeg stand-in: process.py double never crops' >&2\nexit 1\n")
    monkeypatch.setenv("PATH", os.pathsep.join([str(host_bin), os.environ.get("PATH", os.defpath)]))
    monkeypatch.setenv("MIND_DIR", str(mind))
    monkeypatch.setenv("MIND_PYTHON", str(python))
    monkeypatch.setenv("MIND_TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("MIND_HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "empty-cache"))   # lcm/action/gsc read no fetched weight
    record = tmp_path / "process_py_saw.json"
    monkeypatch.setenv("MIND_DOUBLE_RECORD", str(record))
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz")
    monkeypatch.setenv("MY_API_KEY", "x" * 12)
    return {"mind": mind, "python": python, "record": record}


def _cfg(out: Path, layout: Layout, *, gpus: int = 2, **options: str):
    return get_recipe("mind").config("my-model", out_dir=out, offline=True, gpus=gpus, env={},
                                     options={"gt": str(layout.gt_root), "videos": str(layout.generated_root),
                                              "metrics": METRICS, "native": "0", **options})


def test_process_py_is_launched_as_it_needs_and_its_result_is_read_back(tmp_path: Path, layout: Layout,
                                                                       checkout: dict[str, Path],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    out = tmp_path / "run"
    outcome = run_recipe(_cfg(out, layout))
    work = out / "official" / "run-001"
    assert outcome.exit_code == 0, (outcome.message, (work / "process.log").read_text()[-3000:])

    # what process.py was given: its CLI, the GPUs as 0..n-1, src/ importable, fresh cache, offline, no secrets
    seen = json.loads(checkout["record"].read_text())
    assert seen["argv"] == ["--gt_root", str(work / "gt"), "--test_root", str(work / "generated"), "--num_gpus", "2",
                            "--metrics", METRICS, "--output", str(work / "Result.json")]
    assert seen["cwd"] == str(work / "cwd") and (work / "cwd" / "vipe").resolve() == (checkout["mind"] / "vipe")
    env = seen["env"]
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1" and env["MIND_CACHE_DIR"] == str(work / "cache")
    assert env["PYTHONPATH"] == str(checkout["mind"] / "src") and env["PYTHONUNBUFFERED"] == "1"
    assert (env["HF_HUB_OFFLINE"], env["TRANSFORMERS_OFFLINE"]) == ("1", "1")
    assert (env["TORCH_HOME"], env["HF_HOME"]) == (str(tmp_path / "torch"), str(tmp_path / "hf"))
    assert env["HF_TOKEN"] is None and env["MY_API_KEY"] is None
    assert seen["which"]["python"] == str(checkout["python"])   # the official environment's, first on PATH
    assert seen["which"]["vipe"] == str(checkout["python"].parent / "vipe")
    # ViPE ran once per continuation sample, each on a worker's GPU inside the mask it was given
    assert sorted(Path(c["video"]).parent.name for c in seen["vipe"]) == ["data-1", "data-2", "data-3"]
    assert {c["gpu"] for c in seen["vipe"]} == {"0", "1"}

    # its images.txt went into the GT view, never the dataset; the log holds the command (secrets redacted) and output
    assert (work / "gt" / "1st_data" / "test" / "action_space_test" / "data-2" / "images.txt").is_file()
    assert not (layout.gt("1st_data", "action_space_test", "data-2") / "images.txt").exists()
    log = (work / "process.log").read_text()
    assert log.startswith(f"$ {checkout['python']} {checkout['mind'] / 'src' / 'process.py'} --gt_root")
    assert "process.py double: 5 records" in log and "hf_abcdefghij" not in log

    # read back: every sample's values are the ones the double wrote (its inf first frame left out of the PSNR)
    rows = {r["sample_id"]: r for r in map(json.loads, (out / "samples.jsonl").read_text().splitlines())}
    assert sorted(rows) == ["1st_data.action_space_test.data-2", "1st_data.mem_test.data-1",
                            "1st_data.mirror_test.loop-1", "3rd_data.mem_test.data-3", "3rd_data.mirror_test.loop-1"]
    assert all(r["status"] == "ok" for r in rows.values()), rows
    data_1 = rows["1st_data.mem_test.data-1"]["result"]          # mark 10: base MSE 0.011, 100 frames scored
    assert data_1["lcm_mse"] == pytest.approx(0.011 * (1 + 99 / 200))
    assert data_1["lcm_psnr"] == pytest.approx(sum(10 * math.log10(1 / (0.011 * (1 + i / 100)))
                                                   for i in range(1, 100)) / 99)
    assert data_1["action_rpe_trans_mean"] == pytest.approx(1.1) and data_1["errors"] == {}
    assert rows["1st_data.action_space_test.data-2"]["result"]["lcm_mse"] == pytest.approx(0.006 * (1 + 199 / 400))
    mirror = rows["1st_data.mirror_test.loop-1"]["result"]     # path-1 (12 frames) and path-2 (8), mean over both
    assert mirror["gsc_mse"] == pytest.approx((0.024 * (1 + 5 / 12) + 0.016 * (1 + 3 / 8)) / 2)
    card = json.loads((out / "scorecard.json").read_text())
    assert card["status"] == "complete" and "test_double" not in card["extra"]
    assert card["extra"]["official_sources"][0]["work_dir"] == str(work)
    # what process.py read for lcm,action,gsc: the LPIPS trunk and ViPE's first-use weights, no visual/dino weight
    assert sorted(card["provenance"]["inputs"]) == [
        "huggingface/bert_base_uncased", "huggingface/unidepth_v2_vitl14", "upstream/mind", "upstream/vipe",
        "upstream/worldfoundry", "urls/alexnet", "urls/aot_deaotl", "urls/geocalib_pinhole",
        "urls/groundingdino_swint_ogc", "urls/sam_vit_b", "urls/video_depth_anything_small"]
    assert sorted(card["provenance"]["pins"]["urls"]) == [
        "alexnet", "aot_deaotl", "geocalib_pinhole", "groundingdino_swint_ogc", "sam_vit_b",
        "video_depth_anything_small"]


def test_a_process_py_that_dies_keeps_what_it_wrote_and_fails_the_rest_naming_why(
        tmp_path: Path, layout: Layout, checkout: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A lost worker: process.py exits non-zero, its Result.json holds the records its monitor had written."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("MIND_DOUBLE_DIES_AFTER", "2")   # the last two listed: third-person mem_test and mirror_test
    out = tmp_path / "run"
    outcome = run_recipe(_cfg(out, layout, gpus=1))
    assert outcome.exit_code != 0
    assert "CUDA error: out of memory" in (out / "official" / "run-001" / "process.log").read_text()
    rows = {r["sample_id"]: r for r in map(json.loads, (out / "samples.jsonl").read_text().splitlines())}
    ok = sorted(sid for sid, r in rows.items() if r["status"] == "ok")
    assert ok == ["3rd_data.mem_test.data-3", "3rd_data.mirror_test.loop-1"], rows
    assert all("no record in the Result.json" in r["error"] and "; process.py exited 1 after" in r["error"]
               and str(out / "official" / "run-001" / "process.log") in r["error"]
               for sid, r in rows.items() if sid not in ok), rows
    assert json.loads((out / "scorecard.json").read_text())["status"] == "partial"


def test_a_parent_gpu_mask_vipe_would_escape_is_one_line_before_any_work(
        tmp_path: Path, layout: Layout, checkout: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Was refused only after the work directory was laid out: a later run then removed it as "an invocation killed
    before it ended"."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    out = tmp_path / "run"
    with pytest.raises(RecipeError, match=r"CUDA_VISIBLE_DEVICES=4,5: process.py's ViPE step") as info:
        run_recipe(_cfg(out, layout))
    assert "\n" not in str(info.value) and not checkout["record"].exists()
    assert not (out / "official").exists()   # refused before any work directory: none is left looking killed


def test_visual_and_dino_read_the_staged_weights_through_the_fresh_cache(tmp_path: Path, layout: Layout,
                                                                        checkout: dict[str, Path],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every metric: the three files process.py would wget are where its get_*_path() look under MIND_CACHE_DIR
    (linked from the verified cache), and --dino_path is the located DINOv3 snapshot. Test double for the fetched
    weights: small files, pinned by their own digests in a copy of pins.yaml."""
    import yaml

    from pinbench.core.files import sha256_file
    from pinbench.core.pins import load_pins
    from pinbench.ops.cache import hf_snapshot_dir, url_path
    from pinbench_recipes.mind import weights

    cache = tmp_path / "cache"
    monkeypatch.setenv("PINBENCH_CACHE", str(cache))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    pins = yaml.safe_load(weights.PINS_PATH.read_text())
    staged = {}
    for name in ("musiq_spaq", "aesthetic_head", "clip_vit_l14"):
        staged[name] = tmp_path / "fetched" / name
        staged[name].parent.mkdir(exist_ok=True)
        staged[name].write_bytes(f"stand-in {name}".encode())
        pins["urls"][name]["sha256"] = sha256_file(staged[name])
    pins_path = tmp_path / "pins.yaml"
    pins_path.write_text(yaml.safe_dump(pins))
    monkeypatch.setattr(weights, "PINS_PATH", pins_path)
    loaded = load_pins(pins_path)
    for name, source in staged.items():
        dest = url_path(loaded.urls[name], cache)
        dest.parent.mkdir(parents=True)
        dest.write_bytes(source.read_bytes())
    dino = hf_snapshot_dir(loaded.huggingface["dinov3_vitb16"], cache)
    for file in ("config.json", "preprocessor_config.json", "model.safetensors"):
        (dino / file).parent.mkdir(parents=True, exist_ok=True)
        (dino / file).write_text("{}")

    out = tmp_path / "run"
    all_metrics = "lcm,visual,dino,action,gsc"
    outcome = run_recipe(_cfg(out, layout, gpus=1, metrics=all_metrics))
    work = out / "official" / "run-001"
    assert outcome.exit_code == 0, (outcome.message, (work / "process.log").read_text()[-3000:])
    seen = json.loads(checkout["record"].read_text())
    assert seen["argv"][-2:] == ["--dino_path", str(dino)] and "--metrics" in seen["argv"]
    assert seen["weights"] == ["clip_model/ViT-L-14.pt", "pyiqa_model/musiq_spaq_ckpt-358bb6af.pth",
                               "vitl_model/sa_0_4_vit_l_14_linear.pth"]
    rows = {r["sample_id"]: r["result"] for r in map(json.loads, (out / "samples.jsonl").read_text().splitlines())}
    data_1 = rows["1st_data.mem_test.data-1"]
    assert (data_1["imaging_quality"], data_1["aesthetic_quality"], data_1["dino_mse"]) == (0.5, 0.25, 0.001)
    inputs = json.loads((out / "scorecard.json").read_text())["provenance"]["inputs"]
    assert {"huggingface/dinov3_vitb16", "urls/musiq_spaq", "urls/aesthetic_head", "urls/clip_vit_l14",
            "urls/alexnet", "urls/sam_vit_b"} <= set(inputs) and "urls/eigen" not in inputs   # eigen: build only


def _group_members(pgid: int) -> list[str]:
    """The processes of group ``pgid`` still running, from /proc (a zombie has ended: only its parent can reap it)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:   # ended while listed
            continue
        fields = text[text.rindex(")") + 2:].split()   # after "(comm)": state, ppid, pgrp
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(f"{stat.parent.name} {text[:text.rindex(')') + 1]} state {fields[0]}")
    return members


def _state(pid: int) -> str:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2:].split()[0]


def _kill_groups_started_under(pid: int) -> list[int]:
    """SIGKILL every process group led by a descendant of ``pid`` (process.py's: ``execute`` starts it in its own);
    the leaders killed."""
    parents = {int(p.name): int(f[1]) for p in Path("/proc").glob("[0-9]*") if (f := process_stat(p.name))}
    groups = {int(p.name) for p in Path("/proc").glob("[0-9]*")
              if (f := process_stat(p.name)) and f[2] == p.name and f[0] != "Z"}

    def under(child: int) -> bool:
        while child in parents and child != pid:
            child = parents[child]
        return child == pid

    leaders = sorted(g for g in groups if g != pid and under(g))
    for leader in leaders:
        os.killpg(leader, signal.SIGKILL)
    return leaders


class _Watchdog(threading.Timer):
    """After ``seconds``, kills the process groups the test started, so a run whose timeout was not applied fails
    the test (``fired``) rather than hanging it for a day (no pytest-timeout is installed)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds, self._fire)
        self.daemon, self.fired = True, False

    def _fire(self) -> None:
        self.fired = True
        _kill_groups_started_under(os.getpid())


def test_a_hung_process_py_is_killed_with_its_whole_group_at_the_timeout_and_a_rerun_scores_only_what_it_left(
        tmp_path: Path, layout: Layout, checkout: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker lost without a word leaves process.py's pool waiting forever: the outer timeout kills its whole process
    group (the pool's workers and their ViPE subprocesses ignore SIGTERM), keeps what it had written and fails the rest
    by name. The recipe's own path, the step function given a short ``timeout_s`` (the option's minimum is 60 s)."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("MIND_DOUBLE_HANGS_AFTER", "2")   # the last two listed: third-person mem_test and mirror_test
    given = []
    process_py = steps.process_py

    def short_timeout(*args: Any, timeout_s: float, **kwargs: Any) -> steps.ScoreFn:
        given.append(timeout_s)
        return process_py(*args, timeout_s=HUNG_TIMEOUT_S, **kwargs)

    monkeypatch.setattr(steps, "process_py", short_timeout)
    out = tmp_path / "run"
    work = out / "official" / "run-001"
    watchdog = _Watchdog(WATCHDOG_S)
    watchdog.start()
    try:
        outcome = run_recipe(_cfg(out, layout, timeout_s="60"))
    finally:
        watchdog.cancel()
    assert not watchdog.fired, f"process.py was not killed at its {HUNG_TIMEOUT_S} s timeout: the test's " \
                               f"watchdog killed it after {WATCHDOG_S} s"
    assert given == [60] and outcome.exit_code != 0
    log = (work / "process.log").read_text()
    pids = [json.loads(line) for line in (work / "cache" / "pids.jsonl").read_text().splitlines()]
    assert len(pids) == 3, (pids, log[-2000:])   # main and two workers, each with its ViPE: all started before the kill
    leader = next(p["main"] for p in pids if "main" in p)
    assert _group_members(leader) == []
    assert all(not Path(f"/proc/{pid}").exists() or _state(pid) == "Z" for p in pids for pid in p.values()), pids

    rows = {r["sample_id"]: r for r in map(json.loads, (out / "samples.jsonl").read_text().splitlines())}
    kept = ["3rd_data.mem_test.data-3", "3rd_data.mirror_test.loop-1"]
    assert sorted(sid for sid, r in rows.items() if r["status"] == "ok") == kept, rows
    failed = sorted(sid for sid in rows if sid not in kept)
    assert failed == ["1st_data.action_space_test.data-2", "1st_data.mem_test.data-1", "1st_data.mirror_test.loop-1"]
    for sid in failed:
        error = rows[sid]["error"]
        assert "no record in the Result.json" in error and "process.py timed out and was killed after" in error
        assert f"(log: {work / 'process.log'})" in error and "\n" not in error, error

    monkeypatch.delenv("MIND_DOUBLE_HANGS_AFTER")
    outcome = run_recipe(_cfg(out, layout, timeout_s="60"))
    assert outcome.exit_code == 0, outcome.message
    assert sorted(json.loads(checkout["record"].read_text())["scored"]) == failed   # the kept two are not rescored
    again = {r["sample_id"]: r for r in map(json.loads, (out / "samples.jsonl").read_text().splitlines())}
    assert all(r["status"] == "ok" for r in again.values()) and sorted(again) == sorted(rows)
    assert all(again[sid] == rows[sid] for sid in kept)
