"""Per-video figure: m over time against tau, clips shaded by their verdict.

Why: a video score of 0 is only credible when one can see that no clip had enough transitions above
the threshold; this plot shows exactly the numbers the decision used.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from pinbench.core.files import atomic_path
from pinbench.results.report import PAGE_TEXT_PX, figure_points
from pinbench_recipes.dynamic_degree.flow import PREVIEW_LABEL  # noqa: E402

DYNAMIC_COLOUR = "#d8f0dc"
STATIC_COLOUR = "#f6dada"
DPI = 100  # 7.5 x 3 inches: 750 x 300 px, shown at that size in the report
TEXT = figure_points(PAGE_TEXT_PX, DPI)          # axis labels: the page's caption text
TITLE = figure_points(PAGE_TEXT_PX + 1, DPI)
SMALL = figure_points(PAGE_TEXT_PX - 1, DPI)     # ticks and legend


def plot_motion(result: dict[str, Any], sample_id: str, path: Path, score_key: str) -> Path:
    """Write a PNG of one video's per-transition m (time = midpoint of the two frames) and tau."""
    fps = float(result["fps"])
    tau = float(result["tau"])
    fig, ax = plt.subplots(figsize=(7.5, 3.0), dpi=DPI)
    for clip in result["clips"]:
        colour = {1: DYNAMIC_COLOUR, 0: STATIC_COLOUR}.get(clip["dynamic"], "#eeeeee")
        ax.axvspan(clip["start"] / fps, clip["stop"] / fps, color=colour, alpha=0.5, lw=0)
        sampled = clip["sampled"]
        times = [(a + b) / 2 / fps for a, b in zip(sampled[:-1], sampled[1:], strict=True)]
        if times:
            ax.plot(times, clip["m"], marker=".", ms=4, lw=1, color="#0969da")
    ax.axhline(tau, color="#cf222e", lw=1.2, ls="--", label=f"tau = {tau:.2f} px")
    score = result.get(score_key)
    title = f"{sample_id}: score {score:.3f} ({result['n_clips']} clips)" if score is not None else sample_id
    if not result.get("official", False):
        title += f" [{PREVIEW_LABEL}]"
    ax.set_title(_drawable(title), fontsize=TITLE)
    ax.set_xlabel("time (s); green clip = dynamic, red = static", fontsize=TEXT)
    ax.set_ylabel("m (px)", fontsize=TEXT)
    ax.tick_params(labelsize=SMALL)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=SMALL, loc="upper right")
    fig.tight_layout()
    with atomic_path(path, suffix=".png") as tmp:  # a killed run never leaves half a figure to be reused
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return path


def _drawable(text: str) -> str:
    """``text`` as the figure's font draws it: a character it has no glyph for as its ``\\uXXXX`` escape (a video
    named in CJK made matplotlib warn "Glyph ... missing from font(s) DejaVu Sans" once per character and draw
    boxes; the report's page names the video in full beside the figure), and ``$`` as a dollar sign (two of them
    would start mathtext)."""
    glyphs = _glyphs()
    drawn = "".join(c if ord(c) in glyphs else c.encode("unicode_escape").decode("ascii") for c in text)
    return drawn.replace("$", r"\$")


@functools.cache
def _glyphs() -> frozenset[int]:
    """The code points the figure's default font has a glyph for."""
    from matplotlib.font_manager import FontProperties, findfont
    from matplotlib.ft2font import FT2Font

    return frozenset(FT2Font(findfont(FontProperties())).get_charmap())
