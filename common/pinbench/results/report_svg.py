"""The report's figures as inline SVG: real text in the page (readable at 100 % zoom, searchable, its size in the DOM)
and cheap to draw (a string per figure, no plotting library: the report of 11,222 samples and 178 metrics takes a
fraction of a second, and a rerun draws the same bytes).

* :func:`deviations_svg`: the metrics of one group against their reference on one axis, as (value - reference) /
  tolerance, so the tolerance band is always [-1, 1]; the bar is the run's 95% interval on the same scale, the grey
  band the reference's own interval. A bar or dot beyond the axis is drawn to its edge and ends in an arrow (a bar)
  or carries its value (a dot).
* :func:`histogram_svg`: one metric's values over exactly the samples it was computed from, with the aggregate, its
  interval and the reference band.
* :func:`differences_svg`: ``pinbench compare``'s B - A per metric with its paired interval on one axis, to scale
  (in the metrics' own units, ticked), turned so that right is better, the numbers beside it. A metric without an
  interval is a dot at its true distance from 0: a row scaled to itself put every such dot at the same place.

Every text is at least ``TICK_PX`` (11 px) and tick labels are plain numbers (no offset or scientific notation).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from html import escape

import numpy as np
from markupsafe import Markup

from pinbench.core.files import counted

LABEL_PX = 12
TICK_PX = 11
CHAR_PX = 7.0  # a generous average advance of LABEL_PX system-ui text, to size the label column
COLOURS = {"PASS": "#1a7f37", "FAIL": "#cf222e", "MISSING": "#9a6700", "INCOMPLETE": "#9a6700",
           "better": "#1a7f37", "worse": "#cf222e", "within noise": "#57606a", "not judged": "#9a6700"}
GREY = "#57606a"
BAND = "#0969da"
MAX_Z = 10.0  # deviations beyond ±MAX_Z tolerances are drawn at the edge, with their value written
ROW_PX = 24


def _n(value: float) -> str:
    """A coordinate, short and deterministic."""
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _text(x: float, y: float, text: str, *, size: int = LABEL_PX, anchor: str = "start", fill: str = "#24292f"
          ) -> str:
    return (f'<text x="{_n(x)}" y="{_n(y)}" font-size="{size}" text-anchor="{anchor}" fill="{fill}">'
            f"{escape(text)}</text>")


def _line(x1: float, y1: float, x2: float, y2: float, stroke: str, more: str = "") -> str:
    return f'<line x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(x2)}" y2="{_n(y2)}" stroke="{stroke}"{more}/>'


def _axis(x: Callable[[float], float], y: float, lo: float, hi: float, marks: Iterable[tuple[float, str]],
          caption: str) -> list[str]:
    """A plot's axis from ``lo`` to ``hi`` at height ``y``: a tick and its label per mark, the caption under them."""
    body = [_line(x(lo), y, x(hi), y, GREY)]
    for value, label in marks:
        body += [_line(x(value), y, x(value), y + 4, GREY),
                 _text(x(value), y + 16, label, size=TICK_PX, anchor="middle", fill=GREY)]
    return [*body, _text(x(0), y + 32, caption, size=TICK_PX, anchor="middle", fill=GREY)]


def _svg(width: float, height: float, body: list[str], label: str) -> Markup:
    return Markup(f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" width="{_n(width)}" height="{_n(height)}" '
                  f'viewBox="0 0 {_n(width)} {_n(height)}" role="img" aria-label="{escape(label)}" '
                  f'font-family="system-ui, sans-serif">' + "".join(body) + "</svg>")


def _arrow(x: float, y: float, pointing: int, colour: str) -> str:
    """A filled triangle whose tip is at (x, y), pointing right (1) or left (-1): a bar that goes on."""
    back = x - pointing * 8
    return (f'<polygon class="clipped" points="{_n(x)},{_n(y)} {_n(back)},{_n(y - 5)} {_n(back)},{_n(y + 5)}" '
            f'fill="{colour}"/>')


def nice_step(span: float, n: int = 4) -> float:
    """A step of 1, 2, 2.5 or 5 times a power of ten giving about ``n`` intervals over ``span``."""
    if not span > 0 or not math.isfinite(span):
        return 1.0
    raw = span / n
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)


def tick_label(value: float, step: float) -> str:
    """``value`` with as many decimals as ``step`` needs, never in scientific notation; no ``-0``."""
    exponent = math.floor(math.log10(step) + 1e-9)
    decimals = max(0, -exponent) + (1 if abs(step / 10**exponent - 2.5) < 1e-6 else 0)
    text = f"{value:.{decimals}f}"
    return "0" if float(text) == 0 else text


def ticks(lo: float, hi: float, n: int = 4) -> list[tuple[float, str]]:
    """Nice tick positions in [lo, hi] with their labels."""
    step = nice_step(hi - lo, n)
    first = math.ceil(lo / step - 1e-9)
    out = []
    k = first
    while k * step <= hi + 1e-9 * step:
        out.append((k * step, tick_label(k * step, step)))
        k += 1
    return out


# ----------------------------------------------------------------------------------------- deviations


@dataclass(frozen=True)
class Deviation:
    """One metric against its reference, in units of its tolerance (None when not measured)."""

    label: str
    status: str
    z: float | None  # (value - reference) / tolerance
    run: tuple[float, float] | None  # the run's interval, same units
    ref: tuple[float, float] | None  # the reference's interval, same units
    hover: str = ""


def _clip(value: float, limit: float) -> float:
    return max(-limit, min(limit, value))


def deviations_svg(rows: Sequence[Deviation], title: str) -> Markup:
    """The rows of one group on one axis of tolerances; see the module docstring."""
    finite = [abs(r.z) for r in rows if r.z is not None and math.isfinite(r.z)]
    limit = min(MAX_Z, max([1.6, *(1.15 * z for z in finite)]))
    label_w = 12 + CHAR_PX * max(len(r.label) for r in rows)
    plot_w, top, bottom = 300.0, 10.0, 40.0
    width, height = label_w + plot_w + 56, top + ROW_PX * len(rows) + bottom

    def x(z: float) -> float:
        return label_w + (z + limit) / (2 * limit) * plot_w

    body = [f'<rect x="{_n(x(-1))}" y="{_n(top)}" width="{_n(x(1) - x(-1))}" height="{_n(ROW_PX * len(rows))}" '
            f'fill="{BAND}" fill-opacity="0.13"/>',
            _line(x(0), top, x(0), top + ROW_PX * len(rows), BAND, ' stroke-width="1"')]
    for i, row in enumerate(rows):
        y = top + ROW_PX * (i + 0.5)
        colour = COLOURS.get(row.status, GREY)
        parts = [f"<title>{escape(row.hover or row.label)}</title>",
                 _text(label_w - 8, y + 4, row.label, anchor="end")]
        if row.ref is not None:
            lo, hi = (_clip(v, limit) for v in row.ref)
            parts.append(f'<rect x="{_n(x(lo))}" y="{_n(y - 8)}" width="{_n(max(x(hi) - x(lo), 1))}" height="16" '
                         'fill="#8c959f" fill-opacity="0.35"/>')
        if row.run is not None:
            lo, hi = (_clip(v, limit) for v in row.run)
            parts.append(_line(x(lo), y, x(hi), y, colour, ' stroke-width="2.5"'))
            if row.run[0] < -limit:
                parts.append(_arrow(x(-limit), y, -1, colour))
            if row.run[1] > limit:
                parts.append(_arrow(x(limit), y, 1, colour))
        if row.z is None:
            parts.append(_text(x(0), y + 4, "not measured", size=TICK_PX, anchor="middle", fill=colour))
        else:
            z = _clip(row.z, limit) if math.isfinite(row.z) else math.copysign(limit, row.z)
            fill = "white" if row.status == "INCOMPLETE" else colour
            parts.append(f'<circle cx="{_n(x(z))}" cy="{_n(y)}" r="5" fill="{fill}" stroke="{colour}" '
                         'stroke-width="1.5"/>')
            if abs(row.z) > limit:
                text = "tolerance 0" if math.isinf(row.z) else f"{row.z:+.3g}"
                parts.append(_text(x(z) + (8 if z > 0 else -8), y + 4, text, size=TICK_PX,
                                   anchor="start" if z > 0 else "end", fill=colour))
        body.append(f'<g class="row">{"".join(parts)}</g>')
    step = next(s for s in (1, 2, 5, 10) if limit / s <= 3.5)
    marks = [(k * step, f"{k * step:+d}" if k else "0") for k in range(-int(limit // step), int(limit // step) + 1)]
    body += _axis(x, top + ROW_PX * len(rows), -limit, limit, marks, "(value - reference) / tolerance")
    return _svg(width, height, body, title)


# ----------------------------------------------------------------------------------------- histograms


@dataclass(frozen=True)
class Distribution:
    """One metric's per-sample values (its own cohort) and what to mark on them."""

    values: np.ndarray
    aggregate: float | None
    interval: tuple[float, float] | None
    reference: float | None
    band: tuple[float, float] | None  # reference ± tolerance


def histogram_svg(panel: Distribution, title: str) -> Markup:
    """A histogram of the values (at least two distinct ones), the aggregate (dashed), its interval (dark band) and
    the reference with its tolerance band (blue)."""
    values = panel.values
    if not values.size or values.min() == values.max():
        raise ValueError(f"histogram_svg: {title!r} has no spread to draw (one value or all equal)")
    width, height, left, right, top, bottom = 260.0, 132.0, 10.0, 10.0, 6.0, 34.0
    marks = [v for v in (panel.aggregate, panel.reference, *(panel.band or ()), *(panel.interval or ()))
             if v is not None and math.isfinite(v)]
    lo, hi = float(min(values.min(), *marks)), float(max(values.max(), *marks))
    pad = (hi - lo) * 0.04
    lo, hi = lo - pad, hi + pad
    counts, edges = np.histogram(values, bins=min(30, max(4, math.ceil(math.sqrt(values.size)))),
                                 range=(float(values.min()), float(values.max())))
    plot_w, plot_h = width - left - right, height - top - bottom

    def x(v: float) -> float:
        return left + (v - lo) / (hi - lo) * plot_w

    body = []
    if panel.band is not None:
        band_w = max(x(panel.band[1]) - x(panel.band[0]), 1)
        body.append(f'<rect x="{_n(x(panel.band[0]))}" y="{_n(top)}" width="{_n(band_w)}" height="{_n(plot_h)}" '
                    f'fill="{BAND}" fill-opacity="0.15"/>')
    tallest = max(int(counts.max()), 1)
    for count, a, b in zip(counts, edges[:-1], edges[1:], strict=True):
        if count:
            h = count / tallest * plot_h
            body.append(f'<rect x="{_n(x(a) + 0.5)}" y="{_n(top + plot_h - h)}" '
                        f'width="{_n(max(x(b) - x(a) - 1, 1))}" height="{_n(h)}" fill="#8c959f">'
                        f"<title>{counted(count, 'sample')} in [{a:.4g}, {b:.4g}]</title></rect>")
    if panel.interval is not None:
        body.append(f'<rect x="{_n(x(panel.interval[0]))}" y="{_n(top)}" '
                    f'width="{_n(max(x(panel.interval[1]) - x(panel.interval[0]), 1))}" height="{_n(plot_h)}" '
                    'fill="black" fill-opacity="0.12"/>')
    if panel.reference is not None:
        body.append(_line(x(panel.reference), top, x(panel.reference), top + plot_h, BAND, ' stroke-width="1.5"'))
    if panel.aggregate is not None:
        body.append(_line(x(panel.aggregate), top, x(panel.aggregate), top + plot_h, "black",
                          ' stroke-width="1.2" stroke-dasharray="4 3"'))
    base = top + plot_h
    body.append(_line(left, base, left + plot_w, base, GREY))
    for value, label in ticks(lo, hi, 3):
        body.append(_line(x(value), base, x(value), base + 4, GREY))
        body.append(_text(x(value), base + 16, label, size=TICK_PX, anchor="middle", fill=GREY))
    body.append(_text(left + plot_w, base + 30, f"n={values.size}", size=TICK_PX, anchor="end", fill=GREY))
    return _svg(width, height, body, title)


# ----------------------------------------------------------------------------------------- differences


@dataclass(frozen=True)
class DifferenceRow:
    label: str
    verdict: str
    difference: float
    interval: tuple[float, float] | None
    higher_is_better: bool
    text: str  # the numbers, printed beside the row


def differences_svg(rows: Sequence[DifferenceRow], title: str) -> Markup:
    """B - A per metric on one axis in the metrics' units, right = better; see the module docstring."""
    label_w = 12 + CHAR_PX * max(len(r.label) for r in rows)
    plot_w, top, bottom = 240.0, 10.0, 40.0
    text_w = 12 + 6.6 * max(len(r.text) for r in rows)
    width, height = label_w + plot_w + text_w, top + ROW_PX * len(rows) + bottom
    extent = max((abs(v) for r in rows for v in (r.difference, *(r.interval or ())) if math.isfinite(v)),
                 default=0.0) or 1.0
    step = nice_step(2 * extent)
    limit = math.ceil(extent / step - 1e-9) * step

    def x(v: float) -> float:  # v in [-limit, limit]: B - A turned so that right is better
        return label_w + (v + limit) / (2 * limit) * plot_w

    body = [_line(x(0), top, x(0), top + ROW_PX * len(rows), GREY)]
    for i, row in enumerate(rows):
        y = top + ROW_PX * (i + 0.5)
        sign = 1.0 if row.higher_is_better else -1.0
        colour = COLOURS.get(row.verdict, GREY)
        parts = [f"<title>{escape(row.label)}: {escape(row.verdict)}</title>",
                 _text(label_w - 8, y + 4, row.label, anchor="end")]
        if row.interval is not None:
            lo, hi = sorted(sign * v for v in row.interval)
            parts.append(_line(x(lo), y, x(hi), y, colour, ' stroke-width="2.5"'))
        parts.append(f'<circle cx="{_n(x(sign * row.difference))}" cy="{_n(y)}" r="5" fill="{colour}"/>')
        parts.append(_text(label_w + plot_w + 10, y + 4, row.text, size=TICK_PX, fill=colour))
        body.append(f'<g class="row">{"".join(parts)}</g>')
    body += _axis(x, top + ROW_PX * len(rows), -limit, limit, ticks(-limit, limit),
                  "B - A in each metric's unit, to scale; right = better")
    return _svg(width, height, body, title)
