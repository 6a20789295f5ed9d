"""``--runtime docker`` against a real Docker engine (marked ``docker``; skipped without an engine or a base).

A stand-in image plays a recipe image: built FROM the python-3.11-slim base (or PINBENCH_TEST_BASE_IMAGE),
with the image's own ENV and USER 10001:10001, and a ``pinbench`` on PATH that prints what it was given
(its arguments, environment, uid, network) and writes a scorecard through the /runs/out mount.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from toy_recipe import toy_recipe

from pinbench.core.recipe import Recipe
from pinbench.ops import docker_runtime
from pinbench.ops.docker_engine import ContainerError, build_image

PRINTER = """#!/usr/bin/env python3
import json, os, socket, sys
print("ARGS", json.dumps(sys.argv[1:]), flush=True)
print("ENV", json.dumps(dict(os.environ)), flush=True)
print("UID", os.getuid(), flush=True)
try:
    socket.create_connection(("1.1.1.1", 53), timeout=3)
    print("NET up", flush=True)
except OSError:
    print("NET down", flush=True)
if "--out" in sys.argv:
    out = sys.argv[sys.argv.index("--out") + 1]
    open(os.path.join(out, "scorecard.json"), "w").write("{}")
    print("scorecard:", os.path.join(out, "scorecard.json"), flush=True)
"""

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def stand_in(engine, base_image: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    base = base_image
    context = tmp_path_factory.mktemp("stand-in")
    (context / "pinbench").write_text(PRINTER)
    (context / "Dockerfile").write_text(
        f"FROM {base}\nENV TOY_EVALUATOR_DIR=/opt/evaluator\nCOPY pinbench /usr/local/bin/pinbench\n"
        "RUN chmod 755 /usr/local/bin/pinbench\nUSER 10001:10001\n")
    tag = "pinbench/toy-bench:2.0.0"
    build_image(context, tag, client=engine, log=lambda line: None)
    engine.images.get(tag).tag("pinbench/toy-bench-generate", "2.0.0")
    yield tag
    for name in (tag, "pinbench/toy-bench-generate:2.0.0"):
        engine.images.remove(name, force=True)


@pytest.fixture
def recipe(tmp_path: Path) -> Recipe:
    return toy_recipe(tmp_path / "recipes", version="2.0.0", env={
        "TOY_HOME": "declared", "TOY_EVALUATOR_DIR": "declared; the image sets it", "CUDA_VISIBLE_DEVICES": "GPUs"},
        changelog=[{"version": "2.0.0", "date": "2026-11-30", "change": "toy"}])


def _parse(lines: list[str], stage: str) -> dict[str, object]:
    import json

    seen: dict[str, object] = {}
    for line in lines:
        if line.startswith(f"[{stage}] "):
            key, _, value = line[len(stage) + 3:].partition(" ")
            if key in ("ARGS", "ENV"):
                seen[key] = json.loads(value)
            elif key in ("UID", "NET", "scorecard:"):
                seen[key] = value
    return seen


def test_a_stage_gets_exactly_what_the_runtime_promises(engine, stand_in, recipe: Recipe, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "out"
    out.mkdir()
    os.chmod(out, 0o777)  # writable by whichever uid the container runs as
    cfg = recipe.config("Toy", out_dir=out, gpus=0, offline=True, env={"TOY_MODE": "slow"})
    environ = {"TOY_HOME": "/host/toy", "TOY_EVALUATOR_DIR": "/host/evaluator", "TOY_MODE": "slow",
               "UNDECLARED": "x", "CUDA_VISIBLE_DEVICES": "0", "HF_TOKEN": "hf_abcdefghijklmnopqrstuv"}
    lines: list[str] = []
    code = docker_runtime.run_in_docker(recipe, cfg, client=engine, environ=environ, caller=(4321, 4321),
                                        log=lines.append)
    assert code == 0, lines
    generate, score = _parse(lines, "generate"), _parse(lines, "score")
    for seen in (generate, score):
        env = seen["ENV"]
        assert env["TOY_HOME"] == "/host/toy" and env["TOY_EVALUATOR_DIR"] == "/opt/evaluator"
        assert not {"UNDECLARED", "CUDA_VISIBLE_DEVICES", "HF_TOKEN", "TOY_MODE"} & set(env)
        assert env["PINBENCH_OFFLINE"] == "1" and env["NVIDIA_VISIBLE_DEVICES"] == "void"
        assert seen["UID"] == "4321" and seen["NET"] == "down"
        assert "mode=slow" in seen["ARGS"] and "--offline" in seen["ARGS"]
    assert score["scorecard:"] == f"{out.resolve()}/scorecard.json"  # the host path, not /runs/out
    assert lines[-1] == f"scorecard: {out.resolve()}/scorecard.json"
    assert (out / "scorecard.json").stat().st_uid == 4321


@pytest.mark.skipif(os.getuid() != 0, reason="needs a root caller (chown)")
def test_a_root_caller_runs_as_the_images_user(engine, stand_in, recipe: Recipe, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    cfg = recipe.config(out_dir=tmp_path / "out", fixture=True, env={})
    lines: list[str] = []
    assert docker_runtime.run_in_docker(recipe, cfg, client=engine, environ={}, caller=(0, 0), log=lines.append) == 0
    assert _parse(lines, "score")["UID"] == "10001"
    assert (tmp_path / "out" / "scorecard.json").stat().st_uid == 10001


def test_a_gpu_stage_without_the_nvidia_runtime_fails_in_one_line(engine, stand_in, recipe: Recipe, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    if "nvidia" in (engine.info().get("Runtimes") or {}):
        pytest.skip("this engine has the NVIDIA runtime")
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    before = {c.id for c in engine.containers.list(all=True)}
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", gpus=1, offline=True, skip_generation=True, env={})
    with pytest.raises(ContainerError, match="NVIDIA Container Toolkit") as info:
        docker_runtime.run_in_docker(recipe, cfg, client=engine, environ={"CUDA_VISIBLE_DEVICES": "0"},
                                     caller=(4321, 4321), log=lambda line: None)
    assert "\n" not in str(info.value)
    assert {c.id for c in engine.containers.list(all=True)} == before  # no leftover container


def test_a_generator_image_makes_the_rollouts_and_the_pinned_image_scores_them(
        engine, stand_in, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MIND's and RememBench's way (no generate stage of their own): `--generator-image` runs a generate stage
    in the user's image, built FROM the recipe's, with that image's own ENV and USER, then the pinned image scores
    what it stored; both as the caller, network off, no container left."""
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    context = tmp_path / "model-image"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {stand_in}\nENV PYTHONPATH=/opt/my-model\n")
    model = "pinbench-test/my-model:1"
    build_image(context, model, client=engine, log=lambda line: None)
    recipe = toy_recipe(tmp_path / "recipes", version="2.0.0", requests="run:run_requests",
                        changelog=[{"version": "2.0.0", "date": "2026-11-30", "change": "toy"}],
                        stages=[{"name": "fetch", "argv": ["fetch"], "network": True, "needs_token": True,
                                 "gpus": False}, {"name": "score", "argv": ["run"], "network": False}])
    out = tmp_path / "out"
    out.mkdir()
    os.chmod(out, 0o777)
    cfg = recipe.config("Toy", out_dir=out, gpus=0, offline=True, generator="python:my_model:make", env={})
    before = {c.id for c in engine.containers.list(all=True)}
    lines: list[str] = []
    try:
        code = docker_runtime.run_in_docker(recipe, cfg, generator_image=model, client=engine, environ={},
                                            caller=(4321, 4321), log=lines.append)
    finally:
        engine.images.remove(model, force=True)
    assert code == 0, lines
    generate, score = _parse(lines, "generate"), _parse(lines, "score")
    assert generate["ENV"]["PYTHONPATH"] == "/opt/my-model" and "PYTHONPATH" not in score["ENV"]
    assert generate["ENV"]["PINBENCH_IMAGE_DIGEST"] != score["ENV"]["PINBENCH_IMAGE_DIGEST"]
    for seen, flag in ((generate, "--skip-scoring"), (score, "--skip-generation")):
        assert seen["ARGS"][seen["ARGS"].index("--generator") + 1] == "python:my_model:make" and flag in seen["ARGS"]
        assert seen["UID"] == "4321" and seen["NET"] == "down"
    assert (out / "scorecard.json").stat().st_uid == 4321
    assert {c.id for c in engine.containers.list(all=True)} == before
