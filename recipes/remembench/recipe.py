"""Registration of the RememBench recipe (entry point ``pinbench.recipes``)."""

from __future__ import annotations

from pinbench.recipe import Recipe
from remembench.options import env_var_table
from remembench.prepare import REFERENCE_PAIRS_CHECKPOINT, arm_checkpoints
from remembench.run import run
from remembench.weights import fetch

RECIPE = Recipe(
    name="remembench",
    package="remembench",
    version="1.0.0",
    description="RememBench revisit memory (T2V and I2V): CLIP, LPIPS, TempSSIM and Drift of your rollouts, "
                "as the MosaiChunk paper scores them",
    checkpoints=[REFERENCE_PAIRS_CHECKPOINT, *arm_checkpoints()],
    run=run,
    fetch=fetch,
    env_vars={
        **env_var_table(),
        "PINBENCH_CACHE": "cache root for the release and weights (default: HF_HOME, else ~/.cache/pinbench)",
        "PINBENCH_OFFLINE": "1: never download; anything not fetched is an error",
        "HF_TOKEN": "only for `pinbench fetch` / DL3DV image download; never logged",
        "CUDA_VISIBLE_DEVICES": "GPU for CLIP, LPIPS and Pi3X (one per process; use --shard I/N for several)",
    },
)
