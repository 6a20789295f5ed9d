"""The native LCM / GSC block against torchmetrics and lpips on the same inputs, and the official ingestion
against torchvision's transforms."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torchmetrics.image import PeakSignalNoiseRatio, StructuralSimilarityIndexMeasure
from torchvision import transforms
from torchvision.transforms import functional as tvf

from pinbench.media.lpips import load_lpips
from pinbench.media.video import read_video, write_video
from pinbench_recipes.mind import native
from pinbench_recipes.mind.fixture import ProcessPyCpuDouble, write_random_alexnet
from pinbench_recipes.mind.ingest import OFFICIAL_CANVAS, Canvas, ingest, iter_frames, resized_size
from pinbench_recipes.mind.layout import LayoutError
from pinbench_recipes.mind.samples import AGREEMENT, compare_blocks
from pinbench_recipes.mind.tests.conftest import clip

SMALL = Canvas(36, 64)


@pytest.fixture(scope="module")
def lpips_model(tmp_path_factory: pytest.TempPathFactory) -> torch.nn.Module:
    trunk = tmp_path_factory.mktemp("lpips") / "alexnet.pth"
    return load_lpips(trunk, expected_sha256=write_random_alexnet(trunk))


def pairs(seed: int, n: int = 4, size: tuple[int, int] = (40, 56)) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    a = torch.rand(n, 3, *size, generator=generator)
    a = torch.nn.functional.avg_pool2d(a, 3, stride=1, padding=1)   # some structure, not only noise
    b = (a + 0.08 * torch.randn(a.shape, generator=generator)).clamp(0, 1)
    return a, b


@pytest.mark.parametrize(("seed", "size"), [(0, (40, 56)), (1, (72, 128)), (2, (17, 23))])
def test_ssim_equals_torchmetrics_defaults(seed: int, size: tuple[int, int]) -> None:
    a, b = pairs(seed, size=size)
    metric = StructuralSimilarityIndexMeasure(data_range=1.0, reduction="none")
    same_arithmetic = metric(a.double(), b.double())          # torchmetrics in float64: the same algorithm
    assert torch.allclose(native.ssim(a, b), same_arithmetic, atol=1e-12, rtol=0)
    as_official = metric(a, b).double()                       # float32, as process.py runs it
    assert torch.allclose(native.ssim(a, b), as_official, atol=5e-6, rtol=0)
    assert torch.allclose(native.ssim(a, a), torch.ones(len(a), dtype=torch.float64), atol=1e-12)


def test_psnr_and_mse_equal_torchmetrics() -> None:
    a, b = pairs(3)
    metric = PeakSignalNoiseRatio(data_range=1.0, reduction="none", dim=[1, 2, 3])
    # abs 1e-5: torchmetrics divides by log(10) taken in float32 even for float64 inputs (~3e-8 relative)
    assert native.psnr_from_mse(native.mse(a, b)) == pytest.approx(metric(a.double(), b.double()).tolist(), abs=1e-5)
    assert native.psnr_from_mse(native.mse(a, b)) == pytest.approx(metric(a, b).double().tolist(), abs=1e-4)
    assert native.mse(a, b).tolist() == pytest.approx(((a - b) ** 2).reshape(len(a), -1).mean(1).tolist(), rel=1e-6)


def test_identical_frames_give_infinite_psnr_like_torchmetrics() -> None:
    a, _ = pairs(4, n=1)
    assert native.psnr_from_mse(native.mse(a, a)) == [math.inf]
    assert math.isinf(PeakSignalNoiseRatio(data_range=1.0, reduction="none", dim=[1, 2, 3])(a, a).item())


def test_lpips_is_fed_minus_one_to_one(lpips_model: torch.nn.Module) -> None:
    a, b = pairs(5)
    with torch.no_grad():
        reference = lpips_model(a, b, normalize=True).flatten().double().tolist()   # lpips' own [0,1] -> [-1,1]
        raw = lpips_model(a, b).flatten().double().tolist()
    assert native.lpips_pairs(lpips_model, a, b) == pytest.approx(reference, abs=1e-7)
    assert raw != pytest.approx(reference, abs=1e-4)   # the rescale matters: a missing one would be caught


def _upstream_transform(frames: np.ndarray, canvas: Canvas, antialias: bool = False) -> torch.Tensor:
    """utils.transform_image with torchvision, as process.py calls it (then the reader's clamp)."""
    images = torch.from_numpy(frames).float().permute(0, 3, 1, 2)
    _, _, h, w = images.shape
    if h * canvas.width == w * canvas.height:
        out = transforms.Resize(size=(canvas.height, canvas.width), antialias=antialias)(images)
    else:
        scale = max(canvas.width / w, canvas.height / h)
        out = transforms.Resize(size=(round(h * scale), round(w * scale)), antialias=antialias)(images)
        out = tvf.center_crop(out, [canvas.height, canvas.width])
    return torch.clamp(out / 255.0, 0.0, 1.0)


@pytest.mark.parametrize("shape", [(1080, 1920), (480, 640), (64, 96), (90, 160), (720, 1280), (300, 170)])
def test_ingest_is_transform_image_exactly(shape: tuple[int, int]) -> None:
    frames = np.random.default_rng(0).integers(0, 256, (2, *shape, 3), dtype=np.uint8)
    assert torch.equal(ingest(frames), _upstream_transform(frames, OFFICIAL_CANVAS))
    assert torch.equal(ingest(frames, SMALL), _upstream_transform(frames, SMALL))


def test_ingest_does_not_antialias() -> None:
    frames = np.random.default_rng(1).integers(0, 256, (1, 1080, 1920, 3), dtype=np.uint8)
    assert not torch.allclose(ingest(frames), _upstream_transform(frames, OFFICIAL_CANVAS, antialias=True), atol=1e-3)


def test_sixteen_by_nine_rule_and_rounding() -> None:
    assert resized_size(1080, 1920, OFFICIAL_CANVAS) == (720, 1280)          # exact 16:9: plain resize
    assert resized_size(480, 640, OFFICIAL_CANVAS) == (960, 1280)            # 4:3: scale by 1280/640
    assert resized_size(64, 96, Canvas(72, 128)) == (85, 128)                # round(85.33)
    frames = np.random.default_rng(2).integers(0, 256, (1, 64, 96, 3), dtype=np.uint8)
    assert ingest(frames, Canvas(72, 128)).shape == (1, 3, 72, 128)


def test_decoding_skips_by_decoding_and_matches_pyav(tmp_path: Path) -> None:
    video = write_video(tmp_path / "v.mp4", clip(30, seed=3), 24, codec="mpeg4")
    frames = np.stack(list(iter_frames(video, 7, 10)))
    assert np.array_equal(frames, read_video(video, indices=range(7, 17), backend="pyav").frames)
    assert len(list(iter_frames(video, 25, 10))) == 5       # the stream ends: the caller sees 5


def _videos(tmp_path: Path, gt_frames: int, gen_frames: int, mark: int) -> tuple[Path, Path]:
    gt = write_video(tmp_path / "gt" / "video.mp4", clip(gt_frames, seed=4), 24, crf=0)
    rng = np.random.default_rng(5)
    moving = clip(gt_frames, seed=4)[mark: mark + gen_frames].astype(np.int16) + rng.integers(-20, 21, (1, 36, 64, 3))
    generated = write_video(tmp_path / "gen" / "video.mp4", np.clip(moving, 0, 255).astype(np.uint8), 24, crf=0)
    return gt, generated


def test_continuation_block_agrees_with_torchmetrics_through_process_py_loop(tmp_path: Path,
                                                                            lpips_model: torch.nn.Module) -> None:
    """Native block vs the torchmetrics replica of process.py's reader loop, frame by frame (2 chunks + a drop)."""
    gt, generated = _videos(tmp_path, gt_frames=230, gen_frames=215, mark=15)
    block = native.continuation_block(gt, generated, mark_time=15, total_time=230, generated_frames=215,
                                      video_max_time=None, lpips_model=lpips_model, canvas=SMALL)
    double = ProcessPyCpuDouble(lpips_model, canvas=SMALL)
    (tmp_path / "gt" / "action.json").write_text('{"mark_time": 15, "total_time": 230, "data": []}')
    official = double._continuation(tmp_path / "gt", tmp_path / "gen", "1st_data", "mem_test", ("lcm",), None)["lcm"]
    assert block is not None and block["length"] == official["length"] == 200
    diffs = compare_blocks(official, block)
    assert all(diffs[name] <= AGREEMENT[name] for name in diffs), diffs
    assert block["avg_mse"] == pytest.approx(official["avg_mse"], rel=1e-5)


def test_frame_alignment_is_mark_time(tmp_path: Path, lpips_model: torch.nn.Module) -> None:
    """A generated video that is exactly GT from mark_time on scores MSE 0 (PSNR inf) on every frame."""
    frames = clip(240, seed=6)
    gt = write_video(tmp_path / "gt.mp4", frames, 24, crf=0)
    generated = write_video(tmp_path / "gen.mp4", frames[40:], 24, crf=0)
    block = native.continuation_block(gt, generated, mark_time=40, total_time=240, generated_frames=200,
                                      video_max_time=None, lpips_model=lpips_model, canvas=SMALL)
    assert block["length"] == 100 and max(block["mse"]) == 0.0 and block["avg_psnr"] == math.inf
    shifted = native.continuation_block(gt, generated, mark_time=39, total_time=239, generated_frames=200,
                                        video_max_time=None, lpips_model=lpips_model, canvas=SMALL)
    assert min(shifted["mse"]) > 0


def test_nothing_scored_at_or_below_100_frames(tmp_path: Path, lpips_model: torch.nn.Module) -> None:
    gt, generated = _videos(tmp_path, gt_frames=130, gen_frames=100, mark=20)
    assert native.continuation_block(gt, generated, mark_time=20, total_time=130, generated_frames=100,
                                     video_max_time=None, lpips_model=lpips_model, canvas=SMALL) is None


def test_short_gt_is_an_error_naming_it(tmp_path: Path, lpips_model: torch.nn.Module) -> None:
    gt, generated = _videos(tmp_path, gt_frames=130, gen_frames=112, mark=10)
    short = write_video(tmp_path / "short.mp4", clip(60, seed=4), 24, crf=0)
    with pytest.raises(LayoutError, match="short.mp4"):
        native.continuation_block(short, generated, mark_time=10, total_time=130, generated_frames=112,
                                  video_max_time=None, lpips_model=lpips_model, canvas=SMALL)


def test_mirror_compares_frame_i_with_frame_n_minus_1_minus_i(tmp_path: Path, lpips_model: torch.nn.Module) -> None:
    half = clip(6, seed=7)
    palindrome = write_video(tmp_path / "p.mp4", np.concatenate([half, half[::-1]]), 24, crf=0)
    block = native.mirror_block(palindrome, frames=12, lpips_model=lpips_model, canvas=SMALL)
    assert block["length"] == 6 and block["psnr"] == [math.inf] * 6
    shifted = write_video(tmp_path / "s.mp4", np.concatenate([half, half]), 24, crf=0)   # not mirrored
    assert min(native.mirror_block(shifted, frames=12, lpips_model=lpips_model, canvas=SMALL)["mse"]) > 0


def test_mirror_block_agrees_with_torchmetrics(tmp_path: Path, lpips_model: torch.nn.Module) -> None:
    noisy = np.clip(clip(14, seed=8).astype(np.int16) + np.random.default_rng(9).integers(-30, 31, (14, 36, 64, 3)),
                    0, 255).astype(np.uint8)
    video = write_video(tmp_path / "loop" / "path-1.mp4", noisy, 24, crf=0)
    block = native.mirror_block(video, frames=14, lpips_model=lpips_model, canvas=SMALL)
    official = ProcessPyCpuDouble(lpips_model, canvas=SMALL)._mirror(tmp_path, "loop", "1st_data")
    diffs = compare_blocks(official["video_results"][0]["gsc"], block)
    assert all(diffs[name] <= AGREEMENT[name] for name in diffs), diffs


def test_compare_blocks_treats_matching_infinities_as_agreement() -> None:
    official = {"mse": [0.0, 0.1], "psnr": [math.inf, 10.0], "ssim": [1.0, 0.5], "lpips": [0.0, 0.2]}
    native_block = {"mse": [0.0, 0.1], "psnr": [math.inf, 10.0], "ssim": [1.0, 0.5], "lpips": [0.0, 0.2]}
    assert compare_blocks(official, native_block) == {"mse": 0.0, "psnr": 0.0, "ssim": 0.0, "lpips": 0.0}
    native_block["psnr"] = [80.0, 10.0]
    assert compare_blocks(official, native_block)["psnr"] == math.inf
    assert compare_blocks(official, {**native_block, "mse": [0.0]})["mse"] == math.inf   # length differs
