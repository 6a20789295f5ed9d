"""I2V conditioning frames from local DL3DV-like archives: member choice, crop/resize, hash checks."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pinbench_recipes.remembench.i2v_images import (
    first_image_member,
    main,
    prepare_all,
    prepare_image,
    read_sources,
    rgb_sha256,
)
from pinbench_recipes.remembench.tests.conftest import i2v_row, write_checksums, write_jsonl


def _png(seed: int, size=(96, 54)) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def make_archive(path: Path, members: dict[str, bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():  # written out of order on purpose
            archive.writestr(name, data)
    return path


MEMBERS = {"scene/images/frame_00002.png": _png(2), "scene/": b"", "scene/meta.json": b"{}",
           "scene/images/frame_00010.png": _png(10), "scene/images/frame_00001.png": _png(1)}


def expected_hash(member: str) -> str:
    return rgb_sha256(prepare_image(Image.open(io.BytesIO(MEMBERS[member]))))


def test_first_image_member_is_lexicographic():
    assert first_image_member(list(MEMBERS)) == "scene/images/frame_00001.png"
    assert first_image_member(["b/2.JPG", "a/x.txt", "b/10.jpg"]) == "b/10.jpg"
    with pytest.raises(ValueError, match="no image member"):
        first_image_member(["a.txt", "dir/"])


def test_centre_crop_then_lanczos_resize():
    wide = Image.fromarray(np.zeros((540, 960, 3), np.uint8))
    assert prepare_image(wide).size == (832, 480)
    marked = np.zeros((540, 960, 3), np.uint8)
    marked[:, :12] = 255  # outside the 936-pixel centre crop of a 960 x 540 frame
    marked[:, -12:] = 255
    assert np.asarray(prepare_image(Image.fromarray(marked))).max() == 0
    tall = Image.fromarray(np.zeros((1000, 832, 3), np.uint8))
    assert prepare_image(tall).size == (832, 480)
    gray = Image.fromarray(np.full((480, 832), 7, np.uint8))
    assert prepare_image(gray).mode == "RGB"


def sources_file(path: Path, digest: str, scene: str = "abc") -> Path:
    record = {"scene_id": scene, "image_path": f"images/{scene}.png", "rgb_sha256": digest,
              "source_repo": "DL3DV/DL3DV-ALL-960P", "source_archive": f"1K/{scene}.zip",
              "source_revision": "c" * 40}
    return write_jsonl(path, [record])


def test_prepare_from_local_archives_verifies_and_skips(tmp_path):
    make_archive(tmp_path / "dl3dv/1K/abc.zip", MEMBERS)
    records = read_sources(sources_file(tmp_path / "sources.jsonl", expected_hash("scene/images/frame_00001.png")))
    out = tmp_path / "frames"
    first = prepare_all(records, ["abc"], out, source_dir=tmp_path / "dl3dv")
    assert first == {"verified": [], "prepared": ["abc"], "failed": []}
    image = Image.open(out / "images/abc.png")
    assert image.size == (832, 480) and rgb_sha256(image) == records["abc"].rgb_sha256
    assert prepare_all(records, ["abc"], out, source_dir=tmp_path / "dl3dv")["verified"] == ["abc"]


def test_hash_mismatch_is_refused_and_nothing_is_written(tmp_path):
    make_archive(tmp_path / "dl3dv/1K/abc.zip", MEMBERS)
    records = read_sources(sources_file(tmp_path / "s.jsonl", expected_hash("scene/images/frame_00002.png")))
    outcome = prepare_all(records, ["abc", "unknown"], tmp_path / "frames", source_dir=tmp_path / "dl3dv")
    assert outcome["prepared"] == [] and len(outcome["failed"]) == 2
    assert "refusing a different conditioning frame" in outcome["failed"][0]
    assert "not in sources/i2v_images.jsonl" in outcome["failed"][1]
    assert not (tmp_path / "frames/images/abc.png").exists()


def test_existing_wrong_frame_is_reported_not_replaced(tmp_path):
    make_archive(tmp_path / "dl3dv/1K/abc.zip", MEMBERS)
    records = read_sources(sources_file(tmp_path / "s.jsonl", expected_hash("scene/images/frame_00001.png")))
    target = tmp_path / "frames/images/abc.png"
    target.parent.mkdir(parents=True)
    target.write_bytes(_png(99))
    outcome = prepare_all(records, ["abc"], tmp_path / "frames", source_dir=tmp_path / "dl3dv")
    assert "existing frame has RGB sha256" in outcome["failed"][0]
    assert target.read_bytes() == _png(99)


def test_extracted_folders_and_the_command_line_with_limit(tmp_path):
    folder = tmp_path / "dl3dv/1K/abc"
    for name, data in MEMBERS.items():
        if not name.endswith("/"):
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
    # the extracted folder holds the archive's top-level directory too: paths stay the same
    release = tmp_path / "RememBench"
    write_jsonl(release / "data/i2v/test.jsonl", [i2v_row(), i2v_row(sample_id="zzz-rotation_180", scene_id="zzz")])
    sources_file(release / "sources/i2v_images.jsonl", expected_hash("scene/images/frame_00001.png"))
    write_checksums(release)
    code = main(["--source-dir", str(tmp_path / "dl3dv"), "--out", str(tmp_path / "frames"), "--limit", "1",
                 "--dataset-dir", str(release)])
    assert code == 0 and (tmp_path / "frames/images/abc.png").is_file()
    code = main(["--source-dir", str(tmp_path / "dl3dv"), "--out", str(tmp_path / "frames"),
                 "--dataset-dir", str(release)])
    assert code == 1  # scene zzz has no source record: reported, the valid frame is kept
    assert rgb_sha256(Image.open(tmp_path / "frames/images/abc.png")) == expected_hash("scene/images/frame_00001.png")
