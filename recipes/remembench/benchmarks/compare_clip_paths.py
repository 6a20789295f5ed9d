"""Measure the recipe's CLIP path (open_clip + own preprocessing) against the paper's (transformers).

The paper embedded frames with transformers' ``CLIPModel.get_image_features`` after the slow, PIL-based
``CLIPImageProcessor``; the recipe loads the same LAION weights in open_clip form. This script builds
both models from the same random weights (ViT-H/14's architecture by default, or a tiny one), feeds
both pipelines the same frames and prints:

1. preprocessing: recipe vs ``CLIPImageProcessor`` pixel tensors (and open_clip's own transform, which
   the recipe does not use);
2. embeddings: recipe vs ``CLIPVisionModelWithProjection`` on identical pixels (fp32, CPU);
3. the CLIP score itself: |cos_recipe(a, b) - cos_paper(a, b)| over frame pairs.

By default the weights are random and everything runs on CPU in fp32; the GPU CI reruns it with the
real weights (``--clip-dir``) on ``--device cuda``, where the pair metrics use cuDNN TF32 as the paper
did (README). transformers is not a recipe dependency; install it apart, e.g.

    pip install --no-deps --target /tmp/tf transformers==4.57.1 huggingface_hub==0.36.2 tokenizers==0.22.2
    PYTHONPATH=/tmp/tf python recipes/remembench/benchmarks/compare_clip_paths.py [--tiny]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from pinbench.media.precision import tf32
from pinbench_recipes.remembench.clip_model import (
    OPENAI_MEAN,
    OPENAI_STD,
    ClipConfig,
    ClipEmbedder,
    compare_with_paper_weights,
    preprocess,
    transformers_vision_state,
)
from pinbench_recipes.remembench.fixture import TINY_CLIP, i2v_frames, i2v_poses

VIT_H14 = {"embed_dim": 1024, "vision_cfg": {"image_size": 224, "layers": 32, "width": 1280, "head_width": 80,
                                              "patch_size": 14},
           "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 1024, "heads": 16, "layers": 24}}


def random_visual(model_cfg: dict, seed: int) -> torch.nn.Module:
    """open_clip's vision tower with seeded random weights of a sensible scale."""
    import open_clip

    with torch.device("meta"):
        visual = open_clip.model.CLIP(**model_cfg).visual
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name, tensor in visual.state_dict().items():
        shape = tuple(tensor.shape)
        if len(shape) <= 1:
            centre = 1.0 if "ln" in name and name.endswith("weight") else 0.0
            state[name] = centre + 0.05 * torch.randn(shape, generator=generator)
        elif name == "proj":
            state[name] = torch.randn(shape, generator=generator) / shape[0] ** 0.5
        elif "embedding" in name:
            state[name] = 0.5 * torch.randn(shape, generator=generator)
        else:
            state[name] = torch.randn(shape, generator=generator) / float(np.prod(shape[1:])) ** 0.5
    visual.load_state_dict(state, strict=True, assign=True)
    return visual.float().eval()


def to_transformers(visual: torch.nn.Module, model_cfg: dict) -> torch.nn.Module:
    """The same weights as ``CLIPVisionModelWithProjection`` (q/k/v split, projection transposed)."""
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    v = model_cfg["vision_cfg"]
    config = CLIPVisionConfig(hidden_size=v["width"], intermediate_size=4 * v["width"],
                              num_hidden_layers=v["layers"], num_attention_heads=v["width"] // v["head_width"],
                              image_size=v["image_size"], patch_size=v["patch_size"],
                              projection_dim=model_cfg["embed_dim"], hidden_act="gelu", layer_norm_eps=1e-5)
    dst = transformers_vision_state(visual.state_dict(), v["layers"])
    model = CLIPVisionModelWithProjection(config).eval()
    model.load_state_dict(dst, strict=False)
    missing = set(model.state_dict()) - set(dst) - {"vision_model.embeddings.position_ids"}
    if missing:
        raise RuntimeError(f"conversion left weights random: {sorted(missing)[:3]}")
    return model


def frames(n: int, width: int, height: int) -> list[np.ndarray]:
    """Realistic-ish frames at a paper size: views of a textured panorama along an out-and-back turn."""
    import cv2

    rng = np.random.default_rng(0)
    small = i2v_frames(rng, i2v_poses(rng, "rotation_180", "left", n), translation=False)
    return [cv2.resize(f, (width, height), interpolation=cv2.INTER_CUBIC) for f in small]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", action="store_true", help="tiny architecture instead of ViT-H/14 (fast)")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--clip-dir", type=Path, help="folder with the real open_clip weights")
    parser.add_argument("--paper-weights", type=Path,
                        help="the paper's transformers model.safetensors (same revision): compare it with --clip-dir")
    parser.add_argument("--device", default="cpu", help="cuda for the GPU CI (pair metrics run with cuDNN TF32 on)")
    args = parser.parse_args()
    from transformers import CLIPImageProcessor

    model_cfg = TINY_CLIP["model_cfg"] if args.tiny else VIT_H14
    size = model_cfg["vision_cfg"]["image_size"]
    cfg = ClipConfig(model_cfg=model_cfg, image_size=size, mean=OPENAI_MEAN, std=OPENAI_STD)
    processor = CLIPImageProcessor(size={"shortest_edge": size}, crop_size={"height": size, "width": size},
                                   resample=3, image_mean=list(OPENAI_MEAN), image_std=list(OPENAI_STD))
    import open_clip

    oc_transform = open_clip.image_transform(size, is_train=False, mean=OPENAI_MEAN, std=OPENAI_STD,
                                             resize_mode="shortest", interpolation="bicubic")
    from PIL import Image

    for width, height in ((1376, 768), (832, 480), (1001, 563)):
        images = frames(2 * args.pairs, width, height)
        ours = preprocess(images, cfg)
        theirs = processor(images=images, return_tensors="pt")["pixel_values"]
        openclip = torch.stack([oc_transform(Image.fromarray(i)) for i in images])
        print(f"{width}x{height}: preprocessing max |recipe - CLIPImageProcessor| = "
              f"{(ours - theirs).abs().max().item():.3e}; open_clip transform vs CLIPImageProcessor = "
              f"{(openclip - theirs).abs().max().item():.3e}")
    if args.clip_dir is not None:
        embedder = ClipEmbedder(args.clip_dir / "open_clip_config.json", args.clip_dir / "open_clip_model.safetensors")
        visual, model_cfg = embedder.visual, embedder.cfg.model_cfg
        if args.paper_weights is not None:
            from safetensors.torch import load_file

            found = compare_with_paper_weights(visual.state_dict(), model_cfg["vision_cfg"]["layers"],
                                               load_file(str(args.paper_weights)))
            print(f"open_clip_model.safetensors vs {args.paper_weights.name}: {found['n_compared']} vision tensors, "
                  f"max |difference| {found['max_abs_diff']:.3e} (in {found['where']}), "
                  f"missing from the paper's file: {found['missing'] or 'none'}")
    else:
        visual = random_visual(model_cfg, seed=0)
    hf = to_transformers(visual, model_cfg).to(args.device)
    visual = visual.to(args.device)
    images = frames(2 * args.pairs, 1376, 768)
    pixels = preprocess(images, cfg).to(args.device)
    with torch.no_grad(), tf32(cudnn=True, matmul=False):
        ours = torch.nn.functional.normalize(visual(pixels).float(), dim=-1).cpu()
        paper = torch.nn.functional.normalize(hf(pixel_values=pixels).image_embeds.float(), dim=-1).cpu()
    cos_ours = (ours[0::2] * ours[1::2]).sum(-1)
    cos_paper = (paper[0::2] * paper[1::2]).sum(-1)
    name = ("real" if args.clip_dir else "tiny random" if args.tiny else "ViT-H/14 random") + " weights"
    print(f"{name}, fp32 on {args.device}: max |embedding difference| = {(ours - paper).abs().max().item():.3e}")
    print(f"CLIP score over {args.pairs} pairs: max |cos_recipe - cos_paper| = "
          f"{(cos_ours - cos_paper).abs().max().item():.3e} (scores {cos_paper.min().item():.3f}.."
          f"{cos_paper.max().item():.3f})")


if __name__ == "__main__":
    main()
