"""``python -m pinbench_recipes.remembench run ...`` is ``pinbench run remembench ...`` (runs an exported recipe)."""

from pinbench.__main__ import start

start("remembench")
