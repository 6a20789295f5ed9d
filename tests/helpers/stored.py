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


def store_records(out_dir: Path, records, shard=None) -> None:
    """Store records as run_samples stores them (test double for the samples a run computed), leaving out the
    "missing" ones a merge makes up for samples no shard stored."""
    from pinbench.core.scorecard import is_stand_in
    from pinbench.core.store import LogWriter, log_name

    with LogWriter(Path(out_dir) / "samples", log_name(shard)) as store:
        for record in records:
            if not is_stand_in(record):
                store.append(record.to_bytes())
