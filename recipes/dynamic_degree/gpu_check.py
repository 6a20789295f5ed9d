"""GPU CI check: how far the recipe's RAFT (torchvision) is from the original RAFT on real videos.

The recipe runs torchvision's ``raft_large``; the metric was defined with the princeton-vl code and
``raft-things.pth``. This script measures the difference that choice makes, on the transitions the
metric actually scores, and fails when any clip verdict differs:

* weights: the original ``raft-things.pth`` renamed to torchvision's layout vs torchvision's port
  ``raft_large_C_T_V1`` (max absolute difference over all tensors);
* flow: per transition, m from the original code (batch 1, inputs 0..255, ``iters=20, test_mode``)
  vs m from the recipe's estimator in every setting of ``flow.settings_grid`` (batch size 1/8/16, TF32
  on/off, channels_last, cudnn.benchmark; TF32 on is what upstream runs got by default on Ampere and
  later GPUs), each timed (pairs/s);
* the same settings against the recipe's estimator in fp32 on CPU, on the first ``--cpu-clips`` clips of
  each video (a CPU pass is slow);
* decisions: transitions whose m > tau flips, clip verdicts that flip, video score differences; the
  fastest setting with no clip verdict flip against either reference is named (``adopt``).

``--random-weights SEED`` replaces both weight files with one seeded random state dict of the
original model, to measure implementation differences alone where the real weights are absent.

Usage (GPU CI; paths as in the recipe README):
    python -m pinbench_recipes.dynamic_degree.gpu_check --videos DIR --original-src RAFT_CHECKOUT \\
        --original-weights raft-things.pth [--weights raft_large_C_T_V1-22a6c225.pth] --out check.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from pinbench_recipes.dynamic_degree import scoring
from pinbench_recipes.dynamic_degree.flow import (
    RaftSettings,
    RaftThings,
    load_raft_weights,
    seeded_random_state,
    settings_grid,
)
from pinbench_recipes.dynamic_degree.motion import ClipFrames, ClipSource, load_clips
from pinbench_recipes.dynamic_degree.prepare import VIDEO_SUFFIXES

WEIGHT_TOLERANCE = 1e-6


def _original_raft_class(src: Path) -> Any:
    """The RAFT class of a princeton-vl/RAFT checkout (its ``core`` folder imports as top-level modules)."""
    core = src / "core"
    if not (core / "raft.py").is_file():
        raise SystemExit(f"{src}: not a princeton-vl/RAFT checkout (no core/raft.py)")
    sys.path.insert(0, str(core))
    return importlib.import_module("raft").RAFT


def _original_model(raft_class: Any, state: dict[str, Any] | None, device: str, seed: int | None) -> Any:
    """The original RAFT-large in eval mode, with ``state`` or seeded random weights."""
    args = argparse.Namespace(small=False, mixed_precision=False, alternate_corr=False)
    model = raft_class(args)
    if state is None:
        state = seeded_random_state(model.state_dict(), int(seed or 0))
    model.load_state_dict({k.removeprefix("module."): v for k, v in state.items()})
    return model.to(device).eval(), state


def _original_m(model: Any, first: np.ndarray, second: np.ndarray, device: str) -> float:
    """m of one padded pair through the original code, as VBench calls it (float 0..255, batch 1)."""
    import torch

    def tensor(frame: np.ndarray) -> Any:
        return torch.from_numpy(np.ascontiguousarray(frame)).permute(2, 0, 1).float()[None].to(device)

    with torch.no_grad():
        _, flow_up = model(tensor(first), tensor(second), iters=20, test_mode=True)
    return scoring.top_mean_magnitude(flow_up[0].float().cpu().numpy())


def _ours_m(estimator: RaftThings, pairs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[list[float], float]:
    """m of every pair through the recipe's estimator, and the pairs per second (after a warm-up batch)."""
    import torch

    def sync() -> None:
        if estimator.device.startswith("cuda"):
            torch.cuda.synchronize()

    if not pairs:
        return [], 0.0
    estimator.flow(np.stack([pairs[0][0]]), np.stack([pairs[0][1]]))   # warm-up: model, kernels, autotuning
    sync()
    started = time.perf_counter()
    out: list[float] = []
    for start in range(0, len(pairs), estimator.batch_size):
        chunk = pairs[start:start + estimator.batch_size]
        flows = estimator.flow(np.stack([a for a, _ in chunk]), np.stack([b for _, b in chunk]))
        out.extend(scoring.top_mean_magnitude(f) for f in flows)
    sync()
    return out, len(pairs) / (time.perf_counter() - started)


def _pairs(clips: list[ClipFrames], max_clips: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
    return [(c, item.frame(j), item.frame(j + 1))
            for c, item in enumerate(clips[:max_clips]) for j in range(len(item.rows) - 1)]


def _clip_verdicts(clips: list[ClipFrames], pair_clip: list[int], m: list[float], tau: float) -> list[int | None]:
    verdicts = []
    for c, item in enumerate(clips):
        values = [v for pc, v in zip(pair_clip, m, strict=True) if pc == c]
        if not values and len(item.sampled) >= 2:
            continue  # clip beyond --max-clips
        verdicts.append(scoring.decide_clip(values, len(item.sampled), tau).dynamic)
    return verdicts


def _compare(name: str, reference: list[float], other: list[float], tau: float) -> dict[str, Any]:
    delta = np.abs(np.asarray(other) - np.asarray(reference))
    flips = int(sum((a > tau) != (b > tau) for a, b in zip(reference, other, strict=True)))
    return {"vs": name, "max_abs_dm": float(delta.max()) if delta.size else 0.0,
            "mean_abs_dm": float(delta.mean()) if delta.size else 0.0, "transition_flips": flips}


def check_video(path: Path, *, original: Any, variants: dict[str, RaftThings], device: str,
                max_clips: int, cpu: RaftThings | None = None, cpu_clips: int = 1) -> dict[str, Any]:
    """Per-video comparison of each of the recipe's estimator variants against the original RAFT and,
    on the first ``cpu_clips`` clips, against the recipe's estimator in fp32 on CPU (``cpu``)."""
    info, clips, _ = load_clips(path, ClipSource())
    tau = scoring.motion_threshold(info.height, info.width)
    pairs = _pairs(clips, max_clips)
    pair_clip = [c for c, _, _ in pairs]
    m_original = [_original_m(original, a, b, device) for _, a, b in pairs]
    verdict_original = _clip_verdicts(clips, pair_clip, m_original, tau)
    on_cpu = [i for i, c in enumerate(pair_clip) if c < cpu_clips] if cpu is not None else []
    cpu_clip = [pair_clip[i] for i in on_cpu]
    m_cpu = _ours_m(cpu, [(pairs[i][1], pairs[i][2]) for i in on_cpu])[0] if cpu is not None else []
    verdict_cpu = _clip_verdicts(clips[:cpu_clips], cpu_clip, m_cpu, tau) if cpu is not None else []
    result: dict[str, Any] = {"video": path.name, "tau": tau, "n_transitions": len(pairs),
                              "m_original": m_original, "n_transitions_on_cpu": len(on_cpu), "variants": {}}
    for name, estimator in variants.items():
        m, pairs_per_s = _ours_m(estimator, [(a, b) for _, a, b in pairs])
        verdicts = _clip_verdicts(clips, pair_clip, m, tau)
        row = _compare("original", m_original, m, tau)
        row["clip_flips"] = int(sum(a != b for a, b in zip(verdict_original, verdicts, strict=True)))
        row["video_score_delta"] = abs((scoring.video_score(verdicts) or 0.0)
                                       - (scoring.video_score(verdict_original) or 0.0))
        row["pairs_per_s"] = pairs_per_s
        if cpu is not None:
            m_here = [m[i] for i in on_cpu]
            versus_cpu = _compare("cpu fp32", m_cpu, m_here, tau)
            row["vs_cpu_max_abs_dm"] = versus_cpu["max_abs_dm"]
            row["vs_cpu_transition_flips"] = versus_cpu["transition_flips"]
            row["vs_cpu_clip_flips"] = int(sum(a != b for a, b in zip(
                verdict_cpu, _clip_verdicts(clips[:cpu_clips], cpu_clip, m_here, tau), strict=True)))
        result["variants"][name] = row
    return result


def _summary(videos: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """One variant over every video: worst |dm|, flips added up, the mean pairs/s."""
    rows = [v["variants"][name] for v in videos]
    out = {"max_abs_dm": max(r["max_abs_dm"] for r in rows),
           "transition_flips": sum(r["transition_flips"] for r in rows),
           "clip_flips": sum(r["clip_flips"] for r in rows),
           "pairs_per_s": float(np.mean([r["pairs_per_s"] for r in rows]))}
    if "vs_cpu_clip_flips" in rows[0]:
        out.update(vs_cpu_max_abs_dm=max(r["vs_cpu_max_abs_dm"] for r in rows),
                   vs_cpu_transition_flips=sum(r["vs_cpu_transition_flips"] for r in rows),
                   vs_cpu_clip_flips=sum(r["vs_cpu_clip_flips"] for r in rows))
    return out


def _weights_difference(original_state: dict[str, Any], torchvision_file: Path) -> dict[str, Any]:
    from pinbench_recipes.dynamic_degree.flow import original_to_torchvision

    converted = original_to_torchvision(original_state)
    port, _ = load_raft_weights(torchvision_file, None)
    missing = sorted(set(port) ^ set(converted))
    diffs = {k: float((converted[k].float() - port[k].float()).abs().max()) for k in port if k in converted}
    return {"n_tensors": len(port), "key_mismatches": missing[:10],
            "max_abs_difference": max(diffs.values()) if diffs else None,
            "n_tensors_differing": sum(1 for v in diffs.values() if v > 0)}


def _videos(root: Path, limit: int) -> list[Path]:
    found = sorted(p for p in root.rglob("*") if p.suffix.lower() in VIDEO_SUFFIXES and p.is_file())
    return found[:limit]


def _default_weights() -> Path | None:
    from pinbench.core.pins import load_pins
    from pinbench.core.recipe import get_recipe
    from pinbench.ops.downloads import NotFetchedError, locate
    from pinbench_recipes.dynamic_degree.prepare import WEIGHTS_ENV, WEIGHTS_PIN

    if os.environ.get(WEIGHTS_ENV):
        return Path(os.environ[WEIGHTS_ENV])
    try:
        return locate(load_pins(get_recipe("dynamic-degree").pins_path).urls[WEIGHTS_PIN])
    except NotFetchedError:
        return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pinbench_recipes.dynamic_degree.gpu_check",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--videos", type=Path, default=os.environ.get("PINBENCH_DD_CHECK_VIDEOS"))
    parser.add_argument("--original-src", type=Path, default=os.environ.get("PINBENCH_RAFT_ORIGINAL_SRC"))
    parser.add_argument("--original-weights", type=Path,
                        default=os.environ.get("PINBENCH_RAFT_THINGS_ORIGINAL"))
    parser.add_argument("--weights", type=Path, default=None, help="torchvision port (default: the pinned file)")
    parser.add_argument("--random-weights", type=int, default=None, metavar="SEED")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--max-videos", type=int, default=8)
    parser.add_argument("--max-clips", type=int, default=4)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 16],
                        help="batch sizes of the settings sweep (the recipe's own setting always runs)")
    parser.add_argument("--cpu-clips", type=int, default=1,
                        help="clips per video also scored in fp32 on CPU, the sweep's second reference (0: none)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.videos is None or args.original_src is None:
        parser.error("--videos and --original-src are required (or PINBENCH_DD_CHECK_VIDEOS, "
                     "PINBENCH_RAFT_ORIGINAL_SRC)")

    import torch

    raft_class = _original_raft_class(args.original_src)
    report: dict[str, Any] = {"device": args.device, "torch": torch.__version__,
                              "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    with tempfile.TemporaryDirectory() as tmp:
        if args.random_weights is not None:
            original, state = _original_model(raft_class, None, args.device, args.random_weights)
            ours_file = Path(tmp) / "random-original-layout.pth"
            torch.save(state, ours_file)
            report["weights"] = {"mode": f"random, seed {args.random_weights}"}
        else:
            if args.original_weights is None:
                parser.error("--original-weights (raft-things.pth) is required without --random-weights")
            state = torch.load(args.original_weights, map_location="cpu", weights_only=True)
            original, _ = _original_model(raft_class, state, args.device, None)
            ours_file = args.weights or _default_weights()
            if ours_file is None:
                parser.error("no torchvision weights: pass --weights or run `pinbench fetch dynamic-degree`")
            report["weights"] = {"mode": "real", **_weights_difference(state, ours_file)}
        make: Callable[..., RaftThings] = lambda **kw: RaftThings(ours_file, **kw)  # noqa: E731
        settings = [RaftSettings(), *(s for s in settings_grid(tuple(args.batch_sizes)) if s != RaftSettings())]
        variants = {setting.label: make(device=args.device, **asdict(setting)) for setting in settings}
        cpu = make(device="cpu", batch_size=8) if args.cpu_clips else None
        report["videos"] = [check_video(p, original=original, variants=variants, device=args.device,
                                        max_clips=args.max_clips, cpu=cpu, cpu_clips=args.cpu_clips)
                            for p in _videos(args.videos, args.max_videos)]
    if not report["videos"]:
        parser.error(f"{args.videos}: no videos")
    summary = {name: _summary(report["videos"], name) for name in variants}
    report["summary"] = summary
    clean = [name for name, row in summary.items() if row["clip_flips"] == 0 and not row.get("vs_cpu_clip_flips")]
    report["adopt"] = max(clean, key=lambda name: summary[name]["pairs_per_s"]) if clean else None
    report["recipe_setting"] = RaftSettings().label
    weight_diff = report["weights"].get("max_abs_difference")
    failures = [f"{RaftSettings().label} (the recipe's): {summary[RaftSettings().label]['clip_flips']} clip "
                "verdict(s) differ from the original RAFT"] if summary[RaftSettings().label]["clip_flips"] else []
    if weight_diff is not None and weight_diff > WEIGHT_TOLERANCE:
        failures.append(f"torchvision port differs from raft-things.pth by up to {weight_diff:g}")
    report["failures"] = failures
    text = json.dumps(report, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(json.dumps({"summary": summary, "adopt": report["adopt"], "recipe_setting": report["recipe_setting"],
                      "weights": report["weights"], "failures": failures}, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
