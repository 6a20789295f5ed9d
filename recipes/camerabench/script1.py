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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pinbench.core.inputs import InputDigests, InputKey
from pinbench.core.runner import SampleRecord
from pinbench.core.task import Task
from pinbench_recipes.camerabench.dataset import CameraBenchData
from pinbench_recipes.camerabench.official_json import BinaryScore, Caption, Combos, Failure, Script1Outputs, VqaScores
from pinbench_recipes.camerabench.videos import VideoSet
from pinbench_recipes.camerabench.vqa_metrics import check_scores

CAPTION_SEED = 20250913  # + sample index; fixes any sampling the checkpoint's generation_config asks for


class Scorer(Protocol):
    def answer_probabilities(self, path: Path | str, question: str) -> dict[str, Any]: ...
    def caption(self, path: Path | str, question: str, seed: int) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class VideoKey(InputKey):
    """A dataset video as a task holds it: its key (``pinbench.core.inputs``) and its name in the dataset."""

    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BinaryQuestion(Task):
    video: VideoKey
    question: str
    model: dict[str, Any]    # the settings that move numbers
    family: str = "binary"


@dataclass(frozen=True, slots=True, kw_only=True)
class VqaQuestions(Task):
    """Four (question, video) combinations: P(Yes) and P(No) of each."""

    pos_video: VideoKey
    neg_video: VideoKey
    pos_question: str
    neg_question: str
    model: dict[str, Any]
    family: str = "vqa"


@dataclass(frozen=True, slots=True, kw_only=True)
class CaptionRequest(Task):
    video: VideoKey
    question: str
    seed: int
    model: dict[str, Any]
    family: str = "caption"


Script1Task = BinaryQuestion | VqaQuestions | CaptionRequest


def script1_tasks(data: CameraBenchData, videos: VideoSet, model: Mapping[str, Any],
                  digests: InputDigests) -> list[Script1Task]:
    """Every Script 1 task of the loaded families; ``model`` describes the settings that move numbers."""
    model = dict(model)

    def video(name: str) -> VideoKey:
        key = digests.key(videos.paths[name], videos.root)
        return VideoKey(key.path, key.size, key.sha256, name)

    tasks: list[Script1Task] = []
    tasks += [BinaryQuestion(sample_id=sample.sample_id, video=video(sample.video), question=sample.question,
                             model=model) for sample in sorted(data.binary, key=lambda s: (s.video, s.split))]
    tasks += [VqaQuestions(sample_id=pair.sample_id, pos_video=video(pair.pos_video),
                           neg_video=video(pair.neg_video), pos_question=pair.pos_question,
                           neg_question=pair.neg_question, model=model) for pair in data.vqa]
    tasks += [CaptionRequest(sample_id=sample.sample_id, video=video(sample.video), question=sample.question,
                             seed=CAPTION_SEED + sample.index, model=model) for sample in data.captions]
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

    def _path(self, video: VideoKey) -> Path:
        return self.videos.paths[video.name]

    def __call__(self, task: Script1Task) -> dict[str, Any]:
        if isinstance(task, BinaryQuestion):
            out = self.scorer.answer_probabilities(self._path(task.video), task.question)
            return {"score": out.pop("p_yes"), **out}
        if isinstance(task, VqaQuestions):
            yes, no, sampling = {}, {}, {}
            for text, question in (("pos", task.pos_question), ("neg", task.neg_question)):
                for image, video in (("pos", task.pos_video), ("neg", task.neg_video)):
                    out = self.scorer.answer_probabilities(self._path(video), question)
                    combo = f"{text}_text_{image}_image"
                    yes[combo], no[combo] = out.pop("p_yes"), out.pop("p_no")
                    sampling[f"{image}_video"] = out
            return {"yes_scores": yes, "no_scores": no, "sampling": sampling}
        return self.scorer.caption(self._path(task.video), task.question, seed=task.seed)


def has_output(result: Mapping[str, Any]) -> bool:
    """Runner ``validate`` for Script 1 records: the value Script 2 reads is there."""
    return "score" in result or ("yes_scores" in result and "no_scores" in result) or "caption" in result


def outputs_from_records(records: Sequence[SampleRecord], data: CameraBenchData) -> Script1Outputs:
    """Script 1 records as Script 2 input: the value, or a ``Failure`` for a failed or missing one, or one whose
    probabilities are not in [0, 1] (a non-finite one is stored as null): the official files written from them
    then say so in ``error``, never a null where a number belongs."""
    families = {s.sample_id: "binary" for s in data.binary}
    families.update({p.sample_id: "vqa" for p in data.vqa})
    families.update({s.sample_id: "caption" for s in data.captions})
    out = Script1Outputs()
    for record in records:
        family, sid, result = families[record.sample_id], record.sample_id, record.result
        if not record.ok or result is None:
            getattr(out, family)[sid] = Failure(record.error or "failed")
        elif family == "binary":
            score = result["score"]   # null when the model's probability was not finite
            probability = type(score) in (float, int) and 0.0 <= score <= 1.0
            out.binary[sid] = (BinaryScore(float(score)) if probability
                               else Failure(f"P(Yes) is {score!r}, not a probability"))
        elif family == "vqa":
            try:
                out.vqa[sid] = VqaScores(*(Combos.of(check_scores(result[what], what))
                                           for what in ("yes_scores", "no_scores")))
            except ValueError as exc:
                out.vqa[sid] = Failure(f"{type(exc).__name__}: {exc}")
        else:
            out.caption[sid] = Caption(result["caption"])
    return out
