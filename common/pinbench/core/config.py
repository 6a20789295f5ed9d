"""What one run is: its configuration (recorded in the scorecard), its shard, and the error a bad one raises.

Kept apart from the declaration model (``pinbench.core.recipe``) so that the run directory's owner
(``pinbench.core.rundir``), the runner and the recipe contract can all use it without importing each other.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pinbench.core.names import checkpoint_name_problem
from pinbench.core.options import OptionValues

T = TypeVar("T")


class RecipeError(RuntimeError):
    """A recipe could not be found or its inputs are unusable (one-line message)."""


def gpu_devices(count: int, visible: str | None) -> int | list[str]:
    """The GPUs ``--gpus count`` means: ``count`` of them, taken in order from CUDA_VISIBLE_DEVICES when it is
    set (indices, GPU-/MIG- UUIDs, as CUDA reads it: up to the first negative entry)."""
    if count == 0 or visible is None:
        return count
    ids: list[str] = []
    for item in (part.strip() for part in visible.split(",")) if visible.strip() else ():
        if re.fullmatch(r"-\d+", item):
            break
        if not re.fullmatch(r"[A-Za-z0-9/-]+", item) or item in ids:
            raise RecipeError(f"CUDA_VISIBLE_DEVICES={visible!r}: entry {item!r} is not a device index or UUID "
                              "(or is repeated)")
        ids.append(item)
    if len(ids) < count:
        raise RecipeError(f"--gpus {count} but CUDA_VISIBLE_DEVICES={visible!r} makes {len(ids)} GPU(s) visible")
    return ids[:count]


def device_file_name(device: str) -> str:
    """A device of ``gpu_devices`` as it is written in a file's name: a MIG instance's ``/`` (``MIG-GPU-<uuid>/1/0``)
    as ``_``, which no device holds (a per-GPU log was a path into folders that do not exist)."""
    return device.replace("/", "_")


# set by the docker runtime in its stages' environment and by submit in its jobs': the process that started them said
# the checkpoint's typo note already
CHECKPOINT_NOTED_ENV = "PINBENCH_CHECKPOINT_NOTED"
# its value in the jobs of a submission's first phase when submit said nothing (--skip-doctor): shard 0 alone says it
# (each array task said it in its own log)
CHECKPOINT_NOTED_BUT_SHARD_0 = "but-shard-0"


def check_checkpoint_name(name: str) -> str:
    """A checkpoint name safe as a file name: letters, digits, ``.``, ``_``, ``-``; no leading dot, no ``..``."""
    problem = checkpoint_name_problem(name)
    if problem:
        raise RecipeError(problem)
    return name


# the most shards a layout has: Slurm's MaxArraySize may not exceed 4000001 (a count beyond it, such as --shard
# 0/99999999999999999999, was taken, and pinbench status of that directory built a row per shard without end)
MAX_SHARDS = 4_000_000


@dataclass(frozen=True)
class Shard:
    """One of ``count`` interleaved slices of a task list: the task at position i goes to shard i % count.

    Membership depends only on the position in the full task list, never on what is already done,
    so the shards of one list are disjoint and together cover it.
    """

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.count <= MAX_SHARDS or not 0 <= self.index < self.count:
            raise ValueError(
                f"invalid shard {self.index}/{self.count}: need a 0-based index I < N and 1 <= N <= {MAX_SHARDS}"
            )

    @classmethod
    def parse(cls, text: str) -> Shard:
        """Parse ``"I/N"`` (0-based index I < N), e.g. ``"0/4"`` .. ``"3/4"``."""
        parts = str(text).strip().split("/")
        try:
            index, count = (int(p.strip()) for p in parts)
        except ValueError:
            index = count = -1
        if not 1 <= count <= MAX_SHARDS or not 0 <= index < count:
            raise ValueError(f"invalid shard {text!r}: expected 'I/N' with a 0-based index I < N and N at most "
                             f"{MAX_SHARDS}, e.g. '0/4'")
        return cls(index, count)

    def select(self, items: Sequence[T]) -> list[T]:
        """The items of this shard, in their original order."""
        return list(items[self.index :: self.count])

    def part(self, k: int, parts: int) -> Shard:
        """Part ``k`` of ``parts`` of this shard's items, as a shard of the whole list: the positions p with
        p % count == index and (p // count) % parts == k (worker k of a shard that runs on several devices)."""
        if not 0 <= k < parts:
            raise ValueError(f"part {k} of {parts}: need 0 <= k < parts")
        return Shard(self.index + self.count * k, self.count * parts)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class Implementation:
    """What computes a run's samples, beside their inputs; a stored record is reused only by the same one.

    ``code`` is the SHA-256 of the recipe package's Python sources and of the ``pinbench.media`` modules they
    import (the decoders and kernels recipes score with); the rest of the library shapes files, not values.
    ``image`` is the digest of the container image the run is in, or None on the host. ``packages`` is a short
    digest of the installed versions of the distributions the recipe declares as ``numerics:`` (``installed``):
    on the host, where no image digest changes with them, an upgraded OpenCV or torch computes every sample again
    rather than reusing numbers of the old versions under a scorecard that names the new ones. None: not recorded
    (a generation record, keyed by its generator instead; a record written before the field was). ``versions`` are
    the ``name==version`` the digest is of, for this run's messages; ``earlier`` those an earlier run in the run
    directory had installed (its scorecard's provenance), so that a record of them names what changed; neither is
    stored or compared.
    Options that change results are part of each task's inputs (its ``input_hash``), not of the implementation.
    """

    recipe_version: str
    code: str
    image: str | None = None
    packages: str | None = None
    versions: tuple[str, ...] = field(default=(), compare=False, repr=False)
    earlier: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """As a record names it; without ``packages`` when None, so a generation record's JSON (and its sample cache
        entry) is what it was before the field existed."""
        named = {"recipe_version": self.recipe_version, "code": self.code, "image": self.image}
        return named if self.packages is None else {**named, "packages": self.packages}

    @classmethod
    def from_json(cls, data: Any) -> Implementation:
        if not (isinstance(data, dict) and isinstance(data.get("recipe_version"), str)
                and isinstance(data.get("code"), str)
                and (data.get("image") is None or isinstance(data["image"], str))
                and (data.get("packages") is None or isinstance(data["packages"], str))):
            raise ValueError(f"implementation must be an object with recipe_version, code, image and optional "
                             f"packages, got {data!r:.80}")
        if cls is not Implementation:
            return cls(data["recipe_version"], data["code"], data["image"], data.get("packages"))
        return _implementation(data["recipe_version"], data["code"], data["image"], data.get("packages"))

    @classmethod
    def installed(cls, recipe_version: str, code: str, image: str | None, versions: Sequence[str]) -> Implementation:
        """The implementation of a recipe whose numbers depend on these installed ``name==version``
        (``pinbench.core.provenance.installed_versions`` of its ``numerics:``), digested into ``packages``."""
        versions = tuple(sorted(versions))
        return cls(recipe_version, code, image, _packages_digest(versions), versions)

    def change_from(self, other: Implementation | None) -> str | None:
        """Why a record computed by ``other`` is not this one's (``"code changed"``, ...), or None when it is.

        A record without an implementation (written before reuse keys, by 87e8f14) is judged by its input hash
        alone, so that run directories of that layout still resume."""
        if other is None:
            return None
        if other.recipe_version != self.recipe_version:
            return "recipe version changed"
        if other.code != self.code:
            return "code changed"
        if other.image != self.image:
            return "image changed"
        if other.packages != self.packages:
            if other.packages is None:
                return "installed packages not recorded (a record from before they were)"
            return f"installed packages changed{self._versions_change(other.packages)}"
        return None

    def _versions_change(self, packages: str) -> str:
        """`` (numpy 1.26.4 -> 2.0.0)``, each distribution whose version changed, when ``earlier`` are the versions
        digested into ``packages``; else `` (now numpy==2.0.0, ...)``, the versions of this run alone."""
        if not self.versions:
            return ""
        if not self.earlier or _packages_digest(self.earlier) != packages:
            return f" (now {', '.join(self.versions)})"
        before = dict(line.partition("==")[::2] for line in self.earlier)
        return " (" + ", ".join(f"{name} {before.get(name)} -> {version}" for name, _, version in
                                (line.partition("==") for line in self.versions) if before.get(name) != version) + ")"


def _packages_digest(versions: Sequence[str]) -> str:
    """``Implementation.packages`` of these sorted ``name==version``."""
    return hashlib.sha256("\n".join(versions).encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=64)
def _implementation(recipe_version: str, code: str, image: str | None, packages: str | None) -> Implementation:
    """One (frozen) object per implementation: every record of a run names the same one, and reading a samples file
    of 11,222 records built 11,222 equal copies."""
    return Implementation(recipe_version, code, image, packages)


@dataclass
class RunConfig:
    """Everything a recipe run depends on; recorded in the scorecard's ``config``.

    ``options`` holds the recipe's typed option values, one attribute per declared option (parsed from
    ``-o``, the environment and defaults by ``Recipe.config``); ``option_sources`` says where each came from.
    """

    recipe: str
    checkpoint: str
    out_dir: Path
    limit: int | None = None
    shard: Shard | None = None
    runtime: str = "local"
    skip_generation: bool = False
    skip_scoring: bool = False
    fixture: bool = False
    gpus: int = 1
    offline: bool = False
    verify_inputs: bool = False  # hash every input file again instead of trusting the run's digest cache
    options: OptionValues = field(default_factory=OptionValues)
    option_sources: dict[str, str] = field(default_factory=dict)
    implementation: Implementation | None = None
    inputs: dict[str, dict[str, str]] = field(default_factory=dict)  # the run directory's input identity
    generator: str | None = None   # --generator: what makes the rollouts (None: they are given, -o videos=)
    generator_options: dict[str, str] = field(default_factory=dict)   # -g KEY=VALUE
    generation_timeout_s: float | None = None   # per request (None: pinbench.ops.generation's default)

    @property
    def mode(self) -> str:
        """``fixture`` for CPU fixture runs, ``smoke`` for ``--limit`` runs, else ``full``."""
        if self.fixture:
            return "fixture"
        return "smoke" if self.limit is not None else "full"

    def to_json(self) -> dict[str, Any]:

        return {
            "recipe": self.recipe, "checkpoint": self.checkpoint, "out_dir": str(self.out_dir),
            "limit": self.limit, "shard": str(self.shard) if self.shard else None, "runtime": self.runtime,
            "skip_generation": self.skip_generation, "skip_scoring": self.skip_scoring, "fixture": self.fixture,
            "gpus": self.gpus, "offline": self.offline, "verify_inputs": self.verify_inputs, "mode": self.mode,
            "options": self.options.to_json(), "option_sources": dict(self.option_sources),
            "implementation": self.implementation.to_json() if self.implementation else None,
            "generator": self.generator, "generator_options": dict(self.generator_options),
            "generation_timeout_s": self.generation_timeout_s,
        }


# the recipe and the arguments of the fetch that a run's messages name (``pinbench.ops.network.fetching_as``)
_FETCHING: ContextVar[tuple[str, str]] = ContextVar("fetching", default=("", ""))


def fetch_context() -> tuple[str, str]:
    """The recipe and ``pinbench fetch`` arguments of the run under way (``pinbench.ops.network.fetching_as``):
    what a spawned worker process, which starts without them, is handed to name the same fetch (``fetching_with``)."""
    return _FETCHING.get()


@contextmanager
def fetching_with(context: tuple[str, str]) -> Iterator[None]:
    """Within it, every way on names the fetch ``context`` says (``fetch_context``, taken in another process)."""
    token = _FETCHING.set(context)
    try:
        yield
    finally:
        _FETCHING.reset(token)


def checkpoint_noted(cfg: RunConfig, said: str | None) -> bool:
    """Whether this run is not the one to say the checkpoint's typo note, given ``CHECKPOINT_NOTED_ENV``'s value
    ``said``: a fixture's name is no typo, and a submission or the docker runtime's host says it once for all."""
    return cfg.fixture or said == "1" or (said == CHECKPOINT_NOTED_BUT_SHARD_0 and cfg.shard is not None
                                          and cfg.shard.index != 0)
