"""Generation with cosmos-framework behind pinbench's generator protocol (``cosmos3``), and byte-exact collection of
the rollouts for the evaluator.

GPU step (needs the generation image and 1+ GPUs; exercised by the GPU CI, see tests/test_pc_generate.py; on CPU,
tests/test_pc_launch.py runs both launches against test doubles of torchrun and cosmos-framework).

``Cosmos3`` makes every rollout a run still needs in one launch per modality (``generate_batch``): each request's
row (``requests.py``) with its files where the run staged them, then ``raw/<task>/vision.mp4`` renamed, byte for
byte, to the place the run checks it (121 frames, the 720-tier size, decoding to its last frame) and keeps it.
Collection copies each kept rollout to ``<modality>/videos/<task>.mp4`` byte for byte (no re-encode: DOVER, SAM and
depth read these bytes) and checks the copy's SHA-256 against the source.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pinbench.core.config import device_file_name
from pinbench.core.files import (
    FileState,
    atomic_path,
    loads_finite_json,
    read_data_file,
    read_json_object,
    sha256_file,
    write_atomic,
    write_if_changed,
)
from pinbench.core.generation import Capabilities, Request, Signature
from pinbench.core.inputs import InputDigests, entry_problem
from pinbench.core.runner import Reason
from pinbench.media.video import is_valid_video
from pinbench.ops.watch import Watcher, wait_watched
from pinbench_recipes.paibench_c.rows import NUM_FRAMES, write_jsonl

MIN_FRAMES = NUM_FRAMES
LAUNCHES = ("workers", "torchrun")
INFERENCE_MODULE = "cosmos_framework.scripts.inference"
# Removed from the workers' environment, as upstream does: a notebook's or the host's Python settings
# must not leak into the framework's interpreter.
_SCRUBBED_ENV = ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "MPLBACKEND")


class GenerationError(Reason):
    """Generation or collection failed; finished samples stay on disk for the next run. A ``Reason``: its message
    (the launch's log and exit code) is what a failed sample's record says, without this class's name."""


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
        # a cut, hand-edited or unreadable cache is an empty one: every video is decoded again
        self._known: dict[str, list[int]] = (read_json_object(path) if path is not None else None) or {}

    def is_valid(self, video: Path, min_frames: int) -> bool:
        try:
            st = video.stat()
        except OSError:   # absent, a dangling link, a symlink loop (ELOOP ended the run), unreadable
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


def _copy_exact(src: Path, dst: Path, expected_sha: str, digests: InputDigests) -> None:
    """Copy ``src`` to ``dst`` and check the copy's bytes before it takes the name; ``digests`` keeps what they
    hashed to, so that a rerun does not read the copy again."""
    with atomic_path(dst) as tmp:
        shutil.copyfile(src, tmp)
        hashed = FileState.of(tmp.lstat())
        actual = sha256_file(tmp)
        if actual != expected_sha:
            raise GenerationError(f"{dst}: copy of {src} has sha256 {actual}, source {expected_sha}")
    digests.keep_renamed(dst, hashed, actual)


def collect_videos(names: Sequence[str], rollouts: Path, videos_dir: Path, digests: InputDigests,
                   min_frames: int = MIN_FRAMES, cache: ValidityCache | None = None,
                   failures: Mapping[str, str] | None = None,
                   never: Mapping[str, str] | None = None) -> dict[str, Collected]:
    """Copy every valid rollout ``<name>.mp4`` of ``rollouts`` to ``videos/<name>.mp4`` byte for byte; report each.

    A collected video that already equals its rollout is kept. Both digests come from the run directory's
    ``digests``, which read a file only when its state changed (``FileState``: an edit in place that sets the mtime
    back moves the ctime, a file renamed over it has another inode): the generation step hashed each rollout it kept,
    and a copy is remembered as it is made, so an unchanged rerun reads neither. Files in ``videos/`` that belong to
    no name (an earlier run's without ``--limit``) stay: the evaluator is given the videos of its tasks alone
    (``evaluate.staged``). ``failures``: why a rollout was not generated or is not as its request asks, said
    for its task, which fails even where a file stands (an earlier generator's, or one swapped in after it was kept).
    ``never``: why no run generated a task's rollout (never made, so missing, not a failure of generation: said
    ``missing: <why>``).
    """
    videos_dir.mkdir(parents=True, exist_ok=True)
    cache = cache or ValidityCache()
    results: dict[str, Collected] = {}
    for name in names:
        src, dst = rollouts / f"{name}.mp4", videos_dir / f"{name}.mp4"
        # what stands there when it is no regular file (a symlink loop, a folder, a FIFO), said as itself
        problem = (failures or {}).get(name) or (entry_problem(src)[0] if os.path.lexists(src) else "no rollout")
        if problem is None and not cache.is_valid(src, min_frames):
            problem = f"invalid rollout (undecodable or < {min_frames} frames)"
        if problem is not None:
            dst.unlink(missing_ok=True)
            why = (never or {}).get(name)
            error = f"missing: {why}" if why else f"generation failed: {problem} ({src})"
            results[name] = Collected(name, None, error=error)
            continue
        src_sha = digests.sha256(src)
        if digests.regular(dst) == src_sha:
            results[name] = Collected(name, src_sha)
            continue
        _copy_exact(src, dst, src_sha, digests)
        results[name] = Collected(name, src_sha, copied=True)
    return results


def row_key(row: Mapping[str, Any], dataset_root: Path) -> dict[str, Any]:
    """A cosmos-framework row with every path under ``dataset_root`` (as the row names it: absolute, or relative to
    the working directory when the run directory is) made relative to it."""
    prefix = f"{Path(dataset_root).as_posix()}/"

    def relative(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {key: relative(item) for key, item in value.items()}
        return value.removeprefix(prefix) if isinstance(value, str) else value
    return relative(row)


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
                       self.framework_dir, log_dir / f"worker_{device_file_name(gpu)}.log", shard)
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


class Cosmos3:
    """``cosmos3``: Cosmos3 through cosmos-framework behind the generator protocol (module docstring)."""

    capabilities = Capabilities(kinds=frozenset({"control-video"}), conditioning=frozenset({"context", "control"}))

    def __init__(self, framework: CosmosFrameworkGenerator, model: str, weights: str) -> None:
        self.framework, self.model, self.weights = framework, model, weights

    def signature(self) -> Signature:
        return Signature(model=self.model, weights=self.weights,
                         settings={"launch": self.framework.launch, "extra_args": list(self.framework.extra_args),
                                   "sampling": "each request's row (the seed's Sampling Settings)"})

    def generate(self, request: Request, out: Path) -> None:
        self.generate_batch([(request, out)])

    def generate_batch(self, pairs: Sequence[tuple[Request, Path]]) -> None:
        """One launch per modality over every request of it; each rollout made renamed to its ``out``. A failed
        launch does not stop the next modality's; GenerationError names every one that failed."""
        failed = []
        for modality in dict.fromkeys(request.settings["modality"] for request, _ in pairs):
            batch = [(request, out) for request, out in pairs if request.settings["modality"] == modality]
            work = batch[0][1].parent
            rows = [cosmos_row(request) for request, _ in batch]
            try:
                self.framework.generate(rows, work / "raw", work)
            except GenerationError as exc:
                failed.append(f"{modality}: {exc}")
            for (_, out), row in zip(batch, rows, strict=True):
                made = vision_path(work / "raw", row["name"])
                if made.is_file():
                    os.replace(made, out)
        if failed:
            raise GenerationError("; ".join(failed))


def cosmos3(checkpoint_dir: str, revision: str, framework_dir: str = "/opt/cosmos-framework", python: str = "",
            launch: str = "workers", gpus: str = "0") -> Cosmos3:
    """``--generator cosmos3 -g checkpoint_dir=DIR -g revision=REV [-g gpus=0,1 -g launch=torchrun]``: the same
    generator a PAI-Bench-C run uses by default, named outside it (``revision``: the snapshot's pinned commit)."""
    framework = Path(framework_dir)
    return Cosmos3(CosmosFrameworkGenerator(framework_dir=framework,
                                            python=Path(python) if python else framework / ".venv" / "bin" / "python",
                                            checkpoint_dir=Path(checkpoint_dir), gpu_ids=gpus.split(","),
                                            launch=launch), model=f"Cosmos3 {checkpoint_dir} through cosmos-framework",
                   weights=revision)


def cosmos_row(request: Request) -> dict[str, Any]:
    """cosmos-framework's input row of a request: its row, with the files where the run staged them."""
    row = json.loads(json.dumps(request.settings["row"]))
    row["vision_path"] = str(request.path("context"))
    control = request.path("control")
    if control is not None:
        row[request.settings["modality"]]["control_path"] = str(control)
    return row


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


def _recorded_processor(path: Path) -> dict[str, Any] | None:
    """The processor record an earlier generation kept at ``path``, None when none did; ValueError (a FileError
    names the file) for what is no such record."""
    if not os.path.lexists(path):
        return None
    data = loads_finite_json(read_data_file(path))
    processor = data.get("processor") if isinstance(data, dict) else None
    if not isinstance(processor, dict) or not all(v is None or isinstance(v, str) for v in processor.values()):
        raise ValueError(f"{path}: not a record of the generation's tokenizer (expected an object whose "
                         "'processor' is an object of strings)")
    return processor


def record_processor(out_dir: Path, record: Mapping[str, Any]) -> str | None:
    """Store the record in ``out_dir``; a problem line when an earlier generation in this folder used another
    (a record whose ``main`` commit could not be seen in the cache never replaces a known one)."""
    path = out_dir / SOURCES_FILE
    try:
        previous = _recorded_processor(path)
    except ValueError as exc:   # edited or damaged by hand: said, and left for the person to look at
        return (f"{exc if str(path) in str(exc) else f'{path}: {exc}'}; which tokenizer earlier generations in "
                f"{out_dir} used is unknown, and this run's is not recorded (remove the file to record it)")
    if previous is not None and _known(previous) and _known(record) and previous != dict(record):
        return (f"generation tokenizer changed between runs in {out_dir}: {previous} then {dict(record)}; "
                "videos made with both are mixed (use a new --out)")
    if previous is None or _known(record):
        write_atomic(path, json.dumps({"processor": dict(record)}, indent=1, sort_keys=True))
    return None
