"""The evaluator models a RememBench run loads: their verified files, resolved before any scoring (a missing or
mismatching one fails the run before work starts), and CLIP + LPIPS loaded once from them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pinbench.core.config import RecipeError
from pinbench.core.options import OptionValues
from pinbench.media.lpips import load_lpips
from pinbench_recipes.remembench import weights
from pinbench_recipes.remembench.clip_model import ClipEmbedder
from pinbench_recipes.remembench.fixture import FixtureData
from pinbench_recipes.remembench.scoring import Scorer


@dataclass(frozen=True)
class ModelFiles:
    """Verified evaluator files (resolved before scoring, so a missing one fails before any work)."""

    clip_config: Path
    clip_weights: Path
    lpips_trunk: Path
    lpips_sha256: str | None
    pi3x: Path | None
    real_clip: bool = True


def model_files(opts: OptionValues, fixture: FixtureData | None, *, need_pi3x: bool,
                 download: bool) -> tuple[ModelFiles, dict[str, str]]:
    """The evaluator files and a label of each (part of every task's hash: new weights, new scores)."""
    if fixture is not None:
        files = ModelFiles(fixture.clip_dir / weights.CLIP_CONFIG, fixture.clip_dir / weights.CLIP_WEIGHTS,
                           fixture.lpips_trunk, fixture.lpips_sha256, None, real_clip=False)
        return files, {"clip": f"fixture tiny CLIP sha256:{fixture.clip_sha256}",
                       "lpips": f"lpips 0.1.4 alex v0.1, fixture trunk sha256:{fixture.lpips_sha256}",
                       "pi3x": "not used (constructed poses)"}
    pins, baked = weights.load_recipe_pins(), weights.baked_dir(opts.weights_dir)
    try:
        config, clip_weights, clip_source = weights.resolve_clip(pins, opts.clip_dir, baked, download)
        trunk, trunk_source = weights.resolve_alexnet(pins, opts.lpips_trunk, baked, download)
        pi3x, pi3x_source = (weights.resolve_pi3x(pins, opts.pi3x_weights, baked, download)
                             if need_pi3x and opts.poses_dir is None else (None, "not used"))
    except Exception as exc:  # missing or mismatching weights: one line, before any scoring starts
        raise RecipeError(f"{type(exc).__name__}: {exc}") from None
    files = ModelFiles(config, clip_weights, trunk, pins.urls["alexnet"].sha256, pi3x)
    return files, {"clip": clip_source, "lpips": f"lpips 0.1.4 alex v0.1, {trunk_source}", "pi3x": pi3x_source}


def load_pair_models(files: ModelFiles, device: str) -> tuple[ClipEmbedder, Any]:
    """CLIP and LPIPS from the verified files (the run's scorer and ``annotate --agreement`` use these)."""
    clip = ClipEmbedder(files.clip_config, files.clip_weights, device=device, require_vit_h14=files.real_clip)
    return clip, load_lpips(files.lpips_trunk, expected_sha256=files.lpips_sha256, device=device)


def scorer(files: ModelFiles, device: str, out_dir: Path, videos: Path | None, poses_dir: Path | None) -> Scorer:
    """Load CLIP and LPIPS once for the whole run (Pi3X is loaded by the scorer when first needed)."""
    clip, lpips_model = load_pair_models(files, device)
    return Scorer(clip, lpips_model, out_dir, videos=videos, poses_dir=poses_dir, pi3x_weights=files.pi3x,
                  device=device)
