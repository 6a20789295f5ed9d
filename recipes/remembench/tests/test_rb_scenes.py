"""``pinbench check`` of RememBench's scenes.jsonl (the recipe's ``check:`` entry): a row the records do not give is
named by file, row and what is wrong."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pinbench.core.check import check_run


def _edit(run: Path, change) -> None:
    path = run / "scenes.jsonl"
    rows = path.read_text().splitlines()
    path.write_text("".join(line + "\n" for line in change(rows)))


def _set(n: int, key: str, value):
    def change(rows: list[str]) -> list[str]:
        row = json.loads(rows[n])
        row[key] = value
        return [*rows[:n], json.dumps(row), *rows[n + 1:]]
    return change


@pytest.fixture
def run(fixture_run, tmp_path: Path) -> Path:
    """A copy of the fixture run, free to edit."""
    copy = tmp_path / "run"
    shutil.copytree(fixture_run[0], copy, symlinks=True)
    return copy


@pytest.mark.parametrize(("change", "problem"), [
    (_set(1, "clip", 0.5), "row 2 (sample 't2v-001'): clip 0.5 here, "),
    (_set(1, "status", "failed"), "row 2 (sample 't2v-001'): status 'failed' (error None) here, 'ok'"),
    (_set(0, "sample_id", "t2v-999"), "row 1 (sample 't2v-999'): no record of it in samples.jsonl, yet not a missing"),
    (lambda rows: rows[:-1], "no row of sample "),
    (lambda rows: [*rows, rows[0]], "row 8 (sample 't2v-000'): a second row of the sample"),
    (lambda rows: [*rows[:2], "[1, 2]", *rows[3:]], "scenes.jsonl:3: bad scene row: not a JSON object but list"),
    (lambda rows: [rows[0].replace('"drift"', '"drift_"'), *rows[1:]], "scenes.jsonl:1: bad scene row: lacks 'drift'"),
])
def test_check_names_a_scene_row_the_records_do_not_give(run: Path, change, problem: str) -> None:
    assert check_run(run).problems == []
    _edit(run, change)
    problems = check_run(run).problems
    assert len(problems) in (1, 2) and problem in problems[0] and str(run / "scenes.jsonl") in problems[0], problems


def test_check_names_an_absent_scenes_file(run: Path) -> None:
    (run / "scenes.jsonl").unlink()
    assert check_run(run).problems == [f"{run / 'scenes.jsonl'}: file not found"]
