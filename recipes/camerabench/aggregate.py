"""Script 2 over the per-sample records: split, skill and family records, and the scorecard metrics.

Upstream computes AP per split file, VQA and retrieval per skill file and caption means per file,
dropping rows with errors, then averages files without weights. Here the same values come from the
per-sample records, but a group value exists only when every sample of the group scored: otherwise the
group record fails, naming what failed or is missing (and what upstream, which drops those rows, would
have reported, so the gap can be judged). Overall values are means over the group records, so a
single failed split leaves the run partial with 14 of 15 splits scored, never a quietly shorter mean.

Group records are derived records (``pinbench.core.derived``), computed when the scorecard is written from the
merged per-sample records, written to ``derived.jsonl`` and never counted as samples. Ids:
``binary_split__<Split>``, ``vqa_skill__<skill>``, ``caption_family`` and ``camerabench_average`` (the
WorldFoundry composite, not an official CameraBench number; its members are every sample of the groups).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pinbench.core.derived import DerivedFailure, DerivedRecord, derive
from pinbench.core.files import counted
from pinbench.core.runner import MISSING_ERROR, SampleRecord
from pinbench.core.scorecard import MetricSpec
from pinbench_recipes.camerabench.binary_metrics import split_metrics
from pinbench_recipes.camerabench.caption_metrics import LEXICAL
from pinbench_recipes.camerabench.dataset import CAPTION_SKILL, LEADERBOARD_SPLITS, CameraBenchData
from pinbench_recipes.camerabench.vqa_metrics import SKILL_KEYS, pair_outcome, skill_metrics

SPLIT_PREFIX = "binary_split__"
SKILL_PREFIX = "vqa_skill__"
CAPTION_ID = "caption_family"
AVERAGE_ID = "camerabench_average"
_NAMED_FAILURES = 5


def group_records(data: CameraBenchData, records: Mapping[str, SampleRecord], *, judged: bool = False,
                  kept_upstream: Mapping[str, Mapping[str, Any]] | None = None) -> list[DerivedRecord]:
    """Every group record the loaded families define, in a fixed order, and the composite last.

    ``records`` are the merged per-sample records by id; a sample without one counts as missing by name.
    ``kept_upstream``: rows that failed here but that upstream keeps (``Script1Outputs.kept_upstream``)."""
    def members(ids: Sequence[str]) -> list[SampleRecord]:
        return [records.get(sid) or SampleRecord(sid, "failed", None, MISSING_ERROR, "0" * 64, 0.0) for sid in ids]

    kept = kept_upstream or {}
    groups = [binary_split_record(split, members([s.sample_id for s in data.split_samples(split)]), kept)
              for split in data.splits]
    groups += [vqa_skill_record(skill, members([p.sample_id for p in data.skill_pairs(skill)]), kept)
               for skill in data.skills]
    if data.captions:
        groups.append(caption_family_record(members([s.sample_id for s in data.captions]), judged=judged))
    if groups:   # the groups' members are disjoint (a sample is in one split, skill or the captions; derive checks)
        groups.append(average_record(groups, members([sid for g in groups for sid in g.members])))
    return groups


def _strict(compute: Callable[[list[dict[str, Any]]], dict[str, Any]],
            upstream_view: Callable[[list[dict[str, Any]], list[dict[str, Any]]], str] | None = None,
            kept_upstream: Mapping[str, Mapping[str, Any]] | None = None,
            ) -> Callable[[Sequence[SampleRecord]], dict[str, Any]]:
    """``compute`` over the members' results, or DerivedFailure naming the members that did not score (and
    what upstream would have reported: it drops the rows with an error and keeps those in ``kept_upstream``)."""
    def derived(members: Sequence[SampleRecord]) -> dict[str, Any]:
        scored = [m.result for m in members if m.ok and m.result is not None]
        unscored = [(m.sample_id, m.error or "failed") for m in members if not m.ok]
        if not unscored:
            return compute(scored)
        named = "; ".join(f"{sid} ({reason[:160]})" for sid, reason in unscored[:_NAMED_FAILURES])
        more = f"; and {len(unscored) - _NAMED_FAILURES} more" if len(unscored) > _NAMED_FAILURES else ""
        error = f"{len(unscored)} of {len(members)} samples not scored: {named}{more}"
        kept = [dict(kept_upstream[sid]) for sid, _ in unscored if kept_upstream and sid in kept_upstream]
        if upstream_view is not None and (scored or kept):
            error += f". {upstream_view(scored, kept)}"
        raise DerivedFailure(error)
    return derived


def _upstream_rule(n_left_out: int, kept: str) -> str:
    left_out = f"leaves out the {n_left_out} with an error or no row" if n_left_out else ""
    return "Upstream " + ", ".join(part for part in (left_out, kept) if part)


def binary_split_record(split: str, members: Sequence[SampleRecord],
                        kept_upstream: Mapping[str, Mapping[str, Any]] | None = None) -> DerivedRecord:
    """AP and ROC AUC of one split, or a failed record when any of its samples did not score."""
    def compute(scored: list[dict[str, Any]]) -> dict[str, Any]:
        return {"split": split, **split_metrics([r["label"] for r in scored], [r["score"] for r in scored])}

    def upstream(scored: list[dict[str, Any]], kept: list[dict[str, Any]]) -> str:
        rows = scored + kept   # split_metrics ranks a non-finite score at -1e10, as upstream does
        m = split_metrics([r["label"] for r in rows], [r["score"] for r in rows])
        how = f"keeps the {counted(len(kept), 'non-finite score')} ranked at -1e10" if kept else ""
        return (f"{_upstream_rule(len(members) - len(rows), how)} and would report "
                f"AP {m['average_precision']:.4f}, AUC {m['roc_auc']:.4f} over {len(rows)}")

    return derive(SPLIT_PREFIX + split, members, _strict(compute, upstream, kept_upstream))


def vqa_skill_record(skill: str, members: Sequence[SampleRecord],
                     kept_upstream: Mapping[str, Mapping[str, Any]] | None = None) -> DerivedRecord:
    """VQA accuracies and retrieval scores of one skill (pairs pooled over its tasks)."""
    def compute(scored: list[dict[str, Any]]) -> dict[str, Any]:
        return {"skill": skill, "caption_based": skill == CAPTION_SKILL, **skill_metrics(scored)}

    def upstream(scored: list[dict[str, Any]], kept: list[dict[str, Any]]) -> str:
        # upstream compares the kept values as they are: NaN is never larger, infinities order as numbers
        rows = scored + [pair_outcome(k["yes_scores"], k["no_scores"]) for k in kept]
        how = f"keeps the {counted(len(kept), 'pair')} with non-finite scores as they are" if kept else ""
        return (f"{_upstream_rule(len(members) - len(rows), how)} and would report question_acc "
                f"{skill_metrics(rows)['question_acc']:.4f} over {len(rows)} pairs")

    return derive(SKILL_PREFIX + skill, members, _strict(compute, upstream, kept_upstream))


def caption_family_record(members: Sequence[SampleRecord], *, judged: bool) -> DerivedRecord:
    """Means of the caption metrics and the composite's caption component (see ``average_record``)."""
    return derive(CAPTION_ID, members, _strict(lambda rows: _caption_means(rows, judged=judged)))


def _caption_means(rows: list[dict[str, Any]], *, judged: bool) -> dict[str, Any]:
    result: dict[str, Any] = {name: math.fsum(r[name] for r in rows) / len(rows) for name in LEXICAL}
    result["lexical_mean"] = math.fsum(result[name] for name in LEXICAL) / len(LEXICAL)
    parts = [result["lexical_mean"]]
    if judged:
        result["gen_match"] = math.fsum(r["gen_match"] for r in rows) / len(rows)
        parts.append(result["gen_match"])
    result["camera_caption_score"] = math.fsum(parts) / len(parts)
    result["num_samples"] = len(rows)
    return result


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def average_record(groups: Sequence[DerivedRecord], members: Sequence[SampleRecord]) -> DerivedRecord:
    """WorldFoundry's ``camerabench_average``: the mean of whichever family components this run has.

    Components: AP and ROC AUC (means over splits), VQA accuracy (mean of overall binary and question
    accuracy), retrieval accuracy (mean of overall text, image, group) and the caption score (the
    lexical mean, averaged with the judge's gen_match when it ran). Not an official CameraBench metric.
    ``members`` are every sample of the groups: the value is computed from the group records, which follow
    from them.
    """
    def compute(_members: Sequence[SampleRecord]) -> dict[str, Any]:
        failed = [(g.derived_id, g.error or "failed") for g in groups if not g.ok]
        if failed:
            named = "; ".join(f"{gid} ({reason[:160]})" for gid, reason in failed[:_NAMED_FAILURES])
            more = f"; and {len(failed) - _NAMED_FAILURES} more" if len(failed) > _NAMED_FAILURES else ""
            raise DerivedFailure(f"{len(failed)} of {len(groups)} groups not scored: {named}{more}")
        return _average(groups)

    return derive(AVERAGE_ID, members, compute)


def _average(groups: Sequence[DerivedRecord]) -> dict[str, Any]:
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
    return {**components, "camerabench_average": _mean(list(components.values())), "official": False}


# ------------------------------------------------------------------------------------------ leaderboard


def leaderboard_table(groups: Sequence[DerivedRecord]) -> str:
    """The run as a row of the official leaderboard (``leaderboard/table.html``): AP x 100 of the 15 splits in its
    column order and their mean (Avg), then Q-Acc x 100 (``leaderboard/VQA-Q-Acc.html``) when VQA was scored.

    A split whose record failed shows ``failed`` and the Avg shows ``-``: never a mean over fewer splits."""
    splits = {g.derived_id[len(SPLIT_PREFIX):]: g for g in groups if g.derived_id.startswith(SPLIT_PREFIX)}
    skills = [g for g in groups if g.derived_id.startswith(SKILL_PREFIX)]
    lines = []
    if splits:
        order = [s for s in LEADERBOARD_SPLITS if s in splits] + sorted(set(splits) - set(LEADERBOARD_SPLITS))
        cells = [f"{100 * splits[s].result['average_precision']:.1f}" if splits[s].ok else "failed" for s in order]
        ok = [splits[s].result["average_precision"] for s in order if splits[s].ok]
        cells.append(f"{100 * _mean(ok):.1f}" if len(ok) == len(order) else "-")
        lines += ["| " + " | ".join([*order, "Avg"]) + " |", "|" + "---|" * (len(order) + 1),
                  "| " + " | ".join(cells) + " |"]
    if skills:
        acc = f"{100 * _mean([g.result['question_acc'] for g in skills]):.1f}" if all(g.ok for g in skills) else "-"
        lines += ["", "| Q-Acc |", "|---|", f"| {acc} |"]
    return "\n".join(lines) + "\n" if lines else ""


# --------------------------------------------------------------------------------------------- metrics


def metric_specs(data: CameraBenchData, *, judged: bool = False) -> list[MetricSpec]:
    """Every scorecard metric of the loaded families, each read from its own group (derived) or sample records.

    Per split / skill: ``binary/<Split>/average_precision`` etc. (one group record each). Overall:
    ``binary/overall_average_precision`` (mean over the split records, as upstream's
    ``overall_average_precision``), ``vqa/overall_question_acc``, ``retrieval/overall_text`` and
    the skill- and caption-based retrieval means. Caption metrics are means over the caption samples.
    """
    specs: list[MetricSpec] = []
    split_ids = [SPLIT_PREFIX + s for s in data.splits]
    for split, sid in zip(data.splits, split_ids, strict=True):
        specs += [MetricSpec(f"binary/{split}/{key}", aggregation="none", key=key, sample_ids=[sid], derived=True)
                  for key in ("average_precision", "roc_auc")]
    if split_ids:
        specs += [MetricSpec(f"binary/overall_{key}", aggregation="mean", key=key, sample_ids=split_ids,
                             derived=True) for key in ("average_precision", "roc_auc")]
    skill_ids = {s: SKILL_PREFIX + s for s in data.skills}
    for skill, sid in skill_ids.items():
        specs += [MetricSpec(f"vqa/{skill}/{key}", aggregation="none", key=key, sample_ids=[sid], derived=True)
                  for key in ("binary_acc", "question_acc")]
        specs += [MetricSpec(f"retrieval/{skill}/{key}", aggregation="none", key=key, sample_ids=[sid], derived=True)
                  for key in ("text", "image", "group")]
    if skill_ids:
        all_ids = list(skill_ids.values())
        skill_based = [sid for s, sid in skill_ids.items() if s != CAPTION_SKILL]
        caption_based = [sid for s, sid in skill_ids.items() if s == CAPTION_SKILL]
        specs += [MetricSpec(f"vqa/overall_{key}", key=key, sample_ids=all_ids, derived=True)
                  for key in ("binary_acc", "question_acc")]
        specs += [MetricSpec(f"retrieval/overall_{key}", key=key, sample_ids=all_ids, derived=True)
                  for key in ("text", "image", "group")]
        for name, ids in (("skill_based", skill_based), ("caption_based", caption_based)):
            if ids:
                specs += [MetricSpec(f"retrieval/{name}_{key}", key=key, sample_ids=ids, derived=True)
                          for key in ("text", "image", "group")]
    if data.captions:
        caption_ids = [s.sample_id for s in data.captions]
        names = (*LEXICAL, "gen_match") if judged else LEXICAL
        specs += [MetricSpec(f"caption/{name}", key=name, sample_ids=caption_ids) for name in names]
    if split_ids or skill_ids or data.captions:
        specs.append(MetricSpec("camerabench_average", aggregation="none", key="camerabench_average",
                                sample_ids=[AVERAGE_ID], derived=True))
    return specs
