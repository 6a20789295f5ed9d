"""The GPU-free check on the real release: reproduce ``evaluation/t2v_reference_summary.json``.

``evaluation/t2v_reference_pairs.jsonl`` holds the paper's 600 T2V annotations (100 scenes x Base /
MoC / MosaiChunk x far-memory budget 1 / 2) with the CLIP and LPIPS each pair scored. The medians per
(method, budget) must equal the release's summary file exactly (the same float64: ``numpy.median`` of
the published values, as the paper's scorer aggregates, against the summary's JSON numbers), and,
within half a unit of the table's last digit, the paper's table. This checks the recipe's aggregation
and the release itself without any rollout or GPU.

UNVERIFIED: neither file has been read yet (the release is gated and this was written offline). Their
field names and layout are inferred from the paper's ``score.py`` and table: the metric fields are
looked up under several guessed names (``_METRIC_FIELDS``), the summary's nesting is searched for
method, budget and metric keys, and that the pairs file holds MoC rows besides Base and MosaiChunk
(``score.py`` only ever selects those two) follows from the table alone. Every scorecard of this
check carries ``provenance.extra.summary_reproduction.state: unverified`` until a run on the real
release files confirms them (then set ``SUMMARY_REPRODUCTION`` to verified, with that run's provenance).

These annotations describe the paper's specific rollouts: they are valid only for rollouts that are
bit-identical to the published ones, never ground truth for a new model or rerun.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pinbench.core.files import read_json_file
from pinbench.core.task import Task
from pinbench_recipes.remembench.dataset import DatasetError, iter_jsonl

PAIRS_FILE = "evaluation/t2v_reference_pairs.jsonl"
SUMMARY_FILE = "evaluation/t2v_reference_summary.json"
METHODS = ("Base", "MoC", "MosaiChunk")
BUDGETS = (1, 2)
METRICS = ("clip", "lpips_alex")
_METRIC_FIELDS = {"clip": ("clip", "clip_similarity", "clip_score"), "lpips_alex": ("lpips_alex", "lpips")}
SUMMARY_REPRODUCTION = {
    "state": "unverified",
    "reason": "not yet run on the real release files: the field names and layout of "
              f"{PAIRS_FILE} and {SUMMARY_FILE} (and the presence of MoC rows) are inferred from the paper's "
              "score.py and table, not read from the files",
}
PAPER_PAIRS_WARNING = ("the dataset's reference pairs describe the paper's own rollouts; they are valid only "
                       "for rollouts bit-identical to the published ones, not for a new model or rerun")


@dataclass(frozen=True)
class PairRow:
    scene_id: str
    method: str
    budget: int
    departure_frame: int
    revisit_frame: int
    clip: float
    lpips_alex: float
    line: int

    @property
    def sample_id(self) -> str:
        return f"{group_name(self.method, self.budget)}-{self.scene_id}"


def group_name(method: str, budget: int) -> str:
    """Scorecard prefix of one comparison: ``mosaichunk-2chunk``."""
    return f"{method.lower()}-{budget}chunk"


def _int(data: Mapping[str, Any], key: str, where: str) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise DatasetError(f"{where}: field {key!r} must be an integer, got {value!r}")
    return value


def _measure(data: Mapping[str, Any], metric: str, where: str) -> float:
    for key in _METRIC_FIELDS[metric]:
        if key in data:
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
                raise DatasetError(f"{where}: field {key!r} must be a finite number, got {value!r}")
            return float(value)
    raise DatasetError(f"{where}: no {metric} value (looked for {', '.join(_METRIC_FIELDS[metric])}; "
                       f"fields are {', '.join(sorted(data))})")


@dataclass(frozen=True, slots=True)
class PairTask(Task):
    """A published pair measurement stored as the sample's result (the GPU-free check), with its file line."""

    group: str
    clip: float
    lpips_alex: float
    line: int


def read_pairs(path: Path | str) -> list[PairRow]:
    """All annotation rows, validated; DatasetError names the file and line."""
    path = Path(path)
    rows, seen = [], {}
    for number, data in iter_jsonl(path):
        where = f"{path}:{number}"
        method = data.get("method")
        if method not in METHODS:
            raise DatasetError(f"{where}: method {method!r} is not one of {', '.join(METHODS)}")
        budget = _int(data, "comparison_budget_chunks", where)
        if budget not in BUDGETS:
            raise DatasetError(f"{where}: comparison_budget_chunks {budget} is not 1 or 2")
        scene = data.get("scene_id")
        if not isinstance(scene, str) or not scene:
            raise DatasetError(f"{where}: scene_id must be a non-empty string, got {scene!r}")
        departure, revisit = _int(data, "departure_frame", where), _int(data, "revisit_frame", where)
        if not 0 <= departure <= revisit:
            raise DatasetError(f"{where}: need 0 <= departure_frame <= revisit_frame, got {departure}, {revisit}")
        row = PairRow(scene, method, budget, departure, revisit, _measure(data, "clip", where),
                      _measure(data, "lpips_alex", where), number)
        if row.sample_id in seen:
            raise DatasetError(f"{where}: duplicate {method} budget {budget} scene {scene!r} "
                               f"(first on line {seen[row.sample_id]})")
        seen[row.sample_id] = number
        rows.append(row)
    if not rows:
        raise DatasetError(f"{path}: no rows")
    return rows


def medians(rows: Iterable[PairRow]) -> dict[tuple[str, int, str], float]:
    """numpy.median of each metric per (method, budget), as the paper's scorer aggregates."""
    groups: dict[tuple[str, int], list[PairRow]] = {}
    for row in rows:
        groups.setdefault((row.method, row.budget), []).append(row)
    return {(m, b, metric): float(np.median([getattr(r, metric) for r in members]))
            for (m, b), members in sorted(groups.items()) for metric in METRICS}


def annotations_for(rows: Sequence[PairRow], method: str, budget: int) -> dict[str, tuple[int, int]]:
    """scene_id -> (departure, revisit) of one published arm (valid only for the paper's rollouts)."""
    if method not in METHODS or budget not in BUDGETS:
        raise DatasetError(f"no published pairs for method {method!r} budget {budget}")
    pairs = {r.scene_id: (r.departure_frame, r.revisit_frame) for r in rows
             if r.method == method and r.budget == budget}
    if not pairs:  # e.g. a release without MoC rows (upstream's score.py only reads Base and MosaiChunk)
        raise DatasetError(f"{PAIRS_FILE} has no pairs for method {method!r} budget {budget}")
    return pairs


# ------------------------------------------------------------------------------- the summary file

_BUDGET = re.compile(r"(?:^|[^0-9])([12])(?:[^0-9]|$)")


def _key_context(key: str) -> dict[str, Any]:
    """What a JSON key says about method, budget and metric (``MosaiChunk``, ``2``, ``lpips_2chunk``)."""
    lowered = key.lower()
    found: dict[str, Any] = {}
    tokens = set(re.split(r"[^a-z0-9]+", lowered))
    for method in METHODS:
        if method.lower() in tokens:
            found["method"] = method
    if "lpips" in lowered:
        found["metric"] = "lpips_alex"
    elif "clip" in lowered:
        found["metric"] = "clip"
    match = _BUDGET.search(lowered)
    if match and (lowered.isdigit() or "chunk" in lowered.replace("mosaichunk", "") or "budget" in lowered):
        found["budget"] = int(match.group(1))
    return found


def _record_context(node: Mapping[str, Any]) -> dict[str, Any]:
    """Context a record-style object gives itself (``{"method": ..., "comparison_budget_chunks": ...}``)."""
    found: dict[str, Any] = {}
    if node.get("method") in METHODS:
        found["method"] = node["method"]
    for key in ("comparison_budget_chunks", "budget", "budget_chunks", "chunks"):
        if isinstance(node.get(key), int) and not isinstance(node.get(key), bool):
            found["budget"] = node[key]
    return found


def _walk(node: Any, context: dict[str, Any], out: list[tuple[tuple[str, int, str], float, str]],
          trail: str) -> None:
    if isinstance(node, Mapping):
        context = {**context, **_record_context(node)}
        for key, value in node.items():
            _walk(value, {**context, **_key_context(str(key))}, out, f"{trail}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _walk(value, context, out, f"{trail}[{i}]")
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        if {"method", "budget", "metric"} <= context.keys() and context["budget"] in BUDGETS:
            out.append(((context["method"], context["budget"], context["metric"]), float(node), trail))


def read_summary(path: Path | str) -> dict[tuple[str, int, str], float]:
    """The 12 published medians (method x budget x metric) from the summary JSON, whatever its nesting."""
    path = Path(path)
    data = read_json_file(path, DatasetError)
    found: list[tuple[tuple[str, int, str], float, str]] = []
    _walk(data, {}, found, "")
    values: dict[tuple[str, int, str], float] = {}
    for key, value, trail in found:
        if key in values and values[key] != value:
            raise DatasetError(f"{path}: two different values for {key} (second at {trail})")
        values[key] = value
    wanted = [(m, b, metric) for m in METHODS for b in BUDGETS for metric in METRICS]
    missing = [k for k in wanted if k not in values]
    if missing:
        top = ", ".join(map(str, data)) if isinstance(data, Mapping) else type(data).__name__
        raise DatasetError(f"{path}: could not find {len(missing)} of 12 medians, e.g. {missing[0]} "
                           f"(top-level keys: {top})")
    return {k: values[k] for k in wanted}


def _rounding_hint(got: float, want: float) -> str:
    """Why two medians may differ: the summary file may store rounded values (a diagnosis, not a pass)."""
    text = repr(want)
    places = len(text.split(".")[1]) if "." in text and "e" not in text.lower() else None
    if places is not None and places <= 6 and round(got, places) == want:
        return f" (equal after rounding to {places} decimals: the file may store rounded medians)"
    return ""


def compare_summary(computed: Mapping[tuple[str, int, str], float],
                    published: Mapping[tuple[str, int, str], float]) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows (key, computed, published, match) and problems. A match is exact: the same float64 (the
    summary's JSON number parsed by Python against ``numpy.median`` of the pairs); anything else, a
    value that only agrees after rounding included, is a problem naming both values in full."""
    rows, problems = [], []
    for key, want in published.items():
        got = computed.get(key)
        match = "missing" if got is None else "exact" if got == want else "DIFFERENT"
        rows.append({"method": key[0], "budget": key[1], "metric": key[2], "computed": got, "published": want,
                     "match": match})
        if match != "exact":
            hint = _rounding_hint(got, want) if got is not None else ""
            problems.append(f"{group_name(key[0], key[1])}/{key[2]}: computed {got!r}, published {want!r}{hint}")
    return rows, problems
