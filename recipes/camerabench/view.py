"""What ``pinbench view`` shows of a CameraBench sample (``pinbench.results.view``).

Every metric reads derived records (a split's AP, a skill's accuracy), so the per-sample values are the score files'
own (``VALUES``); a sample is filtered by family and by split (binary) or skill (VQA), read from its id. With the data
folder the run read (``-o data``, or the fixture's), the sample page shows its question(s) and label; with ``-o
videos`` its video(s) (flat or one level of folders, as the run looks for them).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pinbench.core.files import while_unchanged
from pinbench.results.view import MediaFile, RunInputs, SampleMedia, Text, Video, not_a_folder

VALUES = {"score": None, "question_correct": "higher", "binary_correct": "higher"}


def facets(sample_id: str, result: Mapping[str, Any] | None) -> dict[str, str]:
    family, _, rest = sample_id.partition("__")
    named = {"family": family}
    if family in ("binary", "vqa"):
        named["split" if family == "binary" else "skill"] = rest.split("__", 1)[0]
    return named


@while_unchanged(lambda root: [root / "binary_classification", root / "vqa_and_retrieval"])
def _samples(root: Path) -> dict[str, Any] | str:
    """The data folder's samples by id, or why it cannot be read: said once, not parsed again for every sample."""
    from pinbench_recipes.camerabench.dataset import DatasetError, load_dataset

    try:
        data = load_dataset(root, ["binary", "vqa"])
    except (DatasetError, OSError) as exc:
        return f"camerabench view: {exc}"
    return {s.sample_id: s for s in (*data.binary, *data.vqa)}


def _video(videos: Path | None, name: str, label: str) -> Video:
    if videos is None:
        return Video(label, None, problem=f"{name}: the run was given no videos folder (-o videos)")
    if not videos.is_dir():
        return Video(label, None, problem=f"{name}: {not_a_folder(videos)}")
    found = next((p for p in (videos / name, *videos.glob(f"*/{name}")) if p.is_file()), None)
    if found is None:
        return Video(label, None, problem=f"{name}: not under {videos}")
    return Video(label, MediaFile(videos, found.relative_to(videos).as_posix()))


def sample_media(run: RunInputs, sample_id: str, result: Mapping[str, Any] | None) -> SampleMedia:
    media = SampleMedia()
    root = run.fixture_dir / "data" if run.fixture else run.option_path("data")
    if root is None:
        media.problems.append("the questions are not shown: the run read the pinned data from the cache (-o data "
                              "names a local copy)")
        return media
    samples = _samples(root)
    if isinstance(samples, str):
        media.problems.append(samples)
        return media
    sample = samples.get(sample_id)
    videos = run.option_path("videos")
    if hasattr(sample, "label"):
        media.rollouts.append(_video(videos, sample.video, "video"))
        media.texts += [Text("question", sample.question), Text("label", "Yes" if sample.label else "No")]
    elif sample is not None:
        media.rollouts += [_video(videos, sample.pos_video, "positive video"),
                           _video(videos, sample.neg_video, "negative video")]
        media.texts += [Text("positive question", sample.pos_question),
                        Text("negative question", sample.neg_question)]
    return media
