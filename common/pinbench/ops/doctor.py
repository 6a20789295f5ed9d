"""``pinbench doctor <recipe>``: checks that take seconds, so that hours of GPU time never start on a
machine or an input that cannot finish them. ``pinbench run`` calls it first.

It checks, from what can be known without loading a model: the pins (complete, or resolvable here), every
pinned file this run needs in the cache with its hash, this machine's resolved pins, the images of a docker
run and their digests (when a Docker engine is reachable), visible GPUs and their memory against the recipe's
declared need, free disk against its estimate, RAM, a token where a gated repo must still be downloaded, and the
user's inputs (every expected video exists and decodes). Each problem is one line; any problem exits 2.

What a recipe needs is data in its recipe.yaml (``resources:``); which pins and inputs a given run needs
is the recipe's ``doctor:`` function, which returns ``pinbench.core.findings.Finding`` lines (built with the helpers
there and here). The pins a run reads are the subjects of its findings (``huggingface/<name>``, ``urls/<name>``):
a null pin that no finding names is not read by this run, so it never stops it (a score-only run needs no
model revision).
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import subprocess
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pinbench.core import processes
from pinbench.core.files import (
    FileState,
    cache_root,
    counted,
    counted_of,
    read_json_cache,
    shown_name,
    write_json_cache,
)
from pinbench.core.findings import Finding, ok, problem
from pinbench.core.inputs import PAST_SUFFIX, SPACED_SUFFIX
from pinbench.ops.network import fetch_command, fetching_as

if TYPE_CHECKING:
    from pinbench.core.config import RunConfig
    from pinbench.core.pins import HFPin, Pins, URLPin
    from pinbench.core.recipe import Recipe
    from pinbench.media.video import VideoInfo

EXIT_PROBLEMS = 2
GB = 1e9
_NVIDIA_SMI_TIMEOUT_S = 10
_VIDEOS_SHOWN = 3
# how the doctor counts unusable videos, by what each is (``Unusable.kind``; "decode": a file that does not decode)
_UNUSABLE_WORDS = {"decode": ("does not decode", "do not decode"),
                   "dangling link": ("is a dangling link", "are dangling links"),
                   "symlink loop": ("is a symlink loop", "are symlink loops"),
                   "unreadable": ("cannot be read", "cannot be read"),
                   "vanished": ("vanished while listed", "vanished while listed"),
                   "folder": ("is a folder", "are folders"),
                   "special file": ("is no regular file", "are no regular files"),
                   PAST_SUFFIX: ("has a name that runs past its extension", "have names that run past their extension"),
                   SPACED_SUFFIX: ("has a space inside its extension", "have spaces inside their extensions"),
                   "bad name": ("has a name that gives no sample id of its own",
                                "have names that give no sample id of their own"),
                   "too short": ("is too short to score", "are too short to score"),
                   "misnamed": ("has a container its extension does not name",
                                "have containers their extensions do not name")}
MISSING, UNUSABLE = ("is missing", "are missing"), ("is unusable", "are unusable")
WAY_ON_BAD_INPUT = ("fix or replace them, or start anyway with `pinbench run ... --skip-doctor`: the run scores the "
                    "rest and counts each of them as a failed sample (a partial run, exit 2)")


# -------------------------------------------------------------------------------------------- pins


def pin_findings(recipe: Recipe, *, offline: bool, reads: Collection[str] | None = None
                 ) -> tuple[Pins | None, list[Finding]]:
    """pins.yaml and this machine's resolved pins valid, every null that this run reads resolved here or
    resolvable (online).

    ``reads``: the labels (``huggingface/<name>``, ``urls/<name>``) of the pins this run reads; None: all.
    """
    from pinbench.core.pins import PinsError, load_pins
    from pinbench.ops.machine_pins import (
        MachinePinsError,
        apply_machine_pins,
        key_label,
        key_pin,
        machine_pins_for,
        null_keys,
        stale_keys,
    )

    if not recipe.pins_path.is_file():
        return None, []
    try:
        pins = load_pins(recipe.pins_path)
        machine = machine_pins_for(recipe)
    except (PinsError, MachinePinsError) as exc:
        return None, [problem("pins", str(exc))]
    findings = []
    nulls = list(null_keys(pins))
    unread = [key_label(k) for k in nulls if reads is not None and key_pin(k) not in reads]
    nulls = [k for k in nulls if reads is None or key_pin(k) in reads]
    unresolved = [key_label(k) for k in nulls if k not in machine.entries]
    resolved = [key_label(k) for k in nulls if k in machine.entries]
    if unresolved and offline:
        from pinbench.ops.network import ways_on

        findings.append(problem("pins", f"{', '.join(unresolved)} null in {recipe.pins_path} and not resolved on "
                                        f"this machine (`{fetch_command(recipe.name)}` resolves them); next: "
                                        f"{ways_on(recipe.name, [key_pin(k) for k in nulls])}"))
    elif unresolved:
        findings.append(ok("pins", f"{', '.join(unresolved)} null; `{fetch_command(recipe.name)}` resolves them "
                                   f"once into {machine.path}"))
    if resolved:
        findings.append(ok("pins", f"{', '.join(resolved)} resolved at run time ({machine.source}), "
                                   "not the reference's"))
    stale = stale_keys(pins, machine)
    if stale:
        findings.append(ok("pins", f"resolved pins of this machine no longer used (pinned in pins.yaml since): "
                                   f"{', '.join(key_label(k) for k in stale)}"))
    if unread:
        findings.append(ok("pins", f"{', '.join(unread)} null, not read from the cache by this run"))
    if not unresolved and not resolved:
        findings.append(ok("pins", f"{recipe.pins_path.name}: every input {'this run reads ' if unread else ''}"
                                   "pinned"))
    return apply_machine_pins(pins, machine), findings


def pins_read(findings: Iterable[Finding]) -> set[str]:
    """The pins named by a recipe doctor's findings (``huggingface/<name>``, ``urls/<name>``): those the run reads."""
    return {f.subject for f in findings if f.subject.startswith(("huggingface/", "urls/"))}


def url_finding(name: str, pin: URLPin) -> Finding:
    """A URL pin in the cache, its size and hash checked (a few seconds for a GB-sized file)."""
    from pinbench.ops.downloads import NotFetchedError, PinMismatchError, locate

    subject = f"urls/{name}"
    try:
        path = locate(pin)
    except NotFetchedError as exc:
        return problem("cache", str(exc), subject)
    except PinMismatchError as exc:
        return problem("cache", f"{exc}; delete it and run `{fetch_command(pin.recipe)}`", subject)
    if pin.sha256:
        return ok("cache", f"{name}: {path.name} sha256 {pin.sha256[:12]}... verified", subject)
    if pin.verifiable:
        return ok("cache", f"{name}: {path.name} matches its partial pin; full sha256 not recorded yet", subject)
    return problem("cache", f"{name}: {path} has no content pin; run `{fetch_command(pin.recipe)}` to record one",
                   subject)


def hf_finding(name: str, pin: HFPin) -> Finding:
    """An HF pin's snapshot in the cache with every pinned file (hashes checked where pinned)."""
    from pinbench.ops.downloads import NotFetchedError, PinMismatchError, UnresolvedPinError, locate

    subject = f"huggingface/{name}"
    try:
        root = locate(pin)
    except (UnresolvedPinError, NotFetchedError, PinMismatchError) as exc:
        return problem("cache", str(exc), subject)
    hashed = sum(1 for v in pin.sha256.values() if v)
    verified = f", {counted(hashed, 'file')} sha256 verified" if hashed else ""
    return ok("cache", f"{name}: {pin.label} in {root}{verified}", subject)


def pins_in_cache(pins: Pins, names: Iterable[str] | None = None) -> list[Finding]:
    """Findings for the named pins (``huggingface/<name>``, ``urls/<name>``; default: all of them)."""
    wanted = list(names) if names is not None else (
        [f"huggingface/{n}" for n in pins.huggingface] + [f"urls/{n}" for n in pins.urls])
    findings = []
    for label in wanted:
        section, name = label.split("/", 1)
        findings.append(url_finding(name, pins.urls[name]) if section == "urls"
                        else hf_finding(name, pins.huggingface[name]))
    return findings


# ----------------------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Unusable:
    """An expected video that is no file to decode, or one that decodes but that its recipe cannot score: what it
    is (``pinbench.core.inputs.ENTRY_KINDS``: a dangling link, a folder, a name past its suffix, a bad name; or "too
    short", "misnamed") and why, one line. The doctor counts it by that, apart from the files that do not decode: a
    user told "3 videos do not decode" looked for broken files where there were links and names to fix."""

    kind: str
    reason: str


def video_findings(expected: Mapping[str, Path | None], where: Path | str, what: str = "videos", *, decoder: str,
                   known: Mapping[Path, Unusable] | None = None,
                   check: Callable[[VideoInfo], Unusable | None] | None = None) -> list[Finding]:
    """Every expected video exists and decodes its first frame (VBench's integrity check, in seconds) with
    ``decoder``, the backend the run reads them with: checked with pyav, a file decord refuses passed and then failed.

    ``expected`` maps sample id -> the file found for it (None: missing). Zero found is a problem on its
    own line ("0 of 600 rollouts found under DIR"); otherwise missing and unusable ones are counted (the unusable
    by what they are: a decode error, what is no file to decode, ``known`` ones the recipe found unusable without
    opening them, and those its ``check`` of the container's facts refuses) and the first few named by their file
    under ``where``: each would be a failed sample, and a run that cannot be complete should not start. The first
    frames go through the doctor's cache (``DecodedFiles``) with or without a ``check``: a recipe's check had
    replaced it, and each doctor decoded every first frame again.
    """
    present = {sid: path for sid, path in expected.items() if path is not None}
    missing = sorted(sid for sid, path in expected.items() if path is None)
    if not present:
        return [problem("inputs", f"0 of {len(expected)} {what} found under {where}")]
    from pinbench.media.video import DecoderUnavailable, require_backend

    try:
        require_backend(decoder)
    except DecoderUnavailable as exc:
        return [problem("inputs", str(exc))]
    ordered = sorted(present.items())
    decoded = DecodedFiles(_first_frames_cache(decoder), decoder)

    def unusable(path: Path) -> str | Unusable | None:
        if (found := _entry_unusable(path) or (known or {}).get(path)) is not None:
            return found
        info = decoded.first_frame(path)
        return info if isinstance(info, str) else check(info) if check is not None else None

    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:  # the decoders release the GIL
        errors = list(pool.map(unusable, (path for _, path in ordered)))
    decoded.save()
    unusable = [(sid, error if isinstance(error, Unusable) else Unusable("decode", error))
                for (sid, _), error in zip(ordered, errors, strict=True) if error]
    broken = [f"{_under(present[sid], where)} ({found.reason})" for sid, found in unusable]
    one = what.removesuffix("s")   # the callers' plurals: videos, rollouts, depth videos
    findings = []
    if missing:
        shown = ", ".join(missing[:_VIDEOS_SHOWN]) + (", ..." if len(missing) > _VIDEOS_SHOWN else "")
        findings.append(problem("inputs", f"{counted_of(len(missing), len(expected), one, MISSING, what)} under "
                                          f"{where}: {shown}; {WAY_ON_BAD_INPUT}"))
    if broken:
        shown = "; ".join(broken[:_VIDEOS_SHOWN]) + ("; ..." if len(broken) > _VIDEOS_SHOWN else "")
        findings.append(problem("inputs", f"{counted_of(len(broken), len(present), one, UNUSABLE, what)} under "
                                          f"{where} ({_count_kinds(found.kind for _, found in unusable)}): {shown}; "
                                          f"{WAY_ON_BAD_INPUT}"))
    if not findings:
        findings.append(ok("inputs", f"{len(present)} of {len(expected)} {what} found under {where}, all decode "
                                      f"with {decoder}"))
    return findings


def _first_frames_cache(decoder: str) -> Path:
    """One cache per decoder (a file one decodes, another may refuse); pyav's keeps the name it had before."""
    return cache_root() / ("first-frames.json" if decoder == "pyav" else f"first-frames-{decoder}.json")


def _under(path: Path, where: Path | str) -> str:
    """An unusable video by its file, relative to the folder the line names: by sample id alone, a user looked for
    a file 'vid3' (or, in MIND, '1st_data.mem_test.scene-a') that the run's own failure line calls 'DIR/vid3.mp4'.
    Escaped (``shown_name``): a newline in a name broke the problem's one line in two."""
    try:
        return shown_name(str(Path(path).relative_to(where)))
    except ValueError:
        return shown_name(str(path))


def _entry_unusable(path: Path) -> Unusable | None:
    """What a path is when it is no file to decode (a dangling link, a folder), or None."""
    from pinbench.core.inputs import entry_problem

    reason, kind = entry_problem(path)
    return Unusable(kind, reason) if kind is not None and reason is not None else None


def _count_kinds(kinds: Iterable[str]) -> str:
    """``2 do not decode, 1 is a dangling link``: how many of each kind, the most common first."""
    words = sorted(Counter(kinds).items(), key=lambda item: (-item[1], list(_UNUSABLE_WORDS).index(item[0])))
    return ", ".join(f"{n} {_UNUSABLE_WORDS[kind][n > 1]}" for kind, n in words)


@dataclass(frozen=True)
class _Decoded:
    """A file seen decoding: its state then, and the container's facts read for that decode (``VideoInfo`` less
    its path), which a recipe's check of a cached file needs without opening it again."""

    state: FileState
    facts: tuple[Any, ...]


class DecodedFiles:
    """Files whose first frame decoded with ``decoder``, with their container's facts, by absolute path and FileState
    (``<cache>/first-frames.json`` for pyav).

    A rerun's doctor would decode the same 200 first frames again (0.4 s of a 1.4 s rerun); a file that still has the
    state it had when it decoded (``FileState``: size, mtime, inode, ctime) is taken as decoding, with the facts read
    then. Only successes are kept: a broken file is tried again each time. A cache that cannot be read or written is
    only slower.
    """

    def __init__(self, path: Path, decoder: str) -> None:
        self.path, self.decoder = path, decoder
        self.decoded = 0   # first frames this process decoded
        self._known = _load_decoded(path)
        self._new: dict[str, _Decoded] = {}
        self._lock = threading.Lock()   # first_frame() runs in the doctor's decode threads

    def first_frame(self, path: Path) -> VideoInfo | str:
        """``first_frame``, skipped for a file seen decoding in this very state (its facts as read then)."""
        from pinbench.media.video import VideoInfo

        try:
            seen = FileState.of(os.stat(path))
        except OSError:
            return first_frame(path, self.decoder)
        where = os.path.abspath(path)
        if (known := self._known.get(where)) is not None and known.state == seen:
            return VideoInfo(Path(path), *known.facts)
        found = first_frame(path, self.decoder)
        with self._lock:
            self.decoded += 1
            if not isinstance(found, str):
                self._new[where] = _Decoded(seen, astuple(found)[1:])
        return found

    def save(self) -> None:
        if not self._new:
            return
        merged = {**_load_decoded(self.path), **self._new}
        files = {where: {"state": list(astuple(decoded.state)), "facts": list(decoded.facts)}
                 for where, decoded in merged.items()}
        with contextlib.suppress(OSError):
            write_json_cache(self.path, _DECODED_FORMAT, files)
        self._new = {}


_DECODED_FORMAT = 3   # 1: a FileState without ctime_ns; 2: a FileState without the container's facts


def _load_decoded(path: Path) -> dict[str, _Decoded]:
    return read_json_cache(path, _DECODED_FORMAT, _decoded_entries)


# the types of ``VideoInfo``'s facts after its path (n_frames, fps, width, height, codec, duration_s, container)
_FACT_TYPES = (int, (int, float), int, int, str, (int, float), str)


def _decoded_entries(files: Mapping[str, Any]) -> dict[str, _Decoded]:
    return {k: _Decoded(FileState(*v["state"]), tuple(v["facts"])) for k, v in files.items()
            if isinstance(v, dict) and isinstance(v.get("state"), list) and len(v["state"]) == len(fields(FileState))
            and all(isinstance(n, int) for n in v["state"]) and _plausible(v.get("facts"), v["state"][0])}


def _plausible(facts: Any, size: int) -> bool:
    """Whether ``facts`` are what a decode of a file of ``size`` bytes could have read: no more frames than bytes, a
    finite positive rate and size, a finite duration. Why: a recipe takes them as read (dynamic-degree splits
    n_frames into clips), and 10**30 frames in a cache changed by hand hung its doctor; such an entry is decoded
    again."""
    if not (isinstance(facts, list) and len(facts) == len(_FACT_TYPES)
            and all(isinstance(f, t) and not isinstance(f, bool) for f, t in zip(facts, _FACT_TYPES, strict=True))):
        return False
    n_frames, fps, width, height, _, duration_s, _ = facts
    return (0 < n_frames <= size and math.isfinite(fps) and fps > 0 and width > 0 and height > 0
            and math.isfinite(duration_s) and duration_s >= 0)


def first_frame(path: Path, decoder: str) -> VideoInfo | str:
    """The container's facts when it is sound and its first frame decodes with ``decoder`` (one open: a recipe's
    doctor that also needs its frame count read the container twice, 35-40 % of a doctor of 1,000 small videos); else
    the one-line reason."""
    from pinbench.media.video import VideoError, read_video

    try:
        return read_video(path, [0], backend=decoder).info
    except VideoError as exc:
        return exc.reason if hasattr(exc, "reason") else str(exc)


# ---------------------------------------------------------------------------------------- network


def hosts_to_fetch(pins: Pins, subjects: Sequence[str]) -> dict[str, list[str]]:
    """The URL a probe asks for each server the pins ``subjects`` (``urls/<name>``, ``huggingface/<name>``) are
    downloaded from, with the subjects it serves."""
    import urllib.parse

    from huggingface_hub import constants

    hosts: dict[str, list[str]] = {}
    for subject in subjects:
        section, _, name = subject.partition("/")
        if section == "urls" and name in pins.urls:
            parts = urllib.parse.urlsplit(pins.urls[name].url)
            if parts.scheme in ("http", "https"):
                hosts.setdefault(f"{parts.scheme}://{parts.netloc}/", []).append(subject)
        elif section == "huggingface" and name in pins.huggingface:
            hosts.setdefault(constants.ENDPOINT.rstrip("/") + "/", []).append(subject)
    return hosts


def network_findings(pins: Pins | None, to_fetch: Sequence[str]) -> list[Finding]:
    """What this run must download is only as good as the network: each server it downloads from is probed once,
    with a short timeout; one that does not answer is a PROBLEM naming what could not be fetched and the way on."""
    from pinbench.ops.network import PROBE_TIMEOUT_S, probe, ways_on

    if pins is None or not to_fetch:
        return []
    findings = []
    for url, subjects in hosts_to_fetch(pins, to_fetch).items():
        reason = probe(url)
        if reason is None:
            findings.append(ok("network", f"{url} answers ({', '.join(subjects)} to be fetched)"))
        else:
            findings.append(problem("network", f"{url} does not answer within {PROBE_TIMEOUT_S:g} s ({reason}); "
                                               f"{', '.join(subjects)} cannot be fetched; next: "
                                               f"{ways_on(pins.recipe, subjects)}"))
    return findings


# --------------------------------------------------------------------------------------- hardware


def visible_gpus() -> list[tuple[str, str, float]] | None:
    """(index, name, memory GB) of the GPUs this process may use (CUDA_VISIBLE_DEVICES honoured), from
    nvidia-smi without importing torch; None when nvidia-smi is absent or fails."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        proc = processes.run(["nvidia-smi", "--query-gpu=index,uuid,name,memory.total",
                              "--format=csv,noheader,nounits"], _NVIDIA_SMI_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    gpus = []
    for line in proc.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4:
            index, uuid, name, mib = parts
            try:
                gpus.append((index, uuid, name, float(mib) * 2**20 / GB))
            except ValueError:
                continue
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        wanted = [v.strip() for v in visible.split(",") if v.strip()]
        by_key = {g[0]: g for g in gpus} | {g[1]: g for g in gpus}
        gpus = [by_key[w] for w in wanted if w in by_key]
    return [(index, name, gb) for index, _, name, gb in gpus]


def gpu_findings(recipe: Recipe, cfg: RunConfig, gpus: list[tuple[str, str, float]] | None) -> list[Finding]:
    need = recipe.resources
    memory = need.gpu_memory_gb(cfg.checkpoint) if need else None
    if recipe.flags.gpus == "none" or cfg.gpus == 0 or (memory is None and cfg.gpus <= 1):
        return []   # a recipe that declares no GPU memory runs on CPU too, unless several GPUs were asked
    if gpus is None:
        return [problem("gpu", "no GPU visible (nvidia-smi not found or failing); this run needs "
                               f"{cfg.gpus} GPU(s)" + (f" of {memory:g} GB" if memory else ""))]
    if len(gpus) < cfg.gpus:
        return [problem("gpu", f"{len(gpus)} GPU(s) visible, --gpus {cfg.gpus} asked "
                               f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})")]
    used = gpus[: cfg.gpus]
    small = [f"GPU {i} {name} {gb:.0f} GB" for i, name, gb in used if memory and gb < memory]
    if small:
        hint = f" ({need.gpu_note})" if need and need.gpu_note else ""
        return [problem("gpu", f"{'; '.join(small)} < {memory:g} GB needed for {cfg.checkpoint}{hint}")]
    names = ", ".join(sorted({f"{name} {gb:.0f} GB" for _, name, gb in used}))
    return [ok("gpu", f"{len(used)} GPU(s): {names}" + (f" (need {memory:g} GB each)" if memory else ""))]


def _existing_parent(path: Path) -> Path:
    path = path.resolve()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def disk_findings(recipe: Recipe, cfg: RunConfig) -> list[Finding]:
    need = recipe.resources.disk_gb.get(cfg.mode) if recipe.resources else None
    if not need:
        return []
    where = _existing_parent(cfg.out_dir)
    free = shutil.disk_usage(where).free / GB
    if free < need:
        return [problem("disk", f"{free:.0f} GB free at {where}, the recipe estimates {need:g} GB for a "
                                f"{cfg.mode} run")]
    return [ok("disk", f"{free:.0f} GB free at {where} (estimate {need:g} GB)")]


def image_findings(recipe: Recipe, generator_image: str | None = None, *, building: bool = False) -> list[Finding]:
    """Every stage image built, with its digest, when a Docker engine is reachable (else one ok line); with
    ``generator_image`` (``--generator-image``) that one, in place of the recipe's generation image. ``building``
    (``run --build``): the recipe's own images are built after these checks, so one not built yet is no problem."""
    try:
        from pinbench.ops.docker_engine import docker_client

        client = docker_client()
    except Exception as exc:  # no SDK, no engine: the docker runtime itself will say so
        return [problem("images", f"no Docker engine reachable ({type(exc).__name__}); --runtime docker needs one: "
                                  "is dockerd running and DOCKER_HOST set?")]
    from pinbench.ops.docker_runtime import generation_stages

    stages = list(recipe.stages)
    stages = stages if generator_image is None else generation_stages(stages, generator_image, scoring=True)
    findings = []
    for tag in sorted({recipe.stage_image(stage) for stage in stages}):
        try:
            image = client.images.get(tag)
        except Exception:
            findings.append(ok("images", f"{tag} not built yet; --build builds it after these checks")
                            if building and tag != generator_image else
                            problem("images", f"{tag} not found here (--generator-image)" if tag == generator_image
                                    else f"{tag} not built; run `make build-{recipe.name}`"))
            continue
        findings.append(ok("images", f"{tag} {image.id}"))
    return findings


def token_findings(recipe: Recipe, to_fetch: Sequence[str]) -> list[Finding]:
    """A token is needed only where a gated repo still has to be downloaded (``to_fetch``: pin labels)."""
    gated = [g for g in (recipe.resources.gated if recipe.resources else ()) if g in to_fetch]
    if not gated:
        return []
    if os.environ.get("HF_TOKEN"):
        return [ok("token", f"HF_TOKEN set for the gated {', '.join(gated)}")]
    return [problem("token", f"HF_TOKEN not set; the gated {', '.join(gated)} still have to be downloaded")]


# ------------------------------------------------------------------------------------------- run


def diagnose(recipe: Recipe, cfg: RunConfig, *, gpus: list[tuple[str, str, float]] | None | bool = True,
             generator_image: str | None = None, building: bool = False) -> list[Finding]:
    """Every finding for this recipe and run configuration (``gpus=True``: ask nvidia-smi; ``generator_image``:
    a docker run's ``--generator-image``; ``building``: its ``--build``, images not built yet are no problem).

    Inputs missing from the cache are problems, except where this run will fetch them itself: a docker
    run with network (its fetch stage), or a recipe whose run downloads when online
    (``resources.fetch_on_run``); then they are labelled FETCH (never ok: they are not here), and a token is
    required for any gated one.
    """
    from pinbench.core.options import is_offline
    from pinbench.ops.network import NEXT

    if cfg.fixture:
        return [ok("mode", "fixture run: synthetic inputs on CPU, nothing to check")]
    with fetching_as(recipe, cfg):   # every way on names the fetch of this run
        offline = cfg.offline or is_offline()
        pins, findings = pin_findings(recipe, offline=offline)
        # Which pins a run needs depends on its options (a checkpoint, a modality, baked weights): only the
        # recipe's doctor knows; a recipe without one gets the generic checks alone (and every pin is checked).
        if recipe.doctor_entry is not None:
            cache = list(recipe.doctor(cfg, pins))
            _, findings = pin_findings(recipe, offline=offline, reads=pins_read(cache))
        else:
            cache = []
        will_fetch = not offline and (cfg.runtime == "docker"
                                      or bool(recipe.resources and recipe.resources.fetch_on_run))
        to_fetch = [f.subject for f in cache if not f.ok and f.check == "cache" and f.subject]
        if will_fetch:  # not in the cache is then no problem, nor ok: the line says what this run downloads first
            cache = [Finding(True, f.check, f"{f.line.partition(NEXT)[0]}; this run downloads it", f.subject,
                             to_fetch=True) if f.subject in to_fetch else f for f in cache]
            findings += cache + token_findings(recipe, to_fetch) + network_findings(pins, to_fetch)
        else:
            findings += cache
        if cfg.runtime == "docker":
            findings += image_findings(recipe, generator_image, building=building)
        findings += gpu_findings(recipe, cfg, visible_gpus() if gpus is True else (gpus or None))
        findings += disk_findings(recipe, cfg)
    return findings


def report(findings: Sequence[Finding], echo: Callable[[str], Any], *, verbose: bool = True) -> int:
    """Print the findings (problems always, ok lines when ``verbose``); the exit code (0 or 2)."""
    from pinbench.core.provenance import redact

    for finding in findings:
        if verbose or not finding.ok or finding.warning:
            echo(redact(finding.render()))
    problems = sum(1 for f in findings if not f.ok)
    if problems:
        echo(f"doctor: {counted(problems, 'problem')}; nothing was started")
        return EXIT_PROBLEMS
    return 0
