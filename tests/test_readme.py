"""The README stays true: its env-var table covers every recipe's variables, its commands exist."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from pinbench.recipe import available_recipes

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def _env_table() -> set[str]:
    """Every variable named in the first column of the README's environment-variable table."""
    section = README.split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    first_column = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return set(re.findall(r"`([A-Z0-9_]+)`", "\n".join(first_column)))


@pytest.mark.parametrize("recipe", list(available_recipes().values()), ids=lambda r: r.name)
def test_every_recipe_env_var_is_in_the_readme_table(recipe) -> None:
    missing = sorted(set(recipe.env_vars) - _env_table())
    assert not missing, f"README env-var table lacks {missing} ({recipe.name})"


def test_setup_commands_stand_at_the_top() -> None:
    first_block = README.split("```bash", 1)[1].split("```", 1)[0]
    assert "make test" in first_block and "make demo" in first_block


@pytest.mark.parametrize("target", ["help", "setup", "test", "lint", "demo", "export", "build-%", "recipe-%",
                                    "diff-%"])
def test_make_targets_exist(target: str) -> None:
    makefile = (REPO / "Makefile").read_text()
    assert re.search(rf"^{re.escape(target)}:", makefile, flags=re.M), target


def test_make_help_is_the_default() -> None:
    out = subprocess.run(["make", "-s", "-C", str(REPO)], capture_output=True, text=True, check=True).stdout
    assert "make recipe-paibench-c CHECKPOINT=Cosmos3-Nano" in out
