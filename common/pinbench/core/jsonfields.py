"""The fields of a JSON object a typed block (a scorecard, a metric entry, an interval) is built from, checked.

Why one helper: each block's ``from_json`` refuses what it cannot represent with the same one-line error, naming
the block (``metrics.f1.interval``) and the field, so that ``to_json(from_json(x)) == x`` for every block it takes:
no unknown field is dropped, and an optional field is either absent or of its kind (never null in its place).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeAlias

Kind = tuple[Callable[[Any], bool], str]  # (check, what the field must be, in words)
Json: TypeAlias = "None | bool | int | float | str | Sequence[Json] | Mapping[str, Json]"
JsonObject: TypeAlias = "Mapping[str, Json]"   # a section a recipe writes into its scorecard as it is

STRING: Kind = (lambda v: isinstance(v, str), "a string")
TEXT: Kind = (lambda v: isinstance(v, str) and v != "", "a non-empty string")
NUMBER: Kind = (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number")
COUNT: Kind = (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a count (an integer >= 0)")
BOOLEAN: Kind = (lambda v: isinstance(v, bool), "true or false")
OBJECT: Kind = (lambda v: isinstance(v, dict), "an object")
STRINGS: Kind = (lambda v: isinstance(v, list) and all(isinstance(i, str) for i in v), "a list of strings")
LIST: Kind = (lambda v: isinstance(v, list), "a list")


def nullable(kind: Kind) -> Kind:
    check, what = kind
    return (lambda v: v is None or check(v)), f"{what} or null"


def one_of(*values: str) -> Kind:
    return (lambda v: isinstance(v, str) and v in values), "one of " + ", ".join(repr(v) for v in values)


def checked_fields(data: Any, where: str, fields: Mapping[str, Kind], optional: Collection[str] = ()
                   ) -> Mapping[str, Any]:
    """``data`` once it is an object whose every field is one of ``fields`` and of its kind, every field not in
    ``optional`` present; ValueError (one line, naming ``where`` and the field) otherwise."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: a JSON {_json_type(data)}, expected an object")
    unknown = [key for key in data if key not in fields]
    if unknown:
        raise ValueError(f"{where}: unknown field {str(unknown[0])!r}")
    for key, (check, what) in fields.items():
        if key not in data:
            if key in optional:
                continue
            raise ValueError(f"{where}: lacks {key!r}")
        if not check(data[key]):
            raise ValueError(f"{where}.{key} must be {what}, got {_short(data[key])}")
    return data


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _short(value: Any, limit: int = 80) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
