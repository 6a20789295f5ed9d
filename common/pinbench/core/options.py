"""Recipe options as data: one declaration per option in ``recipe.yaml``, one parser for every recipe.

Why: each recipe used to hand-write its parsing, so a typo in ``-o`` could be ignored, a variable could go
unforwarded to a container, and the README tables drifted from the code. Here an option is declared once
(name, type, default, environment variable, allowed values, help) and the same declaration drives the
parser, ``pinbench run <recipe> --help``, the README tables and what ``--runtime docker`` forwards.

Precedence: ``-o key=value`` on the command line, else the declared environment variable, else the
default (``fixture_default`` in fixture mode, when declared). Every problem is one line naming the option.
Recipes read the typed values as attributes (``cfg.options.decoder``, :class:`OptionValues`); what a value must
look like beyond its type (a ``pattern``, an ``all`` alias, bounds, choices) is declared too, so no recipe
checks its options a second time.
An option a ``--fixture`` run does not use (``fixture: false``: the fixture makes its own data) is refused
there when it is set, on the command line or in the environment, never silently ignored; left unset, its source
is ``NOT_APPLIED`` and the run's input identity leaves it out (a RememBench fixture, which scores both splits,
recorded ``split: t2v``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import ItemsView, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TYPES = ("str", "int", "float", "bool", "path", "choice", "list")
REQUIRED = "required"  # the one word `run --help`, `list -v` and the README tables mark a required option with
CPU_COUNT = "cpu_count"  # the default of an int option that is the number of CPUs of the machine that runs it
ALL = "all"  # with ``all_alias: true``, the one word a list option's value may be to choose every choice
NOT_APPLIED = "not applied (--fixture)"  # the source of an option the fixture does not use: its default, unread there
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class OptionError(ValueError):
    """A bad option: unknown key, bad value, or a required option missing (one line)."""


def finite_at_least_zero(text: str) -> float | None:
    """``text`` as a finite number of 0 or more, else None: ``float`` reads ``inf``, ``nan`` and ``-1`` as well, and
    a bound, a wait or a scale is none of them."""
    try:
        number = float(text)
    except ValueError:
        return None
    return number + 0.0 if math.isfinite(number) and number >= 0 else None   # -0.0 + 0.0 is 0.0


def boolean(raw: Any, where: str) -> bool:
    """``raw`` as a boolean word (1/0, true/false, yes/no, on/off, any case); OptionError naming ``where`` else: a
    check for the false words alone read ``False`` or ``off`` as true."""
    word = str(raw).strip().lower()
    if word not in _TRUE + _FALSE:
        raise OptionError(f"{where}: {raw!r} is not a boolean (1/0, true/false, yes/no, on/off)")
    return word in _TRUE


def expand_user(value: str, where: str) -> Path:
    """``value`` as a path, ``~`` and ``~user`` expanded; OptionError naming ``where`` when there is no such home
    folder (``Path.expanduser`` said only "Could not determine home directory.", naming neither option nor path)."""
    try:
        return Path(value).expanduser()
    except RuntimeError:
        raise OptionError(f"{where}: {value!r}: {value.split('/')[0]} names no home folder on this machine") from None


@dataclass(frozen=True)
class OptionSpec:
    """One recipe option as declared in ``recipe.yaml``."""

    name: str
    type: str = "str"
    help: str = ""
    default: Any = None
    env: str | None = None
    choices: tuple[str, ...] | None = None
    required: bool = False
    fixture_default: Any = None
    fixture: bool = True
    minimum: float | None = None
    maximum: float | None = None
    required_unless: str | None = None  # required unless this other option is given
    instead_of: tuple[str, ...] = ()  # pins ("urls/name") whose download a local copy given here replaces
    affects_results: bool = True  # false: a device, a batch size, a verified copy of a pinned file
    affects_results_if: str | None = None  # a bool option: this one can change a result only when that one is true
    pattern: str | None = None  # a str option's value must match this regular expression as a whole
    all_alias: bool = False  # a list option with choices: the value ``all`` chooses every choice, in their order
    rollouts: bool = False  # the folder of rollouts to score: a generating run (--generator) makes them instead
    # a list option's choices a generating run cannot score, each with why: refused before the recipe's code is
    # imported or its data built (a refusal from the requests came after 8 s of both)
    not_generated: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise OptionError(f"option {self.name}: unknown type {self.type!r}; expected one of {', '.join(TYPES)}")
        if self.type == "choice" and not self.choices:
            raise OptionError(f"option {self.name}: type choice needs choices")
        if self.choices is not None:
            object.__setattr__(self, "choices", tuple(str(c) for c in self.choices))
        if self.pattern is not None:
            if self.type != "str":
                raise OptionError(f"option {self.name}: pattern applies to type str, not {self.type}")
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise OptionError(f"option {self.name}: pattern {self.pattern!r} is not a regular expression: "
                                  f"{exc}") from None
        if self.not_generated and not (self.type == "list" and set(self.not_generated) <= set(self.choices or ())):
            raise OptionError(f"option {self.name}: not_generated names choices of a list option")
        if self.all_alias and not (self.type == "list" and self.choices):
            raise OptionError(f"option {self.name}: all_alias applies to a list with choices")
        if self.default == CPU_COUNT and self.type != "int":
            raise OptionError(f"option {self.name}: default {CPU_COUNT} applies to type int, not {self.type}")
        if self.default is not None and self.default != CPU_COUNT:
            self.convert(self.default, f"default of option {self.name}")
        if self.fixture_default is not None:
            self.convert(self.fixture_default, f"fixture_default of option {self.name}")

    @classmethod
    def from_dict(cls, name: str, data: Mapping[str, Any]) -> OptionSpec:
        return cls(name=name, **{k: (tuple(v) if k in ("choices", "instead_of") else v) for k, v in data.items()})

    def default_value(self) -> Any:
        """The typed default (``cpu_count``: ``os.cpu_count()`` of this machine), or None when there is none."""
        if self.default is None:
            return None
        return self.convert(os.cpu_count() or 1 if self.default == CPU_COUNT else self.default,
                            f"default of option {self.name}")

    def convert(self, raw: Any, where: str) -> Any:
        """The typed value of ``raw`` (a string from the command line or environment, or a YAML value)."""
        text = raw if isinstance(raw, str) else None
        if self.type == "list":
            items = ([s.strip() for s in text.split(",")] if text is not None else [str(v) for v in raw])
            items = [s for s in items if s]
            if not items:
                raise OptionError(f"{where}: empty list")
            if self.all_alias and items == [ALL]:
                return self.choices
            bad = [s for s in items if self.choices and s not in self.choices]
            if bad:
                alias = f" or {ALL!r}" if self.all_alias else ""
                raise OptionError(f"{where}: {', '.join(map(repr, bad))} not in {', '.join(self.choices)}{alias}")
            return tuple(dict.fromkeys(items))
        if self.type == "bool":
            return raw if isinstance(raw, bool) else boolean(raw, where)
        if self.type in ("int", "float"):
            return self._number(raw, where)
        value = str(raw).strip() if text is not None else str(raw)
        if not value:
            raise OptionError(f"{where}: empty value")
        if self.choices and value not in self.choices:
            raise OptionError(f"{where}: {value!r} is not one of {', '.join(self.choices)}"
                              f"{did_you_mean(value, self.choices)}")
        if self.pattern is not None and not re.fullmatch(self.pattern, value):
            raise OptionError(f"{where}: {value!r} does not match {self.pattern} ({self.help})")
        if self.type == "path":
            return expand_user(value, where)
        return value

    def _number(self, raw: Any, where: str) -> int | float:
        if isinstance(raw, bool):
            raise OptionError(f"{where}: {raw!r} is not a number")
        try:
            value: int | float = int(str(raw).strip()) if self.type == "int" else float(str(raw).strip())
        except ValueError:
            raise OptionError(f"{where}: {raw!r} is not {'an integer' if self.type == 'int' else 'a number'}") \
                from None
        if not math.isfinite(value):
            raise OptionError(f"{where}: {raw!r} is not finite")
        if self.minimum is not None and value < self.minimum:
            raise OptionError(f"{where}: {value} is below the minimum {self.minimum:g}")
        if self.maximum is not None and value > self.maximum:
            raise OptionError(f"{where}: {value} is above the maximum {self.maximum:g}")
        return value

    def format(self, value: Any) -> str:
        """The command-line text that ``convert`` turns back into ``value`` (``-o name=<text>``)."""
        if self.type == "list":
            return ",".join(value)
        if self.type == "bool":
            return "1" if value else "0"
        return str(value)

    def describe_type(self, sep: str = ", ", quote: str = "") -> str:
        """The type as ``run --help`` and the README tables show it, with its choices (and ``all`` when it is an
        alias) or the pattern it must match (between ``quote``s)."""
        if self.choices:
            return f"{self.type}: {sep.join([*self.choices, *([ALL] if self.all_alias else [])])}"
        if self.pattern is not None:
            return f"{self.type} matching {quote}{self.pattern}{quote}"
        return self.type

    def describe_default(self) -> str:
        def show(value: Any) -> str:
            return ",".join(value) if isinstance(value, list) else str(value).lower() if isinstance(value, bool) \
                else str(value)

        if self.required:
            text = REQUIRED
        elif self.required_unless:
            text = f"{REQUIRED} unless -o {self.required_unless} is given"
        else:
            text = "-" if self.default is None else show(self.default)
        if self.fixture_default is not None:
            text += f" (--fixture: {show(self.fixture_default)})"
        if not self.fixture:
            text += " (not used by --fixture)"
        return text


class OptionValues:
    """One run's typed option values, one read-only attribute per declared option (``cfg.options.decoder``).

    Each value has its declaration's type: ``Path`` (path), ``int``, ``float``, ``bool``, ``str`` (str,
    choice), a tuple of ``str`` (list), or None for an option without a value. Recipes read these attributes;
    the core's generic code (forwarding to a container or a job, the scorecard) walks :meth:`items`.
    """

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        object.__setattr__(self, "_values", dict(values or {}))

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            declared = ", ".join(self._values) or "none"
            raise AttributeError(f"no option {name!r} is declared (declared: {declared})") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"option values are read-only (set -o {name}=... instead)")

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OptionValues) and self._values == other._values

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"OptionValues({', '.join(f'{k}={v!r}' for k, v in self._values.items())})"

    def items(self) -> ItemsView[str, Any]:
        return self._values.items()

    def to_json(self) -> dict[str, Any]:
        """Plain JSON: paths as text, tuples as lists (the scorecard's ``config.options``)."""
        return {name: (str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v)
                for name, v in self._values.items()}


@dataclass(frozen=True)
class ParsedOptions:
    """Typed option values and where each came from (``cli``, ``env``, ``default`` or ``fixture_default``)."""

    values: OptionValues
    sources: dict[str, str] = field(default_factory=dict)


def closest(name: str, known: Sequence[str]) -> str | None:
    """The closest of ``known`` to ``name`` (difflib), or None when none is close."""
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return close[0] if close else None


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``known``, or ``""`` when none is close."""
    return f" (did you mean {match!r}?)" if (match := closest(name, known)) else ""


def parse_options(specs: Mapping[str, OptionSpec], given: Mapping[str, str], env: Mapping[str, str], *,
                  recipe: str, fixture: bool = False, check_required: bool = True,
                  generating: bool = False) -> ParsedOptions:
    """Validate ``-o`` values against the declarations; fall back to the environment, then defaults.

    ``check_required=False`` (``pinbench fetch``): a run's required inputs are not needed to fetch its pins.
    ``generating``: the run scores its generation step's rollouts (``--generator`` makes them, or an earlier run
    stored them: ``--skip-generation``), so the option naming them is neither needed nor allowed."""
    for name, spec in specs.items():
        if generating and spec.rollouts and name in given:
            raise OptionError(f"-o {name}: this run scores the rollouts of its generation step (--generator, or "
                              "--skip-generation: what one stored); drop one of them")
    unknown = sorted(set(given) - set(specs))
    if unknown:
        known = ", ".join(specs) or "none"
        named = ", ".join(name + did_you_mean(name, list(specs)) for name in unknown)
        raise OptionError(f"unknown option(s) {named} for {recipe}; known: {known}")
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, spec in specs.items():
        if fixture and not spec.fixture:
            _refuse_in_fixture(recipe, spec, given, env)
            values[name], sources[name] = spec.default_value(), NOT_APPLIED
        elif name in given:
            values[name], sources[name] = spec.convert(given[name], f"-o {name}"), "cli"
        elif spec.env and env.get(spec.env, "").strip():
            values[name], sources[name] = spec.convert(env[spec.env], f"${spec.env} (option {name})"), "env"
        elif fixture and spec.fixture_default is not None:
            values[name] = spec.convert(spec.fixture_default, f"fixture_default of option {name}")
            sources[name] = "fixture_default"
        elif spec.required and not fixture and check_required and not (generating and spec.rollouts):
            via = f"-o {name}=..." + (f" or ${spec.env}" if spec.env else "")
            raise OptionError(f"{recipe}: option {name} is {REQUIRED} ({via}): {spec.help}")
        else:
            values[name], sources[name] = spec.default_value(), "default"
    for name, spec in specs.items():
        other = spec.required_unless
        if other and check_required and not fixture and values[name] is None and values.get(other) is None \
                and not (generating and spec.rollouts):
            via = f"-o {name}=..." + (f" or ${spec.env}" if spec.env else "")
            raise OptionError(f"{recipe}: option {name} is {REQUIRED} unless -o {other} is given ({via}): {spec.help}")
        refused = [c for c in values[name] or () if c in spec.not_generated] if generating and spec.not_generated \
            else []
        if refused:
            kept = [c for c in values[name] if c not in refused]
            raise OptionError(f"{recipe}: a generating run cannot score {refused[0]}: "
                              f"{spec.not_generated[refused[0]]}; drop {refused[0]} from -o {name}"
                              + (f": -o {name}={','.join(kept)}" if kept else ""))
    return ParsedOptions(values=OptionValues(values), sources=sources)


def _refuse_in_fixture(recipe: str, spec: OptionSpec, given: Mapping[str, str], env: Mapping[str, str]) -> None:
    """OptionError when an option the fixture does not use is set (it would be ignored, silently)."""
    if spec.name in given:
        where = f"-o {spec.name}"
    elif spec.env and env.get(spec.env, "").strip():
        where = f"${spec.env} (option {spec.name})"
    else:
        return
    raise OptionError(f"{where} does not apply to {recipe} --fixture runs (fixture: false in its recipe.yaml; "
                      f"the fixture brings its own data): {'drop it' if spec.name in given else 'unset it'}")


def parse_pairs(items: Sequence[str], flag: str = "-o") -> dict[str, str]:
    """``["a=1", "b=x=y"]`` -> ``{"a": "1", "b": "x=y"}``; a repeated key or a missing ``=`` is an error naming
    ``flag``, the option that gave them (a repeated ``-g`` was said to be a repeated ``-o``)."""
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise OptionError(f"{flag} {item!r} is not KEY=VALUE")
        if key in pairs:
            raise OptionError(f"{flag} {key} given twice ({flag} {key}={pairs[key]} and {flag} {item})")
        pairs[key] = value
    return pairs


# ------------------------------------------------------------------------------------- offline

OFFLINE_VARS = ("PINBENCH_OFFLINE", "HF_HUB_OFFLINE")


def offline_in(environ: Mapping[str, str]) -> bool:
    """PINBENCH_OFFLINE=1 or HF_HUB_OFFLINE=1 (also accepts true/yes/on) in ``environ``: the one reading of
    both variables, for this process and for a run configured from another environment. OptionError naming the
    variable for a value that is no boolean word: ``2`` or ``enabled`` was read as online, and downloaded."""
    offline = False
    for var in OFFLINE_VARS:
        word = environ.get(var, "").strip().lower()
        if word and word not in _TRUE + _FALSE:
            raise OptionError(f"${var}={environ[var]!r} is not a boolean (1/0, true/false, yes/no, on/off)")
        offline = offline or word in _TRUE
    return offline


def is_offline() -> bool:
    """This process is offline (:func:`offline_in` of ``os.environ``)."""
    return offline_in(os.environ)
