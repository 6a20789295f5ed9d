"""I2V conditioning frames: the first image of each DL3DV scene archive, cropped, resized and hash-checked.

Why: RememBench does not redistribute DL3DV pixels. Each user obtains them under DL3DV's terms, either
from a local copy of ``DL3DV/DL3DV-ALL-960P`` or by reading only the first image member of each
archive from Hugging Face with their own authorised token (HTTP range requests, 64 KiB blocks). The
frame is the first image member in lexicographic archive-path order, centre-cropped to 832:480 and
resized to 832 x 480 with Lanczos; the SHA-256 of its RGB pixels (``PIL.Image.tobytes()`` of the RGB
image, independent of the PNG encoding) must equal ``sources/i2v_images.jsonl``. A mismatch is refused,
never substituted. Frames already prepared and valid are skipped; ``--limit N`` prepares N scenes.

    python -m pinbench_recipes.remembench.i2v_images --source-dir /data/DL3DV-ALL-960P --out /data/remembench-images
    python -m pinbench_recipes.remembench.i2v_images --download --limit 1 --out /data/remembench-images
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from PIL import Image

from pinbench.core.files import atomic_path
from pinbench.core.provenance import redact
from pinbench_recipes.remembench.dataset import DatasetError, iter_jsonl
from pinbench_recipes.remembench.release import (
    DEFAULT_DATASET_ID,
    DEFAULT_DATASET_REVISION,
    open_release,
    parse_dataset_spec,
)

SOURCES_FILE = "sources/i2v_images.jsonl"
I2V_TEST = "data/i2v/test.jsonl"
TARGET_SIZE = (832, 480)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
BLOCK_SIZE = 64 * 1024


@dataclass(frozen=True)
class SourceRecord:
    scene_id: str
    image_path: str
    rgb_sha256: str
    source_repo: str
    source_archive: str
    source_revision: str


def read_sources(path: Path) -> dict[str, SourceRecord]:
    """scene_id -> where its frame comes from and the RGB hash it must have."""
    records = {}
    for number, data in iter_jsonl(path):
        try:
            record = SourceRecord(**{k: data[k] for k in SourceRecord.__dataclass_fields__})
        except KeyError as exc:
            raise DatasetError(f"{path}:{number}: missing field {exc.args[0]!r}") from None
        records[record.scene_id] = record
    return records


def first_image_member(names: Sequence[str]) -> str:
    """The first image path in lexicographic order (directories and other files skipped)."""
    images = sorted(n for n in names if n.lower().endswith(IMAGE_SUFFIXES) and not n.endswith("/"))
    if not images:
        raise DatasetError(f"no image member among {len(names)} archive entries")
    return images[0]


def archive_first_image(stream: IO[bytes]) -> Image.Image:
    """The first image of a zip archive read from a seekable stream (only that member is read)."""
    with zipfile.ZipFile(stream) as archive:
        data = archive.read(first_image_member(archive.namelist()))
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


def folder_first_image(folder: Path) -> Image.Image:
    """The same choice in an extracted scene folder (paths relative to the folder, POSIX order)."""
    names = [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()]
    image = Image.open(folder / first_image_member(names))
    image.load()
    return image


def prepare_image(image: Image.Image, size: tuple[int, int] = TARGET_SIZE) -> Image.Image:
    """RGB, centre-cropped to the target aspect ratio, Lanczos-resized to ``size``."""
    image = image.convert("RGB")
    width, height = image.size
    target_w, target_h = size
    if width * target_h > height * target_w:  # too wide: crop the sides
        crop_w = round(height * target_w / target_h)
        left = (width - crop_w) // 2
        box = (left, 0, left + crop_w, height)
    else:  # too tall (or exact): crop top and bottom
        crop_h = round(width * target_h / target_w)
        top = (height - crop_h) // 2
        box = (0, top, width, top + crop_h)
    return image.crop(box).resize(size, Image.Resampling.LANCZOS)


def rgb_sha256(image: Image.Image) -> str:
    return hashlib.sha256(image.convert("RGB").tobytes()).hexdigest()


def _local_source(source_dir: Path, record: SourceRecord) -> Image.Image:
    archive = source_dir / record.source_archive
    if archive.is_file():
        with archive.open("rb") as fh:
            return archive_first_image(fh)
    folder = archive.with_suffix("") if archive.suffix == ".zip" else archive
    if folder.is_dir():
        return folder_first_image(folder)
    raise DatasetError(f"{archive}: neither the archive nor an extracted folder {folder} exists")


def _remote_source(record: SourceRecord, token: str | None) -> Image.Image:  # pragma: no cover - network
    from huggingface_hub import HfFileSystem

    fs = HfFileSystem(token=token or False)
    path = f"datasets/{record.source_repo}@{record.source_revision}/{record.source_archive}"
    with fs.open(path, "rb", block_size=BLOCK_SIZE) as stream:
        return archive_first_image(stream)


def _save_png(image: Image.Image, target: Path) -> None:
    with atomic_path(target, suffix=".png") as tmp:
        image.save(tmp, format="PNG")


def prepare_all(records: dict[str, SourceRecord], scene_ids: Sequence[str], out_dir: Path, *,
                source_dir: Path | None = None, token: str | None = None) -> dict[str, list[str]]:
    """Prepare frames for ``scene_ids``; returns {"verified", "prepared", "failed"} scene lists.

    A failure (missing source, hash mismatch) is reported for its scene and the others continue;
    nothing already prepared is touched unless it fails its own hash check.
    """
    outcome: dict[str, list[str]] = {"verified": [], "prepared": [], "failed": []}
    for scene in scene_ids:
        record = records.get(scene)
        if record is None:
            outcome["failed"].append(f"{scene}: not in {SOURCES_FILE}")
            continue
        target = out_dir / record.image_path
        try:
            if target.is_file():
                actual = rgb_sha256(Image.open(target))
                if actual != record.rgb_sha256:
                    raise DatasetError(f"{target}: existing frame has RGB sha256 {actual}, expected "
                                       f"{record.rgb_sha256}; delete it to prepare it again")
                outcome["verified"].append(scene)
                continue
            raw = _local_source(source_dir, record) if source_dir else _remote_source(record, token)
            image = prepare_image(raw)
            actual = rgb_sha256(image)
            if actual != record.rgb_sha256:
                raise DatasetError(f"{scene}: prepared frame has RGB sha256 {actual}, expected "
                                   f"{record.rgb_sha256}; refusing a different conditioning frame")
            _save_png(image, target)
            outcome["prepared"].append(scene)
        except (DatasetError, OSError, zipfile.BadZipFile) as exc:
            outcome["failed"].append(f"{scene}: {exc}")
    return outcome


def scene_order(test_jsonl: Path) -> list[str]:
    """Unique scene ids in the order of the I2V test rows (``--limit`` takes the first N)."""
    return list(dict.fromkeys(str(data.get("scene_id")) for _, data in iter_jsonl(test_jsonl)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pinbench_recipes.remembench.i2v_images",
                                     description="Prepare and verify RememBench I2V conditioning frames.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--source-dir", type=Path, help="local DL3DV-ALL-960P copy (archives or extracted folders)")
    source.add_argument("--download", action="store_true", help="read first images from HF with HF_TOKEN")
    parser.add_argument("--out", type=Path, required=True, help="where frames go (<out>/<image_path>)")
    parser.add_argument("--limit", type=int, help="only the first N scenes")
    parser.add_argument("--dataset", default=f"{DEFAULT_DATASET_ID}@{DEFAULT_DATASET_REVISION}")
    parser.add_argument("--dataset-dir", type=Path, help="a local RememBench copy")
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be positive")
    repo_id, revision = parse_dataset_spec(args.dataset)
    release = open_release(repo_id, revision, local_dir=args.dataset_dir, download=args.dataset_dir is None)
    scenes = scene_order(release.path(I2V_TEST))[: args.limit]
    records = read_sources(release.path(SOURCES_FILE))
    outcome = prepare_all(records, scenes, args.out, source_dir=args.source_dir,
                          token=os.environ.get("HF_TOKEN") if args.download else None)
    print(f"{len(outcome['prepared'])} prepared, {len(outcome['verified'])} already valid, "
          f"{len(outcome['failed'])} failed (of {len(scenes)} scenes) under {args.out}")
    for line in outcome["failed"]:
        print(f"failed: {redact(line)}", file=sys.stderr)
    return 1 if outcome["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
