"""Helpers for the RememBench tests: valid rows to mutate, and a small release on disk."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest


def restamp(data: Path) -> None:
    """Name every file of a copy of the fixture data, as a test changed it on purpose, with its SHA-256 in the copy's
    stamp (manifest.json): a file the stamp does not name as it is, is data changed by hand, which a run or the
    annotation page writes again (``pinbench.core.fixture_data``)."""
    manifest = json.loads((data / "manifest.json").read_text())
    manifest["files"] = {path.relative_to(data).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
                         for path in sorted(data.rglob("*")) if path.is_file() and path != data / "manifest.json"}
    (data / "manifest.json").write_text(json.dumps(manifest))


def replace_annotations(data: Path, text: str) -> None:
    """Put ``text`` in a copy of the fixture data as its annotations (``restamp``)."""
    (data / "annotations.json").write_text(text)
    restamp(data)


def t2v_row(**changes) -> dict:
    row = {"scene_id": "scene-a", "source_index": 7, "target_description": "a red kite",
           "prompts": ["a kite appears", "the kite flies away", "empty sky", "the kite returns"],
           "prompt_start_seconds": [0.0, 3.6, 6.2, 11.2], "seed": "9007199254740993", "num_frames": 379,
           "fps": 24, "width": 1376, "height": 768, "num_chunks": 23, "denoising_steps_per_chunk": 4}
    row.update(changes)
    return row


def i2v_row(**changes) -> dict:
    row = {"sample_id": "abc-rotation_180", "scene_id": "abc", "scene_type": "outdoor", "prompt": "a street",
           "image_path": "images/abc.png", "trajectory_path": "trajectories/abc-rotation_180.npz",
           "setting": "rotation_180", "rotation_degrees": 180, "direction": "left", "translation": False,
           "seed": "0", "num_frames": 253, "fps": 16, "width": 832, "height": 480, "num_chunks": 16,
           "latent_frames": 64, "denoising_steps_per_chunk": 4, "pose_samples": 257, "intrinsics_samples": 1}
    row.update(changes)
    return row


def write_jsonl(path: Path, rows: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def write_checksums(root: Path) -> Path:
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name != "checksums.sha256")
    lines = [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.relative_to(root).as_posix()}\n" for p in files]
    (root / "checksums.sha256").write_text("".join(lines))
    return root / "checksums.sha256"


@pytest.fixture
def release_dir(tmp_path: Path) -> Path:
    """A minimal RememBench layout (one T2V and one I2V row) with a matching checksums.sha256."""
    root = tmp_path / "RememBench"
    write_jsonl(root / "data/t2v/test.jsonl", [t2v_row()])
    write_jsonl(root / "data/i2v/test.jsonl", [i2v_row()])
    write_checksums(root)
    return root


def fixture_config(out: Path, **options: str):
    """The fixture run's configuration (CPU), with ``options`` on top."""
    from pinbench.core.recipe import get_recipe

    return get_recipe("remembench").config(out_dir=out, fixture=True, offline=True,
                                           options={"device": "cpu", **options}, env={})


@pytest.fixture(scope="session")
def fixture_run(tmp_path_factory) -> tuple[Path, object]:
    """One fixture run for every test that reads it: (run directory, outcome). Tests must not alter it."""
    from pinbench.ops.launch import run_recipe

    out = tmp_path_factory.mktemp("fixture-run")
    return out, run_recipe(fixture_config(out))


@pytest.fixture(scope="session")
def built_fixture(fixture_run):
    """The fixture's data (release, rollouts, tiny CLIP) that ``fixture_run`` scored. Tests must not alter it."""
    from pinbench_recipes.remembench.fixture import build_fixture

    return build_fixture(fixture_run[0] / "fixture_data")


@pytest.fixture(scope="session")
def fixture_scenes(fixture_run) -> dict[str, dict]:
    """The fixture run's T2V scene rows (scenes.jsonl), by scene id."""
    rows = [json.loads(line) for line in (fixture_run[0] / "scenes.jsonl").read_text().splitlines()]
    return {r["scene_id"]: r for r in rows if r["group"] == "t2v"}
