"""Static HTML report for one or more scorecards: the page a reviewer opens to judge a run.

Why a static page: it must open offline, inside an air-gapped cluster or from a CI artifact, so it has
no JavaScript and no network resources; plots are PNGs written next to ``index.html`` and linked
relatively. A partial or failed run is marked at the top of its section, and a scorecard is only called
PASS against a reference when the run is complete and comparable (same recipe, version, checkpoint,
mode and sample count). Every string that comes from data is redacted and HTML-escaped.
"""

from __future__ import annotations

import html
import math
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

import pinbench
from pinbench.files import write_atomic
from pinbench.provenance import redact, scrub
from pinbench.reference import (
    EXIT_FAIL,
    EXIT_INCOMPLETE,
    EXIT_MISMATCH,
    EXIT_PASS,
    DiffResult,
    DiffRow,
    MetricReference,
    Reference,
    diff,
    reference_from_dict,
)
from pinbench.scorecard import load_scorecard, validate_scorecard

DPI = 80
FIGURES_DIR = "figures"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
STATUS_COLOURS = {"PASS": "#1a7f37", "FAIL": "#cf222e", "MISSING": "#bf8700", "INCOMPLETE": "#bf8700"}
NO_REF_COLOUR = "#57606a"

ExtraFigure = tuple[str, Path, str]


class ReportError(ValueError):
    """Bad input to the report: one line naming the input and what is wrong."""


# ----------------------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class SampleView:
    sample_id: str
    status: str
    result: Mapping[str, Any]


def _field(obj: Any, key: str) -> Any:
    """Read ``key`` from a mapping or an attribute, so SampleRecords and their JSON dicts both work."""
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def _as_float(value: Any) -> float | None:
    """A finite float, or None for anything else (null, NaN, bools, lists)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _normalise_samples(records: Sequence[Any]) -> list[SampleView]:
    out = []
    for record in records:
        result = _field(record, "result")
        out.append(SampleView(sample_id=str(_field(record, "sample_id")),
                              status=str(_field(record, "status")),
                              result=result if isinstance(result, Mapping) else {}))
    return out


def _load_card(card: Path | str | Mapping[str, Any], index: int) -> tuple[dict[str, Any], str]:
    """The validated scorecard dict and a label naming where it came from (for error messages)."""
    if not isinstance(card, Mapping):
        return load_scorecard(card), str(card)
    origin = f"scorecard #{index} ({card.get('recipe')} / {card.get('checkpoint')})"
    try:
        validate_scorecard(card)
    except ValueError as exc:
        raise ReportError(f"{origin}: {exc}") from None
    return dict(card), origin


def as_reference(ref: Reference | Mapping[str, Any], origin: str) -> Reference:
    """A loaded Reference, or one built from the reference YAML as a dict (validated the same way)."""
    if isinstance(ref, Reference):
        return ref
    if isinstance(ref, Mapping):
        try:
            return reference_from_dict(ref)
        except ValueError as exc:
            raise ReportError(f"{origin}: {exc}") from None
    raise ReportError(f"{origin}: expected a pinbench.reference.Reference or the reference YAML as a "
                      f"mapping, got {type(ref).__name__}")


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


# ----------------------------------------------------------------------------------------- comparison


VERDICTS = {EXIT_PASS: "PASS", EXIT_FAIL: "FAIL", EXIT_INCOMPLETE: "INCOMPLETE", EXIT_MISMATCH: "MISMATCH"}


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
    ref: MetricReference | None
    checked: DiffRow | None
    status: str  # PASS | FAIL | MISSING | INCOMPLETE | "" (no reference)

    @property
    def bound(self) -> float:
        assert self.ref is not None
        return self.ref.tolerance.bound(self.ref.value)


def _group_of(name: str) -> str:
    return name.split("/", 1)[0] if "/" in name else ""


def _row_status(checked: DiffRow | None, metric: Mapping[str, Any]) -> str:
    """diff's status, except that a value computed over fewer samples than expected is INCOMPLETE:
    it is shown next to the reference but never judged as if the run were complete."""
    if checked is None:
        return ""
    if checked.status in ("PASS", "FAIL") and metric["n_scored"] < metric["n_expected"]:
        return "INCOMPLETE"
    return checked.status


def build_rows(card: Mapping[str, Any], ref: Reference | None, result: DiffResult | None) -> list[Row]:
    """Scorecard metrics in order, then reference metrics the scorecard lacks; grouped by modality."""
    metrics: Mapping[str, Any] = card["metrics"]
    checked = {row.metric: row for row in result.rows} if result else {}
    rows = []
    for name, m in metrics.items():
        rows.append(Row(
            name=name, group=_group_of(name), measured=_as_float(m["value"]), aggregation=m["aggregation"],
            n_expected=m["n_expected"], n_scored=m["n_scored"], n_failed=m["n_failed"],
            n_missing=m["n_missing"], ref=ref.metrics.get(name) if ref else None,
            checked=checked.get(name), status=_row_status(checked.get(name), m),
        ))
    for name, row in checked.items():
        if name not in metrics and ref is not None:
            rows.append(Row(name, _group_of(name), None, None, card["samples"]["n_expected"], None, None,
                            None, ref.metrics[name], row, row.status))
    groups = list(dict.fromkeys(row.group for row in rows))
    return sorted(rows, key=lambda row: groups.index(row.group))


# ----------------------------------------------------------------------------------------- plots


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:40] or "x"


def _save(fig: Figure, path: Path) -> None:
    # No pyplot: the figure is never registered globally, so nothing leaks between plots.
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=DPI, metadata={"Software": None})


def _direction_hint(ax: Any, direction: str | None) -> None:
    if direction == "higher":
        ax.text(0.995, 0.92, "better →", transform=ax.transAxes, ha="right", va="top", fontsize=7)
    elif direction == "lower":
        ax.text(0.005, 0.92, "← better", transform=ax.transAxes, ha="left", va="top", fontsize=7)


def plot_comparison(rows: Sequence[Row], path: Path) -> None:
    """One strip per metric on its own value axis: tolerance band, reference line, measured dot."""
    fig = Figure(figsize=(7.0, 0.35 + 0.62 * len(rows)), layout="constrained")
    axes = fig.subplots(len(rows), 1, squeeze=False)[:, 0]
    for ax, row in zip(axes, rows, strict=True):
        ref = row.ref
        assert ref is not None
        half = row.bound
        lo, hi = ref.value - half, ref.value + half
        colour = STATUS_COLOURS.get(row.status, NO_REF_COLOUR)
        ax.axvspan(lo, hi, color="#0969da", alpha=0.18, lw=0)
        ax.axvline(ref.value, color="#0969da", lw=1.2)
        xs = [lo, hi] + ([row.measured] if row.measured is not None else [])
        if row.measured is not None:
            hollow = row.status == "INCOMPLETE"
            ax.plot([row.measured], [0.45], "o", ms=8, color=colour, mfc="white" if hollow else colour)
            ax.text(row.measured, 0.72, f"{_num(row.measured)} {row.status}", color=colour, ha="center",
                    va="bottom", fontsize=7)
        else:
            ax.text(0.5, 0.45, "no measured value (MISSING)", transform=ax.transAxes, ha="center",
                    va="center", color=colour, fontsize=8)
        span = max(xs) - min(xs) or max(abs(ref.value) * 0.02, 1e-6)
        ax.set_xlim(min(xs) - 0.25 * span, max(xs) + 0.25 * span)
        ax.set_ylim(0, 1.1)
        ax.set_yticks([])
        ax.tick_params(axis="x", labelsize=7)
        ax.set_ylabel(row.name + (" ★" if ref.primary else ""), rotation=0, ha="right", va="center",
                      fontsize=8)
        _direction_hint(ax, ref.direction)
    _save(fig, path)


def _values(samples: Sequence[SampleView], key: str) -> np.ndarray:
    vals = [_as_float(s.result.get(key)) for s in samples if s.status == "ok"]
    return np.array([v for v in vals if v is not None], dtype=np.float64)


def plot_distribution(name: str, values: np.ndarray, row: Row | None, path: Path) -> None:
    """Histogram with a jittered strip of the same values underneath; scorecard and reference marked."""
    fig = Figure(figsize=(4.2, 2.6), layout="constrained")
    hist_ax, strip_ax = fig.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    bins = min(40, max(5, math.ceil(math.sqrt(values.size))))
    hist_ax.hist(values, bins=bins, color="#8c959f", edgecolor="white")
    jitter = np.random.default_rng(0).uniform(-0.3, 0.3, values.size)
    strip_ax.plot(values, jitter, "o", ms=3, alpha=0.6, color="#24292f")
    strip_ax.set_ylim(-0.5, 0.5)
    strip_ax.set_yticks([])
    for ax in (hist_ax, strip_ax):
        if row is not None and row.ref is not None:
            half = row.bound
            ax.axvspan(row.ref.value - half, row.ref.value + half, color="#0969da", alpha=0.15, lw=0)
            ax.axvline(row.ref.value, color="#0969da", lw=1.2, label="reference")
        if row is not None and row.measured is not None:
            ax.axvline(row.measured, color="black", ls="--", lw=1.0, label=f"scorecard ({row.aggregation})")
    hist_ax.set_title(name, fontsize=9)
    hist_ax.tick_params(labelsize=7)
    strip_ax.tick_params(labelsize=7)
    if hist_ax.get_legend_handles_labels()[0]:
        hist_ax.legend(fontsize=6, loc="upper right")
    _save(fig, path)


# ----------------------------------------------------------------------------------------- html


def _num(value: Any, spec: str = ".6g") -> str:
    v = _as_float(value)
    return "—" if v is None else format(v, spec)


def _t(value: Any) -> str:
    """Every data string goes through here: redacted, then escaped."""
    return html.escape(redact(str(value)), quote=True)


def _render_value(value: Any) -> str:
    """Nested dicts and lists as nested tables / lists. Callers pass data through ``scrub`` first."""
    if isinstance(value, Mapping):
        if not value:
            return "<em>empty</em>"
        body = "".join(f"<tr><th>{_t(k)}</th><td>{_render_value(v)}</td></tr>" for k, v in value.items())
        return f'<table class="kv">{body}</table>'
    if isinstance(value, (list, tuple)):
        if not value:
            return "<em>empty</em>"
        if all(not isinstance(v, (Mapping, list, tuple)) for v in value) and len(value) <= 8:
            return ", ".join(_render_value(v) for v in value)
        return "<ol>" + "".join(f"<li>{_render_value(v)}</li>" for v in value) + "</ol>"
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return _num(value)
    return _t(value)


def _provenance_html(prov: Mapping[str, Any]) -> str:
    """Headline (commit, dirty flag, image digest, versions, unverified inputs), then everything."""
    prov = scrub(dict(prov))
    code = prov.get("pinbench") or {}
    container = prov.get("container") or {}
    packages = prov.get("packages") or {}
    commit = code.get("commit")
    items = [f"<dt>commit</dt><dd><code>{_t(commit)}</code></dd>" if commit
             else "<dt>commit</dt><dd>none (not run from a git checkout with commits)</dd>"]
    dirty = code.get("dirty")
    if dirty:
        items.append(f"<dt>working tree</dt><dd>{_badge('DIRTY', 'FAIL')} uncommitted changes</dd>")
    elif dirty is not None:
        items.append("<dt>working tree</dt><dd>clean</dd>")
    image = container.get("image_digest")
    items.append(f"<dt>image digest</dt><dd><code>{_t(image)}</code></dd>" if image else
                 "<dt>image digest</dt><dd>none (not run in a pinbench container)</dd>")
    versions = {"pinbench": code.get("version"), "python": prov.get("python"), "torch": packages.get("torch"),
                "cuda": packages.get("cuda"), "gpus": prov.get("gpus"), "driver": prov.get("driver")}
    shown = ", ".join(f"{_t(k)} {_render_value(v)}" for k, v in versions.items() if v)
    items.append(f"<dt>versions</dt><dd>{shown or '—'}</dd>")
    inputs = prov.get("inputs") or {}
    unverified = [f"{_t(name)}: {_t(state.get('reason', 'unverified'))}" for name, state in inputs.items()
                  if isinstance(state, Mapping) and state.get("state") != "verified"]
    verified = len(inputs) - len(unverified)
    pins = f"{verified} of {len(inputs)} pinned inputs verified"
    if unverified:
        pins += '<ul class="warn">' + "".join(f"<li>{u}</li>" for u in unverified) + "</ul>"
    items.append(f"<dt>pins</dt><dd>{pins}</dd>")
    return (f'<dl class="headline">{"".join(items)}</dl>'
            f"<details><summary>full provenance</summary>{_render_value(prov)}</details>")


_STATUS_LABELS = {"complete": "COMPLETE", "partial": "PARTIAL", "failed": "FAILED"}
_MODE_NOTES = {
    "fixture": "FIXTURE run on synthetic data: it tests the pipeline, it is not a benchmark score.",
    "smoke": "SMOKE run on a subset: not comparable with a full-run reference.",
}


def _status_banner(card: Mapping[str, Any]) -> str:
    status, samples = card["status"], card["samples"]
    counts = (f"{samples['n_ok']} of {samples['n_expected']} samples ok, {samples['n_failed']} failed, "
              f"{samples['n_missing']} missing")
    note = {"partial": " — scores cover only part of the sample set", "failed": " — nothing was scored"}
    reasons = "".join(f"<li>{_t(r)}</li>" for r in card.get("status_reasons") or [])
    mode_note = _MODE_NOTES.get(card["mode"])
    return (f'<div class="banner {status}"><strong>{_STATUS_LABELS[status]}</strong>{note.get(status, "")}'
            f"<br>{counts}{'<ul>' + reasons + '</ul>' if reasons else ''}</div>"
            + (f'<p class="modenote">{mode_note}</p>' if mode_note else ""))


def _score_table(rows: Sequence[Row], with_ref: bool) -> str:
    head = "<tr><th>metric</th><th>measured</th><th>aggregation</th><th>scored / expected</th>"
    if with_ref:
        head += "<th>direction</th><th>reference</th><th>tolerance</th><th>delta</th><th>status</th>"
    body = []
    group = None
    ncols = 9 if with_ref else 4
    for row in rows:
        if row.group != group:
            group = row.group
            body.append(f'<tr class="group"><th colspan="{ncols}">{_t(group) if group else "(no modality)"}'
                        "</th></tr>")
        counts = "not in scorecard" if row.n_scored is None else f"{row.n_scored} / {row.n_expected}"
        lost = [f"{n} {what}" for n, what in ((row.n_failed, "failed"), (row.n_missing, "missing")) if n]
        if lost:
            counts += f' <span class="warn">({", ".join(lost)})</span>'
        cells = [f"<td><code>{_t(row.name)}</code></td>", f"<td>{_num(row.measured)}</td>",
                 f"<td>{_t(row.aggregation or '—')}</td>", f"<td>{counts}</td>"]
        if with_ref:
            cells += _ref_cells(row)
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="scores">{head}</tr>{"".join(body)}</table>'


def _ref_cells(row: Row) -> list[str]:
    ref = row.ref
    if ref is None:
        return ["<td></td>", "<td>—</td>", "<td></td>", "<td></td>", '<td class="muted">no reference</td>']
    arrow = {"higher": "↑ higher is better", "lower": "↓ lower is better"}.get(str(ref.direction), "—")
    checked = row.checked
    assert checked is not None
    delta_text = "—" if checked.delta is None else f"{checked.delta:+.4g}"
    if checked.verdict:
        delta_text += f" ({checked.verdict})"
    title = f' title="{_t(ref.note)}"' if ref.note else ""
    return [
        f"<td>{arrow}</td>",
        f"<td{title}>{_num(ref.value)}{' ★ primary' if ref.primary else ''}</td>",
        f"<td>{_t(checked.tolerance_text)}</td>",
        f"<td>{delta_text}</td>",
        f"<td>{_badge(row.status, row.status)}</td>",
    ]


def _failures_html(card: Mapping[str, Any]) -> str:
    """One row per (sample, reason) naming the metrics it cost, failed first then missing, in order."""
    metrics: Mapping[str, Any] = card["metrics"]
    grouped: dict[tuple[str, str], list[str]] = {}
    for name, m in metrics.items():
        for failure in m["failed"]:
            grouped.setdefault((failure["sample_id"], failure["error"]), []).append(name)
    for name, m in metrics.items():
        for sample_id in m.get("missing") or []:
            grouped.setdefault((sample_id, "missing: no record for this sample"), []).append(name)
    unnamed = {name: m["n_missing"] - len(m.get("missing") or []) for name, m in metrics.items()}
    notes = [f"{_t(name)}: {n} sample(s) have no record (never run, or scored in another shard)"
             for name, n in unnamed.items() if n > 0]
    out = ["<ul>" + "".join(f'<li class="warn">{n}</li>' for n in notes) + "</ul>"] if notes else []
    if not grouped:
        return "".join(out) + ("" if notes else "<p>No failed or missing samples.</p>")
    rows = []
    for (sample_id, error), names in grouped.items():
        which = f"all {len(names)}" if len(names) == len(metrics) > 1 else ", ".join(_t(n) for n in names)
        rows.append(f"<tr><td><code>{_t(sample_id)}</code></td><td><pre>{_t(error)}</pre></td>"
                    f"<td>{which}</td></tr>")
    out.append(f'<p>{len(grouped)} failure(s).</p><table class="failures"><tr><th>sample</th><th>reason</th>'
               f"<th>metrics affected</th></tr>{''.join(rows)}</table>")
    return "".join(out)


_STATUS_BADGE = {"complete": "PASS", "partial": "INCOMPLETE", "failed": "FAIL"}
_VERDICT_BADGE = {"PASS": "PASS", "FAIL": "FAIL", "INCOMPLETE": "INCOMPLETE", "MISMATCH": "FAIL",
                  "NO REFERENCE": "none"}


def _badge(text: str, cls: str) -> str:
    """``text`` must already be escaped; ``cls`` is one of the fixed badge classes."""
    return f'<span class="badge {cls}">{text}</span>'


def _figure_html(src: str, title: str, caption: str) -> str:
    return (f'<figure><img src="{html.escape(src)}" alt="{_t(title)}"><figcaption><strong>{_t(title)}'
            f"</strong>{'<br>' + _t(caption) if caption else ''}</figcaption></figure>")


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#24292f;padding:0 1em}
h1{margin-bottom:.2em} h2{border-bottom:2px solid #d0d7de;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0} th,td{border:1px solid #d0d7de;padding:3px 7px;
text-align:left;vertical-align:top;font-size:14px} tr.group th{background:#f6f8fa}
table.kv{font-size:13px} table.kv th{font-weight:600;background:#f6f8fa}
td{word-break:break-word} pre{margin:0;white-space:pre-wrap;font-size:13px}
.banner{font-size:20px;padding:.6em 1em;border-radius:6px;margin:.8em 0;color:#fff}
.banner strong{font-size:28px;letter-spacing:.05em}
.banner.complete{background:#1a7f37} .banner.partial{background:#bf8700} .banner.failed{background:#cf222e}
.modenote{font-weight:600;color:#9a6700}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-weight:700;font-size:13px}
.badge.PASS{background:#1a7f37} .badge.FAIL{background:#cf222e}
.badge.MISSING,.badge.INCOMPLETE{background:#bf8700}
.badge.none{background:#57606a} .muted{color:#57606a} .warn{color:#cf222e;font-weight:600}
.verdict{font-size:18px} figure{display:inline-block;margin:.5em;vertical-align:top;max-width:100%}
figure img{max-width:100%;border:1px solid #d0d7de} figcaption{font-size:13px;max-width:560px}
dl.headline{display:grid;grid-template-columns:max-content auto;gap:2px 1em} dl.headline dt{font-weight:600}
dl.headline dd{margin:0}
"""


# ----------------------------------------------------------------------------------------- sections


@dataclass
class _Section:
    index: int
    card: dict[str, Any]
    origin: str
    ref: Reference | None
    samples: list[SampleView] | None
    extras: list[ExtraFigure]

    @property
    def anchor(self) -> str:
        return f"s{self.index + 1:02d}"

    @property
    def label(self) -> str:
        return f"{self.card['recipe']} · {self.card['checkpoint']} · {self.card['mode']}"


def _render_section(sec: _Section, fig_dir: Path, written: set[Path]) -> tuple[str, str]:
    """Write this scorecard's PNGs and return (section html, verdict)."""
    card, ref = sec.card, sec.ref
    checked = diff(card, ref) if ref else None
    rows = build_rows(card, ref, checked)
    result = VERDICTS[checked.exit_code] if checked else "NO REFERENCE"
    parts = [f'<section id="{sec.anchor}"><h2>{_t(sec.label)}</h2>', _status_banner(card)]
    summary = {
        "recipe": card["recipe"], "recipe version": card["recipe_version"], "checkpoint": card["checkpoint"],
        "mode": card["mode"], "schema version": card["schema_version"], "scorecard": sec.origin,
        "samples file": card["samples"]["path"],
    }
    parts.append(_render_value(summary))

    if ref is not None and checked is not None:
        parts.append(_comparison_html(sec.anchor, ref, checked, rows, fig_dir, written))
    else:
        parts.append('<h3>Scorecard</h3><p class="muted">No reference given: measured values only, '
                     "nothing judged.</p>")
        parts.append(_score_table(rows, with_ref=False))

    parts.append("<h3>Per-sample distributions</h3>")
    parts.append(_distributions_html(sec, rows, fig_dir, written))
    parts.append("<h3>Failures</h3>")
    parts.append(_failures_html(card))
    if sec.extras:
        parts.append("<h3>Recipe figures</h3>")
        for k, (title, src, caption) in enumerate(sec.extras):
            dest = fig_dir / f"{sec.anchor}-extra-{k + 1:02d}-{_slug(Path(src).stem)}.png"
            shutil.copyfile(src, dest)
            written.add(dest)
            parts.append(_figure_html(f"{FIGURES_DIR}/{dest.name}", title, caption))
    parts.append("<h3>Provenance</h3>")
    parts.append(_provenance_html(card["provenance"]))
    for key in ("config", "timings", "extra"):
        if card.get(key):
            parts.append(f"<details><summary>{key}</summary>{_render_value(scrub(card[key]))}</details>")
    parts.append("</section>")
    return "".join(parts), result


def _comparison_html(anchor: str, ref: Reference, checked: DiffResult, rows: Sequence[Row], fig_dir: Path,
                     written: set[Path]) -> str:
    """Verdict and problems (from ``pinbench.reference.diff``), the table, one plot per modality."""
    result = VERDICTS[checked.exit_code]
    parts = ["<h3>Scorecard against reference</h3>",
             f'<p class="verdict">Verdict: {_badge(result, _VERDICT_BADGE[result])} '
             f"(exit code {checked.exit_code})</p>"]
    if checked.problems:
        parts.append("<ul>" + "".join(f'<li class="warn">{_t(p)}</li>' for p in checked.problems) + "</ul>")
    source = {"file": ref.path, "tier": ref.tier, "source": ref.source, "n_samples": ref.n_samples,
              "note": ref.note}
    parts.append(f"<details><summary>reference source</summary>{_render_value(scrub(source))}</details>")
    parts.append(_score_table(rows, with_ref=True))
    parts.append('<p class="muted">Plots: blue line = reference, shaded = tolerance band, dot = measured '
                 "(green PASS, red FAIL, hollow orange = computed on an incomplete sample set); "
                 "★ primary metric.</p>")
    groups = list(dict.fromkeys(row.group for row in rows if row.ref is not None))
    for g, group in enumerate(groups):
        path = fig_dir / f"{anchor}-compare-{g + 1:02d}-{_slug(group or 'metrics')}.png"
        plot_comparison([row for row in rows if row.ref is not None and row.group == group], path)
        written.add(path)
        parts.append(_figure_html(f"{FIGURES_DIR}/{path.name}", group or "(no modality)", ""))
    return "".join(parts)


def _distributions_html(sec: _Section, rows: Sequence[Row], fig_dir: Path, written: set[Path]) -> str:
    if sec.samples is None:
        return '<p class="muted">No per-sample records given.</p>'
    by_name = {row.name: row for row in rows}
    out = []
    for j, (name, m) in enumerate(sec.card["metrics"].items()):
        key = m.get("key", name)
        values = _values(sec.samples, key)
        if values.size == 0:
            out.append(f'<p class="muted">{_t(name)}: no numeric per-sample values.</p>')
            continue
        path = fig_dir / f"{sec.anchor}-dist-{j + 1:02d}-{_slug(name)}.png"
        plot_distribution(name, values, by_name.get(name), path)
        written.add(path)
        stats = (f"n={values.size} of {len(sec.samples)} records; mean {_num(values.mean(), '.4g')}, "
                 f"median {_num(np.median(values), '.4g')}, min {_num(values.min(), '.4g')}, "
                 f"max {_num(values.max(), '.4g')}")
        out.append(_figure_html(f"{FIGURES_DIR}/{path.name}", name, stats))
    return "".join(out)


def _check_extras(entries: Sequence[Any] | None, origin: str) -> list[ExtraFigure]:
    out = []
    for entry in entries or []:
        if not isinstance(entry, (tuple, list)) or len(entry) != 3:
            raise ReportError(f"{origin}: extra figure must be (title, png_path, caption), got {entry!r}")
        title, src, caption = entry
        src = Path(src)
        try:
            head = src.read_bytes()[: len(PNG_SIGNATURE)]
        except OSError as exc:
            raise ReportError(f"{src}: extra figure not readable ({exc.strerror})") from None
        if head != PNG_SIGNATURE:
            raise ReportError(f"{src}: extra figure is not a PNG file")
        out.append((str(title), src, str(caption)))
    return out


def write_report(
    scorecards: Sequence[Path | str | Mapping[str, Any]],
    out_dir: Path,
    *,
    references: Mapping[Any, Any] | None = None,
    samples: Mapping[Any, Sequence[Any]] | None = None,
    extra_figures: Mapping[Any, Sequence[ExtraFigure]] | None = None,
    title: str = "pinbench report",
) -> Path:
    """Write ``out_dir/index.html`` (one section per scorecard) and its PNGs under ``out_dir/figures``.

    ``references``, ``samples`` and ``extra_figures`` are keyed by scorecard index or recipe name.
    All inputs are checked before anything is written; returns the path of ``index.html``.
    """
    if not scorecards:
        raise ReportError("write_report: no scorecards given")
    loaded = [_load_card(card, i) for i, card in enumerate(scorecards)]
    names = [card["recipe"] for card, _ in loaded]
    refs = _per_card(references, names, "references")
    recs = _per_card(samples, names, "samples")
    extras = _per_card(extra_figures, names, "extra_figures")
    sections = [
        _Section(
            index=i,
            card=card,
            origin=origin,
            ref=as_reference(refs[i], f"reference for {origin}") if refs[i] is not None else None,
            samples=_normalise_samples(recs[i]) if recs[i] is not None else None,
            extras=_check_extras(extras[i], f"extra_figures for {origin}"),
        )
        for i, (card, origin) in enumerate(loaded)
    ]

    out_dir = Path(out_dir)
    fig_dir = out_dir / FIGURES_DIR
    fig_dir.mkdir(parents=True, exist_ok=True)
    written: set[Path] = set()
    bodies, toc = [], []
    for sec in sections:
        body, result = _render_section(sec, fig_dir, written)
        bodies.append(body)
        status = sec.card["status"]
        toc.append(
            f'<tr><td><a href="#{sec.anchor}">{_t(sec.label)}</a></td>'
            f"<td>{_badge(_t(status.upper()), _STATUS_BADGE[status])}</td>"
            f"<td>{_badge(result, _VERDICT_BADGE[result])}</td></tr>"
        )
    for stale in fig_dir.glob("*.png"):
        if stale not in written:
            stale.unlink()
    page = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_t(title)}</title>'
        f"<style>{_CSS}</style></head><body><h1>{_t(title)}</h1>"
        f"<table><tr><th>run</th><th>status</th><th>against reference</th></tr>{''.join(toc)}</table>"
        f"{''.join(bodies)}<footer class=\"muted\"><p>pinbench {_t(pinbench.__version__)}</p></footer>"
        "</body></html>\n"
    )
    return write_atomic(out_dir / "index.html", page)
