"""A recipe's pins.yaml: upstream commits, Hugging Face repos at revisions, URL files by SHA-256, base images.

Why a schema and a loader: a pin that is present but malformed (a branch instead of a commit, a tag instead of
a digest) must fail loudly, naming the file and the key, before anything is downloaded. The loader's own checks
give the common defects a precise message; ``schemas/pins.schema.json`` is the complete contract and runs after
them on every load.

A value left null in pins.yaml (a dataset revision nobody has recorded publicly, the full SHA-256 of a file
known only by a prefix or a git blob id) is resolved once on each machine and recorded
there (:mod:`pinbench.ops.machine_pins`); :attr:`Pins.resolved` says which values came from there.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pinbench.core.schema import schema_error

HEX40 = re.compile(r"[0-9a-f]{40}")
HEX64 = re.compile(r"[0-9a-f]{64}")
IMAGE_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
REPO_TYPES = ("model", "dataset")
PINS_SECTIONS = ("recipe", "upstream", "huggingface", "urls", "images", "python")
_HF_KEYS = {"repo_id", "repo_type", "revision", "allow_patterns", "sha256", "resolve", "note"}
# `lock: required` is what pins.yaml files of earlier pinbench versions (and exports of them) say for `resolve:`.
_LEGACY_RESOLVE_KEY = "lock"
_URL_KEYS = {"url", "sha256", "sha256_prefix", "git_blob", "size", "filename", "note"}
HEX_PREFIX = re.compile(r"[0-9a-f]{8,63}")


class PinsError(ValueError):
    """A pins file or pin is malformed; the message is one line naming the file and the key."""


@dataclass(frozen=True)
class GitPin:
    """Upstream code at one commit; extra keys (a file path, a note) are kept as given."""

    repo: str
    commit: str
    url: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HFPin:
    """A Hugging Face model or dataset at a 40-hex revision, optionally a subset of its files.

    ``revision`` may be None only with ``resolve_required=True``; fetching then refuses until
    ``pinbench fetch`` resolved the commit on this machine. ``sha256`` maps repo-relative paths to hex digests;
    a None digest is fetched but reported unverified.
    """

    repo_id: str
    revision: str | None
    repo_type: str = "model"
    allow_patterns: list[str] | None = None
    sha256: dict[str, str | None] = field(default_factory=dict)
    resolve_required: bool = False
    recipe: str = "<recipe>"

    def __post_init__(self) -> None:
        if not isinstance(self.repo_id, str) or self.repo_id.count("/") != 1:
            raise PinsError(f"repo_id {self.repo_id!r} is not 'owner/name'")
        if self.repo_type not in REPO_TYPES:
            raise PinsError(f"{self.repo_id}: repo_type {self.repo_type!r} is not one of "
                            f"{', '.join(REPO_TYPES)}")
        if self.revision is None:
            if not self.resolve_required:
                raise PinsError(f"{self.repo_id}: revision is null; pin a 40-hex commit "
                                "(or mark the entry `resolve: required` and run `pinbench fetch`)")
        elif not isinstance(self.revision, str) or not HEX40.fullmatch(self.revision):
            raise PinsError(f"{self.repo_id}: revision {self.revision!r} is not a 40-hex commit "
                            "(branch and tag names move)")
        if self.allow_patterns is not None and (
                not isinstance(self.allow_patterns, list)
                or not all(isinstance(p, str) and p for p in self.allow_patterns)):
            raise PinsError(f"{self.repo_id}: allow_patterns must be a list of non-empty strings")
        for rel, digest in self.sha256.items():
            _check_relpath(self.repo_id, rel)
            _check_sha256(f"{self.repo_id}: sha256[{rel}]", digest)

    @property
    def label(self) -> str:
        return f"{self.repo_id}@{self.revision}"


@dataclass(frozen=True)
class URLPin:
    """A non-HF file (evaluator weights) by URL, pinned by content.

    ``sha256`` is the full pin. Until it is known, a partial but still verifiable pin may stand in:
    ``sha256_prefix`` (torchvision names its files by the first 8 hex digits of their SHA-256) or
    ``git_blob`` (the git blob id a public repository records for the file). ``size`` in bytes, when
    given, is checked first. A pin with none of the three is fetched but reported unverified.
    """

    url: str
    sha256: str | None
    filename: str
    recipe: str = "<recipe>"
    sha256_prefix: str | None = None
    git_blob: str | None = None
    size: int | None = None

    def __post_init__(self) -> None:
        scheme = urllib.parse.urlsplit(self.url).scheme if isinstance(self.url, str) else ""
        if scheme not in ("https", "http", "file"):
            raise PinsError(f"url {self.url!r} is not an http(s):// or file:// URL")
        _check_sha256(f"{self.url}: sha256", self.sha256)
        if self.sha256_prefix is not None and (not isinstance(self.sha256_prefix, str)
                                               or not HEX_PREFIX.fullmatch(self.sha256_prefix)):
            raise PinsError(f"{self.url}: sha256_prefix {self.sha256_prefix!r} is not 8 to 63 lowercase hex digits")
        if self.sha256 and self.sha256_prefix and not self.sha256.startswith(self.sha256_prefix):
            raise PinsError(f"{self.url}: sha256 {self.sha256} does not start with sha256_prefix {self.sha256_prefix}")
        if self.git_blob is not None and (not isinstance(self.git_blob, str) or not HEX40.fullmatch(self.git_blob)):
            raise PinsError(f"{self.url}: git_blob {self.git_blob!r} is not a 40-hex git blob id")
        if self.size is not None and (not isinstance(self.size, int) or isinstance(self.size, bool) or self.size < 1):
            raise PinsError(f"{self.url}: size {self.size!r} is not a positive number of bytes")
        if (not isinstance(self.filename, str) or not self.filename or "/" in self.filename
                or "\\" in self.filename or self.filename in (".", "..")):
            raise PinsError(f"{self.url}: filename {self.filename!r} must be a plain file name")

    @property
    def verifiable(self) -> bool:
        """True when the content is pinned, fully (sha256) or partially (prefix, git blob id)."""
        return bool(self.sha256 or self.sha256_prefix or self.git_blob)


@dataclass(frozen=True)
class Pins:
    """A recipe's pins.yaml. Field names follow the file so provenance can read it as a dict."""

    path: Path
    recipe: str
    upstream: dict[str, GitPin] = field(default_factory=dict)
    huggingface: dict[str, HFPin] = field(default_factory=dict)
    urls: dict[str, URLPin] = field(default_factory=dict)
    images: dict[str, Any] = field(default_factory=dict)
    python: dict[str, Any] = field(default_factory=dict)
    # "<section>.<name>.<field>" -> the value this machine resolved for a null of pins.yaml (pinbench.ops.machine_pins)
    resolved: dict[str, Any] = field(default_factory=dict)


def _check_sha256(where: str, digest: object) -> None:
    if digest is not None and (not isinstance(digest, str) or not HEX64.fullmatch(digest)):
        raise PinsError(f"{where}: {digest!r} is not a 64-hex SHA-256 (lowercase) or null")


def _check_relpath(repo_id: str, rel: object) -> None:
    parts = PurePosixPath(str(rel)).parts
    if not isinstance(rel, str) or not rel or rel.startswith("/") or ".." in parts:
        raise PinsError(f"{repo_id}: sha256 key {rel!r} is not a relative path inside the repo")


# ---------------------------------------------------------------------------------------- pins file


def _mapping(value: object, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PinsError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def _parse_git(name: str, entry: Mapping) -> GitPin:
    commit = entry.get("commit")
    if not isinstance(commit, str) or not HEX40.fullmatch(commit):
        raise PinsError(f"upstream.{name}.commit: {commit!r} is not a 40-hex commit (branches and tags move)")
    if not isinstance(entry.get("repo"), str):
        raise PinsError(f"upstream.{name}.repo: missing (owner/name)")
    extra = {k: v for k, v in entry.items() if k not in ("repo", "commit", "url")}
    return GitPin(repo=entry["repo"], commit=commit, url=entry.get("url"), extra=extra)


def _parse_hf(name: str, entry: Mapping, recipe: str) -> HFPin:
    unknown = sorted(set(entry) - _HF_KEYS - {_LEGACY_RESOLVE_KEY})
    if unknown:
        raise PinsError(f"huggingface.{name}: unknown key(s) {', '.join(unknown)}; "
                        f"allowed: {', '.join(sorted(_HF_KEYS))}")
    key = _LEGACY_RESOLVE_KEY if _LEGACY_RESOLVE_KEY in entry else "resolve"
    if key != "resolve" and "resolve" in entry:
        raise PinsError(f"huggingface.{name}: both `resolve` and `{key}` (its older name); keep `resolve`")
    resolve = entry.get(key)
    if resolve not in (None, "required"):
        raise PinsError(f"huggingface.{name}.{key}: {resolve!r}; the only value is `required`")
    patterns = entry.get("allow_patterns")
    try:
        return HFPin(repo_id=entry.get("repo_id"), revision=entry.get("revision"),
                     repo_type=entry.get("repo_type", "model"),
                     allow_patterns=[patterns] if isinstance(patterns, str) else patterns,
                     sha256=dict(_mapping(entry.get("sha256"), f"huggingface.{name}.sha256")),
                     resolve_required=resolve == "required", recipe=recipe)
    except PinsError as exc:
        raise PinsError(f"huggingface.{name}: {exc}") from None


def _parse_url(name: str, entry: Mapping, recipe: str) -> URLPin:
    unknown = sorted(set(entry) - _URL_KEYS)
    if unknown:
        raise PinsError(f"urls.{name}: unknown key(s) {', '.join(unknown)}; "
                        f"allowed: {', '.join(sorted(_URL_KEYS))}")
    url = entry.get("url")
    filename = entry.get("filename") or (PurePosixPath(urllib.parse.urlsplit(url).path).name if url else None)
    try:
        return URLPin(url=url, sha256=entry.get("sha256"), filename=filename, recipe=recipe,
                      sha256_prefix=entry.get("sha256_prefix"), git_blob=entry.get("git_blob"),
                      size=entry.get("size"))
    except PinsError as exc:
        raise PinsError(f"urls.{name}: {exc}") from None


def _check_images(images: Mapping) -> None:
    for name, entry in images.items():
        refs = entry.items() if isinstance(entry, dict) else [(None, entry)]
        for key, ref in refs:
            where = f"images.{name}" + (f".{key}" if key else "")
            if not isinstance(ref, str) or not IMAGE_DIGEST.search(ref):
                raise PinsError(f"{where}: {ref!r} has no @sha256:<64 hex> digest (a tag alone moves)")


def load_pins(path: Path | str) -> Pins:
    """Parse and validate a recipe's pins.yaml; PinsError("<file>: <key>: <problem>") on any defect."""
    import yaml  # here, not at import: compare and diff import this module and read no YAML

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PinsError(f"{path}: file not found") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        raise PinsError(f"{path}: {where}invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    try:
        data = _mapping(data, "top level")
        unknown = sorted(set(data) - set(PINS_SECTIONS))
        if unknown:
            raise PinsError(f"unknown section(s) {', '.join(unknown)}; allowed: {', '.join(PINS_SECTIONS)}")
        recipe = data.get("recipe") or path.resolve().parent.name.replace("_", "-")
        upstream = {n: _parse_git(n, _mapping(e, f"upstream.{n}"))
                    for n, e in _mapping(data.get("upstream"), "upstream").items()}
        hf = {n: _parse_hf(n, _mapping(e, f"huggingface.{n}"), recipe)
              for n, e in _mapping(data.get("huggingface"), "huggingface").items()}
        urls = {n: _parse_url(n, _mapping(e, f"urls.{n}"), recipe)
                for n, e in _mapping(data.get("urls"), "urls").items()}
        images = _mapping(data.get("images"), "images")
        _check_images(images)
        python = _mapping(data.get("python"), "python")
        problem = schema_error("pins", data)
        if problem is not None:
            raise PinsError(problem)
    except PinsError as exc:
        raise PinsError(f"{path}: {exc}") from None
    return Pins(path=path, recipe=str(recipe), upstream=upstream, huggingface=hf, urls=urls,
                images=images, python=python)
