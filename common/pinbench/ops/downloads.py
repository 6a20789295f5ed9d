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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pinbench.core.files import atomic_path, sha256_file
from pinbench.core.options import is_offline
from pinbench.core.pins import HFPin, PinsError, URLPin, load_pins
from pinbench.core.provenance import redact
from pinbench.ops.cache import cache_dir, hf_snapshot_dir, url_path
from pinbench.ops.network import NEXT, fetch_command, network_failure, network_reason, ways_on
from pinbench.ops.watch import Watcher, bytes_under

_GLOB_CHARS = re.compile(r"[*?\[]")
_CHUNK = 1 << 20
_URL_TIMEOUT_S = 60


class NotFetchedError(RuntimeError):
    """Offline and the input is not in the cache (or a local copy lacks a file)."""


class UnresolvedPinError(RuntimeError):
    """A pin marked ``resolve: required`` has no revision yet; ``pinbench fetch`` resolves it on this machine."""


class FetchError(RuntimeError):
    """A download failed; the message is redacted (no token can appear in it)."""


class NetworkError(FetchError):
    """The network failed (no route, name, answer): one line saying what could not be fetched and the way on."""

    def __init__(self, what: str, reason: str, recipe: str | None = None, pin_key: str | None = None) -> None:
        self.what, self.reason = what, reason
        text = (network_failure(what, reason, recipe, pin_key) if recipe is not None
                else f"{what}: could not be fetched, the network failed ({reason})")
        super().__init__(redact(text))

    def for_pin(self, pin: HFPin | URLPin) -> NetworkError:
        """The same failure with the recipe's ways on (which option takes a local copy of ``pin``)."""
        return NetworkError(self.what, self.reason, pin.recipe, pin_key(pin))


def snapshot_download(*args: Any, **kwargs: Any) -> str:
    """huggingface_hub's ``snapshot_download``, imported when a run first needs the hub (0.2 s of imports that a
    run which downloads nothing, a score-only CameraBench run, never pays)."""
    from huggingface_hub import snapshot_download as download

    return download(*args, **kwargs)


def pin_key(pin: HFPin | URLPin) -> str | None:
    """``huggingface/<name>`` or ``urls/<name>`` of ``pin`` in its recipe's pins.yaml (None when not found)."""
    from pinbench.core.config import RecipeError
    from pinbench.core.recipe import get_recipe

    try:
        pins = load_pins(get_recipe(pin.recipe).pins_path)
    except (RecipeError, PinsError):
        return None
    if isinstance(pin, URLPin):
        return next((f"urls/{name}" for name, other in pins.urls.items() if other.url == pin.url), None)
    return next((f"huggingface/{name}" for name, other in pins.huggingface.items() if other.repo_id == pin.repo_id),
                None)


def describe_hf(pin: HFPin) -> str:
    """What an HF pin fetches, for messages: repo, revision, type and files (the first few patterns)."""
    patterns = pin.allow_patterns or []
    files = ", ".join(patterns[:3]) + (f", ... ({len(patterns)} patterns)" if len(patterns) > 3 else "")
    return f"{pin.repo_id}@{pin.revision} ({pin.repo_type}; files: {files or 'all'})"


class PinMismatchError(RuntimeError):
    """What is on disk is not what the pin names (another revision, another content)."""


class ChecksumError(PinMismatchError):
    """A file's SHA-256 differs from its pin."""

    def __init__(self, path: Path | str, expected: str, actual: str) -> None:
        self.path, self.expected, self.actual = Path(path), expected, actual
        super().__init__(f"{path}: sha256 mismatch: expected {expected}, got {actual}")


class SizeMismatchError(PinMismatchError):
    """A file's size differs from its pin (checked before any hashing)."""


def not_fetched(what: str, where: Path, recipe: str, pin_keys: str | list[str] | None) -> NotFetchedError:
    """Offline and ``what`` is not in the cache at ``where``: the error names every way forward (fetch it on a
    connected machine, the option that takes a local copy of ``pin_keys``, a run that downloads nothing)."""
    return NotFetchedError(f"{what}: not in cache {where}{NEXT}{ways_on(recipe, pin_keys)}")


def gated_refusal(exc: Exception, pin: HFPin, token: str | bool) -> FetchError | None:
    """A gated repo refused the hub call: one line naming the pin and HF_TOKEN (the hub's own text is a paragraph
    naming neither); None for any other failure."""
    from huggingface_hub.errors import GatedRepoError

    if not isinstance(exc, GatedRepoError):
        return None
    page = f"https://huggingface.co/{'' if pin.repo_type == 'model' else pin.repo_type + 's/'}{pin.repo_id}"
    why = ("HF_TOKEN's account has no access to it" if token
           else "set HF_TOKEN to a token of an account that has access to it")
    key = pin_key(pin)
    return FetchError(f"{f'{key} ({pin.repo_id})' if key else pin.repo_id} is gated: {why} (accept its licence on "
                      f"{page})")


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


def git_blob_id(path: Path | str) -> str:
    """The git blob id of a file's bytes (SHA-1 of ``blob <size>\\0<content>``), as ``git hash-object`` prints it."""
    digest = hashlib.sha1(f"blob {Path(path).stat().st_size}\0".encode(), usedforsecurity=False)
    with open(path, "rb") as fh:   # a loop, as sha256_file's: no hashlib.file_digest on Python 3.10
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify_url_file(pin: URLPin, path: Path | str, sha256: str | None = None) -> str:
    """Check ``path`` against every content pin of ``pin`` and return its full SHA-256.

    Size first (cheap), then the full SHA-256 when pinned, else the partial pins: the SHA-256 prefix and
    the git blob id. Every mismatch names the file and both values. ``sha256`` skips re-hashing a file
    whose digest was computed while downloading it.
    """
    path = Path(path)
    size = path.stat().st_size
    if pin.size is not None and size != pin.size:
        raise SizeMismatchError(f"{path}: size mismatch: expected {pin.size} bytes, got {size}")
    actual = sha256 or sha256_file(path)
    if pin.sha256:
        if actual != pin.sha256:
            raise ChecksumError(path, pin.sha256, actual)
        return actual
    if pin.sha256_prefix and not actual.startswith(pin.sha256_prefix):
        raise ChecksumError(path, f"{pin.sha256_prefix}... (prefix)", actual)
    if pin.git_blob:
        blob = git_blob_id(path)
        if blob != pin.git_blob:
            raise PinMismatchError(f"{path}: git blob id mismatch: expected {pin.git_blob}, got {blob}")
    return actual


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
                  f"(`{fetch_command(pin.recipe)}` records one in this machine's resolved pins)")
        else:
            verify_sha256(root / rel, digest)


# ----------------------------------------------------------------------------------- Hugging Face


def _require_revision(pin: HFPin) -> str:
    if pin.revision is None:
        raise UnresolvedPinError(f"{pin.repo_id}: revision is null (`resolve: required`) and not in this machine's "
                                 f"resolved pins (`{fetch_command(pin.recipe)}` resolves it and records it for this "
                                 f"machine){NEXT}{ways_on(pin.recipe, pin_key(pin))}")
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
    # Downloaded bytes as observed in the repo's cache folder: a line a minute (huggingface_hub draws its own
    # bars on a terminal), so a log shows a multi-GB download moving.
    repo_folder = hf_snapshot_dir(pin, cache).parents[1]
    before = bytes_under(repo_folder)
    watcher = Watcher(f"fetch {pin.label}", lambda: bytes_under(repo_folder) - before, unit="bytes", tty=False)
    try:
        with watcher:
            folder = snapshot_download(pin.repo_id, repo_type=pin.repo_type, revision=revision,
                                       allow_patterns=pin.allow_patterns, cache_dir=cache_dir(cache) / "hub",
                                       token=_hf_token(token))
    except Exception as exc:  # any hub/HTTP error: report it redacted, without the chained traceback
        gated = gated_refusal(exc, pin, _hf_token(token))
        if gated is not None:
            raise gated from None
        reason = network_reason(exc)
        if reason is not None:
            raise NetworkError(describe_hf(pin), reason).for_pin(pin) from None
        raise FetchError(redact(f"{pin.label}: download failed: {type(exc).__name__}: {exc}")) from None
    root = Path(folder)
    missing = _missing(pin, root)
    if missing:
        raise FetchError(f"{pin.label}: not in the repo at this revision: {', '.join(missing)}")
    _verify_files(pin, root)
    return root


def _check_local_copy(pin: HFPin, root: Path) -> None:
    """A local copy must hold the pinned files; its content is what is checked, file by file (SHA-256).

    Which revision a copy was downloaded at is not read from huggingface_hub's private bookkeeping
    under ``.cache/huggingface/``: a copy of another revision differs in content, which the pinned
    SHA-256s catch; without any pinned SHA-256 the copy cannot be verified and a warning says so.
    """
    if not root.is_dir():
        raise NotFetchedError(f"{pin.label}: local copy {root} is not a directory")
    missing = _missing(pin, root)
    if missing:
        raise NotFetchedError(f"{pin.label}: local copy {root} lacks {', '.join(missing)}")
    if not pin.sha256:
        _warn(f"{pin.label}: local copy {root} has no pinned sha256; it cannot be verified")


def cached_snapshot(pin: HFPin, cache: Path | str | None = None) -> Path | None:
    """The cached snapshot folder of a pin's revision, found through huggingface_hub's public cache API.

    ``snapshot_download(..., local_files_only=True)`` never touches the network; recent huggingface_hub
    versions also refuse a snapshot their cached file listing shows incomplete (IncompleteSnapshotError,
    a LocalEntryNotFoundError). None when absent.
    """
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        folder = snapshot_download(pin.repo_id, repo_type=pin.repo_type, revision=_require_revision(pin),
                                   allow_patterns=pin.allow_patterns, cache_dir=cache_dir(cache) / "hub",
                                   local_files_only=True)
    except LocalEntryNotFoundError:
        return None
    return Path(folder)


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
        found = cached_snapshot(pin, cache)
        if found is None:
            raise not_fetched(pin.label, hf_snapshot_dir(pin, cache), pin.recipe, pin_key(pin))
        root = found
        missing = _missing(pin, root)
        if missing:
            raise not_fetched(f"{pin.label} ({', '.join(missing)})", root, pin.recipe, pin_key(pin))
    _verify_files(pin, root)
    return root


# -------------------------------------------------------------------------------------------- URLs


def download_url(url: str, dest: Path, expected_sha256: str | None = None,
                 verify: Callable[[Path, str], object] | None = None) -> str:
    """Stream ``url`` into ``dest`` atomically and return its SHA-256; ChecksumError (nothing written) when
    ``expected_sha256`` is given and differs, or whatever ``verify(tmp_path, sha256)`` raises (nothing written);
    FetchError (redacted) when the download fails."""
    import urllib.request  # http.client, ssl and email: 12 ms that a run from local files never needs

    digest = hashlib.sha256()
    try:
        with atomic_path(dest) as tmp:
            try:
                with open(tmp, "wb") as out, urllib.request.urlopen(url, timeout=_URL_TIMEOUT_S) as resp:
                    while chunk := resp.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
            except OSError as exc:  # urllib's URLError and HTTPError are OSErrors
                reason = network_reason(exc)
                if reason is not None:
                    raise NetworkError(f"{url} (file {dest.name})", reason) from None
                raise FetchError(redact(f"{url}: download failed: {type(exc).__name__}: {exc}")) from None
            if expected_sha256 and digest.hexdigest() != expected_sha256:
                raise ChecksumError(f"{url} ({dest.name})", expected_sha256, digest.hexdigest())
            if verify is not None:
                verify(tmp, digest.hexdigest())
    except ValueError as exc:  # urllib rejects a malformed URL with ValueError
        raise FetchError(redact(f"{url}: download failed: {exc}")) from None
    return digest.hexdigest()


def _locate_url(pin: URLPin, cache: Path | str | None) -> Path:
    dest = url_path(pin, cache)
    if not dest.is_file():
        raise not_fetched(pin.url, dest, pin.recipe, pin_key(pin))
    verify_url_file(pin, dest)
    if not pin.verifiable:
        _warn(f"{pin.url}: no sha256 pinned, unverified "
              f"(`{fetch_command(pin.recipe)}` records one in this machine's resolved pins)")
    return dest


def fetch_url(pin: URLPin, *, cache: Path | str | None = None) -> Path:
    """Download a URL pin into <root>/urls/<sha256[:16]>/<filename>, verified; reuse a good cached copy."""
    dest = url_path(pin, cache)
    if is_offline():
        return _locate_url(pin, cache)
    if dest.is_file():
        try:
            return _locate_url(pin, cache)
        except PinMismatchError as exc:
            _warn(f"{exc}; downloading it again")
    try:
        actual = download_url(pin.url, dest, pin.sha256, verify=lambda tmp, sha: verify_url_file(pin, tmp, sha))
    except NetworkError as exc:
        raise exc.for_pin(pin) from None
    if not pin.verifiable:
        _warn(f"{pin.url}: no sha256 pinned, unverified (downloaded sha256 {actual}; "
              f"`{fetch_command(pin.recipe)}` records it in this machine's resolved pins)")
    return dest
