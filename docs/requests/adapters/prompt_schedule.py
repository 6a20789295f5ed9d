"""prompt-schedule (RememBench T2V): the prompt in force at each frame's second, drawn without a model.

Frame i shows the prompt whose interval holds second i / fps (the last whose start_seconds is at or before it): a
flat colour taken from the prompt's text, over a texture drawn from the request's seed. It follows the schedule and
the seed exactly and nothing else: a stand-in for a text-to-video model, small enough to read whole.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from pinbench.core.generation import Capabilities, Request, Signature
from pinbench.media.video import write_video


class PromptSchedule:
    capabilities = Capabilities(kinds=frozenset({"prompt-schedule"}), prompt_schedule=True)

    def signature(self) -> Signature:   # what makes its rollouts what they are (no model is loaded to say it)
        return Signature(model="docs prompt-schedule adapter", weights="none", settings={"texture": "0..47"})

    def generate(self, request: Request, out: Path) -> None:
        rng = np.random.default_rng(int(request.seed or "0"))   # the decimal string, never through a float
        texture = rng.integers(0, 48, (request.height, request.width, 1))

        def frame(i: int) -> np.ndarray:
            prompt = [p for p in request.prompts if p.start_seconds <= i / request.fps or p is request.prompts[0]][-1]
            colour = np.frombuffer(hashlib.sha256(prompt.text.encode()).digest()[:3], np.uint8) // 2
            return (colour + texture).astype(np.uint8)

        write_video(out, (frame(i) for i in range(request.frames)), request.fps, crf=0, pix_fmt="yuv444p")


def make() -> PromptSchedule:
    return PromptSchedule()
