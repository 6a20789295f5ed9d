"""Where the evaluator weights come from, and their SHA-256 check, for local runs and the recipe image.

Order for each asset: an explicit path (option / env var), then the baked directory (``-o weights_dir``, else
``BAKED_DIR`` when it exists: the Dockerfile bakes the LPIPS AlexNet trunk there and, with
``--build-arg BAKE_WEIGHTS=1``, CLIP and Pi3X too; the image sets no REMEMBENCH_WEIGHTS_DIR, which would be a
user's option in every run there), then the pinbench cache filled by
``pinbench fetch remembench``. Whatever the source, the file must hash to the digest in ``pins.yaml``.

``python -m pinbench_recipes.remembench.weights bake DIR [--all]`` fills a baked directory (used by the Dockerfile).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from pinbench.core.config import RunConfig
from pinbench.core.pins import HFPin, Pins, URLPin, load_pins
from pinbench.ops.downloads import fetch_hf, fetch_url, locate, verify_sha256

PINS_PATH = Path(__file__).resolve().parent / "pins.yaml"
BAKED_DIR = Path("/opt/remembench-weights")  # where the Dockerfile bakes weights
CLIP_CONFIG = "open_clip_config.json"
CLIP_WEIGHTS = "open_clip_model.safetensors"
PI3X_WEIGHTS = "model.safetensors"


class WeightsError(RuntimeError):
    """A weights file is missing or does not match its pin (one line)."""


def load_recipe_pins() -> Pins:
    return load_pins(PINS_PATH)


def baked_dir(given: Path | None) -> Path | None:
    """``-o weights_dir``, else the image's baked directory when it exists (on the host, none)."""
    return given or (BAKED_DIR if BAKED_DIR.is_dir() else None)


def torch_device(given: str | None) -> str:
    """``-o device``, else cuda when torch sees a GPU, else cpu."""
    if given:
        return given
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _verified(path: Path, digest: str | None, what: str) -> Path:
    if not path.is_file():
        raise WeightsError(f"{path}: {what} not found")
    if digest is not None:
        try:
            verify_sha256(path, digest)
        except Exception as exc:  # ChecksumError: one line with both digests
            raise WeightsError(f"{what}: {exc}") from None
    return path


def _hf_file(pin: HFPin, rel: str, download: bool) -> Path:
    root = fetch_hf(pin) if download else locate(pin)
    return Path(root) / rel


def _first(*candidates: Path | None) -> Path | None:
    return next((c for c in candidates if c is not None and c.exists()), None)


def resolve_clip(pins: Pins, clip_dir: Path | None, baked: Path | None,
                 download: bool) -> tuple[Path, Path, str]:
    """(config, weights, source) of the pinned LAION ViT-H/14. A source names what the file is, never where it is:
    it is part of every task's key, and a verified local copy scores as the pinned file does wherever it lies."""
    pin = pins.huggingface["clip"]
    digest = pin.sha256.get(CLIP_WEIGHTS)
    folder = _first(clip_dir, baked / "clip" if baked else None)
    if folder is not None:
        source = f"a local copy of {pin.label} (checked)"  # where it lies: the options in the scorecard's config
        return (_verified(folder / CLIP_CONFIG, None, "CLIP config"),
                _verified(folder / CLIP_WEIGHTS, digest, "CLIP weights"), source)
    if clip_dir is not None:
        raise WeightsError(f"{clip_dir}: CLIP directory not found")
    return _hf_file(pin, CLIP_CONFIG, download), _hf_file(pin, CLIP_WEIGHTS, download), pin.label


def resolve_alexnet(pins: Pins, trunk: Path | None, baked: Path | None, download: bool) -> tuple[Path, str]:
    """(path, source) of the torchvision AlexNet trunk LPIPS needs."""
    pin: URLPin = pins.urls["alexnet"]
    found = _first(trunk, baked / pin.filename if baked else None)
    if found is not None:
        return _verified(found, pin.sha256, "LPIPS AlexNet trunk"), f"a local copy of {pin.url} (sha256 {pin.sha256})"
    if trunk is not None:
        raise WeightsError(f"{trunk}: LPIPS AlexNet trunk not found")
    return (fetch_url(pin) if download else locate(pin)), pin.url


def resolve_pi3x(pins: Pins, weights: Path | None, baked: Path | None, download: bool) -> tuple[Path, str]:
    pin = pins.huggingface["pi3x"]
    found = _first(weights, baked / "pi3x" / PI3X_WEIGHTS if baked else None)
    if found is not None:
        return _verified(found, pin.sha256.get(PI3X_WEIGHTS), "Pi3X weights"), f"a local copy of {pin.label} (checked)"
    if weights is not None:
        raise WeightsError(f"{weights}: Pi3X weights not found")
    return _hf_file(pin, PI3X_WEIGHTS, download), pin.label


def bake(dest: Path, include_models: bool) -> None:
    """Copy the verified AlexNet trunk (and with ``include_models`` CLIP and Pi3X) into ``dest``."""
    pins = load_recipe_pins()
    dest.mkdir(parents=True, exist_ok=True)
    trunk = fetch_url(pins.urls["alexnet"])
    shutil.copyfile(trunk, dest / pins.urls["alexnet"].filename)
    if include_models:
        clip_root = Path(fetch_hf(pins.huggingface["clip"]))
        (dest / "clip").mkdir(exist_ok=True)
        for rel in (CLIP_CONFIG, CLIP_WEIGHTS):
            shutil.copyfile(clip_root / rel, dest / "clip" / rel)
        (dest / "pi3x").mkdir(exist_ok=True)
        shutil.copyfile(Path(fetch_hf(pins.huggingface["pi3x"])) / PI3X_WEIGHTS, dest / "pi3x" / PI3X_WEIGHTS)


def fetch(cfg: RunConfig) -> None:
    """``pinbench fetch remembench``: the release (id/revision from -o dataset=) and every weights file."""
    from pinbench_recipes.remembench.release import dataset_option, dataset_pin

    pins = load_recipe_pins()
    for label, pin in (("release", dataset_pin(*dataset_option(cfg.options))),
                       ("CLIP ViT-H/14", pins.huggingface["clip"]), ("Pi3X", pins.huggingface["pi3x"])):
        print(f"{label}: {fetch_hf(pin)} ({pin.label})")
    print(f"LPIPS AlexNet trunk: {fetch_url(pins.urls['alexnet'])}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pinbench_recipes.remembench.weights",
                                     description="bake pinned weights")
    sub = parser.add_subparsers(dest="command", required=True)
    bake_cmd = sub.add_parser("bake", help="download, verify and copy weights into DIR")
    bake_cmd.add_argument("dest", type=Path)
    bake_cmd.add_argument("--all", action="store_true", help="also CLIP ViT-H/14 and Pi3X (9 GB)")
    args = parser.parse_args(argv)
    bake(args.dest, include_models=args.all)
    print(f"baked weights into {args.dest}")


if __name__ == "__main__":
    main()
