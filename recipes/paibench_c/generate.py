"""Generation with cosmos-framework, resumable by validity, and byte-exact collection of the outputs.

GPU step (needs the generation image and 1+ GPUs; exercised by the GPU CI, see tests/test_generate.py).

Resume rule: a task is skipped only when ``raw/<task>/vision.mp4`` decodes completely and has at least
121 frames. Existence or size is never enough (the upstream script's 50 KB rule keeps truncated files);
an invalid file is deleted and the task regenerated. Collection copies ``vision.mp4`` to
``videos/<task>.mp4`` byte for byte (no re-encode: DOVER, SAM and depth read these bytes) and checks
the copy's SHA-256 against the source.

Launch layout (``launch``):
* ``workers`` (default): one single-GPU process per GPU, tasks interleaved (GPU i gets rows i, i+N, ...),
  exactly as the pinned upstream script ``run_paibench_c.sh`` does and, per its comments, as the internal
  run did. Each sample then runs on one GPU.
* ``torchrun``: one ``torchrun --nproc-per-node=GPUS`` job with ``--parallelism-preset=latency``, which
  shards every sample across all GPUs (different numerics; upstream saw memory growth past ~200 tasks).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pinbench.core.files import atomic_path, sha256_file, write_atomic, write_if_changed
from pinbench.core.run import Run
from pinbench.core.runner import RunSummary
from pinbench.media.video import is_valid_video
from pinbench.ops.watch import Watcher, wait_watched
from pinbench_recipes.paibench_c.rows import NUM_FRAMES, write_jsonl

MIN_FRAMES = NUM_FRAMES
LAUNCHES = ("workers", "torchrun")
INFERENCE_MODULE = "cosmos_framework.scripts.inference"
# Removed from the workers' environment, as upstream does: a notebook's or the host's Python settings
# must not leak into the framework's interpreter.
_SCRUBBED_ENV = ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "MPLBACKEND")


class GenerationError(RuntimeError):
    """Generation or collection failed; finished samples stay on disk for the next run."""


class Generator(Protocol):
    """Writes ``raw_dir/<row name>/vision.mp4`` for every row it is given."""

    name: str

    def describe(self) -> dict[str, Any]: ...

    def generate(self, rows: Sequence[Mapping[str, Any]], raw_dir: Path, work_dir: Path) -> None: ...


def vision_path(raw_dir: Path, name: str) -> Path:
    """Where cosmos-framework writes a sample: ``<output dir>/<name>/vision.mp4``."""
    return raw_dir / name / "vision.mp4"


class ValidityCache:
    """Which videos already decoded completely, keyed by path, size and mtime.

    Why: a resume must not decode thousands of 720p videos again just to learn they are still fine.
    Only successes are remembered, and any change to a file (size or mtime) means it is decoded again.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._known: dict[str, list[int]] = {}
        if path is not None and path.is_file():
            try:
                self._known = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                self._known = {}

    def is_valid(self, video: Path, min_frames: int) -> bool:
        try:
            st = video.stat()
        except FileNotFoundError:
            return False
        key, signature = str(video.resolve()), [st.st_size, st.st_mtime_ns, min_frames]
        if self._known.get(key) == signature:
            return True
        ok = is_valid_video(video, min_frames)
        if ok:
            self._known[key] = signature
        else:
            self._known.pop(key, None)
        return ok

    def save(self) -> None:
        if self.path is None:
            return
        write_if_changed(self.path, json.dumps(self._known))


def pending_rows(rows: Sequence[Mapping[str, Any]], raw_dir: Path, min_frames: int = MIN_FRAMES,
                 cache: ValidityCache | None = None) -> list[Mapping[str, Any]]:
    """Rows whose output is missing or invalid; invalid outputs are deleted so they are regenerated."""
    cache = cache or ValidityCache()
    pending = []
    for row in rows:
        path = vision_path(raw_dir, row["name"])
        if path.exists():
            if cache.is_valid(path, min_frames):
                continue
            path.unlink()
        pending.append(row)
    return pending


@dataclass(frozen=True)
class Collected:
    """The outcome of collecting one task's video."""

    task_id: str
    sha256: str | None
    error: str | None = None
    copied: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


def _copy_exact(src: Path, dst: Path, expected_sha: str) -> None:
    with atomic_path(dst) as tmp:
        shutil.copyfile(src, tmp)
        actual = sha256_file(tmp)
        if actual != expected_sha:
            raise GenerationError(f"{dst}: copy of {src} has sha256 {actual}, source {expected_sha}")


def collect_videos(rows: Sequence[Mapping[str, Any]], raw_dir: Path, videos_dir: Path,
                   min_frames: int = MIN_FRAMES, cache: ValidityCache | None = None,
                   known: Collection[str] | None = None) -> dict[str, Collected]:
    """Copy every valid ``vision.mp4`` to ``videos/<task>.mp4`` byte for byte; report each task.

    A collected video that already equals its source is kept. A valid collected video whose raw output
    is gone is kept too (raw outputs may be pruned). Files in ``videos/`` that belong to no row (nor to
    ``known``, the other tasks of this run, e.g. another shard's) make the evaluator score extra samples,
    so they are refused.
    """
    videos_dir.mkdir(parents=True, exist_ok=True)
    names = {row["name"] for row in rows} | set(known or ())
    strays = sorted(p.name for p in videos_dir.glob("*.mp4") if p.stem not in names)
    if strays:
        raise GenerationError(f"{videos_dir}: {len(strays)} video(s) not in this run's task list "
                              f"(e.g. {strays[0]}); the evaluator would score them; use a separate --out")
    cache = cache or ValidityCache()
    results: dict[str, Collected] = {}
    for row in rows:
        name = row["name"]
        src, dst = vision_path(raw_dir, name), videos_dir / f"{name}.mp4"
        if not cache.is_valid(src, min_frames):
            if cache.is_valid(dst, min_frames):
                results[name] = Collected(name, sha256_file(dst))
            else:
                dst.unlink(missing_ok=True)
                reason = "no output" if not src.exists() else f"invalid output (undecodable or < {min_frames} frames)"
                results[name] = Collected(name, None, error=f"generation failed: {reason} at {src}")
            continue
        src_sha = sha256_file(src)
        if dst.exists() and sha256_file(dst) == src_sha:
            results[name] = Collected(name, src_sha)
            continue
        _copy_exact(src, dst, src_sha)
        results[name] = Collected(name, src_sha, copied=True)
    return results


def _row_key(row: Mapping[str, Any], dataset_root: Path) -> dict[str, Any]:
    """A cosmos-framework row with every path under ``dataset_root`` (as the row names it: absolute, or relative to
    the working directory when the run directory is) made relative to it."""
    prefix = f"{Path(dataset_root).as_posix()}/"

    def relative(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {key: relative(item) for key, item in value.items()}
        return value.removeprefix(prefix) if isinstance(value, str) else value
    return relative(row)


GENERATION_DIR = "generation"  # the generation step's records and shard manifests: for `pinbench status`


def generate_and_record(generator: Generator, rows: Mapping[str, Sequence[Mapping[str, Any]]], run: Run,
                        *, dataset_root: Path, min_frames: int = MIN_FRAMES, cache: ValidityCache | None = None,
                        known: Collection[str] = ()) -> tuple[RunSummary, list[str]]:
    """Generate this shard's videos of every modality, then collect and record each one.

    Shard I of N of the run owns the tasks at positions I, I+N, ... (rows are one per task, in task order), in every
    modality. Each (modality, task) is a sample ``<modality>.<task>`` of the step in ``generation/``: ok
    with its video's SHA-256, or failed with why, recorded when its modality's launch has ended (one launch
    per modality, so counts move modality by modality). ``known`` names the run's other tasks (outside
    ``--limit``), whose videos are not strays. A sample's key holds its row with the dataset's paths relative to
    ``dataset_root``, so the same dataset elsewhere keys the same samples. Returns what was recorded and one line
    per problem.
    """
    tasks = [{"sample_id": f"{modality}.{row['name']}", "modality": modality, "row": _row_key(row, dataset_root)}
             for modality, modality_rows in rows.items() for row in modality_rows]
    rows_by_id = {f"{modality}.{row['name']}": row for modality, modality_rows in rows.items() for row in modality_rows}
    units = [pos for modality_rows in rows.values() for pos in range(len(modality_rows))]
    log = run.log(tasks, folder=GENERATION_DIR, label="generate", units=units)
    out_dir = run.out_dir
    problems: list[str] = []
    for modality, modality_rows in rows.items():
        own = [rows_by_id[task["sample_id"]] for task in log.mine if task["modality"] == modality]
        raw = out_dir / modality / "raw"
        todo = pending_rows(own, raw, min_frames, cache=cache)
        started = time.perf_counter()
        try:
            generator.generate(todo, raw, out_dir / modality)
        except GenerationError as exc:
            problems.append(f"{modality}: {exc}")
        seconds = (time.perf_counter() - started) / max(len(todo), 1)
        collected = collect_videos(own, raw, out_dir / modality / "videos", min_frames, cache=cache,
                                   known={row["name"] for row in modality_rows} | set(known))
        if cache is not None:
            cache.save()
        generated = {row["name"] for row in todo}
        for name, got in collected.items():
            log.record(f"{modality}.{name}", {"sha256": got.sha256} if got.ok else None, error=got.error,
                         seconds=seconds if name in generated else 0.0, reused=name not in generated)
        failed = [c.task_id for c in collected.values() if not c.ok]
        if failed:
            problems.append(f"{modality}: {len(failed)} task(s) without a valid video (e.g. {failed[0]}: "
                            f"{collected[failed[0]].error})")
    return log.close(), problems


@dataclass(frozen=True)
class Launch:
    """One process to start: its argv, extra environment, working directory and log file."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    log: Path
    input_file: Path


@dataclass
class CosmosFrameworkGenerator:
    """Runs ``python -m cosmos_framework.scripts.inference`` over the rows (see module docstring)."""

    framework_dir: Path          # cosmos-framework checkout at the pinned commit (CWD of the workers)
    python: Path                 # the framework's locked venv interpreter
    checkpoint_dir: Path         # pinned HF snapshot of nvidia/Cosmos3-{Nano,Super}
    gpu_ids: list[str]
    launch: str = "workers"
    offline: bool = False
    extra_args: list[str] = field(default_factory=list)
    name: str = "cosmos-framework"

    def __post_init__(self) -> None:
        if self.launch not in LAUNCHES:
            raise ValueError(f"launch {self.launch!r} is not one of {', '.join(LAUNCHES)}")
        if not self.gpu_ids:
            raise ValueError("generation needs at least one GPU id")

    def describe(self) -> dict[str, Any]:
        return {"generator": self.name, "launch": self.launch, "gpus": len(self.gpu_ids),
                "checkpoint_dir": str(self.checkpoint_dir), "extra_args": list(self.extra_args)}

    def _inference_args(self, input_file: Path, raw_dir: Path) -> list[str]:
        # --keep-going: one failing sample must not stop its shard; the validity check reports it.
        return ["-m", INFERENCE_MODULE, "--parallelism-preset=latency", "--no-guardrails", "--keep-going",
                "-i", str(input_file), "-o", str(raw_dir), "--checkpoint-path", str(self.checkpoint_dir),
                *self.extra_args]

    def _env(self, visible: Sequence[str]) -> dict[str, str]:
        env = {"CUDA_VISIBLE_DEVICES": ",".join(visible), "LD_LIBRARY_PATH": ""}
        if self.offline:
            env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        return env

    def launches(self, shard_files: Sequence[Path], raw_dir: Path, log_dir: Path) -> list[Launch]:
        """The processes for already-written shard files (one per GPU, or one torchrun job)."""
        if self.launch == "torchrun":
            torchrun = self.python.parent / "torchrun"
            argv = [str(torchrun), "--standalone", f"--nproc-per-node={len(self.gpu_ids)}",
                    *self._inference_args(shard_files[0], raw_dir)]
            return [Launch(argv, self._env(self.gpu_ids), self.framework_dir, log_dir / "torchrun.log",
                           shard_files[0])]
        return [Launch([str(self.python), *self._inference_args(shard, raw_dir)], self._env([gpu]),
                       self.framework_dir, log_dir / f"worker_{gpu}.log", shard)
                for gpu, shard in zip(self.gpu_ids, shard_files, strict=True)]

    def split(self, rows: Sequence[Mapping[str, Any]], work_dir: Path) -> list[Path]:
        """Write the input JSONL(s): interleaved per GPU for workers, one file for torchrun."""
        if self.launch == "torchrun":
            return [write_jsonl(rows, work_dir / "input_pending.jsonl")]
        n = len(self.gpu_ids)
        return [write_jsonl(rows[i::n], work_dir / f"shard_{i}.jsonl") for i in range(n)]

    def generate(self, rows: Sequence[Mapping[str, Any]], raw_dir: Path, work_dir: Path) -> None:
        if not rows:
            return
        raw_dir.mkdir(parents=True, exist_ok=True)
        log_dir = work_dir / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        shard_files = self.split(list(rows), work_dir)
        base_env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
        procs = []
        for launch in self.launches(shard_files, raw_dir, log_dir):
            if not launch.input_file.read_text(encoding="utf-8").strip():
                continue  # this GPU has nothing left to do
            with open(launch.log, "ab") as log:
                procs.append((launch, subprocess.Popen(launch.argv, cwd=launch.cwd, env={**base_env, **launch.env},
                                                       stdout=log, stderr=subprocess.STDOUT)))
        # Progress as observed from outside: a finished sample is its vision.mp4 (written when it is done).
        names = [row["name"] for row in rows]
        watcher = Watcher(f"generate {work_dir.name}", lambda: sum(vision_path(raw_dir, n).is_file() for n in names),
                          total=len(names))
        codes = zip((launch for launch, _ in procs),
                    wait_watched([(proc, launch.log) for launch, proc in procs], watcher), strict=True)
        failed = [f"{launch.log} (exit {code})" for launch, code in codes if code != 0]
        if failed:
            raise GenerationError("cosmos-framework failed: " + "; ".join(failed))


# ------------------------------------------------------------------------------- tokenizer record

# cosmos-framework's inference.py (pinned commit) logs this when it takes the VLM processor from the
# checkpoint folder; otherwise it downloads it from the model config's repository at revision "main".
BUNDLED_PROCESSOR_LOG = "VLM processor: using checkpoint-bundled processor files"
SOURCES_FILE = "generation_sources.json"


def _log_mentions(logs: Sequence[Path], marker: str) -> bool:
    for log in logs:
        try:
            with open(log, encoding="utf-8", errors="replace") as fh:
                if any(marker in line for line in fh):
                    return True
        except OSError:
            continue
    return False


def main_revision_in_cache(repo_id: str, hub_cache: Path) -> str | None:
    """The commit the cached ref ``main`` of ``repo_id`` points to (huggingface_hub's public scan_cache_dir)."""
    from huggingface_hub import scan_cache_dir

    try:
        info = scan_cache_dir(hub_cache)
    except Exception:  # CacheNotFound, unreadable cache: nothing recorded there
        return None
    for repo in info.repos:
        if repo.repo_id == repo_id and repo.repo_type == "model":
            for revision in repo.revisions:
                if "main" in revision.refs:
                    return revision.commit_hash
    return None


def processor_source(logs: Sequence[Path], repo_id: str, pinned_revision: str, hub_cache: Path) -> dict[str, Any]:
    """Which VLM processor (text tokenizer) generation used: the pinned snapshot's bundled files, or the
    hub repository at ``main`` and the commit that resolved to in the cache."""
    if _log_mentions(logs, BUNDLED_PROCESSOR_LOG):
        return {"source": "checkpoint-bundled", "repo": repo_id, "revision": pinned_revision}
    return {"source": "hub", "repo": repo_id, "requested": "main",
            "resolved": main_revision_in_cache(repo_id, hub_cache)}


def _known(record: Mapping[str, Any]) -> bool:
    return record.get("source") != "hub" or record.get("resolved") is not None


def record_processor(out_dir: Path, record: Mapping[str, Any]) -> str | None:
    """Store the record in ``out_dir``; a problem line when an earlier generation in this folder used another
    (a record whose ``main`` commit could not be seen in the cache never replaces a known one)."""
    path = out_dir / SOURCES_FILE
    previous = json.loads(path.read_text(encoding="utf-8")).get("processor") if path.is_file() else None
    if previous is not None and _known(previous) and _known(record) and previous != dict(record):
        return (f"generation tokenizer changed between runs in {out_dir}: {previous} then {dict(record)}; "
                "videos made with both are mixed (use a new --out)")
    if previous is None or _known(record):
        write_atomic(path, json.dumps({"processor": dict(record)}, indent=1, sort_keys=True))
    return None
