"""context-actions (MIND): the last context frame moved by the per-frame actions, without a model.

It reads the one frame it needs of those it may (context frame mark_time - 1; from mark_time on is the answer)
and follows settings["actions"]: look left/right and strafe left/right pan it, look up/down tilt it, a fixed step
a frame, wrapping at the edges; forward and backward are not modelled. Frame 0 of the rollout is the frame after
the context (the alignment rule): no context frame is repeated. A stand-in for an action-conditioned world model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pinbench.core.generation import Capabilities, Request, Signature
from pinbench.media.video import read_video, write_video

STEP = {"lr": (0, 4), "ad": (0, 2), "ud": (4, 0)}   # pixels a frame (down, right) for code 1; code 2 the other way


class ContextActions:
    capabilities = Capabilities(kinds=frozenset({"context-actions"}), conditioning=frozenset({"context", "actions"}))

    def signature(self) -> Signature:
        return Signature(model="docs context-actions adapter", weights="none", settings={"step": STEP})

    def generate(self, request: Request, out: Path) -> None:
        _, stop = request.file("context").frames   # [0, mark_time): the frames a generator may read
        last = read_video(request.path("context"), [stop - 1], backend="pyav").frames[0]
        shift, frames = np.zeros(2, int), []
        for i in range(request.frames):
            action = request.settings["actions"][i]
            shift += sum(np.array(step) * {1: 1, 2: -1}.get(action[key], 0) for key, step in STEP.items())
            frames.append(np.roll(last, tuple(shift), axis=(0, 1)))
        write_video(out, frames, request.fps, crf=0, pix_fmt="yuv444p")


def make() -> ContextActions:
    return ContextActions()
