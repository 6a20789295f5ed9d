"""pinbench.docker_engine: what reaches the Docker engine for each stage, and what reaches the log.

No engine runs here: FakeDockerClient is a test double of the docker SDK client that records every
call. The one test that needs a real engine is marked ``docker`` and skipped without one.
"""

from __future__ import annotations

from pathlib import Path

import docker
import pytest
from dockerlint import load_base_images

from pinbench import docker_engine as ct
from pinbench.docker_engine import ContainerError, build_image, run_in_container

REPO = Path(__file__).resolve().parents[1]
HF_TOKEN = "hf_SecretTestToken0123456789abcdefgh"
PLAIN_TOKEN = "plain-secret-value-42"
IMAGE_ID = "sha256:" + "c" * 64
REPO_DIGEST = "pinbench/demo@sha256:" + "d" * 64


class FakeImage:
    def __init__(self, image_id: str, repo_digests: list[str]) -> None:
        self.id = image_id
        self.attrs = {"RepoDigests": repo_digests}


class FakeContainer:
    def __init__(self, chunks: list[bytes], exit_code: int, start_error: Exception | None = None) -> None:
        self.chunks, self.exit_code, self.start_error = chunks, exit_code, start_error
        self.removed = self.stopped = self.started = False

    def start(self):
        if self.start_error is not None:
            raise self.start_error
        self.started = True

    def logs(self, *, stream: bool, follow: bool):
        assert stream and follow
        yield from self.chunks

    def wait(self):
        return {"StatusCode": self.exit_code}

    def stop(self, timeout: int = 10):
        self.stopped = True

    def remove(self, force: bool = False):
        self.removed = True


class FakeDockerClient:
    """Test double of docker.DockerClient: records images.get, containers.create and api.build calls."""

    def __init__(self, *, chunks: list[bytes] = (), exit_code: int = 0, repo_digests=(REPO_DIGEST,),
                 build_chunks: list[dict] = (), start_error: Exception | None = None) -> None:
        self.run_calls: list[dict] = []
        self.build_calls: list[dict] = []
        self.container = FakeContainer(list(chunks), exit_code, start_error)
        self.image = FakeImage(IMAGE_ID, list(repo_digests))
        self.build_chunks = list(build_chunks)
        self.images = self
        self.containers = self
        self.api = self

    def get(self, name: str) -> FakeImage:  # images.get
        if name.startswith("missing"):
            raise docker.errors.ImageNotFound(f"No such image: {name}")
        return self.image

    def create(self, image: str, **kwargs) -> FakeContainer:  # containers.create
        self.run_calls.append({"image": image, **kwargs})
        return self.container

    def build(self, **kwargs):  # api.build
        self.build_calls.append(kwargs)
        yield from self.build_chunks


def run(client: FakeDockerClient, stage: str = "score", **kwargs) -> tuple[int, list[str], dict]:
    lines: list[str] = []
    code = run_in_container("pinbench/demo:1", ["pinbench", "run", "demo"], stage=stage, client=client,
                            log=lines.append, **kwargs)
    (call,) = client.run_calls
    return code, lines, call


# ----------------------------------------------------------------------------------------- scoring


def test_scoring_runs_offline_without_token(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_TOKEN", HF_TOKEN)
    client = FakeDockerClient(chunks=[b"scoring 3 samples\n"], exit_code=0)
    code, lines, call = run(client, mounts={tmp_path: "/work"}, env={"GPUS": "1"})
    assert code == 0 and lines == ["[score] scoring 3 samples"]
    assert call["network_mode"] == "none"
    env = call["environment"]
    assert "HF_TOKEN" not in env and HF_TOKEN not in str(call)
    assert env["HF_HUB_OFFLINE"] == "1" and env["PINBENCH_OFFLINE"] == "1" and env["GPUS"] == "1"
    assert env["PINBENCH_IMAGE_DIGEST"] == REPO_DIGEST
    assert call["command"] == ["pinbench", "run", "demo"] and client.container.started
    assert call["volumes"] == {str(tmp_path.resolve()): {"bind": "/work", "mode": "rw"}}
    assert client.container.removed


@pytest.mark.parametrize("kwargs", [{"token": HF_TOKEN, "network_disabled": False}, {"network_disabled": False}])
def test_scoring_refuses_token_and_network(kwargs):
    client = FakeDockerClient()
    with pytest.raises(ValueError, match="scores offline"):
        run_in_container("pinbench/demo:1", ["x"], stage="score", client=client, **kwargs)
    assert client.run_calls == []


def test_token_only_with_network():
    with pytest.raises(ValueError, match="only passed to a stage with network"):
        run_in_container("pinbench/demo:1", ["x"], stage="generate", token=HF_TOKEN, client=FakeDockerClient())


def test_secrets_in_env_are_refused():
    with pytest.raises(ValueError, match="HF_TOKEN look like secrets"):
        run_in_container("pinbench/demo:1", ["x"], stage="fetch", network_disabled=False,
                         env={"HF_TOKEN": HF_TOKEN}, client=FakeDockerClient())


# ------------------------------------------------------------------------------------ fetch / generate


def test_fetch_gets_token_and_network_and_logs_are_redacted():
    chunks = [f"using token {HF_TOKEN} and {PLAIN_TOKEN}\n".encode(), b"downloaded 2 fi", b"les\nlast line"]
    client = FakeDockerClient(chunks=chunks, exit_code=3)
    code, lines, call = run(client, stage="fetch", network_disabled=False, token=PLAIN_TOKEN)
    assert code == 3
    assert call["environment"]["HF_TOKEN"] == PLAIN_TOKEN
    assert "network_mode" not in call and "HF_HUB_OFFLINE" not in call["environment"]
    assert lines == ["[fetch] using token *** and ***", "[fetch] downloaded 2 files", "[fetch] last line"]


@pytest.mark.parametrize(("gpus", "count"), [(2, 2), ("all", -1)])
def test_gpu_device_requests(gpus, count):
    _, _, call = run(FakeDockerClient(), stage="generate", gpus=gpus)
    (request,) = call["device_requests"]
    assert isinstance(request, docker.types.DeviceRequest)
    assert request["Count"] == count and request["Capabilities"] == [["gpu"]]


def test_no_gpus_no_device_requests_and_bad_value():
    _, _, call = run(FakeDockerClient(), gpus=0)
    assert "device_requests" not in call
    with pytest.raises(ValueError, match="gpus="):
        run_in_container("pinbench/demo:1", ["x"], stage="score", gpus="two", client=FakeDockerClient())


def test_digest_falls_back_to_image_id_and_mount_modes(tmp_path):
    _, _, call = run(FakeDockerClient(repo_digests=()), mounts={tmp_path: "/cache:ro"}, workdir="/work",
                     user="1000:1000")
    assert call["environment"]["PINBENCH_IMAGE_DIGEST"] == IMAGE_ID
    assert call["volumes"][str(tmp_path.resolve())] == {"bind": "/cache", "mode": "ro"}
    assert call["working_dir"] == "/work" and call["user"] == "1000:1000"


def test_missing_image_and_mount_are_clear_errors(tmp_path):
    with pytest.raises(ContainerError, match="missing:1: image not found locally"):
        run_in_container("missing:1", ["x"], stage="score", client=FakeDockerClient())
    with pytest.raises(ContainerError, match="mount source does not exist"):
        run_in_container("pinbench/demo:1", ["x"], stage="score", mounts={tmp_path / "nope": "/x"},
                         client=FakeDockerClient())


def test_interrupt_stops_and_removes_container():
    client = FakeDockerClient()

    def interrupted(**kwargs):
        raise KeyboardInterrupt
        yield  # pragma: no cover

    client.container.logs = interrupted
    with pytest.raises(KeyboardInterrupt):
        run(client)
    assert client.container.stopped and client.container.removed


# -------------------------------------------------------------------------------------------- build


def test_build_image_streams_and_returns_id(tmp_path):
    (tmp_path / "Dockerfile.eval").write_text("FROM scratch\n")
    chunks = [{"stream": "Step 1/1 : FROM scratch\n"}, {"stream": f" token {HF_TOKEN}\n"},
              {"aux": {"ID": IMAGE_ID}}, {"stream": "Successfully built cccc\n"}]
    client = FakeDockerClient(build_chunks=chunks)
    lines: list[str] = []
    image_id = build_image(tmp_path, "pinbench/demo:1", dockerfile="Dockerfile.eval",
                           buildargs={"BASE_IMAGE": "x@sha256:" + "e" * 64}, client=client, log=lines.append)
    assert image_id == IMAGE_ID
    (call,) = client.build_calls
    assert (call["path"], call["dockerfile"], call["tag"]) == (str(tmp_path), "Dockerfile.eval", "pinbench/demo:1")
    assert call["buildargs"] == {"BASE_IMAGE": "x@sha256:" + "e" * 64}
    assert lines == ["Step 1/1 : FROM scratch", " token ***", "Successfully built cccc"]


def test_build_failure_and_secret_buildargs(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    client = FakeDockerClient(build_chunks=[{"error": f"COPY failed: x not found ({HF_TOKEN})\n"}])
    with pytest.raises(ContainerError, match=r"pinbench/demo:1: build failed: COPY failed: x not found \(\*\*\*\)"):
        build_image(tmp_path, "pinbench/demo:1", client=client, log=lambda line: None)
    with pytest.raises(ValueError, match="HF_TOKEN look like secrets"):
        build_image(tmp_path, "t", buildargs={"HF_TOKEN": HF_TOKEN}, client=client)
    with pytest.raises(ContainerError, match="Dockerfile not found"):
        build_image(tmp_path / "nowhere", "t", client=client)


# ------------------------------------------------------------------------------------- real engine


@pytest.fixture
def engine():
    try:
        return ct.docker_client()
    except ContainerError as exc:
        pytest.skip(str(exc))


@pytest.mark.docker
def test_real_engine_runs_offline_stage(engine, tmp_path):
    image = load_base_images(REPO / "images" / "base-images.yaml")["python-3.11-slim"]
    engine.images.pull(image)
    script = ("import os, socket\nprint(os.environ['PINBENCH_IMAGE_DIGEST'])\n"
              "socket.create_connection(('1.1.1.1', 53), timeout=3)\n")
    lines: list[str] = []
    code = run_in_container(image, ["python", "-c", script], stage="score", mounts={tmp_path: "/out"},
                            client=engine, log=lines.append)
    assert code != 0  # no network inside
    assert lines[0].startswith("[score] ") and "sha256:" in lines[0]


def test_a_container_that_cannot_start_is_removed_and_explained():
    client = FakeDockerClient(start_error=docker.errors.APIError(
        'could not select device driver "" with capabilities: [[gpu]]'))
    with pytest.raises(ContainerError, match="NVIDIA Container Toolkit") as info:
        run_in_container("pinbench/demo:1", ["pinbench", "run", "demo"], stage="score", gpus=1, client=client,
                         log=lambda line: None)
    assert "\n" not in str(info.value)
    assert client.container.removed
