"""The library's shape: subpackages in layers, no import cycles, and a core that imports nothing above it.

Layers, lowest first: ``core`` (the recipe contract and the run's data), ``media`` (video and metric kernels),
``results`` (report, compare, tables, view), ``ops`` (machine pins, cache, doctor, launch, generation, containers,
clusters, export); ``pinbench.cli`` sits on top. A module may import its own subpackage and the ones below it,
never one above. Every import counts, also one inside a function: a lazy import is still a dependency. Imports under
``if TYPE_CHECKING:`` (annotations only, never executed) do not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pinbench

ROOT = Path(pinbench.__file__).resolve().parent
LAYERS = ("core", "media", "results", "ops")


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(["pinbench", *parts]).removesuffix(".__init__")


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of a module except the bodies of ``if TYPE_CHECKING:`` blocks."""
    nodes, todo = [], [tree]
    while todo:
        node = todo.pop()
        nodes.append(node)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return nodes


def _imports(path: Path, modules: set[str], *, type_only: bool = False) -> set[str]:
    """The pinbench modules a file imports (``from pinbench.core import files`` names pinbench.core.files); those
    under ``if TYPE_CHECKING:`` too when ``type_only``."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree) if type_only else _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return {name for name in found if name in modules}


def _graph(root: Path = ROOT, *, type_only: bool = False) -> dict[str, set[str]]:
    files = sorted(root.rglob("*.py"))
    modules = {_module_name(p, root) for p in files}
    return {_module_name(p, root): _imports(p, modules, type_only=type_only) - {_module_name(p, root)} for p in files}


def _upward(graph: dict[str, set[str]]) -> list[str]:
    return [f"{module} imports {dep}" for module, deps in graph.items() for dep in sorted(deps)
            if _layer(dep) > max(_layer(module), 0)]


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    cycles: list[str] = []
    state: dict[str, int] = {}  # 1 on the stack, 2 done

    def visit(module: str, stack: list[str]) -> None:
        state[module] = 1
        for dep in sorted(graph.get(module, ())):
            if state.get(dep) == 1:
                cycles.append(" -> ".join([*stack[stack.index(dep):], dep]))
            elif dep not in state:
                visit(dep, [*stack, dep])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return cycles


def _layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) < 3 and module != "pinbench.cli" and module != "pinbench.__main__":
        return -1  # the package itself (its __version__) and subpackage __init__ files
    if parts[1] in LAYERS:
        return LAYERS.index(parts[1])
    return len(LAYERS)  # cli, __main__


def test_every_module_lives_in_a_layer() -> None:
    top = sorted(p.name for p in ROOT.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "cli.py"], f"modules outside the subpackages: {top}"
    assert sorted(p.name for p in ROOT.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(LAYERS)


def test_no_module_imports_a_layer_above_its_own() -> None:
    assert _upward(_graph()) == []


def test_the_core_imports_nothing_outside_the_core() -> None:
    outside = [f"{module} imports {dep}" for module, deps in _graph().items() if module.startswith("pinbench.core")
               for dep in sorted(deps) if not dep.startswith("pinbench.core") and dep != "pinbench"]
    assert outside == []


def test_there_is_no_import_cycle() -> None:
    assert _cycles(_graph()) == []


def test_the_core_has_no_cycle_even_of_type_only_imports() -> None:
    """#28: the core reads as layers too; an import kept only for annotations is still a dependency of its meaning."""
    core = {module: {dep for dep in deps if dep.startswith("pinbench.core")}
            for module, deps in _graph(type_only=True).items() if module.startswith("pinbench.core")}
    assert _cycles(core) == []


def test_the_checks_see_a_planted_cycle_and_an_upward_import(tmp_path: Path) -> None:
    """The checks above can fail: a core -> ops import (inside a function) and a two-module cycle are found,
    and an import under TYPE_CHECKING is not counted."""
    fake = tmp_path / "pinbench"
    for sub in LAYERS:
        (fake / sub).mkdir(parents=True)
        (fake / sub / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "core" / "a.py").write_text("from pinbench.core import b\n")
    (fake / "core" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                        "    from pinbench.results.d import z\n"
                                        "def f():\n    from pinbench.core.a import x\n"
                                        "    from pinbench.ops.c import y\n")
    (fake / "ops" / "c.py").write_text("")
    (fake / "results" / "d.py").write_text("")
    graph = _graph(fake)
    assert graph["pinbench.core.b"] == {"pinbench.core.a", "pinbench.ops.c"}
    assert _graph(fake, type_only=True)["pinbench.core.b"] == {"pinbench.core.a", "pinbench.ops.c",
                                                               "pinbench.results.d"}
    assert _upward(graph) == ["pinbench.core.b imports pinbench.ops.c"]
    assert _cycles(graph) == ["pinbench.core.a -> pinbench.core.b -> pinbench.core.a"]


RECIPES = ROOT.parent.parent / "recipes"
# The protocol is the Run's (pinbench.core.run): resume, shards, reuse keys and the finish. A recipe that called the
# runner's own loops could store without its implementation (reusing records after a code change) or write the
# scorecard from one shard of many.
PROTOCOL = ("run_samples", "merge_samples", "pending_tasks", "StepLog", "collect_records", "finish_shard",
            "finish_run")


def _protocol_uses(path: Path, root: Path) -> list[str]:
    """Where a recipe file calls the runner's loops or branches on the shard (reads ``.shard``) itself."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
        if name in PROTOCOL or (isinstance(node, ast.Attribute) and name == "shard"):
            found.append(f"{path.relative_to(root).as_posix()}:{node.lineno} {name}")
    return found


def test_every_recipe_runs_through_the_run() -> None:
    """#28: every recipe found (its tests aside) leaves the protocol to the Run."""
    recipes = [d for d in sorted(RECIPES.iterdir()) if (d / "recipe.yaml").is_file()]
    assert len(recipes) >= 5
    found = [use for folder in recipes for path in sorted(folder.rglob("*.py")) if "tests" not in path.parts
             for use in _protocol_uses(path, RECIPES)]
    assert found == []


def test_the_protocol_check_sees_a_recipe_that_owns_it(tmp_path: Path) -> None:
    bad = tmp_path / "run.py"
    bad.write_text("if cfg.shard is not None:\n    return finish_shard(cfg, summary)\n"
                   "records = run.score(tasks, fn)\nrun_samples(tasks, fn, out)\n")
    assert sorted(_protocol_uses(bad, tmp_path)) == ["run.py:1 shard", "run.py:2 finish_shard", "run.py:4 run_samples"]
