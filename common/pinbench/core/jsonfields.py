"""The JSON form of a typed block (a scorecard, a metric entry, an interval), stated once: by its dataclass.

``encode`` and ``decode`` read a block's shape from its dataclass: each field's type annotation (str, int, float,
bool, ``X | None``, ``tuple[X, ...]``, ``Mapping[str, X]``, a nested block, ``Mapping[str, Any]`` for a free-form
object) and, where a type cannot say it, the field's ``spec(kind)`` (a value set, a count, a non-empty text). A
field with a default is optional: absent from the JSON when it holds the default, never null in its place; a field
the constructor does not take (``init=False``: a format's version, a count of a list) is written, and read back
only when it equals what the object computes. Why one codec: every block refuses what it cannot represent with the
same one-line error naming the JSON path (``$.metrics.f1.interval.low``), and ``to_json(from_json(x)) == x``: no
unknown field is dropped, no null stands in for an absent field.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias, TypeVar

from pinbench.core.files import clipped

Kind = tuple[Callable[[Any], bool], str]  # (check, what the field must be, in words)
Json: TypeAlias = "None | bool | int | float | str | Sequence[Json] | Mapping[str, Json]"
JsonObject: TypeAlias = "Mapping[str, Json]"   # a section a recipe writes into its scorecard as it is

STRING: Kind = (lambda v: isinstance(v, str), "a string")
TEXT: Kind = (lambda v: isinstance(v, str) and v != "", "a non-empty string")
NUMBER: Kind = (lambda v: isinstance(v, float) and math.isfinite(v) or isinstance(v, int) and not isinstance(v, bool),
                "a number")   # a finite one: NaN and the infinities are not JSON
INTEGER: Kind = (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer")
COUNT: Kind = (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a count (an integer >= 0)")
BOOLEAN: Kind = (lambda v: isinstance(v, bool), "true or false")
OBJECT: Kind = (lambda v: isinstance(v, dict), "an object")
LIST: Kind = (lambda v: isinstance(v, list), "a list")


def nullable(kind: Kind) -> Kind:
    check, what = kind
    return (lambda v: v is None or check(v)), f"{what} or null"


def one_of(*values: str) -> Kind:
    return (lambda v: isinstance(v, str) and v in values), "one of " + ", ".join(repr(v) for v in values)


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _short(value: Any) -> str:
    return clipped(" ".join(repr(value).split()), 80)


# ------------------------------------------------------------------------------------------ the typed codec


class JsonBlock:
    """A frozen dataclass whose JSON form is ``encode``'s: ``to_json`` and ``from_json`` (naming ``where`` in its
    errors, by default the key the block sits under, given as ``class X(JsonBlock, where="interval")``)."""

    _where = "$"

    def __init_subclass__(cls, where: str = "$", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._where = where

    def to_json(self) -> dict[str, Any]:
        return encode(self)

    @classmethod
    def from_json(cls: type[T], data: Any, where: str | None = None) -> T:
        return decode(cls, data, cls._where if where is None else where)


def spec(kind: Kind | None = None, **options: Any) -> Any:
    """A dataclass field with what its type cannot say: ``kind`` (a value set, a count, a non-empty text) checks
    its JSON value in place of the type's own check; ``options`` are ``dataclasses.field``'s (``default``)."""
    return dataclasses.field(metadata={_KIND: kind}, **options)


def encode(obj: Any) -> dict[str, Any]:
    """The JSON object of a dataclass: its fields in their order, a field holding its default left out (unless
    the constructor does not take it: a value the object computes, such as its format's version)."""
    data: dict[str, Any] = {}
    for name, required, default, _, _, _, write, _ in _plan(type(obj)):
        value = getattr(obj, name)
        if required or not (value is default or value == default):
            data[name] = value if write is None else write(value)
    return data


def decode(cls: type[T], data: Any, where: str) -> T:
    """The ``cls`` of its JSON object (``encode``'s inverse); ValueError (one line naming the JSON path) when the
    object has a field ``cls`` lacks, lacks a required one, holds a value of the wrong kind, or one other than the
    object computes (a field the constructor does not take)."""
    plan = _plan(cls)
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: a JSON {_json_type(data)}, expected an object")
    unknown = [key for key in data if key not in _NAMES[cls]]
    if unknown:
        raise ValueError(f"{where}: unknown field {str(unknown[0])!r}")
    values = {}
    for name, required, _, check, what, read, _, given in plan:
        if name not in data:
            if required:
                raise ValueError(f"{where}: lacks {name!r}")
            continue
        value = data[name]
        if not check(value):
            raise ValueError(f"{where}.{name} must be {what}, got {_short(value)}")
        if given:
            values[name] = value if read is None or value is None else read(value, f"{where}.{name}")
    try:
        obj = cls(**values)
    except ValueError as exc:   # what the class itself refuses (__post_init__)
        raise ValueError(f"{where}: {exc}") from None
    for name, *_, given in plan:
        if not given and data[name] != getattr(obj, name):
            raise ValueError(f"{where}.{name} must be {getattr(obj, name)!r}, got {_short(data[name])}")
    return obj


T = TypeVar("T")
_KIND = "pinbench.json"
_PLANS: dict[type, list[tuple[Any, ...]]] = {}
_NAMES: dict[type, frozenset[str]] = {}
_SCALARS: dict[Any, tuple[Kind, str]] = {str: (STRING, "strings"), int: (INTEGER, "integers"),
                                         float: (NUMBER, "numbers"), bool: (BOOLEAN, "booleans")}
Read = Callable[[Any, str], Any]
Write = Callable[[Any], Any]


def _plan(cls: type) -> list[tuple[Any, ...]]:
    """Per field of ``cls``: (name, required, default, check, what, read, write, given to the constructor), made
    once per class."""
    plan = _PLANS.get(cls)
    if plan is None:
        hints = typing.get_type_hints(cls)
        plan = []
        for f in dataclasses.fields(cls):
            required = not f.init or f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            (check, what), read, write = _codec(hints[f.name], f.metadata.get(_KIND), nullable_ok=required)
            plan.append((f.name, required, f.default, check, what, read, write, f.init))
        _PLANS[cls], _NAMES[cls] = plan, frozenset(f.name for f in dataclasses.fields(cls))
    return plan


def _codec(tp: Any, kind: Kind | None, nullable_ok: bool = False) -> tuple[Kind, Read | None, Write | None]:
    """How a value of type ``tp`` is checked, read and written. ``X | None``: null only where the field is
    required (an optional field is absent, never null)."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        (inner,) = [a for a in args if a is not type(None)]
        (check, what), read, write = _codec(inner, kind)
        return (nullable((check, what)) if nullable_ok else (check, what)), read, \
            write and (lambda v: None if v is None else write(v))
    origin = typing.get_origin(tp) or tp
    if dataclasses.is_dataclass(tp):
        return kind or OBJECT, lambda v, where: decode(tp, v, where), encode
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        if args[0] in _SCALARS:
            (check, _), plural = _SCALARS[args[0]]
            return kind or (lambda v: isinstance(v, list) and all(check(i) for i in v), f"a list of {plural}"), \
                (lambda v, where: tuple(v)), list
        (check, what), read, write = _codec(args[0], None)
        return kind or LIST, _items(check, what, read), \
            (list if write is None else lambda v: [write(i) for i in v])
    if origin in (Mapping, dict) and args[0] is str:
        if args[1] is Any:
            return kind or OBJECT, None, None   # a free-form object, kept as it is
        (check, what), read, write = _codec(args[1], None)
        return kind or OBJECT, _values(check, what, read), \
            (dict if write is None else lambda v: {k: write(i) for k, i in v.items()})
    if tp in _SCALARS:
        return kind or _SCALARS[tp][0], None, None
    raise TypeError(f"no JSON codec for {tp!r}")


def _items(check: Callable[[Any], bool], what: str, read: Read | None) -> Read:
    def items(value: list[Any], where: str) -> tuple[Any, ...]:
        for i, item in enumerate(value):
            if not check(item):
                raise ValueError(f"{where}[{i}] must be {what}, got {_short(item)}")
        return tuple(value if read is None else (read(item, f"{where}[{i}]") for i, item in enumerate(value)))
    return items


def _values(check: Callable[[Any], bool], what: str, read: Read | None) -> Read:
    def values(value: Mapping[str, Any], where: str) -> dict[str, Any]:
        for key, item in value.items():
            if not check(item):
                raise ValueError(f"{where}.{key} must be {what}, got {_short(item)}")
        return dict(value) if read is None else {key: read(item, f"{where}.{key}") for key, item in value.items()}
    return values
