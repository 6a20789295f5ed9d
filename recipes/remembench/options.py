"""RememBench's options (declared in recipe.yaml, typed by the core), checked and resolved further here.

The core parses ``-o`` values, ``REMEMBENCH_*`` variables and defaults; this module turns the few values a
declaration cannot check (the I2V settings list, ``id@revision``, the device) into an ``Options``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pinbench_recipes.remembench.dataset import DEFAULT_I2V_SETTING, I2V_SETTINGS, DatasetError
from pinbench_recipes.remembench.release import parse_dataset_spec

DEFAULT_WEIGHTS_DIR = "/opt/remembench-weights"  # where the Dockerfile bakes weights


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
    decoder: str = "opencv"

    def as_dict(self) -> dict[str, object]:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in self.__dict__.items()}


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


def resolve_options(values: Mapping[str, Any]) -> Options:
    """``Options`` from the typed option values; OptionError on a bad settings list or dataset spec."""
    try:
        dataset_id, revision = parse_dataset_spec(values["dataset"])
    except DatasetError as exc:
        raise OptionError(f"dataset: {exc}") from None
    weights_dir = values["weights_dir"] or (Path(DEFAULT_WEIGHTS_DIR) if Path(DEFAULT_WEIGHTS_DIR).is_dir() else None)
    return Options(
        split=values["split"], settings=_settings(values["settings"]), videos=values["videos"],
        annotations=values["annotations"], poses_dir=values["poses_dir"], dataset_id=dataset_id,
        dataset_revision=revision, dataset_dir=values["dataset_dir"], clip_dir=values["clip_dir"],
        lpips_trunk=values["lpips_trunk"], pi3x_weights=values["pi3x_weights"], weights_dir=weights_dir,
        device=values["device"] or _default_device(), decoder=values["decoder"],
    )
