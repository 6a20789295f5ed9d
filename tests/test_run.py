"""The Run (pinbench.core.run): its steps own resume, shards, the --skip-* flags and the sample cache; its finish
recomputes nothing a rerun did not change.

What a scorecard is computed from (``computed_from``): the records' bytes, the configuration, the metrics and the
declaration, the reference that applies, the code. Each of them changed once here recomputes; nothing changed
recomputes nothing: no derived record, no figure, no report, no new scorecard.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from loose_task import LooseTask
from toy_recipe import toy_recipe

from pinbench.core import run as run_module
from pinbench.core.derived import derive
from pinbench.core.recipe import Recipe
from pinbench.core.run import Run
from pinbench.core.rundir import claim_run_dir
from pinbench.core.runner import SampleRecord
from pinbench.core.scorecard import MetricSpec
from pinbench.ops.launch import write_run_report

IDS = ["s0", "s1", "s2", "s3"]


def _records(bump: float = 0.0) -> list[SampleRecord]:
    return [SampleRecord(sid, "ok", {"f1": 0.5 + 0.1 * i + (bump if i == 2 else 0.0), "err": 0.25 * (i + 1)}, None,
                         "0" * 64, 0.1) for i, sid in enumerate(IDS)]


class Counted:
    """Test double: a lazily computed input of Run.finish that counts its calls."""

    def __init__(self, value) -> None:
        self.value, self.calls = value, 0

    def __call__(self):
        self.calls += 1
        return self.value(self.records) if callable(self.value) else self.value


def _finish(recipe: Recipe, out: Path, records: list[SampleRecord], derived: Counted, figures: Counted,
            limit: int | None = 4):
    cfg = recipe.config("Toy-Nano", out_dir=out, limit=limit, env={})
    derived.records = records
    with claim_run_dir(cfg, env={}):
        return Run(recipe, cfg, report=write_run_report).finish([MetricSpec("f1"), MetricSpec("err")], records,
                                                                pins={}, derived=derived, figures=figures)


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


def test_a_rerun_whose_numbers_differ_keeps_the_complete_scorecard_it_replaces_and_says_so(
        toy: Recipe, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A finish that would replace a complete scorecard with other numbers (code, options or inputs changed) moves
    it to ``scorecard.aside-<time>/`` and names it and the metrics that differ; the same numbers, or a partial
    earlier scorecard, are replaced as before (was: only another generator's rollouts were kept)."""
    out, derived, figures = tmp_path / "run", Counted([]), Counted([])
    _finish(toy, out, _records(), derived, figures)
    first = (out / "scorecard.json").read_bytes()
    assert json.loads(first)["status"] == "complete"
    capsys.readouterr()
    _finish(toy, out, _records(bump=0.05), derived, figures)
    [aside] = out.glob("scorecard.aside-*")
    assert (aside / "scorecard.json").read_bytes() == first
    said = capsys.readouterr().out
    assert (f"toy-bench: the earlier scorecard (of {json.loads(first)['provenance']['timestamp']}, other numbers: "
            f"f1) moved to {aside}; to see what changed: pinbench compare {aside} {out}") in said
    # said above the verdict: a run's last line before where its files are is its result line (b5c1b52)
    assert said.splitlines()[-1].startswith("result: "), said

    declaration = toy.dir / "recipe.yaml"   # other code, the same numbers: replaced, nothing kept aside
    declaration.write_text(declaration.read_text().replace("a toy recipe for library tests", "a toy recipe"))
    _finish(toy, out, _records(bump=0.05), derived, figures)
    assert len(list(out.glob("scorecard.aside-*"))) == 1 and "moved to" not in capsys.readouterr().out

    failed = [*_records()[:3], SampleRecord("s3", "failed", None, "ValueError: broken", "0" * 64, 0.1)]
    _finish(toy, out, failed, derived, figures)   # a partial scorecard (its earlier one kept: other numbers) ...
    assert json.loads((out / "scorecard.json").read_text())["status"] == "partial"
    assert len(list(out.glob("scorecard.aside-*"))) == 2
    capsys.readouterr()
    _finish(toy, out, _records(), derived, figures)   # ... a rerun completes in place
    assert len(list(out.glob("scorecard.aside-*"))) == 2 and "moved to" not in capsys.readouterr().out


def test_a_rerun_over_fewer_samples_with_the_same_values_keeps_the_complete_scorecard(
        toy: Recipe, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Values every sample shares (an oracle's SSIM 1.0) are the same mean over 2 samples as over 4: a rerun with a
    smaller --limit replaced the complete 4-sample scorecard without a word; its counts differ, so it is kept."""
    out, derived, figures = tmp_path / "run", Counted([]), Counted([])
    same = [SampleRecord(sid, "ok", {"f1": 1.0, "err": 0.0}, None, "0" * 64, 0.1) for sid in IDS]
    _finish(toy, out, same, derived, figures)
    first = (out / "scorecard.json").read_bytes()
    capsys.readouterr()
    _finish(toy, out, same[:2], derived, figures, limit=2)
    [aside] = out.glob("scorecard.aside-*")
    assert (aside / "scorecard.json").read_bytes() == first
    said = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(said) if "other numbers: err, f1) moved to" in line)
    assert said[at + 1] == "toy-bench:   ran differently: --limit: earlier 4, this run 2"   # was: no such line


TASKS = [LooseTask(sid, x=i) for i, sid in enumerate(IDS)]


def _procedure(calls: list[str], fail: str | None = None):
    """Test double for a recipe's ``run(run)``: one per-sample step, then the finish."""
    def score(task: dict) -> dict:
        calls.append(task["sample_id"])
        if task["sample_id"] == fail:
            raise ValueError("truncated video")
        return {"f1": 0.5 + 0.1 * task["x"], "err": 0.25}

    def procedure(run: Run):
        records = run.score(TASKS, score)
        return run.finish([MetricSpec("f1"), MetricSpec("err")], records, pins={})
    return procedure


def _run(recipe: Recipe, out: Path, procedure, **flags):
    cfg = recipe.config("Toy-Nano", out_dir=out, limit=4, env={}, **flags)
    with claim_run_dir(cfg, env={}):
        return Run(recipe, cfg, report=write_run_report).execute(procedure)


def test_a_shard_stores_its_samples_and_stops_before_anything_shared(toy: Recipe, tmp_path: Path, capsys) -> None:
    """Shards of one run share its directory and may run at once: each stores its own samples and stops at the first
    step that needs every task's record (exit 0, or 2 naming a failed sample); the merge writes the scorecard. Its
    last line says the result and the exit code, below the failed samples (it ended on them)."""
    from pinbench.core.config import Shard
    from pinbench.core.reference import EXIT_INCOMPLETE

    out, calls = tmp_path / "run", []
    done = _run(toy, out, _procedure(calls), shard=Shard(1, 2))
    assert (done.exit_code, done.scorecard_path, calls) == (0, None, ["s1", "s3"])
    assert "shard 1/2 of toy-bench: 2 samples: 2 done, 0 reused, 0 failed; the scorecard is written by the merge" \
        in done.message
    assert capsys.readouterr().out.splitlines()[-1] == "result: STOPPED (exit 0): stopped before the diff"
    assert sorted(p.name for p in out.iterdir()) == [".pinbench-locks", "pinbench-run.json", "samples", "shards"]
    failed = _run(toy, out, _procedure(calls, fail="s0"), shard=Shard(0, 2))
    assert (failed.exit_code, failed.scorecard_path) == (EXIT_INCOMPLETE, None) and "1 failed (s0)" in failed.message
    *_, sample, last = capsys.readouterr().out.splitlines()
    assert sample.startswith("  s0: ") and last == "result: INCOMPLETE (exit 2): stopped before the diff"
    merged = _run(toy, out, _procedure(calls), skip_scoring=True)   # the merge computes nothing
    assert calls == ["s1", "s3", "s0", "s2"] and merged.scorecard_path is not None
    card = json.loads(merged.scorecard_path.read_text())
    assert card["status"] == "partial" and card["metrics"]["f1"]["failed"] == [
        {"sample_id": "s0", "error": "ValueError: truncated video"}]


def test_a_sample_of_a_shard_that_never_ran_is_counted_missing_not_failed(toy: Recipe, tmp_path: Path,
                                                                        capsys) -> None:
    """A task no shard stored was never computed: counted in n_missing (never n_failed), as a sample with no record
    is. Its stand-in stays in samples.jsonl (derived records name their members there: 9473a07 left it out and
    CameraBench's split records then named samples with no record), failures.tsv names it missing, the run is
    partial, and ``pinbench check`` recounts the same: nothing wrong but the status."""
    from pinbench.core.check import check_run
    from pinbench.core.config import Shard
    from pinbench.core.reference import EXIT_INCOMPLETE

    out, calls = tmp_path / "run", []
    _run(toy, out, _procedure(calls), shard=Shard(1, 2))    # shard 0 never ran: s0 and s2 are lost
    capsys.readouterr()
    merged = _run(toy, out, _procedure(calls), skip_scoring=True)
    assert merged.exit_code == EXIT_INCOMPLETE
    card = json.loads(merged.scorecard_path.read_text())
    assert card["status"] == "partial"
    assert {k: card["samples"][k] for k in ("n_expected", "n_ok", "n_failed", "n_missing")} == {
        "n_expected": 4, "n_ok": 2, "n_failed": 0, "n_missing": 2}
    for metric in card["metrics"].values():
        assert (metric["n_scored"], metric["n_failed"], metric["n_missing"], metric["failed"]) == (2, 0, 2, [])
    lines = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert [(r["sample_id"], r["status"]) for r in lines] == [("s0", "failed"), ("s1", "ok"), ("s2", "failed"),
                                                              ("s3", "ok")]
    rows = [row.split("\t") for row in (out / "failures.tsv").read_text().splitlines()[1:]]
    assert [row[:2] for row in rows] == [["s0", "-"], ["s2", "-"]]
    assert all(row[2].startswith("missing: no result from any shard") for row in rows)
    assert "failed: 0 samples in 0 metrics, missing: 2 samples never computed" in capsys.readouterr().out
    assert check_run(out).problems == [
        f"{out / 'scorecard.json'}: status partial: f1: 2/4 scored (0 failed, 2 missing); "
        "err: 2/4 scored (0 failed, 2 missing)"]


def test_a_rerun_computes_only_what_is_not_stored(toy: Recipe, tmp_path: Path) -> None:
    out, calls = tmp_path / "run", []
    assert _run(toy, out, _procedure(calls, fail="s2")).exit_code != 0
    assert _run(toy, out, _procedure(calls)).exit_code == 0
    assert calls == [*IDS, "s2"]


def test_store_keeps_a_record_that_says_the_same_and_names_a_failure(toy: Recipe, tmp_path: Path) -> None:
    """Results an external tool computed (PAI-Bench-C's evaluator): stored once; the same results again append
    nothing; a changed one replaces the stored one; an exception is the sample's failure, by name."""
    from pinbench.core.store import SAMPLES_DIR

    cfg = toy.config("Toy-Nano", out_dir=tmp_path / "run", limit=4, env={})
    results = {sid: {"f1": 0.5} for sid in IDS}
    log = tmp_path / "run" / SAMPLES_DIR / "run.jsonl"
    Run(toy, cfg).store(TASKS, results)
    lines = log.read_bytes().count(b"\n")
    assert lines == 4
    Run(toy, cfg).store(TASKS, results)
    assert log.read_bytes().count(b"\n") == 4
    records = Run(toy, cfg).store(TASKS, {**results, "s1": {"f1": 0.7}, "s2": RuntimeError("no metrics.json")})
    assert log.read_bytes().count(b"\n") == 5  # s1's new record replaced its old one (moved aside), s2's failure added
    (moved,) = [json.loads(line) for line in (log.parent / "quarantine" / "run.jsonl").read_text().splitlines()]
    assert moved["line"] == "run.jsonl:2" and '"sample_id":"s1"' in moved["text"] and '"f1":0.5' in moved["text"]
    assert [(r.sample_id, r.status, r.result, r.error) for r in records] == [
        ("s0", "ok", {"f1": 0.5}, None), ("s1", "ok", {"f1": 0.7}, None),
        ("s2", "failed", None, "RuntimeError: no metrics.json"), ("s3", "ok", {"f1": 0.5}, None)]


def test_pending_names_this_shards_tasks_and_every_shards(toy: Recipe, tmp_path: Path) -> None:
    from pinbench.core.config import Shard
    from pinbench.core.runner import input_hash, run_samples

    cfg = toy.config("Toy-Nano", out_dir=tmp_path / "run", limit=4, shard=Shard(0, 2), env={})
    run_samples(TASKS[:1], lambda task: {"f1": 1.0}, cfg.out_dir, implementation=cfg.implementation, progress=False)
    pending = Run(toy, cfg).pending(TASKS)
    assert [t["sample_id"] for t in pending.mine] == ["s2"]                     # s0 is stored; s1, s3: shard 1's
    assert pending.unscored == {t["sample_id"]: input_hash(t) for t in TASKS[1:]}
    skipping = toy.config("Toy-Nano", out_dir=tmp_path / "run", limit=4, skip_scoring=True, env={})
    assert Run(toy, skipping).pending(TASKS).mine == []


def test_fixture_data_is_built_only_for_a_fixture_run(toy: Recipe, tmp_path: Path) -> None:
    built = []
    real = Run(toy, toy.config("Toy-Nano", out_dir=tmp_path / "a", env={}))
    assert real.fixture(built.append) is None and built == []
    fixture = Run(toy, toy.config(fixture=True, out_dir=tmp_path / "b", env={}))
    fixture.fixture(built.append)
    assert built == [tmp_path / "b" / "fixture_data"]


def test_the_finish_drops_the_records_encoded_results_before_the_report(toy: Recipe, tmp_path: Path) -> None:
    """#32: the JSON each record's result was encoded to once (for the store, samples.jsonl and the members hashes)
    is not held while the report is written, its peak (1x CameraBench: 69.4 -> 67.6 MiB); samples.jsonl holds them."""
    records = _records()
    lines = [record.to_bytes() for record in records]   # as run_samples stores them
    held: list[list[bytes | None]] = []

    def report(*args: Any, **kwargs: Any) -> Path:
        held.append([record._json for record in records])
        return write_run_report(*args, **kwargs)

    cfg = toy.config("Toy-Nano", out_dir=tmp_path / "run", limit=4, env={})
    with claim_run_dir(cfg, env={}):
        Run(toy, cfg, report=report).finish([MetricSpec("f1"), MetricSpec("err")], records, pins={},
                                            derived=[], figures=[])
    assert held == [[None] * len(records)]
    assert (tmp_path / "run" / "samples.jsonl").read_bytes().splitlines() == lines


def test_the_finish_gives_back_what_the_derived_records_freed_before_the_scorecard(
        toy: Recipe, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """#32: the C heap is trimmed (``pinbench.core.memory``) once the derived records are computed, before the
    scorecard's intervals allocate theirs (1x CameraBench: 69 -> 68 MB)."""
    events: list[str] = []
    monkeypatch.setattr(run_module, "release_free_memory", lambda: events.append("trim"))
    scorecard = run_module.build_scorecard
    monkeypatch.setattr(run_module, "build_scorecard", lambda **kw: events.append("scorecard") or scorecard(**kw))
    derived = Counted(lambda records: events.append("derived") or [derive("suite", records, lambda m: {"n": 1})])
    _finish(toy, tmp_path / "run", _records(), derived, Counted([]))
    assert events == ["derived", "trim", "scorecard"]


def test_the_earlier_scorecard_goes_aside_under_the_names_a_finish_writes_and_never_onto_an_earlier_aside(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``_keep_aside`` moves scorecard.json, samples.jsonl and derived.jsonl, whatever path the earlier scorecard
    names (an edited one could name any file), and picks ``-2`` when an aside of that second is already there, as
    ``--move-aside`` does."""
    import dataclasses

    from pinbench.core.scorecard import build_scorecard

    card = build_scorecard(recipe="toy", recipe_version="0", checkpoint="c", mode="fixture",
                           metrics=[MetricSpec("x", "mean", direction="higher", primary=True)],
                           records=[SampleRecord("s", "ok", {"x": 1.0}, None, "0" * 64, 0.1)], n_expected=1,
                           provenance={"timestamp": "then"}, config={"options": {}}, timings={})
    earlier = dataclasses.replace(card, samples=dataclasses.replace(card.samples, path="../outside.jsonl"))
    out = tmp_path / "run"
    out.mkdir()
    for name in ("scorecard.json", "samples.jsonl", "derived.jsonl", "../outside.jsonl"):
        (out / name).write_text(name)
    from pinbench.core import rundir

    monkeypatch.setattr(rundir, "aside_path", lambda path: path.with_name("scorecard.aside-T"))
    (out / "scorecard.aside-T").mkdir()
    said = run_module._keep_aside(out, earlier, card, "other rollouts")
    target = out / "scorecard.aside-T-2"
    assert sorted(p.name for p in target.iterdir()) == ["derived.jsonl", "samples.jsonl", "scorecard.json"]
    assert (tmp_path / "outside.jsonl").read_text() == "../outside.jsonl"
    assert not any((out / "scorecard.aside-T").iterdir())
    assert said == [f"the earlier scorecard (of then, other rollouts) moved to {target}; to see what changed: "
                    f"pinbench compare {target} {out}"]


def _fails_naming_the_fetch(recipe_name: str, task: dict) -> dict:
    from pinbench.ops.network import fetch_command

    raise RuntimeError(f"no weights here: run `{fetch_command(recipe_name)}`")


def _naming_the_fetch_on(recipe_name: str, device: str):
    """The scorer of one device worker (spawned: it must pickle), whose download fails."""
    from functools import partial

    return partial(_fails_naming_the_fetch, recipe_name)


def test_device_workers_name_the_fetch_of_the_run(toy: Recipe, tmp_path: Path) -> None:
    """A spawned device worker (--gpus N) starts without the run's ``fetching_as``: a download failing there
    suggested a bare ``pinbench fetch <recipe>``, which fetches what another --limit or -o would read."""
    from functools import partial

    from pinbench.ops.network import fetching_as

    cfg = toy.config("Toy-Nano", out_dir=tmp_path / "a", limit=2, env={})
    with fetching_as(toy, cfg):
        done = Run(toy, cfg).compute([LooseTask(f"s{i}", x=i) for i in range(2)],
                                     partial(_naming_the_fetch_on, toy.name), devices=["cpu", "cpu"])
    assert done.n_failed == 2
    assert {r.error for r in done.records.values()} == {
        f"RuntimeError: no weights here: run `pinbench fetch {toy.name} -c Toy-Nano --limit 2`"}


NOTE = "note: checkpoint 'Toy-Nan' is not one of toy's (Toy-Nano) (did you mean 'Toy-Nano'?)"


@pytest.mark.parametrize("failure, said", [
    (None, True),                                                  # the run goes past its preparation: said once
    (ValueError("videos: directory not found"), True),             # a refusal about something else: said with it
    (FileNotFoundError("/cache/Toy-Nan/weights: not found"), True),   # the name in a path: still something else
    (ValueError("--checkpoint 'Toy-Nan' is not an arm (did you mean 'Toy-Nano'?)"), False),   # the one line
])
def test_a_held_note_is_said_once_after_the_preparation(toy: Recipe, tmp_path: Path, capsys, failure: Exception | None,
                                                        said: bool) -> None:
    """Without the doctor, the CLI's typo note on the checkpoint waits for the recipe's preparation (``Run(note=)``):
    a recipe that refuses the name itself says it once, in its own words (the note and the refusal were two lines)."""
    cfg = toy.config("Toy-Nan", out_dir=tmp_path / "run", env={})

    def procedure(run: Run):
        with run.step("prepare"):
            print("prepared", file=sys.stderr)
        if failure is not None:
            raise failure
        for step in ("score", "score", "aggregate"):
            with run.step(step):
                print(step, file=sys.stderr)

    with claim_run_dir(cfg, env={}):
        run = Run(toy, cfg, report=write_run_report, note=NOTE)
        if failure is None:
            run.execute(procedure)
        else:
            with pytest.raises(type(failure)):
                run.execute(procedure)
    lines = capsys.readouterr().err.splitlines()
    assert lines.count(NOTE) == int(said)
    if failure is None:
        assert lines == ["prepared", NOTE, "score", "score", "aggregate"]
