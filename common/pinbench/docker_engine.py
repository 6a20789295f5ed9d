"""The ``--runtime docker`` path: build a recipe image and run one stage in a container (docker SDK).

Why: the same pinned image must run fetch, generation and scoring, and each stage must get only what
it needs. Scoring runs with ``--network none`` (everything was fetched before) and never sees a token;
a token reaches only a stage that is given one explicitly and has network. The image's digest is
passed in as PINBENCH_IMAGE_DIGEST so the scorecard's provenance records which image produced it.
Container and build logs are streamed line by line through ``redact``.

Builds go through the Engine API's classic builder (the docker SDK has no BuildKit session), so
Dockerfiles built here must not need BuildKit-only syntax (RUN --mount, heredocs, ADD --checksum).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import docker

from pinbench.provenance import IMAGE_DIGEST_ENV, redact

_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD", re.IGNORECASE)
_MIN_SECRET_LEN = 6
SCORING_STAGES = frozenset({"score", "scoring"})

Log = Callable[[str], None]


class ContainerError(RuntimeError):
    """The engine is unreachable, an image is missing, a build failed, or a mount does not exist."""


def _print(line: str) -> None:
    print(line, flush=True)


class _LineLog:
    """Turns a stream of byte/str chunks into redacted whole lines for ``log``."""

    def __init__(self, log: Log, secrets: Iterable[str] = (), prefix: str = "") -> None:
        self.log, self.prefix, self.buffer = log, prefix, ""
        self.secrets = sorted({s for s in secrets if s and len(s) >= _MIN_SECRET_LEN}, key=len, reverse=True)

    def _emit(self, line: str) -> None:
        for secret in self.secrets:
            line = line.replace(secret, "***")
        self.log(self.prefix + redact(line.rstrip("\r")))

    def feed(self, chunk: bytes | str) -> None:
        self.buffer += chunk.decode("utf-8", errors="replace") if isinstance(chunk, bytes) else chunk
        *lines, self.buffer = self.buffer.split("\n")
        for line in lines:
            self._emit(line)

    def close(self) -> None:
        if self.buffer:
            self._emit(self.buffer)
            self.buffer = ""


def docker_client() -> Any:
    """A docker SDK client from the environment (DOCKER_HOST etc.); ContainerError if unreachable."""
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        raise ContainerError(redact(f"cannot reach the Docker engine ({exc}); is dockerd running and "
                                    "DOCKER_HOST set?")) from None
    return client


def _refuse_secret_names(names: Iterable[str], what: str) -> None:
    secret = sorted(n for n in names if _SECRET_NAME.search(n))
    if secret:
        raise ValueError(f"{what} {', '.join(secret)} look like secrets; a token is passed only as "
                         "run_in_container(token=...) to a stage with network, never baked or set as env")


def build_image(context_dir: Path | str, tag: str, *, dockerfile: str = "Dockerfile",
                buildargs: Mapping[str, str] | None = None, client: Any = None, log: Log | None = None) -> str:
    """Build ``tag`` from ``context_dir`` and return the image id (``sha256:...``), streaming the log.

    Build args named like secrets are refused: they would stay in the image history.
    """
    context = Path(context_dir)
    if not (context / dockerfile).is_file():
        raise ContainerError(f"{context / dockerfile}: Dockerfile not found")
    _refuse_secret_names(buildargs or {}, "build args")
    client = client or docker_client()
    out = _LineLog(log or _print)
    image_id = None
    stream = client.api.build(path=str(context), tag=tag, dockerfile=dockerfile, buildargs=dict(buildargs or {}),
                              rm=True, forcerm=True, decode=True)
    for chunk in stream:
        if "stream" in chunk:
            out.feed(chunk["stream"])
        if "error" in chunk:
            out.close()
            raise ContainerError(redact(f"{tag}: build failed: {chunk['error'].strip()}"))
        image_id = (chunk.get("aux") or {}).get("ID", image_id)
    out.close()
    return image_id or client.images.get(tag).id


def image_digest(image: str, client: Any) -> str:
    """The image's registry digest (RepoDigests[0]) if it was pulled or pushed, else its local id."""
    try:
        found = client.images.get(image)
    except docker.errors.ImageNotFound:
        raise ContainerError(f"{image}: image not found locally; build it first (make build-<recipe>)") from None
    digests = found.attrs.get("RepoDigests") or []
    return digests[0] if digests else found.id


def _volumes(mounts: Mapping[Path | str, str]) -> dict[str, dict[str, str]]:
    """{host: "/container/path[:ro]"} as docker SDK volumes; host paths must exist."""
    volumes = {}
    for host, target in mounts.items():
        source = Path(host).expanduser().resolve()
        if not source.exists():
            raise ContainerError(f"{host}: mount source does not exist")
        bind, _, mode = str(target).partition(":")
        volumes[str(source)] = {"bind": bind, "mode": mode or "rw"}
    return volumes


def _device_requests(gpus: int | str) -> list[Any] | None:
    if gpus == "all":
        count = -1
    elif isinstance(gpus, int) and not isinstance(gpus, bool) and gpus >= 0:
        count = gpus
    else:
        raise ValueError(f"gpus={gpus!r}: expected a count >= 0 or 'all'")
    return [docker.types.DeviceRequest(count=count, capabilities=[["gpu"]])] if count else None


def run_in_container(image: str, argv: Sequence[str], *, stage: str,
                     mounts: Mapping[Path | str, str] | None = None, env: Mapping[str, str] | None = None,
                     gpus: int | str = 0, network_disabled: bool = True, workdir: str | None = None,
                     user: str | None = None, token: str | None = None, shm_size: str | None = None,
                     client: Any = None, log: Log | None = None) -> int:
    """Run ``argv`` in ``image`` for one pipeline stage; stream its redacted log; return its exit code.

    The network is off unless ``network_disabled=False``; scoring stages refuse network and tokens.
    ``token`` (for fetch/generation of gated weights) is passed as HF_TOKEN only to a networked stage;
    ``env`` may not carry secrets itself. ``mounts`` maps host paths to "/path" or "/path:ro".
    """
    if stage in SCORING_STAGES and (token or not network_disabled):
        raise ValueError(f"stage {stage!r} scores offline: no token and no network")
    if token and network_disabled:
        raise ValueError(f"stage {stage!r}: a token is only passed to a stage with network")
    _refuse_secret_names(env or {}, "env vars")
    client = client or docker_client()
    environment = {**(env or {}), IMAGE_DIGEST_ENV: image_digest(image, client)}
    if network_disabled:
        environment.update({"HF_HUB_OFFLINE": "1", "PINBENCH_OFFLINE": "1"})
    if token:
        environment["HF_TOKEN"] = token
    options: dict[str, Any] = {
        "command": list(argv), "environment": environment, "volumes": _volumes(mounts or {}),
        "device_requests": _device_requests(gpus), "working_dir": workdir, "user": user, "shm_size": shm_size,
        "labels": {"org.pinbench.stage": stage},
    }
    if network_disabled:
        options["network_mode"] = "none"
    # create, then start inside try/finally: a start that fails (no GPU runtime, say) leaves no container.
    container = client.containers.create(image, **{k: v for k, v in options.items() if v is not None})
    out = _LineLog(log or _print, secrets=[token] if token else [], prefix=f"[{stage}] ")
    try:
        try:
            container.start()
        except docker.errors.APIError as exc:
            hint = " (--gpus needs the NVIDIA Container Toolkit; use --gpus 0 on a machine without it)" if gpus else ""
            raise ContainerError(redact(f"{image}: container for stage {stage!r} did not start: "
                                        f"{' '.join(str(exc).split())}{hint}")) from None
        for chunk in container.logs(stream=True, follow=True):
            out.feed(chunk)
        out.close()
        return int(container.wait().get("StatusCode", 1))
    except KeyboardInterrupt:
        container.stop(timeout=10)
        raise
    finally:
        container.remove(force=True)
