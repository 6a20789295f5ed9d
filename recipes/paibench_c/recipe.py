"""The PAI-Bench-C / Cosmos3 recipe object the pinbench CLI discovers (entry point ``pinbench.recipes``)."""

from __future__ import annotations

from paibench_c.fetch import fetch
from paibench_c.run import run
from pinbench.recipe import ContainerStage, Recipe

ENV_VARS = {
    "HF_TOKEN": "Hugging Face token for the gated Cosmos3 models and dataset; read by `pinbench fetch` and "
                "the generation stage only, never written to an image, log or scorecard",
    "GPUS": "GPUs for generation (one worker per GPU) and evaluation (torchrun ranks); default 4",
    "CUDA_VISIBLE_DEVICES": "which GPUs; default 0..GPUS-1",
    "PAIBENCH_C_MODALITIES": "subset of `edge blur depth seg` (default all four; -o modalities=...)",
    "PAIBENCH_C_GT": "`reuse` (default: GT seg/depth computed in the first modality, reused) or `force` "
                     "(recompute in every modality, as upstream)",
    "PAIBENCH_C_LAUNCH": "`workers` (default: one single-GPU process per GPU, as the upstream script) or "
                         "`torchrun` (one latency-parallel job over all GPUs)",
    "PAIBENCH_C_NATIVE": "`on` (default) / `off`: the CPU cross-check of Canny, blur SSIM and seg arithmetic",
    "PAIBENCH_C_NATIVE_WORKERS": "processes for the CPU cross-check (default: all cores)",
    "PAIBENCH_C_EVALUATOR_DIR": "the evaluator's conditional_generation folder (image: "
                                "/opt/pai-bench-c/conditional_generation)",
    "PAIBENCH_C_EVALUATOR_PYTHON": "Python of the evaluator's environment (torchrun is taken next to it)",
    "PAIBENCH_C_FRAMEWORK_DIR": "cosmos-framework checkout (generation image: /opt/cosmos-framework)",
    "PAIBENCH_C_FRAMEWORK_PYTHON": "Python of cosmos-framework's locked venv",
    "PAIBENCH_C_EVAL_BATCH_SIZE": "tasks per evaluator batch per rank (evaluator default 30; ~1 GB RAM each)",
    "PINBENCH_CACHE": "cache root for the dataset, task list, weights and checkpoints (else HF_HOME)",
    "PINBENCH_OFFLINE": "1: never touch the network (generation then runs cosmos-framework with HF_HUB_OFFLINE=1)",
}

STAGES = (
    ContainerStage("fetch", dockerfile="Dockerfile", argv=("fetch",), network=True, needs_token=True, gpus=False),
    # cosmos-framework may download its own auxiliary files (VAE, processors) at the revisions pinned in
    # its checkpoint registry, some gated; hence network and the token, passed at run time only.
    ContainerStage("generate", dockerfile="Dockerfile.generate", argv=("run", "--skip-scoring"), network=True,
                   needs_token=True),
    ContainerStage("score", dockerfile="Dockerfile", argv=("run", "--skip-generation"), network=False),
)

RECIPE = Recipe(
    name="paibench-c",
    package="paibench_c",
    version="1.0.0",
    description="PAI-Bench-C conditional generation (edge/blur/depth/seg) with Cosmos3, fork evaluator 5864378",
    checkpoints=["Cosmos3-Nano", "Cosmos3-Super"],
    run=run,
    fetch=fetch,
    env_vars=ENV_VARS,
    stages=STAGES,
)
