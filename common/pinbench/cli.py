"""The ``pinbench`` command line.

Startup stays light: ``list``, ``diff``, ``report``, ``docs`` and ``--help`` read recipe declarations
(YAML) and never import a recipe's code or torch; each command imports what it needs inside its body.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pinbench.core.config import (
    CHECKPOINT_NOTED_ENV,
    RecipeError,
    RunConfig,
    check_checkpoint_name,
    checkpoint_noted,
)
from pinbench.core.files import aligned, counted, counted_of
from pinbench.core.recipe import Recipe, available_recipes, get_recipe

if TYPE_CHECKING:
    from pinbench.core.generation import Request
    from pinbench.core.run import RunOutcome
    from pinbench.core.scorecard import Scorecard
    from pinbench.results.compare import Run

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Pinned, reproducible recipes for video-generation and world-model benchmarks.")
OptionList = Annotated[list[str], typer.Option("--option", "-o", help="recipe option KEY=VALUE (see run --help)")]


def _show_version(value: bool) -> None:
    if value:
        import pinbench

        typer.echo(f"pinbench {pinbench.__version__}")
        raise typer.Exit()


@app.callback()
def _global_options(
    version: Annotated[bool, typer.Option("--version", callback=_show_version, is_eager=True,
                                          help="print the version and exit")] = False,
) -> None:
    pass


def _echo(text: str = "") -> None:
    typer.echo(text)


def _fail(message: str, code: int = 2) -> None:
    from pinbench.core.provenance import redact

    typer.echo(f"error: {redact(' '.join(str(message).split()))}", err=True)
    raise typer.Exit(code)


@contextmanager
def _failing(*errors: type[Exception]) -> Iterator[None]:
    """One of ``errors`` ends the command in one line (``_fail``)."""
    try:
        yield
    except errors as exc:
        _fail(str(exc))


def _refuse_secret_shaped(option: str, path: Path | None) -> None:
    """Exit 2 when an output path has a token's shape (``secret_shaped_refusal``, as --out of a run): it is printed
    and written into what the command makes."""
    from pinbench.core.provenance import secret_shaped_refusal

    if path is not None and (refusal := secret_shaped_refusal(option, path)):
        _fail(refusal)


@contextmanager
def _writing_to(option: str, path: Path) -> Iterator[None]:
    """An OS error while writing where an option points: one line naming the option and the path (a rename's
    target, not its temporary file: a folder at a bundle's media/<sha>.mp4 was named as media/.<sha>.mp4.*.tmp)."""
    try:
        yield
    except OSError as exc:
        _fail(f"{option} {path}: cannot write {exc.filename2 or exc.filename or path} ({exc.strerror or exc})")


@contextmanager
def _stopped_saying(kept: Callable[[], str]) -> Iterator[None]:
    """Ctrl-C, SIGTERM or SIGHUP (``terminate_as_exit`` inside) ends the block with one line: how it was stopped, and
    ``kept()``, what is kept and how to go on, asked once stopped (Ctrl-C was a silent exit 130, Typer's; SIGTERM,
    Slurm's time limit or ``scancel``, a silent exit 143)."""
    try:
        yield
    except KeyboardInterrupt:
        typer.echo(f"interrupted: {kept()}", err=True)
        raise typer.Exit(130) from None
    except SystemExit as exc:
        from pinbench.core.rundir import Terminated

        if isinstance(exc, Terminated):
            with contextlib.suppress(OSError):   # a SIGHUP may have taken the terminal with it
                typer.echo(f"terminated by {exc.signal_name}: {kept()}", err=True)
        raise


def _run_kept(cfg: RunConfig) -> str:
    """What a stopped run leaves: its finished samples, or nothing where it stopped before making its ``--out`` or
    before that folder held this run (the line said samples were kept in a folder that did not exist, or in an empty
    one, or in another recipe's run, which the same command then refused), or while another process held this run
    (the line said this one kept samples and could resume: it never claimed the folder, and is refused until then)."""
    from pinbench.core.rundir import claim_conflict, holds_run

    out = cfg.out_dir
    if not out.exists():
        return f"nothing was written ({out} not made yet); run the same command to start"
    if conflict := claim_conflict(cfg):
        return (f"nothing was written by this process ({out} in use: {conflict}); run the same command once that one "
                "ends")
    if not holds_run(out, cfg):
        return f"nothing was written ({out} holds no run of this recipe, checkpoint, mode and inputs)"
    return f"the samples finished so far are kept in {out}; run the same command to resume"


@contextmanager
def _undone_when_terminated(out: Path) -> Iterator[None]:
    """SIGTERM or SIGHUP (a job's time limit, a lost SSH session) as SystemExit, so the block's undo runs, and one
    line saying so. Before, the process died on the signal and left a new --out with its marker and a half-built
    fixture, which a later look took for a requests folder."""
    from pinbench.core.rundir import Terminated, terminate_as_exit

    try:
        with terminate_as_exit():
            yield
    except Terminated as exc:
        with contextlib.suppress(OSError):   # a SIGHUP may have taken the terminal with it
            typer.echo(f"terminated by {exc.signal_name}: --out {out} left as it was (what this run added there is "
                       "removed); run the same command again", err=True)
        raise


def _recipe(name: str) -> Recipe:
    try:
        return get_recipe(name)
    except RecipeError as exc:
        _fail(str(exc))
        raise  # unreachable, for type checkers


def _config(recipe: Recipe, checkpoint: str, out: Path | None, *, options: list[str], limit: int | None = None,
            shard: str | None = None, runtime: str = "local", skip_generation: bool = False,
            skip_scoring: bool = False, fixture: bool = False, gpus: int | None = None, offline: bool = False,
            check_required: bool = True, generator: str | None = None, generator_options: Sequence[str] = (),
            generation_timeout: float | None = None, requests: bool = False) -> RunConfig:
    from pinbench.core.config import Shard
    from pinbench.core.options import OptionError, parse_pairs

    try:
        parsed_shard = Shard.parse(shard) if shard is not None else None   # "" is a bad shard, not none
    except ValueError as exc:
        _fail(f"--shard: {exc}")
    try:
        return recipe.config(checkpoint, out_dir=out, limit=limit, shard=parsed_shard, runtime=runtime,
                             skip_generation=skip_generation, skip_scoring=skip_scoring, fixture=fixture, gpus=gpus,
                             offline=offline, options=parse_pairs(options), check_required=check_required,
                             generator=generator, generator_options=parse_pairs(list(generator_options), "-g"),
                             generation_timeout_s=generation_timeout, requests=requests)
    except (RecipeError, OptionError, ValueError) as exc:
        _fail(str(exc))
        raise


# ------------------------------------------------------------------------------------- describing


def describe_options(recipe: Recipe) -> list[str]:
    """The recipe's flags and ``-o`` options, one line each, for ``run --help`` and ``list -v``."""
    flags = recipe.flags
    honoured = [f for f, ok in (("--limit", flags.limit), ("--shard", flags.shard),
                                ("--skip-generation", flags.skip_generation), ("--skip-scoring", flags.skip_scoring))
                if ok]
    lines = [f"flags honoured: {', '.join(honoured) or 'none'}; --gpus: {flags.gpus} "
             "(others are refused)"]
    if not recipe.options:
        lines.append("options: none")
    for name, spec in recipe.options.items():
        kind = spec.describe_type("|")
        env = f" [${spec.env}]" if spec.env else ""
        lines.append(f"  -o {name}=<{kind}>  default {spec.describe_default()}{env}")
        lines.append(f"      {spec.help}")
    return lines


def describe_usage(recipe: Recipe) -> list[str]:
    """The checkpoints a run accepts and the recipe's example command lines, for ``run <recipe> --help``."""
    lines = [f"checkpoints: {', '.join(recipe.checkpoints)} (with a reference or a known model); any other name "
             "scores your own model" if recipe.checkpoints else
             "checkpoints: any name for your model (no published reference exists)"]
    if recipe.no_download is not None:
        lines.append(f"without download or GPU: {recipe.no_download.options} ({recipe.no_download.what})")
    if recipe.examples:
        lines.append("examples:")
        for example in recipe.examples:
            lines += [f"  {example.run}", f"      {example.what}"]
    return lines


def _checkpoint_note(recipe: Recipe, checkpoint: str) -> str | None:
    """A name close to one of the recipe's checkpoints but not one of them is most likely a typo: the note that says
    so (any name is allowed, it scores your own model), or None. Said after the doctor, before anything is
    downloaded: a name the doctor refuses (paibench-c's own generator knows only its checkpoints) is said once, by
    it. Without the doctor the run holds the note until its preparation is done (``Run``), where a recipe's own
    refusal of the name is that one line. With ``--runtime docker`` the host says it and its stages do not
    (``CHECKPOINT_NOTED_ENV``), without the doctor once its first stage ends (``run_in_docker``), as ``pinbench
    submit`` does and its jobs do not."""
    from pinbench.core.options import did_you_mean

    if checkpoint in recipe.checkpoints:
        return None
    hint = did_you_mean(checkpoint, recipe.checkpoints)
    return (f"note: checkpoint {checkpoint!r} is not one of {recipe.name}'s ({', '.join(recipe.checkpoints)}){hint}; "
            "a new name is taken as your own model") if hint else None


@app.command("list")
def list_recipes(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="options, metrics, changelog")]
                 = False) -> None:
    """List the installed recipes, their versions, checkpoints and reference files."""
    with _failing(RecipeError, ValueError):
        recipes = available_recipes()
    for recipe in recipes.values():
        refs = sorted(p.name for p in (recipe.dir / "references").glob("*.yaml"))
        _echo(f"{recipe.name} {recipe.version}: {recipe.description}")
        _echo(f"  checkpoints: {', '.join(recipe.checkpoints) or '- (scores inputs you provide)'}")
        _echo(f"  references:  {', '.join(refs) or '-'}")
        _echo(f"  hardware:    {recipe.hardware}")
        if verbose:
            _echo("  " + "\n  ".join(describe_options(recipe)))
            _echo("  metrics:")
            for name, info in recipe.metrics.items():
                star = "*" if info.primary else " "
                _echo(f"   {star} {name}: {info.direction} is better, {info.aggregation}, {info.kind}"
                      + (f" ({info.unit})" if info.unit else ""))
            _echo("  changelog:")
            for entry in recipe.changelog:
                _echo(f"    {entry.version} ({entry.date}): {entry.change}")


# -------------------------------------------------------------------------------------- running


@app.command()
def fetch(
    recipe_name: Annotated[str, typer.Argument(help="recipe name, e.g. paibench-c")],
    checkpoint: Annotated[str, typer.Option("--checkpoint", "-c")] = "",
    limit: Annotated[int | None, typer.Option(help="fetch only the first N tasks")] = None,
    write_pins: Annotated[bool, typer.Option(help="maintainer: also write the resolved values into the recipe's "
                                                  "pins.yaml (review and commit it)")] = False,
    old_lock_flag: Annotated[bool, typer.Option("--lock", hidden=True)] = False,
    option: OptionList = [],  # noqa: B006
) -> None:
    """Download every pinned input of a recipe into the cache (needs network; HF_TOKEN for gated repos).

    Values pins.yaml leaves null, of the pins this fetch downloads, are resolved once into this machine's resolved
    pins (never into pins.yaml) and reused by every later run; scorecards mark them "resolved at run time, not the
    reference's".
    """
    if old_lock_flag:
        _fail("--lock is now --write-pins (writes the resolved values into the recipe's pins.yaml)")
    recipe = _recipe(recipe_name)
    if checkpoint:  # a name that would escape its folders is refused before anything is resolved or written
        with _failing(RecipeError):
            check_checkpoint_name(checkpoint)
    # options are checked (a misspelled -o key, a bad value) before anything is downloaded
    cfg = _config(recipe, checkpoint or "any", None, limit=limit, options=option, check_required=False)
    if (nothing := recipe.downloads_nothing(cfg)) is not None and not write_pins:   # before resolving a null pin
        _echo(f"{recipe.name}: nothing to fetch with {nothing.options} ({nothing.what})")
        return
    from pinbench.ops.network import fetching_as

    # a network failure names this fetch again, on a connected machine: resolving a null pin's value too
    with fetching_as(recipe, cfg):
        if recipe.pins_path.is_file():
            from pinbench.ops.machine_pins import resolve_recipe_pins

            _, changes = resolve_recipe_pins(recipe, token=os.environ.get("HF_TOKEN"), reads=recipe.fetch_pins(cfg))
            for change in changes:
                _echo(f"resolved at run time (this machine's resolved pins): {change}")
            if write_pins:
                from pinbench.ops.pin_writer import write_recipe_pins

                written = write_recipe_pins(recipe, token=os.environ.get("HF_TOKEN"))
                for change in written:
                    _echo(f"pins.yaml: {change}")
                _echo(f"{recipe.pins_path}: {counted(len(written), 'value')} written; review and commit it" if written
                      else f"{recipe.pins_path}: nothing left to write")
        elif write_pins:
            _fail(f"{recipe.name} has no pins.yaml to write resolved values into")
        if recipe.fetch_entry is None:
            _echo(f"{recipe.name}: nothing to fetch (scores inputs you provide with bundled code)")
            return
        recipe.fetch(cfg)


@app.command(context_settings={"help_option_names": []})
def run(
    ctx: typer.Context,
    recipe_name: Annotated[str | None, typer.Argument(help="recipe name, e.g. paibench-c")] = None,
    checkpoint: Annotated[str, typer.Option("--checkpoint", "-c", help="model checkpoint name")] = "",
    out: Annotated[Path | None, typer.Option("--out", help="run directory (default runs/<recipe>/<ckpt>)")] = None,
    limit: Annotated[int | None, typer.Option(help="smoke run on the first N tasks")] = None,
    shard: Annotated[str | None, typer.Option(help="I/N: run only shard I of N (0-based)")] = None,
    runtime: Annotated[str, typer.Option(help="local or docker")] = "local",
    skip_generation: Annotated[bool, typer.Option("--skip-generation")] = False,
    skip_scoring: Annotated[bool, typer.Option("--skip-scoring")] = False,
    fixture: Annotated[bool, typer.Option("--fixture", help="CPU run on generated small data")] = False,
    gpus: Annotated[int | None, typer.Option(envvar="GPUS", help="GPUs to use (default: the recipe's)")] = None,
    offline: Annotated[bool, typer.Option(help="fail fast on anything not fetched")] = False,
    verify_inputs: Annotated[bool, typer.Option("--verify-inputs", help="hash every input file again instead of "
                                                "trusting the run directory's digest cache")] = False,
    option: OptionList = [],  # noqa: B006
    generator: Annotated[str | None, typer.Option(
        "--generator", help="make the rollouts with this generator: NAME, python:MODULE:FACTORY or "
                            "'command:ARGV' with {request} and {out} (docs: Bring your model)")] = None,
    generator_option: Annotated[list[str], typer.Option(
        "--generator-option", "-g", help="KEY=VALUE for the generator (repeatable)")] = [],  # noqa: B006
    generation_timeout: Annotated[float | None, typer.Option(
        help="seconds one rollout may take before its generator is stopped and the sample fails")] = None,
    generator_image: Annotated[str | None, typer.Option(
        help="--runtime docker: make the rollouts in this image (pinbench, the recipe and your --generator in it, "
             "e.g. built FROM the recipe's image), then score in the pinned one")] = None,
    skip_doctor: Annotated[bool, typer.Option("--skip-doctor", help="start without the doctor's checks "
                                                                    "(`pinbench doctor`)")] = False,
    build: Annotated[bool, typer.Option("--build", help="--runtime docker: build the recipe's images (`pinbench "
                                                        "build`) after the doctor's checks, not before")] = False,
    base_image: Annotated[list[str], typer.Option(
        "--base-image", help="with --build: as `pinbench build --base-image`")] = [],  # noqa: B006
    move_aside: Annotated[bool, typer.Option("--move-aside", help="first move an earlier run in --out to "
                                                                  "<out>.aside-<time> (nothing is deleted)")] = False,
    show_help: Annotated[bool, typer.Option("--help", "-h", help="this help and the recipe's options")] = False,
) -> None:
    """Run a recipe: prepare, generate, score, diff against the reference, report."""
    if show_help or recipe_name is None:
        _echo(ctx.get_help())
        if recipe_name is not None:
            recipe = _recipe(recipe_name)
            _echo(f"\n{recipe.name} {recipe.version}: {recipe.description}")
            _echo("\n".join(describe_usage(recipe)))
            _echo("\n".join(describe_options(recipe)))
        raise typer.Exit(0 if show_help else 2)
    if generator_image is not None:   # checked before all else: an empty or spaced one reached the Docker engine
        from pinbench.core.names import image_reference_problem

        if problem := image_reference_problem("--generator-image", generator_image):
            _fail(problem)
    recipe = _recipe(recipe_name)
    cfg = _config(recipe, checkpoint, out, limit=limit, shard=shard, runtime=runtime,
                  skip_generation=skip_generation, skip_scoring=skip_scoring, fixture=fixture, gpus=gpus,
                  offline=offline, options=option, generator=generator, generator_options=generator_option,
                  generation_timeout=generation_timeout)
    cfg.verify_inputs = verify_inputs
    if cfg.generator is not None:
        from pinbench.ops.generation import command_of

        # a command naming no {out} or an unknown {placeholder}: refused before all that follows (--move-aside moved
        # the earlier run aside first; under docker the image's refusal hid it)
        with _failing(RecipeError):
            command_of(cfg.generator)
    if cfg.runtime == "docker":   # a generator no image holds: refused before the doctor and any container
        from pinbench.ops.docker_runtime import generation_image_problem

        if problem := generation_image_problem(recipe, cfg, generator_image):
            _fail(problem)
    elif generator_image is not None:
        _fail("--generator-image applies to --runtime docker (without it the generator runs here)")
    if build and cfg.runtime != "docker":
        _fail("--build applies to --runtime docker (it builds the images the run's stages run in)")
    if base_image and not build:
        _fail("--base-image applies to --build")
    if build:   # a misspelled --base-image fails here, not after the doctor
        from pinbench.ops.docker_runtime import base_overrides

        with _failing(RecipeError):
            overrides = base_overrides(recipe, base_image)
    with _stopped_saying(partial(_run_kept, cfg)):
        from pinbench.core.rundir import check_out_dir_outside, input_paths

        with _failing(RecipeError):
            check_out_dir_outside(cfg, input_paths(cfg))
        _check_sample_cache(cfg)
        if move_aside and cfg.skip_generation:   # (it then refused for want of them, or scored none)
            _fail(f"--move-aside with --skip-generation: moving the earlier run aside takes with it the rollouts "
                  f"{cfg.out_dir} holds, which --skip-generation scores; to score them under other options, run "
                  "their --generator with --move-aside (or into another --out): the sample cache gives their "
                  "rollouts back without generating them")
        if move_aside:
            from pinbench.core.rundir import holds_run
            from pinbench.core.rundir import move_aside as move

            with _failing(RecipeError):
                same = cfg.shard is not None and holds_run(cfg.out_dir, cfg)
                moved = None if same else move(cfg.out_dir)
            _echo(f"--move-aside: {cfg.out_dir} holds this run, which its shards share: nothing moved" if same
                  else f"moved the earlier run to {moved}" if moved
                  else f"--move-aside: nothing in {cfg.out_dir} to move")
        # a finished run that would compute nothing answers first: no doctor, no recipe code
        if cfg.runtime == "local":
            from pinbench.core.run import answer_unchanged

            with _failing(RecipeError):
                _outcome(answer_unchanged(recipe, cfg))
        if not skip_doctor and not cfg.fixture:  # seconds of checks before hours of GPU time (and of --build)
            from pinbench.ops.doctor import diagnose, report

            code = report(diagnose(recipe, cfg, generator_image=generator_image, building=build),
                          lambda line: typer.echo(line, err=True), verbose=False)
            if code:
                raise typer.Exit(code)
        # a docker stage's run: the host said it, before --build and the downloads (it was said again per stage)
        noted = checkpoint_noted(cfg, os.environ.get(CHECKPOINT_NOTED_ENV))
        note = None if noted else _checkpoint_note(recipe, cfg.checkpoint)
        if note and not skip_doctor:   # else held: said once the recipe has not refused the name itself
            typer.echo(note, err=True)
            note = None
        if cfg.runtime == "docker":
            from pinbench.ops.docker_runtime import run_in_docker

            if build:
                _build_images(recipe, base_images=overrides)
            with _failing(RecipeError):
                code = run_in_docker(recipe, cfg, generator_image=generator_image, skip_doctor=skip_doctor,
                                     note=note)
            raise typer.Exit(code)
        from pinbench.ops.launch import run_recipe

        with _failing(RecipeError):
            _outcome(run_recipe(cfg, note=note))


def _check_sample_cache(cfg: RunConfig) -> None:
    """A ``$PINBENCH_SAMPLE_CACHE`` that is no folder (or is inside the run directory or an input folder) or a
    ``$PINBENCH_SAMPLE_CACHE_MB`` that is no size stops the run before anything is prepared (it stopped only at the
    first step that keeps samples, after the downloads; a recipe none of whose steps keeps any, remembench, ran on
    and passed)."""
    from pinbench.core.rundir import input_paths
    from pinbench.core.sample_cache import checked_dir

    checked_dir(cfg.out_dir, inputs=input_paths(cfg))


def _outcome(outcome: RunOutcome | None) -> None:
    """Where a run's scorecard and report are, then exit with its code (nothing for None: it did not run)."""
    if outcome is None:
        return
    if outcome.scorecard_path:
        _echo(f"scorecard: {outcome.scorecard_path}")
    if outcome.report_path:
        _echo(f"report:    {outcome.report_path}")
    raise typer.Exit(outcome.exit_code)


@app.command("requests")
def requests_cmd(
    recipe_name: Annotated[str, typer.Argument(help="recipe name, e.g. remembench")],
    out: Annotated[Path, typer.Option("--out", help="a folder: requests.jsonl and the files they name (inputs/) "
                                                   "go there, and it travels whole to where your model runs")],
    checkpoint: Annotated[str, typer.Option("--checkpoint", "-c", help="model checkpoint name")] = "requests",
    fixture: Annotated[bool, typer.Option("--fixture", help="the fixture's requests (its small data)")] = False,
    limit: Annotated[int | None, typer.Option(help="the first N, as a --limit run")] = None,
    option: OptionList = [],  # noqa: B006
) -> None:
    """Write one request per rollout of a run of RECIPE: everything a generator needs (docs: Bring your model)."""
    from pinbench.core.files import FileError, filled_output_folder, write_if_changed
    from pinbench.core.generation import (
        KINDS,
        REQUESTS_FILE,
        RequestError,
        prune_inputs,
        refuse_other_recipes,
        requests_text,
    )

    _refuse_secret_shaped("--out", out)   # with --fixture, not the run's --out, which Recipe.config checks
    recipe = _recipe(recipe_name)
    # --fixture: the run is the fixture run's (its directory, runs/<recipe>/fixture-fixture, keeps the data, built
    # once); --out receives only the requests and the copies of the files they name
    cfg = _config(recipe, "" if fixture else checkpoint, None if fixture else out, limit=limit, fixture=fixture,
                  options=option, check_required=False, requests=True)
    # a failure midway (a bad input, SIGTERM or SIGHUP) leaves --out as it was: no half-filled folder that looks
    # ready to travel; requests.jsonl written is the end of it (a prune stopped midway leaves only files it names)
    with _writing_to("--out", out), _failing(RecipeError, RequestError, FileError):
        refuse_other_recipes(out, recipe.name)
        with _undone_when_terminated(out), filled_output_folder(
                out, ".pinbench-requests", "requests folder", "requests.jsonl and inputs/",
                earlier=lambda folder: (folder / REQUESTS_FILE).is_file()):
            asked = _requests_of(recipe, cfg, out)
            path = write_if_changed(out / REQUESTS_FILE, requests_text(asked))
        stale = prune_inputs(out, asked)
    kinds = sorted({r.kind for r in asked})
    _echo(f"wrote {counted(len(asked), 'request')} to {path}: {', '.join(f'{k} ({KINDS[k]})' for k in kinds)}"
          + (f"; removed {counted(stale, 'file')} of inputs/ that no request names" if stale else ""))


def _requests_of(recipe: Recipe, cfg: RunConfig, root: Path) -> list[Request]:
    """The requests of a run of ``cfg``, the files they name under ``root``. ``--fixture``: the fixture's data is
    the fixture run's, built once in its directory (``requests`` and ``rollouts check`` share it: the check built
    it again in a temporary folder each time, seconds)."""
    from pinbench.core.run import Run

    if cfg.fixture:
        _fixture_run_dir(cfg.out_dir)
    return Run(recipe, cfg).requests(root)


def _fixture_run_dir(folder: Path) -> None:
    """Make the fixture run's directory, where ``--fixture`` builds the fixture's data (``_requests_of``), or exit
    naming it:
    its OSError was said as --out's, a folder that was not the one that could not be written."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _fail(f"{exc.filename or folder}: cannot create the fixture run's directory {folder}, where --fixture builds "
              f"the fixture's data ({exc.strerror or exc})")


rollouts_app = typer.Typer(no_args_is_help=True, help="Rollouts made outside pinbench, checked against their requests.")
app.add_typer(rollouts_app, name="rollouts")


@rollouts_app.command("check")
def rollouts_check(
    recipe_name: Annotated[str, typer.Argument(help="recipe name, e.g. mind")],
    folder: Annotated[Path, typer.Argument(help="the rollouts, in the layout the requests name (their output)")],
    requests_file: Annotated[Path | None, typer.Option("--requests", help="requests.jsonl, or the folder "
                                                                          "`pinbench requests --out` wrote it to "
                                                                          "(default: the recipe's, made as "
                                                                          "`pinbench requests` makes them)")]
    = None,
    fixture: Annotated[bool, typer.Option("--fixture", help="against the fixture's requests")] = False,
    limit: Annotated[int | None, typer.Option(help="the first N requests, as a --limit run")] = None,
    option: OptionList = [],  # noqa: B006
) -> None:
    """One line per rollout that is not what its request asks for (missing, undecodable, frames, rate, size)."""
    import tempfile

    from pinbench.core.generation import REQUESTS_FILE, RequestError, read_requests, unasked_lines
    from pinbench.ops.generation import NearNames, check_rollout

    recipe = _recipe(recipe_name)
    if not folder.is_dir():
        _fail(f"{folder}: " + ("not a folder of rollouts" if folder.exists() else "no such folder"))
    if requests_file is not None and (requests_file / REQUESTS_FILE).is_file():   # the folder `requests` wrote
        requests_file = requests_file / REQUESTS_FILE
    if limit is not None and limit < 1:   # [:0] checked nothing and passed, [:-2] dropped the last two unsaid
        _fail("--limit must be at least 1")
    with _failing(RecipeError, RequestError):
        if requests_file is not None:
            asked = read_requests(requests_file, recipe.name)[:limit]
            if not asked:   # a file a killed `pinbench requests` left empty: "0 of 0" passed
                _fail(f"{requests_file}: holds no requests")
        else:
            with tempfile.TemporaryDirectory(prefix="pinbench-requests-") as scratch:
                cfg = _config(recipe, "" if fixture else "rollouts", None if fixture else Path(scratch),
                              limit=limit, fixture=fixture, options=option, check_required=False)
                asked = _requests_of(recipe, cfg, Path(scratch))
    # counted by request: the count was of distinct text before a line's first ':', so a folder named 'run:1' had
    # every rollout's problems counted as one ("6 of 7 are what their requests ask for" when none was)
    paths = [folder / request.output for request in asked]
    near = NearNames(paths)
    problems = [found for request, path in zip(asked, paths, strict=True)
                if (found := check_rollout(request, path, follow_symlinks=True, near=near))]
    for line in (line for found in problems for line in found):
        _echo(line)
    for line in unasked_lines(folder, asked, limit):
        _echo(line)
    good = len(asked) - len(problems)
    _echo(counted_of(good, len(asked), "rollout", ("is what its request asks for", "are what their requests ask for")))
    if problems:
        raise typer.Exit(2)


@app.command()
def doctor(
    recipe_name: Annotated[str, typer.Argument(help="recipe name, e.g. paibench-c")],
    checkpoint: Annotated[str, typer.Option("--checkpoint", "-c", help="model checkpoint name")] = "",
    out: Annotated[Path | None, typer.Option("--out", help="run directory (default runs/<recipe>/<ckpt>)")] = None,
    limit: Annotated[int | None, typer.Option(help="as the run: first N tasks")] = None,
    runtime: Annotated[str, typer.Option(help="local or docker")] = "local",
    skip_generation: Annotated[bool, typer.Option("--skip-generation")] = False,
    skip_scoring: Annotated[bool, typer.Option("--skip-scoring")] = False,
    gpus: Annotated[int | None, typer.Option(envvar="GPUS", help="GPUs the run will use")] = None,
    offline: Annotated[bool, typer.Option(help="as the run: nothing may be downloaded")] = False,
    option: OptionList = [],  # noqa: B006
) -> None:
    """Checks in seconds, the first thing `run` does: pins, cache and hashes, images, GPUs, disk, RAM,
    token, your inputs. One line per problem; exit 2 on any."""
    from pinbench.ops.doctor import diagnose, report

    recipe = _recipe(recipe_name)
    if not checkpoint and recipe.checkpoints:   # run refuses no --checkpoint; the doctor says whose checks these are
        _echo(f"note: no --checkpoint: the checks of {recipe.checkpoints[0]}, {recipe.name}'s first checkpoint")
    cfg = _config(recipe, checkpoint or (recipe.checkpoints[0] if recipe.checkpoints else "any"), out, limit=limit,
                  runtime=runtime, skip_generation=skip_generation, skip_scoring=skip_scoring, gpus=gpus,
                  offline=offline, options=option)
    raise typer.Exit(report(diagnose(recipe, cfg), _echo))


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []})
def annotate(
    ctx: typer.Context,
    recipe_name: Annotated[str | None, typer.Argument(help="recipe whose rollouts to annotate: remembench")] = None,
) -> None:
    """Annotate rollouts by hand in a local page (RememBench T2V: each rollout's departure and revisit frames).

    The recipe's tool takes the rest of the line: `pinbench annotate remembench --help` lists its options."""
    import importlib

    if recipe_name is None or recipe_name in ("-h", "--help"):
        _echo(ctx.get_help())
        raise typer.Exit(0 if recipe_name else 2)
    recipe = _recipe(recipe_name)
    module = f"{recipe.package}.annotate"
    try:
        tool = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        _fail(f"{recipe.name} has no annotation tool (remembench has one: its T2V pairs are annotated by hand)")
    with _failing(RecipeError):
        code = tool.main(ctx.args)
    raise typer.Exit(code)


# ------------------------------------------------------------------------------------ clusters


@app.command()
def submit(
    recipe_name: Annotated[str, typer.Argument(help="recipe name, e.g. dynamic-degree")],
    shards: Annotated[int, typer.Option(help="N: a job array of N tasks, task I runs --shard I/N")],
    engine: Annotated[str, typer.Option(help="the cluster's scheduler (slurm)")] = "slurm",
    checkpoint: Annotated[str, typer.Option("--checkpoint", "-c", help="model checkpoint name")] = "",
    out: Annotated[Path | None, typer.Option("--out", help="run directory (default runs/<recipe>/<ckpt>)")] = None,
    limit: Annotated[int | None, typer.Option(help="smoke run on the first N tasks")] = None,
    fixture: Annotated[bool, typer.Option("--fixture", help="CPU run on generated small data")] = False,
    offline: Annotated[bool, typer.Option(help="fail fast on anything not fetched")] = False,
    option: OptionList = [],  # noqa: B006
    partition: Annotated[str | None, typer.Option(help="sbatch --partition")] = None,
    gpus_per_task: Annotated[int | None, typer.Option(help="GPUs per array task (and per job of a phase that "
                                                            "uses GPUs); also the run's --gpus")] = None,
    time: Annotated[str | None, typer.Option("--time", help="sbatch --time of every job")] = None,
    finish_time: Annotated[str | None, typer.Option(help="sbatch --time of the jobs that are not arrays "
                                                         "(default: --time)")] = None,
    account: Annotated[str | None, typer.Option(help="sbatch --account")] = None,
    sbatch_arg: Annotated[list[str], typer.Option(help="one more sbatch option for every job, e.g. "
                                                       "--sbatch-arg=--mem=64G")] = [],  # noqa: B006
    container: Annotated[str, typer.Option(help="none (this checkout's .venv), docker, pyxis or apptainer")]
    = "none",
    image: Annotated[list[str], typer.Option(help="the image (REF, or STAGE=REF per stage): a registry reference "
                                                  "by digest, or a squashfs/SIF file")] = [],  # noqa: B006
    dry_run: Annotated[bool, typer.Option(help="write the sbatch scripts, submit nothing")] = False,
    generator: Annotated[str | None, typer.Option("--generator", help="every job makes the rollouts it scores "
                                                                      "with this generator (as run --generator)")]
    = None,
    generator_option: Annotated[list[str], typer.Option("--generator-option", "-g",
                                                        help="KEY=VALUE for the generator")] = [],  # noqa: B006
    generation_timeout: Annotated[float | None, typer.Option(help="seconds one rollout may take")] = None,
    generator_image: Annotated[str | None, typer.Option(
        help="--container docker, pyxis or apptainer: the generating phases' jobs run in this image (pinbench, the "
             "recipe and your --generator in it; by digest, or a squashfs/SIF file), the scoring ones in --image")]
    = None,
    skip_doctor: Annotated[bool, typer.Option("--skip-doctor", help="submit without the doctor's checks, and every "
                                                                    "job runs --skip-doctor")] = False,
) -> None:
    """Run a recipe on a Slurm cluster: a job array of N shards, then one job that merges the records and
    writes the scorecard, diff and report (the layout the recipe declares). Prints the job ids."""
    from pinbench.ops.doctor import report
    from pinbench.ops.submit import Request, SubmitError, doctor_findings, plan, submit_plan, write_scripts

    if engine != "slurm":
        _fail(f"--engine {engine!r}: only slurm is supported")
    request = Request(recipe=_recipe(recipe_name), shards=shards, checkpoint=checkpoint, out=out, limit=limit,
                      fixture=fixture, offline=offline, options=option, partition=partition,
                      gpus_per_task=gpus_per_task, time=time, finish_time=finish_time, account=account,
                      sbatch_args=sbatch_arg, container=container, images=image, generator=generator,
                      generator_options=generator_option, generation_timeout=generation_timeout,
                      generator_image=generator_image, skip_doctor=skip_doctor)
    with _failing(SubmitError):
        the_plan = plan(request)
        # the doctor's way on ("start anyway with `pinbench run ... --skip-doctor`") is submit's here
        code = 0 if dry_run else report(doctor_findings(the_plan), lambda line: typer.echo(
            line.replace("`pinbench run ...", "`pinbench submit ..."), err=True), verbose=False)
        if code:
            raise typer.Exit(code)
        # said here, once: the jobs are told not to (``PhaseJob.job_env``), each said it in its own log; without the
        # doctor the first phase's jobs hold it, and a recipe's own refusal of the name is the one line
        note = None if fixture or skip_doctor else _checkpoint_note(request.recipe,
                                                                    the_plan.phases[0].job.cfg.checkpoint)
        if note:
            typer.echo(note, err=True)
        if dry_run:
            for script in write_scripts(the_plan):
                _echo(f"wrote {script}")
            return
        record = submit_plan(the_plan)
    _echo(f"submitted {record.recipe} {record.recipe_version} ({record.which}) to Slurm:")
    for number, job in enumerate(record.jobs):
        shape = f"array 0-{record.shards - 1}" if job["sharded"] else "one job"
        after = f", after {record.jobs[number - 1]['job_id']} ends" if number else ""
        _echo(f"  {job['phase']:<8} job {job['job_id']} ({shape}{after}): {job['script']}")
    _echo(f"logs:   {the_plan.slurm_dir / 'logs'}")
    _echo(f"follow: pinbench status {the_plan.out_dir} --wait")


@app.command()
def status(
    run_dir: Annotated[Path, typer.Argument(help="a run directory")],
    wait: Annotated[bool, typer.Option("--wait", help="until the last submission's jobs have ended; exit "
                                                      "with the finish job's code")] = False,
    poll: Annotated[float, typer.Option(help="seconds between looks with --wait")] = 5.0,
    timeout: Annotated[float | None, typer.Option(help="give up waiting after this many seconds (exit 2)")]
    = None,
    no_slurm: Annotated[bool, typer.Option("--no-slurm", help="do not ask Slurm for job states")] = False,
) -> None:
    """Done / failed / pending samples per shard, the failures' reasons, and each job's Slurm state.

    Exit 0 while a job, a shard run by hand here or the run writing the scorecard is live, and for a complete
    scorecard; 2 once nothing of the run is known live and its scorecard is partial or missing (--no-slurm, or
    Slurm not reachable: no job is known live, and status says that its jobs may still be running)."""
    from pinbench.ops.status import exit_code, render, run_status
    from pinbench.ops.status import wait as wait_for

    if wait:
        final, code = wait_for(run_dir, poll_s=poll, timeout_s=timeout)
        _echo(render(final))
        raise typer.Exit(code)
    found = run_status(run_dir, ask_slurm=not no_slurm)
    _echo(render(found))
    raise typer.Exit(exit_code(found))


@app.command()
def cache(
    action: Annotated[str, typer.Argument(help="prune: remove the least recently used sample records over the bound; "
                                               "show: where the sample cache is and what it holds")],
    max_mb: Annotated[float | None, typer.Option("--max-mb", help="the bound for prune, in MiB (default "
                                                 "$PINBENCH_SAMPLE_CACHE_MB, else 2048)")] = None,
) -> None:
    """The sample cache: finished samples shared by every run directory of this machine (or a path a cluster shares)."""
    from pinbench.core.sample_cache import ENV, MIB, bound_bytes, prune, size_bound
    from pinbench.core.sample_cache import cache_dir as sample_cache_dir

    if action not in ("prune", "show"):
        _fail(f"unknown action {action!r}: prune or show")
    root = sample_cache_dir()
    if root is None:
        _fail(f"the sample cache is off (${ENV}=off)")
    if max_mb is not None and not (max_mb >= 0 and math.isfinite(max_mb)):
        _fail(f"--max-mb must be a finite number of 0 or more, got {max_mb}")
    bound = size_bound() if max_mb is None else bound_bytes(max_mb)
    pruned = prune(root, bound if action == "prune" else float("inf"), clear=action == "prune")
    if pruned.unlisted:
        _fail(pruned.unlisted)
    if pruned.unentered:
        _echo(pruned.unentered_line())
    if action == "prune":
        _echo(f"removed {counted(pruned.removed, 'record')}, {pruned.removed_bytes / MIB:.1f} MiB")
        if pruned.refused:
            _echo(f"kept {counted(pruned.refused, 'record')} it may not remove (first: {pruned.why})")
    if pruned.planted:   # each named: a folder or a link at an entry's name, a file at a subfolder's, blocked keys
        done = "removed" if action == "prune" else "found (prune removes them)"
        _echo(f"{done} {counted(len(pruned.planted), 'thing')} where an entry or a subfolder of the cache belongs: "
              f"{'; '.join(pruned.planted[:3])}{'; ...' if len(pruned.planted) > 3 else ''}")
    _echo(f"{root}: {counted(pruned.kept, 'record')}, {pruned.kept_bytes / MIB:.1f} MiB (bound {bound / MIB:g} MiB)")


# ------------------------------------------------------------------------------------ results


def _installed_recipe(name: str) -> Recipe | None:
    try:
        return get_recipe(name)
    except RecipeError:
        return None


@app.command("diff")
def diff_cmd(
    scorecard: Annotated[Path, typer.Argument(help="a run directory (or its scorecard.json)")],
    reference: Annotated[Path | None, typer.Option(help="reference file (default: the recipe's)")] = None,
) -> None:
    """The results table of a run, against its reference when one applies; non-zero exit on FAIL, partial run,
    missing metric or mismatch (no reference: the table, exit 0 for a complete run)."""
    with _one_blas_thread():  # reading and comparing numbers: no linear algebra (numpy loaded where it is used)
        from pinbench.core.reference import judge, keeps_inputs, load_reference, run_input_hashes
        from pinbench.core.scorecard import load_scorecard, scorecard_file

        card = load_scorecard(scorecard_file(scorecard))
        recipe = _installed_recipe(card.recipe)
        if reference is None:
            reference = recipe.reference_of(card) if recipe is not None else None
        if reference is None:   # the results table: exit 0 for a complete run, 2 for a partial one
            judged = judge(card, recipe.no_reference_of(card) if recipe is not None else
                           f"recipe {card.recipe!r} is not installed here (pass --reference FILE to diff)")
        else:
            # A reference is checked against its own recipe's declaration; one for another recipe then diffs as a
            # recipe mismatch (exit 3: it does not apply), not as an invalid file.
            owner = load_reference(reference).recipe
            declared = recipe if recipe is not None and recipe.name == owner else _installed_recipe(owner)
            ref = load_reference(reference, recipe=declared)
            # the samples file read only where the reference kept its run's inputs (none of the shipped ones does)
            judged = judge(card, ref, run_input_hashes(scorecard_file(scorecard), card)
                           if keeps_inputs(ref) else None)
    _echo(judged.body)
    _echo(judged.last)
    raise typer.Exit(judged.exit_code)


@app.command("record-reference")
def record_reference_cmd(
    scorecards: Annotated[list[Path] | None, typer.Argument(
        help="run directories (or their scorecard.json) of one or several trusted, complete runs of one checkpoint "
             "(other seeds or GPUs)")] = None,
    fixture: Annotated[str | None, typer.Option("--fixture", metavar="RECIPE", help="run RECIPE's fixture and record "
                                                "its references/fixture.yaml from that run")] = None,
    out: Annotated[Path | None, typer.Option(help="where to write (default: the recipe's references/)")] = None,
    tier: Annotated[str, typer.Option(help="same_hw (tight, for GPU CI) or cross_hw")] = "same_hw",
    tolerance: Annotated[list[str], typer.Option(help="METRIC=abs:X or METRIC=rel:X, narrower than the "
                                                      "recipe's default for the tier")] = [],  # noqa: B006
    note: Annotated[str, typer.Option(help="free text stored with the reference")] = "",
    force: Annotated[bool, typer.Option(help="replace an existing reference file")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="show the proposal and its arithmetic; write nothing")]
    = False,
) -> None:
    """Write a reference from trusted runs, so GPU CI can assert against it.

    Directions, primary flags and default tolerances come from the recipe's declaration (recipe.yaml). With
    several runs the value is their mean and each tolerance is proposed from their spread (shown with its
    arithmetic); a proposal wider than the declared default is refused: the declaration is then wrong.
    """
    from pinbench.core.check import values_check
    from pinbench.core.metricinfo import Tolerance
    from pinbench.core.options import OptionError, parse_pairs
    from pinbench.core.proposal import propose_reference
    from pinbench.core.reference import run_input_hashes, write_reference
    from pinbench.core.scorecard import load_scorecard, scorecard_file

    if fixture is not None:
        if scorecards or out or tolerance or note or dry_run or tier != "same_hw":
            _fail("--fixture records the recipe's fixture reference from a fresh fixture run: give no scorecard, "
                  "--out, --tier, --tolerance, --note or --dry-run with it")
        from pinbench.ops.newrecipe import record_fixture_reference

        with _failing(ValueError, RecipeError):
            _echo(f"wrote {record_fixture_reference(_recipe(fixture).name, replace=force)}")
        return
    if not scorecards:
        _fail("give one or more run directories (or their scorecard.json), or --fixture RECIPE")
    _refuse_secret_shaped("--out", out)
    scorecards = [scorecard_file(path) for path in scorecards]
    cards = [load_scorecard(path) for path in scorecards]   # first: resolve() words a loop as Python does
    resolved = [path.resolve() for path in scorecards]
    repeated = sorted({str(p) for p in resolved if resolved.count(p) > 1})
    if repeated:
        _fail(f"{repeated[0]}: given twice; each trusted run counts once")
    recipe = _scorecards_recipe(scorecards, cards)
    for path, card in zip(scorecards, cards, strict=True):   # a value edited in scorecard.json became the reference's
        checked = values_check(path.parent, card)
        if checked.unread:   # not "its records say otherwise": they could not be read to say anything
            _fail(f"refusing to record from {path}: its values cannot be checked against its records: "
                  f"{checked.unread[0]} (`pinbench check {path.parent}`)")
        if checked.problems:
            _fail(f"refusing to record from {path}: its records say otherwise: {checked.problems[0]} (`pinbench "
                  f"check {path.parent}`)")
    out = out or recipe.reference_file(cards[0].checkpoint, cards[0].mode)
    try:
        overrides = {name: Tolerance.parse(spec) for name, spec in parse_pairs(tolerance, "--tolerance").items()}
    except (OptionError, ValueError) as exc:
        _fail(f"--tolerance: {exc}")
    if out.is_dir():   # "already exists ... pass --force", and with --force "[Errno 21] Is a directory" of a temp file
        _fail(f"{out}: a folder; --out names the reference file to write")
    if out.exists() and not force and not dry_run:
        _fail(f"{out}: already exists (a published or recorded reference); pass --force to replace it")
    with _failing(ValueError, RecipeError):
        proposal = propose_reference(cards, recipe=recipe, tier=tier, overrides=overrides, note=note or None,
                                     inputs=[run_input_hashes(path, card)
                                             for path, card in zip(scorecards, cards, strict=True)])
    _echo(f"{counted(len(cards), 'run')}, tier {tier}: value and tolerance per metric")
    _echo("\n".join(f"  {line}" for line in proposal.lines))
    if proposal.refused:
        _fail("refusing to record: " + "; ".join(proposal.refused))
    if dry_run:
        _echo(f"dry run: {out} not written")
        return
    with _failing(ValueError, RecipeError):
        path = write_reference(proposal.data, out, recipe=recipe)
    _echo(f"wrote {path}")


def _scorecards_recipe(paths: Sequence[Path], cards: Sequence[Scorecard]) -> Recipe:
    """The installed recipe of the first scorecard, which every one names and whose declaration has each of their
    metrics; else exit naming the file. Why: a scorecard whose ``recipe`` was edited (or another recipe's) failed
    with the recipe's words alone, not which of the files given was wrong."""
    from pinbench.core.metricinfo import match_metric
    from pinbench.core.recipe import DECLARATION

    try:
        recipe = get_recipe(cards[0].recipe)
    except RecipeError as exc:
        _fail(f"{paths[0]}: {exc}")
        raise  # unreachable, for type checkers
    for path, card in zip(paths, cards, strict=True):
        if card.recipe != recipe.name:
            _fail(f"{path}: a scorecard of {card.recipe!r}, {paths[0]} one of {recipe.name!r}; a reference is "
                  "recorded from runs of one recipe")
        undeclared = [name for name in card.metrics if match_metric(name, recipe.metrics) is None]
        if undeclared:
            _fail(f"{path}: metric {undeclared[0]!r} is not declared by its recipe {recipe.name!r} "
                  f"({recipe.dir / DECLARATION}): a scorecard of another recipe, or its recipe field edited")
    return recipe


def _load_run(scorecard: Path, *, run_marker: Path | None = None) -> tuple[Scorecard, Any, list | None]:
    """A run's scorecard, the reference for its checkpoint and mode (if any), and its own samples.jsonl (with
    its derived records, when it has any). With ``run_marker`` (the pinbench-run.json that makes the scorecard's
    folder a run directory) a samples file the scorecard does not name, or names but lacks, ends the command in one
    line naming both (a report of the scorecard alone said nothing of it)."""
    from pinbench.core.runner import read_merged
    from pinbench.core.scorecard import load_scorecard, run_derived
    from pinbench.results.compare import CompareError, samples_file

    card = load_scorecard(scorecard)
    if run_marker is not None:
        try:
            samples_path: Path | None = samples_file(scorecard, card)
        except CompareError as exc:
            _fail(f"{exc}; {run_marker} makes its folder a run directory: restore the records there, or, for a "
                  f"scorecard copied there alone beside a stray {run_marker.name}, report it from a folder without "
                  "one (then from its figures)")
    else:
        samples_path = scorecard.parent / card.samples.path if card.samples.path else None
    samples = read_merged(samples_path) if samples_path and samples_path.is_file() else None
    if samples is not None:
        samples += run_derived(scorecard.parent, card)
    return card, _reference_of(card), samples


def _reference_of(card: Scorecard) -> Any:
    """The installed recipe's reference for the run's checkpoint and mode, or None."""
    from pinbench.core.reference import load_reference

    recipe = _installed_recipe(card.recipe)
    ref_path = recipe.reference_of(card) if recipe else None
    return load_reference(ref_path, recipe=recipe) if ref_path else None


def _present(by_index: dict[int, Any]) -> dict[int, Any]:
    return {i: value for i, value in by_index.items() if value is not None}


@app.command()
def report(
    scorecards: Annotated[list[Path], typer.Argument(help="one or more run directories (or their scorecard.json)")],
    out: Annotated[Path, typer.Option(help="report directory")] = Path("runs/report"),
    with_view: Annotated[bool, typer.Option("--view", help="also write the runs' view folder (DIR/view) and link "
                                                          "every sample the report names to its page")] = False,
) -> None:
    """Write a static HTML report (inline SVG figures, no script) for one or more scorecards; without --view it is
    the very page of a run's own report/."""
    with _one_blas_thread():  # tables and SVG from the scorecards: no linear algebra
        from pinbench.core.rundir import IDENTITY_FILE
        from pinbench.core.scorecard import scorecard_file
        from pinbench.results.report import claim_report_folder, write_report

    _refuse_secret_shaped("--out", out)
    scorecards = [scorecard_file(path) for path in scorecards]
    references, samples = {}, {}
    for i, path in enumerate(scorecards):
        # a run directory's scorecard needs its records; one copied alone is reported from its own figures
        marker = path.parent / IDENTITY_FILE
        _, references[i], samples[i] = _load_run(path, run_marker=marker if marker.exists() else None)
    with _writing_to("--out", out):
        claim_report_folder(out, scorecards, view=with_view)
        view = _view_folder(scorecards, out) if with_view else None
        index = write_report(scorecards, out, references=_present(references), samples=_present(samples), view=view)
    _echo(f"report: {index}")


def _view_folder(runs: Sequence[Path | Run], out: Path) -> str | None:
    """``pinbench view --bundle`` of a report's runs in ``out/view`` (originals linked, not copied), which the report
    links every sample it names to; None, said in one line, when the runs cannot be viewed together. A stop says,
    as view --bundle's does, that the folder is half written (it was a silent exit 130, -15, -1). Its progress is
    said as view --bundle's is: without it, no word said which videos the folder lacked."""
    from pinbench.core.rundir import terminate_as_exit
    from pinbench.ops.view import write_bundle
    from pinbench.results.view import View, ViewError, load_runs, view_module

    try:
        loaded = load_runs(runs)
    except ViewError as exc:
        _echo(f"view: no sample pages ({exc})")
        return None
    bundle = out / "view"
    with (_stopped_saying(lambda: f"{bundle} holds a bundle half written; run the same command to finish it"),
          terminate_as_exit()):
        write_bundle(View(loaded, view_module(loaded[0].card.recipe)), bundle, copy_media=False,
                     progress=lambda text: typer.echo(f"view: {text}", err=True))
    return "view/index.html"


@app.command()
def compare(
    run_a: Annotated[Path, typer.Argument(help="run directory or scorecard.json of run A (the baseline)")],
    run_b: Annotated[Path, typer.Argument(help="run directory or scorecard.json of run B")],
    fail_on: Annotated[str, typer.Option(help="any: exit 1 when a metric differs beyond noise either way; "
                                              "worse: only when one is worse")] = "any",
    report_dir: Annotated[Path | None, typer.Option("--report", help="also write an HTML report here")] = None,
) -> None:
    """Compare two runs of one recipe version sample by sample: B - A per metric with a paired 95% interval.

    Exit 0: every metric within noise; 1: a metric better or worse beyond noise (--fail-on worse: worse only);
    2: unmatched samples, a partial run or a metric in one run only; 3: other recipe or recipe version.
    """
    with _one_blas_thread():   # its one matrix product (the mean statistics) is below OpenBLAS's threading threshold
        import numpy  # noqa: F401
    from pinbench.core.memory import cycle_collection_paused
    from pinbench.results.compare import FAIL_ON, compare_runs, load_run, render_comparison

    if fail_on not in FAIL_ON:
        _fail(f"--fail-on {fail_on!r}: expected one of {', '.join(FAIL_ON)}")
    _refuse_secret_shaped("--report", report_dir)
    with cycle_collection_paused():
        runs = [load_run(path) for path in (run_a, run_b)]
        cards = [run.path for run in runs]
        if report_dir is not None:   # a folder it cannot write: refused before a verdict whose exit it would not be
            from pinbench.results.report import claim_report_folder, write_report

            with _writing_to("--report", report_dir):
                claim_report_folder(report_dir, cards)
        result = compare_runs(*runs, fail_on=fail_on)
        _echo(render_comparison(result))
        if report_dir is not None:
            references = {i: _reference_of(run.card) for i, run in enumerate(runs)}
            samples = {i: run.records for i, run in enumerate(runs)}  # read once: compare's, the report's, the view's
            with _writing_to("--report", report_dir):
                view = _view_folder(runs, report_dir)
                index = write_report(cards, report_dir, references=_present(references), samples=_present(samples),
                                     comparisons=[result], title=f"compare: {runs[0].label} vs {runs[1].label}",
                                     view=view)
            _echo(f"report: {index}")
    raise typer.Exit(result.exit_code)


@app.command()
def view(
    runs: Annotated[list[Path], typer.Argument(help="run directories (or their scorecard.json) of one recipe")],
    bundle: Annotated[Path | None, typer.Option("--bundle", help="write the pages as a static folder here "
                                                                 "(previews included; opens from file://)")] = None,
    port: Annotated[int, typer.Option(help="port on 127.0.0.1 (0: a free one)")] = 0,
) -> None:
    """See the videos behind the numbers: a local page of the runs' metrics, every sample's values side by side,
    and each sample's rollouts playing in sync (docs/view.md)."""
    from pinbench.results.view import ViewError, view_of

    _refuse_secret_shaped("--bundle", bundle)
    with _failing(ViewError):
        page = view_of(tuple(runs))
    if bundle is not None:
        from pinbench.core.rundir import terminate_as_exit
        from pinbench.ops.view import write_bundle

        # a stop was a silent exit (130, -15, -1), leaving a folder that looks like a bundle
        with (_stopped_saying(lambda: f"{bundle} holds a bundle half written; run the same command to finish it"),
              _writing_to("--bundle", bundle), terminate_as_exit()):
            index = write_bundle(page, bundle, progress=lambda text: typer.echo(f"bundle: {text}", err=True))
        _echo(f"view: {index} (a static folder: open it in a browser, or copy it anywhere)")
        return
    from pinbench.ops.localweb import bind_loopback, new_token
    from pinbench.ops.view import serve

    with _failing(OSError):
        sock = bind_loopback(port)
    with sock:
        token = new_token()
        _echo(f"{counted(len(page.ids), 'sample')} of {counted(len(page.runs), 'run')} of {page.recipe}")
        _echo(f"view page: http://127.0.0.1:{sock.getsockname()[1]}/{token}/")
        _echo("(the token in this address is the key to the page: only this address opens it; Ctrl-C stops)")
        serve(runs, sock, token)


@app.command()
def table(
    runs: Annotated[list[Path], typer.Argument(help="run directories or scorecard.json files of one recipe version")],
    fmt: Annotated[str, typer.Option("--format", help="markdown, latex (booktabs) or csv")] = "markdown",
    metrics: Annotated[str | None, typer.Option(help="comma-separated metrics to show, in this order")] = None,
    primary_only: Annotated[bool, typer.Option("--primary-only", help="only the primary metrics")] = False,
    digits: Annotated[int | None, typer.Option(help="decimal places (default 3; csv: full precision)")] = None,
    caption: Annotated[str | None, typer.Option(help="the table's caption")] = None,
    interval: Annotated[str, typer.Option(help="pm: value ± the distance to the 95% interval's bounds; "
                                               "range: value [low, high]")] = "pm",
) -> None:
    """Print a results table, metrics x runs: value and 95% interval, scored/expected, direction, best in bold.

    A run within noise of the best (the paired test of `pinbench compare`) is marked tied; a partial run is
    marked and never ranked; a metric a run lacks is a dash with a footnote."""
    from pinbench.results.table import FORMATS, TableError, build_table, load_columns, render

    if fmt not in FORMATS:
        _fail(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if caption is not None and fmt == "csv":
        _fail("--caption: a csv table has no caption (markdown and latex have)")
    chosen = [m.strip() for m in metrics.split(",") if m.strip()] if metrics is not None else None
    if chosen is not None and not chosen:
        _fail("--metrics: name at least one metric")
    with _failing(TableError):
        built = build_table(load_columns(runs), metrics=chosen, primary_only=primary_only, digits=digits,
                            caption=caption, interval=interval)
    typer.echo(render(built, fmt), nl=False)


@contextmanager
def _one_blas_thread() -> Iterator[None]:
    """numpy loaded in the block starts OpenBLAS with one thread, unless numpy is already loaded or the user set
    OPENBLAS_NUM_THREADS; the environment is as it was afterwards (no child process inherits the setting).

    Why: OpenBLAS starts a thread per core that spins for a while, in commands that do no linear algebra: on two
    cores, a quarter of the CPU time of checking a full CameraBench run, and a third of its diff's and report's."""
    if "numpy" in sys.modules or "OPENBLAS_NUM_THREADS" in os.environ:
        yield
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        yield
    finally:
        os.environ.pop("OPENBLAS_NUM_THREADS", None)


@app.command()
def check(run_dir: Annotated[Path, typer.Argument(help="a run directory (or its scorecard.json)")]) -> None:
    """Check a run directory against its scorecard: samples, counts, report, reference; exit 2 on a problem."""
    with _one_blas_thread():  # the check does no linear algebra (numpy is loaded where it recounts an interval)
        from pinbench.core.check import check_run

        result = check_run(run_dir)
    _echo("\n".join(result.lines()))
    raise typer.Exit(result.exit_code)


@app.command()
def docs(check: Annotated[bool, typer.Option(help="only check; exit 1 when a table is out of date")] = False,
         root: Annotated[Path, typer.Option(help="repository root")] = Path(".")) -> None:
    """Regenerate the documentation's tables (recipe READMEs' options, environment and metrics; the environment
    variables of every recipe in docs/) from the recipe declarations."""
    from pinbench.core.files import no_folder_at
    from pinbench.ops.docs import sync_tables

    if (kind := no_folder_at(root)) is not None:   # a symlink loop was Python's "Symlink loop from ..."
        _fail(f"--root {root}: {kind}, not a folder; --root names the repository root")
    stale = sync_tables(root, write=not check)
    for path in stale:
        _echo(f"{'out of date' if check else 'updated'}: {path}")
    raise typer.Exit(1 if check and stale else 0)


@app.command("new-recipe")
def new_recipe(
    name: Annotated[str, typer.Argument(help="the new recipe's name: lowercase words joined by '-'")],
    dest: Annotated[Path | None, typer.Option(help="the recipes folder (default: this checkout's recipes/)")] = None,
) -> None:
    """Write a working score-only recipe from the template: recipe.yaml, run.py, fixture, test, README, Dockerfile
    and lock; run its fixture and record references/fixture.yaml from it."""
    from pinbench.ops.newrecipe import new_recipe as write
    from pinbench.ops.newrecipe import summary

    _refuse_secret_shaped("--dest", dest)
    with _failing(RecipeError):
        made = write(name, dest)
    _echo("\n".join(summary(made, made.dir.parent.parent)))


# ------------------------------------------------------------------------------- export, build, demo


@app.command()
def export(
    recipe_name: Annotated[str, typer.Argument(help="recipe to export")],
    dest: Annotated[Path, typer.Argument(help="new directory to write")],
    force: Annotated[bool, typer.Option(help="replace an earlier export at DEST (refused if it holds files the "
                                                 "export did not write)")] = False,
) -> None:
    """Write a self-contained copy of one recipe: its code, exactly the library code it imports,
    its lock, Dockerfile(s) and README; nothing points back into this repository."""
    from pinbench.ops.export import export_recipe

    _refuse_secret_shaped("DEST", dest)
    path = export_recipe(_recipe(recipe_name), dest, force=force, log=_echo)
    _echo(f"exported {recipe_name} to {path}")


@app.command()
def build(
    recipe_name: Annotated[str, typer.Argument(help="recipe whose images to build")],
    build_dir: Annotated[Path, typer.Option(help="where the exported build context goes")] = Path("build/export"),
    context: Annotated[Path | None, typer.Option(
        help="build from this export as it is (an exported recipe's own folder) instead of exporting")] = None,
    base_image: Annotated[list[str], typer.Option(
        "--base-image", help="[DOCKERFILE[:ARG]=]IMAGE: build on IMAGE instead of the pinned base ARG (default "
                             "BASE_IMAGE; a registry mirror, say); recorded in its scorecards")] = [],  # noqa: B006
) -> None:
    """Build a recipe's images (needs a Docker engine); the build context is the recipe's export."""
    from pinbench.ops.docker_runtime import base_overrides

    _refuse_secret_shaped("--build-dir", build_dir)
    recipe = _recipe(recipe_name)
    with _failing(RecipeError):
        overrides = base_overrides(recipe, base_image, context)
    _build_images(recipe, build_dir, base_images=overrides, context=context)


def _build_images(recipe: Recipe, build_dir: Path = Path("build/export"), *,
                  base_images: dict[str, dict[str, str]], context: Path | None = None) -> None:
    """`pinbench build`, and `run --build` once its doctor has passed."""
    from pinbench.ops.docker_runtime import build_recipe_images

    with _failing(RecipeError):
        tags = build_recipe_images(recipe, build_dir, base_images=base_images, context=context)
    for tag in tags:
        _echo(f"built {tag}")


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="demo directory")] = Path("runs/demo"),
    recipe_names: Annotated[list[str], typer.Option("--recipe", help="only these recipes")] = [],  # noqa: B006
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="every recipe's own output, as it runs")] = False,
) -> None:
    """Run every recipe's fixture mode on CPU and write one report over all of them.

    One line per recipe while it runs (its output goes to DIR/logs/<recipe>.log; -v prints it), then a summary
    table. Each fixture must show the uncertainty its runs carry: a scorecard with no interval on any metric fails,
    and so does a fixture directory `pinbench check` finds a problem in (the demo is CI's check of every fixture)."""
    from pinbench.core.check import check_run
    from pinbench.core.uncertainty import has_interval
    from pinbench.results.report import write_report

    _refuse_secret_shaped("--out", out)
    recipes = [_recipe(n) for n in recipe_names] or list(available_recipes().values())
    if not recipes:
        _fail("no recipes installed")
    _refuse_unwritable(out)
    cards, references, samples, failed, rows = [], {}, {}, [], []
    for recipe in recipes:
        result = _demo_one(recipe, out, verbose=verbose)
        rows.append(result)
        if result.error:
            failed.append(f"{recipe.name} ({result.error})")
            continue
        if result.exit_code != 0:
            failed.append(f"{recipe.name} (exit {result.exit_code})")
        if result.scorecard_path:
            i = len(cards)
            card, references[i], samples[i] = _load_run(result.scorecard_path)
            cards.append(result.scorecard_path)
            if not any(has_interval(metric.interval) for metric in card.metrics.values()):
                failed.append(f"{recipe.name} (no metric of its fixture scorecard has a 95% interval: give the "
                              "fixture two or more samples in a cohort)")
            checked = check_run(result.scorecard_path.parent)
            result.check = "consistent" if not checked.problems else counted(len(checked.problems), 'problem')
            if checked.problems:
                failed.append(f"{recipe.name} (pinbench check: {'; '.join(checked.problems[:2])})")
    _echo("")
    _echo("\n".join(_demo_table(rows)))
    # The report is secondary: with no scorecard there is none to write, and its own error never
    # replaces the fixture failures above.
    if cards:
        try:
            index = write_report(cards, out / "report", references=_present(references),
                                 samples=_present(samples), title="pinbench demo (fixture runs)")
            _echo(f"demo report: {index}")
        except (ValueError, OSError) as exc:
            failed.append(f"report ({' '.join(str(exc).split())})")
    else:
        _echo("demo report: not written (no fixture run produced a scorecard)")
    if not verbose:
        _echo(f"details: {out / DEMO_LOGS}/<recipe>.log, each run's diff.txt and scorecard.json (or pinbench demo -v)")
    if failed:
        _fail("fixture runs failed: " + ", ".join(failed), code=1)


DEMO_LOGS = "logs"


@dataclass
class _DemoRun:
    recipe: str
    seconds: float
    exit_code: int = 0
    error: str = ""
    scorecard_path: Path | None = None
    status: str = "-"
    verdict: str = "-"
    primary: str = "-"
    check: str = "-"


def _demo_one(recipe: Recipe, out: Path, *, verbose: bool) -> _DemoRun:
    """One recipe's fixture run: its output into DIR/logs/<recipe>.log (fd 1 and 2 too, for subprocesses) unless
    ``verbose``; one line on the terminal, finished when the run ends."""
    import time

    from pinbench.core.reference import EXIT_FAIL, EXIT_INCOMPLETE, EXIT_MISMATCH, EXIT_PASS
    from pinbench.ops.launch import run_recipe

    log = out / DEMO_LOGS / f"{recipe.name}.log"
    if verbose:
        _echo(f"---- {recipe.name} (fixture) ----")
    else:
        typer.echo(f"{recipe.name:<16} fixture run ... ", nl=False)
    start = time.monotonic()
    result = _DemoRun(recipe.name, 0.0)
    with contextlib.ExitStack() as stack:
        if not verbose:
            stack.enter_context(_output_to(log))
        try:
            outcome = run_recipe(recipe.config(fixture=True, out_dir=out / recipe.name, offline=True))
        except (ValueError, RuntimeError, OSError) as exc:  # one recipe's error never hides the others
            result.error = " ".join(str(exc).split())
            outcome = None
    result.seconds = time.monotonic() - start
    if outcome is not None:
        result.exit_code, result.scorecard_path = outcome.exit_code, outcome.scorecard_path
        names = {EXIT_PASS: "PASS", EXIT_FAIL: "FAIL", EXIT_INCOMPLETE: "INCOMPLETE", EXIT_MISMATCH: "MISMATCH"}
        result.verdict = names.get(outcome.diff.exit_code, "?") if outcome.diff is not None else "no reference"
        if outcome.scorecard_path:
            from pinbench.core.scorecard import load_scorecard

            card = load_scorecard(outcome.scorecard_path)
            result.status = card.status
            primary = [(name, m) for name, m in card.metrics.items() if m.primary]
            if primary:
                name, metric = primary[0]
                value = "-" if metric.value is None else f"{metric.value:.4g}"
                result.primary = f"{name} = {value}" + (f" (+{len(primary) - 1} more)" if len(primary) > 1 else "")
    shown = result.verdict if not result.error else "ERROR"
    if verbose:
        _echo(f"---- {recipe.name}: {shown} in {result.seconds:.1f} s ----")
    else:
        _echo(f"{shown} in {result.seconds:.1f} s" + (f" (log: {log})" if result.error or result.exit_code else ""))
    return result


@contextmanager
def _output_to(log: Path) -> Iterator[None]:
    """Everything written to stdout and stderr, by Python or a subprocess (file descriptors 1 and 2), into ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(log, "w", encoding="utf-8") as fh, contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
        os.dup2(fh.fileno(), 1)
        os.dup2(fh.fileno(), 2)
        try:
            yield
        finally:
            fh.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


def _demo_table(rows: Sequence[_DemoRun]) -> list[str]:
    """The summary: recipe, status, verdict against its fixture reference, primary metric and value, whether
    ``pinbench check`` finds the directory consistent, time."""
    table = [["recipe", "status", "verdict", "primary metric", "pinbench check", "time"]]
    table += [[r.recipe, "error" if r.error else r.status, "ERROR" if r.error else r.verdict, r.primary, r.check,
               f"{r.seconds:.1f} s"] for r in rows]
    return aligned(table)


def _refuse_unwritable(out: Path) -> None:
    """Exit 2 before anything runs when the demo cannot write all of ``out``: a line per cause, then the fix. A file
    at ``out`` or on its way is one line (the first recipe ended in "[Errno 20] Not a directory: 'out/logs'", the
    others after it)."""
    from pinbench.core.files import blocking_parent, no_folder_at
    from pinbench.core.provenance import container_state
    from pinbench.core.rundir import IDENTITY_FILE
    from pinbench.ops.writable import writable_problems

    if (kind := no_folder_at(out)) is not None:
        _fail(f"--out {out}: {kind}, not a folder; name a folder for the demo")
    if (blocked := blocking_parent(out)) is not None:
        _fail(f"--out {out}: {blocked[0]} is {blocked[1]}, not a folder")
    if any(os.path.lexists(out / name) for name in (IDENTITY_FILE, "scorecard.json")):   # its report/ was replaced
        # by the demo's (not not_a_run_directory: it reads shards one folder down, as a demo folder holds them)
        _fail(f"--out {out}: a run directory; the demo writes logs/, report/ and a run per recipe there: name "
              "another folder for the demo")
    problems = writable_problems(out, in_container=container_state()["in_container"])
    for line in problems:
        typer.echo(f"error: {line}", err=True)
    if problems:
        raise typer.Exit(2)


# ---------------------------------------------------------------------------------------- entry


YOUNG_COLLECTION_EVERY = 20_000
"""Allocations between two collections of the youngest generation (Python's default: 700).

Why: a run builds hundreds of thousands of objects that form no cycles; at the default the older generations fill
and Python traverses every live object again (CameraBench at 112,220 samples: 9 full collections, 0.43-0.72 s of
its 6 s); every 20,000 it makes none, and a cycle that dies young is still collected within 20,000 allocations."""


def _app_for(argv: Sequence[str]) -> typer.Typer:
    """The app holding only the command ``argv`` names first (the whole app for anything else: an option, help, a
    name no command has), so that one command's parameters are built, not every command's.

    Why: typer turns each command's signature into click parameters on every call, 50-85 ms for the 23 of them
    (a sixth of a rerun that finds nothing to do); a command's own parsing, help and errors are the same alone."""
    name = argv[0] if argv else ""
    if name.startswith("-"):
        return app
    commands = [c for c in app.registered_commands
                if (c.name or typer.main.get_command_name(c.callback.__name__)) == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if len(commands) + len(groups) != 1:
        return app
    alone = copy.copy(app)
    alone.registered_commands, alone.registered_groups = commands, groups
    return alone


# a Ctrl-C no command handled: what it left is the command's to judge (a fetch's finished files stay), so no claim
INTERRUPTED = "interrupted: pinbench stopped before the command finished; run the same command to go on"


def main(argv: list[str] | None = None) -> None:
    """Entry for the ``pinbench`` script and ``python -m pinbench`` (``pinbench.__main__.start`` imports this
    module, then calls it) and for recipes' ``__main__`` modules.

    Errors about inputs (bad files, unfetched weights, refused references) end in one redacted line
    and exit 2; set PINBENCH_DEBUG=1 for the traceback.
    """
    gc.set_threshold(YOUNG_COLLECTION_EVERY, *gc.get_threshold()[1:])
    from pinbench.core.notices import notice_after
    from pinbench.core.options import is_offline

    try:
        notice_after()   # a bad $PINBENCH_NOTICE_S stops here, in one line, not in a timer thread mid-run
        is_offline()     # a bad $PINBENCH_OFFLINE / $HF_HUB_OFFLINE too, before anything is fetched
        _app_for(sys.argv[1:] if argv is None else argv)(args=argv, prog_name="pinbench")
    except SystemExit as exc:
        # Typer ends a Ctrl-C no command handled (``_stopped_saying``) in a silent exit 130: its Exit(130) is caused by
        # the KeyboardInterrupt, a handler's is not
        if isinstance(exc.__context__, typer.Exit) and isinstance(exc.__context__.__cause__,
                                                                             KeyboardInterrupt):
            typer.echo(INTERRUPTED, err=True)
        raise
    except KeyboardInterrupt:   # before the command line is read
        typer.echo(INTERRUPTED, err=True)
        sys.exit(130)
    except (ValueError, RuntimeError, OSError) as exc:
        if os.environ.get("PINBENCH_DEBUG") == "1":
            raise
        from pinbench.core.provenance import redact

        typer.echo(f"error: {redact(' '.join(str(exc).split()))}", err=True)
        sys.exit(2)


RECIPE_SUBCOMMANDS = ("fetch", "run", "export", "build", "annotate")


def recipe_main(recipe_name: str, argv: list[str] | None = None) -> None:
    """``python -m pinbench_recipes.<pkg>``: the pinbench CLI with the recipe already chosen.

    ``python -m pinbench_recipes.paibench_c run --checkpoint Cosmos3-Nano`` is
    ``pinbench run paibench-c --checkpoint ...``, so an exported recipe runs without the console script.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in RECIPE_SUBCOMMANDS:
        args.insert(1, recipe_name)
    main(args)
