"""``python -m dynamic_degree run ...`` is ``pinbench run dynamic-degree ...`` (runs an exported recipe)."""

from pinbench.cli import recipe_main

recipe_main("dynamic-degree")
