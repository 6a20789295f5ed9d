"""pinbench.ops.docker_engine: what reaches the Docker engine for each stage, and what reaches the log.

No engine runs here: FakeDockerClient (tests/helpers/fake_docker.py) is a test double of the docker SDK
client that records every call. The one test that needs a real engine is marked ``docker`` and skipped without one.
"""

from __future__ import annotations

import os

import docker
import pytest
from fake_docker import IMAGE_ID, REPO_DIGEST, FakeDockerClient, FakeImage

from pinbench.ops import docker_engine as ct
from pinbench.ops.docker_engine import ContainerError, build_image, context_files, run_in_container

HF_TOKEN = "hf_SecretTestToken0123456789abcdefgh"
PLAIN_TOKEN = "plain-secret-value-42"


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
    assert env["PINBENCH_IMAGE_DIGEST"] == REPO_DIGEST and env["NVIDIA_VISIBLE_DEVICES"] == "void"
    # The runtime sets the entrypoint itself: an ENTRYPOINT in the image (or its base) cannot prefix the command.
    assert call["entrypoint"] == ["pinbench"] and call["command"] == ["run", "demo"] and client.container.started
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
    chunks = [f"using token {HF_TOKEN} and {PLAIN_TOKEN}\n".encode(), b"downloaded 2 fi", b"les\nlast line\n",
              b"push to https://glpat-Ab12Cd34Ef56Gh78Ij90@gitlab.example.com key sk-proj-Ab12Cd34Ef56Gh78Ij90Kl"]
    client = FakeDockerClient(chunks=chunks, exit_code=3)
    code, lines, call = run(client, stage="fetch", network_disabled=False, token=PLAIN_TOKEN)
    assert code == 3
    assert call["environment"]["HF_TOKEN"] == PLAIN_TOKEN
    assert "network_mode" not in call and "HF_HUB_OFFLINE" not in call["environment"]
    assert lines == ["[fetch] using token *** and ***", "[fetch] downloaded 2 files", "[fetch] last line",
                     "[fetch] push to https://***@gitlab.example.com key ***"]   # tokens by their shape


@pytest.mark.parametrize(("gpus", "count"), [(2, 2), ("all", -1)])
def test_gpu_device_requests(gpus, count):
    _, _, call = run(FakeDockerClient(), stage="generate", gpus=gpus)
    (request,) = call["device_requests"]
    assert isinstance(request, docker.types.DeviceRequest)
    assert request["Count"] == count and request["Capabilities"] == [["gpu"]]
    assert "NVIDIA_VISIBLE_DEVICES" not in call["environment"]  # the request decides, not an env var


def test_gpu_device_ids_are_requested_by_id():
    _, _, call = run(FakeDockerClient(), stage="generate", gpus=["2", "GPU-8a1b2c3d-0000-1111-2222-333344445555"])
    (request,) = call["device_requests"]
    assert request["DeviceIDs"] == ["2", "GPU-8a1b2c3d-0000-1111-2222-333344445555"] and request["Count"] == 0
    with pytest.raises(ValueError, match="device indices or UUIDs"):
        run_in_container("pinbench/demo:1", ["x"], stage="generate", gpus=["0;rm"], client=FakeDockerClient())


def test_no_gpus_no_device_requests_and_bad_value():
    _, _, call = run(FakeDockerClient(), gpus=0)
    assert "device_requests" not in call
    with pytest.raises(ValueError, match="gpus="):
        run_in_container("pinbench/demo:1", ["x"], stage="score", gpus="two", client=FakeDockerClient())


def test_base_image_label_reaches_the_container_as_env():
    label = ct.base_image_label(used="mirror.lab/python:3.11@sha256:" + "a" * 64, pinned="python:3.11-slim@sha256:"
                                + "b" * 64, digest="mirror.lab/python@sha256:" + "a" * 64)
    client = FakeDockerClient(images={"pinbench/demo:1": FakeImage(IMAGE_ID, [], labels={ct.BASE_IMAGE_LABEL: label})})
    _, _, call = run(client)
    assert call["environment"]["PINBENCH_BASE_IMAGE"] == label


@pytest.mark.parametrize(("used", "digest", "overridden", "differs"), [
    ("python:3.11-slim@sha256:" + "b" * 64, "python@sha256:" + "b" * 64, False, False),
    ("mirror.lab/library/python:3.11-slim@sha256:" + "b" * 64, "mirror.lab/library/python@sha256:" + "b" * 64,
     True, False),  # a mirror of the very same digest
    ("mirror.lab/python:3.11-slim", "mirror.lab/python@sha256:" + "a" * 64, True, True),
    ("local/debian:bookworm", "sha256:" + "c" * 64, True, True),  # an imported image: only a local id
])
def test_base_image_label_says_whether_the_base_differs(used, digest, overridden, differs):
    import json

    label = json.loads(ct.base_image_label(used=used, pinned="python:3.11-slim@sha256:" + "b" * 64, digest=digest))
    assert label["overridden"] is overridden and label["differs_from_pinned"] is differs
    assert label["image"] == used and label["digest"] == digest


def test_container_paths_in_the_log_are_host_paths(tmp_path):
    out, cache = tmp_path / "out", tmp_path / "cache"
    out.mkdir()
    cache.mkdir()
    chunks = [b"scorecard: /runs/out/scorecard.json\n", b"report: /runs/out/report/index.html\n",
              b"read /cache/hub/x and /opt/cache/y; /runs/outside stays\n"]
    _, lines, _ = run(FakeDockerClient(chunks=chunks), mounts={out: "/runs/out", cache: "/cache:ro"})
    assert lines == [f"[score] scorecard: {out.resolve()}/scorecard.json",
                     f"[score] report: {out.resolve()}/report/index.html",
                     f"[score] read {cache.resolve()}/hub/x and /opt/cache/y; /runs/outside stays"]


def test_a_failing_remove_does_not_mask_the_stage_result():
    client = FakeDockerClient(chunks=[b"done\n"], exit_code=3)
    client.container.remove_error = docker.errors.APIError("removal of container is already in progress")
    code, lines, _ = run(client)
    assert code == 3
    assert lines[-1].startswith("warning: could not remove container") and "already in progress" in lines[-1]


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
              {"stream": "\x1b[91mc\x1b[0m\x1b[91mu\x1b[0m\x1b[91mrl: (6)\x1b[0m\n"},
              {"aux": {"ID": IMAGE_ID}}, {"stream": "Successfully built cccc\n"}]
    client = FakeDockerClient(build_chunks=chunks)
    lines: list[str] = []
    image_id = build_image(tmp_path, "pinbench/demo:1", dockerfile="Dockerfile.eval",
                           buildargs={"BASE_IMAGE": "x@sha256:" + "e" * 64}, labels={"a": "b"}, client=client,
                           log=lines.append)
    assert image_id == IMAGE_ID
    (call,) = client.build_calls
    assert (call["custom_context"], call["dockerfile"], call["tag"]) == (True, "Dockerfile.eval", "pinbench/demo:1")
    assert call["buildargs"] == {"BASE_IMAGE": "x@sha256:" + "e" * 64} and call["labels"] == {"a": "b"}
    assert lines == ["Step 1/1 : FROM scratch", " token ***", "curl: (6)", "Successfully built cccc"]


def test_build_sends_exactly_the_context_files(tmp_path):
    """The archive is the SDK matcher's file set: what dockerlint checks COPY sources against."""
    for rel in ("Dockerfile", "keep/a.py", "keep/b.pyc", "drop/c.txt", "secret.env", "keep.env"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x\n")
    (tmp_path / ".dockerignore").write_text("# comment\n\ndrop\n*.env\n!keep.env\n**/*.pyc\n")
    files = context_files(tmp_path)
    assert {"Dockerfile", "keep", "keep/a.py", "keep.env"} <= files
    assert not files & {"drop", "drop/c.txt", "secret.env", "keep/b.pyc"}
    client = FakeDockerClient()
    build_image(tmp_path, "t:1", client=client, log=lambda line: None)
    assert client.build_calls[0]["archive_names"] == sorted(files)


def test_build_failure_and_secret_buildargs(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    client = FakeDockerClient(build_chunks=[{"error": f"COPY failed: x not found ({HF_TOKEN})\n"}])
    with pytest.raises(ContainerError, match=r"pinbench/demo:1: build failed: COPY failed: x not found \(\*\*\*\)"):
        build_image(tmp_path, "pinbench/demo:1", client=client, log=lambda line: None)
    for name in ("HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWD"):  # one secret-name rule with provenance
        with pytest.raises(ValueError, match=f"{name} look like secrets"):
            build_image(tmp_path, "t", buildargs={name: "value-of-it"}, client=client)
    with pytest.raises(ContainerError, match="Dockerfile not found"):
        build_image(tmp_path / "nowhere", "t", client=client)


# ------------------------------------------------------------------------------------- real engine


@pytest.mark.docker
def test_real_engine_runs_offline_stage_past_an_image_entrypoint(engine, base_image, tmp_path):
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "Dockerfile").write_text(f'FROM {base_image}\nENTRYPOINT ["python3", "-m", "not_our_command"]\n')
    build_image(context, "pinbench-test/entrypoint:1", client=engine, log=lambda line: None)
    out = tmp_path / "out"
    out.mkdir()
    script = ("import os, socket\n"
              "print(os.environ['PINBENCH_IMAGE_DIGEST'], os.environ['NVIDIA_VISIBLE_DEVICES'], flush=True)\n"
              "open('/runs/out/x.txt', 'w').write('x')\nprint('wrote /runs/out/x.txt', flush=True)\n"
              "socket.create_connection(('1.1.1.1', 53), timeout=3)\n")
    lines: list[str] = []
    try:
        code = run_in_container("pinbench-test/entrypoint:1", ["python3", "-c", script], stage="score",
                                mounts={out: "/runs/out"}, user=f"{os.getuid()}:{os.getgid()}", client=engine,
                                log=lines.append)
    finally:
        engine.images.remove("pinbench-test/entrypoint:1")
    assert code != 0  # no network inside
    assert lines[0].startswith("[score] sha256:") and lines[0].endswith(" void")  # our argv ran, not the image's
    assert f"[score] wrote {out.resolve()}/x.txt" in lines and (out / "x.txt").read_text() == "x"


def test_a_container_that_cannot_start_is_removed_and_explained():
    client = FakeDockerClient(start_error=docker.errors.APIError(
        'could not select device driver "" with capabilities: [[gpu]]'))
    with pytest.raises(ContainerError, match="NVIDIA Container Toolkit") as info:
        run_in_container("pinbench/demo:1", ["pinbench", "run", "demo"], stage="score", gpus=1, client=client,
                         log=lambda line: None)
    assert "\n" not in str(info.value)
    assert client.container.removed
