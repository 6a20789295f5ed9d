"""The pinbench CLI: argument checks, diff exit codes, record-reference, recipe entry modules."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest
import yaml
from stopped import stop
from typer.testing import CliRunner

from pinbench import cli
from pinbench.core.provenance import collect_provenance
from pinbench.core.recipe import get_recipe
from pinbench.core.rundir import IDENTITY_FILE
from pinbench.core.runner import SampleRecord, write_records
from pinbench.core.scorecard import MetricSpec, build_scorecard, write_scorecard


def Spec(name: str, aggregation: str = "mean", *args, direction: str = "higher", **kwargs) -> MetricSpec:  # noqa: N802
    return MetricSpec(name, aggregation, *args, direction=direction, **kwargs)  # as a recipe.yaml declares it


GOLDEN = Path(__file__).parent / "golden"
runner = CliRunner()


def _complete_scorecard(tmp_path: Path) -> Path:
    records = [SampleRecord(sample_id=f"s{i}", status="ok", result={"f1": 0.5 + 0.1 * i, "err": 0.2},
                            error=None, input_hash="0" * 64, seconds=0.1) for i in range(3)]
    card = build_scorecard(
        recipe="toy-bench", recipe_version="1.0.0", checkpoint="Toy-Nano", mode="smoke",
        metrics=[Spec("f1"), Spec("err", aggregation="median")], records=records, n_expected=3,
        provenance=collect_provenance(pins={}), config={"limit": 3}, timings={"score": 1.0},
    )
    write_records(records, tmp_path / "samples.jsonl")
    return write_scorecard(card, tmp_path / "scorecard.json")


def _dynamic_degree_scorecard(tmp_path: Path, values: tuple[float, ...] = (0.5, 0.75, 1.0)) -> Path:
    """A complete smoke scorecard of the installed dynamic-degree recipe (its declaration gives directions)."""
    records = [SampleRecord(sample_id=f"v{i}", status="ok", result={"dynamic_degree": v}, error=None,
                            input_hash="0" * 64, seconds=0.1) for i, v in enumerate(values)]
    recipe = get_recipe("dynamic-degree")
    card = build_scorecard(
        recipe=recipe.name, recipe_version=recipe.version, checkpoint="Toy-Nano", mode="smoke",
        metrics=[MetricSpec("dynamic_degree").with_info(recipe.metric_info("dynamic_degree"))], records=records,
        n_expected=len(records), provenance=collect_provenance(pins={}), config={"limit": 3}, timings={"score": 1.0},
    )
    write_records(records, tmp_path / "samples.jsonl")
    return write_scorecard(card, tmp_path / "scorecard.json")


def test_diff_of_a_partial_run_exits_incomplete() -> None:
    result = runner.invoke(cli.app, ["diff", str(GOLDEN / "scorecard.json"),
                                     "--reference", str(GOLDEN / "reference.yaml")])
    assert result.exit_code == 2, result.output
    assert "INCOMPLETE" in result.output and "seg/miou" in result.output


def test_diff_against_another_recipes_reference_is_a_mismatch(tmp_path: Path) -> None:
    """Exit 3 (the reference does not apply), as before recipe declarations; the file is still checked
    against its own recipe's declaration."""
    card = _dynamic_degree_scorecard(tmp_path)
    other = Path(__file__).resolve().parents[1] / "recipes" / "remembench" / "references" / "fixture.yaml"
    result = runner.invoke(cli.app, ["diff", str(card), "--reference", str(other)])
    assert result.exit_code == 3, result.output
    assert f"recipe mismatch: reference ({other}) is for 'remembench', scorecard is 'dynamic-degree'" in result.output
    widened = yaml.safe_load(other.read_text())
    widened["metrics"]["t2v/clip"]["tolerance"] = {"abs": 0.5}
    (tmp_path / "wide.yaml").write_text(yaml.safe_dump(widened))
    result = runner.invoke(cli.app, ["diff", str(card), "--reference", str(tmp_path / "wide.yaml")])
    assert "wider than remembench's same_hw default ±0.001" in str(result.exception)  # main() exits 2 on it


def test_record_reference_then_diff_passes(tmp_path: Path) -> None:
    card = _dynamic_degree_scorecard(tmp_path)
    out = tmp_path / "Toy-Nano.smoke.yaml"
    result = runner.invoke(cli.app, ["record-reference", str(card), "--out", str(out)])
    assert result.exit_code == 0, result.output
    recorded = yaml.safe_load(out.read_text())
    assert recorded["source"]["kind"] == "trusted_run" and recorded["mode"] == "smoke"
    assert recorded["n_samples"] == 3 and recorded["tier"] == "same_hw"
    # From the recipe's declaration (same_hw default), never from another reference such as fixture.yaml.
    metric = recorded["metrics"]["dynamic_degree"]
    assert metric["tolerance"] == {"abs": 0.005} and metric["direction"] == "higher" and metric["primary"]
    result = runner.invoke(cli.app, ["diff", str(card), "--reference", str(out)])
    assert result.exit_code == 0, result.output
    # A 600-video full reference does not apply to a 3-video smoke run.
    recorded.update(mode="full", n_samples=600)
    full = tmp_path / "full.yaml"
    full.write_text(yaml.safe_dump(recorded))
    result = runner.invoke(cli.app, ["diff", str(card), "--reference", str(full)])
    assert result.exit_code == 3, result.output


@pytest.mark.parametrize(("tolerance", "message"), [
    ("dynamic_degree=abs:nan", "finite"),
    ("dynamic_degree=abs:inf", "finite"),
    ("dynamic_degree=abs:-1", ">= 0"),
    ("dynamic_degree=abs:0.5", "wider than dynamic-degree's same_hw default"),
    ("psnr=abs:0.1", "not in the scorecard: psnr"),
    ("dynamic_degree=0.1", "not abs:X or rel:X"),
])
def test_record_reference_refuses_bad_tolerances_in_one_line(tmp_path: Path, tolerance: str, message: str) -> None:
    card = _dynamic_degree_scorecard(tmp_path)
    out = tmp_path / "ref.yaml"
    result = runner.invoke(cli.app, ["record-reference", str(card), "--out", str(out), "--tolerance", tolerance])
    assert result.exit_code == 2, result.output
    assert message in result.output and not out.exists()


def test_record_reference_refuses_a_partial_run(tmp_path: Path) -> None:
    result = runner.invoke(cli.app, ["record-reference", str(GOLDEN / "scorecard.json"), "--out",
                                     str(tmp_path / "r.yaml")])
    assert result.exit_code != 0
    assert not (tmp_path / "r.yaml").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["run", "dynamic-degree", "--checkpoint", "x", "--shard", "4/4"], "0-based"),
    (["run", "dynamic-degree"], "--checkpoint is required"),
    (["run", "dynamic-degree", "--checkpoint", "x", "--runtime", "slurm"], "--runtime must be"),
    (["run", "no-such-recipe", "--checkpoint", "x"], "unknown recipe"),
    (["run", "dynamic-degree", "--checkpoint", "x", "-o", "novalue"], "KEY=VALUE"),
    (["run", "dynamic-degree", "--checkpoint", "x", "--shard", "0/2", "--skip-scoring"],
     "--shard with --skip-scoring computes nothing"),
    (["run", "mind", "--fixture", "--shard", "0/2", "--skip-generation", "--skip-scoring"],
     "error: --shard with --skip-generation and --skip-scoring computes nothing: drop one of them"),
])
def test_run_rejects_bad_arguments_in_one_line(args: list[str], message: str) -> None:
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 2
    assert message in result.output


def test_list_shows_every_recipe() -> None:
    result = runner.invoke(cli.app, ["list"])
    assert result.exit_code == 0, result.output
    for name in ("paibench-c", "remembench", "dynamic-degree"):
        assert name in result.output


def test_main_builds_only_the_command_it_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """typer builds every command's parameters on each call (50-85 ms); main hands it an app holding only the
    command named, so it builds one. The whole app stays for an option, a name no command has (its "Did you mean"
    needs the others) and no name at all."""
    import typer

    def names(argv: list[str]) -> list[str]:
        return sorted(typer.main.get_command(cli._app_for(argv)).commands)   # type: ignore[attr-defined]

    every = names([])
    assert len(every) > 20 and {"run", "rollouts", "record-reference", "list"} <= set(every)
    assert names(["run", "dynamic-degree", "--fixture"]) == ["run"]
    assert names(["record-reference", "x"]) == ["record-reference"]
    assert names(["rollouts", "check"]) == ["rollouts"]
    assert names(["--help"]) == names(["runn"]) == every
    with pytest.raises(SystemExit):
        cli.main(["runn"])
    assert "No such command 'runn'. Did you mean 'run'?" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        cli.main(["list"])
    assert info.value.code == 0 and "dynamic-degree" in capsys.readouterr().out


def test_recipe_main_inserts_the_recipe_name(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    monkeypatch.setattr(cli, "main", lambda argv=None: seen.append(argv))
    cli.recipe_main("toy-bench", ["run", "--fixture"])
    cli.recipe_main("toy-bench", ["diff", "scorecard.json"])
    assert seen == [["run", "toy-bench", "--fixture"], ["diff", "scorecard.json"]]


def test_scorecard_written_by_cli_run_has_no_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_secretsecretsecret1234")
    card = _complete_scorecard(tmp_path)
    assert "hf_secretsecretsecret1234" not in card.read_text()
    assert json.loads(card.read_text())["status"] == "complete"


def test_record_reference_never_overwrites_silently(tmp_path: Path) -> None:
    card = _dynamic_degree_scorecard(tmp_path)
    out = tmp_path / "ref.yaml"
    args = ["record-reference", str(card), "--out", str(out)]
    assert runner.invoke(cli.app, args).exit_code == 0
    before = out.read_text()
    result = runner.invoke(cli.app, [*args, "--tolerance", "dynamic_degree=abs:0.001"])
    assert result.exit_code == 2 and "already exists" in result.output
    assert out.read_text() == before
    assert runner.invoke(cli.app, [*args, "--force", "--tolerance", "dynamic_degree=abs:0.001"]).exit_code == 0
    assert yaml.safe_load(out.read_text())["metrics"]["dynamic_degree"]["tolerance"] == {"abs": 0.001}


def test_a_non_numeric_gpus_variable_only_affects_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUS", "all")
    assert runner.invoke(cli.app, ["list"]).exit_code == 0
    result = runner.invoke(cli.app, ["run", "dynamic-degree", "--fixture"])
    assert result.exit_code == 2 and "gpus" in result.output.lower()


def test_report_uses_each_runs_own_reference_and_samples(tmp_path: Path) -> None:
    runs = []
    for name in ("a", "b"):
        run_dir = tmp_path / name
        run_dir.mkdir()
        runs.append(_complete_scorecard(run_dir))
    # A stray record left in a run folder is not part of that run's samples.jsonl.
    (tmp_path / "a" / "samples").mkdir()
    (tmp_path / "a" / "samples" / "stray.json").write_text("{}")
    (tmp_path / "a" / "samples.jsonl").write_text("")
    result = runner.invoke(cli.app, ["report", *map(str, runs), "--out", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output
    html = (tmp_path / "report" / "index.html").read_text()
    assert "stray" not in html


def test_a_report_is_written_only_into_a_new_or_empty_folder_or_an_earlier_report(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    card = str(_complete_scorecard(tmp_path / "run"))
    paper = tmp_path / "paper"   # the user's: its index.html was replaced and figures/fig1.png deleted, exit 0
    (paper / "figures").mkdir(parents=True)
    (paper / "figures" / "fig1.png").write_bytes(b"mine")
    (paper / "index.html").write_text("my page")
    result = runner.invoke(cli.app, ["report", card, "--out", str(paper)])
    assert str(result.exception) == (f"{paper}: a folder that is no earlier report (it holds figures, index.html); "
                                     "a report replaces its index.html and figures/: name a new or empty folder")
    assert (paper / "index.html").read_text() == "my page" and (paper / "figures" / "fig1.png").read_bytes() == b"mine"
    (tmp_path / "file").write_text("x")
    result = runner.invoke(cli.app, ["report", card, "--out", str(tmp_path / "file")])
    assert str(result.exception) == f"{tmp_path / 'file'}: a regular file, not a folder; name a new folder for the " \
                                    "report"
    pictures = tmp_path / "pictures"  # the user's, linked as an earlier report's figures/: its PNGs were deleted
    pictures.mkdir()
    (pictures / "holiday.png").write_bytes(b"mine")
    assert runner.invoke(cli.app, ["report", card, "--out", str(tmp_path / "linked")]).exit_code == 0
    shutil.rmtree(tmp_path / "linked" / "figures", ignore_errors=True)
    (tmp_path / "linked" / "figures").symlink_to(pictures)
    result = runner.invoke(cli.app, ["report", card, "--out", str(tmp_path / "linked")])
    assert str(result.exception) == (f"{tmp_path / 'linked' / 'figures'}: a symlink (to {pictures}), not a folder "
                                     "of the report's own: a report deletes the files it did not write under "
                                     "figures/; remove it, or name a new folder")
    assert (pictures / "holiday.png").read_bytes() == b"mine"
    (tmp_path / "empty").mkdir()
    for out in ("new", "new", "empty"):   # a new folder, that report again, an empty folder
        assert runner.invoke(cli.app, ["report", card, "--out", str(tmp_path / out)]).exit_code == 0
    (tmp_path / "new" / ".pinbench-report").unlink()   # a report from before the mark is still a report
    assert runner.invoke(cli.app, ["report", card, "--out", str(tmp_path / "new")]).exit_code == 0


def test_a_report_of_other_runs_never_replaces_a_runs_own_report_page(tmp_path: Path) -> None:
    """``report A B --out A/report`` replaced A's own page with theirs, exit 0, and ``pinbench check A`` still found A
    consistent; ``report A --view --out A/report`` wrote A/report/view: both refused in one line; a report of A alone
    (its very page) is written there."""
    runs = [str(tmp_path / name) for name in ("a", "b")]
    for run in runs:
        assert runner.invoke(cli.app, ["run", "dynamic-degree", "--fixture", "--out", run]).exit_code == 0
    own = tmp_path / "a" / "report"
    page = (own / "index.html").read_bytes()
    assert runner.invoke(cli.app, ["report", runs[0], "--out", str(own)]).exit_code == 0
    for command, n in ((["report", *runs, "--out"], "2 runs"), (["report", runs[1], "--out"], "1 run"),
                       (["compare", *runs, "--report"], "2 runs")):
        result = runner.invoke(cli.app, [*command, str(own)])
        assert str(result.exception) == (f"{own}: the report page of the run in {tmp_path / 'a'}, which this report of "
                                         f"{n} would replace; name another folder")
        assert (own / "index.html").read_bytes() == page
    # with --view, a report of A alone is another page, with a view/ folder inside A's directory, which a run has not
    result = runner.invoke(cli.app, ["report", runs[0], "--view", "--out", str(own)])
    assert str(result.exception) == (f"{own}: the report page of the run in {tmp_path / 'a'}, which has no view "
                                     "folder: drop --view, or name another folder for a report with one")
    assert (own / "index.html").read_bytes() == page and not (own / "view").exists()
    assert runner.invoke(cli.app, ["report", *runs, "--out", str(tmp_path / "both")]).exit_code == 0


def test_demo_reports_the_real_failures_not_the_missing_report(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    """Issue #15.2: with every fixture failing there is no scorecard; the report's own error must not
    replace the fixture failures."""
    from pinbench.ops import launch

    def denied(cfg) -> None:
        raise PermissionError(13, "Permission denied", str(cfg.out_dir / "samples"))

    monkeypatch.setattr(launch, "run_recipe", denied)
    result = runner.invoke(cli.app, ["demo", "--out", str(tmp_path / "demo"), "--recipe", "dynamic-degree",
                                     "--recipe", "remembench"])
    assert result.exit_code == 1
    assert "no scorecards" not in result.output and "not written (no fixture run produced a scorecard)" in result.output
    assert "fixture runs failed: dynamic-degree ([Errno 13] Permission denied:" in result.output
    assert "remembench ([Errno 13] Permission denied:" in result.output


def test_demo_fails_a_fixture_whose_scorecard_shows_no_interval(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    """Issue #14: every fixture run shows intervals. Test double: run_recipe writes a dynamic-degree fixture
    scorecard of ``n`` samples (one sample: nothing to resample, so no interval)."""
    from pinbench.core.recipe import get_recipe
    from pinbench.core.run import RunOutcome
    from pinbench.ops import launch

    def fixture_of(n: int):
        def run(cfg) -> RunOutcome:
            recipe = get_recipe(cfg.recipe)
            records = [SampleRecord(f"v{i}", "ok", {"preview/dynamic_degree": 0.5 + 0.1 * i}, None, "0" * 64, 0.1)
                       for i in range(n)]
            metrics = [MetricSpec("preview/dynamic_degree").with_info(recipe.metric_info("preview/dynamic_degree"))]
            card = build_scorecard(recipe=recipe.name, recipe_version=recipe.version, checkpoint="fixture",
                                   mode="fixture",
                                   metrics=metrics, records=records, n_expected=n,
                                   provenance=collect_provenance(pins={}), config={}, timings={})
            (cfg.out_dir / "samples.jsonl").parent.mkdir(parents=True, exist_ok=True)
            (cfg.out_dir / "samples.jsonl").write_text("".join(json.dumps(r.to_json()) + "\n" for r in records))
            return RunOutcome(scorecard_path=write_scorecard(card, cfg.out_dir / "scorecard.json"), exit_code=0)
        return run

    from pinbench.core import check

    # The test double writes a scorecard alone (no report; 3 samples where the fixture reference has 5): the
    # demo's own pinbench check of it is left out here, it is not what this test is about.
    monkeypatch.setattr(check, "check_run", lambda run_dir: check.CheckResult(Path(run_dir)))
    monkeypatch.setattr(launch, "run_recipe", fixture_of(1))
    result = runner.invoke(cli.app, ["demo", "--out", str(tmp_path / "one"), "--recipe", "dynamic-degree"])
    assert result.exit_code == 1, result.output
    assert "fixture runs failed: dynamic-degree (no metric of its fixture scorecard has a 95% interval" in result.output
    monkeypatch.setattr(launch, "run_recipe", fixture_of(3))
    result = runner.invoke(cli.app, ["demo", "--out", str(tmp_path / "three"), "--recipe", "dynamic-degree"])
    assert result.exit_code == 0, result.output


def test_demo_into_an_unwritable_directory_says_what_to_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from pinbench.ops import writable

    (tmp_path / "runs").mkdir()
    monkeypatch.setattr(writable.os, "access", lambda path, mode: Path(path) != tmp_path / "runs")  # a test double
    result = runner.invoke(cli.app, ["demo", "--out", str(tmp_path / "runs" / "demo")])
    assert result.exit_code == 2
    cause, fix = result.output.strip().splitlines()
    assert cause.startswith(f"error: {tmp_path / 'runs' / 'demo'}: 1 folder owned by uid ")
    assert fix.startswith("error: fix: `sudo chown -R ") and f"{tmp_path / 'runs'} && chmod -R u+rwX" in fix


@pytest.mark.parametrize(("args", "message"), [
    (["paibench-c", "--base-image", "mirror.lab/cuda:12"], "has 2 images; name one as DOCKERFILE=IMAGE"),
    (["dynamic-degree", "--base-image", "Dockerfile.gpu=x"], "has no Dockerfile.gpu"),
])
def test_build_base_image_mistakes_are_one_line(args: list[str], message: str) -> None:
    result = runner.invoke(cli.app, ["build", *args])
    assert result.exit_code == 2 and message in result.output


def test_docker_run_with_too_few_visible_gpus_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    result = runner.invoke(cli.app, ["run", "dynamic-degree", "--checkpoint", "x", "-o", f"videos={tmp_path}",
                                     "--runtime", "docker", "--gpus", "2", "--skip-doctor"])
    assert result.exit_code == 2 and "--gpus 2 but CUDA_VISIBLE_DEVICES='3' makes 1 GPU(s) visible" in result.output


@pytest.mark.parametrize("recipe", ["mind", "remembench"])
def test_a_docker_run_of_a_generator_no_image_holds_is_refused_first(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path, recipe: str) -> None:
    """`run mind --fixture --runtime docker --generator ...` ran the fixture in the scoring image without the
    generator (the flag was not passed on) and filed the fixture's own rollouts under it; now one line names the
    way out, before the doctor, a claim on --out or any container."""
    import pinbench.ops.docker_runtime as docker_runtime

    monkeypatch.setattr(docker_runtime, "docker_client", lambda: pytest.fail("no engine is asked"))
    out = tmp_path / "run"
    metrics = ["-o", "metrics=lcm,visual,dino,action"] if recipe == "mind" else []   # gsc: no generated mirror
    result = runner.invoke(cli.app, ["run", recipe, "--fixture", "--runtime", "docker", "--out", str(out),
                                     "--generator", "python:my_model.gen:make", *metrics])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert f"would run in pinbench/{recipe}:" in result.output and "--generator-image IMAGE" in result.output
    assert "--skip-generation" in result.output and not out.exists()
    result = runner.invoke(cli.app, ["run", recipe, "--fixture", "--out", str(out), "--generator", "static",
                                     "--generator-image", "lab/model:1", *metrics])
    assert result.exit_code == 2 and "--generator-image applies to --runtime docker" in result.output


def test_a_docker_run_does_not_look_for_a_command_generators_program_here(monkeypatch: pytest.MonkeyPatch,
                                                                           tmp_path: Path) -> None:
    """The program runs in the generator's image: a run here refuses one not on PATH before it starts
    (``generation.check_program``), a --runtime docker run leaves that to the container's own run."""
    import pinbench.ops.docker_runtime as docker_runtime

    ran = []
    monkeypatch.setattr(docker_runtime, "run_in_docker", lambda recipe, cfg, **_: ran.append(cfg.generator) or 0)
    generator = "command:nonexistent-binary {request} {out}"
    result = runner.invoke(cli.app, ["run", "remembench", "--fixture", "--runtime", "docker", "--out",
                                     str(tmp_path / "run"), "--generator", generator, "--generator-image", "lab/m:1"])
    assert result.exit_code == 0 and ran == [generator], result.output
    result = runner.invoke(cli.app, ["run", "remembench", "--fixture", "--out", str(tmp_path / "run"),
                                     "--generator", generator])
    assert result.exit_code == 2 and result.output == ("error: --generator command: program 'nonexistent-binary' is "
                                                       "not on PATH; install it, or give its path\n"), result.output


def test_a_docker_run_hands_skip_doctor_to_its_stages(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`--runtime docker --skip-doctor` reaches run_in_docker (its stages then skip their own doctor:
    test_docker_runtime.test_skip_doctor_reaches_every_run_stage)."""
    import pinbench.ops.docker_runtime as docker_runtime

    asked: list[bool] = []
    monkeypatch.setattr(docker_runtime, "run_in_docker",
                        lambda recipe, cfg, **kwargs: asked.append(kwargs["skip_doctor"]) or 0)
    (tmp_path / "videos").mkdir()
    run = ["run", "dynamic-degree", "--checkpoint", "x", "-o", f"videos={tmp_path / 'videos'}", "--runtime", "docker",
           "--gpus", "0", "--out", str(tmp_path / "run"), "--skip-doctor"]
    result = runner.invoke(cli.app, run)
    assert result.exit_code == 0 and asked == [True], result.output


@pytest.mark.parametrize("image", ["", " ", "lab/model:1 --rm", "Lab Model", "lab/model;id", "lab/model:"])
def test_a_generator_image_that_is_no_image_reference_is_refused_before_all_else(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, image: str) -> None:
    """``--generator-image ''`` (or one with a space) reached the Docker engine, which refused it in its own words."""
    import pinbench.ops.docker_runtime as docker_runtime

    monkeypatch.setattr(docker_runtime, "docker_client", lambda: pytest.fail("no engine is asked"))
    out = tmp_path / "run"
    result = runner.invoke(cli.app, ["run", "mind", "--fixture", "--runtime", "docker", "--out", str(out),
                                     "--generator", "python:my_model.gen:make", "--generator-image", image])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert result.output.startswith(f"error: --generator-image {image!r}: not an image reference (e.g. lab/model:1")
    assert not out.exists()


def test_the_cli_collects_young_objects_every_twenty_thousand_allocations(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run builds its inputs and records in bulk: at Python's default (700) it spends a tenth of its time in full
    collections (``cli.YOUNG_COLLECTION_EVERY``); the older generations keep their thresholds."""
    import gc

    set_to = []
    monkeypatch.setattr(gc, "set_threshold", lambda *values: set_to.append(values))
    with pytest.raises(SystemExit) as exited:
        cli.main(["--help"])
    assert exited.value.code == 0
    assert set_to == [(20_000, *gc.get_threshold()[1:])]


def test_diff_and_report_take_a_run_directory_as_check_table_compare_and_view_do(tmp_path: Path) -> None:
    card = _dynamic_degree_scorecard(tmp_path)
    by_file = runner.invoke(cli.app, ["diff", str(card)])
    by_dir = runner.invoke(cli.app, ["diff", str(tmp_path)])
    assert by_dir.exit_code == by_file.exit_code == 0 and by_dir.output == by_file.output, by_dir.output
    report = runner.invoke(cli.app, ["report", str(tmp_path), "--out", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    assert "Toy-Nano" in (tmp_path / "report" / "index.html").read_text()
    empty = tmp_path / "empty"
    empty.mkdir()
    missing = runner.invoke(cli.app, ["diff", str(empty)])
    assert str(missing.exception) == f"{empty / 'scorecard.json'}: file not found"   # main() prints it, one line


def test_a_report_of_a_run_without_its_samples_is_refused_naming_the_file(tmp_path: Path) -> None:
    """A run whose samples.jsonl was removed was reported, exit 0, on a page that said only "No per-sample records
    given." where check, compare and view name the missing file: report names it too, in one line, exit 2, and the
    pinbench-run.json that makes the folder a run directory (a lone scorecard beside a stray one was refused
    without a word of why a scorecard copied alone is reported and this one was not)."""
    card = _dynamic_degree_scorecard(tmp_path / "run")
    (tmp_path / "run" / "samples.jsonl").unlink()
    (tmp_path / "run" / IDENTITY_FILE).write_text("{}")   # a run directory's
    result = runner.invoke(cli.app, ["report", str(tmp_path / "run"), "--out", str(tmp_path / "report")])
    assert result.exit_code == 2 and not (tmp_path / "report").exists()
    assert result.output == (f"error: {card.parent / 'samples.jsonl'}: not a file; it holds the per-sample records "
                             f"the scorecard names (needed here); {card.parent / IDENTITY_FILE} makes its folder a run "
                             "directory: restore the records there, or, for a scorecard copied there alone beside a "
                             f"stray {IDENTITY_FILE}, report it from a folder without one (then from its figures)\n")


def test_a_lone_scorecard_beside_a_stray_run_identity_is_refused_saying_what_to_do(tmp_path: Path) -> None:
    """``report DIR/scorecard.json`` of a scorecard copied alone into a folder holding a stray pinbench-run.json: the
    refusal names that file as what made the folder a run directory and says what to do (the line named it without
    a way out); the scorecard reported from a folder without one, as it says, is written from its figures."""
    card = _dynamic_degree_scorecard(tmp_path / "shared")
    (tmp_path / "shared" / "samples.jsonl").unlink()
    (tmp_path / "shared" / IDENTITY_FILE).write_text("{}")   # stray
    result = runner.invoke(cli.app, ["report", str(card), "--out", str(tmp_path / "report")])
    assert result.exit_code == 2 and not (tmp_path / "report").exists()
    assert f"{card.parent / IDENTITY_FILE} makes its folder a run directory: " in result.output
    assert f"beside a stray {IDENTITY_FILE}, report it from a folder without one" in result.output
    alone = tmp_path / "alone" / "scorecard.json"
    alone.parent.mkdir()
    shutil.copy(card, alone)
    result = runner.invoke(cli.app, ["report", str(alone), "--out", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output
    assert "No per-sample records given." in (tmp_path / "report" / "index.html").read_text()


def test_a_report_of_a_copied_run_whose_samples_link_dangles_names_the_link(tmp_path: Path) -> None:
    """A run copied with ``cp -r`` keeps samples.jsonl's relative link, dangling in the copy: "not a file" named a
    file ``ls`` shows there; the link's target is said (review61)."""
    card = _dynamic_degree_scorecard(tmp_path / "run")
    (tmp_path / "run" / IDENTITY_FILE).write_text("{}")
    (tmp_path / "run" / "samples.jsonl").unlink()
    (tmp_path / "run" / "samples.jsonl").symlink_to("../store/samples.jsonl")   # as the copy holds it
    result = runner.invoke(cli.app, ["report", str(tmp_path / "run"), "--out", str(tmp_path / "report")])
    assert result.exit_code == 2 and not (tmp_path / "report").exists()
    assert result.output == (f"error: {card.parent / 'samples.jsonl'}: a dangling symlink (to "
                             "'../store/samples.jsonl'); it holds the per-sample records the scorecard names (needed "
                             f"here); {card.parent / IDENTITY_FILE} makes its folder a run directory: restore the "
                             f"records there, or, for a scorecard copied there alone beside a stray {IDENTITY_FILE}, "
                             "report it from a folder without one (then from its figures)\n")


def test_a_report_of_a_scorecard_copied_alone_is_written_from_its_figures(tmp_path: Path) -> None:
    """A scorecard shared without its folder (no pinbench-run.json beside it) is reported, its page saying it has no
    per-sample records, as before the refusal above."""
    card = _dynamic_degree_scorecard(tmp_path / "shared")
    (tmp_path / "shared" / "samples.jsonl").unlink()
    result = runner.invoke(cli.app, ["report", str(card), "--out", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output
    assert "No per-sample records given." in (tmp_path / "report" / "index.html").read_text()


SLOW_SAMPLES = '''

def _slow(task, **kwargs):  # each sample takes long enough to be interrupted between two
    import time

    time.sleep(0.4)
    return score_task(task, **kwargs)
'''


@pytest.mark.parametrize(("signum", "exit_code", "said"),
                         [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated by SIGTERM")])
def test_ctrl_c_says_what_is_kept_and_the_same_command_resumes(tmp_path: Path, signum: int, exit_code: int,
                                                                said: str) -> None:
    """SIGINT mid-run ended in a silent exit 130 (Typer's), SIGTERM (Slurm's time limit, ``scancel``) in a silent
    exit 143: now one line says the finished samples are kept where, and how to go on; the same command then reuses
    them. Run on an exported copy of dynamic-degree whose sample function sleeps, in a real process sent a real
    signal."""
    import os
    import subprocess
    import sys
    import time

    from pinbench.ops.export import export_recipe

    copy = export_recipe(get_recipe("dynamic-degree"), tmp_path / "copy")
    code = copy / "pinbench_recipes" / "dynamic_degree" / "run.py"
    source = code.read_text()
    assert source.count("partial(score_task, estimator=estimator,") == 1
    code.write_text(source.replace("partial(score_task, estimator=estimator,", "partial(_slow, estimator=estimator,")
                    + SLOW_SAMPLES)
    out, log = tmp_path / "run", tmp_path / "run" / "samples" / "run.jsonl"
    env = {**os.environ, "PYTHONPATH": str(copy), "PINBENCH_CACHE": str(tmp_path / "cache"),
           "PINBENCH_SAMPLE_CACHE": "off"}
    argv = [sys.executable, "-m", "pinbench", "run", "dynamic-degree", "--fixture", "--out", str(out)]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while True:   # looked at while it stands still: a loaded machine's run went on to its end before the signal
        stop(proc)
        if log.is_file() and log.read_bytes().count(b"\n") >= 1:   # a sample finished
            break
        proc.send_signal(signal.SIGCONT)
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signum)
    proc.send_signal(signal.SIGCONT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == exit_code, stderr[-2000:]
    assert (f"{said}: the samples finished so far are kept in {out}; run the same command to resume"
            in stderr.splitlines()), stderr[-2000:]
    assert "Traceback" not in stderr
    kept = log.read_bytes().count(b"\n")
    assert 1 <= kept < 5
    rerun = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"5 samples: {5 - kept} done, {kept} reused, 0 failed" in rerun.stderr, rerun.stderr[-2000:]


def test_ctrl_c_before_the_run_made_its_folder_says_nothing_was_written(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C a moment after ``pinbench run`` started said "the samples finished so far are kept in OUT; run the same
    command to resume" of an OUT that did not exist."""
    def interrupted(cfg: object) -> None:
        raise KeyboardInterrupt

    checked = cli._check_sample_cache
    monkeypatch.setattr(cli, "_check_sample_cache", interrupted)
    out = tmp_path / "new-run"
    result = runner.invoke(cli.app, ["run", "dynamic-degree", "--fixture", "--out", str(out)])
    assert result.exit_code == 130, result.output
    assert result.output.splitlines()[-1] == (f"interrupted: nothing was written ({out} not made yet); run the same "
                                              "command to start")
    # a folder there that holds no run of this one (empty, another recipe's): nothing of this run is kept in it
    # (review55: it said the samples were kept, and the same command then refused the other recipe's folder)
    def last_line(recipe: str) -> str:
        return runner.invoke(cli.app, ["run", recipe, "--fixture", "--out", str(out)]).output.splitlines()[-1]

    nothing = f"interrupted: nothing was written ({out} holds no run of this recipe, checkpoint, mode and inputs)"
    out.mkdir()
    assert last_line("dynamic-degree") == nothing
    monkeypatch.setattr(cli, "_check_sample_cache", checked)
    assert runner.invoke(cli.app, ["run", "dynamic-degree", "--fixture", "--out", str(out)]).exit_code == 0
    monkeypatch.setattr(cli, "_check_sample_cache", interrupted)
    assert last_line("camerabench") == nothing
    assert last_line("dynamic-degree") == (f"interrupted: the samples finished so far are kept in {out}; run the "
                                           "same command to resume")


INTERRUPT_ON_IMPORT = """
import os, signal, sys


class _Interrupt:   # Ctrl-C as the terminal sends it, the moment an import reaches MODULE
    def find_spec(self, name, path=None, target=None):
        if name == "MODULE":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)


sys.meta_path.insert(0, _Interrupt())
"""


def test_ctrl_c_while_the_cli_imports_is_one_line(tmp_path: Path) -> None:
    """Ctrl-C in the first ~0.15 s of ``pinbench run`` (while pinbench.cli imports typer) printed a KeyboardInterrupt
    traceback: now one line and exit 130, from ``python -m pinbench`` and the console script alike. The child sends
    itself SIGINT at that import (a sitecustomize on PYTHONPATH), so no timing decides where it lands."""
    import os
    import subprocess
    import sys

    (tmp_path / "sitecustomize.py").write_text(INTERRUPT_ON_IMPORT.replace("MODULE", "typer"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    out = tmp_path / "run"
    # a recipe's own python -m (an exported recipe folder's) printed the traceback still (edges58)
    for command in ([sys.executable, "-m", "pinbench", "run", "dynamic-degree"],
                    [str(Path(sys.executable).with_name("pinbench")), "run", "dynamic-degree"],
                    [sys.executable, "-m", "pinbench_recipes.dynamic_degree", "run"]):
        done = subprocess.run([*command, "--fixture", "--out", str(out)], env=env,
                              capture_output=True, text=True, timeout=120, check=False)
        assert (done.returncode, done.stderr.splitlines()) == (130, [
            "interrupted: nothing was written (pinbench was still starting); run the same command to start"]), command
        assert not out.exists()


def test_ctrl_c_after_the_imports_before_a_commands_own_handler_is_one_line(tmp_path: Path) -> None:
    """Ctrl-C once the CLI had imported, before ``run`` reached its handler (``_stopped_saying``: here as it imports
    the recipe), was Typer's silent exit 130: now one line. The child sends itself SIGINT at that import."""
    import os
    import subprocess
    import sys

    (tmp_path / "sitecustomize.py").write_text(INTERRUPT_ON_IMPORT.replace("MODULE", "pinbench_recipes.dynamic_degree"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "pinbench", "run", "dynamic-degree", "--fixture", "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stderr.splitlines()) == (130, [cli.INTERRUPTED]), done.stderr
    assert not out.exists()


def test_ctrl_c_while_another_process_holds_the_run_says_this_one_kept_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C before the claim, while another live process held the same run, said "the samples finished so far are
    kept in OUT; run the same command to resume": this process kept nothing, and the same command is refused while
    the other one runs. The other process is this test's parent, named in a lock written as a claim writes it."""
    import os
    import socket

    from pinbench.core.rundir import LOCK_DIR, lock_name

    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", "off")
    out = tmp_path / "run"
    assert runner.invoke(cli.app, ["run", "dynamic-degree", "--fixture", "--out", str(out)]).exit_code == 0
    (out / LOCK_DIR / f"{lock_name(None)}.lock").write_text(json.dumps(
        {"pid": os.getppid(), "host": socket.gethostname(), "started": "2026-01-01T00:00:00Z", "shard": None,
         "token": "another", "argv": ["pinbench", "run"]}))

    def interrupted(cfg: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_check_sample_cache", interrupted)
    result = runner.invoke(cli.app, ["run", "dynamic-degree", "--fixture", "--out", str(out)])
    assert result.exit_code == 130, result.output
    assert result.output.splitlines()[-1] == (
        f"interrupted: nothing was written by this process ({out} in use: this run is already running: pid "
        f"{os.getppid()} on {socket.gethostname()} since 2026-01-01T00:00:00Z (unsharded: pinbench run)); run the "
        "same command once that one ends")


def test_a_shards_move_aside_leaves_the_run_its_shards_share(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--move-aside`` on every shard's command moved the directory aside once per shard: shard 1/2 took shard 0/2's
    records away with it and the merge found half the samples missing. A shard now moves only another run (another
    checkpoint here), never its own."""
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", "off")
    out = tmp_path / "run"
    args = ["run", "dynamic-degree", "--fixture", "--out", str(out), "--move-aside"]
    for shard in ("0/2", "1/2"):
        result = runner.invoke(cli.app, [*args, "--shard", shard])
        assert result.exit_code == 0, result.output
    assert f"--move-aside: {out} holds this run, which its shards share: nothing moved" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    merged = runner.invoke(cli.app, ["run", "dynamic-degree", "--fixture", "--out", str(out), "--skip-scoring"])
    assert merged.exit_code == 0 and json.loads((out / "scorecard.json").read_text())["status"] == "complete"
    other = runner.invoke(cli.app, [*args, "--shard", "0/2", "--checkpoint", "other"])
    assert other.exit_code == 0 and "moved the earlier run to" in other.output, other.output


def test_a_failed_rename_is_named_by_its_target_not_its_temporary_file(tmp_path: Path, capsys) -> None:
    """A write by temporary file and rename: the error named the temporary file (media/.<sha>.mp4.*.tmp, which no
    one made there and which was removed), not the folder at the target that refused the rename (review57)."""
    import typer

    target = tmp_path / "media" / "a.mp4"
    target.mkdir(parents=True)
    temporary = tmp_path / "media" / ".a.mp4.x.tmp"
    temporary.write_bytes(b"")
    with pytest.raises(typer.Exit), cli._writing_to("--bundle", tmp_path):
        os.rename(temporary, target)
    assert capsys.readouterr().err == f"error: --bundle {tmp_path}: cannot write {target} (Is a directory)\n"


@pytest.mark.parametrize("runtime", ["local", "docker"])
def test_a_generator_command_naming_no_out_is_refused_before_anything_runs(tmp_path: Path, runtime: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``command:`` naming no ``{out}`` (or an unknown placeholder) was refused only as the run began: after
    ``--move-aside`` had moved the earlier run aside, and under ``--runtime docker`` behind the generator image's
    refusal. Now first, in one line naming the command."""
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", "off")
    out = tmp_path / "run"
    out.mkdir()
    (out / "earlier.txt").write_text("an earlier run\n")
    for command, why in (("command:gen --request {request}", "its argv names no {out}, so it is never told where"),
                         ("command:gen --request {request} --out {output}", "unknown placeholder {output} (known: "),
                         ("command:", "names no program to run"), ("command: ", "names no program to run")):
        result = runner.invoke(cli.app, ["run", "paibench-c", "--fixture", "--out", str(out), "--runtime", runtime,
                                         "--skip-doctor", "--move-aside", "--generator", command])
        assert result.exit_code == 2, result.output
        assert result.output.startswith(f"error: --generator {command}: {why}"), result.output
        assert len(result.output.splitlines()) == 1, result.output
        assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
        assert (out / "earlier.txt").is_file()
