"""The steps ``run.py`` reads as the procedure: tasks, official scores, native cross-check, per-sample results.

Resume: every sample's final record is stored by the runner with the hash of its inputs (generated video
bytes, GT files, metrics, ``video_max_time``, pins, recipe version). A rerun sends to ``process.py`` only
the samples without a valid record, first importing what an earlier, interrupted invocation already wrote
into its Result.json for unchanged inputs (``official/run-NNN/plan.json``).

Shards: ``--shard I/N`` owns the samples at positions I, I+N, ... of the plan; each step works on those
only (``process.py`` on a working directory that holds exactly them, the native blocks and the final
records of the same samples). Who may run in the directory at the same time (shards of one split, never
two processes of one shard) is ``pinbench.core.rundir``'s claim, taken before the recipe runs.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from pinbench.core.files import counted, read_regular_text, write_atomic
from pinbench.core.inputs import InputDigests, InputKey
from pinbench.core.runner import input_hash, load_records
from pinbench.core.task import Task
from pinbench_recipes.mind import native
from pinbench_recipes.mind.ingest import Canvas
from pinbench_recipes.mind.layout import (
    GT_ACTIONS,
    GT_POSES,
    GT_VIDEO,
    MIRROR_TEST,
    ContinuationSample,
    MirrorSample,
    Sample,
)
from pinbench_recipes.mind.official import (
    DEFAULT_TIMEOUT_S,
    KILLED,
    LIVE,
    Runtime,
    WorkDir,
    command,
    creating_work_dirs,
    earlier_runs,
    execute,
    gpu_mask,
    invocation_state,
    lay_out,
    mark_finished,
    new_work_dir,
    work_dirs,
)
from pinbench_recipes.mind.plan import Plan
from pinbench_recipes.mind.results import (
    Imported,
    ResultFile,
    check_run_settings,
    import_results,
    load_result_file,
    mirror_keys,
)
from pinbench_recipes.mind.samples import add_native, continuation_result, mirror_result

# the source of official scores no working directory of this run directory laid out
CACHED = "the sample cache: the official step of another run directory, on the same inputs, code and options"
NATIVE_VERSION = 1      # bump when the native cross-check changes, so stored native blocks are recomputed


# ------------------------------------------------------------------------------------------------ tasks


@dataclass(frozen=True, slots=True, kw_only=True)
class SampleTask(Task):
    """One sample: everything that, changed, must rescore it. Files are keyed by their place in the layout
    (perspective, test type, directory) and their SHA-256, never by where the roots are."""

    versions: dict[str, str]
    perspective: str | None = None
    test_type: str | None = None
    path: str | None = None
    metrics: list[str] | None = None
    video_max_time: int | None = None
    gt: dict[str, str | None] | None = None          # a continuation: its GT files' SHA-256
    video_sha256: str | None = None                   # and its rollout's
    videos_sha256: dict[str, str] | None = None       # a mirror test: its rollouts'
    mirror_from_results: bool | None = None           # a mirror test only a results file holds


def sample_task(sample: Sample, *, metrics: Sequence[str], video_max_time: int | None,
                versions: Mapping[str, str], digests: InputDigests) -> SampleTask:
    """The task of one sample."""
    key = sample.key
    files: dict[str, Any] = {}
    if isinstance(sample, ContinuationSample):
        files["gt"] = {"action_sha256": digests.sha256(sample.gt_dir / GT_ACTIONS),
                       "video_sha256": digests.sha256(sample.gt_dir / GT_VIDEO),
                       "poses_sha256": digests.sha256(sample.gt_dir / GT_POSES) if sample.gt_poses else None}
        files["video_sha256"] = digests.sha256(sample.video) if sample.video else None
    elif isinstance(sample, MirrorSample):
        files["videos_sha256"] = {v.name: digests.sha256(v.path) for v in sample.videos}
    return SampleTask(sample_id=key.sample_id, perspective=key.perspective, test_type=key.test_type, path=key.path,
                      metrics=list(metrics), video_max_time=video_max_time, versions=dict(versions), **files)


def mirror_tasks(result: ResultFile, *, versions: Mapping[str, str]) -> list[SampleTask]:
    """``-o results=FILE`` without rollouts: the mirror_test directories the file holds are samples too."""
    return [SampleTask(sample_id=key.sample_id, mirror_from_results=True, versions=dict(versions))
            for key in mirror_keys(result)]


# ---------------------------------------------------------------------------------------- official


@dataclass
class Official:
    """The official outcome of each pending sample, and where it came from."""

    samples: dict[str, Imported]
    sources: list[dict[str, Any]]


def import_file(result: ResultFile, pre: Plan, pending: Sequence[SampleTask]) -> Official:
    """``-o results=FILE``: a Result.json produced elsewhere, checked against this run's settings; the pending
    tasks' records (mirror directories known only from the file included, see :func:`mirror_tasks`)."""
    check_run_settings(result, pre.video_max_time)
    keys = [s.key for s in pre.samples]
    if pre.generated_root is None and "gsc" in pre.metrics:
        keys += mirror_keys(result)
    wanted = {t.sample_id for t in pending}
    report = import_results(result, [k for k in keys if k.sample_id in wanted])
    return Official({k.sample_id: v for k, v in report.samples.items()}, [report.summary()])


def _no_video(sample: Sample) -> Imported | None:
    if isinstance(sample, ContinuationSample) and sample.video is None:
        return Imported(sample.key, None, "no generated video: the model produced none for this GT sample")
    return None


# Fills a laid-out work directory's Result.json (process.py or the double); returns how it ended when not well
# (a non-zero exit, the timeout), which the samples it left without a record are failed with.
ScoreFn = Callable[[Path], str | None]


def run_official(out_dir: Path, pre: Plan, pending: Sequence[SampleTask], *, runtime: Runtime,
                 score: ScoreFn, unscored: Mapping[str, str] | None = None) -> Official:
    """Official scores of the pending samples: salvaged from earlier interrupted invocations when their inputs
    are unchanged, else from one new invocation on exactly the samples still missing.

    A killed invocation's directory is reused (its salvaged samples keep it as their source) or removed when
    nothing in it can be reused by any process of this run (``unscored``: sample id -> task hash of every
    sample of the run without a valid record; default the pending ones); each is said on stderr."""
    by_id = {s.key.sample_id: s for s in pre.samples}
    hashes = {t.sample_id: input_hash(t) for t in pending}
    outcome: dict[str, Imported] = {}
    sources: list[dict[str, Any]] = []
    for sample_id in hashes:
        missing = _no_video(by_id[sample_id])
        if missing is not None:
            outcome[sample_id] = missing
    parent = out_dir / "official"
    salvaged: dict[Path, int] = {}
    for work, plan in earlier_runs(parent):
        reusable = [sid for sid, h in plan.items() if hashes.get(sid) == h and sid not in outcome]
        if not reusable or invocation_state(work) == LIVE:   # a live one is another shard's, writing now
            continue
        try:
            result = load_result_file(work.output)
        except ValueError as exc:
            print(f"warning: not reusing {exc}", file=sys.stderr)
            continue
        report = import_results(result, [by_id[sid].key for sid in reusable])
        kept = {k.sample_id: i for k, i in report.samples.items() if i.ok}
        outcome.update(kept)
        sources.append({**report.summary(), "reused_samples": sorted(kept)})
        salvaged[work.root] = len(kept)
    _sweep_killed(parent, salvaged, {**hashes, **(unscored or {})})
    todo = [by_id[sid] for sid in hashes if sid not in outcome]
    if todo:
        work = new_work_dir(parent)
        lay_out(work, todo, metrics=pre.metrics, runtime=runtime, task_hashes=hashes)
        ended = score(work)
        if work.output.is_file():
            report = import_results(load_result_file(work.output), [s.key for s in todo])
            source = {"work_dir": str(work.root), **report.summary()}
            write_atomic(work.imported, json.dumps(source, indent=1) + "\n")
            sources.append(source)
            outcome.update({k.sample_id: _ended(v, ended) for k, v in report.samples.items()})
        else:
            reason = f"process.py wrote no Result.json ({ended or f'see {work.log}'})"
            outcome.update({s.key.sample_id: Imported(s.key, None, reason) for s in todo})
        mark_finished(work, "ended")
    return Official(outcome, sources)


def _ended(imported: Imported, ended: str | None) -> Imported:
    """A sample left without a record by a process.py that crashed or timed out says so (it said only "process.py
    never wrote one", as if process.py had skipped it)."""
    if ended is None or imported.record is not None or imported.failure is None:
        return imported
    return replace(imported, failure=f"{imported.failure}; {ended}")


def _sweep_killed(parent: Path, salvaged: Mapping[Path, int], unscored: Mapping[str, str]) -> None:
    """Reuse or remove the directories of killed invocations, and say which (stderr)."""
    with creating_work_dirs(parent):   # no staging directory is half made while this looks
        for work in work_dirs(parent, staging=True):   # killed while creating its directory: nothing in it yet
            if invocation_state(work) == KILLED:
                shutil.rmtree(work.root, ignore_errors=True)
    for work in work_dirs(parent):
        if invocation_state(work) != KILLED:
            continue
        if work.root in salvaged:
            mark_finished(work, "salvaged")
            print(f"official: reused {counted(salvaged[work.root], 'sample')} from {work.root}, an invocation killed "
                  "before it ended; kept as their source", file=sys.stderr)
            continue
        try:
            planned = json.loads(work.plan.read_text())["samples"]
        except (OSError, ValueError, KeyError, TypeError):
            planned = {}
        if work.output.is_file() and any(unscored.get(sid) == h for sid, h in dict(planned).items()):
            print(f"official: kept {work.root}, an invocation killed before it ended: it holds scores of samples "
                  "this run has not stored yet", file=sys.stderr)
            continue
        shutil.rmtree(work.root, ignore_errors=True)
        print(f"official: removed {work.root}, an invocation killed before it ended, with nothing reusable "
              f"({'no Result.json' if not work.output.is_file() else 'none of its samples is still to score'})",
              file=sys.stderr)


def stored_sources(out_dir: Path, results_file: Path | None,
                   stored: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Where the stored official scores came from (of ``stored``, sample id -> input hash; default the ok records
    of the store), for the samples this process reused or, in a run that scored nothing itself (the merge of
    shards), all of them: the imported results file, or every ``process.py`` working directory that laid out one
    of them with that input hash, and the sample cache for those none did (another run directory's official step
    scored them, ``pinbench.core.sample_cache``: the same inputs, code and options).
    Why the hash: a directory that scored a sample's earlier rollout (another generator's) is not its source, and
    naming it changed the scorecard of a rerun that changed nothing, so the rerun was not said to be one."""
    if results_file is not None:
        return [{"results_file": str(results_file), "stored_by": "the shards' imports"}]
    sources, planned = [], set()
    for work, plan in earlier_runs(out_dir / "official"):
        planned.update(plan.items())
        reused = sorted(sid for sid, h in plan.items() if stored.get(sid) == h) if stored is not None else None
        if reused is None or reused:
            sources.append(_imported(work) or {"work_dir": str(work.root), "n_planned": len(plan),
                                               "stored_by": "an earlier run or a shard",
                                               **({"reused_samples": reused} if reused is not None else {})})
    held = stored if stored is not None else {sid: r.input_hash for sid, r in load_records(out_dir).items() if r.ok}
    cached = sorted(sid for sid, h in held.items() if (sid, h) not in planned)
    if cached:
        sources.append({"stored_by": CACHED, "reused_samples": cached})
    return sources


def _imported(work: WorkDir) -> dict[str, Any] | None:
    """The import summary the invocation that scored in ``work`` wrote (None for a salvaged or older one)."""
    text = read_regular_text(work.imported)   # absent, a folder or a FIFO: the older description
    try:
        source = json.loads(text) if text is not None else None
    except ValueError:
        return None
    return source if isinstance(source, dict) and source.get("work_dir") == str(work.root) else None


def process_py(runtime: Runtime, *, metrics: Sequence[str], video_max_time: int | None, gpus: int,
               timeout_s: float = DEFAULT_TIMEOUT_S) -> ScoreFn:
    """The real scorer: process.py on the GPUs (GPU CI / the recipe image only). A GPU mask process.py's ViPE step
    would escape is refused here, before a work directory is laid out (refused in ``score``, it left one that a
    later run removed as an invocation killed before it ended)."""
    gpu_mask(gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))

    def score(work: Any) -> str | None:
        argv, env = command(work, runtime, metrics=metrics, video_max_time=video_max_time, gpus=gpus,
                            parent_env=dict(os.environ))
        outcome = execute(work, argv, env, timeout_s=timeout_s)
        state = "timed out and was killed" if outcome.timed_out else f"exited {outcome.returncode}"
        said = f"process.py {state} after {outcome.seconds:.0f}s (log: {work.log})"
        print(said, file=sys.stderr)
        return None if outcome.returncode == 0 else said
    return score


# ------------------------------------------------------------------------------------------ native


@dataclass(frozen=True, slots=True, kw_only=True)
class NativeTask(Task):
    """One sample's native cross-check: its files (relative to the GT and generated roots, with their SHA-256),
    or why there is nothing to compare."""

    canvas: list[int]                  # [height, width]
    lpips_sha256: str | None
    native_version: int
    gt_video: InputKey | None = None   # a continuation with 'lcm': its GT and generated videos
    video: InputKey | None = None
    mark_time: int | None = None
    total_time: int | None = None
    frames: int | None = None
    video_max_time: int | None = None
    videos: dict[str, tuple[InputKey, int]] | None = None   # a mirror test with 'gsc': name -> (key, frames)
    nothing: str | None = None


def native_tasks(pre: Plan, *, canvas: Canvas, lpips_sha256: str | None,
                 digests: InputDigests) -> list[NativeTask]:
    """One native task per planned sample, in plan order, so that shard I/N of these tasks is shard I/N of
    the samples; a sample without frames to compare (LCM needs 'lcm' and a rollout, GSC 'gsc') gets a task
    that computes nothing. Its files: the GT video under the GT root, rollouts under the generated root (both
    relative, with their SHA-256; ``native_scorer`` joins them to the roots)."""
    tasks = []
    for sample in pre.samples:
        files: dict[str, Any] = {}
        if isinstance(sample, ContinuationSample) and sample.video is not None and "lcm" in pre.metrics:
            assert pre.generated_root is not None  # a sample has a video only when there is a generated root
            files = {"gt_video": digests.key(sample.gt_dir / GT_VIDEO, pre.gt_root),
                     "video": digests.key(sample.video, pre.generated_root), "mark_time": sample.actions.mark_time,
                     "total_time": sample.actions.total_time, "frames": sample.video_frames,
                     "video_max_time": pre.video_max_time}
        elif isinstance(sample, MirrorSample) and "gsc" in pre.metrics:
            assert pre.generated_root is not None
            files = {"videos": {v.name: (digests.key(v.path, pre.generated_root), v.frames) for v in sample.videos}}
        else:
            files = {"nothing": "no frames to compare natively (no rollout, or its metric not requested)"}
        tasks.append(NativeTask(sample_id=sample.key.sample_id, canvas=[canvas.height, canvas.width],
                                lpips_sha256=lpips_sha256, native_version=NATIVE_VERSION, **files))
    return tasks


def native_scorer(lpips_model: torch.nn.Module, gt_root: Path,
                  generated_root: Path | None) -> Callable[[NativeTask], dict[str, Any]]:
    def score(task: NativeTask) -> dict[str, Any]:
        if task.nothing is not None:
            return {"nothing": task.nothing}
        canvas = Canvas(*task.canvas)
        assert generated_root is not None  # only "nothing" tasks exist without one
        if task.videos is not None:
            return {"videos": {name: native.storable(native.mirror_block(generated_root / video.path,
                                                                         frames=frames, lpips_model=lpips_model,
                                                                         canvas=canvas))
                               for name, (video, frames) in task.videos.items()}}
        assert task.gt_video and task.video and task.mark_time is not None and task.total_time is not None \
            and task.frames is not None   # a continuation's task holds them all
        block = native.continuation_block(gt_root / task.gt_video.path, generated_root / task.video.path,
                                          mark_time=task.mark_time, total_time=task.total_time,
                                          generated_frames=task.frames, video_max_time=task.video_max_time,
                                          lpips_model=lpips_model, canvas=canvas)
        return {"lcm": native.storable(block)}
    return score


def stored_native(out_dir: Path) -> dict[str, dict[str, Any]]:
    """The native blocks every process stored under ``native/`` (this run's, a shard's, an earlier run's)."""
    return {sid: rec.result for sid, rec in load_records(out_dir / "native").items() if rec.ok and rec.result}


# ------------------------------------------------------------------------------------------ results


def sample_result(sample: Sample | None, imported: Imported, native_result: Mapping[str, Any] | None, *,
                  metrics: Sequence[str], video_max_time: int | None) -> dict[str, Any]:
    """The final result of one sample (SampleFailure when it failed as a whole); ``sample`` is None for a
    mirror directory known only from an imported results file."""
    if imported.key.test_type == MIRROR_TEST:
        result = mirror_result(imported, sample if isinstance(sample, MirrorSample) else None)
        if native_result and imported.record is not None:
            official = {e["video_name"]: e["gsc"] for e in imported.record.get("video_results", [])
                        if isinstance(e, dict) and isinstance(e.get("gsc"), dict)}
            add_native(result, official, {n: native.restored(b) for n, b in native_result["videos"].items()}, "gsc")
        return result
    result = continuation_result(imported, sample if isinstance(sample, ContinuationSample) else None,
                                 metrics=metrics, video_max_time=video_max_time)
    if native_result and native_result.get("lcm") is not None and imported.record is not None:
        official_lcm = imported.record.get("lcm")
        add_native(result, {"lcm": official_lcm} if isinstance(official_lcm, dict) else {},
                   {"lcm": native.restored(native_result["lcm"])}, "lcm")
    return result
