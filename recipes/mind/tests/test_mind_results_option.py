"""``-o results=`` is checked before anything reads it: a FIFO (which blocked the run forever after the plan), a
directory or a missing file is refused in one line naming the option and the path."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from pinbench.core.config import RecipeError
from pinbench.core.recipe import get_recipe
from pinbench.ops.launch import run_recipe
from pinbench_recipes.mind.tests.conftest import Layout

RECIPE = get_recipe("mind")


@pytest.fixture
def alarm():
    """Fail instead of hanging: a FIFO nobody writes blocks its reader forever."""
    def on_alarm(signum, frame):  # noqa: ANN001
        raise TimeoutError("the run blocked on -o results")
    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(30)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _run(tmp_path: Path, layout: Layout, results: Path) -> None:
    run_recipe(RECIPE.config("my-model", out_dir=tmp_path / "run", offline=True, env={},
                      options={"gt": str(layout.gt_root), "results": str(results), "native": "0"}))


def test_a_fifo_is_refused_before_it_is_read(tmp_path: Path, layout: Layout, alarm) -> None:
    fifo = tmp_path / "Result.json"
    os.mkfifo(fifo)
    with pytest.raises(RecipeError) as info:
        _run(tmp_path, layout, fifo)
    assert str(info.value) == (f"-o results={fifo}: is a FIFO, not a regular file (reading it could block "
                               "forever)")
    assert not (tmp_path / "run" / "scorecard.json").exists()


@pytest.mark.parametrize(("make", "reason"), [
    (lambda p: p, "file not found"),
    (lambda p: p.mkdir() or p, "is a directory, expected process.py's Result.json file"),
])
def test_a_missing_file_or_a_directory_is_one_line_naming_the_option(tmp_path: Path, layout: Layout, make,
                                                                      reason: str) -> None:
    path = make(tmp_path / "Result.json")
    with pytest.raises(RecipeError) as info:
        _run(tmp_path, layout, path)
    assert str(info.value) == f"-o results={path}: {reason}"
