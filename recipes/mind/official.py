"""The official run: ``src/process.py`` from a working directory laid out the way it needs.

What ``process.py`` (8f9c59c) assumes, and how each invocation here provides it:

* ``./vipe`` relative to the CWD is a ViPE checkout (``vipe_to_colmap`` runs ``python scripts/...`` there),
  the ``vipe`` CLI and the environment's ``python`` are first on PATH, ``src/`` is on ``PYTHONPATH``;
* ``MIND_CACHE_DIR`` holds the three weights it would otherwise ``wget`` (MUSIQ-SPAQ, the LAION head,
  CLIP ViT-L/14) and its crop and ViPE caches, which are keyed by the *path* of a video: a regenerated
  video at the same path would reuse stale poses. Every invocation gets a fresh cache; the weights are
  linked in from the verified, staged copies, so ``wget`` is never reached;
* it writes ``images.txt`` into the GT sample directory when the shipped one has fewer than 97 poses:
  it gets a GT view of real directories with links to the read-only GT video and action.json and a
  *copy* of images.txt (a link would let ``shutil.copy2`` write through into the original);
* it scores whatever the test root holds: it gets a view with exactly the planned samples (links), all
  directories it lists present;
* its ViPE subprocess sets ``CUDA_VISIBLE_DEVICES`` to the worker's *index*, overriding any parent mask:
  the GPUs must be visible as 0..n-1, and a parent mask that is not that is refused;
* a worker that dies (OOM, segfault) leaves the pool waiting forever: an outer timeout kills the whole
  process group.

process.py itself runs only on the GPU CI; on CPU, tests/test_mind_process_py.py runs this launch end to end
against a test double of process.py in a fake MIND checkout, a hung one killed at the outer timeout included
(its pool's workers and their subprocesses, which ignore SIGTERM, gone with it).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pinbench.core.files import exclusive, write_atomic
from pinbench.core.provenance import is_secret_name, redact
from pinbench.core.rundir import process_alive, this_process
from pinbench.ops.network import fetch_command
from pinbench_recipes.mind.layout import (
    GENERATED_VIDEO,
    GT_ACTIONS,
    GT_POSES,
    GT_VIDEO,
    PERSPECTIVES,
    ContinuationSample,
    MirrorSample,
    Sample,
    requested_tests,
)

# Where process.py's get_*_path() look for the weights it would download (relative to MIND_CACHE_DIR).
CACHE_WEIGHTS = {
    "musiq_spaq": "pyiqa_model/musiq_spaq_ckpt-358bb6af.pth",
    "aesthetic_head": "vitl_model/sa_0_4_vit_l_14_linear.pth",
    "clip_vit_l14": "clip_model/ViT-L-14.pt",
}


def cache_weights_read(metrics: Sequence[str]) -> tuple[str, ...]:
    """The CACHE_WEIGHTS process.py loads for ``metrics``: only ``visual`` loads MUSIQ, the LAION head and CLIP.
    Its start-up pre-download tries all three whatever is asked, but prints and ignores a failure, so an
    ``lcm`` or ``action`` run without them scores the same."""
    return tuple(CACHE_WEIGHTS) if "visual" in metrics else ()


def reads_dino(metrics: Sequence[str]) -> bool:
    """process.py loads the DINOv3 snapshot (``--dino_path``) for ``dino`` only."""
    return "dino" in metrics


COMMIT_STAMP = ".pinbench-commit"       # written by the Dockerfile next to the MIND checkout
DEFAULT_TIMEOUT_S = 24 * 3600           # WorldFoundry's bound; a hung pool never finishes on its own
KILL_GRACE_S = 30


class OfficialRunError(RuntimeError):
    """The official run cannot be set up as asked (one line)."""


@dataclass(frozen=True)
class Runtime:
    """The pinned official environment: the MIND checkout, its interpreter and every staged weight."""

    mind_dir: Path                 # CSU-JPG/MIND at the pin, ViPE submodule checked out in vipe/
    python: Path                   # the environment process.py and ViPE run in
    dino_dir: Path | None          # DINOv3 ViT-B/16 snapshot (HF format) passed as --dino_path; None: not read
    weights: Mapping[str, Path]    # CACHE_WEIGHTS name -> verified file, those the metrics read
    torch_home: Path               # pre-warmed torch hub: LPIPS AlexNet, GeoCalib, SAM, AOT, VDA, GroundingDINO
    hf_home: Path                  # pre-warmed HF cache: UniDepthV2, bert-base-uncased

    def problems(self, expected_commit: str) -> list[str]:
        """One line per thing the official run would trip on, before anything is started."""
        problems = []
        stamp = self.mind_dir / COMMIT_STAMP
        found = stamp.read_text().strip() if stamp.is_file() else None
        if found != expected_commit:
            problems.append(f"{self.mind_dir}: MIND checkout is at {found or 'an unknown commit'}, the pin is "
                            f"{expected_commit} (use the recipe image, or set MIND_DIR)")
        for path, what in [(self.mind_dir / "src" / "process.py", "process.py"),
                           (self.mind_dir / "vipe" / "scripts" / "vipe_to_colmap.py", "ViPE checkout"),
                           (self.python, "official Python")]:
            if not path.is_file():
                problems.append(f"{path}: {what} not found")
        if self.dino_dir is not None and not (self.dino_dir / "config.json").is_file():
            problems.append(f"{self.dino_dir / 'config.json'}: DINOv3 snapshot not found")
        for name, path in self.weights.items():
            if not path.is_file():
                problems.append(f"{path}: staged weight {name!r} not found (`{fetch_command('mind')}`)")
        if shutil.which("ffmpeg") is None:
            problems.append("ffmpeg: not on PATH (action.py crops videos with it)")
        return problems


@dataclass(frozen=True)
class WorkDir:
    """One invocation's directory: views, fresh cache, CWD, output, log and the plan it was started with."""

    root: Path

    @property
    def gt_root(self) -> Path:
        return self.root / "gt"

    @property
    def test_root(self) -> Path:
        return self.root / "generated"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def cwd(self) -> Path:
        return self.root / "cwd"

    @property
    def output(self) -> Path:
        return self.root / "Result.json"

    @property
    def log(self) -> Path:
        return self.root / "process.log"

    @property
    def plan(self) -> Path:
        return self.root / "plan.json"

    @property
    def owner(self) -> Path:
        """The invocation that made it (pid, host, start time): tells a live one from a killed one."""
        return self.root / "owner.json"

    @property
    def finished(self) -> Path:
        """Written when the invocation ended (or its salvaged samples were taken over): never swept."""
        return self.root / "finished.json"

    @property
    def imported(self) -> Path:
        """What importing its Result.json found (source, counts, failures, stale copies, unexpected records), as
        the scorecard names it: written once, so a later run that reuses these scores names them the same."""
        return self.root / "imported.json"


LIVE, ELSEWHERE, KILLED, FINISHED = "live", "elsewhere", "killed", "finished"
STAGING_PREFIX = ".run-new-"


def invocation_state(work: WorkDir) -> str:
    """``finished``; ``live`` (its process runs: another shard of this run); ``elsewhere`` (made on another host:
    cannot be checked); ``killed`` (its process is gone, or it names none: made before owners were recorded)."""
    if work.finished.is_file():
        return FINISHED
    try:
        owner = json.loads(work.owner.read_text())
    except (OSError, ValueError):
        return KILLED
    alive = process_alive(owner) if isinstance(owner, dict) else False
    return LIVE if alive else ELSEWHERE if alive is None else KILLED


def mark_finished(work: WorkDir, how: str) -> None:
    write_atomic(work.finished, json.dumps({"how": how, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
                 + "\n")


def work_dirs(parent: Path, *, staging: bool = False) -> list[WorkDir]:
    """Every ``run-NNN`` invocation directory under ``parent``, oldest first (``staging``: the ones not yet
    renamed into place, which only a process killed at that instant leaves)."""
    if not parent.is_dir():
        return []
    pattern = f"{STAGING_PREFIX}*" if staging else "run-[0-9][0-9][0-9]"
    return [WorkDir(root) for root in sorted(parent.glob(pattern)) if root.is_dir()]


def _link(target: Path, link: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target.resolve())


def new_work_dir(parent: Path) -> WorkDir:
    """``parent/run-NNN``, the next free number, created atomically with its owner inside (a staging directory
    renamed into place: a rename onto an existing, never empty, run-NNN fails), so two runs never share one and
    no process ever sees one without its owner."""
    parent.mkdir(parents=True, exist_ok=True)
    with creating_work_dirs(parent):   # a shard sweeping killed staging directories must not take this one
        staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=parent))
        os.chmod(staging, parent.stat().st_mode & 0o777)   # mkdtemp's 0700 would differ from the folder around it
        write_atomic(WorkDir(staging).owner, json.dumps(this_process()) + "\n")
        for number in range(1, 10_000):
            root = parent / f"run-{number:03d}"
            if root.exists():
                continue
            try:
                os.rename(staging, root)
            except OSError:      # taken meanwhile by another process (ENOTEMPTY / EEXIST)
                continue
            return WorkDir(root)
        shutil.rmtree(staging, ignore_errors=True)
    raise OfficialRunError(f"{parent}: no free run-NNN directory")


def creating_work_dirs(parent: Path) -> contextlib.AbstractContextManager[None]:
    """The lock held while a work directory is staged and renamed into place, and while staging directories are
    swept: shards of one run share ``parent``, and a staging directory has no owner until its creator writes one
    (a sweep in that instant took a live shard's directory from under it: seen on Slurm)."""
    return exclusive(parent.parent / f".{parent.name}.lock")   # beside it: its listing stays the work directories


def lay_out(work: WorkDir, samples: Sequence[Sample], *, metrics: Sequence[str], runtime: Runtime,
            task_hashes: Mapping[str, str]) -> None:
    """Fill a work directory: GT view, generated view, fresh cache with the staged weights, CWD, plan."""
    for perspective in PERSPECTIVES:
        for test in requested_tests(metrics):
            (work.test_root / perspective / test).mkdir(parents=True, exist_ok=True)
            if test != "mirror_test":
                (work.gt_root / perspective / "test" / test).mkdir(parents=True, exist_ok=True)
    planned = []
    for sample in samples:
        key = sample.key
        if isinstance(sample, ContinuationSample):
            if sample.video is None:
                continue
            gt_dir = work.gt_root / key.perspective / "test" / key.test_type / key.path
            gt_dir.mkdir(parents=True)
            _link(sample.gt_dir / GT_VIDEO, gt_dir / GT_VIDEO)
            _link(sample.gt_dir / GT_ACTIONS, gt_dir / GT_ACTIONS)
            if (sample.gt_dir / GT_POSES).is_file():
                shutil.copyfile(sample.gt_dir / GT_POSES, gt_dir / GT_POSES)   # writable: never a link
            _link(sample.video, work.test_root / key.perspective / key.test_type / key.path / GENERATED_VIDEO)
        elif isinstance(sample, MirrorSample):
            for video in sample.videos:
                _link(video.path, work.test_root / key.perspective / key.test_type / key.path / video.name)
        planned.append(key.sample_id)
    for name, path in runtime.weights.items():
        _link(path, work.cache / CACHE_WEIGHTS[name])
    work.cwd.mkdir(parents=True, exist_ok=True)
    (work.cwd / "vipe").symlink_to((runtime.mind_dir / "vipe").resolve())
    work.plan.write_text(json.dumps({"samples": {s: task_hashes[s] for s in planned},
                                     "metrics": list(metrics)}, indent=1) + "\n")


def gpu_mask(gpus: int, parent_mask: str | None) -> str:
    """``0,1,...,gpus-1``; refuses a parent mask under which ViPE (mask = worker index) hits other GPUs."""
    if gpus < 1:
        raise OfficialRunError("process.py needs at least one GPU (with 0 its pool has no worker and it crashes)")
    wanted = [str(i) for i in range(gpus)]
    if parent_mask is not None and parent_mask.strip():
        visible = [g.strip() for g in parent_mask.split(",") if g.strip()]
        if len(visible) < gpus:
            raise OfficialRunError(f"CUDA_VISIBLE_DEVICES={parent_mask} shows {len(visible)} GPU(s), {gpus} asked")
        if visible[:gpus] != wanted:
            raise OfficialRunError(
                f"CUDA_VISIBLE_DEVICES={parent_mask}: process.py's ViPE step sets CUDA_VISIBLE_DEVICES to the "
                "worker index, so under this mask it would run on other GPUs; expose the GPUs as 0..n-1 "
                "(e.g. docker --gpus '\"device=4,5\"' and no mask)")
    return ",".join(wanted)


def command(work: WorkDir, runtime: Runtime, *, metrics: Sequence[str], video_max_time: int | None,
            gpus: int, parent_env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """(argv, env) of process.py for this work directory; secrets in ``parent_env`` are not passed on."""
    argv = [str(runtime.python), str(runtime.mind_dir / "src" / "process.py"),
            "--gt_root", str(work.gt_root), "--test_root", str(work.test_root),
            "--num_gpus", str(gpus), "--metrics", ",".join(metrics), "--output", str(work.output)]
    if runtime.dino_dir is not None:
        argv += ["--dino_path", str(runtime.dino_dir)]
    if video_max_time is not None:
        argv += ["--video_max_time", str(video_max_time)]
    env = {k: v for k, v in parent_env.items() if not is_secret_name(k)}
    env.update({
        "MIND_CACHE_DIR": str(work.cache),
        "PYTHONPATH": str(runtime.mind_dir / "src"),
        "CUDA_VISIBLE_DEVICES": gpu_mask(gpus, parent_env.get("CUDA_VISIBLE_DEVICES")),
        "PATH": os.pathsep.join([str(runtime.python.parent), parent_env.get("PATH", os.defpath)]),
        "TORCH_HOME": str(runtime.torch_home),
        "HF_HOME": str(runtime.hf_home),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
    })
    return argv, env


@dataclass(frozen=True)
class Execution:
    returncode: int | None      # None when it was killed at the timeout
    seconds: float
    timed_out: bool


def execute(work: WorkDir, argv: Sequence[str], env: Mapping[str, str], *, timeout_s: float) -> Execution:
    """Run process.py in its own process group, log to ``work.log``; kill the group at the timeout (GPU CI)."""
    started = time.monotonic()
    with work.log.open("ab") as log:
        log.write(redact(f"$ {' '.join(argv)}\n").encode())
        log.flush()
        proc = subprocess.Popen(list(argv), cwd=work.cwd, env=dict(env), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            returncode: int | None = proc.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            returncode, timed_out = None, True
        except BaseException:
            _kill_group(proc)
            raise
    return Execution(returncode, time.monotonic() - started, timed_out)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group (pool workers, manager, ViPE), SIGKILL what is left after a grace period."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=KILL_GRACE_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)   # stragglers too: the leader may have gone first
    proc.wait()


def earlier_runs(parent: Path) -> list[tuple[WorkDir, dict[str, str]]]:
    """Earlier invocations under ``parent`` with their planned {sample id: task hash}, oldest first.

    A run killed mid-way leaves the Result.json process.py rewrote after every finished sample; a rerun
    imports from it the samples whose inputs are unchanged (same task hash) instead of scoring them again.
    """
    found = []
    for work in work_dirs(parent):
        try:
            plan = json.loads(work.plan.read_text())
            samples = plan["samples"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(samples, dict) and work.output.is_file():
            found.append((work, {str(k): str(v) for k, v in samples.items()}))
    return found
