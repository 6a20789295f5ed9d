"""The recipe contract: a recipe is a package ``pinbench_recipes.<pkg>`` declared by its ``recipe.yaml``.

The declaration (options, metrics, flags, stages, version, changelog) is data, read and schema-checked
without importing the recipe's code, so ``pinbench list``, ``diff``, ``report`` and ``--help`` stay fast
and work without a recipe's heavy dependencies. Only ``Recipe.load`` imports the code, of the entry point in use
(``entry: run:run`` names the module and function; ``fetch``, ``doctor`` and ``requests`` name theirs).

A recipe is registered by being there: every folder of the ``pinbench_recipes`` package that holds a
recipe.yaml is one (``recipes/<pkg>/`` in a checkout, ``site-packages/pinbench_recipes/<pkg>/`` for a wheel or
an installed export), so adding a recipe edits no list anywhere.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pinbench.core.config import Implementation, RecipeError, RunConfig, Shard, check_checkpoint_name
from pinbench.core.deploy import DEFAULT_SCALE_OUT, DEFAULT_STAGES, ContainerStage, ScaleOutPhase
from pinbench.core.files import FileError, read_yaml, system_path, tree_fingerprint
from pinbench.core.findings import Finding
from pinbench.core.generation import Generated
from pinbench.core.imports import library_closure
from pinbench.core.metricinfo import MetricInfo, match_metric
from pinbench.core.notices import announced
from pinbench.core.options import (
    NOT_APPLIED,
    OptionError,
    OptionSpec,
    OptionValues,
    ParsedOptions,
    did_you_mean,
    offline_in,
    parse_options,
    parse_pairs,
)
from pinbench.core.pins import Pins
from pinbench.core.provenance import IMAGE_DIGEST_ENV, installed_versions, redact, secret_shaped_refusal
from pinbench.core.schema import schema_error

if TYPE_CHECKING:
    from pinbench.core.runner import SampleRecord
    from pinbench.core.scorecard import Scorecard

PACKAGE_ROOT = "pinbench_recipes"
DECLARATION = "recipe.yaml"
MODES = ("full", "smoke", "fixture")
# the waits on a generator (select, timers) take at most about 9.2e9 s: 1e10 failed every sample with OverflowError
MAX_GENERATION_TIMEOUT_S = 1e9
MAX_GPUS = 1024   # more GPUs than one process sees on any machine (8 x 7 MIG slices is 56): --gpus above is a typo


class DeclarationError(FileError):
    """A recipe.yaml is missing or invalid."""


def scale_out_problem(phases: tuple[ScaleOutPhase, ...], flags: Flags, stages: tuple[ContainerStage, ...]) -> str:
    """Why these phases cannot run as a cluster layout for a recipe with these flags ("" when they can)."""
    names = [p.name for p in phases]
    stage_names = {s.name for s in stages}
    honoured = {"--skip-generation": flags.skip_generation, "--skip-scoring": flags.skip_scoring}
    if len(set(names)) != len(names):
        return f"scale_out: phase names repeat ({', '.join(names)})"
    if not any(p.sharded for p in phases):
        return "scale_out: no phase is sharded"
    if phases[-1].sharded:
        return f"scale_out: the last phase ({phases[-1].name}) must run once over everything, not sharded"
    if not flags.shard:
        return "it does not honour --shard (flags.shard)"
    for phase in phases:
        if phase.stage is not None and phase.stage not in stage_names:
            return f"scale_out: phase {phase.name} names stage {phase.stage!r}, not one of {sorted(stage_names)}"
        refused = [f for f in phase.flags if not honoured[f]]
        if refused:
            return f"scale_out: phase {phase.name} runs with {', '.join(refused)}, which the recipe does not honour"
    return ""


def _scale_out(path: Path, key: str, phases: list[dict[str, Any]], flags: Flags,
               stages: tuple[ContainerStage, ...]) -> tuple[ScaleOutPhase, ...]:
    """A declared layout (``scale_out`` or ``scale_out_generator``), refused in one line naming the key."""
    layout = tuple(ScaleOutPhase(name=p["name"], sharded=p.get("sharded", False), flags=tuple(p.get("flags", ())),
                                 stage=p.get("stage"), gpus=p.get("gpus", p.get("sharded", False))) for p in phases)
    problem = scale_out_problem(layout, flags, stages)
    if problem:
        raise DeclarationError(path, problem.replace("scale_out:", f"{key}:", 1))
    return layout


@dataclass(frozen=True)
class Flags:
    """Which generic ``pinbench run`` flags a recipe honours; any other use is refused, never ignored.

    ``shard`` is True, False or ``"generation"``: shards generate only (with ``--skip-scoring``), and one run scores
    every task (an evaluator that needs them all at once)."""

    limit: bool
    shard: bool | str
    gpus: str
    skip_generation: bool
    skip_scoring: bool


@dataclass(frozen=True)
class Resources:
    """What a default run of the recipe needs (recipe.yaml ``resources:``), checked by ``pinbench doctor``.

    Disk figures are estimates per mode; GPU memory is per GPU, optionally per checkpoint; ``gated`` names
    the pins whose download needs HF_TOKEN; ``fetch_on_run`` says the run downloads what is missing when
    it has network (so a missing cache entry is not a problem then).
    """

    gpu_memory_gb_default: float | None = None
    gpu_memory_gb_by_checkpoint: dict[str, float] = field(default_factory=dict)
    gpu_note: str | None = None
    disk_gb: dict[str, float] = field(default_factory=dict)
    gated: tuple[str, ...] = ()
    fetch_on_run: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Resources:
        return cls(gpu_memory_gb_default=data.get("gpu_memory_gb"),
                   gpu_memory_gb_by_checkpoint=dict(data.get("gpu_memory_gb_by_checkpoint") or {}),
                   gpu_note=data.get("gpu_note"),
                   disk_gb=dict(data.get("disk_gb") or {}), gated=tuple(data.get("gated") or ()),
                   fetch_on_run=bool(data.get("fetch_on_run", False)))

    def gpu_memory_gb(self, checkpoint: str) -> float | None:
        return self.gpu_memory_gb_by_checkpoint.get(checkpoint, self.gpu_memory_gb_default)


@dataclass(frozen=True)
class ChangelogEntry:
    version: str
    date: str
    change: str


@dataclass(frozen=True)
class Example:
    """A command line ``pinbench run <recipe> --help`` shows, and what it does."""

    run: str
    what: str


@dataclass(frozen=True)
class NoDownload:
    """The options of a run that downloads nothing and needs no GPU, and what it gives up (a way on when the
    network fails). ``options`` is ``-o key=value`` pairs; a value in capitals (``DIR``) stands for any value."""

    options: str
    what: str

    def pairs(self) -> dict[str, str]:
        """The ``-o`` pairs of ``options``; ValueError for text that is not ``-o key=value`` pairs."""
        words = self.options.split()
        if len(words) % 2 or any(flag != "-o" for flag in words[::2]):
            raise ValueError(f"no_download.options {self.options!r}: expected -o key=value pairs")
        try:
            return parse_pairs(words[1::2])
        except OptionError as exc:
            raise ValueError(f"no_download.options: {exc}") from None

    def holds(self, specs: Mapping[str, OptionSpec], values: OptionValues) -> bool:
        """Whether a run's option values are these (a placeholder: set at all)."""
        given = values.to_json()
        return all((value := given.get(key)) is not None and (wanted.isupper() or specs[key].format(value) == wanted)
                   for key, wanted in self.pairs().items())


@dataclass
class Recipe:
    """A recipe's declaration plus its entry points (procedure, fetch, doctor, requests, check), their code imported
    on use."""

    name: str
    package: str
    version: str
    description: str
    entry: str
    hardware: str
    flags: Flags
    metrics: dict[str, MetricInfo]
    changelog: list[ChangelogEntry]
    dir: Path
    fetch_entry: str | None = None
    fetch_pins_entry: str | None = None
    checkpoints: list[str] = field(default_factory=list)
    stages: tuple[ContainerStage, ...] = DEFAULT_STAGES
    env: dict[str, str] = field(default_factory=dict)
    options: dict[str, OptionSpec] = field(default_factory=dict)
    resources: Resources | None = None
    doctor_entry: str | None = None
    requests_entry: str | None = None
    check_entry: str | None = None
    generators: dict[str, str] = field(default_factory=dict)
    scale_out: tuple[ScaleOutPhase, ...] = DEFAULT_SCALE_OUT
    # the layout of a run whose rollouts --generator makes (generate as the array, then score once)
    scale_out_generator: tuple[ScaleOutPhase, ...] = DEFAULT_SCALE_OUT
    examples: tuple[Example, ...] = ()
    no_download: NoDownload | None = None
    # the distributions (PyPI names) whose installed versions change its numbers: part of every record's reuse key
    numerics: tuple[str, ...] = ()
    # what a rollout under an .mp4 name may be: "mp4", or "any" container OpenCV opens (``check_rollout``)
    rollout_container: str = "mp4"

    # ------------------------------------------------------------------------------------ code

    @announced(lambda self, target: f"{self.name}: importing its code ({target.partition(':')[0]}.py and its "
                                    "libraries)")
    def load(self, target: str) -> Callable[..., Any]:
        """The function ``module:function`` of the recipe's package (``entry``: its procedure, ``run(run)``)."""
        module, _, function = target.partition(":")
        return getattr(importlib.import_module(f"{self.package}.{module}"), function)

    def doctor(self, cfg: RunConfig, pins: Pins | None) -> list[Finding]:
        """The recipe's own doctor findings: which pins this run needs in the cache, the user's inputs (``pins``
        None: a fixture run, which reads none)."""
        if self.doctor_entry is None:
            return []
        return list(self.load(self.doctor_entry)(cfg, pins))

    def downloads_nothing(self, cfg: RunConfig) -> NoDownload | None:
        """The declared ``no_download`` when this run's options are its: the fetch has nothing to get, not even a
        null pin to resolve (a fetch stage under ``--runtime docker`` is left out); None otherwise."""
        nothing = self.no_download
        return nothing if nothing is not None and nothing.holds(self.options, cfg.options) else None

    def check_files(self, run_dir: Path, card: Scorecard, records: Sequence[SampleRecord]) -> list[str]:
        """What ``pinbench check`` finds wrong with the files the recipe writes beside the scorecard (its ``check:``
        entry, ``check(run_dir, card, records)``: RememBench's scenes.jsonl against the records), one line each."""
        if self.check_entry is None:
            return []
        return list(self.load(self.check_entry)(run_dir, card, records))

    def fetch_pins(self, cfg: RunConfig) -> list[str] | None:
        """The pins (``huggingface/<name>``, ``urls/<name>``) this fetch downloads, whose nulls it resolves; None
        (no ``fetch_pins:`` entry): every pin. A fetch for some metrics then needs no token for a gated repo
        that only other metrics read."""
        if self.fetch_pins_entry is None:
            return None
        return list(self.load(self.fetch_pins_entry)(cfg))

    def fetch(self, cfg: RunConfig) -> None:
        if self.fetch_entry is None:
            raise RecipeError(f"{self.name}: nothing to fetch (it scores inputs you provide with bundled code)")
        self.load(self.fetch_entry)(cfg)

    # ----------------------------------------------------------------------------- declaration

    def metric_info(self, name: str) -> MetricInfo:
        """The declaration of a scorecard metric name; RecipeError when none matches (never guessed)."""
        info = match_metric(name, self.metrics)
        if info is None:
            raise RecipeError(f"{self.name}: metric {name!r} is not declared in {self.dir / DECLARATION}")
        return info

    @property
    def env_vars(self) -> dict[str, str]:
        """Every environment variable the recipe reads: option twins and ``env:``, with what each means."""
        table = {spec.env: f"{spec.help} (same as -o {name}=)" for name, spec in self.options.items() if spec.env}
        table.update(self.env)
        return table

    def parse_options(self, given: Mapping[str, str], *, fixture: bool = False,
                      env: Mapping[str, str] | None = None, check_required: bool = True,
                      generating: bool = False, cwd: Path | None = None) -> ParsedOptions:
        """The options' typed values, a path holding ``..`` as the system reads it (``system_path``, a relative one
        from ``cwd``): what a run reads through ``-o videos=lnk/../x`` is the folder beside the symlink's target,
        where what normalises a path (``os.path.relpath``, ``abspath``) read the folder beside the symlink."""
        try:
            parsed = parse_options(self.options, given, os.environ if env is None else env, recipe=self.name,
                                   fixture=fixture, check_required=check_required, generating=generating)
        except OptionError as exc:
            raise RecipeError(str(exc)) from None
        return replace(parsed, values=OptionValues({name: system_path(value, cwd) if isinstance(value, Path) else value
                                                    for name, value in parsed.values.items()}))

    def config(self, checkpoint: str = "", *, out_dir: Path | None = None, limit: int | None = None,
               shard: Shard | None = None, runtime: str = "local", skip_generation: bool = False,
               skip_scoring: bool = False, fixture: bool = False, gpus: int | None = None, offline: bool = False,
               options: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None,
               check_required: bool = True, generator: str | None = None,
               generator_options: Mapping[str, str] | None = None,
               generation_timeout_s: float | None = None, requests: bool = False,
               cwd: Path | None = None) -> RunConfig:
        """A validated RunConfig: flags the recipe cannot honour, bad names and bad options are refused
        (``check_required=False``: not the run's required inputs, for ``pinbench fetch``; ``requests``: its options
        are those of a generating run, for ``pinbench requests``; ``cwd``: where relative paths are read from,
        ``pinbench submit``'s folder, else this process's)."""
        if generator is not None and self.requests_entry is None:
            raise RecipeError(f"{self.name} generates no rollouts (it scores what it is given): drop --generator")
        if generator is None and (generator_options or generation_timeout_s is not None):
            raise RecipeError("-g and --generation-timeout apply to a --generator")
        if generation_timeout_s is not None and not 0 < generation_timeout_s <= MAX_GENERATION_TIMEOUT_S:
            raise RecipeError(f"--generation-timeout must be a positive number of seconds, at most "
                              f"{MAX_GENERATION_TIMEOUT_S:g}, got {generation_timeout_s}")
        for key in generator_options or {}:
            if not key.isidentifier():
                raise RecipeError(f"-g {key}=...: a generator option's name must be an identifier")
        self.check_flags(limit=limit, shard=shard, gpus=gpus, skip_generation=skip_generation,
                         skip_scoring=skip_scoring)
        if shard is not None and skip_scoring and generator is None and not self.flags.skip_generation:
            # it said "0 samples: 0 done, 0 reused, 0 failed", exit 0, and its samples were lost to the merge
            raise RecipeError(f"{self.name}: --shard with --skip-scoring computes nothing ({self.name} has no "
                              "generation step to shard): drop --skip-scoring; the merge is one unsharded "
                              "--skip-scoring run")
        if shard is not None and skip_scoring and skip_generation:
            # the same: "0 samples: 0 done, 0 reused, 0 failed", exit 0, a shard that did nothing called finished
            raise RecipeError("--shard with --skip-generation and --skip-scoring computes nothing: drop one of them "
                              "(the merge is one unsharded run)")
        if runtime not in ("local", "docker"):
            raise RecipeError(f"--runtime must be local or docker, not {runtime!r}")
        if fixture:
            checkpoint = checkpoint or "fixture"
        elif not checkpoint:
            known = ", ".join(self.checkpoints) or "any name for your model"
            raise RecipeError(f"--checkpoint is required (known for {self.name}: {known})")
        check_checkpoint_name(checkpoint)
        if refusal := secret_shaped_refusal("--checkpoint", checkpoint,
                                            f"the name is printed, written into the run's files and names its "
                                            f"folder (runs/{self.name}/...): choose another name"):
            raise RecipeError(refusal)
        out_dir = system_path(out_dir, cwd) if out_dir else None
        if out_dir is not None and (refusal := secret_shaped_refusal("--out", out_dir)):   # before the options' errors
            raise RecipeError(refusal)
        parsed = self.parse_options(options or {}, fixture=fixture, env=env, check_required=check_required,
                                    generating=requests or generator is not None or (skip_generation and
                                                                                     self.requests_entry is not None),
                                    cwd=cwd)
        mode = "fixture" if fixture else ("smoke" if limit is not None else "full")
        offline = offline or offline_in(os.environ if env is None else env)
        environ = os.environ if env is None else env
        return RunConfig(
            implementation=Implementation.installed(self.version, self.code_digest(),
                                                    environ.get(IMAGE_DIGEST_ENV) or None,
                                                    installed_versions(self.numerics)),
            inputs=self.input_identity(parsed),
            recipe=self.name, checkpoint=checkpoint,
            out_dir=out_dir or self.default_out_dir(checkpoint, mode),
            limit=limit, shard=shard, runtime=runtime, skip_generation=skip_generation, skip_scoring=skip_scoring,
            fixture=fixture, gpus=self.default_gpus if gpus is None else gpus, offline=offline,
            options=parsed.values, option_sources=parsed.sources, generator=generator,
            generator_options=dict(generator_options or {}), generation_timeout_s=generation_timeout_s,
        )

    def input_identity(self, parsed: ParsedOptions) -> dict[str, dict[str, str]]:
        """What the options that can change a result say this run scores: per option its value as given and a
        fingerprint of it (a path's content by ``tree_fingerprint``, so the same files elsewhere keep it), but
        those a fixture does not apply (``NOT_APPLIED``); a run directory belongs to one such identity
        (``pinbench.core.rundir``). It is written to the run directory: a value is shown redacted, and one that
        holds a secret is fingerprinted by its SHA-256, so that another secret is still another input."""
        identity = {}
        given = dict(parsed.values.items())
        for name, spec in self.options.items():
            value = given.get(name)
            if not spec.affects_results or value is None or parsed.sources.get(name) == NOT_APPLIED or \
                    (spec.affects_results_if is not None and not given.get(spec.affects_results_if)):
                continue
            given_text = spec.format(value)
            shown = redact(given_text)
            fingerprint = (tree_fingerprint(value) if spec.type == "path" else shown if shown == given_text
                           else f"sha256:{hashlib.sha256(given_text.encode()).hexdigest()}")
            identity[name] = {"value": shown, "fingerprint": fingerprint}
        return identity

    def code_digest(self) -> str:
        """SHA-256 of the code that computes this recipe's samples: its package's Python sources (tests left out)
        and the ``pinbench.media`` modules they import (transitively: what an export of the recipe holds), each
        named by its path in the package; part of every record's reuse key."""
        sources = [p for p in self.dir.rglob("*.py") if "tests" not in p.relative_to(self.dir).parts]
        media = [p for p in library_closure(self.dir, sources=sources) if p.parent == MEDIA_DIR]
        return _code_digest(((f"{self.package}/{p.relative_to(self.dir).as_posix()}", p) for p in sources),
                            ((f"pinbench/media/{p.name}", p) for p in media))

    @property
    def default_gpus(self) -> int:
        return 0 if self.flags.gpus == "none" else 1

    def check_flags(self, *, limit: int | None, shard: Shard | None, gpus: int | None, skip_generation: bool,
                    skip_scoring: bool) -> None:
        """RecipeError for a generic flag this recipe does not honour (refused, never ignored)."""
        refused = [flag for flag, used in (("--limit", limit is not None), ("--shard", shard is not None),
                                           ("--skip-generation", skip_generation), ("--skip-scoring", skip_scoring))
                   if used and not getattr(self.flags, flag.lstrip("-").replace("-", "_"))]
        if refused:
            raise RecipeError(f"{self.name} does not support {', '.join(refused)} (see `pinbench run {self.name} "
                              "--help`)")
        if shard is not None and self.flags.shard == "generation" and not skip_scoring:
            raise RecipeError(f"{self.name}: --shard applies to generation only: run shards with --skip-scoring, "
                              "then score once")
        if limit is not None and limit < 1:
            raise RecipeError("--limit must be at least 1")
        if gpus is not None:
            if gpus < 0:
                raise RecipeError(f"--gpus must be >= 0, got {gpus}")
            if gpus > MAX_GPUS:   # a device name was made for each: --gpus 10**23 filled memory until it was killed
                raise RecipeError(f"--gpus must be at most {MAX_GPUS} (the GPUs of one machine), got {gpus}")
            if self.flags.gpus == "none" and gpus > 0:
                raise RecipeError(f"{self.name} uses no GPU; drop --gpus")
            if self.flags.gpus == "one" and gpus > 1:
                raise RecipeError(f"{self.name} uses one GPU per process; to use {gpus}, split the run with "
                                  f"--shard I/{gpus} (one process per GPU) or `pinbench submit`")

    # ---------------------------------------------------------------------------------- files

    @property
    def image(self) -> str:
        """Local tag of the recipe's main image (``make build-<name>`` builds it)."""
        return f"pinbench/{self.name}:{self.version}"

    def layout(self, generator: str | None) -> tuple[ScaleOutPhase, ...]:
        """The phases ``pinbench submit`` runs: ``scale_out_generator`` when ``--generator`` makes the rollouts."""
        return self.scale_out if generator is None else self.scale_out_generator

    def phase_stage(self, phase: ScaleOutPhase) -> ContainerStage:
        """The container stage a scale-out phase runs as: the one it names, else the last ``run`` stage."""
        if phase.stage is not None:
            return next(s for s in self.stages if s.name == phase.stage)
        return self.last_run_stage

    @property
    def last_run_stage(self) -> ContainerStage:
        """The last stage that runs ``pinbench run`` (the scoring one): a fixture and a phase naming none run there."""
        return [s for s in self.stages if s.argv[0] == "run"][-1]

    def stage_image(self, stage: ContainerStage) -> str:
        if stage.image is not None:
            return stage.image
        suffix = stage.dockerfile.removeprefix("Dockerfile").lstrip(".")
        return self.image if not suffix else f"pinbench/{self.name}-{suffix}:{self.version}"

    @property
    def pins_path(self) -> Path:
        return self.dir / "pins.yaml"

    def reference_path(self, checkpoint: str, mode: str) -> Path | None:
        """The reference file for a checkpoint and mode, or None when none was published or recorded."""
        path = self.reference_file(checkpoint, mode)
        return path if path.is_file() else None

    @property
    def own_generator(self) -> str:
        """What a run's generation records as the generator when the recipe made the rollouts itself."""
        return f"{self.name}'s own generator"

    def applicable_reference(self, checkpoint: str, mode: str, generator: str | None) -> Path | None:
        """The reference a run is judged against: none for a fixture run of rollouts a ``--generator`` made
        (``generator``: the run's own, or with ``--skip-generation`` the earlier run's; a fixture's reference scores
        the fixture's own rollouts, not ones a generator made from its requests). The run, ``pinbench check``,
        ``diff`` and the view all ask this, so a run directory is judged as its run judged it."""
        if generator not in (None, self.own_generator) and mode == "fixture":
            return None
        return self.reference_path(checkpoint, mode)

    def no_reference(self, checkpoint: str, mode: str, generator: str | None) -> str:
        """Why ``applicable_reference`` gives none, for the results table: "no fixture reference" would send the
        reader looking for the file that is there when it is a generator's rollouts it does not apply to."""
        if generator not in (None, self.own_generator) and mode == "fixture" \
                and self.reference_path(checkpoint, mode) is not None:
            # redacted: a --generator as given may hold a token (a command's argv), and this line goes to diff.txt
            return f"the fixture's reference scores its own rollouts, not those {redact(generator)} made"
        return f"no {mode} reference for {self.name} / {checkpoint}"

    def reference_of(self, card: Scorecard) -> Path | None:
        """``applicable_reference`` for a scorecard, from the config it records and, for a ``--skip-generation``
        run, the generator its provenance says made the rollouts."""
        return self.applicable_reference(card.checkpoint, card.mode, _generator_of(card))

    def no_reference_of(self, card: Scorecard) -> str:
        """``no_reference`` for a scorecard, read as ``reference_of`` reads it."""
        return self.no_reference(card.checkpoint, card.mode, _generator_of(card))

    def reference_file(self, checkpoint: str, mode: str) -> Path:
        """Where the reference for a checkpoint and mode lives: ``references/<checkpoint>[.smoke].yaml``,
        ``references/fixture.yaml`` (whether or not it exists yet)."""
        if mode not in MODES:
            raise RecipeError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
        if mode != "fixture":
            check_checkpoint_name(checkpoint)
        name = {"full": f"{checkpoint}.yaml", "smoke": f"{checkpoint}.smoke.yaml", "fixture": "fixture.yaml"}
        return self.dir / "references" / name[mode]

    def default_out_dir(self, checkpoint: str, mode: str) -> Path:
        suffix = "" if mode == "full" else f"-{mode}"
        return Path("runs") / self.name / f"{check_checkpoint_name(checkpoint)}{suffix}"


# ------------------------------------------------------------------------------------ loading


MEDIA_DIR = Path(__file__).resolve().parent.parent / "media"


@cache
def _sources_digest(named: tuple[tuple[str, Path, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for name, path, _, _ in named:
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def library_digest() -> str:
    """SHA-256 of the pinbench library's own sources, templates and schemas (what a scorecard and report are
    computed with); cached per process while the files' sizes and mtimes hold."""
    root = MEDIA_DIR.parent
    return _code_digest((p.relative_to(root).as_posix(), p) for p in root.rglob("*")
                        if p.is_file() and p.suffix in (".py", ".j2", ".json"))


def _code_digest(*groups: Iterable[tuple[str, Path]]) -> str:
    """One digest of several source files by name and bytes (cached per process while their size and mtime hold)."""
    named = sorted((name, path) for group in groups for name, path in group if "__pycache__" not in path.parts)
    return _sources_digest(tuple((name, path, (state := path.stat()).st_size, state.st_mtime_ns)   # one stat a file
                                 for name, path in named))


def _package_dir(package: str) -> Path:
    """The directory of a recipe package, without executing the recipe's own ``__init__``."""
    try:
        spec = importlib.util.find_spec(package)
    except ModuleNotFoundError:
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise RecipeError(f"recipe package {package!r} is not installed")
    return Path(list(spec.submodule_search_locations)[0])


def load_declaration(path: Path, package: str) -> Recipe:
    """Read and schema-check ``recipe.yaml``; DeclarationError (one line naming the file) on any defect."""
    data = read_yaml(path, DeclarationError)
    problem = schema_error("recipe", data)
    if problem is not None:
        raise DeclarationError(path, problem)
    try:
        options = {name: OptionSpec.from_dict(name, spec) for name, spec in (data.get("options") or {}).items()}
        metrics = {name: MetricInfo.from_dict(name, spec) for name, spec in data["metrics"].items()}
    except (OptionError, ValueError) as exc:
        raise DeclarationError(path, str(exc)) from None
    if not any(m.primary for m in metrics.values()):
        raise DeclarationError(path, "no metric is declared primary: true")
    no_download = NoDownload(**data["no_download"]) if "no_download" in data else None
    try:
        unknown = sorted(set(no_download.pairs()) - set(options)) if no_download is not None else []
    except ValueError as exc:
        raise DeclarationError(path, str(exc)) from None
    if unknown:
        raise DeclarationError(path, f"no_download.options: no option {unknown[0]!r} is declared")
    for spec in options.values():
        if spec.required_unless is not None and spec.required_unless not in options:
            raise DeclarationError(path, f"option {spec.name}: required_unless names no option "
                                         f"({spec.required_unless!r})")
        switch = options.get(spec.affects_results_if or "")
        if spec.affects_results_if is not None and (switch is None or switch.type != "bool"):
            raise DeclarationError(path, f"option {spec.name}: affects_results_if names no bool option "
                                         f"({spec.affects_results_if!r})")
    versions = [c["version"] for c in data["changelog"]]
    if data["version"] not in versions:
        raise DeclarationError(path, f"version {data['version']} has no changelog entry")
    stages = tuple(ContainerStage(**{**s, "argv": tuple(s.get("argv", ("run",)))}) for s in data["stages"]) \
        if "stages" in data else DEFAULT_STAGES
    flags = Flags(**data["flags"])
    layouts = {key: _scale_out(path, key, data[key], flags, stages)
               for key in ("scale_out", "scale_out_generator") if key in data}
    scale_out = layouts.get("scale_out", DEFAULT_SCALE_OUT)
    return Recipe(
        name=data["name"], package=package, version=data["version"], description=data["description"],
        entry=data["entry"], fetch_entry=data.get("fetch"), fetch_pins_entry=data.get("fetch_pins"),
        hardware=data["hardware"], flags=flags,
        metrics=metrics, changelog=[ChangelogEntry(**c) for c in data["changelog"]], dir=path.parent,
        checkpoints=list(data.get("checkpoints") or []), stages=stages, env=dict(data.get("env") or {}),
        options=options, resources=Resources.from_dict(data["resources"]) if "resources" in data else None,
        doctor_entry=data.get("doctor"), requests_entry=data.get("requests"), check_entry=data.get("check"),
        generators=dict(data.get("generators") or {}), scale_out=scale_out,
        scale_out_generator=layouts.get("scale_out_generator", scale_out),
        examples=tuple(Example(**e) for e in data.get("examples") or ()),
        no_download=no_download, numerics=tuple(data.get("numerics") or ()),
        rollout_container=data.get("rollout_container", "mp4"),
    )


@cache
def _load_package(package: str) -> Recipe:
    return load_declaration(_package_dir(package) / DECLARATION, package)


def _registered() -> dict[str, str]:
    """Package name -> package path of every recipe: each folder of ``pinbench_recipes`` with a recipe.yaml."""
    try:
        spec = importlib.util.find_spec(PACKAGE_ROOT)
    except ModuleNotFoundError:
        spec = None
    roots = [Path(p) for p in spec.submodule_search_locations or ()] if spec is not None else []
    return {d.name: f"{PACKAGE_ROOT}.{d.name}" for root in roots for d in sorted(root.iterdir())
            if d.name.isidentifier() and (d / DECLARATION).is_file()}


def available_recipes() -> dict[str, Recipe]:
    """All installed recipes by CLI name, read from their declarations (no recipe code is imported)."""
    recipes = [_load_package(package) for package in _registered().values()]
    return {r.name: r for r in sorted(recipes, key=lambda r: r.name)}


def get_recipe(name: str) -> Recipe:
    """A recipe by CLI name (``paibench-c``), package name (``paibench_c``) or package path
    (``pinbench_recipes.paibench_c``, e.g. a recipe module's ``__package__``)."""
    if not isinstance(name, str) or not name or not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or ".." in name:
        raise RecipeError(f"recipe name {name!r} is not allowed")
    short = name.removeprefix(f"{PACKAGE_ROOT}.").replace("-", "_")
    registered = _registered()
    package = registered.get(short)
    if package is None:
        names = sorted(n.replace("_", "-") for n in registered)
        raise RecipeError(f"unknown recipe {name!r}{did_you_mean(name, names)} "
                          f"(known: {', '.join(names) or 'none installed'})")
    return _load_package(package)


def _generator_of(card: Scorecard) -> str | None:
    """The generator a scorecard's run used: its config's, else (``--skip-generation``) the one its provenance says
    made the rollouts."""
    generator = card.config.get("generator") if isinstance(card.config, Mapping) else None
    generated = Generated.of(card.provenance) if isinstance(card.provenance, Mapping) else None
    return generator or (generated.generator if generated else None)
