"""The CameraBench procedure, top to bottom: prepare, Script 1 (or read any method's files), Script 2, finish.

1. prepare: the pinned data (or the fixture's), the families asked for, the official counts, the judge;
2. Script 1: Qwen2.5-VL scores per sample through the runner (sharded, resumable), also written in the
   official JSON shapes; or, with ``-o scores=DIR`` / ``--fixture``, the official files read as they are;
3. Script 2: one record per sample, then per split, skill and family, strictly (a group with any failed
   or missing sample has no value);
4. scorecard, diff against the leaderboard (full runs of a referenced checkpoint), report.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

from pinbench.core.config import RecipeError, RunConfig, RunOutcome
from pinbench.core.derived import DerivedRecord
from pinbench.core.files import write_atomic
from pinbench.core.inputs import input_digests
from pinbench.core.recipe import get_recipe
from pinbench.core.runner import RunSummary, merge_samples, run_samples
from pinbench.results.finish import collect_records, finish_run, finish_shard
from pinbench_recipes.camerabench import fixture, inputs
from pinbench_recipes.camerabench.aggregate import group_records, leaderboard_table, metric_specs
from pinbench_recipes.camerabench.caption_metrics import UPSTREAM_NAMES
from pinbench_recipes.camerabench.dataset import CameraBenchData
from pinbench_recipes.camerabench.judge import CaptionJudge, JudgeError
from pinbench_recipes.camerabench.official_json import ScoreFileError, Script1Outputs, write_score_dir
from pinbench_recipes.camerabench.script1 import CAPTION_SEED, Script1, has_output, outputs_from_records, script1_tasks
from pinbench_recipes.camerabench.script2 import score_sample, script2_tasks

LEADERBOARD_FILE = "leaderboard.md"


def run(cfg: RunConfig) -> RunOutcome:
    recipe = get_recipe(cfg.recipe)
    timings: dict[str, float] = {}
    started = time.perf_counter()

    # 1. prepare: data (pinned, or the fixture's synthetic set), families, the optional judge
    model = inputs.script1_model(cfg)
    if cfg.fixture:
        data_root, score_dir = fixture.build_fixture(cfg.out_dir / "fixture_data")
    else:
        data_root, score_dir = inputs.data_dir(cfg, download=False), cfg.options.scores
    whole = inputs.load_data(cfg, data_root, official=not cfg.fixture)
    data = inputs.run_subset(cfg, whole)
    judge = _judge(cfg, data)
    timings["prepare"] = time.perf_counter() - started

    # 2. Script 1: this recipe's Qwen2.5-VL run, or the official files of any method
    started = time.perf_counter()
    script1_summary = None
    if model is None:
        try:
            outputs = inputs.score_outputs(score_dir, whole, cfg.options.families)  # files hold every sample
        except ScoreFileError as exc:
            raise inputs.input_error(exc) from None
        script1_info: dict[str, Any] = {"source": "official score files", "folder": str(score_dir)}
    else:
        outputs, script1_info, script1_summary = _script1(cfg, recipe.version, model, data)
    timings["script1"] = time.perf_counter() - started
    if cfg.shard is not None:  # one Script 1 shard of many: Script 2 and the scorecard need every output (merge)
        return finish_shard(cfg, script1_summary)

    # 3. Script 2: per sample, then per split / skill / family (strict), then the composite
    started = time.perf_counter()
    tasks = script2_tasks(data, outputs, judge=judge.describe() if judge else None)
    summary = None
    if not cfg.skip_scoring:
        summary = run_samples(tasks, partial(score_sample, judge=judge), cfg.out_dir, shard=cfg.shard,
                              implementation=cfg.implementation, step="script 2")
    samples = collect_records(cfg, tasks, summary)
    timings["script2"] = time.perf_counter() - started

    def groups() -> list[DerivedRecord]:
        """Per split, skill and family (strict), then the composite; with the leaderboard-shaped table beside them
        (AP x 100 per split and Avg, Q-Acc x 100). Computed when the scorecard is: a rerun that changed nothing
        keeps both."""
        derived = group_records(data, {r.sample_id: r for r in samples}, judged=judge is not None,
                                kept_upstream=outputs.kept_upstream)
        table = leaderboard_table(derived)
        if table:
            write_atomic(cfg.out_dir / LEADERBOARD_FILE, table)
        return derived

    # 4. scorecard (the group records are derived, never counted as samples), diff, report
    return finish_run(
        recipe, cfg,
        metrics=metric_specs(data, judged=judge is not None),
        records=samples, n_expected=len(tasks),
        derived=groups,
        pins=inputs.pins_for_provenance(model, fixture=cfg.fixture),
        timings=timings,
        seeds={"fixture": fixture.SEED} if cfg.fixture else ({"caption": CAPTION_SEED} if model else None),
        extra=_extra(cfg, data, outputs, script1_info, judge),
        provenance_extra={"script1": script1_info, "judge": judge.describe() if judge else None},
    )


def _judge(cfg: RunConfig, data: CameraBenchData) -> CaptionJudge | None:
    if not cfg.options.gpt_judge:
        return None
    if not data.captions:
        raise RecipeError("camerabench: -o gpt_judge=1 judges captions; add caption to -o families")
    try:
        return CaptionJudge.from_env()
    except JudgeError as exc:
        raise RecipeError(f"camerabench: {exc}") from None


def _script1(cfg: RunConfig, version: str, model: inputs.Script1Model,
             data: CameraBenchData) -> tuple[Script1Outputs, dict[str, Any], RunSummary | None]:
    """Script 1 through the runner into ``script1/``; its outputs (also written as official files in ``scores/``),
    what the scorer was, and what this process computed (None with --skip-generation)."""
    from pinbench_recipes.camerabench.qwen_scorer import QwenCameraScorer, ScorerError, ScorerSettings

    weights, processor = inputs.model_dirs(model, download=False)
    videos = inputs.video_set(cfg, data, download=False)
    pins = inputs.pins().huggingface
    settings = ScorerSettings(weights, processor, attn_implementation=cfg.options.attn,
                              processor_fps=cfg.options.processor_fps)
    described = {"weights": pins[model.weights_pin].label, "processor": pins[inputs.PROCESSOR_PIN].label,
                 "attn_implementation": settings.attn_implementation, "dtype": settings.dtype,
                 "processor_fps": settings.processor_fps, "recipe_version": version}
    with input_digests(cfg.out_dir, verify=cfg.verify_inputs) as digests:
        tasks = script1_tasks(data, videos, described, digests)
    folder = cfg.out_dir / "script1"
    scorer_info: dict[str, Any] = {}

    def load() -> QwenCameraScorer:
        try:
            scorer = QwenCameraScorer(settings)
        except ScorerError as exc:
            raise RecipeError(f"camerabench: {exc}") from None
        scorer_info.update(scorer.describe())
        return scorer

    summary = None
    if not cfg.skip_generation:
        summary = run_samples(tasks, Script1(load, videos), folder, shard=cfg.shard, implementation=cfg.implementation,
                              validate=has_output,
                              step="script 1")
    if cfg.shard is not None:  # the caller stops here; gathering every shard's outputs is the merge's
        return Script1Outputs(), {}, summary
    records = merge_samples([folder], tasks, dest=folder / "samples.jsonl", validate=has_output,
                            implementation=cfg.implementation)
    outputs = outputs_from_records(records, data)
    if cfg.shard is None:  # one writer: the unsharded run that gathers every shard
        write_score_dir(cfg.out_dir / "scores", data, outputs, model_name=model.model_name,
                        checkpoint=model.checkpoint, timestamp=datetime.now(timezone.utc).replace(tzinfo=None),
                        video_dir=str(videos.root), extra_metadata={"recipe": "camerabench", **described})
    info = {"source": "camerabench Qwen2.5-VL scorer", "model": described, "videos": videos.describe(),
            "scorer": scorer_info or "not loaded in this run (every sample was already stored)"}
    return outputs, info, summary


def _extra(cfg: RunConfig, data: CameraBenchData, outputs: Script1Outputs, script1_info: dict[str, Any],
           judge: CaptionJudge | None) -> dict[str, Any]:
    """What the scorecard says beyond the numbers: inputs, upstream defects fixed, names, the composite's status."""
    extra: dict[str, Any] = {
        "families": list(cfg.options.families),
        "script1": script1_info.get("source"),
        "score_files": outputs.sources,
        "notes": outputs.notes,
        "counts": {"binary": len(data.binary), "vqa_pairs": len(data.vqa), "captions": len(data.captions),
                   "splits": len(data.splits), "skills": len(data.skills)},
        "camerabench_average": "WorldFoundry's composite (kind derived): not an official CameraBench metric",
        "units": "fractions in [0, 1]; the leaderboard shows AP and Q-Acc x 100",
    }
    if data.captions:
        extra["caption_metric_upstream_names"] = UPSTREAM_NAMES
        extra["gpt_judge"] = judge.describe() if judge else "off"
    if cfg.fixture:
        extra["data"] = str(Path(data.root))
    return extra
