"""Test double: a generator that renders each rollout from its request, in both forms pinbench takes.

Python form: ``--generator python:render_generator:render`` (this folder is on the tests' path); command form:
``--generator 'command:python tests/helpers/render_generator.py --request {request} --out {out}'``. Each frame is a
colour ramp whose colours come from the request's digest and the frame's index, encoded losslessly at the request's
size and rate, so a rollout is a function of its request alone. ``mode`` turns it hostile, one way per value:
``nothing`` (writes no file), ``truncated`` (cuts the file), ``frames`` (one frame too many), ``symlink`` (a link
to a file outside the run), ``hang`` (sleeps), ``exit`` (fails). ``calls`` names a file that gets one line per
request generated (a test counts generations); ``seen`` one line per request with the ``CUDA_VISIBLE_DEVICES``,
process id and ``HF_HUB_OFFLINE`` it was generated with (a test sees which GPU made what, in how many processes,
and whether the run's ``--offline`` reached it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from pinbench.core.generation import KINDS, ROLES, Capabilities, Request, Signature
from pinbench.media.video import write_video

MODES = ("render", "nothing", "truncated", "frames", "symlink", "hang", "exit")
EACH = "each"   # every request its own mode, by the first hex digit of its digest: all of them in one run


def frames_of(request: Request, count: int | None = None) -> np.ndarray:
    """The frames rendered for a request: (frames, height, width, 3) uint8: a colour ramp and a checkerboard (edges
    for the scorers that look for them) moving one pixel a frame."""
    seed = int(hashlib.sha256(request.digest.encode()).hexdigest()[:8], 16)
    ramp = np.linspace(0, 1, request.width, dtype=np.float64)[None, :, None]
    base = np.array([(seed >> 0) & 255, (seed >> 8) & 255, (seed >> 16) & 255], np.float64)
    y, x = np.mgrid[: request.height, : request.width]
    out = []
    for t in range(count or request.frames):
        checker = (((x + t) // 8 + y // 8) % 2)[..., None] * 80.0
        frame = (base + 96 * ramp + checker) % 256
        out.append(np.broadcast_to(frame, (request.height, request.width, 3)).astype(np.uint8))
    return np.stack(out)


class Render:
    capabilities = Capabilities(kinds=frozenset(KINDS), prompt_schedule=True, conditioning=frozenset(ROLES))

    def __init__(self, mode: str = "render", calls: str = "", version: str = "1", delay: str = "0",
                 seen: str = "") -> None:
        if mode not in (*MODES, EACH):
            raise ValueError(f"mode must be one of {', '.join(MODES)} or {EACH}")
        self.mode, self.calls, self.version, self.delay, self.seen = mode, calls, version, float(delay), seen

    def signature(self) -> Signature:
        return Signature(model="test render generator", weights=f"v{self.version}", settings={"mode": self.mode})

    def mode_of(self, request: Request) -> str:
        return MODES[int(request.digest[0], 16) % len(MODES)] if self.mode == EACH else self.mode

    def generate(self, request: Request, out: Path) -> None:
        mode = self.mode_of(request)
        time.sleep(self.delay)
        if self.calls:
            with open(self.calls, "a", encoding="utf-8") as log:
                log.write(request.id + "\n")
        if self.seen:
            with open(self.seen, "a", encoding="utf-8") as log:
                log.write(f"{request.id} {os.environ.get('CUDA_VISIBLE_DEVICES', '-')} {os.getpid()} "
                          f"{os.environ.get('HF_HUB_OFFLINE', '-')}\n")
        if mode == "hang":
            time.sleep(3600)
        if mode == "exit":
            raise RuntimeError("the model ran out of memory")
        if mode == "nothing":
            return
        if mode == "symlink":
            run = next(folder for folder in out.parents if folder.name == "rollouts").parent
            outside = Path(tempfile.mkdtemp(prefix="outside-the-run-", dir=run.parent)) / "rollout.mp4"   # the test's
            write_video(outside, frames_of(request), request.fps, crf=0)
            os.symlink(outside, out)
            return
        count = request.frames + 1 if mode == "frames" else None
        write_video(out, frames_of(request, count), request.fps, crf=0, pix_fmt="yuv444p")
        if mode == "truncated":
            out.write_bytes(out.read_bytes()[: out.stat().st_size // 2])


def render(**options: str) -> Render:
    return Render(**options)


class InPlace(Render):
    """A generator that writes its rollout where the run keeps it (``request.output`` beside ``out``), not to ``out``:
    a new adapter's mistake, which the run named as "wrote nothing there" beside the file it wrote."""

    def generate(self, request: Request, out: Path) -> None:
        super().generate(request, out.with_name(Path(request.output).name))


class InPlaceBatch(InPlace):
    """``InPlace`` making its rollouts in one batch (``generate_batch``)."""

    def generate_batch(self, pairs: list[tuple[Request, Path]]) -> None:
        for request, out in pairs:
            self.generate(request, out)


def in_place(**options: str) -> InPlace:
    return InPlace(**options)


def in_place_batch(**options: str) -> InPlaceBatch:
    return InPlaceBatch(**options)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--request", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--mode", default="render", choices=MODES)
    parser.add_argument("--calls", default="")
    parser.add_argument("--seen", default="")
    args = parser.parse_args()
    message = json.loads(Path(args.request).read_text(encoding="utf-8"))
    try:
        Render(args.mode, calls=args.calls, seen=args.seen).generate(Request.from_json(message), Path(args.out))
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
