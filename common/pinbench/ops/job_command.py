"""The command a cluster job runs for one phase of a run, as shell lines for its sbatch script.

Four ways, chosen by ``pinbench submit --container``: ``none`` (this checkout's ``.venv``), ``docker``, ``pyxis``
and ``apptainer`` (docs/scale-out.md, "Where jobs run"). Inside a container the run directory, cache, path options
and the files a ``--generator`` names are mounted where ``--runtime docker`` mounts them, so the tasks hash the same
paths and a run started one way resumes the other; the submitting shell's sample cache setting holds there as under
``--runtime docker`` (``docker_runtime.sample_cache_setting``). A stage without network runs ``--offline``;
``HF_TOKEN`` (and its older name ``HUGGING_FACE_HUB_TOKEN``) is unset in every job whose stage has no token (it
neither fetches nor generates in ``--generator-image``), so a token exported by Slurm never reaches scoring; a
container gets it by name only.
"""

from __future__ import annotations

import itertools
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pinbench.core.config import CHECKPOINT_NOTED_BUT_SHARD_0, CHECKPOINT_NOTED_ENV, RunConfig
from pinbench.core.deploy import ContainerStage, ScaleOutPhase
from pinbench.core.provenance import IMAGE_DIGEST_ENV
from pinbench.core.recipe import Recipe
from pinbench.ops.docker_runtime import CACHE_MOUNT, INPUTS_MOUNT, OUT_MOUNT, generator_flags

CONTAINERS = ("none", "docker", "pyxis", "apptainer")
SHARD_INDEX = "${SLURM_ARRAY_TASK_ID}"
OFFLINE_ENV = ("PINBENCH_OFFLINE", "HF_HUB_OFFLINE")
# the token and its older name, which huggingface_hub reads where HF_TOKEN is unset
TOKEN_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
IMAGE_ID = re.compile(r"^sha256:[0-9a-f]{64}$")  # a local Docker image by its content-addressed id
# Docker numbers the host's GPUs; Slurm names the job's in SLURM_JOB_GPUS (CUDA_VISIBLE_DEVICES may be
# renumbered from 0 inside a cgroup), so that one goes first.
DOCKER_GPUS = '--gpus "\\"device=${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-}}\\""'
DOCKER_DIGEST = "{{if .RepoDigests}}{{index .RepoDigests 0}}{{else}}{{.Id}}{{end}}"


class Word(str):
    """A shell word written as is (it expands a variable); every other word is quoted."""


def shell_line(argv: Sequence[str], width: int = 100) -> str:
    """One shell command; a long one continues over lines, one option (with its value) per line."""
    words = [w if isinstance(w, Word) else shlex.quote(w) for w in argv]
    if len(" ".join(words)) <= width:
        return " ".join(words)
    lines = [[words[0]]]
    for word in words[1:]:
        line = lines[-1]
        option_line = line[0].startswith("-")
        takes_value = option_line and len(line) == 1 and "=" not in line[0]
        if word.startswith("-") or (option_line and not takes_value):
            lines.append([word])
        else:
            line.append(word)
    return " \\\n    ".join(" ".join(line) for line in lines)


@dataclass(frozen=True)
class Image:
    """The image a phase runs in and the digest recorded as its provenance (None: the engine tells)."""

    ref: str
    digest: str | None = None


@dataclass(frozen=True)
class PhaseJob:
    """What one phase's job runs: the recipe's config for it, its stage, and where things are on the host."""

    recipe: Recipe
    cfg: RunConfig
    phase: ScaleOutPhase
    stage: ContainerStage
    options: Mapping[str, str]  # -o values as text, path options absolute on the host
    path_options: frozenset[str]
    cache: Path
    gpus: int | None  # --gpus for `pinbench run`, None: the recipe's default
    skip_doctor: bool = False  # --skip-doctor: score the usable inputs, count each unusable one as a failed sample
    generator_mounts: tuple[tuple[str, str], ...] = ()   # (host, container) of the files --generator names
    # $PINBENCH_SAMPLE_CACHE and its bound as the job gets them (written into its script), and the folder a
    # container mounts for it, read-write (host, container)
    sample_cache_env: Mapping[str, str] = field(default_factory=dict)
    sample_cache_mounts: tuple[tuple[str, str], ...] = ()
    # a secret -g or --generator value -> the variable the job's shell puts in its place (``secret_variables``):
    # never written
    secret_variables: Mapping[str, str] = field(default_factory=dict)
    # whether ``pinbench submit`` said the checkpoint's typo note; not when the doctor was skipped: the first phase's
    # first shard holds it then, so that a recipe's own refusal of the name is the one line (``Run``)
    noted: bool = True

    def run_argv(self, program: Sequence[str], *, out: str, inputs: Mapping[str, str] | None = None) -> list[str]:
        """``pinbench run`` with this phase's flags; ``inputs`` maps path options to their in-container path."""
        cfg = self.cfg
        argv = [*program, "run", self.recipe.name, "--checkpoint", cfg.checkpoint, "--out", out]
        argv += ["--limit", str(cfg.limit)] if cfg.limit is not None else []
        argv += ["--fixture"] if cfg.fixture else []
        argv += ["--offline"] if cfg.offline or not self.stage.network else []
        argv += ["--gpus", str(self.gpus)] if self.gpus is not None else []
        for name, value in self.options.items():
            argv += ["--option", f"{name}={(inputs or {}).get(name, value)}"]
        # the same generator in every job: its rollouts are reused by signature
        argv += [self._secret_word(word) for word in generator_flags(cfg)]
        argv += list(self.phase.flags)
        argv += ["--skip-doctor"] if self.skip_doctor else []
        if cfg.shard is not None:  # the job's shell puts in the array task's index
            argv += ["--shard", Word(f'"{SHARD_INDEX}/{cfg.shard.count}"')]
        return argv

    def _secret_word(self, text: str) -> str:
        """``text`` as a word whose secret values the job's shell puts in from their variables: the same string, none
        of them written."""
        if not self.secret_variables:
            return text
        longest_first = sorted(self.secret_variables, key=len, reverse=True)
        parts = re.split(f"({'|'.join(map(re.escape, longest_first))})", text)
        if len(parts) == 1:
            return text
        return Word("".join(f'"${{{self.secret_variables[part]}}}"' if odd else shlex.quote(part)
                            for odd, part in zip(itertools.cycle((False, True)), parts) if part))

    def env_lines(self) -> list[str]:
        """What the job's shell sets before the command: no token unless the stage has one, offline if it has no
        network."""
        lines = [] if self.stage.needs_token else [f"unset {' '.join(TOKEN_ENV)}  # this stage gets no token"]
        if not self.stage.network:
            lines.append(f"export {' '.join(f'{v}=1' for v in OFFLINE_ENV)}  # this stage reads only the cache")
        return lines

    @property
    def forwarded_env(self) -> list[str]:
        """The recipe's declared environment variables a container gets by name (values never in the script)."""
        twins = {spec.env for spec in self.recipe.options.values() if spec.env}
        skip = {"HF_TOKEN", "CUDA_VISIBLE_DEVICES", *twins}
        names = [n for n in self.recipe.env if n not in skip]
        return names + (["HF_TOKEN"] if self.stage.needs_token else [])

    def mounts(self) -> list[tuple[str, str, bool]]:
        """(host, container, read_only) for the run directory, the cache, every path option, every file the
        ``--generator`` names (at its own path) and a sample cache outside the cache, as ``pinbench run --runtime
        docker`` mounts them."""
        found = [(str(self.cfg.out_dir), OUT_MOUNT, False), (str(self.cache), CACHE_MOUNT, False)]
        for name in sorted(self.path_options & set(self.options)):
            found.append((self.options[name], f"{INPUTS_MOUNT}/{name}", True))
        found += [(host, target, True) for host, target in self.generator_mounts]
        return found + [(host, target, False) for host, target in self.sample_cache_mounts]

    @property
    def job_env(self) -> dict[str, str]:
        """The variables every job's ``pinbench run`` gets besides the cache's: the sample cache's, and
        ``CHECKPOINT_NOTED_ENV``: ``pinbench submit`` said the checkpoint's typo note (each job said it again), else
        the first shard alone says it (each array task said it)."""
        return {**self.sample_cache_env, CHECKPOINT_NOTED_ENV: "1" if self.noted else CHECKPOINT_NOTED_BUT_SHARD_0}

    def inputs(self) -> dict[str, str]:
        return {name: f"{INPUTS_MOUNT}/{name}" for name in self.path_options & set(self.options)}


def command_lines(job: PhaseJob, container: str, *, pinbench: Sequence[str], image: Image | None) -> list[str]:
    """The shell lines that run ``job`` the chosen way (``pinbench`` is the checkout's program for ``none``)."""
    if container == "none":
        env = {"PINBENCH_CACHE": str(job.cache), **job.job_env}
        lines = [*job.env_lines(), "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())]
        return [*lines, shell_line(job.run_argv(pinbench, out=str(job.cfg.out_dir)))]
    inner = job.run_argv(["pinbench"], out=OUT_MOUNT, inputs=job.inputs())
    return [*job.env_lines(), *in_container(job, container, image, inner, gpus=bool(job.phase.gpus and job.gpus))]


def in_container(job: PhaseJob, container: str, image: Image | None, inner: list[str], *, gpus: bool) -> list[str]:
    """Shell lines that run ``inner`` (a command inside the image) with the phase's mounts, GPUs and policy."""
    if container not in CONTAINERS[1:]:
        raise ValueError(f"container must be one of {', '.join(CONTAINERS[1:])}, not {container!r}")
    if image is None:
        raise ValueError(f"--container {container} needs an image")
    if container == "docker":
        return _docker(job, image, inner, gpus)
    env = {"PINBENCH_CACHE": CACHE_MOUNT, "HF_HOME": CACHE_MOUNT, IMAGE_DIGEST_ENV: image.digest or image.ref,
           **job.job_env}
    if container == "pyxis":
        mounts = ",".join(f"{host}:{target}{':ro' if ro else ''}" for host, target, ro in job.mounts())
        argv = ["srun", "--ntasks=1", f"--container-image={image.ref}", f"--container-mounts={mounts}",
                "--no-container-mount-home", f"--container-workdir={OUT_MOUNT}", *inner]
        return ["export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()), shell_line(argv)]
    argv = ["apptainer", "exec", *(["--nv"] if gpus else []), "--no-home", "--pwd", OUT_MOUNT]
    for host, target, ro in job.mounts():
        argv += ["--bind", f"{host}:{target}{':ro' if ro else ''}"]
    for key, value in env.items():
        argv += ["--env", f"{key}={value}"]
    return [shell_line([*argv, image.ref, *inner])]


def _docker(job: PhaseJob, image: Image, inner: list[str], gpus: bool) -> list[str]:
    argv: list[str] = ["docker", "run", "--rm", "--init", "--pull", "never", Word('--user "$(id -u):$(id -g)"'),
                       "--shm-size", "16g"]
    argv += [] if job.stage.network else ["--network", "none"]
    argv += [Word(DOCKER_GPUS)] if gpus else []
    for host, target, ro in job.mounts():
        argv += ["--volume", f"{host}:{target}{':ro' if ro else ''}"]
    for key, value in (("PINBENCH_CACHE", CACHE_MOUNT), ("HF_HOME", CACHE_MOUNT), *job.job_env.items()):
        argv += ["--env", f"{key}={value}"]
    argv += [Word(f'--env {IMAGE_DIGEST_ENV}="$DIGEST"')]
    if not job.stage.network:
        argv += [item for v in OFFLINE_ENV for item in ("--env", f"{v}=1")]
    for name in job.forwarded_env:
        argv += ["--env", name]
    digest = image.digest or f"$(docker image inspect --format '{DOCKER_DIGEST}' \"$IMAGE\")"
    return [f"IMAGE={shlex.quote(image.ref)}", f'DIGEST="{digest}"', shell_line([*argv, Word('"$IMAGE"'), *inner])]


def check_mount_path(path: str, what: str) -> str:
    """A host path that can be written into a mount list (no ',' or ':' separators, no control characters)."""
    if any(c in path for c in ",:") or any(ord(c) < 0x20 for c in path):
        raise ValueError(f"{what} {path!r}: a path mounted into a container may not contain ',', ':' or control "
                         "characters")
    return path
