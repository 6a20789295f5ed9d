"""What a metric means, declared once per recipe: direction, aggregation, kind, unit, default tolerances.

Why: direction and tolerance used to live only in reference files, so ``record-reference`` copied a
fixture's ±1e-9 onto a real run and a metric without a reference had no direction at all. Now the recipe
declares each metric (``recipe.yaml``), the scorecard copies what it needs, a reference file may only narrow
a declared tolerance, and a metric nobody declared is an error instead of a guess.

A scorecard metric name matches the longest declared name that equals it or ends it after a ``/``:
``i2v/rotation_180/clip`` matches ``clip``; ``edge/native/canny_f1_score`` matches ``native/canny_f1_score``
before ``canny_f1_score``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pinbench.core.jsonfields import TEXT, JsonBlock, one_of, spec

DIRECTIONS = ("higher", "lower")
TIERS = ("same_hw", "cross_hw")
KINDS = ("official", "derived", "cross_check", "preview")
AGGREGATIONS = ("mean", "median", "mean_then_median", "none")
MEMBER_STATISTICS = ("mean", "average_precision", "roc_auc")


@dataclass(frozen=True)
class Tolerance:
    """A two-sided bound around a reference value: absolute, or relative to |reference|."""

    abs: float | None = None
    rel: float | None = None

    def __post_init__(self) -> None:
        if (self.abs is None) == (self.rel is None):
            raise ValueError("a tolerance has exactly one of abs / rel")
        value = self.abs if self.abs is not None else self.rel
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"a tolerance must be a finite number, got {value!r}")
        if value < 0:
            raise ValueError(f"a tolerance must be >= 0, got {value!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Tolerance:
        unknown = set(data) - {"abs", "rel"}
        if unknown:
            raise ValueError(f"unknown tolerance key(s) {', '.join(sorted(unknown))}; use abs or rel")
        return cls(**{k: v for k, v in data.items()})

    @classmethod
    def parse(cls, text: str) -> Tolerance:
        """``abs:0.01`` or ``rel:0.05``."""
        kind, _, value = text.partition(":")
        if kind not in ("abs", "rel") or not value:
            raise ValueError(f"tolerance {text!r} is not abs:X or rel:X")
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"tolerance {text!r}: {value!r} is not a number") from None
        return cls(**{kind: number})

    def bound(self, reference: float) -> float:
        return self.abs if self.abs is not None else self.rel * abs(reference)

    def text(self, reference: float) -> str:
        if self.abs is not None:
            return f"±{self.abs:g}"
        return f"±{self.rel * 100:g}% (±{self.bound(reference):.3g})"

    def as_dict(self) -> dict[str, float]:
        return {"abs": self.abs} if self.abs is not None else {"rel": self.rel}


@dataclass(frozen=True)
class MemberStatistic(JsonBlock, where="from_members"):
    """How a derived value follows from its members' results (``from_members:`` of a metric declaration), so that
    ``pinbench compare`` can recompute it on resamples of the members and judge it like a per-sample metric.

    ``mean``: the mean of the members' ``field``, times ``scale`` (a skill's binary_acc is the mean of each pair's
    correct decisions x 1/4). ``average_precision`` and ``roc_auc``: of the members' ``field`` (the score) against
    their ``label`` (0 or 1), as scikit-learn defines them (tied scores enter together)."""

    statistic: str = spec(one_of(*MEMBER_STATISTICS))
    field: str = spec(TEXT)
    label: str | None = spec(TEXT, default=None)
    scale: float = 1.0

    def __post_init__(self) -> None:
        if self.statistic not in MEMBER_STATISTICS:
            raise ValueError(f"statistic {self.statistic!r} is not one of {', '.join(MEMBER_STATISTICS)}")
        if (self.label is not None) != (self.statistic != "mean"):
            raise ValueError(f"a label field is {'meaningless for' if self.label else 'required by'} "
                             f"statistic {self.statistic}")
        if not (isinstance(self.scale, (int, float)) and not isinstance(self.scale, bool)
                and math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"scale must be a finite number > 0, got {self.scale!r}")
        if self.scale != 1.0 and self.statistic != "mean":
            raise ValueError(f"scale is meaningful for statistic mean only, not {self.statistic}")


@dataclass(frozen=True)
class MetricInfo:
    """One declared metric of a recipe (``metrics:`` in recipe.yaml)."""

    name: str
    direction: str
    aggregation: str
    tolerance: dict[str, Tolerance]
    primary: bool = False
    kind: str = "official"
    group_by: str | None = None
    cohort: str | None = None
    unit: str | None = None
    help: str | None = None
    from_members: MemberStatistic | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"metric {self.name}"
        if self.direction not in DIRECTIONS:
            raise ValueError(f"{where}: direction {self.direction!r} is not higher or lower")
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"{where}: aggregation {self.aggregation!r} is not one of {', '.join(AGGREGATIONS)}")
        if (self.aggregation == "mean_then_median") != (self.group_by is not None):
            raise ValueError(f"{where}: group_by is required by mean_then_median and meaningless otherwise")
        if self.kind not in KINDS:
            raise ValueError(f"{where}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.from_members is not None and self.aggregation != "none":
            raise ValueError(f"{where}: from_members describes a derived value (aggregation none), not an aggregate")
        missing = [tier for tier in TIERS if tier not in self.tolerance]
        if missing:
            raise ValueError(f"{where}: no default tolerance for tier(s) {', '.join(missing)}")

    @classmethod
    def from_dict(cls, name: str, data: Mapping[str, Any]) -> MetricInfo:
        tolerance = {tier: Tolerance.from_dict(t) for tier, t in (data.get("tolerance") or {}).items()}
        members = data.get("from_members")
        known = {"direction", "aggregation", "tolerance", "primary", "kind", "group_by", "cohort", "unit", "help",
                 "from_members"}
        return cls(name=name, tolerance=tolerance,
                   from_members=MemberStatistic.from_json(members, f"metric {name}: from_members")
                   if members is not None else None,
                   **{k: v for k, v in data.items() if k in known - {"tolerance", "from_members"}},
                   extra={k: v for k, v in data.items() if k not in known})

    def summary(self) -> dict[str, Any]:
        """What a scorecard records of the declaration next to the measured value."""
        entry: dict[str, Any] = {"direction": self.direction, "kind": self.kind, "primary": self.primary}
        if self.unit:
            entry["unit"] = self.unit
        return entry


def match_metric(name: str, declared: Mapping[str, MetricInfo]) -> MetricInfo | None:
    """The declaration a scorecard metric name belongs to (longest matching suffix), or None."""
    best: MetricInfo | None = None
    for key, info in declared.items():
        if (name == key or name.endswith("/" + key)) and (best is None or len(key) > len(best.name)):
            best = info
    return best


def narrower_or_equal(given: Tolerance, default: Tolerance, reference: float) -> bool:
    """True when ``given`` allows no more deviation than ``default`` at this reference value."""
    return given.bound(reference) <= default.bound(reference) * (1 + 1e-12) + 1e-300
