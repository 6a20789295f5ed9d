"""Test helper: what a stage's sample store holds, for "nothing was recomputed" and "N samples stored" checks."""

from __future__ import annotations

from pathlib import Path

from pinbench.core.store import logs, read_store


def store_snapshot(samples_dir: Path) -> dict[str, bytes]:
    """Every writer's log by name, as bytes: equal before and after a rerun exactly when it stored nothing."""
    return {path.name: path.read_bytes() for path in logs(Path(samples_dir))}


def stored_ids(samples_dir: Path) -> set[str]:
    """The ids of the samples with a readable record in the store."""
    return set(read_store(Path(samples_dir)).records)
