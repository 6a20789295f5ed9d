"""The ``--runtime docker`` path: build a recipe image and run one stage in a container (docker SDK).

Why: the same pinned image must run fetch, generation and scoring, and each stage must get only what
it needs. Scoring runs with ``--network none`` (everything was fetched before) and never sees a token;
a token reaches only a stage that is given one explicitly and has network. The image's digest (and, for
images built by ``pinbench build``, which base it was built on) is passed in as environment variables so
the scorecard's provenance records which image produced it. Container and build logs are streamed line
by line through ``pinbench.core.provenance.redact``, with container paths of mounts shown as host paths.

Builds go through the Engine API's classic builder (the docker SDK has no BuildKit session), so
Dockerfiles built here must not need BuildKit-only syntax (RUN --mount, heredocs, ADD --checksum);
``tools/dockerlint.py`` refuses them. The build context is what ``context_files`` lists: the docker
SDK's own ``.dockerignore`` matcher, which the lint checks COPY sources against, so the two agree.

The SDK is imported by the functions that use it, not with this module: ``pinbench status`` and ``submit`` import
this module (through ``docker_runtime``) and never call the engine, and importing the SDK took 94 ms of status's
144 ms of imports.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pinbench.core.provenance import ANSI, BASE_IMAGE_ENV, IMAGE_DIGEST_ENV, base_image_record, is_secret_name, redact

SCORING_STAGES = frozenset({"score", "scoring"})
BASE_IMAGE_LABEL = "org.pinbench.base-image"
RUN_DIR_LABEL = "org.pinbench.run-dir"  # the host run directory a stage's container writes

Log = Callable[[str], None]


class ContainerError(RuntimeError):
    """The engine is unreachable, an image is missing, a build failed, or a mount does not exist."""


def print_line(line: str) -> None:
    print(line, flush=True)


class _LineLog:
    """Turns a stream of byte/str chunks into redacted whole lines for ``log``.

    ``paths`` maps container paths (mount targets) to host paths, so a line such as
    ``scorecard: /runs/out/scorecard.json`` reaches the user as the file they can open.
    """

    def __init__(self, log: Log, secrets: Iterable[str] = (), prefix: str = "",
                 paths: Mapping[str, str] | None = None) -> None:
        self.log, self.prefix, self.buffer = log, prefix, ""
        self.secrets = [s for s in secrets if s]
        targets = sorted((paths or {}), key=len, reverse=True)
        self.paths = dict(paths or {})
        self.path_re = re.compile(r"(?<![\w./-])(" + "|".join(map(re.escape, targets)) + r")(?=/|[^\w.-]|$)") \
            if targets else None

    def _emit(self, line: str) -> None:
        line = ANSI.sub("", line).rstrip("\r")
        if self.path_re is not None:
            line = self.path_re.sub(lambda m: self.paths[m.group(1)], line)
        self.log(self.prefix + redact(line, self.secrets))

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
    import docker
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        raise ContainerError(redact(f"cannot reach the Docker engine ({exc}); is dockerd running and "
                                    "DOCKER_HOST set?")) from None
    return client


def _refuse_secret_names(names: Iterable[str], what: str) -> None:
    secret = sorted(n for n in names if is_secret_name(n))
    if secret:
        raise ValueError(f"{what} {', '.join(secret)} look like secrets; a token is passed only as "
                         "run_in_container(token=...) to a stage with network, never baked or set as env")


# ------------------------------------------------------------------------------------------- build


def dockerignore_patterns(context: Path | str) -> list[str]:
    """``<context>/.dockerignore`` read as the docker SDK reads it: stripped lines, no blanks, no comments.

    Only this file counts: the classic builder never reads ``<Dockerfile>.dockerignore``.
    """
    path = Path(context) / ".dockerignore"
    if not path.is_file():
        return []
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def context_files(context: Path | str, dockerfile: str = "Dockerfile") -> set[str]:
    """Paths (files and directories, relative, ``/``-separated) that a build of ``context`` sends to the
    daemon: the docker SDK's own ``.dockerignore`` matcher. ``build_image`` sends exactly these."""
    from docker.utils.build import exclude_paths
    return set(exclude_paths(str(Path(context).resolve()), dockerignore_patterns(context), dockerfile=dockerfile))


def build_image(context_dir: Path | str, tag: str, *, dockerfile: str = "Dockerfile",
                buildargs: Mapping[str, str] | None = None, labels: Mapping[str, str] | None = None,
                client: Any = None, log: Log | None = None) -> str:
    """Build ``tag`` from ``context_dir`` and return the image id (``sha256:...``), streaming the log.

    Build args named like secrets are refused: they would stay in the image history.
    """
    import docker
    from docker.utils.build import create_archive
    context = Path(context_dir)
    if not (context / dockerfile).is_file():
        raise ContainerError(f"{context / dockerfile}: Dockerfile not found")
    _refuse_secret_names(buildargs or {}, "build args")
    client = client or docker_client()
    out = _LineLog(log or print_line)
    image_id = None
    archive = create_archive(str(context.resolve()), files=sorted(context_files(context, dockerfile)))
    try:
        stream = client.api.build(fileobj=archive, custom_context=True, tag=tag, dockerfile=dockerfile,
                                  buildargs=dict(buildargs or {}), labels=dict(labels or {}), rm=True,
                                  forcerm=True, decode=True)
        for chunk in stream:
            if "stream" in chunk:
                out.feed(chunk["stream"])
            if "error" in chunk:
                out.close()
                raise ContainerError(redact(f"{tag}: build failed: {' '.join(chunk['error'].split())}"))
            image_id = (chunk.get("aux") or {}).get("ID", image_id)
    except docker.errors.APIError as exc:
        raise ContainerError(redact(f"{tag}: build failed: {' '.join(str(exc).split())}")) from None
    finally:
        archive.close()
    out.close()
    return image_id or client.images.get(tag).id


# ------------------------------------------------------------------------------------------ images


@dataclass(frozen=True)
class ImageConfig:
    """What the runtime needs to know of a local image: digest, its own ENV, USER, labels and CMD."""

    digest: str
    env: dict[str, str] = field(default_factory=dict)
    user: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    cmd: list[str] = field(default_factory=list)


def image_config(image: str, client: Any) -> ImageConfig:
    """The image's registry digest (RepoDigests[0]) if it was pulled or pushed, else its local id;
    plus the ENV, USER, labels and CMD of its config. ContainerError when it is not built."""
    import docker
    try:
        found = client.images.get(image)
    except docker.errors.ImageNotFound:
        raise ContainerError(f"{image}: image not found locally; build it first (make build-<recipe>)") from None
    attrs = found.attrs or {}
    config = attrs.get("Config") or {}
    digests = attrs.get("RepoDigests") or []
    env = dict(item.partition("=")[::2] for item in config.get("Env") or [])
    return ImageConfig(digest=digests[0] if digests else found.id, env=env, user=config.get("User") or "",
                       labels=dict(config.get("Labels") or {}), cmd=list(config.get("Cmd") or []))


def local_digest(image: str, client: Any) -> str:
    """The digest ``image`` resolves to on this engine: the registry digest it was pulled by
    (``repo@sha256:...``; the one the reference names, if it names one), else the local image id
    (``sha256:...``: an image that was imported or built here and never pushed)."""
    import docker
    try:
        found = client.images.get(image)
    except docker.errors.ImageNotFound:
        raise ContainerError(f"{image}: image not found locally") from None
    digests = (found.attrs or {}).get("RepoDigests") or []
    named = image.rpartition("@")[2] if "@" in image else None
    return next((d for d in digests if named and d.endswith("@" + named)), digests[0] if digests else found.id)


# -------------------------------------------------------------------------------------------- run


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


def _device_requests(gpus: int | str | Sequence[str]) -> list[Any] | None:
    """A count (``-1`` = all), ``"all"``, or a list of device ids / UUIDs as one NVIDIA device request."""
    import docker
    if isinstance(gpus, (list, tuple)):
        if not gpus or not all(isinstance(d, str) and re.fullmatch(r"[A-Za-z0-9/-]+", d) for d in gpus):
            raise ValueError(f"gpus={gpus!r}: expected device indices or UUIDs")
        return [docker.types.DeviceRequest(device_ids=list(gpus), capabilities=[["gpu"]])]
    if gpus == "all":
        count = -1
    elif isinstance(gpus, int) and not isinstance(gpus, bool) and gpus >= 0:
        count = gpus
    else:
        raise ValueError(f"gpus={gpus!r}: expected a count >= 0, 'all' or a list of device ids")
    return [docker.types.DeviceRequest(count=count, capabilities=[["gpu"]])] if count else None


def run_in_container(image: str, argv: Sequence[str], *, stage: str,
                     mounts: Mapping[Path | str, str] | None = None, env: Mapping[str, str] | None = None,
                     gpus: int | str | Sequence[str] = 0, network_disabled: bool = True,
                     workdir: str | None = None, user: str | None = None, token: str | None = None,
                     shm_size: str | None = None, run_dir: Path | None = None, client: Any = None,
                     log: Log | None = None) -> int:
    """Run ``argv`` in ``image`` for one pipeline stage; stream its redacted log; return its exit code.

    ``argv[0]`` becomes the container's entrypoint and the rest its command, so the image's own
    ENTRYPOINT (images carry none; dockerlint checks) can never prefix it. The network is off unless
    ``network_disabled=False``; scoring stages refuse network and tokens. ``token`` (for fetch/generation
    of gated weights) is passed as HF_TOKEN only to a networked stage; ``env`` may not carry secrets
    itself. ``mounts`` maps host paths to "/path" or "/path:ro". ``gpus`` is a count, "all", or the
    host's device ids (the container sees them as 0..n-1); without GPUs NVIDIA_VISIBLE_DEVICES=void,
    so an image ENV of "all" under a host whose default runtime is nvidia exposes nothing. ``run_dir``: the
    host run directory the container writes, as a label (``running_in``), so that a container left running by a
    killed ``pinbench`` is found before another one is started there.
    """
    import docker
    if not argv:
        raise ValueError("argv is empty")
    if stage in SCORING_STAGES and (token or not network_disabled):
        raise ValueError(f"stage {stage!r} scores offline: no token and no network")
    if token and network_disabled:
        raise ValueError(f"stage {stage!r}: a token is only passed to a stage with network")
    _refuse_secret_names(env or {}, "env vars")
    client = client or docker_client()
    config = image_config(image, client)
    environment = {**(env or {}), IMAGE_DIGEST_ENV: config.digest}
    if BASE_IMAGE_LABEL in config.labels:
        environment[BASE_IMAGE_ENV] = config.labels[BASE_IMAGE_LABEL]
    if network_disabled:
        environment.update({"HF_HUB_OFFLINE": "1", "PINBENCH_OFFLINE": "1"})
    if token:
        environment["HF_TOKEN"] = token
    devices = _device_requests(gpus)
    if devices is None:
        environment["NVIDIA_VISIBLE_DEVICES"] = "void"
    volumes = _volumes(mounts or {})
    options: dict[str, Any] = {
        "entrypoint": [argv[0]], "command": list(argv[1:]), "environment": environment, "volumes": volumes,
        "device_requests": devices, "working_dir": workdir, "user": user, "shm_size": shm_size,
        "labels": {"org.pinbench.stage": stage, **({RUN_DIR_LABEL: str(run_dir)} if run_dir is not None else {})},
    }
    if network_disabled:
        options["network_mode"] = "none"
    # create, then start inside try/finally: a start that fails (no GPU runtime, say) leaves no container.
    container = client.containers.create(image, **{k: v for k, v in options.items() if v is not None})
    out = _LineLog(log or print_line, secrets=[token] if token else [], prefix=f"[{stage}] ",
                   paths={v["bind"]: host for host, v in volumes.items()})
    try:
        try:
            container.start()
        except docker.errors.APIError as exc:
            hint = " (--gpus needs the NVIDIA Container Toolkit; use --gpus 0 on a machine without it)" \
                if devices else ""
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
        _remove(container, log or print_line)


def running_in(run_dir: Path, client: Any) -> list[Any]:
    """The containers still running that ``run_in_container`` started for ``run_dir``. SIGKILL (or a lost terminal)
    ends ``pinbench`` without removing its container, which runs on and keeps writing the run directory, while the
    run-directory lock, held by the dead host process, looks stale to the next run."""
    import docker
    try:
        return list(client.containers.list(filters={"label": f"{RUN_DIR_LABEL}={run_dir}", "status": "running"}))
    except docker.errors.DockerException as exc:
        raise ContainerError(redact(f"cannot list the running containers: {' '.join(str(exc).split())}")) from None


def _remove(container: Any, log: Log) -> None:
    """Remove a finished container; a failure here is reported, never raised over the stage's own error."""
    import docker
    try:
        container.remove(force=True)
    except docker.errors.DockerException as exc:
        log(redact(f"warning: could not remove container {getattr(container, 'id', '?')}: "
                   f"{' '.join(str(exc).split())}"))


def base_image_label(*, used: str, pinned: str, digest: str,
                     others: Mapping[str, Mapping[str, str]] | None = None) -> str:
    """The ``org.pinbench.base-image`` label: which base an image was built on, the digest it resolved to here, and
    whether it is the pinned one (``pinbench.core.provenance.base_image_record``)."""
    return json.dumps(base_image_record(used=used, pinned=pinned, digest=digest, others=others), sort_keys=True)
