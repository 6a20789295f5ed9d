"""This machine's resolved pins: values pins.yaml leaves null, resolved once here and reused by every later run.

Why: a fresh clone must get past ``fetch`` even where no public record of a value exists yet (a dataset
revision, the full SHA-256 of a file known only by a prefix or a git blob id). The first connected
``pinbench fetch`` resolves each such value once and writes it, with the date and how it was obtained, to
``<cache root>/machine-pins/<recipe>/<recipe version>.yaml`` (read from the older ``<cache root>/locks/...``
while only that exists, and moved on the next save). The package's pins.yaml is never rewritten by a run
(that is the maintainer's ``pinbench fetch --write-pins``). Every scorecard marks these inputs "resolved at run
time, not the reference's", so a number produced on them is never mistaken for one on the reference's inputs.

A value pinned in pins.yaml always wins: a recorded value for it is stale and ignored (``pinbench doctor`` says
so). Deleting the file makes the next connected fetch resolve again.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pinbench.core.files import FileError, read_yaml, write_atomic
from pinbench.core.options import is_offline
from pinbench.core.pins import HEX40, HFPin, Pins, PinsError, URLPin, load_pins
from pinbench.core.rerun import depends_on
from pinbench.core.schema import schema_error
from pinbench.ops.cache import cache_dir, url_path

if TYPE_CHECKING:
    from pinbench.core.recipe import Recipe

RESOLVED_NOTE = "resolved at run time, not the reference's"
MACHINE_PINS_DIR = "machine-pins"
LEGACY_MACHINE_PINS_DIR = "locks"
_HEADER = ("# pinbench: this machine's resolved pins, values pins.yaml leaves null, resolved at the date given.\n"
           f"# Scorecards mark inputs using them \"{RESOLVED_NOTE}\". Delete this file to resolve again;\n"
           "# a maintainer copies them into pins.yaml with `pinbench fetch <recipe> --write-pins`.\n")


class MachinePinsError(FileError):
    """The file of this machine's resolved pins is unreadable or invalid (one line naming it)."""


@dataclass(frozen=True)
class Resolved:
    """One value resolved at run time: what, when (UTC, ISO 8601) and how."""

    value: str
    resolved_at: str
    how: str

    def provenance(self) -> dict[str, str]:
        return {"value": self.value, "resolved_at": self.resolved_at, "how": self.how, "note": RESOLVED_NOTE}


# A key names one null of pins.yaml: ("huggingface", name, "revision"), ("huggingface", name, "sha256", path)
# or ("urls", name, "sha256").
Key = tuple[str, ...]


def key_label(key: Key) -> str:
    """``huggingface.dataset.revision``, ``huggingface.x.sha256[model.safetensors]``, ``urls.raft.sha256``."""
    return ".".join(key[:3]) + (f"[{key[3]}]" if len(key) == 4 else "")


def key_pin(key: Key) -> str:
    """The pin a null belongs to, as recipes and the doctor name it: ``huggingface/<name>``, ``urls/<name>``."""
    return f"{key[0]}/{key[1]}"


def machine_pins_path(recipe: str, version: str, cache: Path | str | None = None) -> Path:
    """<cache root>/machine-pins/<recipe>/<version>.yaml (a new recipe version resolves its nulls afresh)."""
    return _record_path(MACHINE_PINS_DIR, recipe, version, cache)


def legacy_machine_pins_path(recipe: str, version: str, cache: Path | str | None = None) -> Path:
    """<cache root>/locks/<recipe>/<version>.yaml: where earlier pinbench versions kept these values (still read)."""
    return _record_path(LEGACY_MACHINE_PINS_DIR, recipe, version, cache)


def _record_path(folder: str, recipe: str, version: str, cache: Path | str | None) -> Path:
    for part in (recipe, version):
        if not part or "/" in part or "\\" in part or part.startswith("."):
            raise ValueError(f"this machine's resolved pins: {part!r} cannot name a folder or file")
    return cache_dir(cache) / folder / recipe / f"{version}.yaml"


@dataclass
class MachinePins:
    """The resolved values of one recipe version on this machine (see the module docstring).

    ``legacy`` is the older file the entries were read from while ``path`` did not exist yet; ``save`` writes
    ``path`` and then removes it, so one file holds them and deleting it resolves again."""

    path: Path
    recipe: str
    version: str
    entries: dict[Key, Resolved] = field(default_factory=dict)
    legacy: Path | None = None

    @property
    def source(self) -> Path:
        """The file these values are read from (the one to delete to resolve them again)."""
        return self.legacy or self.path

    @classmethod
    def load(cls, path: Path, recipe: str, version: str, legacy: Path | None = None) -> MachinePins:
        """The values at ``path`` (else at ``legacy``), or none; MachinePinsError when the file read is invalid."""
        record = cls(path=path, recipe=recipe, version=version)
        for read in (path, legacy) if legacy is not None else (path,):   # a run that read them depends on them
            depends_on(read)
        if not path.exists() and legacy is not None and legacy.exists():
            record.legacy = legacy
        source = record.source
        if not source.exists():
            return record
        data = read_yaml(source, MachinePinsError)
        problem = schema_error("machine_pins", data)
        if problem is not None:
            raise MachinePinsError(source, problem)
        if (data["recipe"], data["recipe_version"]) != (recipe, version):
            raise MachinePinsError(source, f"holds the resolved pins of {data['recipe']} {data['recipe_version']}, "
                                           f"not {recipe} {version}")
        for name, entry in (data.get("huggingface") or {}).items():
            if "revision" in entry:
                record.entries[("huggingface", name, "revision")] = Resolved(**entry["revision"])
            for rel, item in (entry.get("sha256") or {}).items():
                record.entries[("huggingface", name, "sha256", rel)] = Resolved(**item)
        for name, entry in (data.get("urls") or {}).items():
            record.entries[("urls", name, "sha256")] = Resolved(**entry["sha256"])
        return record

    def set(self, key: Key, value: str, how: str) -> Resolved:
        resolved = Resolved(value=value, resolved_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                            how=how)
        self.entries[key] = resolved
        return resolved

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"recipe": self.recipe, "recipe_version": self.version}
        for key, resolved in sorted(self.entries.items()):
            node = data.setdefault(key[0], {}).setdefault(key[1], {})
            item = dataclasses.asdict(resolved)
            if len(key) == 4:
                node.setdefault("sha256", {})[key[3]] = item
            else:
                node[key[2]] = item
        return data

    def save(self) -> Path:
        import yaml

        data = self.to_data()
        problem = schema_error("machine_pins", data)
        if problem is not None:  # a bug here, never a user's input: refuse to write a file we could not read
            raise MachinePinsError(self.path, problem)
        written = write_atomic(self.path, _HEADER + yaml.safe_dump(data, sort_keys=False))
        if self.legacy is not None:   # its entries are all in the new file now
            self.legacy.unlink(missing_ok=True)
            self.legacy = None
        return written


# ------------------------------------------------------------------------------------------- applying


def null_keys(pins: Pins) -> Iterator[Key]:
    """Every value pins.yaml leaves null: HF revisions (``resolve: required``), HF file and URL SHA-256s."""
    for name, pin in pins.huggingface.items():
        if pin.revision is None:
            yield ("huggingface", name, "revision")
        for rel, digest in pin.sha256.items():
            if digest is None:
                yield ("huggingface", name, "sha256", rel)
    for name, pin in pins.urls.items():
        if pin.sha256 is None:
            yield ("urls", name, "sha256")


def stale_keys(pins: Pins, machine: MachinePins) -> list[Key]:
    """Recorded values that no longer fill a null of pins.yaml (pinned since, or the entry is gone)."""
    nulls = set(null_keys(pins))
    return sorted(key for key in machine.entries if key not in nulls)


def apply_machine_pins(pins: Pins, machine: MachinePins) -> Pins:
    """``pins`` with every null that this machine resolved filled in; ``Pins.resolved`` names those values."""
    huggingface = dict(pins.huggingface)
    urls = dict(pins.urls)
    resolved: dict[str, Resolved] = {}
    for key in null_keys(pins):
        entry = machine.entries.get(key)
        if entry is None:
            continue
        resolved[key_label(key)] = entry
        section, name = key[0], key[1]
        if section == "urls":
            urls[name] = dataclasses.replace(urls[name], sha256=entry.value)
        elif key[2] == "revision":
            huggingface[name] = dataclasses.replace(huggingface[name], revision=entry.value)
        else:
            pin = huggingface[name]
            huggingface[name] = dataclasses.replace(pin, sha256={**pin.sha256, key[3]: entry.value})
    return dataclasses.replace(pins, huggingface=huggingface, urls=urls, resolved=resolved)


def machine_pins_for(recipe: Recipe, cache: Path | str | None = None) -> MachinePins:
    return MachinePins.load(machine_pins_path(recipe.name, recipe.version, cache), recipe.name, recipe.version,
                            legacy=legacy_machine_pins_path(recipe.name, recipe.version, cache))


def pins_for_provenance(pins: Pins, used: Collection[str] | None = None) -> dict[str, Any]:
    """The effective pins as plain data for a scorecard, with ``resolved_at_run_time`` for this machine's values.

    ``used``: the pins this run read, as ``<section>/<name>`` (``upstream/mind``, ``urls/alexnet``: the names of
    the scorecard's ``inputs``); None for all. The others are left out, so the scorecard, and ``pinbench check``'s
    notes, name no input the run never read (a fixture run reads none of the real weights)."""
    from pinbench.core.provenance import to_jsonable

    sections = {"upstream": pins.upstream, "huggingface": pins.huggingface, "urls": pins.urls}
    if used is not None:
        known = {f"{section}/{name}" for section, entries in sections.items() for name in entries}
        unknown = sorted(set(used) - known)
        if unknown:
            raise PinsError(f"{pins.path}: no pin {unknown[0]} (a run names the pins it used as <section>/<name>)")
        sections = {section: {name: pin for name, pin in entries.items() if f"{section}/{name}" in used}
                    for section, entries in sections.items()}
    data = to_jsonable({"recipe": pins.recipe, **sections, "images": pins.images, "python": pins.python})
    resolved = {label: r.provenance() for label, r in sorted(pins.resolved.items())
                if used is None or "/".join(label.split(".")[:2]) in used}
    if resolved:
        data["resolved_at_run_time"] = resolved
    return data


# ------------------------------------------------------------------------------------------ resolving


def _hub_error(what: str, exc: Exception, pin: HFPin, fetched: str, token: str | bool) -> Exception:
    """A hub call failed: the gated repo's line when it refused, the network line when the network failed
    (``fetched``: what could not be fetched), else the call's own error, redacted."""
    from pinbench.core.provenance import redact
    from pinbench.ops.downloads import FetchError, NetworkError, gated_refusal
    from pinbench.ops.network import network_reason

    gated = gated_refusal(exc, pin, token)
    if gated is not None:
        return gated
    reason = network_reason(exc)
    if reason is not None:
        return NetworkError(fetched, reason).for_pin(pin)
    return FetchError(redact(f"{what}: {type(exc).__name__}: {exc}"))


def _resolve_revision(pin: HFPin, api: Any, token: str | bool) -> tuple[str, str]:
    try:
        sha = api.repo_info(pin.repo_id, repo_type=pin.repo_type, token=token).sha
    except Exception as exc:  # any hub/HTTP error, redacted
        raise _hub_error(f"{pin.repo_id}: cannot resolve the revision", exc, pin,
                         f"{pin.repo_id} ({pin.repo_type}; its revision, to record for this machine)", token) from None
    if not isinstance(sha, str) or not HEX40.fullmatch(sha):
        from pinbench.ops.downloads import FetchError

        raise FetchError(f"{pin.repo_id}: the hub returned {sha!r}, not a 40-hex commit")
    return sha, "head of the default branch at the date given (HfApi.repo_info)"


def _resolve_hf_hashes(pin: HFPin, revision: str, paths: list[str], api: Any, token: str | bool,
                       cache: Path | str | None) -> dict[str, tuple[str, str]]:
    """SHA-256 of files in an HF repo: LFS files from the hub's metadata (``HfApi.get_paths_info``, nothing
    downloaded); files not in LFS (small) downloaded at the revision and hashed."""
    from huggingface_hub import hf_hub_download

    from pinbench.core.files import sha256_file
    from pinbench.ops.downloads import FetchError

    try:
        infos = {info.path: info for info in api.get_paths_info(pin.repo_id, paths, revision=revision,
                                                                repo_type=pin.repo_type, token=token)}
    except Exception as exc:
        raise _hub_error(f"{pin.repo_id}@{revision}: cannot read file metadata", exc, pin,
                         f"{pin.repo_id}@{revision} ({pin.repo_type}; the SHA-256 of {', '.join(paths)})",
                         token) from None
    out: dict[str, tuple[str, str]] = {}
    for rel in paths:
        info = infos.get(rel)
        if info is None or not hasattr(info, "blob_id"):
            raise FetchError(f"{pin.repo_id}@{revision}: {rel}: not a file in the repo at this revision")
        lfs = getattr(info, "lfs", None)
        if lfs is not None and getattr(lfs, "sha256", None):
            out[rel] = (lfs.sha256, f"LFS sha256 recorded by the hub at revision {revision} (HfApi.get_paths_info)")
            continue
        try:
            local = hf_hub_download(pin.repo_id, rel, repo_type=pin.repo_type, revision=revision,
                                    cache_dir=cache_dir(cache) / "hub", token=token)
        except Exception as exc:
            raise _hub_error(f"{pin.repo_id}@{revision}: {rel}: download failed", exc, pin,
                             f"{pin.repo_id}@{revision} ({pin.repo_type}; file {rel})", token) from None
        out[rel] = (sha256_file(local), f"sha256 of the file (not in LFS) downloaded at revision {revision}")
    return out


def _resolve_url(pin: URLPin, cache: Path | str | None) -> tuple[str, str]:
    """Download (or reuse the unverified cached copy), check the partial pins, move it to its final place."""
    from pinbench.ops.downloads import NetworkError, PinMismatchError, _warn, download_url, verify_url_file

    unverified = url_path(pin, cache)
    digest = None
    if unverified.is_file():
        try:
            digest = verify_url_file(pin, unverified)
        except PinMismatchError as exc:   # a bad or cut earlier download: fetch it again
            _warn(f"{exc}; downloading it again")
            unverified.unlink()
    if digest is None:
        try:
            digest = download_url(pin.url, unverified, verify=lambda tmp, sha: verify_url_file(pin, tmp, sha))
        except NetworkError as exc:
            raise exc.for_pin(pin) from None
    final = url_path(dataclasses.replace(pin, sha256=digest), cache)
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(unverified, final)
    if pin.sha256_prefix:
        how = f"sha256 of the download, which starts with the pinned prefix {pin.sha256_prefix}"
    elif pin.git_blob:
        how = f"sha256 of the download, whose git blob id is the pinned {pin.git_blob}"
    else:
        how = "sha256 of the first download (trusted on first use: nothing pinned to check it against)"
    return digest, how


def resolve(pins: Pins, machine: MachinePins, *, token: str | None = None, api: Any = None,
            cache: Path | str | None = None, reads: Collection[str] | None = None) -> list[str]:
    """Resolve every null of ``pins`` that ``machine`` lacks, save it, and list what was resolved.

    ``reads``: the pins (``huggingface/<name>``, ``urls/<name>``) whose nulls to resolve, None for all: a fetch
    for some metrics resolves the pins those read and no others (a gated repo it never downloads needs no token).
    Needs network (FetchError when offline and something is still null). Values already recorded are
    reused, never resolved again: later runs see the same inputs as the first.
    """
    from pinbench.ops.downloads import FetchError, _hf_token

    missing = [key for key in null_keys(pins)
               if key not in machine.entries and (reads is None or key_pin(key) in reads)]
    if not missing:
        return []
    if is_offline():
        raise FetchError(f"{pins.path}: {', '.join(key_label(k) for k in missing)} still null and not in this "
                         f"machine's resolved pins {machine.source}; resolving needs network "
                         "(unset PINBENCH_OFFLINE / HF_HUB_OFFLINE)")
    auth = _hf_token(token)
    if api is None and any(k[0] == "huggingface" for k in missing):
        from huggingface_hub import HfApi

        api = HfApi()
    changes: list[str] = []
    for key in missing:
        if key[0] != "huggingface" or key[2] != "revision":
            continue
        value, how = _resolve_revision(pins.huggingface[key[1]], api, auth)
        changes.append(f"{key_label(key)} = {machine.set(key, value, how).value}")
    effective = apply_machine_pins(pins, machine)
    for name, pin in effective.huggingface.items():
        paths = [k[3] for k in missing if k[:2] == ("huggingface", name) and len(k) == 4]
        if paths:
            for rel, (value, how) in _resolve_hf_hashes(pin, str(pin.revision), paths, api, auth, cache).items():
                key = ("huggingface", name, "sha256", rel)
                changes.append(f"{key_label(key)} = {machine.set(key, value, how).value}")
    for key in missing:
        if key[0] == "urls":
            value, how = _resolve_url(pins.urls[key[1]], cache)
            changes.append(f"{key_label(key)} = {machine.set(key, value, how).value}")
    machine.save()
    return changes


def resolve_recipe_pins(recipe: Recipe, *, token: str | None = None, api: Any = None,
                        cache: Path | str | None = None, reads: Collection[str] | None = None
                        ) -> tuple[Pins, list[str]]:
    """On a connected machine: resolve the recipe's nulls (of the pins ``reads`` names, None: all) into this
    machine's resolved pins; the effective pins and changes."""
    machine = machine_pins_for(recipe, cache)
    pins = load_pins(recipe.pins_path)
    changes = resolve(pins, machine, token=token, api=api, cache=cache, reads=reads)
    return apply_machine_pins(pins, machine), changes
