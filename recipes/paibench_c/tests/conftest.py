"""Test doubles and small data for the PAI-Bench-C recipe tests (all CPU, all written on the fly)."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from pinbench.media.video import write_video


def clip(n_frames: int, seed: int = 0, height: int = 24, width: int = 32) -> np.ndarray:
    """Small deterministic RGB clip with a moving bright square (edges and texture for every metric)."""
    rng = np.random.default_rng(seed)
    frames = np.repeat(rng.integers(60, 120, (1, height, width, 3), dtype=np.uint8), n_frames, axis=0)
    for t in range(n_frames):
        frames[t, 6:14, 2 + t % 12: 10 + t % 12] = (240, 220, 40)
    return frames


@pytest.fixture
def make_clip(tmp_path: Path) -> Callable[..., Path]:
    def _make(path: Path | str, n_frames: int = 121, seed: int = 0, **size: int) -> Path:
        path = Path(path) if Path(path).is_absolute() else tmp_path / path
        return write_video(path, clip(n_frames, seed, **size), 30, codec="mpeg4")
    return _make


FAKE_INFERENCE = textwrap.dedent('''
    """TEST DOUBLE for cosmos_framework.scripts.inference: writes <out>/<name>/vision.mp4 per input row."""
    import json, os, sys
    from pathlib import Path
    import numpy as np
    from pinbench.media.video import write_video

    args = sys.argv[1:]
    rows_file, out = Path(args[args.index("-i") + 1]), Path(args[args.index("-o") + 1])
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "invocations.jsonl", "a") as log:
        log.write(json.dumps({"argv": args, "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"),
                              "offline": os.environ.get("HF_HUB_OFFLINE"),
                              "ld_library_path": os.environ.get("LD_LIBRARY_PATH")}) + "\\n")
    frames = int(os.environ.get("FAKE_FRAMES", "121"))
    failing = set(os.environ.get("FAKE_FAIL", "").split(","))
    for line in rows_file.read_text().splitlines():
        row = json.loads(line)
        if row["name"] in failing:
            sys.exit(3)
        video = np.full((frames, 24, 32, 3), 100 + len(row["name"]) % 50, np.uint8)
        video[:, 5:15, 5:15] = 250
        write_video(out / row["name"] / "vision.mp4", video, row["fps"], codec="mpeg4")
''')


@pytest.fixture
def fake_framework(tmp_path: Path) -> tuple[Path, Path]:
    """(framework_dir, python): a fake ``cosmos_framework`` package run by this interpreter."""
    root = tmp_path / "cosmos-framework"
    scripts = root / "cosmos_framework" / "scripts"
    scripts.mkdir(parents=True)
    (root / "cosmos_framework" / "__init__.py").write_text("")
    (scripts / "__init__.py").write_text("")
    (scripts / "inference.py").write_text(FAKE_INFERENCE)
    return root, Path(sys.executable)


def rows_for(names: list[str], vision: Path) -> list[dict]:
    return [{"name": n, "fps": 30, "vision_path": str(vision), "edge": {"preset_edge_threshold": "medium"}}
            for n in names]


def read_invocations(raw_dir: Path) -> list[dict]:
    path = raw_dir / "invocations.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


FAKE_COMPUTE_METRICS = textwrap.dedent('''
    """TEST DOUBLE for `torchrun ... compute_metrics.py calculate-metrics` (CPU, no models).

    Same CLI, same inputs and outputs as the evaluator: reads <videos_path>/videos/*.mp4 and the GT under
    --gt_path, writes metrics.json, GT seg/depth files under --gt_path (when forced or missing) and pred
    segmentation pickles next to videos/. Canny/blur use the recipe's native code; seg masks are boxes.
    """
    import json, os, pickle, sys
    from pathlib import Path
    import numpy as np
    from pinbench_recipes.paibench_c.native_metrics import align_pred_to_gt, load_sam_detections, seg_miou_recall
    from pinbench_recipes.paibench_c.blur import bilateral_blur, blurred_ssim
    from pinbench_recipes.paibench_c.edges import canny_edges, edge_scores
    from pinbench.media.video import read_video

    args = sys.argv[1:]
    get = lambda flag: args[args.index(flag) + 1]
    videos, gt_dir, output = Path(get("--videos_path")), Path(get("--gt_path")), Path(get("--output_path"))
    force = "--force_recompute_gt_seg" in args
    assert ("--force_recompute_gt_depth" in args) == force
    log = Path(os.environ["FAKE_EVAL_LOG"])
    with open(log, "a") as fh:
        fh.write(json.dumps({"videos": str(videos), "force": force, "nproc": get("--nproc_per_node"),
                             "gpus": os.environ["CUDA_VISIBLE_DEVICES"], "cwd": os.getcwd(),
                             "offline": os.environ.get("HF_HUB_OFFLINE"),
                             "batch": os.environ.get("PAIBENCH_C_EVAL_BATCH_SIZE")}) + "\\n")
    drop = set(os.environ.get("FAKE_EVAL_DROP", "").split(","))

    def box_rle(t, h, w):
        flat = np.zeros((t, h, w), bool)
        flat[:, 4:12, 4:14] = True
        flat = flat.reshape(-1)
        runs, value, count = [], False, 0
        for v in flat:
            if v == value:
                count += 1
            else:
                runs.append(count); value, count = v, 1
        runs.append(count)
        return [{"phrase": "box", "segmentation_mask_rle": {"data": {"size": [flat.size, 1], "counts": runs},
                                                             "mask_shape": (t, h, w)}}]

    per_video = []
    for video in sorted((videos / "videos").glob("*.mp4")):
        task = video.stem
        gt = read_video(gt_dir / "videos" / f"{task}.mp4", max_frames=121, backend="opencv").frames
        pred_native = read_video(video, max_frames=121, backend="opencv").frames
        pred = align_pred_to_gt(pred_native, gt)
        seg_gt, depth_gt = gt_dir / "sam2_pkls" / f"{task}.pkl", gt_dir / "depth_npzs" / f"{task}.npz"
        if force or not seg_gt.exists():
            seg_gt.write_bytes(pickle.dumps(box_rle(*gt.shape[:3])))
        if force or not depth_gt.exists():
            np.savez_compressed(depth_gt, data=np.ones(gt.shape[:3]))
        (videos / "segmentation").mkdir(exist_ok=True)
        pred_seg = box_rle(*pred_native.shape[:3])
        (videos / "segmentation" / f"{task}.pkl").write_bytes(pickle.dumps(pred_seg))
        e = edge_scores(canny_edges(pred), canny_edges(gt))
        m_iou, recall = seg_miou_recall(load_sam_detections(seg_gt),
                                        load_sam_detections(videos / "segmentation" / f"{task}.pkl"),
                                        max_frames=len(gt))
        entry = {"pred_video_uuid": task, "dover_tech_score": 10.0, "canny_f1_score": e.f1,
                 "canny_precision": e.precision, "canny_recall": e.recall,
                 "blur_ssim": blurred_ssim(bilateral_blur(pred), bilateral_blur(gt)), "depth_si_rmse": 0.5,
                 "seg_m_iou": m_iou, "seg_recall": recall}
        if task in drop:
            entry["canny_f1_score"] = None
        per_video.append(entry)
    output.write_text(json.dumps({"global": {}, "per_video": per_video}))
''')


@pytest.fixture
def fake_evaluator(tmp_path: Path) -> tuple[Path, Path]:
    """(conditional_generation dir, python): the evaluator's CLI contract, run by a fake torchrun."""
    repo = tmp_path / "pai-bench-c"
    root = repo / "conditional_generation"
    root.mkdir(parents=True)
    (root / "compute_metrics.py").write_text(FAKE_COMPUTE_METRICS)
    (repo / ".pinbench-evaluator-commit").write_text("5864378a0e13e527336d916cc8e018afb0ef5fe3\n")
    bin_dir = tmp_path / "evaluator-bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    torchrun = bin_dir / "torchrun"
    # torchrun's contract: options, then the script and its arguments; the fake drops its own options.
    torchrun.write_text(f"#!{sys.executable}\n"
                        "import runpy, sys\n"
                        "args = sys.argv[1:]\n"
                        "i = next(k for k, a in enumerate(args) if a.endswith('.py'))\n"
                        "nproc = args[args.index('--nproc_per_node') + 1]\n"
                        "sys.argv = [args[i], *args[i + 1:], '--nproc_per_node', nproc]\n"
                        "runpy.run_path(args[i], run_name='__main__')\n")
    torchrun.chmod(0o755)
    return root, bin_dir / "python"
