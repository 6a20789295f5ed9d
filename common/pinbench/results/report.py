"""Static HTML report for one or more scorecards (and ``pinbench compare`` results): the page a reviewer opens.

Why a static page: it must open offline, inside an air-gapped cluster or from a CI artifact, so it has
no JavaScript and no network resources; plots are PNGs written next to ``index.html`` and linked
relatively. The page is the Jinja2 template ``templates/report.html.j2``; this module decides what it
shows and in which order: failures first (failing metrics, failed samples, the worst per-sample figures),
every value with its 95% interval, one plot of all metrics in units of their tolerance, distributions over
exactly the samples each metric was computed from, and at most a few per-sample figures.

A partial or failed run is marked at the top of its section, and a scorecard is only called PASS against a
reference when the run is complete and comparable (same recipe, version, checkpoint, mode and sample
count). Every string from data is redacted (the environment's ``finalize``) and HTML-escaped (autoescape).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from stat import S_ISREG
from typing import TYPE_CHECKING, Any

import numpy as np

import pinbench
from pinbench.core.files import (
    FileError,
    claim_output_folder,
    counted,
    loads_finite_json,
    read_regular_text,
    write_if_changed,
)
from pinbench.core.jsonfields import TEXT, JsonBlock, spec
from pinbench.core.notices import announced
from pinbench.core.provenance import redactor, scrub
from pinbench.core.reference import (
    EXIT_FAIL,
    EXIT_INCOMPLETE,
    EXIT_MISMATCH,
    EXIT_PASS,
    DiffResult,
    DiffRow,
    MetricReference,
    Reference,
    diff,
    input_hashes,
    keeps_inputs,
    reference_from_dict,
)
from pinbench.core.scorecard import (
    MetricResult,
    RecordIndex,
    Scorecard,
    degenerate_notes,
    load_scorecard,
    metric_samples,
    samples_text,
    validate_scorecard,
)
from pinbench.core.uncertainty import Interval, describe, has_interval

if TYPE_CHECKING:
    from pinbench.results.compare import Comparison

FIGURES_DIR = "figures"
# Beside scorecard.json: the figures the recipe drew for the run, so that every report of it shows them, the run's
# own report/ and `pinbench report`'s alike (one report, whichever way it is written).
FIGURES_INDEX = "figures.json"
REPORT_MARK = ".pinbench-report"  # written first into a folder `pinbench report --out` names
_FOOTER = '<footer class="muted"><p>pinbench '  # every report page's footer (report.html.j2)
_FIGURES_FORMAT = 1
TOP_LEVEL = "top level"  # the group of metrics whose name has no "/"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
N_EXTREMES = 3  # per-sample figures shown: this many worst and this many best per ranking metric
# The page's text beside a figure (templates/report.html.j2: tables and captions 13-14 px). A recipe's PNG is shown
# at its own pixel size (up to the page's 1118 px of content), so its text matches the page when drawn at
# ``figure_points(px, dpi)``; a smaller font reads as a thumbnail's.
PAGE_TEXT_PX = 13
PAGE_WIDTH_PX = 1118
VERDICTS = {EXIT_PASS: "PASS", EXIT_FAIL: "FAIL", EXIT_INCOMPLETE: "INCOMPLETE", EXIT_MISMATCH: "MISMATCH"}
_STATUS_ORDER = {"FAIL": 0, "MISSING": 1, "INCOMPLETE": 2, "MISMATCH": 3, "PASS": 4, "": 5}
_STATUS_BADGE = {"complete": "PASS", "partial": "INCOMPLETE", "failed": "FAIL"}
_VERDICT_BADGE = {"PASS": "PASS", "FAIL": "FAIL", "INCOMPLETE": "INCOMPLETE", "MISMATCH": "FAIL",
                  "NO REFERENCE": "none"}
_MODE_NOTES = {
    "fixture": "FIXTURE run on synthetic data: it tests the pipeline, it is not a benchmark score.",
    "smoke": "SMOKE run on a subset: not comparable with a full-run reference.",
}

# (title, png, caption) for a recipe figure, or (title, png, caption, sample_id) for one sample's figure:
# those are ranked, and only the failures, the worst and the best few are shown.
ExtraFigure = tuple


def figure_points(px: float, dpi: float) -> float:
    """The font size, in points, of text ``px`` pixels tall in a figure saved at ``dpi`` (a point is 1/72 inch)."""
    return px * 72 / dpi


class ReportError(ValueError):
    """Bad input to the report: one line naming the input and what is wrong."""


# ----------------------------------------------------------------------------------------- inputs


def finite_float(value: Any) -> float | None:
    """A finite float, or None for anything else (null, NaN, bools, lists)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _load_card(card: Path | str | Scorecard, index: int) -> tuple[Scorecard, str]:
    """The validated scorecard and where it came from: its path, or what names an in-memory one."""
    if not isinstance(card, Scorecard):
        return load_scorecard(card), str(card)
    origin = f"scorecard #{index} ({card.recipe} / {card.checkpoint})"
    try:
        validate_scorecard(card.to_json())
    except ValueError as exc:
        raise ReportError(f"{origin}: {exc}") from None
    return card, origin


def as_reference(ref: Reference | Mapping[str, Any], origin: str) -> Reference:
    """A loaded Reference, or one built from the reference YAML as a dict (validated the same way)."""
    if isinstance(ref, Reference):
        return ref
    if isinstance(ref, Mapping):
        try:
            return reference_from_dict(ref)
        except ValueError as exc:
            raise ReportError(f"{origin}: {exc}") from None
    raise ReportError(f"{origin}: expected a pinbench.core.reference.Reference or the reference YAML as a "
                      f"mapping, got {type(ref).__name__}")


def reference_name(ref: Reference) -> str:
    """The reference file as a page meant to be shared names it: from its recipe folder's parent
    (``camerabench/references/gpt-4o.yaml``), by its file name when it lies elsewhere. Its absolute path named
    nothing where the page was read and told this machine's folder layout (``View.summary``'s run folders are
    relative for that reason)."""
    return "(in memory)" if ref.path is None else reference_file_name(ref.path, ref.recipe)


def reference_file_name(path: Path, recipe: str) -> str:
    """``reference_name`` of the file at ``path`` for ``recipe``: also of one that could not be read."""
    from pinbench.core.recipe import RecipeError, get_recipe

    path = Path(os.path.realpath(path))
    try:
        top = Path(os.path.realpath(get_recipe(recipe).dir)).parent
    except RecipeError:
        return path.name
    return path.relative_to(top).as_posix() if path.is_relative_to(top) else path.name


def no_reference_reason(card: Scorecard) -> str:
    """Why a run is shown without a reference, as ``pinbench diff`` and the view say it
    (``Recipe.no_reference_of``): a NO REFERENCE badge alone sent the reader to the terminal."""
    from pinbench.core.recipe import RecipeError, get_recipe

    try:
        recipe = get_recipe(card.recipe)
        if recipe.reference_of(card) is None:
            return recipe.no_reference_of(card)
    except RecipeError:
        return f"recipe {card.recipe!r} is not installed here"
    return "the recipe's reference for this run was not given"


def _per_card(mapping: Mapping[Any, Any] | None, names: list[str], what: str) -> list[Any]:
    """Pick each scorecard's entry by index (int or digit string) first, then by recipe name."""
    if not mapping:
        return [None] * len(names)
    picked, used = [], set()
    for i, name in enumerate(names):
        for key in (i, str(i), name):
            if key in mapping:
                picked.append(mapping[key])
                used.add(key)
                break
        else:
            picked.append(None)
    unused = [str(k) for k in mapping if k not in used]
    if unused:
        raise ReportError(
            f"{what}: key(s) {', '.join(sorted(unused))} match no scorecard "
            f"(use a recipe name from {sorted(set(names))} or an index 0..{len(names) - 1})"
        )
    return picked


@dataclass(frozen=True)
class Extra:
    """A recipe's figure: of the run (``sample_id`` None), or of one sample (ranked: failures, worst, best)."""

    title: str
    src: Path
    caption: str
    sample_id: str | None


def _png_problem(path: Path) -> str | None:
    """Why ``path`` is not a PNG file to show (unreadable, not a regular file, another format), or None. Opened
    without blocking and checked with fstat first: a FIFO or a device posing as a figure is refused at once."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return f"not readable ({exc.strerror})"
    try:
        if not S_ISREG(os.fstat(fd).st_mode):
            return "is not a regular file"
        return None if os.read(fd, len(PNG_SIGNATURE)) == PNG_SIGNATURE else "is not a PNG file"
    except OSError as exc:
        return f"not readable ({exc.strerror})"
    finally:
        os.close(fd)


def _check_extras(entries: Sequence[Any] | None, origin: str) -> list[Extra]:
    out = []
    for entry in entries or []:
        if not isinstance(entry, (tuple, list)) or len(entry) not in (3, 4):
            raise ReportError(f"{origin}: extra figure must be (title, png_path, caption[, sample_id]), "
                              f"got {entry!r}")
        src = Path(entry[1])
        problem = _png_problem(src)
        if problem:
            raise ReportError(f"{src}: extra figure {problem}")
        sample = entry[3] if len(entry) == 4 else None   # a core.run.Figure has four fields, the last may be None
        out.append(Extra(str(entry[0]), src, str(entry[2]), None if sample is None else str(sample)))
    return out


def record_figures(run_dir: Path, figures: Sequence[ExtraFigure]) -> None:
    """Write ``run_dir/figures.json``, the figures a recipe drew for this run (PNGs inside ``run_dir``), for every
    report of the run to show; with none, an earlier index is removed."""
    index = Path(run_dir) / FIGURES_INDEX
    extras = _check_extras(figures, f"figures of {run_dir}")
    if not extras:
        index.unlink(missing_ok=True)
        return
    root = Path(run_dir).resolve()
    entries = []
    for extra in extras:
        src = extra.src.resolve()
        if root not in src.parents:
            raise ReportError(f"{extra.src}: a figure of the run in {run_dir} must be inside it")
        entries.append(_IndexedFigure(extra.title, src.relative_to(root).as_posix(), extra.caption, extra.sample_id))
    write_if_changed(index, json.dumps(_FigureIndex(tuple(entries)).to_json(), indent=1) + "\n")


@dataclass(frozen=True)
class _IndexedFigure(JsonBlock):
    """A figure's entry in ``figures.json``: its PNG relative to the run directory."""

    title: str
    png: str = spec(TEXT)
    caption: str
    sample_id: str | None = None


@dataclass(frozen=True)
class _FigureIndex(JsonBlock):
    """``figures.json``: the figures a recipe drew for its run, in the index's format."""

    format: int = field(init=False, default=_FIGURES_FORMAT)
    figures: tuple[_IndexedFigure, ...]


def run_figures(scorecard: Path) -> list[Extra]:
    """The figures ``figures.json`` beside ``scorecard`` names ([] when there is none). ReportError, one line naming
    the file, for an index that is not one, or a figure outside the run directory, not a regular file or no PNG."""
    run_dir = Path(scorecard).parent
    index = run_dir / FIGURES_INDEX
    if not index.exists() and not index.is_symlink():
        return []
    text = read_regular_text(index)
    if text is None:
        raise ReportError(f"{index}: not a readable UTF-8 regular file")
    try:
        entries = _FigureIndex.from_json(loads_finite_json(text)).figures
    except ValueError as exc:
        raise ReportError(f"{index}: {exc}") from None
    root = run_dir.resolve()
    extras = []
    for entry in entries:
        png = PurePosixPath(entry.png)
        src = run_dir / png
        if png.is_absolute() or ".." in png.parts or "\\" in entry.png or root not in src.resolve().parents:
            raise ReportError(f"{index}: figure {entry.png!r} is not a file inside {run_dir}")
        problem = _png_problem(src)
        if problem:
            raise ReportError(f"{index}: figure {src} {problem}")
        extras.append(Extra(entry.title, src, entry.caption, entry.sample_id))
    return extras


# ----------------------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class Row:
    """One metric of a scorecard next to its reference and diff's verdict on it (if any)."""

    name: str
    group: str
    measured: float | None
    aggregation: str | None
    n_expected: int
    n_scored: int | None
    n_failed: int | None
    n_missing: int | None
    interval: Interval | None
    ref: MetricReference | None
    checked: DiffRow | None
    status: str  # PASS | FAIL | MISSING | INCOMPLETE | "" (no reference)
    direction: str | None = None
    primary: bool = False

    @property
    def starred(self) -> bool:
        """Primary by the scorecard or by the reference it is judged against."""
        return self.primary or (self.ref is not None and self.ref.primary)

    @property
    def bound(self) -> float:
        assert self.ref is not None
        return self.ref.tolerance.bound(self.ref.value)

    def in_tolerances(self, value: float) -> float:
        """``value - reference`` in units of the tolerance (±inf off a zero tolerance)."""
        assert self.ref is not None
        delta = value - self.ref.value
        if self.bound > 0:
            return delta / self.bound
        return 0.0 if abs(delta) <= 1e-12 * max(1.0, abs(self.ref.value)) else math.copysign(math.inf, delta)


def metric_group(name: str) -> str:
    """A metric's group: its name up to the last ``/`` ("" for none)."""
    return name.rsplit("/", 1)[0] if "/" in name else ""


def _row_status(checked: DiffRow | None, metric: MetricResult) -> str:
    """diff's status, except that a value computed over fewer samples than expected is INCOMPLETE:
    it is shown next to the reference but never judged as if the run were complete."""
    if checked is None:
        return ""
    if checked.status in ("PASS", "FAIL") and metric.n_scored < metric.n_expected:
        return "INCOMPLETE"
    return checked.status


def build_rows(card: Scorecard, ref: Reference | None, result: DiffResult | None) -> list[Row]:
    """Scorecard metrics, then reference metrics the scorecard lacks, grouped (:func:`grouped`)."""
    metrics = card.metrics
    checked = {row.metric: row for row in result.rows} if result else {}
    rows = [Row(name=name, group=metric_group(name), measured=finite_float(m.value), aggregation=m.aggregation,
                n_expected=m.n_expected, n_scored=m.n_scored, n_failed=m.n_failed,
                n_missing=m.n_missing, interval=m.interval,
                ref=ref.metrics.get(name) if ref else None, checked=checked.get(name),
                status=_row_status(checked.get(name), m), direction=m.direction, primary=m.primary)
            for name, m in metrics.items()]
    for name, row in checked.items():
        if name not in metrics and ref is not None:
            rows.append(Row(name, metric_group(name), None, None, card.samples.n_expected, None, None, None,
                            None, ref.metrics[name], row, row.status, ref.metrics[name].direction,
                            ref.metrics[name].primary))
    return [row for _, members in grouped(rows) for row in members]


def grouped(rows: Sequence[Row]) -> list[tuple[str, list[Row]]]:
    """Rows by group (a metric's name up to its last ``/``: a split, a perspective, a modality): groups holding a
    primary metric first, then in the order they first appear; in a group primary metrics first, then failures,
    else in the given order."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.group, []).append(row)
    order = sorted(groups, key=lambda g: not any(r.starred for r in groups[g]))
    return [(g, sorted(groups[g], key=lambda r: (not r.starred, _STATUS_ORDER[r.status]))) for g in order]


def _num(value: Any, spec: str = ".6g") -> str:
    v = finite_float(value)
    return "—" if v is None else format(v, spec)


def _interval_note(interval: Interval | None) -> str:
    if not has_interval(interval):
        return ""
    parts = [f"{interval.method} over {interval.n_units} {interval.unit}s",
             f"{interval.n_resamples} resamples, seed {interval.seed}", interval.implementation]
    return "; ".join(parts + ([interval.note] if interval.note else []))


def _interval_cell(interval: Interval | None) -> tuple[str, str]:
    """(cell, hover text): ``[low, high]`` with its method, or ``n/a`` with the reason.

    The reason is a sentence; in the cell it would widen the table past the page (or, wrapped, make every
    row many lines tall), so the table says ``n/a`` and lists each distinct reason once below it.
    """
    if has_interval(interval):
        return describe(interval), _interval_note(interval)
    return "n/a", describe(interval).removeprefix("n/a (").removesuffix(")")


def _na_reasons(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each distinct reason for an n/a interval, with how many metrics it applies to, in table order."""
    counts = Counter(row["na_reason"] for row in rows if row.get("na_reason"))
    return [f"{reason} ({n} metric{'s' if n > 1 else ''})" for reason, n in counts.items()]


def _row_view(row: Row) -> dict[str, Any]:
    counts = "not in scorecard" if row.n_scored is None else f"{row.n_scored} / {row.n_expected}"
    lost = ", ".join(f"{n} {what}" for n, what in ((row.n_failed, "failed"), (row.n_missing, "missing")) if n)
    interval, note, na_reason = "—", "", ""
    if row.n_scored is not None:
        interval, note = _interval_cell(row.interval)
        na_reason = note if interval == "n/a" else ""
    direction = (row.ref.direction if row.ref else None) or row.direction
    short = row.name[len(row.group) + 1:] if row.group else row.name  # under its group's heading
    star = " ★" if row.starred else ""
    view: dict[str, Any] = {"name": row.name + star, "short": short + star,
                            "full": row.name, "measured": row.measured,
                            "arrow": {"higher": "↑", "lower": "↓"}.get(direction or "", ""), "interval": interval,
                            "interval_note": note, "na_reason": na_reason, "aggregation": row.aggregation or "—",
                            "counts": counts, "lost": lost, "has_ref": row.ref is not None, "status": row.status}
    if row.ref is None or row.checked is None:
        return view
    checked = row.checked
    delta = "—" if checked.delta is None else f"{checked.delta:+.3g}"
    z = "—" if checked.delta is None else f"{row.in_tolerances(row.measured):+.3g}"
    noise = {"within noise": "within", "outside noise": "outside", "noise unknown": "unknown"}.get(checked.reading, "—")
    if checked.noise is not None:
        noise += f" (±{checked.noise:.3g})"
    view.update(reference=row.ref.value, ref_note=row.ref.note or "",
                tolerance=checked.tolerance_text, delta=delta, z=z, noise=noise)
    return view


# ----------------------------------------------------------------------------------------- sections


@dataclass
class _Section:
    index: int
    card: Scorecard
    origin: str
    ref: Reference | None
    samples: list[Any] | None
    extras: list[Extra]
    from_file: bool
    label: str

    @property
    def anchor(self) -> str:
        return f"s{self.index + 1:02d}"

    @property
    def folder(self) -> str:
        """The run directory's name, as the section's label names it: the scorecard file's folder, else the
        out_dir an in-memory scorecard records."""
        run = Path(self.origin).parent if self.from_file else Path(str(self.card.config.get("out_dir", ".")))
        return Path(os.path.abspath(run)).name

    @property
    def config(self) -> dict[str, Any]:
        """The run's config with out_dir by the run folder's name: its absolute path named the author's folders on
        a shared page. The scorecard keeps it as given: the view resolves a run's relative options from it."""
        config = dict(self.card.config)
        if "out_dir" in config:
            config["out_dir"] = self.folder
        return config

    @property
    def scorecard(self) -> str:
        """The scorecard in the summary: in its run folder, not by this machine's path to it."""
        if not self.from_file:
            return f"{self.origin}, in memory (not read from a file)"
        return f"{self.folder}/{Path(self.origin).name}"


def distinct_labels(labels: Sequence[str], folders: Sequence[str | None]) -> list[str]:
    """``labels`` made distinct: by each run's folder name (None: it has none) where two are alike, then by their
    position. Two runs of one checkpoint read as one on a page otherwise, a PASS and a MISMATCH side by side."""
    out = list(labels)
    if len(set(out)) < len(out):
        out = [f"{label} {folder}" if folder else label for label, folder in zip(out, folders, strict=True)]
    if len(set(out)) < len(out):
        out = [f"{label} #{i + 1}" for i, label in enumerate(out)]
    return out


class _Figures:
    """The recipes' PNG figures a report shows, copied under ``figures/`` (unchanged copies are not rewritten) and
    linked relatively; stale ones removed. The report's own figures are inline SVG."""

    def __init__(self, out_dir: Path) -> None:
        self.dir = out_dir / FIGURES_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self.written: set[Path] = set()

    def copy(self, src: Path, name: str, title: str, caption: str = "") -> dict[str, str]:
        import filecmp

        dest = self.dir / name
        self.written.add(dest)
        if not (dest.is_file() and filecmp.cmp(src, dest, shallow=False)):
            shutil.copyfile(src, dest)
        return {"src": f"{FIGURES_DIR}/{dest.name}", "title": title, "caption": caption}

    def remove_stale(self) -> None:
        for stale in self.dir.glob("*.png"):
            if stale not in self.written:
                stale.unlink()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:40] or "x"


def _anchor(sec: _Section, group: str) -> str:
    return f"{sec.anchor}-g-{_slug(group or 'metrics')}"


def _deviation_figures(sec: _Section, rows: Sequence[Row]) -> list[dict[str, Any]]:
    """One SVG per metric group: each judged metric against its reference, in units of its tolerance."""
    from pinbench.results.report_svg import Deviation, deviations_svg

    figures = []
    for group, members in grouped([row for row in rows if row.ref is not None]):
        points = []
        for row in members:
            ref_interval = row.ref.interval
            run = ((row.in_tolerances(row.interval.low), row.in_tolerances(row.interval.high))
                   if has_interval(row.interval) else None)
            z = row.in_tolerances(row.measured) if row.measured is not None else None
            short = row.name[len(group) + 1:] if group else row.name
            points.append(Deviation(
                label=short + (" ★" if row.ref.primary else "") + (" ↑" if row.ref.direction == "higher" else " ↓"),
                status=row.status, z=z, run=run,
                ref=(row.in_tolerances(ref_interval.low), row.in_tolerances(ref_interval.high))
                if ref_interval else None,
                hover=f"{row.name}: {row.status or 'not judged'}"
                      + (f", (value - reference) / tolerance {z:+.3g}" if z is not None and math.isfinite(z) else "")))
        failing = sum(1 for row in members if row.status != "PASS")
        figures.append({"title": group or TOP_LEVEL, "anchor": _anchor(sec, group),
                        "svg": deviations_svg(points, f"{group or 'metrics'} against the reference"),
                        "note": f"{counted(len(members), 'metric')}, {failing} not PASS"})
    return figures


def _median(values: np.ndarray) -> float:
    """The median by partition (``np.median`` imports ``numpy.ma`` on first use: 0.07 s of a 0.2 s report)."""
    middle = values.size // 2
    if values.size % 2:
        return float(np.partition(values, middle)[middle])
    low, high = np.partition(values, [middle - 1, middle])[[middle - 1, middle]]
    return float((low + high) / 2)


def _distributions(sec: _Section, rows: Sequence[Row]) -> tuple[list[dict[str, Any]], list[str]]:
    """Per metric group, a histogram per metric over its own samples only.

    A metric whose values are all one number (a single sample, or every sample equal) is listed in the
    group's table but not drawn: its histogram would be one bar saying what the table says.
    """
    from pinbench.results.report_svg import Distribution, histogram_svg

    assert sec.samples is not None
    index = RecordIndex(sec.samples)   # each metric reads its own records, not all of them
    by_name = {row.name: row for row in rows}
    values_of: dict[str, np.ndarray] = {}
    empty = []
    for name, m in sec.card.metrics.items():
        scored, _ = metric_samples(name, m, index)
        values = np.fromiter((v for v, _ in scored.values()), dtype=np.float64, count=len(scored))
        if values.size == 0:
            empty.append(name)
        else:
            values_of[name] = values
    out = []
    for group, members in grouped([by_name[name] for name in values_of]):
        panels, stats = [], []
        for row in members:
            values = values_of[row.name]
            spread = bool(values.max() > values.min())
            stats.append({"name": row.name, "n": values.size, "mean": float(values.mean()),
                          "median": _median(values), "min": float(values.min()), "max": float(values.max()),
                          "not_plotted": "" if spread else
                          "not plotted: one value" if values.size == 1 else f"not plotted: all {values.size} equal"})
            if not spread:
                continue
            ref = row.ref
            short = row.name[len(group) + 1:] if group else row.name
            panels.append({"title": short, "svg": histogram_svg(Distribution(
                values=values, aggregate=row.measured,
                interval=(row.interval.low, row.interval.high) if has_interval(row.interval) else None,
                reference=ref.value if ref else None,
                band=(ref.value - row.bound, ref.value + row.bound) if ref else None), row.name)})
        out.append({"title": group or TOP_LEVEL, "anchor": _anchor(sec, group) + "-dist", "panels": panels,
                    "stats": stats})
    return out, empty


def _sample_figures(sec: _Section, figs: _Figures) -> tuple[list[dict[str, str]], list[str]]:
    """Failed samples' figures first, then per ranking metric the worst and the best few; the rest named."""
    per_sample = [e for e in sec.extras if e.sample_id is not None]
    if not per_sample:
        return [], []
    metrics = sorted(sec.card.metrics.items(), key=lambda item: not item[1].primary)
    scored = {name: metric_samples(name, m, sec.samples or [])[0] for name, m in metrics}
    chosen: list[tuple[str, Extra]] = []
    ranked: dict[str, list[tuple[float, Extra]]] = {}
    for extra in per_sample:
        owner = next((name for name, _ in metrics if extra.sample_id in scored[name]), None)
        if owner is None:
            chosen.append(("failed", extra))
        else:
            ranked.setdefault(owner, []).append((scored[owner][extra.sample_id][0], extra))
    for name, entries in ranked.items():
        higher = sec.card.metrics[name].direction == "higher"
        entries.sort(key=lambda item: (item[0] if higher else -item[0], item[1].sample_id))  # worst first
        n_worst = min(N_EXTREMES, len(entries))
        n_best = min(N_EXTREMES, len(entries) - n_worst)
        chosen += [(f"worst by {name}: {value:.4g}", e) for value, e in entries[:n_worst]]
        chosen += [(f"best by {name}: {value:.4g}", e) for value, e in entries[len(entries) - n_best:][::-1]]
    shown = {id(e) for _, e in chosen}
    views = []
    for k, (why, extra) in enumerate(chosen):
        views.append({**figs.copy(extra.src, f"{sec.anchor}-sample-{k + 1:02d}-{_slug(extra.sample_id or '')}.png",
                                  f"{why} — {extra.title}", extra.caption), "sample_id": extra.sample_id})
    return views, [e.sample_id for e in per_sample if id(e) not in shown]


def _failures(card: Scorecard) -> tuple[list[dict[str, str]], list[str]]:
    """One row per (sample, reason) naming the metrics it cost, failed first then missing, in order."""
    metrics = card.metrics
    grouped: dict[tuple[str, str], list[str]] = {}
    for name, m in metrics.items():
        for failure in m.failed:
            grouped.setdefault((failure.sample_id, failure.error), []).append(name)
    for name, m in metrics.items():
        for sample_id in m.missing or ():
            grouped.setdefault((sample_id, "missing: no record for this sample"), []).append(name)
    unnamed = [f"{name}: {counted(n, 'sample')} {'has' if n == 1 else 'have'} no record (never run, or scored in "
               "another shard)" for name, m in metrics.items() if (n := m.n_missing - len(m.missing or ())) > 0]
    rows = [{"sample_id": sample_id, "error": error,
             "metrics": f"all {len(names)}" if len(names) == len(metrics) > 1 else ", ".join(names)}
            for (sample_id, error), names in grouped.items()]
    return rows, unnamed


def _provenance(prov: Mapping[str, Any]) -> dict[str, Any]:
    prov = scrub(dict(prov))
    code, container, packages = prov.get("pinbench") or {}, prov.get("container") or {}, prov.get("packages") or {}
    versions = {"pinbench": code.get("version"), "python": prov.get("python"), "torch": packages.get("torch"),
                "cuda": packages.get("cuda"), "gpus": prov.get("gpus"), "driver": prov.get("driver")}
    inputs = prov.get("inputs") or {}
    unverified = [f"{name}: {state.get('reason', 'unverified')}" for name, state in inputs.items()
                  if isinstance(state, Mapping) and state.get("state") != "verified"]
    base = container.get("base_image")
    return {"commit": code.get("commit"), "dirty": code.get("dirty"), "image": container.get("image_digest"),
            "base": base if isinstance(base, Mapping) else None,
            "versions": {k: v for k, v in versions.items() if v}, "verified": len(inputs) - len(unverified),
            "n_inputs": len(inputs), "unverified": unverified, "full": prov}


def _shown_source(source: Mapping[str, Any]) -> Mapping[str, Any]:
    """A reference's source as the page lists it: its run's inputs by their digest and count, without the input hash
    of each of up to 1,000 samples (``recorded_inputs``), which the lines of what ran differently name where they
    differ."""
    inputs = source.get("inputs")
    if not isinstance(inputs, Mapping) or "samples" not in inputs:
        return source
    return {**source, "inputs": {key: value for key, value in inputs.items() if key != "samples"}}


def _section_view(sec: _Section, figs: _Figures) -> dict[str, Any]:
    card, ref = sec.card, sec.ref
    ref_name = reference_name(ref) if ref else None
    # the records' input hashes, as pinbench diff reads its samples file: the report says what ran differently too
    checked = None
    if ref:
        hashes = input_hashes(sec.samples) if sec.samples is not None and keeps_inputs(ref) else None
        checked = diff(card, ref, name=ref_name, inputs=hashes)
    rows = build_rows(card, ref, checked)
    verdict = VERDICTS[checked.exit_code] if checked else "NO REFERENCE"
    samples = card.samples
    failures, unnamed = _failures(card)
    view: dict[str, Any] = {
        "anchor": sec.anchor, "label": sec.label, "status": card.status,
        "status_badge": _STATUS_BADGE[card.status], "verdict": verdict, "verdict_badge": _VERDICT_BADGE[verdict],
        "status_note": {"partial": " — scores cover only part of the sample set",
                        "failed": " — nothing was scored"}.get(card.status, ""),
        "counts": samples_text(card),
        "status_reasons": list(card.status_reasons), "degenerate": degenerate_notes(card),
        "mode_note": _MODE_NOTES.get(card.mode),
        "summary": {"recipe": card.recipe, "recipe version": card.recipe_version,
                    "checkpoint": card.checkpoint, "mode": card.mode, "schema version": card.schema_version,
                    "scorecard": sec.scorecard,
                    "samples file": samples.path},
        "has_reference": ref is not None, "no_reference": no_reference_reason(card) if ref is None else "",
        "rows": [_row_view(row) for row in rows],
        "groups": [{"title": group or TOP_LEVEL, "anchor": _anchor(sec, group), "rows": [_row_view(r) for r in m],
                    "failing": sum(1 for r in m if r.status not in ("PASS", ""))} for group, m in grouped(rows)],
        "primary": [_row_view(row) for row in rows if row.starred],
        "na_reasons": [], "problems": [],
        "failures": failures, "unnamed": unnamed, "prov": _provenance(card.provenance),
        "details": {key: scrub(sec.config if key == "config" else getattr(card, key))
                    for key in ("config", "timings", "extra") if getattr(card, key)},
        "distributions": None, "no_values": [],
    }
    view["na_reasons"] = _na_reasons(view["rows"])
    if ref is not None and checked is not None:
        view.update(exit_code=checked.exit_code, problems=checked.problems, ran_differently=checked.ran_differently,
                    reference_source=scrub({"file": ref_name, "tier": ref.tier, "source": _shown_source(ref.source),
                                            "n_samples": ref.n_samples, "note": ref.note}),
                    deviation_figures=_deviation_figures(sec, rows))
    if sec.samples is not None:
        view["distributions"], view["no_values"] = _distributions(sec, rows)
    view["sample_figures"], view["more_samples"] = _sample_figures(sec, figs)
    recipe_figures = []
    for k, extra in enumerate(e for e in sec.extras if e.sample_id is None):
        recipe_figures.append(figs.copy(extra.src, f"{sec.anchor}-extra-{k + 1:02d}-{_slug(extra.src.stem)}.png",
                                        extra.title, extra.caption))
    view["recipe_figures"] = recipe_figures
    return view


def comparison_badge(result: Comparison) -> tuple[str, str]:
    """(text, colour class) of a comparison's verdict by direction: any metric worse beyond noise is red, better
    only is green, all within noise is grey; an incomplete or mismatched comparison keeps its own colour."""
    from pinbench.results.compare import EXIT_DIFFERENT, EXIT_SAME, VERDICT_NAMES

    name = VERDICT_NAMES[result.exit_code]
    better = sum(1 for r in result.metrics if r.verdict == "better")
    worse = sum(1 for r in result.metrics if r.verdict == "worse")
    if result.exit_code == EXIT_SAME:
        return (f"{name}: {better} better, within --fail-on {result.fail_on}" if better else f"{name}: within noise",
                "better" if better else "within_noise")
    counts = ", ".join(f"{n} {what}" for n, what in ((better, "better"), (worse, "worse")) if n)
    if result.exit_code == EXIT_DIFFERENT:
        return f"{name}: {counts}", "worse" if worse else "better"
    return name + (f": {counts}" if counts else ""), {"INCOMPLETE": "INCOMPLETE"}.get(name, "FAIL")


def _comparison_view(k: int, result: Comparison) -> dict[str, Any]:
    from pinbench.results.compare import VERDICT_NAMES, unmatched_samples
    from pinbench.results.report_svg import DifferenceRow, differences_svg

    rows, plot_rows = [], []
    for r in result.metrics:
        d = r.difference
        interval = (d.low, d.high) if has_interval(d.interval) else None
        cell, note = _interval_cell(d.interval)
        a, b = r.shown()
        rows.append({"name": r.name, "primary": r.primary, "a": a, "b": b, "difference": d.difference,
                     "interval": cell, "interval_note": note, "direction": r.direction, "verdict": r.verdict,
                     "reason": r.reason, "matched": f"{r.n_matched}/{r.n_cohort}"})
        if math.isfinite(d.difference):
            text = f"{d.difference:+.4g} " + (f"[{d.low:+.4g}, {d.high:+.4g}]" if interval else "(no interval)")
            plot_rows.append(DifferenceRow(r.name + (" ★" if r.primary else ""), r.verdict, d.difference, interval,
                                           r.direction == "higher", text))
    unmatched = [{"sample_id": sample_id, "why": why,
                  "metrics": "all metrics" if len(names) == len(result.metrics) else ", ".join(names)}
                 for sample_id, (why, names) in unmatched_samples(result.metrics).items()]
    badge_text, badge_class = comparison_badge(result)
    a, b = distinct_labels([result.a.card.checkpoint, result.b.card.checkpoint],
                           [result.a.path.parent.name, result.b.path.parent.name])
    names = f"{b} - {a}"  # two runs of one checkpoint read "fixture - fixture" otherwise
    return {"anchor": f"c{k + 1:02d}", "header": result.header, "verdict": VERDICT_NAMES[result.exit_code],
            "names": names,
            "badge_text": badge_text, "badge_class": badge_class,
            "exit_code": result.exit_code, "fail_on": result.fail_on, "problems": result.problems,
            "notes": result.notes, "rows": rows, "unmatched": unmatched,
            "figure": differences_svg(plot_rows, "B - A per metric") if plot_rows else None}


# ----------------------------------------------------------------------------------------- page


def _breakable(name: str) -> Any:
    """A metric name that may wrap after each ``/`` (``<wbr>``), never inside a word: MIND's names are wide
    enough to push the metrics table past the page otherwise. Copying the name copies no extra character."""
    from markupsafe import Markup, escape

    return Markup("/<wbr>").join(escape(part) for part in str(name).split("/"))


def _environment() -> Any:
    from jinja2 import Environment, PackageLoader, StrictUndefined
    from markupsafe import Markup

    redact_text = redactor()  # the secrets read once for the page, not once per string

    def finalize(value: Any) -> Any:
        # Every data string printed is redacted; markup built by the template's own macros is left alone.
        return redact_text(value) if isinstance(value, str) and not isinstance(value, Markup) else value

    env = Environment(loader=PackageLoader("pinbench.results", "templates"), autoescape=True, finalize=finalize,
                      undefined=StrictUndefined, keep_trailing_newline=True)
    env.filters["num"] = _num
    env.filters["counted"] = counted
    env.filters["breakable"] = _breakable
    return env


def claim_report_folder(out_dir: Path, scorecards: Sequence[Path], *, view: bool = False) -> None:
    """The folder a user names for a report of ``scorecards`` (``report --out``, ``compare --report``; ``view``:
    with its view folder): new, empty, or an earlier report (its mark, or a report page from before the mark, such
    as a run's own report/). Why: a report replaces index.html and deletes every PNG of figures/ it did not draw; a
    folder of the user's lost both, silently. A run's own report/ is that run's page alone, without a view folder:
    ``pinbench report RUN1 RUN2 --out RUN1/report`` replaced it with theirs, and ``pinbench check RUN1`` still found
    RUN1 consistent; ``report RUN1 --view --out RUN1/report`` put view/ into the run directory, which a run has
    not; both refused, where a report of RUN1 alone without --view (the very page) is written."""
    from pinbench.core.run import REPORT
    from pinbench.core.rundir import run_marker

    real = Path(os.path.realpath(out_dir))
    if real.name == REPORT.parent.name and run_marker(real.parent) is not None:
        if [os.path.realpath(card) for card in scorecards] != [str(real.parent / "scorecard.json")]:
            raise FileError(out_dir, f"the report page of the run in {real.parent}, which this report of "
                                     f"{counted(len(scorecards), 'run')} would replace; name another folder")
        if view:
            raise FileError(out_dir, f"the report page of the run in {real.parent}, which has no view folder: "
                                     "drop --view, or name another folder for a report with one")
    claim_output_folder(out_dir, REPORT_MARK, "report", "index.html and figures/", folders=(FIGURES_DIR,),
                        earlier=lambda folder: _FOOTER in (read_regular_text(folder / "index.html") or ""))


@announced(lambda scorecards, out_dir, **kw: f"report: {Path(out_dir) / 'index.html'}")
def write_report(
    scorecards: Sequence[Path | str | Scorecard],
    out_dir: Path,
    *,
    references: Mapping[Any, Any] | None = None,
    samples: Mapping[Any, Sequence[Any]] | None = None,
    extra_figures: Mapping[Any, Sequence[ExtraFigure]] | None = None,
    comparisons: Sequence[Comparison] = (),
    title: str | None = None,
    view: str | None = None,
) -> Path:
    """Write ``out_dir/index.html`` (comparisons first, then one section per scorecard) and its PNGs.

    ``scorecards`` are paths (named in the report) or Scorecards (validated here). ``references``, ``samples`` and
    ``extra_figures`` are keyed by scorecard index or recipe name; a scorecard file given no ``extra_figures`` shows
    the figures its run recorded (``figures.json``, ``record_figures``). The title defaults to the run's (recipe,
    version, checkpoint, mode) for one scorecard. ``view``: the page of ``pinbench view --bundle`` of these runs,
    relative to ``out_dir``; every sample the report names links to its page there. All inputs are checked before
    anything is written; returns the path of ``index.html``.
    """
    if not scorecards:
        raise ReportError("write_report: no scorecards given")
    loaded = [_load_card(card, i) for i, card in enumerate(scorecards)]
    names = [card.recipe for card, _ in loaded]
    refs = _per_card(references, names, "references")
    recs = _per_card(samples, names, "samples")
    extras = _per_card(extra_figures, names, "extra_figures")
    labels = distinct_labels([f"{card.recipe} · {card.checkpoint} · {card.mode}" for card, _ in loaded],
                             [None if isinstance(card, Scorecard) else Path(os.path.abspath(card)).parent.name
                              for card in scorecards])
    sections = [
        _Section(index=i, card=card, origin=origin, label=labels[i],
                 ref=as_reference(refs[i], f"reference for {origin}") if refs[i] is not None else None,
                 samples=list(recs[i]) if recs[i] is not None else None,
                 extras=_check_extras(extras[i], f"extra_figures for {origin}") if extras[i] is not None
                 else [] if isinstance(scorecards[i], Scorecard) else run_figures(Path(scorecards[i])),
                 from_file=not isinstance(scorecards[i], Scorecard))
        for i, (card, origin) in enumerate(loaded)
    ]
    if title is None:
        card = loaded[0][0]
        title = (f"{card.recipe} {card.recipe_version}: {card.checkpoint} ({card.mode})" if len(loaded) == 1
                 else "pinbench report")
    figs = _Figures(Path(out_dir))
    page = _environment().get_template("report.html.j2").render(
        title=title, version=pinbench.__version__, view=view,
        comparisons=[_comparison_view(k, c) for k, c in enumerate(comparisons)],
        sections=[_section_view(sec, figs) for sec in sections],
    )
    figs.remove_stale()
    return write_if_changed(Path(out_dir) / "index.html", page)  # a rerun whose inputs did not change rewrites nothing
