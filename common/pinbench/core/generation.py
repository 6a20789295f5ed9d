"""Generation requests and the generator contract: what each rollout must be, and what may make it.

Why the benchmark's side writes the requests: where reproducibility breaks is the generation (seeds that must never
pass through a float, a prompt schedule, the pinned initial frame, a camera trajectory, GT context frames and
per-frame actions), and where the cost is. A ``Request`` states everything a generator needs and nothing it must
guess: one per rollout, typed, versioned, its ``id`` the sample it will be scored as, its files named with the
SHA-256 of their bytes (or, for a prepared image, of its pixels). Its ``digest`` keys the stored rollout together
with the generator's ``Signature``: a changed request or generator regenerates, the same ones reuse.

A generator is any object with ``capabilities``, ``signature()`` and ``generate(request, out)``, plugged in by
``pinbench run --generator`` (a Python factory, a registered name, or a command for any language:
``pinbench.ops.generation``). It declares what it can honour; a request it cannot is refused before the first
rollout is generated, in one line naming the request kind and what is missing. ``signature()`` must not need the
model loaded: a rerun that reuses every rollout never loads it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from stat import S_ISREG
from typing import Any, Protocol, runtime_checkable

from pinbench.core.files import (
    NAME_MAX,
    FileState,
    atomic_path,
    clipped,
    counted,
    iter_finite_jsonl,
    parse_finite_jsonl,
    read_data_file,
)
from pinbench.core.inputs import VIDEO_SUFFIXES, InputDigests, InputFileError
from pinbench.core.jsonfields import COUNT, JsonBlock, spec
from pinbench.core.provenance import printable, redactor

REQUEST_VERSION = 1
REQUESTS_FILE = "requests.jsonl"
# a rollout being made, ``.<stem>.partial<suffix>`` beside its place (``pinbench.ops.generation``): a run killed then
# leaves it, which ``pinbench check`` names
PARTIAL_ROLLOUT = re.compile(r"\..+\.partial(\.[^.]*)?")
# kind -> what it asks for (the docs have a page per kind, with a complete adapter)
KINDS = {
    "prompt-schedule": "a video from timed text prompts (one prompt: plain text to video)",
    "image-camera": "a video from an initial frame along a camera trajectory",
    "context-actions": "the continuation of a ground-truth clip under per-frame actions",
    "control-video": "a video from a control video (edges, blur, depth or segmentation) and a caption",
}
# conditioning roles a request may carry
ROLES = ("initial_frame", "trajectory", "context", "actions", "control")


class RequestError(ValueError):
    """A request or requests file is not usable: one line naming the file (and line) and what is wrong."""


@dataclass(frozen=True)
class Prompt:
    """One prompt of a schedule and the second of the rollout it starts at."""

    text: str
    start_seconds: float = 0.0


@dataclass(frozen=True)
class Conditioning:
    """A file a request conditions on. ``path`` is relative to the request's ``root`` (in a requests file: the
    file's folder, so a folder of requests travels whole to the machine that generates); ``sha256`` is of its bytes;
    ``frames`` is the ``[start, stop)`` range of a video the generator may read (MIND's context: GT frames before
    ``mark_time``, never after)."""

    role: str
    path: str
    sha256: str
    frames: tuple[int, int] | None = None


@dataclass(frozen=True)
class Request:
    """One rollout to generate, as the benchmark defines it (see the module docstring).

    ``output`` is where the rollout goes, relative to the run's rollouts folder: the layout the recipe scores.
    ``settings`` holds what is particular to the kind (a chunk layout, the alignment rule, sampling settings);
    ``seed`` is the exact decimal string (63-bit seeds do not survive a float)."""

    id: str
    kind: str
    recipe: str
    output: str
    frames: int
    fps: float
    width: int
    height: int
    seed: str | None = None
    prompts: tuple[Prompt, ...] = ()
    negative_prompt: str | None = None
    conditioning: tuple[Conditioning, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)
    root: Path | None = field(default=None, compare=False)   # where the conditioning paths start; not hashed

    def __post_init__(self) -> None:
        problem = _problem(self)
        if problem:
            raise RequestError(f"request {self.id!r}: {problem}")

    def to_json(self) -> dict[str, Any]:
        return {"version": REQUEST_VERSION, "id": self.id, "kind": self.kind, "recipe": self.recipe,
                "output": self.output, "frames": self.frames, "fps": self.fps, "width": self.width,
                "height": self.height, "seed": self.seed,
                "prompts": [{"text": p.text, "start_seconds": p.start_seconds} for p in self.prompts],
                "negative_prompt": self.negative_prompt,
                "conditioning": [{"role": c.role, "path": c.path, "sha256": c.sha256,
                                  "frames": list(c.frames) if c.frames else None} for c in self.conditioning],
                "settings": dict(self.settings)}

    def message(self) -> dict[str, Any]:
        """What a generator is handed: the request with the folder its files are in (``root``)."""
        return {**self.to_json(), "root": str(self.root) if self.root is not None else None}

    def path(self, role: str) -> Path | None:
        """The file of a conditioning role (under ``root``), or None when the request has none."""
        found = self.file(role)
        return None if found is None else (self.root or Path()) / found.path

    @classmethod
    def from_json(cls, data: Any, root: Path | None = None) -> Request:
        """The request a ``to_json`` (or ``message``) wrote, its files under ``root`` (or the message's own);
        RequestError saying what is wrong."""
        try:
            if not isinstance(data, dict) or data.get("version") != REQUEST_VERSION:
                raise RequestError(f"not a version-{REQUEST_VERSION} request")
            return cls(id=data["id"], kind=data["kind"], recipe=data["recipe"], output=data["output"],
                       frames=data["frames"], fps=data["fps"], width=data["width"], height=data["height"],
                       seed=data["seed"], prompts=tuple(Prompt(p["text"], p["start_seconds"]) for p in data["prompts"]),
                       negative_prompt=data["negative_prompt"],
                       conditioning=tuple(Conditioning(c["role"], c["path"], c["sha256"],
                                                       tuple(c["frames"]) if c["frames"] else None)
                                          for c in data["conditioning"]),
                       settings=data["settings"],
                       root=root if root is not None else Path(data["root"]) if data.get("root") else None)
        except (KeyError, TypeError, AttributeError) as exc:
            raise RequestError(f"malformed request ({type(exc).__name__}: {exc})") from None

    @property
    def digest(self) -> str:
        """SHA-256 of the canonical JSON: with the generator's signature, the key of its stored rollout."""
        return _digest(self.to_json())

    def file(self, role: str) -> Conditioning | None:
        return next((c for c in self.conditioning if c.role == role), None)


def staged(role: str, path: Path, root: Path, digests: InputDigests,
           frames: tuple[int, int] | None = None) -> Conditioning:
    """A conditioning file put under ``root/inputs/<sha256[:16]>/<name>``, so the folder of the requests holds every
    file they name and travels whole: a copy of its own (``_copy``), never a hard link, which is the dataset's file
    itself, so a generator that wrote into the file it was given changed the dataset's too. Made once and renamed
    into place; one there that is no longer those bytes (a generator wrote into it, a hard link an older run made)
    is staged again, its SHA-256 by ``digests`` (read again only when its ``FileState`` changed). One whose
    state after the copy is not the one its SHA-256 was read at is refused (InputFileError): the copy may hold
    other bytes than that SHA-256 names."""
    state, sha256 = digests.state_and_sha256(path)
    relative = PurePosixPath("inputs", sha256[:16], path.name)
    target = root / relative
    try:
        held = target.lstat()
    except FileNotFoundError:
        held = None
    if not (held is not None and S_ISREG(held.st_mode) and held.st_nlink == 1 and digests.sha256(target) == sha256):
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(target, suffix=target.suffix) as tmp:
            _copy(path, tmp)
            if not _still(path, state):
                raise InputFileError(path, "changed while it was staged (its SHA-256 read, then copied): a file "
                                           "being written; run again once it is written")
    return Conditioning(role, relative.as_posix(), sha256, frames)


def _still(path: Path, state: FileState) -> bool:
    """Whether the file at ``path`` is in ``state`` yet (``FileState``); False when it is gone."""
    try:
        return FileState.of(os.stat(path)) == state
    except OSError:
        return False


def _copy(source: Path, target: Path) -> None:
    """Write ``source``'s bytes over ``target`` by ``copy_file_range`` (in the kernel; copy_file_range(2): a file
    system may share the blocks, a reflink, until one is written), else by ``shutil.copyfile`` (a kernel or file
    system without it, two file systems on an older kernel)."""
    with contextlib.suppress(AttributeError, OSError), open(source, "rb") as src, open(target, "wb") as dst:
        left = os.fstat(src.fileno()).st_size
        while left > 0 and (done := os.copy_file_range(src.fileno(), dst.fileno(), left)) > 0:
            left -= done
        if left == 0:
            return
    shutil.copyfile(source, target)


def prune_inputs(root: Path, requests: Sequence[Request]) -> int:
    """Remove the files under ``root/inputs`` that none of ``requests`` names (an earlier, larger set's, written to
    the same folder, which travels whole), and the folders that held only them; how many files went. Symlinks and
    other entries count as files here (``staged`` writes regular files only)."""
    named = {root / file.path for request in requests for file in request.conditioning}
    inputs = root / "inputs"
    if not inputs.is_dir() or inputs.is_symlink():
        return 0
    stale = [Path(folder, name) for folder, _, files in os.walk(inputs) for name in files
             if Path(folder, name) not in named]
    for file in stale:
        file.unlink()
    for folder in sorted({file.parent for file in stale}, reverse=True):
        with contextlib.suppress(OSError):   # emptied: inputs/<digest>/ holds one file
            folder.rmdir()
    return len(stale)


def _problem(request: Request) -> str:
    """Why a request is not one (empty when it is): every field typed and in range, paths that stay inside."""
    for name in ("id", "recipe"):
        if not (isinstance(getattr(request, name), str) and getattr(request, name)):
            return f"{name} must be a non-empty string, got {getattr(request, name)!r}"
    if request.kind not in KINDS:
        return f"unknown kind {request.kind!r} (known: {', '.join(KINDS)})"
    for name in ("frames", "width", "height"):
        value = getattr(request, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            return f"{name} must be a whole number of 1 or more, got {value!r}"
    if not isinstance(request.fps, (int, float)) or isinstance(request.fps, bool) or not 0 < request.fps < 1e4:
        return f"fps must be a positive number, got {request.fps!r}"
    if request.seed is not None and not (isinstance(request.seed, str) and request.seed.isdigit()):
        return f"seed must be a decimal string, got {request.seed!r}"
    for path in (request.output, *(c.path for c in request.conditioning)):
        parts = PurePosixPath(path).parts if isinstance(path, str) else ()
        if not parts or PurePosixPath(path).is_absolute() or ".." in parts or "\\" in path:
            return f"path {path!r} must be relative, inside its folder"
        if "\0" in path:   # every file call on it raised "embedded null byte", naming no file
            return f"path {path!r} holds a NUL character"
        if (longest := max(len(p.encode("utf-8", "surrogateescape")) for p in parts)) > NAME_MAX:
            return (f"path {clipped(path, 60)!r}: a name of {longest} bytes in it, longer than a file name may be "
                    f"({NAME_MAX})")
    for c in request.conditioning:
        if c.role not in ROLES:
            return f"conditioning role {c.role!r} is not one of {', '.join(ROLES)}"
        if not (isinstance(c.sha256, str) and len(c.sha256) == 64):
            return f"conditioning {c.role}: sha256 must be 64 hex digits"
        if c.frames is not None and not (len(c.frames) == 2 and all(_whole(f) for f in c.frames)
                                         and 0 <= c.frames[0] < c.frames[1]):
            return f"conditioning {c.role}: frames must be [start, stop) with 0 <= start < stop, got {c.frames!r}"
    for prompt in request.prompts:
        if not isinstance(prompt.text, str):
            return f"a prompt's text must be a string, got {prompt.text!r}"
        start = prompt.start_seconds
        if not (isinstance(start, (int, float)) and not isinstance(start, bool) and 0 <= start < float("inf")):
            return f"a prompt's start_seconds must be a number of 0 or more, got {start!r}"
    if request.negative_prompt is not None and not isinstance(request.negative_prompt, str):
        return f"negative_prompt must be a string or null, got {request.negative_prompt!r}"
    if request.kind == "prompt-schedule" and not request.prompts:
        return "a prompt-schedule request needs a prompt"
    if not isinstance(request.settings, Mapping):
        return "settings must be a mapping"
    return ""


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                     allow_nan=False).encode()).hexdigest()


# ------------------------------------------------------------------------------------------- generators


@dataclass(frozen=True)
class Capabilities:
    """What a generator can honour: request kinds, a schedule of several prompts, the longest rollout it makes,
    and the conditioning roles it reads (every conditioning file of a request must be read, or it is refused)."""

    kinds: frozenset[str]
    prompt_schedule: bool = False
    max_frames: int | None = None
    conditioning: frozenset[str] = frozenset()

    def refusal(self, request: Request) -> str:
        """Why this generator cannot honour ``request`` ("" when it can)."""
        if request.kind not in self.kinds:
            return f"it does not generate {request.kind} requests (capability kinds: {', '.join(sorted(self.kinds))})"
        if len(request.prompts) > 1 and not self.prompt_schedule:
            return f"it cannot follow a {len(request.prompts)}-prompt schedule (capability prompt_schedule)"
        if self.max_frames is not None and request.frames > self.max_frames:
            return (f"it makes at most {self.max_frames} frames, the request asks {request.frames} "
                    "(capability max_frames)")
        missing = sorted({c.role for c in request.conditioning} - self.conditioning)
        if missing:
            return f"it cannot condition on {', '.join(missing)} (capability conditioning)"
        return ""

    def to_json(self) -> dict[str, Any]:
        return {"kinds": sorted(self.kinds), "prompt_schedule": self.prompt_schedule,
                "max_frames": self.max_frames, "conditioning": sorted(self.conditioning)}


@dataclass(frozen=True)
class Signature(JsonBlock, where="signature"):
    """What makes a generator's rollouts what they are: the model, its weights (a digest or pinned revision) and
    the sampler settings. Rollouts are reused only under the same signature."""

    model: str
    weights: str
    settings: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "weights": self.weights, "settings": dict(self.settings)}

    @property
    def digest(self) -> str:
        return _digest(self.to_json())


@dataclass(frozen=True, kw_only=True)
class Generated(JsonBlock, where="generation"):
    """What a scorecard says of its run's generation (``provenance.extra.generation``): which generator, under
    which signature (None: the rollouts of an earlier run that did not say), for which requests (their digest and
    count), each request's seed and how long each stored rollout took. A run that scored rollouts it was given has
    none."""

    generator: str
    signature: Signature | None = None
    requests: str
    n_requests: int = spec(COUNT)
    seeds: Mapping[str, str] = field(default_factory=dict)   # exact decimal strings, as requests hold them
    seconds: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, provenance: Mapping[str, Any]) -> Generated | None:
        """The generation a scorecard's provenance records under a signature; None when it records none (or one
        this version cannot read)."""
        extra = provenance.get("extra")
        made = extra.get("generation") if isinstance(extra, Mapping) else None
        try:
            generated = cls.from_json(made)
        except ValueError:
            return None
        return generated if generated.signature is not None else None

    def describe(self) -> str:
        signature = self.signature or Signature("?", "?")
        return f"{self.generator} ({signature.model}, weights {signature.weights})"


def generation_differences(made: Sequence[tuple[str, Generated | None]]) -> list[str]:
    """One line per way the runs' rollouts were made differently (``made``: each run's label and generation): a
    score difference between them may be the generation's, not the model's. [] when all were made alike. Redacted:
    a hand-edited reference's generator text (``reference.ran_differently``) may hold a token."""
    generated = [(label, g) for label, g in made if g is not None]
    if not generated:
        return []
    lines = []
    given = [label for label, g in made if g is None]
    if given:
        # not "made outside pinbench": a --fixture run's rollouts are the fixture's own, with no generation step
        lines.append(f"{', '.join(given)} scored rollouts made without a generation step (a folder given, or a "
                     f"fixture's own), {', '.join(label for label, _ in generated)} generated theirs: the requests "
                     "they answered may differ")
    if len({g.requests for _, g in generated}) > 1:
        lines.append("different requests (prompts, seeds, sizes or conditioning): " + "; ".join(
            f"{label} {g.requests[:12]}" for label, g in generated))
    if len({g.signature.digest for _, g in generated}) > 1:
        settings = {key for _, g in generated for key in g.signature.settings}
        changed = sorted(k for k in settings if len({json.dumps(g.signature.settings.get(k), sort_keys=True)
                                                     for _, g in generated}) > 1)
        lines.append("different generators: " + "; ".join(f"{label} {g.describe()}" for label, g in generated)
                     + (f"; settings that differ: {', '.join(_setting(k, generated) for k in changed)}"
                        if changed else ""))
    clean = redactor()
    return [clean(line) for line in lines]


def _setting(key: str, generated: Sequence[tuple[str, Generated]]) -> str:
    """One setting and each run's value of it (cut to 40 characters): which setting changed says little without."""
    def shown(value: Any) -> str:
        text = "none" if value is None else printable(value) if isinstance(value, str) else json.dumps(
            value, sort_keys=True)
        return text if len(text) <= 40 else f"{text[:37]}..."
    return f"{key} ({', '.join(f'{label} {shown(g.signature.settings.get(key))}' for label, g in generated)})"


@runtime_checkable
class Generator(Protocol):
    """The contract a generator meets, whatever plugs it in."""

    capabilities: Capabilities

    def signature(self) -> Signature: ...

    def generate(self, request: Request, out: Path) -> None: ...

    # Optional: ``generate_batch(pairs)`` makes many rollouts in one call (a model that is launched, not loaded:
    # cosmos-framework), each (request, out) as ``generate`` would; the run then calls it once per shard.


def refuse(capabilities: Capabilities, requests: Iterable[Request], generator: str) -> None:
    """RequestError (one line) for the first request kind the generator cannot honour, before anything runs."""
    for request in requests:
        why = capabilities.refusal(request)
        if why:
            raise RequestError(f"generator {generator} cannot honour {request.kind} requests (e.g. {request.id}): "
                               f"{why}")


# ---------------------------------------------------------------------------------------- requests files


def requests_text(requests: Sequence[Request]) -> str:
    """A requests file's text: JSONL, one request per line."""
    return "".join(json.dumps(r.to_json(), ensure_ascii=False, separators=(",", ":")) + "\n" for r in requests)


def read_requests(path: Path, recipe: str | None = None) -> list[Request]:
    """A requests file; RequestError naming the file and line of the first bad request or a repeated id, or the
    first request of another recipe than ``recipe`` (when given): mind's rollouts checked against remembench's
    requests passed as "2 of 2 rollouts are what their requests ask for"."""
    if path.exists() and not path.is_file():
        raise RequestError(f"{path}: not a regular file (a folder, FIFO or device)")
    try:
        requests = parse_finite_jsonl(read_data_file(path), path, lambda data: Request.from_json(data, path.parent),
                                      "request")
    except ValueError as exc:   # a FileError too: missing, a folder, not UTF-8
        raise RequestError(str(exc)) from None
    seen: set[str] = set()
    outputs: dict[str, str] = {}
    for request in requests:
        if request.id in seen:
            raise RequestError(f"{path}: request id {request.id!r} appears twice")
        seen.add(request.id)
        if recipe is not None and request.recipe != recipe:
            raise RequestError(f"{path}: request {request.id!r} is one of {request.recipe}'s requests, not {recipe}'s")
        # two requests answered by one file: each was checked, and scored, on the other's rollout
        if (other := outputs.setdefault(PurePosixPath(request.output).as_posix(), request.id)) != request.id:
            raise RequestError(f"{path}: requests {other!r} and {request.id!r} both ask for {request.output}")
    return requests


@dataclass(frozen=True)
class UnreadRequest:
    """A line of a requests file that ``read_each_request`` passed over: the request id it names, when that can be
    seen in it (a line cut after its id), and ``problem``, one line naming the file and line."""

    request_id: str | None
    problem: str


_NAMED_ID = re.compile(r'"id"\s*:\s*("(?:[^"\\]|\\.)*")')


def read_each_request(path: Path, recipe: str | None = None) -> tuple[list[Request], list[UnreadRequest]]:
    """``read_requests`` for a reader that shows what it can (``pinbench view``): each line read alone, and one that is
    cut, garbled, of another recipe or a repeated id passed over and said, so one bad line hides only its own request.
    Never for generation, resume or a check, which must refuse the whole file; RequestError when the file itself
    cannot be read (missing, a folder, not UTF-8)."""
    if path.exists() and not path.is_file():
        raise RequestError(f"{path}: not a regular file (a folder, FIFO or device)")
    try:
        text = read_data_file(path)
    except ValueError as exc:
        raise RequestError(str(exc)) from None
    requests: list[Request] = []
    unread: list[UnreadRequest] = []
    seen: set[str] = set()
    for before, line in enumerate(re.split(r"\r\n|\r|\n", text)):   # numbered as ``read_requests`` numbers them
        try:
            found = list(iter_finite_jsonl(line, path, lambda data: Request.from_json(data, path.parent), "request",
                                           lines_before=before))
        except ValueError as exc:
            named = _NAMED_ID.search(line)
            try:
                request_id = json.loads(named.group(1)) if named else None
            except ValueError:
                request_id = None
            unread.append(UnreadRequest(request_id, " ".join(str(exc).split())))
            continue
        if not found:   # a blank line
            continue
        request = found[0]
        if request.id in seen:
            unread.append(UnreadRequest(request.id, f"{path}:{before + 1}: request id {request.id!r} appears again"))
        elif recipe is not None and request.recipe != recipe:
            unread.append(UnreadRequest(request.id, f"{path}:{before + 1}: request {request.id!r} is one of "
                                                    f"{request.recipe}'s requests, not {recipe}'s"))
        else:
            seen.add(request.id)
            requests.append(request)
    return requests, unread


def refuse_other_recipes(folder: Path, recipe: str) -> None:
    """RequestError when ``folder`` holds requests another recipe wrote: writing ``recipe``'s there replaced them and
    their inputs/ with only "removed N file(s)" to say so. A requests file that does not read is replaced as before."""
    try:
        earlier = read_requests(folder / REQUESTS_FILE) if (folder / REQUESTS_FILE).is_file() else []
    except RequestError:
        return
    if others := sorted({r.recipe for r in earlier} - {recipe}):
        raise RequestError(f"{folder}: a requests folder of {', '.join(others)}; name a new folder for {recipe}'s "
                           "requests, or remove this one")


def requests_digest(requests: Sequence[Request]) -> str:
    """One digest of a set of requests (order included): two runs with the same one asked for the same rollouts."""
    return _digest([r.digest for r in requests])


UNASKED_SHOWN = 10   # files no request names, listed by `rollouts check` and a `folder` run; the rest counted


def unasked_lines(folder: Path, asked: Sequence[Request], limit: int | None = None) -> list[str]:
    """Files under ``folder`` named like a rollout that no request names, a line each (the first ``UNASKED_SHOWN``,
    then how many more): never scored (a misnamed rollout, a scene of another split), so ``pinbench rollouts
    check`` and a ``folder`` generator's run say so, where the run would pass over them. Under ``--limit`` the
    line says so: the file may be a good rollout of a request the limit cut. Hidden folders (``.pinbench-*``
    bookkeeping, ``.cache``) are not walked: no request's output is there, and they can hold thousands of files."""
    wanted = {folder / r.output for r in asked}
    unasked = []
    for top, folders, files in os.walk(folder):
        folders[:] = [name for name in folders if not name.startswith(".")]
        unasked += [path for name in files if not name.startswith(".")
                    and (path := Path(top) / name).suffix.lower() in VIDEO_SUFFIXES and path not in wanted]
    unasked.sort()
    more = len(unasked) - UNASKED_SHOWN
    nobody = "no request names it" if limit is None else f"no request of this --limit {limit} run names it"
    return ([f"{path}: {nobody}, so it is not scored" for path in unasked[:UNASKED_SHOWN]]
            + ([f"... and {counted(more, 'more file')} {nobody.removesuffix(' it')}"] if more > 0 else []))
