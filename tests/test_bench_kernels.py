"""tools/bench_kernels.py end to end on tiny frames: every row, the --fork option (with a test double of the
fork's package) and its one-line refusal. The real-size figures are on docs/performance.md; no timing is asserted."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

# the tool times OpenCV's kernels, which CameraBench's image lacks: skipped there, not a collection error
pytest.importorskip("cv2", reason="tools/bench_kernels.py needs OpenCV (cv2), not installed here")

import bench_kernels  # noqa: E402

TINY = ["--repeat", "2", "--tempssim-frames", "6", "--tempssim-size", "48", "64", "--blur-frames", "3",
        "--blur-size", "40", "56", "--blur-pipeline-frames", "2"]

FORK_METRICS = textwrap.dedent('''
    """TEST DOUBLE of the fork's metrics_canny_blur_depth.py: the blur SSIM path as spec section 2.2 gives it."""
    from pathlib import Path

    import numpy as np
    from skimage.metrics import structural_similarity

    CALLS = Path(__file__).with_name("calls.txt")


    def compute_blur_error_blur_video(pred_frames, gt_frames, mask=None, metric_name="ssim"):
        CALLS.write_text(CALLS.read_text() + "blur_ssim\\n" if CALLS.exists() else "blur_ssim\\n")
        maps = [structural_similarity(g, p, data_range=g.max() - g.min(), full=True, channel_axis=2)[1].mean(axis=2)
                for g, p in zip(gt_frames, pred_frames)]
        return float(np.mean(np.stack(maps)))
''')
FORK_BLUR = textwrap.dedent('''
    """TEST DOUBLE of the fork's video_to_canny_and_blur.py: the bilateral filter per frame."""
    import cv2
    import numpy as np


    def apply_bilateral_filter(frames, d=30, sigma_color=150, sigma_space=100, iteration=1):
        out = np.empty_like(frames)
        for i, frame in enumerate(frames):
            out[i] = cv2.bilateralFilter(frame, d, sigma_color, sigma_space)
        return out
''')


def _fork_double(root: Path) -> Path:
    package = root / "conditional_generation" / "benchmark_pipelines" / "scores" / "transfer_bench"
    package.mkdir(parents=True)
    for folder in (package, package.parent, package.parent.parent):
        (folder / "__init__.py").write_text("")
    (package / "metrics_canny_blur_depth.py").write_text(FORK_METRICS)
    (package / "video_to_canny_and_blur.py").write_text(FORK_BLUR)
    return package


def test_every_row_is_printed_with_its_ratios(capsys: pytest.CaptureFixture) -> None:
    assert bench_kernels.main(TINY) == 0
    out = capsys.readouterr().out
    for row in ("| decode alone (OpenCV, once) |", "| baseline: scikit-image per pair |", "| recipe kernel, 1 thread |",
                "| bilateral blur, 1 thread (cv2, the same call in every path; GT only) |",
                "| baseline: fork's per-frame path (spec 2.2, local) |", "| native kernel, 1 thread |"):
        assert row in out
    assert "load average (1/5/15 min) before" in out and "thread count changes nothing: True" in out
    # decode and compute in processes pinned to 1 and 2 cores; the overlapped values are decode-then-score's
    for kind, what in (("TempSSIM", "TempSSIM"), ("blur SSIM", "blur + SSIM")):
        first = bench_kernels.cpus()[:2]
        for cores in [f"{n} core{'s' if n > 1 else ''} (taskset -c {','.join(map(str, first[:n]))})"
                      for n in range(1, len(first) + 1)]:
            assert f"| decode and {what} overlapped (reader thread), {cores} |" in out
            assert f"* {kind} on {cores}: the overlapped value equals decode-then-score's: True" in out
    kernel_rows = [line for line in out.splitlines() if "kernel, 1 thread |" in line]
    for line in kernel_rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert float(cells[5]) > 0 and float(cells[6]) > 0 and float(cells[8]) < 1e-12   # ratios, agreement


def test_fork_option_runs_the_forks_own_code(tmp_path: Path, capsys: pytest.CaptureFixture,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    package = _fork_double(tmp_path / "fork")
    monkeypatch.setattr(sys, "path", list(sys.path))   # load_fork prepends the fork's folder
    try:
        assert bench_kernels.main([*TINY, "--only", "blur", "--fork", str(tmp_path / "fork")]) == 0
    finally:
        for name in [m for m in sys.modules if m.split(".")[0] == "benchmark_pipelines"]:
            del sys.modules[name]
    out = capsys.readouterr().out
    assert "| baseline: the fork's compute_blur_error_blur_video (--fork) |" in out
    assert "its apply_bilateral_filter equals the recipe's blur on 2 frames: True" in out
    assert (package / "calls.txt").read_text() == "blur_ssim\n" * 2   # --repeat 2


def test_a_folder_without_the_forks_code_is_refused_in_one_line(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture) -> None:
    assert bench_kernels.main(["--fork", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: --fork {tmp_path}: no benchmark_pipelines/") and "\n" not in err
