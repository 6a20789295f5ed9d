"""Which ``pinbench`` modules a recipe imports, followed transitively (read from the sources, nothing imported).

Two users need the same answer: the export copies exactly these modules, and a recipe's code digest (part of every
stored record's reuse key) covers the ``pinbench.media`` ones among them, so an exported copy, which holds only
those, computes the digest the repository does.

Every run asks for its code digest, and parsing the ~70 files of the closure took 0.3 s of a 1.4 s rerun; what each
file imports is kept in ``<cache>/imports-2.json`` (``CACHE_FILE``) by the file's path, with the SHA-256 of the bytes
it was parsed from (so an edit is parsed again, whatever its mtime, and replaces the path's entry: one entry a file,
where one entry a version of each file grew the cache without end; 992 entries, 1.1 MB, read by every run; past
``IMPORT_CACHE_FILES`` entries, a file that is gone loses its entry when the cache is next written). A cache that
cannot be read or written is only slower.
"""

from __future__ import annotations

import ast
import hashlib
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pinbench.core.files import cache_root, read_json_cache, write_json_cache

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


class ImportCache:
    """What each source file imports, by its path and the SHA-256 of its bytes and the module it is read as (see the
    module docstring); loaded once per process, written back when it learnt something."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.parsed = 0   # files this process had to parse
        self._entries: dict[str, tuple[str, list[str]]] | None = None
        self._changed = False

    def imported_modules(self, path: Path, module: str, is_package: bool) -> set[str]:
        """Absolute names of every pinbench module a file imports, including relative imports."""
        data = path.read_bytes()
        key = hashlib.sha256(b"\0".join([data, module.encode(), b"1" if is_package else b"0"])).hexdigest()
        entries = self._load()
        entry = entries.get(str(path))
        if entry is None or entry[0] != key:
            entry = entries[str(path)] = (key, sorted(_parse_imports(data, str(path), module, is_package)))
            self.parsed += 1
            self._changed = True
        return set(entry[1])

    def save(self) -> None:
        """Write back what was learnt; beyond ``IMPORT_CACHE_FILES`` entries, without those of files that are gone
        here. Why: keyed by path, the cache kept every temporary folder's and deleted checkout's files for ever (a
        test session adds its own). Not below it: a container's files (its image's paths) share the cache and are
        gone from the host's view; dropped at each write, the two would parse their files again in turn."""
        if not self._changed or self._entries is None:
            return
        if len(self._entries) > IMPORT_CACHE_FILES:
            self._entries = {path: entry for path, entry in self._entries.items() if os.path.isfile(path)}
        try:
            write_json_cache(self.path, FORMAT, self._entries)
            self._changed = False
        except OSError:
            pass

    def _load(self) -> dict[str, tuple[str, list[str]]]:
        if self._entries is None:
            self._entries = read_json_cache(self.path, FORMAT, _import_entries)
        return self._entries


FORMAT = 2   # 1 keyed each entry by the bytes alone
# named by its format: a pinbench of format 1 (a container's, another checkout's) sharing the cache root read this one
# as none and wrote its own over it, and each then parsed every file of its closure again at each run, in turn
CACHE_FILE = f"imports-{FORMAT}.json"
IMPORT_CACHE_FILES = 1000   # a checkout's closure is ~160 files: the host's, a container's and a few more fit


def _import_entries(files: Mapping[str, Any]) -> dict[str, tuple[str, list[str]]]:
    """The cache's entries, each module name one object however many files import it (JSON parsing makes one per
    occurrence, and a name such as ``pinbench.core.files`` is imported by most files; held for the process's life)."""
    names: dict[str, str] = {}
    return {path: (key, [names.setdefault(n, n) for n in found]) for path, (key, found) in files.items()
            if isinstance(key, str) and isinstance(found, list) and all(isinstance(n, str) for n in found)}


_CACHE: ImportCache | None = None


def import_cache() -> ImportCache:
    """This process's cache, at ``<cache>/CACHE_FILE`` (PINBENCH_CACHE, HF_HOME or ~/.cache/pinbench)."""
    global _CACHE
    if _CACHE is None or _CACHE.path != cache_root() / CACHE_FILE:
        _CACHE = ImportCache(cache_root() / CACHE_FILE)
    return _CACHE


def _parse_imports(data: bytes, path: str, module: str, is_package: bool) -> set[str]:
    tree = ast.parse(data, filename=path)
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
    return {name for name in found if name == LIBRARY or name.startswith(LIBRARY + ".")}


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
    imports = import_cache()
    files = sorted(recipe_dir.rglob("*.py")) if sources is None else sorted(sources)
    todo: list[tuple[Path, str, bool]] = [(p, "", False) for p in files if "__pycache__" not in p.parts]
    needed: set[Path] = set()
    seen: set[str] = set()
    while todo:
        path, module, is_package = todo.pop()
        for name in imports.imported_modules(path, module or "recipe", is_package):
            # Every package on the way down needs its __init__.py.
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                sub = ".".join(parts[:i])
                if sub in seen:
                    continue
                seen.add(sub)   # a module, or a name that is none (looked up once: a class imported from 40 files)
                file = module_file(root, sub)
                if file is None:
                    continue  # an attribute imported from a module, not a module itself
                needed.add(file)
                todo.append((file, sub, file.name == "__init__.py"))
    imports.save()
    return needed
