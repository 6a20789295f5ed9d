"""Where the RememBench release comes from (HF dataset id + revision, or a local copy) and its checksums.

Why settings rather than constants: the usage guide names ``evanbuzzZ/RememBench`` while the paper's
code fetches ``mosaichunk/RememBench`` at a pinned commit. The id and revision are therefore options
with the paper code's pin as default, both recorded in provenance, and every release file the recipe
reads is checked against the release's own ``checksums.sha256`` before it is used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pinbench.core.config import RecipeError
from pinbench.core.files import FileError, MissingFile, read_data_file, sha256_file
from pinbench.core.options import OptionValues
from pinbench.core.pins import HFPin
from pinbench.ops.downloads import fetch_hf, locate
from pinbench_recipes.remembench.dataset import DatasetError

DEFAULT_DATASET_ID = "mosaichunk/RememBench"
DEFAULT_DATASET_REVISION = "cdeabf0fce9c075876a903a1d5234483ad677fd5"
CHECKSUMS = "checksums.sha256"
_HEX40 = re.compile(r"[0-9a-f]{40}")
_LINE = re.compile(r"([0-9a-fA-F]{64}) [ *]?(.+)")


def parse_dataset_spec(spec: str) -> tuple[str, str]:
    """``owner/name@<40-hex revision>`` -> (repo id, revision); a branch or tag is refused."""
    repo_id, sep, revision = spec.partition("@")
    if not sep or repo_id.count("/") != 1 or not _HEX40.fullmatch(revision):
        raise DatasetError(f"dataset {spec!r} must be owner/name@<40-hex commit> (branches and tags move)")
    return repo_id, revision


def dataset_option(options: OptionValues) -> tuple[str, str]:
    """(repo id, revision) of ``-o dataset``; RecipeError naming the option when it is not pinned."""
    try:
        return parse_dataset_spec(options.dataset)
    except DatasetError as exc:
        raise RecipeError(f"dataset: {exc}") from None


@dataclass
class Release:
    """A RememBench snapshot on disk plus what was verified in it."""

    root: Path
    repo_id: str
    revision: str
    local_copy: bool
    checksums: dict[str, str] = field(default_factory=dict)
    verified: dict[str, str] = field(default_factory=dict)  # relpath -> "verified" | "unlisted"

    def path(self, relpath: str) -> Path:
        """A release file, verified against checksums.sha256 the first time it is asked for."""
        self.verify([relpath])
        return self.root / relpath

    def verify(self, relpaths: list[str]) -> None:
        for rel in relpaths:
            if rel in self.verified:
                continue
            target = self.root / rel
            if not target.is_file():
                raise DatasetError(f"{target}: not in the RememBench release at {self.revision}")
            expected = self.checksums.get(rel)
            if expected is None:
                self.verified[rel] = "unlisted"
                continue
            actual = sha256_file(target)
            if actual != expected:
                raise DatasetError(f"{target}: sha256 {actual} differs from {CHECKSUMS} ({expected}); "
                                   "refusing a modified release file")
            self.verified[rel] = "verified"

    def provenance(self) -> dict[str, object]:
        states = sorted(set(self.verified.values()))
        return {
            "repo_id": self.repo_id, "revision": self.revision, "local_copy": self.local_copy,
            "files_verified": sum(v == "verified" for v in self.verified.values()),
            "files_unlisted": sorted(k for k, v in self.verified.items() if v == "unlisted"),
            "state": "verified" if states == ["verified"] else "partially verified",
        }


def read_checksums(path: Path) -> dict[str, str]:
    """``sha256sum`` format (``<hex>  <path>``, ``*`` for binary mode) -> {relpath: hex}. Read as a data file
    (``read_data_file``): a FIFO there is one line naming it, never a hung view or run."""
    try:
        text = read_data_file(path)
    except MissingFile:
        raise DatasetError(f"{path}: missing; the release cannot be verified") from None
    except FileError as exc:
        raise DatasetError(str(exc)) from None
    sums: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        match = _LINE.fullmatch(raw.strip())
        if match is None:
            raise DatasetError(f"{path}:{number}: not a '<sha256>  <path>' line: {raw[:80]!r}")
        sums[match.group(2).strip().removeprefix("./")] = match.group(1).lower()
    if not sums:
        raise DatasetError(f"{path}: no checksums")
    return sums


def dataset_pin(repo_id: str, revision: str) -> HFPin:
    return HFPin(repo_id=repo_id, revision=revision, repo_type="dataset", recipe="remembench")


def open_release(repo_id: str, revision: str, *, local_dir: Path | None, download: bool) -> Release:
    """The release from ``local_dir``, else from the pinbench cache (downloading if ``download``)."""
    if local_dir is not None:
        root = Path(local_dir).expanduser()
        if not root.is_dir():
            raise DatasetError(f"{root}: RememBench copy not found (dataset_dir)")
        release = Release(root=root, repo_id=repo_id, revision=revision, local_copy=True)
    else:
        pin = dataset_pin(repo_id, revision)
        root = fetch_hf(pin) if download else locate(pin)
        release = Release(root=Path(root), repo_id=repo_id, revision=revision, local_copy=False)
    release.checksums = read_checksums(release.root / CHECKSUMS)
    return release
