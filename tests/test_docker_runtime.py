"""``--runtime docker`` orchestration, with the docker SDK mocked at its boundary (FakeDockerClient).

What each stage's container gets: image, command, network, token, mounts, user, environment, devices.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from fake_docker import IMAGE_ID, FakeContainer, FakeDockerClient, FakeImage
from toy_recipe import toy_recipe

from pinbench.core.config import RecipeError, RunConfig, Shard
from pinbench.core.deploy import ContainerStage
from pinbench.core.recipe import Recipe
from pinbench.ops import docker_runtime
from pinbench.ops.docker_engine import BASE_IMAGE_LABEL, ContainerError
from pinbench.ops.generation import command_argv, same_generator

TOKEN = "hf_abcdefghijklmnopqrstuvwxyz"
ENV = {
    "TOY_HOME": "/host/toy", "TOY_BATCH": "3", "TOY_EVALUATOR_DIR": "/host/evaluator", "OTHER": "not declared",
    "HF_TOKEN": TOKEN, "CUDA_VISIBLE_DEVICES": "2,3",
}
DECLARED_ENV = {"TOY_HOME": "where the toy lives", "TOY_BATCH": "evaluator batch size",
                "TOY_EVALUATOR_DIR": "where the evaluator is (the image sets it)", "HF_TOKEN": "token",
                "CUDA_VISIBLE_DEVICES": "which GPUs"}
IMAGE_ENV = {"PATH": "/opt/venv/bin:/usr/bin", "TOY_EVALUATOR_DIR": "/opt/evaluator"}


@pytest.fixture
def recipe(tmp_path: Path) -> Recipe:
    return toy_recipe(tmp_path / "recipes", version="2.0.0", env=DECLARED_ENV,
                      changelog=[{"version": "2.0.0", "date": "2026-11-30", "change": "toy"}])


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeDockerClient:
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    image = FakeImage(IMAGE_ID, [], env=IMAGE_ENV, user="10001:10001")
    return FakeDockerClient(images={"pinbench/toy-bench:2.0.0": image, "pinbench/toy-bench-generate:2.0.0": image})


def _cfg(recipe: Recipe, tmp_path: Path, **kw: Any) -> RunConfig:
    videos = tmp_path / "videos"
    videos.mkdir(exist_ok=True)
    return recipe.config("Toy", out_dir=tmp_path / "out", gpus=2, options={"videos": str(videos), "mode": "slow"},
                         env={}, **kw)


def _run(recipe: Recipe, cfg: RunConfig, client: FakeDockerClient, environ: dict[str, str] | None = None,
         caller: tuple[int, int] = (1000, 1000)) -> tuple[int, list[str]]:
    lines: list[str] = []
    code = docker_runtime.run_in_docker(recipe, cfg, client=client, environ=ENV if environ is None else environ,
                                        caller=caller, log=lines.append)
    return code, lines


def _stages(client: FakeDockerClient) -> list[str]:
    return [c["labels"]["org.pinbench.stage"] for c in client.run_calls]


def _argv(call: dict[str, Any]) -> list[str]:
    return call["entrypoint"] + call["command"]


# ------------------------------------------------------------------------------- network and token


def test_stages_get_network_and_token_only_when_they_fetch(client: FakeDockerClient, recipe: Recipe,
                                                            tmp_path: Path) -> None:
    assert _run(recipe, _cfg(recipe, tmp_path, limit=4), client)[0] == 0
    fetch, generate, score = client.run_calls
    assert _stages(client) == ["fetch", "generate", "score"]
    assert "network_mode" not in fetch and fetch["environment"]["HF_TOKEN"] == TOKEN
    assert "device_requests" not in fetch and fetch["environment"]["NVIDIA_VISIBLE_DEVICES"] == "void"
    for call in (generate, score):
        assert call["network_mode"] == "none" and "HF_TOKEN" not in call["environment"]
        assert TOKEN not in json.dumps(call, default=str)
    assert generate["image"] == "pinbench/toy-bench-generate:2.0.0"
    assert score["image"] == "pinbench/toy-bench:2.0.0"
    argv = _argv(score)
    assert argv[:5] == ["pinbench", "run", "toy-bench", "--checkpoint", "Toy"]
    assert "--skip-generation" in argv and "--offline" in argv and argv[argv.index("--limit") + 1] == "4"


def test_host_paths_are_mounted_read_only_and_rewritten(client: FakeDockerClient, recipe: Recipe,
                                                        tmp_path: Path) -> None:
    _run(recipe, _cfg(recipe, tmp_path, shard=Shard(1, 4)), client)
    score = client.run_calls[-1]
    argv = _argv(score)
    assert "videos=/inputs/videos" in argv and "mode=slow" in argv and argv[argv.index("--shard") + 1] == "1/4"
    volumes = score["volumes"]
    assert volumes[str((tmp_path / "videos").resolve())] == {"bind": "/inputs/videos", "mode": "ro"}
    assert volumes[str((tmp_path / "out").resolve())] == {"bind": "/runs/out", "mode": "rw"}
    assert volumes[str((tmp_path / "cache").resolve())] == {"bind": "/cache", "mode": "rw"}


def test_skips_and_stops_at_first_failure(client: FakeDockerClient, recipe: Recipe, tmp_path: Path) -> None:
    client.exit_codes = {"generate": 3}
    code, lines = _run(recipe, _cfg(recipe, tmp_path), client)
    assert code == 3 and _stages(client) == ["fetch", "generate"]
    assert "stage 'generate' exited with 3" in lines
    client.run_calls.clear()
    client.exit_codes = {}
    assert _run(recipe, _cfg(recipe, tmp_path, skip_generation=True, offline=True), client)[0] == 0
    assert _stages(client) == ["score"]


def test_a_run_with_the_no_download_options_has_no_fetch_stage(client: FakeDockerClient, tmp_path: Path) -> None:
    """The fetch stage of such a run had resolved null pins (downloads) and failed on a machine without network."""
    recipe = toy_recipe(tmp_path / "recipes", version="2.0.0", env=DECLARED_ENV,
                        changelog=[{"version": "2.0.0", "date": "2026-11-30", "change": "toy"}],
                        no_download={"options": "-o mode=slow", "what": "the slow way"})
    assert _run(recipe, _cfg(recipe, tmp_path), client)[0] == 0
    assert _stages(client) == ["generate", "score"]


def test_networked_run_stage_is_not_forced_offline(client: FakeDockerClient, recipe: Recipe, tmp_path: Path) -> None:
    recipe.stages = (ContainerStage("generate", argv=("run", "--skip-scoring"), network=True, needs_token=True),)
    _run(recipe, _cfg(recipe, tmp_path), client)
    (call,) = client.run_calls
    assert "--offline" not in _argv(call) and "network_mode" not in call
    assert call["environment"]["HF_TOKEN"] == TOKEN


@pytest.mark.parametrize("how", ["--offline", "PINBENCH_OFFLINE=1", "HF_HUB_OFFLINE=1", "PINBENCH_OFFLINE=true"])
def test_offline_holds_in_every_stage(client: FakeDockerClient, recipe: Recipe, tmp_path: Path, how: str) -> None:
    """--offline, or either offline variable as pinbench.core.options.is_offline reads it: no fetch stage, and a
    networked stage runs without network or token."""
    recipe.stages = (ContainerStage("fetch", argv=("fetch",), network=True, needs_token=True, gpus=False),
                     ContainerStage("generate", argv=("run", "--skip-scoring"), network=True, needs_token=True))
    videos = tmp_path / "videos"
    videos.mkdir()
    env = dict([how.split("=")]) if "=" in how else {}
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", gpus=1, options={"videos": str(videos)},
                        offline=how == "--offline", env=env)
    assert cfg.offline
    _run(recipe, cfg, client)
    (call,) = client.run_calls
    assert _stages(client) == ["generate"]
    assert call["network_mode"] == "none" and "--offline" in _argv(call) and "HF_TOKEN" not in call["environment"]
    assert call["environment"]["PINBENCH_OFFLINE"] == "1" and call["environment"]["HF_HUB_OFFLINE"] == "1"


def test_fixture_runs_once_offline_on_cpu_in_the_scoring_image(client: FakeDockerClient, recipe: Recipe,
                                                               tmp_path: Path) -> None:
    cfg = recipe.config(out_dir=tmp_path / "out", fixture=True, gpus=4, env={})
    assert _run(recipe, cfg, client, environ={"CUDA_VISIBLE_DEVICES": "0"})[0] == 0  # 4 GPUs asked, none used
    (call,) = client.run_calls
    assert call["image"] == "pinbench/toy-bench:2.0.0" and _stages(client) == ["score"]
    assert call["network_mode"] == "none" and "HF_TOKEN" not in call["environment"] and "device_requests" not in call
    assert "--fixture" in _argv(call) and "--skip-generation" not in _argv(call)


# ------------------------------------------------------------------------------------ environment


def test_options_set_in_the_environment_reach_the_container_as_options(client: FakeDockerClient, recipe: Recipe,
                                                                       tmp_path: Path) -> None:
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", env={"TOY_MODE": "slow"})
    _run(recipe, cfg, client, environ={**ENV, "TOY_MODE": "slow"})
    score = client.run_calls[-1]
    assert "mode=slow" in _argv(score)  # from $TOY_MODE on the host, passed as -o inside
    assert "TOY_MODE" not in score["environment"]  # one mechanism: the twin travels as -o only
    assert not any(arg.startswith("n=") for arg in _argv(score))  # defaults stay the image's


def test_exactly_the_declared_variables_are_forwarded(client: FakeDockerClient, recipe: Recipe,
                                                      tmp_path: Path) -> None:
    _, lines = _run(recipe, _cfg(recipe, tmp_path), client)
    for call in client.run_calls:
        env = call["environment"]
        assert env["TOY_HOME"] == "/host/toy" and env["TOY_BATCH"] == "3"
        assert "OTHER" not in env  # not declared by the recipe
        assert "CUDA_VISIBLE_DEVICES" not in env  # mapped to devices instead
        assert env["PINBENCH_CACHE"] == env["HF_HOME"] == "/cache"
        # the image's own layout wins over a host path, and the user is told
        assert "TOY_EVALUATOR_DIR" not in env
    assert not any("TOY_HOME" in line for line in lines)  # forwarded: no note
    assert "[score] TOY_EVALUATOR_DIR is not forwarded: the image sets its own (TOY_EVALUATOR_DIR=/opt/evaluator)" \
        in lines


@pytest.mark.parametrize("where", ["elsewhere", "in the cache root", "off", "unset"])
def test_the_hosts_sample_cache_holds_in_every_container(client: FakeDockerClient, recipe: Recipe, tmp_path: Path,
                                                         where: str) -> None:
    """``$PINBENCH_SAMPLE_CACHE`` and its bound as the host set them: the containers used ``/cache/samples`` whatever
    the host said (``off`` included), keeping and pruning records in a folder the host's runs never read."""
    shared = tmp_path / "shared" / "samples"
    value = {"elsewhere": str(shared), "in the cache root": str(tmp_path / "cache" / "mine"), "off": "off",
             "unset": None}[where]
    environ = {**ENV, "PINBENCH_SAMPLE_CACHE_MB": "10000"}
    if value is not None:
        environ["PINBENCH_SAMPLE_CACHE"] = value
    assert _run(recipe, _cfg(recipe, tmp_path), client, environ=environ)[0] == 0
    expected = {"elsewhere": "/sample-cache", "in the cache root": "/cache/mine", "off": "off", "unset": None}[where]
    for call in client.run_calls:
        assert call["environment"].get("PINBENCH_SAMPLE_CACHE") == expected
        assert call["environment"]["PINBENCH_SAMPLE_CACHE_MB"] == "10000"
        mounted = {volume["bind"]: (host, volume["mode"]) for host, volume in call["volumes"].items()}
        assert mounted["/cache"] == (str((tmp_path / "cache").resolve()), "rw")
        if where == "elsewhere":
            assert mounted["/sample-cache"] == (str(shared.resolve()), "rw")
        assert ("/sample-cache" in mounted) == (where == "elsewhere")
    assert shared.is_dir() == (where == "elsewhere")   # made here: the engine would make it as root


def test_a_sample_cache_inside_the_run_directory_is_refused(client: FakeDockerClient, recipe: Recipe,
                                                            tmp_path: Path) -> None:
    """Mounted elsewhere, the container could not see that its entries changed the run directory's files."""
    with pytest.raises(ValueError, match="inside the run directory"):
        _run(recipe, _cfg(recipe, tmp_path), client, environ={"PINBENCH_SAMPLE_CACHE": str(tmp_path / "out" / "c")})
    assert client.run_calls == []


# ------------------------------------------------------------------------------------------- GPUs


def test_visible_gpus_become_the_containers_devices(client: FakeDockerClient, recipe: Recipe, tmp_path: Path) -> None:
    _run(recipe, _cfg(recipe, tmp_path), client, environ={**ENV, "CUDA_VISIBLE_DEVICES": "2,3,5"})
    fetch, generate, score = client.run_calls
    assert "device_requests" not in fetch
    for call in (generate, score):
        (request,) = call["device_requests"]
        assert request["DeviceIDs"] == ["2", "3"] and "--gpus" in _argv(call)
        assert _argv(call)[_argv(call).index("--gpus") + 1] == "2"


def test_without_visible_devices_the_count_is_requested(client: FakeDockerClient, recipe: Recipe,
                                                        tmp_path: Path) -> None:
    _run(recipe, _cfg(recipe, tmp_path), client, environ={})
    (request,) = client.run_calls[-1]["device_requests"]
    assert request["Count"] == 2 and not request["DeviceIDs"]


@pytest.mark.parametrize(("visible", "expected"), [
    ("1", None), ("", None), ("-1", None), ("0,-1,1", None), ("0,0", None), ("0;1", None),
    ("GPU-aaaa, GPU-bbbb", ["GPU-aaaa", "GPU-bbbb"]), ("3,1,0", ["3", "1"]),
    ("MIG-GPU-aaaa/1/0,MIG-bbbb", ["MIG-GPU-aaaa/1/0", "MIG-bbbb"]),
])
def test_gpu_devices(visible: str, expected: list[str] | None) -> None:
    if expected is None:
        with pytest.raises(RecipeError, match="CUDA_VISIBLE_DEVICES"):
            docker_runtime.gpu_devices(2, visible)
    else:
        assert docker_runtime.gpu_devices(2, visible) == expected
    assert docker_runtime.gpu_devices(0, visible) == 0
    assert docker_runtime.gpu_devices(2, None) == 2


def test_too_few_visible_gpus_fail_before_any_container(client: FakeDockerClient, recipe: Recipe,
                                                        tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="--gpus 2 but CUDA_VISIBLE_DEVICES='7' makes 1 GPU"):
        _run(recipe, _cfg(recipe, tmp_path), client, environ={"CUDA_VISIBLE_DEVICES": "7"})
    assert client.run_calls == []


# ------------------------------------------------------------------------------------------- users


def test_a_normal_caller_runs_containers_as_itself(client: FakeDockerClient, recipe: Recipe, tmp_path: Path) -> None:
    _run(recipe, _cfg(recipe, tmp_path), client, caller=(1234, 99))
    assert {c["user"] for c in client.run_calls} == {"1234:99"}


def test_a_root_caller_runs_containers_as_the_images_user(client: FakeDockerClient, recipe: Recipe, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "out" / "samples").mkdir(parents=True)
    (tmp_path / "out" / "samples" / "a.json").write_text("{}")
    chowned: dict[Path, tuple[int, int]] = {}
    monkeypatch.setattr(docker_runtime.os, "chown",
                        lambda path, uid, gid, follow_symlinks=True: chowned.__setitem__(Path(path), (uid, gid)))
    _, lines = _run(recipe, _cfg(recipe, tmp_path), client, caller=(0, 0))
    assert {c["user"] for c in client.run_calls} == {"10001:10001"}
    out, cache = (tmp_path / "out").resolve(), (tmp_path / "cache").resolve()
    assert chowned[out] == chowned[out / "samples" / "a.json"] == chowned[cache] == (10001, 10001)
    _run(recipe, _cfg(recipe, tmp_path), client, caller=(0, 0),
         environ={"PINBENCH_SAMPLE_CACHE": str(tmp_path / "shared")})   # its container user keeps records there
    assert chowned[(tmp_path / "shared").resolve()] == (10001, 10001)
    assert sum("running as root" in line for line in lines) == 1


@pytest.mark.parametrize("image_user", ["", "root", "0:0", "pinbench"])
def test_a_root_caller_refuses_an_image_without_a_numeric_non_root_user(recipe: Recipe, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        image_user: str) -> None:
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    image = FakeImage(IMAGE_ID, [], user=image_user)
    client = FakeDockerClient(images={"pinbench/toy-bench:2.0.0": image, "pinbench/toy-bench-generate:2.0.0": image})
    with pytest.raises(ContainerError, match="non-root numeric user"):
        _run(recipe, _cfg(recipe, tmp_path), client, caller=(0, 0))
    assert client.run_calls == []


# ------------------------------------------------------------------------------------------ results


def test_host_paths_of_the_results_are_printed(client: FakeDockerClient, recipe: Recipe, tmp_path: Path) -> None:
    out = (tmp_path / "out").resolve()

    def container_writes(**kwargs: Any):  # what `pinbench run` inside writes through the /runs/out mount
        (out / "report").mkdir(parents=True, exist_ok=True)
        for rel in ("scorecard.json", "diff.txt", "report/index.html"):
            (out / rel).write_text("x")
        yield b"scorecard: /runs/out/scorecard.json\n"

    client.container.logs = container_writes
    _, lines = _run(recipe, recipe.config(out_dir=tmp_path / "out", fixture=True, env={}), client)
    assert lines[-4] == f"[score] scorecard: {out}/scorecard.json"
    assert lines[-3:] == [f"scorecard: {out}/scorecard.json", f"diff:      {out}/diff.txt",
                          f"report:    {out}/report/index.html"]


def test_results_of_an_earlier_run_are_not_shown_as_this_runs(client: FakeDockerClient, recipe: Recipe,
                                                              tmp_path: Path) -> None:
    import os

    out = tmp_path / "out"
    (out / "samples").mkdir(parents=True)   # an earlier run's directory: its store and scorecard
    (out / "scorecard.json").write_text("{}")
    os.utime(out / "scorecard.json", (1, 1))
    client.exit_codes = {"score": 2}
    code, lines = _run(recipe, recipe.config(out_dir=out, fixture=True, env={}), client)
    assert code == 2 and not any(line.startswith("scorecard:") for line in lines)


def test_a_missing_image_fails_before_any_stage_runs(client: FakeDockerClient, recipe: Recipe,
                                                     tmp_path: Path) -> None:
    del client.known["pinbench/toy-bench-generate:2.0.0"]
    client.missing = {"pinbench/toy-bench-generate:2.0.0"}
    with pytest.raises(ContainerError, match="toy-bench-generate:2.0.0: image not found locally"):
        _run(recipe, _cfg(recipe, tmp_path), client)
    assert client.run_calls == []  # not even the fetch stage


def test_a_container_left_running_by_a_killed_run_is_refused(client: FakeDockerClient, recipe: Recipe,
                                                             tmp_path: Path) -> None:
    """SIGKILL of pinbench leaves its container running; the next run took the stale lock and started a second
    container beside it (both computing the same samples into the same files). Containers are labelled with their
    run directory, and one still running there stops the next run before any stage, naming it."""
    cfg = _cfg(recipe, tmp_path, limit=4)
    assert _run(recipe, cfg, client)[0] == 0
    labels = {c["labels"]["org.pinbench.run-dir"] for c in client.run_calls}
    assert labels == {str(cfg.out_dir.resolve())}
    client.run_calls.clear()
    client.running = [({"org.pinbench.run-dir": str(tmp_path / "elsewhere")}, FakeContainer([], 0))]
    assert _run(recipe, cfg, client)[0] == 0   # a container of another run directory is no obstacle
    client.run_calls.clear()
    client.running.append(({"org.pinbench.run-dir": str(cfg.out_dir.resolve())}, client.container))
    with pytest.raises(ContainerError, match=r"out: in use: container ffffffffffff of an earlier run .* "
                                             r"\(docker stop ffffffffffff\)"):
        _run(recipe, cfg, client)
    assert client.run_calls == []


# ------------------------------------------------------------------------------------- a user's generator

MODEL_IMAGE = "lab/my-model:1"
ONE_STAGE = [{"name": "fetch", "argv": ["fetch"], "network": True, "needs_token": True, "gpus": False},
             {"name": "score", "argv": ["run"]}]   # MIND and RememBench: generation happens in the scoring run


def _generating(tmp_path: Path, client: FakeDockerClient, stages: list[dict[str, Any]] | None = None) -> Recipe:
    """The toy with a requests entry (so it takes --generator), its stages as given, and the user's image known."""
    client.known[MODEL_IMAGE] = FakeImage(IMAGE_ID, [], user="10001:10001")
    changes = {"stages": stages} if stages is not None else {}
    return toy_recipe(tmp_path / "recipes", version="2.0.0", requests="run:run_requests",
                      generators={"own": "run:own"}, changelog=[{"version": "2.0.0", "date": "2026-11-30",
                                                                 "change": "toy"}], **changes)


@pytest.mark.parametrize("stages", [ONE_STAGE, None], ids=["no-generate-stage", "own-generate-stage"])
@pytest.mark.parametrize("fixture", [True, False])
def test_a_generator_no_image_holds_is_refused_before_anything_runs(client: FakeDockerClient, tmp_path: Path,
                                                                    stages: Any, fixture: bool) -> None:
    """It ran in the scoring image (or the recipe's own generation image), which holds none of the user's code,
    and the stage was not even given --generator: the run scored other rollouts, or none, under its name."""
    recipe = _generating(tmp_path, client, stages)
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", fixture=fixture, generator="python:my_model:make", env={})
    with pytest.raises(RecipeError) as info:
        _run(recipe, cfg, client)
    message = str(info.value)
    assert "\n" not in message and "--generator python:my_model:make under --runtime docker" in message
    assert "--generator-image IMAGE" in message and "--runtime docker --skip-generation" in message
    assert client.run_calls == [] and not cfg.out_dir.exists()


def test_generation_runs_in_the_named_image_then_scoring_in_the_pinned_one(client: FakeDockerClient,
                                                                          tmp_path: Path) -> None:
    recipe = _generating(tmp_path, client, ONE_STAGE)
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", gpus=2, generator="python:my_model:make",
                        generator_options={"steps": "4"}, generation_timeout_s=60, env={})
    code = docker_runtime.run_in_docker(recipe, cfg, generator_image=MODEL_IMAGE, client=client, environ=ENV,
                                        caller=(1000, 1000), log=[].append)
    assert code == 0 and _stages(client) == ["fetch", "generate", "score"]
    _, generate, score = client.run_calls
    assert generate["image"] == MODEL_IMAGE and score["image"] == "pinbench/toy-bench:2.0.0"
    for call, flag in ((generate, "--skip-scoring"), (score, "--skip-generation")):
        argv = _argv(call)
        assert argv[argv.index("--generator") + 1] == "python:my_model:make" and flag in argv
        assert "steps=4" in argv and argv[argv.index("--generation-timeout") + 1] == "60"
        assert call["volumes"][str((tmp_path / "out").resolve())] == {"bind": "/runs/out", "mode": "rw"}
    assert generate["device_requests"][0].device_ids == ["2", "3"]
    # the user's generator has the network and token it has on the host; scoring keeps the scoring stage's policy
    assert "network_mode" not in generate and generate["environment"]["HF_TOKEN"] == TOKEN
    assert "--offline" not in _argv(generate) and "HF_HUB_OFFLINE" not in generate["environment"]
    assert score["network_mode"] == "none" and "HF_TOKEN" not in score["environment"] and "--offline" in _argv(score)
    client.run_calls.clear()   # --skip-scoring: generation only
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", generator="python:my_model:make", skip_scoring=True, env={})
    docker_runtime.run_in_docker(recipe, cfg, generator_image=MODEL_IMAGE, client=client, environ={},
                                 caller=(1000, 1000), log=[].append)
    assert _stages(client) == ["fetch", "generate"]


OFFLINE_GENERATE = [{"name": "generate", "dockerfile": "Dockerfile.generate", "argv": ["run", "--skip-scoring"]},
                    {"name": "score", "argv": ["run", "--skip-generation"]}]   # a generate stage without network


@pytest.mark.parametrize("stages", [ONE_STAGE, OFFLINE_GENERATE], ids=["no-generate-stage", "offline-generate-stage"])
@pytest.mark.parametrize("fixture", [False, True])
def test_a_generator_image_may_download_its_weights_unless_the_run_is_offline(
        client: FakeDockerClient, tmp_path: Path, stages: Any, fixture: bool) -> None:
    """MIND's and RememBench's generation in --generator-image ran with the scoring run's policy (--network none,
    HF_HUB_OFFLINE=1, no token): a generator that downloads its pinned weights, as it does on the host, failed
    there. It now gets both, HF_TOKEN only where the host sets it, and neither under --offline."""
    recipe = _generating(tmp_path, client, stages)

    def generate(environ: dict[str, str], offline: bool) -> dict[str, Any]:
        client.run_calls.clear()
        cfg = recipe.config("Toy", out_dir=tmp_path / "out", gpus=1, fixture=fixture, offline=offline,
                            generator="python:my_model:make", env={})
        docker_runtime.run_in_docker(recipe, cfg, generator_image=MODEL_IMAGE, client=client, environ=environ,
                                     caller=(1000, 1000), log=[].append)
        return next(c for c in client.run_calls if c["labels"]["org.pinbench.stage"] == "generate")

    online = generate(ENV, offline=False)
    assert "network_mode" not in online and online["environment"]["HF_TOKEN"] == TOKEN
    assert "--offline" not in _argv(online) and "PINBENCH_OFFLINE" not in online["environment"]
    assert "HF_TOKEN" not in generate({}, offline=False)["environment"]   # not set on the host: not passed
    offline = generate(ENV, offline=True)
    assert offline["network_mode"] == "none" and "HF_TOKEN" not in offline["environment"]
    assert "--offline" in _argv(offline) and offline["environment"]["HF_HUB_OFFLINE"] == "1"
    assert TOKEN not in json.dumps(offline, default=str)


def test_the_token_given_to_a_generator_image_is_in_no_command_log_or_file(client: FakeDockerClient,
                                                                           tmp_path: Path) -> None:
    """HF_TOKEN reaches the generate stage as its container's environment only: not in its command line, nor in a
    line of its log (a generator that prints it included), nor in a file of the run directory."""
    recipe = _generating(tmp_path, client, ONE_STAGE)
    client.container = FakeContainer([f"token is {TOKEN}\n".encode()], 0)
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", gpus=1, generator="python:my_model:make", env={})
    lines: list[str] = []
    assert docker_runtime.run_in_docker(recipe, cfg, generator_image=MODEL_IMAGE, client=client, environ=ENV,
                                        caller=(1000, 1000), log=lines.append) == 0
    generate = client.run_calls[1]
    assert generate["environment"]["HF_TOKEN"] == TOKEN and TOKEN not in json.dumps(_argv(generate))
    assert any("token is ***" in line for line in lines) and not any(TOKEN in line for line in lines)
    assert not [p for p in (tmp_path / "out").rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]


def test_a_recipes_own_generate_stage_runs_in_the_named_image_with_its_policy(client: FakeDockerClient,
                                                                             tmp_path: Path) -> None:
    """PAI-Bench-C's way: its generate stage (network and token, as it declares) in the user's image instead."""
    recipe = _generating(tmp_path, client, [
        {"name": "generate", "dockerfile": "Dockerfile.generate", "argv": ["run", "--skip-scoring"],
         "network": True, "needs_token": True},
        {"name": "score", "argv": ["run", "--skip-generation"]}])
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", gpus=1, generator="command:make-video {request} {out}",
                        env={})
    _run_with = docker_runtime.run_in_docker(recipe, cfg, generator_image=MODEL_IMAGE, client=client, environ=ENV,
                                             caller=(1000, 1000), log=[].append)
    assert _run_with == 0 and _stages(client) == ["generate", "score"]
    generate, score = client.run_calls
    assert generate["image"] == MODEL_IMAGE and generate["environment"]["HF_TOKEN"] == TOKEN
    assert "network_mode" not in generate and score["image"] == "pinbench/toy-bench:2.0.0"
    assert _argv(generate).count("--skip-scoring") == 1 and "command:make-video {request} {out}" in _argv(score)


def test_a_generator_image_a_root_caller_cannot_use_stops_before_the_fetch(client: FakeDockerClient,
                                                                          tmp_path: Path) -> None:
    """A user's image often has no USER: a root caller's run stopped on it only after the fetch stage had run."""
    recipe = _generating(tmp_path, client, ONE_STAGE)
    client.known[MODEL_IMAGE] = FakeImage(IMAGE_ID, [], user="")
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", generator="python:my_model:make", env={})
    with pytest.raises(ContainerError, match=f"^{MODEL_IMAGE}: its USER is 'unset"):
        docker_runtime.run_in_docker(recipe, cfg, generator_image=MODEL_IMAGE, client=client, environ={},
                                     caller=(0, 0), log=[].append)
    assert client.run_calls == [] and not cfg.out_dir.exists()


def test_a_generator_image_not_built_is_named_and_leaves_no_run_directory(client: FakeDockerClient,
                                                                         tmp_path: Path) -> None:
    """Found on a real engine: a mistyped --generator-image was told to `make build-<recipe>`, and the claim had
    made the run directory, left holding the identity of a run that never ran."""
    recipe = _generating(tmp_path, client, ONE_STAGE)
    del client.known[MODEL_IMAGE]
    client.missing.add(MODEL_IMAGE)
    cfg = recipe.config("Toy", out_dir=tmp_path / "runs" / "out", fixture=True, generator="python:my_model:make",
                        env={})
    with pytest.raises(ContainerError) as info:
        docker_runtime.run_in_docker(recipe, cfg, generator_image=MODEL_IMAGE, client=client, environ={},
                                     caller=(1000, 1000), log=[].append)
    assert str(info.value) == (f"--generator-image {MODEL_IMAGE}: image not found locally; build it first (pinbench, "
                               "toy-bench and your generator in it, e.g. FROM pinbench/toy-bench:2.0.0)")
    assert client.run_calls == [] and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("generator", ["own", "static"])
def test_a_generator_the_images_hold_runs_there_and_reaches_the_run(client: FakeDockerClient, tmp_path: Path,
                                                                    generator: str) -> None:
    """The recipe's own generators and pinbench's static baseline are in its images; --generator was dropped."""
    recipe = _generating(tmp_path, client, ONE_STAGE)
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", fixture=True, generator=generator, env={})
    assert _run(recipe, cfg, client)[0] == 0
    (call,) = client.run_calls
    assert call["image"] == "pinbench/toy-bench:2.0.0" and _argv(call)[-2:] == ["--generator", generator]


@pytest.mark.parametrize("folder", ["./made", "made"])
def test_the_folder_generator_runs_in_the_recipes_image_with_its_folder_mounted(
        client: FakeDockerClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder: str) -> None:
    """It was refused as a generator whose code the image lacks: it is pinbench's own, in every recipe image; its
    ``-g dir=`` (relative here, with or without a ``/``: ``made`` was passed on as it was, a folder the container
    lacks) reaches the container absolute and mounted read-only. ``diffusers`` is still refused: no recipe image
    holds its package."""
    recipe = _generating(tmp_path, client, ONE_STAGE)
    (tmp_path / "made").mkdir()
    monkeypatch.chdir(tmp_path)
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", fixture=True, generator="folder",
                        generator_options={"dir": folder}, env={})
    assert _run(recipe, cfg, client)[0] == 0
    (call,) = client.run_calls
    assert call["image"] == "pinbench/toy-bench:2.0.0"
    assert _argv(call)[-4:] == ["--generator", "folder", "-g", f"dir={tmp_path}/made"]
    assert call["volumes"][str(tmp_path / "made")] == {"bind": str(tmp_path / "made"), "mode": "ro"}
    cfg = recipe.config("Toy", out_dir=tmp_path / "out2", fixture=True, generator="diffusers", env={})
    with pytest.raises(RecipeError, match="^--generator diffusers under --runtime docker .* holds none of its code"):
        _run(recipe, cfg, client)


def test_a_generator_image_without_generation_is_refused(client: FakeDockerClient, tmp_path: Path) -> None:
    recipe = _generating(tmp_path, client, ONE_STAGE)
    for cfg, why in ((recipe.config("Toy", out_dir=tmp_path / "out", env={}), "has no --generator"),
                     (recipe.config("Toy", out_dir=tmp_path / "out", generator="python:m:f", skip_generation=True,
                                    env={}), "generates nothing (--skip-generation)")):
        with pytest.raises(RecipeError, match=rf"^--generator-image: .*{re.escape(why)}$"):
            docker_runtime.run_in_docker(recipe, cfg, generator_image=MODEL_IMAGE, client=client, environ={},
                                         caller=(1000, 1000))
    assert client.run_calls == []


def _generate_call(recipe: Recipe, cfg: RunConfig, client: FakeDockerClient) -> dict[str, Any]:
    assert docker_runtime.run_in_docker(recipe, cfg, generator_image=MODEL_IMAGE, client=client, environ={},
                                        caller=(1000, 1000), log=[].append) == 0
    return next(c for c in client.run_calls if c["labels"]["org.pinbench.stage"] == "generate")


def test_files_a_generator_names_are_mounted_read_only_at_their_paths(client: FakeDockerClient, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """They did not exist in the container and generation failed deep inside; a relative one becomes absolute (the
    container starts elsewhere), a symlink is mounted from what it points at under its own name, and a value that
    is no file, or a system path the image has its own of, stays as it is. A ``command:`` word after the program
    that names a file here is one with or without a ``/`` (``python gen.py``: gen.py was not mounted, and the
    container ran a gen.py it did not have), a folder only with one (``--split train``); the program, a word that
    names a program on PATH (``env sh``) and a module after ``-m`` stay words, even where a file or folder of that
    name is here."""
    recipe = _generating(tmp_path, client, ONE_STAGE)
    work = tmp_path / "work"
    (work / "ckpt").mkdir(parents=True)
    (work / "ckpt" / "model.safetensors").write_text("w")
    (work / "cfg.yaml").write_text("steps: 4")
    (work / "gen.sh").write_text("#!/bin/sh")
    (work / "latest").symlink_to(work / "ckpt")
    monkeypatch.chdir(work)
    (work / "extra.json").write_text("{}")
    for word in ("sh", "mymodel", "train"):   # a program on PATH, a module, a value: folders here too
        (work / word).mkdir()
    command = ("/usr/bin/env sh ./gen.sh cfg.yaml --extra=./extra.json --out={out} {request} {out} extra.json "
               "--config=cfg.yaml -m mymodel --split train")
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", generator=f"command:{command}",
                        generator_options={"weights": str(work / "latest"), "config": "./cfg.yaml", "model": "org/name",
                                           "steps": "4", "cfg": "cfg.yaml", "seed": ""}, env={})
    generate = _generate_call(recipe, cfg, client)
    argv = _argv(generate)
    assert command_argv(argv[argv.index("--generator") + 1]) == [
        "/usr/bin/env", "sh", f"{work}/gen.sh", f"{work}/cfg.yaml", f"--extra={work}/extra.json",
        "--out={out}", "{request}", "{out}", f"{work}/extra.json", f"--config={work}/cfg.yaml", "-m", "mymodel",
        "--split", "train"]   # a bare word is a file only: a folder is named with a / (./train)
    assert [argv[i + 1] for i, flag in enumerate(argv) if flag == "-g"] == [
        f"weights={work}/latest", f"config={work}/cfg.yaml", "model=org/name", "steps=4", f"cfg={work}/cfg.yaml",
        "seed="]   # (empty: no file, though the folder it joins to is one)
    volumes = generate["volumes"]
    assert volumes[str(work / "ckpt")] == {"bind": str(work / "latest"), "mode": "ro"}
    assert volumes[str(work / "cfg.yaml")] == {"bind": str(work / "cfg.yaml"), "mode": "ro"}
    assert volumes[str(work / "gen.sh")] == {"bind": str(work / "gen.sh"), "mode": "ro"}
    assert volumes[str(work / "extra.json")] == {"bind": str(work / "extra.json"), "mode": "ro"}   # --flag=PATH too
    assert len(volumes) == 6 and "/usr/bin/env" not in volumes   # and the cache and run directory


def test_a_skip_generation_run_gives_its_container_the_command_as_the_generating_container_stored_it(
        client: FakeDockerClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generating run stored the command with its paths absolute; a ``--skip-generation`` run given the same
    ``./gen.sh`` passed it on relative, which in the container (another folder) names no file, so its run refused it
    as another generator ('drop --generator'). It now goes absolute, and nothing is mounted: nothing runs it."""
    recipe = _generating(tmp_path, client, ONE_STAGE)
    work = tmp_path / "work"
    work.mkdir()
    (work / "gen.sh").write_text("#!/bin/sh")
    monkeypatch.chdir(work)
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", fixture=True, skip_generation=True,
                        generator="command:sh ./gen.sh --config=./gen.sh {request} {out}", env={})
    assert _run(recipe, cfg, client)[0] == 0
    (call,) = client.run_calls
    argv = _argv(call)
    given = argv[argv.index("--generator") + 1]
    assert command_argv(given) == ["sh", f"{work}/gen.sh", f"--config={work}/gen.sh", "{request}", "{out}"]
    monkeypatch.chdir(tmp_path)   # where the container starts: no ./gen.sh there
    assert same_generator(f"command:sh {work}/gen.sh --config={work}/gen.sh '{{request}}' '{{out}}'", given)
    assert str(work / "gen.sh") not in call["volumes"]


@pytest.mark.parametrize("value", ["{home}", "{home}/..", "/", "{home}/.cache", "{home}/hf", "{home}/hf/token"])
def test_a_generator_path_that_would_hand_over_the_home_folder_or_a_secret_is_refused(
        client: FakeDockerClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    home = tmp_path / "home"
    for folder in (home / ".cache", home / "hf"):
        folder.mkdir(parents=True)
    (home / "hf" / "token").write_text(TOKEN)
    monkeypatch.setenv("HOME", str(home))
    recipe = _generating(tmp_path, client, ONE_STAGE)
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", generator="python:my_model:make",
                        generator_options={"weights": value.format(home=home)}, env={})
    with pytest.raises(RecipeError, match=rf"^-g weights: {re.escape(value.format(home=home))} is not mounted .*"
                                          r"put them in --generator-image$"):
        _generate_call(recipe, cfg, client)
    assert client.run_calls == [] and not cfg.out_dir.exists()


@pytest.mark.parametrize(("name", "refused"), [
    ("password_reset.py", False), ("passwordReset.py", False), ("secret_santa.py", False), ("tokenizer.json", False),
    ("apiKeyHelper.ts", False),
    ("reset_password.py", True), ("resetPassword.py", True), ("credentials.json", True), ("hfToken", True),
    ("token_v2.json.bak", True), ("private.key", True),
    ("client_secret_1234-a1b2.apps.googleusercontent.com.json", True), ("hf_token_backup", True),
    ("token_old.txt", True), ("secret_santa", True), ("token_embeddings.safetensors", False),
    ("image_token_ids.npy", False), ("token_utils.pyi", False), ("token_pt", True),
    # secrets59: a tool's credential file whatever its words (each was mounted); a model's files and a public key stay
    *((name, True) for name in (".netrc", ".pgpass", ".npmrc", ".pypirc", "id_rsa", "id_ed25519", ".env.local",
                                "secrets.yaml", "stored_tokens", "server.pem", "kubeconfig", ".dockercfg")),
    *((name, False) for name in ("id_rsa.pub", "special_tokens_map.json", "tokenizer_config.json", "config.json",
                                 "secrets.py", "environment.yaml"))])
def test_a_generator_file_is_refused_when_named_for_a_secret_not_when_it_only_holds_the_word(
        client: FakeDockerClient, tmp_path: Path, name: str, refused: bool) -> None:
    """A file named for what it holds (its last word a secret's, but for its extensions and ids) is refused as a
    mount in snake_case and camelCase alike; code named after one (password_reset.py, passwordReset.py) holds no
    secret value and was refused in both spellings; any other name holding the word is (a token's copy renamed by
    hand), the folder secret_santa too."""
    (tmp_path / name).write_text("x")
    recipe = _generating(tmp_path, client, ONE_STAGE)
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", generator="python:my_model:make",
                        generator_options={"weights": str(tmp_path / name)}, env={})
    if refused:
        with pytest.raises(RecipeError, match=rf"^-g weights: {re.escape(str(tmp_path / name))} is not mounted "):
            _generate_call(recipe, cfg, client)
    else:
        assert _generate_call(recipe, cfg, client)["volumes"][str(tmp_path / name)]["mode"] == "ro"


def test_a_generator_folder_holding_a_tool_s_credentials_is_refused(client: FakeDockerClient, tmp_path: Path) -> None:
    """A project folder holding its .env, or a copy of a home folder's .ssh, was mounted whole (secrets59)."""
    for held in (".env", ".ssh"):
        folder = tmp_path / f"project{held}"
        folder.mkdir()
        (folder / "gen.py").write_text("x")
        (folder / held).write_text("x")
        recipe = _generating(tmp_path, client, ONE_STAGE)
        cfg = recipe.config("Toy", out_dir=tmp_path / "out", generator="python:my_model:make",
                            generator_options={"code": str(folder)}, env={})
        with pytest.raises(RecipeError, match=rf"^-g code: {re.escape(str(folder))} is not mounted "):
            _generate_call(recipe, cfg, client)


@pytest.mark.parametrize(("held", "named"), [("sub/.env", "sub/.env"), (".docker/config.json", ".docker"),
                                             ("a/b/c/id_rsa", "a/b/c/id_rsa"), ("sub/secrets", "sub/secrets")])
def test_a_generator_folder_holding_a_secret_deeper_down_is_refused_naming_it(client: FakeDockerClient,
                                                                              tmp_path: Path, held: str,
                                                                              named: str) -> None:
    """Only a mounted folder's direct children were checked: project/sub/.env, project/.docker/config.json were
    mounted whole (leftovers60). The refusal names what it found: "a secret" alone left a folder of thousands of
    files to search by hand."""
    folder = tmp_path / "project"
    (folder / held).parent.mkdir(parents=True)
    (folder / held).write_text("x")
    (folder / "gen.py").write_text("x")
    recipe = _generating(tmp_path, client, ONE_STAGE)
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", generator="python:my_model:make",
                        generator_options={"code": str(folder)}, env={})
    with pytest.raises(RecipeError, match=rf"^-g code: {re.escape(str(folder))} is not mounted into the generator's "
                                          rf"container \(it holds {re.escape(named)}, named for a secret\); "):
        _generate_call(recipe, cfg, client)


def test_a_generator_folder_holding_a_virtualenv_or_code_about_secrets_is_mounted(client: FakeDockerClient,
                                                                                  tmp_path: Path) -> None:
    """A project's virtualenv named .env (a dotenv file is never a folder) holding google-auth's credentials.py, and
    code named for a secret, are no secret: the walk refused every such project. Nor are a venv's packages (pip's
    and requests' certifi/cacert.pem, the docker package's credentials/), the project's compiled code
    (__pycache__/token.cpython-311.pyc), npm's docs, a git branch named for a token: review61 saw each refuse a
    project as real ones are, a venv made by ``python -m venv`` among them. Each package is listed by its
    dist-info's RECORD, as pip and uv write them."""
    folder = tmp_path / "project"
    for name in (".env/lib/python3.11/site-packages/google/auth/credentials.py", "auth/token.py", "gen.py",
                 "venv/lib/python3.11/site-packages/pip/_vendor/certifi/cacert.pem",
                 ".venv/lib/python3.11/site-packages/docker/credentials/store.py",
                 "auth/__pycache__/token.cpython-311.pyc", "node_modules/npm/docs/npm-token.md", "package.json",
                 ".git/refs/heads/fix-token-refresh", ".git/config"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("x")
    for packages, package in ((".env", "google"), ("venv", "pip"), (".venv", "docker")):
        _record(folder / packages / "lib/python3.11/site-packages", package)
    metadata = folder / "venv/lib/python3.11/site-packages/SecretStorage-3.3.3.dist-info"   # keyring's: its Title
    metadata.mkdir()                                                                         # Case read as a secret's
    (metadata / "METADATA").write_text("Name: SecretStorage\n")
    listed = _record_line(metadata.parent, f"{metadata.name}/METADATA")   # pip lists METADATA with its hash
    (metadata / "RECORD").write_text(f"secretstorage/__init__.py,,\n{listed}{metadata.name}/RECORD,,\n")
    (folder / "dist/SecretStorage-3.3.3.egg-info").mkdir(parents=True)    # Debian's metadata folder, no RECORD
    assert _mount_mode(tmp_path, client, folder) == "ro"


def _record(packages: Path, package: str) -> None:
    """An installed ``package`` in ``packages``: its dist-info's RECORD lists each file under its folder with its
    hash, as pip writes it."""
    info = packages / f"{package}-1.0.dist-info"
    info.mkdir(parents=True)
    files = [path.relative_to(packages).as_posix() for path in (packages / package).rglob("*") if path.is_file()]
    (info / "RECORD").write_text("".join(_record_line(packages, name) for name in files)
                                 + f"{info.name}/RECORD,,\n../../../bin/{package},sha256=x,1\n")


def _record_line(packages: Path, name: str) -> str:
    """pip's RECORD line of file ``name`` in ``packages``: path, sha256=<urlsafe base64, unpadded>, size."""
    data = (packages / name).read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}\n"


def _conda_paths(folder: Path, *names: str) -> dict[str, Any]:
    """conda's list of a package's files in ``folder`` (info/paths.json; a conda-meta record's paths_data)."""
    return {"paths": [{"_path": name, "path_type": "hardlink", "sha256": hashlib.sha256(
        (folder / name).read_bytes()).hexdigest()} for name in names], "paths_version": 1}


@pytest.mark.parametrize("packages", ["vendor", "usr/lib/python3/dist-packages",
                                      "pkgs/certifi-2024.2.2-py311/lib/python3.11/site-packages",
                                      "venv/lib/python3.11/site-packages"])
def test_an_installed_package_s_files_are_passed_and_a_user_s_beside_them_refused(
        client: FakeDockerClient, tmp_path: Path, packages: str) -> None:
    """Only lib/pythonX.Y/site-packages was skipped: certifi's cacert.pem installed by ``pip install --target
    vendor``, in Debian's dist-packages or a conda package refused the project holding it, while a user's own folder
    named site-packages hid its token (mounts63). A name a dist-info RECORD or a conda package's info/files lists is
    an installed package's, passed; any other, a package folder's neighbour included, is walked."""
    folder = tmp_path / "project"
    (folder / packages / "certifi").mkdir(parents=True)
    (folder / packages / "certifi" / "cacert.pem").write_text("x")
    (folder / "gen.py").write_text("x")
    _record(folder / packages, "certifi")
    conda = folder / "pkgs" / "ca-certificates-2024.2.2-h0"   # conda's package of the certificates, no Python's
    (conda / "ssl").mkdir(parents=True)
    (conda / "info").mkdir()
    (conda / "ssl" / "cacert.pem").write_text("x")
    (conda / "info" / "paths.json").write_text(json.dumps(_conda_paths(conda, "ssl/cacert.pem")))
    assert _mount_mode(tmp_path, client, folder) == "ro"
    (folder / packages / "hf_token").write_text("x")
    assert _mount_refusal(client, tmp_path, "code", folder).startswith(
        f"-g code: {folder} is not mounted into the generator's container (it holds {packages}/hf_token, named for a "
        "secret)")


WRONG_HASH = "sha256=" + "A" * 43   # a well-formed digest that is not the file's


@pytest.mark.parametrize(("listing", "line", "held"), [
    ("x-1.0.dist-info/RECORD", f".env,{WRONG_HASH},1", ".env"),
    ("x-1.0.dist-info/RECORD", "src/hf_token,sha256=x,1", "src/hf_token"),
    ("x-1.0.dist-info/RECORD", f"src/hf_token,{WRONG_HASH},1", "src/hf_token"),
    ("info/paths.json", json.dumps({"paths": [{"_path": "src/hf_token", "sha256": "0" * 64}]}), "src/hf_token"),
    ("conda-meta/x-1.0-0.json", json.dumps({"files": ["src/hf_token"], "paths_data": {"paths": [
        {"_path": "src/hf_token", "sha256": "0" * 64}]}}), "src/hf_token")])
def test_a_secret_file_an_installed_package_s_listing_names_is_refused(
        client: FakeDockerClient, tmp_path: Path, listing: str, line: str, held: str) -> None:
    """A listing is the folder's own text: a RECORD or a conda info/files beside a .env that lists it hid the .env
    from the walk, and it was mounted (review64), and a hand-made one listing src/... hid all of src/ (mounts68).
    A listed file is a package's only while its content hashes to the list's: with a malformed hash or another
    file's, it is checked by its name (with none, ``test_a_file_a_list_names_without_a_hash_is_refused_saying_so``)."""
    folder = tmp_path / "project"
    (folder / listing).parent.mkdir(parents=True)
    (folder / listing).write_text(line + "\n")
    (folder / held).parent.mkdir(parents=True, exist_ok=True)
    (folder / held).write_text("HF_TOKEN=x\n")
    assert _mount_refusal(client, tmp_path, "code", folder).startswith(
        f"-g code: {folder} is not mounted into the generator's container (it holds {held}, named for a secret)")


@pytest.mark.parametrize(("listing", "text", "held"), [
    ("conda-meta/ca-certificates-2019.1.23-0.json", json.dumps({"name": "ca-certificates",
                                                                "files": ["ssl/cacert.pem"]}), "ssl/cacert.pem"),
    ("pkgs/ca-certificates-2019.1.23-0/info/files", "ssl/cacert.pem\n",
     "pkgs/ca-certificates-2019.1.23-0/ssl/cacert.pem"),
    ("info/files", "src/hf_token\n", "src/hf_token"),   # a hand-made list, refused alike
    ("lib/python3.11/site-packages/certifi-2024.2.2.dist-info/RECORD", "certifi/cacert.pem,,\n",
     "lib/python3.11/site-packages/certifi/cacert.pem"),
    ("x-1.0.dist-info/RECORD", f"src/app.py,{WRONG_HASH},1\nsrc/hf_token,,\n", "src/hf_token"),
    ("x-1.0.dist-info/RECORD", "x/../.env,,\n", ".env")])
def test_a_file_a_list_names_without_a_hash_is_refused_saying_so(
        client: FakeDockerClient, tmp_path: Path, listing: str, text: str, held: str) -> None:
    """A conda-meta record with ``files`` and no ``paths_data`` lists its files with no hash, as a package's
    info/files does, and as pip's RECORD does in a ``path,,`` line (its own, a .pyc it compiled): nothing tells the
    package's cacert.pem from one put in its place, so it is refused, but the line read as if the file were a secret
    (stop_note_s58; a RECORD's, mounts86). It says its list gave no hash."""
    folder = tmp_path / "env"
    (folder / listing).parent.mkdir(parents=True)
    (folder / listing).write_text(text)
    (folder / held).parent.mkdir(parents=True, exist_ok=True)
    (folder / held).write_text("certificates\n")
    assert _mount_refusal(client, tmp_path, "code", folder) == (
        f"-g code: {folder} is not mounted into the generator's container (it holds {held}, named like a secret's "
        f"file: {listing}, its package's list of files, gives no hash to tell the package's own file "
        "from one put in its place); name the files it needs, or put them in --generator-image")


@pytest.mark.parametrize("added", ["docker/.env", "docker/hf_token", "docker/credentials/hf_token"])
def test_a_secret_file_added_to_an_installed_package_s_folder_is_refused(
        client: FakeDockerClient, tmp_path: Path, added: str) -> None:
    """A package's folder was skipped whole: a .env or a token written into site-packages/docker/ after install,
    which its RECORD does not list, was mounted (mounts68). Each file it does not list is checked by its name."""
    folder = tmp_path / "project"
    packages = folder / "venv/lib/python3.11/site-packages"
    (packages / "docker" / "credentials").mkdir(parents=True)
    (packages / "docker" / "credentials" / "store.py").write_text("x")
    _record(packages, "docker")
    assert _mount_mode(tmp_path, client, folder) == "ro"
    (packages / added).write_text("HF_TOKEN=x\n")
    assert _mount_refusal(client, tmp_path, "code", folder).startswith(
        f"-g code: {folder} is not mounted into the generator's container (it holds "
        f"venv/lib/python3.11/site-packages/{added}, named for a secret)")


@pytest.mark.parametrize(("name", "kind"), [(".env", "named for a secret"),
                                          (".env.example", "a secret file's template holding what could be a secret")])
def test_an_installed_package_s_file_holding_a_secret_is_refused(client: FakeDockerClient, tmp_path: Path,
                                                                  name: str, kind: str) -> None:
    """``pip install .`` of a project whose package data takes its .env copies it into site-packages, listed in the
    RECORD with its own hash: the hash matched, and the token was mounted (review70). A listed file is a package's
    only while its text holds nothing that could be a secret."""
    folder = tmp_path / "project"
    packages = folder / "venv/lib/python3.11/site-packages"
    (packages / "myproj").mkdir(parents=True)
    (packages / "myproj" / name).write_text("HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789\n")
    _record(packages, "myproj")
    assert _mount_refusal(client, tmp_path, "code", folder).startswith(
        f"-g code: {folder} is not mounted into the generator's container (it holds "
        f"venv/lib/python3.11/site-packages/myproj/{name}, {kind})")


@pytest.mark.parametrize("inside", [True, False])
def test_an_installed_package_s_link_is_trusted_only_to_a_listed_file_in_the_mount(
        client: FakeDockerClient, tmp_path: Path, inside: bool) -> None:
    """A link a package's list names (pkg/x.pem to a file beside it) was never trusted, its hash never read, and the
    folder was refused for it (stop_note_s58). It is the package's when the file it resolves to lies in the mounted
    folder and hashes to the list's; one resolving outside the folder is judged by its name."""
    folder = tmp_path / "project"
    packages = folder / "venv/lib/python3.11/site-packages"
    target = (packages / "pkg" / "certs" if inside else tmp_path / "elsewhere") / "bundle.crt"
    target.parent.mkdir(parents=True)
    (packages / "pkg").mkdir(parents=True, exist_ok=True)
    target.write_text("certificates\n")
    (packages / "pkg" / "x.pem").symlink_to(os.path.relpath(target, packages / "pkg"))
    _record(packages, "pkg")   # x.pem listed with its target's hash
    if inside:
        assert _mount_mode(tmp_path, client, folder) == "ro"
    else:
        assert _mount_refusal(client, tmp_path, "code", folder).startswith(
            f"-g code: {folder} is not mounted into the generator's container (it holds "
            "venv/lib/python3.11/site-packages/pkg/x.pem, named for a secret)")


def test_a_conda_environment_s_package_files_are_passed_and_a_user_s_refused(client: FakeDockerClient,
                                                                           tmp_path: Path) -> None:
    """A conda environment's root was not read: its conda-meta/*.json records list the files each package put
    there, and the environment was refused for ssl/cacert.pem (mounts68). A file a record lists with its hash is a
    package's; one it does not list, or whose content changed since, is checked by its name."""
    env = tmp_path / "env"
    (env / "ssl").mkdir(parents=True)
    (env / "conda-meta").mkdir()
    (env / "ssl" / "cacert.pem").write_text("certificates\n")
    (env / "conda-meta" / "history").write_text("==> 2024-01-01 <==\n")
    record = {"name": "ca-certificates", "files": ["ssl/cacert.pem"], "paths_data": _conda_paths(env, "ssl/cacert.pem")}
    (env / "conda-meta" / "ca-certificates-2024.2.2-hbcca054_0.json").write_text(json.dumps(record))
    assert _mount_mode(tmp_path, client, env) == "ro"
    (env / "ssl" / "cacert.pem").write_text("certificates, and one of the user's own\n")
    assert _mount_refusal(client, tmp_path, "code", env).startswith(
        f"-g code: {env} is not mounted into the generator's container (it holds ssl/cacert.pem, named for a secret)")


@pytest.mark.parametrize(("text", "limit"), [("{", 100), ("[]", 100), ('{"paths_data": ' + " " * 200, 100),
                                           ("[" * 100_000, 16 << 20)])
def test_a_conda_record_that_is_not_json_or_too_long_is_refused_in_one_line(
        client: FakeDockerClient, tmp_path: Path, text: str, limit: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A conda-meta record past the bytes read, or not a JSON object, is refused naming it: its files went unread.
    One nested 100,000 deep stopped the check with a RecursionError, naming nothing."""
    monkeypatch.setattr(docker_runtime, "_CHECK_READ_LIMIT", limit)
    env = tmp_path / "env"
    (env / "conda-meta").mkdir(parents=True)
    (env / "conda-meta" / "x-1.0-0.json").write_text(text)
    assert _mount_refusal(client, tmp_path, "code", env) == (
        f"-g code: {env} is not mounted into the generator's container (it holds conda-meta/x-1.0-0.json, not conda's "
        f"list of a package's files (a JSON object of at most {limit:,} bytes) to check them by); name the files it "
        "needs, or put them in --generator-image")


def _mount_mode(tmp_path: Path, client: FakeDockerClient, folder: Path) -> str:
    """How a generator's container gets ``folder`` given as a -g value (its volume's mode)."""
    recipe = _generating(tmp_path, client, ONE_STAGE)
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", generator="python:my_model:make",
                        generator_options={"weights": str(folder)}, env={})
    return _generate_call(recipe, cfg, client)["volumes"][str(folder)]["mode"]


def test_a_generator_folder_whose_walk_cannot_enter_a_subfolder_is_refused_naming_it(
        client: FakeDockerClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A subfolder the walk may not enter (chmod 000) was skipped in silence and the folder mounted, its names
    unchecked. Root ignores modes here, so scandir is made to refuse it."""
    folder = tmp_path / "project"
    (folder / "locked").mkdir(parents=True)
    (folder / "gen.py").write_text("x")
    scandir = os.scandir

    def refusing(path: Any = ".") -> Any:
        if str(path) == str(folder / "locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    assert _mount_refusal(client, tmp_path, "code", folder) == (
        f"-g code: {folder} is not mounted into the generator's container (it holds locked, which could not be read "
        "to check its names for a secret's: Permission denied); name the files it needs, or put them in "
        "--generator-image")


def _mount_refusal(client: FakeDockerClient, tmp_path: Path, option: str, path: Path) -> str:
    """The line refusing to mount ``path``, given to the generator as ``-g option=path``."""
    recipe = _generating(tmp_path, client, ONE_STAGE)
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", generator="python:my_model:make",
                        generator_options={option: str(path)}, env={})
    with pytest.raises(RecipeError) as refused:
        _generate_call(recipe, cfg, client)
    return str(refused.value)

GIT_TOKEN = "ghp_" + "a1B2" * 9   # a token's shape, made up


@pytest.mark.parametrize("url", [f"https://user:{GIT_TOKEN}@github.com/o/r", "https://user:hunter2pass@github.com/o/r"])
def test_a_generator_folder_whose_git_config_holds_a_credential_is_refused_naming_it(
        client: FakeDockerClient, tmp_path: Path, url: str) -> None:
    """The walk skips .git (its refs are branch names), so a clone whose remote URL holds a token or a password was
    mounted whole, config and all (review62): .git/config, one small file, is read for a credential."""
    folder = tmp_path / "project"
    (folder / "sub" / ".git").mkdir(parents=True)
    (folder / "gen.py").write_text("x")
    (folder / "sub" / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {url}\n')
    assert _mount_refusal(client, tmp_path, "code", folder) == (
        f"-g code: {folder} is not mounted into the generator's container (its sub/.git/config holds a credential); "
        "name the files it needs, or put them in --generator-image")
    (folder / "sub" / ".git" / "config").write_text('[remote "origin"]\n\turl = https://github.com/o/r\n')
    recipe = _generating(tmp_path, client, ONE_STAGE)
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", generator="python:my_model:make",
                        generator_options={"code": str(folder)}, env={})
    assert _generate_call(recipe, cfg, client)["volumes"][str(folder)]["mode"] == "ro"


@pytest.mark.parametrize("secret", [".git/hf_token", ".git/info/credentials.json", "repo.git/hf_token",
                                    ".git/modules/secrets/hf_token", ".git/worktrees/token-tree/hf_token",
                                    ".git/modules/secrets/info/credentials.json"])
def test_a_file_named_for_a_secret_in_a_git_store_is_refused_but_its_branch_names_pass(
        client: FakeDockerClient, tmp_path: Path, secret: str) -> None:
    """review91: the walk skips .git, whose refs are branch names, so a token put in the store itself (.git/hf_token)
    was mounted unchecked. Its names are checked outside the folders git names after branches, remotes, worktrees,
    submodules and hashes: a real repository with a branch, a worktree and a remote named for a token passes.
    review93: the stores of its submodules and worktrees (.git/modules/NAME/, .git/worktrees/NAME/) were not checked,
    and git's remotes/ and git-svn's svn/, named after remotes and branches, were refused."""
    import subprocess

    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "gen.py").write_text("x")

    def git(*args: str, at: Path = folder) -> None:
        subprocess.run(["git", "-C", str(at), "-c", "user.name=a", "-c", "user.email=a@b.c", *args], check=True,
                       capture_output=True)

    git("init", "-q", "-b", "main")
    git("add", "gen.py")
    git("commit", "-q", "-m", "x")
    for branch in ("token-fix", "secrets/api-key"):
        git("branch", branch)
    git("worktree", "add", "-q", str(tmp_path / "token-tree"), "-b", "credentials")
    git("remote", "add", "token", "https://github.com/o/r")
    git("clone", "-q", "--bare", str(folder), "repo.git")
    git("branch", "token-loose", "main", at=folder / "repo.git")   # a loose ref, not in packed-refs
    (folder / ".git" / "branches").mkdir(exist_ok=True)
    (folder / ".git" / "branches" / "token").write_text("https://github.com/o/r\n")   # git's old remotes file
    (folder / ".git" / "remotes").mkdir()   # git's older remotes file, and git-svn's refs: names of remotes, branches
    (folder / ".git" / "remotes" / "token").write_text("URL: https://github.com/o/r\n")
    (folder / ".git" / "svn" / "refs" / "remotes" / "token-fix").mkdir(parents=True)
    (folder / ".git" / "svn" / "refs" / "remotes" / "token-fix" / "index").write_text("x")
    (folder / ".git" / "modules" / "secrets").mkdir(parents=True)   # a submodule's store, named for it
    (folder / ".git" / "modules" / "secrets" / "HEAD").write_text("ref: refs/heads/main\n")
    assert _mount_mode(tmp_path, client, folder) == "ro"
    (folder / secret).parent.mkdir(exist_ok=True)
    (folder / secret).write_text("hf_x")
    assert _mount_refusal(client, tmp_path, "code", folder) == (
        f"-g code: {folder} is not mounted into the generator's container (it holds {secret}, named for a secret); "
        "name the files it needs, or put them in --generator-image")


@pytest.mark.parametrize("mounted", ["project", "project/repo.git"])
def test_a_bare_repository_whose_config_holds_a_credential_is_refused(client: FakeDockerClient, tmp_path: Path,
                                                                      mounted: str) -> None:
    """A bare repository (repo.git: HEAD, config, objects/) is walked, but its config is no secret's name: one held
    in a folder, or mounted itself, handed its remote URL's token (review62)."""
    bare = tmp_path / "project" / "repo.git"
    (bare / "objects").mkdir(parents=True)
    (bare / "HEAD").write_text("ref: refs/heads/main\n")
    (bare / "config").write_text(f'[remote "origin"]\n\turl = https://user:{GIT_TOKEN}@github.com/o/r\n')
    shown = "repo.git/config" if mounted == "project" else "config"
    assert _mount_refusal(client, tmp_path, "code", tmp_path / mounted) == (
        f"-g code: {tmp_path / mounted} is not mounted into the generator's container (its {shown} holds a "
        "credential); name the files it needs, or put them in --generator-image")


@pytest.mark.parametrize(("held", "text"), [
    (".git/FETCH_HEAD", f"{'0' * 40}\t\tbranch 'main' of https://user:{GIT_TOKEN}@github.com/o/r\n"),
    (".git/logs/HEAD", f"{'0' * 40} {'1' * 40} A <a@b.c> 1 +0000\tclone: from https://user:{GIT_TOKEN}@github.com/o/r\n"),
    (".git/logs/refs/heads/main",
     f"{'0' * 40} {'1' * 40} A <a@b.c> 1 +0000\tclone: from https://user:{GIT_TOKEN}@github.com/o/r\n"),
    (".git/logs/refs/remotes/origin/main",
     f"{'0' * 40} {'1' * 40} A <a@b.c> 1 +0000\tfetch from https://user:{GIT_TOKEN}@github.com/o/r\n"),
    (".git/packed-refs", f"# pack-refs with: peeled fully-peeled sorted\n{'0' * 40} refs/remotes/https://user:"
                         f"{GIT_TOKEN}@github.com/o/r\n"),
    *((held, f'[remote "origin"]\n\turl = https://user:{GIT_TOKEN}@github.com/o/r\n') for held in (
        "creds/remote.inc", ".git/header.inc", "creds/deeper.inc", ".git/modules/sub/config", ".git/config.worktree"))])
def test_a_git_store_s_fetch_head_reflog_or_included_config_holding_a_credential_is_refused(
        client: FakeDockerClient, tmp_path: Path, held: str, text: str) -> None:
    """Only .git/config was read: a remote URL's token in FETCH_HEAD, in the reflog's clone line, or in a config
    that .git/config includes ([include] path, relative to .git) was mounted (mounts63); and, as git reads them
    (review64), in an include on its header's line ([include]path=header.inc), in a file an included file includes
    (relative to it), in a submodule's store's config or in config.worktree."""
    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)
    (folder / "creds").mkdir()
    (folder / ".git" / "config").write_text("[core]\n\tbare = false\n[include]\n\tpath = ../creds/remote.inc\n"
                                            "[include]path=header.inc\n")
    (folder / "creds" / "remote.inc").write_text("[include]\n\tpath = deeper.inc\n")
    (folder / held).parent.mkdir(parents=True, exist_ok=True)
    (folder / held).write_text(text)
    assert _mount_refusal(client, tmp_path, "code", folder) == (
        f"-g code: {folder} is not mounted into the generator's container (its {held} holds a credential); name the "
        "files it needs, or put them in --generator-image")


@pytest.mark.parametrize("store", [".git/modules/sub", ".git/modules/libs/sub", ".git/modules/sub/modules/inner"])
@pytest.mark.parametrize("held", ["FETCH_HEAD", "packed-refs", "logs/HEAD", "logs/refs/remotes/origin/main"])
def test_a_submodule_s_store_is_read_as_the_top_store_is(client: FakeDockerClient, tmp_path: Path, store: str,
                                                         held: str) -> None:
    """Of a submodule's store (.git/modules/NAME/, a nested one's in its modules/) only the config was read: a token
    in its FETCH_HEAD, packed-refs or reflog, read in the top store's, was mounted (stop_note_s58)."""
    folder = tmp_path / "project"
    for path in (".git", *(store.rsplit("/modules/", n)[0] for n in range(store.count("/modules/")))):
        (folder / path).mkdir(parents=True, exist_ok=True)
        (folder / path / "HEAD").write_text("ref: refs/heads/main\n")
        (folder / path / "config").write_text("[core]\n\tbare = false\n")
    (folder / store / held).parent.mkdir(parents=True, exist_ok=True)
    (folder / store / held).write_text(f"{'0' * 40} {'1' * 40} A <a@b.c> 1 +0000\tfetch from https://user:"
                                       f"{GIT_TOKEN}@github.com/o/r\n")
    assert _mount_refusal(client, tmp_path, "code", folder) == (
        f"-g code: {folder} is not mounted into the generator's container (its {store}/{held} holds a credential); "
        "name the files it needs, or put them in --generator-image")
    (folder / store / held).write_text(f"{'0' * 40} {'1' * 40} A <a@b.c> 1 +0000\tfetch from https://github.com/o/r\n")
    assert _mount_mode(tmp_path, client, folder) == "ro"


@pytest.mark.parametrize("held", ["logs/HEAD", "config.worktree"])
def test_a_linked_worktree_s_store_is_read_as_the_top_store_is(client: FakeDockerClient, tmp_path: Path,
                                                              held: str) -> None:
    """A linked worktree's store (.git/worktrees/NAME/) was not read: a token in its own reflog or config.worktree was
    mounted (refdiff77); its names count against ``MOUNT_CHECK_LIMIT`` as a submodule's store's do."""
    store = tmp_path / "project" / ".git" / "worktrees" / "wt1"
    (store / "logs").mkdir(parents=True)
    (store / "HEAD").write_text("ref: refs/heads/wt1\n")
    (store / "commondir").write_text("../..\n")
    (store / held).write_text(f"{'0' * 40} {'1' * 40} A <a@b.c> 1 +0000\tclone: from https://user:{GIT_TOKEN}"
                              "@github.com/o/r\n" if held == "logs/HEAD" else
                              f'[remote "origin"]\n\turl = https://user:{GIT_TOKEN}@github.com/o/r\n')
    folder = tmp_path / "project"
    assert _mount_refusal(client, tmp_path, "code", folder) == (
        f"-g code: {folder} is not mounted into the generator's container (its .git/worktrees/wt1/{held} holds a "
        "credential); name the files it needs, or put them in --generator-image")
    (store / held).write_text(f"{'0' * 40} {'1' * 40} A <a@b.c> 1 +0000\tcommit: a change\n")
    assert _mount_mode(tmp_path, client, folder) == "ro"


def test_a_linked_worktree_s_store_counts_against_the_check_limit(client: FakeDockerClient, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The names of .git/worktrees/ and its stores' logs/, now read, count with the folder's own (refdiff77)."""
    from pinbench.ops import docker_runtime

    monkeypatch.setattr(docker_runtime, "MOUNT_CHECK_LIMIT", 10)
    folder = tmp_path / "project"
    for i in range(11):
        (folder / ".git" / "worktrees" / f"wt{i}").mkdir(parents=True)
    assert "it holds more than 10 files and folders" in _mount_refusal(client, tmp_path, "code", folder)
    (folder / ".git" / "worktrees" / "wt10").rmdir()
    assert _mount_mode(tmp_path, client, folder) == "ro"


def test_an_included_config_holding_a_credential_is_read_beside_a_hundred_submodules(
        client: FakeDockerClient, tmp_path: Path) -> None:
    """The limit on the included files read counted each submodule's store's config too: past 96 submodules
    .git/config's own include was not read, and the token in it was mounted (review66)."""
    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)
    (folder / "remote.inc").write_text(f'[remote "origin"]\n\turl = https://user:{GIT_TOKEN}@github.com/o/r\n')
    (folder / ".git" / "config").write_text("[include]\n\tpath = ../remote.inc\n")
    for i in range(120):
        (folder / ".git" / "modules" / f"sub{i}").mkdir(parents=True)
        (folder / ".git" / "modules" / f"sub{i}" / "config").write_text("[core]\n\tbare = false\n")
    assert _mount_refusal(client, tmp_path, "code", folder) == (
        f"-g code: {folder} is not mounted into the generator's container (its remote.inc holds a credential); name "
        "the files it needs, or put them in --generator-image")


def test_a_git_store_s_modules_past_the_check_limit_are_refused_in_one_line(
        client: FakeDockerClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk of .git/modules (submodules' stores) was not counted against ``MOUNT_CHECK_LIMIT``: any number of
    folders there were walked, and the folder mounted (bounds67). Now they count with the folder's own names."""
    from pinbench.ops import docker_runtime

    monkeypatch.setattr(docker_runtime, "MOUNT_CHECK_LIMIT", 10)
    folder = tmp_path / "project"
    for i in range(11):
        (folder / ".git" / "modules" / f"sub{i}").mkdir(parents=True)
    assert _mount_refusal(client, tmp_path, "code", folder) == (
        f"-g code: {folder} is not mounted into the generator's container (it holds more than 10 files and folders, "
        "too many to check each name for a secret's); name the files it needs, or put them in --generator-image")
    (folder / ".git" / "modules" / "sub10").rmdir()
    assert _mount_mode(tmp_path, client, folder) == "ro"


def test_a_submodule_s_reflogs_count_against_the_check_limit(client: FakeDockerClient, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A submodule's store's logs/, now read, count with the folder's names against ``MOUNT_CHECK_LIMIT``."""
    from pinbench.ops import docker_runtime

    monkeypatch.setattr(docker_runtime, "MOUNT_CHECK_LIMIT", 10)
    store = tmp_path / "project" / ".git" / "modules" / "sub"
    (store / "logs" / "refs" / "heads").mkdir(parents=True)
    (store / "HEAD").write_text("ref: refs/heads/main\n")
    (store / "config").write_text("[core]\n\tbare = false\n")
    for i in range(8):   # sub/, HEAD, config, logs' refs/, heads/ and these 8: 13 names
        (store / "logs" / "refs" / "heads" / f"b{i}").write_text("")
    assert "it holds more than 10 files and folders" in _mount_refusal(client, tmp_path, "code", tmp_path / "project")
    for i in range(3):
        (store / "logs" / "refs" / "heads" / f"b{i}").unlink()
    assert _mount_mode(tmp_path, client, tmp_path / "project") == "ro"


def test_a_git_store_including_more_configs_than_are_read_is_refused_in_one_line(
        client: FakeDockerClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``_GIT_INCLUDES_MOST`` included files the rest were left unread, their own includes (a token) unfollowed,
    and the folder mounted (bounds67)."""
    from pinbench.ops import docker_runtime

    monkeypatch.setattr(docker_runtime, "_GIT_INCLUDES_MOST", 3)
    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)
    (folder / ".git" / "config").write_text("[include]\n\tpath = a.inc\n")
    for name, included in (("a", "b"), ("b", "c"), ("c", "d")):
        (folder / ".git" / f"{name}.inc").write_text(f"[include]\n\tpath = {included}.inc\n")
    (folder / ".git" / "d.inc").write_text("[include]\n\tpath = ../remote.inc\n")
    (folder / "remote.inc").write_text(f'[remote "origin"]\n\turl = https://user:{GIT_TOKEN}@github.com/o/r\n')
    assert _mount_refusal(client, tmp_path, "code", folder) == (
        f"-g code: {folder} is not mounted into the generator's container (its .git/c.inc includes .git/d.inc, past "
        "the 3 included files read to check them for a credential); name the files it needs, or put them in "
        "--generator-image")
    (folder / ".git" / "c.inc").write_text("")
    assert _mount_mode(tmp_path, client, folder) == "ro"


@pytest.mark.parametrize("under", ["deep", ".git/modules"])
def test_folders_nested_too_deep_to_walk_are_refused_in_one_line(client: FakeDockerClient, tmp_path: Path,
                                                                 under: str) -> None:
    """Folders nested 1,100 deep (in the folder, or in its git store's modules/, which is walked for submodules'
    configs) ended the mount check in RecursionError, "maximum recursion depth exceeded" naming no folder
    (review66)."""
    folder = tmp_path / "project"
    nested = folder / under
    nested.mkdir(parents=True)
    for _ in range(1100):
        nested = nested / "m"
        nested.mkdir()
    try:
        refusal = _mount_refusal(client, tmp_path, "code", folder)
    finally:
        while nested != folder:   # removed here: pytest's cleanup (shutil.rmtree) recurses a level a frame too
            nested.rmdir()
            nested = nested.parent
    assert refusal.startswith(
        f"-g code: {folder} is not mounted into the generator's container (it holds {under}/m/m/")
    assert "folders nested more than 400 deep, too deep to check each name for a secret's" in refusal


def test_a_git_config_including_a_credential_outside_the_mounted_folder_is_mounted(
        client: FakeDockerClient, tmp_path: Path) -> None:
    """An [includeIf] file outside the mounted folder is not mounted with it: the container gets the path, never the
    token, so the folder is mounted."""
    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)
    (tmp_path / "remote.inc").write_text(f'[remote "origin"]\n\turl = https://user:{GIT_TOKEN}@github.com/o/r\n')
    (folder / ".git" / "config").write_text(f'[includeIf "gitdir:{folder}/"]\n\tpath = {tmp_path}/remote.inc\n')
    assert _mount_mode(tmp_path, client, folder) == "ro"


@pytest.mark.parametrize("name", [".env.example", ".env.sample", ".env.template", "sub/.env.example"])
def test_a_secret_file_s_template_is_refused_only_when_it_holds_what_could_be_a_secret(
        client: FakeDockerClient, tmp_path: Path, name: str) -> None:
    """.env.example was refused for its name, though a template holds placeholders (mounts63): it is read, and
    refused naming it only when its text holds what could be a secret, mounted itself or in a folder."""
    folder = tmp_path / "project"
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("HF_TOKEN=<your token>\nDEBUG=1\n")
    for mounted in (folder, folder / name):
        client.run_calls.clear()
        assert _mount_mode(tmp_path, client, mounted) == "ro"
    (folder / name).write_text(f"HF_TOKEN={GIT_TOKEN}\n")
    assert _mount_refusal(client, tmp_path, "code", folder).startswith(
        f"-g code: {folder} is not mounted into the generator's container (it holds {name}, a secret file's template "
        "holding what could be a secret)")
    assert _mount_refusal(client, tmp_path, "code", folder / name).startswith(
        f"-g code: {folder / name} is not mounted into the generator's container (it is a secret file's template "
        "holding what could be a secret)")


@pytest.mark.parametrize(("name", "refused"), [("config.json", False), (".env", True), ("hf_token", True)])
def test_a_file_linked_from_a_snapshot_is_checked_by_the_name_given(client: FakeDockerClient, tmp_path: Path,
                                                                    name: str, refused: bool) -> None:
    """A Hugging Face snapshot's file is a link to ../../blobs/<sha256>: only the blob's hash name was checked, so a
    snapshot's .env was mounted (mounts63). The link's name counts, and the blob's too."""
    blob = tmp_path / "hub" / "blobs" / ("ab" * 32)
    blob.parent.mkdir(parents=True)
    blob.write_text("{}")
    (tmp_path / "hub" / "snapshots" / "rev").mkdir(parents=True)
    link = tmp_path / "hub" / "snapshots" / "rev" / name
    link.symlink_to(f"../../blobs/{blob.name}")
    if refused:
        assert _mount_refusal(client, tmp_path, "weights", link).startswith(
            f"-g weights: {link} is not mounted into the generator's container (it is named for a secret)")
    else:
        recipe = _generating(tmp_path, client, ONE_STAGE)
        cfg = recipe.config("Toy", out_dir=tmp_path / "out", generator="python:my_model:make",
                            generator_options={"weights": str(link)}, env={})
        assert _generate_call(recipe, cfg, client)["volumes"][str(blob)] == {"bind": str(link), "mode": "ro"}


@pytest.mark.parametrize("held", ["site-packages/hf_token", "node_modules/hf_token", "lib/site-packages/.env",
                                  "lib/python3.11/site-packages/hf_token"])
def test_a_folder_of_its_own_named_like_a_package_folder_is_walked(client: FakeDockerClient, tmp_path: Path,
                                                                   held: str) -> None:
    """site-packages and node_modules were skipped by name anywhere, so a user's own folder so named hid its token
    from the walk (review62): only a package folder is skipped, site-packages in lib/pythonX.Y, node_modules beside a
    package.json."""
    folder = tmp_path / "project"
    (folder / held).parent.mkdir(parents=True)
    (folder / held).write_text("x")
    assert _mount_refusal(client, tmp_path, "code", folder).startswith(
        f"-g code: {folder} is not mounted into the generator's container (it holds {held}, named for a secret)")


def test_a_refusal_names_a_strange_secret_name_on_one_line_and_counts_those_beside_it(client: FakeDockerClient,
                                                                                       tmp_path: Path) -> None:
    """A name with a line break or bytes that are no UTF-8 made the refusal two lines, or a surrogate that no
    terminal prints; a folder of five secrets named one, and each fix met the next refusal (review62)."""
    folder = tmp_path / "my project é"
    (folder / "keys").mkdir(parents=True)
    for name in ("hf_token\nold", "id_rsa", "credentials.json", ".netrc", os.fsdecode(b"token\xff")):
        (folder / "keys" / name).write_text("x")
    assert _mount_refusal(client, tmp_path, "code", folder) == (
        f"-g code: {folder} is not mounted into the generator's container (it holds keys/.netrc, named for a secret, "
        "and 4 more beside it); name the files it needs, or put them in --generator-image")
    for name in (".netrc", "credentials.json", "id_rsa"):
        (folder / "keys" / name).unlink()
    assert _mount_refusal(client, tmp_path, "code", folder) == (
        f"-g code: {folder} is not mounted into the generator's container (it holds keys/hf_token\\nold, named for a "
        "secret, and 1 more beside it); name the files it needs, or put them in --generator-image")
    (folder / "keys" / "hf_token\nold").unlink()
    assert _mount_refusal(client, tmp_path, "code", folder) == (
        f"-g code: {folder} is not mounted into the generator's container (it holds keys/token\\xff, named for a "
        "secret); name the files it needs, or put them in --generator-image")



@pytest.mark.parametrize("path", [".docker/config.json", ".aws/credentials", ".ssh/known_hosts", ".kube/config",
                                  ".aws/sso/cache/token-cache.json", ".gnupg/pubring.kbx", ".azure/azureProfile.json"])
def test_a_generator_file_in_a_tool_s_credential_folder_is_refused(client: FakeDockerClient, tmp_path: Path,
                                                                   path: str) -> None:
    """~/.docker/config.json was mounted: config.json alone is a model's, and only the file's name was checked."""
    (tmp_path / path).parent.mkdir(parents=True)
    (tmp_path / path).write_text("x")
    assert _mount_refusal(client, tmp_path, "weights", tmp_path / path).startswith(
        f"-g weights: {tmp_path / path} is not mounted ")


def test_a_generator_folder_too_large_to_check_is_refused_saying_so(client: FakeDockerClient, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk stops past ``MOUNT_CHECK_LIMIT`` entries: the folder is refused, never mounted half checked."""
    from pinbench.ops import docker_runtime

    monkeypatch.setattr(docker_runtime, "MOUNT_CHECK_LIMIT", 3)
    model = tmp_path / "model"
    model.mkdir()
    for i in range(4):
        (model / f"shard-{i}.safetensors").write_text("x")
    recipe = _generating(tmp_path, client, ONE_STAGE)
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", generator="python:my_model:make",
                        generator_options={"weights": str(model)}, env={})
    with pytest.raises(RecipeError, match=rf"^-g weights: {re.escape(str(model))} is not mounted into the "
                                          r"generator's container \(it holds more than 3 files and folders, too many "
                                          r"to check each name for a secret's\); name the files it needs, or put "
                                          r"them in --generator-image$"):
        _generate_call(recipe, cfg, client)
    (model / "shard-3.safetensors").unlink()
    assert _generate_call(recipe, cfg, client)["volumes"][str(model)]["mode"] == "ro"


def test_a_generator_folder_whose_package_lists_name_too_many_files_is_refused_saying_so(
        client: FakeDockerClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The files a package's RECORD lists are not counted against ``MOUNT_CHECK_LIMIT``, so a RECORD naming
    200,000 files had them all walked: past ``MOUNT_LISTED_LIMIT`` of them the folder is refused in one line."""
    from pinbench.ops import docker_runtime

    monkeypatch.setattr(docker_runtime, "MOUNT_CHECK_LIMIT", 3)   # pkg/, its dist-info/ and RECORD: not past it
    monkeypatch.setattr(docker_runtime, "MOUNT_LISTED_LIMIT", 4)
    vendor = tmp_path / "vendor"
    (vendor / "pkg").mkdir(parents=True)
    for i in range(5):
        (vendor / "pkg" / f"part{i}.py").write_text(str(i))
    _record(vendor, "pkg")
    assert _mount_refusal(client, tmp_path, "code", vendor) == (
        f"-g code: {vendor} is not mounted into the generator's container (it holds more than 4 files that its "
        "installed packages list, too many to check each name for a secret's); name the files it needs, or put them "
        "in --generator-image")
    (vendor / "pkg" / "part4.py").unlink()
    assert _mount_mode(tmp_path, client, vendor) == "ro"


def test_a_model_folder_with_tokenizer_files_and_a_config_is_mounted(client: FakeDockerClient, tmp_path: Path) -> None:
    """The walk of a mounted folder refuses no model's own names: a tokenizer, its special tokens, a config, a
    nested folder's (text_encoder/config.json), a hidden cache folder."""
    model = tmp_path / "model"
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json",
                 "text_encoder/config.json", "tokenizer/vocab.json", ".cache/huggingface/download/x.metadata"):
        (model / name).parent.mkdir(parents=True, exist_ok=True)
        (model / name).write_text("x")
    assert _mount_mode(tmp_path, client, model) == "ro"


# ------------------------------------------------------------------------------------------- build


PY = f"python:3.11-slim@sha256:{'b' * 64}"
CUDA = f"nvidia/cuda:12.8.1-cudnn-devel-ubuntu22.04@sha256:{'d' * 64}"


def _write_dockerfiles(recipe: Recipe) -> None:
    (recipe.dir / "Dockerfile").write_text(f"ARG BASE_IMAGE={PY}\nFROM ${{BASE_IMAGE}}\n")
    (recipe.dir / "Dockerfile.generate").write_text(  # a builder stage on its own base, as the mind image has
        f"ARG BUILD_BASE={CUDA}\nARG BASE_IMAGE={PY}\nFROM ${{BUILD_BASE}} AS build\nFROM ${{BASE_IMAGE}}\n")


def _write_locks(recipe: Recipe) -> None:
    """What an export needs besides the Dockerfiles: the requirements and a hashed lock naming its Python."""
    (recipe.dir / "requirements.in").write_text("")
    (recipe.dir / "requirements.lock").write_text("# uv pip compile requirements.in --generate-hashes "
                                                 "--python-version 3.11 -o requirements.lock\n")
    (recipe.dir.parent / "__init__.py").write_text("")


def test_base_overrides(recipe: Recipe) -> None:
    _write_dockerfiles(recipe)
    assert docker_runtime.base_overrides(recipe, ["Dockerfile.generate=mirror.lab/py:3.11",
                                                  "Dockerfile.generate:BUILD_BASE=mirror.lab/cuda:12.8"]) == \
        {"Dockerfile.generate": {"BASE_IMAGE": "mirror.lab/py:3.11", "BUILD_BASE": "mirror.lab/cuda:12.8"}}
    for given, message in ((["mirror.lab/py:3.11"], "has 2 images; name one"),
                           (["Dockerfile.nope=x"], "has no Dockerfile.nope"),
                           (["Dockerfile:BUILD_BASE=x"], "has no base ARG BUILD_BASE"),
                           (["Dockerfile="], "expected an image reference"),
                           (["Dockerfile=a", "Dockerfile:BASE_IMAGE=b"], "given twice")):
        with pytest.raises(RecipeError, match=message):
            docker_runtime.base_overrides(recipe, given)


def test_build_swaps_the_base_and_labels_what_it_used(recipe: Recipe, tmp_path: Path) -> None:
    _write_dockerfiles(recipe)
    _write_locks(recipe)
    client = FakeDockerClient(images={PY: FakeImage("sha256:" + "1" * 64, [f"python@sha256:{'b' * 64}"]),
                                      CUDA: FakeImage("sha256:" + "2" * 64, [f"nvidia/cuda@sha256:{'d' * 64}"])},
                              missing={"mirror.lab/py:3.11"})
    tags = docker_runtime.build_recipe_images(recipe, tmp_path / "build", client=client, log=lambda line: None,
                                              base_images={"Dockerfile.generate": {"BASE_IMAGE": "mirror.lab/py:3.11"}})
    assert tags == ["pinbench/toy-bench:2.0.0", "pinbench/toy-bench-generate:2.0.0"]
    main, generate = client.build_calls
    assert main["buildargs"] == {} and generate["buildargs"] == {"BASE_IMAGE": "mirror.lab/py:3.11"}
    assert client.pulled == ["mirror.lab/py:3.11"]  # resolved before the build, to record its digest
    label = json.loads(generate["labels"][BASE_IMAGE_LABEL])
    assert label == {"image": "mirror.lab/py:3.11", "pinned": PY, "digest": "mirror.lab/py@sha256:" + "e" * 64,
                     "overridden": True, "differs_from_pinned": True,
                     "others": {"BUILD_BASE": {"image": CUDA, "pinned": CUDA, "differs_from_pinned": False,
                                               "digest": f"nvidia/cuda@sha256:{'d' * 64}"}}}
    assert json.loads(main["labels"][BASE_IMAGE_LABEL])["differs_from_pinned"] is False


def test_a_swapped_builder_base_marks_the_image_as_differing(recipe: Recipe, tmp_path: Path) -> None:
    _write_dockerfiles(recipe)
    _write_locks(recipe)
    client = FakeDockerClient(images={PY: FakeImage("sha256:" + "1" * 64, [f"python@sha256:{'b' * 64}"])},
                              missing={"mirror.lab/cuda:12.8"})
    docker_runtime.build_recipe_images(recipe, tmp_path / "build", client=client, log=lambda line: None,
                                       base_images={"Dockerfile.generate": {"BUILD_BASE": "mirror.lab/cuda:12.8"}})
    generate = client.build_calls[1]
    assert generate["buildargs"] == {"BUILD_BASE": "mirror.lab/cuda:12.8"}
    label = json.loads(generate["labels"][BASE_IMAGE_LABEL])
    assert label["overridden"] is False and label["differs_from_pinned"] is True  # the final base is the pinned one
    assert label["others"]["BUILD_BASE"]["differs_from_pinned"] is True


def test_a_dockerfile_without_a_base_arg_cannot_be_built(recipe: Recipe, tmp_path: Path) -> None:
    (recipe.dir / "Dockerfile").write_text(f"FROM {PY}\n")
    with pytest.raises(RecipeError, match="no `ARG BASE_IMAGE="):
        docker_runtime.pinned_bases(recipe.dir / "Dockerfile")


def test_an_export_builds_every_image_from_its_own_folder(recipe: Recipe, tmp_path: Path) -> None:
    """An exported recipe's ``make build`` runs ``pinbench build --context .``: its installed package has no
    Dockerfiles, so the images come from the export's top, every one of them, with its overrides."""
    _write_dockerfiles(recipe)
    export = tmp_path / "export"
    export.mkdir()
    for name in ("Dockerfile", "Dockerfile.generate"):
        (export / name).write_text((recipe.dir / name).read_text())
        (recipe.dir / name).unlink()
    assert docker_runtime.recipe_dockerfiles(recipe) == []
    overrides = docker_runtime.base_overrides(recipe, ["Dockerfile.generate=mirror.lab/py:3.11"], export)
    client = FakeDockerClient(images={PY: FakeImage("sha256:" + "1" * 64, [f"python@sha256:{'b' * 64}"]),
                                      CUDA: FakeImage("sha256:" + "2" * 64, [f"nvidia/cuda@sha256:{'d' * 64}"])},
                              missing={"mirror.lab/py:3.11"})
    tags = docker_runtime.build_recipe_images(recipe, tmp_path / "unused", base_images=overrides, context=export,
                                              client=client, log=lambda line: None)
    assert tags == ["pinbench/toy-bench:2.0.0", "pinbench/toy-bench-generate:2.0.0"]
    assert not (tmp_path / "unused").exists()  # nothing exported: the folder given is the context
    assert client.build_calls[1]["buildargs"] == {"BASE_IMAGE": "mirror.lab/py:3.11"}
    with pytest.raises(RecipeError, match="no Dockerfile for toy-bench"):
        docker_runtime.build_recipe_images(recipe, context=tmp_path / "unused", client=client)


def test_skip_doctor_reaches_every_run_stage(client: FakeDockerClient, recipe: Recipe, tmp_path: Path) -> None:
    """`run --runtime docker --skip-doctor`: each stage's `pinbench run` skips its doctor too (it ran the doctor,
    which stopped at the unusable input the user meant the run to score around: docs/running.md)."""
    lines: list[str] = []
    assert docker_runtime.run_in_docker(recipe, _cfg(recipe, tmp_path), client=client, environ=ENV,
                                        caller=(1000, 1000), log=lines.append, skip_doctor=True) == 0
    runs = [_argv(call) for call in client.run_calls if _argv(call)[1] == "run"]
    assert runs and all("--skip-doctor" in argv for argv in runs)
    client.run_calls.clear()
    _run(recipe, _cfg(recipe, tmp_path), client)
    assert not any("--skip-doctor" in _argv(call) for call in client.run_calls)


# run's options a stage's `pinbench run` does not get, and why
NOT_PASSED = {"recipe_name": "the argv names the recipe", "out": "the run directory's mount",
              "runtime": "local in the container", "generator_image": "the image the generate stage runs in",
              "build": "the host builds the images", "base_image": "with --build", "move_aside": "done on the host",
              "show_help": "no run", "option": "passed as --option", "offline": "per stage (network or not)"}


def test_every_run_option_is_passed_to_a_stage_or_deliberately_not(recipe: Recipe, tmp_path: Path) -> None:
    """Each option of `pinbench run` reaches a docker stage's `pinbench run`, or NOT_PASSED says why not (a new
    option is not dropped without a word, as --skip-doctor was)."""
    import dataclasses

    import typer.main

    from pinbench import cli

    cfg = dataclasses.replace(_cfg(recipe, tmp_path), limit=4, shard=Shard(1, 4), skip_generation=True,
                              skip_scoring=True, fixture=True, verify_inputs=True, generator="gen {out}",
                              generator_options={"k": "v"}, generation_timeout_s=60.0)
    stage = ContainerStage("score", dockerfile="Dockerfile", argv=("run",), network=False)
    argv = docker_runtime.stage_argv(recipe, cfg, stage, {"mode": "slow"}, network=False, skip_doctor=True)
    params = typer.main.get_command(cli.app).commands["run"].params
    dropped = [p.name for p in params if p.name not in NOT_PASSED and not set(p.opts) & set(argv)]
    assert dropped == [], argv
    assert {"--option", "--offline"} <= set(argv) and set(NOT_PASSED) <= {p.name for p in params}


@pytest.mark.parametrize("skip_doctor", [False, True])
def test_a_checkpoint_typo_is_noted_once_across_the_host_and_its_stages(
        client: FakeDockerClient, recipe: Recipe, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        skip_doctor: bool) -> None:
    """`run --checkpoint <typo> --runtime docker`: the host says the typo note (before --build and downloads) and
    each stage's `pinbench run`, run here with the argv and environment its container got, says nothing more (the
    note was said by the host and again in every stage's streamed output), with and without --skip-doctor."""
    from typer.testing import CliRunner

    import pinbench.ops.launch as launch
    from pinbench import cli
    from pinbench.ops import doctor

    note = ("note: checkpoint 'Toy-Nan' is not one of toy-bench's (Toy-Nano) (did you mean 'Toy-Nano'?); a new "
            "name is taken as your own model")
    held: list[str | None] = []
    monkeypatch.setattr(cli, "get_recipe", lambda name: recipe)
    monkeypatch.setattr(docker_runtime, "docker_client", lambda: client)
    monkeypatch.setattr(doctor, "diagnose", lambda recipe, cfg, **kwargs: [])
    monkeypatch.setattr(launch, "run_recipe", lambda cfg, note=None: held.append(note))
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", "off")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    skip = ["--skip-doctor"] * skip_doctor
    outer = CliRunner().invoke(cli.app, ["run", recipe.name, "--checkpoint", "Toy-Nan", "--runtime", "docker",
                                         "--out", str(tmp_path / "out"), "--offline", *skip])
    assert outer.exit_code == 0, outer.output
    said = outer.output.splitlines()
    stages = [call for call in client.run_calls if _argv(call)[:2] == ["pinbench", "run"]]
    assert len(stages) == 2
    for n, call in enumerate(stages):   # the container's paths made this test's own
        argv = [str(tmp_path / f"stage{n}") if arg == docker_runtime.OUT_MOUNT else arg for arg in _argv(call)[1:]]
        env = {**call["environment"], "PINBENCH_CACHE": str(tmp_path / "cache"), "HF_HOME": str(tmp_path / "cache")}
        stage = CliRunner().invoke(cli.app, argv, env=env)
        assert stage.exit_code == 0, stage.output
        said += stage.output.splitlines()
    assert said.count(note) + held.count(note) == 1, (said, held)
    assert note in outer.output and len(held) == 2


@pytest.mark.parametrize(("fetched", "said"), [
    (b"error: unknown checkpoint 'Toy-Nan' (did you mean 'Toy-Nano'?); known: Toy-Nano\n", 0),
    (b"error: cannot reach the hub\n", 1), (b"fetched\n", 1)], ids=["refused", "failed", "fetched"])
def test_without_the_doctor_a_checkpoint_typo_note_waits_for_the_first_stage(
        client: FakeDockerClient, recipe: Recipe, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fetched: bytes,
        said: int) -> None:
    """`run --checkpoint <typo> --runtime docker --skip-doctor` of a recipe whose fetch refuses the name itself
    (paibench-c's) said the host's typo note, then the stage's refusal: the host now holds it until its first stage
    has ended, and says it unless that stage's output was the recipe's refusal of the name."""
    from typer.testing import CliRunner

    from pinbench import cli

    note = ("note: checkpoint 'Toy-Nan' is not one of toy-bench's (Toy-Nano) (did you mean 'Toy-Nano'?); a new "
            "name is taken as your own model")
    client.container.chunks = [fetched]
    if fetched != b"fetched\n":
        client.exit_codes["fetch"] = 2
    monkeypatch.setattr(cli, "get_recipe", lambda name: recipe)
    monkeypatch.setattr(docker_runtime, "docker_client", lambda: client)
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", "off")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    videos = tmp_path / "videos"
    videos.mkdir()
    result = CliRunner().invoke(cli.app, ["run", recipe.name, "--checkpoint", "Toy-Nan", "--runtime", "docker",
                                          "--out", str(tmp_path / "out"), "-o", f"videos={videos}", "--skip-doctor"])
    lines = result.output.splitlines()
    assert lines.count(note) == said, result.output
    assert f"[fetch] {fetched.decode().strip()}" in lines
    if said:   # after the stage's own output: said once the stage has ended
        assert lines.index(note) > lines.index(f"[fetch] {fetched.decode().strip()}")


@pytest.mark.parametrize("held", ["logs/HEAD", "packed-refs"])
def test_a_modules_folder_that_is_no_git_store_is_still_read(client: FakeDockerClient, tmp_path: Path,
                                                             held: str) -> None:
    """A folder in .git/modules with no HEAD nor config (no store to git, a half-made or copied one) was walked as a
    namespace: its reflog was never read, and a token in it was mounted."""
    folder = tmp_path / "project"
    (folder / ".git" / "modules" / "sub" / held).parent.mkdir(parents=True, exist_ok=True)
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (folder / ".git" / "modules" / "sub" / held).write_text(
        f"{'0' * 40} {'1' * 40} A <a@b.c> 1 +0000\tfetch from https://user:{GIT_TOKEN}@github.com/o/r\n")
    assert "holds a credential" in _mount_refusal(client, tmp_path, "code", folder)
