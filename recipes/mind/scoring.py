"""Scorecard metrics: the raw official averages per metric and split, the native cross-check beside them,
and WorldFoundry's derived ability groups and ``mind_average``.

Names are ``<perspective>/<test>/<metric id>`` (``1st_data/mem_test/lcm_mse``), the cross-check
``<perspective>/<test>/native/<id>``, each restricted to the samples of its split (its denominator is every
planned sample of that split, generated or not). The derived numbers are computed once over all scored
samples, as WorldFoundry does, when the scorecard is written (the merge of a sharded run), into the derived
record ``suite`` (``pinbench.core.derived``): it names every planned sample as a member and never counts as one.
They are labelled derived, never official: MIND publishes no composite.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pinbench.core.derived import DerivedRecord, derive
from pinbench.core.runner import SampleRecord
from pinbench.core.scorecard import MetricSpec
from pinbench_recipes.mind.layout import CONTINUATION_TESTS, MIRROR_TEST, PERSPECTIVES, TEST_TYPES, SampleKey
from pinbench_recipes.mind.native import restored
from pinbench_recipes.mind.samples import AGREEMENT, GSC_IDS, PIXEL_FIELDS, metric_ids, native_values
from pinbench_recipes.mind.worldfoundry import GROUP_SCORES, PRIMARY, aggregate

SUITE_ID = "suite"      # the derived record's id; never a sample id: those start with "1st_data." or "3rd_data."
DERIVED = (PRIMARY, *GROUP_SCORES)
GROUP_SOURCES = {"memory_consistency_score": ("lcm", "dino"), "visual_quality_score": ("visual",),
                 "action_control_score": ("action",), "scene_consistency_score": ("gsc",)}


def derived_names(metrics: Sequence[str]) -> list[str]:
    """``mind_average`` and the group scores some requested official metric feeds."""
    return [PRIMARY] + [g for g in GROUP_SCORES if any(m in metrics for m in GROUP_SOURCES[g])]


def cohorts(keys: Iterable[SampleKey]) -> dict[str, list[str]]:
    """``perspective/test`` -> its sample ids, in plan order (only cohorts that have samples)."""
    out: dict[str, list[str]] = {f"{p}/{t}": [] for p in PERSPECTIVES for t in TEST_TYPES}
    for key in keys:
        out[key.cohort].append(key.sample_id)
    return {name: ids for name, ids in out.items() if ids}


def cohort_metric_ids(test_type: str, metrics: Sequence[str]) -> list[str]:
    if test_type == MIRROR_TEST:
        return [m for m in metric_ids(metrics) if m.startswith("gsc_")]
    return [m for m in metric_ids(metrics) if not m.startswith("gsc_")]


def native_ids(test_type: str, metrics: Sequence[str]) -> list[str]:
    if test_type in CONTINUATION_TESTS and "lcm" in metrics:
        return [f"lcm_{f}" for f in PIXEL_FIELDS]
    if test_type == MIRROR_TEST and "gsc" in metrics:
        return [m for m, _, _ in GSC_IDS]
    return []


def metric_specs(keys: Sequence[SampleKey], metrics: Sequence[str], *, native: bool) -> list[MetricSpec]:
    """Every scorecard metric of a run over ``keys`` (the planned samples)."""
    specs = []
    for cohort, ids in cohorts(keys).items():
        test_type = cohort.split("/")[1]
        specs += [MetricSpec(f"{cohort}/{m}", key=m, sample_ids=ids) for m in cohort_metric_ids(test_type, metrics)]
        if native:
            specs += [MetricSpec(f"{cohort}/native/{m}", key=f"native/{m}", sample_ids=ids)
                      for m in native_ids(test_type, metrics)]
    specs += [MetricSpec(name, aggregation="none", key=name, sample_ids=[SUITE_ID], derived=True)
              for name in derived_names(metrics)]
    return specs


def suite_record(records: Sequence[SampleRecord]) -> DerivedRecord:
    """The derived ``suite`` record of the merged per-sample records (every planned sample is a member)."""
    return derive(SUITE_ID, records, lambda members: suite_result(m.result for m in members if m.ok and m.result))


def suite_result(results: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``suite`` record: WorldFoundry's table over the scored samples' raw values (derived numbers)."""
    table = aggregate(results)
    out: dict[str, Any] = {name: table[name]["value"] for name in DERIVED}
    out["worldfoundry_table"] = table
    out["errors"] = {name: "no component metric has a value" for name in DERIVED if out[name] is None}
    return out


def official_failed_native_scored(official_failed: Mapping[str, str],
                                  native: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The samples the official run failed and the native blocks scored (``official_failed``: sample id -> error,
    ``native``: sample id -> stored native result), each with both sides: the widest disagreement of all (an
    upstream crash, such as the mirror rollouts of ``N % 20 == 2`` frames, README "known quirks")."""
    named = []
    for sample_id, error in official_failed.items():
        stored = native.get(sample_id)
        if not stored or "nothing" in stored:
            continue
        blocks, prefix = (({"lcm": stored["lcm"]}, "lcm") if stored.get("lcm") is not None
                          else (stored.get("videos") or {}, "gsc"))
        values = native_values({name: restored(block) for name, block in blocks.items()}, prefix)
        if any(v is not None for v in values.values()):
            named.append({"sample_id": sample_id, "official": f"error: {error}", "native": values})
    return named


def cross_check_summary(results: Mapping[str, Mapping[str, Any]], metrics: Sequence[str]) -> dict[str, Any]:
    """Per split and pixel metric: how many samples were compared, the largest per-frame difference, and which
    samples disagree beyond the tolerance (README, "Native cross-check")."""
    summary: dict[str, Any] = {}
    for sample_id, result in results.items():
        if not isinstance(result.get("cross_check"), dict):
            continue
        cohort = f"{result['perspective']}/{result['test_type']}"
        for field, diff in result["cross_check"].items():
            entry = summary.setdefault(f"{cohort}/{field}", {"n_compared": 0, "max_abs_frame_diff": 0.0,
                                                             "tolerance": AGREEMENT[field], "disagree": []})
            entry["n_compared"] += 1
            value = math.inf if diff is None else diff
            entry["max_abs_frame_diff"] = max(entry["max_abs_frame_diff"], value)
            if value > AGREEMENT[field]:
                entry["disagree"].append(sample_id)
    for entry in summary.values():
        if math.isinf(entry["max_abs_frame_diff"]):
            entry["max_abs_frame_diff"] = None   # a length mismatch or a lone infinity: see "disagree"
    return summary
