"""``pinbench doctor mind``: the cached weights this run reads, and no others.

``process.py`` reads the three files it would ``wget`` and the DINOv3 snapshot from the pinbench cache; the
native cross-check reads the LPIPS AlexNet trunk. Importing a Result.json (``-o results=``) runs neither
``process.py`` nor, without rollouts, the native blocks, so it reads no weight. ViPE's own downloads are baked
into the image at build time (``weights.bake``), where their digests are checked, not in the cache.
"""

from __future__ import annotations

from pinbench.core.config import RunConfig
from pinbench.core.findings import Finding
from pinbench.core.pins import Pins
from pinbench.ops.doctor import pins_in_cache
from pinbench_recipes.mind.official import CACHE_WEIGHTS

DINO_PIN = "dinov3_vitb16"
LPIPS_PIN = "alexnet"


def pins_read(cfg: RunConfig) -> list[str]:
    """Labels (``urls/<name>``, ``huggingface/<name>``) of the cached pins this run reads."""
    if cfg.skip_scoring:
        return []
    options = cfg.options
    labels = []
    if options.results is None:
        labels += [f"urls/{name}" for name in CACHE_WEIGHTS] + [f"huggingface/{DINO_PIN}"]
    if options.native and options.videos is not None:
        labels.append(f"urls/{LPIPS_PIN}")
    return labels


def doctor(cfg: RunConfig, pins: Pins | None) -> list[Finding]:
    return pins_in_cache(pins, pins_read(cfg)) if pins is not None else []
