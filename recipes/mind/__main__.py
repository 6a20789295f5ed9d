"""``python -m pinbench_recipes.mind run ...`` is ``pinbench run mind ...`` (also in an export)."""

from pinbench.__main__ import start

start("mind")
