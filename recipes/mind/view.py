"""What ``pinbench view`` shows of a MIND sample (``pinbench.results.view``).

A continuation sample (mem_test, action_space_test): the rollout in the generated layout, and the GT video beside it
as the reference, played from its ``mark_time`` (the context boundary, read from the GT ``action.json``): the
rollout's frame 0 is GT frame ``mark_time``, as ``process.py`` compares them; the frames it scored are a span. A
mirror_test sample: each of its rollouts (no GT: a rollout is compared with its own time-reversed half).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pinbench.results.view import MediaFile, RunInputs, SampleMedia, Span, Text, Video, not_a_folder
from pinbench_recipes.mind.layout import (
    GENERATED_VIDEO,
    GT_ACTIONS,
    GT_VIDEO,
    MIRROR_TEST,
    LayoutError,
    key_from_sample_id,
    read_action_file,
)


def _roots(run: RunInputs) -> tuple[Path | None, Path | None]:
    if run.fixture:
        return run.generated or run.fixture_dir / "generated", run.fixture_dir / "MIND-Data"
    return run.generated or run.option_path("videos"), run.option_path("gt")


def sample_media(run: RunInputs, sample_id: str, result: Mapping[str, Any] | None) -> SampleMedia:
    media = SampleMedia()
    key = key_from_sample_id(sample_id)
    generated, gt = _roots(run)
    folder = f"{key.perspective}/{key.test_type}/{key.path}"
    if key.test_type == MIRROR_TEST:
        found = sorted((generated / folder).glob("*.mp4")) if generated is not None else []
        media.rollouts += [Video(p.stem, MediaFile(generated, f"{folder}/{p.name}")) for p in found]
        if not found:
            media.rollouts.append(Video("rollout", None, problem=not_a_folder(generated) if generated is not None
                                        and not generated.is_dir() else f"no *.mp4 under {generated}/{folder}"))
        media.texts.append(Text("mirror test", "each rollout is compared with its own time-reversed second half"))
        return media
    media.rollouts.append(Video("rollout", MediaFile(generated, f"{folder}/{GENERATED_VIDEO}")) if generated else
                          Video("rollout", None, problem="the run recorded no generated videos (-o videos)"))
    scored = result.get("official_frames") if result else None
    if isinstance(scored, int) and scored > 0:
        media.spans.append(Span(f"frames process.py scored (0-{scored - 1})", 0, scored))
    if gt is None:
        media.problems.append("the run recorded no GT folder (-o gt)")
        return media
    gt_folder = f"{key.perspective}/test/{key.test_type}/{key.path}"
    try:
        actions = read_action_file(gt / gt_folder / GT_ACTIONS)
    except LayoutError as exc:
        media.problems.append(f"the context boundary is unknown: {exc}")
        return media
    media.inputs.append(Video(f"GT: context to frame {actions.mark_time - 1}, then the continuation",
                              MediaFile(gt, f"{gt_folder}/{GT_VIDEO}"), offset_frames=actions.mark_time))
    media.texts.append(Text("context boundary", f"mark_time {actions.mark_time} of {actions.total_time} GT frames: "
                                                "the rollout's frame 0 is compared with this GT frame"))
    return media
