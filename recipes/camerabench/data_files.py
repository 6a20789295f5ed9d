"""The official data files, pinned by commit and SHA-256, and the directory they are read from.

t2v_metrics keeps the CameraBench test set in git (``camerabench/data``, 99 files, 5 MB). The recipe does
not vendor them: ``data_manifest.json`` lists every file with its SHA-256 and size at the pinned commit,
``pinbench fetch camerabench`` downloads each one from that commit (checked against its digest), and a
run reads them from a directory assembled in the cache. A local copy (``-o data=DIR``, e.g. the
``camerabench/data`` folder a user ran upstream Script 1 from) must hold exactly these files.

Regenerate the manifest from a checkout at another commit with
``python -m pinbench_recipes.camerabench.data_files DATA_DIR COMMIT``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pinbench.core.files import cache_root, not_regular, sha256_file
from pinbench.core.pins import URLPin
from pinbench.ops.cache import url_path
from pinbench.ops.downloads import fetch_url, locate, not_fetched

MANIFEST_PATH = Path(__file__).resolve().parent / "data_manifest.json"
_RAW_URL = "https://raw.githubusercontent.com/{repo}/{commit}/{path}/{rel}"
# The pins.yaml entry the data files come from (their manifest); `-o data=DIR` is the local copy instead of it.
DATA_PIN = "upstream/t2v_metrics"
# Files under the data folder that are not data (the README) are listed but not required to run.
_DATA_PARTS = ("binary_classification/", "vqa_and_retrieval/", "caption_data.json")


class DataFilesError(ValueError):
    """The data directory is not the pinned one; the message is one line naming the file."""


@dataclass(frozen=True)
class DataManifest:
    repo: str
    commit: str
    path: str  # folder inside the repo
    files: dict[str, tuple[str, int]]  # relative path -> (sha256, bytes)

    @property
    def data_files(self) -> dict[str, tuple[str, int]]:
        return {rel: v for rel, v in self.files.items() if rel.startswith(_DATA_PARTS)}

    def url_pins(self, recipe: str = "camerabench") -> dict[str, URLPin]:
        """One commit-pinned URL per data file, checked against its SHA-256 on download."""
        return {rel: URLPin(url=_RAW_URL.format(repo=self.repo, commit=self.commit, path=self.path, rel=rel),
                            sha256=sha, filename=Path(rel).name, recipe=recipe)
                for rel, (sha, _) in self.data_files.items()}


def load_manifest(path: Path = MANIFEST_PATH) -> DataManifest:
    data = json.loads(path.read_text(encoding="utf-8"))
    files = {rel: (entry["sha256"], int(entry["bytes"])) for rel, entry in data["files"].items()}
    return DataManifest(repo=data["repo"], commit=data["commit"], path=data["path"], files=files)


def verify_data_dir(root: Path, manifest: DataManifest) -> None:
    """Raise DataFilesError unless ``root`` holds every pinned data file, byte for byte, and no other.

    Extra ``.jsonl`` files would be picked up by the official Script 1 as more splits or tasks, so they
    are refused too.
    """
    if not root.is_dir():
        raise DataFilesError(f"{root}: data directory not found")
    for rel, (sha, size) in sorted(manifest.data_files.items()):
        path = root / rel
        if not path.is_file():
            if path.exists():   # a folder, a FIFO: there, but no file
                raise DataFilesError(f"{path}: {not_regular(path.stat().st_mode)}, not a regular file; expected the "
                                     f"file at {manifest.repo}@{manifest.commit}")
            raise DataFilesError(f"{path}: missing (expected the file at {manifest.repo}@{manifest.commit})")
        if path.stat().st_size != size or sha256_file(path) != sha:
            raise DataFilesError(f"{path}: differs from {manifest.repo}@{manifest.commit} "
                                 f"(sha256 {sha256_file(path)}, pinned {sha})")
    expected = set(manifest.data_files)
    for path in sorted(root.rglob("*.jsonl")):
        rel = path.relative_to(root).as_posix()
        if rel not in expected:
            raise DataFilesError(f"{path}: not in the pinned data ({manifest.repo}@{manifest.commit}); "
                                 "remove it, Script 1 would score it as another split or task")


def cached_data_dir(manifest: DataManifest, cache: Path | None = None) -> Path:
    """Where the assembled data directory of the pinned commit lives in the cache."""
    return (cache if cache is not None else cache_root()) / "camerabench" / f"data-{manifest.commit}"


def fetch_data(manifest: DataManifest, cache: Path | None = None) -> Path:
    """Download every data file (verified), assemble the data directory in the cache, return it."""
    pins = manifest.url_pins()
    sources = {rel: fetch_url(pin, cache=cache) for rel, pin in pins.items()}
    return _assemble(manifest, sources, cached_data_dir(manifest, cache))


def locate_data(manifest: DataManifest, cache: Path | None = None) -> Path:
    """The assembled data directory without network; NotFetchedError says how many files are missing and every
    way forward (fetch, -o data=DIR, a run that downloads nothing)."""
    dest = cached_data_dir(manifest, cache)
    if dest.is_dir():
        verify_data_dir(dest, manifest)
        return dest
    pins = manifest.url_pins()
    missing = [rel for rel, pin in pins.items() if not url_path(pin, cache).is_file()]
    if missing:
        raise not_fetched(f"the CameraBench data folder ({len(missing)} of its {len(pins)} files of "
                          f"{manifest.repo}@{manifest.commit[:12]}:{manifest.path}, e.g. {missing[0]})", dest,
                          "camerabench", DATA_PIN)
    sources = {rel: locate(pin, cache=cache) for rel, pin in pins.items()}
    return _assemble(manifest, sources, dest)


def _assemble(manifest: DataManifest, sources: dict[str, Path], dest: Path) -> Path:
    """Copy the verified files into ``dest`` (via a temporary directory, so ``dest`` is all or nothing)."""
    if not dest.is_dir():
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
        try:
            for rel, src in sources.items():
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, tmp / rel)
            os.replace(tmp, dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    verify_data_dir(dest, manifest)
    return dest


def write_manifest(data_dir: Path, repo: str, commit: str, path: str, out: Path = MANIFEST_PATH) -> None:
    """Record every file under ``data_dir`` (a checkout of ``path`` at ``commit``) with its digest."""
    files = {p.relative_to(data_dir).as_posix(): {"sha256": sha256_file(p), "bytes": p.stat().st_size}
             for p in sorted(data_dir.rglob("*")) if p.is_file()}
    out.write_text(json.dumps({"repo": repo, "commit": commit, "path": path, "files": files}, indent=1) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m pinbench_recipes.camerabench.data_files DATA_DIR COMMIT")
    write_manifest(Path(sys.argv[1]), "linzhiqiu/t2v_metrics", sys.argv[2], "camerabench/data")
