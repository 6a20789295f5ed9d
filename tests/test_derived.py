"""Derived records: computed from the samples at finish time, counted apart, checked against the samples file.

The run directory is a real one: the toy recipe (a real recipe.yaml, with a derived metric added) through
``Run.finish``. ``get_recipe`` inside pinbench.core.check is replaced by a test double that returns the toy.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pytest
from loose_task import LooseTask
from stored import store_records
from toy_recipe import DECLARATION, toy_recipe

from pinbench.core import check as check_module
from pinbench.core.check import check_run
from pinbench.core.config import RunConfig
from pinbench.core.derived import DerivedFailure, derive, derived_problems, members_hash, read_derived, write_derived
from pinbench.core.recipe import Recipe
from pinbench.core.run import Run
from pinbench.core.rundir import claim_run_dir
from pinbench.core.runner import SampleRecord, input_hash, run_samples
from pinbench.core.scorecard import DerivedCounts, MetricSpec, SampleCounts, build_scorecard
from pinbench.ops.launch import write_run_report
from pinbench.results.compare import compare_runs, load_run

IDS = ["s0", "s1", "s2", "s3"]
METRICS = {**DECLARATION["metrics"],
           "spread": {"direction": "lower", "aggregation": "none", "kind": "derived",
                      "tolerance": {"same_hw": {"abs": 0.01}, "cross_hw": {"abs": 0.05}}}}
SPECS = [MetricSpec("f1"), MetricSpec("spread", key="spread", sample_ids=["spread"], derived=True)]


def _samples(failed: tuple[str, ...] = ()) -> list[SampleRecord]:
    return [SampleRecord(sid, "failed", None, "ValueError: bad frame", "0" * 64, 0.1) if sid in failed else
            SampleRecord(sid, "ok", {"f1": 0.5 + 0.1 * i}, None, "0" * 64, 0.1) for i, sid in enumerate(IDS)]


def _spread(members: list[SampleRecord]) -> dict[str, Any]:
    values = [m.result["f1"] for m in members if m.ok]
    if not values:
        raise DerivedFailure("no member scored")
    return {"spread": max(values) - min(values)}


def _finish(recipe: Recipe, cfg: RunConfig, samples: list[SampleRecord]) -> Any:
    derived = [derive("spread", samples, _spread)]
    return Run(recipe, cfg, report=write_run_report).finish(SPECS, samples, pins={}, derived=derived)


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    recipe = toy_recipe(tmp_path / "recipes", metrics=METRICS)
    monkeypatch.setattr(check_module, "get_recipe", lambda name: recipe)  # test double: the toy is not installed
    cfg = recipe.config("Toy-Nano", out_dir=tmp_path / "run", limit=4, env={})
    with claim_run_dir(cfg, env={}):
        store_records(cfg.out_dir, _samples())
        outcome = _finish(recipe, cfg, _samples())
    assert outcome.exit_code == 0, outcome.message
    return cfg.out_dir


def _edit_jsonl(path: Path, edit) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        edit(row)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


# ------------------------------------------------------------------------------------------- derive


def test_a_derived_record_names_its_members_and_their_state() -> None:
    record = derive("spread", _samples(failed=("s1",)), _spread)
    assert record.ok and record.members == tuple(IDS) and record.n_members_ok == 3
    assert record.result == {"spread": pytest.approx(0.3)}
    assert derive("spread", _samples(), _spread).members_hash != record.members_hash  # a member's state is hashed


def test_the_members_hash_is_the_input_hash_of_the_members_list() -> None:
    """members_hash writes each member's part on its own (a sample two derived records name is written once); the
    hash must stay input_hash of the whole list, as derived.jsonl files written before hold it."""
    members = [SampleRecord("s0", "ok", {"z": 1.0, "a": {"y": [1, 2.5e-07], "b": None}, "t": "é\u2028\"]"}, None,
                            "0" * 64, 0.1),
               SampleRecord("s1", "failed", None, "ValueError: bad, [frame]", "1" * 64, 0.1),
               SampleRecord("s2", "ok", {"path": Path("/data/v.mp4"), "n": 10 ** 20}, None, "2" * 64, 0.1)]
    for chosen in ([], members[:1], members):
        whole = {"members": [[m.sample_id, m.status, m.input_hash, m.result, m.error] for m in chosen]}
        text = json.dumps(whole, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
        assert members_hash(chosen) == input_hash(whole) == hashlib.sha256(text.encode()).hexdigest()


def test_a_long_members_list_is_hashed_whole_a_few_hundred_parts_at_a_time() -> None:
    """#32: a composite names every sample (11,222 at CameraBench); its hash is still input_hash of the whole list
    across the pieces it is hashed in, and no piece holds thousands of parts (4,096 at a time, joined and then
    copied after the separator, raised a CameraBench run's memory by 5 MB while its composite was hashed)."""
    import tracemalloc

    members = [SampleRecord(f"s{i:05d}", "ok", {"scores": [i / 7] * 40}, None, f"{i % 10}" * 64, 0.1)
               for i in range(4 * 256 + 1)]
    whole = {"members": [[m.sample_id, m.status, m.input_hash, m.result, m.error] for m in members]}
    assert members_hash(members) == input_hash(whole)   # the records' own JSON is encoded (and kept) here
    tracemalloc.start()
    try:
        members_hash(members)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    every_part = sum(len(json.dumps(entry, separators=(",", ":"))) for entry in whole["members"])
    assert peak < every_part   # a few hundred parts at a time (them and their join), never all of them


def test_check_names_every_derived_record_of_a_changed_member() -> None:
    """A sample two derived records name is written once for both; a change to it is seen by both."""
    samples = _samples()
    both = [derive("spread", samples, _spread), derive("pair", samples[:2], _spread)]
    assert derived_problems(both, samples) == []
    changed = [SampleRecord("s0", "ok", {"f1": 0.9}, None, "0" * 64, 0.1), *samples[1:]]
    assert [p.split("'")[1] for p in derived_problems(both, changed)] == ["spread", "pair"]


def test_a_value_that_does_not_exist_fails_the_record_with_its_reason() -> None:
    failed = derive("spread", _samples(failed=tuple(IDS)), _spread)
    assert (failed.status, failed.result, failed.error) == ("failed", None, "no member scored")
    broken = derive("ratio", _samples(), lambda members: {"ratio": 1 / 0})
    assert broken.status == "failed" and broken.error == "ZeroDivisionError: division by zero"
    assert derive("nan", _samples(), lambda members: {"x": math.nan}).result == {"x": None}


def test_a_hostile_derived_id_is_refused() -> None:
    for bad in ("../suite", "a/b", ".hidden", ""):
        with pytest.raises(ValueError, match="sample id"):
            derive(bad, _samples(), _spread)


# ---------------------------------------------------------------------------------------- scorecard


def test_derived_records_never_count_as_samples() -> None:
    samples = _samples(failed=("s3",))
    card = build_scorecard(recipe="toy-bench", recipe_version="1.0.0", checkpoint="Toy-Nano", mode="smoke",
                           metrics=[MetricSpec("f1", "mean", direction="higher"),
                                    MetricSpec("spread", "none", key="spread", sample_ids=["spread"],
                                               direction="lower", derived=True)],
                           records=samples, n_expected=4, provenance={}, config={}, timings={},
                           derived=[derive("spread", samples, _spread)])
    assert card.samples == SampleCounts(n_expected=4, n_ok=3, n_failed=1, n_missing=0, path="samples.jsonl")
    assert card.derived == DerivedCounts(n_records=1, n_ok=1, n_failed=0, path="derived.jsonl")
    f1, spread = card.metrics["f1"], card.metrics["spread"]
    assert (f1.n_expected, f1.n_scored, f1.n_failed) == (4, 3, 1)  # the derived record is not a sample
    assert [f.sample_id for f in f1.failed] == ["s3"]
    assert (spread.records, spread.n_expected, spread.n_scored, spread.value) == (
        "derived", 1, 1, pytest.approx(0.2))
    assert f1.records is None and "records" not in f1.to_json()


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"derived": [derive("s0", _samples(), _spread)]}, "derived record ids repeat or name a sample: s0"),
    ({"derived": [derive("x", _samples(), _spread)] * 2}, "derived record ids repeat"),
    ({"records": [*_samples(), derive("x", _samples(), _spread)]}, "derived records go in derived="),
])
def test_derived_records_are_kept_apart_from_the_samples(kwargs: dict[str, Any], match: str) -> None:
    base: dict[str, Any] = dict(recipe="toy-bench", recipe_version="1.0.0", checkpoint="Toy-Nano", mode="smoke",
                                metrics=[MetricSpec("f1", "mean", direction="higher")], records=_samples(),
                                n_expected=4, provenance={}, config={}, timings={})
    with pytest.raises(ValueError, match=match):
        build_scorecard(**{**base, **kwargs})


def test_a_derived_metric_names_its_records() -> None:
    with pytest.raises(ValueError, match="names them in sample_ids"):
        MetricSpec("spread", "none", direction="lower", derived=True)


# ------------------------------------------------------------------------------------ run directory


def test_finish_writes_the_derived_records_and_check_agrees(run_dir: Path) -> None:
    card = json.loads((run_dir / "scorecard.json").read_text())
    assert card["schema_version"] == "2.3" and card["samples"]["n_expected"] == 4
    [record] = read_derived(run_dir / "derived.jsonl")
    assert record.derived_id == "spread" and record.members == tuple(IDS)
    assert len((run_dir / "samples.jsonl").read_text().splitlines()) == 4
    checked = check_run(run_dir)
    assert checked.problems == [], checked.problems


def test_check_names_derived_records_computed_from_other_sample_records(run_dir: Path) -> None:
    def edit(row: dict) -> None:
        if row["sample_id"] == "s2":
            row["result"]["f1"] = 0.9
    _edit_jsonl(run_dir / "samples.jsonl", edit)
    problems = check_run(run_dir).problems
    assert any("derived record 'spread' was computed from other records of its 4 samples" in p for p in problems)


def test_check_recounts_a_derived_metric_from_its_records(run_dir: Path) -> None:
    _edit_jsonl(run_dir / "derived.jsonl", lambda row: row["result"].update(spread=0.25))
    problems = check_run(run_dir).problems
    assert any("metric spread: value" in p and "recomputed from the records" in p for p in problems), problems


def test_check_names_the_derived_file_for_a_derived_metric_it_recounts(run_dir: Path) -> None:
    """A derived metric is recounted from derived.jsonl: a problem with it names that file, not samples.jsonl."""
    _edit_jsonl(run_dir / "derived.jsonl", lambda row: row["result"].update(spread=0.25))
    [problem] = [p for p in check_run(run_dir).problems if "metric spread: value" in p]
    assert problem.startswith(f"{run_dir / 'derived.jsonl'}: "), problem


def _point_derived_at(run_dir: Path, name: str) -> None:
    card = json.loads((run_dir / "scorecard.json").read_text())
    card["derived"]["path"] = name
    (run_dir / "scorecard.json").write_text(json.dumps(card))


def _nan_value(run_dir: Path) -> None:
    path = run_dir / "derived.jsonl"
    text = path.read_text()
    assert text.count('"spread": ') == 1
    path.write_text(text.replace('"spread": ', '"spread": NaN, "was": '))


def _directory_posing_as_the_file(run_dir: Path) -> None:
    (run_dir / "derived.jsonl").unlink()
    (run_dir / "derived.jsonl").mkdir()


@pytest.mark.parametrize(("tamper", "words"), [
    (lambda d: (d / "derived.jsonl").unlink(), "derived.jsonl: missing"),
    (_directory_posing_as_the_file, "derived.jsonl: is a directory, not a file"),
    (lambda d: (d / "derived.jsonl").write_text("{}\n"), "bad derived record"),
    (_nan_value, "non-finite number NaN"),
    (lambda d: _edit_jsonl(d / "derived.jsonl", lambda row: row["members"].append("s9")), "n_members"),
    (lambda d: _point_derived_at(d, "../derived.jsonl"), "is not a file inside the run directory"),
    (lambda d: _point_derived_at(d, "samples.jsonl"), "bad derived record"),
])
def test_check_names_a_missing_or_corrupt_derived_file(run_dir: Path, tamper, words: str) -> None:
    tamper(run_dir)
    problems = check_run(run_dir).problems
    assert any(words in p for p in problems), problems


def test_check_names_a_derived_block_that_miscounts(run_dir: Path) -> None:
    card = json.loads((run_dir / "scorecard.json").read_text())
    card["derived"].update(n_records=2, n_failed=1)
    (run_dir / "scorecard.json").write_text(json.dumps(card))
    problems = check_run(run_dir).problems
    assert any("derived block says n_records 2 (the file gives 1)" in p for p in problems), problems


def test_compare_reads_the_derived_records(run_dir: Path) -> None:
    run = load_run(run_dir)
    result = compare_runs(run, run)
    by_name = {m.name: m for m in result.metrics}
    assert by_name["f1"].n_cohort == 4  # the derived record is not one of f1's samples
    assert by_name["spread"].n_matched == 1


def test_the_members_hash_of_computed_records_slices_their_bytes_and_is_still_the_input_hash(tmp_path: Path) -> None:
    """Records run_samples computed give their result's canonical JSON from their bytes (no second encoding); the
    hash is the same input_hash of the members list, a result with keys named like the record's own included."""
    results = {"s0": {"z": 1.0, "a": {"y": [1, 2.5e-07], "b": None}, "t": "é\\u2028\"]"},
               "s1": {"a": 1, "error": None, "traceback": 1, "x": {"status": "ok", "result": 2}},
               "s2": {}}
    tasks = [LooseTask(sid) for sid in (*results, "s3")]

    def fn(task: dict) -> dict:
        if task["sample_id"] == "s3":
            raise ValueError("no frames")
        return results[task["sample_id"]]

    members = list(run_samples(tasks, fn, tmp_path, progress=False).records.values())
    assert [m.canonical_result() is not None for m in members] == [True, True, True, False]
    whole = {"members": [[m.sample_id, m.status, m.input_hash, m.result, m.error] for m in members]}
    assert members_hash(members) == input_hash(whole)


def test_derived_records_are_written_one_json_line_each_and_read_back(tmp_path: Path) -> None:
    """``derived.jsonl``, written a record at a time: one line of JSON per record, non-ASCII text as it is."""
    members = [SampleRecord(f"s{i}", "ok", {"v": i}, None, "0" * 64, 0.0) for i in range(3)]
    records = [derive("mean", members, lambda ms: {"mean": sum(m.result["v"] for m in ms) / len(ms), "name": "é"}),
               derive("fails", members, lambda ms: 1 / 0)]
    path = write_derived(records, tmp_path / "derived.jsonl")
    assert path.read_bytes() == "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n"
                                        for r in records).encode("utf-8")
    assert read_derived(path) == records
    assert list(tmp_path.iterdir()) == [path]   # no temporary file left beside it
