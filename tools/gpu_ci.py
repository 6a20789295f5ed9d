"""The GPU workflow's decisions as a script, so they can be tested on CPU (tests/test_gpu_ci.py).

    tools/gpu_ci.py check                          # .github/gpu-ci.yaml against its schema and the recipes
    tools/gpu_ci.py plan --event schedule          # JSON list of recipes for the job matrix
    tools/gpu_ci.py env RECIPE                     # CHECKPOINT=, LIMIT=, GPUS=, RUN_DIR= lines for $GITHUB_ENV
    tools/gpu_ci.py inputs RECIPE DIR              # writes the recipe's CI inputs under DIR; prints RUN_ARGS=
    tools/gpu_ci.py verdict RECIPE --run-exit N    # diff against the reference, or record one and FAIL

The verdict never lets a run pass without a reference: a smoke run with no committed
``references/<checkpoint>.smoke.yaml`` records one from this run under ``runs/ci-recorded/``, which the job
uploads, and fails with one line asking for a review and a commit. A check that cannot fail is worse than none.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / ".github" / "gpu-ci.yaml"
RECORDED = Path("runs") / "ci-recorded"
# Paths whose change reruns every recipe (everything a recipe depends on besides its own folder).
SHARED_PATHS = ("common/", "images/", "tools/gpu_ci.py", ".github/gpu-ci.yaml", ".github/workflows/gpu.yml",
                "pyproject.toml", "uv.lock")
DD_CI_SIZE = (256, 448)


class ConfigError(ValueError):
    """.github/gpu-ci.yaml is invalid (one line)."""


def load_config(path: Path = CONFIG) -> dict[str, Any]:
    """The validated configuration: schema, then every recipe, checkpoint name, flag and input option."""
    from pinbench.core.config import RecipeError, check_checkpoint_name
    from pinbench.core.files import FileError, read_yaml
    from pinbench.core.recipe import get_recipe
    from pinbench.core.schema import schema_error

    try:
        data = read_yaml(path)
    except FileError as exc:
        raise ConfigError(str(exc)) from None
    problem = schema_error("gpu-ci", data)
    if problem:
        raise ConfigError(f"{path}: {problem}")
    for name, entry in data["recipes"].items():
        try:
            recipe = get_recipe(name)
            check_checkpoint_name(entry["checkpoint"])
            recipe.check_flags(limit=entry["limit"], shard=None, gpus=entry["gpus"], skip_generation=False,
                               skip_scoring=False)
        except RecipeError as exc:
            raise ConfigError(f"{path}: recipes.{name}: {exc}") from None
        for option in entry["inputs"]:
            spec = recipe.options.get(option)
            if spec is None or spec.type != "path":
                raise ConfigError(f"{path}: recipes.{name}.inputs.{option}: not a path option of {name}")
        if entry["limit"] is None and entry["checkpoint"] not in recipe.checkpoints:
            raise ConfigError(f"{path}: recipes.{name}: a full run needs a published reference; "
                              f"{entry['checkpoint']} is not one of {', '.join(recipe.checkpoints) or 'none'}")
    return data


def plan(config: Mapping[str, Any], event: str, requested: str | None = None,
         changed: Iterable[str] = ()) -> list[str]:
    """The recipes one workflow run covers: all on a schedule or a shared change, else the changed ones."""
    names = sorted(config["recipes"])
    if event == "workflow_dispatch":
        if requested not in names:
            raise ConfigError(f"recipe {requested!r} has no GPU CI configuration; known: {', '.join(names)}")
        return [requested]
    changed = list(changed)
    if event == "schedule" or any(f.startswith(SHARED_PATHS) for f in changed):
        return names
    touched = {f.split("/")[1].replace("_", "-") for f in changed if f.startswith("recipes/") and f.count("/") >= 2}
    return [n for n in names if n in touched]


def run_dir(name: str, entry: Mapping[str, Any]) -> Path:
    from pinbench.core.recipe import get_recipe

    return get_recipe(name).default_out_dir(entry["checkpoint"], "smoke" if entry["limit"] else "full")


def env_lines(name: str, entry: Mapping[str, Any]) -> list[str]:
    return [f"CHECKPOINT={entry['checkpoint']}", f"LIMIT={entry['limit'] or ''}", f"GPUS={entry['gpus']}",
            f"RUN_DIR={run_dir(name, entry)}"]


def write_inputs(name: str, entry: Mapping[str, Any], dest: Path) -> list[str]:
    """Materialise the recipe's CI inputs under ``dest``; the ``-o`` options that point the run at them."""
    options = []
    for option, source in entry["inputs"].items():
        target = dest / name / option
        if source["generator"] == "dynamic-degree-textures":
            _dynamic_degree_textures(target)
        else:  # mind-fixture-gt / mind-fixture-videos: one synthetic MIND layout, its two roots
            target = _mind_layout(dest / name / "layout", source["generator"].rpartition("-")[2])
        options.append(f"-o {option}={target}")
    return options


def _mind_layout(dest: Path, part: str) -> Path:
    """The MIND fixture's GT and generated layouts (>100-frame videos): the real process.py scores them on GPU."""
    from pinbench_recipes.mind.fixture import build_fixture

    data = build_fixture(dest)  # written once, reused for the second option
    return data.gt_root if part == "gt" else data.generated_root


def _dynamic_degree_textures(dest: Path) -> None:
    """The dynamic-degree fixture videos (known dynamic degree) at a size torchvision's RAFT accepts."""
    import numpy as np

    from pinbench.media.video import write_video
    from pinbench_recipes.dynamic_degree.fixture import FIXTURE_VIDEOS, SEED, render

    dest.mkdir(parents=True, exist_ok=True)
    height, width = DD_CI_SIZE
    for number, video in enumerate(FIXTURE_VIDEOS):
        frames = render(video, np.random.default_rng([SEED, number]), height, width)
        write_video(dest / f"{video.name}.mp4", frames, video.fps, crf=12)


def verdict(name: str, entry: Mapping[str, Any], *, run_exit: int, out_root: Path = Path(".")) -> tuple[int, str]:
    """(exit code, one line): the diff's verdict, or a recorded smoke reference and a failure."""
    from pinbench.core.proposal import record_reference
    from pinbench.core.recipe import get_recipe
    from pinbench.core.reference import diff, load_reference, render_diff
    from pinbench.core.scorecard import ScorecardError, load_scorecard

    recipe = get_recipe(name)
    mode = "smoke" if entry["limit"] else "full"
    card_path = out_root / run_dir(name, entry) / "scorecard.json"
    if not card_path.is_file():
        return 1, f"{name}: no scorecard at {card_path}: the run (exit {run_exit}) failed before scoring; see its log"
    try:
        card = load_scorecard(card_path)
    except ScorecardError as exc:
        return 1, f"{name}: {exc}"
    reference = recipe.reference_path(entry["checkpoint"], mode)
    if reference is not None:
        result = diff(card, load_reference(reference, recipe=recipe))
        print(render_diff(result))
        if result.exit_code:
            return result.exit_code, f"{name}: differs from {reference.relative_to(REPO)} (diff above)"
        if run_exit:
            return run_exit, f"{name}: the diff passes but the run exited {run_exit}; see its log"
        return 0, f"{name}: matches {reference.relative_to(REPO)}"
    target = recipe.reference_file(entry["checkpoint"], mode)
    if mode == "full":
        return 1, f"{name}: no published reference {target.relative_to(REPO)} for a full run"
    recorded = out_root / RECORDED / target.relative_to(REPO)
    note = f"recorded by the GPU CI (run {os.environ.get('GITHUB_RUN_ID', 'local')}); review before committing"
    try:
        record_reference(card, recorded, recipe=recipe, tier="same_hw", note=note)
    except (ValueError, RuntimeError) as exc:
        return 1, f"{name}: no smoke reference {target.relative_to(REPO)}, and this run cannot be one: {exc}"
    return 1, (f"{name}: no smoke reference; recorded {recorded} from this run (in the job's artifacts): review it "
               f"and commit it as {target.relative_to(REPO)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/gpu_ci.py", description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=CONFIG)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check")
    p = sub.add_parser("plan")
    p.add_argument("--event", required=True)
    p.add_argument("--recipe")
    p.add_argument("--changed", nargs="*", default=[])
    for command in ("env", "inputs", "verdict"):
        p = sub.add_parser(command)
        p.add_argument("recipe")
        if command == "inputs":
            p.add_argument("dest", type=Path)
        if command == "verdict":
            p.add_argument("--run-exit", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
        if args.command == "check":
            print(f"{args.config}: {len(config['recipes'])} recipe(s) configured")
            return 0
        if args.command == "plan":
            print(json.dumps(plan(config, args.event, args.recipe, args.changed)))
            return 0
        if args.recipe not in config["recipes"]:
            raise ConfigError(f"{args.config}: no entry for recipe {args.recipe!r}")
        entry = config["recipes"][args.recipe]
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.command == "env":
        print("\n".join(env_lines(args.recipe, entry)))
        return 0
    if args.command == "inputs":
        print("RUN_ARGS=" + " ".join(write_inputs(args.recipe, entry, args.dest)))
        return 0
    code, line = verdict(args.recipe, entry, run_exit=args.run_exit)
    prefix = "::error::" if code and os.environ.get("GITHUB_ACTIONS") == "true" else ""
    print(prefix + line)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
