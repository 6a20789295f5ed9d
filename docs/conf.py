"""Sphinx configuration of the documentation site: ``make docs-site`` (``sphinx-build -c docs . site``).

The source folder is the repository root, so that the READMEs stay where they live (an exported recipe carries
its own) and every page links to another by its path in the repository: the same link works on a repository
browser and in the site. Only these Markdown files are pages; every other folder is left out of the walk.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sphinx.application import Sphinx

ROOT = Path(__file__).resolve().parents[1]
PAGE_FOLDERS = ("docs", "images", "recipes")  # with README.md, the only entries of the root read at all

project = "pinbench"
root_doc = "docs/index"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
include_patterns = ["README.md", "docs/**.md", "images/README.md", "recipes/*/README.md"]
# Excluded folders are not walked: everything at the root but the pages' folders, and every folder inside those
# but docs/'s (a recipe's tests, references, ...). Computed here, so a new recipe or top-level folder needs no edit.
exclude_patterns = [p.name for p in ROOT.iterdir() if p.name not in (*PAGE_FOLDERS, "README.md")]
exclude_patterns += [f"{folder}/{p.name}" for folder in ("images", "recipes") for p in (ROOT / folder).iterdir()
                     if p.is_dir() and not (p / "recipe.yaml").is_file()]
exclude_patterns += [f"recipes/{recipe.name}/{p.name}" for recipe in (ROOT / "recipes").iterdir()
                     if (recipe / "recipe.yaml").is_file() for p in recipe.iterdir() if p.is_dir()]
myst_heading_anchors = 3  # `page.md#a-heading` links, with the anchors a repository browser gives headings
html_theme = "furo"
html_title = "pinbench"
html_static_path: list[str] = []


def _home(app: Sphinx, exception: Exception | None) -> None:
    """``site/index.html``: the site's root sends a browser to the first page (docs/index)."""
    if exception is None and app.builder.format == "html":
        (Path(app.outdir) / "index.html").write_text(
            '<!doctype html>\n<meta charset="utf-8">\n<meta http-equiv="refresh" content="0; url=docs/index.html">\n'
            '<a href="docs/index.html">pinbench documentation</a>\n', encoding="utf-8")


def setup(app: Sphinx) -> None:
    app.connect("build-finished", _home)
