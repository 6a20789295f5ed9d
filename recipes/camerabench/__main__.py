"""``python -m pinbench_recipes.camerabench run ...`` is ``pinbench run camerabench ...`` (also in an export)."""

from pinbench.__main__ import start

start("camerabench")
