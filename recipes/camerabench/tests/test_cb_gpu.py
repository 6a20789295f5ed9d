"""GPU CI only: the scorer on CUDA in bfloat16, first with the test double, then with the real checkpoints.

Run with ``pytest -m gpu recipes/camerabench`` in the recipe image. The real-weights checks need
``CAMERABENCH_GPU_WEIGHTS`` (a checkpoint snapshot: the base Instruct or the SFT),
``CAMERABENCH_GPU_PROCESSOR`` (the base Instruct snapshot) and ``CAMERABENCH_GPU_VIDEOS`` (a folder with
CameraBench videos); they print what they measure so the CI log records it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
pytest.importorskip("transformers", minversion="4.49.0")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

from pinbench_recipes.camerabench import qwen_scorer as qs  # noqa: E402
from pinbench_recipes.camerabench.fixture import bit_frames  # noqa: E402

QUESTION = "Does the camera move forward with respect to the initial frame?"


@pytest.fixture
def mp4v_video(tmp_path: Path) -> Path:
    """An index-coded MP4 written with OpenCV (the GPU machine may lack PyAV)."""
    import cv2

    path = tmp_path / "gpu.mp4"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 8.0, (64, 48))
    for frame in bit_frames(16):
        writer.write(frame[:, :, ::-1].copy())
    writer.release()
    return path


def test_test_double_on_cuda_bf16_matches_eager(tiny_qwen: tuple[Path, Path], mp4v_video: Path) -> None:
    weights, processor = tiny_qwen
    results = {}
    for attn in ("eager", "sdpa"):
        scorer = qs.QwenCameraScorer(qs.ScorerSettings(weights, processor, attn_implementation=attn, device="cuda"))
        first = scorer.answer_probabilities(mp4v_video, QUESTION)
        assert scorer.answer_probabilities(mp4v_video, QUESTION) == first  # deterministic run to run
        caption = scorer.caption(mp4v_video, "Describe the camera movement in this video.", seed=1)
        assert caption == scorer.caption(mp4v_video, "Describe the camera movement in this video.", seed=1)
        results[attn] = first
        print(attn, "on", scorer.describe()["device"], scorer.describe()["dtype"], first)
    print("tiny double bf16 p_yes eager/sdpa:", results["eager"]["p_yes"], results["sdpa"]["p_yes"])
    assert results["sdpa"]["p_yes"] == pytest.approx(results["eager"]["p_yes"], abs=0.02)


def _real() -> tuple[Path, Path, list[Path]]:
    names = ("CAMERABENCH_GPU_WEIGHTS", "CAMERABENCH_GPU_PROCESSOR", "CAMERABENCH_GPU_VIDEOS")
    if not all(os.environ.get(n) for n in names):
        pytest.skip(f"set {', '.join(names)} to run on real weights")
    videos = sorted(Path(os.environ["CAMERABENCH_GPU_VIDEOS"]).rglob("*.mp4"))[:8]
    return Path(os.environ[names[0]]), Path(os.environ[names[1]]), videos


def test_real_checkpoint_flash_attention_against_sdpa() -> None:
    weights, processor, videos = _real()
    scores = {}
    for attn in ("flash_attention_2", "sdpa"):
        scorer = qs.QwenCameraScorer(qs.ScorerSettings(weights, processor, attn_implementation=attn))
        scores[attn] = [scorer.answer_probabilities(v, QUESTION) for v in videos]
        again = [scorer.answer_probabilities(v, QUESTION)["p_yes"] for v in videos]
        print(attn, "run-to-run max |dp|:", max(abs(a - b["p_yes"]) for a, b in zip(again, scores[attn], strict=True)))
        print(attn, "generation_config:", scorer.describe()["generation_config"])
        del scorer
        torch.cuda.empty_cache()
    deltas = [abs(a["p_yes"] - b["p_yes"]) for a, b in zip(scores["flash_attention_2"], scores["sdpa"], strict=True)]
    print("flash_attention_2 vs sdpa max |dp_yes|:", max(deltas), "frames:", [s["n_frames"] for s in scores["sdpa"]])
    assert max(deltas) < 0.05


def test_real_checkpoint_processor_fps_default_against_sampled() -> None:
    """The drift the t2v_metrics 3.0 choice causes (processor fps not passed: 2 fps assumed) against 3.1's sampled
    fps, on the same frames; printed for the CI log, which is where README "Changes" takes the number from."""
    weights, processor, videos = _real()
    scores = {}
    for fps in ("default", "sampled"):
        scorer = qs.QwenCameraScorer(qs.ScorerSettings(weights, processor, processor_fps=fps))
        scores[fps] = [scorer.answer_probabilities(v, QUESTION) for v in videos]
        del scorer
        torch.cuda.empty_cache()
    for default, sampled in zip(scores["default"], scores["sampled"], strict=True):
        assert default["n_frames"] == sampled["n_frames"]                      # same frames, other positions
        assert default["second_per_grid_ts"] == [1.0]
        assert sampled["second_per_grid_ts"] == [pytest.approx(2 / sampled["sample_fps"])]
    deltas = [abs(a["p_yes"] - b["p_yes"]) for a, b in zip(scores["default"], scores["sampled"], strict=True)]
    print("processor fps default (3.0) vs sampled (3.1): max |dp_yes|", max(deltas),
          "mean", sum(deltas) / len(deltas), "over", len(deltas), "videos")
