"""``scenes.jsonl``: one row per task of a run (identity, status, error, metrics, frame pair), and its check.

``check`` is the recipe's ``check:`` entry, which ``pinbench check`` calls: every row is as the records the scorecard
counts say. Why here and not in ``outputs``: the check imports JSON code only (``outputs`` brings OpenCV and numpy).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pinbench.core.files import counted, read_finite_jsonl
from pinbench.core.runner import SampleRecord
from pinbench.core.scorecard import is_stand_in

if TYPE_CHECKING:
    from pinbench.core.scorecard import Scorecard
    from pinbench_recipes.remembench.prepare import RowTask

SCENES_FILE = "scenes.jsonl"
METRIC_KEYS = ("clip", "lpips_alex", "tempssim", "drift")
SCENE_FIELDS = ("departure_frame", "revisit_frame", "turnaround_frame", "video_sha256")
RESULT_FIELDS = (*METRIC_KEYS, *SCENE_FIELDS, "pair_image")   # a row's values read from its record's result
IDENTITY = ("sample_id", "scene_id", "group", "status", "error")


def scene_rows(tasks: Sequence[RowTask], records: Sequence[SampleRecord]) -> list[dict[str, Any]]:
    """One flat row per task: identity, status, error, metrics and frame pair."""
    by_id = {r.sample_id: r for r in records}
    rows = []
    for task in tasks:
        record = by_id[task.sample_id]
        result = record.result or {}
        row: dict[str, Any] = {"sample_id": task.sample_id, "scene_id": task.scene_id,
                               "group": task.group, "status": record.status, "error": record.error}
        row.update({k: result.get(k) for k in RESULT_FIELDS})
        rows.append(row)
    return rows


def _row(value: object) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"not a JSON object but {type(value).__name__}")
    absent = [key for key in (*IDENTITY, *RESULT_FIELDS) if key not in value]
    if absent:
        raise ValueError(f"lacks {', '.join(map(repr, absent))}")
    return value


def check(run_dir: Path, card: Scorecard, records: Sequence[SampleRecord]) -> list[str]:
    """What is wrong with a run's ``scenes.jsonl``, one line each naming the file, the row and what: a row for every
    sample the scorecard expects and no other, each with its record's status, error and values (a sample no shard
    stored, which has none, as the merge's missing one)."""
    path = Path(run_dir) / SCENES_FILE
    try:
        rows = read_finite_jsonl(path, _row, "scene row")
    except ValueError as exc:   # FileError too: absent, unreadable, not JSON; names the line
        return [str(exc)]
    by_id = {record.sample_id: record for record in records}
    problems: list[str] = []
    seen: set[str] = set()
    for n, row in enumerate(rows, 1):
        sid = row["sample_id"]
        where = f"{path}: row {n} (sample {sid!r})"
        if sid in seen:
            problems.append(f"{where}: a second row of the sample")
            continue
        seen.add(sid)
        record = by_id.get(sid)
        if record is None:
            if not is_stand_in(row):
                problems.append(f"{where}: no record of it in {card.samples.path}, yet not a missing sample")
            continue
        if (row["status"], row["error"]) != (record.status, record.error):
            problems.append(f"{where}: status {row['status']!r} (error {row['error']!r}) here, {record.status!r} "
                            f"(error {record.error!r}) in its record")
            continue
        result = record.result or {}
        wrong = [key for key in RESULT_FIELDS if row[key] != result.get(key)]
        if wrong:
            key = wrong[0]
            problems.append(f"{where}: {key} {row[key]!r} here, {result.get(key)!r} in its record")
    unrowed = [sid for sid in by_id if sid not in seen]
    if unrowed:
        problems.append(f"{path}: no row of sample {unrowed[0]!r}" + (f" and {len(unrowed) - 1} more"
                                                                       if len(unrowed) > 1 else ""))
    if len(seen) != card.samples.n_expected:
        problems.append(f"{path}: rows of {counted(len(seen), 'sample')}, the scorecard expects "
                        f"{card.samples.n_expected}")
    return problems
