"""The README and the documentation pages stay true: the generated tables agree with every recipe's declaration,
the README opens with the Quick start, the commands they give exist."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
ENVIRONMENT = REPO / "docs" / "environment.md"  # the page with the generated table of every recipe's variables


def _stale_environment_page(root: Path) -> Path:
    """A copy of the environment page under ``root/docs`` with one variable misspelled in its generated table."""
    (root / "docs").mkdir()
    copy = root / "docs" / ENVIRONMENT.name
    text = ENVIRONMENT.read_text()
    assert "| `PINBENCH_RAFT_WEIGHTS` |" in text
    copy.write_text(text.replace("`PINBENCH_RAFT_WEIGHTS`", "`PINBENCH_RAFT_WEIGHT`"))
    return copy


def test_a_stale_table_is_detected(tmp_path: Path) -> None:
    """pinbench docs --check fails once a table of a docs/ page disagrees with the recipe.yaml files."""
    from pinbench.ops.docs import sync_tables

    assert sync_tables(REPO, write=False) == []
    copy = _stale_environment_page(tmp_path)
    assert sync_tables(tmp_path, write=False) == [copy]


@pytest.mark.parametrize(("edit", "message"), [
    (lambda text: text.replace("<!-- pinbench:env -->\n", "<!-- pinbench:metrics -->\n"),
     "environment.md: <!-- pinbench:metrics --> is no table of the documentation pages"),
    (lambda text: text.replace("<!-- pinbench:env -->\n", ""),
     "docs: no page holds <!-- pinbench:env -->"),
], ids=["a recipe table on a page", "the table on no page"])
def test_a_table_the_pages_cannot_hold_or_lost_is_named(tmp_path: Path, edit, message: str) -> None:
    """A recipe's table on a docs/ page, or the table of every variable on no page, is refused naming the file."""
    from pinbench.ops.docs import sync_tables

    copy = _stale_environment_page(tmp_path)
    copy.write_text(edit(ENVIRONMENT.read_text()))
    with pytest.raises(ValueError, match=re.escape(message)):
        sync_tables(tmp_path, write=False)


def test_docs_rewrites_a_page_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that dies half way (disk full) leaves the page as it was, and no temporary file."""
    from pinbench.ops.docs import sync_tables

    copy = _stale_environment_page(tmp_path)
    stale = copy.read_text()
    real = Path.write_text

    def disk_full(self: Path, data: str, *args, **kwargs) -> int:  # test double: the write dies half way
        real(self, data[: len(data) // 2], *args, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", disk_full)
    with pytest.raises(OSError, match="No space left"):
        sync_tables(tmp_path, write=True)
    monkeypatch.undo()
    assert copy.read_text() == stale and [p.name for p in tmp_path.rglob("*")] == ["docs", ENVIRONMENT.name]
    assert sync_tables(tmp_path, write=True) == [copy] and sync_tables(tmp_path, write=False) == []


def test_a_variable_several_recipes_read_differently_shows_each_meaning() -> None:
    """CUDA_VISIBLE_DEVICES means one thing to dynamic-degree and another to mind (which refuses most masks)."""
    page = ENVIRONMENT.read_text()
    row = next(line for line in page.splitlines() if line.startswith("| `CUDA_VISIBLE_DEVICES` |"))
    assert "`dynamic-degree`: GPUs RAFT may use" in row and "`mind`: unset, or starting 0,1" in row
    assert "`remembench`: the GPU for CLIP, LPIPS and Pi3X" in row
    assert "| `HF_TOKEN` | fetch stages |" in page  # a core variable keeps its one meaning


def test_setup_commands_stand_at_the_top() -> None:
    """The Quick start opens the README: set-up and PATH first (tests/test_first_ten_minutes.py runs it)."""
    first_block = README.split("```bash", 1)[1].split("```", 1)[0]
    assert "make setup" in first_block and ".venv/bin" in first_block
    third_block = README.split("```bash", 3)[3].split("```", 1)[0]
    assert "make test" in third_block and "make demo" in third_block


def test_the_readme_is_the_overview_and_the_manual_is_in_docs() -> None:
    """At most 200 lines: what pinbench is, the Quick start, the recipes, where to read on (#30 item 17); the rest
    is on the pages of docs/."""
    assert len(README.splitlines()) <= 200
    assert re.findall(r"^## (.+)$", README, flags=re.M) == ["Quick start", "Recipes", "Where to read on", "License"]


@pytest.mark.parametrize("target", ["help", "setup", "test", "lint", "docs", "docs-site", "demo", "export", "build-%",
                                    "recipe-%", "diff-%", "docker-smoke"])
def test_make_targets_exist(target: str) -> None:
    makefile = (REPO / "Makefile").read_text()
    assert re.search(rf"^{re.escape(target)}:", makefile, flags=re.M), target


def test_make_recipe_runs_the_doctor_before_the_build() -> None:
    """`make recipe-paibench-c CHECKPOINT=cosmos3-nano` built both images (an hour, with a Docker engine) before
    the run named the typo; now its one command is `run --build`: the doctor, then the build, then the run."""
    make = ["make", "-n", "-s", "-C", str(REPO), "recipe-paibench-c", "CHECKPOINT=cosmos3-nano",
            "BASE_IMAGE=Dockerfile=mirror.lab/cuda:12"]
    out = subprocess.run(make, capture_output=True, text=True, check=True).stdout
    (command,) = [line for line in out.replace("\\\n", " ").splitlines() if "bin/pinbench " in line]
    assert "pinbench run paibench-c --checkpoint \"cosmos3-nano\" --runtime docker --build" in command
    assert "--base-image 'Dockerfile=mirror.lab/cuda:12'" in command


def test_the_flagship_commands_ask_for_the_gpus_the_readme_states() -> None:
    """paibench-c's README says 4 GPUs, yet its `make recipe-paibench-c CHECKPOINT=Cosmos3-Nano` ran on one: a run
    given no GPUS (--gpus) uses the recipe's default, 1 (its doctor said "this run needs 1 GPU(s) of 80 GB")."""
    from pinbench.core.recipe import get_recipe

    assert get_recipe("paibench-c").default_gpus == 1
    makefile = (REPO / "Makefile").read_text()
    pages = [(REPO / "recipes" / "paibench_c" / "README.md").read_text(), (REPO / "docs" / "running.md").read_text()]
    for text in [*pages, makefile[makefile.index("examples:"):].split("\n", 1)[0]]:
        lines = re.findall(r"make recipe-paibench-c CHECKPOINT=\S+(?: [A-Z]+=\S+)*", text)
        assert lines and all("GPUS=4" in line for line in lines), lines


def test_make_help_is_the_default() -> None:
    out = subprocess.run(["make", "-s", "-C", str(REPO)], capture_output=True, text=True, check=True).stdout
    assert "make recipe-paibench-c CHECKPOINT=Cosmos3-Nano" in out


RECIPE_DIRS = sorted(p.name for p in (REPO / "recipes").iterdir() if (p / "recipe.yaml").is_file())


def test_the_readme_s_recipe_table_has_one_row_per_recipe_linking_its_readme() -> None:
    """The README's Recipes table is the one row a new recipe adds outside its folder ("Adding a recipe"): a recipe
    without it passed lint and every recipe-walking test (author65), and a row for a recipe gone or renamed would
    stay. Each row names a recipe by recipe.yaml's name and links its folder's README."""
    table = README.split("\n## Recipes\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \|.*\[recipes/(\w+)\]\(recipes/(\w+)/README\.md\) \|$", table, flags=re.M)
    declared = {yaml.safe_load((REPO / "recipes" / folder / "recipe.yaml").read_text())["name"]: folder
                for folder in RECIPE_DIRS}
    assert sorted(name for name, _, _ in rows) == sorted(declared), (rows, declared)
    assert all(declared[name] == shown == linked for name, shown, linked in rows), rows


@pytest.mark.parametrize("recipe", RECIPE_DIRS)
def test_a_recipe_readme_states_its_current_version(recipe: str) -> None:
    """The exported README is the recipe's: its title names recipe.yaml's version, and so does every other
    mention (dynamic-degree said 1.0.0 at 1.2.0; camerabench's title said 1.0.0 at 1.1.0)."""
    folder = REPO / "recipes" / recipe
    declared = yaml.safe_load((folder / "recipe.yaml").read_text())
    name, version = declared["name"], declared["version"]
    text = (folder / "README.md").read_text()
    title = text.splitlines()[0]
    assert re.search(rf"`{re.escape(name)}` {re.escape(version)}\b", title), (recipe, title, version)
    stated = re.findall(r"[Rr]ecipe version \**([0-9][0-9.]*[0-9])", text)
    stated += re.findall(rf"`{re.escape(name)}` v?([0-9]+\.[0-9]+\.[0-9]+)", text)
    assert all(v == version for v in stated), (recipe, stated, version)


def test_the_recipe_readmes_give_each_recipe_its_own_requests_and_rollouts_folders() -> None:
    """remembench's and paibench-c's READMEs both said `--out my-requests` and `-g dir=my-rollouts`: a user who
    followed both had the second requests refused (the folder held the first recipe's)."""
    folders: dict[str, list[str]] = {}
    for recipe in RECIPE_DIRS:
        text = (REPO / "recipes" / recipe / "README.md").read_text()
        for folder in re.findall(r"pinbench requests \S+ .*?--out (\S+)", text) + re.findall(r"-g dir=(\S+)", text):
            folders.setdefault(folder, []).append(recipe)
    assert folders and all(len(set(recipes)) == 1 for recipes in folders.values()), folders


def test_the_stand_in_base_is_made_by_the_script_the_docs_run() -> None:
    """The measured docker-smoke ran on a stand-in the docs described but gave no commands for (#24 item 6)."""
    script = REPO / "tools" / "standin_base.sh"
    assert os.access(script, os.X_OK)
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    for needed in ("debootstrap --variant=minbase", "bookworm", "python3.11,python3.11-venv", "python-is-python3",
                   "/etc/ssl/certs/ca-certificates.crt", "docker import"):
        assert needed in text, needed
    tag = re.search(r'TAG="\$\{1:-([^}]+)\}"', text).group(1)
    smoke = (REPO / "docs" / "containers.md").read_text().split("## make docker-smoke", 1)[1].split("\n## ", 1)[0]
    assert "tools/standin_base.sh" in smoke
    assert f"SMOKE_BASES=python-3.11-slim={tag}" in smoke
