"""Which ``pinbench`` modules a recipe imports, followed transitively (read from the sources, nothing imported).

Two users need the same answer: the export copies exactly these modules, and a recipe's code digest (part of every
stored record's reuse key) covers the ``pinbench.media`` ones among them, so an exported copy, which holds only
those, computes the digest the repository does.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path

LIBRARY = "pinbench"
LIBRARY_ROOT = Path(__file__).resolve().parent.parent


def module_file(root: Path, module: str) -> Path | None:
    """The file of ``pinbench.<a>.<b>`` under ``root`` (a module or a package's __init__)."""
    parts = module.split(".")[1:]
    base = root.joinpath(*parts) if parts else root
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def imported_modules(path: Path, module: str, is_package: bool) -> set[str]:
    """Absolute names of every pinbench module a file imports, including relative imports (each file parsed once
    per process while its size and mtime hold: every recipe run asks for its code digest)."""
    stat = path.stat()
    return set(_imported_modules(str(path), stat.st_mtime_ns, stat.st_size, module, is_package))


@cache
def _imported_modules(path: str, mtime_ns: int, size: int, module: str, is_package: bool) -> frozenset[str]:
    tree = ast.parse(Path(path).read_text(), filename=path)
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in _statements(tree):
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
    return frozenset(name for name in found if name == LIBRARY or name.startswith(LIBRARY + "."))


def _statements(tree: ast.AST) -> Iterator[ast.AST]:
    """Every statement of a module, nested ones included; expressions (which hold no import) are not walked."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(child for child in ast.iter_child_nodes(node)
                    if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)))


def library_closure(recipe_dir: Path, root: Path | None = None, *, sources: Iterable[Path] | None = None) -> set[Path]:
    """The pinbench source files the recipe needs, following imports transitively from its Python files (or from
    ``sources``) through the library under ``root`` (default: this installation's)."""
    root = root or LIBRARY_ROOT
    files = sorted(recipe_dir.rglob("*.py")) if sources is None else sorted(sources)
    todo: list[tuple[Path, str, bool]] = [(p, "", False) for p in files if "__pycache__" not in p.parts]
    needed: set[Path] = set()
    seen: set[str] = set()
    while todo:
        path, module, is_package = todo.pop()
        for name in imported_modules(path, module or "recipe", is_package):
            # Every package on the way down needs its __init__.py.
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                sub = ".".join(parts[:i])
                if sub in seen:
                    continue
                file = module_file(root, sub)
                if file is None:
                    continue  # an attribute imported from a module, not a module itself
                seen.add(sub)
                needed.add(file)
                todo.append((file, sub, file.name == "__init__.py"))
    return needed
