"""Run outputs besides the scorecard: per-scene JSONL (its rows: ``scenes``), the paper-shaped ``scores.json``,
pair figures.

``scores.json`` has the shape the paper's ``score.py`` writes (``split``, ``n_scenes``, ``median``,
``scenes`` keyed by scene id), plus what the paper's file leaves implicit: the expected scene count
and the scenes that failed, so a partial run can never pass for a complete one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pinbench.core.files import write_if_changed
from pinbench.core.run import Figure
from pinbench.results.report import PAGE_TEXT_PX, figure_points
from pinbench_recipes.remembench.prepare import Group
from pinbench_recipes.remembench.scenes import METRIC_KEYS, SCENE_FIELDS

N_EXTREMES = 2  # best and worst scenes shown per group
PAIRS_DPI = 80  # 7 inches wide: 560 px, shown at that size in the report


def write_jsonl(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    return write_if_changed(path, "".join(json.dumps(r, allow_nan=False) + "\n" for r in rows))


def _scored(rows: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    return [r[key] for r in rows if r["status"] == "ok" and r.get(key) is not None]


def paper_block(group: Group, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The paper's scores.json for one group (medians via numpy.median, as score.py does)."""
    ok = [r for r in rows if r["status"] == "ok"]
    key = "scene_id" if len({r["scene_id"] for r in rows}) == len(rows) else "sample_id"
    return {
        "split": group.split,
        **({"setting": group.setting} if group.setting else {}),
        "n_scenes": len(ok),
        "n_expected": len(rows),
        "failed": {r[key]: r["error"] for r in rows if r["status"] != "ok"},
        "median": {m: (float(np.median(v)) if (v := _scored(rows, m)) else None) for m in METRIC_KEYS},
        "scenes": {r[key]: {**{m: r[m] for m in METRIC_KEYS}, **{f: r[f] for f in SCENE_FIELDS}} for r in ok},
    }


def write_scores(groups: Sequence[Group], rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """``scores.json``: the paper's shape for one group, ``{"groups": {prefix: ...}}`` for several."""
    blocks = {g.prefix: paper_block(g, [r for r in rows if r["group"] == g.prefix]) for g in groups}
    data = next(iter(blocks.values())) if len(blocks) == 1 else {"groups": blocks}
    return write_if_changed(path, json.dumps(data, indent=2, allow_nan=False) + "\n")


def pair_figures(groups: Sequence[Group], rows: Sequence[Mapping[str, Any]], out_dir: Path,
                 fig_dir: Path) -> list[Figure]:
    """Per group, departure | revisit strips of the best and worst scenes by CLIP (report figures)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as Plot
    from PIL import Image

    figures = []
    fig_dir.mkdir(parents=True, exist_ok=True)
    for group in groups:
        scored = sorted((r for r in rows if r["group"] == group.prefix and r["status"] == "ok"
                         and r.get("clip") is not None and r.get("pair_image")), key=lambda r: r["clip"])
        if not scored:
            continue
        n_best = min(N_EXTREMES, (len(scored) + 1) // 2)
        n_worst = min(N_EXTREMES, len(scored) - n_best)
        chosen = [("best", r) for r in scored[::-1][:n_best]] + [("worst", r) for r in scored[:n_worst][::-1]]
        fig = Plot(figsize=(7, 2.1 * len(chosen)))
        FigureCanvasAgg(fig)
        for i, (label, row) in enumerate(chosen):
            ax = fig.add_subplot(len(chosen), 1, i + 1)
            ax.imshow(np.asarray(Image.open(out_dir / row["pair_image"])))
            ax.set_axis_off()
            ax.set_title(f"{label}: {row['sample_id']}  frames {row['departure_frame']} | {row['revisit_frame']}  "
                         f"CLIP {row['clip']:.3f}  LPIPS {row['lpips_alex']:.3f}",
                         fontsize=figure_points(PAGE_TEXT_PX, PAIRS_DPI))
        fig.tight_layout()
        path = fig_dir / f"pairs-{group.prefix.replace('/', '-')}.png"
        fig.savefig(path, dpi=PAIRS_DPI)
        figures.append(Figure(f"Departure | revisit, best and worst by CLIP: {group.prefix}", path,
                              "left: departure frame, right: revisit frame of the same rollout"))
    return figures
