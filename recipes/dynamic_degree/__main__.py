"""``python -m pinbench_recipes.dynamic_degree run ...`` is ``pinbench run dynamic-degree ...`` (also in an export)."""

from pinbench.cli import recipe_main

recipe_main("dynamic-degree")
