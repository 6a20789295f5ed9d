"""``python -m pinbench_recipes.camerabench run ...`` is ``pinbench run camerabench ...`` (also in an export)."""

from pinbench.cli import recipe_main

recipe_main("camerabench")
