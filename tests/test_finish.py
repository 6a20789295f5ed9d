"""finish_run: a rerun that changed nothing keeps the scorecard and report and computes nothing again.

What a scorecard is computed from (``computed_from``): the records' bytes, the configuration, the metrics and the
declaration, the reference that applies, the code. Each of them changed once here recomputes; nothing changed
recomputes nothing: no derived record, no figure, no report, no new scorecard.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from toy_recipe import toy_recipe

from pinbench.core.derived import derive
from pinbench.core.recipe import Recipe
from pinbench.core.rundir import claim_run_dir
from pinbench.core.runner import SampleRecord
from pinbench.core.scorecard import MetricSpec
from pinbench.results.finish import finish_run

IDS = ["s0", "s1", "s2", "s3"]


def _records(bump: float = 0.0) -> list[SampleRecord]:
    return [SampleRecord(sid, "ok", {"f1": 0.5 + 0.1 * i + (bump if i == 2 else 0.0), "err": 0.25 * (i + 1)}, None,
                         "0" * 64, 0.1) for i, sid in enumerate(IDS)]


class Counted:
    """Test double: a lazily computed input of finish_run that counts its calls."""

    def __init__(self, value) -> None:
        self.value, self.calls = value, 0

    def __call__(self):
        self.calls += 1
        return self.value(self.records) if callable(self.value) else self.value


def _finish(recipe: Recipe, out: Path, records: list[SampleRecord], derived: Counted, figures: Counted):
    cfg = recipe.config("Toy-Nano", out_dir=out, limit=4, env={})
    derived.records = records
    with claim_run_dir(cfg, env={}):
        return finish_run(recipe, cfg, metrics=[MetricSpec("f1"), MetricSpec("err")], records=records,
                          n_expected=len(IDS), pins={}, timings={"score": 1.0}, derived=derived,
                          extra_figures=figures)


@pytest.fixture
def toy(tmp_path: Path) -> Recipe:
    return toy_recipe(tmp_path / "recipes")


def _state(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in ("scorecard.json", "report/index.html", "samples.jsonl",
                                                         "derived.jsonl")}


def test_a_rerun_that_changed_nothing_recomputes_nothing(toy: Recipe, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    derived = Counted(lambda records: [derive("suite", records, lambda m: {"n": len(m)})])
    figures = Counted([])
    first = _finish(toy, out, _records(), derived, figures)
    before = _state(out)
    assert (derived.calls, figures.calls) == (1, 1)
    card = json.loads(before["scorecard.json"])
    assert len(card["computed_from"]) == 64 and card["derived"]["n_records"] == 1
    capsys.readouterr()

    again = _finish(toy, out, _records(), derived, figures)
    assert (derived.calls, figures.calls) == (1, 1)  # neither computed again
    assert _state(out) == before
    assert again.exit_code == first.exit_code and again.scorecard_path == first.scorecard_path
    assert "toy-bench: nothing changed since the scorecard of" in capsys.readouterr().out

    (out / "samples.jsonl").write_text("edited\n")  # a hand edit of the samples file is put back
    _finish(toy, out, _records(), derived, figures)
    assert _state(out) == before and derived.calls == 1


@pytest.mark.parametrize("change", ["a record", "the reference", "the report is gone", "the declaration"])
def test_anything_the_scorecard_is_computed_from_recomputes_it(toy: Recipe, tmp_path: Path, change: str) -> None:
    out = tmp_path / "run"
    derived = Counted(lambda records: [derive("suite", records, lambda m: {"n": len(m)})])
    figures = Counted([])
    _finish(toy, out, _records(), derived, figures)
    before = json.loads((out / "scorecard.json").read_text())
    records = _records()
    if change == "a record":
        records = _records(bump=0.05)
    elif change == "the reference":
        reference = toy.reference_file("Toy-Nano", "smoke")
        reference.parent.mkdir(parents=True, exist_ok=True)
        from pinbench.core.proposal import record_reference
        from pinbench.core.scorecard import load_scorecard

        record_reference(load_scorecard(out / "scorecard.json"), reference, recipe=toy, tier="same_hw")
    elif change == "the report is gone":
        (out / "report" / "index.html").unlink()
    else:
        declaration = toy.dir / "recipe.yaml"
        declaration.write_text(declaration.read_text().replace("a toy recipe for library tests", "a toy recipe"))
    _finish(toy, out, records, derived, figures)
    after = json.loads((out / "scorecard.json").read_text())
    assert (derived.calls, figures.calls) == (2, 2)
    assert after["computed_from"] != before["computed_from"] or change == "the report is gone"
    assert (out / "report" / "index.html").is_file()
    if change == "a record":
        assert after["metrics"]["f1"]["value"] != before["metrics"]["f1"]["value"]


def test_a_shard_leaves_everything_shared_to_the_merge_and_exits_incomplete_with_a_failure(
        toy: Recipe, tmp_path: Path) -> None:
    from pinbench.core.reference import EXIT_INCOMPLETE
    from pinbench.core.runner import RunSummary, Shard
    from pinbench.results.finish import finish_shard

    out = tmp_path / "run"
    cfg = toy.config("Toy-Nano", out_dir=out, limit=4, shard=Shard(1, 2), env={})
    records = {r.sample_id: r for r in _records()[1::2]}
    done = finish_shard(cfg, RunSummary(n_total=2, n_done=1, n_reused=1, n_failed=0, records=records))
    assert (done.exit_code, done.scorecard_path) == (0, None)
    assert "2 samples: 1 done, 1 reused, 0 failed; the scorecard is written by the merge" in done.message
    records["s3"] = SampleRecord("s3", "failed", None, "DecodeError: truncated", "0" * 64, 0.1)
    failed = finish_shard(cfg, RunSummary(n_total=2, n_done=1, n_reused=0, n_failed=1, records=records))
    assert (failed.exit_code, failed.scorecard_path) == (EXIT_INCOMPLETE, None) and "1 failed (s3)" in failed.message
    assert finish_shard(cfg, None).exit_code == 0            # a shard with no per-sample work of its own
    assert not out.exists() or list(out.iterdir()) == []     # nothing its siblings might write at the same time
