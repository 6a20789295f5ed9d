"""GPU check sized for a short loan of one GPU: what the CPU tests cannot run, in one command, offline.

    make gpu-check                                   # or: .venv/bin/python tools/gpu_check.py
    make gpu-check GPU_CHECK_OUT=/tmp/gpu-check      # also writes gpu_check.json and gpu_check.md there
    .venv/bin/python tools/gpu_check.py --device cpu --quick --out /tmp/gc   # the CPU path, end to end

Steps (each prints its own wall time when it finishes):

1. RAFT numerics: torchvision RAFT-large (the dynamic-degree recipe's ``RaftThings``, fp32, TF32 off) on
   CPU and on the device, over the recipe's synthetic moving-texture videos rendered at 144x256; max |dm|
   of the per-transition motion m, transitions whose m crosses tau differently, and clip verdicts
   (dynamic / static) that flip, through the recipe's own scoring (``score_video``).
2. LPIPS numerics: the shared LPIPS (AlexNet, v0.1; linear heads from the lpips wheel) on CPU and device,
   cuDNN TF32 as RememBench's pair metrics set it; max |d LPIPS| over frame pairs.
3. CLIP numerics: RememBench's ``ClipEmbedder`` (a ViT-H/14 vision tower; ``--quick``: a tiny CLIP) on
   CPU and device; max |d embedding| and the smallest cosine between the two devices' embeddings.
4. RAFT throughput at 480x832 (``--quick``: 240x416): frame pairs per second on CPU (batch 1) and on the
   device (batch 8, after one warm-up batch).
5. RAFT settings sweep: every combination of batch size (1, 8, 16), TF32 on/off, channels_last and
   cudnn.benchmark (``flow.settings_grid``): pairs per second at the throughput size and, on the check
   videos of step 1, max |dm|, transitions crossing tau and clip verdicts that flip against the recipe's fp32
   on CPU, and whether a second pass repeats m bit for bit. It names the fastest setting with no verdict
   flip that repeats (``adopt``) beside the recipe's own (``flow.RaftSettings()``). ``--quick`` runs one
   setting (batch 2, channels_last). Upstream (VBench) runs batch 1, fp32, no backend flag: PyTorch's
   defaults, i.e. TF32 in cuDNN convolutions on Ampere and later, cudnn.benchmark off.
6. TempSSIM throughput on a 379-frame 1376x768 rollout: frames per second of RememBench's TempSSIM with
   the CPU kernel (OpenCV filters in threads) on all cores, with one thread on the first 48 frames (the
   per-pair values of both must agree exactly), and with the torch float64 kernel on the device (its max
   difference to the CPU kernel beside it).

No network, no Hugging Face, no GitHub: weights that cannot be had offline are seeded random weights
of the right architecture (``--raft-weights FILE`` uses real RAFT weights instead). Random weights
measure implementation numerics, not the metrics' values; a verdict-flip count is informative only
when some m lie near tau, so the share of transitions above tau is reported beside it.

Time of each step on this project's 2-core CPU development machine, ``--device cpu --quick --threads 1``
(quick sizes: RAFT numerics on 1 video of 136x128, 45 transitions; RAFT throughput 1 pair of 416x240; LPIPS
2 pairs of 336x192; tiny CLIP; TempSSIM 48 frames of 344x192), measured on 2026-11-30 while the machine was
shared (load average about 12 on 2 cores; with torch's default 2 threads one RAFT pass took 11x longer):
    raft numerics 370.6 s, lpips numerics 19.8 s, clip numerics 11.7 s, raft throughput 147.1 s,
    tempssim throughput 2.1 s; 627 s in all (plus about 30 s of imports).
The default (full) sizes ran on one lent H200 with 16 cores on 2026-11-30, in that machine's own environment
(torch 2.11.0+cu130, CUDA 13.0, Python 3.12.3; not this project's locked torch, which the lent machine did not
have): 50 s in all (raft numerics 14.5 s, lpips 2.1 s, clip 11.9 s, raft throughput 4.7 s, tempssim 10.2 s),
every step done, no verdict flip, LPIPS within 9e-07 and CLIP within 2.5e-07 of the CPU. The CPU halves
dominate (RAFT-large and the ViT-H/14 tower forward on CPU); the device halves take seconds. Steps 5 (the
RAFT settings sweep) and 6's device half were added later and have not run on a GPU yet (no GPU was lent
when they were written); the sweep's budget is 24 settings x (2 passes over the check videos + 33 pairs at
480x832).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

SEED = 20261130
OUT_ENV = "PINBENCH_GPU_CHECK_OUT"
ONE_THREAD_FRAMES = 48
FULL = {"raft_videos": 3, "raft_size": (144, 256), "raft_pairs_cpu": 2, "raft_pairs_device": 32,
        "throughput_size": (480, 832), "settings_batches": (1, 8, 16), "settings_pairs": 32,
        "lpips_pairs": 8, "lpips_size": (384, 672), "clip": "vit-h14", "clip_images": 4,
        "tempssim_frames": 379, "tempssim_size": (768, 1376)}
QUICK = {"raft_videos": 1, "raft_size": (128, 136), "raft_pairs_cpu": 1, "raft_pairs_device": 8,
         "throughput_size": (240, 416), "settings_batches": None, "settings_pairs": 2,
         "lpips_pairs": 2, "lpips_size": (192, 336), "clip": "tiny", "clip_images": 2,
         "tempssim_frames": 48, "tempssim_size": (192, 344)}


class CheckFailed(RuntimeError):
    """A step could not run; its line in the table says why."""


# ------------------------------------------------------------------------------------------ helpers


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _random_raft_weights(path: Path, seed: int) -> Path:
    """torchvision raft_large with the recipe's seeded random parameters, saved as tensors."""
    import torch
    from torchvision.models.optical_flow import raft_large

    from pinbench_recipes.dynamic_degree.flow import seeded_random_state

    torch.save(seeded_random_state(raft_large(weights=None, progress=False).state_dict(), seed), path)
    return path


def _random_vit_h14(folder: Path, seed: int) -> tuple[Path, Path]:
    """open_clip config + safetensors of a ViT-H/14 vision tower with seeded weights (LayerNorm at 1/0)."""
    import open_clip
    import torch
    from safetensors.torch import save_file

    from pinbench_recipes.remembench.clip_model import OPENAI_MEAN, OPENAI_STD

    cfg = open_clip.get_model_config("ViT-H-14")
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "open_clip_config.json"
    config.write_text(json.dumps({"model_cfg": cfg, "preprocess_cfg": {"mean": list(OPENAI_MEAN),
                                                                       "std": list(OPENAI_STD)}}))
    with torch.device("meta"):
        visual = open_clip.model.CLIP(**cfg).visual
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for key, value in visual.state_dict().items():
        if value.ndim == 1 and ("ln" in key or "norm" in key) and key.endswith("weight"):
            tensor = torch.ones(value.shape)
        elif key.endswith("bias") or value.ndim == 0:
            tensor = torch.zeros(value.shape)
        else:
            tensor = torch.randn(value.shape, generator=generator) * 0.02
        state[f"visual.{key}"] = tensor.contiguous()
    weights = folder / "open_clip_model.safetensors"
    save_file(state, str(weights))
    return config, weights


def _frames(rng: np.random.Generator, n: int, height: int, width: int) -> np.ndarray:
    """(n, H, W, 3) uint8 smooth textures drifting by 2 px per frame (the dynamic-degree fixture's texture)."""
    from pinbench_recipes.dynamic_degree.fixture import texture

    canvas = texture(rng, height + 2 * n, width + 2 * n)
    return np.stack([canvas[2 * t:2 * t + height, 2 * t:2 * t + width] for t in range(n)])


# -------------------------------------------------------------------------------------------- steps


def _check_videos(sizes: dict[str, Any], work: Path) -> list[Path]:
    """The dynamic-degree fixture's synthetic videos at the check size (written once per run)."""
    from pinbench.media.video import write_video
    from pinbench_recipes.dynamic_degree.fixture import FIXTURE_VIDEOS, render
    from pinbench_recipes.dynamic_degree.fixture import SEED as FIXTURE_SEED

    height, width = sizes["raft_size"]
    videos = []
    for number, spec in enumerate(FIXTURE_VIDEOS[: sizes["raft_videos"]]):
        path = work / f"{spec.name}.mp4"
        if not path.is_file():
            write_video(path, render(spec, np.random.default_rng([FIXTURE_SEED, number]), height, width), spec.fps,
                        crf=12)
        videos.append(path)
    return videos


def _flip_counts(reference: list[dict[str, Any]], other: list[dict[str, Any]]) -> dict[str, Any]:
    """max |dm|, transitions crossing tau differently and clip verdict flips of ``other`` against ``reference``."""
    dm, crossings, flips, above, total = 0.0, 0, 0, 0, 0
    for a, b in zip(reference, other, strict=True):
        for clip_a, clip_b in zip(a["clips"], b["clips"], strict=True):
            for ma, mb in zip(clip_a["m"], clip_b["m"], strict=True):
                dm = max(dm, abs(ma - mb))
                crossings += (ma > a["tau"]) != (mb > a["tau"])
                above += ma > a["tau"]
                total += 1
            flips += clip_a["dynamic"] != clip_b["dynamic"]
    return {"transitions": total, "max_abs_dm_px": dm, "transitions_crossing_tau": crossings,
            "clip_verdict_flips": flips, "share_of_m_above_tau": above / total if total else None}


def raft_numerics(device: str, sizes: dict[str, Any], work: Path, weights: Path,
                  reference: dict[str, Any]) -> dict[str, Any]:
    """The recipe's RAFT (fp32, TF32 off) on CPU and device; the CPU runs are kept in ``reference``."""
    from pinbench_recipes.dynamic_degree.flow import RaftThings
    from pinbench_recipes.dynamic_degree.motion import score_video

    videos = _check_videos(sizes, work)
    runs = {name: [score_video(p, RaftThings(weights, device=dev, batch_size=4)) for p in videos]
            for name, dev in (("cpu", "cpu"), ("device", device))}
    reference["cpu_runs"] = runs["cpu"]
    height, width = sizes["raft_size"]
    return {"videos": len(videos), "size": f"{width}x{height}", **_flip_counts(runs["cpu"], runs["device"])}


def raft_settings(device: str, sizes: dict[str, Any], work: Path, weights: Path,
                  reference: dict[str, Any]) -> dict[str, Any]:
    """Every setting of the sweep: pairs/s at the throughput size, verdict flips against fp32 on CPU, repeatability.

    A setting is adoptable when no clip verdict flips against the CPU and a second pass gives the same m bit
    for bit; the fastest adoptable one is named (``adopt``). Verdict flips mean something only where some m
    lie near tau (``share_of_m_above_tau``; real weights via ``--raft-weights``).
    """
    from pinbench_recipes.dynamic_degree.flow import RaftSettings, RaftThings, settings_grid
    from pinbench_recipes.dynamic_degree.motion import score_video

    if "cpu_runs" not in reference:
        raise CheckFailed("needs the CPU runs of the raft numerics step, which failed")
    videos = _check_videos(sizes, work)
    height, width = sizes["throughput_size"]
    frames = _frames(np.random.default_rng(SEED + 2), 17, height, width)
    rows = []
    # --quick (a CPU smoke, where TF32 and cudnn.benchmark do nothing): one setting besides the recipe's
    grid = (settings_grid(sizes["settings_batches"]) if sizes["settings_batches"]
            else [RaftSettings(batch_size=2, channels_last=True)])
    for setting in grid:
        estimator = RaftThings(weights, device=device, batch_size=setting.batch_size, tf32=setting.tf32,
                               channels_last=setting.channels_last, cudnn_benchmark=setting.cudnn_benchmark)
        first = [score_video(p, estimator) for p in videos]
        second = [score_video(p, estimator) for p in videos]
        repeatable = all(a["clips"] == b["clips"] for a, b in zip(first, second, strict=True))
        estimator.flow(frames[:setting.batch_size], frames[1:setting.batch_size + 1])   # warm-up, autotuning
        _sync(device)
        pairs = max(sizes["settings_pairs"], setting.batch_size)
        start, done = time.perf_counter(), 0
        while done < pairs:
            take = min(setting.batch_size, pairs - done)
            estimator.flow(frames[:take], frames[1:take + 1])
            done += take
        _sync(device)
        rows.append({"setting": setting.label, "batch_size": setting.batch_size, "tf32": setting.tf32,
                     "channels_last": setting.channels_last, "cudnn_benchmark": setting.cudnn_benchmark,
                     "pairs_per_s": done / (time.perf_counter() - start), "repeatable": repeatable,
                     **_flip_counts(reference["cpu_runs"], first)})
    adoptable = [r for r in rows if r["clip_verdict_flips"] == 0 and r["repeatable"]]
    best = max(adoptable, key=lambda r: r["pairs_per_s"]) if adoptable else None
    recipe = next((r for r in rows if r["setting"] == RaftSettings().label), None)
    return {"size": f"{width}x{height}", "settings": rows, "adopt": best["setting"] if best else None,
            "adopt_pairs_per_s": best["pairs_per_s"] if best else None,
            "recipe_setting": RaftSettings().label, "recipe_pairs_per_s": recipe["pairs_per_s"] if recipe else None}


def lpips_numerics(device: str, sizes: dict[str, Any], work: Path) -> dict[str, Any]:
    from pinbench.media.lpips import load_lpips, lpips_distance
    from pinbench.media.precision import tf32
    from pinbench_recipes.remembench.fixture import write_random_alexnet

    trunk = work / "alexnet-random.pth"
    write_random_alexnet(trunk, SEED)
    height, width = sizes["lpips_size"]
    frames = _frames(np.random.default_rng(SEED), 2 * sizes["lpips_pairs"], height, width)
    a, b = frames[0::2], frames[1::2]
    values = {}
    for name, dev in (("cpu", "cpu"), ("device", device)):
        model = load_lpips(trunk, expected_sha256=None, device=dev)
        with tf32(cudnn=True, matmul=False):   # as RememBench's pair metrics run it
            values[name] = lpips_distance(model, a, b)
    delta = np.abs(values["cpu"] - values["device"])
    return {"pairs": len(a), "size": f"{width}x{height}", "max_abs_d_lpips": float(delta.max()),
            "lpips_range": [float(values["cpu"].min()), float(values["cpu"].max())]}


def clip_numerics(device: str, sizes: dict[str, Any], work: Path) -> dict[str, Any]:
    from pinbench.media.precision import tf32
    from pinbench_recipes.remembench.clip_model import ClipEmbedder
    from pinbench_recipes.remembench.fixture import write_tiny_clip

    if sizes["clip"] == "vit-h14":
        config, weights = _random_vit_h14(work / "clip", SEED)
        require = True
    else:
        write_tiny_clip(work / "clip", SEED)
        config, weights, require = work / "clip" / "open_clip_config.json", \
            work / "clip" / "open_clip_model.safetensors", False
    images = list(_frames(np.random.default_rng(SEED + 1), sizes["clip_images"], 256, 448))
    embeddings = {}
    for name, dev in (("cpu", "cpu"), ("device", device)):
        embedder = ClipEmbedder(config, weights, device=dev, require_vit_h14=require)
        with tf32(cudnn=True, matmul=False):
            embeddings[name] = embedder.embed(images).astype(np.float64)
    cosine = np.sum(embeddings["cpu"] * embeddings["device"], axis=1)
    return {"model": sizes["clip"], "images": len(images),
            "max_abs_d_embedding": float(np.abs(embeddings["cpu"] - embeddings["device"]).max()),
            "min_cosine_cpu_vs_device": float(cosine.min())}


def raft_throughput(device: str, sizes: dict[str, Any], weights: Path) -> dict[str, Any]:
    from pinbench_recipes.dynamic_degree.flow import RaftThings

    height, width = sizes["throughput_size"]
    frames = _frames(np.random.default_rng(SEED + 2), 9, height, width)
    first, second = frames[:-1], frames[1:]
    out: dict[str, Any] = {"size": f"{width}x{height}"}
    for name, dev, n_pairs, batch in (("cpu", "cpu", sizes["raft_pairs_cpu"], 1),
                                      ("device", device, sizes["raft_pairs_device"], 8)):
        estimator = RaftThings(weights, device=dev, batch_size=batch)
        if dev == "cpu":
            estimator.model()                                      # load only: a CPU pass is slow and steady
        else:
            estimator.flow(first[:batch], second[:batch])          # warm-up (model load, kernels, autotuning)
        _sync(dev)
        start, done = time.perf_counter(), 0
        while done < n_pairs:
            take = min(batch, n_pairs - done, len(first))
            estimator.flow(first[:take], second[:take])
            done += take
        _sync(dev)
        out[f"{name}_pairs_per_s"] = done / (time.perf_counter() - start)
        out[f"{name}_pairs"] = done
    out["speedup"] = out["device_pairs_per_s"] / out["cpu_pairs_per_s"]
    return out


def tempssim_throughput(device: str, sizes: dict[str, Any]) -> dict[str, Any]:
    """RememBench's TempSSIM: the CPU kernel with all cores and one thread, and the torch kernel on the device."""
    from pinbench_recipes.remembench.metrics import tempssim_pairs, to_gray

    height, width = sizes["tempssim_size"]
    n = sizes["tempssim_frames"]
    rgb = _frames(np.random.default_rng(SEED + 3), n, height, width)
    gray = to_gray(rgb)
    out: dict[str, Any] = {"frames": n, "size": f"{width}x{height}", "cores": os.cpu_count()}
    results = {}
    # one thread on the first ONE_THREAD_FRAMES only: the same rate, a fraction of the time
    for name, workers, frames in (("all_cores", None, gray), ("one_thread", 1, gray[:ONE_THREAD_FRAMES])):
        tempssim_pairs(gray[:3], max_workers=workers)   # warm-up: the kernel's first call costs ~2 s once
        start = time.perf_counter()
        results[name] = tempssim_pairs(frames, max_workers=workers)
        out[f"{name}_frames_per_s"] = (len(frames) - 1) / (time.perf_counter() - start)
    shared = len(results["one_thread"])
    out["threads_agree_exactly"] = bool(np.array_equal(results["all_cores"][:shared], results["one_thread"]))
    out["tempssim"] = float(results["all_cores"].mean())
    tempssim_pairs(gray[:3], device=device)     # warm-up (CUDA context, kernels)
    _sync(device)
    start = time.perf_counter()
    on_device = tempssim_pairs(gray, device=device)
    _sync(device)
    out["device_frames_per_s"] = (n - 1) / (time.perf_counter() - start)
    out["max_abs_d_device_vs_cpu"] = float(np.abs(on_device - results["all_cores"]).max())
    return out


# ---------------------------------------------------------------------------------------------- main


def _rows(results: dict[str, dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(check, result, note) rows of the summary table."""
    def get(step: str, key: str, fmt: str = "{:.3g}") -> str:
        value = results.get(step, {}).get(key)
        return "-" if value is None else (fmt.format(value) if isinstance(value, float) else str(value))

    rows = []
    for step in results:
        if "error" in results[step]:
            rows.append((step, "FAILED", results[step]["error"]))
    r = results
    if "raft numerics" in r and "error" not in r["raft numerics"]:
        rows += [("RAFT max abs dm (px), CPU vs device", get("raft numerics", "max_abs_dm_px"),
                  f"{get('raft numerics', 'transitions')} transitions at {get('raft numerics', 'size')}"),
                 ("RAFT transitions crossing tau differently", get("raft numerics", "transitions_crossing_tau"),
                  f"share of m above tau {get('raft numerics', 'share_of_m_above_tau', '{:.2f}')}"),
                 ("dynamic-degree clip verdict flips", get("raft numerics", "clip_verdict_flips"),
                  f"{get('raft numerics', 'videos')} synthetic videos")]
    if "lpips numerics" in r and "error" not in r["lpips numerics"]:
        rows.append(("LPIPS max abs diff, CPU vs device", get("lpips numerics", "max_abs_d_lpips"),
                     f"{get('lpips numerics', 'pairs')} pairs at {get('lpips numerics', 'size')}, cuDNN TF32 on"))
    if "clip numerics" in r and "error" not in r["clip numerics"]:
        rows += [("CLIP max abs embedding diff", get("clip numerics", "max_abs_d_embedding"),
                  f"{get('clip numerics', 'model')}, {get('clip numerics', 'images')} images"),
                 ("CLIP min cosine CPU vs device", get("clip numerics", "min_cosine_cpu_vs_device", "{:.7f}"), "")]
    if "raft throughput" in r and "error" not in r["raft throughput"]:
        rows.append((f"RAFT pairs/s at {get('raft throughput', 'size')}: CPU / device",
                     f"{get('raft throughput', 'cpu_pairs_per_s')} / {get('raft throughput', 'device_pairs_per_s')}",
                     f"x{get('raft throughput', 'speedup')} (device batch 8)"))
    if "raft settings" in r and "error" not in r["raft settings"]:
        rows.append((f"RAFT fastest setting with no verdict flip vs CPU fp32, at {get('raft settings', 'size')}",
                     get("raft settings", "adopt"),
                     f"{get('raft settings', 'adopt_pairs_per_s')} pairs/s; the recipe's "
                     f"({get('raft settings', 'recipe_setting')}): {get('raft settings', 'recipe_pairs_per_s')}"))
    if "tempssim throughput" in r and "error" not in r["tempssim throughput"]:
        rows.append((f"TempSSIM frames/s, {get('tempssim throughput', 'frames')} frames "
                     f"{get('tempssim throughput', 'size')}: all cores / 1 thread / device",
                     f"{get('tempssim throughput', 'all_cores_frames_per_s')} / "
                     f"{get('tempssim throughput', 'one_thread_frames_per_s')} / "
                     f"{get('tempssim throughput', 'device_frames_per_s')}",
                     f"CPU kernel on {get('tempssim throughput', 'cores')} cores; torch float64 on the device, "
                     f"max abs diff {get('tempssim throughput', 'max_abs_d_device_vs_cpu')}"))
    return rows


def settings_table(results: dict[str, dict[str, Any]]) -> list[str]:
    """One line per RAFT setting of the sweep (empty when the step did not run)."""
    sweep = results.get("raft settings", {})
    if "settings" not in sweep:
        return []
    lines = ["", f"RAFT settings at {sweep['size']} (verdicts against fp32 on CPU on the check videos):", "",
             "| setting | pairs/s | clip verdict flips | transitions crossing tau | max abs dm (px) | repeatable |",
             "|---|---:|---:|---:|---:|---|"]
    lines += [f"| {row['setting']} | {row['pairs_per_s']:.3g} | {row['clip_verdict_flips']} | "
              f"{row['transitions_crossing_tau']} | {row['max_abs_dm_px']:.3g} | {row['repeatable']} |"
              for row in sweep["settings"]]
    return lines


def markdown(report: dict[str, Any]) -> str:
    env = report["environment"]
    lines = [f"gpu-check {report['mode']} on {env['device_name']} (torch {env['torch']}, CUDA {env['cuda']}, "
             f"{env['cpu_cores']} CPU cores, {env['torch_cpu_threads']} torch threads), {report['total_s']:.0f} s", "",
             "| check | result | note |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in _rows(report["results"])]
    lines += settings_table(report["results"])
    lines += ["", "step times (s): " + ", ".join(f"{k} {v:.1f}" for k, v in report["step_seconds"].items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/gpu_check.py", description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu (the CPU path only)")
    parser.add_argument("--quick", action="store_true", help="small sizes (a CPU smoke of the whole script)")
    parser.add_argument("--out", type=Path, default=os.environ.get(OUT_ENV) or None,
                        help=f"folder for gpu_check.json and gpu_check.md (or ${OUT_ENV})")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: torch's own; 1 on a shared, oversubscribed machine)")
    parser.add_argument("--raft-weights", type=Path, default=None,
                        help="real RAFT-large weights (torchvision layout) instead of seeded random ones")
    args = parser.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"error: CUDA is not available here (torch {torch.__version__}, built for CUDA {torch.version.cuda}, "
              f"{torch.cuda.device_count()} device(s)); this check needs a GPU; `--device cpu --quick` runs the "
              "CPU path only", file=sys.stderr)
        return 2
    sizes = QUICK if args.quick else FULL
    env = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
           "cpu_cores": os.cpu_count(), "torch_cpu_threads": torch.get_num_threads(), "device": args.device,
           "device_name": torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "cpu"}
    print(f"gpu-check ({'quick' if args.quick else 'full'}) on {env['device_name']}, torch {env['torch']}",
          flush=True)
    results: dict[str, dict[str, Any]] = {}
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pinbench-gpu-check-") as tmp:
        work = Path(tmp)
        weights = args.raft_weights or _random_raft_weights(work / "raft-random.pth", SEED)
        reference: dict[str, Any] = {}   # the CPU runs of "raft numerics", the sweep's reference
        steps: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            ("raft numerics", lambda: raft_numerics(args.device, sizes, work, weights, reference)),
            ("lpips numerics", lambda: lpips_numerics(args.device, sizes, work)),
            ("clip numerics", lambda: clip_numerics(args.device, sizes, work)),
            ("raft throughput", lambda: raft_throughput(args.device, sizes, weights)),
            ("raft settings", lambda: raft_settings(args.device, sizes, work, weights, reference)),
            ("tempssim throughput", lambda: tempssim_throughput(args.device, sizes)),
        ]
        for name, step in steps:
            t0 = time.perf_counter()
            try:
                results[name] = step()
            except Exception as exc:  # one step's failure is reported in the table; the others still run
                results[name] = {"error": " ".join(f"{type(exc).__name__}: {exc}".split())[:300]}
            seconds[name] = time.perf_counter() - t0
            state = "FAILED: " + results[name]["error"] if "error" in results[name] else "done"
            print(f"  {name}: {seconds[name]:.1f} s, {state}", flush=True)
    report = {"mode": "quick" if args.quick else "full", "environment": env, "sizes": {
        k: list(v) if isinstance(v, tuple) else v for k, v in sizes.items()},
        "raft_weights": str(args.raft_weights) if args.raft_weights else f"seeded random (seed {SEED})",
        "results": results, "step_seconds": seconds, "total_s": time.perf_counter() - started}
    text = markdown(report)
    print("\n" + text, end="")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu_check.json").write_text(json.dumps(report, indent=1) + "\n")
        (args.out / "gpu_check.md").write_text(text)
        print(f"wrote {args.out / 'gpu_check.json'} and {args.out / 'gpu_check.md'}")
    return 1 if any("error" in r for r in results.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
