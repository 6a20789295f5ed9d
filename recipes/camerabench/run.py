"""The CameraBench procedure, top to bottom: prepare, Script 1 (or read any method's files), Script 2, finish.

1. prepare: the pinned data (or the fixture's), the families asked for, the official counts, the judge;
2. Script 1: Qwen2.5-VL scores per sample through the runner (sharded, resumable), also written in the
   official JSON shapes; or, with ``-o scores=DIR`` / ``--fixture``, the official files read as they are;
3. Script 2: one record per sample, then per split, skill and family, strictly (a group with any failed
   or missing sample has no value);
4. scorecard, diff against the leaderboard (full runs of a referenced checkpoint), report.
"""

from __future__ import annotations

from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

from pinbench.core.config import RecipeError
from pinbench.core.derived import DerivedRecord
from pinbench.core.files import write_atomic
from pinbench.core.options import OptionValues
from pinbench.core.run import Run, RunOutcome
from pinbench_recipes.camerabench import fixture, inputs
from pinbench_recipes.camerabench.aggregate import group_records, leaderboard_table, metric_specs
from pinbench_recipes.camerabench.caption_metrics import UPSTREAM_NAMES
from pinbench_recipes.camerabench.dataset import CameraBenchData
from pinbench_recipes.camerabench.judge import CaptionJudge, JudgeError
from pinbench_recipes.camerabench.official_json import ScoreFileError, Script1Outputs, write_score_dir
from pinbench_recipes.camerabench.script1 import CAPTION_SEED, Script1, has_output, outputs_from_records, script1_tasks
from pinbench_recipes.camerabench.script2 import score_sample, script2_tasks

LEADERBOARD_FILE = "leaderboard.md"


def run(run: Run) -> RunOutcome:
    # 1. prepare: data (pinned, or the fixture's synthetic set), families, the optional judge
    with run.step("prepare"):
        model = inputs.script1_model(run.cfg)
        data_root, score_dir = run.fixture(fixture.build_fixture) or (inputs.data_dir(run.cfg, download=False),
                                                                      run.options.scores)
        whole = inputs.load_data(run.cfg, data_root, official=not run.cfg.fixture)
        data = inputs.run_subset(run.cfg, whole)
        judge = _judge(run.options, data)

    # 2. Script 1: this recipe's Qwen2.5-VL run (--skip-generation skips it), or the official files of any method
    with run.step("script1"):
        if model is None:
            try:
                outputs = inputs.score_outputs(score_dir, whole, run.options.families)  # files hold every sample
            except ScoreFileError as exc:
                raise inputs.input_error(exc) from None
            # each file's digest in provenance: a score file edited in place changes no option and no folder, and
            # a diff against a reference recorded from the earlier run otherwise named nothing that differs
            script1_info: dict[str, Any] = {"source": "official score files", "folder": run.recorded_path(score_dir),
                                            "files": {s["file"]: s["sha256"] for s in outputs.sources}}
            mismatch = None if run.cfg.fixture else _other_model(run, outputs)
        else:
            outputs, script1_info = _script1(run, model, data)
            mismatch = None

    # 3. Script 2: per sample, then per split / skill / family (strict), then the composite
    with run.step("script2"):
        tasks = script2_tasks(data, outputs, judge=judge.describe() if judge else None)
        samples = run.score(tasks, partial(score_sample, judge=judge), label="script 2")
    # what the finish needs of the score files, taken before they go: the tasks and the files' parsed rows (112k
    # of each at 10x the test set) are not held through the finish, which would otherwise keep them beside its own
    kept_upstream = outputs.kept_upstream
    extra = _extra(run.options, data, outputs, script1_info, judge,
                   fixture_data=run.recorded_path(Path(data.root)) if run.cfg.fixture else None)
    if mismatch is not None:
        extra["notes"] = [*extra["notes"], mismatch]
    del tasks, outputs
    inputs.forget_score_outputs()

    def groups() -> list[DerivedRecord]:
        """Per split, skill and family (strict), then the composite; with the leaderboard-shaped table beside them
        (AP x 100 per split and Avg, Q-Acc x 100). Computed when the scorecard is: a rerun that changed nothing
        keeps both."""
        derived = group_records(data, {r.sample_id: r for r in samples}, judged=judge is not None,
                                kept_upstream=kept_upstream)
        table = leaderboard_table(derived)
        if table:
            write_atomic(run.out_dir / LEADERBOARD_FILE, table)
        return derived

    # 4. scorecard (the group records are derived, never counted as samples), diff, report
    return run.finish(
        metric_specs(data, judged=judge is not None), samples, derived=groups,
        pins=inputs.pins_for_provenance(model, fixture=run.cfg.fixture),
        seeds={"fixture": fixture.SEED} if run.cfg.fixture else ({"caption": CAPTION_SEED} if model else None),
        extra=extra,
        provenance={"script1": script1_info, "judge": judge.describe() if judge else None},
    )


def _other_model(run: Run, outputs: Script1Outputs) -> str | None:
    """``inputs.other_model`` of a score-only run, warned of and kept in the notes; refused (RecipeError) where the
    files are of another checkpoint of this recipe's and the run's has a reference: the diff would judge one
    leaderboard model's numbers against another's row and could PASS or FAIL on it. Files of a model the recipe does
    not name (the user's own method under a label, the benchmarks' synthetic files run as gpt-4o) are a warning:
    nothing tells which row they belong to."""
    mismatch = inputs.other_model(run.cfg.checkpoint, outputs.sources)
    if mismatch is None:
        return None
    reference = run.recipe.applicable_reference(run.cfg.checkpoint, run.cfg.mode, run.cfg.generator)
    theirs = [name for name in run.recipe.checkpoints if inputs.other_model(name, outputs.sources) is None]
    if reference is not None and theirs:
        raise RecipeError(f"camerabench: {mismatch}: their numbers would be diffed against {reference.name}, "
                          f"that checkpoint's leaderboard row; pass --checkpoint {theirs[0]}")
    print(f"WARNING camerabench: {mismatch}", flush=True)
    return mismatch


def _judge(options: OptionValues, data: CameraBenchData) -> CaptionJudge | None:
    if not options.gpt_judge:
        return None
    if not data.captions:
        raise RecipeError("camerabench: -o gpt_judge=1 judges captions; add caption to -o families")
    try:
        return CaptionJudge.from_env()
    except JudgeError as exc:
        raise RecipeError(f"camerabench: {exc}") from None


def _script1(run: Run, model: inputs.Script1Model, data: CameraBenchData) -> tuple[Script1Outputs, dict[str, Any]]:
    """Script 1 through the run into ``script1/``; its outputs (also written as official files in ``scores/``) and
    what the scorer was."""
    from pinbench_recipes.camerabench.qwen_scorer import QwenCameraScorer, ScorerError, ScorerSettings

    weights, processor = inputs.model_dirs(model, download=False)
    videos = inputs.video_set(run.cfg, data, download=False)
    pins = inputs.pins().huggingface
    settings = ScorerSettings(weights, processor, attn_implementation=run.options.attn,
                              processor_fps=run.options.processor_fps)
    described = {"weights": pins[model.weights_pin].label, "processor": pins[inputs.PROCESSOR_PIN].label,
                 "attn_implementation": settings.attn_implementation, "dtype": settings.dtype,
                 "processor_fps": settings.processor_fps, "recipe_version": run.recipe.version}
    with run.digests() as digests:
        tasks = script1_tasks(data, videos, described, digests)
    scorer_info: dict[str, Any] = {}

    def load() -> QwenCameraScorer:
        try:
            scorer = QwenCameraScorer(settings)
        except ScorerError as exc:
            raise RecipeError(f"camerabench: {exc}") from None
        scorer_info.update(scorer.describe())
        return scorer

    records = run.score(tasks, Script1(load, videos), folder="script1", part="generation", validate=has_output,
                        label="script 1")
    outputs = outputs_from_records(records, data)
    write_score_dir(run.out_dir / "scores", data, outputs, model_name=model.model_name,
                    checkpoint=model.checkpoint, timestamp=datetime.now(timezone.utc).replace(tzinfo=None),
                    video_dir=str(videos.root), extra_metadata={"recipe": "camerabench", **described})
    info = {"source": "camerabench Qwen2.5-VL scorer", "model": described, "videos": videos.describe(),
            "scorer": scorer_info or "not loaded in this run (every sample was already stored)"}
    return outputs, info


def _extra(options: OptionValues, data: CameraBenchData, outputs: Script1Outputs, script1_info: dict[str, Any],
           judge: CaptionJudge | None, *, fixture_data: str | None) -> dict[str, Any]:
    """What the scorecard says beyond the numbers: inputs, upstream defects fixed, names, the composite's status.
    ``fixture_data``: a fixture's data folder as recorded (``Run.recorded_path``): from the run directory, where its
    absolute path named the author's folders on a shared report."""
    extra: dict[str, Any] = {
        "families": list(options.families),
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
    if fixture_data is not None:
        extra["data"] = fixture_data
    return extra
