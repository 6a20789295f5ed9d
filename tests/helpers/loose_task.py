"""Test double of a recipe's task: any named fields, read by key as the engine's tests were written to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pinbench.core.task import Task


@dataclass(frozen=True, slots=True, init=False)
class LooseTask(Task):
    """A task of the engine's tests (tests only: a recipe declares its fields). ``LooseTask("s1", x=1)``; the input
    hash covers every field given, as a recipe's task's covers its fields."""

    fields: dict[str, Any]

    def __init__(self, sample_id: str, **fields: Any) -> None:
        object.__setattr__(self, "sample_id", sample_id)
        object.__setattr__(self, "fields", fields)

    def to_json(self) -> dict[str, Any]:
        return {"sample_id": self.sample_id, **self.fields}

    def __getitem__(self, key: str) -> Any:
        return self.to_json()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.to_json().get(key, default)


def loose(*rows: dict[str, Any]) -> list[LooseTask]:
    """Tasks of rows written as mappings with a "sample_id"."""
    return [LooseTask(**row) for row in rows]
