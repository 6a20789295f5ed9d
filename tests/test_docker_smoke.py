"""``make docker-smoke`` (tools/docker_smoke.py): its decisions, with the docker SDK mocked at its boundary.

An unreachable base is skipped and named; a swapped base is what the build gets; a failed build, or a fixture
that exits 0 without a complete scorecard, fails the row and the command. (The real builds: docs/performance.md,
"The images".)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import docker
import docker_smoke
import pytest
from fake_docker import FakeDockerClient

from pinbench.core.recipe import get_recipe
from pinbench.ops.launch import run_recipe

PINNED_PY = "python:3.11-slim-bookworm@sha256:86adf8dbadc3d6e82ee5dd2c74bec2e1c2467cdad47886280501df722372d2e1"
STAND_IN = "pinbench-smoke/stand-in:local"


class SmokeClient(FakeDockerClient):
    """FakeDockerClient plus what the smoke asks of a registry and the build cache."""

    def __init__(self, *, reachable: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reachable = reachable

    def get_registry_data(self, name: str) -> Any:  # images.get_registry_data
        if not self.reachable:
            raise docker.errors.APIError("Get https://registry-1.docker.io/v2/: no such host")
        return object()

    def prune_builds(self) -> None:  # api.prune_builds
        pass


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def dd() -> Any:
    return get_recipe("dynamic-degree")


@pytest.fixture
def bases() -> dict:
    from dockerlint import load_base_images

    return load_base_images(docker_smoke.REPO / "images" / "base-images.yaml")


def test_an_unreachable_base_is_skipped_and_named(dd, bases, tmp_path: Path) -> None:
    client = SmokeClient(reachable=False, missing={PINNED_PY})
    (row,) = docker_smoke.smoke_recipe(dd, {}, bases, tmp_path, client)
    assert row.ok and row.fixture.startswith("SKIPPED: base not here, registry not reachable (")
    assert "no such host" in row.fixture and client.build_calls == [] and client.run_calls == []


def test_a_swapped_base_is_built_on_and_a_failed_build_fails_the_row(dd, bases, tmp_path: Path) -> None:
    error = "The command '/bin/sh -c curl -fsSL x' returned a non-zero code: 6"
    client = SmokeClient(build_chunks=[{"stream": "Step 3/9 : RUN curl\n"}, {"stream": "curl: (6) no host\n"},
                                       {"error": error}])
    (row,) = docker_smoke.smoke_recipe(dd, {"python-3.11-slim": STAND_IN}, bases, tmp_path, client)
    (build,) = client.build_calls
    assert build["buildargs"] == {"BASE_IMAGE": STAND_IN}
    assert json.loads(build["labels"]["org.pinbench.base-image"])["differs_from_pinned"] is True
    assert row.base == f"python-3.11-slim -> {STAND_IN}"
    assert not row.ok and row.fixture.startswith("BUILD FAILED (exit 6: curl: (6) no host; log ")
    assert client.run_calls == []                                        # nothing runs in an image not built


def test_a_fixture_that_writes_no_complete_scorecard_fails(dd, bases, tmp_path: Path) -> None:
    """Exit 0 alone is not a pass: the fixture run in the image must leave a complete scorecard."""
    client = SmokeClient()
    (row,) = docker_smoke.smoke_recipe(dd, {}, bases, tmp_path, client)
    assert len(client.run_calls) == 1                                   # one offline stage in the scoring image
    assert "--fixture" in client.run_calls[0]["command"] and client.run_calls[0]["network_mode"] == "none"
    assert not row.ok and row.fixture == "FAIL (--fixture --runtime docker, exit 0, no scorecard)"


def test_the_command_fails_on_a_failed_row_and_refuses_an_unknown_base(tmp_path: Path, capsys,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    assert docker_smoke.main(["--base", "no-such-entry=x"]) == 2
    assert "--base takes NAME=IMAGE with NAME one of" in capsys.readouterr().err
    client = SmokeClient(build_chunks=[{"error": "The command returned a non-zero code: 1"}])
    monkeypatch.setattr(docker_smoke, "docker_client", lambda: client)
    code = docker_smoke.main(["--recipe", "dynamic-degree", "--no-cpu-image", "--no-engine-tests", "--out",
                              str(tmp_path)])
    assert code == 1
    assert "docker-smoke: FAILED: pinbench/dynamic-degree" in capsys.readouterr().err
    table = (tmp_path / "table.md").read_text()
    assert table.startswith("| image (Dockerfile) | base | build s | size GB | fixture in the image |")
    assert "BUILD FAILED" in table


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="3">
<testcase classname="tests.test_docker_real_engine" name="test_a_stage_gets_exactly_what_the_runtime_promises"/>
<testcase classname="tests.test_docker_real_engine" name="test_a_root_caller_runs_as_the_images_user">
<skipped type="pytest.skip" message="needs a root caller (chown)">skip</skipped></testcase>
<testcase classname="tests.test_slurm_cluster" name="test_docker_on_the_node_runs_the_array_in_the_recipes_image"/>
</testsuite></testsuites>"""


class _Tagged:
    def __init__(self, *tags: str) -> None:
        self.tags = list(tags)


def test_the_real_engine_tests_build_on_the_swapped_base_and_a_skip_is_named(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """SMOKE_BASES reached the image builds but not the tests (5 skipped, silently): it reaches both now."""
    seen: dict[str, Any] = {}

    def pytest_run(argv: list[str], *, env: dict[str, str], **kwargs: Any) -> Any:
        seen.update(argv=argv, env=env)
        Path(next(a for a in argv if a.startswith("--junitxml=")).partition("=")[2]).write_text(JUNIT)
        return type("Done", (), {"returncode": 0, "stdout": "", "stderr": ""})()

    monkeypatch.setattr(docker_smoke.subprocess, "run", pytest_run)
    client = SmokeClient()
    client.list = lambda: [_Tagged("pinbench/cpu:smoke")]   # images.list
    row = docker_smoke.engine_tests({"python-3.11-slim": STAND_IN}, tmp_path, client)
    assert seen["env"]["PINBENCH_TEST_BASE_IMAGE"] == STAND_IN and "-m" in seen["argv"] and "docker" in seen["argv"]
    assert row.ok and row.base == f"python-3.11-slim -> {STAND_IN}"
    assert row.fixture == ("PASS, but (2 passed, 1 SKIPPED: test_docker_real_engine::"
                           "test_a_root_caller_runs_as_the_images_user (needs a root caller (chown)))")


def test_an_image_a_real_engine_test_leaves_behind_fails_the_row(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    client = SmokeClient()
    images = [[], [_Tagged("pinbench-test/dynamic-degree-slurm:local")]]
    client.list = lambda: images.pop(0)

    def pytest_run(argv: list[str], **kwargs: Any) -> Any:
        Path(next(a for a in argv if a.startswith("--junitxml=")).partition("=")[2]).write_text(JUNIT)
        return type("Done", (), {"returncode": 0, "stdout": "", "stderr": ""})()

    monkeypatch.setattr(docker_smoke.subprocess, "run", pytest_run)
    row = docker_smoke.engine_tests({}, tmp_path, client)
    assert not row.ok and row.fixture.startswith("FAIL (")
    assert row.fixture.endswith("LEFT BEHIND: pinbench-test/dynamic-degree-slurm:local)")


def test_make_docker_smoke_passes_its_bases_to_the_tests_too() -> None:
    import subprocess

    dry = subprocess.run(["make", "-s", "-n", "-C", str(docker_smoke.REPO), "docker-smoke",
                          f"SMOKE_BASES=python-3.11-slim={STAND_IN}"], capture_output=True, text=True, check=True)
    commands = [line for line in dry.stdout.splitlines() if "pytest" in line or "docker_smoke.py" in line]
    assert commands == [f".venv/bin/python tools/docker_smoke.py --base 'python-3.11-slim={STAND_IN}' "]


@pytest.mark.parametrize("tamper", [False, True])
def test_a_fixture_in_the_image_must_equal_the_same_fixture_on_the_host(dd, bases, tmp_path: Path, tamper: bool,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The image's run (here: the host's fixture written where the image writes, a test double of the engine) is
    compared record by record, reuse keys included, and metric by metric with a fixture run on the host."""

    def image_run(recipe: Any, cfg: Any, **kwargs: Any) -> int:
        outcome = run_recipe(cfg)
        if tamper:   # an image that keyed one input by where it lies
            log = cfg.out_dir / "samples" / "run.jsonl"
            lines = log.read_text().splitlines()
            record = json.loads(lines[0])["record"]
            record["input_hash"] = "0" * 64
            (cfg.out_dir / "samples.jsonl").write_text("\n".join(
                [json.dumps(record)] + (cfg.out_dir / "samples.jsonl").read_text().splitlines()[1:]) + "\n")
        return outcome.exit_code

    monkeypatch.setattr(docker_smoke, "run_in_docker", image_run)
    (row,) = docker_smoke.smoke_recipe(dd, {}, bases, tmp_path, SmokeClient())
    if tamper:
        assert not row.ok and "DIFFERS from the host: samples.jsonl: sample 'short_8fps': input_hash differ" \
            in row.fixture
    else:
        assert row.ok and row.fixture.endswith("exit 0, complete; = host: 10 records (input_hash included), 1 metrics)")


def test_records_that_differ_only_in_what_they_ran_on_are_equal(tmp_path: Path) -> None:
    """The image's digest and its installed versions (``packages``) are the host's own; the code digest is not."""
    def run_dir(name: str, **implementation: Any) -> Path:
        record = {"sample_id": "a", "input_hash": "0" * 64, "seconds": 1.0,
                  "implementation": {"recipe_version": "1.0.0", "code": "c" * 64, "image": None,
                                     "packages": "1" * 16, **implementation}}
        (tmp_path / name).mkdir()
        (tmp_path / name / "samples.jsonl").write_text(json.dumps(record) + "\n")
        (tmp_path / name / "scorecard.json").write_text(json.dumps({"metrics": {"m": {"value": 1.0}}}))
        return tmp_path / name

    host = run_dir("host")
    assert docker_smoke.run_differences(host, run_dir("image", image="sha256:" + "e" * 64, packages="2" * 16)) == []
    assert docker_smoke.run_differences(host, run_dir("edited", code="d" * 64)) == \
        ["samples.jsonl: sample 'a': implementation differ"]
