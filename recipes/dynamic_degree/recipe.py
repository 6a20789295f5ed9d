"""Registration of the long-sequence dynamic-degree recipe (entry point ``pinbench.recipes``)."""

from __future__ import annotations

from dynamic_degree.prepare import WEIGHTS_ENV, fetch
from dynamic_degree.run import run
from pinbench.recipe import Recipe

RECIPE = Recipe(
    name="dynamic-degree",
    package="dynamic_degree",
    version="1.0.0",
    description="Long-sequence dynamic degree: share of 2 s clips with enough RAFT-things motion",
    checkpoints=[],  # no published per-checkpoint reference exists; runs are reported, not diffed
    run=run,
    fetch=fetch,
    env_vars={
        WEIGHTS_ENV: "local RAFT-things weights file used instead of the pinned download "
                     "(same as -o raft_weights=; pin it with -o raft_sha256=)",
        "PINBENCH_CACHE": "cache root for the pinned RAFT weights (default: HF_HOME, else ~/.cache/pinbench)",
        "PINBENCH_OFFLINE": "1: never download; a weights file that was not fetched is an error",
        "CUDA_VISIBLE_DEVICES": "GPUs RAFT may use (--gpus N starts one worker per GPU, each an interleaved shard)",
        "PINBENCH_RAFT_ORIGINAL_SRC": "gpu_check.py only: a princeton-vl/RAFT checkout at the pinned commit",
        "PINBENCH_DD_CHECK_VIDEOS": "gpu_check.py only: directory of real videos to compare implementations on",
        "PINBENCH_RAFT_THINGS_ORIGINAL": "gpu_check.py only: the original raft-things.pth, to compare with "
                                         "torchvision's port",
    },
)
