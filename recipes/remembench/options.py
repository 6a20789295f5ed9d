"""Recipe options: ``-o key=value`` on the command line, else the ``REMEMBENCH_*`` env var, else default.

Kept in one table so that the README's env-var table, the CLI help and the parser cannot disagree,
and so that a typo in an option name is an error instead of a silently ignored setting.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from remembench.dataset import DEFAULT_I2V_SETTING, I2V_SETTINGS, SPLITS, DatasetError
from remembench.release import DEFAULT_DATASET_ID, DEFAULT_DATASET_REVISION, parse_dataset_spec

DEFAULT_WEIGHTS_DIR = "/opt/remembench-weights"  # where the Dockerfile bakes weights

# option -> (env var, meaning)
OPTIONS: dict[str, tuple[str, str]] = {
    "split": ("REMEMBENCH_SPLIT", "t2v (default) or i2v"),
    "settings": ("REMEMBENCH_SETTINGS", f"I2V settings, comma-separated or 'all' (default {DEFAULT_I2V_SETTING})"),
    "videos": ("REMEMBENCH_VIDEOS", "directory of your rollouts: <scene_id>.mp4 (T2V) or <sample_id>.mp4 "
               "(I2V); <id>/rollout.mp4 also works"),
    "annotations": ("REMEMBENCH_ANNOTATIONS", "T2V pairs: JSON {scene_id: {departure_frame, revisit_frame}}, "
                    "or paper:<Method>:<budget> for the dataset's pairs (valid only for the paper's rollouts)"),
    "poses_dir": ("REMEMBENCH_POSES_DIR", "I2V: <sample_id>.npz camera poses (pi3_poses.npz layout) used "
                  "instead of running Pi3X"),
    "dataset": ("REMEMBENCH_DATASET", f"HF dataset id@revision (default {DEFAULT_DATASET_ID}@"
                f"{DEFAULT_DATASET_REVISION})"),
    "dataset_dir": ("REMEMBENCH_DATASET_DIR", "a local RememBench copy instead of the pinbench cache"),
    "clip_dir": ("REMEMBENCH_CLIP_DIR", "directory with open_clip_config.json and open_clip_model.safetensors "
                 "(checked against the pinned SHA-256)"),
    "lpips_trunk": ("REMEMBENCH_LPIPS_TRUNK", "AlexNet trunk file alexnet-owt-7be5be79.pth (checked)"),
    "pi3x_weights": ("REMEMBENCH_PI3X_WEIGHTS", "Pi3X model.safetensors (checked)"),
    "weights_dir": ("REMEMBENCH_WEIGHTS_DIR", f"baked weights directory (image default {DEFAULT_WEIGHTS_DIR})"),
    "device": ("REMEMBENCH_DEVICE", "torch device for CLIP, LPIPS and Pi3X (default cuda if available)"),
}


class OptionError(ValueError):
    """A bad option value (one line naming the option)."""


@dataclass(frozen=True)
class Options:
    split: str
    settings: tuple[str, ...]
    videos: Path | None
    annotations: str | None
    poses_dir: Path | None
    dataset_id: str
    dataset_revision: str
    dataset_dir: Path | None
    clip_dir: Path | None
    lpips_trunk: Path | None
    pi3x_weights: Path | None
    weights_dir: Path | None
    device: str

    def as_dict(self) -> dict[str, object]:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in self.__dict__.items()}


def _raw(options: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str | None]:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise OptionError(f"unknown remembench option(s) {', '.join(unknown)}; known: {', '.join(OPTIONS)}")
    return {key: options.get(key) or env.get(var) or None for key, (var, _) in OPTIONS.items()}


def _path(value: str | None) -> Path | None:
    return Path(value).expanduser() if value else None


def _settings(value: str | None) -> tuple[str, ...]:
    if not value:
        return (DEFAULT_I2V_SETTING,)
    if value.strip() == "all":
        return I2V_SETTINGS
    chosen = tuple(s.strip() for s in value.split(",") if s.strip())
    bad = [s for s in chosen if s not in I2V_SETTINGS]
    if bad or not chosen:
        raise OptionError(f"settings: {', '.join(bad) or value!r} not in {', '.join(I2V_SETTINGS)} or 'all'")
    return tuple(s for s in I2V_SETTINGS if s in chosen)


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def parse_options(options: Mapping[str, str], env: Mapping[str, str] | None = None) -> Options:
    """Options from ``-o`` values and the environment; OptionError on unknown keys or bad values."""
    raw = _raw(options, os.environ if env is None else env)
    split = raw["split"] or "t2v"
    if split not in SPLITS:
        raise OptionError(f"split: {split!r} is not t2v or i2v")
    try:
        dataset_id, revision = parse_dataset_spec(raw["dataset"]) if raw["dataset"] else (
            DEFAULT_DATASET_ID, DEFAULT_DATASET_REVISION)
    except DatasetError as exc:
        raise OptionError(f"dataset: {exc}") from None
    weights_dir = _path(raw["weights_dir"]) or (Path(DEFAULT_WEIGHTS_DIR) if Path(DEFAULT_WEIGHTS_DIR).is_dir()
                                                else None)
    return Options(
        split=split, settings=_settings(raw["settings"]), videos=_path(raw["videos"]),
        annotations=raw["annotations"], poses_dir=_path(raw["poses_dir"]), dataset_id=dataset_id,
        dataset_revision=revision, dataset_dir=_path(raw["dataset_dir"]), clip_dir=_path(raw["clip_dir"]),
        lpips_trunk=_path(raw["lpips_trunk"]), pi3x_weights=_path(raw["pi3x_weights"]), weights_dir=weights_dir,
        device=raw["device"] or _default_device(),
    )


def env_var_table() -> dict[str, str]:
    """Env var -> meaning, for the Recipe's env_vars (README table)."""
    return {var: f"{meaning} (same as -o {key}=)" for key, (var, meaning) in OPTIONS.items()}
