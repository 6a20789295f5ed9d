"""Everything a run needs before scoring: options, the list of videos, the flow estimator, tasks.

Kept apart from ``run.py`` so that the entry procedure reads top to bottom in a few lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pinbench.core.config import RecipeError, RunConfig
from pinbench.core.findings import Finding
from pinbench.core.inputs import VIDEO_SUFFIXES, InputDigests, InputFile, input_tasks, list_inputs, sample_ids
from pinbench.core.options import OptionValues, is_offline
from pinbench.core.pins import Pins, PinsError, load_pins
from pinbench.core.recipe import get_recipe
from pinbench.media.video import VideoInfo, misnamed
from pinbench.ops.downloads import FetchError, NotFetchedError, PinMismatchError, fetch_url, locate
from pinbench.ops.machine_pins import MachinePinsError, apply_machine_pins, machine_pins_for, resolve
from pinbench.ops.machine_pins import pins_for_provenance as effective_pins_data
from pinbench.ops.network import NEXT, fetch_command, ways_on
from pinbench_recipes.dynamic_degree.flow import (
    FarnebackPreview,
    FlowEstimator,
    RaftThings,
    WeightsError,
    weights_file_problem,
)
from pinbench_recipes.dynamic_degree.motion import ClipSource, VideoTask, unscorable

WEIGHTS_PIN = "raft_things"
WEIGHTS_ENV = "PINBENCH_RAFT_WEIGHTS"  # the raft_weights option's environment twin (recipe.yaml)
_LOOP_ID = re.compile(r"(?:^|__)memory-(yaw_loop_360|yaw_loop_180|dolly_loop|square_loop|palindrome_loop|"
                      r"double_yaw_loop)-")


def clip_source(options: OptionValues) -> ClipSource:
    """How each clip is decoded before scoring (the re-encode round trip, its CRF, the decoder)."""
    return ClipSource(reencode=options.clip_reencode, crf=options.reencode_crf, decoder=options.decoder)


def local_sha256(options: OptionValues) -> str | None:
    """``-o raft_sha256`` in lowercase, as digests are compared (its declared pattern admits either case)."""
    return options.raft_sha256.lower() if options.raft_sha256 else None


# ------------------------------------------------------------------------------------------- videos


def list_videos(root: Path) -> list[InputFile]:
    """Every entry under ``root`` named like a video (``pinbench.core.inputs``: each one a sample, problems too)."""
    return list_inputs(root, VIDEO_SUFFIXES, what="videos")


def loop_family(sample: str) -> str | None:
    """The memory-loop family in an id like ``memory-yaw_loop_360-memory_pool_479``, if any."""
    match = _LOOP_ID.search(sample)
    return match.group(1) if match else None


def video_tasks(root: Path, videos: list[InputFile], *, flow: dict[str, Any], source: ClipSource,
                recipe_version: str, digests: InputDigests) -> list[VideoTask]:
    """One task per video (``input_tasks``: its path under ``root``, size and SHA-256, so an edited video
    recomputes and the same videos under another root do not); so does any flow change."""
    return input_tasks(root, videos, digests=digests, make=VideoTask, flow=flow, clip_source=source.describe(),
                       recipe_version=recipe_version)


# ---------------------------------------------------------------------------------------- estimator


@dataclass(frozen=True)
class EstimatorSpec:
    """What is needed to build the flow estimator again, e.g. in a worker process on another GPU."""

    flow: str
    weights: Path | None = None
    sha256: str | None = None
    device: str = "auto"
    batch_size: int | None = None

    def build(self, device: str | None = None) -> FlowEstimator:
        if self.flow == "farneback":
            return FarnebackPreview(batch_size=self.batch_size or 16)
        if self.weights is None:
            raise RecipeError("RAFT needs a weights file")
        try:
            return RaftThings(self.weights, sha256=self.sha256, device=device or self.device,
                              batch_size=self.batch_size or 8)
        except WeightsError as exc:
            raise RecipeError(str(exc)) from None


def estimator_spec(cfg: RunConfig, pins_path: Path) -> EstimatorSpec:
    """The preview estimator, or RAFT with its weights located (RecipeError when they are not there)."""
    options = cfg.options
    if options.flow == "farneback":
        return EstimatorSpec("farneback", batch_size=options.batch_size)
    weights, sha256 = raft_weights(cfg, pins_path)
    return EstimatorSpec("raft", weights, sha256, options.device, options.batch_size)


def worker_devices(cfg: RunConfig, spec: EstimatorSpec) -> list[str]:
    """One CUDA device per worker when RAFT may use several GPUs (``--gpus N``; in a shard, each worker takes a part
    of it)."""
    if spec.flow != "raft" or cfg.gpus <= 1 or spec.device not in ("auto", "cuda"):
        return []
    import torch

    count = min(cfg.gpus, torch.cuda.device_count()) if torch.cuda.is_available() else 0
    return [f"cuda:{i}" for i in range(count)] if count > 1 else []


def _effective_pins(pins_path: Path, recipe_name: str) -> Pins:
    """pins.yaml with this machine's resolved pins applied (the full SHA-256 a first fetch recorded)."""
    try:
        return apply_machine_pins(load_pins(pins_path), machine_pins_for(get_recipe(recipe_name)))
    except (PinsError, MachinePinsError) as exc:
        raise RecipeError(str(exc)) from None


def raft_weights(cfg: RunConfig, pins_path: Path) -> tuple[Path, str]:
    """(weights file, expected sha256): the local override, else the pinned file from the cache.

    The official metric never runs on weights without a full SHA-256. pins.yaml gives one, or only the
    8-hex prefix torchvision puts in the file name: then the first connected run (or ``pinbench fetch``)
    downloads the file, checks the prefix, and records the full SHA-256 in this machine's resolved pins, which
    every later run verifies against (provenance marks it "resolved at run time"). ``-o raft_weights=FILE``
    needs ``-o raft_sha256=HEX``. Offline, anything not fetched is an error naming ``pinbench fetch``.
    """
    options = cfg.options
    if options.raft_weights is not None:
        sha256 = local_sha256(options)
        if sha256 is None:
            raise RecipeError(f"{options.raft_weights}: RAFT weights need their SHA-256 (-o raft_sha256=<hex>); "
                              "the official metric never runs on unverified weights")
        return options.raft_weights, sha256
    offline = cfg.offline or is_offline()
    pins = _effective_pins(pins_path, cfg.recipe)
    pin = pins.urls.get(WEIGHTS_PIN)
    if pin is None:
        raise RecipeError(f"{pins_path}: no urls.{WEIGHTS_PIN} pin")
    try:
        if not pin.sha256:
            if not pin.verifiable:
                raise RecipeError(f"{pins_path}: urls.{WEIGHTS_PIN} pins no content (no sha256, sha256_prefix or "
                                  "git_blob); the official metric never runs on unverified weights")
            if offline:
                raise RecipeError(f"{pin.url}: its full SHA-256 is not recorded on this machine yet "
                                  f"(`{fetch_command(cfg.recipe)}` checks the pinned prefix and records the full hash "
                                  f"for this machine){NEXT}{ways_on(cfg.recipe, f'urls/{WEIGHTS_PIN}')} (with "
                                  "-o raft_sha256=HEX)")
            resolve(load_pins(pins_path), machine_pins_for(get_recipe(cfg.recipe)))
            pin = _effective_pins(pins_path, cfg.recipe).urls[WEIGHTS_PIN]
        try:
            return locate(pin), str(pin.sha256)
        except NotFetchedError:
            if offline:
                raise
            return fetch_url(pin), str(pin.sha256)
    except (NotFetchedError, FetchError, PinMismatchError) as exc:
        raise RecipeError(str(exc)) from None


def pins_for_provenance(pins_path: Path, estimator: FlowEstimator, options: OptionValues,
                        recipe_name: str = "dynamic-degree") -> dict[str, Any]:
    """The pins this run actually used: no weights pin for a preview run, the local file if overridden."""
    loaded = _effective_pins(pins_path, recipe_name)
    used = [f"upstream/{name}" for name in loaded.upstream]
    local = estimator.official and options.raft_weights is not None
    if estimator.official and not local:
        used.append(f"urls/{WEIGHTS_PIN}")
    pins = effective_pins_data(loaded, used)
    if local:
        pins["urls"] = {WEIGHTS_PIN: {"url": options.raft_weights.resolve().as_uri(), "sha256": local_sha256(options)}}
    return pins


def fetch(cfg: RunConfig) -> None:
    """``pinbench fetch dynamic-degree``: download the pinned RAFT-things weights into the cache; nothing for the
    Farneback preview, which needs none (its fetch stage under ``--runtime docker`` had tried the download, and
    failed without a network)."""
    options = cfg.options
    if options.flow == "farneback":
        print("dynamic-degree: -o flow=farneback (the CPU preview) uses no weights; nothing to fetch")
        return
    if options.raft_weights is not None:
        print(f"dynamic-degree: using local weights {options.raft_weights}; nothing to fetch")
        return
    recipe = get_recipe(cfg.recipe)
    try:
        pin = _effective_pins(recipe.pins_path, recipe.name).urls[WEIGHTS_PIN]
        path = fetch_url(pin)
    except (KeyError, FetchError, PinMismatchError, NotFetchedError) as exc:
        raise RecipeError(f"fetching RAFT weights failed: {exc}") from None
    print(f"dynamic-degree: RAFT-things weights at {path}")


def doctor(cfg: RunConfig, pins: Pins | None) -> list[Finding]:
    """``pinbench doctor dynamic-degree``: every video under -o videos decodes, the RAFT weights are usable."""
    from pinbench.core.findings import ok, problem
    from pinbench.ops.doctor import Unusable, url_finding, video_findings
    from pinbench_recipes.dynamic_degree.estimate import cpu_time_finding

    decoded: list[VideoInfo] = []   # the facts of each video whose first frame decodes, for the CPU-time estimate

    def too_short(info: VideoInfo) -> Unusable | None:
        """What scoring refuses, said first: a container its extension does not name (``misnamed``; it passed the
        doctor, then its sample failed), or no clip with 2 sampled frames, by the frame count of the container read
        for the doctor's first-frame decode (or its packets counted where it does not say)."""
        if (why := misnamed(info)) is not None:
            return Unusable("misnamed", why)
        decoded.append(info)
        short = unscorable(info)
        return Unusable("too short", short) if short else None

    options = cfg.options
    findings: list[Finding] = []
    if options.videos is not None:
        try:
            videos = list_videos(options.videos)[: cfg.limit]
            expected, reasons = {}, {}
            for video, (sid, name_problem) in zip(videos, sample_ids(options.videos, videos), strict=True):
                expected[sid] = video.path
                if name_problem or video.problem:  # each would fail as its sample: say so now
                    reasons[video.path] = Unusable("bad name" if name_problem else str(video.kind),
                                                   str(name_problem or video.problem))   # the line names the file
            findings += video_findings(expected, options.videos, decoder=options.decoder, known=reasons,
                                       check=too_short)
            slow = cpu_time_finding(sorted(decoded, key=lambda info: info.path), flow=options.flow,
                                    device=options.device)   # in one order: the float sums are the same each time
            findings += [slow] if slow else []
        except RecipeError as exc:   # no videos at all: one line, and the weights are still checked
            findings.append(problem("inputs", str(exc)))
    if options.flow != "raft":
        return findings
    if options.raft_weights is not None:
        if (missing := weights_file_problem(options.raft_weights)) is not None:
            return [*findings, problem("cache", missing)]
        if not options.raft_sha256:
            return [*findings, problem("cache", f"{options.raft_weights}: needs -o raft_sha256=<hex>")]
        return [*findings, ok("cache", f"local RAFT weights {options.raft_weights} (checked when loaded)")]
    if pins is not None and WEIGHTS_PIN in pins.urls:
        findings.append(url_finding(WEIGHTS_PIN, pins.urls[WEIGHTS_PIN]))
    return findings
