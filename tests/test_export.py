"""Export writes a recipe directory that runs alone, holding exactly the library code it imports."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from fresh_venv import clean_env, make
from stopped import stop

from pinbench.core.recipe import available_recipes, get_recipe
from pinbench.ops.export import ExportError, export_recipe, library_closure, library_root

REPO = Path(__file__).resolve().parents[1]
ALL_RECIPES = sorted(available_recipes())


def test_closure_follows_imports_transitively(tmp_path: Path) -> None:
    recipe_dir = tmp_path / "toy"
    recipe_dir.mkdir()
    (recipe_dir / "__init__.py").write_text("")
    (recipe_dir / "score.py").write_text("from pinbench.media.video import read_video\n")
    root = library_root()
    files = {p.relative_to(root).as_posix() for p in library_closure(recipe_dir, root)}
    assert {"__init__.py", "media/__init__.py", "media/video.py"} <= files
    assert "cli.py" not in files and "ops/export.py" not in files


def test_closure_handles_relative_imports_inside_the_library(tmp_path: Path) -> None:
    root = tmp_path / "pinbench"
    (root / "metrics").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "metrics" / "__init__.py").write_text("")
    (root / "metrics" / "a.py").write_text("from . import b\nfrom ..util import helper\n")
    (root / "metrics" / "b.py").write_text("")
    (root / "util.py").write_text("")
    (root / "unused.py").write_text("")
    recipe_dir = tmp_path / "toy"
    recipe_dir.mkdir()
    (recipe_dir / "run.py").write_text("import pinbench.metrics.a\n")
    files = {p.relative_to(root).as_posix() for p in library_closure(recipe_dir, root)}
    assert files == {"__init__.py", "metrics/__init__.py", "metrics/a.py", "metrics/b.py", "util.py"}


def test_what_a_file_imports_is_parsed_once_and_again_only_after_an_edit(tmp_path: Path, monkeypatch) -> None:
    """The closure's parse results are kept in <cache>/imports-2.json by the bytes of each file: a later process parses
    nothing, an edit that keeps the size and mtime is still parsed again, and a corrupt cache is only an empty one."""
    import pinbench.core.imports as imports

    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "pinbench"
    root.mkdir()
    (root / "__init__.py").write_text("")
    for name in ("a", "b"):
        (root / f"{name}.py").write_text("")
    recipe_dir = tmp_path / "toy"
    recipe_dir.mkdir()
    run = recipe_dir / "run.py"
    run.write_text("import pinbench.a\n")

    def closure() -> tuple[set[str], int]:
        monkeypatch.setattr(imports, "_CACHE", None)   # a new process
        files = {p.name for p in imports.library_closure(recipe_dir, root)}
        return files, imports.import_cache().parsed

    assert closure() == ({"__init__.py", "a.py"}, 3)
    assert closure() == ({"__init__.py", "a.py"}, 0)
    stat = run.stat()
    run.write_text("import pinbench.b\n")   # same size
    os.utime(run, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert closure() == ({"__init__.py", "b.py"}, 2)
    # one entry a file, its last version's: an edited file's earlier entry is gone, not kept beside it
    held = json.loads((tmp_path / "cache" / imports.CACHE_FILE).read_text())["files"]
    assert sorted(held) == sorted(str(p) for p in [run, root / "__init__.py", root / "a.py", root / "b.py"])
    (tmp_path / "cache" / imports.CACHE_FILE).write_text("{not json")
    assert closure() == ({"__init__.py", "b.py"}, 3)
    # a format-1 cache (an older pinbench sharing the cache root) is another file: neither overwrites the other
    older = '{"format": 1, "files": {}}'
    (tmp_path / "cache" / "imports.json").write_text(older)
    assert closure() == ({"__init__.py", "b.py"}, 0)
    assert (tmp_path / "cache" / "imports.json").read_text() == older


def test_export_refuses_to_overwrite(tmp_path: Path) -> None:
    """Without --force nothing that exists is written; --force is offered only where it would replace (an earlier
    export): it had been offered for a file, a FIFO and any folder, and then refused there."""
    recipe = get_recipe("dynamic-degree")
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(ExportError, match=rf"^{dest}: already exists and is not an earlier pinbench export "
                                          r"\(no \.pinbench-export\); name a new directory$"):
        export_recipe(recipe, dest)
    (tmp_path / "file").write_text("mine")
    os.mkfifo(tmp_path / "fifo")
    for name, kind in [("file", "a regular file"), ("fifo", r"a FIFO \(named pipe\)")]:
        with pytest.raises(ExportError, match=rf"^{tmp_path / name}: already exists as {kind}; name a new directory$"):
            export_recipe(recipe, tmp_path / name)
    for name, kind in [("file", "a regular file"), ("fifo", r"a FIFO \(named pipe\)")]:
        below = tmp_path / name / "sub" / "export"
        with pytest.raises(ExportError, match=rf"^{below}: its parent {tmp_path / name} is {kind}, not a folder$"):
            export_recipe(recipe, below)
    assert (tmp_path / "file").read_text() == "mine"
    export_recipe(recipe, tmp_path / "export")
    with pytest.raises(ExportError, match=r"already exists \(use --force to replace it\)$"):
        export_recipe(recipe, tmp_path / "export")


def test_a_dest_name_too_long_for_the_file_system_is_refused_naming_it(tmp_path: Path) -> None:
    """260 bytes, over NAME_MAX: it had failed in a bare '[Errno 36] File name too long', from the first check."""
    dest = tmp_path / ("\u00e9" * 130)
    with pytest.raises(ExportError, match=rf"^export DEST {dest}: cannot write {dest} \(File name too long\)$"):
        export_recipe(get_recipe("dynamic-degree"), dest)
    assert list(tmp_path.iterdir()) == []


def test_export_holds_the_recipe_and_exactly_the_library_it_imports(tmp_path: Path) -> None:
    recipe = get_recipe("dynamic-degree")
    dest = export_recipe(recipe, tmp_path / "export")

    top = {p.name for p in dest.iterdir()}
    assert {"pinbench", "pinbench_recipes", "pyproject.toml", "Makefile", "Dockerfile", "README.md",
            "requirements.lock"} <= top
    assert (dest / "pinbench_recipes" / "__init__.py").is_file()
    assert (dest / "pinbench_recipes" / "dynamic_degree" / "recipe.yaml").is_file()
    assert (dest / "pinbench" / "core" / "schemas" / "scorecard.schema.json").is_file()
    # Exactly what it imports: another recipe's metric code stays behind.
    assert not (dest / "pinbench_recipes" / "paibench_c").exists()
    assert not (dest / "pinbench" / "media" / "lpips.py").exists()

    # Nothing in the export points back into this repository.
    for path in dest.rglob("*"):
        if path.is_file() and path.suffix in {".py", ".toml", ".md", ".yaml", ".txt", ""}:
            text = path.read_text(errors="ignore")
            assert str(REPO) not in text, path
            assert "common/pinbench" not in text, path


@pytest.mark.parametrize("name", ALL_RECIPES)
def test_no_export_names_this_repository_or_its_library_folder(tmp_path: Path, name: str) -> None:
    """remembench's README named common/pinbench/ops/localweb.py, a path its export does not have."""
    dest = export_recipe(get_recipe(name), tmp_path / "export")
    found = [str(path.relative_to(dest)) for path in sorted(dest.rglob("*")) if path.is_file()
             and (str(REPO) in (text := path.read_text(errors="ignore")) or "common/pinbench" in text)]
    assert found == []


@pytest.mark.parametrize("name", ALL_RECIPES)
def test_each_file_is_copied_once_and_the_readme_starts_with_its_setup(tmp_path: Path, name: str) -> None:
    recipe = get_recipe(name)
    dest = export_recipe(recipe, tmp_path / "export")
    package = dest.joinpath(*recipe.package.split("."))
    names = [p.name for p in dest.rglob("*") if p.is_file()]
    copied_twice = sorted({n for n in names if names.count(n) > 1 and (dest / n).is_file() and (package / n).exists()})
    assert copied_twice == []
    readme = (dest / "README.md").read_text()
    setup = readme.index("## Set up")
    assert setup < readme.index((recipe.dir / "README.md").read_text().splitlines()[0])
    assert "--require-hashes --no-deps -r requirements.lock" in readme[setup:]
    assert "python3." in readme[setup:] and "make fixture" in readme[setup:]


@pytest.mark.parametrize("name", ALL_RECIPES)
def test_every_third_party_import_is_in_the_exports_lock(tmp_path: Path, name: str) -> None:
    """What the export's code imports is installed by its lock (or by a pip install line of its Dockerfile)."""
    dest = export_recipe(get_recipe(name), tmp_path / "export")
    importers: dict[str, set[Path]] = {}
    for path in dest.rglob("*.py"):
        if {"tests", "benchmarks"} & set(path.relative_to(dest).parts):  # dev-only code with its own needs
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and not node.level and node.module else []
            for module in names:
                importers.setdefault(module.split(".")[0], set()).add(path.relative_to(dest))
    third_party = {m: p for m, p in importers.items()
                   if m not in sys.stdlib_module_names and m not in {"pinbench", "pinbench_recipes", "__future__"}}
    locked = {_normal(m) for lock in [*dest.glob("requirements*.lock"), *dest.glob("requirements*.txt")]
              for m in re.findall(r"^([A-Za-z0-9_.\-]+)(?:==| @ )", lock.read_text(), flags=re.MULTILINE)}
    dockerfiles = "\n".join(p.read_text() for p in dest.glob("Dockerfile*"))
    distributions = packages_distributions()
    unlocked = [f"{module} ({', '.join(sorted(map(str, paths)))})" for module, paths in sorted(third_party.items())
                if not (module in OPTIONAL_BACKENDS and paths == {Path("pinbench", "media", "video.py")})
                and not (module in DIFFUSERS_GENERATOR and paths == {Path("pinbench", "ops", "generators.py")})
                and not any(_normal(d) in locked for d in distributions.get(module, []))
                and not re.search(rf"pip install .*\b{module}\b", dockerfiles)]
    assert unlocked == [], f"imported but not in requirements.lock: {unlocked}"


# Decoder backends a recipe may name (-o decoder=): pinbench.media.video imports them only for that backend and
# refuses a missing one in one line before any work (require_backend).
OPTIONAL_BACKENDS = {"decord", "cv2"}
# What the shipped generator -g diffusers imports when it loads its pipeline: it is not one every image holds
# (generation.IN_EVERY_IMAGE), no recipe's lock has diffusers, a new recipe's has no torch; its module is exported
# for -g static and folder.
DIFFUSERS_GENERATOR = {"diffusers", "torch"}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imports(path: Path, module: str, *, everywhere: bool) -> set[str]:
    """Absolute names a module imports: when it is loaded (top-level statements), or ``everywhere`` (function
    bodies too). Imports inside ``try`` (optional ones) and ``if TYPE_CHECKING`` blocks are left out."""
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, (ast.Try, ast.If))
               and (isinstance(node, ast.Try) or "TYPE_CHECKING" in ast.unparse(node.test))
               for n in ast.walk(node)}
    for node in ast.walk(tree) if everywhere else tree.body:
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _loaded_third_party(dest: Path, entry_modules: list[str]) -> dict[str, str]:
    """Third-party modules the export's modules loaded with ``entry_modules`` import (anywhere in their code)."""
    todo, seen, third_party = list(entry_modules), set(), {}
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        base = dest.joinpath(*module.split("."))
        path = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if not path.is_file():
            continue  # an attribute imported from a module, not a module
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # parent packages load first
        todo += [name for name in _imports(path, module, everywhere=False)
                 if name.split(".")[0] in ("pinbench", "pinbench_recipes")]
        for name in _imports(path, module, everywhere=True):
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and top not in ("__future__", "pinbench", "pinbench_recipes"):
                third_party.setdefault(top, module)
    return third_party


@pytest.mark.parametrize("name", ALL_RECIPES)
def test_every_image_installs_what_pinbench_run_imports(tmp_path: Path, name: str) -> None:
    """Each Dockerfile that installs pinbench installs, from the locks it copies, every module that loading
    ``pinbench`` and the recipe's entry points imports (the generation image of PAI-Bench-C has its own lock)."""
    recipe = get_recipe(name)
    dest = export_recipe(recipe, tmp_path / "export")
    entries = ["pinbench.cli", "pinbench.core.rundir", "pinbench.core.check", "pinbench.ops.launch"]
    entries += [f"{recipe.package}.{target.partition(':')[0]}" for target in (recipe.entry, recipe.fetch_entry)
                if target]
    needed = _loaded_third_party(dest, entries)
    distributions = packages_distributions()
    for dockerfile in sorted(dest.glob("Dockerfile*")):
        text = dockerfile.read_text()
        if "COPY pinbench/" not in text:
            continue
        locks = re.findall(r"^COPY (\S*requirements[^ ]*) ", text, flags=re.MULTILINE)
        locked = {_normal(m) for lock in locks
                  for m in re.findall(r"^([A-Za-z0-9_.\-]+)(?:==| @ )", (dest / lock).read_text(), flags=re.MULTILINE)}
        missing = [f"{module} (imported by {by})" for module, by in sorted(needed.items())
                   if not (module in OPTIONAL_BACKENDS and by == "pinbench.media.video")
                   and not any(_normal(d) in locked for d in distributions.get(module, []))
                   and not re.search(rf"pip install .*\b{module}\b", text)]
        assert missing == [], f"{dockerfile.name} ({', '.join(locks)}) lacks {missing}"


@pytest.mark.parametrize("name", ALL_RECIPES)
def test_make_setup_installs_what_the_lock_was_compiled_without(tmp_path: Path, name: str) -> None:
    """MIND's lock leaves torch and its CUDA libraries to requirements.torch.txt (--no-emit-package): an export set
    up from the lock alone failed its fixture with 'No module named torch'. Each package its header leaves out is
    installed, by a hashed file, before the lock."""
    dest = export_recipe(get_recipe(name), tmp_path / "export")
    header = "".join(line for line in (dest / "requirements.lock").read_text().splitlines()[:5] if line[:1] == "#")
    out = subprocess.run(["make", "-n", "-C", str(dest), "setup"], capture_output=True, text=True, check=True).stdout
    files = re.findall(r"pip install --require-hashes --no-deps -r (\S+)", out)
    assert files[-1:] == ["requirements.lock"], out
    installed = {_normal(m) for file in files[:-1]
                 for m in re.findall(r"^([A-Za-z0-9_.\-]+)(?:==| @ )", (dest / file).read_text(), flags=re.MULTILINE)}
    assert sorted({_normal(p) for p in re.findall(r"--no-emit-package (\S+)", header)} - installed) == []
    assert ("torch" in installed) == (name == "mind")


def test_a_lock_compiled_without_a_package_no_file_installs_is_refused_in_one_line(tmp_path: Path) -> None:
    recipe = get_recipe("mind")
    copy = tmp_path / "recipes" / recipe.dir.name
    shutil.copytree(recipe.dir, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "recipes" / "__init__.py").write_text("")
    (copy / "requirements.torch.txt").unlink()
    with pytest.raises(ExportError, match=rf"^{copy / 'requirements.lock'}: compiled without nvidia-cublas-cu12, "
                                          r"[^\n]*torch, torchvision, triton \(--no-emit-package\), which no "
                                          r"requirements\*\.txt beside it installs$"):
        export_recipe(dataclasses.replace(recipe, dir=copy), tmp_path / "new" / "export")
    assert [p.name for p in (tmp_path / "new").iterdir()] == []


def test_the_readme_says_how_to_name_a_python_not_on_path(tmp_path: Path) -> None:
    """camerabench's lock wants Python 3.10; where python3.10 is not on PATH (a pyenv install), make setup failed
    and its README did not say that PYTHON names another."""
    dest = export_recipe(get_recipe("camerabench"), tmp_path / "export")
    assert "`make setup PYTHON=/path/to/python3.10`" in (dest / "README.md").read_text()
    out = subprocess.run(["make", "-n", "-C", str(dest), "setup", "PYTHON=/opt/py/bin/python3.10"],
                         capture_output=True, text=True, check=True).stdout
    assert "/opt/py/bin/python3.10 -m venv .venv\n" in out


@pytest.mark.parametrize("name", ["dynamic-degree", "paibench-c"])
def test_the_generated_makefile_and_pyproject(tmp_path: Path, name: str) -> None:
    recipe = get_recipe(name)
    dest = export_recipe(recipe, tmp_path / "export")
    makefile = (dest / "Makefile").read_text()
    assert "pip install --require-hashes --no-deps -r requirements.lock" in makefile
    assert "pip install --no-deps --no-build-isolation --no-index ." in makefile
    commands = [line.strip() for line in makefile.splitlines() if line.startswith("\t")]
    assert not [c for c in commands if re.match(r"(@?echo )?pinbench\b", c)], "a bare pinbench is not on PATH"

    def planned(*args: str) -> str:
        out = subprocess.run(["make", "-n", "-C", str(dest), *args], capture_output=True, text=True, check=True)
        return out.stdout

    fixture_dir = recipe.default_out_dir("fixture", "fixture")
    assert f".venv/bin/pinbench run {recipe.name} --fixture" in planned("fixture")
    assert f".venv/bin/pinbench diff {fixture_dir}/scorecard.json" in planned("diff", "CHECKPOINT=fixture")
    assert f".venv/bin/pinbench check {fixture_dir}" in planned("check", "CHECKPOINT=fixture")
    smoke = recipe.default_out_dir("Model-A", "smoke")
    assert f"pinbench diff {smoke}/scorecard.json" in planned("diff", "CHECKPOINT=Model-A", "LIMIT=4")
    full = recipe.default_out_dir("Model-A", "full")
    assert f"pinbench check {full}" in planned("check", "CHECKPOINT=Model-A")

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((dest / "pyproject.toml").read_text())["project"]
    # the export's console script is this repository's, and its module came along (review56: pinbench.cli:main, whose
    # Ctrl-C while importing was a traceback, and no pinbench/__main__.py, so python -m pinbench failed there)
    assert project["scripts"] == tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert (dest / "pinbench" / "__main__.py").is_file()
    dependencies = project["dependencies"]
    assert any(d.startswith("decord==0.6.0") and "platform_machine == \"x86_64\"" in d for d in dependencies)


@pytest.mark.parametrize("name", ALL_RECIPES)
def test_the_exports_own_tests_are_collected_there_with_its_own_code(tmp_path: Path, name: str) -> None:
    """Every test file of the recipe is collected from its export folder, the export first on the path (this
    venv's packages behind it): the helpers the tests import came along, and what they import is the export's
    pinbench and recipe, never this repository's. (tests/test_new_recipe.py does the same for a new recipe; the
    slow tests below run the tests of dynamic-degree and of a new recipe in a fresh venv from their locks.)"""
    recipe = get_recipe(name)
    dest = export_recipe(recipe, tmp_path / "export")
    env = {**os.environ, "PYTHONPATH": str(dest)}
    probe = subprocess.run([sys.executable, "-c", f"import pinbench, {recipe.package} as r; "
                            "print(pinbench.__file__); print(r.__file__)"],
                           cwd=dest, env=env, capture_output=True, text=True, check=True)
    assert all(Path(f).is_relative_to(dest) for f in probe.stdout.split()), probe.stdout
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-rs", "-p", "no:randomly",
                           "pinbench_recipes"], cwd=dest, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    collected = {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}
    collected |= set(re.findall(r"^SKIPPED \[\d+\] ([^:]+):\d+: ", done.stdout, flags=re.MULTILINE))  # a GPU module
    tests = dest.joinpath(*recipe.package.split(".")) / "tests"
    assert collected == {p.relative_to(dest).as_posix() for p in tests.glob("test_*.py")}, done.stdout[-2000:]
    assert not [line for line in done.stdout.splitlines() if str(REPO) in line]


@pytest.mark.parametrize("name", ALL_RECIPES)
def test_the_generators_every_image_holds_are_in_every_export(tmp_path: Path, name: str) -> None:
    """generation.py loads the shipped generators by name (SHIPPED), not by an import, so the import scan left
    pinbench.ops.generators out of every export: in an image, -g static or -g folder stopped at 'No module named
    pinbench.ops.generators' (8 of PAI-Bench-C's exported tests failed so)."""
    dest = export_recipe(get_recipe(name), tmp_path / "export")
    code = ("import importlib, pinbench.ops.generation as g\n"
            "for n in sorted(g.IN_EVERY_IMAGE):\n"
            "    print(importlib.import_module(g.SHIPPED[n].partition(':')[0]).__file__)")
    done = subprocess.run([sys.executable, "-c", code], cwd=dest, env={**os.environ, "PYTHONPATH": str(dest)},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert all(Path(f).is_relative_to(dest) for f in done.stdout.split()), done.stdout


@pytest.mark.slow
def test_the_export_stands_alone_in_a_fresh_venv_built_from_its_lock(tmp_path: Path) -> None:
    """As a researcher would: make setup (a new venv from the hashed lock only), fixture, diff, check, and the
    recipe's own tests (make test).

    Nothing of the development environment is visible: no PYTHONPATH, no venv on PATH. Slow (the lock
    installs torch and its CUDA wheels), so it is marked ``slow``; CI's `make test` runs it.
    """
    if sys.version_info[:2] != (3, 11):
        pytest.skip("the dynamic-degree lock is compiled for Python 3.11")
    recipe = get_recipe("dynamic-degree")
    dest = export_recipe(recipe, tmp_path / "export")
    env = clean_env()
    make(dest, "setup", env=env, timeout=1500)
    probe = subprocess.run([str(dest / ".venv" / "bin" / "python"), "-c",
                            "import sys, pinbench, pinbench_recipes.dynamic_degree as r; "
                            "print(sys.prefix); print(pinbench.__file__); print(r.__file__)"],
                           env=env, cwd=tmp_path, capture_output=True, text=True, check=True)
    prefix, *files = probe.stdout.split()
    assert prefix == str(dest / ".venv") and all(f.startswith(prefix) for f in files), probe.stdout
    make(dest, "fixture", env=env)
    assert "result: PASS (exit 0)" in make(dest, "diff", "CHECKPOINT=fixture", env=env).stdout
    assert "is consistent" in make(dest, "check", "CHECKPOINT=fixture", env=env).stdout
    card = json.loads((dest / recipe.default_out_dir("fixture", "fixture") / "scorecard.json").read_text())
    assert card["status"] == "complete" and card["provenance"]["pinbench"]["commit"] is None
    tested = make(dest, "test", env=env, timeout=1200).stdout
    assert re.search(r"\n\d+ passed", tested) and " failed" not in tested and " error" not in tested, tested[-2000:]


def test_force_replaces_only_an_earlier_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recipe = get_recipe("dynamic-degree")
    dest = export_recipe(recipe, tmp_path / "export")
    assert export_recipe(recipe, dest, force=True) == dest
    foreign = tmp_path / "my-repo"
    (foreign / "src").mkdir(parents=True)
    with pytest.raises(ExportError, match="not an earlier pinbench export"):
        export_recipe(recipe, foreign, force=True)
    assert (foreign / "src").is_dir()
    monkeypatch.chdir(dest)
    with pytest.raises(ExportError, match="refusing"):
        export_recipe(recipe, tmp_path, force=True)


def test_of_exports_into_one_new_folder_at_once_exactly_one_wins_and_each_other_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four exports into one new DEST at once: each had found DEST there, moved the one before it aside without
    --force, and reported success. Now the first holds DEST until it is done (here until the three others have
    ended), and each other one is refused in one line, leaving nothing behind."""
    import threading

    import pinbench.ops.export as export

    recipe, dest, n = get_recipe("dynamic-degree"), tmp_path / "export", 4
    outcomes: list[str] = []
    others_ended = threading.Event()
    fill = export._fill

    def fill_then_wait(*args: object) -> None:
        fill(*args)
        assert others_ended.wait(timeout=60)

    monkeypatch.setattr(export, "_fill", fill_then_wait)

    def one() -> None:
        try:
            outcomes.append(f"wrote {export_recipe(recipe, dest)}")
        except ExportError as exc:
            outcomes.append(re.sub(r"is running \(pid .*\)|is starting", "...", str(exc)))   # starting: the
            # holder is not yet written in the lock
        if len(outcomes) == n - 1:
            others_ended.set()

    threads = [threading.Thread(target=one) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    refused = f"{dest}: another export of it ...; retry once it has ended"
    assert sorted(outcomes) == sorted([f"wrote {dest}", *[refused] * (n - 1)]), outcomes
    assert sorted(tmp_path.iterdir()) == [dest] and (dest / "Makefile").is_file()


def test_a_folder_written_at_dest_while_the_export_was_built_is_kept_and_the_export_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What another program writes at DEST while the export is built is never moved aside: the export is refused in
    one line (rename(2) replaces no folder that holds anything) and leaves nothing behind."""
    import pinbench.ops.export as export

    recipe, dest = get_recipe("dynamic-degree"), tmp_path / "export"
    fill = export._fill

    def fill_while_written(*args: object) -> None:
        fill(*args)
        dest.mkdir()
        (dest / "mine.txt").write_text("mine")

    monkeypatch.setattr(export, "_fill", fill_while_written)
    with pytest.raises(ExportError, match=rf"^{dest}: already exists and is not an earlier pinbench export \(no "
                                          r"\.pinbench-export\); name a new directory \(written there while this "
                                          r"export was built\)$"):
        export_recipe(recipe, dest)
    assert sorted(tmp_path.iterdir()) == [dest] and (dest / "mine.txt").read_text() == "mine"


SLOW_EXPORT = """import sys, time
import pinbench.ops.export as export
fill = export._fill
def fill_slowly(*args):
    fill(*args)
    for _ in range(300):   # short sleeps: a signal may reach another thread, which wakes no long sleep of this one
        time.sleep(0.01)
export._fill = fill_slowly
from pinbench.cli import main
sys.argv = ["pinbench", "export", "--force", "dynamic-degree", sys.argv[1]]   # the command its lock names
main(sys.argv[1:])
"""


def test_a_second_export_into_one_dest_while_the_first_runs_is_refused_naming_it(tmp_path: Path) -> None:
    """Two ``export --force`` into one DEST at once each built an export and put it in place, the last one staying and
    both saying they had written it. Now the second, started while the first holds DEST, is refused in one line
    naming DEST and the first's process (not a killed export's, whose lock file the first took over); the first's
    export is then in place, and nothing else is left beside it."""
    dest = export_recipe(get_recipe("dynamic-degree"), tmp_path / "export")
    killed = {"pid": 2**22 + 1, "host": "gone", "started": "2026-01-01T00:00:00Z", "argv": ["pinbench"] * 100}
    (tmp_path / ".export.pinbench-export.lock").write_text(json.dumps(killed))   # an export killed: taken over
    first = subprocess.Popen([sys.executable, "-c", SLOW_EXPORT, str(dest)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:   # looked at while it stands still: its export is built and not yet in place
            stop(first)
            if (any(tmp_path.glob(".export.*.tmp/new/Makefile")) or first.poll() is not None
                    or time.monotonic() > deadline):
                break
            first.send_signal(signal.SIGCONT)
            time.sleep(0.05)
        assert first.poll() is None
        second = subprocess.run([sys.executable, "-m", "pinbench", "export", "--force", "dynamic-degree", str(dest)],
                                capture_output=True, text=True, timeout=120)
        first.send_signal(signal.SIGCONT)
        out, err = first.communicate(timeout=120)
    finally:
        first.kill()
    assert second.returncode == 2, second.stdout + second.stderr
    assert re.fullmatch(rf"error: {re.escape(str(dest))}: another export of it is running \(pid {first.pid} on "
                        r"[^\n]* since [^\n]*: pinbench export --force dynamic-degree "
                        rf"{re.escape(str(dest))}\); retry once it has ended\n",
                        second.stderr), second.stderr
    assert first.returncode == 0 and out == f"exported dynamic-degree to {dest}\n", err
    assert sorted(tmp_path.iterdir()) == [dest] and (dest / "Makefile").is_file()


def test_an_interrupted_export_leaves_no_folder_and_keeps_the_earlier_one(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """An export stopped half-way (here at its Makefile, after every copy) leaves DEST as it was: absent, or the
    earlier export whole; a rerun then writes it. It had left a half-written DEST that the rerun refused, --force
    too (no marker yet), and --force had deleted the earlier export before writing a new one."""
    import pinbench.ops.export as export

    recipe = get_recipe("dynamic-degree")

    def interrupted(*args: object) -> str:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(export, "_makefile", interrupted)
        with pytest.raises(KeyboardInterrupt):
            export_recipe(recipe, tmp_path / "export")
    assert sorted(tmp_path.iterdir()) == []
    dest = export_recipe(recipe, tmp_path / "export")
    (dest / "README.md").write_text("kept until the new export is whole")
    with monkeypatch.context() as patch:
        patch.setattr(export, "_makefile", interrupted)
        with pytest.raises(KeyboardInterrupt):
            export_recipe(recipe, dest, force=True)
    assert sorted(tmp_path.iterdir()) == [dest] and (dest / "Makefile").is_file()
    assert (dest / "README.md").read_text() == "kept until the new export is whole"
    assert export_recipe(recipe, dest, force=True) == dest
    assert (dest / "README.md").read_text().startswith("# Exported pinbench recipe")
    assert sorted(tmp_path.iterdir()) == [dest]
    link = tmp_path / "link"
    link.symlink_to(dest)
    with pytest.raises(ExportError, match=rf"^{link}: a symlink \(to {dest}\); name the folder itself"):
        export_recipe(recipe, link, force=True)
    assert link.is_symlink() and (dest / "Makefile").is_file()
    longest = tmp_path / ("n" * 255)   # the hidden folder's name is cut to fit (it had failed 'File name too long')
    assert (export_recipe(recipe, longest) / "Makefile").is_file()
    wide = tmp_path / ("視" * 84)   # 252 bytes: the lock's and the hidden folder's names are cut by bytes to fit
    assert (export_recipe(recipe, wide) / "Makefile").is_file()
    assert sorted(tmp_path.iterdir()) == sorted([dest, link, longest, wide])
    from pinbench.ops.export import _lock_of

    # two DESTs alike in their first 200 bytes take turns on two locks
    assert _lock_of(tmp_path / ("x" * 200 + "a")) != _lock_of(tmp_path / ("x" * 200 + "b"))


def test_a_symlink_or_fifo_named_as_the_export_lock_is_refused_and_left_alone(tmp_path: Path) -> None:
    """The lock file is opened without following a symlink: one in its place (planted, or left) had its target
    truncated and overwritten with the lock's record, and the export succeeded. Now refused in one line, the target
    and DEST untouched; a FIFO there is refused without waiting on it."""
    recipe = get_recipe("dynamic-degree")
    precious = tmp_path / "precious.txt"
    precious.write_text("kept")
    lock = tmp_path / ".export.pinbench-export.lock"
    lock.symlink_to(precious)
    with pytest.raises(ExportError, match=rf"^{lock}: a symlink \(to {precious}\), not a regular file; exports of "
                                          rf"{tmp_path / 'export'} take turns on it: delete it$"):
        export_recipe(recipe, tmp_path / "export")
    assert precious.read_text() == "kept" and lock.is_symlink() and not (tmp_path / "export").exists()
    lock.unlink()
    os.mkfifo(lock)
    with pytest.raises(ExportError, match=r"a FIFO \(named pipe\), not a regular file; exports of .* delete it$"):
        export_recipe(recipe, tmp_path / "export")


@pytest.mark.parametrize(("entry", "problem"), [
    ("pipe", r"a FIFO \(named pipe\), not a regular file"),
    ("Dockerfile.extra", r"a FIFO \(named pipe\), not a regular file"),   # a top-level file had been left out
    ("gone", r"a dangling symlink \(to /nonexistent\)"),
    ("loop", r"a symlink to a folder \(to \.\)"),
])
def test_a_recipe_entry_that_is_no_file_is_refused_in_one_line(tmp_path: Path, entry: str, problem: str) -> None:
    """A FIFO, a dangling symlink or a symlink to a folder in the recipe's folder is named in one line before
    anything is written; copytree had failed late in a Python list of tuples (a loop after 40 levels of copies)
    and left a half-written DEST, and a FIFO among the top-level files was silently left out."""
    recipe = get_recipe("dynamic-degree")
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "__init__.py").write_text("")
    copy = tmp_path / "recipes" / recipe.dir.name
    shutil.copytree(recipe.dir, copy, ignore=shutil.ignore_patterns("__pycache__"))
    {"pipe": lambda p: os.mkfifo(p), "Dockerfile.extra": lambda p: os.mkfifo(p),
     "gone": lambda p: p.symlink_to("/nonexistent"), "loop": lambda p: p.symlink_to(".")}[entry](copy / entry)
    with pytest.raises(ExportError, match=rf"^{copy / entry}: {problem}[^\n]*$"):
        export_recipe(dataclasses.replace(recipe, dir=copy), tmp_path / "new" / "export")
    assert not (tmp_path / "new").exists()   # nor DEST's parent, nor its lock file in it


def test_what_a_killed_export_left_is_removed_by_the_next_and_nothing_else(tmp_path: Path) -> None:
    """A SIGKILL leaves the hidden build folder (the new export, the earlier one moved aside); the next export of that
    DEST removes it and says so in one line. It had stayed forever. A folder of that name without the build file,
    or with one whose lock a running export holds, is kept."""
    import pinbench.ops.export as export

    recipe = get_recipe("dynamic-degree")
    dest = tmp_path / "export"
    killed = [tmp_path / ".export.0123abcd.tmp", tmp_path / ".export.0123abce.tmp"]
    for folder, inside in zip(killed, (["new/pinbench/x.py"], ["new/Makefile", "old/Makefile"]), strict=True):
        folder.mkdir()
        os.close(export._claim(folder / export.BUILDING))   # the kill drops the lock
        for name in inside:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text("")
    mine = tmp_path / ".export.deadbeef.tmp"
    (mine / "new").mkdir(parents=True)
    (mine / "data.txt").write_text("mine")
    (mine / export.BUILDING).write_text("mine too")
    running = tmp_path / ".export.0badcafe.tmp"
    running.mkdir()
    lock = export._claim(running / export.BUILDING)
    lines: list[str] = []
    try:
        assert export_recipe(recipe, dest, log=lines.append) == dest
    finally:
        os.close(lock)
    assert lines == [f"{dest}: removed what killed exports of it left: {', '.join(p.name for p in killed)}"]
    assert sorted(tmp_path.iterdir()) == sorted([dest, mine, running]) and (mine / "data.txt").read_text() == "mine"
    assert (dest / "Makefile").is_file() and not (dest / export.BUILDING).exists()
    lines.clear()
    export_recipe(recipe, dest, force=True, log=lines.append)
    assert lines == [f"{dest}: removed what killed exports of it left: {running.name}"]


def test_force_replaces_only_what_the_export_wrote(tmp_path: Path) -> None:
    """--force had deleted whatever a user kept inside an earlier export (results, notes). The marker lists what the
    export wrote; anything else is named, before anything is deleted, except the caches its own tests and Makefile
    make. A marker without the list (an older export) is held to what this export writes."""
    import pinbench.ops.export as export

    recipe = get_recipe("dynamic-degree")
    dest = export_recipe(recipe, tmp_path / "export")
    marker = json.loads((dest / export.MARKER).read_text())
    assert marker == {"name": recipe.name, "version": recipe.version, "files": export._files(dest)}
    assert {"Makefile", export.MARKER} <= set(marker["files"])
    package = dest.joinpath(*recipe.package.split("."))
    for kept in [package / "results.txt", dest / "runs" / "dynamic-degree" / "scorecard.json"]:
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text("mine")
        first = kept if kept.parent == package else dest / "runs"
        for old_marker in (False, True):
            if old_marker:
                (dest / export.MARKER).write_text(f"{recipe.name} {recipe.version}\n")
            with pytest.raises(ExportError, match=rf"^{re.escape(str(first))}: not written by pinbench export; "
                                                  r"move it out before --force$"):
                export_recipe(recipe, dest, force=True)
            assert kept.read_text() == "mine" and (dest / "Makefile").is_file()
        shutil.rmtree(first) if first.is_dir() else first.unlink()
        export_recipe(recipe, dest, force=True)   # the marker without a list: the tree is what this one writes
    caches = [package / "__pycache__" / "x.pyc", dest / ".pytest_cache" / "v", dest / ".venv" / "bin" / "python",
              dest / "pinbench_recipe_x.egg-info" / "PKG-INFO", dest / "build" / "lib" / "pinbench" / "cli.py",
              dest / "build" / "bdist.linux-x86_64" / "x"]   # make setup's in-tree build (pip, setuptools)
    for cache in caches:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text("")
    assert export_recipe(recipe, dest, force=True) == dest
    assert not any(cache.exists() for cache in caches) and (dest / "Makefile").is_file()
    mine = dest / "build" / "notes.txt"   # a build/ holding more than setuptools' folders is the user's
    (dest / "build" / "lib").mkdir(parents=True)
    mine.write_text("mine")
    with pytest.raises(ExportError, match=rf"^{re.escape(str(dest / 'build'))}: not written by pinbench export"):
        export_recipe(recipe, dest, force=True)
    assert mine.read_text() == "mine"
