"""Script 2, per sample: one runner task per dataset sample, carrying its Script 1 output.

A task holds everything its record depends on (label or reference, the Script 1 output, the judge's
settings), so a changed score file or a newly enabled judge recomputes exactly the samples it affects.
A judge call that fails after its retries fails the caption sample (never a made-up score); the runner
computes failed samples again on the next run.
A sample whose Script 1 output is an error, or that has no output at all, fails here with that reason:
it stays in the denominator, named.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pinbench.core.runner import SampleFailed
from pinbench.core.task import Task
from pinbench_recipes.camerabench.caption_metrics import lexical_metrics
from pinbench_recipes.camerabench.dataset import CameraBenchData
from pinbench_recipes.camerabench.official_json import BinaryScore, Caption, Failure, Script1Outputs, VqaScores
from pinbench_recipes.camerabench.vqa_metrics import check_scores, pair_outcome

NO_OUTPUT = "missing: no Script 1 output for this sample"
Judge = Callable[[str, str], Mapping[str, Any]]


class Script1Failed(SampleFailed):
    """The sample's Script 1 output is an error (or absent); the message says which (no traceback is stored)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BinaryTask(Task):
    label: int
    output: BinaryScore | Failure | None      # the Script 1 output; None: there is none
    family: str = "binary"


@dataclass(frozen=True, slots=True, kw_only=True)
class VqaTask(Task):
    output: VqaScores | Failure | None
    family: str = "vqa"


@dataclass(frozen=True, slots=True, kw_only=True)
class CaptionTask(Task):
    reference: str
    output: Caption | Failure | None
    judge: dict[str, Any] | None = None   # the GPT judge's settings, when it scores this caption
    family: str = "caption"


Script2Task = BinaryTask | VqaTask | CaptionTask


def script2_tasks(data: CameraBenchData, outputs: Script1Outputs, *,
                  judge: Mapping[str, Any] | None = None) -> list[Script2Task]:
    """One task per sample of every loaded family, in dataset order (binary, vqa, caption)."""
    tasks: list[Script2Task] = []
    tasks += [BinaryTask(sample_id=s.sample_id, label=s.label, output=outputs.binary.get(s.sample_id))
              for s in data.binary]
    tasks += [VqaTask(sample_id=p.sample_id, output=outputs.vqa.get(p.sample_id)) for p in data.vqa]
    tasks += [CaptionTask(sample_id=s.sample_id, reference=s.reference, output=outputs.caption.get(s.sample_id),
                          judge=dict(judge) if judge else None) for s in data.captions]
    return tasks


def score_sample(task: Script2Task, judge: Judge | None = None) -> dict[str, Any]:
    """The per-sample Script 2 result of one task (see ``script2_tasks``)."""
    output = task.output
    if output is None:
        raise Script1Failed(NO_OUTPUT)
    if isinstance(output, Failure):
        raise Script1Failed(output.error)
    if isinstance(output, BinaryScore):
        return {"score": float(output.score), "label": int(task.label)}
    if isinstance(output, VqaScores):
        yes = check_scores(output.yes_scores.to_json(), "yes_scores")
        no = check_scores(output.no_scores.to_json(), "no_scores")
        return {"yes_scores": yes, "no_scores": no, **pair_outcome(yes, no)}
    caption = output.caption
    if not caption:
        raise Script1Failed("empty generated caption (upstream leaves it out of every mean)")
    result: dict[str, Any] = {"caption": caption, **lexical_metrics(task.reference, caption)}
    if task.judge is not None:
        if judge is None:
            raise RuntimeError("the task asks for the GPT judge but none was configured")
        result.update(judge(task.reference, caption))  # JudgeError fails the sample; a rerun retries it
    return result
