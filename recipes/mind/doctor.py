"""``pinbench doctor mind``: the layouts under ``-o gt`` and ``-o videos`` as the run's plan checks them, and the
cached weights this run reads, and no others.

``process.py`` reads the three files it would ``wget`` from the pinbench cache for ``visual`` only, the DINOv3
snapshot for ``dino`` only (``-o metrics=lcm`` reads neither); the native cross-check reads the LPIPS AlexNet
trunk. Importing a Result.json (``-o results=``) runs neither
``process.py`` nor, without rollouts, the native blocks, so it reads no weight. ViPE's own downloads are baked
into the image at build time (``weights.bake``), where their digests are checked, not in the cache.
"""

from __future__ import annotations

from pathlib import Path

from pinbench.core.config import RunConfig
from pinbench.core.files import counted, counted_of
from pinbench.core.findings import Finding, ok, problem
from pinbench.core.pins import Pins
from pinbench.ops.doctor import WAY_ON_BAD_INPUT, pins_in_cache
from pinbench_recipes.mind.layout import LayoutError
from pinbench_recipes.mind.official import cache_weights_read, reads_dino
from pinbench_recipes.mind.plan import make_plan
from pinbench_recipes.mind.weights import DINO_PIN

LPIPS_PIN = "alexnet"


def pins_read(cfg: RunConfig) -> list[str]:
    """Labels (``urls/<name>``, ``huggingface/<name>``) of the cached pins this run reads."""
    if cfg.skip_scoring:
        return []
    options = cfg.options
    labels = []
    if options.results is None:
        labels += [f"urls/{name}" for name in cache_weights_read(options.metrics)]
        labels += [f"huggingface/{DINO_PIN}"] if reads_dino(options.metrics) else []
    if options.native and (options.videos is not None or cfg.generator is not None or cfg.skip_generation):
        labels.append(f"urls/{LPIPS_PIN}")
    return labels


SHOWN = 5   # layout problems named, one line each; the rest counted
NO_VIDEO = ("has no generated video", "have no generated video")


def layout_findings(cfg: RunConfig) -> list[Finding]:
    """The run's plan (``make_plan``, on what run.py gives it) over ``-o gt`` and ``-o videos``: a layout problem
    stops the run once started, so the doctor names it first (it checked neither path). With ``--generator`` the
    rollouts are not made yet: the GT alone, as the run's requests check it."""
    options = cfg.options
    videos = Path(options.videos) if options.videos is not None and cfg.generator is None else None
    try:
        plan = make_plan(Path(options.gt), videos, metrics=options.metrics, video_max_time=options.video_max_time,
                         limit=cfg.limit)
    except LayoutError as exc:
        return [problem("inputs", str(exc))]
    findings = [problem("inputs", f"layout: {line}") for line in plan.problems[:SHOWN]]
    if len(plan.problems) > SHOWN:
        findings.append(problem("inputs", f"layout: {counted(len(plan.problems) - SHOWN, 'more problem')}; the run "
                                          "prints every one"))
    if plan.missing:
        shown = ", ".join(k.label for k in plan.missing[:SHOWN]) + (", ..." if len(plan.missing) > SHOWN else "")
        findings.append(problem("inputs", f"{counted_of(len(plan.missing), len(plan.samples), 'sample', NO_VIDEO)} "
                                          f"under {videos}: {shown}; {WAY_ON_BAD_INPUT}"))
    return findings or [ok("inputs", plan.plan_lines()[0])]


def doctor(cfg: RunConfig, pins: Pins | None) -> list[Finding]:
    return layout_findings(cfg) + (pins_in_cache(pins, pins_read(cfg)) if pins is not None else [])
