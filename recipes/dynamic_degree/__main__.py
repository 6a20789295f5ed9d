"""``python -m pinbench_recipes.dynamic_degree run ...`` is ``pinbench run dynamic-degree ...`` (also in an export)."""

from pinbench.__main__ import start

start("dynamic-degree")
