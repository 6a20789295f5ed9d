"""What ``pinbench view`` reads of a PAI-Bench-C run: a stamp or input rows file cut or edited is no traceback."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from pinbench.results.view import RunInputs
from pinbench_recipes.paibench_c import view

DIGEST = "a" * 64


@pytest.mark.parametrize("stamp", ["[1, 2]", '{"inputs": {"vid', "[" * 100_000 + "]" * 100_000,
                                   '{"inputs": {"videos": {"task_0000": 5}}}', '{"inputs": 3}'])
def test_a_stamp_cut_or_edited_is_read_as_no_digests(stamp: str, tmp_path: Path) -> None:
    """``eval_stamp.json`` as a list, cut short, nested too deep, holding no digest strings: the page shows the video
    without the digest check (an AttributeError or RecursionError ended ``pinbench view``)."""
    (tmp_path / "eval_stamp.json").write_text(stamp)
    assert view._scored_digests(tmp_path / "eval_stamp.json") == {}
    (tmp_path / "eval_stamp.json").write_text(json.dumps({"inputs": {"videos": {"task_0000": DIGEST}}}))
    assert view._scored_digests.__wrapped__(tmp_path / "eval_stamp.json") == {"task_0000": DIGEST}


def test_an_input_row_cut_or_of_another_form_is_no_traceback(tmp_path: Path, monkeypatch) -> None:
    """A torn line of ``inputs/edge.jsonl`` costs that line only, and a row whose modality is no object shows no
    control (both were tracebacks: JSONDecodeError, AttributeError)."""
    (tmp_path / "inputs").mkdir()
    rows = [{"name": "task_0000", "vision_path": "/nowhere/v.mp4", "edge": "canny", "prompt": "a cat"}]
    (tmp_path / "inputs" / "edge.jsonl").write_text(json.dumps(rows[0]) + '\n{"name": "task_00\n')
    card = SimpleNamespace(config={"options": {"modalities": ["edge"]}}, mode="run", provenance={})
    media = view.sample_media(RunInputs(tmp_path, card), "task_0000", None)   # the fields the view reads
    assert [t.label for t in media.texts] == ["edge control", "prompt"]
    assert [v.label for v in media.rollouts] == ["edge"]
