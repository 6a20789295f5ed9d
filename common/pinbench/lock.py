"""Resolving pins that are still null (an HF revision, a file's SHA-256) on a connected machine.

``pinbench fetch <recipe> --lock`` asks the hub for the current commit of a repo pinned ``lock: required`` and
hashes the files whose SHA-256 is null, then writes the values into pins.yaml, keeping its comments.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml
from huggingface_hub import HfApi, hf_hub_download

from pinbench.cache import cache_dir, is_offline, url_path
from pinbench.downloads import FetchError, _hf_token, _warn, download_url
from pinbench.files import sha256_file, write_atomic
from pinbench.pins import HEX40, load_pins
from pinbench.provenance import redact

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
                                            cache_dir=cache_dir(cache) / "hub", token=auth)
                except Exception as exc:
                    raise FetchError(redact(f"{pin.repo_id}@{revision}: {rel}: download failed: "
                                            f"{type(exc).__name__}: {exc}")) from None
                digest = sha256_file(local)
                updates[("huggingface", name, "sha256", rel)] = digest
                changes.append(f"huggingface.{name}.sha256[{rel}] = {digest}")
    for name, pin in pins.urls.items():
        if pin.sha256 is None:
            unverified = url_path(pin, cache)
            digest = download_url(pin.url, unverified)
            final = url_path(replace(pin, sha256=digest), cache)
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(unverified, final)
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
    write_atomic(path, edited)
    load_pins(path)
    return changes
