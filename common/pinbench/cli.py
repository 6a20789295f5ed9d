"""The ``pinbench`` command line: list, fetch, run, diff, record-reference, report, export, demo."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from pinbench.recipe import Recipe, RecipeError, RunConfig, available_recipes, get_recipe

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Pinned, reproducible recipes for video-generation and world-model benchmarks.")
console = Console()
err = Console(stderr=True, soft_wrap=True)


def _fail(message: str, code: int = 2) -> None:
    err.print(f"error: {message}", markup=False, highlight=False)
    raise typer.Exit(code)


def _recipe(name: str) -> Recipe:
    try:
        return get_recipe(name)
    except RecipeError as exc:
        _fail(str(exc))
        raise  # unreachable, for type checkers


def _parse_options(items: list[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            _fail(f"option {item!r} is not KEY=VALUE")
        options[key] = value
    return options


def _config(recipe: Recipe, checkpoint: str, out: Path | None, *, limit: int | None, shard: str | None,
            runtime: str, skip_generation: bool, skip_scoring: bool, fixture: bool, gpus: int,
            offline: bool, options: list[str]) -> RunConfig:
    from pinbench.runner import Shard

    if runtime not in ("local", "docker"):
        _fail(f"--runtime must be local or docker, not {runtime!r}")
    if limit is not None and limit < 1:
        _fail("--limit must be at least 1")
    try:
        parsed_shard = Shard.parse(shard) if shard else None
    except ValueError as exc:
        _fail(str(exc))
    if fixture:
        checkpoint = checkpoint or "fixture"
    elif not checkpoint:
        _fail(f"--checkpoint is required (known for {recipe.name}: {', '.join(recipe.checkpoints) or 'any'})")
    mode = "fixture" if fixture else ("smoke" if limit is not None else "full")
    return RunConfig(
        recipe=recipe.name, checkpoint=checkpoint, out_dir=out or recipe.default_out_dir(checkpoint, mode),
        limit=limit, shard=parsed_shard, runtime=runtime, skip_generation=skip_generation,
        skip_scoring=skip_scoring, fixture=fixture, gpus=gpus,
        offline=offline or os.environ.get("PINBENCH_OFFLINE") == "1", options=_parse_options(options),
    )


@app.command("list")
def list_recipes() -> None:
    """List the installed recipes, their versions, checkpoints and reference files."""
    for recipe in available_recipes().values():
        refs = sorted(p.name for p in (recipe.dir / "references").glob("*.yaml"))
        typer.echo(f"{recipe.name} {recipe.version}: {recipe.description}")
        typer.echo(f"  checkpoints: {', '.join(recipe.checkpoints) or '- (scores videos you provide)'}")
        typer.echo(f"  references:  {', '.join(refs) or '-'}")


@app.command()
def fetch(
    recipe_name: Annotated[str, typer.Argument(help="recipe name, e.g. paibench-c")],
    checkpoint: Annotated[str, typer.Option("--checkpoint", "-c")] = "",
    limit: Annotated[int | None, typer.Option(help="fetch only the first N tasks")] = None,
    lock: Annotated[bool, typer.Option(help="resolve unpinned revisions and SHA-256s into pins.yaml")] = False,
    option: Annotated[list[str], typer.Option("--option", "-o", help="recipe option KEY=VALUE")] = [],  # noqa: B006
) -> None:
    """Download every pinned input of a recipe into the cache (needs network; HF_TOKEN for gated repos)."""
    recipe = _recipe(recipe_name)
    if lock:
        from pinbench.hub import lock_pins

        lock_pins(recipe.pins_path, token=os.environ.get("HF_TOKEN"))
        console.print(f"locked {recipe.pins_path}")
    if recipe.fetch is None:
        console.print(f"{recipe.name}: nothing to fetch (scores user-provided videos with bundled code)")
        return
    cfg = _config(recipe, checkpoint or "any", None, limit=limit, shard=None, runtime="local",
                  skip_generation=False, skip_scoring=False, fixture=False, gpus=0, offline=False,
                  options=option)
    recipe.fetch(cfg)


@app.command()
def run(
    recipe_name: Annotated[str, typer.Argument(help="recipe name, e.g. paibench-c")],
    checkpoint: Annotated[str, typer.Option("--checkpoint", "-c", help="model checkpoint name")] = "",
    out: Annotated[Path | None, typer.Option("--out", help="run directory (default runs/<recipe>/<ckpt>)")] = None,
    limit: Annotated[int | None, typer.Option(help="smoke run on the first N tasks")] = None,
    shard: Annotated[str | None, typer.Option(help="I/N: run only shard I of N (0-based)")] = None,
    runtime: Annotated[str, typer.Option(help="local or docker")] = "local",
    skip_generation: Annotated[bool, typer.Option("--skip-generation")] = False,
    skip_scoring: Annotated[bool, typer.Option("--skip-scoring")] = False,
    fixture: Annotated[bool, typer.Option("--fixture", help="CPU run on generated small data")] = False,
    gpus: Annotated[int, typer.Option(envvar="GPUS", help="GPUs to use (one process per GPU)")] = 1,
    offline: Annotated[bool, typer.Option(help="fail fast on anything not fetched")] = False,
    option: Annotated[list[str], typer.Option("--option", "-o", help="recipe option KEY=VALUE")] = [],  # noqa: B006
) -> None:
    """Run a recipe: prepare, generate, score, diff against the reference, report."""
    recipe = _recipe(recipe_name)
    cfg = _config(recipe, checkpoint, out, limit=limit, shard=shard, runtime=runtime,
                  skip_generation=skip_generation, skip_scoring=skip_scoring, fixture=fixture, gpus=gpus,
                  offline=offline, options=option)
    if cfg.runtime == "docker":
        from pinbench.docker_run import run_in_docker

        raise typer.Exit(run_in_docker(recipe, cfg))
    try:
        outcome = recipe.run(cfg)
    except RecipeError as exc:
        _fail(str(exc))
    if outcome.scorecard_path:
        console.print(f"scorecard: {outcome.scorecard_path}")
    if outcome.report_path:
        console.print(f"report:    {outcome.report_path}")
    raise typer.Exit(outcome.exit_code)


@app.command("diff")
def diff_cmd(
    scorecard: Annotated[Path, typer.Argument(help="scorecard.json of a run")],
    reference: Annotated[Path | None, typer.Option(help="reference file (default: the recipe's)")] = None,
) -> None:
    """Compare a scorecard with its reference; non-zero exit on FAIL, partial run, missing metric or mismatch."""
    from pinbench.reference import diff, load_reference, render_diff
    from pinbench.scorecard import load_scorecard

    card = load_scorecard(scorecard)
    if reference is None:
        recipe = _recipe(card["recipe"])
        reference = recipe.reference_path(card["checkpoint"], card["mode"])
        if reference is None:
            _fail(f"{scorecard}: no {card['mode']} reference for {recipe.name} / {card['checkpoint']}")
    result = diff(card, load_reference(reference))
    typer.echo(render_diff(result))
    raise typer.Exit(result.exit_code)


def _reference_template(recipe: Recipe, checkpoint: str) -> Path:
    """A reference of the recipe to take metric directions, tolerances and primary flags from."""
    like = recipe.reference_path(checkpoint, "full")
    candidates = sorted((recipe.dir / "references").glob("*.yaml"))
    if like is None and not candidates:
        _fail(f"{recipe.name} has no reference to take metric directions from; pass --like")
    return like or candidates[0]


@app.command("record-reference")
def record_reference_cmd(
    scorecard: Annotated[Path, typer.Argument(help="scorecard.json of a trusted, complete run")],
    out: Annotated[Path | None, typer.Option(help="where to write (default: the recipe's references/)")] = None,
    like: Annotated[Path | None, typer.Option(help="reference to take directions/tolerances/primary from")] = None,
    tier: Annotated[str, typer.Option(help="same_hw (tight, for GPU CI) or cross_hw")] = "same_hw",
    tolerance: Annotated[list[str], typer.Option(help="METRIC=abs:X or METRIC=rel:X override")] = [],  # noqa: B006
    direction: Annotated[list[str], typer.Option(help="METRIC=higher|lower for a metric the template lacks")] = [],  # noqa: B006
    note: Annotated[str, typer.Option(help="free text stored with the reference")] = "",
    force: Annotated[bool, typer.Option(help="replace an existing reference file")] = False,
) -> None:
    """Write a reference from a trusted run, so GPU CI can assert against it."""
    from pinbench.reference import load_reference, record_reference
    from pinbench.scorecard import load_scorecard

    card = load_scorecard(scorecard)
    if like is None or out is None:
        recipe = _recipe(card["recipe"])
        out = out or recipe.reference_file(card["checkpoint"], card["mode"])
        like = like or _reference_template(recipe, card["checkpoint"])
    template = load_reference(like)
    tolerances = {name: m.tolerance.as_dict() for name, m in template.metrics.items()}
    for item in tolerance:
        name, _, spec = item.partition("=")
        kind, _, value = spec.partition(":")
        if kind not in ("abs", "rel") or not value:
            _fail(f"--tolerance {item!r} is not METRIC=abs:X or METRIC=rel:X")
        tolerances[name] = {kind: float(value)}
    directions = {name: m.direction for name, m in template.metrics.items()}
    for item in direction:
        name, _, value = item.partition("=")
        if value not in ("higher", "lower"):
            _fail(f"--direction {item!r} is not METRIC=higher or METRIC=lower")
        directions[name] = value
    primary = {name for name, m in template.metrics.items() if m.primary}
    if out.exists() and not force:
        _fail(f"{out}: already exists (a published or recorded reference); pass --force to replace it")
    path = record_reference(card, out, tolerances=tolerances, directions=directions, primary=primary,
                            tier=tier, note=note)
    console.print(f"wrote {path}")


@app.command()
def report(
    scorecards: Annotated[list[Path], typer.Argument(help="one or more scorecard.json files")],
    out: Annotated[Path, typer.Option(help="report directory")] = Path("runs/report"),
) -> None:
    """Write a static HTML report (PNG plots) for one or more scorecards."""
    from pinbench.report import write_report

    cards, references, samples = [], {}, {}
    for i, path in enumerate(scorecards):
        card, references[i], samples[i] = _load_run(path)
        cards.append(card)
    index = write_report(cards, out, references=_present(references), samples=_present(samples))
    console.print(f"report: {index}")


def _load_run(scorecard: Path) -> tuple[dict, Any, list | None]:
    """A run's scorecard, the reference for its checkpoint and mode (if any), and its own samples.jsonl."""
    from pinbench.reference import load_reference
    from pinbench.runner import read_merged
    from pinbench.scorecard import load_scorecard

    card = load_scorecard(scorecard)
    try:
        ref_path = get_recipe(card["recipe"]).reference_path(card["checkpoint"], card["mode"])
    except RecipeError:
        ref_path = None
    samples_name = card["samples"].get("path")
    samples_file = scorecard.parent / samples_name if samples_name else None
    samples = read_merged(samples_file) if samples_file and samples_file.is_file() else None
    return card, load_reference(ref_path) if ref_path else None, samples


def _present(by_index: dict[int, Any]) -> dict[int, Any]:
    return {i: value for i, value in by_index.items() if value is not None}


@app.command()
def export(
    recipe_name: Annotated[str, typer.Argument(help="recipe to export")],
    dest: Annotated[Path, typer.Argument(help="new directory to write")],
    force: Annotated[bool, typer.Option(help="replace DEST if it exists")] = False,
) -> None:
    """Write a self-contained copy of one recipe: its code, exactly the library code it imports,
    its lock, Dockerfile(s) and README; nothing points back into this repository."""
    from pinbench.export import export_recipe

    path = export_recipe(_recipe(recipe_name), dest, force=force)
    console.print(f"exported {recipe_name} to {path}")


@app.command()
def build(
    recipe_name: Annotated[str, typer.Argument(help="recipe whose images to build")],
    build_dir: Annotated[Path, typer.Option(help="where the exported build context goes")] = Path("build/export"),
) -> None:
    """Build a recipe's images (needs a Docker engine); the build context is the recipe's export."""
    from pinbench.docker_run import build_recipe_images

    for tag in build_recipe_images(_recipe(recipe_name), build_dir):
        console.print(f"built {tag}")


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="demo directory")] = Path("runs/demo"),
    recipe_names: Annotated[list[str], typer.Option("--recipe", help="only these recipes")] = [],  # noqa: B006
) -> None:
    """Run every recipe's fixture mode on CPU and write one report over all of them."""
    from pinbench.report import write_report

    recipes = [get_recipe(n) for n in recipe_names] or list(available_recipes().values())
    if not recipes:
        _fail("no recipes installed")
    cards, references, samples, failed = [], {}, {}, []
    for recipe in recipes:
        console.rule(f"{recipe.name} (fixture)")
        cfg = RunConfig(recipe=recipe.name, checkpoint="fixture", out_dir=out / recipe.name, fixture=True,
                        offline=True)
        try:
            outcome = recipe.run(cfg)
        except (ValueError, RuntimeError, OSError) as exc:  # one recipe's error never hides the others
            failed.append(f"{recipe.name} ({' '.join(str(exc).split())})")
            continue
        if outcome.exit_code != 0:
            failed.append(f"{recipe.name} (exit {outcome.exit_code})")
        if outcome.scorecard_path:
            i = len(cards)
            card, references[i], samples[i] = _load_run(outcome.scorecard_path)
            cards.append(card)
    index = write_report(cards, out / "report", references=_present(references), samples=_present(samples),
                         title="pinbench demo (fixture runs)")
    console.print(f"demo report: {index}")
    if failed:
        _fail("fixture runs failed: " + ", ".join(failed), code=1)


def main(argv: list[str] | None = None) -> None:
    """Entry for the ``pinbench`` script, ``python -m pinbench`` and recipes' ``__main__`` modules.

    Errors about inputs (bad files, unfetched weights, refused references) end in one redacted line
    and exit 2; set PINBENCH_DEBUG=1 for the traceback.
    """
    from pinbench.video import VideoError

    try:
        app(args=argv, prog_name="pinbench")
    except (ValueError, RuntimeError, OSError, VideoError) as exc:
        if os.environ.get("PINBENCH_DEBUG") == "1":
            raise
        from pinbench.provenance import redact

        err.print(f"error: {redact(' '.join(str(exc).split()))}", markup=False, highlight=False)
        sys.exit(2)


RECIPE_SUBCOMMANDS = ("fetch", "run", "export")


def recipe_main(recipe_name: str, argv: list[str] | None = None) -> None:
    """``python -m <recipe>``: the pinbench CLI with the recipe already chosen.

    ``python -m paibench_c run --checkpoint Cosmos3-Nano`` is ``pinbench run paibench-c --checkpoint ...``,
    so an exported recipe runs alone without the ``pinbench`` console script.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in RECIPE_SUBCOMMANDS:
        args.insert(1, recipe_name)
    main(args)
