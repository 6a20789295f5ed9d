"""Pinned downloads: Hugging Face repos at a 40-hex revision, URL files checked against their SHA-256.

Why: a documented pin with a moving default is not a pin (anchors.md, design lesson 3). Every download
passes ``revision=`` explicitly; every file with a pinned SHA-256 is checked before use; offline mode never
touches the network and fails fast naming what is missing and how to fetch it. Tokens come from the
``token`` argument or ``HF_TOKEN`` and never reach a message or a file.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import sys
import urllib.request
from pathlib import Path

from huggingface_hub import snapshot_download

from pinbench.cache import cache_dir, hf_snapshot_dir, is_offline, url_path
from pinbench.files import atomic_path, sha256_file
from pinbench.pins import HEX40, HFPin, URLPin
from pinbench.provenance import redact

_GLOB_CHARS = re.compile(r"[*?\[]")
_CHUNK = 1 << 20
_URL_TIMEOUT_S = 60


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


def _not_fetched(what: str, where: Path, recipe: str) -> NotFetchedError:
    return NotFetchedError(f"{what}: not in cache {where}; "
                           f"run `pinbench fetch {recipe}` on a connected machine")


def _warn(message: str) -> None:
    print(f"warning: {redact(message)}", file=sys.stderr)


def _hf_token(token: str | None) -> str | bool:
    """The token to send: the argument, else HF_TOKEN, else False (never a stored login token)."""
    return token or os.environ.get("HF_TOKEN") or False


# -------------------------------------------------------------------------------------- verification


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
                                   allow_patterns=pin.allow_patterns, cache_dir=cache_dir(cache) / "hub",
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


def download_url(url: str, dest: Path, expected_sha256: str | None = None) -> str:
    """Stream ``url`` into ``dest`` atomically and return its SHA-256; ChecksumError (nothing written) when
    ``expected_sha256`` is given and differs; FetchError (redacted) when the download fails."""
    digest = hashlib.sha256()
    try:
        with atomic_path(dest) as tmp:
            try:
                with open(tmp, "wb") as out, urllib.request.urlopen(url, timeout=_URL_TIMEOUT_S) as resp:
                    while chunk := resp.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
            except OSError as exc:  # urllib's URLError and HTTPError are OSErrors
                raise FetchError(redact(f"{url}: download failed: {type(exc).__name__}: {exc}")) from None
            if expected_sha256 and digest.hexdigest() != expected_sha256:
                raise ChecksumError(f"{url} ({dest.name})", expected_sha256, digest.hexdigest())
    except ValueError as exc:  # urllib rejects a malformed URL with ValueError
        raise FetchError(redact(f"{url}: download failed: {exc}")) from None
    return digest.hexdigest()


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
    actual = download_url(pin.url, dest, pin.sha256)
    if not pin.sha256:
        _warn(f"{pin.url}: no sha256 pinned, unverified (downloaded sha256 {actual}; "
              f"run `pinbench fetch {pin.recipe} --lock` to pin it)")
    return dest
