"""The per-sample figure the report shows: its text as large as the page's, at the size the page shows it."""

from __future__ import annotations

import struct
from pathlib import Path

import matplotlib.figure
import matplotlib.text
import pytest

from pinbench.results.report import PAGE_TEXT_PX, PAGE_WIDTH_PX
from pinbench_recipes.dynamic_degree.plots import plot_motion

RESULT = {"fps": 8.0, "tau": 1.22, "n_clips": 2, "official": False, "preview/dynamic_degree": 0.5,
          "clips": [{"start": 0, "stop": 16, "sampled": list(range(16)), "m": [4.0] * 15, "dynamic": 1},
                    {"start": 16, "stop": 32, "sampled": list(range(16, 32)), "m": [0.1] * 15, "dynamic": 0}]}


def test_figure_text_is_the_pages_size_at_the_size_the_page_shows_it(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[matplotlib.figure.Figure] = []
    save = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda fig, *a, **k: (drawn.append(fig),
                                                                                   save(fig, *a, **k))[1])
    png = plot_motion(RESULT, "stop_and_go", tmp_path / "m.png", "preview/dynamic_degree")
    (fig,) = drawn
    texts = {t.get_text(): t.get_fontsize() * fig.dpi / 72 for t in fig.findobj(matplotlib.text.Text)
             if t.get_text().strip() and t.get_visible()}
    assert "m (px)" in texts and "tau = 1.22 px" in texts and any("stop_and_go" in t for t in texts)
    assert min(texts.values()) >= PAGE_TEXT_PX - 1, texts        # ticks and legend 12 px, never smaller
    assert texts["m (px)"] >= PAGE_TEXT_PX
    width, _ = struct.unpack(">II", png.read_bytes()[16:24])     # the PNG's IHDR: shown at this size, not shrunk
    assert width <= PAGE_WIDTH_PX


def test_a_video_named_in_cjk_is_drawn_without_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CJK video name made matplotlib warn "Glyph ... missing from font(s) DejaVu Sans" once per character (and
    draw boxes): the title names it by escapes the font can draw; a "$" pair stays text, not mathtext."""
    import warnings

    drawn: list[matplotlib.figure.Figure] = []
    save = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda fig, *a, **k: (drawn.append(fig),
                                                                                   save(fig, *a, **k))[1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        png = plot_motion(RESULT, "视频_一", tmp_path / "m.png", "preview/dynamic_degree")
        plot_motion(RESULT, "a$x$", tmp_path / "a.png", "preview/dynamic_degree")
    assert png.read_bytes().startswith(b"\x89PNG")
    titles = [next(t.get_text() for t in fig.axes[0].findobj(matplotlib.text.Text) if "score" in t.get_text())
              for fig in drawn]
    assert titles[0].startswith(r"\u89c6\u9891_\u4e00: score 0.500") and titles[1].startswith(r"a\$x\$: score")
