"""The fixture's weights are inputs keyed by their bytes: the same bytes wherever the fixture is written."""

from __future__ import annotations

from pathlib import Path

from pinbench_recipes.remembench.fixture import write_random_alexnet


def test_lpips_trunk_bytes_do_not_depend_on_the_folder(tmp_path: Path) -> None:
    """torch.save to a path names the archive after an ASCII path's file and "archive" otherwise: the trunk's
    SHA-256 (part of every task's input hash) differed between ``--out runs/x`` and ``--out 'runs/ü'``."""
    ascii_sha = write_random_alexnet(tmp_path / "plain" / "alexnet-random.pth")
    unicode_sha = write_random_alexnet(tmp_path / "ünï côdé" / "alexnet-random.pth")
    other_name = write_random_alexnet(tmp_path / "plain" / "trunk.pth")
    assert ascii_sha == unicode_sha == other_name
