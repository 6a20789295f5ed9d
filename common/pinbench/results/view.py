"""What ``pinbench view`` shows of one or more runs of one recipe: the numbers, every sample, and what each sample
is made of (its rollouts, the task's inputs), as JSON for the page (``templates/view``).

The numbers come from the runs' scorecards and ``samples.jsonl`` (``compare.load_run``: records the scorecard was
computed from, checked); the metric table is the report's (``build_rows``: value, interval, the reference's verdict).
The sample table has one column per per-sample value a metric reads (its result key, merged over the cohorts that read
it), with each run's value and the paired difference on the page.

What a sample is made of is recipe knowledge: a recipe says it in a module ``pinbench_recipes.<pkg>.view`` (as
``annotate``), with ``sample_media(run: RunInputs, sample_id, result) -> SampleMedia`` and optionally
``facets(sample_id, result) -> dict[str, str]`` and ``VALUES`` ({result key: direction or None}: per-sample values of
a recipe whose metrics all read derived records). Files are named as (folder, path inside it), never opened here: the
server and the bundle (``pinbench.ops.view``) resolve them inside that folder (``pinbench.ops.localweb``).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import Any

from pinbench.core.config import RecipeError
from pinbench.core.files import FileError, while_unchanged
from pinbench.core.provenance import scrubber
from pinbench.core.reference import diff, input_hashes, keeps_inputs, load_reference
from pinbench.core.run import ROLLOUTS
from pinbench.core.rundir import RunDirError, aside_owner
from pinbench.core.scorecard import MetricResult, RecordIndex, Scorecard, is_stand_in, metric_samples, scorecard_file
from pinbench.core.uncertainty import has_interval
from pinbench.results.compare import Run, load_run
from pinbench.results.report import (
    VERDICTS,
    build_rows,
    distinct_labels,
    finite_float,
    metric_group,
    reference_file_name,
    reference_name,
)

STATUS_CODES = {"ok": 0, "failed": 1, "missing": 2, "absent": 3}  # absent: not a sample of that run


class ViewError(ValueError):
    """Runs that cannot be viewed together; one line naming the file and what is wrong."""


# ------------------------------------------------------------------------------ what a recipe's view module returns


@dataclass(frozen=True)
class MediaFile:
    """A file named by where it must stay: ``relative`` inside ``root`` (resolved with ``resolve_inside``)."""

    root: Path
    relative: str


@dataclass(frozen=True)
class Video:
    """A video of a sample. ``offset_frames``: this video's frame ``offset_frames + f`` shows the moment of the
    rollout's frame ``f`` (MIND's GT continues the context from ``mark_time``); ``expected_sha256``: the bytes the
    run scored, when its record says, or (an input) ``expected_by`` says whose they are (the page warns when the file
    on disk is another); ``failed``: the error of a
    sample the run failed, whose record names no bytes (``View`` sets it: the page says the file is today's, and
    not the one that failed when it decodes now where the run's reader did not)."""

    label: str
    file: MediaFile | None
    expected_sha256: str | None = None
    offset_frames: int = 0
    problem: str | None = None
    failed: str | None = None
    since: str | None = None   # why the file may be another than the run read (``KEPT_ASIDE``)
    expected_by: str = "the run scored"   # what read ``expected_sha256``'s bytes, as the page names it


@dataclass(frozen=True)
class Image:
    label: str
    file: MediaFile


@dataclass(frozen=True)
class Marker:
    """A frame of the rollout worth jumping to (a departure, a revisit, a prompt's start)."""

    label: str
    frame: int


@dataclass(frozen=True)
class Span:
    """Frames ``[start, stop)`` of the rollout with a meaning (a prompt's segment, a scored clip)."""

    label: str
    start: int
    stop: int


@dataclass(frozen=True)
class Series:
    """A number per frame of the rollout (dynamic degree: flow magnitude per transition), with its threshold."""

    label: str
    frames: tuple[int, ...]
    values: tuple[float, ...]
    threshold: float | None = None
    threshold_label: str = ""


@dataclass(frozen=True)
class Text:
    label: str
    text: str


@dataclass
class SampleMedia:
    """One run's view of one sample: its rollouts, the task's inputs, and marks on the rollout's timeline.
    ``problems``: what could not be shown and why (no rollout found, a release that is not there)."""

    rollouts: list[Video] = field(default_factory=list)
    inputs: list[Video] = field(default_factory=list)
    images: list[Image] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


# what the view knows of a scorecard kept aside: not why (a rerun, or a hand move), nor when its files changed
KEPT_ASIDE = "this scorecard was kept aside"


def not_a_folder(path: Path) -> str:
    """What a sample's page says of a folder its files are looked for in that is not there (moved, deleted, or the
    run directory of a scorecard kept aside): "looked for" nothing, or "not under", named no cause."""
    return f"{path} is not a folder here"


def _from(folder: Path, bundle: Path | None) -> str:
    """``folder`` as the page names it: from ``bundle`` (POSIX, real paths) when one is written, else as given."""
    if bundle is None:
        return str(folder)
    return Path(os.path.relpath(os.path.realpath(folder), os.path.realpath(bundle))).as_posix()


@dataclass(frozen=True)
class RunInputs:
    """What a recipe's view module reads about a run: its folder and the configuration it recorded."""

    dir: Path
    card: Scorecard
    aside: bool = False   # a scorecard a rerun kept aside (``aside_owner``): ``dir`` is the run directory it left

    @property
    def options(self) -> Mapping[str, Any]:
        options = self.card.config.get("options")
        return options if isinstance(options, Mapping) else {}

    @property
    def fixture(self) -> bool:
        return self.card.mode == "fixture"

    @property
    def fixture_dir(self) -> Path:
        return self.dir / "fixture_data"

    @property
    def generated(self) -> Path | None:
        """The run's own rollouts folder when its scorecard records a generation (``--generator``,
        ``--skip-generation``): what it scored, in place of ``-o videos`` or a fixture's rollouts. None otherwise."""
        extra = self.card.provenance.get("extra")
        return self.dir / ROLLOUTS if isinstance(extra, Mapping) and "generation" in extra else None

    @cached_property
    def started_in(self) -> Path:
        """The folder the run was started from: the run directory's path less the relative ``out_dir`` it recorded
        (else the current folder)."""
        out_dir = self.card.config.get("out_dir")
        parts = Path(out_dir).parts if isinstance(out_dir, str) and not Path(out_dir).is_absolute() else ()
        here = self.dir.resolve()
        return Path(*here.parts[:-len(parts)]) if parts and here.parts[-len(parts):] == parts else Path.cwd()

    def recorded(self, value: str) -> Path:
        """A folder the run's provenance records (``Run.recorded_path``): absolute, or from the run directory; a
        relative one of an earlier version, as given, from the folder the run was started from."""
        path = Path(value)
        if path.is_absolute():
            return path
        return self.dir / path if (self.dir / path).exists() else self.started_in / path

    def option_path(self, name: str) -> Path | None:
        """A path option as the run read it: one inside the run directory as it named it (``out_dir``), inside
        ``dir`` (a run directory moved since: its old name named nothing there, or another run); else a relative one
        against the folder the run was started from (worked out once per run and name: a recipe's view asks for each
        of its samples)."""
        if name not in self._option_paths:
            value = self.options.get(name)
            path = Path(value).expanduser() if isinstance(value, str) and value else None
            out_dir = self.card.config.get("out_dir")
            # by its parts, not by string: a ".." after the run directory's name leads out of it (runs/mine/../b)
            if (path is not None and isinstance(out_dir, str) and out_dir and path.is_relative_to(out_dir)
                    and ".." not in path.relative_to(out_dir).parts):
                path = self.dir.resolve() / path.relative_to(out_dir)
            self._option_paths[name] = path if path is None or path.is_absolute() else self.started_in / path
        return self._option_paths[name]

    @cached_property
    def _option_paths(self) -> dict[str, Path | None]:
        return {}


# ------------------------------------------------------------------------------------------------ runs


@dataclass
class ViewRun:
    """A run as the page names it (its label), with its verdict against its reference and its metric rows."""

    run: Run
    label: str
    verdict: str
    rows: list[Any]  # report.Row per metric: value, interval, the reference's verdict
    reference_note: str = ""
    ran_differently: list[str] = field(default_factory=list)   # from the reference's run (a recorded reference)
    problems: list[str] = field(default_factory=list)  # why the verdict is not PASS (diff's problems)

    @property
    def card(self) -> Scorecard:
        return self.run.card

    @cached_property
    def inputs(self) -> RunInputs:
        folder = self.run.path.parent
        try:   # kept aside: its rollouts and fixture data are its run directory's (looked for beside it: none)
            aside = aside_owner(folder) == self.run.card.recipe
        except RunDirError:   # that directory's owner unknown: read as a folder of its own
            aside = False
        return RunInputs(folder.parent, self.run.card, aside=True) if aside else RunInputs(folder, self.run.card)


def _reference_rows(run: Run) -> tuple[str, list[Any], str, list[str], list[str]]:
    """(verdict, metric rows, note, what ran differently from a recorded reference's run, why the verdict is not
    PASS): the run judged against the recipe's reference for its checkpoint and mode, its samples' input hashes
    beside (as ``pinbench diff`` names the samples of other inputs than the reference's run). The note and the
    problems say at the top of the page why a run has no reference or did not match it (as ``pinbench diff`` says
    them); a badge alone sent the reader to the terminal."""
    from pinbench.core.recipe import get_recipe

    card = run.card
    try:
        recipe = get_recipe(card.recipe)
        path = recipe.reference_of(card)
        ref = load_reference(path, recipe=recipe) if path else None
    except (RecipeError, FileError, ValueError) as exc:
        if isinstance(exc, FileError) and exc.path is not None:  # named as a read one is, not by this machine's path
            exc = FileError(reference_file_name(exc.path, card.recipe), exc.reason, exc.line)
        return "NO REFERENCE", build_rows(card, None, None), f"reference not read: {exc}", [], []
    if ref is None:
        return "NO REFERENCE", build_rows(card, None, None), recipe.no_reference_of(card), [], []
    name = reference_name(ref)   # the page is shared: not this machine's folders
    hashes = input_hashes(list(run.samples.values())) if keeps_inputs(ref) else None
    result = diff(card, ref, name=name, inputs=hashes)
    return (VERDICTS[result.exit_code], build_rows(card, ref, result), f"reference: {name}", result.ran_differently,
            list(result.problems))


def load_runs(paths: Sequence[Path | str | Run]) -> list[ViewRun]:
    """The runs (folders or their scorecard.json, or runs ``compare`` loaded already), of one recipe; ViewError in
    one line otherwise."""
    if not paths:
        raise ViewError("no run given")
    runs = []
    for path in paths:
        try:
            runs.append(path if isinstance(path, Run) else load_run(path))
        except (ValueError, OSError) as exc:  # CompareError, ScorecardError, a bad samples.jsonl line: one line each
            raise ViewError(str(exc)) from None
    named = [path.path if isinstance(path, Run) else path for path in paths]
    seen: dict[Path, int] = {}
    for i, run in enumerate(runs):
        first = seen.setdefault(run.path.resolve(), i)
        if first != i:   # two identical columns, unsaid ("compare" says it of A and B)
            raise ViewError(f"{named[first]} and {named[i]} are the same scorecard ({run.path}): name each run once")
    recipes = {r.card.recipe for r in runs}
    if len(recipes) > 1:
        raise ViewError(f"runs of one recipe are viewed together, these are of {', '.join(sorted(recipes))}")
    labels = distinct_labels([f"{r.card.checkpoint}" + ("" if r.card.mode == "full" else f" ({r.card.mode})")
                              for r in runs], [r.path.parent.name for r in runs])
    out = []
    for run, label in zip(runs, labels, strict=True):
        out.append(ViewRun(run, label, *_reference_rows(run)))
    return out


def view_module(recipe: str) -> ModuleType | None:
    """The recipe's ``view`` module, or None when it has none (the view then shows numbers only)."""
    from pinbench.core.recipe import get_recipe

    try:
        package = get_recipe(recipe).package
    except RecipeError:
        return None
    name = f"{package}.view"
    return importlib.import_module(name) if importlib.util.find_spec(name) is not None else None


# ------------------------------------------------------------------------------------------------ the view


@dataclass(frozen=True)
class Column:
    """A per-sample value of the sample table: a result key, its direction (None: the metrics disagree, or none
    says), whether a primary metric reads it."""

    key: str
    direction: str | None
    primary: bool


class RunSamples:
    """One run's records by sample: each sample metric's values (and failures), cohorts, derived memberships."""

    def __init__(self, run: ViewRun):
        card = run.card
        index = RecordIndex(run.run.records)
        self.records = {r.sample_id: r for r in index.samples}
        self.derived = {r.derived_id: r for r in index.derived}
        self.metrics: dict[str, tuple[dict[str, tuple[float, Any]], dict[str, str]]] = {}
        self.missing: dict[str, None] = {}
        self.cohort: dict[str, str] = {}
        for name, metric in card.metrics.items():
            self.metrics[name] = metric_samples(name, metric, index)
            if metric.reads_derived:
                continue
            self.missing.update(dict.fromkeys(metric.missing or ()))
            group = metric_group(name)  # a sample's cohort: the shortest group of the metrics that name it
            for sample_id in metric.sample_ids or ():
                if sample_id not in self.cohort or len(group) < len(self.cohort[sample_id]):
                    self.cohort[sample_id] = group
        # by sample: each metric's value or why it has none; by derived record: each metric's value
        self.values: dict[str, list[dict[str, Any]]] = {}
        self.derived_values: dict[str, dict[str, float]] = {}
        for name, (scored, failed) in self.metrics.items():
            if card.metrics[name].reads_derived:
                for derived_id, (value, _) in scored.items():
                    self.derived_values.setdefault(derived_id, {})[name] = value
                continue
            for sample_id, (value, _) in scored.items():
                self.values.setdefault(sample_id, []).append({"name": name, "value": value})
            for sample_id, reason in failed.items():
                self.values.setdefault(sample_id, []).append({"name": name, "value": None, "reason": reason})
        self.member_of: dict[str, list[str]] = {}
        for record in index.derived:
            for member in record.members:
                self.member_of.setdefault(member, []).append(record.derived_id)

    def status(self, sample_id: str) -> tuple[str, str | None]:
        record = self.records.get(sample_id)
        if record is not None:   # a merge's stand-in was never computed: missing, as the scorecard counts it
            return ("missing" if is_stand_in(record) else record.status), record.error
        if sample_id in self.missing:
            return "missing", "no record: never run, or its shard did not finish"
        return "absent", None


class View:
    """The page data of some runs of one recipe (``load_runs``)."""

    def __init__(self, runs: list[ViewRun], module: ModuleType | None = None):
        self.runs = runs
        self.recipe = runs[0].card.recipe
        self.module = module
        self.by_run = [RunSamples(run) for run in runs]
        self.scrub = scrubber()  # every string the page shows is redacted (the environment's secrets read once)
        ids: dict[str, None] = {}
        for samples in self.by_run:
            ids.update(dict.fromkeys(samples.records))
            ids.update(dict.fromkeys(samples.missing))
        self.ids = list(ids)
        self.position = {sample_id: i for i, sample_id in enumerate(self.ids)}
        self.columns = self._columns()

    # -- columns and facets

    def _columns(self) -> list[Column]:
        found: dict[str, list[MetricResult]] = {}
        for run in self.runs:
            for name, metric in run.card.metrics.items():
                if not metric.reads_derived and metric.aggregation != "none":
                    found.setdefault(metric.key or name, []).append(metric)
        columns = []
        for key, metrics in found.items():
            directions = {m.direction for m in metrics}
            columns.append(Column(key, directions.pop() if len(directions) == 1 else None,
                                  any(m.primary for m in metrics)))
        for key, direction in (getattr(self.module, "VALUES", None) or {}).items():
            if key not in found:
                columns.append(Column(key, direction, False))
        return sorted(columns, key=lambda c: not c.primary)

    def _values(self, run: int, column: Column) -> list[float | None]:
        """The column's value for every sample in one run (None where it has none), read the way the scorecard
        read it (a recipe's ``VALUES`` column: the result's number)."""
        samples = self.by_run[run]
        values: list[float | None] = [None] * len(self.ids)
        readers = [name for name, m in self.runs[run].card.metrics.items()
                   if (m.key or name) == column.key and not m.reads_derived]
        for name in readers:
            for sample_id, (value, _) in samples.metrics[name][0].items():
                values[self.position[sample_id]] = value
        if not readers:
            for sample_id, record in samples.records.items():
                if record.result is not None:
                    values[self.position[sample_id]] = finite_float(record.result.get(column.key))
        return values

    def _facets(self) -> list[tuple[str, list[str | None]]]:
        named: dict[str, list[str | None]] = {}
        cohort: dict[str, str] = {}
        records: dict[str, Any] = {}
        for samples in reversed(self.by_run):  # the first run that has a sample says
            cohort.update(samples.cohort)
            records.update(samples.records)
        cohorts = [cohort.get(i) for i in self.ids]
        if any(cohorts):
            named["cohort"] = cohorts
        facets = getattr(self.module, "facets", None)
        if facets is not None:
            for k, sample_id in enumerate(self.ids):
                record = records.get(sample_id)
                for name, value in facets(sample_id, record.result if record else None).items():
                    if name not in named:  # not setdefault: its default, a list of every sample, is built each call
                        named[name] = [None] * len(self.ids)
                    named[name][k] = str(value)
        return list(named.items())

    # -- the page's data

    def summary(self, bundle: Path | None = None) -> dict[str, Any]:
        """The runs, their metric table, and what the sample table can be sorted and filtered by. Each run's
        ``dir`` is from ``bundle`` when one is written (as its media's sources are from the run's folder): a bundle
        is copied elsewhere, where this machine's absolute paths name nothing and would tell its folder layout."""
        names: dict[str, None] = {}
        for run in self.runs:
            names.update(dict.fromkeys(row.name for row in run.rows))
        metrics = []
        for name in names:
            rows = [next((row for row in run.rows if row.name == name), None) for run in self.runs]
            first = next(row for row in rows if row is not None)
            metrics.append({"name": name, "primary": any(r.starred for r in rows if r), "direction": first.direction,
                            "cells": [_cell(row) for row in rows]})
        return self.scrub({
            "recipe": self.recipe, "n_samples": len(self.ids),
            "runs": [{"label": run.label, "dir": _from(run.run.path.parent, bundle), "checkpoint": run.card.checkpoint,
                      "mode": run.card.mode, "recipe_version": run.card.recipe_version, "status": run.card.status,
                      "status_reasons": list(run.card.status_reasons), "verdict": run.verdict,
                      "reference_note": run.reference_note, "problems": run.problems, "ran_differently": [
                          *(f"from run A: {line}" for line in self.runs[0].card.ran_differently(
                              run.card, ("A", "this run"))),
                          *run.ran_differently], "n_expected": run.card.samples.n_expected,
                      "n_ok": run.card.samples.n_ok, "n_failed": run.card.samples.n_failed,
                      "n_missing": run.card.samples.n_missing} for run in self.runs],
            "metrics": metrics,
            "columns": [{"key": c.key, "direction": c.direction, "primary": c.primary} for c in self.columns],
        })

    def table(self) -> dict[str, Any]:
        """Every sample: its facets, its status in each run and each column's value in each run (column-major)."""
        facets = self._facets()
        facet_json = []
        for name, values in facets:
            levels = sorted({v for v in values if v is not None})
            where = {v: i for i, v in enumerate(levels)}
            facet_json.append({"name": name, "levels": levels,
                               "of": [where[v] if v is not None else -1 for v in values]})
        status, errors, values = [], [], []
        for r, samples in enumerate(self.by_run):
            codes, reasons = [], {}
            for k, sample_id in enumerate(self.ids):
                state, error = samples.status(sample_id)
                codes.append(STATUS_CODES[state])
                if error:
                    reasons[str(k)] = error
            status.append(codes)
            errors.append(reasons)
            values.append([self._values(r, column) for column in self.columns])
        return {"ids": self.scrub(self.ids), "facets": self.scrub(facet_json), "status": status,
                "errors": self.scrub(errors), "values": values}

    def sample(self, index: int, media: Callable[[int, Video | Image], dict[str, Any]]) -> dict[str, Any]:
        """One sample in every run: status, every metric's value (or why none), the derived records it is a member
        of, the record, and its media (``media(run, video_or_image)`` turns a file into what the page loads)."""
        return self.scrub(self._sample(index, media))

    def sample_json(self, index: int, media: Callable[[int, Video | Image], dict[str, Any]]) -> str:
        """``sample`` as compact JSON text (``COMPACT_JSON``): a bundle's data, encoded once."""
        return self.scrub.json(self._sample(index, media))

    def _sample(self, index: int, media: Callable[[int, Video | Image], dict[str, Any]]) -> dict[str, Any]:
        sample_id = self.ids[index]
        runs, inputs, seen = [], [], set()
        for r, (run, samples) in enumerate(zip(self.runs, self.by_run, strict=True)):
            state, error = samples.status(sample_id)
            record = samples.records.get(sample_id)
            derived = [{"id": i, "n_members": len(samples.derived[i].members),
                        "metrics": samples.derived_values.get(i, {})} for i in samples.member_of.get(sample_id, [])]
            entry: dict[str, Any] = {"status": state, "error": error, "metrics": samples.values.get(sample_id, []),
                                     "derived": derived,
                                     "record": record.to_json() if record is not None else None}
            found = self._media(run, sample_id, record.result if record else None) if state != "absent" else None
            if found is not None:
                entry.update(rollouts=[media(r, self._qualified(run, v, state, error)) for v in found.rollouts],
                             markers=[vars(m) for m in found.markers], spans=[vars(s) for s in found.spans],
                             series=[{**vars(s), "frames": list(s.frames), "values": list(s.values)}
                                     for s in found.series], problems=list(found.problems))
                for item in (*found.inputs, *found.images, *found.texts):
                    key = (type(item).__name__, item.label, getattr(item, "file", None), getattr(item, "text", None))
                    if key not in seen:
                        seen.add(key)
                        inputs.append({"kind": "text", "label": item.label, "text": item.text}
                                      if isinstance(item, Text) else media(r, item))
            runs.append(entry)
        return {"id": sample_id, "index": index, "runs": runs, "inputs": inputs}

    @staticmethod
    def _qualified(run: ViewRun, video: Video, state: str, error: str | None) -> Video:
        """``video`` with why its file may not hold the bytes the run read: the error of a failed sample whose record
        names no digest, or ``KEPT_ASIDE`` for a scorecard kept aside."""
        if video.file is None:
            return video
        if state == "failed" and not video.expected_sha256:
            video = replace(video, failed=error)
        return replace(video, since=KEPT_ASIDE) if run.inputs.aside else video

    def _media(self, run: ViewRun, sample_id: str, result: Mapping[str, Any] | None) -> SampleMedia | None:
        hook = getattr(self.module, "sample_media", None)
        if hook is None:
            return None
        try:
            return hook(run.inputs, sample_id, result)
        except (RecipeError, FileError, ValueError, OSError) as exc:
            return SampleMedia(problems=[f"{self.recipe} view: {exc}"])


@while_unchanged(lambda paths: [scorecard_file(path) for path in paths], maxsize=1)
def view_of(paths: tuple[Path, ...]) -> View:
    """The View of the runs (``load_runs``) as their scorecards are now: built again once one changed (a rerun
    finished under a long-running ``pinbench view`` server: a run writes its scorecard after its samples file), else
    the one built before. A scorecard alone: a samples file a run is still writing is no new result."""
    runs = load_runs(paths)
    return View(runs, view_module(runs[0].card.recipe))


def _cell(row: Any) -> dict[str, Any] | None:
    if row is None:
        return None
    interval = row.interval
    cell = {"value": row.measured, "n_scored": row.n_scored, "n_expected": row.n_expected, "status": row.status,
            "low": interval.low if has_interval(interval) else None,
            "high": interval.high if has_interval(interval) else None}
    if row.ref is not None:
        cell["reference"] = row.ref.value
    return cell
