"""Script 2 over the per-sample records: split, skill and family records, and the scorecard metrics.

Upstream computes AP per split file, VQA and retrieval per skill file and caption means per file,
dropping rows with errors, then averages files without weights. Here the same values come from the
per-sample records, but a group value exists only when every sample of the group scored: otherwise the
group record fails, naming what failed or is missing (and what upstream, which drops those rows, would
have reported, so the gap can be judged). Overall values are means over the group records, so a
single failed split leaves the run partial with 14 of 15 splits scored, never a quietly shorter mean.

Record ids: ``binary_split__<Split>``, ``vqa_skill__<skill>``, ``caption_family`` and
``camerabench_average`` (the WorldFoundry composite, not an official CameraBench number).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from pinbench.runner import SampleRecord
from pinbench.scorecard import MetricSpec
from pinbench_recipes.camerabench.binary_metrics import split_metrics
from pinbench_recipes.camerabench.caption_metrics import LEXICAL
from pinbench_recipes.camerabench.dataset import CAPTION_SKILL, CameraBenchData
from pinbench_recipes.camerabench.vqa_metrics import SKILL_KEYS, skill_metrics

SPLIT_PREFIX = "binary_split__"
SKILL_PREFIX = "vqa_skill__"
CAPTION_ID = "caption_family"
AVERAGE_ID = "camerabench_average"
_NAMED_FAILURES = 5
AVERAGE_COMPONENTS = ("camera_motion_average_precision", "camera_motion_roc_auc", "camera_vqa_accuracy",
                      "camera_retrieval_accuracy", "camera_caption_score")


def group_records(data: CameraBenchData, records: Mapping[str, SampleRecord], *,
                  judged: bool = False) -> list[SampleRecord]:
    """Every group record the loaded families define, in a fixed order, and the composite last."""
    groups = [binary_split_record(split, [records.get(s.sample_id) for s in data.split_samples(split)],
                                  [s.sample_id for s in data.split_samples(split)])
              for split in data.splits]
    groups += [vqa_skill_record(skill, [records.get(p.sample_id) for p in data.skill_pairs(skill)],
                                [p.sample_id for p in data.skill_pairs(skill)])
               for skill in data.skills]
    if data.captions:
        groups.append(caption_family_record([records.get(s.sample_id) for s in data.captions],
                                            [s.sample_id for s in data.captions], judged=judged))
    if groups:
        groups.append(average_record(groups))
    return groups


def _hash(parts: Sequence[Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _member_hash(members: Sequence[SampleRecord | None], ids: Sequence[str]) -> str:
    return _hash([[sid, rec.input_hash if rec else None, rec.status if rec else None]
                  for sid, rec in zip(ids, members, strict=True)])


def _unscored(members: Sequence[SampleRecord | None], ids: Sequence[str]) -> list[tuple[str, str]]:
    return [(sid, "missing: no record" if rec is None else (rec.error or "failed"))
            for sid, rec in zip(ids, members, strict=True) if rec is None or not rec.ok]


def _failed(group_id: str, ids: Sequence[str], members: Sequence[SampleRecord | None],
            unscored: list[tuple[str, str]], upstream_view: str | None) -> SampleRecord:
    named = "; ".join(f"{sid} ({reason[:160]})" for sid, reason in unscored[:_NAMED_FAILURES])
    more = f"; and {len(unscored) - _NAMED_FAILURES} more" if len(unscored) > _NAMED_FAILURES else ""
    error = f"{len(unscored)} of {len(ids)} samples not scored: {named}{more}"
    if upstream_view:
        error += f". {upstream_view}"
    return SampleRecord(group_id, "failed", None, error, _member_hash(members, ids), 0.0)


def _ok(group_id: str, ids: Sequence[str], members: Sequence[SampleRecord | None],
        result: dict[str, Any]) -> SampleRecord:
    return SampleRecord(group_id, "ok", result, None, _member_hash(members, ids), 0.0)


def binary_split_record(split: str, members: Sequence[SampleRecord | None], ids: Sequence[str]) -> SampleRecord:
    """AP and ROC AUC of one split, or a failed record when any of its samples did not score."""
    scored = [rec.result for rec in members if rec is not None and rec.ok]
    unscored = _unscored(members, ids)
    if unscored:
        view = None
        if scored:
            m = split_metrics([r["label"] for r in scored], [r["score"] for r in scored])
            view = (f"Upstream drops such rows and would report AP {m['average_precision']:.4f}, "
                    f"AUC {m['roc_auc']:.4f} over the {len(scored)} that scored")
        return _failed(SPLIT_PREFIX + split, ids, members, unscored, view)
    metrics = split_metrics([r["label"] for r in scored], [r["score"] for r in scored])
    return _ok(SPLIT_PREFIX + split, ids, members, {"split": split, **metrics})


def vqa_skill_record(skill: str, members: Sequence[SampleRecord | None], ids: Sequence[str]) -> SampleRecord:
    """VQA accuracies and retrieval scores of one skill (pairs pooled over its tasks)."""
    scored = [rec.result for rec in members if rec is not None and rec.ok]
    unscored = _unscored(members, ids)
    if unscored:
        view = None
        if scored:
            m = skill_metrics(scored)
            view = (f"Upstream drops such rows and would report question_acc {m['question_acc']:.4f} "
                    f"over the {len(scored)} pairs that scored")
        return _failed(SKILL_PREFIX + skill, ids, members, unscored, view)
    return _ok(SKILL_PREFIX + skill, ids, members,
               {"skill": skill, "caption_based": skill == CAPTION_SKILL, **skill_metrics(scored)})


def caption_family_record(members: Sequence[SampleRecord | None], ids: Sequence[str], *,
                          judged: bool) -> SampleRecord:
    """Means of the caption metrics and the composite's caption component (see ``average_record``)."""
    unscored = _unscored(members, ids)
    if unscored:
        return _failed(CAPTION_ID, ids, members, unscored, None)
    rows = [rec.result for rec in members if rec is not None]
    result: dict[str, Any] = {name: math.fsum(r[name] for r in rows) / len(rows) for name in LEXICAL}
    result["lexical_mean"] = math.fsum(result[name] for name in LEXICAL) / len(LEXICAL)
    parts = [result["lexical_mean"]]
    if judged:
        result["gen_match"] = math.fsum(r["gen_match"] for r in rows) / len(rows)
        parts.append(result["gen_match"])
    result["camera_caption_score"] = math.fsum(parts) / len(parts)
    result["num_samples"] = len(rows)
    return _ok(CAPTION_ID, ids, members, result)


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def average_record(groups: Sequence[SampleRecord]) -> SampleRecord:
    """WorldFoundry's ``camerabench_average``: the mean of whichever family components this run has.

    Components: AP and ROC AUC (means over splits), VQA accuracy (mean of overall binary and question
    accuracy), retrieval accuracy (mean of overall text, image, group) and the caption score (the
    lexical mean, averaged with the judge's gen_match when it ran). Not an official CameraBench metric.
    """
    ids = [g.sample_id for g in groups]
    failed = [(g.sample_id, g.error or "failed") for g in groups if not g.ok]
    if failed:
        return _failed(AVERAGE_ID, ids, list(groups), failed, None)
    splits = [g.result for g in groups if g.sample_id.startswith(SPLIT_PREFIX)]
    skills = [g.result for g in groups if g.sample_id.startswith(SKILL_PREFIX)]
    captions = [g.result for g in groups if g.sample_id == CAPTION_ID]
    components: dict[str, float] = {}
    if splits:
        components["camera_motion_average_precision"] = _mean([s["average_precision"] for s in splits])
        components["camera_motion_roc_auc"] = _mean([s["roc_auc"] for s in splits])
    if skills:
        overall = {key: _mean([s[key] for s in skills]) for key in SKILL_KEYS}
        components["camera_vqa_accuracy"] = _mean([overall["binary_acc"], overall["question_acc"]])
        components["camera_retrieval_accuracy"] = _mean([overall["text"], overall["image"], overall["group"]])
    if captions:
        components["camera_caption_score"] = captions[0]["camera_caption_score"]
    result = {**components, "camerabench_average": _mean(list(components.values())), "official": False}
    return _ok(AVERAGE_ID, ids, list(groups), result)


# --------------------------------------------------------------------------------------------- metrics


def metric_specs(data: CameraBenchData, *, judged: bool = False) -> list[MetricSpec]:
    """Every scorecard metric of the loaded families, each read from its own group or sample records.

    Per split / skill: ``binary/<Split>/average_precision`` etc. (one group record each). Overall:
    ``binary/overall_average_precision`` (mean over the split records, as upstream's
    ``overall_average_precision``), ``vqa/overall_question_acc``, ``retrieval/overall_text`` and
    the skill- and caption-based retrieval means. Caption metrics are means over the caption samples.
    """
    specs: list[MetricSpec] = []
    split_ids = [SPLIT_PREFIX + s for s in data.splits]
    for split, sid in zip(data.splits, split_ids, strict=True):
        specs += [MetricSpec(f"binary/{split}/{key}", aggregation="none", key=key, sample_ids=[sid])
                  for key in ("average_precision", "roc_auc")]
    if split_ids:
        specs += [MetricSpec(f"binary/overall_{key}", aggregation="mean", key=key, sample_ids=split_ids)
                  for key in ("average_precision", "roc_auc")]
    skill_ids = {s: SKILL_PREFIX + s for s in data.skills}
    for skill, sid in skill_ids.items():
        specs += [MetricSpec(f"vqa/{skill}/{key}", aggregation="none", key=key, sample_ids=[sid])
                  for key in ("binary_acc", "question_acc")]
        specs += [MetricSpec(f"retrieval/{skill}/{key}", aggregation="none", key=key, sample_ids=[sid])
                  for key in ("text", "image", "group")]
    if skill_ids:
        all_ids = list(skill_ids.values())
        skill_based = [sid for s, sid in skill_ids.items() if s != CAPTION_SKILL]
        caption_based = [sid for s, sid in skill_ids.items() if s == CAPTION_SKILL]
        specs += [MetricSpec(f"vqa/overall_{key}", key=key, sample_ids=all_ids)
                  for key in ("binary_acc", "question_acc")]
        specs += [MetricSpec(f"retrieval/overall_{key}", key=key, sample_ids=all_ids)
                  for key in ("text", "image", "group")]
        for name, ids in (("skill_based", skill_based), ("caption_based", caption_based)):
            if ids:
                specs += [MetricSpec(f"retrieval/{name}_{key}", key=key, sample_ids=ids)
                          for key in ("text", "image", "group")]
    if data.captions:
        caption_ids = [s.sample_id for s in data.captions]
        names = (*LEXICAL, "gen_match") if judged else LEXICAL
        specs += [MetricSpec(f"caption/{name}", key=name, sample_ids=caption_ids) for name in names]
    if split_ids or skill_ids or data.captions:
        specs.append(MetricSpec("camerabench_average", aggregation="none", key="camerabench_average",
                                sample_ids=[AVERAGE_ID]))
    return specs
