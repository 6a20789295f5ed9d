"""Export one recipe as a directory that builds and runs alone.

The export holds the recipe package, exactly the ``pinbench`` modules it imports (found by following
import statements, transitively), its own lock, Dockerfile(s) and README, a generated pyproject.toml
that registers the recipe, and a small Makefile. The same directory is the Docker build context for
``make build-<name>``, so what a researcher copies is what CI builds.

The recipe's tests come with it and run there (``make test``): the shared test helpers they import
(``tests/helpers/stored.py``: ``from stored import ...``) are copied to the same place in the export, which its
pytest configuration puts on the path, as the repository's conftest.py does.
"""

from __future__ import annotations

import ast
import errno
import fcntl
import fnmatch
import hashlib
import json
import os
import re
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from pinbench.core.files import (
    FileError,
    NotRegularFile,
    blocking_parent,
    not_a_folder,
    not_regular,
    open_regular,
    read_json_object,
)
from pinbench.core.imports import LIBRARY, library_closure, module_file
from pinbench.core.recipe import Recipe
from pinbench.core.rundir import LockHeld, hold_named, release_named
from pinbench.ops.generation import IN_EVERY_IMAGE, SHIPPED

_IGNORED_NAMES = ("__pycache__", "*.pyc", ".pytest_cache", "*.egg-info")
IGNORED = shutil.ignore_patterns(*_IGNORED_NAMES)
# A recipe's files that go to the top of the export (the Docker build context and the README), not the package.
TOP_LEVEL = ("Dockerfile*", "requirements*.lock", "requirements*.in", "requirements*.txt", "README.md", ".dockerignore")
LOCK = "requirements.lock"
_PYTEST = "9.2.0"  # the version uv.lock pins for development
LIBRARY_DATA_DIRS = ("core/schemas", "results/templates")
MARKER = ".pinbench-export"
# Written first into the hidden folder an export is built in, and held locked (flock) while the export runs: a
# folder of DEST's hidden name holding it unlocked is the leftover of a killed export, which the next one removes.
BUILDING = ".pinbench-export-build"
_BUILDING_TEXT = "a pinbench export is built in this folder; the next export of its DEST removes it\n"
# What running an export's own Makefile and tests leaves in it, made again from the export's files: --force removes
# these without their being listed in MARKER. Anywhere: pytest's and Python's caches; at the top: the Makefile's
# .venv and the egg-info of pip's in-tree build, and its build/ when that holds only setuptools' folders (a build/
# holding anything else is the user's).
_REGENERABLE = ("__pycache__", ".pytest_cache")
_REGENERABLE_TOP = (".venv", "*.egg-info")
_SETUPTOOLS_BUILD = ("lib", "lib.*", "bdist.*", "temp.*", "scripts-*")
# The shared test helpers, importable by their module name in the tests (the repository's conftest.py puts this
# folder on sys.path; an export's pytest configuration does).
HELPERS = PurePosixPath("tests", "helpers")


class ExportError(ValueError):
    """The export could not be written (one-line message)."""


def library_root() -> Path:
    import pinbench

    return Path(pinbench.__file__).resolve().parent


def _pyproject(recipe: Recipe, requirements: list[str], helpers: bool) -> str:
    deps = "".join(f"  {json.dumps(line)},\n" for line in requirements)  # a TOML basic string, markers' quotes escaped
    pythonpath = f'pythonpath = ["{HELPERS}"]\n' if helpers else ""
    return f"""[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[project]
name = "pinbench-recipe-{recipe.name}"
version = "{recipe.version}"
description = "{recipe.description} (exported pinbench recipe)"
requires-python = ">=3.10"
dependencies = [
{deps}]

[project.optional-dependencies]
test = ["pytest>=8"]

[project.scripts]
pinbench = "pinbench.__main__:start"

[tool.setuptools.packages.find]
where = ["."]
include = ["pinbench*", "pinbench_recipes*"]
exclude = ["*.tests", "*.tests.*"]

[tool.setuptools.package-data]
"*" = ["*.yaml", "*.json", "*.md", "*.lock", "*.txt", "Dockerfile*", "*.patch", "references/*.yaml",
       "schemas/*.json", "templates/*"]

[tool.pytest.ini_options]
testpaths = ["pinbench_recipes"]
{pythonpath}addopts = "--import-mode=importlib -p no:cacheprovider"
markers = ["gpu: needs a CUDA GPU and real weights (GPU CI only)", "docker: needs a Docker engine",
           "slurm: needs slurm-wlm and munge installed", "slow: minutes, not seconds"]
"""


def _lock_python(recipe_dir: Path) -> str:
    """The Python version the recipe's lock was compiled for (``--python-version X.Y`` in its header)."""
    header = (recipe_dir / LOCK).read_text(encoding="utf-8").split("\n", 3)[:3]
    match = re.search(r"--python-version (\d+\.\d+)", "\n".join(header))
    if match is None:
        raise ExportError(f"{recipe_dir / LOCK}: its header does not say which --python-version it was compiled for")
    return match.group(1)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _locked_apart(recipe_dir: Path) -> list[str]:
    """The hashed ``requirements*.txt`` files that install what the lock was compiled without (``--no-emit-package``
    in its header), which ``make setup`` installs before it as the image does: MIND's lock leaves torch and its CUDA
    libraries to ``requirements.torch.txt``, and an export set up from the lock alone failed its fixture with 'No
    module named torch'. ExportError when no such file installs one of them."""
    header = "\n".join(line for line in (recipe_dir / LOCK).read_text(encoding="utf-8").splitlines()[:5]
                        if line.startswith("#"))
    apart = {_normal(name) for name in re.findall(r"--no-emit-package[ =](\S+)", header)}
    files, installed = [], set()
    for path in sorted(recipe_dir.glob("requirements*.txt")):
        names = {_normal(n) for n in re.findall(r"^([A-Za-z0-9_.\-]+)(?:==| @ )", path.read_text(encoding="utf-8"),
                                               flags=re.MULTILINE)}
        if names & apart:
            files.append(path.name)
            installed |= names
    if missing := sorted(apart - installed):
        raise ExportError(f"{recipe_dir / LOCK}: compiled without {', '.join(missing)} (--no-emit-package), which "
                          "no requirements*.txt beside it installs")
    return files


def _makefile(recipe: Recipe, python: str, apart: list[str]) -> str:
    """Targets that use the export's own venv (built from its hashed lock), never a pinbench on PATH."""
    checkpoint = recipe.checkpoints[0] if recipe.checkpoints else "fixture"
    first = "".join(f"\t$(BIN)/python -m pip install --require-hashes --no-deps -r {name}\n" for name in apart)
    return f"""# Exported pinbench recipe: {recipe.name} {recipe.version}.
# Every target uses .venv, built from requirements.lock; nothing relies on a pinbench on PATH.
SHELL := /bin/bash
PYTHON ?= python{python}
VENV ?= .venv
BIN := $(VENV)/bin
CHECKPOINT ?= {checkpoint}
LIMIT ?=
VIDEOS ?=
RUN_ARGS ?=
# Swap pinned bases (a registry mirror): BASE_IMAGE="IMAGE" or "Dockerfile.x[:ARG]=IMAGE ..."; recorded in scorecards.
BASE_IMAGE ?=
# Where `pinbench run` writes by default: runs/<recipe>/<checkpoint>[-smoke], the fixture runs/<recipe>/fixture-fixture.
RUN_DIR ?= runs/{recipe.name}/$(CHECKPOINT)$(if $(filter fixture,$(CHECKPOINT)),-fixture,$(if $(LIMIT),-smoke))
STAMP := $(VENV)/.installed
SOURCES := $(shell find pinbench pinbench_recipes -type f -not -path '*/__pycache__/*')

.PHONY: help setup test fixture build recipe-{recipe.name} diff check
help:
	@echo "make setup | fixture | diff | check | test"
	@echo "make build [BASE_IMAGE=...] | recipe-{recipe.name} CHECKPOINT=... [LIMIT=N] [VIDEOS=DIR]"
	@echo "the CPU fixture: make fixture && make diff CHECKPOINT=fixture && make check CHECKPOINT=fixture"

setup: $(STAMP)

# Python {python} (the lock is compiled for it); every dependency from the hashed lock, then this package alone.
$(STAMP): {" ".join(apart + [""])}requirements.lock pyproject.toml $(SOURCES)
	$(PYTHON) -m venv $(VENV)
{first}	$(BIN)/python -m pip install --require-hashes --no-deps -r requirements.lock
	$(BIN)/python -m pip install --no-deps --no-build-isolation --no-index .
	touch $@

fixture: $(STAMP)
	$(BIN)/pinbench run {recipe.name} --fixture

recipe-{recipe.name}: $(STAMP) build
	$(BIN)/pinbench run {recipe.name} --checkpoint $(CHECKPOINT) --runtime docker \\
		$(if $(LIMIT),--limit $(LIMIT)) $(if $(VIDEOS),-o videos=$(VIDEOS)) $(RUN_ARGS)

diff: $(STAMP)
	$(BIN)/pinbench diff $(RUN_DIR)/scorecard.json

check: $(STAMP)
	$(BIN)/pinbench check $(RUN_DIR)

# The recipe's tests need pytest, which is not part of the pinned runtime: installed here at a fixed version.
test: $(STAMP)
	$(BIN)/python -m pip install --quiet pytest=={_PYTEST}
	$(BIN)/python -m pytest -q pinbench_recipes

# Every image of the recipe (PAI-Bench-C has two), each on its pinned base unless BASE_IMAGE swaps it.
build: $(STAMP)
	$(BIN)/pinbench build {recipe.name} --context . $(foreach b,$(BASE_IMAGE),--base-image '$(b)')
"""


def _readme(recipe: Recipe, recipe_readme: str, python: str, apart: list[str]) -> str:
    """The recipe's README, after a set-up section that works in this directory alone."""
    first = "".join(f"pip install --require-hashes --no-deps -r {name};\n              # " for name in apart)
    return f"""# Exported pinbench recipe: {recipe.name} {recipe.version}

This directory stands alone: the recipe (`pinbench_recipes/{recipe.package.rpartition(".")[2]}/`), the
`pinbench` library modules it imports, its hashed lock and its Dockerfile(s).

## Set up

Needs Python {python} (`requirements.lock` is compiled for it, for x86_64 Linux) and `make`; one that is not
`python{python}` on PATH is named by `make setup PYTHON=/path/to/python{python}`.

```bash
make setup    # python{python} -m venv .venv; {first}pip install --require-hashes --no-deps -r requirements.lock;
              # pip install --no-deps --no-build-isolation --no-index .
make fixture                     # the CPU fixture run, into runs/{recipe.name}/fixture-fixture
make diff CHECKPOINT=fixture      # its diff against references/fixture.yaml (exit 0 = PASS)
make check CHECKPOINT=fixture     # the run directory against its scorecard (exit 0 = consistent)
```

Then `.venv/bin/pinbench run {recipe.name} --help` lists the recipe's options. `make diff` and `make check` read
`runs/{recipe.name}/$CHECKPOINT[-smoke]` (the default `--out` of `pinbench run`; `LIMIT=N` for a smoke run), or
`RUN_DIR=...`. `make build` builds the image from this directory; `make recipe-{recipe.name} CHECKPOINT=...`
runs in it. `make test` runs the recipe's tests (it adds pytest, not part of the pinned runtime, to `.venv`).

{recipe_readme}"""


def _requirements(recipe_dir: Path) -> list[str]:
    """Top-level requirements of the recipe (its ``requirements.in``, markers kept), for the generated pyproject."""
    source = recipe_dir / "requirements.in"
    if not source.is_file():
        raise ExportError(f"{source}: missing; every recipe lists its direct dependencies there")
    lines = (raw.split("#", 1)[0].strip() for raw in source.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("-")]


def helpers_dir(root: Path) -> Path | None:
    """The shared test helpers of the checkout the library at ``root`` is in: ``tests/helpers`` two levels up in the
    repository (the library sits in its ``common/`` folder), one level up in an export; None in an installed wheel."""
    return next((base / HELPERS for base in (root.parent.parent, root.parent) if (base / HELPERS).is_dir()), None)


def helpers_imported(recipe_dir: Path, helpers: Path | None) -> list[Path]:
    """The helper modules the recipe's tests import (``from stored import ...``), and those they import in turn."""
    if helpers is None:
        return []
    available = {p.stem: p for p in helpers.glob("*.py")}
    todo = sorted(p for p in recipe_dir.rglob("*.py") if "__pycache__" not in p.parts)
    found: dict[str, Path] = {}
    while todo:
        path = todo.pop()
        for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and not node.level and node.module else []
            for name in (n.partition(".")[0] for n in names):
                if name in available and name not in found:
                    found[name] = available[name]
                    todo.append(available[name])
    return sorted(found.values())


def export_recipe(recipe: Recipe, dest: Path, *, force: bool = False, log: Callable[[str], None] = print) -> Path:
    """Write the self-contained recipe directory at ``dest`` and return it; ``log`` says which leftovers of a killed
    export of ``dest`` it removed."""
    dest = Path(dest)
    recipe_dir = recipe.dir
    root = library_root()
    try:   # the checks too: a DEST name over 255 bytes failed the first of them in a bare '[Errno 36]'
        if dest.is_symlink() and not dest.exists():
            raise ExportError(f"export DEST {dest}: a dangling symlink (to {dest.readlink()}); name a new directory")
        for code in (recipe_dir.parent, root):   # every recipe's package, the library: the next export would copy it
            if dest.resolve() == code.resolve() or code.resolve() in dest.resolve().parents:
                raise ExportError(f"export DEST {dest}: inside the code ({code}); export it outside the recipes and "
                                  "the library")
        return _write_export(recipe, dest, force=force, log=log)
    except OSError as exc:
        raise ExportError(f"export DEST {dest}: cannot write {exc.filename or dest} ({exc.strerror or exc})") from None


def _write_export(recipe: Recipe, dest: Path, *, force: bool, log: Callable[[str], None]) -> Path:
    """Build the export in a hidden folder beside ``dest`` (``.<name>.<8 chars>.tmp``, the name cut to 200 so that it
    fits wherever ``dest`` does; the export in its ``new``, the earlier one moved to its ``old``) and rename it into
    place when it is whole: an interrupted export leaves no half-written ``dest`` (which a rerun refused as an
    existing folder, with --force too, for it had no marker yet), and --force moves the earlier export aside only
    then. A kill leaves the hidden folder, with its ``BUILDING`` file unlocked: the next export of ``dest`` that
    succeeds removes it and says so (it had stayed forever); a folder of that name without it is never touched.

    Exports into one DEST take turns (``_hold``): one started while another runs is refused in one line naming it
    (each had moved the one before aside and reported success; with --force the last one stayed). What another
    program writes at DEST meanwhile is never replaced, as rename(2) replaces no folder that holds anything: only an
    empty folder made there is."""
    if (dest.exists() or dest.is_symlink()) and not force:
        raise ExportError(_taken(dest))
    _check_copyable(recipe.dir)   # what refuses the recipe, before anything is made beside DEST
    requirements = _requirements(recipe.dir)
    if not (recipe.dir / LOCK).is_file():
        raise ExportError(f"{recipe.dir / LOCK}: missing; an export installs only from the recipe's hashed lock")
    _check_parents(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    held = _hold(dest)
    try:
        return _write_held(recipe, dest, requirements, force=force, log=log)
    finally:
        release_named(_lock_of(dest), held)


def _lock_of(dest: Path) -> Path:
    return dest.parent / f".{_stem(dest)}.pinbench-export.lock"


def _stem(dest: Path) -> str:
    """``dest``'s name as the names made beside it hold it: whole up to 200 bytes (they must fit NAME_MAX, 255
    bytes: 84 three-byte characters made a lock's name of 274, 'File name too long'), else its first 183 bytes and
    16 hex digits of its SHA-256 (two DESTs alike in their first 200 bytes shared one lock)."""
    raw = os.fsencode(dest.name)
    if len(raw) <= 200:
        return dest.name
    name = dest.name[:183]
    while len(os.fsencode(name)) > 183:
        name = name[:-1]
    return f"{name}~{hashlib.sha256(raw).hexdigest()[:16]}"


def _hold(dest: Path) -> int:
    """Hold the lock of exports into ``dest`` (``hold_named`` on ``_lock_of(dest)``), or ExportError naming the
    export that holds it: two ``--force`` at once had each put its own export in place, the last one staying and both
    saying they wrote it."""
    path = _lock_of(dest)
    try:
        return hold_named(path, 0o644)
    except NotRegularFile as exc:   # a FIFO in its place: named, never waited on; a symlink's target untouched
        raise ExportError(f"{exc}; exports of {dest} take turns on it: delete it") from None
    except FileError as exc:   # no file can be made there (read-only, /proc): as any write beside DEST fails
        raise ExportError(f"export DEST {dest}: cannot write {path} (no file can be made there: "
                          f"{exc.reason})") from None
    except LockHeld as held:
        who = f"is running ({held.who})" if held.who else "is starting"   # not yet named
        raise ExportError(f"{dest}: another export of it {who}; retry once it has ended") from None


def _write_held(recipe: Recipe, dest: Path, requirements: list[str], *, force: bool, log: Callable[[str], None]
                ) -> Path:
    """``_write_export`` once this process holds ``dest``'s lock: what it checks in ``dest`` holds until its end."""
    recipe_dir = recipe.dir
    written: frozenset[str] | None = None
    if dest.exists() or dest.is_symlink():
        if not force:
            raise ExportError(_taken(dest))
        _check_replaceable(dest, [recipe_dir, library_root(), Path.cwd()])
        written = _listed(dest)
        if written is not None:
            _check_only_written(dest, written)
    work = dest.parent / f".{_stem(dest)}.{secrets.token_hex(4)}.tmp"
    work.mkdir()
    new, old = work / "new", work / "old"
    lock = None
    try:
        lock = _claim(work / BUILDING)
        new.mkdir()   # not mkdtemp: its 0o700 would hide the export from everyone else
        _fill(recipe, new, requirements)
        if force and dest.exists():
            if written is None:   # a marker without the list (an export before it had one): what this one writes
                _check_only_written(dest, _listed(new) or frozenset())
            os.rename(dest, old)
        try:
            os.rename(new, dest)   # without --force, onto nothing (or an empty folder): never moves anything aside
        except BaseException as exc:
            if old.exists():
                os.rename(old, dest)   # the earlier export back in its place
            if isinstance(exc, OSError) and exc.errno in _TAKEN and not force:
                raise ExportError(f"{_taken(dest)} (written there while this export was built)") from None
            raise
        if old.exists():
            shutil.rmtree(old)
        os.unlink(work / BUILDING)
        os.rmdir(work)
    except BaseException:
        if not old.exists():   # never the earlier export, should putting it back have failed
            shutil.rmtree(work, ignore_errors=True)
        raise
    finally:
        if lock is not None:
            os.close(lock)
    removed = _remove_leftovers(dest)
    if removed:
        log(f"{dest}: removed what killed exports of it left: {', '.join(p.name for p in removed)}")
    return dest


# What the rename of a built export onto DEST says when something is there (a folder that is not empty, a file): an
# export of the same DEST that finished first. Linux says ENOTEMPTY, other systems EEXIST.
_TAKEN = (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR)


def _claim(building: Path) -> int:
    """Write ``building`` and hold an exclusive flock on it (the kernel drops it when the export ends or is killed)."""
    fd = os.open(building, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, _BUILDING_TEXT.encode())
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _remove_leftovers(dest: Path) -> list[Path]:
    """Remove the hidden folders beside ``dest`` that killed exports of it left: named as ``_write_export`` names
    them, a folder (not a symlink) holding ``BUILDING`` as a regular file of its text whose lock nobody holds (a
    running export of the same DEST holds its own). Returns the folders removed."""
    pattern = re.compile(rf"\.{re.escape(_stem(dest))}\.[0-9a-f]{{8}}\.tmp")
    removed = []
    for entry in sorted(os.scandir(dest.parent), key=lambda e: e.name):
        if not (pattern.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False)):
            continue
        try:
            fd = open_regular(Path(entry.path, BUILDING), follow_symlinks=False)
        except FileError:
            continue
        try:
            if os.read(fd, len(_BUILDING_TEXT) + 1) != _BUILDING_TEXT.encode():
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:   # BlockingIOError: an export is running there
            continue
        else:
            shutil.rmtree(entry.path, ignore_errors=True)   # the export is in place: what stays is tried again
            if not os.path.lexists(entry.path):
                removed.append(Path(entry.path))
        finally:
            os.close(fd)
    return removed


def _files(folder: Path) -> list[str]:
    """Every entry under ``folder`` that is no folder, as sorted POSIX paths relative to it."""
    return sorted(Path(parent, name).relative_to(folder).as_posix()
                  for parent, _, files in os.walk(folder) for name in files)


def _listed(dest: Path) -> frozenset[str] | None:
    """The files an earlier export at ``dest`` says in its marker it wrote; None for a marker without that list (one
    written before the marker had it, or not one of ours)."""
    data = read_json_object(dest / MARKER)
    files = data.get("files") if data is not None else None
    if not (isinstance(files, list) and all(isinstance(f, str) for f in files)):
        return None
    return frozenset(files)


def _check_only_written(dest: Path, written: frozenset[str]) -> None:
    """--force removes the earlier export whole: refused, before anything is deleted, when it holds an entry the
    export did not write (results a user kept in it, say), named first in sorted order. Caches that its own Makefile
    and tests make (``_REGENERABLE``) go with it. An earlier export whose marker does not list its files (made
    before it did) is held to what this export writes."""
    folders = {str(parent) for file in written for parent in PurePosixPath(file).parents}
    for parent, dirs, files in os.walk(dest):
        rel = PurePosixPath(Path(parent).relative_to(dest).as_posix())
        top = rel == PurePosixPath(".")
        dirs[:] = sorted(d for d in dirs if not (d in _REGENERABLE or top and (_matches(d, _REGENERABLE_TOP)
                                                                             or d == "build" and _built(dest / d))))
        entries = sorted([*((d, True) for d in dirs), *((f, False) for f in files
                                                       if not (top and _matches(f, _REGENERABLE_TOP)))])
        for name, is_dir in entries:
            path = (rel / name).as_posix() if not top else name
            if path not in (folders if is_dir and not Path(parent, name).is_symlink() else written):
                raise ExportError(f"{dest / path}: not written by pinbench export; move it out before --force")


def _built(folder: Path) -> bool:
    """Whether ``folder`` (an export's top ``build``) is pip's in-tree build of it: only setuptools' folders."""
    entries = list(os.scandir(folder)) if folder.is_dir() and not folder.is_symlink() else []
    return bool(entries) and all(e.is_dir(follow_symlinks=False) and _matches(e.name, _SETUPTOOLS_BUILD)
                                 for e in entries)


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in patterns)


def _check_copyable(recipe_dir: Path) -> None:
    """Every entry the export copies is a regular file or a folder (a symlink to a file counts as the file).

    Why: copytree failed only after copying the rest, on a FIFO, a dangling symlink or a symlink loop (followed 40
    levels deep), in a message that was a Python list of tuples; a symlink to /etc had 1157 of its files copied in
    before a dangling link inside stopped it; a FIFO among the top-level files was left out of an export that said
    it was done."""
    for folder, dirs, files in os.walk(recipe_dir):
        ignored = IGNORED(folder, dirs + files)
        dirs[:] = [d for d in dirs if d not in ignored]
        for name in [*dirs, *(f for f in files if f not in ignored)]:
            path = Path(folder, name)
            if path.is_symlink():
                if not path.exists():
                    raise ExportError(f"{path}: a dangling symlink (to {path.readlink()}); an export copies files")
                if path.is_dir():
                    raise ExportError(f"{path}: a symlink to a folder (to {path.readlink()}); an export copies "
                                      "files and folders, not links to folders")
            kind = None if path.is_dir() else not_regular(path.stat().st_mode)
            if kind is not None:
                raise ExportError(f"{path}: {kind}, not a regular file; an export copies files and folders")


def _fill(recipe: Recipe, dest: Path, requirements: list[str]) -> None:
    """Copy the recipe, the library it imports and the generated files into the empty folder ``dest``."""
    recipe_dir = recipe.dir
    root = library_root()
    package_dir = dest.joinpath(*recipe.package.split("."))
    # Build-context files (Dockerfiles, locks, requirements, README) live at the top, where the Dockerfiles
    # expect them; the package holds everything else. Each file is copied once.
    shutil.copytree(recipe_dir, package_dir, ignore=shutil.ignore_patterns(*_IGNORED_NAMES, *TOP_LEVEL))
    shutil.copy2(recipe_dir.parent / "__init__.py", package_dir.parent / "__init__.py")
    helpers = helpers_imported(recipe_dir, helpers_dir(root))
    for helper in helpers:
        (dest / HELPERS).mkdir(parents=True, exist_ok=True)
        shutil.copy2(helper, dest / HELPERS / helper.name)
    entry = root / "__main__.py"   # the console script's and python -m pinbench's module: no recipe imports it
    # the generators every image holds, which generation.py loads by their names (SHIPPED), not by an import
    shipped = {module_file(root, SHIPPED[name].partition(":")[0]) for name in IN_EVERY_IMAGE}
    sources = [p for p in recipe_dir.rglob("*.py") if "__pycache__" not in p.parts] + helpers + [entry, *shipped]
    for file in sorted(library_closure(recipe_dir, root, sources=sources) | {entry, *shipped}):
        target = dest / LIBRARY / file.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, target)
    for data_dir in LIBRARY_DATA_DIRS:
        if (root / data_dir).is_dir() and (dest / LIBRARY).is_dir():
            shutil.copytree(root / data_dir, dest / LIBRARY / data_dir, ignore=IGNORED, dirs_exist_ok=True)

    python = _lock_python(recipe_dir)
    apart = _locked_apart(recipe_dir)
    for item in sorted(recipe_dir.iterdir()):
        if item.is_file() and _matches(item.name, TOP_LEVEL):
            if item.name == "README.md":
                (dest / item.name).write_text(_readme(recipe, item.read_text(encoding="utf-8"), python, apart))
            else:
                shutil.copy2(item, dest / item.name)
    (dest / "pyproject.toml").write_text(_pyproject(recipe, requirements, helpers=bool(helpers)))
    (dest / "Makefile").write_text(_makefile(recipe, python, apart))
    files = sorted([*_files(dest), MARKER])
    (dest / MARKER).write_text(json.dumps({"name": recipe.name, "version": recipe.version, "files": files},
                                          indent=1) + "\n")


def _check_parents(dest: Path) -> None:
    """The nearest existing parent of ``dest`` is a folder: a file or a FIFO there had read 'cannot write afile (File
    exists)', from the mkdir of the folders above DEST."""
    if (blocked := blocking_parent(dest)) is not None:
        raise ExportError(f"{dest}: its parent {blocked[0]} is {blocked[1]}, not a folder")


def _taken(dest: Path) -> str:
    """Why ``dest``, which exists, is not written without --force; --force is offered only where it would replace
    (an earlier export), never for a file, a FIFO, a symlink or a folder of the user's that it then refuses."""
    if dest.is_symlink():
        return f"{dest}: already exists as a symlink (to {dest.readlink()}); name a new directory"
    kind = not_a_folder(dest.stat().st_mode)
    if kind is not None:
        return f"{dest}: already exists as {kind}; name a new directory"
    if not (dest / MARKER).is_file():
        return f"{dest}: already exists and is not an earlier pinbench export (no {MARKER}); name a new directory"
    return f"{dest}: already exists (use --force to replace it)"


def _check_replaceable(dest: Path, protected: list[Path]) -> None:
    """--force replaces only an earlier export, never a folder holding the sources or the caller."""
    if dest.is_symlink():
        raise ExportError(f"{dest}: a symlink (to {dest.readlink()}); name the folder itself to replace it")
    target = dest.resolve()
    for path in protected:
        if path.resolve() == target or target in path.resolve().parents:
            raise ExportError(f"{dest}: contains {path}; refusing to replace it")
    if not (dest / MARKER).is_file():
        raise ExportError(f"{dest}: not an earlier pinbench export (no {MARKER}); refusing to replace it")
