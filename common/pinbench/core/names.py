"""Rules for the names that become file and folder names: checkpoints and recipes (and for an image reference).

A checkpoint names ``references/<checkpoint>.yaml`` and ``runs/<recipe>/<checkpoint>``; a recipe names
``runs/<recipe>``. Every entry point (CLI flags, scorecards, reference files, ``Recipe.config``) checks them
with these two functions, so ``../../x``, ``''``, ``.x`` or ``..`` can never place a file outside
``references/`` or ``runs/``.
"""

from __future__ import annotations

import keyword
import re
import sys
from typing import Any

CHECKPOINT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
RECIPE_NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
RECIPE_NAME_CHARS = 64   # it names folders, files and temporary folders with a suffix (a file name holds 255 bytes)
# Docker's reference grammar (distribution/reference): [host[:port]/]path[:tag][@algorithm:hex]; a local image id
# (sha256:<hex>) reads as a name and a tag
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:]+\])"
IMAGE_REFERENCE = re.compile(rf"(?:{_HOST}(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*(?::\w[\w.-]{{0,127}})?"
                             r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,})?")
# package names a new recipe cannot take, and why: each is the name of a folder that pinbench or a recipe package
# already has, where a recipe of that name would be taken for it (or left out with it)
RESERVED_PACKAGES = {
    "tests": "the name of the test folders (setup.py leaves every package named tests out of the wheel, and a "
             "recipe's own tests live in its tests/)",
    "references": "the name of a recipe's folder of references",
    "templates": "the name of a recipe's folder of templates",
    "benchmarks": "the name of a recipe's folder of benchmarks",
    "common": "the folder that holds the library in a checkout",
    "pinbench": "the library's package",
    "pinbench_recipes": "the package that holds the recipes",
}


def checkpoint_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot be a checkpoint name (one line), or None when it can."""
    if not isinstance(name, str) or not CHECKPOINT_NAME.fullmatch(name) or ".." in name:
        return (f"checkpoint name {name!r} is not allowed: use letters, digits, '.', '_' and '-', starting with a "
                "letter or digit, without '..', at most 100 characters (it names files and folders)")
    return None


def recipe_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot be a recipe's name as a scorecard or reference records it, or None. Why a bound: a
    240-letter name passed, and ``new-recipe`` wrote the recipe, then its fixture run ended in "File name too long"
    and left it behind, registered and without a reference."""
    if not isinstance(name, str) or not RECIPE_NAME.fullmatch(name) or len(name) > RECIPE_NAME_CHARS:
        return (f"recipe name {name!r} is not allowed: lowercase letters and digits in '-'-separated words, "
                f"starting with a letter, at most {RECIPE_NAME_CHARS} characters")
    return None


def image_reference_problem(option: str, ref: str) -> str | None:
    """Why ``ref``, given to ``option``, is no Docker image reference (one line), or None when it is one. Why: an
    empty or spaced value reached the engine, which said so in its own words after the run had begun."""
    if IMAGE_REFERENCE.fullmatch(ref):
        return None
    return (f"{option} {ref!r}: not an image reference (e.g. lab/model:1, registry.example:5000/lab/model@sha256:..."
            " or a local image id sha256:...)")


def recipe_package_problem(name: str) -> str | None:
    """Why a valid recipe name cannot name a new recipe's package (``-`` as ``_``): a Python keyword, a module of
    the standard library or of an installed distribution (an import of it could find the recipe instead: ``av``
    was written, and ``import av`` in recipes/ found it, not PyAV), or a folder name that pinbench or every recipe
    already uses (``RESERVED_PACKAGES``); None when it can."""
    from importlib.metadata import packages_distributions

    package = name.replace("-", "_")
    if keyword.iskeyword(package):
        why = "is a Python keyword"
    elif package in sys.stdlib_module_names:
        why = "is a module of Python's standard library, which a recipe of that name would shadow"
    elif package in RESERVED_PACKAGES:
        why = f"is reserved: {RESERVED_PACKAGES[package]}"
    elif distributions := packages_distributions().get(package):
        why = f"is a module of the installed distribution {distributions[0]}, which a recipe of that name would shadow"
    else:
        return None
    return f"recipe name {name!r} is not allowed: its package name {package!r} {why}"
