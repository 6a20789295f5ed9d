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
from typing import Any

from pinbench.core.runner import SampleFailed
from pinbench_recipes.camerabench.caption_metrics import lexical_metrics
from pinbench_recipes.camerabench.dataset import CameraBenchData
from pinbench_recipes.camerabench.official_json import Script1Outputs
from pinbench_recipes.camerabench.vqa_metrics import check_scores, pair_outcome

NO_OUTPUT = "missing: no Script 1 output for this sample"
Judge = Callable[[str, str], Mapping[str, Any]]


class Script1Failed(SampleFailed):
    """The sample's Script 1 output is an error (or absent); the message says which (no traceback is stored)."""


def script2_tasks(data: CameraBenchData, outputs: Script1Outputs, *,
                  judge: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """One task per sample of every loaded family, in dataset order (binary, vqa, caption)."""
    tasks: list[dict[str, Any]] = []
    tasks += [{"sample_id": s.sample_id, "family": "binary", "label": s.label,
               "output": outputs.binary.get(s.sample_id)} for s in data.binary]
    tasks += [{"sample_id": p.sample_id, "family": "vqa", "output": outputs.vqa.get(p.sample_id)}
              for p in data.vqa]
    tasks += [{"sample_id": s.sample_id, "family": "caption", "reference": s.reference,
               "output": outputs.caption.get(s.sample_id), "judge": dict(judge) if judge else None}
              for s in data.captions]
    return tasks


def _output(task: Mapping[str, Any]) -> Mapping[str, Any]:
    output = task.get("output")
    if output is None:
        raise Script1Failed(NO_OUTPUT)
    if "error" in output:
        raise Script1Failed(str(output["error"]))
    return output


def score_sample(task: Mapping[str, Any], judge: Judge | None = None) -> dict[str, Any]:
    """The per-sample Script 2 result of one task (see ``script2_tasks``)."""
    output = _output(task)
    family = task["family"]
    if family == "binary":
        return {"score": float(output["score"]), "label": int(task["label"])}
    if family == "vqa":
        yes = check_scores(output["yes_scores"], "yes_scores")
        no = check_scores(output["no_scores"], "no_scores")
        return {"yes_scores": yes, "no_scores": no, **pair_outcome(yes, no)}
    if family == "caption":
        caption = output["caption"]
        if not caption:
            raise Script1Failed("empty generated caption (upstream leaves it out of every mean)")
        result: dict[str, Any] = {"caption": caption, **lexical_metrics(task["reference"], caption)}
        if task.get("judge") is not None:
            if judge is None:
                raise RuntimeError("the task asks for the GPT judge but none was configured")
            result.update(judge(task["reference"], caption))  # JudgeError fails the sample; a rerun retries it
        return result
    raise ValueError(f"unknown family {family!r}")
