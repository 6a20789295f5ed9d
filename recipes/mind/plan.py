"""The plan: the GT and generated layouts checked before any GPU work, and what will be scored.

``process.py`` fails late, silently or both on bad input: a missing test directory aborts the whole run
after the models loaded, a video of 100 frames or fewer gets no metrics and no error, an odd mirror video
is skipped with a per-video note, a stray file in ``mirror_test`` fails four times, a generated directory
whose name is not in GT is skipped without a word, and ``--video_max_time`` at or below 100 scores
nothing at all. Every such case is one line here, naming the file, and the run stops before it starts.

A GT sample that has no generated video is not a problem of the layout: it is counted as a failed sample
by name (the denominator is the GT), and the plan lists it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pinbench.core.files import counted
from pinbench.media.video import VideoError, named_video_info, opened_video
from pinbench_recipes.mind.layout import (
    ACTION_FRAMES,
    CHUNK_FRAMES,
    GENERATED_VIDEO,
    GT_ACTIONS,
    GT_POSES,
    GT_VIDEO,
    MIN_VALID_RPE_STEPS,
    MIRROR_TEST,
    OFFICIAL_METRICS,
    ONE_PAIR_BATCH_ERROR,
    PERSPECTIVES,
    ContinuationSample,
    LayoutError,
    MirrorSample,
    MirrorVideo,
    Sample,
    SampleKey,
    container_frames,
    count_pose_entries,
    mirror_fails_upstream,
    read_action_file,
    requested_tests,
)

MAX_NAME_BYTES = 160          # sample ids are "<perspective>.<test type>.<name>" file names (<= 200 bytes)
MIRROR_NAME = re.compile(r"path-\d+\.mp4")


@dataclass
class Plan:
    """The outcome: every expected sample in order, the problems that stop the run, and notes."""

    gt_root: Path
    generated_root: Path | None
    metrics: tuple[str, ...]
    video_max_time: int | None
    samples: list[Sample] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    n_available: int = 0          # expected samples before --limit

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def missing(self) -> list[SampleKey]:
        """GT samples without a generated video: failed by name, never scored (unknown without a generated root)."""
        if self.generated_root is None:
            return []
        return [s.key for s in self.samples if isinstance(s, ContinuationSample) and s.video is None]

    def plan_lines(self) -> list[str]:
        """What will be scored, per perspective and test, before anything is scored."""
        vmt = "none" if self.video_max_time is None else str(self.video_max_time)
        head = f"MIND plan: {counted(len(self.samples), 'sample')}"
        if len(self.samples) != self.n_available:
            head += f" (--limit: the first {len(self.samples)} of {self.n_available})"
        lines = [f"{head}; metrics {','.join(self.metrics)}; video_max_time {vmt}"]
        for perspective in PERSPECTIVES:
            for test in requested_tests(self.metrics):
                group = [s for s in self.samples if s.key.perspective == perspective and s.key.test_type == test]
                if not group:
                    continue
                summary = (f"{counted(len(group), 'sample')}; generated videos not checked"
                           if self.generated_root is None else _group_summary(group, self.video_max_time))
                lines.append(f"  {perspective}/{test}: {summary}")
        if self.missing:
            shown = ", ".join(k.label for k in self.missing[:5])
            more = f" and {len(self.missing) - 5} more" if len(self.missing) > 5 else ""
            lines.append(f"  no generated video (counted failed): {shown}{more}")
        lines += [f"  note: {note}" for note in self.notes]
        return lines


def _group_summary(group: Sequence[Sample], video_max_time: int | None) -> str:
    continuation = [s for s in group if isinstance(s, ContinuationSample)]
    if continuation:
        present = [s for s in continuation if s.video is not None]
        if not present:
            return f"{counted(len(group), 'sample')}, none generated"
        reads = sum(s.real_time(video_max_time) for s in present)
        scored = sum(s.frames_scored(video_max_time) for s in present)
        return (f"{len(present)}/{counted(len(group), 'sample')} generated; {scored} of {reads} frame pairs scored "
                f"(the chunk of up to {CHUNK_FRAMES} frames that ends each read is dropped, as upstream)")
    mirrors = [s for s in group if isinstance(s, MirrorSample)]
    videos = sum(len(s.videos) for s in mirrors)
    pairs = sum(v.pairs for s in mirrors for v in s.videos)
    return (f"{counted(len(mirrors), 'directory', 'directories')}, {counted(videos, 'rollout')}, {pairs} mirrored "
            "frame pairs")


# ---------------------------------------------------------------------------------------- checks


def _one_line(text: str) -> str:
    """Control characters (a newline in a file name) escaped, so that every problem stays one line; so are the
    undecodable bytes of a non-UTF-8 name (``os.listdir`` hands them over as lone surrogates, which no UTF-8
    output can print)."""
    return "".join(c if 0x20 <= ord(c) != 0x7F and not 0xD800 <= ord(c) <= 0xDFFF else repr(c)[1:-1]
                   for c in text)


def _name_problem(name: str) -> str | None:
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return "has a control character in its name"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "has a name that is not valid UTF-8 (sample ids and process.py's Result.json hold names as UTF-8)"
    if size > MAX_NAME_BYTES:
        return f"has a name longer than {MAX_NAME_BYTES} bytes"
    return None


def _list_dir(path: Path, what: str, problems: list[str]) -> list[str] | None:
    """Sorted entries of a directory process.py lists, or None (with a problem) when it cannot be listed."""
    if not path.exists():
        problems.append(f"{path}: {what} directory is missing (process.py lists it and aborts the whole run)")
        return None
    if not path.is_dir():
        problems.append(f"{path}: {what} is not a directory")
        return None
    try:
        return sorted(os.listdir(path))
    except OSError as exc:
        problems.append(f"{path}: cannot list {what}: {exc.strerror}")
        return None


def _regular_file(path: Path, what: str, problems: list[str]) -> bool:
    """True for an existing regular file (a symlink to one counts); a problem line otherwise."""
    if path.is_symlink() and not path.exists():
        problems.append(f"{path}: {what} is a dangling symlink")
    elif not path.exists():
        from pinbench.ops.generation import NearNames  # 0.3 s of imports, for a missing file only

        problems.append(f"{path}: {what} is missing{NearNames()(path)}")
    elif not path.is_file():
        problems.append(f"{path}: {what} is not a regular file")
    else:
        return True
    return False


def _video_frames(path: Path, problems: list[str]) -> int | None:
    """process.py's frame count of a video, after checking the file decodes as a whole (None: a problem)."""
    try:
        with opened_video(path) as fd:   # one open: both counts are of the file that was checked
            named_video_info(path, fd=fd)   # structure first: an empty or cut MP4, or another container, named .mp4
            frames = container_frames(path, fd)
    except (LayoutError, VideoError) as exc:
        problems.append(str(exc))
        return None
    if frames <= 0:
        problems.append(f"{path}: the container declares no frame count (stream.frames is 0); process.py "
                        "would read 0 frames and score nothing: remux it to MP4")
        return None
    return frames


def _gt_names(gt_root: Path, perspective: str, test: str, problems: list[str]) -> list[str]:
    names = _list_dir(gt_root / perspective / "test" / test, "GT test", problems) or []
    return [n for n in names if not n.startswith(".") and (gt_root / perspective / "test" / test / n).is_dir()]


def _check_generated_names(gen_dir: Path, gt_names: set[str], problems: list[str]) -> set[str]:
    """Generated sample directories of one continuation test; strays and unknown names are problems."""
    names = _list_dir(gen_dir, "generated test", problems)
    found: set[str] = set()
    for name in names or []:
        if name.startswith("."):
            continue   # process.py skips names absent from GT; hidden files (.DS_Store) are harmless here
        path = gen_dir / name
        problem = _name_problem(name)
        if problem:
            problems.append(f"{path}: {problem}")
        elif name not in gt_names:
            problems.append(f"{path}: no GT sample of this name (process.py would skip it without a word)")
        elif not path.is_dir():
            problems.append(f"{path}: not a directory (expected {name}/{GENERATED_VIDEO})")
        else:
            found.add(name)
    return found


def _continuation_sample(key: SampleKey, gt_dir: Path, gen_dir: Path | None, metrics: Sequence[str],
                         video_max_time: int | None, problems: list[str]) -> ContinuationSample | None:
    """Check one GT sample (and its generated video when there is one); None when it is unusable."""
    n_before = len(problems)
    try:
        actions = read_action_file(gt_dir / GT_ACTIONS)
    except LayoutError as exc:
        problems.append(str(exc))
        return None
    continuation = actions.total_time - actions.mark_time
    if continuation <= CHUNK_FRAMES:
        problems.append(f"{gt_dir / GT_ACTIONS}: total_time - mark_time = {continuation} <= {CHUNK_FRAMES}: "
                        "process.py scores nothing for this sample and reports no error")
    if "action" in metrics and len(actions.actions) < MIN_VALID_RPE_STEPS:
        problems.append(f"{gt_dir / GT_ACTIONS}: only {len(actions.actions)} action entries after mark_time "
                        f"{actions.mark_time}; action.py needs {MIN_VALID_RPE_STEPS} steps and would return no block")
    gt_video = gt_dir / GT_VIDEO
    gt_frames = _video_frames(gt_video, problems) if _regular_file(gt_video, "GT video", problems) else None
    poses = count_pose_entries(gt_dir / GT_POSES) if "action" in metrics else 0
    video, frames = None, None
    if gen_dir is not None:
        video = gen_dir / GENERATED_VIDEO
        frames = _video_frames(video, problems) if _regular_file(video, "generated video", problems) else None
        if frames is not None:
            _check_continuation_frames(video, frames, actions.mark_time, actions.total_time, problems)
            if gt_frames is not None:
                needed = actions.mark_time + min(continuation, frames)
                if gt_frames < needed:
                    problems.append(f"{gt_video}: {gt_frames} frames, but frames up to {needed} (mark_time "
                                    f"{actions.mark_time} + the continuation read) are compared")
    if len(problems) > n_before or gt_frames is None:
        return None
    return ContinuationSample(key=key, gt_dir=gt_dir, actions=actions, gt_frames=gt_frames, gt_poses=poses,
                              video=video, video_frames=frames)


def _check_continuation_frames(video: Path, frames: int, mark: int, total: int, problems: list[str]) -> None:
    continuation = total - mark
    if frames < continuation:
        problems.append(f"{video}: {frames} frames, fewer than the GT continuation (total_time {total} - "
                        f"mark_time {mark} = {continuation}); generate the whole continuation")
    if frames <= CHUNK_FRAMES:
        problems.append(f"{video}: {frames} frames; process.py scores nothing at or below {CHUNK_FRAMES} "
                        "frames and reports no error")


def _mirror_dirs(gen_dir: Path, problems: list[str]) -> list[str]:
    """Names of the mirror_test directories; every entry becomes a task upstream, so strays are problems."""
    names = []
    for name in _list_dir(gen_dir, "generated mirror_test", problems) or []:
        path = gen_dir / name
        if not path.is_dir():
            problems.append(f"{path}: stray file in mirror_test (process.py makes every entry a task; this one "
                            "would fail 4 times)")
        elif name.startswith(".") or _name_problem(name):
            problems.append(f"{path}: {_name_problem(name) or 'is hidden'}; every mirror_test entry becomes a task")
        else:
            names.append(name)
    return names


def _mirror_sample(key: SampleKey, path: Path, problems: list[str], notes: list[str]) -> MirrorSample | None:
    """Check one mirror directory: at least one rollout, each an even number (>= 2) of frames."""
    n_before = len(problems)
    videos = []
    names = _list_dir(path, "mirror directory", problems)   # unreadable: os.listdir's PermissionError ended the plan
    if names is None:
        return None
    mp4s = [v for v in names if v.endswith(".mp4")]
    if not mp4s:
        problems.append(f"{path}: no .mp4 rollout (process.py would record the directory with no scores)")
    for video_name in mp4s:
        video = path / video_name
        if _name_problem(video_name):
            problems.append(f"{video}: {_name_problem(video_name)}")
            continue
        if not _regular_file(video, "mirror rollout", problems):
            continue
        frames = _video_frames(video, problems)
        if frames is None:
            continue
        if frames % 2:
            problems.append(f"{video}: {frames} frames, an odd count; process.py skips odd mirror rollouts "
                            "('frame count is not an even number!')")
        elif frames < 2:
            problems.append(f"{video}: {frames} frames; a mirror rollout needs at least 2")
        else:
            videos.append(MirrorVideo(video_name, video, frames))
            if mirror_fails_upstream(frames):
                notes.append(f"warning: {video}: {frames} frames, so {frames // 2} mirrored pairs end in a "
                             f"sub-batch of one; upstream process.py fails on it ({ONE_PAIR_BATCH_ERROR!r}, "
                             "4 attempts): the directory's record gets the error and no later rollout is scored; "
                             "the native block scores it, and the scorecard names the sample (official: error, "
                             "native: value)")
        if not MIRROR_NAME.fullmatch(video_name):
            notes.append(f"{video}: not named path-<n>.mp4; process.py scores every .mp4 in the directory")
    return MirrorSample(key, path, tuple(videos)) if len(problems) == n_before else None


def make_plan(gt_root: Path, generated_root: Path | None, *, metrics: Sequence[str],
                  video_max_time: int | None, limit: int | None = None, not_generated: Collection[str] = ()) -> Plan:
    """Check everything process.py will read; ``generated_root`` None checks GT only (importing a Result.json).

    ``limit`` keeps the first N expected samples (perspective, then test, then name order); file checks
    run only on those, layout checks (directories, stray or unknown names) always. ``not_generated``: the sample
    ids whose rollouts the generation step refused (``Run.generation_failures``: a stored rollout not what its
    request asks, say 50 frames of a 131-frame continuation), planned as having no video, so that each fails by
    name with the step's reason rather than stopping the plan or being scored.
    """
    metrics = tuple(dict.fromkeys(metrics))
    pre = Plan(gt_root=gt_root, generated_root=generated_root, metrics=metrics, video_max_time=video_max_time)
    unknown = [m for m in metrics if m not in OFFICIAL_METRICS]
    if unknown or not metrics:
        pre.problems.append(f"metrics {unknown or '(none)'}: choose from {', '.join(OFFICIAL_METRICS)}")
        return pre
    if video_max_time is not None and video_max_time <= CHUNK_FRAMES:
        pre.problems.append(f"video_max_time={video_max_time}: must be above {CHUNK_FRAMES} (process.py scores "
                            f"{CHUNK_FRAMES}*floor((N-1)/{CHUNK_FRAMES}) frames, so N <= {CHUNK_FRAMES} scores "
                            "nothing and says nothing)")
    if not gt_root.is_dir():
        pre.problems.append(f"{gt_root}: GT root is not a directory (expected MIND-Data with "
                            "{1st,3rd}_data/test/{mem_test,action_space_test}/)")
        return pre
    if generated_root is not None and not generated_root.is_dir():
        pre.problems.append(f"{generated_root}: generated root is not a directory (expected "
                            "{1st,3rd}_data/{mem_test,action_space_test,mirror_test}/)")
        return pre

    # 1. names only (cheap): the expected samples in order, and the generated names that exist
    planned: list[tuple[SampleKey, Path | None, Path | None]] = []
    for perspective in PERSPECTIVES:
        for test in requested_tests(metrics):
            if test == MIRROR_TEST:
                if generated_root is not None:
                    mirror_dir = generated_root / perspective / MIRROR_TEST
                    planned += [(SampleKey(perspective, test, name), None, mirror_dir / name)
                                for name in _mirror_dirs(mirror_dir, pre.problems)]
                continue
            gt_test = gt_root / perspective / "test" / test
            gt_names = _gt_names(gt_root, perspective, test, pre.problems)
            bad = [n for n in gt_names if _name_problem(n)]
            pre.problems += [f"{gt_test / n}: {_name_problem(n)}" for n in bad]
            generated: set[str] = set()
            if generated_root is not None:
                generated = _check_generated_names(generated_root / perspective / test, set(gt_names), pre.problems)
            for name in (n for n in gt_names if n not in bad):
                key = SampleKey(perspective, test, name)
                gen_dir = (generated_root / perspective / test / name
                           if name in generated and key.sample_id not in not_generated else None)
                planned.append((key, gt_test / name, gen_dir))

    # 2. file checks on the selected samples (mirror directories are the mirror denominator: no GT exists)
    pre.n_available = len(planned)
    for key, gt_dir, gen_dir in planned[:limit] if limit is not None else planned:
        if gt_dir is None:
            assert gen_dir is not None
            mirror = _mirror_sample(key, gen_dir, pre.problems, pre.notes)
            if mirror is not None:
                pre.samples.append(mirror)
            continue
        sample = _continuation_sample(key, gt_dir, gen_dir, metrics, video_max_time, pre.problems)
        if sample is not None:
            pre.samples.append(sample)
            if "action" in metrics and sample.video is not None and sample.gt_poses < ACTION_FRAMES:
                pre.notes.append(f"{gt_dir / GT_POSES}: {sample.gt_poses} of {ACTION_FRAMES} poses; ViPE will "
                                 "run on the GT crop and write images.txt into the run's writable GT copy")
    pre.problems = [_one_line(p) for p in pre.problems]
    pre.notes = [_one_line(n) for n in pre.notes]
    if generated_root is None:
        pre.notes.append("no generated root: generated videos are not checked and mirror_test samples are "
                         "taken from the results file")
    return pre
