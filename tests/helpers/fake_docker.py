"""FakeDockerClient: a test double of ``docker.DockerClient`` at the SDK boundary.

It records every ``images.get`` / ``images.pull`` / ``containers.create`` / ``api.build`` call and answers
with configurable images (digest, ENV, USER, labels) and containers (log chunks, exit code, start error),
so the docker engine and runtime code above it runs unchanged, without an engine.
"""

from __future__ import annotations

import tarfile
from typing import Any

import docker

IMAGE_ID = "sha256:" + "c" * 64
REPO_DIGEST = "pinbench/demo@sha256:" + "d" * 64


class FakeImage:
    def __init__(self, image_id: str, repo_digests: list[str], *, env: dict[str, str] | None = None,
                 user: str = "10001:10001", labels: dict[str, str] | None = None, size: int = 1_000_000) -> None:
        self.id = image_id
        self.attrs = {"RepoDigests": repo_digests, "Size": size,
                      "Config": {"Env": [f"{k}={v}" for k, v in (env or {}).items()], "User": user,
                                 "Labels": labels or {}}}


class FakeContainer:
    def __init__(self, chunks: list[bytes], exit_code: int, start_error: Exception | None = None) -> None:
        self.chunks, self.exit_code, self.start_error = chunks, exit_code, start_error
        self.removed = self.stopped = self.started = False
        self.remove_error: Exception | None = None
        self.id = "f" * 64
        self.short_id = self.id[:12]

    def start(self) -> None:
        if self.start_error is not None:
            raise self.start_error
        self.started = True

    def logs(self, *, stream: bool, follow: bool):
        assert stream and follow
        yield from self.chunks

    def wait(self) -> dict[str, int]:
        return {"StatusCode": self.exit_code}

    def stop(self, timeout: int = 10) -> None:
        self.stopped = True

    def remove(self, force: bool = False) -> None:
        if self.remove_error is not None:
            raise self.remove_error
        self.removed = True


class FakeDockerClient:
    """Test double of docker.DockerClient: ``images``, ``containers`` and ``api`` are all this object.

    ``images`` maps a reference to its FakeImage (``image`` answers any other, unless the name is in
    ``missing`` or starts with "missing"); ``exit_codes`` maps a stage label to a container's exit code.
    """

    def __init__(self, *, chunks: list[bytes] = (), exit_code: int = 0, repo_digests=(REPO_DIGEST,),
                 build_chunks: list[dict] = (), start_error: Exception | None = None,
                 images: dict[str, FakeImage] | None = None, exit_codes: dict[str, int] | None = None,
                 missing: set[str] = frozenset()) -> None:
        self.run_calls: list[dict] = []
        self.build_calls: list[dict] = []
        self.pulled: list[str] = []
        self.container = FakeContainer(list(chunks), exit_code, start_error)
        self.exit_code = exit_code
        self.image = FakeImage(IMAGE_ID, list(repo_digests))
        self.known = dict(images or {})
        self.missing = set(missing)
        self.exit_codes = dict(exit_codes or {})
        self.build_chunks = list(build_chunks)
        self.running: list[tuple[dict[str, str], FakeContainer]] = []  # (labels, container) still running
        self.images = self
        self.containers = self
        self.api = self

    def get(self, name: str) -> FakeImage:  # images.get
        if name in self.known:
            return self.known[name]
        if name.startswith("missing") or name in self.missing:
            raise docker.errors.ImageNotFound(f"No such image: {name}")
        return self.image

    def pull(self, name: str) -> FakeImage:  # images.pull
        if name.startswith("missing"):
            raise docker.errors.APIError(f"pull access denied for {name}")
        self.pulled.append(name)
        self.missing.discard(name)
        repository = name.split("@")[0].rsplit(":", 1)[0]
        self.known[name] = FakeImage("sha256:" + "e" * 64, [f"{repository}@sha256:" + "e" * 64])
        return self.known[name]

    def create(self, image: str, **kwargs: Any) -> FakeContainer:  # containers.create
        self.run_calls.append({"image": image, **kwargs})
        stage = (kwargs.get("labels") or {}).get("org.pinbench.stage")
        self.container.exit_code = self.exit_codes.get(stage, self.exit_code)
        return self.container

    def list(self, *, filters: dict[str, str]) -> list[FakeContainer]:  # containers.list, by one label=value
        key, _, value = filters["label"].partition("=")
        return [c for labels, c in self.running if labels.get(key) == value]

    def build(self, **kwargs: Any):  # api.build
        fileobj = kwargs.get("fileobj")
        if fileobj is not None:
            with tarfile.open(fileobj=fileobj) as archive:
                kwargs["archive_names"] = sorted(archive.getnames())
        self.build_calls.append(kwargs)
        yield from self.build_chunks
