"""Real evaluator weights on a GPU (GPU CI after `pinbench fetch remembench`); skipped without CUDA."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA and the fetched weights")]


def test_real_clip_vit_h14_loads_strictly_and_embeds():  # pragma: no cover - GPU CI
    from pinbench_recipes.remembench.clip_model import ClipEmbedder
    from pinbench_recipes.remembench.weights import load_recipe_pins, resolve_clip

    config, weights, _ = resolve_clip(load_recipe_pins(), None, None, download=False)
    embedder = ClipEmbedder(config, weights, device="cuda")
    frames = [np.random.default_rng(i).integers(0, 256, (768, 1376, 3), dtype=np.uint8) for i in range(3)]
    embeddings = embedder.embed(frames + [frames[0]])
    assert embeddings.shape == (4, 1024)
    assert float(embeddings[0] @ embeddings[3]) == pytest.approx(1.0, abs=1e-5)


def test_real_lpips_trunk_scores_identical_frames_zero():  # pragma: no cover - GPU CI
    from pinbench.media.lpips import load_lpips, lpips_distance
    from pinbench_recipes.remembench.weights import load_recipe_pins, resolve_alexnet

    pins = load_recipe_pins()
    trunk, _ = resolve_alexnet(pins, None, None, download=False)
    model = load_lpips(trunk, expected_sha256=pins.urls["alexnet"].sha256, device="cuda")
    frame = np.random.default_rng(0).integers(0, 256, (1, 480, 832, 3), dtype=np.uint8)
    other = np.random.default_rng(1).integers(0, 256, (1, 480, 832, 3), dtype=np.uint8)
    assert lpips_distance(model, frame, frame)[0] == pytest.approx(0.0, abs=1e-6)
    assert lpips_distance(model, frame, other)[0] > 0.1


def test_paper_clip_file_holds_the_same_vision_weights():  # pragma: no cover - GPU CI
    """The paper's transformers model.safetensors against the recipe's open_clip_model.safetensors (same revision).

    GPU CI: ``huggingface-cli download laion/CLIP-ViT-H-14-laion2B-s32B-b79K model.safetensors --revision
    1c2b8495b28150b8a4922ee1c8edee224c284c0c`` and set REMEMBENCH_PAPER_CLIP_WEIGHTS to the file.
    """
    import os
    from pathlib import Path

    from safetensors.torch import load_file

    from pinbench_recipes.remembench.clip_model import ClipEmbedder, compare_with_paper_weights
    from pinbench_recipes.remembench.weights import load_recipe_pins, resolve_clip

    paper = os.environ.get("REMEMBENCH_PAPER_CLIP_WEIGHTS")
    if not paper:
        pytest.fail("set REMEMBENCH_PAPER_CLIP_WEIGHTS to the paper's model.safetensors (see the docstring)")
    config, weights, _ = resolve_clip(load_recipe_pins(), None, None, download=False)
    embedder = ClipEmbedder(config, weights, device="cpu")
    found = compare_with_paper_weights(embedder.visual.state_dict(), 32, load_file(str(Path(paper))))
    assert found["missing"] == [] and found["n_compared"] == 8 + 16 * 32
    assert found["max_abs_diff"] == 0.0, found
