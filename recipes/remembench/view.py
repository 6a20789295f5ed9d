"""What ``pinbench view`` shows of a RememBench sample (``pinbench.results.view``).

The rollout is found as the run found it (``find_video`` under the run's generated rollouts, ``-o videos``, or the
fixture's rollouts) and checked against the ``video_sha256`` its record holds. The task's inputs come from the release
the run read (the fixture's, ``-o dataset_dir``, or the pinned revision in the cache: never downloaded here): a T2V
scene's four prompts, laid on the timeline from their start seconds; an I2V sample's prompt, and its conditioning
image from the prepared initial frames the run read (``-o images``, or the fixture's), which the release does not hold.
The marked frames are the record's: departure and revisit (and the I2V turnaround).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pinbench.core.files import while_unchanged
from pinbench.results.view import Image, Marker, MediaFile, RunInputs, SampleMedia, Span, Text, Video, not_a_folder
from pinbench_recipes.remembench.dataset import PAPER, I2VRow, Row, T2VRow, read_rows
from pinbench_recipes.remembench.prepare import TEST_FILES, find_video

MARKED = (("departure", "departure_frame"), ("turnaround", "turnaround_frame"), ("revisit", "revisit_frame"))


def _release_root(run: RunInputs) -> Path:
    from pinbench_recipes.remembench.release import dataset_pin, parse_dataset_spec

    if run.fixture:
        return run.fixture_dir / "RememBench"
    local = run.option_path("dataset_dir")
    if local is not None:
        return local
    from pinbench.ops.downloads import locate

    return Path(locate(dataset_pin(*parse_dataset_spec(str(run.options.get("dataset"))))))


@while_unchanged(lambda root, fixture: [root / "checksums.sha256", *(root / name for name in TEST_FILES.values())])
def _rows(root: Path, fixture: bool) -> dict[str, Row]:
    """Every row of the release's T2V and I2V test files, verified against its checksums, by sample id."""
    from pinbench_recipes.remembench.fixture import I2V, T2V
    from pinbench_recipes.remembench.release import Release, read_checksums

    release = Release(root=root, repo_id="", revision="", local_copy=True,
                      checksums=read_checksums(root / "checksums.sha256"))
    paper = {"t2v": T2V, "i2v": I2V} if fixture else PAPER
    rows: dict[str, Row] = {}
    for split, name in TEST_FILES.items():
        if (root / name).is_file():
            rows.update((row.sample_id, row) for row in read_rows(release.path(name), split, paper[split]))
    return rows


def sample_media(run: RunInputs, sample_id: str, result: Mapping[str, Any] | None) -> SampleMedia:
    media = SampleMedia()
    videos = run.generated or (run.fixture_dir / "rollouts" if run.fixture else run.option_path("videos"))
    expected = result.get("video_sha256") if result else None
    if videos is None:
        media.rollouts.append(Video("rollout", None, problem="the run recorded no videos folder (-o videos)"))
    elif not videos.is_dir():
        media.rollouts.append(Video("rollout", None, problem=not_a_folder(videos)))
    else:
        video, looked = find_video(videos, sample_id)
        media.rollouts.append(Video("rollout", MediaFile(videos, video.relative_to(videos).as_posix()), expected)
                              if video is not None else
                              Video("rollout", None, problem=f"no rollout in {videos}: looked for {', '.join(looked)}"))
    for label, key in MARKED:
        frame = result.get(key) if result else None
        if isinstance(frame, int) and not isinstance(frame, bool):
            media.markers.append(Marker(label, frame))
    try:
        root = _release_root(run)
        row = _rows(root.resolve(), run.fixture).get(sample_id)
    except (OSError, ValueError, RuntimeError) as exc:
        media.problems.append(f"the prompts are not shown: the release is not readable here ({exc})")
        return media
    if isinstance(row, T2VRow):
        starts = [math.floor(s * row.fps + 1e-9) for s in row.prompt_start_seconds]
        for k, (prompt, start) in enumerate(zip(row.prompts, starts, strict=True)):
            stop = starts[k + 1] if k + 1 < len(starts) else row.num_frames
            media.spans.append(Span(f"{k + 1}: {prompt}", start, stop))
            media.texts.append(Text(f"prompt {k + 1} (from {row.prompt_start_seconds[k]:g} s, frame {start})", prompt))
    elif isinstance(row, I2VRow):
        media.texts.append(Text("prompt", row.prompt))
        media.texts.append(Text("camera path", f"{row.setting}: {row.rotation_degrees} degrees {row.direction}"))
        images = run.fixture_dir / "i2v-images" if run.fixture else run.option_path("images")  # not in the release
        if images is None:
            media.problems.append("the conditioning image is not shown: the run recorded no images folder (-o images, "
                                  "which only I2V generation reads)")
        else:
            media.images.append(Image("conditioning image", MediaFile(images, row.image_path)))
    else:
        media.problems.append(f"{sample_id}: not a row of the release at {root}")
    return media
