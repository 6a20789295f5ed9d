"""Benchmark: the SSIM kernels against their baselines in one run, at the benchmarks' real sizes.

    .venv/bin/python tools/bench_kernels.py                         # CPU, every row below
    .venv/bin/python tools/bench_kernels.py --fork DIR              # + the PAI-Bench-C fork's own blur SSIM code
    .venv/bin/python tools/bench_kernels.py --device cuda           # + TempSSIM in torch on the GPU

RememBench TempSSIM, on one synthetic rollout of the T2V size (379 frames of 1376x768: a pan over a smooth
texture with a moving disc and sensor noise, libx264 crf 18), decoded once with OpenCV as the recipe does:

* decode alone: the floor of a decode-once pipeline;
* the baseline: scikit-image's ``structural_similarity`` per consecutive pair with the paper's settings;
* the recipe's TempSSIM (``metrics.tempssim_pairs``, gray conversion included) with every core, and with one
  thread (OpenCV's own threads set to 1 too);
* with ``--device``: the same through the torch kernel on that device;
* decode and TempSSIM together, in a fresh process pinned to 1 and to 2 cores (``taskset``; "free cores": what a
  loaded machine leaves): decode alone there, decode then TempSSIM (the recipe before), and the recipe's
  ``decode_with_tempssim`` (a reader thread decodes while each frame is scored), each "x decode" against the
  decode alone on the same cores.

PAI-Bench-C blur SSIM, on a synthetic 121-frame 1280x704 GT and a perturbed prediction (shifted, brighter,
noisy), both through libx264 and OpenCV decoding:

* decode alone, and the bilateral blur on one thread (the same ``cv2.bilateralFilter`` call in every path:
  timed once, in core-seconds);
* the baseline: the fork's per-frame path. Without ``--fork`` it is re-implemented from the spec
  (paibench_c.md section 2.2, which gives it call for call: per frame ``structural_similarity(gt, pred,
  data_range=gt.max() - gt.min(), full=True, channel_axis=2)``, the map averaged over channels, then the
  mean over frames and pixels). With ``--fork DIR`` (a checkout of trungtpham/pai-bench-c-cosmos3, or its
  ``conditional_generation`` folder) it is the fork's own ``compute_blur_error_blur_video``, imported from
  there, and the fork's ``apply_bilateral_filter`` is checked against the recipe's blur;
* the native blur SSIM (``blur.blurred_ssim``) with every core and with one thread;
* a prediction decoded, blurred and scored against the blurred GT, in a process pinned to 1 and to 2 cores, on
  its first ``--blur-pipeline-frames`` frames: decode alone, decode then blur then SSIM, and the recipe's
  ``blurred_ssim_of_frames`` fed by a reader thread (each frame blurred and scored as it decodes).

Every ratio is against a baseline measured in the same run; each compared row (decode, baselines, kernels)
is the fastest of ``--repeat`` runs (default 3), the usual way to time on a shared machine; the bilateral
blur runs once. "x decode" is the kernel's time over the
decode time of the same video. "CPU s" is the process's CPU time over the row (every thread): the
core-seconds a row costs, which holds better than wall time on a shared machine. Peak memory is the
process's peak resident memory above its level when the row started (Linux ``VmHWM``, reset per row through
``/proc/self/clear_refs``); for a GPU row, torch's peak allocation. The load average before and after says
what else the machine was running.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from skimage.metrics import structural_similarity  # imported before any timing

TEMPSSIM_SIZE = (768, 1376)   # (H, W) of RememBench's T2V rollouts
TEMPSSIM_FRAMES = 379
BLUR_SIZE = (704, 1280)       # (H, W) of PAI-Bench-C's generated videos
BLUR_FRAMES = 121
BLUR_PIPELINE_FRAMES = 24
SEED = 20261201


@dataclass(frozen=True)
class Cost:
    """What one timed call took: wall seconds, CPU seconds of the process (core-seconds), peak MiB."""

    seconds: float
    cpu_seconds: float
    peak_mib: float


@dataclass(frozen=True)
class Row:
    """One timed path of one kernel."""

    kernel: str
    path: str
    frames: int
    cost: Cost
    baseline_s: float | None = None     # the baseline's wall time, for "x baseline"
    decode_s: float | None = None       # this video's decode time, for "x decode"
    max_diff: float | None = None       # largest |value - baseline value|


# --------------------------------------------------------------------------------------- measuring


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")   # resets VmHWM to the current RSS (Linux >= 4.0)
        return True
    except OSError:
        return False


def measure(fn: Callable[[], Any], device: str = "cpu") -> tuple[Any, Cost]:
    """fn() and its cost: wall and CPU seconds, peak MiB above the start (RSS; on a GPU torch's allocation)."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start_bytes = torch.cuda.memory_allocated()
        started, cpu_started = time.perf_counter(), time.process_time()
        value = fn()
        torch.cuda.synchronize()
        return value, Cost(time.perf_counter() - started, time.process_time() - cpu_started,
                           (torch.cuda.max_memory_allocated() - start_bytes) / 2**20)
    reset = _reset_peak()
    start_kib = _status_kib("VmRSS") or 0
    started, cpu_started = time.perf_counter(), time.process_time()
    value = fn()
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    peak_kib = _status_kib("VmHWM") if reset else None
    return value, Cost(seconds, cpu_seconds, float("nan") if peak_kib is None else (peak_kib - start_kib) / 1024)


def best_of(repeat: int, fn: Callable[[], Any], device: str = "cpu") -> tuple[Any, Cost]:
    """fn() and the cost of its fastest of ``repeat`` runs (the run least disturbed on a shared machine)."""
    value, cost = measure(fn, device)
    for _ in range(repeat - 1):
        _, again = measure(fn, device)
        cost = min(cost, again, key=lambda c: c.seconds)
    return value, cost


@contextlib.contextmanager
def opencv_threads(n: int | None) -> Iterator[None]:
    """OpenCV's own thread count for a one-thread row (restored after)."""
    before = cv2.getNumThreads()
    if n is not None:
        cv2.setNumThreads(n)
    try:
        yield
    finally:
        cv2.setNumThreads(before)


# ------------------------------------------------------------------------------------------ videos


def _texture(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    coarse = rng.uniform(0, 255, (max(2, height // 24), max(2, width // 24), 3)).astype(np.float32)
    return cv2.resize(coarse, (width, height), interpolation=cv2.INTER_CUBIC)


def rollout(path: Path, n: int, height: int, width: int, seed: int) -> Path:
    """A slow pan over a smooth texture with a moving disc and sensor noise (not a flat field)."""
    from pinbench.media.video import write_video

    rng = np.random.default_rng(seed)
    texture = _texture(rng, height, width + 2 * n)

    def frames() -> Iterator[np.ndarray]:
        for t in range(n):
            frame = texture[:, 2 * t:2 * t + width].copy()
            centre = (int(width / 2 + width / 3 * np.sin(t / 20)), height // 2)
            cv2.circle(frame, centre, max(1, height // 8), (250, 240, 30), -1)
            yield np.clip(frame + rng.normal(0, 3, frame.shape), 0, 255).astype(np.uint8)

    return write_video(path, frames(), 24, crf=18)


def perturbed(path: Path, source: np.ndarray, seed: int) -> Path:
    """A stand-in prediction: the GT shifted by 2 px, 8 levels brighter, with noise."""
    from pinbench.media.video import write_video

    rng = np.random.default_rng(seed)

    def frames() -> Iterator[np.ndarray]:
        for frame in source:
            moved = np.roll(frame, 2, axis=1).astype(np.float32) + 8
            yield np.clip(moved + rng.normal(0, 4, frame.shape), 0, 255).astype(np.uint8)

    return write_video(path, frames(), 30, crf=18)


# ------------------------------------------------------------------------------------ the baselines


def skimage_tempssim(gray: np.ndarray) -> np.ndarray:
    """The baseline: scikit-image per consecutive pair, the paper's settings."""
    return np.array([structural_similarity(gray[t], gray[t + 1], data_range=255, gaussian_weights=True,
                                           sigma=1.5, use_sample_covariance=False) for t in range(len(gray) - 1)])


def spec_fork_blur_ssim(pred_blur: np.ndarray, gt_blur: np.ndarray) -> float:
    """The fork's per-frame path as spec section 2.2 gives it (same-shaped videos, as here)."""
    maps = [structural_similarity(g, p, data_range=g.max() - g.min(), full=True, channel_axis=2)[1].mean(axis=2)
            for g, p in zip(gt_blur, pred_blur, strict=True)]
    return float(np.mean(np.stack(maps)))


@dataclass(frozen=True)
class Fork:
    """The fork's blur code, imported from a checkout."""

    root: Path
    blur_ssim: Callable[[np.ndarray, np.ndarray], float]
    bilateral: Callable[..., np.ndarray]


class ForkError(RuntimeError):
    """--fork DIR cannot be used (one line: the folder and what is wrong)."""


def load_fork(folder: Path) -> Fork:
    """The fork's ``compute_blur_error_blur_video`` and ``apply_bilateral_filter`` from a checkout."""
    root = folder / "conditional_generation" if (folder / "conditional_generation").is_dir() else folder
    package = root / "benchmark_pipelines" / "scores" / "transfer_bench"
    if not (package / "metrics_canny_blur_depth.py").is_file():
        raise ForkError(f"--fork {folder}: no benchmark_pipelines/scores/transfer_bench/metrics_canny_blur_depth.py "
                        "there or under conditional_generation/ (a trungtpham/pai-bench-c-cosmos3 checkout?)")
    sys.path.insert(0, str(root))          # the fork runs from conditional_generation/ (its decord.py shim too)
    try:
        metrics = importlib.import_module("benchmark_pipelines.scores.transfer_bench.metrics_canny_blur_depth")
        blur = importlib.import_module("benchmark_pipelines.scores.transfer_bench.video_to_canny_and_blur")
        return Fork(root, metrics.compute_blur_error_blur_video, blur.apply_bilateral_filter)
    except (ImportError, AttributeError) as exc:
        raise ForkError(f"--fork {folder}: cannot import the fork's blur code: {type(exc).__name__}: {exc} "
                        "(run this in the fork's environment)") from None


# -------------------------------------------------------------------------------------------- runs


def bench_tempssim(work: Path, n: int, size: tuple[int, int], device: str | None,
                   repeat: int) -> tuple[list[Row], list[str]]:
    from pinbench.media.video import read_video
    from pinbench_recipes.remembench.metrics import tempssim_pairs, to_gray

    height, width = size
    video = rollout(work / "rollout.mp4", n, height, width, SEED)
    name = f"RememBench TempSSIM, {n} frames {width}x{height}"
    frames, decode = best_of(repeat, lambda: read_video(video, backend="opencv").frames)
    baseline, base = best_of(repeat, lambda: skimage_tempssim(to_gray(frames)))
    native, ours = best_of(repeat, lambda: tempssim_pairs(to_gray(frames)))
    with opencv_threads(1):
        single, ours_single = best_of(repeat, lambda: tempssim_pairs(to_gray(frames), max_workers=1))
    versus = {"baseline_s": base.seconds, "decode_s": decode.seconds}
    rows = [Row(name, "decode alone (OpenCV, once)", n, decode),
            Row(name, "baseline: scikit-image per pair", n, base, **versus),
            Row(name, f"recipe kernel, {os.cpu_count()} threads", n, ours, **versus,
                max_diff=float(np.abs(native - baseline).max())),
            Row(name, "recipe kernel, 1 thread", n, ours_single, **versus,
                max_diff=float(np.abs(single - baseline).max()))]
    notes = [f"TempSSIM: thread count changes nothing: {np.array_equal(native, single)}; video value "
             f"{native.mean():.12f} (scikit-image {baseline.mean():.12f})"]
    if device:
        tempssim_pairs(to_gray(frames[:3]), device=device)     # warm-up: CUDA context, kernels
        on_device, on_device_cost = best_of(repeat, lambda: tempssim_pairs(to_gray(frames), device=device), device)
        rows.append(Row(name, f"torch kernel on {device} (float64)", n, on_device_cost, **versus,
                        max_diff=float(np.abs(on_device - baseline).max())))
        notes.append(f"TempSSIM on {device} vs the CPU kernel: max |diff| {np.abs(on_device - native).max():.2e}")
    pinned, pinned_notes = pinned_rows(name, "TempSSIM", n, pinned_children("tempssim", cpus(), [
        "--video", str(video), "--repeat", str(repeat)]), "TempSSIM")
    rows += pinned
    notes += pinned_notes
    paper = paper_float32_tempssim(to_gray(frames), device or "cpu")
    notes.append(f"TempSSIM in the paper's arithmetic (float32 valid 2-D convolution, on {device or 'cpu'}): video "
                 f"value differs by {abs(paper.mean() - native.mean()):.2e}, per pair by up to "
                 f"{np.abs(paper - native).max():.2e}")
    return rows, notes


def paper_float32_tempssim(gray: np.ndarray, device: str, batch: int = 16) -> np.ndarray:
    """SSIM by valid 2-D convolution with the 11 x 11 Gaussian window in float32 (the paper's GPU arithmetic)."""
    import torch

    from pinbench.media.ssim import make_window

    taps = torch.from_numpy(make_window("gaussian").taps()).float()
    window = (taps[:, None] @ taps[None, :])[None, None].to(device)
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    out = []
    conv = torch.nn.functional.conv2d
    with torch.inference_mode():
        frames = torch.from_numpy(gray).to(device).float()
        for s in range(0, len(gray) - 1, batch):
            a, b = frames[s:s + batch + 1][:-1, None], frames[s + 1:s + batch + 1][:, None]
            mu_a, mu_b = conv(a, window), conv(b, window)
            var_a, var_b = conv(a * a, window) - mu_a * mu_a, conv(b * b, window) - mu_b * mu_b
            cov = conv(a * b, window) - mu_a * mu_b
            ssim = (2 * mu_a * mu_b + c1) * (2 * cov + c2) / ((mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2))
            out.append(ssim.mean(dim=(1, 2, 3)).double().cpu())
    return torch.cat(out).numpy()


def bench_blur(work: Path, n: int, size: tuple[int, int], fork: Fork | None, repeat: int,
               pipeline_frames: int) -> tuple[list[Row], list[str]]:
    from pinbench.media.video import read_video
    from pinbench_recipes.paibench_c.blur import bilateral_blur, blurred_ssim

    height, width = size
    gt_video = rollout(work / "gt.mp4", n, height, width, SEED + 1)
    gt_source = read_video(gt_video, backend="opencv").frames
    pred_video = perturbed(work / "pred.mp4", gt_source, SEED + 2)
    del gt_source
    name = f"PAI-Bench-C blur SSIM, {n} frames {width}x{height}"
    gt, decode = best_of(repeat, lambda: read_video(gt_video, backend="opencv").frames)
    pred = read_video(pred_video, backend="opencv").frames
    with opencv_threads(1):   # once: it is not a compared kernel, and 121 frames take minutes
        gt_blur, blur = measure(lambda: bilateral_blur(gt))
    pred_blur = bilateral_blur(pred)
    notes = []
    if fork is not None:
        same = np.array_equal(fork.bilateral(pred[:2], d=30, sigma_color=150, sigma_space=100), pred_blur[:2])
        notes.append(f"fork ({fork.root}): its apply_bilateral_filter equals the recipe's blur on 2 frames: {same}")
        baseline_fn: Callable[[], float] = lambda: fork.blur_ssim(pred_blur, gt_blur)  # noqa: E731
        label = "baseline: the fork's compute_blur_error_blur_video (--fork)"
    else:
        baseline_fn = lambda: spec_fork_blur_ssim(pred_blur, gt_blur)  # noqa: E731
        label = "baseline: fork's per-frame path (spec 2.2, local)"
    baseline, base = best_of(repeat, baseline_fn)
    native, ours = best_of(repeat, lambda: blurred_ssim(pred_blur, gt_blur))
    with opencv_threads(1):
        single, ours_single = best_of(repeat, lambda: blurred_ssim(pred_blur, gt_blur, max_workers=1))
    versus = {"baseline_s": base.seconds, "decode_s": decode.seconds}
    rows = [Row(name, "decode alone (OpenCV, GT only)", n, decode),
            Row(name, "bilateral blur, 1 thread (cv2, the same call in every path; GT only)", n, blur,
                decode_s=decode.seconds),
            Row(name, label, n, base, **versus),
            Row(name, f"native kernel, {os.cpu_count()} threads", n, ours, **versus, max_diff=abs(native - baseline)),
            Row(name, "native kernel, 1 thread", n, ours_single, **versus, max_diff=abs(single - baseline))]
    notes.append(f"blur SSIM: native {native!r}, baseline {baseline!r}; one thread gives the same value: "
                 f"{single == native}")
    if pipeline_frames:
        frames = min(pipeline_frames, n)
        np.save(work / "gt_blur.npy", gt_blur[:frames])
        pinned, pinned_notes = pinned_rows(
            f"PAI-Bench-C blur SSIM of a prediction, its first {frames} frames", "blur SSIM", frames,
            pinned_children("blur", cpus(), ["--video", str(pred_video), "--gt-blur", str(work / "gt_blur.npy"),
                                             "--frames", str(frames), "--repeat", str(repeat)]),
            "blur + SSIM")
        rows += pinned
        notes += pinned_notes
    return rows, notes


# ----------------------------------------------------------------------------- decode and compute, pinned


def pinned_children(kind: str, cpus: list[int], args: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """``--child kind ARGS`` in fresh processes pinned to the first 1 and 2 of ``cpus`` (taskset): their costs."""
    import json
    import subprocess

    out = []
    for n in (1, 2):
        if n > len(cpus):
            continue
        chosen = ",".join(str(c) for c in cpus[:n])
        proc = subprocess.run(["taskset", "-c", chosen, sys.executable, __file__, "--child", kind, *args],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"pinned child ({kind}, cores {chosen}) failed: {proc.stderr.strip()[-500:]}")
        out.append((f"{n} core{'s' if n > 1 else ''} (taskset -c {chosen})", json.loads(proc.stdout.splitlines()[-1])))
    return out


def child_tempssim(video: Path, repeat: int) -> dict[str, Any]:
    """In a pinned process: decode alone, decode then TempSSIM, and decode_with_tempssim (overlapped)."""
    from pinbench.media.video import read_video
    from pinbench_recipes.remembench.metrics import decode_with_tempssim, tempssim, to_gray

    _, decode = best_of(repeat, lambda: read_video(video, backend="opencv").frames)
    before, sequential = best_of(repeat, lambda: tempssim(to_gray(read_video(video, backend="opencv").frames)))
    (_, overlapped_value), overlapped = best_of(repeat, lambda: decode_with_tempssim(video, "opencv"))
    return {"decode": decode.__dict__, "sequential": sequential.__dict__, "overlapped": overlapped.__dict__,
            "same": overlapped_value == before}


def child_blur(pred: Path, gt_blur_path: Path, frames: int, repeat: int) -> dict[str, Any]:
    """In a pinned process, on the first ``frames`` frames: decode alone, decode then blur then SSIM, and
    blurred_ssim_of_frames fed by a reader thread."""
    from pinbench.media.video import iter_frames, read_ahead, read_video
    from pinbench_recipes.paibench_c.blur import bilateral_blur, blurred_ssim, blurred_ssim_of_frames

    gt_blur = np.load(gt_blur_path)[:frames]

    def first(n: int) -> Iterator[np.ndarray]:
        stream = iter_frames(pred, backend="opencv")
        try:
            for _, frame in zip(range(n), stream, strict=False):
                yield frame
        finally:
            stream.close()

    _, decode = best_of(repeat, lambda: read_video(pred, max_frames=frames, backend="opencv").frames)
    before, sequential = best_of(repeat, lambda: blurred_ssim(
        bilateral_blur(read_video(pred, max_frames=frames, backend="opencv").frames), gt_blur))
    value, overlapped = best_of(repeat, lambda: blurred_ssim_of_frames(read_ahead(first(frames)), gt_blur))
    return {"decode": decode.__dict__, "sequential": sequential.__dict__, "overlapped": overlapped.__dict__,
            "same": value == before}


def pinned_rows(name: str, kind: str, frames: int, results: list[tuple[str, dict[str, Any]]],
                what: str) -> tuple[list[Row], list[str]]:
    rows, notes = [], []
    for cores, found in results:
        decode = Cost(**found["decode"])
        rows += [Row(name, f"decode alone, {cores}", frames, decode),
                 Row(name, f"decode, then {what}, {cores}", frames, Cost(**found["sequential"]),
                     decode_s=decode.seconds),
                 Row(name, f"decode and {what} overlapped (reader thread), {cores}", frames,
                     Cost(**found["overlapped"]), decode_s=decode.seconds)]
        notes.append(f"{kind} on {cores}: the overlapped value equals decode-then-score's: {found['same']}")
    return rows, notes


# ---------------------------------------------------------------------------------------------- table


def table(rows: list[Row]) -> str:
    lines = ["| kernel | path | frames | s | CPU s | frames/s | x baseline (speed-up) | x decode (time) | peak MiB | "
             "max abs diff vs baseline |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        speedup = f"{r.baseline_s / r.cost.seconds:.2f}" if r.baseline_s and not r.path.startswith("baseline") else "-"
        vs_decode = f"{r.cost.seconds / r.decode_s:.2f}" if r.decode_s else "-"
        diff = f"{r.max_diff:.1e}" if r.max_diff is not None else "-"
        lines.append(f"| {r.kernel} | {r.path} | {r.frames} | {r.cost.seconds:.2f} | {r.cost.cpu_seconds:.2f} | "
                     f"{r.frames / r.cost.seconds:.1f} | {speedup} | {vs_decode} | {r.cost.peak_mib:.0f} | {diff} |")
    return "\n".join(lines)


def cpus() -> list[int]:
    """The cores this process may use, in order (the pinned rows take the first 1 and 2)."""
    return sorted(os.sched_getaffinity(0))


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _environment() -> str:
    import scipy
    import skimage
    import torch

    return (f"{_cpu_model()} ({platform.machine()}), {os.cpu_count()} cores; Python {platform.python_version()}, "
            f"numpy {np.__version__}, scipy {scipy.__version__}, OpenCV {cv2.__version__}, scikit-image "
            f"{skimage.__version__}, torch {torch.__version__}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/bench_kernels.py", description=__doc__.split("\n")[0])
    parser.add_argument("--fork", type=Path, default=None,
                        help="a trungtpham/pai-bench-c-cosmos3 checkout: its own blur SSIM is the baseline")
    parser.add_argument("--device", default=None, help="also run TempSSIM's torch kernel there (e.g. cuda)")
    parser.add_argument("--only", choices=["tempssim", "blur"], default=None, help="one kernel only")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of every compared row, the fastest kept (default 3; the bilateral blur runs once)")
    parser.add_argument("--tempssim-frames", type=int, default=TEMPSSIM_FRAMES)
    parser.add_argument("--tempssim-size", type=int, nargs=2, default=TEMPSSIM_SIZE, metavar=("H", "W"))
    parser.add_argument("--blur-frames", type=int, default=BLUR_FRAMES)
    parser.add_argument("--blur-size", type=int, nargs=2, default=BLUR_SIZE, metavar=("H", "W"))
    parser.add_argument("--blur-pipeline-frames", type=int, default=BLUR_PIPELINE_FRAMES,
                        help="frames of the pinned decode + blur + SSIM rows (0: none; the blur takes ~0.4 s a frame)")
    parser.add_argument("--child", choices=["tempssim", "blur"], help=argparse.SUPPRESS)
    parser.add_argument("--video", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--gt-blur", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--frames", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:   # one pinned measurement (pinned_children), printed as JSON
        import json

        found = (child_tempssim(args.video, args.repeat) if args.child == "tempssim"
                 else child_blur(args.video, args.gt_blur, args.frames, args.repeat))
        print(json.dumps(found))
        return 0
    try:
        fork = load_fork(args.fork) if args.fork else None
    except ForkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.device and args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            print(f"error: --device {args.device}: CUDA is not available here", file=sys.stderr)
            return 2
    load_before = os.getloadavg()
    started = time.perf_counter()
    rows: list[Row] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="pinbench-bench-kernels-") as tmp:
        if args.only in (None, "tempssim"):
            more_rows, more_notes = bench_tempssim(Path(tmp), args.tempssim_frames, tuple(args.tempssim_size),
                                                   args.device, args.repeat)
            rows += more_rows
            notes += more_notes
        if args.only in (None, "blur"):
            more_rows, more_notes = bench_blur(Path(tmp), args.blur_frames, tuple(args.blur_size), fork, args.repeat,
                                               args.blur_pipeline_frames)
            rows += more_rows
            notes += more_notes
    load_after = os.getloadavg()
    print(f"bench_kernels on {_environment()}")
    print(f"load average (1/5/15 min) before {'/'.join(f'{v:.2f}' for v in load_before)}, "
          f"after {'/'.join(f'{v:.2f}' for v in load_after)}; {time.perf_counter() - started:.0f} s in all; "
          f"every row the fastest of {args.repeat} runs but the bilateral blur (one)\n")
    print(table(rows))
    print()
    for note in notes:
        print(f"* {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
