"""``pinbench fetch camerabench``: every pinned input of the run the same options describe, into the cache.

Always the data files (commit-pinned URLs, each checked against its SHA-256); for a Script 1 checkpoint also
its weights, the base Instruct snapshot (processor and tokenizer) and the videos its samples name. The run
stage then finds all of it without network.
"""

from __future__ import annotations

from pinbench.core.config import RecipeError, RunConfig
from pinbench_recipes.camerabench import inputs


def fetch(cfg: RunConfig) -> None:
    if cfg.fixture:
        raise RecipeError("camerabench: the fixture needs nothing fetched")
    root = inputs.data_dir(cfg, download=True)
    print(f"camerabench: data files at {root}")
    model = inputs.script1_model(cfg)
    if model is None:
        return
    data = inputs.run_subset(cfg, inputs.load_data(cfg, root, official=True))
    weights, processor = inputs.model_dirs(model, download=True)
    videos = inputs.video_set(cfg, data, download=True)
    print(f"camerabench: weights at {weights}, processor at {processor}, "
          f"{len(videos.paths)} videos under {videos.root}")
