"""``python -m pinbench_recipes.remembench run ...`` is ``pinbench run remembench ...`` (runs an exported recipe)."""

from pinbench.cli import recipe_main

recipe_main("remembench")
