"""The typed codec: a block's JSON form read from its dataclass, and the scorecard schema stating the same shapes."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

import pytest

from pinbench.core.jsonfields import COUNT, TEXT, JsonBlock, decode, encode, one_of, spec
from pinbench.core.metricinfo import MemberStatistic
from pinbench.core.schema import SCHEMA_DIR
from pinbench.core.scorecard import Degenerate, DerivedCounts, Failure, MetricResult, SampleCounts, Scorecard
from pinbench.core.store import LogPin
from pinbench.core.uncertainty import Interval


# Test doubles: small blocks holding every kind of field the codec reads from a type.
@dataclasses.dataclass(frozen=True)
class Part(JsonBlock, where="part"):
    name: str = spec(TEXT)
    size: int = spec(COUNT)

    def __post_init__(self) -> None:
        if self.name == "forbidden":
            raise ValueError("the name 'forbidden' is refused")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Toy(JsonBlock, where="toy"):
    title: str
    weight: float | None
    flag: bool
    colour: str = spec(one_of("red", "blue"))
    parts: tuple[Part, ...]
    tags: tuple[str, ...] = ()
    by_name: Mapping[str, Part]
    counts: Mapping[str, tuple[int, ...]] | None = None
    free: Mapping[str, Any]
    note: str | None = None
    main: Part | None = None


def toy(**changes: Any) -> Toy:
    return dataclasses.replace(Toy(title="t", weight=0.5, flag=True, colour="red", parts=(Part("a", 1), Part("b", 2)),
                                   by_name={"x": Part("x", 3)}, free={"any": [1, {"k": None}]}), **changes)


def test_a_block_round_trips_in_its_field_order_and_its_defaults_are_left_out() -> None:
    full = toy(tags=("p", "q"), counts={"c": (1, 2)}, note="n", main=Part("m", 0), weight=None)
    data = full.to_json()
    assert list(data) == ["title", "weight", "flag", "colour", "parts", "tags", "by_name", "counts", "free", "note",
                          "main"]
    assert data["weight"] is None and data["parts"] == [{"name": "a", "size": 1}, {"name": "b", "size": 2}]
    assert data["counts"] == {"c": [1, 2]} and data["by_name"] == {"x": {"name": "x", "size": 3}}
    assert Toy.from_json(json.loads(json.dumps(data))) == full
    bare = toy().to_json()
    assert list(bare) == ["title", "weight", "flag", "colour", "parts", "by_name", "free"]   # None and () left out
    assert decode(Toy, bare, "toy") == toy() and encode(toy()) == bare


@pytest.mark.parametrize("change, message", [
    (lambda d: [1], "toy: a JSON array, expected an object"),
    (lambda d: {**d, "extra": 1}, "toy: unknown field 'extra'"),
    (lambda d: {k: v for k, v in d.items() if k != "flag"}, "toy: lacks 'flag'"),
    (lambda d: {**d, "flag": 1}, "toy.flag must be true or false, got 1"),
    (lambda d: {**d, "title": 3}, "toy.title must be a string, got 3"),
    (lambda d: {**d, "weight": "0.5"}, "toy.weight must be a number or null, got '0.5'"),
    (lambda d: {**d, "weight": math.nan}, "toy.weight must be a number or null, got nan"),
    (lambda d: {**d, "weight": math.inf}, "toy.weight must be a number or null, got inf"),
    (lambda d: {**d, "weight": True}, "toy.weight must be a number or null, got True"),
    (lambda d: {**d, "colour": "green"}, "toy.colour must be one of 'red', 'blue', got 'green'"),
    (lambda d: {**d, "note": None}, "toy.note must be a string, got None"),   # optional: absent, never null
    (lambda d: {**d, "main": None}, "toy.main must be an object, got None"),
    (lambda d: {**d, "tags": ["p", 2]}, "toy.tags must be a list of strings, got ['p', 2]"),
    (lambda d: {**d, "parts": {"a": 1}}, "toy.parts must be a list, got {'a': 1}"),
    (lambda d: {**d, "parts": [{"name": "a", "size": 1}, 7]}, "toy.parts[1] must be an object, got 7"),
    (lambda d: {**d, "parts": [{"name": "a", "size": -1}]}, "toy.parts[0].size must be a count (an integer >= 0)"),
    (lambda d: {**d, "parts": [{"name": "a"}]}, "toy.parts[0]: lacks 'size'"),
    (lambda d: {**d, "by_name": {"x": {"name": "", "size": 1}}}, "toy.by_name.x.name must be a non-empty string"),
    (lambda d: {**d, "by_name": {"x": []}}, "toy.by_name.x must be an object, got []"),
    (lambda d: {**d, "counts": {"c": [1, 2.5]}}, "toy.counts.c must be a list of integers, got [1, 2.5]"),
    (lambda d: {**d, "free": []}, "toy.free must be an object, got []"),
    (lambda d: {**d, "main": {"name": "forbidden", "size": 1}}, "toy.main: the name 'forbidden' is refused"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_decode_refuses_a_bad_object_in_one_line_naming_its_json_path(change: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        Toy.from_json(change(toy(note="n").to_json()))
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_a_free_form_object_is_kept_as_it_is_and_a_type_the_codec_cannot_read_is_refused_at_once() -> None:
    assert Toy.from_json(toy().to_json()).free == {"any": [1, {"k": None}]}

    @dataclasses.dataclass(frozen=True)
    class Odd(JsonBlock):
        when: complex

    with pytest.raises(TypeError, match="no JSON codec for"):
        Odd.from_json({"when": 1})


@dataclasses.dataclass(frozen=True)
class Tally(JsonBlock, where="tally"):   # test double: a block with values it computes (its version, a count)
    version: int = dataclasses.field(init=False, default=2)
    names: tuple[str, ...]
    n_names: int = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_names", len(self.names))


def test_a_value_the_block_computes_is_written_and_on_reading_must_be_what_it_computes() -> None:
    assert Tally(("a", "b")).to_json() == {"version": 2, "names": ["a", "b"], "n_names": 2}
    assert Tally.from_json({"version": 2, "names": ["a"], "n_names": 1}) == Tally(("a",))
    for data, message in [({"version": 1, "names": [], "n_names": 0}, "tally.version must be 2, got 1"),
                          ({"version": 2, "names": ["a"], "n_names": 2}, "tally.n_names must be 1, got 2"),
                          ({"version": 2, "names": ["a"], "n_names": True}, "tally.n_names must be an integer"),
                          ({"names": ["a"], "n_names": 1}, "tally: lacks 'version'")]:
        with pytest.raises(ValueError) as info:
            Tally.from_json(data)
        assert str(info.value).startswith(message)


# The scorecard schema and the dataclasses state the same shapes: a field added to one only turns this red.
SCHEMA = json.loads((SCHEMA_DIR / "scorecard.schema.json").read_text())
METRIC = SCHEMA["$defs"]["metric"]["properties"]
BLOCKS = [
    (Scorecard, SCHEMA), (SampleCounts, SCHEMA["properties"]["samples"]),
    (DerivedCounts, SCHEMA["properties"]["derived"]),
    (LogPin, SCHEMA["properties"]["store"]["additionalProperties"]["items"]), (MetricResult, SCHEMA["$defs"]["metric"]),
    (Failure, METRIC["failed"]["items"]), (Degenerate, METRIC["degenerate"]["items"]),
    (MemberStatistic, METRIC["from_members"]),
]


def _shape(cls: type) -> tuple[list[str], list[str]]:
    fields = dataclasses.fields(cls)
    return ([f.name for f in fields], [f.name for f in fields if f.default is dataclasses.MISSING
                                       and f.default_factory is dataclasses.MISSING])


@pytest.mark.parametrize("cls, schema", BLOCKS, ids=lambda x: getattr(x, "__name__", ""))
def test_each_scorecard_block_has_the_properties_and_the_required_ones_its_schema_names(cls: type,
                                                                                       schema: Any) -> None:
    names, required = _shape(cls)
    assert sorted(names) == sorted(schema["properties"]) and schema["additionalProperties"] is False
    assert sorted(required) == sorted(schema["required"])


def test_an_interval_has_the_fields_of_both_schema_variants_and_a_difference_s_paired() -> None:
    variants = SCHEMA["$defs"]["interval"]["oneOf"]
    names, required = _shape(Interval)
    assert sorted(names) == sorted({p for v in variants for p in v["properties"]} | {"paired"})
    assert all(set(required) <= set(v["required"]) for v in variants) and required == ["low", "high", "level"]
