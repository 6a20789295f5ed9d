"""``python -m pinbench_recipes.paibench_c run --checkpoint Cosmos3-Nano``: the pinbench CLI with this recipe chosen."""

from pinbench.__main__ import start

start("paibench-c")
