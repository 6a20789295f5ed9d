"""pinbench submit without a cluster: the layout declaration, the sbatch scripts, refusals, container command lines.

The scripts are parsed back with shlex (continuations joined) so each assertion is about the argv a job
runs, and ``bash -n`` checks that every generated script is valid shell. Submission to a real Slurm is in
test_slurm_cluster.py.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from toy_recipe import DECLARATION, toy_recipe
from typer.testing import CliRunner

from pinbench import cli
from pinbench.core.config import RunConfig, Shard, checkpoint_noted
from pinbench.core.deploy import DEFAULT_SCALE_OUT
from pinbench.core.recipe import DeclarationError, get_recipe
from pinbench.ops.generation import command_argv
from pinbench.ops.submit import Request, SubmitError, plan, write_scripts

runner = CliRunner()
PROGRAM = ["/opt/venv/bin/pinbench"]
TOKEN = "hf_SubmitTestTokenDoNotLeak0123456789"
DIGEST = "sha256:" + "ab" * 32


def _plan(recipe, tmp_path: Path, **fields):
    fields.setdefault("out", tmp_path / "run")
    return plan(Request(recipe=recipe, **fields), cwd=tmp_path, pinbench=PROGRAM)


def _commands(text: str) -> list[list[str]]:
    """Every command line of a script (comments and #SBATCH lines dropped), split as the shell would."""
    body = text.replace("\\\n", " ")
    return [shlex.split(line, comments=True) for line in body.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def _command(text: str, program: str) -> list[str]:
    commands = [argv[1:] if argv[0] == "exec" else argv for argv in _commands(text)]
    matches = [argv for argv in commands if program in argv[:2]]
    assert matches, f"no {program} command in:\n{text}"
    return matches[0]


def _value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def _sbatch(text: str) -> list[str]:
    return [line.removeprefix("#SBATCH ").strip() for line in text.splitlines() if line.startswith("#SBATCH ")]


# ------------------------------------------------------------------------------------------ the layout


def test_the_default_layout_is_an_array_then_a_merge_without_scoring(tmp_path: Path) -> None:
    recipe = toy_recipe(tmp_path)
    assert recipe.scale_out == DEFAULT_SCALE_OUT
    shards, finish = _plan(recipe, tmp_path, shards=3, checkpoint="Toy-Nano").phases
    assert shards.phase.sharded and not finish.phase.sharded

    head = _sbatch(shards.text)
    assert "--array=0-2" in head and f"--output={tmp_path}/run/slurm/logs/shards-%A_%a.log" in head
    argv = _command(shards.text, PROGRAM[0])
    assert argv[:4] == [PROGRAM[0], "run", "toy-bench", "--checkpoint"]
    assert _value(argv, "--out") == str(tmp_path / "run")
    assert _value(argv, "--shard") == "${SLURM_ARRAY_TASK_ID}/3"  # the shell expands it per array task
    assert '--shard "${SLURM_ARRAY_TASK_ID}/3"' in shards.text
    assert "--skip-scoring" not in argv and f"exec {PROGRAM[0]} run" in shards.text

    merge = _command(finish.text, PROGRAM[0])
    assert "--skip-scoring" in merge and "--shard" not in merge
    assert not any(line.startswith("--array") for line in _sbatch(finish.text))
    assert [PROGRAM[0], "status", str(tmp_path / "run")] in [a[:3] for a in _commands(finish.text)]
    assert finish.text.rstrip().endswith('exit "$code"')  # the merge's exit code is the job's


def test_scripts_are_valid_shell_and_written_where_the_run_is(tmp_path: Path) -> None:
    bash = shutil.which("bash")
    assert bash
    the_plan = _plan(toy_recipe(tmp_path), tmp_path, shards=2, checkpoint="Toy-Nano", partition="gpu",
                     gpus_per_task=2, time="04:00:00", finish_time="01:00:00", account="lab",
                     sbatch_args=["--mem=64G", "--exclusive"], options=["mode=slow", "videos=clips"])
    scripts = write_scripts(the_plan)
    assert scripts == [tmp_path / "run" / "slurm" / "shards.sbatch", tmp_path / "run" / "slurm" / "finish.sbatch"]
    for script in scripts:
        subprocess.run([bash, "-n", str(script)], check=True)
    shards, finish = (p.read_text() for p in scripts)
    assert {"--partition=gpu", "--time=04:00:00", "--gpus-per-task=2", "--account=lab", "--mem=64G",
            "--exclusive", f"--chdir={tmp_path}"} <= set(_sbatch(shards))
    assert "--time=01:00:00" in _sbatch(finish) and not any(x.startswith("--gpus") for x in _sbatch(finish))
    argv = _command(shards, PROGRAM[0])
    assert _value(argv, "--gpus") == "2"
    options = [argv[i + 1] for i, word in enumerate(argv) if word == "--option"]
    assert options == ["mode=slow", f"videos={tmp_path / 'clips'}"]  # a relative path is made absolute


def test_options_from_the_environment_are_written_into_the_script(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOY_MODE", "slow")
    shards, _ = _plan(toy_recipe(tmp_path), tmp_path, shards=2, checkpoint="Toy-Nano").phases
    assert "--option mode=slow" in shards.text.replace(" \\\n    ", " ")


def test_a_declared_layout_runs_its_phases_with_their_flags_and_stages(tmp_path: Path) -> None:
    layout = [{"name": "generate", "sharded": True, "flags": ["--skip-scoring"], "stage": "generate"},
              {"name": "score", "flags": ["--skip-generation"], "stage": "score", "gpus": True}]
    recipe = toy_recipe(tmp_path, scale_out=layout)
    generate, score = _plan(recipe, tmp_path, shards=4, checkpoint="Toy-Nano", gpus_per_task=4).phases
    gen, sc = _command(generate.text, PROGRAM[0]), _command(score.text, PROGRAM[0])
    assert "--skip-scoring" in gen and _value(gen, "--shard") == "${SLURM_ARRAY_TASK_ID}/4"
    assert "--skip-generation" in sc and "--shard" not in sc and _value(sc, "--gpus") == "4"
    assert "--gpus-per-task=4" in _sbatch(score.text)


def test_paibench_c_generates_in_an_array_and_scores_once() -> None:
    recipe = get_recipe("paibench-c")
    assert [(p.name, p.sharded, p.flags, p.stage) for p in recipe.scale_out] == [
        ("generate", True, ("--skip-scoring",), "generate"), ("score", False, ("--skip-generation",), "score")]


def _shape(text: str) -> tuple[bool, str, bool, bool]:
    """What a phase script does: an array or one job, run with which skip flag, whether it shards and asks GPUs."""
    argv = _command(text, "run")
    skip = [flag for flag in ("--skip-scoring", "--skip-generation") if flag in argv]
    return (any(line.startswith("--array=") for line in _sbatch(text)), " ".join(skip), "--shard" in argv,
            "--gpus-per-task=1" in _sbatch(text))


@pytest.mark.parametrize("recipe", ["mind", "remembench"])
def test_a_generator_run_is_laid_out_as_paibench_c_generates_then_scores(tmp_path: Path, recipe: str) -> None:
    """With --generator, MIND and RememBench generate in the array and score every stored rollout in one job, as
    PAI-Bench-C does; before, each array task generated and scored its shard and a finish job only merged."""
    generator = "command:gen --request {request} --out {out}"

    def phases(name: str, *args: str) -> dict[str, tuple]:
        out = tmp_path / f"{name}{len(args)}"
        result = runner.invoke(cli.app, ["submit", name, "--shards", "3", "--fixture", "--gpus-per-task", "1",
                                         "--out", str(out), "--dry-run", *args])
        assert result.exit_code == 0, result.output
        return {p.stem: _shape(p.read_text()) for p in sorted((out / "slurm").glob("*.sbatch"))}

    reference = phases("paibench-c")
    assert list(reference) == ["generate", "score"]   # sorted by name: the array, then the one job
    metrics = ["-o", "metrics=lcm,visual,dino,action"] if recipe == "mind" else []   # gsc: no generated mirror
    assert phases(recipe, "--generator", generator, *metrics) == reference == {
        "generate": (True, "--skip-scoring", True, True), "score": (False, "--skip-generation", False, True)}
    assert list(phases(recipe)) == ["finish", "shards"]   # scoring its own rollouts: the default layout
    score = _command((tmp_path / f"{recipe}{2 + len(metrics)}" / "slurm" / "score.sbatch").read_text(), "run")
    assert _value(score, "--generator") == generator   # the stored rollouts are the generator's, by signature


@pytest.mark.parametrize(("layout", "message"), [
    ([{"name": "a", "sharded": True}, {"name": "b", "sharded": True}], "the last phase (b) must run once"),
    ([{"name": "a"}, {"name": "b"}], "no phase is sharded"),
    ([{"name": "a", "sharded": True}, {"name": "a"}], "phase names repeat"),
    ([{"name": "a", "sharded": True, "stage": "gpu"}, {"name": "b"}], "names stage 'gpu'"),
    ([{"name": "a", "sharded": True}, {"name": "b", "flags": ["--skip-scoring", "--skip-scoring"]}],
     "$.scale_out[1].flags"),
    ([{"name": "a", "sharded": True}], "$.scale_out"),
])
def test_a_bad_layout_is_refused_when_the_recipe_loads(tmp_path: Path, layout: list, message: str) -> None:
    with pytest.raises(DeclarationError) as info:
        toy_recipe(tmp_path, scale_out=layout)
    assert message in str(info.value) and str(info.value).startswith(str(tmp_path))


def test_a_bad_generator_layout_is_refused_naming_its_key(tmp_path: Path) -> None:
    with pytest.raises(DeclarationError, match="scale_out_generator: no phase is sharded"):
        toy_recipe(tmp_path, scale_out_generator=[{"name": "a"}, {"name": "b"}])
    assert toy_recipe(tmp_path).scale_out_generator == DEFAULT_SCALE_OUT   # undeclared: the recipe's scale_out


def test_a_layout_using_flags_the_recipe_refuses_is_refused(tmp_path: Path) -> None:
    flags = {**DECLARATION["flags"], "skip_scoring": False}
    with pytest.raises(DeclarationError, match="runs with --skip-scoring, which the recipe does not honour"):
        toy_recipe(tmp_path, flags=flags, scale_out=[{"name": "a", "sharded": True},
                                                     {"name": "b", "flags": ["--skip-scoring"]}])
    # without a declaration, the default layout is refused at submit time, not at load time
    recipe = toy_recipe(tmp_path / "x", flags={**DECLARATION["flags"], "shard": False})
    with pytest.raises(SubmitError, match="cannot be laid out on a cluster: it does not honour --shard"):
        _plan(recipe, tmp_path, shards=2, checkpoint="Toy-Nano")


# ------------------------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(("fields", "message"), [
    ({"shards": 0}, "--shards must be 1 to 4000000"),
    ({"shards": 4_000_001}, "--shards must be 1 to 4000000"),
    ({"sbatch_args": ["--array=0-9"]}, "--array is set by pinbench submit itself"),
    ({"sbatch_args": ["--dependency=afterok:1"]}, "--dependency is set by pinbench submit itself"),
    ({"sbatch_args": ["--arr=0-1"]}, "sbatch reads --arr as --array, which pinbench submit sets itself"),
    ({"sbatch_args": ["--dep=afterok:1"]}, "sbatch reads --dep as --dependency, which pinbench submit sets itself"),
    ({"sbatch_args": ["--err=/tmp/e"]}, "sbatch reads --err as --error, which pinbench submit sets itself"),
    ({"sbatch_args": ["--part=debug"]}, "sbatch reads --part as --partition, which pinbench submit sets itself (give "
                                        "pinbench submit --partition)"),
    ({"sbatch_args": ["--comment=a b"]}, "expected one long sbatch option"),
    ({"sbatch_args": ["--mem=1G; rm -rf /"]}, "expected one long sbatch option"),
    ({"sbatch_args": ["-p gpu"]}, "expected one long sbatch option"),
    ({"partition": "gpu\n#SBATCH --array=1"}, "--partition"),
    ({"time": "$(reboot)"}, "--time"),
    ({"gpus_per_task": -1}, "--gpus-per-task must be >= 0"),
    ({"container": "podman"}, "--container must be one of none, docker, pyxis, apptainer"),
    ({"options": ["mode=medium"]}, "mode"),
    ({"checkpoint": "../escape"}, "checkpoint name '../escape' is not allowed"),
    ({"container": "pyxis"}, "--container pyxis needs --image REF for stage score"),
    ({"container": "apptainer", "images": ["docker://repo/img:latest"]}, "not pinned"),
    ({"container": "pyxis", "images": ["nvcr.io#repo/img"]}, "not pinned"),
    ({"container": "docker", "images": ["repo/img:1.0"]}, "not pinned"),
    ({"images": ["repo/img@" + DIGEST]}, "--image applies to --container docker, pyxis or apptainer"),
])
def test_bad_requests_are_one_line_and_write_nothing(tmp_path: Path, fields: dict, message: str) -> None:
    fields = {"shards": 2, "checkpoint": "Toy-Nano", **fields}
    with pytest.raises((SubmitError, ValueError)) as info:
        _plan(toy_recipe(tmp_path), tmp_path, **fields)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "run").exists()


def _options_of(command: str) -> list[str]:
    """Every long option of ``pinbench COMMAND`` as the CLI declares it (``--no-`` forms too), but --help."""
    import typer.main

    params = typer.main.get_command(cli.app).commands[command].params
    return [o for p in params for o in (*p.opts, *p.secondary_opts) if o.startswith("--") and o != "--help"]


@pytest.mark.parametrize("command", ["submit", "run"])
def test_pinbench_options_given_to_sbatch_are_refused_naming_where_they_belong(tmp_path: Path, command: str) -> None:
    """`--sbatch-arg=--skip-generation` went into every #SBATCH header, which sbatch refuses (or, --out being a
    prefix of its --output, takes as its own, or --time set twice): the dry run wrote such scripts. Every option of
    pinbench run and submit is refused in one line naming it and where it goes, before anything is written."""
    recipe = toy_recipe(tmp_path)
    options = _options_of(command)
    assert "--skip-generation" in options or "--shards" in options   # the CLI was read
    for option in options:
        arg = f"{option}=x" if option != "--no-offline" else option
        with pytest.raises(SubmitError) as info:
            _plan(recipe, tmp_path, shards=2, checkpoint="Toy-Nano", sbatch_args=[arg])
        message = str(info.value)
        assert "\n" not in message and message.startswith(f"--sbatch-arg {arg!r}: "), message
        assert f"is an option of pinbench {command}, not of sbatch" in message or (
            command == "run" and option in _options_of("submit")), message
    assert not (tmp_path / "run").exists()
    _plan(recipe, tmp_path, shards=2, checkpoint="Toy-Nano", sbatch_args=["--mem=8G", "--no-requeue", "--hold"])


def test_a_secret_given_to_sbatch_is_refused_and_written_nowhere(tmp_path: Path) -> None:
    """`--sbatch-arg=--export=ALL,HF_TOKEN=hf_...` (how a token is handed to a Slurm job by hand) was written into
    every #SBATCH header and into slurm/submissions.jsonl's command; the jobs get the submitting shell's
    environment, so exporting it there does the same and writes it nowhere."""
    for arg in (f"--export=ALL,HF_TOKEN={TOKEN}", f"--comment={TOKEN}", f"--comment={TOKEN} x"):
        result = runner.invoke(cli.app, ["submit", "dynamic-degree", "--shards", "2", "--fixture", "--dry-run",
                                         "--out", str(tmp_path / "r"), f"--sbatch-arg={arg}"])
        assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
        assert "holds a secret" in result.output and "export it in the submitting shell" in result.output
        assert TOKEN not in result.output and not (tmp_path / "r").exists()


def test_the_dry_run_refuses_a_pinbench_option_given_to_sbatch(tmp_path: Path) -> None:
    result = runner.invoke(cli.app, ["submit", "dynamic-degree", "--shards", "2", "--fixture", "--dry-run", "--out",
                                     str(tmp_path / "r"), "--sbatch-arg=--skip-generation"])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert "--skip-generation is an option of pinbench run, not of sbatch" in result.output
    assert "recipe's layout (scale_out)" in result.output and not (tmp_path / "r").exists()


def test_a_docker_submission_of_a_generator_the_image_lacks_is_refused(tmp_path: Path) -> None:
    """Its generation jobs ran in the recipe's scoring image, which holds none of the user's code: each failed."""
    recipe = toy_recipe(tmp_path, requests="run:run_requests", generators={"own": "run:own"})
    fields = {"shards": 2, "checkpoint": "Toy-Nano", "container": "docker", "generator": "python:my_model:make"}
    with pytest.raises(SubmitError) as info:
        _plan(recipe, tmp_path, **fields)
    message = str(info.value)
    assert "\n" not in message and message.startswith("--generator python:my_model:make with --container docker "
                                                      "would run in pinbench/toy-bench:1.0.0, which holds none")
    assert "give --image REF" in message and "--container none" in message and not (tmp_path / "run").exists()
    _plan(recipe, tmp_path, **{**fields, "images": [f"sha256:{'e' * 64}"]})   # an image of the user's
    _plan(recipe, tmp_path, **{**fields, "container": "none"})
    with pytest.raises(SubmitError, match="^--generator diffusers with --container docker"):   # its package: in none
        _plan(recipe, tmp_path, **{**fields, "generator": "diffusers"})
    for held in ("own", "static", "folder"):
        _plan(recipe, tmp_path, **{**fields, "generator": held})


def _generating_toy(tmp_path: Path):
    """The toy with a requests entry, laid out as MIND and RememBench are with --generator: generate, then score."""
    layout = [{"name": "generate", "sharded": True, "flags": ["--skip-scoring"]},
              {"name": "score", "flags": ["--skip-generation"]}]
    return toy_recipe(tmp_path, requests="run:run_requests", generators={"own": "run:own"},
                      scale_out_generator=layout)


@pytest.mark.parametrize(("container", "image"), [("docker", f"sha256:{'e' * 64}"), ("pyxis", "nvcr.io#r/i@" + DIGEST),
                                                  ("apptainer", "docker://r/i@" + DIGEST)])
def test_files_a_generator_names_are_mounted_in_every_container_job(tmp_path: Path, container: str,
                                                                   image: str) -> None:
    """As ``pinbench run --runtime docker`` mounts them (docker_runtime.generator_files): in a job's container they
    did not exist and generation failed deep inside. Relative ones absolute from submit's directory, read-only at
    their own path, the same --generator text in every job (the scoring job compares it with the generating one's);
    with --container none nothing is rewritten (the jobs run in that directory)."""
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "gen.sh").write_text("#!/bin/sh")
    (tmp_path / "cfg.yaml").write_text("steps: 4")
    fields = {"shards": 2, "checkpoint": "Toy-Nano", "generator": "command:sh ./gen.sh --cfg=cfg.yaml {request} {out}",
              "generator_options": ["weights=./ckpt", "steps=4"]}
    the_plan = _plan(_generating_toy(tmp_path), tmp_path, container=container, images=[image], **fields)
    absolute = ["sh", f"{tmp_path}/gen.sh", f"--cfg={tmp_path}/cfg.yaml", "{request}", "{out}"]   # '/' or none
    for phase in the_plan.phases:
        assert phase.job.mounts()[-3:] == [(str(tmp_path / "gen.sh"), str(tmp_path / "gen.sh"), True),
                                           (str(tmp_path / "cfg.yaml"), str(tmp_path / "cfg.yaml"), True),
                                           (str(tmp_path / "ckpt"), str(tmp_path / "ckpt"), True)]
        argv = next(argv for argv in _commands(phase.text) if "pinbench" in argv)
        inner = argv[argv.index("pinbench"):]
        assert command_argv(_value(inner, "--generator")) == absolute
        assert [inner[i + 1] for i, w in enumerate(inner) if w == "-g"] == [
            f"weights={tmp_path}/ckpt", "steps=4"]
        line = " ".join(argv[:argv.index("pinbench")])
        assert f"{tmp_path}/gen.sh:{tmp_path}/gen.sh:ro" in line and f"{tmp_path}/ckpt:{tmp_path}/ckpt:ro" in line
        subprocess.run(["bash", "-n"], input=phase.text, text=True, check=True)
    for phase in _plan(_generating_toy(tmp_path), tmp_path, **fields).phases:
        assert _value(_command(phase.text, "run"), "--generator") == fields["generator"]


def test_a_generator_file_no_container_can_mount_is_refused_in_one_line(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A ',' or ':' would split the mount list (pyxis, apptainer, docker --volume); the home folder or a secret is
    never handed over, the hint naming submit's --image (it has no --generator-image)."""
    (tmp_path / "a,b").mkdir()
    home = tmp_path / "home"
    (home / ".cache").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    recipe = _generating_toy(tmp_path)
    fields = {"shards": 2, "checkpoint": "Toy-Nano", "generator": "python:my_model:make", "container": "apptainer",
              "images": ["docker://r/i@" + DIGEST]}
    with pytest.raises(SubmitError, match=r"^mounted path '.*a,b': a path mounted into a container may not contain"):
        _plan(recipe, tmp_path, generator_options=[f"weights={tmp_path / 'a,b'}"], **fields)
    with pytest.raises(SubmitError) as info:
        _plan(recipe, tmp_path, generator_options=[f"cache={home / '.cache'}"], **fields)
    assert str(info.value) == (f"-g cache: {home / '.cache'} is not mounted into the generator's container (it is or "
                               "holds your home folder, or is a hidden folder of it); name the files it needs, or put "
                               "them in --image")
    assert not (tmp_path / "run").exists()


MODEL = "sha256:" + "cd" * 32


def _in_container(text: str) -> list[str]:
    """The container command of a phase script (srun, apptainer or docker, then the pinbench inside)."""
    return next(argv[1:] if argv[0] == "exec" else argv for argv in _commands(text) if "pinbench" in argv)


def _image_of(text: str, container: str) -> str:
    """The image a phase script's container command runs (docker: its IMAGE= line)."""
    argv = _command(text, {"docker": "docker", "pyxis": "srun", "apptainer": "apptainer"}[container])
    if container == "docker":
        return next(line for line in text.splitlines() if line.startswith("IMAGE=")).removeprefix("IMAGE=")
    if container == "pyxis":
        return next(w for w in argv if w.startswith("--container-image=")).split("=", 1)[1]
    return argv[argv.index("pinbench") - 1]


@pytest.mark.parametrize(("container", "pinned", "model"), [
    ("pyxis", "nvcr.io#lab/toy@" + DIGEST, "nvcr.io#lab/model@" + MODEL),
    ("apptainer", "docker://ghcr.io/lab/toy@" + DIGEST, "docker://ghcr.io/lab/model@" + MODEL),
    ("docker", "ghcr.io/lab/toy@" + DIGEST, MODEL)])
def test_a_generator_image_makes_the_rollouts_and_the_pinned_image_scores_them(tmp_path: Path, container: str,
                                                                               pinned: str, model: str) -> None:
    """As ``pinbench run --runtime docker --generator-image``: with pyxis and apptainer every phase ran in the one
    --image, so a generator of the user's ran in the pinned scoring image (or scoring in the user's). The generating
    job runs in --generator-image with the generator's files mounted read-only; the scoring job in --image."""
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "gen.sh").write_text("#!/bin/sh")
    the_plan = _plan(_generating_toy(tmp_path), tmp_path, shards=2, checkpoint="Toy-Nano", gpus_per_task=1,
                     container=container, images=[pinned], generator_image=model,
                     generator="command:sh ./gen.sh {request} {out}", generator_options=["weights=./ckpt"])
    generate, score = the_plan.phases
    assert (generate.phase.name, score.phase.name) == ("generate", "score")
    assert _image_of(generate.text, container) == model and _image_of(score.text, container) == pinned
    gen = _in_container(generate.text)
    words = " ".join(gen[:gen.index("pinbench")])
    for host in (tmp_path / "gen.sh", tmp_path / "ckpt"):
        mount = {"pyxis": f"{host}:{host}:ro", "apptainer": f"--bind {host}:{host}:ro",
                 "docker": f"--volume {host}:{host}:ro"}[container]
        assert mount in words or f"{mount}," in words or f",{mount}" in words, words
    if container != "docker":   # docker asks the engine (a local id is its own digest)
        assert f"PINBENCH_IMAGE_DIGEST={MODEL}" in generate.text and f"PINBENCH_IMAGE_DIGEST={DIGEST}" in score.text
    inner = gen[gen.index("pinbench"):]
    assert "--skip-scoring" in inner and command_argv(_value(inner, "--generator"))[1] == f"{tmp_path}/gen.sh"
    assert "--skip-generation" in _in_container(score.text)
    for phase in the_plan.phases:
        subprocess.run(["bash", "-n"], input=phase.text, text=True, check=True)
    assert f"--generator-image={model}" in shlex.split(the_plan.request.command())


def test_a_generator_image_replaces_the_generation_stage_image_and_a_squashfs_file_is_hashed(tmp_path: Path) -> None:
    """PAI-Bench-C's way (a generate stage of its own, with its own image): --generator-image takes its place, so
    the one --image left is the scoring stage's; a squashfs/SIF file is pinned by its hash, as --image's are."""
    recipe = toy_recipe(tmp_path, requests="run:run_requests",
                        scale_out=[{"name": "generate", "sharded": True, "flags": ["--skip-scoring"],
                                    "stage": "generate"},
                                   {"name": "score", "flags": ["--skip-generation"], "stage": "score"}])
    sqsh = tmp_path / "model.sqsh"
    sqsh.write_bytes(b"squashfs image")
    import hashlib

    fields = {"shards": 2, "checkpoint": "Toy-Nano", "container": "pyxis", "generator": "python:my_model:make"}
    generate, score = _plan(recipe, tmp_path, images=["nvcr.io#lab/toy@" + DIGEST], generator_image=str(sqsh),
                            **fields).phases
    assert _image_of(generate.text, "pyxis") == str(sqsh)
    assert _image_of(score.text, "pyxis") == "nvcr.io#lab/toy@" + DIGEST
    assert f"PINBENCH_IMAGE_DIGEST=sha256:{hashlib.sha256(b'squashfs image').hexdigest()}" in generate.text
    with pytest.raises(SubmitError, match="needs --image REF for stage score"):
        _plan(recipe, tmp_path, generator_image=str(sqsh), **fields)


@pytest.mark.parametrize(("fields", "message"), [
    ({"generator": None}, "--generator-image: it runs a --generator's generation, and this submission has no "
                          "--generator"),
    ({"container": "none", "images": []}, "--generator-image applies to --container docker, pyxis or apptainer"),
    ({"layout": "default"}, "--generator-image: phase shards of toy-bench's layout (scale_out_generator) generates "
                            "and scores in one job, so it would score in nvcr.io#lab/model@"),
    ({"layout": "scores only"}, "--generator-image: toy-bench's layout (scale_out_generator) generates nothing"),
    ({"generator_image": "lab/model:1"}, "--generator-image lab/model:1: not pinned; give a registry reference by "
                                         "digest"),
    ({"generator_image": "lab/model 1"}, "--generator-image 'lab/model 1': not a plain image reference"),
])
def test_a_generator_image_that_cannot_work_is_refused_in_one_line(tmp_path: Path, fields: dict,
                                                                   message: str) -> None:
    """As ``pinbench run --runtime docker --generator-image`` refuses it: nothing to generate, or a phase that
    would score in the user's image instead of the pinned one (a layout generating and scoring in one job)."""
    layouts = {"default": {},   # each array task generates and scores its shard
               "scores only": {"scale_out_generator": [{"name": "a", "sharded": True, "flags": ["--skip-generation"]},
                                                       {"name": "b", "flags": ["--skip-generation"]}]}}
    layout = fields.pop("layout", None)
    recipe = (_generating_toy(tmp_path) if layout is None else
              toy_recipe(tmp_path, requests="run:run_requests", **layouts[layout]))
    fields = {"shards": 2, "checkpoint": "Toy-Nano", "container": "pyxis", "images": ["nvcr.io#lab/toy@" + DIGEST],
              "generator": "python:my_model:make", "generator_image": "nvcr.io#lab/model@" + MODEL, **fields}
    with pytest.raises(SubmitError) as info:
        _plan(recipe, tmp_path, **fields)
    assert str(info.value).startswith(message) and "\n" not in str(info.value), str(info.value)
    assert not (tmp_path / "run").exists()


def test_a_generator_file_not_mounted_names_the_generator_image(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / ".cache").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(SubmitError, match=r"name the files it needs, or put them in --generator-image$"):
        _plan(_generating_toy(tmp_path), tmp_path, shards=2, checkpoint="Toy-Nano", container="apptainer",
              images=["docker://r/i@" + DIGEST], generator="python:my_model:make",
              generator_options=[f"cache={home / '.cache'}"], generator_image="docker://r/m@" + MODEL)


def test_the_cli_writes_a_mind_submission_generating_in_the_generator_image(tmp_path: Path) -> None:
    """The command docs/scale-out.md shows, as a dry run."""
    out = tmp_path / "r"
    result = runner.invoke(cli.app, [
        "submit", "mind", "--fixture", "--shards", "2", "-o", "metrics=lcm", "--container", "pyxis",
        "--image", "nvcr.io#lab/pinbench-mind@" + DIGEST,
        "--generator", "python:my_model:make", "--generator-image", "nvcr.io#lab/my-model@" + MODEL,
        "--out", str(out), "--dry-run"])
    assert result.exit_code == 0, result.output
    generate, score = ((out / "slurm" / f"{name}.sbatch").read_text() for name in ("generate", "score"))
    assert _image_of(generate, "pyxis") == "nvcr.io#lab/my-model@" + MODEL
    assert _image_of(score, "pyxis") == "nvcr.io#lab/pinbench-mind@" + DIGEST


RECORDER = '#!/bin/sh\nprintf "%s\\n" "$@" > "$SEEN/argv"\nenv > "$SEEN/env"\n'   # a container program


@pytest.mark.parametrize("offline", [False, True], ids=["online", "offline"])
@pytest.mark.parametrize(("container", "image", "model"), [
    ("docker", "ghcr.io/lab/pinbench-mind@" + DIGEST, MODEL),
    ("pyxis", "nvcr.io#lab/pinbench-mind@" + DIGEST, "nvcr.io#lab/my-model@" + MODEL),
    ("apptainer", "docker://ghcr.io/lab/pinbench-mind@" + DIGEST, "docker://ghcr.io/lab/my-model@" + MODEL)])
def test_a_generator_image_job_may_download_its_weights_unless_offline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, container: str, image: str, model: str, offline: bool) -> None:
    """MIND's generating jobs in --generator-image had the scoring stage's policy (HF_TOKEN unset, offline, docker
    --network none): a generator downloading its pinned weights, as it does on the host, failed there. Its job (run
    here with a program recording what the container gets) now has the network and HF_TOKEN, by name: the token is
    in no file written, nor in the command's output; --offline takes both away. Scoring keeps neither."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    out = tmp_path / "r"
    result = runner.invoke(cli.app, [
        "submit", "mind", "--fixture", "--shards", "2", "-o", "metrics=lcm", "--container", container,
        "--image", image, "--generator", "python:my_model:make", "--generator-image", model,
        *(["--offline"] if offline else []), "--out", str(out), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert TOKEN not in result.output
    assert not [f for f in out.rglob("*") if f.is_file() and TOKEN.encode() in f.read_bytes()]
    generate, score = ((out / "slurm" / f"{name}.sbatch").read_text() for name in ("generate", "score"))
    assert "unset HF_TOKEN" in score and "export PINBENCH_OFFLINE=1 HF_HUB_OFFLINE=1" in score
    assert ("unset HF_TOKEN" in generate) == offline
    assert f"# container: {container}; stage generate ({'offline, no token' if offline else 'network, token'})." \
        in generate
    (tmp_path / "bin").mkdir()
    program = {"docker": "docker", "pyxis": "srun", "apptainer": "apptainer"}[container]
    (tmp_path / "bin" / program).write_text(RECORDER)
    (tmp_path / "bin" / program).chmod(0o755)
    (tmp_path / "seen").mkdir()
    subprocess.run(["bash", "-c", generate], check=True, cwd=tmp_path, env={
        "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "SLURM_ARRAY_TASK_ID": "0", "HF_TOKEN": TOKEN,
        "SEEN": str(tmp_path / "seen")})
    argv = (tmp_path / "seen" / "argv").read_text().splitlines()
    env = dict(line.split("=", 1) for line in (tmp_path / "seen" / "env").read_text().splitlines() if "=" in line)
    inner = argv[argv.index("pinbench"):]
    assert ("--offline" in inner) == offline and TOKEN not in argv
    assert (env.get("HF_TOKEN") == TOKEN) != offline   # what pyxis and apptainer hand the container, docker's --env
    assert (env.get("HF_HUB_OFFLINE") == "1") == offline
    if container == "docker":   # the token by name (--env HF_TOKEN: docker reads its value from its environment)
        names = [argv[i + 1] for i, word in enumerate(argv[:argv.index("pinbench")]) if word == "--env"]
        network = argv[argv.index("--network") + 1] if "--network" in argv else None
        assert ("HF_TOKEN" in names) != offline and network == ("none" if offline else None)


def test_run_directories_and_mount_paths_that_would_break_a_script_are_refused(tmp_path: Path) -> None:
    recipe = toy_recipe(tmp_path)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(SubmitError, match="exists and is not a directory"):
        _plan(recipe, tmp_path, shards=2, checkpoint="Toy-Nano", out=tmp_path / "afile")
    with pytest.raises(SubmitError, match="may not contain ','"):
        _plan(recipe, tmp_path, shards=2, checkpoint="Toy-Nano", out=tmp_path / "a,b", container="docker")
    for name in ("my run", "50%", "it's"):
        with pytest.raises(SubmitError, match="a path in an sbatch script may not contain spaces, quotes, '%'"):
            _plan(recipe, tmp_path, shards=2, checkpoint="Toy-Nano", out=tmp_path / name)
    with pytest.raises(SubmitError, match="may not contain ','"):
        _plan(recipe, tmp_path, shards=2, checkpoint="Toy-Nano", container="apptainer",
              images=["docker://r/i@" + DIGEST], options=["videos=/data/x:y"])


def test_the_cli_refuses_in_one_line_and_the_dry_run_writes_scripts(tmp_path: Path) -> None:
    result = runner.invoke(cli.app, ["submit", "dynamic-degree", "--shards", "3", "--fixture", "--engine", "pbs",
                                     "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "only slurm is supported" in result.output
    result = runner.invoke(cli.app, ["submit", "dynamic-degree", "--shards", "3", "--fixture", "--out",
                                     str(tmp_path / "r"), "--sbatch-arg=--wrap=x"])
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert "--wrap is set by pinbench submit" in result.output
    result = runner.invoke(cli.app, ["submit", "dynamic-degree", "--shards", "3", "--fixture", "--out",
                                     str(tmp_path / "r"), "--dry-run"])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "r" / "slurm" / "shards.sbatch").read_text()
    argv = _command(text, "run")
    assert argv[1:4] == ["run", "dynamic-degree", "--checkpoint"] and "--fixture" in argv
    assert Path(argv[0]).name == "pinbench" and Path(argv[0]).is_absolute()  # this checkout's environment
    assert not (tmp_path / "r" / "slurm" / "submissions.jsonl").exists()


@pytest.mark.parametrize("skip_doctor", [False, True])
def test_a_checkpoint_typo_is_noted_once_by_the_submission_not_by_each_job(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, skip_doctor: bool) -> None:
    """`submit --checkpoint <typo>`: the submitting process says the typo note, and each job's `pinbench run`, run
    here with the argv and environment its script gives it, says nothing more (each array task and the finish job
    said it in its own log, and the submission said nothing)."""
    import pinbench.ops.launch as launch
    from pinbench.ops import doctor
    from pinbench.ops.job_command import SHARD_INDEX

    recipe = toy_recipe(tmp_path)
    note = ("note: checkpoint 'Toy-Nan' is not one of toy-bench's (Toy-Nano) (did you mean 'Toy-Nano'?); a new "
            "name is taken as your own model")
    held: list[str | None] = []
    monkeypatch.setattr(cli, "get_recipe", lambda name: recipe)
    monkeypatch.setattr(doctor, "diagnose", lambda recipe, cfg, **kwargs: [])
    monkeypatch.setattr(launch, "run_recipe", lambda cfg, note=None: held.append(note))
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", "off")
    out = tmp_path / "r"
    skip = ["--skip-doctor"] * skip_doctor
    result = runner.invoke(cli.app, ["submit", recipe.name, "--shards", "2", "--checkpoint", "Toy-Nan", "--out",
                                     str(out), "--dry-run", *skip])
    assert result.exit_code == 0, result.output
    said = result.output.splitlines()
    scripts = sorted((out / "slurm").glob("*.sbatch"))
    assert len(scripts) == 2
    for script in scripts:
        commands = _commands(script.read_text())
        env = dict(pair.split("=", 1) for argv in commands if argv[0] == "export" for pair in argv[1:])
        argv = _command(script.read_text(), "run")[1:]
        # each task of an array job: shard 1 of the first phase said it again in its own log
        for task in (["0/2", "1/2"] if f"{SHARD_INDEX}/2" in argv else [None]):
            job = runner.invoke(cli.app, [task if arg == f"{SHARD_INDEX}/2" else arg for arg in argv], env=env)
            assert job.exit_code == 0, job.output
            said += job.output.splitlines()
    assert said.count(note) + held.count(note) == 1, (said, held)
    # without the doctor the first phase's jobs hold it, so that a recipe's own refusal of the name is the one line
    # (submit said it, then each job's log held the recipe's refusal)
    assert (note in result.output, held.count(note)) == (not skip_doctor, int(skip_doctor))
    first = [script.name for script in scripts].index(f"{recipe.layout(None)[0].name}.sbatch")
    assert held[first] == (note if skip_doctor else None)


def test_a_run_directory_of_another_recipe_checkpoint_or_mode_is_refused_before_anything_is_written(
        tmp_path: Path) -> None:
    """Every job would be refused there. Before, ``submit`` wrote its scripts into the other run's ``slurm/``
    (over its own), appended to its ``submissions.jsonl`` (``pinbench status`` then showed the wrong recipe) and
    queued an array and a finish job that each failed with exit 2."""
    import json

    out = tmp_path / "r"
    out.mkdir()
    (out / "pinbench-run.json").write_text(json.dumps({"recipe": "dynamic-degree", "checkpoint": "m",
                                                       "mode": "full"}))
    (tmp_path / "videos").mkdir()   # beside the run directory: one inside its input folder is refused
    videos = ["-o", f"videos={tmp_path / 'videos'}"]
    for args in (["--fixture"], ["--checkpoint", "other", *videos], ["--checkpoint", "m", "--limit", "2", *videos]):
        result = runner.invoke(cli.app, ["submit", "dynamic-degree", "--shards", "2", "--out", str(out),
                                         "--dry-run", *args])
        assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
        assert result.output.startswith(f"error: {out}: holds the run of dynamic-degree / m (full)")
        assert not (out / "slurm").exists()
    assert runner.invoke(cli.app, ["submit", "dynamic-degree", "--shards", "2", "--out", str(out), "--dry-run",
                                   "--checkpoint", "m", *videos]).exit_code == 0


def test_a_run_directory_that_keeps_results_of_other_inputs_is_refused_before_anything_is_written(
        tmp_path: Path) -> None:
    """Resubmitting into a run directory with another -o videos folder was queued on a real Slurm, and every array
    task and the finish job failed once scheduled ("holds the run of other inputs"), as pinbench run refuses it."""
    import json

    from pinbench.core.rundir import run_identity

    out, first, other = tmp_path / "r", tmp_path / "videos", tmp_path / "other"
    for folder in (first, other):
        folder.mkdir()
        (folder / "a.mp4").write_bytes(folder.name.encode())
    cfg = get_recipe("dynamic-degree").config("m", out_dir=out, options={"videos": first})
    out.mkdir()
    (out / "pinbench-run.json").write_text(json.dumps(run_identity(cfg), default=str))
    (out / "scorecard.json").write_text("{}")   # it keeps results: a run there is refused too
    args = ["submit", "dynamic-degree", "--shards", "2", "--checkpoint", "m", "--out", str(out), "--dry-run"]
    result = runner.invoke(cli.app, [*args, "-o", f"videos={other}"])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert result.output.startswith(f"error: {out}: holds the run of other inputs (-o videos={first} then, {other} "
                                    "now); a run directory belongs to one set of inputs: pass another --out")
    assert not (out / "slurm").exists()
    assert runner.invoke(cli.app, [*args, "-o", f"videos={first}"]).exit_code == 0
    (first / "b.mp4").write_bytes(b"new")   # the same folder, other content
    result = runner.invoke(cli.app, [*args, "-o", f"videos={first}"])
    assert result.exit_code == 2 and f"then, {first} now (its content changed)" in result.output, result.output
    # the way on only moves it: `pinbench run --move-aside` (said before) ran the whole recipe on the submitting node
    assert f"move this one aside first (mv {out} {out}.aside-" in result.output, result.output
    assert "), then submit again\n" in result.output and "pinbench run" not in result.output, result.output


@pytest.mark.parametrize("inside", ["out", "sample cache"])
def test_a_run_directory_or_sample_cache_inside_an_input_folder_is_refused_before_anything_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inside: str) -> None:
    """pinbench run refuses both; submit wrote its scripts into the input folder and queued jobs that each were
    refused (or, with the cache there, changed the inputs under every rerun)."""
    videos = tmp_path / "videos"
    videos.mkdir()
    out = videos / "run" if inside == "out" else tmp_path / "run"
    if inside == "sample cache":
        monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(videos / ".cache"))
    said = (f"--out {out}: inside -o videos={videos}, an input of the run; what the run writes there would change "
            "that input and every rerun be refused: name a folder outside it" if inside == "out" else
            f"$PINBENCH_SAMPLE_CACHE={videos / '.cache'}: inside -o videos={videos}, an input of the run; what the "
            "cache keeps there would change those inputs and every rerun be refused: name a folder outside it")
    for container in ("docker", "none"):
        result = runner.invoke(cli.app, ["submit", "dynamic-degree", "--shards", "2", "--checkpoint", "m", "-o",
                                         f"videos={videos}", "--out", str(out), "--container", container,
                                         "--dry-run"])
        assert result.exit_code == 2 and result.output.splitlines() == [f"error: {said}"], result.output
    assert list(videos.iterdir()) == [] and not out.exists()


def test_an_input_folder_given_relative_is_read_against_the_submitting_directory(tmp_path: Path) -> None:
    """-o videos=. in the submitting directory, --out run: refused as pinbench run refuses it there."""
    recipe = get_recipe("dynamic-degree")
    with pytest.raises(SubmitError, match=r"^--out .*/run: inside -o videos=\., an input of the run"):
        _plan(recipe, tmp_path, shards=2, checkpoint="m", options=["videos=."], out=Path("run"))
    assert list(tmp_path.iterdir()) == []


def test_an_input_folder_given_through_a_symlink_then_dotdot_is_the_one_the_system_reads(tmp_path: Path) -> None:
    """-o videos=lnk/../clips names the folder beside the symlink's target for the system (and for pinbench run);
    the jobs were given the folder beside the symlink (os.path.normpath drops both), another folder or none."""
    (tmp_path / "deep" / "a").mkdir(parents=True)
    (tmp_path / "lnk").symlink_to(tmp_path / "deep" / "a")
    the_plan = _plan(toy_recipe(tmp_path), tmp_path, shards=2, checkpoint="Toy-Nano", options=["videos=lnk/../clips"])
    argv = _command(write_scripts(the_plan)[0].read_text(), PROGRAM[0])
    options = [argv[i + 1] for i, word in enumerate(argv) if word == "--option"]
    assert options == [f"videos={tmp_path / 'deep' / 'clips'}"]


def test_the_recorded_command_resubmits_the_same_request(tmp_path: Path) -> None:
    request = Request(recipe=toy_recipe(tmp_path), shards=3, checkpoint="Toy-Nano", out=Path("runs/x"), limit=4,
                      partition="gpu", time="1:00:00", options=["mode=slow"], sbatch_args=["--mem=8G"],
                      container="pyxis", images=["nvcr.io#r/i@" + DIGEST])
    assert shlex.split(request.command()) == [
        "pinbench", "submit", "toy-bench", "--shards", "3", "--checkpoint", "Toy-Nano", "--out", "runs/x",
        "--limit", "4", "--partition", "gpu", "--time", "1:00:00", "--option=mode=slow", "--sbatch-arg=--mem=8G",
        "--container", "pyxis", "--image=nvcr.io#r/i@" + DIGEST]


# ---------------------------------------------------------------------------------- container commands


def _toy_with_stages(tmp_path: Path):
    stages = [{"name": "fetch", "argv": ["fetch"], "network": True, "needs_token": True, "gpus": False},
              {"name": "generate", "dockerfile": "Dockerfile.generate", "argv": ["run", "--skip-scoring"],
               "network": True, "needs_token": True},
              {"name": "score", "argv": ["run", "--skip-generation"]}]
    layout = [{"name": "generate", "sharded": True, "flags": ["--skip-scoring"], "stage": "generate"},
              {"name": "score", "flags": ["--skip-generation"], "stage": "score", "gpus": True}]
    return toy_recipe(tmp_path, stages=stages, scale_out=layout)


def test_docker_runs_the_stage_image_with_the_jobs_gpus_and_the_stage_policy(tmp_path: Path) -> None:
    videos = tmp_path / "videos"
    the_plan = _plan(_toy_with_stages(tmp_path), tmp_path, shards=2, checkpoint="Toy-Nano", gpus_per_task=2,
                     container="docker", options=[f"videos={videos}"])
    generate, score = (p.text for p in the_plan.phases)
    for text in (generate, score):
        subprocess.run(["bash", "-n"], input=text, text=True, check=True)

    gen = _command(generate, "docker")
    image_at = gen.index("$IMAGE")
    docker, inner = gen[:image_at], gen[image_at + 1:]
    assert docker[:2] == ["docker", "run"] and "--rm" in docker and _value(docker, "--pull") == "never"
    assert "IMAGE=pinbench/toy-bench-generate:1.0.0" in generate  # the generation stage's image
    assert "--network" not in docker  # the generation stage fetches
    assert _value(docker, "--gpus") == '"device=${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-}}"'
    volumes = [docker[i + 1] for i, w in enumerate(docker) if w == "--volume"]
    assert f"{tmp_path / 'run'}:/runs/out" in volumes and f"{videos}:/inputs/videos:ro" in volumes
    envs = [docker[i + 1] for i, w in enumerate(docker) if w == "--env"]
    assert "HF_TOKEN" in envs and "TOY_HOME" in envs and "PINBENCH_CACHE=/cache" in envs
    assert "unset HF_TOKEN" not in generate
    assert inner[:3] == ["pinbench", "run", "toy-bench"] and _value(inner, "--out") == "/runs/out"
    assert "--option" in inner and _value(inner, "--option") == "videos=/inputs/videos"
    assert "--offline" not in inner and _value(inner, "--shard") == "${SLURM_ARRAY_TASK_ID}/2"

    sc = _command(score, "docker")
    docker = sc[:sc.index("$IMAGE")]
    assert "IMAGE=pinbench/toy-bench:1.0.0" in score and _value(docker, "--network") == "none"
    envs = [docker[i + 1] for i, w in enumerate(docker) if w == "--env"]
    assert "HF_TOKEN" not in envs and "PINBENCH_OFFLINE=1" in envs
    assert "unset HF_TOKEN" in score and "--offline" in sc


def test_offline_takes_the_network_and_token_from_a_stage_that_has_them(tmp_path: Path) -> None:
    """As under ``pinbench run --runtime docker --offline``: the generation stage's job had the network and
    ``--env HF_TOKEN`` while it ran ``--offline``."""
    generate = _plan(_toy_with_stages(tmp_path), tmp_path, shards=2, checkpoint="Toy-Nano", container="docker",
                     offline=True).phases[0].text
    gen = _command(generate, "docker")
    docker = gen[:gen.index("$IMAGE")]
    assert _value(docker, "--network") == "none" and "HF_TOKEN" not in docker and "--offline" in gen
    assert "unset HF_TOKEN" in generate and "(offline, no token)" in generate


def test_pyxis_and_apptainer_run_a_pinned_image_with_the_same_mounts(tmp_path: Path) -> None:
    sqsh = tmp_path / "score.sqsh"
    sqsh.write_bytes(b"squashfs image")
    import hashlib

    file_digest = "sha256:" + hashlib.sha256(b"squashfs image").hexdigest()
    recipe = _toy_with_stages(tmp_path)
    ref = "nvcr.io#lab/toy-gen@" + DIGEST
    pyxis = _plan(recipe, tmp_path, shards=2, checkpoint="Toy-Nano", gpus_per_task=1, container="pyxis",
                  images=[f"generate={ref}", f"score={sqsh}"])
    gen = _command(pyxis.phases[0].text, "srun")
    assert gen[0] == "srun" and f"--container-image={ref}" in gen and "--no-container-mount-home" in gen
    mounts = next(w for w in gen if w.startswith("--container-mounts=")).split("=", 1)[1].split(",")
    assert mounts[:2] == [f"{tmp_path / 'run'}:/runs/out", f"{pyxis.phases[0].job.cache}:/cache"]
    assert gen[gen.index("pinbench"):][:3] == ["pinbench", "run", "toy-bench"]
    assert f"PINBENCH_IMAGE_DIGEST={DIGEST}" in pyxis.phases[0].text
    score = pyxis.phases[1].text
    assert f"--container-image={sqsh}" in _command(score, "srun") and f"PINBENCH_IMAGE_DIGEST={file_digest}" in score

    app = _plan(recipe, tmp_path, shards=2, checkpoint="Toy-Nano", gpus_per_task=1, container="apptainer",
                images=[f"generate=docker://ghcr.io/lab/gen@{DIGEST}", f"score={sqsh}"])
    gen = _command(app.phases[0].text, "apptainer")
    assert gen[:3] == ["apptainer", "exec", "--nv"] and "--no-home" in gen
    binds = [gen[i + 1] for i, w in enumerate(gen) if w == "--bind"]
    assert binds[0] == f"{tmp_path / 'run'}:/runs/out"
    assert f"docker://ghcr.io/lab/gen@{DIGEST}" in gen
    # a phase that asks for no GPU gets none
    no_gpu = _plan(recipe, tmp_path, shards=2, checkpoint="Toy-Nano", container="apptainer",
                   images=[f"generate=docker://ghcr.io/lab/gen@{DIGEST}", f"score={sqsh}"])
    assert "--nv" not in _command(no_gpu.phases[0].text, "apptainer")
    for the_plan in (pyxis, app):
        for phase in the_plan.phases:
            subprocess.run(["bash", "-n"], input=phase.text, text=True, check=True)


def test_images_are_named_per_stage_when_the_layout_uses_two(tmp_path: Path) -> None:
    recipe = _toy_with_stages(tmp_path)
    with pytest.raises(SubmitError, match="give one --image STAGE=REF for each"):
        _plan(recipe, tmp_path, shards=2, checkpoint="Toy-Nano", container="pyxis", images=["r/i@" + DIGEST])
    with pytest.raises(SubmitError, match="needs --image score=REF for stage score"):
        _plan(recipe, tmp_path, shards=2, checkpoint="Toy-Nano", container="pyxis",
              images=["generate=r/i@" + DIGEST])
    (tmp_path / "img.tar").write_text("x")
    with pytest.raises(SubmitError, match="docker runs an image reference"):
        _plan(recipe, tmp_path, shards=2, checkpoint="Toy-Nano", container="docker",
              images=[f"generate={tmp_path / 'img.tar'}", "score=r/i@" + DIGEST])


# ----------------------------------------------------------------- submission, with fake Slurm clients


@pytest.fixture
def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from fake_slurm import install_fake_slurm

    log = install_fake_slurm(tmp_path / "fakebin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'fakebin'}:/usr/bin:/bin")
    monkeypatch.setattr("pinbench.ops.submit.CHECK_SECONDS", 0.2)
    return log


def _calls(log: Path, program: str) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.startswith(program + " ")]


def test_each_phase_waits_for_the_previous_and_the_submission_is_recorded(tmp_path: Path, fake_slurm: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from pinbench.ops.submit import last_submission, submit_plan

    monkeypatch.setenv("FAKE_STATE", "RUNNING")
    record = submit_plan(_plan(toy_recipe(tmp_path), tmp_path, shards=3, checkpoint="Toy-Nano"))
    assert record.job_ids == ["101", "102"] and last_submission(tmp_path / "run").job_ids == ["101", "102"]
    real = [c for c in _calls(fake_slurm, "sbatch") if "--test-only" not in c]
    tried = [c for c in _calls(fake_slurm, "sbatch") if "--test-only" in c]
    assert len(tried) == 2  # both scripts were tried before anything was submitted
    assert real == [f"sbatch --parsable {tmp_path}/run/slurm/shards.sbatch",
                    f"sbatch --parsable --dependency=afterany:101 {tmp_path}/run/slurm/finish.sbatch"]
    # the jobs are live: another submission to the same run directory is refused
    with pytest.raises(SubmitError, match=r"jobs 101, 102 of the submission .* are still queued or running"):
        submit_plan(_plan(toy_recipe(tmp_path), tmp_path, shards=3, checkpoint="Toy-Nano"))


def test_two_submissions_into_one_run_directory_at_once_take_turns(tmp_path: Path, fake_slurm: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Two submits into one --out at once (on a real Slurm) both found nothing live and both were queued: the second
    rewrote shards.sbatch before the first's sbatch read it, so the 2-shard submission's array ran the 3-shard script,
    and one record of submissions.jsonl was lost. Here the second starts while the first is in its first sbatch: it
    waits, then finds the first's jobs live and is refused; the scripts are the first's."""
    import threading

    from pinbench.ops import slurm
    from pinbench.ops.submit import last_submission, submit_plan

    monkeypatch.setenv("FAKE_STATE", "RUNNING")
    first = _plan(toy_recipe(tmp_path), tmp_path, shards=3, checkpoint="Toy-Nano")
    second = _plan(toy_recipe(tmp_path), tmp_path, shards=2, checkpoint="Toy-Nano")
    outcome: list[BaseException | None] = []

    def submit_second() -> None:
        try:
            submit_plan(second)
            outcome.append(None)
        except SubmitError as exc:
            outcome.append(exc)

    real_sbatch, racer = slurm.sbatch, threading.Thread(target=submit_second)

    def sbatch(script: Path, **kwargs) -> str:
        if not racer.is_alive() and not outcome:   # the first submission's first sbatch
            racer.start()
            racer.join(timeout=1.0)
        return real_sbatch(script, **kwargs)

    monkeypatch.setattr(slurm, "sbatch", sbatch)
    record = submit_plan(first)
    racer.join(timeout=30)
    assert outcome and isinstance(outcome[0], SubmitError), outcome
    assert "jobs 101, 102 of the submission" in str(outcome[0])
    lines = (tmp_path / "run" / "slurm" / "submissions.jsonl").read_text().splitlines()
    assert len(lines) == 1 and last_submission(tmp_path / "run").job_ids == record.job_ids == ["101", "102"]
    assert "--array=0-2" in _sbatch((tmp_path / "run" / "slurm" / "shards.sbatch").read_text())


def test_a_run_directory_nothing_can_be_written_in_is_one_line(tmp_path: Path, fake_slurm: Path) -> None:
    from pinbench.ops.submit import submit_plan

    out = Path("/proc/1/pinbench-test")   # under /proc nothing can be created, whoever runs the tests
    with pytest.raises(SubmitError, match=f"^--out {out}: cannot write the sbatch scripts there: "):
        submit_plan(_plan(toy_recipe(tmp_path), tmp_path, shards=2, checkpoint="Toy-Nano", out=out))
    assert not fake_slurm.exists()


def test_a_submissions_file_that_cannot_be_read_is_one_line_and_queues_nothing(tmp_path: Path,
                                                                                fake_slurm: Path) -> None:
    """The check for live jobs reads slurm/submissions.jsonl: a folder there (or a FIFO) was one line while the
    lock's catch wrapped the whole submission (8d6bb6f narrowed it to the lock, and it became a traceback); a
    record there that is no submission was a traceback before that too."""
    from pinbench.ops import submit

    the_plan = _plan(toy_recipe(tmp_path), tmp_path, shards=2, checkpoint="Toy-Nano")
    path = submit.submissions_path(the_plan.out_dir)
    path.mkdir(parents=True)
    with pytest.raises(SubmitError, match=f"^{path}: is a directory, not a file$"):
        submit.submit_plan(the_plan)
    path.rmdir()
    path.write_text("[]\n")
    with pytest.raises(SubmitError, match=f"^{path}:1: unreadable submission record "):
        submit.submit_plan(the_plan)
    assert not fake_slurm.exists()   # no Slurm command ran


def test_a_submission_that_cannot_be_recorded_is_cancelled_and_named_so(tmp_path: Path, fake_slurm: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A record that cannot be written (disk full) after sbatch queued the jobs was reported as "cannot write the
    sbatch scripts there", the jobs left queued where neither pinbench status nor the next submit's check for live
    jobs could see them: they are cancelled, and the record's file named."""
    from pinbench.ops import submit

    def full(out_dir: Path, record: object) -> None:
        raise OSError(28, "No space left on device", str(submit.submissions_path(out_dir)))

    monkeypatch.setattr(submit, "append_submission", full)
    with pytest.raises(SubmitError) as info:
        submit.submit_plan(_plan(toy_recipe(tmp_path), tmp_path, shards=3, checkpoint="Toy-Nano"))
    assert str(info.value) == (f"{tmp_path}/run/slurm/submissions.jsonl: cannot record the submission (No space left "
                               "on device) (cancelled what was submitted: 101, 102)")
    assert _calls(fake_slurm, "scancel") == ["scancel 101 102"]


def test_a_token_in_a_generator_option_is_recorded_redacted(tmp_path: Path, fake_slurm: Path) -> None:
    """slurm/submissions.jsonl is read by pinbench status and by people; a -g value or a --generator argument holding
    a token was recorded as given (a scorecard scrubs them). In the jobs' scripts both stand as one variable
    (test_secret_generator_options_reach_the_job_not_the_scripts, test_secrets_in_the_generators_argv_...)."""
    from pinbench.ops import submit

    the_plan = _plan(_generating_toy(tmp_path), tmp_path, shards=2, checkpoint="Toy-Nano",
                     generator=f"command:sh ./gen.sh --token {TOKEN} {{request}} {{out}}",
                     generator_options=[f"key={TOKEN}"])
    record = submit.submit_plan(the_plan)
    written = submit.submissions_path(the_plan.out_dir).read_text()
    assert TOKEN not in record.command and TOKEN not in written and "--generator-option=key=" in written
    assert TOKEN not in the_plan.phases[0].text and the_plan.secret_env == {"PINBENCH_SECRET_1": TOKEN}


def test_a_secret_named_generator_options_value_is_recorded_redacted(tmp_path: Path, fake_slurm: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """-g api_key=VALUE of no token's shape: a run redacts it (its name says it is a secret), yet submit recorded it
    whole in slurm/submissions.jsonl and the command it returns. So was the value of a command generator's
    secret-named flag (--token VALUE), which the jobs' scripts keep: they must run it."""
    from pinbench.core.provenance import KEPT_SECRETS_ENV
    from pinbench.ops import submit

    monkeypatch.delenv(KEPT_SECRETS_ENV, raising=False)   # submit keeps it in this process's environment
    the_plan = _plan(_generating_toy(tmp_path), tmp_path, shards=2, checkpoint="Toy-Nano",
                     generator="command:sh ./gen.sh {request} {out} --token plain-tok-6630",
                     generator_options=["api_key=plain-key-9876"])
    record = submit.submit_plan(the_plan)
    written = submit.submissions_path(the_plan.out_dir).read_text()
    assert "plain-key-9876" not in record.command + written and "--generator-option=api_key=***" in written
    assert "plain-tok-6630" not in record.command + written and "--token ***" in written
    assert "plain-key-9876" not in the_plan.phases[0].text and "plain-tok-6630" not in the_plan.phases[0].text
    # so only their owner reads them (they were 0o755: anyone on a shared cluster read the key in --out/slurm/)
    assert {stat.S_IMODE(p.script.stat().st_mode) for p in the_plan.phases} == {0o700}


def _recording_standins(tmp_path: Path) -> tuple[Path, Path]:
    """A folder of stand-ins for pinbench, docker, srun and apptainer, the one running ``pinbench run`` (not
    ``pinbench status``) writing its argv a line each into ``$SEEN/argv``; and that ``$SEEN`` folder."""
    bin_dir, seen = tmp_path / "bin", tmp_path / "seen"
    bin_dir.mkdir()
    seen.mkdir()
    for name in ("pinbench", "docker", "srun", "apptainer"):
        (bin_dir / name).write_text('#!/bin/sh\ncase " $* " in *" -g "*) printf "%s\\n" "$@" > "$SEEN/argv";; esac\n')
        (bin_dir / name).chmod(0o755)
    return bin_dir, seen


SECRET = "it's a \"key\" $HOME `x` plain-key-9876"   # spaces, quotes, $ and a backtick: it must arrive as given
# each way a job runs, with an image it may be given
EVERY_CONTAINER = [("none", None), ("docker", f"sha256:{'e' * 64}"), ("pyxis", "nvcr.io#r/i@" + DIGEST),
                   ("apptainer", "docker://r/i@" + DIGEST)]


@pytest.mark.parametrize(("container", "image"), EVERY_CONTAINER)
def test_secret_generator_options_reach_the_job_not_the_scripts(tmp_path: Path, fake_slurm: Path,
                                                                 monkeypatch: pytest.MonkeyPatch, container: str,
                                                                 image: str | None) -> None:
    """A secret-named -g value (api_key=) and one holding a token were written as given into every
    <run>/slurm/*.sbatch, which goes wherever the run directory is copied. Each is now a variable the job's shell
    expands; sbatch (the fake, recording its environment) gets the values, and each script, run here with that
    environment and recording stand-ins for pinbench, docker, srun and apptainer, hands the inner ``pinbench run``
    every value intact. A -g value of no secret stays as it was."""
    from pinbench.core.provenance import KEPT_SECRETS_ENV
    from pinbench.ops import submit

    monkeypatch.delenv(KEPT_SECRETS_ENV, raising=False)
    bin_dir, seen = _recording_standins(tmp_path)
    the_plan = plan(Request(recipe=_generating_toy(tmp_path), shards=2, checkpoint="Toy-Nano", out=tmp_path / "run",
                            generator="own", container=container, images=[image] if image else [],
                            generator_options=[f"api_key={SECRET}", f"url=https://u:{TOKEN}@host", "temperature=0.5"]),
                    cwd=tmp_path, pinbench=[str(bin_dir / "pinbench")])
    submit.submit_plan(the_plan)
    sent = dict(line.split("=", 1) for line in (fake_slurm.parent / "sbatch.env").read_text().splitlines()
                if re.match(r"PINBENCH_SECRET_\d+=", line))
    assert sent == {"PINBENCH_SECRET_1": SECRET, "PINBENCH_SECRET_2": f"https://u:{TOKEN}@host"}
    # nor the values submit kept (secrets58): the job's run keeps its own, and sbatch handed the job this copy too
    assert KEPT_SECRETS_ENV in os.environ and not re.search(
        f"^{KEPT_SECRETS_ENV}=", (fake_slurm.parent / "sbatch.env").read_text(), re.MULTILINE)
    for phase in the_plan.phases:
        text = phase.script.read_text()
        assert TOKEN not in text and "plain-key-9876" not in text
        lines = [line.strip().removesuffix(" \\") for line in text.splitlines()]   # one option a line
        assert '-g api_key="${PINBENCH_SECRET_1}"' in lines and '-g url="${PINBENCH_SECRET_2}"' in lines
        assert "-g temperature=0.5" in lines
        subprocess.run(["bash", "-c", text], check=True, cwd=tmp_path, env={
            "PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_ARRAY_TASK_ID": "0", "SEEN": str(seen), **sent})
        argv = (seen / "argv").read_text().splitlines()
        (seen / "argv").unlink()
        assert [argv[i + 1] for i, word in enumerate(argv) if word == "-g"] == [
            f"api_key={SECRET}", f"url=https://u:{TOKEN}@host", "temperature=0.5"], phase.phase.name


@pytest.mark.parametrize(("container", "image"), EVERY_CONTAINER)
def test_secrets_in_the_generators_argv_reach_the_job_not_the_scripts(tmp_path: Path, fake_slurm: Path,
                                                                      monkeypatch: pytest.MonkeyPatch, container: str,
                                                                      image: str | None) -> None:
    """A ``command:`` generator's secret flag value (--token VALUE, of no token's shape) and a token in its text
    were written as given into every <run>/slurm/*.sbatch, as -g secrets were before. Each is now a variable
    (after the -g ones) the job's shell puts back: the inner ``pinbench run`` gets the very --generator text (its
    rollouts are reused by its signature), and with --container none the signature it computes is the local run's."""
    from pinbench.core.provenance import KEPT_SECRETS_ENV
    from pinbench.ops import submit
    from pinbench.ops.generation import command_signature, same_generator

    monkeypatch.delenv(KEPT_SECRETS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)   # the signature hashes ./gen.sh from here, as the job does (its --chdir)
    bin_dir, seen = _recording_standins(tmp_path)
    (tmp_path / "gen.sh").write_text("#!/bin/sh\n")
    generator = f"command:sh ./gen.sh {{request}} {{out}} --token plain-tok-6630 --url 'https://u:{TOKEN}@host'"
    options = {"api_key": "plain-key-9876", "temperature": "0.5"}
    the_plan = plan(Request(recipe=_generating_toy(tmp_path), shards=2, checkpoint="Toy-Nano", out=tmp_path / "run",
                            generator=generator, container=container, images=[image] if image else [],
                            generator_options=[f"{k}={v}" for k, v in options.items()]),
                    cwd=tmp_path, pinbench=[str(bin_dir / "pinbench")])
    submit.submit_plan(the_plan)
    sent = dict(line.split("=", 1) for line in (fake_slurm.parent / "sbatch.env").read_text().splitlines()
                if re.match(r"PINBENCH_SECRET_\d+=", line))
    assert sent == {"PINBENCH_SECRET_1": "plain-key-9876", "PINBENCH_SECRET_2": "plain-tok-6630",
                    "PINBENCH_SECRET_3": TOKEN}   # what *** hides: the URL's password
    for phase in the_plan.phases:
        text = phase.script.read_text()
        assert TOKEN not in text and "plain-tok-6630" not in text and "plain-key-9876" not in text
        assert """--token '"${PINBENCH_SECRET_2}"' --url""" in text, text
        subprocess.run(["bash", "-c", text], check=True, cwd=tmp_path, env={
            "PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_ARRAY_TASK_ID": "0", "SEEN": str(seen), **sent})
        argv = (seen / "argv").read_text().splitlines()
        (seen / "argv").unlink()
        given = argv[argv.index("--generator") + 1]
        assert given == phase.job.cfg.generator and same_generator(given, generator), phase.phase.name
        got = dict(argv[i + 1].split("=", 1) for i, word in enumerate(argv) if word == "-g")
        assert got == options
        if container == "none":
            assert given == generator
            assert command_signature(command_argv(given), got) == command_signature(command_argv(generator), options)
    # a flag value the text spells otherwise (quoted in part) cannot be cut out of it: the whole text is carried
    spelt = "command:sh ./gen.sh {request} {out} --token 'plain'-tok-6630"
    assert submit.secret_variables(replace(the_plan.phases[0].job.cfg, generator=spelt)) == {
        "plain-key-9876": "PINBENCH_SECRET_1", spelt: "PINBENCH_SECRET_2"}


def test_a_job_started_without_the_secrets_variable_stops_in_one_line_naming_it(tmp_path: Path) -> None:
    """``sbatch <script>`` run again by hand hands the job no secret: under ``set -u`` bash said only
    "PINBENCH_SECRET_1: unbound variable". It now says what carries it and to submit again, and runs nothing."""
    ran = tmp_path / "ran"
    program = tmp_path / "pinbench"
    program.write_text(f'#!/bin/sh\ntouch "{ran}"\n')
    program.chmod(0o755)
    the_plan = plan(Request(recipe=_generating_toy(tmp_path), shards=2, checkpoint="Toy-Nano", out=tmp_path / "run",
                            generator="own", generator_options=["api_key=plain-key-9876"]),
                    cwd=tmp_path, pinbench=[str(program)])
    for phase in the_plan.phases:
        proc = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", "SLURM_ARRAY_TASK_ID=0", "bash", "-c", phase.text],
                              cwd=tmp_path, capture_output=True, text=True)
        assert proc.returncode != 0 and not ran.exists()
        assert proc.stderr.count("\n") == 1 and proc.stderr.endswith(
            "PINBENCH_SECRET_1: not set: it carries a secret -g or --generator value, which pinbench submit hands "
            "sbatch in its environment and never writes here; run pinbench submit again\n"), proc.stderr


def _export_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, export: str, where: str) -> Request:
    """A request with one secret -g value whose sbatch gets ``export`` as an --sbatch-arg or in $SBATCH_EXPORT."""
    monkeypatch.delenv("SBATCH_EXPORT", raising=False)
    if where == "environment":
        monkeypatch.setenv("SBATCH_EXPORT", export)
    return Request(recipe=_generating_toy(tmp_path), shards=2, checkpoint="Toy-Nano", out=tmp_path / "run",
                   generator="own", generator_options=["api_key=plain-key-9876"],
                   sbatch_args=[f"--export={export}"] if where == "sbatch-arg" else [])


@pytest.mark.parametrize(("export", "where", "refused"), [
    ("NONE", "sbatch-arg", True), ("HOME,PATH", "sbatch-arg", True), ("NONE", "environment", True),
    ("", "environment", True), ("NONE,pinbench_secret_1", "sbatch-arg", True),
    ("NONE,PINBENCH_SECRET_1", "sbatch-arg", False), ("ALL", "sbatch-arg", False), ("ALL", "environment", False),
    ("all", "sbatch-arg", False), ("HOME,All", "environment", False),
    # secrets59: a value in it (a password redact does not know) is not repeated
    ("NONE,DB_PW=plainpass1", "sbatch-arg", True), ("NONE,DB_PW=plainpass1", "environment", True)])
def test_an_export_that_drops_the_secrets_variable_is_refused_in_one_line(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          export: str, where: str,
                                                                          refused: bool) -> None:
    """sbatch hands the job the variable carrying a secret -g value only where its --export (an --sbatch-arg, or
    $SBATCH_EXPORT, which sbatch prefers to the script's) holds ALL or names it: on the local Slurm, --export=NONE
    and --export=HOME gave the job none, --export=NONE,PINBENCH_SECRET_1 gave it the value; --export=all and
    SBATCH_EXPORT=ALL over an --export=NONE line gave it too (both were refused), an empty SBATCH_EXPORT none."""
    request = _export_request(tmp_path, monkeypatch, export, where)
    if not refused:
        assert plan(request, cwd=tmp_path, pinbench=PROGRAM).secret_env == {"PINBENCH_SECRET_1": "plain-key-9876"}
        # the last --export line is sbatch's, and $SBATCH_EXPORT (even empty) beats the script's lines
        earlier = replace(request, sbatch_args=["--export=NONE", *request.sbatch_args])
        assert plan(earlier, cwd=tmp_path, pinbench=PROGRAM).secret_env == {"PINBENCH_SECRET_1": "plain-key-9876"}
        return
    what = "--sbatch-arg --export" if where == "sbatch-arg" else "$SBATCH_EXPORT"
    with pytest.raises(SubmitError) as refusal:
        plan(request, cwd=tmp_path, pinbench=PROGRAM)
    assert str(refusal.value) == (
        f"{what}: the jobs would not get PINBENCH_SECRET_1 (the variables carrying the secret -g and --generator "
        "values kept out of the scripts); add ',PINBENCH_SECRET_1' to it or leave --export out")
    # without a secret -g value nothing needs it
    plain = replace(request, generator_options=["temperature=0.5"])
    assert plan(plain, cwd=tmp_path, pinbench=PROGRAM).secret_env == {}


@pytest.mark.parametrize("where", ["sbatch-arg", "environment"])
def test_an_export_giving_a_secret_s_variable_a_value_of_its_own_is_refused_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """``--export=NONE,PINBENCH_SECRET_1=other`` named the variable, so it passed the check that it is handed
    down, and the job got 'other' in place of the secret; the refusal does not repeat 'other'."""
    export = "NONE,PINBENCH_SECRET_1=other-value"
    request = _export_request(tmp_path, monkeypatch, export, where)
    with pytest.raises(SubmitError) as refusal:
        plan(request, cwd=tmp_path, pinbench=PROGRAM)
    what = "--sbatch-arg --export" if where == "sbatch-arg" else "$SBATCH_EXPORT"
    assert str(refusal.value) == (
        f"{what}: it gives PINBENCH_SECRET_1 a value of its own, and the jobs would get that in place of the secret -g "
        "or --generator value pinbench submit hands sbatch in it; name the variable without '=' or leave --export out")


def test_a_refused_finish_job_cancels_the_array_already_submitted(tmp_path: Path, fake_slurm: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from pinbench.ops.submit import submit_plan

    monkeypatch.setenv("FAKE_SBATCH_REFUSE_AT", "2")
    with pytest.raises(SubmitError) as info:
        submit_plan(_plan(toy_recipe(tmp_path), tmp_path, shards=3, checkpoint="Toy-Nano"))
    assert str(info.value) == (f"sbatch refused {tmp_path}/run/slurm/finish.sbatch: Batch job submission failed: "
                               "Requested node configuration is not available (cancelled what was submitted: 101)")
    assert _calls(fake_slurm, "scancel") == ["scancel 101"]
    assert not (tmp_path / "run" / "slurm" / "submissions.jsonl").exists()


def test_a_job_held_for_a_reason_that_never_clears_is_cancelled(tmp_path: Path, fake_slurm: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from pinbench.ops.submit import submit_plan

    monkeypatch.setenv("FAKE_REASON", "PartitionTimeLimit")
    with pytest.raises(SubmitError, match=r"^job 101 would never start: Slurm holds it for PartitionTimeLimit "
                                          r"\(cancelled what was submitted: 101, 102\)$"):
        submit_plan(_plan(toy_recipe(tmp_path), tmp_path, shards=3, checkpoint="Toy-Nano"))
    assert _calls(fake_slurm, "scancel") == ["scancel 101 102"]


def test_an_unusable_input_is_refused_before_anything_is_queued_and_skip_doctor_reaches_every_job(
        tmp_path: Path, fake_slurm: Path) -> None:
    """One broken video made every array task and then the finish job fail their own doctor after they were
    scheduled (no scorecard, `status` showing no sample), and submit had no --skip-doctor to score the rest."""
    from pinbench.ops.submit import last_submission

    videos, out = tmp_path / "videos", tmp_path / "r"
    videos.mkdir()
    (videos / "v3.mp4").write_bytes(b"not a video")
    args = ["submit", "dynamic-degree", "--shards", "2", "-c", "mine", "--out", str(out), "-o", f"videos={videos}",
            "-o", "flow=farneback"]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 2, result.output
    assert "v3.mp4 (undecodable" in result.output and "`pinbench submit ... --skip-doctor`" in result.output
    assert not out.exists() and not fake_slurm.exists()  # no Slurm command was even asked
    result = runner.invoke(cli.app, [*args, "--skip-doctor"])
    assert result.exit_code == 0, result.output
    for phase in ("shards", "finish"):
        assert "--skip-doctor" in _command((out / "slurm" / f"{phase}.sbatch").read_text(), "run")
    assert "--skip-doctor" in shlex.split(last_submission(out).command)


def test_a_misspelt_command_placeholder_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """``{output}`` for ``{out}``: refused at submission in one line; before, every queued job was refused as it
    started."""
    out = tmp_path / "r"
    result = runner.invoke(cli.app, ["submit", "remembench", "--shards", "2", "--fixture", "--out", str(out),
                                     "--dry-run", "--generator", "command:gen --request {request} --out {output}"])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert "unknown placeholder {output}" in result.output
    assert not (out / "slurm").exists()


def test_a_commands_bad_option_value_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """``-g prompt_schedule=maybe`` of a command: the scripts were written and every queued job refused it as it
    started; now refused at submission in one line, as pinbench run refuses it."""
    out = tmp_path / "r"
    result = runner.invoke(cli.app, ["submit", "remembench", "--shards", "2", "--fixture", "--out", str(out),
                                     "--dry-run", "--generator", "command:gen --request {request} --out {out}",
                                     "-g", "prompt_schedule=maybe"])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert "-g prompt_schedule: 'maybe' is not a boolean" in result.output
    assert not (out / "slurm").exists()


def _container_env_and_mounts(text: str, container: str) -> tuple[dict[str, str], dict[str, str]]:
    """What a phase script's container gets: its environment as set in the script, and {container path: host
    path[:ro]} of its mounts."""
    argv = _command(text, {"docker": "docker", "pyxis": "srun", "apptainer": "apptainer"}[container])
    if container == "pyxis":
        export = next(a for a in _commands(text) if a[0] == "export" and any(w.startswith("PINBENCH_CACHE=")
                                                                              for w in a))
        pairs = export[1:]
        mounts = next(w for w in argv if w.startswith("--container-mounts=")).split("=", 1)[1].split(",")
    else:
        pairs = [argv[i + 1] for i, w in enumerate(argv) if w == "--env" and "=" in argv[i + 1]]
        flag = {"docker": "--volume", "apptainer": "--bind"}[container]
        mounts = [argv[i + 1] for i, w in enumerate(argv) if w == flag]
    env = dict(pair.split("=", 1) for pair in pairs)
    return env, {target: host + "".join(f":{o}" for o in ro) for host, target, *ro in (m.split(":") for m in mounts)}


@pytest.mark.parametrize("where", ["elsewhere", "in the cache root", "off", "unset"])
@pytest.mark.parametrize(("container", "images"), [("docker", []), ("pyxis", ["nvcr.io#r/i@" + DIGEST]),
                                                   ("apptainer", [f"docker://ghcr.io/lab/i@{DIGEST}"])])
def test_the_submitting_shells_sample_cache_holds_in_every_container_job(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, container: str, images: list[str], where: str) -> None:
    """``$PINBENCH_SAMPLE_CACHE`` and its bound as the submitting shell set them, as ``--runtime docker`` gives them
    (docker_runtime.sample_cache_setting): the jobs mounted only the cache and used ``/cache/samples`` whatever it
    said, ``off``, another folder and the bound included."""
    shared = tmp_path / "shared" / "samples"
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE_MB", "10000")
    value = {"elsewhere": str(shared), "in the cache root": str(tmp_path / "cache" / "mine"), "off": "off",
             "unset": None}[where]
    if value is None:
        monkeypatch.delenv("PINBENCH_SAMPLE_CACHE")
    else:
        monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", value)
    the_plan = _plan(toy_recipe(tmp_path), tmp_path, shards=2, checkpoint="Toy-Nano", container=container,
                     images=images)
    assert not shared.exists()   # planning writes nothing
    expected = {"elsewhere": "/sample-cache", "in the cache root": "/cache/mine", "off": "off", "unset": None}[where]
    for phase in the_plan.phases:
        subprocess.run(["bash", "-n"], input=phase.text, text=True, check=True)
        env, mounts = _container_env_and_mounts(phase.text, container)
        assert env.get("PINBENCH_SAMPLE_CACHE") == expected
        assert env["PINBENCH_SAMPLE_CACHE_MB"] == "10000"
        assert mounts["/cache"] == str((tmp_path / "cache").resolve())
        assert mounts.get("/sample-cache") == (str(shared) if where == "elsewhere" else None)   # read-write
    write_scripts(the_plan)
    assert shared.is_dir() == (where == "elsewhere")   # made by the submitting user, not by the engine as root


@pytest.mark.parametrize(("where", "said"), [("run/samples", "inside the run directory"),
                                             ("a-file", "not a folder but a regular file")])
def test_a_sample_cache_no_job_could_use_is_refused_before_anything_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, said: str) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(tmp_path / where))
    with pytest.raises(SubmitError, match=rf"^\$PINBENCH_SAMPLE_CACHE={tmp_path / where}: {said}"):
        _plan(toy_recipe(tmp_path), tmp_path, shards=2, checkpoint="Toy-Nano", container="docker")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("bound", ["lots", "nan", "inf", "-1", ""])
@pytest.mark.parametrize("container", ["none", "docker"])
def test_a_sample_cache_bound_that_is_no_size_is_refused_before_anything_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, container: str, bound: str) -> None:
    """The bound went to every job as it was, and each job was refused by it (the local run's check,
    ``size_bound``) once scheduled; submit refuses it in that one line, before anything is written or queued. Empty
    is the default, as for a run; with the cache off no bound is read, as for a run."""
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE_MB", bound)
    monkeypatch.delenv("PINBENCH_SAMPLE_CACHE", raising=False)

    def planned():
        return _plan(toy_recipe(tmp_path), tmp_path, shards=2, checkpoint="Toy-Nano", container=container,
                     images=[f"sha256:{'e' * 64}"] if container == "docker" else [])
    if bound:
        with pytest.raises(SubmitError) as info:
            planned()
        assert str(info.value) == (f"$PINBENCH_SAMPLE_CACHE_MB={bound!r}: the sample cache's bound must be a finite "
                                   "number of MiB, 0 or more")
    else:
        planned()
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", "off")
    planned()
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("container", ["none", "pyxis", "apptainer"])
def test_a_job_whose_stage_has_no_token_gets_neither_token_variable(tmp_path: Path, container: str) -> None:
    """sbatch hands a job the submitting shell's environment, and the job unset HF_TOKEN alone: a token exported as
    HUGGING_FACE_HUB_TOKEN, which huggingface_hub reads when HF_TOKEN is unset, reached every scoring job, and pyxis
    and apptainer hand it on into the container. Each script here runs with both set and a program recording what
    it gets."""
    seen, bin_dir = tmp_path / "seen", tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("pinbench", "srun", "apptainer"):
        (bin_dir / name).write_text(f'#!/bin/sh\nenv > "{seen}"\n')
        (bin_dir / name).chmod(0o755)
    images = [] if container == "none" else [f"{tmp_path / 'image.sif'}"]
    if images:
        Path(images[0]).write_bytes(b"image")
    the_plan = plan(Request(recipe=toy_recipe(tmp_path), shards=2, checkpoint="Toy-Nano", out=tmp_path / "run",
                            container=container, images=images), cwd=tmp_path, pinbench=[str(bin_dir / "pinbench")])
    for phase in the_plan.phases:
        seen.unlink(missing_ok=True)
        subprocess.run(["bash", "-c", phase.text], check=True, cwd=tmp_path, env={
            "PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_ARRAY_TASK_ID": "0", "HF_TOKEN": TOKEN,
            "HUGGING_FACE_HUB_TOKEN": TOKEN})
        assert TOKEN not in seen.read_text(), phase.phase.name


@pytest.mark.parametrize("where", ["shared", "off", "unset"])
def test_with_no_container_the_sample_cache_setting_is_written_into_each_script(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """A job of ``--container none`` relied on sbatch handing it the submitting shell's environment: with
    ``--sbatch-arg=--export=NONE`` it kept its records in the default folder, its bound and ``off`` dropped. The
    setting is now written into the script, the folder absolute (run here with nothing else in its environment, as
    ``--export=NONE`` runs it); a token in the submitting shell never is."""
    monkeypatch.chdir(tmp_path)
    value = {"shared": "shared", "off": "off", "unset": None}[where]
    if value is None:
        monkeypatch.delenv("PINBENCH_SAMPLE_CACHE", raising=False)
    else:
        monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", value)
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE_MB", "100")
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    seen = tmp_path / "seen"
    program = tmp_path / "pinbench"
    program.write_text(f'#!/bin/sh\nenv > "{seen}-$1"\n')
    program.chmod(0o755)
    the_plan = plan(Request(recipe=toy_recipe(tmp_path), shards=2, checkpoint="Toy-Nano", out=tmp_path / "run",
                            sbatch_args=["--export=NONE"]), cwd=tmp_path, pinbench=[str(program)])
    expected = {"shared": str(tmp_path / "shared"), "off": "off", "unset": None}[where]
    for phase in the_plan.phases:
        assert TOKEN not in phase.text
        seen.with_name("seen-run").unlink(missing_ok=True)
        subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", "SLURM_ARRAY_TASK_ID=0", "bash", "-c", phase.text],
                       check=True, cwd=tmp_path)
        env = dict(line.split("=", 1) for line in seen.with_name("seen-run").read_text().splitlines() if "=" in line)
        assert env.get("PINBENCH_SAMPLE_CACHE") == expected
        assert env["PINBENCH_SAMPLE_CACHE_MB"] == "100"


@pytest.mark.parametrize(("said", "shard", "says"), [
    ("but-shard-0", Shard(0, 8), True), ("but-shard-0", Shard(3, 8), False), ("but-shard-0", None, True),
    ("1", Shard(0, 8), False), ("1", None, False), (None, Shard(3, 8), True)])
def test_the_first_phase_s_shard_0_says_the_checkpoint_note_and_a_task_run_by_hand_says_it_too(
        said: str | None, shard: Shard | None, says: bool, tmp_path: Path) -> None:
    """Decided (review82b): with --skip-doctor shard 0 of the first phase says the typo note, or its one job where
    it is not sharded. A submission's array always holds shard 0 (--array=0-N-1); where it fails before printing
    the run is incomplete and that shard is run again, which says it then; a task run again by hand (no variable)
    says it as well. No note is lost for good, and no task but one says it per submission."""
    cfg = RunConfig(recipe="toy-bench", checkpoint="Toy-Nan0", out_dir=tmp_path, shard=shard)
    assert checkpoint_noted(cfg, said) is not says
