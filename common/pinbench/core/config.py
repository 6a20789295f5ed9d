"""What one run is: its configuration (recorded in the scorecard), its outcome, and the error a bad one raises.

Kept apart from the declaration model (``pinbench.core.recipe``) so that the run directory's owner
(``pinbench.core.rundir``) and the recipe contract can both use it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pinbench.core.names import checkpoint_name_problem

if TYPE_CHECKING:
    from pinbench.core.reference import DiffResult
    from pinbench.core.runner import Shard


class RecipeError(RuntimeError):
    """A recipe could not be found or its inputs are unusable (one-line message)."""


def check_checkpoint_name(name: str) -> str:
    """A checkpoint name safe as a file name: letters, digits, ``.``, ``_``, ``-``; no leading dot, no ``..``."""
    problem = checkpoint_name_problem(name)
    if problem:
        raise RecipeError(problem)
    return name


@dataclass
class RunConfig:
    """Everything a recipe run depends on; recorded in the scorecard's ``config``.

    ``options`` holds the recipe's typed option values (parsed from ``-o``, the environment and defaults
    by ``Recipe.config``); ``option_sources`` says where each came from.
    """

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
    options: dict[str, Any] = field(default_factory=dict)
    option_sources: dict[str, str] = field(default_factory=dict)

    @property
    def mode(self) -> str:
        """``fixture`` for CPU fixture runs, ``smoke`` for ``--limit`` runs, else ``full``."""
        if self.fixture:
            return "fixture"
        return "smoke" if self.limit is not None else "full"

    def to_json(self) -> dict[str, Any]:
        from pinbench.core.provenance import to_jsonable

        return {
            "recipe": self.recipe, "checkpoint": self.checkpoint, "out_dir": str(self.out_dir),
            "limit": self.limit, "shard": str(self.shard) if self.shard else None, "runtime": self.runtime,
            "skip_generation": self.skip_generation, "skip_scoring": self.skip_scoring, "fixture": self.fixture,
            "gpus": self.gpus, "offline": self.offline, "mode": self.mode,
            "options": to_jsonable(self.options), "option_sources": dict(self.option_sources),
        }


@dataclass
class RunOutcome:
    """What a run produced; ``exit_code`` is non-zero for failures, partial runs and diff FAILs."""

    scorecard_path: Path | None
    exit_code: int
    diff: DiffResult | None = None
    report_path: Path | None = None
    message: str = ""
