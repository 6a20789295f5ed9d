"""``python -m pinbench_recipes.paibench_c run --checkpoint Cosmos3-Nano``: the pinbench CLI with this recipe chosen."""

from pinbench.cli import recipe_main

recipe_main("paibench-c")
