"""The recipe end to end through run_recipe(cfg): fixture, resume, partial runs, bad inputs, Script 1 mode."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from loose_task import LooseTask

from pinbench.core.check import check_run
from pinbench.core.config import RecipeError, RunConfig, Shard
from pinbench.core.recipe import get_recipe
from pinbench.core.runner import MISSING_ERROR, load_records, read_merged
from pinbench.ops.launch import run_recipe
from pinbench_recipes.camerabench import data_files, fixture, inputs

RECIPE = get_recipe("camerabench")


def _cfg(out: Path, *, checkpoint: str = "", options: dict | None = None, env: dict | None = None,
         **kwargs) -> RunConfig:
    if not kwargs.get("fixture"):
        checkpoint = checkpoint or "my-method"
    return RECIPE.config(checkpoint, out_dir=out, offline=True, options=options or {}, env=env or {}, **kwargs)


def _card(out: Path) -> dict:
    return json.loads((out / "scorecard.json").read_text())


def test_fixture_run_passes_against_its_reference(tmp_path: Path) -> None:
    out = tmp_path / "fx"
    outcome = run_recipe(_cfg(out, fixture=True))
    assert outcome.exit_code == 0, outcome.message
    card = _card(out)
    assert card["status"] == "complete" and card["samples"]["n_expected"] == 20   # the 7 group records are derived
    assert card["derived"]["n_records"] == 7 and "binary_split__" not in (out / "samples.jsonl").read_text()
    assert card["metrics"]["binary/overall_average_precision"]["value"] == pytest.approx(13 / 36)
    assert card["metrics"]["camerabench_average"]["kind"] == "derived"
    assert any("per-task VQA files" in note for note in card["extra"]["notes"])
    assert card["extra"]["caption_metric_upstream_names"]["word_f1"] == "spice"
    assert card["extra"]["data"] == "fixture_data/data"   # from the run directory: a shared report names no home
    assert "PASS" in (out / "diff.txt").read_text()
    # the fixture's Static split has one class: the full run says so too, counted
    assert "1 of its 3 values is degenerate" in outcome.message


def test_a_reference_from_a_copy_without_its_derived_records_says_they_are_missing(tmp_path: Path) -> None:
    """A copy of a run without derived.jsonl was refused with "its records say otherwise": they were never read."""
    from typer.testing import CliRunner

    from pinbench.cli import app

    out = tmp_path / "fx"
    assert run_recipe(_cfg(out, fixture=True)).exit_code == 0
    (out / "derived.jsonl").unlink()
    refused = CliRunner().invoke(app, ["record-reference", str(out), "--out", str(tmp_path / "ref.yaml"), "--dry-run"])
    assert refused.exit_code == 2 and refused.output.splitlines() == [
        f"error: refusing to record from {out / 'scorecard.json'}: its values cannot be checked against its records: "
        f"{out / 'derived.jsonl'}: missing (the scorecard names it as its derived records) (`pinbench check {out}`)"]


def test_an_error_row_makes_the_fixture_run_partial_and_names_the_sample(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    write = fixture.write_fixture

    def write_with_an_error_row(root: Path) -> tuple[Path, Path]:
        data, scores = write(root)
        path = scores / f"classification_scores_{fixture.MODEL_NAME}_Pan_Left.json"
        doc = json.loads(path.read_text())
        doc["scores"][3].update(score=0.0, error="Video file not found: a4.0.0.mp4")
        path.write_text(json.dumps(doc))
        return data, scores

    monkeypatch.setattr(fixture, "write_fixture", write_with_an_error_row)
    out = tmp_path / "fx"
    outcome = run_recipe(_cfg(out, fixture=True))
    card = _card(out)
    assert outcome.exit_code == 2 and card["status"] == "partial"
    failed = card["metrics"]["binary/Pan_Left/average_precision"]["failed"][0]
    assert failed["sample_id"] == "binary_split__Pan_Left"
    assert "binary__Pan_Left__a4.0.0" in failed["error"] and "Video file not found" in failed["error"]
    assert not load_records(out)["binary__Pan_Left__a4.0.0"].ok


def test_a_score_file_edited_since_the_reference_was_recorded_is_named(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A score file edited in place (one score of Pan_Left) changes no option and no folder: a diff against a
    reference recorded from the earlier run FAILed naming nothing that differs. Each file's digest is in the
    provenance, so the diff names the file."""
    from typer.testing import CliRunner

    from pinbench.cli import app

    assert run_recipe(_cfg(tmp_path / "a", fixture=True)).exit_code == 0
    ref = tmp_path / "ref.yaml"
    assert CliRunner().invoke(app, ["record-reference", str(tmp_path / "a"), "--out", str(ref)]).exit_code == 0
    write = fixture.write_fixture
    name = f"classification_scores_{fixture.MODEL_NAME}_Pan_Left.json"

    def write_with_one_score_changed(root: Path) -> tuple[Path, Path]:
        data, scores = write(root)
        doc = json.loads((scores / name).read_text())
        doc["scores"][1]["score"] = 0.0   # a "No" scored 1.0 now 0.0: the split's AP moves
        (scores / name).write_text(json.dumps(doc))
        return data, scores

    monkeypatch.setattr(fixture, "write_fixture", write_with_one_score_changed)
    assert run_recipe(_cfg(tmp_path / "b", fixture=True)).exit_code == 1   # against the shipped fixture reference
    digests = [_card(tmp_path / side)["provenance"]["extra"]["script1"]["files"][name] for side in "ab"]
    diffed = CliRunner().invoke(app, ["diff", str(tmp_path / "b"), "--reference", str(ref)])
    assert diffed.exit_code == 1
    assert (f"ran differently from the reference's run: extra.script1.files.{name}: reference {digests[0][:12]}, "
            f"this run {digests[1][:12]}") in diffed.output


def test_score_only_runs_refuse_data_that_is_not_the_pinned_set(tmp_path: Path) -> None:
    data, scores = fixture.write_fixture(tmp_path / "fx")
    with pytest.raises(RecipeError, match=r"camerabench: .*differs from linzhiqiu/t2v_metrics@7c06208|missing"):
        run_recipe(_cfg(tmp_path / "out", options={"scores": str(scores), "data": str(data)}))


def test_score_only_runs_check_the_official_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data, scores = fixture.write_fixture(tmp_path / "fx")
    # the fixture's files pinned in place of the official manifest: they pass the byte check, not the counts
    manifest = data_files.DataManifest(repo="o/r", commit="c" * 40, path="camerabench/data", files={
        p.relative_to(data).as_posix(): (data_files.sha256_file(p), p.stat().st_size)
        for p in data.rglob("*") if p.is_file()})
    monkeypatch.setattr(data_files, "load_manifest", lambda: manifest)
    with pytest.raises(RecipeError, match="is not the official test set: binary Move_Down: 0 samples"):
        run_recipe(_cfg(tmp_path / "out", options={"scores": str(scores), "data": str(data)}))


def test_script1_needs_a_known_checkpoint_or_score_files(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="runs Script 1 for qwen2.5-vl-7b, qwen2.5-vl-7b-cam-motion only"):
        run_recipe(_cfg(tmp_path / "out", checkpoint="gpt-4o"))


def test_script1_offline_says_what_to_fetch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(RecipeError, match="pinbench fetch camerabench"):
        run_recipe(_cfg(tmp_path / "out", checkpoint="qwen2.5-vl-7b"))


def test_the_judge_needs_captions_and_a_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(RecipeError, match="needs OPENAI_API_KEY"):
        run_recipe(_cfg(tmp_path / "a", fixture=True, options={"gpt_judge": "1"}))
    with pytest.raises(RecipeError, match="add caption to -o families"):
        run_recipe(_cfg(tmp_path / "b", fixture=True, options={"gpt_judge": "1", "families": "binary,vqa"}))


def test_unknown_options_and_families_are_refused(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="unknown option"):
        _cfg(tmp_path, fixture=True, options={"family": "binary"})
    with pytest.raises(RecipeError, match="'retrieval' not in binary, vqa, caption"):
        _cfg(tmp_path, fixture=True, options={"families": "binary,retrieval"})


def test_limit_takes_the_first_samples_of_every_group(tmp_path: Path) -> None:
    out = tmp_path / "smoke"
    outcome = run_recipe(_cfg(out, fixture=True, limit=1))
    card = _card(out)
    assert card["metrics"]["binary/overall_average_precision"]["n_expected"] == 3
    # one sample per split is a single class: AP 0 by upstream's rule, scored and complete
    assert card["metrics"]["binary/Move_In/average_precision"]["value"] == 0.0
    assert outcome.exit_code in (0, 1, 3)  # compared (or not) with the fixture reference, never "incomplete"
    # ... and said: in the scorecard (which splits), on the console and in diff.txt (how many), in the report
    overall = card["metrics"]["binary/overall_average_precision"]
    assert [d["sample_id"] for d in overall["degenerate"]] == [f"binary_split__{s}" for s in
                                                               ("Move_In", "Pan_Left", "Static")]
    assert {d["reason"] for d in overall["degenerate"]} == {
        "a split with one class only: AP and ROC AUC are 0.0 by upstream's rule, and count in the means"}
    said = "3 of its 3 values are degenerate (a split with one class only"
    assert said in outcome.message and said in (out / "diff.txt").read_text()
    report = (out / "report" / "index.html").read_text()
    assert "binary/overall_average_precision: 3 of its 3 values are degenerate" in report
    assert not any("degenerate" in p for p in check_run(out).problems)  # (a fixture run of 6 of its 20 samples)
    overall.pop("degenerate")  # a scorecard that no longer says so is not what its records give
    (out / "scorecard.json").write_text(json.dumps(card))
    assert any("binary/overall_average_precision: 0 degenerate values in the scorecard, 3 in the records" in p
               for p in check_run(out).problems)


def test_script1_checkpoints_map_to_pins() -> None:
    pins = inputs.pins()
    for model in inputs.SCRIPT1_CHECKPOINTS.values():
        assert model.weights_pin in pins.huggingface
    assert inputs.SCRIPT1_CHECKPOINTS["qwen2.5-vl-7b-cam-motion"].checkpoint == "chancharikm/qwen2.5-vl-7b-cam-motion"
    assert set(RECIPE.checkpoints) == {*inputs.SCRIPT1_CHECKPOINTS, "gpt-4o"}


def test_a_script1_shard_stores_its_outputs_and_leaves_script2_to_the_merge(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """pinbench submit's array task: Script 1 for its shard only; Script 2 and the scorecard are the finish job's."""
    from pinbench.core.config import Shard
    from pinbench_recipes.camerabench import run as run_module

    calls = []

    def script1_double(run, model, data):  # test double for the GPU scorer's step: four samples through the run
        calls.append(run.shard)
        tasks = [LooseTask(name) for name in "abcd"]
        return run.score(tasks, lambda task: {"score": 0.5}, folder="script1", part="generation"), {}

    monkeypatch.setattr(inputs, "script1_model", lambda cfg: object())
    monkeypatch.setattr(run_module, "_script1", script1_double)
    out = tmp_path / "shard"
    outcome = run_recipe(_cfg(out, fixture=True, shard=Shard(1, 3), skip_scoring=True))
    assert calls == [Shard(1, 3)] and outcome.exit_code == 0 and outcome.scorecard_path is None
    assert "shard 1/3 of camerabench: 1 sample: 1 done, 0 reused, 0 failed" in outcome.message
    assert (out / "script1" / "samples" / "shard-1-of-3.jsonl").is_file()
    assert not (out / "scorecard.json").exists() and not (out / "samples").exists()


def test_a_score_only_run_imports_no_network_stack_nltk_or_scikit_learn(tmp_path: Path) -> None:
    """The fixture run (binary, VQA and captions from score files), in a fresh interpreter: what it must not import
    (each was on this path once: the caption metrics' NLTK with scikit-learn and SciPy, 1.3 s; urllib.request
    with http.client, ssl and email, 12 ms; numpy.ma through np.unique, 8 ms)."""
    import subprocess
    import sys

    import numpy as np

    unwanted = ["nltk", "rouge_score", "sklearn", "scipy", "urllib.request", "numpy.ma", "torch"]
    if int(np.__version__.split(".")[0]) < 2:
        unwanted.remove("numpy.ma")   # numpy 1.x's own __init__ imports it (1.26.4, camerabench's lock)
    code = ("import sys\nfrom pinbench.cli import main\n"
            f"try:\n    main(['run', 'camerabench', '--fixture', '--out', {str(tmp_path / 'run')!r}])\n"
            "except SystemExit as exc:\n    print('EXIT', exc.code)\n"
            f"print('LOADED', sorted(m for m in {unwanted!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "EXIT 0" in out and "LOADED []" in out, out[-2000:]
    assert _card(tmp_path / "run")["metrics"]["caption/rouge_l"]["n_scored"] > 0


def test_the_finish_starts_without_the_score_files_or_numpy(tmp_path: Path) -> None:
    """What a score-only run holds when its finish starts, in a fresh interpreter: the score files' parsed rows are
    not held (the finish's peak memory would hold them beside its own: 11,222 rows of the test set), and numpy (12 MB)
    is not imported yet (the finish's metrics import it; the samples' scoring never needs it)."""
    import subprocess
    import sys

    code = ("import sys\nfrom pinbench.cli import main\nfrom pinbench.core.run import Run\n"
            "from pinbench_recipes.camerabench import inputs\n"
            "finish = Run.finish\n"
            "def held(self, *args, **kwargs):\n"
            "    print('HELD', inputs._score_outputs.cache_info().currsize, 'numpy' in sys.modules)\n"
            "    return finish(self, *args, **kwargs)\n"
            "Run.finish = held\n"
            f"try:\n    main(['run', 'camerabench', '--fixture', '--out', {str(tmp_path / 'run')!r}])\n"
            "except SystemExit as exc:\n    print('EXIT', exc.code)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "EXIT 0" in out and "HELD 0 False" in out, out[-2000:]


def test_a_merge_without_one_of_its_shards_stays_consistent(tmp_path: Path) -> None:
    """A merge after only shard 0 of 2 ran: every sample of the lost shard counts against the run by name, and the
    derived records name only records samples.jsonl holds (an attempt to leave the lost samples out of it, counted
    missing, left the derived records naming samples with no record: pinbench check found 7 such problems)."""
    out = tmp_path / "run"
    assert run_recipe(_cfg(out, fixture=True, shard=Shard(0, 2))).exit_code == 0
    assert run_recipe(_cfg(out, fixture=True, skip_scoring=True)).exit_code == 2
    card = _card(out)["samples"]
    assert card["n_ok"] + card["n_failed"] + card["n_missing"] == card["n_expected"] > card["n_ok"]
    lost = [r for r in read_merged(out / "samples.jsonl") if r.error and r.error.startswith(MISSING_ERROR)]
    assert lost and len(lost) == card["n_expected"] - card["n_ok"]
    assert [p for p in check_run(out).problems if "derived" in p or "samples" in p] == []


def test_score_files_of_another_model_than_the_checkpoint_are_refused_or_noted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """gpt-4o's files run as ``--checkpoint qwen2.5-vl-7b`` were scored and diffed against Qwen's leaderboard row
    without a word. Files of another of the recipe's checkpoints under one with a reference are refused (the diff
    would judge that model's numbers against the wrong row); files of a model the recipe does not name give a
    one-line warning naming the file and both names, printed and kept in the scorecard's notes. Files of the
    checkpoint's own model say nothing."""
    data, scores = fixture.write_fixture(tmp_path / "fx")
    load = inputs.load_data
    monkeypatch.setattr(inputs, "data_dir", lambda cfg, download: data)   # the fixture's set as the pinned one
    monkeypatch.setattr(inputs, "load_data", lambda cfg, root, official: load(cfg, root, official=False))
    gpt = tmp_path / "gpt-4o"
    gpt.mkdir()
    for path in scores.glob("*.json"):   # the fixture's files, as gpt-4o's
        doc = json.loads(path.read_text())
        doc["metadata"]["model_name"] = "gpt-4o"
        (gpt / path.name).write_text(json.dumps(doc))
    refused = (r"camerabench: classification_scores_fixture-method_\w+\.json: the score files are of model "
               r"'gpt-4o', not of --checkpoint 'qwen2.5-vl-7b': their numbers would be diffed against "
               r"qwen2.5-vl-7b.yaml, that checkpoint's leaderboard row; pass --checkpoint gpt-4o")
    with pytest.raises(RecipeError, match=refused):
        run_recipe(_cfg(tmp_path / "qwen", checkpoint="qwen2.5-vl-7b", options={"scores": str(gpt)}))
    assert run_recipe(_cfg(tmp_path / "mine", checkpoint="my-method", options={"scores": str(scores)})).exit_code == 0
    note = r"classification_scores_fixture-method_\w+\.json: the score files are of model 'fixture-method', not of " \
           r"--checkpoint 'my-method'"
    assert [n for n in _card(tmp_path / "mine")["extra"]["notes"] if re.fullmatch(note, n)]
    assert re.search(f"^WARNING camerabench: {note}$", capsys.readouterr().out, re.MULTILINE)
    run_recipe(_cfg(tmp_path / "row", checkpoint="gpt-4o", options={"scores": str(scores)}))   # not refused
    assert "not of --checkpoint 'gpt-4o'" in _card(tmp_path / "row")["extra"]["notes"][-1]
    own = _cfg(tmp_path / "own", checkpoint="Fixture-Method", options={"scores": str(scores)})
    assert run_recipe(own).exit_code == 0
    assert not [n for n in _card(tmp_path / "own")["extra"]["notes"] if "not of --checkpoint" in n]
