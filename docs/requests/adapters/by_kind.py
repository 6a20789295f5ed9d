"""One generator made of several, each request to the one given for its kind: a run that asks several kinds (the
RememBench fixture: T2V and I2V) with a model for each, or a model and a baseline for the kinds it lacks.

    --generator python:by_kind:make -g prompt_schedule=python:prompt_schedule:make -g image_camera=static

Each option is a kind (its dash written _) and its part, named as --generator names a Python generator
(python:MODULE:FACTORY, or a shipped or registered name). A request its part cannot honour beyond its kind (a
prompt schedule, a conditioning role, a length) fails as a named sample, not refused before the run generates."""

from __future__ import annotations

from pathlib import Path

from pinbench.core.generation import Capabilities, Generator, Request, Signature
from pinbench.ops.generation import build, factory_path, source_sha256, with_source


class ByKind:
    def __init__(self, parts: dict[str, Generator]) -> None:
        self.parts = dict(sorted(parts.items()))
        self.capabilities = Capabilities(
            kinds=frozenset(parts), prompt_schedule=any(p.capabilities.prompt_schedule for p in parts.values()),
            conditioning=frozenset().union(*(p.capabilities.conditioning for p in parts.values())))

    def signature(self) -> Signature:   # every part's, with its module file's SHA-256: a changed part regenerates
        signatures = {k: with_source(p.signature(), source_sha256(p.__module__, p)) for k, p in self.parts.items()}
        return Signature(model=" + ".join(s.model for s in signatures.values()), weights="by kind",
                         settings={kind: s.to_json() for kind, s in signatures.items()})

    def generate(self, request: Request, out: Path) -> None:
        part = self.parts[request.kind]
        refusal = part.capabilities.refusal(request)
        if refusal:
            raise ValueError(refusal)
        part.generate(request, out)


def make(**parts: str) -> ByKind:
    return ByKind({kind.replace("_", "-"): build(factory_path(target, None), {}) for kind, target in parts.items()})
