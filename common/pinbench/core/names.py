"""Rules for the names that become file and folder names: checkpoints and recipes.

A checkpoint names ``references/<checkpoint>.yaml`` and ``runs/<recipe>/<checkpoint>``; a recipe names
``runs/<recipe>``. Every entry point (CLI flags, scorecards, reference files, ``Recipe.config``) checks them
with these two functions, so ``../../x``, ``''``, ``.x`` or ``..`` can never place a file outside
``references/`` or ``runs/``.
"""

from __future__ import annotations

import re
from typing import Any

CHECKPOINT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
RECIPE_NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


def checkpoint_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot be a checkpoint name (one line), or None when it can."""
    if not isinstance(name, str) or not CHECKPOINT_NAME.fullmatch(name) or ".." in name:
        return (f"checkpoint name {name!r} is not allowed: use letters, digits, '.', '_' and '-', starting with a "
                "letter or digit, without '..', at most 100 characters (it names files and folders)")
    return None


def recipe_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot be a recipe's name as a scorecard or reference records it, or None."""
    if not isinstance(name, str) or not RECIPE_NAME.fullmatch(name):
        return (f"recipe name {name!r} is not allowed: lowercase letters and digits in '-'-separated words, "
                "starting with a letter")
    return None
