"""CLIP and LPIPS built from local files (tiny seeded stand-ins), preprocessing, weight resolution."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from pinbench.media.lpips import load_lpips, lpips_distance
from pinbench_recipes.remembench.clip_model import (
    OPENAI_MEAN,
    OPENAI_STD,
    ClipEmbedder,
    ClipLoadError,
    check_vit_h14,
    compare_with_paper_weights,
    preprocess,
    read_clip_config,
    transformers_vision_state,
)
from pinbench_recipes.remembench.fixture import TINY_CLIP, write_random_alexnet, write_tiny_clip
from pinbench_recipes.remembench.weights import WeightsError, load_recipe_pins, resolve_alexnet, resolve_clip


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("clip")
    write_tiny_clip(folder, seed=3)
    return folder


def _images(n: int, shape=(48, 64, 3)) -> list[np.ndarray]:
    return [np.random.default_rng(i).integers(0, 256, shape, dtype=np.uint8) for i in range(n)]


def test_clip_loads_from_local_files_and_matches_open_clip(tiny_clip):
    import open_clip
    from safetensors.torch import load_file

    embedder = ClipEmbedder(tiny_clip / "open_clip_config.json", tiny_clip / "open_clip_model.safetensors",
                            require_vit_h14=False)
    images = _images(5)
    got = embedder.embed(images, batch=2)
    assert got.shape == (5, 16) and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    full = open_clip.model.CLIP(**TINY_CLIP["model_cfg"]).eval()
    full.load_state_dict(load_file(str(tiny_clip / "open_clip_model.safetensors")), strict=True)
    with torch.no_grad():
        expected = torch.nn.functional.normalize(full.encode_image(preprocess(images, embedder.cfg)), dim=-1)
    np.testing.assert_allclose(got, expected.numpy(), atol=1e-6)
    np.testing.assert_allclose(embedder.embed(images, batch=5), got, atol=1e-6)  # batching changes nothing


def test_clip_refuses_a_non_vit_h14_config_and_mismatched_weights(tiny_clip, tmp_path):
    with pytest.raises(ClipLoadError, match="vision_cfg.image_size is 32, ViT-H/14 has 224"):
        ClipEmbedder(tiny_clip / "open_clip_config.json", tiny_clip / "open_clip_model.safetensors")
    other = json.loads((tiny_clip / "open_clip_config.json").read_text())
    other["model_cfg"]["vision_cfg"]["width"] = 48
    (tmp_path / "cfg.json").write_text(json.dumps(other))
    with pytest.raises(ClipLoadError, match="does not fit the config"):
        ClipEmbedder(tmp_path / "cfg.json", tiny_clip / "open_clip_model.safetensors", require_vit_h14=False)
    with pytest.raises(ClipLoadError, match="CLIP config not found"):
        read_clip_config(tmp_path / "absent.json")
    vit_h = {"model_cfg": {"embed_dim": 1024, "vision_cfg": {"image_size": 224, "layers": 32, "width": 1280,
                                                             "head_width": 80, "patch_size": 14}},
             "preprocess_cfg": {"mean": list(OPENAI_MEAN), "std": list(OPENAI_STD)}}
    (tmp_path / "vit_h.json").write_text(json.dumps(vit_h))
    check_vit_h14(read_clip_config(tmp_path / "vit_h.json"), tmp_path / "vit_h.json")


def test_the_two_clip_weight_files_are_compared_tensor_by_tensor(tiny_clip):
    """The paper loads model.safetensors, the recipe open_clip_model.safetensors: any difference is found."""
    embedder = ClipEmbedder(tiny_clip / "open_clip_config.json", tiny_clip / "open_clip_model.safetensors",
                            require_vit_h14=False)
    state, layers = embedder.visual.state_dict(), TINY_CLIP["model_cfg"]["vision_cfg"]["layers"]
    paper = {k: t.clone() for k, t in transformers_vision_state(state, layers).items()}
    paper["text_model.embeddings.token_embedding.weight"] = torch.zeros(3, 3)  # the text tower is not compared
    same = compare_with_paper_weights(state, layers, paper)
    assert same["max_abs_diff"] == 0.0 and same["missing"] == [] and same["n_compared"] == 8 + 16 * layers
    paper["vision_model.encoder.layers.1.self_attn.v_proj.bias"][3] += 0.5
    changed = compare_with_paper_weights(state, layers, paper)
    assert changed["max_abs_diff"] == pytest.approx(0.5) and changed["where"].endswith("layers.1.self_attn.v_proj.bias")
    del paper["visual_projection.weight"]
    assert compare_with_paper_weights(state, layers, paper)["missing"] == ["visual_projection.weight"]


def test_preprocessing_follows_the_slow_clip_image_processor():
    """Shortest side to 32 (long side truncated), floor-centred crop, float64 rescale, float32 normalise."""
    cfg = read_clip_config_from(TINY_CLIP)
    image = _images(1, (50, 77, 3))[0]  # long side 77 * 32 / 50 = 49.28 -> 49; crop offset (49 - 32) // 2 = 8
    resized = np.asarray(Image.fromarray(image).resize((49, 32), Image.Resampling.BICUBIC))
    crop = resized[:, 8:40]
    expected = ((crop.astype(np.float64) * (1 / 255)).astype(np.float32) - np.float32(OPENAI_MEAN)) / np.float32(
        OPENAI_STD)
    np.testing.assert_array_equal(preprocess([image], cfg)[0].numpy(), expected.transpose(2, 0, 1))
    tall = _images(1, (77, 50, 3))[0]
    assert preprocess([tall], cfg).shape == (1, 3, 32, 32)


def read_clip_config_from(data: dict):
    from pinbench_recipes.remembench.clip_model import ClipConfig

    return ClipConfig(model_cfg=data["model_cfg"], image_size=data["model_cfg"]["vision_cfg"]["image_size"],
                      mean=tuple(data["preprocess_cfg"]["mean"]), std=tuple(data["preprocess_cfg"]["std"]))


def test_lpips_from_a_local_trunk_file(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("LPIPS tried to download")

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", refuse)
    digest = write_random_alexnet(tmp_path / "trunk.pth", seed=1)
    model = load_lpips(tmp_path / "trunk.pth", expected_sha256=digest)
    a, b = np.stack(_images(2)), np.stack(_images(2)[::-1])
    distances = lpips_distance(model, a, b)
    assert distances.shape == (2,) and (distances > 0).all()
    assert distances[0] == pytest.approx(distances[1], rel=1e-5)  # symmetric pairs


def test_weights_resolution_checks_pinned_digests(tmp_path):
    pins = load_recipe_pins()
    fake = tmp_path / "alexnet-owt-7be5be79.pth"
    fake.write_bytes(b"not the trunk")
    with pytest.raises(WeightsError, match="LPIPS AlexNet trunk: .*sha256 mismatch"):
        resolve_alexnet(pins, fake, None, download=False)
    with pytest.raises(WeightsError, match="trunk not found"):
        resolve_alexnet(pins, tmp_path / "absent.pth", None, download=False)
    (tmp_path / "clip").mkdir()
    (tmp_path / "clip" / "open_clip_config.json").write_text("{}")
    (tmp_path / "clip" / "open_clip_model.safetensors").write_bytes(b"x")
    with pytest.raises(WeightsError, match="CLIP weights: .*sha256 mismatch"):
        resolve_clip(pins, tmp_path / "clip", None, download=False)
    # the baked directory of the image is used when no explicit path is given
    with pytest.raises(WeightsError, match="sha256 mismatch"):
        resolve_alexnet(pins, None, tmp_path, download=False)
