"""Every weight of the official run: fetched and verified before scoring, located offline while scoring.

Two homes, because the scoring stage runs with ``--network none``:

* the pinbench cache (``pinbench fetch mind``): DINOv3 (gated: the token reaches this stage only), the three
  files ``process.py`` would ``wget`` and the LPIPS AlexNet trunk. The CLIP ViT-L/14 URL is dead
  (openai/CLIP#516): ``-o clip_file=PATH`` stages any copy, accepted only with the SHA-256 its URL names;
* the image (``python -m pinbench_recipes.mind.weights bake``, at build time): everything ViPE's default
  pipeline downloads on first use, placed where torch hub and the HF cache look for it, so that neither
  ``torch.hub`` nor ``from_pretrained`` nor ``gdown`` is ever reached at scoring time.

No file is loaded here: files are only checked by digest and placed.
"""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from pinbench.core.config import RecipeError, RunConfig
from pinbench.core.files import atomic_path, sha256_file
from pinbench.core.pins import HFPin, Pins, URLPin, load_pins
from pinbench.core.recipe import get_recipe
from pinbench.ops.cache import url_path
from pinbench.ops.downloads import (
    ChecksumError,
    FetchError,
    NotFetchedError,
    UnresolvedPinError,
    fetch_hf,
    fetch_url,
    locate,
    verify_sha256,
)
from pinbench.ops.machine_pins import MachinePinsError, apply_machine_pins, machine_pins_for
from pinbench_recipes.mind.official import Runtime, cache_weights_read, reads_dino

PINS_PATH = Path(__file__).resolve().parent / "pins.yaml"
DINO_PIN = "dinov3_vitb16"
CACHE_PINS = ("musiq_spaq", "aesthetic_head", "clip_vit_l14", "alexnet")   # pinbench cache, fetch stage
# ViPE's first-use downloads: pin name -> path under TORCH_HOME where ViPE (torch.hub / gdown) looks first.
TORCH_HUB_FILES = {
    "alexnet": "hub/checkpoints/alexnet-owt-7be5be79.pth",    # lpips.LPIPS(net='alex') in process.py too
    "geocalib_pinhole": "hub/geocalib/pinhole.tar",
    "video_depth_anything_small": "hub/checkpoints/video_depth_anything_vits.pth",
    "groundingdino_swint_ogc": "hub/checkpoints/groundingdino_swint_ogc.pth",
    "sam_vit_b": "hub/sam/sam_vit_b_01ec64.pth",
    "aot_deaotl": "hub/aot/R50_DeAOTL_PRE_YTB_DAV.pth",
}
# HF repos ViPE loads without a revision, by the id it passes (the HF cache folder is derived from it).
HF_LOADED_AS = {"unidepth_v2_vitl14": "lpiccinelli/unidepth-v2-vitl14", "bert_base_uncased": "bert-base-uncased"}


class WeightsError(RuntimeError):
    """A weight is missing or does not match its pin (one line)."""


def recipe_pins() -> Pins:
    """pins.yaml with this machine's resolved pins applied: the digests it leaves null (MUSIQ, the LAION head,
    ViPE's first-use files) are the ones ``pinbench fetch mind`` recorded on this machine, and every later fetch
    and run verifies the files against them; scorecards mark them "resolved at run time"."""
    try:
        return apply_machine_pins(load_pins(PINS_PATH), machine_pins_for(get_recipe("mind")))
    except MachinePinsError as exc:
        raise RecipeError(str(exc)) from None


def stage_file(pin: URLPin, source: Path) -> Path:
    """Copy a file obtained elsewhere into the cache slot of ``pin``; only with the pinned digest."""
    if pin.sha256 is None:
        raise WeightsError(f"{pin.filename}: no pinned sha256, a staged copy cannot be verified")
    if not source.is_file():
        raise WeightsError(f"{source}: not a file")
    try:
        verify_sha256(source, pin.sha256)
    except ChecksumError as exc:
        raise WeightsError(str(exc)) from None
    dest = url_path(pin)
    with atomic_path(dest) as tmp:  # a copy cut short leaves neither a partial file nor a stray temporary
        shutil.copyfile(source, tmp)
    return dest


def _cache_urls(metrics: Sequence[str]) -> tuple[str, ...]:
    """The URL pins the scoring stage reads from the cache for ``metrics``: the LPIPS trunk always, the visual
    weights for ``visual``."""
    return (*cache_weights_read(metrics), "alexnet")


def fetch_cache_weights(pins: Pins, *, token: str | None, staged: Mapping[str, Path],
                        metrics: Sequence[str]) -> dict[str, Path]:
    """Download (or take from ``staged``) and verify the weights the scoring stage reads from the cache for
    ``metrics``: the LPIPS trunk always, the visual weights for ``visual``, DINOv3 for ``dino``."""
    found: dict[str, Path] = {}
    for name in _cache_urls(metrics):
        pin = pins.urls[name]
        found[name] = stage_file(pin, staged[name]) if name in staged else fetch_url(pin)
    if reads_dino(metrics):
        found[DINO_PIN] = fetch_hf(pins.huggingface[DINO_PIN], token=token)
    return found


def fetch_pins(cfg: RunConfig) -> list[str]:
    """recipe.yaml ``fetch_pins:``: the pins ``fetch`` downloads for ``-o metrics``, the only ones whose nulls
    ``pinbench fetch mind`` resolves first (``lcm``: the pinned LPIPS trunk alone, so no token for DINOv3)."""
    return _cache_pins(cfg.options.metrics)


def _cache_pins(metrics: Sequence[str]) -> list[str]:
    dino = [f"huggingface/{DINO_PIN}"] if reads_dino(metrics) else []
    return [f"urls/{name}" for name in _cache_urls(metrics)] + dino


def run_pins(pins: Pins, metrics: Sequence[str], *, official: bool, native: bool) -> list[str]:
    """The pins a run read, for its provenance (``pins_for_provenance``): the upstream code always (the fixture's
    double follows it); with the official ``process.py`` (not under ``--fixture``, not importing a Result.json)
    the cache weights of ``metrics`` and, for ``action`` (ViPE's RPE), ViPE's first-use files baked in the image;
    with the native cross-check on real videos, the LPIPS trunk. The image's build-only input (Eigen) is read by
    no run."""
    used = [f"upstream/{name}" for name in pins.upstream]
    if official:
        used += _cache_pins(metrics)
        if "action" in metrics:
            used += [f"urls/{name}" for name in TORCH_HUB_FILES if name != "alexnet"]
            used += [f"huggingface/{name}" for name in HF_LOADED_AS]
    if native and "urls/alexnet" not in used:
        used.append("urls/alexnet")
    return used


def fetch(cfg: RunConfig) -> None:
    """``pinbench fetch mind``: DINOv3 (gated, HF_TOKEN), the files process.py would wget, the LPIPS trunk; with
    ``-o metrics=`` only those the metrics read (``lcm``: the LPIPS trunk alone, no token, no CLIP copy)."""
    pins = recipe_pins()
    clip_file = cfg.options.clip_file
    staged = {"clip_vit_l14": Path(clip_file)} if clip_file else {}
    try:
        found = fetch_cache_weights(pins, token=os.environ.get("HF_TOKEN"), staged=staged,
                                    metrics=cfg.options.metrics)
    except (WeightsError, FetchError, ChecksumError, NotFetchedError, UnresolvedPinError) as exc:
        hint = ""
        if "clip_vit_l14" not in staged and "ViT-L-14" in str(exc):
            hint = " (the CLIP URL is dead: pass -o clip_file=PATH to a copy with the pinned SHA-256)"
        raise RecipeError(f"fetching MIND weights failed: {exc}{hint}") from None
    for name, path in found.items():
        print(f"mind: {name} at {path}")


def runtime_from_env(pins: Pins, metrics: Sequence[str], env: Mapping[str, str] = os.environ) -> Runtime:
    """The official runtime of the recipe image (or of MIND_* variables), the cache weights ``metrics`` read
    located offline (an ``lcm`` run needs none of them fetched)."""
    mind_dir = Path(env.get("MIND_DIR", "/opt/mind"))
    weights = {name: locate(pins.urls[name]) for name in cache_weights_read(metrics)}
    dino_dir = locate(pins.huggingface[DINO_PIN]) if reads_dino(metrics) else None
    return Runtime(mind_dir=mind_dir, python=Path(env.get("MIND_PYTHON", "/opt/venv/bin/python")),
                   dino_dir=dino_dir, weights=weights,
                   torch_home=Path(env.get("MIND_TORCH_HOME", "/opt/mind-weights/torch")),
                   hf_home=Path(env.get("MIND_HF_HOME", "/opt/mind-weights/hf")))


def lpips_trunk(pins: Pins) -> Path:
    """The verified AlexNet trunk for the native LPIPS (the same file process.py's lpips loads)."""
    return locate(pins.urls["alexnet"])


# ---------------------------------------------------------------------------------------- image bake


def _place(source: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest)


def materialise_hf(pin: HFPin, snapshot: Path, hf_home: Path, loaded_as: str) -> Path:
    """Lay a verified snapshot out where ``from_pretrained(loaded_as)`` finds it offline (refs/main -> pin)."""
    folder = hf_home / "hub" / ("models--" + loaded_as.replace("/", "--"))
    dest = folder / "snapshots" / str(pin.revision)
    for path in sorted(snapshot.rglob("*")):
        if path.is_file() and ".cache" not in path.relative_to(snapshot).parts:
            _place(path, dest / path.relative_to(snapshot))
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / "main").write_text(str(pin.revision))
    return dest


def bake(torch_home: Path, hf_home: Path, pins: Pins, staged: Mapping[str, Path]) -> list[str]:
    """Pre-warm ViPE's caches in the image; returns one line per file with its SHA-256 (for the build log)."""
    lines = []
    if "aot_deaotl" not in staged:
        raise WeightsError("R50_DeAOTL_PRE_YTB_DAV.pth lives on Google Drive (gdown): pass --aot-file")
    for name, relative in TORCH_HUB_FILES.items():
        pin = pins.urls[name]
        if name in staged:
            source = stage_file(pin, staged[name]) if pin.sha256 else staged[name]
        else:
            source = fetch_url(pin)
        _place(source, torch_home / relative)
        digest = pin.sha256 or sha256_file(source)
        lines.append(f"{torch_home / relative}  sha256 {digest}{'' if pin.sha256 else '  (unpinned: recorded here)'}")
    for name, loaded_as in HF_LOADED_AS.items():
        pin = pins.huggingface[name]
        dest = materialise_hf(pin, fetch_hf(pin), hf_home, loaded_as)
        lines.append(f"{dest}  {pin.label}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pinbench_recipes.mind.weights",
                                     description="Pre-warm ViPE's first-use downloads into the image.")
    parser.add_argument("command", choices=["bake"])
    parser.add_argument("--torch-home", type=Path, required=True)
    parser.add_argument("--hf-home", type=Path, required=True)
    parser.add_argument("--aot-file", type=Path, help="R50_DeAOTL_PRE_YTB_DAV.pth fetched with gdown")
    args = parser.parse_args(argv)
    staged = {"aot_deaotl": args.aot_file} if args.aot_file else {}
    for line in bake(args.torch_home, args.hf_home, recipe_pins(), staged):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
