"""The report's figures (matplotlib, Agg, no pyplot): compact, one per question a reviewer asks.

* ``plot_deviations``: every metric of a run against its reference on ONE axis, as
  (measured - reference) / tolerance, so the tolerance band is always [-1, 1]; the bar is the run's 95%
  interval on the same scale, the grey band the reference's own interval. Failures are drawn first (top).
* ``plot_distributions``: one figure per metric group, a small histogram per metric over exactly the
  samples the metric was computed from, with the aggregate, its interval and the reference band (only
  metrics whose values differ: one bar would say nothing the report's table does not).
* ``plot_differences``: one row per metric of ``pinbench compare``: B - A with its paired interval, each row
  scaled to its own interval and oriented so that right is better; the numbers are printed beside it.

Tick labels never use matplotlib's offset notation ("1e-9+7e-1"): every axis shows plain values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, ScalarFormatter

DPI = 80
COLOURS = {"PASS": "#1a7f37", "FAIL": "#cf222e", "MISSING": "#bf8700", "INCOMPLETE": "#bf8700",
           "better": "#1a7f37", "worse": "#cf222e", "within noise": "#57606a", "not judged": "#bf8700"}
BAND = "#0969da"
MAX_Z = 10.0  # deviations beyond ±MAX_Z tolerances are drawn at the edge, with their value written


def save(fig: Figure, path: Path) -> None:
    # No pyplot: the figure is never registered globally, so nothing leaks between plots.
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=DPI, metadata={"Software": None})


def plain_ticks(ax: Any) -> None:
    """No offset or scientific notation on the x axis: a reader sees the values themselves."""
    formatter = ScalarFormatter(useOffset=False)
    formatter.set_scientific(False)
    ax.xaxis.set_major_formatter(formatter)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4))


@dataclass(frozen=True)
class Deviation:
    """One metric against its reference, in units of its tolerance (None when not measured)."""

    label: str
    status: str
    z: float | None  # (measured - reference) / tolerance
    run: tuple[float, float] | None  # the run's interval, same units
    ref: tuple[float, float] | None  # the reference's interval, same units


def _clip(value: float, limit: float) -> float:
    return max(-limit, min(limit, value))


def plot_deviations(rows: Sequence[Deviation], path: Path) -> None:
    """All metrics of one run on one axis of tolerances; see the module docstring."""
    finite = [abs(r.z) for r in rows if r.z is not None and math.isfinite(r.z)]
    limit = min(MAX_Z, max([1.6, *(1.15 * z for z in finite)]))
    fig = Figure(figsize=(7.6, 0.9 + 0.3 * len(rows)), layout="constrained")
    ax = fig.subplots()
    ax.axvspan(-1, 1, color=BAND, alpha=0.13, lw=0)
    ax.axvline(0, color=BAND, lw=1)
    for y, row in enumerate(reversed(rows)):
        colour = COLOURS.get(row.status, "#57606a")
        if row.ref is not None:
            lo, hi = (_clip(v, limit) for v in row.ref)
            ax.fill_between([lo, hi], y - 0.32, y + 0.32, color="#8c959f", alpha=0.35, lw=0)
        if row.run is not None:
            lo, hi = (_clip(v, limit) for v in row.run)
            ax.plot([lo, hi], [y, y], color=colour, lw=2, solid_capstyle="butt")
            for edge, raw in ((lo, row.run[0]), (hi, row.run[1])):
                if abs(raw) > limit:
                    ax.plot([edge], [y], marker="<" if raw < 0 else ">", color=colour, ms=5)
        if row.z is None:
            ax.text(0, y, "not measured", color=colour, ha="center", va="center", fontsize=7)
            continue
        z = _clip(row.z, limit) if math.isfinite(row.z) else math.copysign(limit, row.z)
        hollow = row.status == "INCOMPLETE"
        ax.plot([z], [y], "o", ms=6, color=colour, mfc="white" if hollow else colour, zorder=3)
        if abs(row.z) > limit:
            text = "tolerance 0" if math.isinf(row.z) else f"{row.z:+.3g}"
            ax.text(z, y + 0.3, text, color=colour, ha="right" if z > 0 else "left", va="bottom", fontsize=6)
    ax.set_yticks(range(len(rows)), [r.label for r in reversed(rows)], fontsize=7)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlim(-limit, limit)
    ax.tick_params(axis="x", labelsize=7)
    plain_ticks(ax)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 5, 10], integer=True))
    ax.set_xlabel("(measured - reference) / tolerance   [band: tolerance; bar: run's 95% interval; "
                  "grey: reference's]", fontsize=7)
    save(fig, path)


@dataclass(frozen=True)
class Distribution:
    """One metric's per-sample values (its own cohort) and what to mark on them."""

    title: str
    values: np.ndarray
    aggregate: float | None
    interval: tuple[float, float] | None
    reference: float | None
    band: tuple[float, float] | None  # reference ± tolerance


def plot_distributions(panels: Sequence[Distribution], path: Path, columns: int = 3) -> None:
    """Small multiples: a histogram of each metric's values, aggregate and reference marked.

    Every panel holds at least two distinct values (the report lists a single value in its table instead).
    """
    flat = [panel.title for panel in panels if not panel.values.size or panel.values.min() == panel.values.max()]
    if flat:
        raise ValueError(f"plot_distributions: {flat[0]!r} has no spread to draw (one value or all equal)")
    rows = math.ceil(len(panels) / columns)
    fig = Figure(figsize=(2.6 * min(columns, len(panels)), 1.9 * rows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, min(columns, len(panels)), squeeze=False).ravel())
    for ax, panel in zip(axes, panels, strict=False):
        values = panel.values
        ax.hist(values, bins=min(30, max(4, math.ceil(math.sqrt(values.size)))), color="#8c959f", edgecolor="white")
        if panel.band is not None:
            ax.axvspan(*panel.band, color=BAND, alpha=0.15, lw=0)
        if panel.reference is not None:
            ax.axvline(panel.reference, color=BAND, lw=1.2)
        if panel.interval is not None:
            ax.axvspan(*panel.interval, color="black", alpha=0.12, lw=0)
        if panel.aggregate is not None:
            ax.axvline(panel.aggregate, color="black", ls="--", lw=1)
        ax.set_title(panel.title, fontsize=7)
        ax.tick_params(labelsize=6)
        ax.set_yticks([])
        plain_ticks(ax)
    for ax in axes[len(panels):]:
        ax.set_axis_off()
    save(fig, path)


@dataclass(frozen=True)
class DifferenceRow:
    label: str
    verdict: str
    difference: float
    interval: tuple[float, float] | None
    higher_is_better: bool
    text: str  # the numbers, printed beside the row


def plot_differences(rows: Sequence[DifferenceRow], path: Path) -> None:
    """B - A per metric, each row scaled to its own interval, right = better; see the module docstring."""
    fig = Figure(figsize=(7.6, 0.9 + 0.3 * len(rows)), layout="constrained")
    ax = fig.subplots()
    ax.axvline(0, color="#57606a", lw=1)
    for y, row in enumerate(reversed(rows)):
        sign = 1.0 if row.higher_is_better else -1.0
        points = [row.difference, *(row.interval or ())]
        scale = max(abs(v) for v in points) or 1.0
        colour = COLOURS.get(row.verdict, "#57606a")
        if row.interval is not None:
            lo, hi = sorted(sign * v / scale for v in row.interval)
            ax.plot([lo, hi], [y, y], color=colour, lw=2, solid_capstyle="butt")
        ax.plot([sign * row.difference / scale], [y], "o", ms=6, color=colour, zorder=3)
        ax.text(1.08, y, row.text, fontsize=6.5, va="center", ha="left", color=colour)
    ax.set_yticks(range(len(rows)), [r.label for r in reversed(rows)], fontsize=7)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlim(-1.05, 3.0)
    ax.set_xticks([-1, 0, 1], ["worse", "0", "better"])
    ax.tick_params(axis="x", labelsize=7)
    ax.set_xlabel("B - A, each row scaled to its own 95% interval (right is better); numbers beside", fontsize=7)
    save(fig, path)
