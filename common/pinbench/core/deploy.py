"""How a recipe is deployed, as its recipe.yaml declares it: container stages (``--runtime docker``) and cluster
phases (``pinbench submit``). Declaration data the core reads; the engines that act on it live in ``pinbench.ops``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ContainerStage:
    """One step of a ``--runtime docker`` run: which image runs which ``pinbench`` command.

    ``needs_token`` stages get ``HF_TOKEN`` (fetching gated weights); every other stage runs without it,
    and ``network=False`` stages run with ``--network none``, so everything they read was fetched before.
    ``image``: one named at run time (``--generator-image``) instead of the image built from ``dockerfile``.
    """

    name: str
    dockerfile: str = "Dockerfile"
    argv: tuple[str, ...] = ("run",)
    network: bool = False
    needs_token: bool = False
    gpus: bool = True
    image: str | None = None


DEFAULT_STAGES = (
    ContainerStage("fetch", argv=("fetch",), network=True, needs_token=True, gpus=False),
    ContainerStage("run", argv=("run",)),
)


@dataclass(frozen=True)
class ScaleOutPhase:
    """One step of a cluster run (``pinbench submit``): a job array of N shards, or one job over everything.

    ``flags`` are this phase's ``pinbench run`` flags; ``stage`` names the ``stages`` entry whose image,
    network and token policy it uses in a container (None: the recipe's last ``run`` stage); ``gpus``
    says whether it asks the cluster for ``--gpus-per-task`` GPUs.
    """

    name: str
    sharded: bool = False
    flags: tuple[str, ...] = ()
    stage: str | None = None
    gpus: bool = False


# Each array task scores its shard; one job after the array merges the records (no scoring) and writes
# the scorecard, diff and report.
DEFAULT_SCALE_OUT = (
    ScaleOutPhase("shards", sharded=True, gpus=True),
    ScaleOutPhase("finish", flags=("--skip-scoring",)),
)
