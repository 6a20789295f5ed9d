"""Generators shipped with pinbench: baselines that bound a benchmark's metrics and cost nothing, and one real model
family through ``diffusers``.

* ``static``: every frame is the request's first picture: its initial frame (image to video), the last context frame
  (a continuation: the clip stands still where the ground truth stops), the first frame of its context video
  (control to video), else a mid-grey frame (text to video). It ignores prompts, trajectories, actions and controls
  on purpose: what it scores is what a model that never moves would score (perfect revisit memory, no motion).
* ``diffusers``: a text-to-video pipeline loaded with ``from_pretrained`` from a local folder whose files must hash
  to ``-g weights_sha256=`` (the folder's digest, ``tree_sha256``): nothing is downloaded, nothing unpinned is
  loaded. It honours one-prompt text-to-video requests and refuses any other before generating.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from pinbench.core.generation import KINDS, ROLES, Capabilities, Request, Signature
from pinbench.media.video import read_video, write_video

GREY = 128


class Static:
    """The ``static`` baseline (module docstring)."""

    capabilities = Capabilities(kinds=frozenset(KINDS), prompt_schedule=True, conditioning=frozenset(ROLES))

    def signature(self) -> Signature:
        return Signature(model="pinbench static baseline", weights="none",
                         settings={"frame": "initial frame, last context frame, first control-video frame, or grey",
                                   "codec": "libx264 crf 0 yuv444p"})

    def generate(self, request: Request, out: Path) -> None:
        still = _resized(first_picture(request), request.width, request.height)
        write_video(out, np.broadcast_to(still, (request.frames, *still.shape)), request.fps, crf=0, pix_fmt="yuv444p")


def static() -> Static:
    return Static()


def first_picture(request: Request) -> np.ndarray:
    """The picture a still rollout of ``request`` repeats (RGB uint8)."""
    image = request.path("initial_frame")
    if image is not None:
        from PIL import Image

        with Image.open(image) as picture:
            return np.asarray(picture.convert("RGB"))
    video = request.file("context")
    if video is not None:
        start, stop = video.frames or (0, 1)
        index = stop - 1 if request.kind == "context-actions" else start
        return read_video(request.path("context"), [index], backend="pyav").frames[0]
    return np.full((request.height, request.width, 3), GREY, np.uint8)


def _resized(picture: np.ndarray, width: int, height: int) -> np.ndarray:
    if picture.shape[:2] == (height, width):
        return picture
    from PIL import Image

    return np.asarray(Image.fromarray(picture).resize((width, height), Image.Resampling.BICUBIC))


# ------------------------------------------------------------------------------------------------ diffusers


def tree_sha256(folder: Path) -> str:
    """One SHA-256 of a folder's files: their paths (relative, sorted) and the SHA-256 of each one's bytes."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder).as_posix()
        file_digest = hashlib.sha256(path.read_bytes()).hexdigest()
        digest.update(f"{relative}\0{file_digest}\n".encode())
    return digest.hexdigest()


class Diffusers:
    """The ``diffusers`` adapter (module docstring): ``-g model=DIR -g weights_sha256=HEX`` and sampler options
    ``steps``, ``guidance``."""

    capabilities = Capabilities(kinds=frozenset({"prompt-schedule"}), prompt_schedule=False, conditioning=frozenset())

    def __init__(self, model: str, weights_sha256: str, steps: str = "25", guidance: str = "7.5",
                 pipeline: str = "TextToVideoSDPipeline") -> None:
        if len(weights_sha256) != 64:
            raise ValueError("-g weights_sha256= must be the 64-hex digest of the model folder (tree_sha256)")
        self.folder, self.expected = Path(model), weights_sha256.lower()
        self.steps, self.guidance, self.pipeline_class = int(steps), float(guidance), pipeline
        if not self.folder.is_dir():
            raise ValueError(f"-g model={model}: not a folder")
        self._pipeline: Any = None

    def signature(self) -> Signature:
        return Signature(model=f"diffusers {self.pipeline_class}", weights=f"sha256:{self.expected}",
                         settings={"steps": self.steps, "guidance": self.guidance, "dtype": "float32"})

    def _load(self) -> Any:
        import diffusers

        found = tree_sha256(self.folder)
        if found != self.expected:
            raise ValueError(f"{self.folder}: its files hash to {found}, not the pinned {self.expected}")
        pipeline = getattr(diffusers, self.pipeline_class).from_pretrained(self.folder, local_files_only=True)
        pipeline.set_progress_bar_config(disable=True)
        return pipeline

    def generate(self, request: Request, out: Path) -> None:
        import torch

        if self._pipeline is None:
            self._pipeline = self._load()
        seed = int(request.seed or 0) % (2**63)   # an exact integer, never through a float
        result = self._pipeline(request.prompts[0].text, negative_prompt=request.negative_prompt,
                                num_frames=request.frames, height=request.height, width=request.width,
                                num_inference_steps=self.steps, guidance_scale=self.guidance, output_type="np",
                                generator=torch.Generator("cpu").manual_seed(seed))
        frames = np.asarray(result.frames[0])
        write_video(out, (np.clip(frames, 0, 1) * 255).round().astype(np.uint8), request.fps, crf=0,
                    pix_fmt="yuv444p")


def diffusers(**options: str) -> Diffusers:
    return Diffusers(**options)

