"""``pinbench table RUN...``: the results table a paper needs, metrics x runs, in Markdown, LaTeX or CSV.

Each cell is the metric's value with its 95% interval and its scored/expected count. Per metric the best
value among the *complete* runs is bold; a run within noise of the best is marked tied, by the paired
bootstrap test of ``pinbench compare`` (the interval of the difference contains 0). A partial run is marked
in its header and explained in a footnote, and is never ranked: its value covers fewer samples. A metric
a run does not have, or that scored nothing, is a dash with a footnote saying which.

Scorecards are read in one place only (``_read_metric`` and ``_read_column``), so a change in how a
scorecard is represented touches those two functions.
"""

from __future__ import annotations

import csv
import io
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pinbench.core.generation import Generated, generation_differences
from pinbench.core.scorecard import MetricResult, load_scorecard, scorecard_file
from pinbench.results.compare import CompareError, Run, compare_runs, load_run

FORMATS = ("markdown", "latex", "csv")
INTERVAL_STYLES = ("pm", "range")
DEFAULT_DIGITS = 3
FAILED_SHOWN = 3
SUPERSCRIPTS = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}"}
_MARKDOWN_SPECIAL = "\\`*_[]<>|$~"  # emphasis, code, links, HTML, cells, GitHub's math and strikethrough
# OWASP's rule for CSV injection: a text cell starting with one of these is a formula to a spreadsheet
_CSV_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class TableError(ValueError):
    """The runs cannot go in one table (one line naming the file and what is wrong)."""


# ------------------------------------------------------------------------------ reading scorecards


@dataclass(frozen=True)
class RunMetric:
    """What the table shows of one metric of one run."""

    value: float | None
    low: float | None
    high: float | None
    no_interval: str | None  # why there is no interval, when there is none
    n_scored: int
    n_expected: int
    n_failed: int
    direction: str
    primary: bool
    sample_ids: tuple[str, ...] | None = None  # the cohort the value is over, when the scorecard names it

    @property
    def complete(self) -> bool:
        return self.value is not None and self.n_scored == self.n_expected


@dataclass
class Column:
    """One run: its scorecard's results and, when its samples are there, the run for paired tests."""

    path: Path
    recipe: str
    recipe_version: str
    checkpoint: str
    mode: str
    status: str
    status_reasons: list[str]
    metrics: dict[str, RunMetric]
    generated: Generated | None = None
    paired: Run | None = None
    paired_problem: str | None = None
    label: str = ""


def _read_metric(entry: MetricResult) -> RunMetric:
    interval = entry.interval
    low, high = (interval.low, interval.high) if interval is not None else (None, None)
    no_interval = "no interval recorded" if interval is None else interval.reason or "no interval recorded"
    return RunMetric(value=entry.value, low=low, high=high, no_interval=None if low is not None else no_interval,
                     n_scored=entry.n_scored, n_expected=entry.n_expected, n_failed=entry.n_failed,
                     direction=entry.direction, primary=entry.primary, sample_ids=entry.sample_ids)


def _read_column(path: Path) -> Column:
    scorecard = scorecard_file(path)
    card = load_scorecard(scorecard)
    column = Column(path=scorecard, recipe=card.recipe, recipe_version=card.recipe_version,
                    checkpoint=card.checkpoint, mode=card.mode, status=card.status,
                    status_reasons=list(card.status_reasons),
                    metrics={name: _read_metric(entry) for name, entry in card.metrics.items()},
                    generated=Generated.of(card.provenance))
    try:
        column.paired = load_run(scorecard)
    except CompareError as exc:
        column.paired_problem = str(exc)
    return column


def load_columns(paths: Sequence[Path | str]) -> list[Column]:
    """The runs (run directories or scorecard.json files) of one recipe version, each once, labelled."""
    if not paths:
        raise TableError("no runs given")
    columns = [_read_column(Path(p)) for p in paths]
    seen: dict[Path, Path] = {}
    for column in columns:
        key = column.path.resolve()
        if key in seen:
            raise TableError(f"{column.path}: given twice; each run is one column")
        seen[key] = column.path
    first = columns[0]
    for column in columns[1:]:
        for what in ("recipe", "recipe_version"):
            if getattr(column, what) != getattr(first, what):
                raise TableError(f"{column.path}: {what} {getattr(column, what)!r}, but {first.path} has "
                                 f"{getattr(first, what)!r}; one table holds runs of one recipe version")
    labels = [c.checkpoint if c.mode == "full" else f"{c.checkpoint} ({c.mode})" for c in columns]
    for label in set(labels):
        same = [c for c, other in zip(columns, labels, strict=True) if other == label]
        for depth in range(1, 64):  # the shortest end of their run folders' paths that tells them apart
            ends = ["/".join(c.path.resolve().parent.parts[-depth:]) for c in same]
            if len(set(ends)) == len(ends) or depth >= min(len(c.path.resolve().parent.parts) for c in same):
                break
        for column, end in zip(same, ends, strict=True):
            column.label = label if len(same) == 1 else f"{label} [{end}]"
    return columns


# ------------------------------------------------------------------------------ the table's content


@dataclass
class Cell:
    result: RunMetric | None
    best: bool = False
    tied: bool = False
    notes: list[int] = field(default_factory=list)  # footnote numbers


@dataclass
class Row:
    metric: str
    direction: str
    primary: bool
    cells: list[Cell]


@dataclass
class Table:
    columns: list[Column]
    rows: list[Row]
    footnotes: list[str]
    column_notes: dict[int, list[int]]
    caption: str | None
    digits: int | None
    interval: str


class _Footnotes:
    def __init__(self) -> None:
        self.texts: list[str] = []

    def add(self, text: str) -> int:
        if text not in self.texts:
            self.texts.append(text)
        return self.texts.index(text) + 1


def _metric_names(columns: Sequence[Column], wanted: Sequence[str] | None, primary_only: bool) -> list[str]:
    known = list(dict.fromkeys(name for c in columns for name in c.metrics))
    if wanted:
        unknown = [m for m in wanted if m not in known]
        if unknown:
            raise TableError(f"--metrics: {', '.join(unknown)} in none of the runs; they have {', '.join(known)}")
        known = list(dict.fromkeys(wanted))
    if primary_only:
        known = [m for m in known if any(c.metrics[m].primary for c in columns if m in c.metrics)]
        if not known:
            raise TableError("--primary-only: none of the chosen metrics is primary")
    return known


class _PairedTests:
    """``pinbench compare`` of two runs, once per pair however many metrics ask."""

    def __init__(self) -> None:
        self.done: dict[tuple[int, int], Any] = {}

    def tied(self, columns: Sequence[Column], best: int, other: int, metric: str) -> tuple[bool | None, str | None]:
        """Whether run ``other`` is within noise of run ``best`` on ``metric`` (None: not tested, and why)."""
        a, b = columns[best], columns[other]
        if a.paired is None or b.paired is None:
            missing = a if a.paired is None else b
            return None, f"{missing.label}: {missing.paired_problem}"
        if (best, other) not in self.done:
            self.done[(best, other)] = compare_runs(a.paired, b.paired)
        row = next((m for m in self.done[(best, other)].metrics if m.name == metric), None)
        if row is None or row.verdict == "not judged":
            return None, row.reason if row is not None else "not compared"
        return row.verdict == "within noise", None


def _partial_note(column: Column) -> str:
    """The note on a partial run's header: "this run", for the mark sits on its label (which a long run directory
    name made the note repeat in full)."""
    reasons = "; ".join(column.status_reasons[:FAILED_SHOWN])
    hidden = len(column.status_reasons) - FAILED_SHOWN
    more = f"; ... {hidden} more" if hidden > 0 else ""
    return (f"this run is {column.status} ({reasons}{more}): its values cover the scored samples only, "
            "so it is never marked best or tied")


def build_table(columns: Sequence[Column], *, metrics: Sequence[str] | None = None, primary_only: bool = False,
                digits: int | None = None, caption: str | None = None, interval: str = "pm") -> Table:
    """Rows of cells with their best / tied marks and footnotes; the formats render it as it is."""
    if interval not in INTERVAL_STYLES:
        raise TableError(f"--interval {interval!r}: expected one of {', '.join(INTERVAL_STYLES)}")
    if digits is not None and not 0 <= digits <= 12:
        raise TableError(f"--digits {digits}: expected 0 to 12")
    notes, paired = _Footnotes(), _PairedTests()
    column_notes = {i: [notes.add(_partial_note(c))] for i, c in enumerate(columns) if c.status != "complete"}
    # every column's header; its runs named by their place (#1 the leftmost), not by their labels, which the note
    # repeated once per generator and twice per setting that differs
    for line in generation_differences([(f"#{i}", c.generated) for i, c in enumerate(columns, start=1)]):
        number = notes.add(f"rollouts made differently (#1: the leftmost run): {line}")
        for i in range(len(columns)):
            column_notes.setdefault(i, []).append(number)
    rows = []
    for name in _metric_names(columns, metrics, primary_only):
        declared = next(c.metrics[name] for c in columns if name in c.metrics)
        cells = []
        for column in columns:
            result = column.metrics.get(name)
            cell = Cell(result)
            if result is None:
                cell.notes.append(notes.add("not in this run's scorecard"))
            elif result.value is None:
                cell.notes.append(notes.add("nothing scored"))
            elif result.no_interval is not None:
                cell.notes.append(notes.add(f"no 95% interval: {result.no_interval}"))
            cells.append(cell)
        # a run is ranked on a metric only when the run is complete: a partial run's metric that happens to have
        # every sample still comes from a run that did not finish, and its footnote says it is never ranked
        ranked = [i for i, c in enumerate(cells)
                  if columns[i].status == "complete" and c.result is not None and c.result.complete]
        ranked = _same_samples(columns, cells, ranked, notes)
        if ranked:
            pick = max if declared.direction == "higher" else min
            best_value = pick(cells[i].result.value for i in ranked)
            best = [i for i in ranked if cells[i].result.value == best_value]
            for i in best:
                cells[i].best = True
            for i in (i for i in ranked if i not in best):
                tied, why = paired.tied(columns, best[0], i, name)
                if tied is None:
                    cells[i].notes.append(notes.add(f"not tested for a tie with the best: {why}"))
                cells[i].tied = bool(tied)
        rows.append(Row(name, declared.direction, declared.primary, cells))
    return Table(list(columns), rows, notes.texts, column_notes, caption, digits, interval)


def _sample_set(column: Column, result: RunMetric) -> tuple[int, frozenset[str] | None]:
    """What a metric's value is over: its count, and its ids (the cohort's, else the run's samples when its
    ``samples.jsonl`` was read; None when neither is known: then the count alone is compared)."""
    if result.sample_ids is not None:
        return result.n_expected, frozenset(result.sample_ids)
    return result.n_expected, frozenset(column.paired.samples) if column.paired is not None else None


def _same_samples(columns: Sequence[Column], cells: Sequence[Cell], ranked: list[int],
                  notes: _Footnotes) -> list[int]:
    """The ranked runs whose value is over the same samples as the run with the most expected (the first such):
    values over other samples (a ``--limit`` run beside a full one) are not comparable, so they are footnoted and
    never marked best or tied."""
    if not ranked:
        return ranked
    sets = {i: _sample_set(columns[i], cells[i].result) for i in ranked}
    anchor = max(ranked, key=lambda i: sets[i][0])
    count, ids = sets[anchor]
    keep = [i for i in ranked if sets[i][0] == count and (ids is None or sets[i][1] in (None, ids))]
    for i in ranked:
        if i not in keep:
            cells[i].notes.append(notes.add(
                f"over other samples than {columns[anchor].label} ({sets[i][0]} expected, there "
                f"{count}): not comparable, so never marked best or tied"))
    return keep


# ------------------------------------------------------------------------------ formatting


def _number(value: float, digits: int) -> str:
    """``value`` rounded to ``digits`` places; a value that is not 0 but rounds to it (1e-07 at 3 digits) in
    scientific notation with two significant digits, so it never reads as a zero (nor two of them as equal)."""
    text = f"{value:.{digits}f}"
    if float(text) == 0 and value != 0:
        return f"{value:.1e}"
    return "0" + text[2:] if text.startswith("-0") and float(text) == 0 else text  # no "-0.000"


def _spread(result: RunMetric, digits: int, style: str) -> tuple[str, str] | None:
    """(kind, text): ``("pm", "0.013")``, ``("asym", "+0.013/-0.010")`` or ``("range", "[0.899, 0.925]")``."""
    if result.low is None or result.high is None or result.value is None:
        return None
    if style == "range" or not result.low <= result.value <= result.high:  # a bound is never shown as "+-0.1"
        return "range", f"[{_number(result.low, digits)}, {_number(result.high, digits)}]"
    above, below = _number(result.high - result.value, digits), _number(result.value - result.low, digits)
    return ("pm", above) if above == below else ("asym", f"+{above}/-{below}")


def _one_line(text: str) -> str:
    """``text`` with every line or paragraph break and control character (a scorecard's metric name, a run
    folder's name, a caption) as a space: a newline would end a Markdown table row, a blank line or a form feed
    (``\\par`` to LaTeX) would end the paragraph a ``\\caption`` or a cell must stay in."""
    return "".join(" " if unicodedata.category(ch) in ("Cc", "Zl", "Zp") else ch for ch in text)


def _markdown_text(text: str) -> str:
    return "".join(f"\\{ch}" if ch in _MARKDOWN_SPECIAL else ch for ch in _one_line(text))


def latex_text(text: str) -> str:
    """``text`` as LaTeX text on one line: the ten specials, and < > | (not in OT1 text fonts), escaped."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in _one_line(text))


def csv_text(text: str) -> str:
    """A text cell a spreadsheet shows as text: one starting with = + - @ (or a tab, a carriage return) gets a
    leading ``'`` (OWASP's rule), so a metric or folder name like ``=cmd|' /C calc'!A0`` is never a formula.
    The numbers the table writes are numeric cells and are not touched."""
    return "'" + text if text.startswith(_CSV_FORMULA_START) else text


def _markdown_cell(cell: Cell, digits: int, style: str) -> str:
    marks = "".join(str(n).translate(SUPERSCRIPTS) for n in cell.notes)
    result = cell.result
    if result is None or result.value is None:
        return "–" + marks
    value = _number(result.value, digits)
    text = f"**{value}**" if cell.best else value
    spread = _spread(result, digits, style)
    if spread is not None:
        text += f" ± {spread[1]}" if spread[0] == "pm" else f" {spread[1]}"
    text += " ≈" if cell.tied else ""
    return f"{text} ({result.n_scored}/{result.n_expected}){marks}"


def _arrow(direction: str, latex: bool = False) -> str:
    if latex:
        return r"$\uparrow$" if direction == "higher" else r"$\downarrow$"
    return "↑" if direction == "higher" else "↓"


def _legend(table: Table, latex: bool) -> list[str]:
    interval = ("± the distance to the bounds of its 95% interval (+above/-below when they differ)"
                if table.interval == "pm" else "[low, high] its 95% interval")
    if latex:
        interval = (r"$\pm$ the distance to the bounds of its 95\% interval ($^{+\mathrm{above}}_{-\mathrm{below}}$ "
                    r"when they differ)" if table.interval == "pm" else r"[low, high] its 95\% interval")
        return [rf"$\uparrow$ higher is better, $\downarrow$ lower is better; * primary metric. Each cell: the value, "
                rf"{interval}, and (scored/expected) samples. Bold: the best complete run; $\approx$: within noise "
                r"of the best (paired bootstrap, 95\%, as \texttt{pinbench compare})."]
    return [f"↑ higher is better, ↓ lower is better; \\* primary metric. Each cell: the value, {interval}, and "
            "(scored/expected) samples. **Bold**: the best complete run; ≈: within noise of the best (paired "
            "bootstrap, 95%, as `pinbench compare`)."]


def render_markdown(table: Table) -> str:
    digits = DEFAULT_DIGITS if table.digits is None else table.digits
    header = ["metric"] + [_markdown_text(c.label) + "".join(str(n).translate(SUPERSCRIPTS)
                                                            for n in table.column_notes.get(i, []))
                           for i, c in enumerate(table.columns)]
    lines = [f"Table: {_markdown_text(table.caption)}", ""] if table.caption else []
    lines += ["| " + " | ".join(header) + " |", "|:---|" + "---:|" * len(table.columns)]
    for row in table.rows:
        star = " \\*" if row.primary else ""
        name = f"{_markdown_text(row.metric)}{star} {_arrow(row.direction)}"
        lines.append("| " + " | ".join([name] + [_markdown_cell(c, digits, table.interval) for c in row.cells])
                     + " |")
    lines.append("")
    lines += _legend(table, latex=False)
    lines += [f"{str(n).translate(SUPERSCRIPTS)} {_markdown_text(text)}" for n, text in
              enumerate(table.footnotes, start=1)]
    return "\n".join(lines) + "\n"


def _latex_number(value: str) -> str:
    return value.replace("-", "$-$")


def _latex_cell(cell: Cell, digits: int, style: str) -> str:
    marks = "".join(rf"\textsuperscript{{{n}}}" for n in cell.notes)
    result = cell.result
    if result is None or result.value is None:
        return "--" + marks
    value = _latex_number(_number(result.value, digits))
    text = rf"\textbf{{{value}}}" if cell.best else value
    spread = _spread(result, digits, style)
    if spread is not None:
        kind, body = spread
        if kind == "pm":
            text += rf" $\pm$ {body}"
        elif kind == "asym":
            above, below = body[1:].split("/-")
            text += rf"$^{{+{above}}}_{{-{below}}}$"
        else:
            text += " {\\scriptsize " + _latex_number(body) + "}"
    if cell.tied:
        text += r"\textsuperscript{$\approx$}"
    return text + rf" {{\scriptsize ({result.n_scored}/{result.n_expected})}}" + marks


def render_latex(table: Table) -> str:
    """A ``table`` environment with a booktabs ``tabular`` (needs ``\\usepackage{booktabs}``)."""
    digits = DEFAULT_DIGITS if table.digits is None else table.digits
    header = ["Metric"] + [latex_text(c.label) + "".join(rf"\textsuperscript{{{n}}}"
                                                          for n in table.column_notes.get(i, []))
                           for i, c in enumerate(table.columns)]
    lines = [r"\begin{table}[t]", r"\centering"]
    if table.caption:
        lines.append(rf"\caption{{{latex_text(table.caption)}}}")
    lines += [rf"\begin{{tabular}}{{l{'r' * len(table.columns)}}}", r"\toprule", " & ".join(header) + r" \\",
              r"\midrule"]
    for row in table.rows:
        name = f"{latex_text(row.metric)}{'*' if row.primary else ''} {_arrow(row.direction, latex=True)}"
        lines.append(" & ".join([name] + [_latex_cell(c, digits, table.interval) for c in row.cells]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\par\smallskip", r"\begin{minipage}{\linewidth}\footnotesize"]
    notes = _legend(table, latex=True)
    notes += [rf"\textsuperscript{{{n}}} {latex_text(text)}" for n, text in enumerate(table.footnotes, start=1)]
    lines.append(" \\\\\n".join(notes))
    lines += [r"\end{minipage}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def render_csv(table: Table) -> str:
    """One row per metric; per run: value, low, high, scored, expected, and a note (best, tied, footnotes).

    Values keep full precision unless ``digits`` was given."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    header = ["metric", "direction", "primary"]
    for column in table.columns:
        header += [f"{column.label} {part}" for part in ("value", "low", "high", "scored", "expected", "note")]
    writer.writerow([csv_text(cell) for cell in header])

    def number(value: float | None) -> str:
        if value is None:
            return ""
        return repr(value) if table.digits is None else _number(value, table.digits)

    for row in table.rows:
        line: list[Any] = [csv_text(row.metric), row.direction, "yes" if row.primary else "no"]
        for i, cell in enumerate(row.cells):
            result = cell.result
            notes = (["best"] if cell.best else []) + (["tied with the best"] if cell.tied else [])
            notes += [table.footnotes[n - 1] for n in [*table.column_notes.get(i, []), *cell.notes]]
            note = csv_text("; ".join(notes))
            if result is None:
                line += ["", "", "", "", "", note]
            else:
                line += [number(result.value), number(result.low), number(result.high), result.n_scored,
                         result.n_expected, note]
        writer.writerow(line)
    return out.getvalue()


RENDERERS = {"markdown": render_markdown, "latex": render_latex, "csv": render_csv}


def render(table: Table, fmt: str) -> str:
    if fmt not in RENDERERS:
        raise TableError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    return RENDERERS[fmt](table)

