"""A reference proposed from one or several trusted runs of one checkpoint, with its arithmetic.

Why: a declared tolerance is an allowance, not a measurement. Several trusted runs of the same checkpoint
(other seeds, other GPUs of the tier) measure how far a healthy rerun moves; each run's scorecard interval
measures the benchmark's sampling noise. From k >= 2 runs, per metric:

* reference value = the mean of the runs' values;
* proposed bound = max(t(0.975, k-1) * s * sqrt(1 + 1/k), max |run - mean|): the half-width of a 95%
  prediction interval for one more run (s the runs' standard deviation), never below what was seen;
* kept in the declared tolerance's kind (abs, or rel to |mean|).

The recipe's declaration stays the ceiling (a reference may only narrow it, ``narrower_or_equal``): a
proposal wider than the declared default for the tier is refused, because then the declaration is wrong
(widen it in recipe.yaml with a changelog line) or the runs are not healthy. A ``--tolerance`` override
replaces the proposal and may only narrow the default too. Flags (warnings, stored as the metric's note):
a tolerance narrower than the reference run's own interval half-width (a difference inside the sampling
noise fails), and an override narrower than the measured spread (healthy reruns would fail).

With one run the tolerance is the declared default (or the override), as before, with the same flag.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pinbench.core.metricinfo import TIERS, Tolerance, narrower_or_equal
from pinbench.core.provenance import config_differences, results_config, scrub
from pinbench.core.reference import other_inputs, recorded_inputs, write_reference
from pinbench.core.scorecard import Scorecard, validate_scorecard
from pinbench.core.uncertainty import Interval, has_interval

if TYPE_CHECKING:
    from pinbench.core.recipe import Recipe

PREDICTION_LEVEL = 0.95


@dataclass
class Proposal:
    """The reference file as data, the arithmetic and flags shown to the user, and what was refused."""

    data: dict[str, Any]
    lines: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def _in_kind(bound: float, like: Tolerance, value: float) -> Tolerance:
    """``bound`` as a tolerance of the declared kind (rel needs a non-zero reference value)."""
    if like.rel is not None and value != 0:
        return Tolerance(rel=bound / abs(value))
    return Tolerance(abs=bound)


def _check_runs(cards: Sequence[Scorecard], recipe: Recipe, tier: str) -> None:
    if not cards:
        raise ValueError("no scorecard given")
    if tier not in TIERS:
        raise ValueError(f"unknown tier {tier!r}; expected one of {', '.join(TIERS)}")
    first = cards[0]
    for i, card in enumerate(cards):
        validate_scorecard(card.to_json())
        label = f"run {i + 1} ({card.recipe} / {card.checkpoint}, {card.mode})"
        if card.recipe != recipe.name:
            raise ValueError(f"{label}: scorecard is for {card.recipe!r}, not {recipe.name!r}")
        if card.status != "complete":
            reasons = "; ".join(card.status_reasons[:3])
            raise ValueError(f"refusing to record a reference from a {card.status} scorecard of {label}: {reasons}")
        if card.mode == "fixture" and card.config.get("limit") is not None:   # smoke runs have .smoke.yaml; a
            # fixture run's --limit wrote fixture.yaml of fewer samples, and every whole fixture run was a MISMATCH
            raise ValueError(f"refusing to record a reference from {label}: a --limit {card.config['limit']} run of "
                             "the fixture; its reference is recorded from the whole fixture")
        for key in ("recipe_version", "checkpoint", "mode"):
            if getattr(card, key) != getattr(first, key):
                raise ValueError(f"{label}: {key} {getattr(card, key)!r} differs from run 1's {getattr(first, key)!r}; "
                                 "a reference is recorded from runs of one recipe version, checkpoint and mode")
        if card.samples.n_expected != first.samples.n_expected:
            raise ValueError(f"{label}: {card.samples.n_expected} samples, run 1 has {first.samples.n_expected}")
        if set(card.metrics) != set(first.metrics):
            raise ValueError(f"{label}: its metrics differ from run 1's")
    stamps = [card.provenance.get("timestamp") for card in cards]
    if len(cards) > 1 and len(set(stamps)) != len(stamps):
        raise ValueError("the same run was given twice (two scorecards with one provenance timestamp)")


def _half_width(interval: Interval | None) -> float | None:
    return (interval.high - interval.low) / 2 if has_interval(interval) else None


def _reference_interval(intervals: list[Interval | None]) -> Interval | None:
    """One run's interval as recorded (not how it was computed); for several, the union of theirs (None unless all
    have one)."""
    if not intervals or not all(has_interval(i) for i in intervals):
        return None
    if len(intervals) == 1:
        one = intervals[0]
        return Interval(one.low, one.high, one.level, method=one.method, unit=one.unit, n_units=one.n_units,
                        n_resamples=one.n_resamples, seed=one.seed)
    return Interval(min(i.low for i in intervals), max(i.high for i in intervals), intervals[0].level,
                    method=f"union of {len(intervals)} runs' intervals")


def _spread(values: list[float]) -> tuple[float, str]:
    """The proposed bound from several runs' values and the arithmetic that gives it."""
    from scipy import stats

    k = len(values)
    mean = math.fsum(values) / k
    s = statistics.stdev(values)
    t = float(stats.t.ppf(0.5 + PREDICTION_LEVEL / 2, k - 1))
    predicted = t * s * math.sqrt(1 + 1 / k)
    largest = max(abs(v - mean) for v in values)
    bound = max(predicted, largest)
    text = (f"{k} runs {', '.join(f'{v:.6g}' for v in values)}: mean {mean:.6g}, s {s:.3g}; "
            f"t(0.975, {k - 1}) {t:.4g} x s x sqrt(1 + 1/{k}) = {predicted:.3g}; max |run - mean| {largest:.3g}; "
            f"bound = max = {bound:.3g}")
    return bound, text


def propose_reference(cards: Sequence[Scorecard], *, recipe: Recipe, tier: str,
                      overrides: Mapping[str, Tolerance] | None = None, note: str | None = None,
                      inputs: Sequence[Mapping[str, str] | None] | None = None) -> Proposal:
    """The ``trusted_run`` reference of one or several complete runs; see the module docstring. ``inputs``: each run's
    input hash per sample (``input_hashes``; None where unread), in the order of ``cards``: the first run's kept so
    that ``diff`` names the samples of other inputs, each other run's flagged where it differs from the first's."""
    _check_runs(cards, recipe, tier)
    first = cards[0]
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(first.metrics))
    if unknown:
        raise ValueError(f"--tolerance for metric(s) not in the scorecard: {', '.join(unknown)}")
    proposal = Proposal(data={})
    hashes = list(inputs or [None])
    for i, card in enumerate(cards[1:], 2):   # other inputs or options: averaged all the same, so said (seeds'
        # videos in folders of their own are one checkpoint's runs; another model's score files are not)
        labels = ("run 1", f"run {i}")
        theirs = hashes[i - 1] if i - 1 < len(hashes) else None
        proposal.lines += [f"flag: run {i} ran differently from run 1: {line}"
                           for line in [*config_differences(first.config, card.config, labels),
                                        *(other_inputs(hashes[0], theirs, labels)
                                          if hashes[0] is not None and theirs is not None else [])]]
    entries: dict[str, Any] = {}
    for name in first.metrics:
        info = recipe.metric_info(name)
        default = info.tolerance[tier]
        values = [float(card.metrics[name].value) for card in cards]
        value = math.fsum(values) / len(values)
        interval = _reference_interval([card.metrics[name].interval for card in cards])
        entry: dict[str, Any] = {"value": value, "direction": info.direction}
        flags: list[str] = []
        if len(cards) > 1:
            bound, basis = _spread(values)
            measured = _in_kind(bound, default, value)
            if name in overrides:
                tolerance = overrides[name]
                basis += f"; overridden by --tolerance {tolerance.text(value)}"
                if tolerance.bound(value) < bound:
                    flags.append(f"--tolerance {tolerance.text(value)} is narrower than the measured spread "
                                 f"±{bound:.3g}: healthy reruns would FAIL")
            elif narrower_or_equal(measured, default, value):
                tolerance = measured
                basis += f" -> {tolerance.text(value)} (declared {tier} default {default.text(value)})"
            else:
                tolerance = default
                proposal.refused.append(
                    f"{name}: the runs' spread ±{bound:.3g} exceeds {recipe.name}'s declared {tier} tolerance "
                    f"{default.text(value)}: the declaration is wrong (widen it in recipe.yaml, with a changelog "
                    f"line) or the runs are not healthy ({basis})")
            entry["runs"] = values
        else:
            tolerance = overrides.get(name, default)
            basis = (f"--tolerance {tolerance.text(value)}" if name in overrides
                     else f"declared {tier} default {default.text(value)}")
        if not narrower_or_equal(tolerance, default, value):
            raise ValueError(f"--tolerance {name}={tolerance.as_dict()} is wider than {recipe.name}'s {tier} "
                             f"default {default.as_dict()}; widen the declaration in recipe.yaml instead")
        half = _half_width(interval)
        # A fixture is scored again on the very same samples by deterministic code: its interval is the spread
        # over those samples, not a rerun's noise, so a tolerance inside it is right there.
        if half is not None and tolerance.bound(value) < half and cards[0].mode != "fixture":
            flags.append(f"tolerance {tolerance.text(value)} is narrower than the reference's own 95% interval "
                         f"(half-width {half:.3g}): a difference inside the sampling noise would FAIL")
        entry.update(tolerance=tolerance.as_dict(), primary=info.primary, basis=basis)
        if interval is not None:
            entry["interval"] = interval.to_json()
        if flags:
            entry["note"] = "; ".join(flags)
        entries[name] = entry
        proposal.lines.append(f"{name}: {basis}")
        proposal.lines.extend(f"  flag: {f}" for f in flags)
    proposal.data = _reference_data(cards, tier, entries, note, hashes[0])
    return proposal


def _reference_data(cards: Sequence[Scorecard], tier: str, entries: dict[str, Any],
                    note: str | None, inputs: Mapping[str, str] | None) -> dict[str, Any]:
    first = cards[0]
    label = f"{first.recipe} / {first.checkpoint} ({first.mode})"
    stamps = ", ".join(str(card.provenance.get("timestamp", "?")) for card in cards)
    data: dict[str, Any] = {
        "recipe": first.recipe, "recipe_version": first.recipe_version, "checkpoint": first.checkpoint,
        "mode": first.mode, "n_samples": first.samples.n_expected, "tier": tier,
    }
    if note is not None:
        data["note"] = note
    provenance = scrub(first.provenance)
    if len(cards) > 1:
        provenance["runs"] = [scrub({"timestamp": c.provenance.get("timestamp"), "gpus": c.provenance.get("gpus"),
                                     "driver": c.provenance.get("driver"),
                                     "commit": (c.provenance.get("pinbench") or {}).get("commit"),
                                     "image_digest": (c.provenance.get("container") or {}).get("image_digest")})
                              for c in cards]
    data["source"] = {
        "kind": "trusted_run",
        "citation": (f"scorecard of {label}, run at {stamps}" if len(cards) == 1
                     else f"{len(cards)} scorecards of {label}, run at {stamps}"),
        "recorded": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "provenance": provenance,
        "config": results_config(first.config),   # its options, which provenance holds only where a recipe copies them
    }
    if inputs is not None:
        data["source"]["inputs"] = recorded_inputs(inputs)
    data["metrics"] = entries
    return data


def record_reference(scorecards: Scorecard | Sequence[Scorecard], path: Path | str, *,
                     recipe: Recipe, tier: str, overrides: Mapping[str, Tolerance] | None = None,
                     note: str | None = None, inputs: Sequence[Mapping[str, str] | None] | None = None) -> Path:
    """Write a ``trusted_run`` reference from one or several COMPLETE scorecards of one checkpoint.

    Directions and primary flags come from the recipe's declaration. One run: each tolerance is the
    declared default for ``tier`` unless ``overrides`` narrows it. Several runs: the value is their mean and
    the tolerance is proposed from their spread (``propose_reference``); a proposal wider than the declared
    default is refused (ValueError naming the metrics), as is a wider override.
    """
    cards = [scorecards] if isinstance(scorecards, Scorecard) else list(scorecards)
    proposal = propose_reference(cards, recipe=recipe, tier=tier, overrides=overrides, note=note, inputs=inputs)
    if proposal.refused:
        raise ValueError("refusing to record: " + "; ".join(proposal.refused))
    return write_reference(proposal.data, path, recipe=recipe)
