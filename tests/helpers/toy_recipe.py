"""Test double: a toy recipe declared by a real recipe.yaml, loaded with the real loader.

``toy_recipe(tmp_path)`` writes ``toy_bench/recipe.yaml`` (metrics ``f1`` higher-is-better, ``rmse`` and
``err`` lower-is-better, options of each type) and returns the Recipe, so library tests exercise the same
declaration path as the real recipes without importing one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pinbench.core.recipe import Recipe, load_declaration

DECLARATION: dict[str, Any] = {
    "name": "toy-bench",
    "version": "1.0.0",
    "description": "a toy recipe for library tests",
    "entry": "run:run",
    "checkpoints": ["Toy-Nano"],
    "hardware": "none",
    "flags": {"limit": True, "shard": True, "gpus": "many", "skip_generation": True, "skip_scoring": True},
    "stages": [
        {"name": "fetch", "argv": ["fetch"], "network": True, "needs_token": True, "gpus": False},
        {"name": "generate", "dockerfile": "Dockerfile.generate", "argv": ["run", "--skip-scoring"]},
        {"name": "score", "argv": ["run", "--skip-generation"]},
    ],
    "env": {"TOY_HOME": "where the toy lives"},
    "options": {
        "mode": {"type": "choice", "choices": ["fast", "slow"], "default": "fast", "env": "TOY_MODE",
                 "help": "how to run"},
        "videos": {"type": "path", "env": "TOY_VIDEOS", "help": "the videos"},
        "n": {"type": "int", "minimum": 1, "help": "how many"},
    },
    "metrics": {
        "f1": {"direction": "higher", "aggregation": "mean", "kind": "official", "primary": True,
               "tolerance": {"same_hw": {"abs": 0.01}, "cross_hw": {"abs": 0.05}}},
        "rmse": {"direction": "lower", "aggregation": "mean", "kind": "official",
                 "tolerance": {"same_hw": {"rel": 0.05}, "cross_hw": {"rel": 0.1}}},
        "err": {"direction": "lower", "aggregation": "median", "kind": "official",
                "tolerance": {"same_hw": {"rel": 0.1}, "cross_hw": {"rel": 0.2}}},
        "precision": {"direction": "higher", "aggregation": "mean", "kind": "cross_check",
                      "tolerance": {"same_hw": {"abs": 0.01}, "cross_hw": {"abs": 0.05}}},
    },
    "changelog": [{"version": "1.0.0", "date": "2026-11-30", "change": "first version"}],
}


def toy_recipe(root: Path, **changes: Any) -> Recipe:
    """Write the toy declaration (with ``changes`` applied at the top level) under ``root`` and load it."""
    folder = root / "toy_bench"
    (folder / "references").mkdir(parents=True, exist_ok=True)
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump({**DECLARATION, **changes}, sort_keys=False))
    return load_declaration(path, "toy_bench")
