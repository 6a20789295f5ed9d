"""Step 1 of the procedure: what a run reads, where it comes from, and how ``pinbench fetch`` gets it.

A run is one of three kinds: the fixture (synthetic data and score files, CPU), score-only (``-o scores=``:
Script 2 over any method's official files) or Script 1 + Script 2 for a checkpoint this recipe can run
(``SCRIPT1_CHECKPOINTS``). The data files always come from the pinned manifest (or a local copy checked
against it); Script 1 runs also need the model snapshots (the processor always from the base Instruct
repo, as t2v_metrics does) and the videos the loaded samples name.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pinbench.core.config import RecipeError, RunConfig
from pinbench.core.files import tree_fingerprint
from pinbench.core.options import did_you_mean
from pinbench.core.pins import HFPin, Pins, PinsError, load_pins
from pinbench.core.recipe import get_recipe
from pinbench.ops.downloads import FetchError, NotFetchedError, PinMismatchError, UnresolvedPinError, fetch_hf, locate
from pinbench.ops.machine_pins import MachinePinsError, apply_machine_pins, machine_pins_for
from pinbench.ops.machine_pins import pins_for_provenance as effective_pins_data
from pinbench_recipes.camerabench import data_files
from pinbench_recipes.camerabench.dataset import (
    CameraBenchData,
    DatasetError,
    limit_dataset,
    load_dataset,
    official_count_problems,
)
from pinbench_recipes.camerabench.official_json import Script1Outputs, read_score_dir
from pinbench_recipes.camerabench.videos import VideoSet, VideoSetError, locate_videos

PINS_PATH = Path(__file__).resolve().parent / "pins.yaml"
PROCESSOR_PIN = "qwen2_5_vl_7b_instruct"
VIDEOS_PIN = "videos"
_INPUT_ERRORS = (DatasetError, data_files.DataFilesError, VideoSetError, NotFetchedError, UnresolvedPinError,
                 FetchError, PinMismatchError, PinsError)


@dataclass(frozen=True)
class Script1Model:
    """A checkpoint this recipe runs Script 1 for, with the names upstream's files carry."""

    weights_pin: str  # pins.yaml huggingface entry of the weights
    model_name: str  # t2v_metrics --model
    checkpoint: str | None  # t2v_metrics --checkpoint (None: the base weights)


SCRIPT1_CHECKPOINTS = {
    "qwen2.5-vl-7b": Script1Model("qwen2_5_vl_7b_instruct", "qwen2.5-vl-7b", None),
    "qwen2.5-vl-7b-cam-motion": Script1Model("qwen2_5_vl_7b_cam_motion", "qwen2.5-vl-7b",
                                             "chancharikm/qwen2.5-vl-7b-cam-motion"),
}


def other_model(checkpoint: str, sources: Sequence[Mapping[str, Any]]) -> str | None:
    """Why the score files read (``Script1Outputs.sources``: one model, ``read_score_dir`` checks) are not of
    ``checkpoint``, naming the first file and both names; None when they are or name no model. Files of a checkpoint
    this recipe runs carry its names exactly (``SCRIPT1_CHECKPOINTS``); of another, ``checkpoint`` is their
    ``model_name``, their ``checkpoint`` or its last path part, case aside. Why: gpt-4o's files run as ``--checkpoint
    qwen2.5-vl-7b`` were scored and diffed against Qwen's leaderboard row without a word."""
    if not sources or sources[0].get("model_name") is None and sources[0].get("checkpoint") is None:
        return None
    first = sources[0]
    name, ckpt = first.get("model_name"), first.get("checkpoint")
    known = SCRIPT1_CHECKPOINTS.get(checkpoint)
    if known is not None:
        same = (name, ckpt) == (known.model_name, known.checkpoint)
    else:
        same = checkpoint.lower() in {v.lower() for v in (name, ckpt, ckpt and PurePosixPath(ckpt).name) if v}
    if same:
        return None
    return (f"{first['file']}: the score files are of model {name!r}" + (f" checkpoint {ckpt!r}" if ckpt else "")
            + f", not of --checkpoint {checkpoint!r}")


def input_error(exc: Exception) -> RecipeError:
    """Any input problem as the one-line error the CLI prints (exit 2)."""
    return RecipeError(f"camerabench: {exc}")


def script1_model(cfg: RunConfig) -> Script1Model | None:
    """The model Script 1 runs, or None for score-only and fixture runs; RecipeError when there is none."""
    if cfg.fixture or cfg.options.scores is not None:
        return None
    model = SCRIPT1_CHECKPOINTS.get(cfg.checkpoint)
    if model is None:
        raise RecipeError(f"camerabench runs Script 1 for {', '.join(SCRIPT1_CHECKPOINTS)} only"
                          f"{did_you_mean(cfg.checkpoint, list(SCRIPT1_CHECKPOINTS))}; for "
                          f"{cfg.checkpoint!r} pass its Script 1 output with -o scores=DIR")
    return model


def data_dir(cfg: RunConfig, *, download: bool) -> Path:
    """The pinned data directory: a local copy (checked), else the cache (fetched when ``download``)."""
    manifest = data_files.load_manifest()
    try:
        local = cfg.options.data
        if local is not None:
            _verified(str(local), manifest.commit, tree_fingerprint(Path(local), mtimes=True))
            return Path(local)
        return data_files.fetch_data(manifest) if download else data_files.locate_data(manifest)
    except _INPUT_ERRORS as exc:
        raise input_error(exc) from None


@functools.cache
def _verified(root: str, commit: str, files: str) -> None:
    """A local data folder checked against data_manifest.json once per process while its files stay as they are
    (``pinbench run`` checks it in its doctor, then runs)."""
    manifest = data_files.load_manifest()
    if manifest.commit != commit:
        raise data_files.DataFilesError(f"data_manifest.json changed during the run (commit {manifest.commit})")
    data_files.verify_data_dir(Path(root), manifest)


@functools.cache
def _dataset(root: str, families: tuple[str, ...], files: str) -> CameraBenchData:
    return load_dataset(root, families)


def load_data(cfg: RunConfig, root: Path, *, official: bool) -> CameraBenchData:
    """The families asked for, whole (checked against the official counts); ``run_subset`` applies --limit.

    Read once per process while the files stay as they are (``pinbench run`` reads it in its doctor, then runs)."""
    try:
        data = _dataset(str(root), cfg.options.families, tree_fingerprint(root, mtimes=True))
    except DatasetError as exc:
        raise input_error(exc) from None
    if official:
        problems = official_count_problems(data)
        if problems:
            raise RecipeError(f"camerabench: {root} is not the official test set: {'; '.join(problems[:3])}")
    return data


def score_outputs(folder: Path, data: CameraBenchData, families: Iterable[str]) -> Script1Outputs:
    """The official score files of ``folder`` read against ``data``, once per process while neither changes (the
    doctor and the run read the same files); ScoreFileError as ``read_score_dir`` raises it."""
    return _score_outputs(str(folder), data, tuple(families), tree_fingerprint(folder, mtimes=True))


@functools.cache
def _score_outputs(folder: str, data: CameraBenchData, families: tuple[str, ...], files: str) -> Script1Outputs:
    return read_score_dir(folder, data, families)


def forget_score_outputs() -> None:
    """Drop the score files ``score_outputs`` holds: a run that has scored its samples needs them no more, and its
    finish (the scorecard, the report) would otherwise hold their parsed rows beside its own."""
    _score_outputs.cache_clear()


def run_subset(cfg: RunConfig, data: CameraBenchData) -> CameraBenchData:
    """The samples this run scores: all, or the first ``--limit`` of every split, skill and the captions."""
    return limit_dataset(data, cfg.limit) if cfg.limit is not None else data


def pins() -> Pins:
    """pins.yaml with this machine's resolved pins applied (the revisions a first `pinbench fetch` resolved)."""
    try:
        return apply_machine_pins(load_pins(PINS_PATH), machine_pins_for(get_recipe("camerabench")))
    except (PinsError, MachinePinsError) as exc:
        raise input_error(exc) from None


def videos_pin(all_pins: Pins, data: CameraBenchData) -> HFPin:
    """The videos pin narrowed to the names the loaded samples use (each must match a file)."""
    return dataclasses.replace(all_pins.huggingface[VIDEOS_PIN],
                               allow_patterns=[f"*{name}" for name in data.video_names()])


def model_dirs(model: Script1Model, *, download: bool) -> tuple[Path, Path]:
    """(weights, processor) snapshot folders at their pinned revisions, verified."""
    all_pins = pins()
    get = fetch_hf if download else locate
    try:
        return get(all_pins.huggingface[model.weights_pin]), get(all_pins.huggingface[PROCESSOR_PIN])
    except _INPUT_ERRORS as exc:
        raise input_error(exc) from None


def video_set(cfg: RunConfig, data: CameraBenchData, *, download: bool) -> VideoSet:
    """Every video the loaded samples need, found by name (local folder, or the pinned dataset snapshot)."""
    try:
        local = cfg.options.videos
        if local is not None:
            return locate_videos(Path(local), data.video_names())
        pin = videos_pin(pins(), data)
        root = fetch_hf(pin) if download else locate(pin)
        return locate_videos(root, data.video_names())
    except _INPUT_ERRORS as exc:
        raise input_error(exc) from None


def pins_for_provenance(model: Script1Model | None, *, fixture: bool) -> dict[str, Any]:
    """The pins this run used: upstream code always; the models and videos for Script 1 unless a fixture."""
    loaded = pins()
    used = [f"upstream/{name}" for name in loaded.upstream]
    if model is not None and not fixture:
        used += [f"huggingface/{name}" for name in (VIDEOS_PIN, PROCESSOR_PIN, model.weights_pin)]
    return effective_pins_data(loaded, used)
