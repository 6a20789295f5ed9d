"""record-reference from several trusted runs: the proposed tolerance, its arithmetic, refusals and flags."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from pinbench import cli
from pinbench.core.metricinfo import Tolerance
from pinbench.core.proposal import propose_reference, record_reference
from pinbench.core.reference import diff, load_reference
from pinbench.core.runner import SampleRecord
from pinbench.core.scorecard import MetricSpec, Scorecard, build_scorecard, write_scorecard
from tests.helpers.toy_recipe import toy_recipe

PROVENANCE = json.loads((Path(__file__).parent / "golden" / "scorecard.json").read_text())["provenance"]
T_975_2 = 4.302652729911275  # Student t quantile 0.975 at 2 degrees of freedom (tables)
runner = CliRunner()


def run_card(f1: float, *, stamp: str, spread: float = 0.0, n: int = 30) -> Scorecard:
    """A complete toy run: f1 per sample around ``f1`` (mean exactly f1), rmse and err fixed."""
    records = [SampleRecord(f"s{i:02d}", "ok", {"f1": f1 + spread * (i - (n - 1) / 2) / n, "rmse": 2.0,
                                                "err": 0.5 + 0.01 * (i % 3)}, None, "0" * 64, 0.1)
               for i in range(n)]
    metrics = [MetricSpec("f1", "mean", direction="higher", primary=True),
               MetricSpec("rmse", "mean", direction="lower"), MetricSpec("err", "median", direction="lower")]
    return build_scorecard(recipe="toy-bench", recipe_version="1.0.0", checkpoint="Toy-Nano", mode="full",
                           metrics=metrics, records=records, n_expected=n,
                           provenance={**PROVENANCE, "timestamp": stamp}, config={}, timings={})


@pytest.fixture()
def toy(tmp_path: Path) -> Any:
    return toy_recipe(tmp_path)


def _three(spread: float = 0.0) -> list[Scorecard]:
    return [run_card(v, stamp=f"2026-01-0{i + 1}T00:00:00Z", spread=spread)
            for i, v in enumerate((0.800, 0.802, 0.801))]


def test_three_runs_propose_a_tolerance_with_its_arithmetic(toy: Any) -> None:
    proposal = propose_reference(_three(), recipe=toy, tier="cross_hw")
    f1 = proposal.data["metrics"]["f1"]
    s = 0.001  # sample standard deviation of 0.800, 0.802, 0.801
    expected = T_975_2 * s * math.sqrt(1 + 1 / 3)  # 0.004968
    assert f1["value"] == pytest.approx(0.801) and f1["runs"] == [0.8, 0.802, 0.801]
    assert f1["tolerance"]["abs"] == pytest.approx(expected, rel=1e-9)
    assert ("3 runs 0.8, 0.802, 0.801: mean 0.801, s 0.001; t(0.975, 2) 4.303 x s x sqrt(1 + 1/3) = 0.00497"
            in f1["basis"])
    assert "-> ±0.00496828 (declared cross_hw default ±0.05)" in f1["basis"]
    assert proposal.lines[0].startswith("f1: 3 runs") and not proposal.refused
    rmse = proposal.data["metrics"]["rmse"]  # identical in every run: rel kept, bound 0
    assert rmse["tolerance"] == {"rel": 0.0} and "s 0;" in rmse["basis"]
    assert proposal.data["source"]["citation"].startswith("3 scorecards of toy-bench / Toy-Nano (full), run at ")
    assert len(proposal.data["source"]["provenance"]["runs"]) == 3


def test_runs_of_other_inputs_or_options_are_flagged(toy: Any) -> None:
    """Runs of one checkpoint over other inputs (another model's score files, say) were averaged without a word:
    each way a run's config differs from run 1's is a flag line; runs that differ in nothing say nothing."""
    cards = _three()
    assert not any(line.startswith("flag: run") for line in propose_reference(cards, recipe=toy, tier="cross_hw").lines)
    cards[1] = dataclasses.replace(cards[1], config={"options": {"scores": "/lab/model-b"}})
    cards[0] = dataclasses.replace(cards[0], config={"options": {"scores": "/lab/model-a"}})
    cards[2] = dataclasses.replace(cards[2], config={"options": {"scores": "/lab/model-a"}})
    lines = propose_reference(cards, recipe=toy, tier="cross_hw").lines
    assert lines[0] == "flag: run 2 ran differently from run 1: -o scores: run 1 /lab/model-a, run 2 /lab/model-b"
    assert not any(line.startswith("flag: run 3") for line in lines)


def test_a_spread_wider_than_the_declaration_is_refused(toy: Any, tmp_path: Path) -> None:
    cards = [run_card(v, stamp=f"2026-01-0{i + 1}T00:00:00Z") for i, v in enumerate((0.80, 0.82, 0.81))]
    proposal = propose_reference(cards, recipe=toy, tier="same_hw")  # same_hw f1 default: abs 0.01
    assert len(proposal.refused) == 1 and proposal.refused[0].startswith(
        "f1: the runs' spread ±0.0497 exceeds toy-bench's declared same_hw tolerance ±0.01: the declaration is wrong")
    with pytest.raises(ValueError, match="refusing to record: f1: the runs' spread"):
        record_reference(cards, tmp_path / "r.yaml", recipe=toy, tier="same_hw")
    assert not (tmp_path / "r.yaml").exists()


def test_a_tolerance_inside_the_reference_runs_own_noise_is_flagged(toy: Any, tmp_path: Path) -> None:
    card = run_card(0.8, stamp="2026-01-01T00:00:00Z", spread=0.3)  # f1 values spread over ±0.15
    half = (card.metrics["f1"].interval.high - card.metrics["f1"].interval.low) / 2
    assert 0.01 < half < 0.05
    path = record_reference(card, tmp_path / "one.yaml", recipe=toy, tier="same_hw")
    f1 = yaml.safe_load(path.read_text())["metrics"]["f1"]
    assert f1["note"].startswith("tolerance ±0.01 is narrower than the reference's own 95% interval (half-width")
    assert f1["interval"]["low"] == card.metrics["f1"].interval.low and f1["basis"] == \
        "declared same_hw default ±0.01"
    cross = propose_reference([card], recipe=toy, tier="cross_hw").data["metrics"]["f1"]  # ±0.05 > half: no flag
    assert "note" not in cross
    flag = "f1: tolerance ±0.01 is narrower than the reference's own 95% interval (half-width"
    assert any(n.startswith(flag) for n in diff(card, load_reference(path, recipe=toy)).notes)  # diff shows it too
    by_hand = yaml.safe_load(path.read_text())  # a cross_hw reference whose tolerance was narrowed by hand
    by_hand["tier"], by_hand["metrics"]["f1"]["tolerance"] = "cross_hw", {"abs": 0.01}
    del by_hand["metrics"]["f1"]["note"]
    (tmp_path / "by_hand.yaml").write_text(yaml.safe_dump(by_hand))
    assert any(n.startswith(flag) for n in diff(card, load_reference(tmp_path / "by_hand.yaml", recipe=toy)).notes)
    by_hand["metrics"]["f1"]["tolerance"] = {"abs": 0.05}  # wider than the noise: nothing to flag
    (tmp_path / "by_hand.yaml").write_text(yaml.safe_dump(by_hand))
    assert not any("narrower" in n for n in diff(card, load_reference(tmp_path / "by_hand.yaml", recipe=toy)).notes)
    narrowed = propose_reference(_three(), recipe=toy, tier="cross_hw", overrides={"f1": Tolerance(abs=0.001)})
    assert "--tolerance ±0.001 is narrower than the measured spread ±0.00497: healthy reruns would FAIL" in \
        narrowed.data["metrics"]["f1"]["note"]


def test_the_recorded_reference_loads_and_diffs_with_its_interval(toy: Any, tmp_path: Path) -> None:
    cards = _three(spread=0.1)
    path = record_reference(cards, tmp_path / "r.yaml", recipe=toy, tier="cross_hw")
    ref = load_reference(path, recipe=toy)
    assert ref.metrics["f1"].runs == (0.8, 0.802, 0.801)
    lows = [c.metrics["f1"].interval.low for c in cards]
    assert ref.metrics["f1"].interval.low == min(lows)  # the union of the runs' intervals
    result = diff(run_card(0.803, stamp="2026-02-01T00:00:00Z", spread=0.1), ref)
    row = result.rows[0]
    assert (row.status, row.reading) == ("PASS", "within noise") and row.ref_interval is not None


def test_runs_of_other_checkpoints_or_the_same_run_twice_are_refused(toy: Any, tmp_path: Path) -> None:
    a, b = _three()[:2]
    other = dataclasses.replace(b, checkpoint="Toy-Super")
    with pytest.raises(ValueError, match="run 2 .*checkpoint 'Toy-Super' differs from run 1's 'Toy-Nano'"):
        propose_reference([a, other], recipe=toy, tier="same_hw")
    with pytest.raises(ValueError, match="the same run was given twice"):
        propose_reference([a, a], recipe=toy, tier="same_hw")
    path = write_scorecard(a, tmp_path / "a" / "scorecard.json")
    result = runner.invoke(cli.app, ["record-reference", str(path), str(tmp_path / "a" / ".." / "a" / "scorecard.json"),
                                     "--out", str(tmp_path / "r.yaml")])
    assert result.exit_code == 2 and "given twice" in result.output
    result = runner.invoke(cli.app, ["record-reference", str(tmp_path / "a"), str(path), "--out",
                                     str(tmp_path / "r.yaml")])   # a run directory and its own scorecard
    assert result.exit_code == 2 and f"{path}: given twice" in result.output


@pytest.mark.parametrize(("where", "said"), [
    ("ref", "{out}: a folder; --out names the reference file to write"),   # with --force: "[Errno 21]" of a temp file
    ("file/ref.yaml", "{out}: cannot be written ({tmp}/file is a regular file, not a folder)"),   # "[Errno 17]"
])
def test_an_out_that_cannot_be_a_reference_file_is_one_line_naming_it(where: str, said: str, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    toy = toy_recipe(tmp_path)
    monkeypatch.setattr(cli, "get_recipe", lambda name: toy)
    paths = [write_scorecard(card, tmp_path / f"run{i}" / "scorecard.json") for i, card in enumerate(_three())]
    (tmp_path / "ref").mkdir()
    (tmp_path / "file").write_text("x")
    out = tmp_path / where
    result = runner.invoke(cli.app, ["record-reference", *map(str, paths), "--out", str(out), "--tier", "cross_hw",
                                     "--force"])
    assert result.exit_code == 2 and result.output.splitlines()[-1] == "error: " + said.format(out=out, tmp=tmp_path)
    assert (tmp_path / "file").read_text() == "x" and list((tmp_path / "ref").iterdir()) == []


def test_cli_dry_run_shows_the_arithmetic_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toy = toy_recipe(tmp_path)
    monkeypatch.setattr(cli, "get_recipe", lambda name: toy)
    paths = [write_scorecard(card, tmp_path / f"run{i}" / "scorecard.json") for i, card in enumerate(_three())]
    out = tmp_path / "ref.yaml"
    result = runner.invoke(cli.app, ["record-reference", *map(str, paths), "--out", str(out), "--tier", "cross_hw",
                                     "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "3 runs, tier cross_hw" in result.output and "t(0.975, 2) 4.303" in result.output
    assert "dry run" in result.output and not out.exists()
    result = runner.invoke(cli.app, ["record-reference", *map(str, paths), "--out", str(out), "--tier", "cross_hw"])
    assert result.exit_code == 0 and out.is_file()


def test_a_fixture_run_with_limit_never_becomes_the_fixture_reference(toy: Any) -> None:
    # was written as references/fixture.yaml of 2 samples "from 1 complete fixture run": every whole fixture run then
    # a MISMATCH against it (a --limit run of a checkpoint is a smoke run, with a .smoke.yaml of its own)
    card = dataclasses.replace(run_card(0.8, stamp="2026-01-01T00:00:00Z", n=2), mode="fixture", config={"limit": 2})
    with pytest.raises(ValueError, match=r"refusing to record a reference from run 1 .*: a --limit 2 run of the "
                                         "fixture"):
        propose_reference([card], recipe=toy, tier="same_hw")
    smoke = dataclasses.replace(card, mode="smoke")
    assert propose_reference([smoke], recipe=toy, tier="same_hw").data["n_samples"] == 2


def _with_config(run: Path, options: dict[str, str]) -> None:
    card = json.loads((run / "scorecard.json").read_text())
    card["config"] = {"options": options, "out_dir": str(run)}
    (run / "scorecard.json").write_text(json.dumps(card))


def test_diff_against_a_recorded_reference_names_other_options_and_inputs(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A recorded reference kept its run's provenance alone: ``diff --reference`` of a run of a re-encoded video, or of
    another option the recipe does not copy into provenance, said PASS and named only the commit. It keeps the
    run's options and each sample's input hash, and names what differs as ``compare`` does; where the run was
    written (out_dir) is kept out of the file. A reference of an older pinbench (neither kept) says nothing of them."""
    from tests.helpers.toy_runs import write_toy_run

    toy = toy_recipe(tmp_path)
    monkeypatch.setattr(cli, "get_recipe", lambda name: toy)
    metrics = [MetricSpec("f1", "mean", direction="higher", primary=True),
               MetricSpec("err", "median", direction="lower")]
    a, b = (write_toy_run(tmp_path, name, metrics, checkpoint="Toy-Nano") for name in ("A", "B"))
    _with_config(a, {"flow": "farneback"})
    _with_config(b, {"flow": "raft"})
    lines = (b / "samples.jsonl").read_text().splitlines()
    for i in (3, 7):
        lines[i] = json.dumps({**json.loads(lines[i]), "input_hash": "1" * 64})
    (b / "samples.jsonl").write_text("\n".join(lines) + "\n")
    ref = tmp_path / "ref.yaml"
    recorded = runner.invoke(cli.app, ["record-reference", str(a), "--out", str(ref), "--tier", "cross_hw"])
    assert recorded.exit_code == 0, recorded.output
    source = yaml.safe_load(ref.read_text())["source"]
    assert source["config"] == {"options": {"flow": "farneback"}} and str(tmp_path) not in ref.read_text()
    assert source["inputs"]["n_samples"] == 40 and len(source["inputs"]["samples"]) == 40
    result = runner.invoke(cli.app, ["diff", str(b), "--reference", str(ref)])
    assert result.exit_code == 0, result.output
    assert ("  - ran differently from the reference's run: -o flow: reference farneback, this run raft"
            in result.output.splitlines())
    assert ("  - ran differently from the reference's run: other inputs: 2 of 40 samples were computed from other "
            "inputs in the reference's run and this run (the input hash of its task differs: an input file's content "
            "or an option): t03, t07") in result.output.splitlines()
    older = yaml.safe_load(ref.read_text())
    del older["source"]["config"], older["source"]["inputs"]
    ref.write_text(yaml.safe_dump(older, sort_keys=False))
    result = runner.invoke(cli.app, ["diff", str(b), "--reference", str(ref)])
    assert result.exit_code == 0 and "-o flow" not in result.output and "other inputs" not in result.output


def test_the_fixture_reference_keeps_its_runs_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """refdiff77: ``record-reference --fixture`` kept the fixture run's options but not its samples' input hashes, so a
    diff against it never named a sample of other inputs."""
    from pinbench.core.run import RunOutcome
    from pinbench.ops import newrecipe
    from tests.helpers.toy_runs import write_toy_run

    toy = toy_recipe(tmp_path)
    metrics = [MetricSpec("f1", "mean", direction="higher", primary=True),
               MetricSpec("err", "median", direction="lower")]

    def fixture_run(cfg: Any) -> RunOutcome:   # the toy's run of its fixture, in record_fixture_reference's folder
        return RunOutcome(write_toy_run(cfg.out_dir.parent, cfg.out_dir.name, metrics) / "scorecard.json", 0)

    monkeypatch.setattr(newrecipe, "get_recipe", lambda name: toy)
    monkeypatch.setattr(newrecipe, "run_recipe", fixture_run)
    kept = load_reference(newrecipe.record_fixture_reference("toy-bench"), recipe=toy).source["inputs"]
    assert kept["n_samples"] == 40 and kept["samples"] == {f"t{i:02d}": "0" * 64 for i in range(40)}


def test_a_reference_of_many_samples_keeps_the_digest_of_their_inputs_alone(toy: Any, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Each sample's hash of CameraBench's 11,222 would make a reference a megabyte: past INPUTS_LISTED it keeps their
    digest, and a run of other inputs is told so in one line, without names."""
    from pinbench.core import reference

    monkeypatch.setattr(reference, "INPUTS_LISTED", 5)
    card = run_card(0.8, stamp="2026-01-01T00:00:00Z")
    hashes = {f"s{i:02d}": "0" * 64 for i in range(30)}
    ref = load_reference(record_reference(card, tmp_path / "r.yaml", recipe=toy, tier="cross_hw", inputs=[hashes]),
                         recipe=toy)
    assert set(ref.source["inputs"]) == {"sha256", "n_samples"}
    assert not [n for n in diff(card, ref, inputs=hashes).notes if "other inputs" in n]
    notes = diff(card, ref, inputs={**hashes, "s04": "1" * 64}).notes
    assert ("ran differently from the reference's run: other inputs: the digest of the samples' input hashes differs "
            "(the reference's run: 30 samples, this run: 30; the reference keeps no sample's own)") in notes


@pytest.mark.parametrize("samples", [{}, {"s00": "0" * 64, "s01": "0" * 64}])
def test_a_reference_whose_inputs_list_disagrees_with_their_count_is_refused_in_one_line(
        toy: Any, tmp_path: Path, samples: dict[str, str]) -> None:
    """refdiff77: a hand-edited source.inputs whose samples ({} beside 30) disagree with its n_samples loaded
    silently, and a diff against it named no sample of other inputs."""
    from pinbench.core.reference import ReferenceFileError

    card = run_card(0.8, stamp="2026-01-01T00:00:00Z")
    path = record_reference(card, tmp_path / "r.yaml", recipe=toy, tier="cross_hw",
                            inputs=[{f"s{i:02d}": "0" * 64 for i in range(30)}])
    data = yaml.safe_load(path.read_text())
    data["source"]["inputs"]["samples"] = samples
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ReferenceFileError) as info:
        load_reference(path)
    assert str(info.value) == (f"{path}: source.inputs.samples holds {len(samples)} input hashes, its n_samples says "
                               "30 (edited by hand?)")


def test_a_reference_of_two_runs_names_its_first_run_in_every_line_of_what_ran_differently(
        toy: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ref80: against a reference of two runs, the lines said 'from the reference's first run: other inputs: ... in
    the reference's run and this run' and, past 1,000 samples, '(the reference's run: 30 samples, ...)': the run whose
    options and inputs it kept is its first, named so in each (``recorded_run``), as diff, the view and the report
    print them."""
    from pinbench.core import reference

    cards = [dataclasses.replace(card, config={"options": {"flow": flow}})
             for card, flow in zip(_three()[:2], ("farneback", "raft"), strict=True)]
    first = {f"s{i:02d}": "0" * 64 for i in range(30)}
    second = {**first, "s03": "1" * 64}
    ref = load_reference(record_reference(cards, tmp_path / "two.yaml", recipe=toy, tier="cross_hw",
                                          inputs=[first, second]), recipe=toy)
    assert diff(cards[1], ref, inputs=second).ran_differently == [
        "from the reference's first run: -o flow: reference farneback, this run raft",
        "from the reference's first run: other inputs: 1 of 30 samples was computed from other inputs in the "
        "reference's first run and this run (the input hash of its task differs: an input file's content or an "
        "option): s03"]
    monkeypatch.setattr(reference, "INPUTS_LISTED", 5)
    ref = load_reference(record_reference(cards, tmp_path / "many.yaml", recipe=toy, tier="cross_hw",
                                          inputs=[first, second]), recipe=toy)
    assert diff(cards[0], ref, inputs=second).ran_differently == [
        "from the reference's first run: other inputs: the digest of the samples' input hashes differs (the "
        "reference's first run: 30 samples, this run: 30; the reference keeps no sample's own)"]


def _edited(source: dict[str, Any], edit: str) -> None:
    where, _, value = edit.partition("=")
    *parents, last = where.split(".")
    for key in parents:
        source = source[key]
    source[last] = yaml.safe_load(value)


@pytest.mark.parametrize(("edit", "field", "what"), [
    ("config=[checkpoint]", "$.source.config", "must be object"),
    ("config.options=[flow]", "$.source.config.options", "must be object"),
    ("config.options.flow={a: 1}", "$.source.config.options.flow",
     "must be string or number or boolean or null or array"),
    ("config.limit=two", "$.source.config.limit", "must be integer or null"),
    ("config.checkpoint=7", "$.source.config.checkpoint", "must be string"),
    ("config.implementation.code=abc", "$.source.config.implementation.code", "must match pattern"),
    ("config.outdir=/tmp/x", "$.source.config", "must not contain {'outdir'} properties"),
    ("inputs.samples.s00=ZZ", "$.source.inputs.samples.s00", "must match pattern ^[0-9a-f]{64}$"),
    ("inputs.samples.s00=7", "$.source.inputs.samples.s00", "must be string"),
])
def test_a_reference_whose_options_or_inputs_have_the_wrong_shape_is_refused_in_one_line(
        toy: Any, tmp_path: Path, edit: str, field: str, what: str) -> None:
    """ref80: source.config and source.inputs.samples were any object: a hand-edited list of options, a number for a
    checkpoint or a hash that is not one loaded, and a diff compared them as if they were a run's."""
    from pinbench.core.reference import ReferenceFileError

    card = dataclasses.replace(run_card(0.8, stamp="2026-01-01T00:00:00Z"), config={
        "checkpoint": "Toy-Nano", "limit": None, "options": {"flow": "raft", "sizes": [1, 2]},
        "implementation": {"recipe_version": "1.0.0", "code": "c" * 64, "image": None}})
    path = record_reference(card, tmp_path / "r.yaml", recipe=toy, tier="cross_hw",
                            inputs=[{f"s{i:02d}": "0" * 64 for i in range(30)}])
    load_reference(path, recipe=toy)
    data = yaml.safe_load(path.read_text())
    _edited(data["source"], edit)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ReferenceFileError) as info:
        load_reference(path)
    assert str(info.value).startswith(f"{path}: schema violation at {field}: {what}")
    assert "\n" not in str(info.value)


def test_a_reference_whose_listed_inputs_are_not_those_of_its_digest_is_refused(toy: Any, tmp_path: Path) -> None:
    """ref80: a hand-edited input hash in source.inputs.samples loaded, and a diff named the samples of other inputs by
    hashes the recorded run never had: the list is checked against the digest record-reference computed from it."""
    from pinbench.core.reference import ReferenceFileError

    card = run_card(0.8, stamp="2026-01-01T00:00:00Z")
    path = record_reference(card, tmp_path / "r.yaml", recipe=toy, tier="cross_hw",
                            inputs=[{f"s{i:02d}": "0" * 64 for i in range(30)}])
    data = yaml.safe_load(path.read_text())
    data["source"]["inputs"]["samples"]["s03"] = "1" * 64
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ReferenceFileError) as info:
        load_reference(path)
    assert str(info.value) == (f"{path}: source.inputs.samples is not the list its sha256 was computed from (the "
                               "digest of its ids and input hashes differs; edited by hand?)")
    data["source"]["inputs"]["samples"] = {f"t{i:02d}": "0" * 64 for i in range(30)}   # other ids, same hashes
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ReferenceFileError, match="is not the list its sha256 was computed from"):
        load_reference(path)


def test_a_runs_derived_records_have_no_input_hash_to_read() -> None:
    """refdiff77: the report passes a run's records, its derived ones among them (none has an input hash), to
    ``input_hashes``."""
    from pinbench.core.derived import DerivedRecord
    from pinbench.core.reference import input_hashes

    derived = DerivedRecord(derived_id="split/a", status="ok", result={"f1": 0.5}, error=None, n_members_ok=1,
                            members_hash="0" * 64, members=("s00",))
    assert input_hashes([SampleRecord("s00", "ok", {"f1": 0.5}, None, "1" * 64, 0.1), derived]) == {"s00": "1" * 64}


def test_a_partial_run_is_not_said_to_have_other_inputs_than_a_digest_only_reference(
        toy: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """review76: a run missing one sample (killed, a shard not run) of the same inputs was told 'other inputs: the
    digest ... differs': the digest covers other samples, so it tells nothing of their inputs."""
    from pinbench.core import reference

    monkeypatch.setattr(reference, "INPUTS_LISTED", 5)
    card = run_card(0.8, stamp="2026-01-01T00:00:00Z")
    hashes = {f"s{i:02d}": "0" * 64 for i in range(30)}
    ref = load_reference(record_reference(card, tmp_path / "r.yaml", recipe=toy, tier="cross_hw", inputs=[hashes]),
                         recipe=toy)
    fewer = {i: h for i, h in hashes.items() if i != "s07"}
    assert not [n for n in diff(card, ref, inputs=fewer).notes if "other inputs" in n]


def test_a_reference_of_two_runs_flags_a_sample_of_other_inputs_in_the_second(toy: Any) -> None:
    """review76: of two runs with the same options, the second's short_8fps re-encoded in place, only the first's
    input hashes were read: the reference averaged two inputs without a flag and kept the first's as its run's."""
    cards = _three()[:2]
    first = {f"s{i:02d}": "0" * 64 for i in range(30)}
    second = {**first, "s03": "1" * 64}
    proposal = propose_reference(cards, recipe=toy, tier="cross_hw", inputs=[first, second])
    assert [line for line in proposal.lines if "other inputs" in line] == [
        "flag: run 2 ran differently from run 1: other inputs: 1 of 30 samples was computed from other inputs in "
        "run 1 and run 2 (the input hash of its task differs: an input file's content or an option): s03"]
    assert proposal.data["source"]["inputs"]["samples"] == first
    assert not [line for line in propose_reference(cards, recipe=toy, tier="cross_hw",
                                                   inputs=[first, None]).lines if "other inputs" in line]
