"""Where pinned inputs live: one cache root, the Hugging Face hub layout under it, URL files by SHA-256.

Why one root: a run stage must work without network once ``pinbench fetch`` filled the cache, and a
container mounts exactly this one directory. ``PINBENCH_OFFLINE=1`` (or ``HF_HUB_OFFLINE=1``) makes every
lookup local.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from pinbench.core.files import cache_root

if TYPE_CHECKING:
    from pinbench.core.pins import HFPin, URLPin


def cache_dir(cache: Path | str | None) -> Path:
    return Path(cache).expanduser() if cache is not None else cache_root()


def hf_snapshot_dir(pin: HFPin, cache: Path | str | None = None) -> Path:
    """Where huggingface_hub keeps this revision: <root>/hub/<type>s--owner--name/snapshots/<rev>."""
    from huggingface_hub.file_download import repo_folder_name

    folder = repo_folder_name(repo_id=pin.repo_id, repo_type=pin.repo_type)
    return cache_dir(cache) / "hub" / folder / "snapshots" / str(pin.revision)


def url_path(pin: URLPin, cache: Path | str | None = None) -> Path:
    """<root>/urls/<sha256[:16]>/<filename>; unhashed pins go under unverified-<sha256(url)[:16]>."""
    key = pin.sha256[:16] if pin.sha256 else "unverified-" + hashlib.sha256(pin.url.encode()).hexdigest()[:16]
    return cache_dir(cache) / "urls" / key / pin.filename
