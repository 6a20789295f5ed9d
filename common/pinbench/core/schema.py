"""The package's JSON Schemas (``schemas/*.schema.json``, draft-07) and one-line reports of what violates them.

fastjsonschema compiles each schema once into a Python function. It was chosen over ``jsonschema`` for
start-up time: importing jsonschema took 165 ms of the 0.5 s budget of ``pinbench list`` (measured with
``python -X importtime``), fastjsonschema 30 ms plus about 40 ms to compile the recipe schema.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import os
import re
import sys
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from pinbench.core.files import cache_root, clipped

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"


@lru_cache(maxsize=8)
def validator(name: str) -> Callable[[Any], Any]:
    """The compiled validator of ``schemas/<name>.schema.json``.

    fastjsonschema writes the validator as Python source, which costs 40-70 ms a schema in every process; the
    compiled code is kept in ``<cache>/schemas/`` (keyed by the schema's bytes and the Python and fastjsonschema
    versions) and loaded from there afterwards. A cache that cannot be written is only slower."""
    import fastjsonschema

    text = (SCHEMA_DIR / f"{name}.schema.json").read_bytes()
    key = hashlib.sha256(b"\0".join([text, sys.version.encode(), fastjsonschema.VERSION.encode()])).hexdigest()
    cached = _cache_dir() / f"{name}-{key[:24]}.marshal"
    try:
        entry, code = marshal.loads(cached.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        source = fastjsonschema.compile_to_code(json.loads(text))
        entry = re.search(r"^def (\w+)\(", source, re.MULTILINE).group(1)  # the root scope comes first
        code = compile(source, f"<{name} schema validator>", "exec")
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
            tmp.write_bytes(marshal.dumps((entry, code)))
            os.replace(tmp, cached)
        except OSError:
            pass
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # noqa: S102 - code fastjsonschema generated from this package's own schema
    return namespace[entry]


def _cache_dir() -> Path:
    return cache_root() / "schemas"


def schema_error(name: str, instance: Any) -> str | None:
    """The first violation of schema ``name`` as one line with its JSON path, or None when valid."""
    import fastjsonschema

    try:
        validator(name)(instance)
    except fastjsonschema.JsonSchemaValueException as exc:
        name = exc.name or "data"
        path = "$" + name.removeprefix("data")
        message = " ".join(exc.message.removeprefix(name).split())
        return f"schema violation at {path}: {clipped(message, 200)}"
    return None
