"""Pinned downloads: Hugging Face repos at a 40-hex revision, URL weights by SHA-256, one cache root.

Why: a documented pin with a moving default is not a pin (anchors.md, design lesson 3), and a run
stage must work without network once `pinbench fetch` filled the cache (lesson 13). Every download
passes ``revision=`` explicitly; every file with a pinned SHA-256 is checked before use; offline
mode never touches the network and fails fast naming what is missing and how to fetch it.
Tokens come from the ``token`` argument or ``HF_TOKEN`` and never reach a message or a file.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import sys
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub.file_download import repo_folder_name

from pinbench.provenance import redact

HEX40 = re.compile(r"[0-9a-f]{40}")
HEX64 = re.compile(r"[0-9a-f]{64}")
IMAGE_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
REPO_TYPES = ("model", "dataset")
_GLOB_CHARS = re.compile(r"[*?\[]")
_CHUNK = 1 << 20
_URL_TIMEOUT_S = 60
PINS_SECTIONS = ("recipe", "upstream", "huggingface", "urls", "images", "python")
_HF_KEYS = {"repo_id", "repo_type", "revision", "allow_patterns", "sha256", "lock", "note"}
_URL_KEYS = {"url", "sha256", "filename", "note"}


class PinsError(ValueError):
    """A pins file or pin is malformed; the message is one line naming the file and the key."""


class NotFetchedError(RuntimeError):
    """Offline and the input is not in the cache (or a local copy lacks a file)."""


class UnlockedPinError(RuntimeError):
    """A pin marked ``lock: required`` has no revision yet; ``pinbench fetch --lock`` resolves it."""


class FetchError(RuntimeError):
    """A download failed; the message is redacted (no token can appear in it)."""


class PinMismatchError(RuntimeError):
    """What is on disk is not what the pin names (another revision, another content)."""


class ChecksumError(PinMismatchError):
    """A file's SHA-256 differs from its pin."""

    def __init__(self, path: Path | str, expected: str, actual: str) -> None:
        self.path, self.expected, self.actual = Path(path), expected, actual
        super().__init__(f"{path}: sha256 mismatch: expected {expected}, got {actual}")


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

    ``revision`` may be None only with ``lock_required=True``; fetching then refuses until
    ``lock_pins`` wrote the resolved commit. ``sha256`` maps repo-relative paths to hex digests;
    a None digest is fetched but reported unverified.
    """

    repo_id: str
    revision: str | None
    repo_type: str = "model"
    allow_patterns: list[str] | None = None
    sha256: dict[str, str | None] = field(default_factory=dict)
    lock_required: bool = False
    recipe: str = "<recipe>"

    def __post_init__(self) -> None:
        if not isinstance(self.repo_id, str) or self.repo_id.count("/") != 1:
            raise PinsError(f"repo_id {self.repo_id!r} is not 'owner/name'")
        if self.repo_type not in REPO_TYPES:
            raise PinsError(f"{self.repo_id}: repo_type {self.repo_type!r} is not one of "
                            f"{', '.join(REPO_TYPES)}")
        if self.revision is None:
            if not self.lock_required:
                raise PinsError(f"{self.repo_id}: revision is null; pin a 40-hex commit "
                                "(or mark the entry `lock: required` and run `pinbench fetch --lock`)")
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
    """A non-HF file (evaluator weights) by URL; ``sha256`` None means fetched but unverified."""

    url: str
    sha256: str | None
    filename: str
    recipe: str = "<recipe>"

    def __post_init__(self) -> None:
        scheme = urllib.parse.urlsplit(self.url).scheme if isinstance(self.url, str) else ""
        if scheme not in ("https", "http", "file"):
            raise PinsError(f"url {self.url!r} is not an http(s):// or file:// URL")
        _check_sha256(f"{self.url}: sha256", self.sha256)
        if (not isinstance(self.filename, str) or not self.filename or "/" in self.filename
                or "\\" in self.filename or self.filename in (".", "..")):
            raise PinsError(f"{self.url}: filename {self.filename!r} must be a plain file name")


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


def _check_sha256(where: str, digest: object) -> None:
    if digest is not None and (not isinstance(digest, str) or not HEX64.fullmatch(digest)):
        raise PinsError(f"{where}: {digest!r} is not a 64-hex SHA-256 (lowercase) or null")


def _check_relpath(repo_id: str, rel: object) -> None:
    parts = PurePosixPath(str(rel)).parts
    if not isinstance(rel, str) or not rel or rel.startswith("/") or ".." in parts:
        raise PinsError(f"{repo_id}: sha256 key {rel!r} is not a relative path inside the repo")


# --------------------------------------------------------------------------------------------- cache


def cache_root() -> Path:
    """PINBENCH_CACHE, else HF_HOME, else ~/.cache/pinbench (HF repos live under <root>/hub)."""
    for var in ("PINBENCH_CACHE", "HF_HOME"):
        value = os.environ.get(var)
        if value:
            return Path(value).expanduser()
    return Path.home() / ".cache" / "pinbench"


def is_offline() -> bool:
    """PINBENCH_OFFLINE=1 or HF_HUB_OFFLINE=1 (also accepts true/yes/on)."""
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in ("PINBENCH_OFFLINE", "HF_HUB_OFFLINE"))


def _root(cache: Path | str | None) -> Path:
    return Path(cache).expanduser() if cache is not None else cache_root()


def hf_snapshot_dir(pin: HFPin, cache: Path | str | None = None) -> Path:
    """Where huggingface_hub keeps this revision: <root>/hub/<type>s--owner--name/snapshots/<rev>."""
    folder = repo_folder_name(repo_id=pin.repo_id, repo_type=pin.repo_type)
    return _root(cache) / "hub" / folder / "snapshots" / str(pin.revision)


def url_path(pin: URLPin, cache: Path | str | None = None) -> Path:
    """<root>/urls/<sha256[:16]>/<filename>; unhashed pins go under unverified-<sha256(url)[:16]>."""
    key = pin.sha256[:16] if pin.sha256 else "unverified-" + hashlib.sha256(pin.url.encode()).hexdigest()[:16]
    return _root(cache) / "urls" / key / pin.filename


def _not_fetched(what: str, where: Path, recipe: str) -> NotFetchedError:
    return NotFetchedError(f"{what}: not in cache {where}; "
                           f"run `pinbench fetch {recipe}` on a connected machine")


def _warn(message: str) -> None:
    print(f"warning: {redact(message)}", file=sys.stderr)


def _hf_token(token: str | None) -> str | bool:
    """The token to send: the argument, else HF_TOKEN, else False (never a stored login token)."""
    return token or os.environ.get("HF_TOKEN") or False


# -------------------------------------------------------------------------------------- verification


def sha256_file(path: Path | str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify_sha256(path: Path | str, expected: str) -> None:
    """Raise ChecksumError (naming the file and both digests) unless the file hashes to ``expected``."""
    actual = sha256_file(path)
    if actual != expected.lower():
        raise ChecksumError(path, expected, actual)


def _files_under(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and ".cache" not in p.relative_to(root).parts[:1])


def _missing(pin: HFPin, root: Path) -> list[str]:
    """Pinned files absent under ``root``, and allow_patterns that match nothing there."""
    missing = [rel for rel in pin.sha256 if not (root / rel).is_file()]
    patterns = pin.allow_patterns or []
    files = _files_under(root) if any(_GLOB_CHARS.search(p) for p in patterns) else []
    for pattern in patterns:
        if _GLOB_CHARS.search(pattern):
            if not any(fnmatch.fnmatch(f, pattern) for f in files):
                missing.append(f"{pattern} (matches no file)")
        elif not (root / pattern).exists() and pattern not in pin.sha256:
            missing.append(pattern)
    return missing


def _verify_files(pin: HFPin, root: Path) -> None:
    for rel, digest in sorted(pin.sha256.items()):
        if digest is None:
            _warn(f"{pin.label}: {rel}: no sha256 pinned, unverified "
                  f"(run `pinbench fetch {pin.recipe} --lock` to pin it)")
        else:
            verify_sha256(root / rel, digest)


# ----------------------------------------------------------------------------------- Hugging Face


def _require_revision(pin: HFPin) -> str:
    if pin.revision is None:
        raise UnlockedPinError(f"{pin.repo_id}: revision is null (`lock: required`); run "
                               f"`pinbench fetch {pin.recipe} --lock` on a connected machine to resolve it")
    return pin.revision


def fetch_hf(pin: HFPin, *, token: str | None = None, cache: Path | str | None = None,
             local_dir: Path | str | None = None) -> Path:
    """Download ``pin`` at its revision into <root>/hub and verify it; return the snapshot folder.

    Offline, this is ``locate``. With ``local_dir`` (a user's own copy) nothing is downloaded:
    the copy is checked file by file against the pinned SHA-256s and refused on any mismatch.
    """
    revision = _require_revision(pin)
    if local_dir is not None or is_offline():
        return locate(pin, cache=cache, local_dir=local_dir)
    try:
        folder = snapshot_download(pin.repo_id, repo_type=pin.repo_type, revision=revision,
                                   allow_patterns=pin.allow_patterns, cache_dir=_root(cache) / "hub",
                                   token=_hf_token(token))
    except Exception as exc:  # any hub/HTTP error: report it redacted, without the chained traceback
        raise FetchError(redact(f"{pin.label}: download failed: {type(exc).__name__}: {exc}")) from None
    root = Path(folder)
    missing = _missing(pin, root)
    if missing:
        raise FetchError(f"{pin.label}: not in the repo at this revision: {', '.join(missing)}")
    _verify_files(pin, root)
    return root


def _check_local_copy(pin: HFPin, root: Path) -> None:
    """A local copy must hold the pinned files; download metadata, when present, must name the revision."""
    if not root.is_dir():
        raise NotFetchedError(f"{pin.label}: local copy {root} is not a directory")
    missing = _missing(pin, root)
    if missing:
        raise NotFetchedError(f"{pin.label}: local copy {root} lacks {', '.join(missing)}")
    meta_dir = root / ".cache" / "huggingface" / "download"
    for meta in sorted(meta_dir.rglob("*.metadata")) if meta_dir.is_dir() else []:
        commit = meta.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0].strip()
        if HEX40.fullmatch(commit) and commit != pin.revision:
            rel = meta.relative_to(meta_dir).as_posix().removesuffix(".metadata")
            raise PinMismatchError(f"{root / rel}: local copy was downloaded at revision {commit}, "
                                   f"the pin is {pin.revision}; refusing it")
    if not pin.sha256:
        _warn(f"{pin.label}: local copy {root} has no pinned sha256; it cannot be verified")


def locate(pin: HFPin | URLPin, *, cache: Path | str | None = None,
           local_dir: Path | str | None = None) -> Path:
    """The verified cached path of a pin, without network; NotFetchedError if it was not fetched."""
    if isinstance(pin, URLPin):
        return _locate_url(pin, cache)
    _require_revision(pin)
    if local_dir is not None:
        root = Path(local_dir).expanduser()
        _check_local_copy(pin, root)
    else:
        root = hf_snapshot_dir(pin, cache)
        if not root.is_dir():
            raise _not_fetched(pin.label, root, pin.recipe)
        missing = _missing(pin, root)
        if missing:
            raise _not_fetched(f"{pin.label} ({', '.join(missing)})", root, pin.recipe)
    _verify_files(pin, root)
    return root


# -------------------------------------------------------------------------------------------- URLs


def _download(url: str, dest_dir: Path, name: str) -> tuple[Path, str]:
    """Stream ``url`` to a temp file in ``dest_dir``; return (temp path, sha256)."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest_dir, prefix=f".{name}.", suffix=".part")
    tmp = Path(tmp_name)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=_URL_TIMEOUT_S) as resp:
            while chunk := resp.read(_CHUNK):
                digest.update(chunk)
                out.write(chunk)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, Exception):
            raise FetchError(redact(f"{url}: download failed: {type(exc).__name__}: {exc}")) from None
        raise
    return tmp, digest.hexdigest()


def _locate_url(pin: URLPin, cache: Path | str | None) -> Path:
    dest = url_path(pin, cache)
    if not dest.is_file():
        raise _not_fetched(pin.url, dest, pin.recipe)
    if pin.sha256:
        verify_sha256(dest, pin.sha256)
    else:
        _warn(f"{pin.url}: no sha256 pinned, unverified (run `pinbench fetch {pin.recipe} --lock` to pin it)")
    return dest


def fetch_url(pin: URLPin, *, cache: Path | str | None = None) -> Path:
    """Download a URL pin into <root>/urls/<sha256[:16]>/<filename>, verified; reuse a good cached copy."""
    dest = url_path(pin, cache)
    if is_offline():
        return _locate_url(pin, cache)
    if dest.is_file():
        if not pin.sha256:
            return _locate_url(pin, cache)
        try:
            verify_sha256(dest, pin.sha256)
            return dest
        except ChecksumError as exc:
            _warn(f"{exc}; downloading it again")
    tmp, actual = _download(pin.url, dest.parent, pin.filename)
    if pin.sha256 and actual != pin.sha256:
        tmp.unlink(missing_ok=True)
        raise ChecksumError(f"{pin.url} ({pin.filename})", pin.sha256, actual)
    os.replace(tmp, dest)
    if not pin.sha256:
        _warn(f"{pin.url}: no sha256 pinned, unverified (downloaded sha256 {actual}; "
              f"run `pinbench fetch {pin.recipe} --lock` to pin it)")
    return dest


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
    unknown = sorted(set(entry) - _HF_KEYS)
    if unknown:
        raise PinsError(f"huggingface.{name}: unknown key(s) {', '.join(unknown)}; "
                        f"allowed: {', '.join(sorted(_HF_KEYS))}")
    lock = entry.get("lock")
    if lock not in (None, "required"):
        raise PinsError(f"huggingface.{name}.lock: {lock!r}; the only value is `required`")
    patterns = entry.get("allow_patterns")
    try:
        return HFPin(repo_id=entry.get("repo_id"), revision=entry.get("revision"),
                     repo_type=entry.get("repo_type", "model"),
                     allow_patterns=[patterns] if isinstance(patterns, str) else patterns,
                     sha256=dict(_mapping(entry.get("sha256"), f"huggingface.{name}.sha256")),
                     lock_required=lock == "required", recipe=recipe)
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
        return URLPin(url=url, sha256=entry.get("sha256"), filename=filename, recipe=recipe)
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
    except PinsError as exc:
        raise PinsError(f"{path}: {exc}") from None
    return Pins(path=path, recipe=str(recipe), upstream=upstream, huggingface=hf, urls=urls,
                images=images, python=python)


# ------------------------------------------------------------------------------------------ locking

_KEY_LINE = re.compile(
    r"""^(?P<key>"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s#'"{\[][^#]*?)\s*:(?=\s|$)(?P<rest>.*)$""")


def _unquote(key: str) -> str:
    if len(key) >= 2 and key[0] == key[-1] and key[0] in "'\"":
        return str(yaml.safe_load(key))
    return key


def _yaml_scalar(value: str) -> str:
    return value if yaml.safe_load(value) == value else f'"{value}"'


def _split_comment(rest: str) -> tuple[str, str]:
    """(value, comment) of the text after ``key:``; a comment starts at `` #`` outside quotes."""
    quote = None
    for i, ch in enumerate(rest):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or rest[i - 1].isspace()):
            return rest[:i].strip(), rest[i:]
    return rest.strip(), ""


def _set_scalars(text: str, updates: Mapping[tuple[str, ...], str]) -> str | None:
    """Rewrite ``key: null`` lines of a block-style YAML in place; None if a key was not found.

    Keeps comments and layout. Flow-style mappings are not edited (the caller falls back).
    """
    lines = text.splitlines(keepends=True)
    stack: list[tuple[int, str]] = []
    done: set[tuple[str, ...]] = set()
    for i, line in enumerate(lines):
        stripped = line.lstrip(" ")
        if not stripped.strip() or stripped.startswith("#") or stripped.startswith("- "):
            continue
        indent = len(line) - len(stripped)
        match = _KEY_LINE.match(stripped.rstrip("\r\n"))
        if not match:
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, _unquote(match.group("key").strip())))
        key_path = tuple(k for _, k in stack)
        if key_path not in updates:
            continue
        value, comment = _split_comment(match.group("rest"))
        if value not in ("", "null", "~", "Null", "NULL"):
            continue
        newline = line[len(line.rstrip("\r\n")):]
        new = f"{' ' * indent}{match.group('key').strip()}: {_yaml_scalar(updates[key_path])}"
        lines[i] = new + (f"  {comment}" if comment else "") + newline
        done.add(key_path)
    return "".join(lines) if done == set(updates) else None


def _apply(data: dict, updates: Mapping[tuple[str, ...], str]) -> dict:
    for key_path, value in updates.items():
        node = data
        for key in key_path[:-1]:
            node = node[key]
        node[key_path[-1]] = value
    return data


def lock_pins(path: Path | str, token: str | None = None, *, api: Any = None,
              cache: Path | str | None = None) -> list[str]:
    """On a connected machine, fill null HF revisions and null SHA-256s in pins.yaml; list the changes.

    Revisions come from the repo's current head (``HfApi().repo_info(...).sha``); file hashes from
    downloading the file at that revision (which also fills the cache). The file is edited line by
    line so comments survive; when its layout defeats that (flow style), it is rewritten with
    yaml.safe_dump and a warning says comments were lost.
    """
    path = Path(path)
    if is_offline():
        raise FetchError(f"{path}: locking needs network; unset PINBENCH_OFFLINE / HF_HUB_OFFLINE")
    pins = load_pins(path)
    auth = _hf_token(token)
    api = api or HfApi()
    updates: dict[tuple[str, ...], str] = {}
    changes: list[str] = []
    for name, pin in pins.huggingface.items():
        revision = pin.revision
        if revision is None:
            try:
                revision = api.repo_info(pin.repo_id, repo_type=pin.repo_type, token=auth).sha
            except Exception as exc:
                message = f"{pin.repo_id}: cannot resolve revision: {type(exc).__name__}: {exc}"
                raise FetchError(redact(message)) from None
            if not isinstance(revision, str) or not HEX40.fullmatch(revision):
                raise FetchError(f"{pin.repo_id}: the hub returned {revision!r}, not a 40-hex commit")
            updates[("huggingface", name, "revision")] = revision
            changes.append(f"huggingface.{name}.revision = {revision}")
        for rel, digest in pin.sha256.items():
            if digest is None:
                try:
                    local = hf_hub_download(pin.repo_id, rel, repo_type=pin.repo_type, revision=revision,
                                            cache_dir=_root(cache) / "hub", token=auth)
                except Exception as exc:
                    raise FetchError(redact(f"{pin.repo_id}@{revision}: {rel}: download failed: "
                                            f"{type(exc).__name__}: {exc}")) from None
                digest = sha256_file(local)
                updates[("huggingface", name, "sha256", rel)] = digest
                changes.append(f"huggingface.{name}.sha256[{rel}] = {digest}")
    for name, pin in pins.urls.items():
        if pin.sha256 is None:
            tmp, digest = _download(pin.url, _root(cache) / "urls", pin.filename)
            final = url_path(replace(pin, sha256=digest), cache)
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, final)
            url_path(pin, cache).unlink(missing_ok=True)
            updates[("urls", name, "sha256")] = digest
            changes.append(f"urls.{name}.sha256 = {digest}")
    if not updates:
        return changes
    text = path.read_text(encoding="utf-8")
    expected = _apply(yaml.safe_load(text), updates)
    edited = _set_scalars(text, updates)
    if edited is None or yaml.safe_load(edited) != expected:
        _warn(f"{path}: layout not editable line by line; rewritten with yaml.safe_dump (comments lost)")
        edited = yaml.safe_dump(expected, sort_keys=False)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(edited, encoding="utf-8")
    os.replace(tmp, path)
    load_pins(path)
    return changes
