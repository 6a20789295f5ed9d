"""``--runtime docker``: run a recipe's stages inside its pinned images.

Each stage runs ``pinbench`` inside the image with the same flags the user gave, as the calling user
(so outputs stay theirs), with the cache and run directory mounted. Only stages that fetch get the
network and ``HF_TOKEN``; everything else runs with ``--network none``.
"""

from __future__ import annotations

import os
from pathlib import Path

from pinbench.cache import cache_root
from pinbench.docker_engine import build_image, run_in_container
from pinbench.export import export_recipe
from pinbench.recipe import ContainerStage, Recipe, RunConfig
from pinbench.rundir import TOKEN_ENV, claim_run_dir

CACHE_MOUNT = "/cache"
OUT_MOUNT = "/runs/out"
INPUTS_MOUNT = "/inputs"


def build_recipe_images(recipe: Recipe, build_dir: Path = Path("build/export")) -> list[str]:
    """Export the recipe (its build context) and build every Dockerfile in it; return the tags."""
    context = export_recipe(recipe, build_dir / recipe.name, force=True)
    tags = []
    for dockerfile in sorted(p.name for p in context.glob("Dockerfile*") if p.suffix != ".dockerignore"):
        tag = recipe.stage_image(ContainerStage(name="build", dockerfile=dockerfile))
        build_image(context, tag, dockerfile=dockerfile)
        tags.append(tag)
    return tags


def _forwarded_options(recipe: Recipe, cfg: RunConfig) -> tuple[dict[str, str], dict[Path, str]]:
    """Every option not left at its default, as ``-o`` text for the container (values from the environment
    included, so nothing set on the host is lost), with path options mounted read-only under /inputs."""
    forwarded, mounts = {}, {}
    for name, value in cfg.options.items():
        if cfg.option_sources.get(name, "default") in ("default", "fixture_default") or value is None:
            continue
        spec = recipe.options[name]
        if spec.type == "path":
            target = f"{INPUTS_MOUNT}/{name}"
            mounts[Path(value).resolve()] = f"{target}:ro"
            forwarded[name] = target
        else:
            forwarded[name] = spec.format(value)
    return forwarded, mounts


def stage_argv(recipe: Recipe, cfg: RunConfig, stage: ContainerStage, options: dict[str, str]) -> list[str]:
    """The ``pinbench`` command a stage runs in its container, mirroring the user's flags."""
    command, *extra = stage.argv
    argv = ["pinbench", command, recipe.name, "--checkpoint", cfg.checkpoint]
    if cfg.limit is not None:
        argv += ["--limit", str(cfg.limit)]
    for key, value in options.items():
        argv += ["--option", f"{key}={value}"]
    if command == "run":
        argv += ["--out", OUT_MOUNT, "--runtime", "local", "--gpus", str(cfg.gpus)]
        argv += [] if stage.network else ["--offline"]
        if cfg.shard is not None:
            argv += ["--shard", f"{cfg.shard.index}/{cfg.shard.count}"]
        argv += ["--skip-generation"] * cfg.skip_generation + ["--skip-scoring"] * cfg.skip_scoring
        argv += ["--fixture"] * cfg.fixture
    return argv + list(extra)


def stages_for(recipe: Recipe, cfg: RunConfig) -> list[ContainerStage]:
    """The stages this run needs: a fixture run is one offline CPU run in the recipe's scoring image."""
    if not cfg.fixture:
        return list(recipe.stages)
    last = [s for s in recipe.stages if s.argv[0] == "run"][-1]
    return [ContainerStage(last.name, dockerfile=last.dockerfile, argv=("run",), network=False, gpus=False)]


def run_in_docker(recipe: Recipe, cfg: RunConfig) -> int:
    """Run every stage of the recipe in its image; stop at the first stage that fails.

    This process claims the run directory (pinbench.rundir) for all stages; each container inherits the
    claim through PINBENCH_RUN_LOCK instead of taking its own.
    """
    with claim_run_dir(cfg) as claim:
        return _run_stages(recipe, cfg, claim.token)


def _run_stages(recipe: Recipe, cfg: RunConfig, lock_token: str) -> int:
    out_dir = cfg.out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    cache = cache_root().resolve()
    cache.mkdir(parents=True, exist_ok=True)
    options, input_mounts = _forwarded_options(recipe, cfg)
    mounts = {cache: CACHE_MOUNT, out_dir: OUT_MOUNT, **input_mounts}
    env = {"PINBENCH_CACHE": CACHE_MOUNT, "HF_HOME": CACHE_MOUNT, TOKEN_ENV: lock_token}
    user = f"{os.getuid()}:{os.getgid()}"
    for stage in stages_for(recipe, cfg):
        if (stage.name == "generate" and cfg.skip_generation) or (stage.name == "score" and cfg.skip_scoring):
            continue
        if stage.name == "fetch" and cfg.offline:
            continue
        code = run_in_container(
            recipe.stage_image(stage), stage_argv(recipe, cfg, stage, options), stage=stage.name,
            mounts=mounts, env=env, gpus=cfg.gpus if stage.gpus else 0, network_disabled=not stage.network,
            user=user, token=os.environ.get("HF_TOKEN") if stage.needs_token else None, shm_size="16g",
        )
        if code != 0:
            return code
    return 0
