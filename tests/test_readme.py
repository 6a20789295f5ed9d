"""The README stays true: its env-var table covers every recipe's variables, its commands exist."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def test_a_stale_readme_table_is_detected(tmp_path: Path) -> None:
    """pinbench docs --check fails once a README table disagrees with its recipe.yaml (this test can fail)."""
    from pinbench.ops.docs import sync_readmes

    assert sync_readmes(REPO, write=False) == []
    copy = tmp_path / "README.md"
    copy.write_text(README.replace("`PINBENCH_RAFT_WEIGHTS`", "`PINBENCH_RAFT_WEIGHT`"))
    (tmp_path / "recipes").mkdir()
    assert sync_readmes(tmp_path, write=False) == [copy]


def test_docs_rewrites_a_readme_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that dies half way (disk full) leaves the README as it was, and no temporary file."""
    from pinbench.ops.docs import sync_readmes

    stale = README.replace("`PINBENCH_RAFT_WEIGHTS`", "`PINBENCH_RAFT_WEIGHT`")
    copy = tmp_path / "README.md"
    copy.write_text(stale)
    (tmp_path / "recipes").mkdir()
    real = Path.write_text

    def disk_full(self: Path, data: str, *args, **kwargs) -> int:  # test double: the write dies half way
        real(self, data[: len(data) // 2], *args, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", disk_full)
    with pytest.raises(OSError, match="No space left"):
        sync_readmes(tmp_path, write=True)
    monkeypatch.undo()
    assert copy.read_text() == stale and sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "recipes"]
    assert sync_readmes(tmp_path, write=True) == [copy] and sync_readmes(tmp_path, write=False) == []


def test_a_variable_several_recipes_read_differently_shows_each_meaning() -> None:
    """CUDA_VISIBLE_DEVICES means one thing to dynamic-degree and another to mind (which refuses most masks)."""
    row = next(line for line in README.splitlines() if line.startswith("| `CUDA_VISIBLE_DEVICES` |"))
    assert "`dynamic-degree`: GPUs RAFT may use" in row and "`mind`: unset, or starting 0,1" in row
    assert "`remembench`: the GPU for CLIP, LPIPS and Pi3X" in row
    assert "| `HF_TOKEN` | fetch stages |" in README  # a core variable keeps its one meaning


def test_setup_commands_stand_at_the_top() -> None:
    """The Quick start opens the README: set-up and PATH first (tests/test_first_ten_minutes.py runs it)."""
    first_block = README.split("```bash", 1)[1].split("```", 1)[0]
    assert "make setup" in first_block and ".venv/bin" in first_block
    third_block = README.split("```bash", 3)[3].split("```", 1)[0]
    assert "make test" in third_block and "make demo" in third_block


@pytest.mark.parametrize("target", ["help", "setup", "test", "lint", "demo", "export", "build-%", "recipe-%",
                                    "diff-%", "docker-smoke"])
def test_make_targets_exist(target: str) -> None:
    makefile = (REPO / "Makefile").read_text()
    assert re.search(rf"^{re.escape(target)}:", makefile, flags=re.M), target


def test_make_help_is_the_default() -> None:
    out = subprocess.run(["make", "-s", "-C", str(REPO)], capture_output=True, text=True, check=True).stdout
    assert "make recipe-paibench-c CHECKPOINT=Cosmos3-Nano" in out


RECIPE_DIRS = sorted(p.name for p in (REPO / "recipes").iterdir() if (p / "recipe.yaml").is_file())


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


def test_the_stand_in_base_is_made_by_the_script_the_readme_runs() -> None:
    """The measured docker-smoke ran on a stand-in the README described but gave no commands for (#24 item 6)."""
    script = REPO / "tools" / "standin_base.sh"
    assert os.access(script, os.X_OK)
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    for needed in ("debootstrap --variant=minbase", "bookworm", "python3.11,python3.11-venv", "python-is-python3",
                   "/etc/ssl/certs/ca-certificates.crt", "docker import"):
        assert needed in text, needed
    tag = re.search(r'TAG="\$\{1:-([^}]+)\}"', text).group(1)
    containers = README.split("## Containers", 1)[1].split("\n## ", 1)[0]
    assert "tools/standin_base.sh" in containers
    assert f"SMOKE_BASES=python-3.11-slim={tag}" in containers


def test_the_readme_names_each_recipe_image_at_its_version() -> None:
    """The measured table named camerabench and mind 1.0.0 when they were 1.1.0 (#24 item 7)."""
    versions = {yaml.safe_load((REPO / "recipes" / d / "recipe.yaml").read_text())["name"]:
                yaml.safe_load((REPO / "recipes" / d / "recipe.yaml").read_text())["version"] for d in RECIPE_DIRS}
    named = re.findall(r"pinbench/([a-z0-9-]+?)(?:-generate)?:(\d+\.\d+\.\d+)", README)
    assert {name for name, _ in named} >= set(versions)
    assert [(name, v) for name, v in named if versions.get(name) != v] == []
