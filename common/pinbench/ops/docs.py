"""The documentation's tables, generated from the recipe declarations so that they cannot drift from the code.

Each table sits between ``<!-- pinbench:<table> -->`` and ``<!-- /pinbench:<table> -->`` markers, wherever a
page puts it: each recipe README (in its folder, exported with it) has ``options``, ``env`` and ``metrics``;
the pages of ``docs/`` may hold the tables about every recipe, ``env`` (every variable any recipe reads, plus
the core's), and one of them must. ``pinbench docs`` rewrites them; ``pinbench docs --check`` (``make lint``)
fails when a page disagrees with the recipe.yaml files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from pinbench.core.files import write_atomic
from pinbench.core.recipe import Recipe, available_recipes

CORE_ENV: dict[str, tuple[str, str]] = {
    "PINBENCH_CACHE": ("all", "cache root for every download (HF hub layout under `hub/`, URL weights under "
                              "`urls/`); default `$HF_HOME`, else `~/.cache/pinbench`; a path that exists but is no "
                              "folder stops `run`, `fetch` and `doctor` in one line naming it; the tests "
                              "(conftest.py) use a temporary folder a session unless the shell sets it, as the "
                              "`-m gpu` tests that read fetched weights need"),
    "HF_HOME": ("all", "fallback cache root"),
    "HF_TOKEN": ("fetch stages", "token for gated models and datasets; passed only to stages that fetch, never to "
                                 "scoring, never logged or written"),
    "PINBENCH_OFFLINE": ("all", "`1`: fail fast, naming what was not fetched, instead of downloading; a value that "
                                "is no boolean word (1/0, true/false, yes/no, on/off) stops `pinbench` in one line"),
    "HF_HUB_OFFLINE": ("all", "`1`: same as `PINBENCH_OFFLINE=1`"),
    "PINBENCH_IMAGE_DIGEST": ("all", "set by the Docker runtime; recorded as the image digest in provenance"),
    "PINBENCH_BASE_IMAGE": ("all", "set by the Docker runtime from the image's label: the base it was built on, its "
                                   "digest, the pinned one, whether it differs; recorded in provenance"),
    "PINBENCH_IMAGE_BASE_IMAGE": ("images", "set by every image (ENV from its build ARG, with `..._PINNED` the "
                                            "pinned default; a builder stage's base likewise, e.g. "
                                            "`PINBENCH_IMAGE_BUILD_BASE`): the base it was built on, recorded in "
                                            "provenance by a plain `docker run`"),
    "PINBENCH_SAMPLE_CACHE": ("`run`", "the sample cache's folder, where any run directory finds finished samples "
                                       "of the same inputs and code, and the generation step's rollouts of the "
                                       "same requests and generator (hard links) (`pinbench cache show`); default "
                                       "`samples/` "
                                       "under the cache root, a path a cluster shares works too; `off`: none; a "
                                       "path that exists but is no folder (a file, a FIFO), a symlink to "
                                       "nothing, or a switch word "
                                       "(`false`, `0`, `no`), stops `run` and `cache` in one line naming it; so "
                                       "does a folder inside the run directory (`run`): the cache is every run's, "
                                       "and its entries there would void that run's rerun manifest; an entry "
                                       "a run cannot use (edited, torn, a symlink) is computed again and named "
                                       "in one line (a step's first three), a record it cannot keep (a full or "
                                       "read-only folder) is said once a step; `--runtime docker` and `submit "
                                       "--container docker|pyxis|apptainer` give their containers the same "
                                       "folder, and `submit --container none` writes it into its scripts "
                                       "([Containers](containers.md#running-in-the-images), "
                                       "[Scale-out](scale-out.md#environment-users-and-file-systems))"),
    "PINBENCH_SAMPLE_CACHE_MB": ("`run`, `cache`", "the sample cache's bound in MiB (default 2048): least recently "
                                                   "used records go first, after a run stored some and on "
                                                   "`pinbench cache prune`"),
    "PINBENCH_DEBUG": ("CLI", "`1`: show tracebacks instead of one-line errors"),
    "PINBENCH_NOTICE_S": ("all", "seconds work runs before it says what it is doing (default 2; 0: say all of "
                                 "it; a value that is no finite number of 0 or more stops `pinbench` in one line)"),
    "GPUS": ("`run`, make", "default for `--gpus` (otherwise the recipe's default; 0 to 1024)"),
    "CHECKPOINT": ("make", "checkpoint name for `make recipe-<name>` / `make diff-<name>`"),
    "LIMIT": ("make", "smoke size for `make recipe-<name>`"),
    "RUN_ARGS": ("make", "extra `pinbench run` flags for `make recipe-<name>`"),
    "BASE_IMAGE": ("make", "`[Dockerfile.x[:ARG]=]IMAGE ...`: build on these bases instead of the pinned ones "
                           "(`make build-<name>`, `recipe-<name>`; recorded in the scorecard)"),
    "SMOKE_BASES": ("make", "`NAME=IMAGE ...`: `make docker-smoke` builds on IMAGE wherever base-images.yaml entry "
                            "NAME is pinned; IMAGE of `python-3.11-slim` is the real-engine tests' base too"),
    "PINBENCH_TEST_BASE_IMAGE": ("tests", "base of the stand-in images of the real-engine tests (`-m docker`); "
                                          "default the pinned python-3.11-slim; `make docker-smoke` sets it from "
                                          "`SMOKE_BASES`"),
}
_MARKER = "<!-- pinbench:{0} -->"
_END = "<!-- /pinbench:{0} -->"
_ANY_MARKER = re.compile(r"^<!-- pinbench:(\S+) -->$", re.M)  # a marker stands on its own line
DOCS = "docs"  # the folder of the documentation pages, under the repository root


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def options_table(recipe: Recipe) -> str:
    if not recipe.options:
        return "This recipe has no `-o` options."
    rows = []
    for name, spec in recipe.options.items():
        kind = spec.describe_type(quote="`")
        rows.append([f"`{name}`", kind, f"`{spec.describe_default()}`", f"`{spec.env}`" if spec.env else "-",
                     f"`{spec.help}`" if "<" in spec.help else spec.help])
    return _table(["option (`-o`)", "type", "default", "environment", "meaning"], rows)


def env_table(recipe: Recipe) -> str:
    """The variables a recipe reads besides its options' twins (those are in the options table)."""
    if not recipe.env:
        return "This recipe reads no environment variables besides its options' and the core's."
    return _table(["variable", "meaning"], ([f"`{var}`", meaning] for var, meaning in recipe.env.items()))


def metrics_table(recipe: Recipe) -> str:
    rows = []
    for name, info in recipe.metrics.items():
        tol = ", ".join(f"{tier} {t.text(1.0) if t.abs is not None else f'±{t.rel * 100:g}%'}"
                        for tier, t in info.tolerance.items())
        rows.append([f"`{name}`" + (" (primary)" if info.primary else ""), info.kind, info.direction,
                     info.aggregation + (f" by `{info.group_by}`" if info.group_by else ""),
                     f"`{info.cohort}`" if info.cohort else "-",
                     info.unit or info.help or "-", tol])
    return _table(["metric", "kind", "better", "aggregation", "reported per", "what", "default tolerance"], rows)


def top_env_table(recipes: Mapping[str, Recipe]) -> str:
    rows = [[f"`{var}`", used, meaning] for var, (used, meaning) in CORE_ENV.items()]
    by_var: dict[str, dict[str, str]] = {}
    for recipe in recipes.values():
        for var, meaning in recipe.env_vars.items():
            if var not in CORE_ENV:
                by_var.setdefault(var, {})[recipe.name] = meaning
    for var, meanings in sorted(by_var.items()):
        users = ", ".join(f"`{name}`" for name in meanings)
        if len(set(meanings.values())) == 1:  # one meaning for all, else each recipe's own
            rows.append([f"`{var}`", users, next(iter(meanings.values()))])
        else:
            rows.append([f"`{var}`", users, "; ".join(f"`{name}`: {m}" for name, m in meanings.items())])
    return _table(["variable", "used by", "meaning"], rows)


def recipe_tables(recipe: Recipe) -> dict[str, str]:
    """The generated tables of a recipe's README, by marker name."""
    return {"options": options_table(recipe), "env": env_table(recipe), "metrics": metrics_table(recipe)}


def fill_tables(text: str, tables: Mapping[str, str], path: Path) -> str:
    """``text`` with each table between its markers rewritten; ValueError naming ``path`` when a marker is missing."""
    for name, body in tables.items():
        start, end = _MARKER.format(name), _END.format(name)
        pattern = re.compile("^" + re.escape(start) + r"$.*?^" + re.escape(end) + "$", re.S | re.M)
        found = pattern.search(text)
        if found is None:
            raise ValueError(f"{path}: no {start} ... {end} section (each marker on a line of its own)")
        text = f"{text[:found.start()]}{start}\n{body}\n{end}{text[found.end():]}"
    return text


def _docs_targets(root: Path, recipes: Mapping[str, Recipe]) -> list[tuple[Path, dict[str, str]]]:
    """Each page of ``root/docs`` that holds a generated table, with the tables it holds; ValueError naming the page
    for a marker no page of ``docs/`` can hold, and naming the folder when a table is on no page at all."""
    folder = root / DOCS
    if not folder.is_dir():
        return []
    tables = {"env": top_env_table(recipes)}   # the tables about every recipe, by marker name
    targets, placed = [], set()
    for page in sorted(folder.rglob("*.md")):
        names = set(_ANY_MARKER.findall(page.read_text(encoding="utf-8")))
        unknown = sorted(names - tables.keys())
        if unknown:
            raise ValueError(f"{page}: {', '.join(_MARKER.format(n) for n in unknown)} is no table of the "
                             f"documentation pages (they hold {', '.join(_MARKER.format(n) for n in tables)}; "
                             "a recipe's tables are in its README)")
        if names:
            targets.append((page, {name: tables[name] for name in sorted(names)}))
            placed |= names
    missing = sorted(tables.keys() - placed)
    if missing:
        raise ValueError(f"{folder}: no page holds {', '.join(_MARKER.format(n) for n in missing)} (put the "
                         "markers, each on its own line with its end marker, where the table belongs; pinbench docs "
                         "fills them)")
    return targets


def sync_tables(root: Path, *, write: bool) -> list[Path]:
    """Regenerate (``write``) or check the tables of the pages of ``root/docs`` and of every recipe README under
    ``root``. Returns the files that were (or would be) changed."""
    recipes = available_recipes()
    targets = _docs_targets(root, recipes)
    for recipe in recipes.values():
        readme = recipe.dir / "README.md"
        if readme.resolve().is_relative_to(root.resolve()):
            targets.append((readme, recipe_tables(recipe)))
    if not targets:   # outside a checkout (or --root mistyped), --check checked nothing and passed
        raise ValueError(f"{root}: no docs/ folder and no recipe README under it; --root names the repository root")
    stale = []
    for path, tables in targets:
        text = path.read_text(encoding="utf-8")
        new = fill_tables(text, tables, path)
        if new != text:
            stale.append(path)
            if write:
                write_atomic(path, new)
    return stale
