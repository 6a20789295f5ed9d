"""``pinbench submit``: a run as Slurm jobs, laid out as the recipe declares (``scale_out`` in recipe.yaml).

By default a job array of N tasks (``pinbench run ... --shard I/N`` into the shared run directory), then one job
after every task has ended (``afterany``) that merges the stored records into the scorecard, diff and report; a
recipe may declare other phases. Scripts, logs and ``slurm/submissions.jsonl`` (which ``pinbench status`` reads)
go under ``<run>/slurm/``. docs/scale-out.md says it all for users.

Why so many checks before queueing: a request the cluster can never satisfy would pend forever, so each script is
first tried with ``sbatch --test-only``, a refusal of ``sbatch`` cancels what was already submitted, and a first
phase pending for a reason that never clears (``PartitionTimeLimit``, ...) is cancelled with that reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pinbench.core.config import MAX_SHARDS, RecipeError, RunConfig, Shard
from pinbench.core.deploy import ContainerStage, ScaleOutPhase
from pinbench.core.files import (
    FileError,
    cache_root,
    counted,
    exclusive,
    loads_json,
    read_data_file,
    sha256_file,
    write_atomic,
)
from pinbench.core.options import parse_pairs
from pinbench.core.pins import IMAGE_DIGEST
from pinbench.core.provenance import REDACTED, keep_secret_options, redact, secret_flag_values, secret_option
from pinbench.core.recipe import Recipe, scale_out_problem
from pinbench.core.rundir import SLURM_DIR, SUBMISSIONS, check_out_dir_outside, check_owner, input_paths, run_identity
from pinbench.core.sample_cache import ENV as SAMPLE_CACHE_ENV
from pinbench.core.sample_cache import SIZE_ENV, checked_dir
from pinbench.core.shard_manifest import now
from pinbench.ops import slurm
from pinbench.ops.docker_runtime import (
    foreign_generator,
    generation_stage,
    generator_files,
    offline_policy,
    sample_cache_setting,
    stages_for,
    user_options,
)
from pinbench.ops.generation import command_argv, command_capabilities, command_of
from pinbench.ops.job_command import (
    CONTAINERS,
    IMAGE_ID,
    Image,
    PhaseJob,
    check_mount_path,
    command_lines,
    shell_line,
)

SUBMIT_LOCK = ".submit.lock"   # held by the submission under way (flock)
# sbatch options the layout sets itself; taking them from --sbatch-arg would break it.
RESERVED = ("--array", "--output", "--error", "--dependency", "--parsable", "--wrap", "--chdir", "--job-name",
            "--test-only", "--ntasks")
# pinbench's own options, which sbatch refuses (--skip-generation), takes for one of its own (--out, a prefix of
# --output) or sets twice (--time): given as --sbatch-arg they never reached a job's pinbench. Where each belongs:
_SUBMIT_OPTIONS = ("--shards", "--engine", "--checkpoint", "--out", "--limit", "--fixture", "--offline", "--option",
                   "--partition", "--gpus-per-task", "--time", "--finish-time", "--account", "--sbatch-arg",
                   "--container", "--image", "--dry-run", "--generator", "--generator-option", "--generation-timeout",
                   "--generator-image", "--skip-doctor")
_RUN_OPTIONS = {
    "--skip-generation": "pinbench submit gives it to the jobs of the phases the recipe's layout (scale_out) says",
    "--skip-scoring": "pinbench submit gives it to the jobs of the phases the recipe's layout (scale_out) says",
    "--shard": "pinbench submit gives each array task its shard (--shards N)",
    "--gpus": "give pinbench submit --gpus-per-task N (each job asks Slurm for N and runs with --gpus N)",
    "--runtime": "give pinbench submit --container docker (or pyxis, apptainer)",
    "--verify-inputs": "an option of pinbench run alone; pinbench submit does not take it",
    "--move-aside": "an option of pinbench run alone; pinbench submit does not take it",
    "--build": "an option of pinbench run alone; build the images first with pinbench build",
    "--base-image": "an option of pinbench run --build and pinbench build; build the images first with it",
}
# the sbatch options a script's header takes from pinbench submit's own (--partition gpu): an abbreviation of one
# given as --sbatch-arg (--part=other) came after it and won
_WRITTEN = ("--partition", "--account", "--time", "--gpus-per-task")
_SBATCH_ARG = re.compile(r"^--[a-z][a-z0-9-]*(=[^\s'\"\\;&|<>`$]+)?$")
_PLAIN_VALUE = re.compile(r"^[^\s'\"\\;&|<>`$]+$")
# sbatch --time: "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours", "days-hours:minutes",
# "days-hours:minutes:seconds"; "INFINITE" / "UNLIMITED" (any case) for no limit
_SLURM_TIME = re.compile(r"(?i:infinite|unlimited)|\d+(:\d{1,2}){0,2}|\d+-\d{1,2}(:\d{1,2}){0,2}")
CHECK_SECONDS = 3.0
SECRET_PREFIX = "PINBENCH_SECRET_"


class SubmitError(RecipeError):
    """The request cannot be submitted; one line."""


@dataclass
class Request:
    """What the user asked for: the run (as for ``pinbench run``) and how to place it on the cluster."""

    recipe: Recipe
    shards: int
    checkpoint: str = ""
    out: Path | None = None
    limit: int | None = None
    fixture: bool = False
    offline: bool = False
    options: list[str] = field(default_factory=list)
    partition: str | None = None
    gpus_per_task: int | None = None
    time: str | None = None
    finish_time: str | None = None
    account: str | None = None
    sbatch_args: list[str] = field(default_factory=list)
    container: str = "none"
    images: list[str] = field(default_factory=list)
    generator: str | None = None   # --generator of every job, with its -g options and time limit
    generator_options: list[str] = field(default_factory=list)
    generation_timeout: float | None = None
    generator_image: str | None = None   # the image the generating phases' jobs run in (not a container's --image)
    skip_doctor: bool = False   # every job runs --skip-doctor (and submit checks nothing first)

    def command(self) -> str:
        """The ``pinbench submit`` command line that makes this request (recorded with each submission), any secret
        in it redacted as a scorecard's are."""
        argv = ["pinbench", "submit", self.recipe.name, "--shards", str(self.shards)]
        for flag, value in (("--checkpoint", self.checkpoint), ("--out", self.out), ("--limit", self.limit),
                            ("--partition", self.partition), ("--gpus-per-task", self.gpus_per_task),
                            ("--time", self.time), ("--finish-time", self.finish_time), ("--account", self.account)):
            argv += [flag, str(value)] if value not in (None, "") else []
        argv += ["--fixture"] * self.fixture + ["--offline"] * self.offline
        argv += [f"--option={o}" for o in self.options] + [f"--sbatch-arg={a}" for a in self.sbatch_args]
        argv += ["--container", self.container] if self.container != "none" else []
        argv += [f"--image={i}" for i in self.images]
        argv += [f"--generator={self.generator}"] if self.generator is not None else []
        argv += [f"--generator-option={o}" for o in self.generator_options]
        argv += [f"--generation-timeout={self.generation_timeout:g}"] if self.generation_timeout is not None else []
        argv += [f"--generator-image={self.generator_image}"] if self.generator_image is not None else []
        argv += ["--skip-doctor"] * self.skip_doctor
        return redact(shlex.join(argv))   # a token in a -g value (a variable in the scripts) or the --generator


@dataclass
class PhasePlan:
    phase: ScaleOutPhase
    job: PhaseJob
    script: Path
    text: str


@dataclass
class Plan:
    request: Request
    out_dir: Path
    phases: list[PhasePlan]
    # each secret -g value by the variable that carries it (``secret_variables``): sbatch's environment, no file's
    secret_env: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def slurm_dir(self) -> Path:
        return self.out_dir / SLURM_DIR


@dataclass
class Submission:
    """One ``pinbench submit``: when, what, and the job id of each phase (in order)."""

    submitted: str
    recipe: str
    recipe_version: str
    checkpoint: str
    mode: str
    shards: int
    container: str
    jobs: list[dict[str, Any]]  # {"phase", "sharded", "job_id", "script"}
    command: str

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @property
    def which(self) -> str:
        """``gpt-4o, full``: the checkpoint and mode, said once where they are one word (``fixture``)."""
        return self.mode if self.checkpoint == self.mode else f"{self.checkpoint}, {self.mode}"

    @property
    def job_ids(self) -> list[str]:
        return [j["job_id"] for j in self.jobs]


# ------------------------------------------------------------------------------------------- planning


def plan(request: Request, *, cwd: Path | None = None, pinbench: Sequence[str] | None = None) -> Plan:
    """Validate the request and write nothing: every phase's config, command and sbatch script text."""
    recipe = request.recipe
    layout = recipe.layout(request.generator)
    problem = scale_out_problem(layout, recipe.flags, recipe.stages)
    if problem:
        raise SubmitError(f"{recipe.name} cannot be laid out on a cluster: {problem}")
    if not 1 <= request.shards <= MAX_SHARDS:
        raise SubmitError(f"--shards must be 1 to {MAX_SHARDS} (a Slurm job array's most), got {request.shards}")
    if request.gpus_per_task is not None and request.gpus_per_task < 0:
        raise SubmitError(f"--gpus-per-task must be >= 0, got {request.gpus_per_task}")
    if request.container not in CONTAINERS:
        raise SubmitError(f"--container must be one of {', '.join(CONTAINERS)}, not {request.container!r}")
    _check_sbatch_values(request)
    cwd = (cwd or Path.cwd()).resolve()
    configs = [_config(request, phase, cwd) for phase in layout]
    # the submission's record and what submit says redact them
    keep_secret_options(configs[0].generator_options, command_of(configs[0].generator or ""))
    out_dir, inputs = configs[0].out_dir, input_paths(configs[0], cwd)
    try:   # as pinbench run refuses it: each job was refused once scheduled, after the scripts were written there
        check_out_dir_outside(configs[0], inputs, cwd)
        check_owner(out_dir, run_identity(configs[0]), inputs)   # another run's, or of other inputs
    except RecipeError as exc:
        raise SubmitError(str(exc)) from None
    _guard(check_sbatch_path, str(out_dir), "run directory")
    _guard(check_sbatch_path, str(cwd), "working directory")
    # A fixture runs offline in the scoring image, every phase of it (as under --runtime docker).
    stages = [stages_for(recipe, configs[0])[0] if request.fixture else recipe.phase_stage(p)
              for p in layout]
    generator_image = _generator_image(request, layout, configs)
    # the generating phases' jobs run in --generator-image: the stages only they use need no --image
    images = _images(request, [s for c, s in zip(configs, stages, strict=True)
                               if generator_image is None or c.skip_generation])
    generating = [s for c, s in zip(configs, stages, strict=True) if foreign_generator(recipe, c)]
    # each job failed on it, one by one
    if generating and request.container == "docker" and not request.images and generator_image is None:
        raise SubmitError(f"--generator {redact(request.generator or '')} with --container docker would run in "
                          f"{recipe.stage_image(generating[0])}, which holds none of its code or dependencies: give "
                          f"--image REF, an image holding pinbench, {recipe.name} and your generator (e.g. built FROM "
                          f"{recipe.image}; its id sha256:... or a digest), --generator-image REF for the phases that "
                          "only generate, or --container none (the jobs run this checkout's environment)")
    flag = "--image" if generator_image is None else "--generator-image"
    configs, generator_mounts = _generator_files(configs, cwd, flag) if request.container != "none" else (configs, ())
    program = list(pinbench or default_program())
    cache = cache_root().expanduser().resolve()
    samples_env, samples_mounts = _sample_cache(request, out_dir, cache, inputs)
    variables = secret_variables(configs[0])
    _check_export(request, list(variables.values()))
    phases = []
    for number, (phase, cfg, stage) in enumerate(zip(layout, configs, stages, strict=True), start=1):
        options, path_options = _options_text(recipe, cfg, cwd)
        stage = _job_stage(stage, cfg, generator_image)
        gpus = request.gpus_per_task if phase.gpus and recipe.flags.gpus != "none" else None
        job = PhaseJob(recipe=recipe, cfg=cfg, phase=phase, stage=stage, options=options,
                       path_options=frozenset(path_options), cache=cache, gpus=gpus, skip_doctor=request.skip_doctor,
                       generator_mounts=generator_mounts, sample_cache_env=samples_env,
                       sample_cache_mounts=samples_mounts, secret_variables=variables,
                       noted=number > 1 or not request.skip_doctor)
        if request.container != "none":
            for host, target, _ in job.mounts():
                for path in (host, target):
                    _guard(check_mount_path, path, "mounted path")
        image = generator_image if generator_image is not None and not cfg.skip_generation else images.get(stage.name)
        lines = command_lines(job, request.container, pinbench=program, image=image)
        # the submitting checkout's pinbench, outside any container: it reads the run directory and asks Slurm
        status = shell_line([*program, "status", str(cfg.out_dir)])
        script = out_dir / SLURM_DIR / f"{phase.name}.sbatch"
        text = _script(request, job, layout, number, cwd, lines, status)
        phases.append(PhasePlan(phase=phase, job=job, script=script, text=text))
    return Plan(request=request, out_dir=out_dir, phases=phases,
                secret_env={variable: value for value, variable in variables.items()})


def secret_variables(cfg: RunConfig) -> dict[str, str]:
    """Each secret value by the variable (``PINBENCH_SECRET_1``, ...) standing for it in the scripts: those of the -g
    options that are secrets (``secret_option``), in -g order, then the ``--generator`` text's secret parts
    (``_generator_secrets``): a run directory is copied and shared, and its scripts held them as given. ``sbatch``
    gets the values in its environment and hands them to the job (``--export=ALL``, its default)."""
    if cfg.generator is None:
        return {}
    values = [v for k, v in cfg.generator_options.items() if secret_option(k, v)]
    values += _generator_secrets(cfg.generator)
    return {value: f"{SECRET_PREFIX}{number}" for number, value in enumerate(dict.fromkeys(values), start=1)}


def _generator_secrets(generator: str) -> list[str]:
    """The parts of a ``--generator`` text that ``redact`` hides, a ``command:``'s secret flag values
    (``secret_flag_values``: ``--token VALUE``) among them, in the text's order. The whole text where those parts
    cannot be told apart in it: a flag value the text spells otherwise (``--token 'a'b``), a hidden part holding
    the text after it (two readings of where it ends)."""
    flagged = secret_flag_values(command_of(generator) or [])
    shown = redact(generator, flagged)
    if shown == generator and not flagged:
        return []
    pieces = [re.escape(piece) for piece in shown.split(REDACTED)]
    shortest = re.fullmatch("(.+?)".join(pieces), generator, re.DOTALL)
    longest = re.fullmatch("(.+)".join(pieces), generator, re.DOTALL)
    if shortest is None or longest is None or shortest.groups() != longest.groups() \
            or any(value not in shortest.groups() for value in flagged):
        return [generator]
    return list(shortest.groups())


def _check_export(request: Request, variables: Sequence[str]) -> None:
    """Refuse the ``--export`` sbatch would use that hands the jobs neither ALL nor every secret's variable: each job
    would stop at its first line. On the local Slurm 22.05 ``$SBATCH_EXPORT``, set even empty, beat the script's
    ``--export`` lines, the last of those beat the others, and ALL was read in any case (``--export=all``). One that
    gives a secret's variable a value of its own (``--export=NONE,PINBENCH_SECRET_1=other``) is refused too: the job
    got that value in place of the secret. A refusal never repeats the --export given: a value in it may be a secret
    that ``redact`` does not know (--export=NONE,DB_PW=plainpass1 was shown; MY_PASSWORD=abc12 hid the hint after it,
    secrets59)."""
    given = [("--sbatch-arg --export", a.split("=", 1)[1]) for a in request.sbatch_args if a.startswith("--export=")]
    given = [("$SBATCH_EXPORT", os.environ["SBATCH_EXPORT"])] if "SBATCH_EXPORT" in os.environ else given[-1:]
    for what, value in given:
        items = [item.partition("=") for item in value.split(",")]
        valued = [name for name, equals, _ in items if equals and name in variables]
        if valued:
            raise SubmitError(f"{what}: it gives {', '.join(valued)} a value of its own, and the jobs would get that "
                              "in place of the secret -g or --generator value pinbench submit hands sbatch in it; "
                              "name the variable without '=' or leave --export out")
        names = {name for name, _, _ in items}
        dropped = [v for v in variables if "ALL" not in {n.upper() for n in names} and v not in names]
        if dropped:
            raise SubmitError(f"{what}: the jobs would not get {', '.join(dropped)} (the variables carrying the "
                              f"secret -g and --generator values kept out of the scripts); add ',{','.join(dropped)}' "
                              "to it or leave --export out")


def _job_stage(stage: ContainerStage, cfg: RunConfig, generator_image: Image | None) -> ContainerStage:
    """The network and token policy a phase's job runs with, as ``pinbench run --runtime docker`` gives them: a
    phase generating in ``--generator-image`` has generation's (``generation_stage``: its jobs had the scoring
    stage's, so a generator downloading its weights failed there), and under ``--offline`` no job has either (a
    networked stage's job had the network and HF_TOKEN while it ran ``--offline``)."""
    if generator_image is not None and not cfg.skip_generation:
        stage = generation_stage(stage, generator_image.ref)
    return offline_policy(stage, cfg)


def doctor_findings(the_plan: Plan) -> list[Any]:
    """The doctor's findings on the whole run, here, before anything is written or queued: an unusable input made
    every job fail its own doctor after it was scheduled (each array task, then the finish job), and a run the
    user meant to start anyway had no ``--skip-doctor`` to pass. Only with ``--container none``, whose jobs run
    this checkout's environment, so its checks are theirs; GPUs are the compute nodes', not checked here."""
    from pinbench.ops.doctor import diagnose

    request = the_plan.request
    if request.skip_doctor or request.fixture or request.container != "none":
        return []
    cfg = replace(the_plan.phases[0].job.cfg, shard=None)
    return [f for f in diagnose(request.recipe, cfg, gpus=False) if f.check != "gpu"]


def default_program() -> list[str]:
    """``pinbench`` of the environment running this command, by absolute path (the jobs use the same one)."""
    bin_dir = Path(os.path.abspath(sys.executable)).parent
    script = bin_dir / "pinbench"
    return [str(script)] if script.is_file() else [os.path.abspath(sys.executable), "-m", "pinbench"]


def _config(request: Request, phase: ScaleOutPhase, cwd: Path) -> RunConfig:
    recipe = request.recipe
    try:
        cfg = recipe.config(
            request.checkpoint, out_dir=request.out, limit=request.limit,
            shard=Shard(0, request.shards) if phase.sharded else None, runtime="local",
            skip_generation="--skip-generation" in phase.flags, skip_scoring="--skip-scoring" in phase.flags,
            fixture=request.fixture, gpus=request.gpus_per_task if phase.gpus else None, offline=request.offline,
            options=parse_pairs(request.options), generator=request.generator,
            generator_options=parse_pairs(request.generator_options, "-g"),
            generation_timeout_s=request.generation_timeout, cwd=cwd)
        if request.generator is not None and request.generator.startswith("command:"):
            command_argv(request.generator)   # a misspelt placeholder: refused here, not in every job
            command_capabilities(cfg.generator_options)   # and a -g value that does not read (prompt_schedule=maybe)
    except (RecipeError, ValueError) as exc:  # flags the recipe refuses, bad names, bad options
        raise SubmitError(str(exc)) from None
    out = cfg.out_dir if cfg.out_dir.is_absolute() else cwd / cfg.out_dir
    if out.exists() and not out.is_dir():
        raise SubmitError(f"{out}: the run directory exists and is not a directory")
    cfg.out_dir = out
    return cfg


def _sample_cache(request: Request, out_dir: Path, cache: Path,
                  inputs: Mapping[str, Path]) -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """The submitting shell's sample cache setting as a container job gets it (``sample_cache_setting``, as
    ``--runtime docker`` gives it): the jobs used ``/cache/samples`` whatever it said, ``off`` and the bound
    included. For ``--container none`` the setting as it is, the folder absolute: its jobs relied on inheriting this
    environment, which ``--sbatch-arg=--export=NONE`` drops. Either way it is written into the script.
    SubmitError for a setting no job could use (``checked_dir``, as a run checks it, inside the run directory or
    an input folder of ``inputs`` included), whatever the container."""
    try:
        root = checked_dir(out_dir, inputs=inputs)
        if request.container == "none":
            env = {SIZE_ENV: os.environ[SIZE_ENV]} if SIZE_ENV in os.environ else {}
            if os.environ.get(SAMPLE_CACHE_ENV, "").strip():
                env[SAMPLE_CACHE_ENV] = "off" if root is None else os.path.abspath(root)
            return env, ()
        env, mounts = sample_cache_setting(os.environ, out_dir, cache)
    except ValueError as exc:
        raise SubmitError(str(exc)) from None
    return env, tuple((str(host), target) for host, target in mounts.items())


def _generator_files(configs: Sequence[RunConfig], cwd: Path,
                     image_flag: str) -> tuple[list[RunConfig], tuple[tuple[str, str], ...]]:
    """Every phase's config with the host files its ``--generator`` names made absolute (from ``cwd``), and their
    (host, container) read-only mounts: ``docker_runtime.generator_files``, as ``pinbench run --runtime docker``
    mounts them. In a job's container they did not exist and generation failed deep inside. Every phase gets the same
    ``--generator`` text (the scoring phase's ``--skip-generation`` compares it with the one that generated).
    ``image_flag``: where a refusal's hint says to put the files instead."""
    generating = next((cfg for cfg in configs if not cfg.skip_generation), None)
    if generating is None:
        return list(configs), ()
    try:
        absolute, mounts = generator_files(generating, cwd=cwd, image_flag=image_flag)
    except RecipeError as exc:
        raise SubmitError(str(exc)) from None
    configs = [replace(cfg, generator=absolute.generator, generator_options=absolute.generator_options)
               for cfg in configs]
    return configs, tuple((str(host), spec.removesuffix(":ro")) for host, spec in mounts.items())


def _options_text(recipe: Recipe, cfg: RunConfig, cwd: Path) -> tuple[dict[str, str], list[str]]:
    """Every option the user set (on the command line or in the environment) as ``-o`` text; paths absolute."""
    text, paths = {}, []
    for name, spec, value in user_options(recipe, cfg):
        if spec.type == "path":
            path = Path(value).expanduser()
            text[name] = str(path if path.is_absolute() else cwd / path)   # (lnk/.. read by the config already)
            paths.append(name)
        else:
            text[name] = spec.format(value)
    return text, paths


def _images(request: Request, stages: Sequence[Any]) -> dict[str, Image]:
    """The image of each container stage the layout uses; pinned (a digest or a hashed file) unless local Docker."""
    needed = list(dict.fromkeys(s.name for s in stages))
    if request.container == "none":
        if request.images:
            raise SubmitError("--image applies to --container docker, pyxis or apptainer")
        return {}
    given: dict[str, str] = {}
    for item in request.images:
        name, sep, ref = item.partition("=")
        if sep and name in needed:
            given[name] = ref
        elif len(needed) == 1 and not (sep and re.fullmatch(r"[a-z][a-z0-9_-]*", name)):
            given[needed[0]] = item
        else:
            raise SubmitError(f"--image {item!r}: this layout runs stages {', '.join(needed)}; "
                              "give one --image STAGE=REF for each")
    images = {}
    for stage in stages:
        ref = given.get(stage.name)
        if ref is None and request.container == "docker":
            images[stage.name] = Image(request.recipe.stage_image(stage))  # built here from the hashed lock
        elif ref is None:
            example = f"{stage.name}=" if len(needed) > 1 else ""
            raise SubmitError(f"--container {request.container} needs --image {example}REF for stage {stage.name}: "
                              "a squashfs/SIF file or a registry reference by digest (...@sha256:<64 hex>)")
        else:
            images[stage.name] = _pinned_image(ref, request.container)
    return images


def _generator_image(request: Request, layout: Sequence[ScaleOutPhase], configs: Sequence[RunConfig]) -> Image | None:
    """The pinned ``--generator-image``, or None without one: the image the phases that generate run in, as
    ``pinbench run --runtime docker --generator-image`` runs its generate stage, while every phase that scores keeps
    the pinned ``--image``. Refused (one line) where it would run nothing, or would score a phase in it too."""
    ref = request.generator_image
    if ref is None:
        return None
    if request.container == "none":
        raise SubmitError("--generator-image applies to --container docker, pyxis or apptainer (with none the jobs "
                          "run this checkout's environment)")
    if request.generator is None:
        raise SubmitError("--generator-image: it runs a --generator's generation, and this submission has no "
                          "--generator")
    generating = [(p, c) for p, c in zip(layout, configs, strict=True) if not c.skip_generation]
    if not generating:
        raise SubmitError(f"--generator-image: {request.recipe.name}'s layout (scale_out_generator) generates "
                          "nothing (every phase runs --skip-generation)")
    scoring = next((p for p, c in generating if not c.skip_scoring), None)
    if scoring is not None:
        raise SubmitError(f"--generator-image: phase {scoring.name} of {request.recipe.name}'s layout "
                          "(scale_out_generator) generates and scores in one job, so it would score in "
                          f"{ref}, not the pinned image; only a layout that generates with --skip-scoring (as "
                          "MIND's and RememBench's) can generate in another image")
    return _pinned_image(ref, request.container, flag="--generator-image")


def _pinned_image(ref: str, container: str, flag: str = "--image") -> Image:
    if _PLAIN_VALUE.fullmatch(ref) is None:
        raise SubmitError(f"{flag} {ref!r}: not a plain image reference or path")
    path = Path(ref).expanduser()
    if container == "docker" and IMAGE_ID.fullmatch(ref):
        return Image(ref, ref)  # a local image by id: pinned by its content
    if path.is_file() and container == "docker":
        raise SubmitError(f"{flag} {ref}: docker runs an image reference (repository@sha256:... or a local image id "
                          "sha256:...), not a file")
    if path.is_file():
        return Image(str(path.resolve()), f"sha256:{sha256_file(path)}")
    if path.exists():
        raise SubmitError(f"{flag} {ref}: exists but is not a file")
    if IMAGE_DIGEST.search(ref) is None:
        kind = {"pyxis": " or a squashfs file", "apptainer": " or a SIF file"}.get(container, "")
        raise SubmitError(f"{flag} {ref}: not pinned; give a registry reference by digest (...@sha256:<64 hex>){kind}")
    return Image(ref, ref.rsplit("@", 1)[1])


def _check_sbatch_values(request: Request) -> None:
    for flag, value in (("--partition", request.partition), ("--time", request.time),
                        ("--finish-time", request.finish_time), ("--account", request.account)):
        if value is not None and not _PLAIN_VALUE.fullmatch(value):
            raise SubmitError(f"{flag} {value!r}: expected one word without quotes, spaces or shell characters")
    for flag, value in (("--time", request.time), ("--finish-time", request.finish_time)):
        if value is not None and not _SLURM_TIME.fullmatch(value):
            raise SubmitError(f"{flag} {value!r}: not a Slurm time limit (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, "
                              "D-HH:MM:SS, or UNLIMITED)")
    for arg in request.sbatch_args:
        if redact(arg) != arg:   # first: every message below shows the argument
            raise SubmitError(f"--sbatch-arg {redact(arg)!r}: holds a secret, which would be written into every sbatch "
                              "script and slurm/submissions.jsonl; export it in the submitting shell instead (the jobs "
                              "get its environment)")
        if not _SBATCH_ARG.fullmatch(arg):
            raise SubmitError(f"--sbatch-arg {arg!r}: expected one long sbatch option, --name or --name=value "
                              "(no spaces, quotes or shell characters)")
        name = arg.split("=", 1)[0]
        if name in RESERVED:
            raise SubmitError(f"--sbatch-arg {arg!r}: {name} is set by pinbench submit itself")
        own = f"--{name[5:]}" if name.startswith("--no-") else name   # --no-offline is --offline's
        if own in _SUBMIT_OPTIONS:
            raise SubmitError(f"--sbatch-arg {arg!r}: {own} is an option of pinbench submit, not of sbatch; give it "
                              f"to pinbench submit itself ({arg})")
        if own in _RUN_OPTIONS:
            raise SubmitError(f"--sbatch-arg {arg!r}: {own} is an option of pinbench run, not of sbatch: "
                              f"{_RUN_OPTIONS[own]}")
        full = next((o for o in (*RESERVED, *_WRITTEN) if o.startswith(name)), None)
        if full is not None:   # sbatch takes any unambiguous prefix of a long option for it (getopt_long)
            raise SubmitError(f"--sbatch-arg {arg!r}: sbatch reads {name} as {full}, which pinbench submit sets "
                              f"itself{f' (give pinbench submit {full})' if full in _WRITTEN else ''}")


def check_sbatch_path(path: str, what: str) -> str:
    """A path that can stand in an ``#SBATCH`` line: no whitespace or quotes (sbatch splits there) and no ``%``
    (sbatch expands ``%j`` and the like in file names)."""
    if re.search(r"[\s'\"%\\]", path) or any(ord(c) < 0x20 for c in path):
        raise ValueError(f"{what} {path!r}: a path in an sbatch script may not contain spaces, quotes, '%' or "
                         "backslashes; choose another")
    return path


def _guard(check, value: str, what: str) -> None:
    try:
        check(value, what)
    except ValueError as exc:
        raise SubmitError(str(exc)) from None


# ------------------------------------------------------------------------------------------- scripts


def _sbatch_lines(request: Request, job: PhaseJob, logs: Path) -> list[str]:
    phase, recipe = job.phase, job.recipe
    name = f"pinbench-{recipe.name}-{phase.name}"
    lines = [f"--job-name={name}", "--ntasks=1"]
    if phase.sharded:
        lines += [f"--array=0-{request.shards - 1}", f"--output={logs}/{log_name(phase.name, '%A', '%a')}"]
    else:
        lines += [f"--output={logs}/{log_name(phase.name, '%j')}"]
    time_limit = request.time if phase.sharded or request.finish_time is None else request.finish_time
    lines += [f"--partition={request.partition}"] if request.partition else []
    lines += [f"--account={request.account}"] if request.account else []
    lines += [f"--time={time_limit}"] if time_limit else []
    lines += [f"--gpus-per-task={job.gpus}"] if job.gpus else []
    lines += list(request.sbatch_args)
    return [f"#SBATCH {line}" for line in lines]


def log_name(phase: str, job_id: str, task: int | str | None = None) -> str:
    """The name of a job's log in ``<run>/slurm/logs/``: its script's ``--output`` (``%A_%a``, ``%j``) as sbatch
    expands it for the job, or that pattern itself."""
    return f"{phase}-{job_id}.log" if task is None else f"{phase}-{job_id}_{task}.log"


def _script(request: Request, job: PhaseJob, phases: tuple[ScaleOutPhase, ...], number: int, cwd: Path,
            command: list[str], status: str) -> str:
    recipe, cfg, phase = job.recipe, job.cfg, job.phase
    last = number == len(phases)
    what = (f"a job array of {counted(request.shards, 'task')}; task I runs shard I/{request.shards} (task i of the "
            f"run belongs to shard i mod {request.shards})") if phase.sharded else "one job over every task"
    after = "" if number == 1 else f"; starts when {phases[number - 2].name} has ended, whatever its outcome"
    header = [
        "#!/bin/bash",
        f"# pinbench submit: {recipe.name} {recipe.version}, checkpoint {cfg.checkpoint} ({cfg.mode})",
        f"# run directory: {cfg.out_dir}",
        f"# phase {number} of {len(phases)}, {phase.name}: {what}{after}.",
        f"# container: {request.container}; stage {job.stage.name}"
        f" ({'network' if job.stage.network else 'offline'}, {'token' if job.stage.needs_token else 'no token'}).",
        "# Submitting again recomputes only samples without a valid stored record.",
        *_sbatch_lines(request, job, cfg.out_dir / SLURM_DIR / "logs"),
        f"#SBATCH --chdir={cwd}",
        "",
        "set -uo pipefail",
        *(f': "${{{v}?not set: it carries a secret -g or --generator value, which pinbench submit hands sbatch in '
          'its environment and never writes here; run pinbench submit again}"' for v in job.secret_variables.values()),
    ]
    if not last:
        return "\n".join([*header, *command[:-1], "exec " + command[-1], ""])
    return "\n".join([*header, *command, "code=$?",
                      "# every shard's done / failed / pending samples, naming the failures",
                      f"{status} || true", 'exit "$code"', ""])


def write_scripts(the_plan: Plan) -> list[Path]:
    logs = the_plan.slurm_dir / "logs"
    for host, _ in the_plan.phases[0].job.sample_cache_mounts:   # made here, as --runtime docker does
        try:
            Path(host).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SubmitError(f"$PINBENCH_SAMPLE_CACHE={host}: cannot make the folder the jobs mount: "
                              f"{exc.strerror or exc}") from None
    try:
        logs.mkdir(parents=True, exist_ok=True)
        for phase in the_plan.phases:
            write_atomic(phase.script, phase.text)
            phase.script.chmod(0o700)   # its owner's alone: it holds the -g options (a secret one as a variable)
    except OSError as exc:
        raise SubmitError(f"--out {the_plan.out_dir}: cannot write the sbatch scripts there: "
                          f"{exc.filename or logs}: {exc.strerror or exc}") from None
    return [p.script for p in the_plan.phases]


# ----------------------------------------------------------------------------------------- submitting


def submit_plan(the_plan: Plan) -> Submission:
    """Write the scripts, submit the phases in order (each ``afterany`` the previous), record the submission.

    One at a time per run directory (a lock held from the check for live jobs to the record): two submissions at
    once both found nothing live, each rewrote the other's scripts before ``sbatch`` read them (a 2-shard array
    ran the 3-shard script) and one record was lost."""
    problem = slurm.missing_client()
    if problem:
        raise SubmitError(problem)
    with contextlib.ExitStack() as held:
        try:   # only the lock's own errors: one after sbatch (the record's) is not the scripts'
            held.enter_context(exclusive(the_plan.slurm_dir / SUBMIT_LOCK))
        except FileError as exc:   # the lock file is a FIFO, say: named, never waited on
            raise SubmitError(f"--out {the_plan.out_dir}: {exc}") from None
        except OSError as exc:
            raise SubmitError(f"--out {the_plan.out_dir}: cannot write the sbatch scripts there: "
                              f"{exc.filename or the_plan.slurm_dir}: {exc.strerror or exc}") from None
        return _submit_alone(the_plan)


def _submit_alone(the_plan: Plan) -> Submission:
    refuse_if_live(the_plan.out_dir)
    write_scripts(the_plan)
    for phase in the_plan.phases:
        _slurm_call(lambda p=phase: slurm.sbatch(p.script, test_only=True, env=the_plan.secret_env))
    submitted: list[str] = []
    try:
        for phase in the_plan.phases:
            dependency = f"afterany:{submitted[-1]}" if submitted else None
            submitted.append(_slurm_call(lambda p=phase, d=dependency: slurm.sbatch(p.script, dependency=d,
                                                                                    env=the_plan.secret_env)))
        _refuse_never_starting(submitted[0])
        cfg = the_plan.phases[0].job.cfg
        record = Submission(
            submitted=now(), recipe=the_plan.request.recipe.name, recipe_version=the_plan.request.recipe.version,
            checkpoint=cfg.checkpoint, mode=cfg.mode, shards=the_plan.request.shards,
            container=the_plan.request.container, command=the_plan.request.command(),
            jobs=[{"phase": p.phase.name, "sharded": p.phase.sharded, "job_id": job_id, "script": str(p.script)}
                  for p, job_id in zip(the_plan.phases, submitted, strict=True)])
        try:   # unrecorded, the jobs are unseen by pinbench status and by the next submit's check for live ones
            append_submission(the_plan.out_dir, record)
        except OSError as exc:
            raise SubmitError(f"{submissions_path(the_plan.out_dir)}: cannot record the submission "
                              f"({exc.strerror or exc})") from None
    except SubmitError as exc:
        slurm.scancel(submitted)
        cancelled = f" (cancelled what was submitted: {', '.join(submitted)})" if submitted else ""
        raise SubmitError(f"{exc}{cancelled}") from None
    return record


def _slurm_call(call):
    try:
        return call()
    except slurm.SlurmError as exc:
        raise SubmitError(str(exc)) from None


def _refuse_never_starting(job_id: str) -> None:
    """Cancel-worthy: the first phase pends for a reason that never clears (checked for a few seconds)."""
    deadline = time.monotonic() + CHECK_SECONDS
    while True:
        states = _slurm_call(lambda: slurm.job_states([job_id]))[job_id]
        stuck = [s for s in states if s.state == "PENDING" and s.reason in slurm.NEVER_STARTS]
        if stuck:
            raise SubmitError(f"job {job_id} would never start: Slurm holds it for {stuck[0].reason}")
        settled = all(s.state != "PENDING" or s.reason not in ("", "None") for s in states)
        if settled or time.monotonic() > deadline:
            return
        time.sleep(0.5)


def refuse_if_live(out_dir: Path) -> None:
    """One submission at a time per run directory: refuse while the last one still has jobs queued or running."""
    try:
        last = last_submission(out_dir)
    except ValueError as exc:   # a folder or FIFO there, or a record that is no submission: named, one line
        raise SubmitError(str(exc)) from None
    if last is None:
        return
    states = _slurm_call(lambda: slurm.job_states(last.job_ids))
    live = [job for job in last.job_ids if any(not s.ended and s.state != "UNKNOWN" for s in states[job])]
    if live:
        raise SubmitError(f"{out_dir}: jobs {', '.join(live)} of the submission of {last.submitted} are still queued "
                          f"or running; follow them (pinbench status {out_dir} --wait) or cancel them "
                          f"(scancel {' '.join(live)})")


# ----------------------------------------------------------------------------------------- the record


def submissions_path(out_dir: Path) -> Path:
    return Path(out_dir) / SLURM_DIR / SUBMISSIONS


def append_submission(out_dir: Path, record: Submission) -> None:
    path = submissions_path(out_dir)
    old = path.read_text(encoding="utf-8") if path.is_file() else ""
    write_atomic(path, old + json.dumps(record.to_json(), ensure_ascii=False) + "\n")


def last_submission(out_dir: Path) -> Submission | None:
    """The newest submission recorded for a run directory; ValueError names a corrupt record file."""
    path = submissions_path(out_dir)
    if not (path.exists() or path.is_symlink()):
        return None
    lines = [line for line in read_data_file(path).splitlines() if line.strip()]   # a FIFO: one line, no hang
    if not lines:
        return None
    try:
        submission = Submission(**loads_json(lines[-1]))
        problem = _submission_problem(submission)
    except (ValueError, TypeError) as exc:
        problem = str(exc)
    if problem:
        raise ValueError(f"{path}:{len(lines)}: unreadable submission record ({problem})")
    return submission


def _submission_problem(submission: Submission) -> str:
    """What makes a parsed record no submission ``pinbench status`` can show, or "": a count of shards that no job
    array has (10**9 hung status building a row per shard) or jobs without their phase, id and kind."""
    if type(submission.shards) is not int or not 1 <= submission.shards <= MAX_SHARDS:
        return f"shards {submission.shards!r}: not a count of 1 to {MAX_SHARDS}"
    if any(not isinstance(getattr(submission, k), str) for k in (
            "submitted", "recipe", "recipe_version", "checkpoint", "mode", "container", "command")):
        return "recipe, checkpoint, mode, container, command and submitted must be strings"
    if not (isinstance(submission.jobs, list) and submission.jobs and all(
            isinstance(job, dict) and isinstance(job.get("phase"), str) and isinstance(job.get("job_id"), str)
            and isinstance(job.get("sharded"), bool) for job in submission.jobs)):
        return "jobs: expected a list of {phase, sharded, job_id}"
    return ""
