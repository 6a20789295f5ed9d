"""Step 1 of the procedure: the pinned inputs, downloaded by ``pinbench fetch`` and located offline by ``run``.

``fetch`` (network; ``HF_TOKEN`` for the gated model and dataset) puts into the cache: the task list,
the dataset files of the selected tasks only (``--limit``), the evaluator weights (unless the evaluation
image already bakes them) and the chosen Cosmos3 checkpoint. ``locate_inputs`` finds the same files
without network and fails with one line saying what to fetch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pinbench.core.config import RunConfig
from pinbench.core.files import counted
from pinbench.core.findings import Finding
from pinbench.core.options import did_you_mean
from pinbench.core.pins import HFPin, Pins, load_pins
from pinbench.core.recipe import get_recipe
from pinbench.ops.downloads import NotFetchedError, PinMismatchError, fetch_hf, fetch_url, locate
from pinbench.ops.machine_pins import apply_machine_pins, machine_pins_for
from pinbench_recipes.paibench_c.evaluate import WEIGHT_PATHS, evaluator_from_env
from pinbench_recipes.paibench_c.rows import Task, load_tasks, select_tasks

CHECKPOINT_PINS = {"Cosmos3-Nano": "cosmos3_nano", "Cosmos3-Super": "cosmos3_super"}
EVALUATOR_URL_WEIGHTS = ("sam2_hiera_large", "dover", "video_depth_anything_small")
PINS_PATH = Path(__file__).resolve().parent / "pins.yaml"


@dataclass(frozen=True)
class Inputs:
    """Where the pinned inputs of one run are, in the cache."""

    tasks_json: Path
    tasks: list[Task]
    dataset_dir: Path
    checkpoint_dir: Path | None


def dataset_pin(pins: Pins, tasks: Sequence[Task] | None) -> HFPin:
    """The dataset pin, narrowed to exactly the files the selected tasks use (None: the pinned globs)."""
    pin = pins.huggingface["dataset"]
    if tasks is None:
        return pin
    files = []
    for task in tasks:
        files += [task.video_path, f"captions/{task.task_id}.json", task.depth_path, task.seg_path]
    return dataclasses.replace(pin, allow_patterns=files)


def model_pin(pins: Pins, checkpoint: str) -> HFPin:
    if checkpoint not in CHECKPOINT_PINS:
        raise ValueError(f"unknown checkpoint {checkpoint!r}{did_you_mean(checkpoint, list(CHECKPOINT_PINS))}; "
                         f"known: {', '.join(CHECKPOINT_PINS)}")
    return pins.huggingface[CHECKPOINT_PINS[checkpoint]]


def run_pins(pins: Pins, checkpoint: str, *, own_generator: bool) -> list[str]:
    """The pins a scored run read, for its provenance (``pins_for_provenance``): the upstream code, the task list,
    the dataset and the evaluator's weights always; cosmos-framework and the checkpoint's weights only when the
    rollouts are the recipe's own Cosmos3 (not a ``--generator``'s), and never the other checkpoint's."""
    used = [f"upstream/{name}" for name in pins.upstream if name != "cosmos_framework"]
    used += ["urls/tasks_json", "huggingface/dataset", "huggingface/grounding_dino_tiny"]
    used += [f"urls/{name}" for name in EVALUATOR_URL_WEIGHTS]
    if own_generator:
        used += ["upstream/cosmos_framework", f"huggingface/{CHECKPOINT_PINS[checkpoint]}"]
    return used


def _image_has_weights(pins: Pins) -> bool:
    evaluator = evaluator_from_env(pins.upstream["evaluator"].commit)
    return all((evaluator.root / rel).exists() for rel in WEIGHT_PATHS.values())


def effective_pins(cfg: RunConfig) -> Pins:
    """pins.yaml with this machine's resolved pins applied (the dataset revision a first fetch resolved)."""
    return apply_machine_pins(load_pins(PINS_PATH), machine_pins_for(get_recipe(cfg.recipe)))


def fetch(cfg: RunConfig) -> None:
    """Download every pinned input of this run into the cache (``pinbench fetch paibench-c``; the CLI has
    resolved the nulls of pins.yaml on this machine before this runs)."""
    pins = effective_pins(cfg)
    tasks = select_tasks(load_tasks(fetch_url(pins.urls["tasks_json"])), cfg.limit)
    fetch_hf(dataset_pin(pins, tasks if cfg.limit is not None else None))
    weights = cfg.options.evaluator_weights
    if weights == "on" or (weights == "auto" and not _image_has_weights(pins)):
        for name in EVALUATOR_URL_WEIGHTS:
            fetch_url(pins.urls[name])
        fetch_hf(pins.huggingface["grounding_dino_tiny"])
    if cfg.checkpoint in CHECKPOINT_PINS and cfg.options.model:
        fetch_hf(model_pin(pins, cfg.checkpoint))


def makes_cosmos3(cfg: RunConfig) -> bool:
    """The run makes its rollouts with Cosmos3 (not given with --skip-generation, not a --generator's, whose
    checkpoint is any name for your model): it needs the pinned weights and cosmos-framework."""
    return not cfg.skip_generation and cfg.generator is None


def locate_inputs(cfg: RunConfig, pins: Pins, *, need_model: bool) -> Inputs:
    """The cached inputs of this run, verified, without network (NotFetchedError says what to fetch)."""
    tasks_json = locate(pins.urls["tasks_json"])
    tasks = select_tasks(load_tasks(tasks_json), cfg.limit)
    dataset_dir = locate(dataset_pin(pins, tasks))  # every file of every selected task must be there
    checkpoint_dir = locate(model_pin(pins, cfg.checkpoint)) if need_model else None
    return Inputs(tasks_json=tasks_json, tasks=tasks, dataset_dir=dataset_dir, checkpoint_dir=checkpoint_dir)


def doctor(cfg: RunConfig, pins: Pins | None) -> list[Finding]:
    """``pinbench doctor paibench-c``: this run's pinned inputs in the cache, the installed generator and
    evaluator (local runtime; the images carry them otherwise), generated videos when only scoring, RAM."""
    from pinbench.core.findings import problem
    from pinbench.ops.doctor import hf_finding, pins_in_cache, video_findings

    if pins is None:
        return []
    needed = ["urls/tasks_json"]
    if makes_cosmos3(cfg):
        if cfg.checkpoint not in CHECKPOINT_PINS:
            return [problem("inputs", f"unknown checkpoint {cfg.checkpoint!r}"
                                      f"{did_you_mean(cfg.checkpoint, list(CHECKPOINT_PINS))}; "
                                      f"known: {', '.join(CHECKPOINT_PINS)}")]
        needed.append(f"huggingface/{CHECKPOINT_PINS[cfg.checkpoint]}")
    local = cfg.runtime == "local"
    if not cfg.skip_scoring and local and not _image_has_weights(pins):
        needed += [f"urls/{name}" for name in EVALUATOR_URL_WEIGHTS] + ["huggingface/grounding_dino_tiny"]
    findings = pins_in_cache(pins, needed)
    try:
        tasks = select_tasks(load_tasks(locate(pins.urls["tasks_json"])), cfg.limit)
    except (NotFetchedError, PinMismatchError):
        tasks = None   # reported by the tasks_json finding above
    findings.append(hf_finding("dataset", dataset_pin(pins, tasks)))   # every file of every selected task
    if local:
        findings += _installed(cfg, pins)
    if cfg.skip_generation and tasks is not None:
        for modality in cfg.options.modalities:
            folder = cfg.out_dir / modality / "videos"
            expected = {t.task_id: folder / f"{t.task_id}.mp4" for t in tasks}
            findings += video_findings({t: p if p.is_file() else None for t, p in expected.items()}, folder,
                                       f"{modality} videos", decoder=cfg.options.decoder)
    if not cfg.skip_scoring and tasks is not None:
        findings += _evaluator_ram(cfg, len(tasks))
    return findings


def _installed(cfg: RunConfig, pins: Pins) -> list[Finding]:
    """The cosmos-framework and evaluator checkouts a local run uses, at their pinned commits."""
    import os

    from pinbench.core.findings import ok, problem
    from pinbench_recipes.paibench_c.evaluate import EvaluationError, installed_commit

    findings = []
    if makes_cosmos3(cfg):
        framework = Path(os.environ.get("PAIBENCH_C_FRAMEWORK_DIR", "/opt/cosmos-framework"))
        found = installed_commit(framework, framework / ".pinbench-commit")
        expected = pins.upstream["cosmos_framework"].commit
        findings.append(ok("generator", f"cosmos-framework {expected[:12]} at {framework}") if found == expected else
                        problem("generator", f"{framework}: cosmos-framework is at {found or 'unknown'}, the pin is "
                                             f"{expected} (set PAIBENCH_C_FRAMEWORK_DIR, or --runtime docker)"))
    if not cfg.skip_scoring:
        evaluator = evaluator_from_env(pins.upstream["evaluator"].commit)
        try:
            evaluator.check()
            findings.append(ok("evaluator", f"{evaluator.root} at {evaluator.commit[:12]}"))
        except EvaluationError as exc:
            findings.append(problem("evaluator", f"{exc} (or --runtime docker)"))
    return findings


EVALUATOR_GB_PER_TASK = 1.0   # the fork's batching note: about 1 GB of RAM per task in flight per rank
EVALUATOR_DEFAULT_BATCH = 30


def _evaluator_ram(cfg: RunConfig, n_tasks: int) -> list[Finding]:
    import os

    from pinbench.core.findings import ok, problem
    from pinbench.ops.doctor import GB

    ranks = max(1, min(cfg.gpus, n_tasks))
    batch = cfg.options.eval_batch_size or EVALUATOR_DEFAULT_BATCH
    need = ranks * min(batch, -(-n_tasks // ranks)) * EVALUATOR_GB_PER_TASK
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GB
    if total < need:
        return [problem("ram", f"{total:.0f} GB of RAM; the evaluator needs about {need:.0f} GB "
                               f"({counted(ranks, 'rank')} x {batch} tasks x ~1 GB); lower -o eval_batch_size")]
    return [ok("ram", f"{total:.0f} GB of RAM (evaluator about {need:.0f} GB)")]
