"""The contract every recipe implements, and how the CLI finds recipes.

A recipe is a Python package under ``recipes/<package>/`` that exposes ``RECIPE: Recipe`` in its
``recipe.py`` and registers it under the ``pinbench.recipes`` entry-point group. Entry points (rather
than walking up to a repository root) keep an exported recipe runnable on its own.
"""

from __future__ import annotations

import importlib
import importlib.resources
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pinbench.reference import DiffResult
    from pinbench.runner import Shard

ENTRY_POINT_GROUP = "pinbench.recipes"
MODES = ("full", "smoke", "fixture")


class RecipeError(RuntimeError):
    """A recipe could not be found or its inputs are unusable (one-line message)."""


@dataclass
class RunConfig:
    """Everything a recipe run depends on; recorded verbatim in the scorecard's ``config``."""

    recipe: str
    checkpoint: str
    out_dir: Path
    limit: int | None = None
    shard: Shard | None = None
    runtime: str = "local"
    skip_generation: bool = False
    skip_scoring: bool = False
    fixture: bool = False
    gpus: int = 1
    offline: bool = False
    options: dict[str, str] = field(default_factory=dict)

    @property
    def mode(self) -> str:
        """``fixture`` for CPU fixture runs, ``smoke`` for ``--limit`` runs, else ``full``."""
        if self.fixture:
            return "fixture"
        return "smoke" if self.limit is not None else "full"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["out_dir"] = str(self.out_dir)
        data["shard"] = f"{self.shard.index}/{self.shard.count}" if self.shard else None
        data["mode"] = self.mode
        return data


@dataclass
class RunOutcome:
    """What a run produced; ``exit_code`` is non-zero for failures, partial runs and diff FAILs."""

    scorecard_path: Path | None
    exit_code: int
    diff: DiffResult | None = None
    report_path: Path | None = None
    message: str = ""


@dataclass(frozen=True)
class ContainerStage:
    """One step of a ``--runtime docker`` run: which image runs which ``pinbench`` command.

    ``needs_token`` stages get ``HF_TOKEN`` passed through (fetching gated weights); every other
    stage runs without it, and ``network=False`` stages run with ``--network none`` so that
    everything they read must have been fetched before.
    """

    name: str
    dockerfile: str = "Dockerfile"
    argv: tuple[str, ...] = ("run",)
    network: bool = False
    needs_token: bool = False
    gpus: bool = True


DEFAULT_STAGES = (
    ContainerStage("fetch", argv=("fetch",), network=True, needs_token=True, gpus=False),
    ContainerStage("run", argv=("run",)),
)


@dataclass
class Recipe:
    name: str
    package: str
    version: str
    description: str
    checkpoints: list[str]
    run: Callable[[RunConfig], RunOutcome]
    fetch: Callable[[RunConfig], None] | None = None
    env_vars: dict[str, str] = field(default_factory=dict)
    stages: tuple[ContainerStage, ...] = DEFAULT_STAGES

    @property
    def image(self) -> str:
        """Local tag of the recipe's main image (``make build-<name>`` builds it)."""
        return f"pinbench/{self.name}:{self.version}"

    def stage_image(self, stage: ContainerStage) -> str:
        suffix = stage.dockerfile.removeprefix("Dockerfile").lstrip(".")
        return self.image if not suffix else f"pinbench/{self.name}-{suffix}:{self.version}"

    @property
    def dir(self) -> Path:
        """The package directory: pins.yaml, references/, Dockerfile and README.md live here."""
        return Path(str(importlib.resources.files(self.package)))

    @property
    def pins_path(self) -> Path:
        return self.dir / "pins.yaml"

    def reference_path(self, checkpoint: str, mode: str) -> Path | None:
        """The reference file for a checkpoint and mode, or None when none was published or recorded.

        Full runs use ``references/<checkpoint>.yaml``; smoke runs only ever use a recorded
        ``references/<checkpoint>.smoke.yaml``; fixture runs use ``references/fixture.yaml``.
        """
        path = self.reference_file(checkpoint, mode)
        return path if path.is_file() else None

    def reference_file(self, checkpoint: str, mode: str) -> Path:
        """Where the reference for a checkpoint and mode lives (whether or not it exists yet)."""
        if mode not in MODES:
            raise RecipeError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
        name = {"full": f"{checkpoint}.yaml", "smoke": f"{checkpoint}.smoke.yaml", "fixture": "fixture.yaml"}
        return self.dir / "references" / name[mode]

    def default_out_dir(self, checkpoint: str, mode: str) -> Path:
        suffix = "" if mode == "full" else f"-{mode}"
        return Path("runs") / self.name / f"{checkpoint}{suffix}"


def available_recipes() -> dict[str, Recipe]:
    """All installed recipes by CLI name, found through the ``pinbench.recipes`` entry points."""
    recipes: dict[str, Recipe] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        recipe = _checked(ep.load(), ep.value)
        recipes[recipe.name] = recipe
    return dict(sorted(recipes.items()))


def get_recipe(name: str) -> Recipe:
    """Look a recipe up by CLI name (``paibench-c``) or package name (``paibench_c``).

    Only the requested recipe is imported, so one recipe never needs another's dependencies.
    """
    package = name.replace("-", "_")
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == package:
            return _checked(ep.load(), ep.value)
    # A recipe copied out of the repo and not pip-installed is still importable by package name.
    try:
        module = importlib.import_module(f"{package}.recipe")
    except ModuleNotFoundError as exc:
        if exc.name not in (package, f"{package}.recipe"):
            raise
        known = ", ".join(ep.name.replace("_", "-") for ep in entry_points(group=ENTRY_POINT_GROUP))
        raise RecipeError(f"unknown recipe {name!r} (known: {known or 'none installed'})") from None
    return _checked(getattr(module, "RECIPE", None), f"{package}.recipe:RECIPE")


def _checked(recipe: object, where: str) -> Recipe:
    if not isinstance(recipe, Recipe):
        raise RecipeError(f"{where} is not a pinbench.recipe.Recipe")
    return recipe
