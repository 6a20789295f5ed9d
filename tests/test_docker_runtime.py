"""``--runtime docker`` orchestration, with a recording test double in place of the Docker engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from toy_recipe import toy_recipe

from pinbench import docker_runtime
from pinbench.recipe import ContainerStage, Recipe, RunConfig
from pinbench.runner import Shard

STAGES = (
    ContainerStage("fetch", argv=("fetch",), network=True, needs_token=True, gpus=False),
    ContainerStage("generate", dockerfile="Dockerfile.generate", argv=("run", "--skip-scoring")),
    ContainerStage("score", argv=("run", "--skip-generation")),
)


@pytest.fixture
def recipe(tmp_path: Path) -> Recipe:
    return toy_recipe(tmp_path / "recipes", version="2.0.0",
                      changelog=[{"version": "2.0.0", "date": "2026-11-30", "change": "toy"}])


class RecordingContainers:
    """Test double for pinbench.docker_engine.run_in_container: records each call, returns set codes."""

    def __init__(self, codes: dict[str, int] | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.codes = codes or {}

    def __call__(self, image: str, argv: list[str], **kwargs: Any) -> int:
        self.calls.append({"image": image, "argv": argv, **kwargs})
        return self.codes.get(kwargs["stage"], 0)


@pytest.fixture
def containers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> RecordingContainers:
    double = RecordingContainers()
    monkeypatch.setattr(docker_runtime, "run_in_container", double)
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz")
    return double


def _cfg(recipe: Recipe, tmp_path: Path, **kw: Any) -> RunConfig:
    videos = tmp_path / "videos"
    videos.mkdir(exist_ok=True)
    return recipe.config("Toy", out_dir=tmp_path / "out", gpus=4, options={"videos": str(videos), "mode": "slow"},
                         env={}, **kw)


def test_stages_get_network_and_token_only_when_they_fetch(containers: RecordingContainers, recipe: Recipe,
        tmp_path: Path) -> None:
    assert docker_runtime.run_in_docker(recipe, _cfg(recipe, tmp_path, limit=4)) == 0
    fetch, generate, score = containers.calls
    assert [c["stage"] for c in containers.calls] == ["fetch", "generate", "score"]
    assert fetch["network_disabled"] is False and fetch["token"] == "hf_abcdefghijklmnopqrstuvwxyz"
    assert fetch["gpus"] == 0
    for call in (generate, score):
        assert call["network_disabled"] is True and call["token"] is None and call["gpus"] == 4
        assert "HF_TOKEN" not in call["env"]
    assert generate["image"] == "pinbench/toy-bench-generate:2.0.0"
    assert score["image"] == "pinbench/toy-bench:2.0.0"
    assert score["argv"][:5] == ["pinbench", "run", "toy-bench", "--checkpoint", "Toy"]
    assert "--skip-generation" in score["argv"] and "--offline" in score["argv"]
    assert score["argv"][score["argv"].index("--limit") + 1] == "4"


def test_host_paths_are_mounted_read_only_and_rewritten(containers: RecordingContainers, recipe: Recipe,
        tmp_path: Path) -> None:
    docker_runtime.run_in_docker(recipe, _cfg(recipe, tmp_path, shard=Shard(1, 4)))
    score = containers.calls[-1]
    assert "videos=/inputs/videos" in score["argv"] and "mode=slow" in score["argv"]
    assert score["mounts"][(tmp_path / "videos").resolve()] == "/inputs/videos:ro"
    assert score["mounts"][(tmp_path / "out").resolve()] == "/runs/out"
    assert score["argv"][score["argv"].index("--shard") + 1] == "1/4"


def test_skips_and_stops_at_first_failure(containers: RecordingContainers, recipe: Recipe,
        tmp_path: Path) -> None:
    containers.codes = {"generate": 3}
    assert docker_runtime.run_in_docker(recipe, _cfg(recipe, tmp_path)) == 3
    assert [c["stage"] for c in containers.calls] == ["fetch", "generate"]
    containers.calls.clear()
    assert docker_runtime.run_in_docker(recipe, _cfg(recipe, tmp_path, skip_generation=True, offline=True)) == 0
    assert [c["stage"] for c in containers.calls] == ["score"]


def test_networked_run_stage_is_not_forced_offline(containers: RecordingContainers, recipe: Recipe,
        tmp_path: Path) -> None:
    stages = (ContainerStage("generate", argv=("run", "--skip-scoring"), network=True, needs_token=True),)
    recipe.stages = stages
    docker_runtime.run_in_docker(recipe, _cfg(recipe, tmp_path))
    (call,) = containers.calls
    assert "--offline" not in call["argv"] and call["network_disabled"] is False
    assert call["token"] == "hf_abcdefghijklmnopqrstuvwxyz"


def test_fixture_runs_once_offline_on_cpu_in_the_scoring_image(containers: RecordingContainers, recipe: Recipe,
        tmp_path: Path) -> None:
    cfg = recipe.config(out_dir=tmp_path / "out", fixture=True, gpus=4, env={})
    assert docker_runtime.run_in_docker(recipe, cfg) == 0
    (call,) = containers.calls
    assert call["image"] == "pinbench/toy-bench:2.0.0" and call["stage"] == "score"
    assert call["network_disabled"] is True and call["token"] is None and call["gpus"] == 0
    assert "--fixture" in call["argv"] and "--skip-generation" not in call["argv"]


def test_options_set_in_the_environment_reach_the_container(containers: RecordingContainers, recipe: Recipe,
                                                            tmp_path: Path) -> None:
    cfg = recipe.config("Toy", out_dir=tmp_path / "out", env={"TOY_MODE": "slow"})
    docker_runtime.run_in_docker(recipe, cfg)
    score = containers.calls[-1]
    assert "mode=slow" in score["argv"]  # from $TOY_MODE on the host, passed as -o inside
    assert not any(arg.startswith("n=") for arg in score["argv"])  # defaults stay the image's
