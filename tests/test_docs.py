"""The documentation's links: every relative link of a Markdown page leads to a file, a recipe's README never leads
out of its folder (an export copies the folder alone), and ``make docs-site`` (which ``make lint`` runs) fails on a
broken link, a broken anchor and a page left out of the site."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RECIPE_DIRS = sorted(p.parent for p in (REPO / "recipes").glob("*/recipe.yaml"))
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")), REPO / "images" / "README.md",
         *(folder / "README.md" for folder in RECIPE_DIRS)]
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def relative_links(page: Path) -> list[str]:
    """The targets of the page's inline links that are paths (no scheme, not an anchor of the page itself), with
    code blocks and code spans left out."""
    text = _CODE.sub("", _FENCE.sub("", page.read_text(encoding="utf-8")))
    return [target for target in _LINK.findall(text)
            if not re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target) and not target.startswith("#")]


def test_the_link_finder_sees_links_and_only_links(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text('[a](a.md) [b](../b/README.md#part "title") [web](https://x.org) [here](#top)\n'
                    "`[code](c.md)`\n```\n[block](d.md)\n```\n")
    assert relative_links(page) == ["a.md", "../b/README.md#part"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_leads_to_a_file(page: Path) -> None:
    missing = [t for t in relative_links(page) if not (page.parent / t.split("#", 1)[0]).exists()]
    assert missing == [], f"{page.relative_to(REPO)}: links to nothing: {missing}"


@pytest.mark.parametrize("folder", RECIPE_DIRS, ids=lambda p: p.name)
def test_a_recipe_readme_links_only_inside_its_folder(folder: Path) -> None:
    readme = folder / "README.md"
    outside = [t for t in relative_links(readme)
               if not (readme.parent / t.split("#", 1)[0]).resolve().is_relative_to(folder.resolve())]
    assert outside == [], f"{readme.relative_to(REPO)} links out of its folder (dead in its export): {outside}"


def test_the_site_build_fails_on_a_broken_link_anchor_or_page(tmp_path: Path) -> None:
    """``make docs-site`` on a copy of the site's sources with three faults: each is named and the build fails."""
    site = tmp_path / "src"
    shutil.copytree(REPO / "docs", site / "docs")
    for page in PAGES:
        if not (site / page.relative_to(REPO)).exists():
            (site / page.relative_to(REPO)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(page, site / page.relative_to(REPO))
    for folder in RECIPE_DIRS:  # what makes a folder a recipe, for the site's configuration
        shutil.copy2(folder / "recipe.yaml", site / "recipes" / folder.name / "recipe.yaml")
    running = site / "docs" / "running.md"
    text = running.read_text(encoding="utf-8")
    assert "(results.md#comparing-two-runs)" in text and "(run-directory.md)" in text
    running.write_text(text.replace("(results.md#comparing-two-runs)", "(results.md#comparing-two-run)")
                       .replace("(run-directory.md)", "(run-directories.md)", 1), encoding="utf-8")
    (site / "docs" / "orphan.md").write_text("# A page no table of contents lists\n", encoding="utf-8")
    done = subprocess.run(["make", "--no-print-directory", "-f", str(REPO / "Makefile"), "-C", str(site), "docs-site",
                           f"VENV={Path(sys.executable).parent.parent}", "STAMP="],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode != 0, done.stdout + done.stderr
    assert "docs/running.md" in done.stderr and "'run-directories.md'" in done.stderr, done.stderr
    assert "local id not found in doc 'docs/results': 'comparing-two-run'" in done.stderr, done.stderr
    assert "docs/orphan.md: WARNING: document isn't included in any toctree" in done.stderr, done.stderr


# ---------------------------------------------------------------------------------- the module map of contributing.md

CONTRIBUTING = REPO / "docs" / "contributing.md"
LIBRARY = REPO / "common" / "pinbench"
_NAMES = re.compile(r"^( *)([^\s,]+(?:, [^\s,]+)*)")  # a line's names: the first word, or words joined by ", "


def module_map(page: Path) -> tuple[list[str], list[str]]:
    """The entries of the page's Layout block: those under ``common/pinbench/`` as paths inside it (a package or a
    data folder ends in ``/``), and the other paths it names (``tools/x.py``). A module is a line of its own,
    indented 2 under ``common/pinbench/`` or 4 under its package; deeper lines continue a description."""
    text = page.read_text(encoding="utf-8")
    block = text[text.index("## Layout"):].split("```", 2)[1]
    library: list[str] = []
    other: list[str] = []
    package, inside = "", False
    for line in block.splitlines()[1:]:
        match = _NAMES.match(line)
        if match is None:
            continue
        indent, names = len(match.group(1)), match.group(2)
        if indent == 0:
            inside = names == "common/pinbench/"
            other += [] if inside else [n for n in names.split(", ") if "<" not in n]
        elif inside and indent == 2:
            package = names if names.endswith("/") else ""
            library.append(names)
        elif inside and indent == 4:
            library.append(package + names)
    return library, other


def module_map_problems(page: Path, library_root: Path, repo: Path) -> list[str]:
    """What the map of ``page`` gets wrong: a module of the library it leaves out, an entry that names nothing, an
    entry listed twice."""
    library, other = module_map(page)
    modules = set()
    for path in library_root.rglob("*.py"):
        if "__pycache__" in path.parts or path == library_root / "__init__.py":  # the common/pinbench/ line itself
            continue
        relative = path.relative_to(library_root)
        modules.add(f"{relative.parent.as_posix()}/" if path.name == "__init__.py" else relative.as_posix())
    problems = [f"{page.name}: common/pinbench/{name} is missing from the module map" for name in sorted(modules - set(
        library))]
    problems += [f"{page.name}: the module map names common/pinbench/{name}, which does not exist" for name in library
                 if not ((library_root / name).is_dir() if name.endswith("/") else (library_root / name).is_file())]
    problems += [f"{page.name}: the map names {name}, which does not exist" for name in other
                 if not (repo / name).exists()]
    problems += [f"{page.name}: the module map lists common/pinbench/{name} twice" for name in sorted(set(library))
                 if library.count(name) > 1]
    return problems


def test_the_module_map_names_every_module_of_the_library_and_nothing_else() -> None:
    library, _ = module_map(CONTRIBUTING)
    assert "core/run.py" in library and "ops/launch.py" in library  # the parser reads the block it is meant to
    assert module_map_problems(CONTRIBUTING, LIBRARY, REPO) == []


def test_the_module_map_check_names_a_module_left_out_and_one_that_is_gone(tmp_path: Path) -> None:
    page = tmp_path / "contributing.md"
    text = CONTRIBUTING.read_text(encoding="utf-8")
    store_line = next(line for line in text.splitlines() if line.startswith("    store.py "))
    page.write_text(text.replace(store_line + "\n", "").replace(
        "  ops/ ", "    finish.py            the finish, as it was\n  ops/ ", 1).replace(
        "tools/gpu_ci.py ", "tools/gone.py ", 1), encoding="utf-8")
    assert module_map_problems(page, LIBRARY, REPO) == [
        "contributing.md: common/pinbench/core/store.py is missing from the module map",
        "contributing.md: the module map names common/pinbench/results/finish.py, which does not exist",
        "contributing.md: the map names tools/gone.py, which does not exist",
    ]


# Variables pinbench sets for its own child processes, never a user's to set.
_INTERNAL_ENV = {"PINBENCH_RUN_LOCK": "the run directory's lock token, handed to a container it runs in",
                 "PINBENCH_GENERATOR_OPTIONS": "a generator's options, handed to the generator's own process",
                 "PINBENCH_IMAGE_": "the prefix of the PINBENCH_IMAGE_* variables the environment table names"}


def test_every_variable_the_library_reads_is_in_the_environment_table() -> None:
    """docs/environment.md says it lists every variable pinbench reads; the sample cache's two were missing. Every
    ``PINBENCH_*``/``HF_*`` name the library spells is a row of ``CORE_ENV`` (the table's source) or one pinbench
    sets for its own processes."""
    from pinbench.ops.docs import CORE_ENV

    spelled = {name for path in (REPO / "common" / "pinbench").rglob("*.py")
               for name in re.findall(r"\"((?:PINBENCH|HF)_[A-Z0-9_]*)\"", path.read_text(encoding="utf-8"))}
    assert {"PINBENCH_SAMPLE_CACHE", "PINBENCH_CACHE", "HF_TOKEN"} <= spelled   # the finder finds them
    assert sorted(spelled - set(CORE_ENV) - set(_INTERNAL_ENV)) == []
