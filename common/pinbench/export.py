"""Export one recipe as a directory that builds and runs alone.

The export holds the recipe package, exactly the ``pinbench`` modules it imports (found by following
import statements, transitively), its own lock, Dockerfile(s) and README, a generated pyproject.toml
that registers the recipe, and a small Makefile. The same directory is the Docker build context for
``make build-<name>``, so what a researcher copies is what CI builds.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from pinbench.recipe import Recipe

LIBRARY = "pinbench"
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", "*.egg-info")
LIBRARY_DATA_DIRS = ("schemas", "templates")
MARKER = ".pinbench-export"


class ExportError(ValueError):
    """The export could not be written (one-line message)."""


def library_root() -> Path:
    import pinbench

    return Path(pinbench.__file__).resolve().parent


def _module_file(root: Path, module: str) -> Path | None:
    """The file of ``pinbench.<a>.<b>`` under ``root`` (a module or a package's __init__)."""
    parts = module.split(".")[1:]
    base = root.joinpath(*parts) if parts else root
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def _imported_modules(path: Path, module: str, is_package: bool) -> set[str]:
    """Absolute names of every pinbench module a file imports, including relative imports."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {name for name in found if name == LIBRARY or name.startswith(LIBRARY + ".")}


def library_closure(recipe_dir: Path, root: Path | None = None) -> set[Path]:
    """The pinbench source files the recipe needs, following imports transitively."""
    root = root or library_root()
    todo: list[tuple[Path, str, bool]] = [
        (p, "", False) for p in sorted(recipe_dir.rglob("*.py")) if "__pycache__" not in p.parts
    ]
    needed: set[Path] = set()
    seen: set[str] = set()
    while todo:
        path, module, is_package = todo.pop()
        for name in _imported_modules(path, module or "recipe", is_package):
            # Every package on the way down needs its __init__.py.
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                sub = ".".join(parts[:i])
                if sub in seen:
                    continue
                file = _module_file(root, sub)
                if file is None:
                    continue  # an attribute imported from a module, not a module itself
                seen.add(sub)
                needed.add(file)
                todo.append((file, sub, file.name == "__init__.py"))
    return needed


def _pyproject(recipe: Recipe, requirements: list[str]) -> str:
    deps = "".join(f'  "{line}",\n' for line in requirements)
    short = recipe.package.rpartition(".")[2]
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
pinbench = "pinbench.cli:main"

[project.entry-points."pinbench.recipes"]
{short} = "{recipe.package}"

[tool.setuptools.packages.find]
where = ["."]
include = ["pinbench*", "pinbench_recipes*"]
exclude = ["*.tests", "*.tests.*"]

[tool.setuptools.package-data]
"*" = ["*.yaml", "*.json", "*.md", "*.lock", "*.txt", "Dockerfile*", "*.patch", "references/*.yaml",
       "schemas/*.json", "templates/*"]

[tool.pytest.ini_options]
testpaths = ["pinbench_recipes"]
addopts = "--import-mode=importlib -p no:cacheprovider"
markers = ["gpu: needs a CUDA GPU and real weights (GPU CI only)", "docker: needs a Docker engine",
           "slurm: needs slurm-wlm and munge installed"]
"""


def _makefile(recipe: Recipe) -> str:
    return f"""# Exported pinbench recipe: {recipe.name} {recipe.version}
CHECKPOINT ?= {recipe.checkpoints[0] if recipe.checkpoints else "fixture"}
PYTHON ?= python3
LIMIT ?=
VIDEOS ?=
RUN_ARGS ?=
# Swap pinned bases (a registry mirror): BASE_IMAGE="IMAGE" or "Dockerfile.x[:ARG]=IMAGE ..."; recorded in scorecards.
BASE_IMAGE ?=

.PHONY: help setup test fixture build recipe-{recipe.name} diff
help:
\t@echo "make setup | test | fixture | build [BASE_IMAGE=...] | recipe-{recipe.name} CHECKPOINT=... | diff"
setup:
\t$(PYTHON) -m pip install -e '.[test]'
test:
\t$(PYTHON) -m pytest -q pinbench_recipes
fixture:
\t$(PYTHON) -m {recipe.package} run --fixture
build:
\t$(PYTHON) -m {recipe.package} build $(foreach b,$(BASE_IMAGE),--base-image '$(b)')
recipe-{recipe.name}: build
\t$(PYTHON) -m {recipe.package} run --checkpoint $(CHECKPOINT) --runtime docker $(if $(LIMIT),--limit $(LIMIT)) \\
\t\t$(if $(VIDEOS),-o videos=$(VIDEOS)) $(RUN_ARGS)
diff:
\tpinbench diff runs/{recipe.name}/$(CHECKPOINT)$(if $(LIMIT),-smoke)/scorecard.json
"""


def _requirements(recipe_dir: Path) -> list[str]:
    """Top-level requirements of the recipe (its ``requirements.in``), for the generated pyproject."""
    source = recipe_dir / "requirements.in"
    if not source.is_file():
        raise ExportError(f"{source}: missing; every recipe lists its direct dependencies there")
    lines = []
    for raw in source.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            lines.append(line)
    return lines


def export_recipe(recipe: Recipe, dest: Path, *, force: bool = False) -> Path:
    """Write the self-contained recipe directory at ``dest`` and return it."""
    dest = Path(dest)
    recipe_dir = recipe.dir
    root = library_root()
    if dest.exists():
        if not force:
            raise ExportError(f"{dest}: already exists (use --force to replace it)")
        _check_replaceable(dest, [recipe_dir, root, Path.cwd()])
        shutil.rmtree(dest)
    requirements = _requirements(recipe_dir)

    package_dir = dest.joinpath(*recipe.package.split("."))
    shutil.copytree(recipe_dir, package_dir, ignore=IGNORED)
    shutil.copy2(recipe_dir.parent / "__init__.py", package_dir.parent / "__init__.py")
    for file in sorted(library_closure(recipe_dir, root)):
        target = dest / LIBRARY / file.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, target)
    for data_dir in LIBRARY_DATA_DIRS:
        if (root / data_dir).is_dir() and (dest / LIBRARY).is_dir():
            shutil.copytree(root / data_dir, dest / LIBRARY / data_dir, ignore=IGNORED, dirs_exist_ok=True)

    # Build-context files at the top, where the Dockerfiles expect them.
    for item in sorted(recipe_dir.iterdir()):
        if item.name.startswith("Dockerfile") or item.name in ("README.md", "requirements.lock",
                                                                "requirements.in", ".dockerignore"):
            shutil.copy2(item, dest / item.name)
    (dest / "pyproject.toml").write_text(_pyproject(recipe, requirements))
    (dest / "Makefile").write_text(_makefile(recipe))
    (dest / MARKER).write_text(f"{recipe.name} {recipe.version}\n")
    return dest


def _check_replaceable(dest: Path, protected: list[Path]) -> None:
    """--force replaces only an earlier export, never a folder holding the sources or the caller."""
    target = dest.resolve()
    for path in protected:
        if path.resolve() == target or target in path.resolve().parents:
            raise ExportError(f"{dest}: contains {path}; refusing to replace it")
    if not (dest / MARKER).is_file():
        raise ExportError(f"{dest}: not an earlier pinbench export (no {MARKER}); refusing to replace it")
