"""Test helper: where a recipe's build-context files are, in this repository and in an export of the recipe."""

from __future__ import annotations

from pathlib import Path


def build_context(recipe_dir: Path) -> Path:
    """The folder of a recipe's README.md, Dockerfile(s) and locks: the recipe's own folder in the repository, the
    top of an export (``pinbench export`` puts them there, ``pinbench.ops.export.TOP_LEVEL``), two levels up."""
    recipe_dir = Path(recipe_dir)
    return recipe_dir if (recipe_dir / "README.md").is_file() else recipe_dir.parents[1]
