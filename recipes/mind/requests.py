"""MIND's generation requests, and its ``replay`` oracle.

One ``context-actions`` request per ``mem_test`` / ``action_space_test`` sample: the GT clip as context, of which a
generator may read frames ``[0, mark_time)`` only; the GT ``action.json``, whose entries from ``mark_time`` on are
the per-frame actions to follow (also in ``settings["actions"]``: each frame's ``ws``, ``ad``, ``ud`` and ``lr``
codes); the perspective; and the continuation to make: ``total_time - mark_time`` frames at the GT clip's rate
and size, the whole of it whatever ``-o video_max_time`` says (that option caps the frames process.py reads, not
the rollout: the plan refuses a rollout shorter than its continuation, and one rollout serves every cap). The
alignment is process.py's: frame 0 of the rollout is compared with GT frame ``mark_time``, so the rollout holds the
continuation alone, no context frame. It goes to ``<perspective>/<test>/<name>/video.mp4``, MIND's generated
layout.

Mirror-test requests cannot be made: MIND publishes no mirror-test actions (its closed-loop protocol is not in the
repository; the authors say it is still to be released), so a generating run refuses ``gsc`` in one line, as
recipe.yaml's ``not_generated`` declares, before the recipe's code is imported.

``replay`` is the oracle: it writes the GT continuation itself, frames ``[mark_time, mark_time + frames)`` of the
context clip (past the range a generator may read), losslessly (RGB H.264, QP 0), so every decoder returns the GT's
own pixels: LCM's MSE is 0.
"""

from __future__ import annotations

from pathlib import Path

from pinbench.core.config import RecipeError
from pinbench.core.generation import Capabilities, Request, Signature, staged
from pinbench.core.inputs import InputDigests
from pinbench.media.video import read_video, video_info, write_video
from pinbench_recipes.mind.layout import (
    GENERATED_VIDEO,
    GT_ACTIONS,
    GT_VIDEO,
    MIRROR_TEST,
    PERSPECTIVES,
    ContinuationSample,
    LayoutError,
    continuation_codes,
    requested_tests,
)
from pinbench_recipes.mind.plan import Plan


def build(plan: Plan, *, root: Path, digests: InputDigests) -> list[Request]:
    """The requests of the plan's continuation samples (a plan made from the GT alone; gsc is refused by the
    options, recipe.yaml's not_generated)."""
    requests = []
    for sample in plan.samples:
        if not isinstance(sample, ContinuationSample):
            continue
        key, actions = sample.key, sample.actions
        video, action_file = sample.gt_dir / GT_VIDEO, sample.gt_dir / GT_ACTIONS
        info = video_info(video)
        frames = actions.total_time - actions.mark_time
        try:
            codes = continuation_codes(action_file, actions)
        except LayoutError as exc:
            raise RecipeError(str(exc)) from None
        requests.append(Request(
            id=key.sample_id, kind="context-actions", recipe="mind",
            output=f"{key.perspective}/{key.test_type}/{key.path}/{GENERATED_VIDEO}", frames=frames, fps=info.fps,
            width=info.width, height=info.height,
            conditioning=(staged("context", video, root, digests, (0, actions.mark_time)),
                          staged("actions", action_file, root, digests)),
            settings={"perspective": key.perspective, "test_type": key.test_type, "mark_time": actions.mark_time,
                      "total_time": actions.total_time,
                      "alignment": "frame 0 of the rollout is compared with GT frame mark_time: the rollout holds "
                                   "the continuation only, no context frame",
                      "actions": codes}))
    return requests


class Replay:
    """The oracle (module docstring)."""

    capabilities = Capabilities(kinds=frozenset({"context-actions"}), conditioning=frozenset({"context", "actions"}))

    def signature(self) -> Signature:
        return Signature(model="mind replay oracle: the GT continuation", weights="none",
                         settings={"codec": "libx264rgb crf 0 (lossless RGB)"})

    def generate(self, request: Request, out: Path) -> None:
        start = request.settings["mark_time"]
        clip = read_video(request.path("context"), list(range(start, start + request.frames)), backend="pyav")
        write_video(out, clip.frames, request.fps, crf=0, codec="libx264rgb", pix_fmt="rgb24")


def replay() -> Replay:
    return Replay()


def generated_layout(videos: Path, asked: list[Request], metrics: tuple[str, ...]) -> None:
    """The rollouts folder in MIND's generated layout wherever generation made nothing: every test directory
    process.py lists (a missing one aborts the plan: after --limit, or when every request of a test failed), and
    no sample directory without its video (one aborts the plan; a sample without a directory fails by name). A
    request's directory lacks its video when the generator failed, its rollout failed the check, or a kill came
    first (then it may hold the step's hidden partial file, which goes too)."""
    for perspective in PERSPECTIVES:
        for test in requested_tests(metrics):
            if test != MIRROR_TEST:
                (videos / perspective / test).mkdir(parents=True, exist_ok=True)
    for request in asked:
        rollout = videos / request.output
        folder = rollout.parent
        if rollout.exists() or rollout.is_symlink() or folder.is_symlink() or not folder.is_dir():
            continue
        leftovers = list(folder.iterdir())
        if all(p.name.startswith(".") and (p.is_file() or p.is_symlink()) for p in leftovers):
            for path in leftovers:
                path.unlink()
            folder.rmdir()
