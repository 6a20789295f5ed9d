"""A sample's task: what a recipe hands the engine for one sample, typed per recipe."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

__all__ = ["Task"]


@dataclass(frozen=True, slots=True)
class Task:
    """One sample's work. A recipe subclasses it (frozen, slots) with the fields its result depends on, each plain
    JSON or a path: the input hash covers them all (``to_json``), so an edited field scores the sample again, and a
    field that cannot change a result does not belong here. A field that is None is absent: not hashed."""

    sample_id: str
    _names: ClassVar[dict[type, tuple[str, ...]]] = {}

    def to_json(self) -> dict[str, Any]:
        """The fields that are not None, by name: what ``pinbench.core.runner.input_hash`` hashes."""
        kind = type(self)
        names = Task._names.get(kind)
        if names is None:
            names = Task._names[kind] = tuple(f.name for f in fields(kind))
        return {name: value for name in names if (value := getattr(self, name)) is not None}
