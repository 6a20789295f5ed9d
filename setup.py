"""Package discovery for setuptools (everything else is in pyproject.toml): the library's subpackages and every
recipe folder, tests left out. pyproject.toml cannot say it: its ``packages.find`` names packages after their
folders (``recipes/x`` would be ``x``), and the mapping ``pinbench_recipes = "recipes"`` needs the prefix."""

from setuptools import find_packages, setup

TESTS = ["tests", "*.tests", "*.tests.*"]  # recipe tests export with a recipe, they are not shipped in the wheel

setup(packages=["pinbench", *(f"pinbench.{p}" for p in find_packages("common/pinbench", exclude=TESTS)),
                "pinbench_recipes", *(f"pinbench_recipes.{p}" for p in find_packages("recipes", exclude=TESTS))])
