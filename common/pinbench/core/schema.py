"""The package's JSON Schemas (``schemas/*.schema.json``, draft-07) and one-line reports of what violates them.

fastjsonschema compiles each schema once into a Python function. It was chosen over ``jsonschema`` for
start-up time: importing jsonschema took 165 ms of the 0.5 s budget of ``pinbench list`` (measured with
``python -X importtime``), fastjsonschema 30 ms plus about 40 ms to compile the recipe schema.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"


@lru_cache(maxsize=8)
def validator(name: str) -> Callable[[Any], Any]:
    """The compiled validator of ``schemas/<name>.schema.json``."""
    import fastjsonschema

    schema = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))
    return fastjsonschema.compile(schema)


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def schema_error(name: str, instance: Any) -> str | None:
    """The first violation of schema ``name`` as one line with its JSON path, or None when valid."""
    import fastjsonschema

    try:
        validator(name)(instance)
    except fastjsonschema.JsonSchemaValueException as exc:
        name = exc.name or "data"
        path = "$" + name.removeprefix("data")
        message = exc.message.removeprefix(name).strip()
        return f"schema violation at {path}: {_one_line(message)}"
    return None
