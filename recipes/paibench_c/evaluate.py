"""Scoring with the pinned PAI-Bench-C evaluator (``compute_metrics.py calculate-metrics`` under torchrun).

GPU step (evaluation image; see the README for the command). No GPU test runs the evaluator itself; on CPU,
tests/test_pc_launch.py runs this launch end to end against test doubles of torchrun and compute_metrics.py.

Facts this module encodes (spec sections 1.2-1.5):
* the evaluator must run with ``conditional_generation/`` as its working directory: weights are read
  from ``checkpoint/<name>`` relative to the CWD and its ``decord.py`` shim must shadow the real decord;
* ``--gt_path`` must be writable: with ``--force_recompute_gt_*`` it overwrites ``sam2_pkls/`` and
  ``depth_npzs/`` there. So the GT side is a per-run work directory (:class:`GTCache`) whose ``videos/``
  and ``captions/`` are links to the read-only dataset and whose seg/depth files are the evaluator's own;
  the dataset's shipped pkl/npz files are never visible to it;
* GT seg and depth are computed once per (dataset revision, evaluator build): the first modality runs
  with the force flags, the files are then recorded by SHA-256, and later modalities reuse exactly those
  files (anything unrecorded or changed is deleted first, so the evaluator recomputes it). ``gt=force``
  recomputes in every modality, as upstream does;
* scoring never touches the network: HF and transformers are forced offline.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pinbench.core.config import RunConfig
from pinbench.core.files import read_json_object, sha256_file, write_atomic
from pinbench.core.pins import HFPin, URLPin
from pinbench.core.provenance import is_secret_name, printable, redact
from pinbench.ops.downloads import locate, verify_sha256
from pinbench.ops.watch import Watcher, files_since, wait_watched
from pinbench_recipes.paibench_c.generate import Collected
from pinbench_recipes.paibench_c.metrics_json import (
    CANNY_METRICS,
    EVALUATOR_METRICS,
    NULL_VALUE,
    MetricsFileError,
    ModalityMetrics,
    parse_metrics_json,
    task_id_of,
)

GT_DIRS = {"seg": ("sam2_pkls", ".pkl"), "depth": ("depth_npzs", ".npz")}
# Where the evaluator looks for each weight, relative to conditional_generation/ (get_checkpoint.sh).
WEIGHT_PATHS = {
    "sam2_hiera_large": "checkpoint/sam2/sam2_hiera_large.pt",
    "dover": "checkpoint/DOVER/DOVER.pth",
    "video_depth_anything_small": "checkpoint/video_depth_anything/video_depth_anything_vits.pth",
    "grounding_dino_tiny": "checkpoint/IDEA-Research/grounding-dino-tiny",
}
COMMIT_STAMP = ".pinbench-evaluator-commit"   # written by the Dockerfile next to conditional_generation/
REVISION_STAMP = ".pinbench-revision"          # written into the baked grounding-dino-tiny folder


class EvaluationError(RuntimeError):
    """The evaluator could not run or failed; one line naming what and where (log path)."""


class EvaluatorLike(Protocol):
    """What scoring drives: the installed evaluator (:class:`Evaluator`) or the fixture's test double.

    ``calculate_metrics`` is ``compute_metrics.py calculate-metrics``: it scores ``<videos_parent>/videos/*.mp4``
    against ``gt_dir``, leaves the GT seg/depth files there (recomputed when ``force_gt``), writes its per-video
    outputs beside ``videos/`` and ``output``; its log is ``<modality_dir>/evaluator.log``.
    """

    commit: str
    metrics: tuple[str, ...]   # the per_video fields it reports

    def describe(self) -> dict[str, Any]: ...

    def calculate_metrics(self, *, modality_dir: Path, videos_parent: Path, gt_dir: Path, output: Path,
                          task_ids: Sequence[str], gpu_ids: Sequence[str], force_gt: bool,
                          batch_size: int | None) -> list[str]: ...


@dataclass(frozen=True)
class Evaluator:
    """An installed evaluator: its ``conditional_generation`` folder and the Python that runs it."""

    root: Path
    python: Path
    commit: str
    metrics: ClassVar[tuple[str, ...]] = EVALUATOR_METRICS

    @property
    def torchrun(self) -> Path:
        return self.python.parent / "torchrun"

    def describe(self) -> dict[str, Any]:
        return {"evaluator": "trungtpham/pai-bench-c-cosmos3 compute_metrics.py", "dir": str(self.root),
                "commit": self.commit}

    def calculate_metrics(self, *, modality_dir: Path, videos_parent: Path, gt_dir: Path, output: Path,
                          task_ids: Sequence[str], gpu_ids: Sequence[str], force_gt: bool,
                          batch_size: int | None) -> list[str]:
        """Run the evaluator under torchrun from its folder, network off; its progress watched; the command.

        ``batch_size`` sets the fork's PAIBENCH_C_EVAL_BATCH_SIZE (tasks per batch per rank; RAM ~1 GB each).
        """
        n_gpus = max(1, min(len(task_ids), len(gpu_ids)))
        argv = evaluator_command(self, n_gpus=n_gpus, videos_parent=videos_parent, gt_dir=gt_dir, output=output,
                                 force_gt=force_gt)
        secretless = {k: v for k, v in os.environ.items() if not is_secret_name(k)}   # scoring needs no token
        env = {**secretless, "CUDA_VISIBLE_DEVICES": ",".join(gpu_ids[:n_gpus]),
               "TORCHELASTIC_ERROR_FILE": str(modality_dir / "metrics.err"),
               "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        if batch_size is not None:
            env["PAIBENCH_C_EVAL_BATCH_SIZE"] = str(batch_size)
        log = modality_dir / "evaluator.log"
        started = time.time()
        watcher = Watcher(f"evaluate {modality_dir.name}", lambda: files_since(videos_parent / "blur", started),
                          total=len(task_ids), detail=lambda: evaluator_steps(videos_parent, started))
        with open(log, "ab") as fh:
            proc = subprocess.Popen(argv, cwd=self.root, env=env, stdout=fh, stderr=subprocess.STDOUT)
        (code,) = wait_watched([(proc, log)], watcher)
        if code != 0 or not output.is_file():
            raise EvaluationError(f"evaluator failed for {modality_dir.name} (exit {code}); see {log}")
        return argv

    def check(self) -> None:
        """Refuse an evaluator that is missing or at another commit than the pin."""
        if not (self.root / "compute_metrics.py").is_file():
            raise EvaluationError(f"{self.root}: no compute_metrics.py; set PAIBENCH_C_EVALUATOR_DIR to the "
                                  "evaluator's conditional_generation folder")
        found = installed_commit(self.root)
        if found != self.commit:
            raise EvaluationError(f"{self.root}: evaluator is at commit {found or 'unknown'}, "
                                  f"the pin is {self.commit}")
        if not self.torchrun.is_file():
            raise EvaluationError(f"{self.torchrun}: torchrun not found next to the evaluator's Python")


def installed_commit(root: Path, stamp: Path | None = None) -> str | None:
    """The installed commit of a checkout: the image's stamp file if present, else ``git rev-parse HEAD``."""
    stamp = stamp or root.parent / COMMIT_STAMP
    if stamp.is_file():
        return stamp.read_text(encoding="utf-8").strip()
    try:
        proc = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (proc.stdout.strip() or None) if proc.returncode == 0 else None


def evaluator_from_env(commit: str) -> Evaluator:
    """PAIBENCH_C_EVALUATOR_DIR / PAIBENCH_C_EVALUATOR_PYTHON, defaulting to the evaluation image layout."""
    root = Path(os.environ.get("PAIBENCH_C_EVALUATOR_DIR", "/opt/pai-bench-c/conditional_generation"))
    python = Path(os.environ.get("PAIBENCH_C_EVALUATOR_PYTHON", sys.executable))
    return Evaluator(root=root, python=python, commit=commit)


def ensure_weights(evaluator: Evaluator, urls: Mapping[str, URLPin], grounding_dino: HFPin) -> dict[str, str]:
    """Check the four evaluator weights (sha256 where pinned); link missing ones from the fetch cache.

    Returns name -> "verified" / "unverified". The image bakes them in; a local evaluator checkout gets
    symlinks into the pinbench cache (``pinbench fetch paibench-c`` put them there).
    """
    states: dict[str, str] = {}
    for name, rel in WEIGHT_PATHS.items():
        target = evaluator.root / rel
        pin: URLPin | HFPin = grounding_dino if name == "grounding_dino_tiny" else urls[name]
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(locate(pin).absolute())
        if isinstance(pin, URLPin):
            if pin.sha256:
                verify_sha256(target, pin.sha256)
            states[name] = "verified" if pin.sha256 else "unverified"
        else:
            revision = (target / REVISION_STAMP).read_text().strip() if (target / REVISION_STAMP).is_file() \
                else target.resolve().name
            if revision != pin.revision:
                raise EvaluationError(f"{target}: grounding-dino-tiny is revision {revision}, the pin is "
                                      f"{pin.revision}")
            if not (target / "config.json").is_file():
                raise EvaluationError(f"{target}: no config.json (incomplete grounding-dino-tiny)")
            states[name] = "verified"
    return states


# --------------------------------------------------------------------------------------------- GT


@dataclass(frozen=True)
class GTCache:
    """The evaluator's writable ``--gt_path``: dataset links plus GT seg/depth it computed, by SHA-256."""

    root: Path
    key: str

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    def files(self, task_ids: Sequence[str]) -> list[str]:
        return [f"{folder}/{task}{ext}" for task in task_ids for folder, ext in GT_DIRS.values()]

    def prepare(self, dataset_dir: Path) -> None:
        """Create the folder with ``videos`` / ``captions`` links to the dataset (as the evaluator sees it)."""
        self.root.mkdir(parents=True, exist_ok=True)
        for sub in ("videos", "captions"):
            link = self.root / sub
            target = dataset_dir.absolute() / sub   # a relative target would resolve against the link's folder
            if link.is_symlink() and Path(os.readlink(link)) == target:
                continue
            if link.is_symlink() or link.is_file():
                link.unlink()
            elif link.exists():
                raise EvaluationError(f"{link}: expected a link to the dataset, found a folder")
            link.symlink_to(target, target_is_directory=True)
        for folder, _ in GT_DIRS.values():
            (self.root / folder).mkdir(exist_ok=True)

    def _manifest(self) -> dict[str, Any]:
        if not self.manifest_path.exists():
            return {"key": self.key, "files": {}, "computed_in": []}
        data = read_json_object(self.manifest_path)
        if data is None or not isinstance(data.get("files"), dict) or not isinstance(data.get("computed_in"), list):
            raise EvaluationError(f"{self.manifest_path}: not a GT manifest (an object with 'files' and "
                                  "'computed_in'); remove it and the GT seg/depth files are computed again")
        if data.get("key") != self.key:
            raise EvaluationError(f"{self.manifest_path}: GT cache for key {data.get('key')}, this run is {self.key}")
        return data

    def prune(self, task_ids: Sequence[str]) -> int:
        """Delete GT files that are not recorded with their exact SHA-256; return how many are verified."""
        recorded = self._manifest()["files"]
        verified = 0
        for rel in self.files(task_ids):
            path = self.root / rel
            if not path.exists():
                continue
            if recorded.get(rel) == sha256_file(path):
                verified += 1
            else:
                path.unlink()
        return verified

    def record(self, task_ids: Sequence[str], modality: str) -> None:
        """After a successful evaluation: remember every GT file it left, by SHA-256."""
        manifest = self._manifest()
        for rel in self.files(task_ids):
            path = self.root / rel
            if path.is_file():
                manifest["files"][rel] = sha256_file(path)
        manifest["computed_in"] = [*manifest["computed_in"], modality]
        write_atomic(self.manifest_path, json.dumps(manifest, indent=1, sort_keys=True))

    def summary(self) -> dict[str, Any]:
        manifest = self._manifest()
        digest = hashlib.sha256(json.dumps(manifest["files"], sort_keys=True).encode()).hexdigest()
        return {"key": self.key, "n_files": len(manifest["files"]), "files_sha256": digest,
                "computed_in": manifest["computed_in"]}


def gt_cache_key(*, dataset_revision: str | None, evaluator_commit: str, build: str) -> str:
    """Identity of the GT seg/depth: dataset revision x evaluator commit x evaluator build (image digest)."""
    text = json.dumps([dataset_revision, evaluator_commit, build])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------- one modality


def evaluator_command(evaluator: Evaluator, *, n_gpus: int, videos_parent: Path, gt_dir: Path,
                      output: Path, force_gt: bool) -> list[str]:
    """``torchrun ... compute_metrics.py calculate-metrics`` exactly as the upstream recipe runs it."""
    flag = "--force_recompute_gt_{}" if force_gt else "--no_force_recompute_gt_{}"
    return [str(evaluator.torchrun), "--standalone", "--nproc_per_node", str(n_gpus),
            "compute_metrics.py", "calculate-metrics",
            "--gt_path", str(gt_dir), "--videos_path", str(videos_parent), "--output_path", str(output),
            flag.format("seg"), flag.format("depth")]


def stamp_inputs(*, videos: Mapping[str, str], gt_key: str, gt_policy: str, evaluator_commit: str) -> dict[str, Any]:
    """What a metrics.json depends on; a stored result is reused only if these are unchanged."""
    return {"videos": dict(sorted(videos.items())), "gt_key": gt_key, "gt_policy": gt_policy,
            "evaluator_commit": evaluator_commit}


def is_current(modality_dir: Path, inputs: Mapping[str, Any], gt_files_sha256: str | None = None) -> bool:
    """True when metrics.json was produced by a finished evaluation of exactly these inputs.

    With ``gt_files_sha256`` (the reuse policy), the GT seg/depth files must also be the ones that
    evaluation used: a later forced recomputation of GT makes earlier modalities stale.
    """
    stamp, metrics = modality_dir / "eval_stamp.json", modality_dir / "metrics.json"
    data = read_json_object(stamp)
    if data is None or not metrics.is_file():
        return False
    if gt_files_sha256 is not None and data.get("gt_files_sha256") != gt_files_sha256:
        return False
    return data.get("inputs") == dict(inputs) and data.get("metrics_sha256") == sha256_file(metrics)


def stamp_gt(modality_dir: Path, gt_files_sha256: str) -> None:
    """Record which GT seg/depth files (by digest) a finished evaluation used, in its stamp."""
    path = modality_dir / "eval_stamp.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["gt_files_sha256"] = gt_files_sha256
    write_atomic(path, json.dumps(data, indent=1))


# The evaluator's per-task outputs in pipeline order (spec 1.4-1.5): resize -> SAM -> depth -> Canny -> blur.
EVALUATOR_STEPS = (("resized", "videos_orig_size", "*.mp4"), ("seg", "segmentation", "*.pkl"),
                   ("depth", "depth", "*.mp4"), ("canny", "canny", "*.mp4"), ("blur", "blur", "*.mp4"))


def evaluator_steps(modality_dir: Path, since: float) -> str:
    """How many tasks each evaluator step has written since ``since`` ("resized 30, seg 30, depth 12, ...")."""
    return ", ".join(f"{name} {files_since(modality_dir / folder, since, pattern)}"
                     for name, folder, pattern in EVALUATOR_STEPS)


PENDING = "pending"   # <modality>/pending/: the evaluator's folder when it scores some of the modality's videos


def staged(modality_dir: Path, tasks: Collection[str]) -> Path:
    """The folder whose ``videos/`` the evaluator is to score: the modality folder when its ``videos/`` holds the videos
    of ``tasks`` alone, else ``pending/``, whose ``videos/`` links to those. The evaluator scores every video of the
    folder it is given: it scored again each task whose record another run (the sample cache) or this directory kept.
    A ``pending/`` left by an evaluation that did not finish is removed first (its outputs are of no finished run)."""
    pending = modality_dir / PENDING
    if pending.is_dir() and not pending.is_symlink():
        shutil.rmtree(pending)
    elif os.path.lexists(pending):
        pending.unlink()
    if {p.stem for p in (modality_dir / "videos").glob("*.mp4")} == set(tasks):
        return modality_dir
    (pending / "videos").mkdir(parents=True)
    for task in sorted(tasks):   # relative: the same in a container that mounts the run directory elsewhere
        (pending / "videos" / f"{task}.mp4").symlink_to(Path("..", "..", "videos", f"{task}.mp4"))
    return pending


def merge_outputs(pending: Path, modality_dir: Path) -> None:
    """Move what the evaluator wrote beside ``pending/videos`` to the same place in the modality folder (a task's
    masks to ``segmentation/``, its visualisations), then remove ``pending/``: the folder reads the same however many
    videos the evaluator scored. EvaluationError, one line naming the path, where one cannot be moved there (a file
    planted at ``segmentation``: FileExistsError, a traceback); what is left stays in ``pending/`` until the next
    evaluation (``staged``)."""
    for folder, dirs, files in os.walk(pending):
        rel = Path(folder).relative_to(pending)
        if rel == Path("."):
            dirs[:] = [d for d in dirs if d != "videos"]
        target = modality_dir / rel
        if os.path.lexists(target) and not target.is_dir():
            raise EvaluationError(f"{target}: not a folder, where the evaluator's outputs go (its own are in "
                                  f"{pending} until the next evaluation); move it away")
        try:
            target.mkdir(exist_ok=True)
            for name in files:
                os.replace(Path(folder) / name, target / name)
        except OSError as exc:
            raise EvaluationError(f"{exc.filename2 or exc.filename}: {exc.strerror or exc}, moving the evaluator's "
                                  f"outputs from {pending}") from None
    try:
        shutil.rmtree(pending)
    except OSError as exc:
        raise EvaluationError(f"{exc.filename or pending}: {exc.strerror or exc}, removing {pending}") from None


def run_evaluator(evaluator: EvaluatorLike, *, modality_dir: Path, gt: GTCache, task_ids: Sequence[str],
                  gpu_ids: Sequence[str], force_gt: bool, inputs: Mapping[str, Any],
                  batch_size: int | None = None) -> Path:
    """Score the videos of ``task_ids`` in ``modality_dir/videos`` (``staged``) and write
    ``modality_dir/metrics.json`` plus its stamp, with the seconds the evaluation took."""
    metrics, stamp_path = modality_dir / "metrics.json", modality_dir / "eval_stamp.json"
    for path in (metrics, stamp_path):
        if path.is_dir() and not path.is_symlink():
            raise EvaluationError(f"{path}: is a directory, where the evaluation writes a file; remove it")
        path.unlink(missing_ok=True)
    videos_parent = staged(modality_dir, task_ids)
    started = time.monotonic()
    try:
        command = evaluator.calculate_metrics(modality_dir=modality_dir, videos_parent=videos_parent, gt_dir=gt.root,
                                              output=metrics, task_ids=task_ids, gpu_ids=gpu_ids, force_gt=force_gt,
                                              batch_size=batch_size)
    except BaseException as failed:   # its outputs merged all the same; the evaluator's error is said first
        if videos_parent != modality_dir:
            try:
                merge_outputs(videos_parent, modality_dir)
            except EvaluationError as merge:   # (raised in a finally, it hid the evaluator's)
                if isinstance(failed, EvaluationError):
                    raise EvaluationError(f"{failed}; {merge}") from None
        raise
    if videos_parent != modality_dir:
        merge_outputs(videos_parent, modality_dir)
    seconds = time.monotonic() - started
    if not metrics.is_file():
        raise EvaluationError(f"{metrics}: the evaluator finished without writing it")
    stamp = {"inputs": dict(inputs), "metrics_sha256": sha256_file(metrics), "force_gt": force_gt,
             "command": command, "seconds": seconds}
    write_atomic(stamp_path, json.dumps(stamp, indent=1))   # a cut stamp would throw the evaluation away
    return metrics


def stamped_seconds(modality_dir: Path) -> float:
    """The seconds the evaluation in ``modality_dir`` took, as its stamp says (0: a stamp written before it said)."""
    seconds = (read_json_object(modality_dir / "eval_stamp.json") or {}).get("seconds")
    ok = type(seconds) in (int, float) and math.isfinite(seconds) and seconds >= 0
    return float(seconds) if ok else 0.0


# ------------------------------------------------------------------------------------ a run's evaluation


@dataclass(frozen=True)
class Evaluation:
    """What scoring did: why a modality (``<modality>``) or one of its videos (``<modality>/<task>``) was not scored,
    and each task's share of the evaluator's seconds (every modality's evaluation split evenly over the videos it
    scored, summed), which its record carries."""

    errors: dict[str, str]
    seconds: dict[str, float]


def score_all(cfg: RunConfig, evaluator: EvaluatorLike, gt: GTCache, collected: Mapping[str, Mapping[str, Collected]],
              task_ids: Sequence[str], gpu_ids: Sequence[str]) -> Evaluation:
    """Run the evaluator per modality over the videos of ``task_ids`` alone (the tasks no stored record stands for),
    unless its metrics.json is current."""
    options = cfg.options
    errors: dict[str, str] = {}
    seconds = dict.fromkeys(task_ids, 0.0)
    for modality in options.modalities:
        videos = {t: c.sha256 for t in task_ids if (c := collected[modality][t]).ok and c.sha256}
        for task in task_ids:
            if not (c := collected[modality][task]).ok:
                errors[f"{modality}/{task}"] = c.error or "no valid video"
        if not videos:
            errors[modality] = "no valid generated video to score"
            continue
        inputs = stamp_inputs(videos=videos, gt_key=gt.key, gt_policy=options.gt, evaluator_commit=evaluator.commit)
        modality_dir = cfg.out_dir / modality
        reused_gt = gt.summary()["files_sha256"] if options.gt == "reuse" else None
        if not is_current(modality_dir, inputs, reused_gt):
            verified = gt.prune(task_ids)
            force = options.gt == "force" or verified == 0
            try:
                run_evaluator(evaluator, modality_dir=modality_dir, gt=gt, task_ids=list(videos),
                              gpu_ids=list(gpu_ids), force_gt=force, inputs=inputs,
                              batch_size=options.eval_batch_size)
                gt.record(task_ids, modality)
                stamp_gt(modality_dir, gt.summary()["files_sha256"])
            except EvaluationError as exc:
                errors[modality] = str(exc)
                continue
        share = stamped_seconds(modality_dir) / len(videos)
        for task in videos:
            seconds[task] += share
    return Evaluation(errors, seconds)


def parse_all(run_dir: Path, modalities: Sequence[str], task_ids: Sequence[str], errors: dict[str, str],
              metrics: Sequence[str]) -> dict[str, ModalityMetrics | None]:
    """Each modality's metrics.json read per task (None, with its error, when it has none or a bad one)."""
    parsed: dict[str, ModalityMetrics | None] = {}
    for modality in modalities:
        if modality in errors:
            parsed[modality] = None
            continue
        try:
            parsed[modality] = found = parse_metrics_json(run_dir / modality / "metrics.json", task_ids, metrics)
        except MetricsFileError as exc:
            errors[modality] = str(exc)
            parsed[modality] = None
            continue
        named, unnamed = canny_errors(run_dir / modality / "evaluator.log")
        for task, reasons in found.reasons.items():
            video, why = named.get(task, (f"{task}.mp4", unnamed))
            if why and all(reasons.get(metric) == NULL_VALUE for metric in CANNY_METRICS):
                reasons.update(dict.fromkeys(CANNY_METRICS, printable(redact(   # the log's words: a record keeps them
                    f"null in metrics.json: the evaluator's Canny step raised on {modality}/videos/{video}: {why}"))))
    return parsed


_CANNY_ERROR = re.compile(r"Got exception (?:(?P<video>[^\s:/]+\.mp4): )?(?P<why>.+) for compute_canny_error_video_f1$")


def canny_errors(log: Path) -> tuple[dict[str, tuple[str, str]], str]:
    """Why the evaluator's Canny step raised: task -> (its video's name, why) from the lines that name the video (the
    test double's), and the reasons of the lines that name none (upstream's "Got exception <e> for
    compute_canny_error_video_f1"), joined. A task whose three Canny values are null was one of the latter: its
    failure named neither its video nor a reason ("null/NaN in metrics.json"), where the log held the reason."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return {}, ""
    matches = [m for line in text.splitlines() if (m := _CANNY_ERROR.match(line))]
    unnamed = sorted({m["why"] for m in matches if m["video"] is None})
    return ({task_id_of(Path(m["video"]).stem): (m["video"], m["why"]) for m in matches if m["video"] is not None},
            unnamed[0] if len(unnamed) == 1 else f"one of: {'; '.join(unnamed)}" if unnamed else "")
