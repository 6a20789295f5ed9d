"""Scorecards: aggregation, denominators and status, schema validation, secret scrubbing on write."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from pinbench.core.derived import derive
from pinbench.core.provenance import collect_provenance
from pinbench.core.runner import MISSING_ERROR, SampleRecord
from pinbench.core.scorecard import (
    NEVER_COMPUTED,
    DerivedCounts,
    Failure,
    MetricResult,
    MetricSpec,
    SampleCounts,
    Scorecard,
    ScorecardError,
    aggregate,
    build_scorecard,
    degenerate_notes,
    load_scorecard,
    scorecard_file,
    validate_scorecard,
    write_scorecard,
)
from pinbench.core.uncertainty import Interval, difference_interval


def Spec(name: str, aggregation: str = "mean", *args, direction: str = "higher", **kwargs) -> MetricSpec:  # noqa: N802
    return MetricSpec(name, aggregation, *args, direction=direction, **kwargs)  # as a recipe.yaml declares it


# Test double: the fixed provenance block of the committed golden scorecard (collect_provenance output
# varies with the machine and the time).
FIXED_PROVENANCE: dict[str, Any] = json.loads(
    (Path(__file__).parent / "golden" / "scorecard.json").read_text())["provenance"]


def ok(sample_id: str, **result: Any) -> SampleRecord:
    return SampleRecord(sample_id=sample_id, status="ok", result=result, error=None,
                        input_hash="0" * 64, seconds=0.1)


def failed(sample_id: str, error: str) -> SampleRecord:
    return SampleRecord(sample_id=sample_id, status="failed", result=None, error=error,
                        input_hash="0" * 64, seconds=0.1)


def card_for(records: list[Any], metrics: list[MetricSpec], n_expected: int, **kw: Any) -> Scorecard:
    args: dict[str, Any] = dict(recipe="toy", recipe_version="1.0.0", checkpoint="ckpt", mode="fixture",
                                metrics=metrics, records=records, n_expected=n_expected,
                                provenance=FIXED_PROVENANCE, config={"limit": None}, timings={"score": 1.5})
    args.update(kw)
    return build_scorecard(**args)


# ------------------------------------------------------------------------------------ aggregation


def test_mean_and_median() -> None:
    records = [ok(f"s{i}", x=v) for i, v in enumerate([1.0, 2.0, 3.0, 10.0])]
    card = card_for(records, [Spec("x"), Spec("x_median", "median", key="x")], 4)
    assert card.metrics["x"].value == pytest.approx(4.0)
    assert card.metrics["x_median"].value == pytest.approx(2.5)
    assert card.metrics["x_median"].key == "x"
    assert card.status == "complete"
    assert card.status_reasons == ()
    validate_scorecard(card.to_json())


def test_mean_then_median_groups() -> None:
    # scene a: mean(1, 3) = 2; scene b: 10; scene c: mean(4, 6, 8) = 6 -> median(2, 10, 6) = 6
    rows = [("a", 1), ("a", 3), ("b", 10), ("c", 4), ("c", 6), ("c", 8)]
    records = [ok(f"s{i}", ssim=v, scene=g) for i, (g, v) in enumerate(rows)]
    card = card_for(records, [Spec("ssim", "mean_then_median", group_by="scene")], 6)
    m = card.metrics["ssim"]
    assert m.value == pytest.approx(6.0)
    assert m.n_groups == 3 and m.group_by == "scene"
    # a plain median over samples would differ (median of 1,3,4,6,8,10 = 5)
    assert aggregate([1, 3, 10, 4, 6, 8], "median") == pytest.approx(5.0)


def test_mean_then_median_missing_group_counts_as_failed() -> None:
    records = [ok("s0", v=1.0, scene="a"), ok("s1", v=2.0)]
    m = card_for(records, [Spec("v", "mean_then_median", group_by="scene")], 2).metrics["v"]
    assert m.n_scored == 1 and m.n_failed == 1
    assert m.failed == (Failure("s1", "no group field 'scene' in result"),)


def test_null_nan_and_failures_are_counted_never_dropped() -> None:
    records = [
        ok("s0", x=0.5),
        ok("s1", x=None),                   # runner stores NaN as null
        ok("s2", x=float("nan")),           # a NaN that reached us anyway
        ok("s3", y=1.0),                    # metric absent
        failed("s4", "RuntimeError: CUDA out of memory"),
        ok("s5", x="0.7"),                  # not a number
        ok("s6", x=float("inf")),
        ok("s7", x=0.7),
    ]
    card = card_for(records, [Spec("x")], 8)
    m = card.metrics["x"]
    assert m.value == pytest.approx(0.6)
    assert (m.n_expected, m.n_scored, m.n_failed, m.n_missing) == (8, 2, 6, 0)
    reasons = {f.sample_id: f.error for f in m.failed}
    assert reasons["s1"] == "'x' is null (NaN or not computed)"
    assert reasons["s2"].startswith("'x' is not finite")
    assert reasons["s3"] == "no value for 'x' in result"
    assert reasons["s4"] == "RuntimeError: CUDA out of memory"
    assert reasons["s5"].startswith("'x' is not a number")
    assert card.status == "partial"
    assert card.status_reasons == ("x: 2/8 scored (6 failed, 0 missing)",)
    assert card.samples == SampleCounts(n_expected=8, n_ok=7, n_failed=1, n_missing=0, path="samples.jsonl")
    validate_scorecard(card.to_json())


def test_a_missing_value_carries_the_reason_its_recipe_recorded() -> None:
    """A recipe that says why a value is missing (``result["errors"][key]``) gets that reason into the card."""
    records = [ok("s0", x=0.5),
               ok("s1", x=None, errors={"x": "no 'dino' block although error is null"}),
               ok("s2", y=1.0, errors={"x": "the evaluator skipped it"}),
               ok("s3", x=None, errors={"z": "another metric's reason"}),
               ok("s4", x=None, errors="not a mapping")]
    reasons = {f.sample_id: f.error for f in card_for(records, [Spec("x")], 5).metrics["x"].failed}
    assert reasons == {"s1": "'x' is null: no 'dino' block although error is null",
                       "s2": "no value for 'x' in result: the evaluator skipped it",
                       "s3": "'x' is null (NaN or not computed)",
                       "s4": "'x' is null (NaN or not computed)"}


def test_nothing_scored_gives_null_value_and_failed_status() -> None:
    card = card_for([failed("s0", "ValueError: bad video")], [Spec("x"), Spec("y")], 3)
    assert card.metrics["x"].value is None
    assert card.metrics["x"].n_missing == 2
    assert card.status == "failed"
    validate_scorecard(card.to_json())


def test_one_metric_complete_another_empty_is_partial() -> None:
    card = card_for([ok("s0", x=1.0), ok("s1", x=2.0)], [Spec("x"), Spec("y")], 2)
    assert card.status == "partial"
    assert card.metrics["y"].value is None


def test_shard_records_against_full_count_is_partial() -> None:
    # this process saw 2 of the 4 tasks: the denominator stays 4
    card = card_for([ok("s0", x=1.0), ok("s2", x=3.0)], [Spec("x")], 4)
    m = card.metrics["x"]
    assert (m.n_scored, m.n_missing) == (2, 2)
    assert card.samples.n_missing == 2
    assert card.status == "partial"


def test_zero_expected_is_not_complete() -> None:
    card = card_for([], [Spec("x")], 0)
    assert card.status == "failed"
    assert "x: n_expected is 0" in card.status_reasons


def test_cohort_metrics_name_missing_samples() -> None:
    t2v, i2v = ["t0", "t1"], ["i0", "i1", "i2"]
    records = [ok("t0", clip=0.8), ok("t1", clip=0.6), ok("i0", clip=0.5), failed("i1", "ValueError: x")]
    metrics = [Spec("t2v/clip", key="clip", sample_ids=t2v),
               Spec("i2v/clip", key="clip", sample_ids=i2v)]
    card = card_for(records, metrics, 5)
    assert card.metrics["t2v/clip"].value == pytest.approx(0.7)
    assert card.metrics["t2v/clip"].n_expected == 2
    i = card.metrics["i2v/clip"]
    assert (i.n_expected, i.n_scored, i.n_failed, i.n_missing) == (3, 1, 1, 1)
    assert i.missing == ("i2",)
    assert card.status == "partial"
    validate_scorecard(card.to_json())


@pytest.mark.parametrize("as_json", [False, True])
def test_a_merges_stand_in_for_a_sample_no_shard_stored_counts_missing_not_failed(as_json: bool) -> None:
    """A merge keeps a failed stand-in (error MISSING_ERROR) for a task no shard stored, so derived records can name
    it; it was never computed: missing in every count and named in its cohort's missing, never failed. A failed
    record whose error only mentions the words is a failure."""
    records = [ok("i0", clip=0.5), failed("i1", MISSING_ERROR + " (shard 1/2)"),
               failed("i2", f"ValueError: {MISSING_ERROR}"), ok("t0", clip=0.8)]
    metrics = [Spec("i2v/clip", key="clip", sample_ids=["i0", "i1", "i2"]), Spec("clip")]
    card = card_for([r.to_json() for r in records] if as_json else records, metrics, 4)
    assert (card.samples.n_ok, card.samples.n_failed, card.samples.n_missing) == (2, 1, 1)
    i = card.metrics["i2v/clip"]
    assert (i.n_scored, i.n_failed, i.n_missing, i.missing) == (1, 1, 1, ("i1",))
    assert [f.sample_id for f in i.failed] == ["i2"]
    whole = card.metrics["clip"]
    assert (whole.n_scored, whole.n_failed, whole.n_missing) == (2, 1, 1)
    validate_scorecard(card.to_json())


@pytest.mark.parametrize("as_json", [False, True])
def test_a_value_a_record_says_was_never_computed_counts_missing_with_its_reason(as_json: bool,
                                                                                 tmp_path: Path) -> None:
    """An ok record whose result names a key or its group in ``never_computed`` (PAI-Bench-C's modality whose rollout
    no run generated): that metric counts the sample missing, never failed, in a cohort's named missing too, and
    failures.tsv gives the reason; its other values are scored. A missing value it does not name is a failure."""
    from pinbench.core.run import summarize_failures

    why = "generation: no run stored seg/t1.mp4 or a record of it"
    records = [ok("t0", **{"edge/f1": 0.5, "seg/f1": 0.4}), ok("t1", **{"edge/f1": 0.7, NEVER_COMPUTED: {"seg": why}}),
               ok("t2", **{"edge/f1": 0.6})]
    metrics = [Spec("edge/f1"), Spec("seg/f1"), Spec("seg/f1/cohort", key="seg/f1", sample_ids=["t0", "t1"])]
    card = card_for([r.to_json() for r in records] if as_json else records, metrics, 3)
    assert card.metrics["edge/f1"].n_scored == 3 and card.samples.n_ok == 3
    seg, cohort = card.metrics["seg/f1"], card.metrics["seg/f1/cohort"]
    assert (seg.n_scored, seg.n_failed, seg.n_missing) == (1, 1, 1) and [f.sample_id for f in seg.failed] == ["t2"]
    assert (cohort.n_scored, cohort.n_failed, cohort.n_missing, cohort.missing) == (1, 0, 1, ("t1",))
    validate_scorecard(card.to_json())
    summarize_failures(card, tmp_path, records)
    rows = [line.split("\t") for line in (tmp_path / "failures.tsv").read_text().splitlines()[1:]]
    assert sorted(tuple(row) for row in rows if row[0] == "t1") == [("t1", "seg/f1", f"missing: {why}"),
                                                                   ("t1", "seg/f1/cohort", f"missing: {why}")]


def test_aggregation_none_takes_the_single_value() -> None:
    records = [ok("s0", x=1.0), ok("suite", fvd=123.5)]
    metrics = [Spec("x", sample_ids=["s0"]), Spec("fvd", "none", sample_ids=["suite"])]
    card = card_for(records, metrics, 2)
    assert card.metrics["fvd"].value == 123.5
    assert card.status == "complete"
    with pytest.raises(ValueError, match="exactly one expected sample"):
        card_for(records, [Spec("fvd", "none")], 2)


def test_records_as_json_dicts() -> None:
    records = [ok("s0", x=1.0).to_json(), failed("s1", "OSError: gone").to_json()]
    m = card_for(records, [Spec("x")], 2).metrics["x"]
    assert m.value == 1.0 and m.failed == (Failure("s1", "OSError: gone"),)


def test_aggregate_is_independent_of_record_order() -> None:
    rng = random.Random(0)
    rows = [(f"s{i}", rng.random() * 1e6 + 1e-6 * i, f"g{i % 7}") for i in range(200)]
    metrics = [Spec("v"), Spec("vm", "mean_then_median", group_by="g", key="v")]
    first = card_for([ok(s, v=v, g=g) for s, v, g in rows], metrics, 200).metrics
    rng.shuffle(rows)
    second = card_for([ok(s, v=v, g=g) for s, v, g in rows], metrics, 200).metrics
    assert first["v"].value == second["v"].value
    assert first["vm"].value == second["vm"].value


@pytest.mark.parametrize("kwargs, match", [
    ({"mode": "quick"}, "unknown mode"),
    ({"metrics": []}, "at least one metric"),
    ({"n_expected": 1}, "n_expected must be the full task count"),
    ({"records": [ok("s0", x=1.0), ok("s0", x=2.0)]}, "duplicate sample ids"),
    ({"metrics": [Spec("x"), Spec("x")]}, "duplicate metric names"),
])
def test_build_rejects_bad_arguments(kwargs: dict[str, Any], match: str) -> None:
    base: dict[str, Any] = dict(records=[ok("s0", x=1.0), ok("s1", x=2.0)], metrics=[Spec("x")],
                                n_expected=2)
    base.update(kwargs)
    with pytest.raises(ValueError, match=match):
        card_for(**base)


def test_metric_spec_validation() -> None:
    with pytest.raises(ValueError, match="unknown aggregation"):
        Spec("x", "geomean")
    with pytest.raises(ValueError, match="group_by is required"):
        Spec("x", "mean_then_median")
    with pytest.raises(ValueError, match="group_by is required"):
        Spec("x", "mean", group_by="scene")
    with pytest.raises(ValueError, match="duplicates"):
        Spec("x", sample_ids=["a", "a"])


# ---------------------------------------------------------------------------------------- schema


@pytest.fixture
def valid_card() -> Scorecard:
    records = [ok("s0", x=1.0, y=0.1), ok("s1", x=3.0, y=0.3), failed("s2", "ValueError: truncated")]
    return card_for(records, [Spec("x"), Spec("y", "median")], 3, extra={"decoder": "pyav"})


def test_valid_card_round_trips(valid_card: Scorecard, tmp_path: Path) -> None:
    path = write_scorecard(valid_card, tmp_path / "run" / "scorecard.json")
    assert load_scorecard(path) == valid_card
    assert [p.name for p in path.parent.iterdir()] == ["scorecard.json"]  # no temp file left


def _mutations() -> list[tuple[str, Any, str]]:
    def drop(key: str) -> Any:
        return lambda c: c.pop(key)

    def set_(path: list[str], value: Any) -> Any:
        def apply(c: dict[str, Any]) -> None:
            for p in path[:-1]:
                c = c[p]
            c[path[-1]] = value
        return apply

    def drop_metric_field(key: str) -> Any:
        return lambda c: c["metrics"]["x"].pop(key)

    return [
        ("missing status", drop("status"), "must contain ['status'] properties"),
        ("missing provenance", drop("provenance"), "must contain ['provenance'] properties"),
        ("bad status", set_(["status"], "done"), "$.status"),
        ("bad mode", set_(["mode"], "quick"), "$.mode"),
        ("negative count", set_(["metrics", "x", "n_failed"], -1), "$.metrics.x.n_failed"),
        ("negative samples", set_(["samples", "n_ok"], -2), "$.samples.n_ok"),
        ("string value", set_(["metrics", "x", "value"], "2.0"), "$.metrics.x.value"),
        ("unknown aggregation", set_(["metrics", "x", "aggregation"], "sum"), "$.metrics.x.aggregation"),
        ("bad commit", set_(["provenance", "pinbench", "commit"], "main"), "$.provenance.pinbench.commit"),
        ("unknown top-level field", set_(["score"], 1.0), "must not contain {'score'} properties"),
        ("counts do not add up", set_(["metrics", "x", "n_scored"], 3), "n_scored + n_failed + n_missing"),
        ("value when nothing scored",
         set_(["metrics", "x"], {"value": 1.0, "aggregation": "mean", "direction": "higher", "kind": "official",
                                 "primary": False, "n_expected": 3, "n_scored": 0,
                                 "n_failed": 0, "n_missing": 3, "failed": [],
                                 "interval": {"low": None, "high": None, "level": 0.95, "reason": "nothing"}}),
         "value must be null"),
        ("no interval in schema 2.1", drop_metric_field("interval"), "must contain ['interval']"),
        ("interval low above high", set_(["metrics", "x", "interval", "low"], 9.0), "is not finite low <= high"),
        ("interval without its method", lambda c: c["metrics"]["x"]["interval"].pop("method"), "$.metrics.x.interval"),
        ("interval bounds and a reason", set_(["metrics", "x", "interval", "reason"], "x"), "$.metrics.x.interval"),
        ("non-finite value", set_(["metrics", "x", "value"], float("inf")), "is not finite"),
        ("no direction", drop_metric_field("direction"), "must contain ['direction']"),
        ("failed list shorter", set_(["metrics", "x", "failed"], []), "failed entries"),
        ("status contradicts counts", set_(["status"], "complete"), "contradicts the counts"),
    ]


@pytest.mark.parametrize("name, mutate, expected", _mutations(), ids=[m[0] for m in _mutations()])
def test_invalid_cards_are_rejected(valid_card: Scorecard, name: str, mutate: Any,
                                    expected: str) -> None:
    card = valid_card.to_json()
    mutate(card)
    with pytest.raises(ScorecardError) as info:
        validate_scorecard(card)
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_write_refuses_invalid_and_keeps_previous_file(valid_card: Scorecard, tmp_path: Path) -> None:
    path = write_scorecard(valid_card, tmp_path / "scorecard.json")
    before = path.read_text()
    bad = dataclasses.replace(valid_card, status="complete")
    with pytest.raises(ScorecardError, match="scorecard.json: status"):
        write_scorecard(bad, path)
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scorecard.json"]


def test_load_errors_name_the_file(valid_card: Scorecard, tmp_path: Path) -> None:
    with pytest.raises(ScorecardError, match=r"nope\.json: no such run directory or scorecard file"):
        load_scorecard(tmp_path / "nope.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema_version": "1.0",\n  "recipe": }')
    with pytest.raises(ScorecardError, match=r"broken\.json: invalid JSON at line 2, column 13"):
        load_scorecard(broken)
    invalid = tmp_path / "invalid.json"
    card = valid_card.to_json()
    card["samples"]["n_expected"] = -3
    invalid.write_text(json.dumps(card))
    with pytest.raises(ScorecardError) as info:
        load_scorecard(invalid)
    message = str(info.value)
    assert message.startswith(f"{invalid}: schema violation at $.samples.n_expected")
    assert "\n" not in message


@pytest.mark.parametrize(("data", "why"), [
    (b"\x00\x00\x00\x18ftypmp42\xff\xfe", "not UTF-8 text, byte 12"),
    (b"\x00\x00\x00\x18ftypmp42", "not a JSON object"),
    (b"# notes\n", "not a JSON object"),
    (b'  [{"recipe": "mind"}]', "not a JSON object"),
    (b'{"sample_id": "a"}\n{"sample_id": "b"}\n', "JSON Lines: a second value at line 2; a scorecard is one object, "
                                                 "a run's scorecard.json"),
], ids=["video", "ascii-binary", "markdown", "list", "jsonl"])
def test_a_file_that_is_no_scorecard_is_said_to_be_none(data: bytes, why: str, tmp_path: Path) -> None:
    """``pinbench diff clip.mp4`` said ``not UTF-8 text (byte 43)``, as if a scorecard were damaged."""
    path = tmp_path / "clip.mp4"
    path.write_bytes(data)
    with pytest.raises(ScorecardError) as info:
        load_scorecard(path)
    assert str(info.value) == f"{path}: not a scorecard ({why})"


@pytest.mark.parametrize(("text", "why"), [
    ("", "no JSON value: the file is empty"),
    (" \n", "no JSON value: the file holds only whitespace"),
    ('{"recipe": "mi', "invalid JSON at line 1, column 12: Unterminated string starting"),
], ids=["empty", "whitespace", "truncated"])
def test_an_empty_or_truncated_scorecard_reads_as_any_files_json_error(text: str, why: str, tmp_path: Path) -> None:
    """Its own wording: an empty scorecard.json was "not a scorecard (not a JSON object)", a truncated one ended on
    a dangling "starting at"; now files.json_error's, as every file pinbench reads."""
    path = tmp_path / "scorecard.json"
    path.write_text(text)
    with pytest.raises(ScorecardError) as info:
        load_scorecard(path)
    assert str(info.value) == f"{path}: {why}"


def test_a_file_that_is_no_scorecard_is_one_line_in_every_command(tmp_path: Path, capsys) -> None:
    from pinbench.cli import main

    clip = tmp_path / "run" / "scorecard.json"
    clip.parent.mkdir()
    clip.write_bytes(b"\x00\x00\x00\x18ftypmp42\xff")
    for args in (["diff", str(clip)], ["report", str(clip)], ["table", str(clip)], ["compare", str(clip), str(clip)],
                 ["check", str(clip.parent)]):
        with pytest.raises(SystemExit) as exited:
            main(args)
        out = capsys.readouterr()
        assert exited.value.code == 2
        assert f"{clip}: not a scorecard (not UTF-8 text, byte 12)" in (out.err + out.out).splitlines()[0], args


GITHUB_TOKEN, AWS_KEY_ID = "ghp_" + "A1b2C3d4E5" * 4, "AKIAIOSFODNN7EXAMPLE"   # no variable holds these


def test_written_file_holds_no_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hf_token = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345"
    monkeypatch.setenv("HF_TOKEN", hf_token)
    monkeypatch.setenv("WANDB_API_KEY", "wandb-secret-0123456789")
    provenance = collect_provenance(pins={}, seeds={"global": 0},
                                    extra={"note": f"fetched with {hf_token}"})
    card = card_for(
        [ok("s0", x=1.0)], [Spec("x")], 1, provenance=provenance,
        config={"hf_token": "anything-at-all", "cmd": f"pinbench fetch --token {hf_token}",
                "options": {"logger": "wandb:wandb-secret-0123456789",
                            "endpoint": f"https://{GITHUB_TOKEN}@git.example.com/o/r.git key {AWS_KEY_ID}"}},
        extra={"argv": ["--hf-token", hf_token], "nested": [{"password": "pw-value-123"}]},
    )
    path = write_scorecard(card, tmp_path / "scorecard.json")
    text = path.read_text()
    for secret in (hf_token, "anything-at-all", "wandb-secret-0123456789", "pw-value-123"):
        assert secret not in text
    written = json.loads(text)
    assert written["config"]["cmd"] == "pinbench fetch --token ***"
    assert written["config"]["hf_token"] == "***"
    assert written["extra"]["argv"] == ["--hf-token", "***"]
    assert written["config"]["options"]["endpoint"] == "https://***@git.example.com/o/r.git key ***"   # by shape
    assert card.config["hf_token"] == "anything-at-all"  # the caller's dict is not modified


def test_config_values_become_plain_json(tmp_path: Path) -> None:
    card = card_for([ok("s0", x=1.0)], [Spec("x")], 1,
                    config={"out_dir": tmp_path, "gpus": {2, 1}, "ratio": math.nan})
    assert card.config == {"out_dir": str(tmp_path), "gpus": [1, 2], "ratio": None}
    write_scorecard(card, tmp_path / "scorecard.json")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_scorecard_file_with_a_non_finite_number_is_invalid_input(valid_card: Scorecard, tmp_path: Path,
                                                                     constant: str) -> None:
    text = json.dumps(valid_card.to_json(), indent=2)
    value = json.dumps(valid_card.metrics["x"].value)
    path = tmp_path / "scorecard.json"
    path.write_text(text.replace(f'"value": {value}', f'"value": {constant}', 1))
    with pytest.raises(ScorecardError, match=f"non-finite number {constant}"):
        load_scorecard(path)


# ------------------------------------------------------------------------------- the typed scorecard and its JSON


GOLDEN_SCORECARD = Path(__file__).parent / "golden" / "scorecard.json"


def _every_shape(tmp_path: Path) -> Scorecard:
    """A scorecard with every optional key a metric or the card can carry: unit, key, group_by and n_groups, a
    cohort's missing and sample_ids, derived records, an interval with a note and one with a reason, failures,
    extra and computed_from (Run.finish's)."""
    records = [ok(f"s{i}", x=float(i), scene=f"g{i % 3}") for i in range(6)] + [failed("s6", "OSError: gone")]
    suite = derive("suite", records[:3], lambda members: {"spread": 0.5})
    metrics = [Spec("x", unit="px"), Spec("x_by_scene", "mean_then_median", group_by="scene", key="x", unit="px"),
               Spec("near/x", key="x", sample_ids=["s0", "s1", "never-run"]),
               Spec("suite/spread", "none", key="spread", sample_ids=["suite"], derived=True),
               Spec("one", key="x", sample_ids=["s2"])]
    card = card_for(records, metrics, 8, derived=[suite], extra={"decoder": "pyav", "paths": [str(tmp_path)]})
    return dataclasses.replace(card, computed_from="ab" * 32)


def test_every_shape_round_trips_through_its_json_key_order_included(tmp_path: Path) -> None:
    card = _every_shape(tmp_path)
    data = card.to_json()
    assert list(data["metrics"]["x"]) == ["value", "aggregation", "direction", "kind", "primary", "unit",
                                          "n_expected", "n_scored", "n_failed", "n_missing", "failed", "interval"]
    assert list(data["metrics"]["x_by_scene"])[5:9] == ["unit", "key", "group_by", "n_groups"]
    assert list(data["metrics"]["near/x"])[-4:] == ["failed", "missing", "sample_ids", "interval"]
    assert list(data["metrics"]["suite/spread"])[-3:] == ["sample_ids", "records", "interval"]
    assert list(data)[-3:] == ["derived", "extra", "computed_from"]
    assert data["metrics"]["one"]["interval"] == {"low": None, "high": None, "level": 0.95,
                                                  "reason": "one sample: a bootstrap needs at least 2 units"}
    assert "note" in data["metrics"]["x"]["interval"]  # 6 samples: the few-units note
    path = write_scorecard(card, tmp_path / "scorecard.json")
    assert path.read_text() == json.dumps(data, indent=2) + "\n"
    loaded = load_scorecard(path)
    assert loaded == card
    assert json.dumps(loaded.to_json()) == json.dumps(data)
    assert json.dumps(Scorecard.from_json(json.loads(path.read_text())).to_json()) == json.dumps(data)


def test_an_optional_key_is_absent_where_it_was_never_set() -> None:
    data = card_for([ok("s0", x=1.0), ok("s1", x=2.0)], [Spec("x")], 2).to_json()
    assert list(data) == ["schema_version", "recipe", "recipe_version", "checkpoint", "mode", "status",
                          "status_reasons", "samples", "metrics", "provenance", "config", "timings"]
    assert list(data["metrics"]["x"]) == ["value", "aggregation", "direction", "kind", "primary", "n_expected",
                                          "n_scored", "n_failed", "n_missing", "failed", "interval"]
    assert list(data["metrics"]["x"]["interval"]) == ["low", "high", "level", "method", "unit", "n_units",
                                                      "n_resamples", "seed", "implementation", "note"]


def test_a_value_a_rule_defines_is_named_degenerate_and_said(tmp_path: Path) -> None:
    """A record says ``result["degenerate"][key]``: the metrics reading that key name it with its reason (absent
    when none does), the JSON round-trips and validates, and the notes the console and report print count them."""
    rule = "one class only: 0 by the rule"
    records = [ok("s0", x=0.0, y=1.0, degenerate={"x": rule}), ok("s1", x=0.0, degenerate={"x": f" {rule}\n"}),
               ok("s2", x=0.5, y=2.0), ok("s3", x=0.0, y=3.0, degenerate={"x": ""})]   # blank: no reason, none
    metrics = [Spec("x"), Spec("y"), Spec("x0", "none", key="x", sample_ids=["s0"])]
    card = card_for(records, metrics, 4)
    assert [(d.sample_id, d.reason) for d in card.metrics["x"].degenerate] == [("s0", rule), ("s1", rule)]
    assert card.metrics["y"].degenerate == () and "degenerate" not in card.to_json()["metrics"]["y"]
    data = card.to_json()
    assert data["schema_version"] == "2.3" and data["metrics"]["x"]["degenerate"][1] == {"sample_id": "s1",
                                                                                         "reason": rule}
    loaded = load_scorecard(write_scorecard(card, tmp_path / "scorecard.json"))
    assert loaded == card
    assert degenerate_notes(card) == [f"x: 2 of its 4 values are degenerate ({rule})",
                                      f"1 single-value metric is degenerate ({rule}): x0"]
    data["metrics"]["x"]["degenerate"] = []
    with pytest.raises(ValueError, match="degenerate must be a non-empty list"):
        Scorecard.from_json(data)


def test_the_golden_scorecard_round_trips_byte_for_byte() -> None:
    text = GOLDEN_SCORECARD.read_text()
    card = load_scorecard(GOLDEN_SCORECARD)
    assert json.dumps(card.to_json(), indent=2) + "\n" == text
    assert card.schema_version == "2.1" and card.derived is None and card.computed_from is None
    assert Scorecard.from_json(json.loads(text)) == card


def test_a_schema_2_0_metric_without_an_interval_round_trips(valid_card: Scorecard) -> None:
    data = valid_card.to_json()
    data["schema_version"] = "2.0"
    del data["metrics"]["x"]["interval"]
    validate_scorecard(data)
    card = Scorecard.from_json(data)
    assert card.metrics["x"].interval is None and card.to_json() == data


def test_a_difference_interval_round_trips_with_paired() -> None:
    a = {f"t{i}": float(i % 5) for i in range(30)}
    b = {k: v + (0.1 if k < "t2" else -0.05) for k, v in a.items()}
    interval = difference_interval(a, b, "mean").interval
    assert interval.paired is True and list(interval.to_json())[-1] == "paired"
    assert Interval.from_json(interval.to_json()) == interval
    assert json.dumps(Interval.from_json(interval.to_json()).to_json()) == json.dumps(interval.to_json())


def _set(path: list[str | int], value: Any) -> Any:
    def apply(data: dict[str, Any]) -> None:
        for key in path[:-1]:
            data = data[key]
        data[path[-1]] = value
    return apply


def _drop(path: list[str | int]) -> Any:
    def apply(data: dict[str, Any]) -> None:
        for key in path[:-1]:
            data = data[key]
        del data[path[-1]]
    return apply


@pytest.mark.parametrize("mutate, message", [
    (_set(["metrics", "x", "value"], "2.0"), "$.metrics.x.value must be a number or null, got '2.0'"),
    (_set(["metrics", "x", "n_scored"], -1), "$.metrics.x.n_scored must be a count (an integer >= 0), got -1"),
    (_set(["metrics", "x", "primary"], 1), "$.metrics.x.primary must be true or false, got 1"),
    (_set(["metrics", "x", "aggregation"], "sum"), "$.metrics.x.aggregation must be one of 'mean', "),
    (_set(["metrics", "x", "score"], 1.0), "$.metrics.x: unknown field 'score'"),
    (_drop(["metrics", "x", "n_missing"]), "$.metrics.x: lacks 'n_missing'"),
    (_set(["metrics", "x", "unit"], None), "$.metrics.x.unit must be a non-empty string, got None"),
    (_drop(["metrics", "x", "failed", 0, "error"]), "$.metrics.x.failed[0]: lacks 'error'"),
    (_set(["metrics", "x", "failed"], {"s2": "x"}), "$.metrics.x.failed must be a list, got {'s2': 'x'}"),
    (_set(["metrics", "x", "interval", "low"], "low"), "$.metrics.x.interval.low must be a number or null"),
    (_set(["metrics", "x", "interval", "note"], None), "$.metrics.x.interval.note must be a string, got None"),
    (_set(["metrics", "x", "interval", "unit"], "task"), "$.metrics.x.interval.unit must be one of 'sample', 'group'"),
    (_set(["metrics", "x", "interval"], [0.1, 0.2]), "$.metrics.x.interval must be an object, got [0.1, 0.2]"),
    (_set(["metrics", "x", "sample_ids"], ["s0", 1]), "$.metrics.x.sample_ids must be a list of strings"),
    (_set(["samples"], []), "$.samples must be an object, got []"),
    (_set(["samples", "path"], 3), "$.samples.path must be a string or null, got 3"),
    (_set(["derived"], {"n_records": 1, "n_ok": 1, "n_failed": 0}), "$.derived: lacks 'path'"),
    (_set(["status"], "done"), "$.status must be one of 'complete', 'partial', 'failed', got 'done'"),
    (_set(["status_reasons"], "none"), "$.status_reasons must be a list of strings, got 'none'"),
    (_drop(["provenance"]), "$: lacks 'provenance'"),
    (_set(["score"], 1.0), "$: unknown field 'score'"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_from_json_refuses_a_bad_block_in_one_line_naming_it(valid_card: Scorecard, mutate: Any, message: str) -> None:
    data = valid_card.to_json()
    data["metrics"]["x"] = dict(data["metrics"]["x"], unit="px")
    mutate(data)
    with pytest.raises(ValueError) as info:
        Scorecard.from_json(data)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


@pytest.mark.parametrize("kind, data, message", [
    (Scorecard, [1], "$: a JSON array, expected an object"),
    (MetricResult, None, "metric: a JSON null, expected an object"),
    (Interval, {"low": None, "high": None}, "interval: lacks 'level'"),
    (Interval, {"low": 0.1, "high": 0.2, "level": 0.95, "paired": "yes"}, "interval.paired must be true or false"),
    (Failure, {"sample_id": "s0"}, "failed: lacks 'error'"),
    (SampleCounts, {"n_expected": 1, "n_ok": 1, "n_failed": 0, "n_missing": 0}, "samples: lacks 'path'"),
    (DerivedCounts, {"n_records": 1, "n_ok": True, "n_failed": 0, "path": "d.jsonl"}, "derived.n_ok must be a count"),
])
def test_each_block_refuses_what_it_cannot_hold(kind: Any, data: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        kind.from_json(data)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_a_run_directory_without_a_scorecard_yet_says_why_and_where_to_look(tmp_path: Path) -> None:
    """``pinbench diff`` of a run directory whose shards ran but were not merged said only "file not found"; ``pinbench
    check`` of a run still going called it stopped (the view's own wording said all three)."""
    from pinbench.core.rundir import IDENTITY_FILE

    run = tmp_path / "run"
    run.mkdir()
    (run / IDENTITY_FILE).write_text("{}")
    with pytest.raises(ScorecardError) as info:
        load_scorecard(run / "scorecard.json")
    assert str(info.value) == (f"{run / 'scorecard.json'}: file not found: no scorecard yet (its run is still going, "
                               f"was stopped, or its shards await the merge: pinbench status {run})")
    with pytest.raises(ScorecardError) as info:   # a folder that is no run directory: the plain line
        load_scorecard(tmp_path / "scorecard.json")
    assert str(info.value) == f"{tmp_path / 'scorecard.json'}: file not found"


def test_a_mistyped_run_directory_is_not_called_a_file(tmp_path: Path) -> None:
    """``pinbench compare runs/a runs/nope`` (and report, view) said "runs/nope: file not found" of a folder name."""
    with pytest.raises(ScorecardError) as info:
        load_scorecard(scorecard_file(tmp_path / "nope"))
    assert str(info.value) == f"{tmp_path / 'nope'}: no such run directory or scorecard file"


def test_a_mistyped_recipe_in_a_run_path_names_the_run_meant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pinbench diff runs/dynamic-degre/my-model/scorecard.json`` said only "file not found" (and report, compare,
    view the same of a mistyped run directory): the first missing part of the path has a close folder beside it,
    and the line names the path meant, as typed (relative stays relative)."""
    (tmp_path / "runs" / "dynamic-degree" / "my-model").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ScorecardError) as info:
        load_scorecard(Path("runs/dynamic-degre/my-model/scorecard.json"))
    assert str(info.value) == ("runs/dynamic-degre/my-model/scorecard.json: no such run directory or scorecard file "
                               "(did you mean 'runs/dynamic-degree/my-model/scorecard.json'?)")
    with pytest.raises(ScorecardError) as info:
        load_scorecard(scorecard_file(Path("runs/dynamic-degree/my-modle")))
    assert str(info.value) == ("runs/dynamic-degree/my-modle: no such run directory or scorecard file "
                               "(did you mean 'runs/dynamic-degree/my-model'?)")
    with pytest.raises(ScorecardError) as info:   # nothing close: the plain line
        load_scorecard(Path("runs/paibench-c/Cosmos3-Nano/scorecard.json"))
    assert str(info.value) == "runs/paibench-c/Cosmos3-Nano/scorecard.json: no such run directory or scorecard file"
