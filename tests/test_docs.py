"""The documentation's links: every relative link of a Markdown page leads to a file, a recipe's README never leads
out of its folder (an export copies the folder alone), and ``make docs-site`` (which ``make lint`` runs) fails on a
broken link, a broken anchor and a page left out of the site."""

from __future__ import annotations

import re
import shlex
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
                 "HF_DATASETS_OFFLINE": "set for an --offline run's generator process (``offline_env``)",
                 "PINBENCH_IMAGE_": "the prefix of the PINBENCH_IMAGE_* variables the environment table names",
                 "PINBENCH_SECRET_VALUES": "secret-named -g values a run keeps secret, for the processes it starts",
                 "PINBENCH_SECRET_": "the prefix of the variables submit hands sbatch for the secret -g values",
                 "PINBENCH_CHECKPOINT_NOTED": "set for a docker stage's or a job's run: its starter said the "
                                              "checkpoint's typo note"}


def test_every_variable_the_library_reads_is_in_the_environment_table() -> None:
    """docs/environment.md says it lists every variable pinbench reads; the sample cache's two were missing. Every
    ``PINBENCH_*``/``HF_*`` name the library spells is a row of ``CORE_ENV`` (the table's source) or one pinbench
    sets for its own processes."""
    from pinbench.ops.docs import CORE_ENV

    spelled = {name for path in (REPO / "common" / "pinbench").rglob("*.py")
               for name in re.findall(r"\"((?:PINBENCH|HF)_[A-Z0-9_]*)\"", path.read_text(encoding="utf-8"))}
    assert {"PINBENCH_SAMPLE_CACHE", "PINBENCH_CACHE", "HF_TOKEN"} <= spelled   # the finder finds them
    assert sorted(spelled - set(CORE_ENV) - set(_INTERNAL_ENV)) == []


# ------------------------------------------------------------------ the commands of the pages name what exists

_SHELL_BLOCK = re.compile(r"^```(console|bash|sh)\n(.*?)^```", re.S | re.M)
_SEPARATORS = {";", "&&", "||", "|", "&", ">", ">>", "<", "(", ")"}
_PREFIXES = {"do", "then", "else", "time", "exec"}  # shell words a command may follow on its line
_RECIPE_COMMANDS = {"run", "requests", "fetch", "doctor", "submit"}  # their first argument is a recipe, -o its option


def shell_commands(text: str) -> list[list[str]]:
    """The ``pinbench`` and ``make`` commands of a page's shell blocks, each as its words from the command name on:
    in a ``console`` block the lines after ``$ ``, in the others every line; continuation lines joined, comments,
    variable assignments and the rest of a pipeline or list left out. ``python -m pinbench_recipes.PKG ...`` (which
    is ``pinbench ... RECIPE ...``) is read as the pinbench command it is."""
    commands = []
    for kind, body in _SHELL_BLOCK.findall(text):
        lines = body.replace("\\\n", " ").splitlines()
        if kind == "console":
            lines = [line[2:] for line in lines if line.startswith("$ ")]
        for line in lines:
            lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>()")
            lexer.whitespace_split, lexer.commenters = True, "#"
            try:
                words = list(lexer)
            except ValueError:  # an unclosed quote: not a command line
                continue
            start = 0
            for i, word in enumerate([*words, ";"]):
                if word in _SEPARATORS:
                    command = words[start:i]
                    while command and (command[0] in _PREFIXES or re.match(r"[A-Za-z_][A-Za-z0-9_]*=", command[0])):
                        command = command[1:]
                    command = command or [""]
                    if command[:2] == ["python", "-m"] and len(command) > 3 and command[2].count(".") == 1 and \
                            command[2].startswith("pinbench_recipes."):
                        package = command[2].split(".", 1)[1]
                        command = ["pinbench", command[3], package.replace("_", "-"), *command[4:]]
                    if command[0] in ("pinbench", "make"):
                        commands.append(command)
                    start = i + 1
    return commands


def test_the_command_finder_reads_shell_lines_and_only_commands() -> None:
    text = ("```console\n$ PYTHONPATH=x pinbench run mind --fixture -o a=1 | head\nerror: pinbench run x\n```\n"
            "```bash\nmake recipe-mind CHECKPOINT=m   # pinbench list\nfor i in 0 1; do X=$i pinbench run a \\\n"
            "  --shard $i/2 & done; wait\npython -m pinbench_recipes.paibench_c run --fixture\n```\n"
            "```\npinbench not a shell block\n```\n")
    assert shell_commands(text) == [["pinbench", "run", "mind", "--fixture", "-o", "a=1"],
                                    ["make", "recipe-mind", "CHECKPOINT=m"],
                                    ["pinbench", "run", "a", "--shard", "$i/2"],
                                    ["pinbench", "run", "paibench-c", "--fixture"]]


def command_problems(page: Path, text: str) -> list[str]:
    """What the page's commands name that does not exist: a pinbench command, an option of it, a recipe's ``-o``
    option, a make target; and a generic ``run`` flag the recipe refuses."""
    import typer.main

    from pinbench.cli import app
    from pinbench.core.recipe import available_recipes

    group = typer.main.get_command(app)
    recipes = available_recipes()
    targets = re.findall(r"^([a-zA-Z_%-]+):", (REPO / "Makefile").read_text(encoding="utf-8"), flags=re.M)
    problems, page = [], page.relative_to(REPO) if page.is_relative_to(REPO) else page
    for words in shell_commands(text):
        line = " ".join(words)
        if words[0] == "make":
            for target in (w for w in words[1:] if not w.startswith("-") and "=" not in w):
                if not any(re.fullmatch(re.escape(t).replace("%", ".+"), target) for t in targets):
                    problems.append(f"{page}: `{line}`: no make target {target}")
            continue
        command, name, rest = group, "", words[1:]
        while hasattr(command, "commands") and rest and not rest[0].startswith("-"):  # a group: its subcommand
            if rest[0] not in command.commands:
                problems.append(f"{page}: `{line}`: no pinbench command {rest[0]}")
                break
            command, name, rest = command.commands[rest[0]], f"{name} {rest[0]}".strip(), rest[1:]
        if hasattr(command, "commands") or command.context_settings.get("ignore_unknown_options"):
            continue  # a group alone prints its help; `annotate` hands the rest of its line to the recipe's tool
        flags = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
        recipe = recipes.get(rest[0]) if rest and name in _RECIPE_COMMANDS else None
        for i, word in enumerate(rest):
            if word.startswith("-") and word != "-" and word.split("=", 1)[0] not in flags:
                problems.append(f"{page}: `{line}`: pinbench {name} has no option {word}")
            key = rest[i + 1].split("=", 1)[0] if word in ("-o", "--option") and i + 1 < len(rest) else ""
            if recipe is not None and re.fullmatch(r"[a-z_]+", key) and key not in recipe.options:
                problems.append(f"{page}: `{line}`: {recipe.name} has no option -o {key}")
        if recipe is not None and name == "run":
            problems += [f"{page}: `{line}`: {problem}" for problem in _refused_flags(recipe, rest)]
    return problems


def _refused_flags(recipe, words: list[str]) -> list[str]:
    """The refusal of the generic ``run`` flags among ``words`` that ``recipe`` does not honour (its own check)."""
    from pinbench.core.config import RecipeError, Shard

    given = dict(zip(words, [*words[1:], ""], strict=True))
    gpus = given.get("--gpus", "")
    try:
        recipe.check_flags(limit=1 if "--limit" in given else None,
                           shard=Shard.parse("0/2") if "--shard" in given else None,
                           gpus=int(gpus) if gpus.isdigit() else None,
                           skip_generation="--skip-generation" in given, skip_scoring="--skip-scoring" in given)
    except RecipeError as exc:
        return [str(exc)]
    return []


def test_the_command_check_names_what_does_not_exist() -> None:
    text = ("```bash\npinbench run mind --fixtur -o metric=lcm\npinbench lst\nmake recipe-mind\nmake nothing\n"
            "pinbench rollouts check mind DIR --fixture\npinbench table A B --format csv > t.csv\n"
            "pinbench run dynamic-degree --skip-generation -o videos=V\n```\n")
    assert command_problems(Path("page.md"), text) == [
        "page.md: `pinbench run mind --fixtur -o metric=lcm`: pinbench run has no option --fixtur",
        "page.md: `pinbench run mind --fixtur -o metric=lcm`: mind has no option -o metric",
        "page.md: `pinbench lst`: no pinbench command lst",
        "page.md: `make nothing`: no make target nothing",
        "page.md: `pinbench run dynamic-degree --skip-generation -o videos=V`: dynamic-degree does not support "
        "--skip-generation (see `pinbench run dynamic-degree --help`)",
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_command_of_a_page_names_a_command_option_and_target_that_exist(page: Path) -> None:
    """A researcher copies the pages' commands: each ``pinbench`` command, its options (a recipe's ``-o`` ones
    included) and each make target they name exists, so a renamed flag cannot stay in a page."""
    assert command_problems(page, page.read_text(encoding="utf-8")) == []


def test_the_run_directory_page_names_every_file_a_run_writes() -> None:
    """docs/run-directory.md lists what a run writes: every file the run directory's own list names (the files it
    refuses to find of the wrong kind before a run) is a row of its table (the input digests cache was none)."""
    from pinbench.core import rundir

    page = (REPO / "docs" / "run-directory.md").read_text(encoding="utf-8")
    table = page[page.index("## What a run writes"):].split("\n## ", 1)[0]
    rows = {cell for line in table.splitlines() if line.startswith("| `")
            for cell in re.findall(r"`([^`]+)`", line.split(" | ", 1)[0])}
    assert "scorecard.json" in rows and "report/index.html" in rows  # the finder reads the table's first column
    assert sorted(set(rundir._FILES) - rows) == []


def test_running_md_names_every_option_of_pinbench_run() -> None:
    """docs/running.md's section on the options of ``pinbench run`` names each of them (--verify-inputs and the
    generator's three were left out)."""
    import typer.main

    from pinbench.cli import app

    page = (REPO / "docs" / "running.md").read_text(encoding="utf-8")
    section = page[page.index("## The options of `pinbench run`"):].split("\n## ", 1)[0]
    named = set(re.findall(r"`(-[-a-zA-Z]+)", section))
    run = typer.main.get_command(app).commands["run"]
    options = [param.opts for param in run.params if param.opts[0].startswith("-") and param.opts[0] != "--help"]
    assert ["--checkpoint", "-c"] in options and ["--move-aside"] in options  # the command's options are read
    assert [opts[0] for opts in options if not named & set(opts)] == []  # by any of its names (-o for --option)
