"""Script 1 through the runner: one task per sample, sharded and resumable, then the official JSON shapes.

7,679 binary tasks (one generate step each), 3,543 VQA tasks (four (question, video) combinations each;
upstream runs eight passes, P(Yes) and P(No) come from one softmax here) and 1,071 captions. A task
holds what its output depends on: the sample, the video file's name, its path under the video folder, size and
SHA-256 (``pinbench.core.inputs``: the same videos in another folder reuse every record), and the model settings
(checkpoint and processor revisions, attention, dtype, processor fps), so changing any of them
recomputes exactly the affected samples. Binary tasks are ordered video by video so a video's questions
follow one another and it is decoded once (within one shard: ``--shard`` interleaves samples, so each
shard decodes the videos of its own samples).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from pinbench.core.inputs import InputDigests
from pinbench.core.runner import SampleRecord
from pinbench_recipes.camerabench.dataset import CameraBenchData
from pinbench_recipes.camerabench.official_json import Script1Outputs
from pinbench_recipes.camerabench.videos import VideoSet

CAPTION_SEED = 20250913  # + sample index; fixes any sampling the checkpoint's generation_config asks for


class Scorer(Protocol):
    def answer_probabilities(self, path: Path | str, question: str) -> dict[str, Any]: ...
    def caption(self, path: Path | str, question: str, seed: int) -> dict[str, Any]: ...


def script1_tasks(data: CameraBenchData, videos: VideoSet, model: Mapping[str, Any],
                  digests: InputDigests) -> list[dict[str, Any]]:
    """Every Script 1 task of the loaded families; ``model`` describes the settings that move numbers."""
    model = dict(model)

    def video(name: str) -> dict[str, Any]:
        return {"name": name, **digests.key(videos.paths[name], videos.root)}

    tasks: list[dict[str, Any]] = []
    for sample in sorted(data.binary, key=lambda s: (s.video, s.split)):
        tasks.append({"sample_id": sample.sample_id, "family": "binary", "video": video(sample.video),
                      "question": sample.question, "model": model})
    for pair in data.vqa:
        tasks.append({"sample_id": pair.sample_id, "family": "vqa", "pos_video": video(pair.pos_video),
                      "neg_video": video(pair.neg_video), "pos_question": pair.pos_question,
                      "neg_question": pair.neg_question, "model": model})
    for sample in data.captions:
        tasks.append({"sample_id": sample.sample_id, "family": "caption", "video": video(sample.video),
                      "question": sample.question, "seed": CAPTION_SEED + sample.index, "model": model})
    return tasks


class Script1:
    """The per-sample function the runner calls: the scorer's outputs for one task.

    The scorer is loaded on the first task that needs computing, so a rerun that finds every sample
    stored never loads the model.
    """

    def __init__(self, load_scorer: Callable[[], Scorer], videos: VideoSet) -> None:
        self._load = load_scorer
        self._scorer: Scorer | None = None
        self.videos = videos

    @property
    def scorer(self) -> Scorer:
        if self._scorer is None:
            self._scorer = self._load()
        return self._scorer

    def _path(self, video: Mapping[str, Any]) -> Path:
        return self.videos.paths[video["name"]]

    def __call__(self, task: Mapping[str, Any]) -> dict[str, Any]:
        family = task["family"]
        if family == "binary":
            out = self.scorer.answer_probabilities(self._path(task["video"]), task["question"])
            return {"score": out.pop("p_yes"), **out}
        if family == "vqa":
            yes, no, sampling = {}, {}, {}
            for text in ("pos", "neg"):
                for image in ("pos", "neg"):
                    out = self.scorer.answer_probabilities(self._path(task[f"{image}_video"]),
                                                           task[f"{text}_question"])
                    combo = f"{text}_text_{image}_image"
                    yes[combo], no[combo] = out.pop("p_yes"), out.pop("p_no")
                    sampling[f"{image}_video"] = out
            return {"yes_scores": yes, "no_scores": no, "sampling": sampling}
        if family == "caption":
            return self.scorer.caption(self._path(task["video"]), task["question"], seed=task["seed"])
        raise ValueError(f"unknown family {family!r}")


def has_output(result: Mapping[str, Any]) -> bool:
    """Runner ``validate`` for Script 1 records: the value Script 2 reads is there."""
    return "score" in result or ("yes_scores" in result and "no_scores" in result) or "caption" in result


def outputs_from_records(records: Sequence[SampleRecord], data: CameraBenchData) -> Script1Outputs:
    """Script 1 records as Script 2 input: the value, or ``{"error": ...}`` for a failed or missing one."""
    families = {s.sample_id: "binary" for s in data.binary}
    families.update({p.sample_id: "vqa" for p in data.vqa})
    families.update({s.sample_id: "caption" for s in data.captions})
    out = Script1Outputs()
    for record in records:
        family = families[record.sample_id]
        target = getattr(out, family)
        if not record.ok:
            target[record.sample_id] = {"error": record.error or "failed"}
        elif family == "binary":
            target[record.sample_id] = {"score": record.result["score"]}
        elif family == "vqa":
            target[record.sample_id] = {"yes_scores": record.result["yes_scores"],
                                        "no_scores": record.result["no_scores"]}
        else:
            target[record.sample_id] = {"caption": record.result["caption"]}
    return out
