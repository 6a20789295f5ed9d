"""CLIP image embeddings (LAION ViT-H/14) from local files, with the paper's preprocessing.

Why open_clip with hand-written preprocessing: the paper used transformers' ``CLIPModel`` and the
slow, PIL-based ``CLIPImageProcessor``. The LAION repository also ships the open_clip form of the same
weights (``open_clip_config.json`` + ``open_clip_model.safetensors``), which open_clip loads without
remote code or pickle. The preprocessing is reimplemented to match ``CLIPImageProcessor`` pixel for
pixel (shortest side to the model size with PIL bicubic and truncated long side, centre crop with
floor offsets, rescale 1/255 in float64 then float32, normalise in float32), which open_clip's own
torchvision transform does not guarantee (its centre crop rounds the offset). README "Changes vs
upstream" gives the measured difference between the two paths.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

# The ViT-H/14 LAION-2B architecture the real weights must have (open_clip_config.json, model_cfg).
VIT_H14 = {"embed_dim": 1024, "vision_cfg": {"image_size": 224, "layers": 32, "width": 1280,
                                              "head_width": 80, "patch_size": 14}}
OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)
BATCH = 32  # the paper's CLIP batch


class ClipLoadError(RuntimeError):
    """Config or weights unusable (one line naming the file)."""


@dataclass(frozen=True)
class ClipConfig:
    model_cfg: dict[str, Any]
    image_size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]


def read_clip_config(path: Path) -> ClipConfig:
    """Parse an ``open_clip_config.json`` (``model_cfg`` + ``preprocess_cfg``)."""
    try:
        data = json.loads(Path(path).read_text())
        model_cfg = data["model_cfg"]
        size = model_cfg["vision_cfg"]["image_size"]
    except FileNotFoundError:
        raise ClipLoadError(f"{path}: CLIP config not found") from None
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ClipLoadError(f"{path}: not an open_clip config ({type(exc).__name__}: {exc})") from None
    pre = data.get("preprocess_cfg", {})
    if not isinstance(size, int):
        raise ClipLoadError(f"{path}: vision_cfg.image_size must be one integer, got {size!r}")
    return ClipConfig(model_cfg=model_cfg, image_size=size, mean=tuple(pre.get("mean", OPENAI_MEAN)),
                      std=tuple(pre.get("std", OPENAI_STD)))


def check_vit_h14(cfg: ClipConfig, path: Path) -> None:
    """Refuse a config that is not the paper's ViT-H/14 or does not use the OpenAI mean/std."""
    vision = cfg.model_cfg.get("vision_cfg", {})
    for key, want in VIT_H14["vision_cfg"].items():
        if vision.get(key) != want:
            raise ClipLoadError(f"{path}: vision_cfg.{key} is {vision.get(key)!r}, ViT-H/14 has {want}")
    if cfg.model_cfg.get("embed_dim") != VIT_H14["embed_dim"]:
        raise ClipLoadError(f"{path}: embed_dim is {cfg.model_cfg.get('embed_dim')!r}, ViT-H/14 has 1024")
    if cfg.mean != OPENAI_MEAN or cfg.std != OPENAI_STD:
        raise ClipLoadError(f"{path}: preprocess mean/std {cfg.mean}/{cfg.std} are not the paper's")


def preprocess(images: list[np.ndarray], cfg: ClipConfig) -> torch.Tensor:
    """uint8 (H, W, 3) arrays -> float32 (N, 3, S, S), as transformers' slow CLIPImageProcessor does.

    Arrays are taken channel-last as given: Drift deliberately feeds BGR arrays through this.
    """
    size = cfg.image_size
    mean = np.asarray(cfg.mean, dtype=np.float32)
    std = np.asarray(cfg.std, dtype=np.float32)
    out = np.empty((len(images), 3, size, size), dtype=np.float32)
    for i, array in enumerate(images):
        height, width = array.shape[:2]
        short, long = (width, height) if width <= height else (height, width)
        new_long = int(size * long / short)
        new_w, new_h = (size, new_long) if width <= height else (new_long, size)
        resized = np.asarray(Image.fromarray(np.ascontiguousarray(array)).resize((new_w, new_h),
                                                                                 Image.Resampling.BICUBIC))
        top, left = (new_h - size) // 2, (new_w - size) // 2
        crop = resized[top : top + size, left : left + size]
        scaled = (crop.astype(np.float64) * (1 / 255)).astype(np.float32)
        out[i] = ((scaled - mean) / std).transpose(2, 0, 1)
    return torch.from_numpy(out)


class ClipEmbedder:
    """The vision tower of an open_clip CLIP, loaded strictly from a safetensors file."""

    def __init__(self, config_path: Path, weights_path: Path, *, device: str = "cpu",
                 require_vit_h14: bool = True):
        import open_clip
        from safetensors import safe_open

        self.cfg = read_clip_config(config_path)
        if require_vit_h14:
            check_vit_h14(self.cfg, config_path)
        with torch.device("meta"):
            model = open_clip.model.CLIP(**self.cfg.model_cfg)
        visual = model.visual
        expected = set(visual.state_dict())
        try:
            with safe_open(str(weights_path), framework="pt") as fh:
                keys = {k.removeprefix("visual."): k for k in fh.keys() if k.startswith("visual.")}
                missing = sorted(expected - set(keys))
                unexpected = sorted(set(keys) - expected)
                if missing or unexpected:
                    raise ClipLoadError(f"{weights_path}: does not fit the config: missing {missing[:3]}, "
                                        f"unexpected {unexpected[:3]}")
                state = {k: fh.get_tensor(full) for k, full in keys.items()}
        except (OSError, RuntimeError) as exc:
            if isinstance(exc, ClipLoadError):
                raise
            raise ClipLoadError(f"{weights_path}: unreadable safetensors ({exc})") from None
        try:
            visual.load_state_dict(state, strict=True, assign=True)
        except RuntimeError as exc:
            first = next((line.strip() for line in str(exc).splitlines() if "size mismatch" in line), str(exc))
            raise ClipLoadError(f"{weights_path}: does not fit the config: {first[:200]}") from None
        self.visual = visual.to(device=device, dtype=torch.float32).eval()
        self.device = device

    @torch.no_grad()
    def embed(self, images: list[np.ndarray], batch: int = BATCH) -> np.ndarray:
        """(N, D) float32 L2-normalised embeddings, computed in batches of ``batch`` in order."""
        chunks = []
        for start in range(0, len(images), batch):
            pixels = preprocess(images[start : start + batch], self.cfg).to(self.device)
            features = self.visual(pixels).float()
            chunks.append(torch.nn.functional.normalize(features, dim=-1).cpu())
        return torch.cat(chunks).numpy()


def transformers_vision_state(state: dict[str, torch.Tensor], layers: int) -> dict[str, torch.Tensor]:
    """open_clip vision weights renamed (q/k/v split, projection transposed) to transformers' CLIP layout.

    Why: the paper loaded ``model.safetensors`` (transformers ``CLIPModel``), the recipe loads
    ``open_clip_model.safetensors`` of the same revision. These names let the two files be compared tensor
    by tensor (``benchmarks/compare_clip_paths.py --paper-weights``, the GPU CI) and let the benchmark run
    the open_clip weights through transformers. ``state`` is the vision tower's state dict.
    """
    dst = {"vision_model.embeddings.patch_embedding.weight": state["conv1.weight"],
           "vision_model.embeddings.class_embedding": state["class_embedding"],
           "vision_model.embeddings.position_embedding.weight": state["positional_embedding"],
           "vision_model.pre_layrnorm.weight": state["ln_pre.weight"],
           "vision_model.pre_layrnorm.bias": state["ln_pre.bias"],
           "vision_model.post_layernorm.weight": state["ln_post.weight"],
           "vision_model.post_layernorm.bias": state["ln_post.bias"], "visual_projection.weight": state["proj"].T}
    for i in range(layers):
        a, b = f"transformer.resblocks.{i}.", f"vision_model.encoder.layers.{i}."
        for part, weight in zip(("q", "k", "v"), state[a + "attn.in_proj_weight"].chunk(3), strict=True):
            dst[b + f"self_attn.{part}_proj.weight"] = weight
        for part, bias in zip(("q", "k", "v"), state[a + "attn.in_proj_bias"].chunk(3), strict=True):
            dst[b + f"self_attn.{part}_proj.bias"] = bias
        for ours, theirs in (("attn.out_proj", "self_attn.out_proj"), ("ln_1", "layer_norm1"),
                             ("ln_2", "layer_norm2"), ("mlp.c_fc", "mlp.fc1"), ("mlp.c_proj", "mlp.fc2")):
            dst[b + theirs + ".weight"] = state[a + ours + ".weight"]
            dst[b + theirs + ".bias"] = state[a + ours + ".bias"]
    return {k: t.contiguous() for k, t in dst.items()}


def compare_with_paper_weights(open_clip_state: dict[str, torch.Tensor], layers: int,
                               paper_state: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Tensor-by-tensor comparison of the open_clip vision weights with the paper's transformers file.

    Returns the number of tensors compared, the names missing from the paper's file, and the largest
    absolute difference with the tensor it occurs in (0.0 everywhere means the two files hold the same
    vision weights, so the recipe's CLIP scores can only differ by computation, not by weights).
    """
    ours = transformers_vision_state(open_clip_state, layers)
    missing = sorted(k for k in ours if k not in paper_state)
    worst, where = 0.0, None
    for name, tensor in ours.items():
        if name in missing:
            continue
        theirs = paper_state[name]
        if theirs.shape != tensor.shape:
            return {"n_compared": None, "missing": missing, "max_abs_diff": float("inf"),
                    "where": f"{name}: shape {tuple(theirs.shape)} vs {tuple(tensor.shape)}"}
        diff = (tensor.float() - theirs.float()).abs().max().item()
        if diff > worst or where is None:
            worst, where = diff, name
    return {"n_compared": len(ours) - len(missing), "missing": missing, "max_abs_diff": worst, "where": where}
