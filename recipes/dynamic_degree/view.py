"""What ``pinbench view`` shows of a dynamic-degree sample (``pinbench.results.view``): the video the record scored
(``result["video"]`` under the run's videos folder, checked against its ``video_sha256``), each 2 s clip as a span of
its timeline, and the flow magnitude ``m`` of every sampled transition against the threshold tau."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pinbench.core.files import while_unchanged
from pinbench.core.inputs import sample_ids
from pinbench.results.view import MediaFile, RunInputs, SampleMedia, Series, Span, Video, not_a_folder


@while_unchanged(lambda root: [root])
def _by_id(root: Path) -> dict[str, str]:
    """Sample id -> video path under ``root``, as the run named its inputs (for samples without a result)."""
    from pinbench_recipes.dynamic_degree.prepare import list_videos

    inputs = list_videos(root)
    return {sid: entry.relative for entry, (sid, _) in zip(inputs, sample_ids(root, inputs), strict=True)}


def facets(sample_id: str, result: Mapping[str, Any] | None) -> dict[str, str]:
    from pinbench_recipes.dynamic_degree.prepare import loop_family

    family = loop_family(sample_id)
    return {"loop family": family} if family else {}


def sample_media(run: RunInputs, sample_id: str, result: Mapping[str, Any] | None) -> SampleMedia:
    media = SampleMedia()
    root = run.fixture_dir if run.fixture else run.option_path("videos")
    relative = result.get("video") if result else None
    if root is None:
        media.rollouts.append(Video("video", None, problem="the run recorded no videos folder (-o videos)"))
        return media
    if not root.is_dir():
        media.rollouts.append(Video("video", None, problem=not_a_folder(root)))
        return media
    # the record names the video's file name only: under a subfolder (``a/x.mp4``, id ``a__x``) the page looked for
    # ``x.mp4`` at the top, "no such file", or another video of that name there (said to hold other bytes)
    if not (isinstance(relative, str) and Path(relative).stem == sample_id):
        relative = None
    if relative is None:
        try:
            relative = _by_id(root.resolve()).get(sample_id)
        except ValueError as exc:  # RecipeError: the folder is gone or holds no video
            relative = None
            media.problems.append(str(exc))
    expected = result.get("video_sha256") if result else None
    media.rollouts.append(Video("video", MediaFile(root, relative), expected) if relative else
                          Video("video", None, problem=f"no video of {sample_id} under {root}"))
    if not result:
        return media
    tau = result.get("tau")
    for clip in result.get("clips") or ():
        sampled, m = clip.get("sampled") or [], clip.get("m") or []
        verdict = {1: "dynamic", 0: "static"}.get(clip.get("dynamic"), clip.get("error") or "not scored")
        media.spans.append(Span(f"clip {clip.get('name')}: {verdict} ({clip.get('n_active')} of "
                                f"{clip.get('n_required')} needed)", int(clip["start"]), int(clip["stop"])))
        if m and len(sampled) == len(m) + 1:
            media.series.append(Series(f"clip {clip.get('name')} m", tuple(sampled[:-1]), tuple(m),
                                       tau if isinstance(tau, (int, float)) else None, "tau"))
    return media
