"""``pinbench new-recipe NAME``: a working score-only recipe, written from the template in ``recipe_template/``.

Why a command: a new recipe should cost its metric, not a day of copying another recipe and finding the places
that list recipes. The template is a real recipe (a folder of videos in, one score per video, a fixture with
known answers, a test) and the folder it writes is its registration (``pinbench.core.recipe`` finds every folder
of ``pinbench_recipes`` with a recipe.yaml; setup.py packages it). Nothing needs the network: the image's lock
comes from the checkout's uv.lock (the versions CI tests with), its base from images/base-images.yaml, and
``references/fixture.yaml`` is recorded from the recipe's first fixture run. tests/test_new_recipe.py writes one
into a copy of the repository and runs the checks every recipe passes on it, so the template cannot rot.
"""

from __future__ import annotations

import datetime
import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pinbench.core.config import RecipeError
from pinbench.core.files import FileError, no_folder_at, read_yaml
from pinbench.core.names import recipe_name_problem, recipe_package_problem
from pinbench.core.proposal import record_reference
from pinbench.core.recipe import DECLARATION, PACKAGE_ROOT, available_recipes, get_recipe, load_declaration
from pinbench.core.reference import run_input_hashes
from pinbench.core.scorecard import load_scorecard
from pinbench.ops.docs import fill_tables, recipe_tables
from pinbench.ops.launch import run_recipe

TEMPLATE = Path(__file__).resolve().parent / "recipe_template"
# template file -> where it goes in the recipe ({package} is the recipe's package name)
FILES = {
    "recipe.yaml.tmpl": "recipe.yaml", "run.py.tmpl": "run.py", "fixture.py.tmpl": "fixture.py",
    "init.py.tmpl": "__init__.py", "main.py.tmpl": "__main__.py", "pins.yaml.tmpl": "pins.yaml",
    "README.md.tmpl": "README.md", "Dockerfile.tmpl": "Dockerfile", "tests_init.py.tmpl": "tests/__init__.py",
    "recipe_test.py.tmpl": "tests/test_{package}.py",
}
BASE = "python-3.11-slim"  # the images/base-images.yaml entry the image starts from
# The pyproject extras the image needs beside pinbench's own dependencies: the decoders the template offers, and
# the docker SDK (`pinbench build`), starlette and uvicorn (`pinbench view`): what the export's pinbench CLI imports.
EXTRAS = ("video", "docker", "annotate")
# --group=image: setuptools, the build backend an export installs pinbench and the recipe with (`make setup` runs pip
# with --no-build-isolation --no-index: without it in the lock, `invalid command 'bdist_wheel'`).
UV_EXPORT = ("uv", "export", "--frozen", "--no-dev", "--group=image", *(f"--extra={extra}" for extra in EXTRAS),
             "--no-emit-project", "--format=requirements-txt", "--no-header")
LOCK_HEADER = f"""# Generated from uv.lock (what CI tests with) for the image's Python (--python-version 3.11) by
#    (head -n 3 requirements.lock; {" ".join(UV_EXPORT)}) > new.lock && mv new.lock requirements.lock
# in this folder. Run it again after `uv lock` changed uv.lock; requirements.in names the direct dependencies.
"""
REFERENCE_NOTE = "recorded from a fixture run by `pinbench new-recipe` or `pinbench record-reference --fixture`"


@dataclass(frozen=True)
class NewRecipe:
    """What ``new_recipe`` wrote: the recipe's folder, its files, and the fixture reference it recorded."""

    name: str
    dir: Path
    files: list[Path]
    reference: Path


def new_recipe(name: str, recipes_dir: Path | None = None) -> NewRecipe:
    """Write recipe ``name`` into ``recipes_dir`` (default: where ``pinbench_recipes`` is imported from, this
    checkout's recipes/), run its fixture and record ``references/fixture.yaml`` from it.

    RecipeError (one line) for a name that is taken or cannot be a recipe, a folder that is not a checkout's
    recipes/, or a fixture run that fails; nothing is left behind unless the recipe was written."""
    package = _check_name(name)
    recipes_dir = _recipes_dir(recipes_dir)
    root = recipes_dir.parent
    target = recipes_dir / package
    if target.exists() or target.is_symlink():
        raise RecipeError(f"{target}: already exists; choose another name or remove it")
    values = {"name": name, "package": package, "date": datetime.date.today().isoformat(),
              "base_image": _base_image(root)}
    staging = Path(tempfile.mkdtemp(prefix=f".{package}.", dir=recipes_dir))  # hidden: never taken for a recipe
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)  # a folder as mkdir makes it (mkdtemp's is private)
    try:
        for template, relative in FILES.items():
            path = staging / relative.format(package=package)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(_render((TEMPLATE / template).read_text(encoding="utf-8"), values), encoding="utf-8")
        (staging / "requirements.in").write_text(_requirements_in(root, name), encoding="utf-8")
        (staging / "requirements.lock").write_text(LOCK_HEADER + _export_lock(root), encoding="utf-8")
        (staging / "references").mkdir()
        readme = staging / "README.md"
        recipe = load_declaration(staging / DECLARATION, f"{PACKAGE_ROOT}.{package}")
        readme.write_text(fill_tables(readme.read_text(encoding="utf-8"), recipe_tables(recipe), readme),
                          encoding="utf-8")
        written = sorted(target / p.relative_to(staging) for p in staging.rglob("*") if p.is_file())
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    try:
        reference = record_fixture_reference(name)  # its import may leave __pycache__/: not written by us
    except RecipeError as exc:
        raise RecipeError(f"{exc} (the recipe is in {target})") from None
    return NewRecipe(name, target, [*written, reference], reference)


def _check_name(name: str) -> str:
    problem = recipe_name_problem(name) or recipe_package_problem(name)
    if problem:
        raise RecipeError(problem)
    package = name.replace("-", "_")
    if name in available_recipes():
        raise RecipeError(f"recipe {name!r} exists already (pinbench list)")
    return package


def _recipes_dir(given: Path | None) -> Path:
    """A folder ``pinbench_recipes`` is imported from (a recipe elsewhere could not be run or found)."""
    spec = importlib.util.find_spec(PACKAGE_ROOT)
    places = [Path(p).resolve() for p in (spec.submodule_search_locations or ())] if spec else []
    if given is None:
        if not places:
            raise RecipeError(f"{PACKAGE_ROOT} is not installed: run `make setup` in a pinbench checkout")
        return places[0]
    if (kind := no_folder_at(given)) is not None:   # a symlink loop was Python's "Symlink loop from ..."
        raise RecipeError(f"--dest {given}: {kind}, not a folder")
    if given.resolve() not in places:
        raise RecipeError(f"--dest {given}: not where {PACKAGE_ROOT} is imported from "
                          f"({', '.join(map(str, places)) or 'nowhere'}); a recipe there would not be found")
    return given.resolve()


def _render(text: str, values: dict[str, str]) -> str:
    """The template with each ``{{key}}`` replaced; a placeholder with no value is an error, never left in."""
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    left = re.search(r"\{\{.*?\}\}", text)
    if left:
        raise RecipeError(f"recipe template: no value for {left.group()}")
    return text


def _checkout_file(root: Path, relative: str) -> Path:
    path = root / relative
    if not path.is_file():
        raise RecipeError(f"{path}: not found; new-recipe writes into a pinbench checkout (its recipes/ beside "
                          "uv.lock, pyproject.toml and images/)")
    return path


def _base_image(root: Path) -> str:
    path = _checkout_file(root, "images/base-images.yaml")
    try:
        return str(read_yaml(path)[BASE]["image"])
    except (FileError, KeyError, TypeError) as exc:
        raise RecipeError(f"{path}: no image for the {BASE} entry ({exc})") from None


def _requirements_in(root: Path, name: str) -> str:
    """pinbench's own dependencies and its EXTRAS, as pyproject.toml states them."""
    import tomllib  # Python 3.11+, as the development environment that writes recipes
    project = tomllib.loads(_checkout_file(root, "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = [*project["dependencies"], *(line for extra in EXTRAS for line in project["optional-dependencies"][extra])]
    return (f"# Direct dependencies of the {name} recipe: pinbench's own and its extras {', '.join(EXTRAS)} "
            "(pyproject.toml).\n"
            "# requirements.lock pins them, with hashes, at the versions of uv.lock (its header says how).\n"
            + "".join(f"{line}\n" for line in lines))


def _export_lock(root: Path) -> str:
    _checkout_file(root, "uv.lock")
    uv = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    if uv is None:
        raise RecipeError("uv not found (on PATH or beside this Python): `make setup` installs it")
    done = subprocess.run([uv, *UV_EXPORT[1:]], cwd=root, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
        raise RecipeError(f"{root / 'uv.lock'}: `{' '.join(UV_EXPORT)}` failed: {lines[-1]}")
    return done.stdout


def record_fixture_reference(name: str, *, replace: bool = False) -> Path:
    """Run a recipe's fixture (here, in a temporary folder) and record ``references/fixture.yaml`` from that run:
    after a new recipe is written, or, with ``replace``, after its metric or fixture changed. The run does not diff
    against the reference it replaces (set aside meanwhile, and put back when the run fails). Its options and each
    sample's input hash are kept as a recorded run's are: a fixture's input hashes do not name the folder it ran in."""
    importlib.invalidate_caches()  # a package folder may be new to the import system
    recipe = get_recipe(name)
    target = recipe.reference_file("fixture", "fixture")
    if target.exists() and not replace:
        raise RecipeError(f"{target}: already exists; pass --force to record it again from a fixture run")
    aside = target.with_name(f".{target.name}.replaced")
    if target.exists():
        target.rename(aside)
    try:
        with tempfile.TemporaryDirectory(prefix=f"{name}-fixture-") as out:
            outcome = run_recipe(recipe.config(fixture=True, out_dir=Path(out) / "run"))
            card = load_scorecard(outcome.scorecard_path) if outcome.scorecard_path else None
            if card is None or card.status != "complete":
                raise RecipeError(f"{name}: its fixture run did not complete (exit {outcome.exit_code}: "
                                  f"{outcome.message}); {target} is not recorded")
            recorded = record_reference(card, target, recipe=recipe, tier="same_hw", note=REFERENCE_NOTE,
                                        inputs=[run_input_hashes(outcome.scorecard_path, card)])
    except BaseException:
        if aside.exists():
            aside.replace(target)
        raise
    aside.unlink(missing_ok=True)
    return recorded


def summary(made: NewRecipe, root: Path) -> list[str]:
    """What to tell the author: what was written, and the one thing left outside the folder (exactly)."""
    recipe = get_recipe(made.name)
    where = made.dir.relative_to(root).as_posix()
    return [
        f"wrote {where}/ ({len(made.files)} files) and recorded {where}/references/fixture.yaml from its fixture run",
        f"registered: the folder is the registration (`pinbench list` shows {made.name}; setup.py packages it)",
        "left outside the folder: one row in README.md's Recipes table,",
        f"  | `{made.name}` | {recipe.description} | none published; fixture reference | {recipe.hardware} | "
        f"[{where}]({where}/README.md) |",
        f"then make it yours ({where}/README.md says how) and run `make lint test demo`",
    ]
