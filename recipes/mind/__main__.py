"""``python -m pinbench_recipes.mind run ...`` is ``pinbench run mind ...`` (also in an export)."""

from pinbench.cli import recipe_main

recipe_main("mind")
