"""PAI-Bench-C with Cosmos3: fetch -> input rows -> generate -> score -> scorecard -> diff -> report.

``run(run)`` reads top to bottom as the procedure of the recipe README. Everything it reads was fetched
before (``pinbench fetch paibench-c``); finished work (generated videos, evaluated modalities, native
scores) is reused on a rerun only when it is valid for the same inputs. ``--fixture`` runs the same
procedure on CPU on the synthetic data of ``fixture.py``, with its test doubles in place of cosmos-framework
and the evaluator.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from huggingface_hub import constants as hf_constants

from pinbench.core.config import RecipeError, RunConfig, gpu_devices
from pinbench.core.files import counted
from pinbench.core.generation import Generator, Request
from pinbench.core.options import OptionValues, is_offline
from pinbench.core.pins import Pins
from pinbench.core.provenance import installed_distributions
from pinbench.core.run import NotGenerated, Run, RunOutcome
from pinbench.core.runner import SampleRecord
from pinbench.ops.machine_pins import pins_for_provenance
from pinbench_recipes.paibench_c import evaluate, fixture, requests
from pinbench_recipes.paibench_c.fetch import (
    Inputs,
    effective_pins,
    locate_inputs,
    makes_cosmos3,
    model_pin,
    run_pins,
)
from pinbench_recipes.paibench_c.generate import (
    MIN_FRAMES,
    SOURCES_FILE,
    Collected,
    Cosmos3,
    CosmosFrameworkGenerator,
    ValidityCache,
    collect_videos,
    processor_source,
    record_processor,
)
from pinbench_recipes.paibench_c.metrics_json import ModalityMetrics
from pinbench_recipes.paibench_c.native_metrics import NativeTask, native_sample, seg_pkls
from pinbench_recipes.paibench_c.results import ScoredTask, cross_check, evaluated, metric_specs, task_result

NATIVE_VERSION = 1   # bump when the native cross-check changes, so stored native scores are recomputed
FRAMEWORK_STAMP = ".pinbench-commit"   # written by Dockerfile.generate into the framework checkout


def gpu_ids(cfg: RunConfig) -> list[str]:
    """The devices of ``--gpus`` as the generator and the evaluator address them (``core.config.gpu_devices``)."""
    devices = gpu_devices(cfg.gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))
    return [str(i) for i in range(devices)] if isinstance(devices, int) else devices


def _of_modality(by_request: Mapping[str, str], modality: str) -> dict[str, str]:
    """The reasons of ``by_request`` (by request id, ``<modality>.<task>``) of one modality, by task."""
    return {rid.partition(".")[2]: why for rid, why in by_request.items() if rid.startswith(f"{modality}.")}


def run(run: Run) -> RunOutcome:
    """The recipe: fetched inputs -> rows -> generation -> evaluator -> counts + cross-check -> diff."""
    cfg, options = run.cfg, run.options
    pins = None if cfg.fixture else effective_pins(cfg)   # None: --fixture, which has no pinned inputs
    min_frames = fixture.N_FRAMES if cfg.fixture else MIN_FRAMES   # a valid video has at least this many frames
    cfg.out_dir.mkdir(parents=True, exist_ok=True)

    # 1. Fetch: the pinned inputs must already be in the cache; nothing is downloaded here. The fixture
    #    writes its synthetic dataset, in the real layout, instead.
    with run.step("prepare"):
        inputs = (run.fixture(partial(fixture.fixture_inputs, limit=cfg.limit))
                  or locate_inputs(cfg, pins, need_model=makes_cosmos3(cfg)))
        task_ids = [t.task_id for t in inputs.tasks]

    # 2. Generate, one request per task and modality (the seed's settings, as cosmos-framework rows): with
    #    --generator, else Cosmos3 through cosmos-framework (the fixture: its test double); each rollout checked
    #    against its request. A generation shard, or a --skip-scoring run, ends here.
    with run.step("generate"):
        with run.digests() as digests:
            asked = requests.build(inputs.tasks, options.modalities, inputs.dataset_dir, root=run.requests_root,
                                   digests=digests, frames=min_frames,
                                   size=fixture.PRED_SIZE[::-1] if cfg.fixture else None)
        rollouts = run.generate(asked, default=partial(own_generator, run, pins, inputs))
        # who made them: with --skip-generation the earlier run that stored them, a --generator's say, not Cosmos3
        own_made = run.generation is not None and run.generation.generator == run.recipe.own_generator
        problems = [] if pins is None or not own_made else record_tokenizer(run, pins, rollouts)
        if run.generation_failures:
            sid, why = next(iter(run.generation_failures.items()))
            problems.append(f"{counted(len(run.generation_failures), 'rollout')} failed (e.g. {sid}: {why})")

    # 3. Score every modality with the pinned evaluator (the fixture: its test double), GT seg/depth computed
    #    once and reused by later modalities.
    with run.step("score"):
        validity = ValidityCache(cfg.out_dir / "validity_cache.json")
        # the digests the generation step took of its rollouts (a shard never collects: --shard needs --skip-scoring)
        with run.digests() as digests:
            collected = {m: collect_videos(task_ids, rollouts / m, cfg.out_dir / m / "videos", digests, min_frames,
                                           cache=validity, failures=_of_modality(run.generation_failures, m),
                                           never=_of_modality(run.never_generated, m))
                         for m in options.modalities}
        validity.save()
        evaluator, weights, gt = prepare_evaluator(cfg, pins, inputs)
        with run.digests() as digests:
            scored = [ScoredTask(t.task_id, {m: collected[m][t.task_id].sha256 for m in options.modalities},
                                 gt={"video": digests.key(inputs.dataset_dir / t.video_path, inputs.dataset_dir),
                                     "caption": digests.key(inputs.dataset_dir / "captions" / f"{t.task_id}.json",
                                                            inputs.dataset_dir)},
                                 options={"gt": options.gt, "gt_key": gt.key, "native": options.native,
                                          "decoder": options.decoder})
                      for t in inputs.tasks]
        # a task whose record another run directory kept in the sample cache (same videos, GT, options and code)
        # is neither evaluated nor cross-checked again: a second --out evaluated every video once per modality.
        # Not under gt=force: it asks for the GT computed again, which the cross-check's seg arithmetic then reads
        held = run.pending(scored, validate=evaluated, cache=options.gt == "reuse")
        cached = {t.sample_id for t in held.cached}
        # only these are evaluated and cross-checked: each task's values are its own (spec 1.5; the evaluator's
        # global mean is not read), so the others' records stand, from this directory or another's (the cache)
        fresh = [t.sample_id for t in held.mine]
        if cached:
            print(f"evaluator: {counted(len(task_ids), 'task')}: {len(cached)} reused from the sample cache (an "
                  f"earlier run's evaluation and cross-check), {len(fresh)} to evaluate", file=sys.stderr, flush=True)
        evaluation = (evaluate.score_all(cfg, evaluator, gt, collected, fresh, gpu_ids(cfg)) if fresh
                      else evaluate.Evaluation({}, {}))
        modality_errors = evaluation.errors

    # 4. metrics.json -> per-task values with counts (never the evaluator's global mean), native cross-check.
    with run.step("score"):
        parsed = (evaluate.parse_all(cfg.out_dir, options.modalities, fresh, modality_errors, evaluator.metrics)
                  if fresh else dict.fromkeys(options.modalities))
    with run.step("native"):
        native = native_all(run, inputs, gt, collected, parsed, fresh) if options.native and fresh else {}

    # 5. Scorecard, diff against the reference for this checkpoint and mode, report.
    requested = {t: [f"{m}.{t}" for m in options.modalities] for t in task_ids}
    results = {t: task_result(t, evaluator=parsed, modality_errors=modality_errors,
                              native=native[t].result if t in native else None,
                              never={m: why for m, r in zip(options.modalities, requested[t], strict=True)
                                     for why in [run.never_generated.get(r)] if why})
               for t in fresh}
    # a task's seconds: its share of each modality's evaluation and its cross-check's
    seconds = {t: took + (native[t].seconds if t in native else 0.0) for t, took in evaluation.seconds.items()}
    not_made: dict[str, NotGenerated] = {}
    for t in task_ids:   # a task none of whose rollouts was generated fails, with the generation's reason
        why = [run.generation_failures.get(r) for r in requested[t]]
        if all(why):
            not_made[t] = NotGenerated(why[0])
    # a task none of whose rollouts any run generated (its generation shard never ran, a --limit short of it) counts
    # missing, as MIND's and RememBench's samples do (Run.store)
    records = run.store(scored, {**results, **not_made}, label="scorecard", requests=requested, pending=held,
                        seconds=seconds)
    stored = {r.sample_id: r.result for r in records if r.ok and r.result is not None}
    extra = {
        "cross_check": cross_check(options.modalities, stored) if options.native else None,
        # the evaluator's own means over the tasks this run evaluated, named with them: the tasks whose records came
        # from the sample cache or this directory's store were scored by an earlier evaluation, so these were
        # figures over 2 of 4 tasks shown as the run's (the scorecard's metrics are over every task)
        "evaluator_global": {
            "covers": f"{len(fresh)} of {counted(len(task_ids), 'task')} (the ones this run evaluated)",
            "tasks": fresh,
            "by_modality": {m: p.evaluator_global for m, p in parsed.items() if p is not None}} if fresh else {},
        "from_sample_cache": sorted(cached),
        "evaluator_unexpected": {m: p.unexpected for m, p in parsed.items() if p is not None and p.unexpected},
        "modality_errors": modality_errors,
        "problems": problems,
        "modalities": list(options.modalities),
        "options": {"gt": options.gt, "launch": options.launch, "native": options.native,
                    "decoder": options.decoder},
    }
    if pins is None:
        extra["test_doubles"] = {"generator": fixture.PerturbedCopyGenerator().describe(),
                                 "evaluator": evaluator.describe()}
    disagreements = [f"{name}: {c['n_disagree']}/{c['n_compared']} tasks differ from the native recomputation "
                     f"by more than {c['tolerance']:g} (max {c['max_abs_diff']:.3g})"
                     for name, c in (extra["cross_check"] or {}).items() if c["n_disagree"]]
    sources = cfg.out_dir / SOURCES_FILE
    provenance_extra: dict[str, Any] = {"gt_cache": gt.summary(), "gt_policy": options.gt, "evaluator_weights": weights,
                        "evaluator": evaluator.describe(), "dataset_dir": run.recorded_path(inputs.dataset_dir),
                        "generation_processor": json.loads(sources.read_text(encoding="utf-8"))["processor"]
                        if sources.is_file() else None}
    if pins is None:
        provenance_extra["fixture_version"] = fixture.FIXTURE_VERSION
    specs = metric_specs(options.modalities, native=options.native, native_seg=native_seg_modalities(options, gt),
                         evaluated=evaluator.metrics)
    seeds = {"fixture": fixture.SEED} if pins is None else {
        "generation": sorted({t.seed for t in inputs.tasks}),
        "evaluator": "DOVER and SAM2 point sampling seeded by the fork"}
    recorded = None if pins is None else pins_for_provenance(pins, run_pins(pins, cfg.checkpoint,
                                                                           own_generator=own_made))
    outcome = run.finish(specs, records, pins=recorded, seeds=seeds, extra=extra, provenance=provenance_extra)
    # Reported, not a failure: the evaluator's numbers are the benchmark's; a disagreement points at a
    # decoder or library difference worth a look (README, "Native cross-check").
    for line in disagreements:
        print(f"cross-check: {line}", file=sys.stderr)
    outcome.message = "\n".join([outcome.message, *(f"cross-check: {line}" for line in disagreements)])
    return outcome


# --------------------------------------------------------------------------------------- the steps


def run_requests(run: Run, root: Path) -> list[Request]:
    """``pinbench requests paibench-c``: every task's request in every modality, the files they name under ``root``."""
    cfg = run.cfg
    pins = None if cfg.fixture else effective_pins(cfg)
    inputs = run.fixture(partial(fixture.fixture_inputs, limit=cfg.limit)) or locate_inputs(cfg, pins,
                                                                                             need_model=False)
    with run.digests() as digests:
        return requests.build(inputs.tasks, run.options.modalities, inputs.dataset_dir, root=root, digests=digests,
                              frames=fixture.N_FRAMES if cfg.fixture else MIN_FRAMES,
                              size=fixture.PRED_SIZE[::-1] if cfg.fixture else None)


def own_generator(run: Run, pins: Pins | None, inputs: Inputs) -> Generator:
    """The recipe's own generator: Cosmos3 through the pinned cosmos-framework on this run's GPUs (``pins`` None,
    ``--fixture``: the fixture's test double)."""
    if pins is None:
        return fixture.PerturbedCopyGenerator()
    framework_dir = Path(os.environ.get("PAIBENCH_C_FRAMEWORK_DIR", "/opt/cosmos-framework"))
    python = Path(os.environ.get("PAIBENCH_C_FRAMEWORK_PYTHON", str(framework_dir / ".venv" / "bin" / "python")))
    expected = pins.upstream["cosmos_framework"].commit
    found = evaluate.installed_commit(framework_dir, framework_dir / FRAMEWORK_STAMP)
    if found != expected:
        raise RecipeError(f"{framework_dir}: cosmos-framework is at {found or 'unknown'}, the pin is {expected} "
                          "(set PAIBENCH_C_FRAMEWORK_DIR, or use the generation image)")
    assert inputs.checkpoint_dir is not None
    model = model_pin(pins, run.cfg.checkpoint)
    return Cosmos3(CosmosFrameworkGenerator(framework_dir=framework_dir, python=python,
                                            checkpoint_dir=inputs.checkpoint_dir, gpu_ids=gpu_ids(run.cfg),
                                            launch=run.options.launch, offline=run.cfg.offline or is_offline()),
                   model=f"{model.repo_id} through cosmos-framework {expected}", weights=str(model.revision))


def record_tokenizer(run: Run, pins: Pins, rollouts: Path) -> list[str]:
    """Which VLM tokenizer cosmos-framework used (the pinned snapshot's own files, or ``main`` of the hub repo),
    kept beside the run; a line when an earlier generation in this folder used another."""
    model = model_pin(pins, run.cfg.checkpoint)
    logs = sorted(rollouts.glob("*/logs/*.log"))
    changed = record_processor(run.out_dir, processor_source(logs, model.repo_id, str(model.revision),
                                                             Path(hf_constants.HF_HUB_CACHE)))
    return [changed] if changed else []


def prepare_evaluator(cfg: RunConfig, pins: Pins | None, inputs: Inputs) -> tuple[evaluate.EvaluatorLike,
                                                                                  dict[str, str], evaluate.GTCache]:
    """The pinned evaluator and its verified weights (``pins`` None: the fixture's test double, no weights),
    and this run's GT work directory."""
    evaluator: evaluate.EvaluatorLike
    if pins is None:
        evaluator, weights, dataset_revision = fixture.EvaluatorDouble(), {}, f"fixture-{fixture.FIXTURE_VERSION}"
    else:
        installed = evaluate.evaluator_from_env(pins.upstream["evaluator"].commit)
        installed.check()
        weights = evaluate.ensure_weights(installed, pins.urls, pins.huggingface["grounding_dino_tiny"])
        evaluator, dataset_revision = installed, pins.huggingface["dataset"].revision
    dists = hashlib.sha256("\n".join(installed_distributions()).encode()).hexdigest()
    build = os.environ.get("PINBENCH_IMAGE_DIGEST") or f"local:{dists}"
    key = evaluate.gt_cache_key(dataset_revision=dataset_revision, evaluator_commit=evaluator.commit, build=build)
    gt = evaluate.GTCache(cfg.out_dir / "gt" / key, key)
    gt.prepare(inputs.dataset_dir)
    return evaluator, weights, gt


def _native_batch(workers: int, sample: Callable[[Mapping[str, Any]], dict[str, Any]]):  # noqa: ANN202 (a closure)
    def batch(tasks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        with ProcessPoolExecutor(max_workers=min(workers, len(tasks))) as pool:
            return list(pool.map(sample, tasks))
    return batch


def native_seg_modalities(options: OptionValues, gt: evaluate.GTCache) -> list[str]:
    """Modalities whose seg arithmetic can be cross-checked against the GT masks on disk.

    Under ``gt=force`` every modality recomputed the GT masks, so only the last one's are still there:
    the others are not cross-checked rather than compared against another modality's GT.
    """
    if options.gt == "reuse":
        return list(options.modalities)
    return [m for m in gt.summary()["computed_in"][-1:] if m in options.modalities]


def native_all(run: Run, inputs: Inputs, gt: evaluate.GTCache,
               collected: Mapping[str, Mapping[str, Collected]],
               parsed: Mapping[str, ModalityMetrics | None], task_ids: Collection[str]) -> dict[str, SampleRecord]:
    """The CPU cross-check of the tasks ``task_ids`` (resumable under ``native/``): Canny, blur SSIM, seg
    arithmetic; the ok records, by task."""
    options = run.options
    seg_modalities = native_seg_modalities(options, gt)
    run_dir = run.out_dir
    tasks = []
    with run.digests() as digests:
        for task in (t for t in inputs.tasks if t.task_id in task_ids):
            preds, seg, shas = {}, {}, {}
            for modality in options.modalities:
                c = collected[modality][task.task_id]
                if not (c.ok and c.sha256):
                    continue
                preds[modality] = f"{modality}/videos/{task.task_id}.mp4"   # under the run directory
                shas[modality] = c.sha256
                pkls = seg_pkls(task.task_id, modality, gt_dir=gt.root, run_dir=run_dir)
                if modality in seg_modalities and parsed.get(modality) is not None and all(p.is_file() for p in pkls):
                    seg[modality] = [evaluate.sha256_file(p) for p in pkls]
            tasks.append(NativeTask(
                sample_id=task.task_id, gt_video=digests.key(inputs.dataset_dir / task.video_path, inputs.dataset_dir),
                preds=preds, pred_sha256=shas, native_version=NATIVE_VERSION, decoder=options.decoder, seg_sha256=seg))
    workers = options.native_workers
    sample = partial(native_sample, dataset_dir=inputs.dataset_dir, run_dir=run_dir, gt_dir=gt.root)
    summary = run.compute(tasks, sample, folder="native", label="native cross-check", batch_size=max(1, workers),
                          batch_fn=_native_batch(workers, sample) if workers > 1 else None)
    return {sid: rec for sid, rec in summary.records.items() if rec.ok and rec.result is not None}
