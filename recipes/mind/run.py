"""MIND, top to bottom: the plan -> official scores -> native cross-check -> per-sample results -> scorecard.

The recipe scores rollouts a world model already generated (``-o videos=DIR`` in MIND's generated layout)
against MIND-Data (``-o gt=DIR``) with the official ``process.py``; ``-o results=FILE`` imports a Result.json
produced elsewhere instead. ``--fixture`` runs the same procedure on CPU on synthetic data, with a test
double in place of the GPU-only ``process.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from pinbench.core.config import RecipeError
from pinbench.core.files import counted, sha256_file, write_if_changed
from pinbench.core.generation import Request
from pinbench.core.notices import notice
from pinbench.core.pins import Pins
from pinbench.core.run import Run, RunOutcome
from pinbench.core.runner import input_hash
from pinbench.core.sample_cache import MIN_SECONDS
from pinbench.media.lpips import load_lpips
from pinbench.ops.downloads import ChecksumError, NotFetchedError, UnresolvedPinError
from pinbench.ops.machine_pins import pins_for_provenance
from pinbench_recipes.mind import fixture, requests, steps
from pinbench_recipes.mind.ingest import OFFICIAL_CANVAS
from pinbench_recipes.mind.layout import LayoutError, key_from_sample_id
from pinbench_recipes.mind.official import OfficialRunError, Runtime
from pinbench_recipes.mind.plan import Plan, make_plan
from pinbench_recipes.mind.results import ResultFile, ResultFileError, load_result_file, results_option
from pinbench_recipes.mind.scoring import (
    cross_check_summary,
    metric_specs,
    official_failed_native_scored,
    suite_record,
)
from pinbench_recipes.mind.weights import lpips_trunk, recipe_pins, run_pins, runtime_from_env


def run(run: Run) -> RunOutcome:
    """The recipe (see the module doc); a partial run exits non-zero and is never diffed as complete.

    ``--shard I/N`` scores the samples at plan positions I, I+N, ... (steps 2-4) and stores them; the run that
    writes the scorecard is an unsharded one over the same directory, which with ``--skip-scoring`` scores
    nothing and merges what the shards stored (a sample no shard stored is failed by name).
    """
    options, cfg = run.options, run.cfg
    metrics, video_max_time = options.metrics, options.video_max_time
    pins = recipe_pins()
    try:
        # 1. The plan: the layouts, every file process.py reads, one line per problem; then what is scored.
        with run.step("prepare"):
            data = run.fixture(fixture.build_fixture)
            # required (gt) and required unless results (videos): recipe.yaml, checked when parsed
            gt_root, videos, results_file = ((data.gt_root, data.generated_root, None) if data else
                                             (options.gt, options.videos, options.results and
                                              results_option(options.results)))
        # 2. Generate, with --generator: the continuations of the GT samples (its rollouts replace -o videos); with
        #    --skip-generation, those an earlier generating run stored, each checked against its request.
        if run.scores_generated:
            with run.step("generate"):
                asked = plan_requests(run, Path(gt_root), run.requests_root)
                videos = run.generate(asked)
                requests.generated_layout(videos, asked, metrics)
        with run.step("prepare"):
            pre = checked(make_plan(Path(gt_root), Path(videos) if videos else None, metrics=metrics,
                                    video_max_time=video_max_time, limit=cfg.limit,
                                    not_generated=run.generation_failures))
            print("\n".join(pre.plan_lines()), flush=True)
            versions = {"recipe": run.recipe.version, "mind": pins.upstream["mind"].commit,
                        "vipe": pins.upstream["vipe"].commit,
                        "native": steps.NATIVE_VERSION if options.native else "off"}
            result_file = None
            if results_file is not None:
                versions["results_sha256"] = sha256_file(Path(results_file))
                result_file = load_result_file(Path(results_file))
            with run.digests() as digests:
                tasks = [steps.sample_task(s, metrics=metrics, video_max_time=video_max_time, versions=versions,
                                           digests=digests) for s in pre.samples]
            if result_file is not None and pre.generated_root is None and "gsc" in metrics:
                room = None if cfg.limit is None else max(0, cfg.limit - len(tasks))
                tasks += steps.mirror_tasks(result_file, versions=versions)[:room]

        # 3. Official scores of every sample not already scored: an imported Result.json, else process.py
        #    (on GPUs; the CPU test double under --fixture) from a working directory laid out for exactly them.
        #    Both steps say what they do once they take more than a moment: a log (CI) was silent for 20 s.
        with run.step("official"), notice(f"mind: official scores ({'the --fixture stand-in for ' if data else ''}"
                                          "process.py, or what an earlier invocation left)"):
            official = _official(run, pre, tasks, result_file, results_file, data, pins)

        # 4. Native cross-check: LCM and GSC recomputed from the same frames, beside the official numbers.
        with run.step("native"), notice("mind: native cross-check (LPIPS loaded, LCM and GSC recomputed)"):
            native = _native(run, pre, data, pins) if options.native and pre.generated_root is not None else {}

        # 5. Per-sample results: the official values, the native ones beside them, failures named, never dropped.
        with run.step("score"):
            by_id = {s.key.sample_id: s for s in pre.samples}

            def result_of(task: steps.SampleTask) -> dict[str, Any]:
                sample_id = task.sample_id
                return steps.sample_result(by_id.get(sample_id), official.samples[sample_id],
                                           native.get(sample_id), metrics=metrics, video_max_time=video_max_time)

            # min_seconds=0: a record assembles in a millisecond what the official step took hours for; kept in
            # the sample cache, another run directory's ``run.pending`` finds it and runs no official step for it
            # (an imported file's scores take a moment: kept as any record)
            records = run.score(tasks, result_of, label="results", progress=False,
                                min_seconds=0 if results_file is None else MIN_SECONDS)
    except (LayoutError, ResultFileError, OfficialRunError) as exc:
        raise RecipeError(str(exc)) from None

    # 6. WorldFoundry's derived numbers from every sample's record (a derived record, never a sample), scorecard.
    with run.step("score"):
        results = {r.sample_id: r.result for r in records if r.ok and r.result is not None}
        suite = suite_record(records)
    keys = [key_from_sample_id(t.sample_id) for t in tasks]
    extra = {
        "plan": pre.plan_lines(),
        "official_sources": official.sources,
        "cross_check": cross_check_summary(results, metrics),
        "official_failed_native_scored": official_failed_native_scored(
            {r.sample_id: r.error or "failed" for r in records if not r.ok},
            steps.stored_native(run.out_dir) if options.native and pre.generated_root is not None else {}),
        "worldfoundry": suite.result,
        "derived_note": "group scores and mind_average follow WorldFoundry's normaliser; MIND publishes no composite",
        "options": {"metrics": list(metrics), "video_max_time": video_max_time, "native": options.native,
                    "decoder": options.decoder},
    }
    if data:
        extra["test_double"] = fixture.ProcessPyCpuDouble.name
    # the native cross-check needs the generated videos: importing a Result.json alone has nothing to recompute
    native_declared = bool(options.native) and pre.generated_root is not None
    used = run_pins(pins, metrics, official=not data and results_file is None, native=native_declared and not data)
    return run.finish(metric_specs(keys, metrics, native=native_declared), records, derived=[suite],
                      pins=pins_for_provenance(pins, used), seeds={"fixture": fixture.SEED} if data else None,
                      extra=extra,
                      provenance={"canvas": str(fixture.CANVAS if data else OFFICIAL_CANVAS),
                                  **{name: run.recorded_path(folder) if folder is not None else None for name, folder
                                     in (("gt_root", pre.gt_root), ("generated_root", pre.generated_root))}})


def checked(plan: Plan) -> Plan:
    """The plan, or its problems on stderr, one line each, and RecipeError naming the first."""
    if not plan.ok:
        for line in plan.problems:
            print(f"layout: {line}", file=sys.stderr)
        raise RecipeError(f"the layouts have {counted(len(plan.problems), 'problem')}, the first: {plan.problems[0]}")
    return plan


def plan_requests(run: Run, gt_root: Path, root: Path) -> list[Request]:
    """The generation requests of the GT samples a run plans (its files under ``root``)."""
    try:
        plan = checked(make_plan(gt_root, None, metrics=run.options.metrics,
                                 video_max_time=run.options.video_max_time, limit=run.cfg.limit))
    except LayoutError as exc:
        raise RecipeError(str(exc)) from None
    with run.digests() as digests:
        return requests.build(plan, root=root, digests=digests)


def run_requests(run: Run, root: Path) -> list[Request]:
    """``pinbench requests mind``: the fixture's GT or ``-o gt=``."""
    data = run.fixture(fixture.build_fixture)
    return plan_requests(run, Path(data.gt_root if data else run.options.gt), root)


def _official(run: Run, pre: Plan, tasks: list[steps.SampleTask], result_file: ResultFile | None,
              results_file: Path | None, data: fixture.FixtureData | None, pins: Pins) -> steps.Official:
    """The official outcome of every sample of this shard without a stored record, and where every sample's
    came from; the merge (``--skip-scoring``) scores nothing and names the sources the shards stored."""
    options = run.options
    if run.skips("scoring"):
        return steps.Official({}, steps.stored_sources(run.out_dir, results_file))
    # an imported Result.json is read again, not the cache: its summary listed a sample the cache held among the
    # file's "unexpected records", and named none of them as imported
    pending = run.pending(tasks, cache=result_file is None)
    if result_file is not None:
        official = steps.import_file(result_file, pre, pending.mine)
    elif data is not None:
        official = steps.run_official(run.out_dir, pre, pending.mine, runtime=fixture_runtime(run.out_dir),
                                      score=fixture_scorer(data, options.metrics, options.video_max_time),
                                      unscored=pending.unscored)
    elif pending.mine:
        runtime = official_runtime(pins, options.metrics)
        official = steps.run_official(
            run.out_dir, pre, pending.mine, runtime=runtime,
            score=steps.process_py(runtime, metrics=options.metrics, video_max_time=options.video_max_time,
                                   gpus=run.cfg.gpus, timeout_s=options.timeout_s), unscored=pending.unscored)
    else:
        official = steps.Official({}, [])
    # the samples whose stored or cached records this process reuses keep the sources they were scored from
    if (held := pending.stored + pending.cached) and result_file is None:
        official.sources += steps.stored_sources(run.out_dir, None, {t.sample_id: input_hash(t) for t in held})
    return official


def _native(run: Run, pre: Plan, data: fixture.FixtureData | None, pins: Pins) -> dict[str, dict[str, Any]]:
    """The native LCM and GSC blocks of this shard's samples, resumable under ``native/`` (the merge computes none
    and loads no model)."""
    if run.skips("scoring"):
        return {}
    trunk = data.lpips_trunk if data else lpips_trunk(pins)
    digest = data.lpips_sha256 if data else pins.urls["alexnet"].sha256
    device = "cuda" if torch.cuda.is_available() and not data else "cpu"
    lpips_model = load_lpips(trunk, expected_sha256=digest, device=device)
    with run.digests() as digests:
        native_tasks = steps.native_tasks(pre, canvas=fixture.CANVAS if data else OFFICIAL_CANVAS,
                                          lpips_sha256=digest, digests=digests)
    with one_thread_if(data is not None):
        summary = run.compute(native_tasks, steps.native_scorer(lpips_model, pre.gt_root, pre.generated_root),
                              folder="native", label="native cross-check")
    return {sid: rec.result for sid, rec in summary.records.items()
            if rec.ok and rec.result is not None and "nothing" not in rec.result}


def official_runtime(pins: Pins, metrics: Sequence[str]) -> Runtime:
    """The image's official runtime, every staged weight ``metrics`` read located and verified, or one
    RecipeError line."""
    try:
        runtime = runtime_from_env(pins, metrics)
    except (NotFetchedError, ChecksumError, UnresolvedPinError) as exc:
        raise RecipeError(f"official runtime: {exc}") from None
    problems = runtime.problems(pins.upstream["mind"].commit)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise RecipeError(f"official runtime: {problems[0]}{more}")
    return runtime


@contextmanager
def one_thread_if(condition: bool) -> Iterator[None]:
    """The fixture's 72x128 frames: one torch thread beats the per-call threading overhead."""
    threads = torch.get_num_threads()
    if condition:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def fixture_runtime(out_dir: Path) -> Runtime:
    """Stand-in runtime files for laying out the fixture's working directory (the double reads only its views)."""
    root = out_dir / "fixture_runtime"
    (root / "MIND" / "vipe").mkdir(parents=True, exist_ok=True)
    weights = {}
    for name in ("musiq_spaq", "aesthetic_head", "clip_vit_l14"):   # shards write these at once: atomically
        weights[name] = write_if_changed(root / "weights" / f"{name}.stand-in",
                                         "fixture stand-in: the test double loads no weights\n")
    return Runtime(mind_dir=root / "MIND", python=Path(sys.executable), dino_dir=root / "dinov3", weights=weights,
                   torch_home=root / "torch", hf_home=root / "hf")


def fixture_scorer(data: fixture.FixtureData, metrics: tuple[str, ...], video_max_time: int | None):  # noqa: ANN201
    """The test double in process.py's place, on the laid-out working directory's views."""
    def score(work: Any) -> None:
        lpips_model = load_lpips(data.lpips_trunk, expected_sha256=data.lpips_sha256)
        with one_thread_if(True):
            fixture.ProcessPyCpuDouble(lpips_model).run(gt_root=work.gt_root, test_root=work.test_root,
                                                        metrics=metrics, video_max_time=video_max_time,
                                                        output=work.output)
    return score
