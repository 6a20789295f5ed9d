"""Reuse that is never stale (#24): a stored result is reused only by the code that computed it and by the same
inputs, and the same inputs are the same wherever they lie.

* Edit a scoring constant in a copy of a recipe (``pinbench export``), rerun into the same directory: every sample
  is computed again ("5 recomputed: code changed"), none is taken from the sample cache, and the score moves.
* Every fixture gives the same stored records (reuse keys included) and metrics in two run directories, as a run
  on the host and one in an image (``/runs/out``) must.
* Videos moved or copied elsewhere reuse every stored result; ``--verify-inputs`` hashes them all again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from docker_smoke import run_differences
from typer.testing import CliRunner

from pinbench.cli import app
from pinbench.core.recipe import available_recipes, get_recipe
from pinbench.ops.export import export_recipe

RECIPES = sorted(available_recipes())
THRESHOLD = "    return 6.0 * min(height, width) / 256.0\n"   # recipes/dynamic_degree/scoring.py: tau


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))


def _metric(out: Path, name: str) -> float:
    return json.loads((out / "scorecard.json").read_text())["metrics"][name]["value"]


def _counts(out: Path) -> dict[str, int]:
    """What the last unsharded run of the stage did: done, reused, failed (its shard manifest)."""
    return json.loads((out / "shards" / "0-of-1.json").read_text())["summary"]


def test_a_scoring_constant_edited_in_a_copy_of_the_recipe_recomputes_every_sample(tmp_path: Path) -> None:
    copy = export_recipe(get_recipe("dynamic-degree"), tmp_path / "copy")
    out = tmp_path / "run"
    # the sample cache on: the records of the unedited code are there, and must not be found by the edited code
    env = {**os.environ, "PYTHONPATH": str(copy), "PINBENCH_CACHE": str(tmp_path / "cache"),
           "PINBENCH_SAMPLE_CACHE": str(tmp_path / "sample-cache")}

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pinbench", "run", "dynamic-degree", "--fixture", "--out",
                               str(out)], env=env, capture_output=True, text=True, timeout=300, check=False)

    first = run()
    assert first.returncode == 0, first.stderr[-2000:]
    assert _metric(out, "preview/dynamic_degree") == pytest.approx(0.7)
    unchanged = run()   # answered from the finished run's manifest (#32): nothing read again
    assert unchanged.returncode == 0 and "as .pinbench-rerun.json records them" in unchanged.stdout

    scoring = copy / "pinbench_recipes" / "dynamic_degree" / "scoring.py"
    source = scoring.read_text()
    assert source.count(THRESHOLD) == 1
    scoring.write_text(source.replace(THRESHOLD, THRESHOLD.replace("6.0 *", "600.0 *")))  # tau 100x larger
    edited = run()
    assert "5 samples: 5 done, 0 reused, 0 failed" in edited.stderr and "5 recomputed: code changed" in edited.stderr
    assert _metric(out, "preview/dynamic_degree") == 0.0   # nothing moves 600 px: every clip is static
    assert edited.returncode == 1                          # and the fixture reference (0.7) fails


@pytest.mark.parametrize("recipe", RECIPES)
def test_an_exported_copy_has_the_code_digest_of_the_repository(recipe: str, tmp_path: Path) -> None:
    """A recipe image runs the export (the recipe package and only the library modules it imports): its records
    must carry the digest the host's do, or host and image results differ in their reuse key."""
    found = get_recipe(recipe)
    copy = export_recipe(found, tmp_path / "copy")
    code = f"from pinbench.core.recipe import get_recipe; print(get_recipe({recipe!r}).code_digest())"
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(copy)},
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == found.code_digest()

def _videos(root: Path) -> Path:
    from pinbench_recipes.dynamic_degree import fixture

    fixture.write_fixture(root)
    return root


def _run_videos(out: Path, videos: Path, *flags: str) -> None:
    result = CliRunner().invoke(app, ["run", "dynamic-degree", "--checkpoint", "my-model", "--out", str(out),
                                      "-o", f"videos={videos}", "-o", "flow=farneback", "--skip-doctor", *flags])
    assert result.exit_code == 0, result.output[-2000:]


def test_videos_moved_elsewhere_reuse_every_stored_result(tmp_path: Path) -> None:
    first = _videos(tmp_path / "node-a" / "videos")
    out = tmp_path / "run"
    _run_videos(out, first)
    assert _counts(out)["done"] == 5
    stored, merged = (out / "samples" / "run.jsonl").read_bytes(), (out / "samples.jsonl").read_bytes()

    moved = tmp_path / "node-b" / "mnt" / "videos"
    shutil.copytree(first, moved, copy_function=shutil.copyfile)   # new paths, inodes and mtimes; same bytes
    shutil.rmtree(first)
    _run_videos(out, moved)
    assert _counts(out) == {"total": 5, "done": 0, "reused": 5, "failed": 0}
    assert (out / "samples" / "run.jsonl").read_bytes() == stored     # nothing was computed again
    assert (out / "samples.jsonl").read_bytes() == merged

    _run_videos(tmp_path / "fresh", moved)                            # a new run of the moved videos
    assert run_differences(out, tmp_path / "fresh") == []


def test_verify_inputs_hashes_every_video_again(tmp_path: Path) -> None:
    """The digest cache cannot see an edit that keeps size and mtime; --verify-inputs does."""
    videos = _videos(tmp_path / "videos")
    out = tmp_path / "run"
    _run_videos(out, videos)
    edited = videos / "texture_right_8fps.mp4"
    stat = edited.stat()
    data = bytearray(edited.read_bytes())
    data[len(data) // 2] ^= 0xFF   # a corrupted byte: same size
    edited.write_bytes(bytes(data))
    os.utime(edited, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    _run_videos(out, videos)
    assert _counts(out)["reused"] == 5                                 # trusted the cache
    CliRunner().invoke(app, ["run", "dynamic-degree", "--checkpoint", "my-model", "--out", str(out), "-o",
                             f"videos={videos}", "-o", "flow=farneback", "--skip-doctor", "--verify-inputs"])
    assert _counts(out)["reused"] == 4 and _counts(out)["done"] + _counts(out)["failed"] == 1
