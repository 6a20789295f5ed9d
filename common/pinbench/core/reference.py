"""Reference scores as data, and the diff of a scorecard against them.

A reference file (``recipes/<pkg>/references/<checkpoint>[.<mode>].yaml``) names the recipe version,
checkpoint, mode and sample count it is valid for, the tolerance tier it asserts, where its numbers
come from (paper table, upstream README, a trusted run with its provenance, or a fixture), and per
metric the value, direction, a two-sided tolerance (exactly one of ``abs`` / ``rel``) and whether it
is primary. Nothing here parses stdout.

``diff(scorecard, reference).exit_code``:

* 0 (EXIT_PASS): every reference metric is within tolerance on a complete run;
* 1 (EXIT_FAIL): at least one metric is outside its tolerance;
* 2 (EXIT_INCOMPLETE): the run is partial or failed, or a reference metric has no measured value;
* 3 (EXIT_MISMATCH): the reference does not apply: other recipe, recipe version, checkpoint or mode,
  its ``n_samples`` differs from the scorecard's ``n_expected``, or, recorded from runs (``trusted_run``), it
  has no value for a metric the run scored as primary.

When several apply, the highest code wins: a comparison that does not apply outranks an incomplete
run, which outranks an out-of-tolerance metric.

Every row also shows the run's 95% interval and the reference's (when it was recorded from a run) and
reads the difference against them: ``outside noise`` when |measured - reference| exceeds
sqrt(a^2 + b^2), a and b being the sides of the two intervals that face each other (the normal
approximation for two independent estimates; without a reference interval, b = 0, i.e. the reference lies
outside the run's interval). The tolerance alone decides PASS and FAIL; the reading tells a FAIL "outside
the band and outside the noise" from one "outside the band but within noise".
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pinbench.core.derived import is_derived
from pinbench.core.files import (
    FileError,
    aligned,
    blocking_parent,
    counted,
    counted_of,
    first_names,
    read_regular_bytes,
    read_yaml,
    write_atomic,
)
from pinbench.core.metricinfo import DIRECTIONS, TIERS, Tolerance, narrower_or_equal
from pinbench.core.names import checkpoint_name_problem, recipe_name_problem
from pinbench.core.schema import schema_error
from pinbench.core.scorecard import (
    MetricResult,
    Scorecard,
    ScorecardError,
    degenerate_notes,
    non_finite_problem,
    samples_text,
)
from pinbench.core.uncertainty import Interval, describe, has_interval

if TYPE_CHECKING:
    from pinbench.core.recipe import Recipe

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_INCOMPLETE = 2
EXIT_MISMATCH = 3
_VERDICT = {EXIT_PASS: "PASS", EXIT_FAIL: "FAIL", EXIT_INCOMPLETE: "INCOMPLETE", EXIT_MISMATCH: "MISMATCH"}
__all__ = ["DIRECTIONS", "EXIT_FAIL", "EXIT_INCOMPLETE", "EXIT_MISMATCH", "EXIT_PASS", "TIERS", "Tolerance"]


class ReferenceFileError(FileError):
    """A reference file is unreadable or invalid."""


@dataclass(frozen=True)
class MetricReference:
    value: float
    direction: str  # "higher" | "lower": which way is better
    tolerance: Tolerance
    primary: bool = False
    note: str | None = None
    interval: Interval | None = None  # 95% interval of the value (a reference recorded from runs)
    runs: tuple[float, ...] | None = None  # each trusted run's value when several were recorded
    basis: str | None = None  # how the tolerance was chosen, with its arithmetic

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)) or not math.isfinite(self.value):
            raise ValueError(f"a reference value must be a finite number, got {self.value!r}")


@dataclass
class Reference:
    recipe: str
    recipe_version: str
    checkpoint: str
    mode: str
    n_samples: int
    tier: str
    source: dict[str, Any]
    metrics: dict[str, MetricReference]
    note: str | None = None
    path: Path | None = None


@dataclass
class DiffRow:
    metric: str
    reference: float
    measured: float | None
    delta: float | None  # measured - reference
    tolerance_text: str
    status: str  # "PASS" | "FAIL" | "MISSING" | "MISMATCH" (shown, not judged: the reference does not apply)
    direction: str = "higher"
    verdict: str = ""  # "better" | "worse" per direction | "within tolerance" | "same"; "" when nothing was measured
    scored: str = ""  # "n_scored/n_expected" of the measured metric
    primary: bool = False
    interval: Interval | None = None  # the run's 95% interval (scorecard)
    ref_interval: Interval | None = None  # the reference's, when recorded from runs
    noise: float | None = None  # sqrt(a^2 + b^2) of the interval sides facing each other
    reading: str = ""  # "within noise" | "outside noise" | "noise unknown" | "" (nothing measured)


@dataclass
class DiffResult:
    rows: list[DiffRow]
    problems: list[str]
    ok: bool
    exit_code: int
    notes: list[str] = field(default_factory=list)
    header: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, MetricResult] = field(default_factory=dict)  # the scorecard's metrics: every row of the table
    ran_differently: list[str] = field(default_factory=list)  # ``ran_differently``'s lines, in ``notes`` too
    # why the reference does not apply, a few words each: the result line says them, where only the problems did
    not_applying: list[str] = field(default_factory=list)


def reference_from_dict(data: Any, path: Path | str | None = None, recipe: Recipe | None = None) -> Reference:
    """Validate a parsed reference file and build it.

    Always: the schema, finite values and tolerances, at least one primary metric. With ``recipe``: the
    reference is for that recipe, every metric is declared there with the same direction and primary flag, and
    no tolerance is wider than the recipe's default for the reference's tier (a reference may only narrow it).
    """
    if not isinstance(data, Mapping):
        raise ReferenceFileError(path, f"expected a mapping at top level, got {type(data).__name__}")
    problem = (schema_error("reference", data) or recipe_name_problem(data["recipe"])
               or checkpoint_name_problem(data["checkpoint"]))
    if problem is not None:
        raise ReferenceFileError(path, problem)
    metrics = {}
    for name, m in data["metrics"].items():
        if not math.isfinite(m["value"]):
            raise ReferenceFileError(path, f"metric {name}: value must be finite, got {m['value']}")
        try:
            tolerance = Tolerance.from_dict(m["tolerance"])
        except ValueError as exc:
            raise ReferenceFileError(path, f"metric {name}: {exc}") from None
        interval = m.get("interval")
        numbers = [m["value"], *(m.get("runs") or []), *((interval["low"], interval["high"]) if interval else ())]
        if not all(math.isfinite(x) for x in numbers):
            raise ReferenceFileError(path, f"metric {name}: runs and interval must be finite")
        if interval and not interval["low"] <= interval["high"]:
            raise ReferenceFileError(path, f"metric {name}: interval low {interval['low']} > high {interval['high']}")
        try:
            typed = Interval.from_json(interval, f"metric {name}: interval") if interval else None
        except ValueError as exc:
            raise ReferenceFileError(path, str(exc)) from None
        metrics[name] = MetricReference(value=float(m["value"]), direction=m["direction"], tolerance=tolerance,
                                        primary=bool(m.get("primary", False)), note=m.get("note"), interval=typed,
                                        runs=tuple(m["runs"]) if m.get("runs") else None, basis=m.get("basis"))
    if not any(m.primary for m in metrics.values()):
        raise ReferenceFileError(path, "no metric is marked primary: true")
    problem = _listed_inputs_problem(data["source"].get("inputs"))
    if problem is not None:
        raise ReferenceFileError(path, problem)
    if recipe is not None:
        _check_against_declaration(metrics, data, recipe, path)
    return Reference(recipe=data["recipe"], recipe_version=data["recipe_version"],
                     checkpoint=data["checkpoint"], mode=data["mode"], n_samples=data["n_samples"],
                     tier=data["tier"], source=dict(data["source"]), metrics=metrics,
                     note=data.get("note"), path=Path(path) if path is not None else None)


def _listed_inputs_problem(kept: Mapping[str, Any] | None) -> str | None:
    """Why a reference's ``source.inputs`` (``recorded_inputs``) contradicts itself, edited by hand: its list of
    input hashes holds another number than its ``n_samples`` (a diff would name no sample of other inputs), or is not
    the list its ``sha256`` was computed from (a diff would name samples by hashes the recorded run never had)."""
    if kept is None or "samples" not in kept:
        return None
    samples = kept["samples"]
    if len(samples) != kept["n_samples"]:
        listed = counted(len(samples), "input hash", "input hashes")
        return f"source.inputs.samples holds {listed}, its n_samples says {kept['n_samples']} (edited by hand?)"
    if recorded_inputs(samples)["sha256"] != kept["sha256"]:
        return ("source.inputs.samples is not the list its sha256 was computed from (the digest of its ids and "
                "input hashes differs; edited by hand?)")
    return None


def _check_against_declaration(metrics: Mapping[str, MetricReference], data: Mapping[str, Any], recipe: Recipe,
                               path: Path | str | None) -> None:
    from pinbench.core.metricinfo import match_metric

    if data["recipe"] != recipe.name:
        raise ReferenceFileError(path, f"is for recipe {data['recipe']!r}, not {recipe.name!r}")
    for name, m in metrics.items():
        info = match_metric(name, recipe.metrics)
        if info is None:
            raise ReferenceFileError(path, f"metric {name} is not declared by {recipe.name} (recipe.yaml)")
        if m.direction != info.direction:
            raise ReferenceFileError(path, f"metric {name}: direction {m.direction} contradicts the recipe's "
                                           f"declared {info.direction}")
        if m.primary != info.primary:  # one place says which metrics are primary: the declaration
            raise ReferenceFileError(path, f"metric {name}: primary: {str(m.primary).lower()} contradicts the "
                                           f"recipe's declared primary: {str(info.primary).lower()}")
        default = info.tolerance[data["tier"]]
        if not narrower_or_equal(m.tolerance, default, m.value):
            raise ReferenceFileError(path, f"metric {name}: tolerance {m.tolerance.text(m.value)} is wider than "
                                           f"{recipe.name}'s {data['tier']} default {default.text(m.value)}; "
                                           "a reference may only narrow it")


def load_reference(path: Path | str, recipe: Recipe | None = None) -> Reference:
    """Read a reference YAML; ReferenceFileError (one line naming the file) on any problem."""
    path = Path(path)
    return reference_from_dict(read_yaml(path, ReferenceFileError), path, recipe)


def _fmt(value: float | None, sign: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.6g}" if sign else f"{value:.6g}"


def _verdict(delta: float, direction: str, reference: float, measured: float, bound: float) -> str:
    """better / worse by the direction, past the tolerance ``bound``; "within tolerance" inside it (+0.01 inside
    ±0.05 read "better", a PASS the reference cannot tell from its own value); "same" within float noise
    (``_within``'s), so that a fixture's exact match summed in another order (delta -2.2e-16) is not called worse."""
    if _within(delta, 0.0, reference, measured):
        return "same"
    if _within(delta, bound, reference, measured):
        return "within tolerance"
    return "better" if (delta > 0) == (direction == "higher") else "worse"


def noise_reading(delta: float, measured: float, interval: Interval | None, reference: float,
                  ref_interval: Interval | None) -> tuple[str, float | None]:
    """("within noise" | "outside noise" | "noise unknown", the noise) for measured - reference = delta.

    The noise is sqrt(a^2 + b^2): a is the side of the run's interval that faces the reference, b the side
    of the reference's interval that faces the run (0 when the reference has none).
    """
    if not has_interval(interval):
        return "noise unknown", None
    if delta >= 0:
        a = measured - interval.low
        b = ref_interval.high - reference if has_interval(ref_interval) else 0.0
    else:
        a = interval.high - measured
        b = reference - ref_interval.low if has_interval(ref_interval) else 0.0
    noise = math.hypot(max(a, 0.0), max(b, 0.0))
    return ("within noise" if _within(delta, noise, reference, measured) else "outside noise"), noise


def _within(delta: float, bound: float, reference: float, measured: float) -> bool:
    # Ignore float noise at the 1e-12 scale so that an exact-boundary or exact-match check passes.
    return abs(delta) <= bound + 1e-12 * max(1.0, abs(reference), abs(measured))


def diff(scorecard: Scorecard, ref: Reference, *, name: str | None = None,
         inputs: Mapping[str, str] | None = None) -> DiffResult:
    """Compare a scorecard with a reference; see the module docstring for the exit codes.

    ``name``: the reference as its lines name it (default: its path); a page meant to be shared names it without
    this machine's folders (``pinbench.results.report.reference_name``). ``inputs``: each sample's input hash
    (``input_hashes``), to name the samples computed from other inputs than the reference's run.

    A scorecard holding a NaN or an infinity anywhere (built or edited in memory; files are checked when
    loaded) is invalid input, ScorecardError, never a PASS or a FAIL.
    """
    problem = non_finite_problem(scorecard.to_json())
    if problem:
        raise ScorecardError(None, problem)
    problems: list[str] = []
    notes: list[str] = []
    not_applying: list[str] = []
    code = EXIT_PASS
    ref_name = name if name is not None else str(ref.path) if ref.path is not None else "(in memory)"
    where = f" ({ref_name})" if ref.path is not None else ""

    for field_name, ref_value, card_value in (
        ("recipe", ref.recipe, scorecard.recipe),
        ("recipe_version", ref.recipe_version, scorecard.recipe_version),
        ("checkpoint", ref.checkpoint, scorecard.checkpoint),
        ("mode", ref.mode, scorecard.mode),
    ):
        if ref_value != card_value:
            problems.append(f"{field_name} mismatch: reference{where} is for {ref_value!r}, "
                            f"scorecard is {card_value!r}")
            not_applying.append(f"the reference is for {field_name.replace('_', ' ')} {ref_value!r}, this run "
                                f"{card_value!r}")
            code = max(code, EXIT_MISMATCH)
    n_expected = scorecard.samples.n_expected
    if ref.n_samples != n_expected:
        problems.append(f"sample count mismatch: reference has n_samples={ref.n_samples}, "
                        f"scorecard n_expected={n_expected}")
        settings = run_settings(scorecard)
        not_applying.append(f"the reference is of {counted(ref.n_samples, 'sample')}, this run has {n_expected}"
                            + (f" ({settings})" if settings else ""))
        code = max(code, EXIT_MISMATCH)
    if scorecard.status != "complete":
        reasons = scorecard.status_reasons
        detail = "; ".join(reasons[:3]) + (f"; +{len(reasons) - 3} more" if len(reasons) > 3 else "")
        problems.append(f"scorecard status is {scorecard.status}" + (f": {detail}" if detail else ""))
        code = max(code, EXIT_INCOMPLETE)

    # another recipe, version, checkpoint, mode or sample count (a --limit smoke run): the values are shown beside
    # the reference's, never judged against them (a FAIL per metric and a line per metric the subset lacks said the
    # run was compared as if it were the one the reference is of)
    applies = code < EXIT_MISMATCH
    unjudged: list[str] = []
    rows = []
    card_metrics = scorecard.metrics
    for name, m in ref.metrics.items():
        measured_entry = card_metrics.get(name)
        measured = measured_entry.value if measured_entry else None
        scored = f"{measured_entry.n_scored}/{measured_entry.n_expected}" if measured_entry else "-"
        row = DiffRow(metric=name, reference=m.value, measured=measured, delta=None,
                      tolerance_text=m.tolerance.text(m.value), status="MISSING", direction=m.direction,
                      scored=scored, primary=m.primary, interval=measured_entry.interval if measured_entry else None,
                      ref_interval=m.interval)
        if measured is None and not applies:
            unjudged.append(name)
        elif measured_entry is None:
            problems.append(f"{name}: missing from the scorecard")
            code = max(code, EXIT_INCOMPLETE)
        elif measured is None:
            problems.append(f"{name}: no value, nothing scored ({scored})")
            code = max(code, EXIT_INCOMPLETE)
        elif measured_entry.direction != m.direction:
            problems.append(f"{name}: the reference says {m.direction} is better, the scorecard's recipe declares "
                            f"{measured_entry.direction}")
            not_applying.append(f"{name}: the reference's direction is not the recipe's")
            code = max(code, EXIT_MISMATCH)
        else:
            row.delta = measured - m.value
            row.verdict = _verdict(row.delta, m.direction, m.value, measured, m.tolerance.bound(m.value)) \
                if applies else ""   # never judged: not "better" either
            row.reading, row.noise = noise_reading(row.delta, measured, row.interval, m.value, m.interval)
            if not applies:
                row.status = "MISMATCH"
            elif _within(row.delta, m.tolerance.bound(m.value), m.value, measured):
                row.status = "PASS"
            else:
                row.status = "FAIL"
                if row.reading == "noise unknown":
                    reading = "noise unknown (no interval)"
                else:
                    reading = (f"and outside the noise (±{row.noise:.3g})" if row.reading == "outside noise"
                               else f"but within noise (±{row.noise:.3g})")
                problems.append(f"{name}: measured {_fmt(measured)} vs reference {_fmt(m.value)} "
                                f"(delta {_fmt(row.delta, sign=True)}, {row.verdict}) is outside "
                                f"{row.tolerance_text}, {reading}")
                code = max(code, EXIT_FAIL)
        rows.append(row)
    for name, m in ref.metrics.items():  # a tolerance (recorded or edited by hand) inside the reference's own noise
        half = (m.interval.high - m.interval.low) / 2 if has_interval(m.interval) else None
        if half is not None and m.tolerance.bound(m.value) < half and ref.mode != "fixture":   # see proposal.py
            notes.append(f"{name}: tolerance {m.tolerance.text(m.value)} is narrower than the reference's own 95% "
                         f"interval (half-width {half:.3g}): a difference inside the sampling noise can FAIL")
    if not applies:
        lacking = (f"; {counted(len(unjudged), 'reference metric')} without a value in this run "
                   f"({', '.join(unjudged[:3])}{', ...' if len(unjudged) > 3 else ''})") if unjudged else ""
        notes.insert(0, "the reference does not apply to this run (problems above): its values are shown beside the "
                        f"run's, not judged{lacking}")
    notes[:0] = degenerate_notes(scorecard)
    differently = ran_differently(scorecard, ref, inputs)
    notes += [f"ran differently {line}" for line in differently]
    for name, measured_entry in card_metrics.items():
        if name in ref.metrics:
            continue
        if measured_entry.primary and ref.source.get("kind") == "trusted_run":
            # recorded from runs, it held every metric they scored: a primary gone is an edit, which would PASS
            # with that metric unchecked (a paper table publishes what it publishes: a note)
            problems.append(f"{name}: primary metric of the run has no value in the reference "
                            f"{ref_name}, recorded from runs that "
                            "scored it (edited since?)")
            not_applying.append(f"{name}: primary, no value in the reference")
            code = max(code, EXIT_MISMATCH)
        elif measured_entry.primary:
            notes.append(f"{name}: primary metric, not in this {ref.source.get('kind', 'reference')} "
                         "(reported, not checked)")
        else:
            notes.append(f"{name}: no reference value (reported, not checked)")
    notes += _interval_notes(scorecard)

    source = ref.source.get("kind", "?")
    if ref.source.get("citation"):
        source += f": {ref.source['citation']}"
    header = _card_header(scorecard, reference=f"{ref_name} "
                                                f"[{ref.recipe} {ref.recipe_version}, {ref.mode}, tier {ref.tier}]",
                          source=source)
    return DiffResult(rows=rows, problems=problems, ok=code == EXIT_PASS, exit_code=code, notes=notes,
                      header=header, metrics=dict(card_metrics), ran_differently=differently,
                      not_applying=not_applying)


def run_settings(scorecard: Scorecard) -> str:
    """``--limit 2 -o metrics=lcm``: what this run was told (``--limit``, the options given on the command line or
    in the environment), the likely reason its sample count is not the reference's."""
    config = scorecard.config
    options, sources = config.get("options") or {}, config.get("option_sources") or {}
    settings = [f"--limit {config['limit']}"] if config.get("limit") is not None else []
    for name, source in sources.items():
        if source in ("cli", "env"):
            value = options.get(name)
            settings.append(f"-o {name}={','.join(map(str, value)) if isinstance(value, list) else value}")
    return " ".join(settings)


def ran_differently(scorecard: Scorecard, ref: Reference, inputs: Mapping[str, str] | None = None) -> list[str]:
    """``from the reference's run: <what differs>`` for each way this run differs from the run a ``trusted_run``
    reference was recorded from (its first, when several): the likely cause of a FAIL, or what a PASS held across.
    Its options and inputs as ``compare`` names them, where the reference kept them (``source.config``,
    ``source.inputs``) and, for inputs, ``inputs`` gives this run's; nothing of them for an older reference.
    [] for a reference without provenance (a paper's table)."""
    recorded = ref.source.get("provenance")
    if not isinstance(recorded, Mapping):
        return []
    recorded = json.loads(json.dumps(recorded, default=str))   # as a scorecard holds it: a YAML date as its text
    from pinbench.core.generation import Generated, generation_differences  # a trusted_run reference's diff only
    from pinbench.core.provenance import config_differences, differences

    labels = ("reference", "this run")
    which = recorded_run(ref)
    lines = [f"generation: {line}" for line in generation_differences(
        [(labels[0], Generated.of(recorded)), (labels[1], Generated.of(scorecard.provenance))])]
    config = ref.source.get("config")
    if isinstance(config, Mapping):
        lines += config_differences(config, scorecard.config, labels)
    lines += differences(recorded, scorecard.provenance, labels)
    kept = ref.source.get("inputs")
    if isinstance(kept, Mapping) and inputs is not None:
        lines += _inputs_differ(kept, inputs, which)
    return [f"from {which}: {line}" for line in lines]


def recorded_run(ref: Reference) -> str:
    """The run a recorded reference kept the provenance, options and inputs of, as every line of ``ran_differently``
    names it (diff, the view and the report print those lines): its first where it was recorded from several, whose
    values it averages but whose options and inputs it did not keep (record-reference flags them where they differ)."""
    recorded = ref.source.get("provenance")
    runs = recorded.get("runs") if isinstance(recorded, Mapping) else None
    return "the reference's first run" if runs else "the reference's run"


INPUTS_LISTED = 1000   # a reference keeps each sample's input hash up to this many samples, their digest always


def keeps_inputs(ref: Reference) -> bool:
    """Whether ``ref`` kept its run's inputs (``source.inputs``), the only case a diff reads the run's input hashes:
    none of the shipped references does, and their hashes are read from every record (11,222, 112,220 at 10x)."""
    return ref.source.get("inputs") is not None


def input_hashes(records: Sequence[Any]) -> dict[str, str]:
    """Each sample's input hash (the hash of its task: its input files' content and its options), its first record's
    as ``compare`` reads a run. A derived record has none: a report's records hold the run's derived ones too."""
    hashes: dict[str, str] = {}
    for record in records:
        if not is_derived(record):
            hashes.setdefault(record.sample_id, record.input_hash)
    return hashes


def run_input_hashes(scorecard: Path, card: Scorecard) -> dict[str, str] | None:
    """``input_hashes`` of the samples file beside ``scorecard``; None when it cannot be read (a scorecard copied
    alone): a diff then says nothing of inputs rather than guess."""
    from pinbench.core.runner import parse_merged

    if not card.samples.path:
        return None
    samples = scorecard.parent / card.samples.path
    try:
        return input_hashes(parse_merged(read_regular_bytes(samples), samples))
    except (ValueError, UnicodeDecodeError):
        return None


def recorded_inputs(hashes: Mapping[str, str]) -> dict[str, Any]:
    """What a recorded reference keeps of its run's inputs (``source.inputs``): the SHA-256 of every sample's id and
    input hash, and each sample's hash where they are at most ``INPUTS_LISTED`` (CameraBench's 11,222 would make the
    file a megabyte): a video re-encoded under its own name changes no option and no provenance."""
    ordered = dict(sorted(hashes.items()))
    text = "".join(f"{i}\t{h}\n" for i, h in ordered.items())
    kept: dict[str, Any] = {"sha256": hashlib.sha256(text.encode()).hexdigest(), "n_samples": len(ordered)}
    if len(ordered) <= INPUTS_LISTED:
        kept["samples"] = ordered
    return kept


def other_inputs(a: Mapping[str, str], b: Mapping[str, str], labels: tuple[str, str]) -> list[str]:
    """``other inputs: ...`` naming the samples of both runs whose input hash differs (how many, the first five), or
    [] when none does. ``compare`` says it of two runs, ``diff`` of a run and its reference's."""
    both = [i for i in a if i in b]
    other = [i for i in both if a[i] != b[i]]
    if not other:
        return []
    return [f"other inputs: {counted_of(len(other), len(both), 'sample', ('was', 'were'))} computed from other "
            f"inputs in {labels[0]} and {labels[1]} (the input hash of its task differs: an input file's content or "
            f"an option): {first_names(other, 5)}"]


def _inputs_differ(kept: Mapping[str, Any], inputs: Mapping[str, str], which: str) -> list[str]:
    """``other_inputs`` of the reference's run (``which``: ``recorded_run``) and this one, or, where the reference kept
    only the digest of its samples' input hashes, one line when it differs over as many samples (a partial run's digest
    is of other samples: it tells nothing of their inputs)."""
    samples = kept.get("samples")
    if isinstance(samples, Mapping):
        return other_inputs(samples, inputs, (which, "this run"))
    if kept.get("n_samples") != len(inputs) or kept.get("sha256") in (None, recorded_inputs(inputs)["sha256"]):
        return []
    return [f"other inputs: the digest of the samples' input hashes differs ({which}: "
            f"{counted(kept.get('n_samples', 0), 'sample')}, this run: {len(inputs)}; the reference keeps no "
            "sample's own)"]


def _card_header(scorecard: Scorecard, **lines: str) -> dict[str, str]:
    return {
        "recipe": f"{scorecard.recipe} {scorecard.recipe_version}",
        "checkpoint": scorecard.checkpoint,
        "mode": scorecard.mode,
        **lines,
        "status": f"{scorecard.status} ({samples_text(scorecard)})",
    }


RESULT_COLUMNS = ["metric", "value", "95% CI", "scored", "direction"]
DIFF_COLUMNS = ["reference", "delta", "vs ref", "tolerance", "status", "ref 95% CI", "noise"]


def _table_rows(metrics: Mapping[str, MetricResult], checked: Sequence[DiffRow] | None) -> list[list[str]]:
    """One row per metric of the scorecard, primary first (then in scorecard order), then each reference metric
    the scorecard lacks; with ``checked`` (a diff's rows) the diff columns too, ``-`` where no reference value is."""
    by_name = {row.metric: row for row in checked or ()}
    names = sorted(metrics, key=lambda name: not metrics[name].primary)
    names += [row.metric for row in checked or () if row.metric not in metrics]
    rows = []
    for name in names:
        entry, row = metrics.get(name), by_name.get(name)
        primary = entry.primary if entry else row is not None and row.primary
        cells = [("* " if primary else "  ") + name]
        if entry is None:
            cells += ["-", "-", "-", row.direction if row else "-"]
        else:
            cells += [_fmt(entry.value), _ci_cell(entry.interval), f"{entry.n_scored}/{entry.n_expected}",
                      entry.direction]
        if checked is not None:
            if row is None:
                cells += ["-", "-", "-", "-", "not checked", "-", "-"]
            else:
                cells += [_fmt(row.reference), _fmt(row.delta, sign=True), row.verdict or "-", row.tolerance_text,
                          row.status, _ci_cell(row.ref_interval) if row.ref_interval else "-",
                          _noise_cell(row)]
        rows.append(cells)
    return rows


def _table(metrics: Mapping[str, MetricResult], checked: Sequence[DiffRow] | None) -> list[str]:
    columns = RESULT_COLUMNS + (DIFF_COLUMNS if checked is not None else [])
    table = [["  " + columns[0], *columns[1:]], *_table_rows(metrics, checked)]
    lines = aligned(table)
    lines.append("(* primary metric; direction: which way is better; 95% CI: the run's bootstrap interval"
                 + (";" if checked is not None else ")"))
    if checked is not None:
        lines.append(" delta = value - reference; vs ref: better/worse by the metric's direction past the tolerance;")
        lines.append(" noise: |delta| vs sqrt(a^2 + b^2) of the run's and reference's interval sides facing "
                     "each other)")
    return lines


def _interval_notes(scorecard: Scorecard) -> list[str]:
    notes = []
    for name, entry in scorecard.metrics.items():
        interval = entry.interval
        if interval is None:
            notes.append(f"{name}: no interval (scorecard schema {scorecard.schema_version})")
        elif interval.low is None:
            notes.append(f"{name}: no interval ({interval.reason})")
    return notes


NAMES_SPELLED_OUT = 12


def _grouped(notes: Sequence[str]) -> list[str]:
    """Notes of the form ``metric: text`` that share their text said once, naming every metric."""
    by_text: dict[str, list[str]] = {}
    for note in notes:
        name, sep, text = note.partition(": ")
        by_text.setdefault(text if sep else note, []).append(name if sep else "")
    out = []
    for text, names in by_text.items():
        named = [n for n in names if n]
        out.append(f"{text}: {_abbreviated(named)}" if len(named) > 1 else
                   (f"{named[0]}: {text}" if named else text))
    return out


def _abbreviated(names: Sequence[str]) -> str:
    """Metric names joined, those past ``NAMES_SPELLED_OUT`` read as patterns: the ``a/<each>/c`` of one split or
    skill each as ``a/*/c (n)`` (CameraBench's 90 metrics made three notes of 70 names each, burying the problems
    above them)."""
    if len(names) <= NAMES_SPELLED_OUT:
        return ", ".join(names)
    patterns: dict[str, list[str]] = {}
    for name in names:
        parts = name.split("/")
        patterns.setdefault(f"{parts[0]}/*/{parts[-1]}" if len(parts) == 3 else name, []).append(name)
    return f"{len(names)} metrics: " + ", ".join(
        f"{pattern} ({len(matched)})" if len(matched) > 1 else matched[0] for pattern, matched in patterns.items())


def render_diff(result: DiffResult) -> str:
    """The results table against a reference: every metric of the run with its value, interval, counts and
    direction, and beside it the reference, delta, tolerance, verdict and noise reading. Plain text (no colour, no
    box characters), so it reads the same in a terminal and a log."""
    lines = [f"{key:<10} {value}" for key, value in result.header.items()]
    lines += ["", *_table(result.metrics, result.rows), ""]
    lines.append("problems:" if result.problems else "problems: none")
    lines.extend(f"  - {p}" for p in result.problems)
    if result.notes:
        lines.append("notes:")
        lines.extend(f"  - {n}" for n in _grouped(result.notes))
    lines.append(result_line(result))
    return "\n".join(lines)


def render_results(scorecard: Scorecard, why: str) -> str:
    """The results table of a run no reference applies to (``why`` says so): every metric with its value, 95%
    interval, counts and direction. Its last line is no diff verdict (``pinbench check`` relies on that)."""
    lines = [f"{key:<10} {value}" for key, value in _card_header(scorecard, reference=f"none: {why}").items()]
    lines += ["", *_table(scorecard.metrics, None), ""]
    reasons = scorecard.status_reasons
    lines.append("problems:" if reasons else "problems: none")
    lines.extend(f"  - {reason}" for reason in reasons)
    notes = degenerate_notes(scorecard) + _interval_notes(scorecard)
    if notes:
        lines.append("notes:")
        lines.extend(f"  - {n}" for n in _grouped(notes))
    lines.append(f"reported, not diffed (status {scorecard.status})")
    return "\n".join(lines)


@dataclass(frozen=True)
class Verdict:
    """A scorecard judged as ``pinbench run`` and ``pinbench diff`` print it: ``body``, then (a run's) failed samples,
    then ``last``, which says the result and the exit code, diffed or not."""

    diff: DiffResult | None   # None: no reference applies, the results are reported
    exit_code: int
    message: str   # diff.txt's text: ``render_diff``, or ``render_results`` (its last line no diff's, for the check)
    last: str      # ``result_line``, or ``reported_line``

    @property
    def body(self) -> str:
        """``message`` without its last line."""
        return self.message.rpartition("\n")[0]


def judge(scorecard: Scorecard, reference: Reference | str, inputs: Mapping[str, str] | None = None) -> Verdict:
    """The verdict of ``scorecard`` against ``reference``, or of its results alone where ``reference`` is the text of
    why none applies; ``inputs`` as ``diff``'s."""
    if isinstance(reference, str):
        return Verdict(None, results_exit_code(scorecard), render_results(scorecard, reference),
                       reported_line(scorecard))
    result = diff(scorecard, reference, inputs=inputs)
    return Verdict(result, result.exit_code, render_diff(result), result_line(result))


def results_exit_code(scorecard: Scorecard) -> int:
    """The exit code of a run no reference applies to: 0 complete, 2 partial or failed (the README's exit codes)."""
    return EXIT_PASS if scorecard.status == "complete" else EXIT_INCOMPLETE


def reported_line(scorecard: Scorecard) -> str:
    """The last line a run no reference applies to prints, as a diff's result line says it (``result: INCOMPLETE
    (exit 2): not diffed, status failed``): its last lines were the failed samples, and no exit code. diff.txt
    keeps ``render_results``'s last line: ``pinbench check`` reads a result line there as a diff's."""
    code = results_exit_code(scorecard)
    return f"result: {'REPORTED' if code == EXIT_PASS else _VERDICT[code]} (exit {code}): not diffed, status " \
           f"{scorecard.status}"


def _ci_cell(interval: Interval | None) -> str:
    text = describe(interval)
    return "n/a" if text.startswith("n/a") else text


def result_line(result: DiffResult) -> str:
    """The last line of a rendered diff, ``result: PASS (exit 0)``, and why a reference does not apply (``result:
    MISMATCH (exit 3): the reference is of 7 samples, this run has 5 (-o metrics=lcm)``); ``pinbench check``
    compares diff.txt with it."""
    why = f": {'; '.join(result.not_applying)}" if result.exit_code == EXIT_MISMATCH and result.not_applying else ""
    return f"{verdict_line(result)}{why}"


def verdict_line(result: DiffResult) -> str:
    """``result: MISMATCH (exit 3)``: ``result_line`` without why, as a diff.txt written before 29f7840 says it."""
    return f"result: {_VERDICT[result.exit_code]} (exit {result.exit_code})"


def _noise_cell(row: DiffRow) -> str:
    if not row.reading:
        return "-"
    if row.noise is None:
        return row.reading
    return f"{row.reading} (±{row.noise:.3g})"


def write_reference(data: Mapping[str, Any], path: Path | str, *, recipe: Recipe) -> Path:
    """Validate a reference as loading would, then write it atomically with a header comment. ValueError naming
    ``path`` when it cannot be written (a folder there, a file on its way): it was an OSError naming the temporary
    file or the file on the way alone."""
    import yaml  # here, not at import: compare and diff import this module and write no YAML

    path = Path(path)
    reference_from_dict(data, path, recipe)  # same validation as loading
    runs = counted(len(data["source"]["provenance"].get("runs") or []) or 1, f"complete {data['mode']} run")
    text = (f"# Recorded by pinbench record-reference at {data['source']['recorded']} from {runs};\n"
            f"# valid only for recipe version {data['recipe_version']}. Each metric's "
            "basis says how its tolerance was chosen.\n"
            + yaml.safe_dump(dict(data), sort_keys=False, allow_unicode=True, width=110))
    try:
        return write_atomic(path, text)
    except OSError as exc:
        blocked = blocking_parent(path)
        why = f"{blocked[0]} is {blocked[1]}, not a folder" if blocked else exc.strerror or str(exc)
        raise ValueError(f"{path}: cannot be written ({why})") from None
