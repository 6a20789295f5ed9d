"""Generators shipped with pinbench: baselines that bound a benchmark's metrics and cost nothing, and one real model
family through ``diffusers``.

* ``static``: every frame is the request's first picture: its initial frame (image to video), the last context frame
  (a continuation: the clip stands still where the ground truth stops), the first frame of its context video
  (control to video), else a mid-grey frame (text to video). It ignores prompts, trajectories, actions and controls
  on purpose: what it scores is what a model that never moves would score (perfect revisit memory, no motion).
* ``diffusers``: a text-to-video pipeline loaded with ``from_pretrained`` from a local folder whose files must hash
  to ``-g weights_sha256=`` (the folder's digest, ``tree_sha256``): nothing is downloaded, nothing unpinned is
  loaded. It honours one-prompt text-to-video requests and refuses any other before generating.
* ``folder``: rollouts made elsewhere, copied from ``-g dir=DIR`` (each at its request's ``output``): how a run that
  takes no ``-o videos`` (a ``--fixture`` run) scores a folder of yours. Its signature names the folder, not its
  content: the generation step keys each rollout by the SHA-256 of its own file there
  (``pinbench.ops.generation.folder_sources``), so a rollout replaced there is copied and scored again, never the
  stored one reused, and the others are reused.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pinbench.core.files import (
    FileError,
    MissingFile,
    loads_finite_json,
    open_regular,
    read_regular_bytes,
    sha256_regular,
)
from pinbench.core.generation import KINDS, ROLES, Capabilities, Request, Signature
from pinbench.core.options import finite_at_least_zero
from pinbench.media.video import read_video, write_video

if TYPE_CHECKING:
    from pinbench.ops.generation import NearNames

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


class Folder:
    """The ``folder`` generator (module docstring)."""

    capabilities = Capabilities(kinds=frozenset(KINDS), prompt_schedule=True, conditioning=frozenset(ROLES))

    def __init__(self, dir: str = "") -> None:  # noqa: A002 (the -g option's name)
        from pinbench.ops.generation import rollouts_dir

        self.root = rollouts_dir(dir)
        self.near: NearNames | None = None   # its hints for missing rollouts: the folder listed once (``NearNames``)

    def signature(self) -> Signature:
        # no digest of the whole folder: one file fixed made every rollout "generator changed"; the step keys each
        # rollout by its own file's SHA-256 instead (``generation.folder_sources``). The folder's path says which
        # was scored.
        return Signature(model="pinbench folder of rollouts made elsewhere",
                         weights="none: each rollout is keyed by its own file's SHA-256",
                         settings={"dir": str(self.root.resolve())})

    def generate(self, request: Request, out: Path) -> None:
        source = self.root / request.output
        try:
            fd = open_regular(source)   # a FIFO, a folder or a dangling link: that sample fails, saying which
        except FileError as exc:
            from pinbench.ops.generation import GeneratorError, NearNames

            # said as it is (a Reason): the sample's record read "no rollout: NotRegularFile: ... (traceback: ...)",
            # the traceback pinbench's own, for what is the folder's
            if not isinstance(exc, MissingFile) or source.is_symlink():
                raise GeneratorError(f"{exc} (request {request.id})") from None
            self.near = self.near or NearNames()
            raise GeneratorError(f"{source}: not in -g dir{self.near(source)} (request {request.id})") from None
        with os.fdopen(fd, "rb") as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)


def folder(dir: str = "") -> Folder:  # noqa: A002 (the -g option's name)
    """The factory: a plain ``def``, so its ``-g`` options are checked from its source before the fixture's data is
    built (``check_factory_source`` passes over a rebound name, ``folder = Folder``)."""
    return Folder(dir)


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

# what huggingface_hub writes into a ``--local-dir`` download (its bookkeeping, with the time of the download): left
# out of the digest, so the same files downloaded twice pin the same; no pipeline reads it
HUB_BOOKKEEPING = ".cache/huggingface"
# what the adapter passes to the pipeline's call: a pipeline whose call does not take each one is not one it drives
CALL_KEYWORDS = ("prompt", "negative_prompt", "num_frames", "height", "width", "num_inference_steps",
                 "guidance_scale", "generator", "output_type")
SEED_LIMIT = 2**64   # torch.Generator.manual_seed takes 0 .. 2**64 - 1


def tree_sha256(folder: Path) -> str:
    """One SHA-256 of a folder's files: each one's path (relative, sorted) and the SHA-256 of its bytes.

    A file may be a symlink (a Hugging Face cache's snapshot is one per file): its target's bytes are hashed, as the
    loader reads them. A symlink to a folder (not walked, so not hashed, yet a loader would read it), a dangling
    link, a FIFO, a device or a folder it cannot list is refused: ValueError naming it."""
    def unreadable(error: OSError) -> None:
        raise ValueError(f"{error.filename}: unreadable ({error.strerror}), so it cannot be pinned")

    entries = []
    for parent, dirs, files in os.walk(folder, onerror=unreadable):   # a symlinked folder: in dirs, not walked
        here = Path(parent)
        for name in dirs:
            if (here / name).is_symlink():
                raise ValueError(f"{here / name}: a symlink to a folder, which the digest would not cover (copy it "
                                 "in, or pin the folder it points to)")
        dirs[:] = [d for d in dirs if (here / d).relative_to(folder).as_posix() != HUB_BOOKKEEPING]
        entries += [((here / name).relative_to(folder).as_posix(), here / name) for name in files]
    digest = hashlib.sha256()
    for relative, path in sorted(entries):
        digest.update(f"{relative}\0{sha256_regular(path)}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


class Diffusers:
    """The ``diffusers`` adapter (module docstring). Options: ``model`` (the folder), ``weights_sha256`` (its
    ``tree_sha256``), ``steps`` (25), ``guidance`` (7.5), ``pipeline`` (``TextToVideoSDPipeline``; the folder's
    ``model_index.json`` must name it), ``device`` (``cpu``, ``cuda``, ``cuda:N``); float32 weights.

    Refused, never approximated: another kind, several prompts, conditioning files (``capabilities``, which
    ``generate`` checks too), a prompt that starts after second 0, a seed of 2**64 or more (the decimal string
    becomes an exact integer for a CPU ``torch.Generator``; no seed: 0), frames not of the count, size or [0, 1]
    range asked for. Frames are rounded to 8 bits as diffusers' ``numpy_to_pil`` rounds them and written
    losslessly (libx264rgb, CRF 0).

    The folder is hashed on the first ``generate``, not when the adapter is built, so a rerun that reuses every
    rollout never reads the weights. A digest other than the pinned one refuses every request in one line naming
    the folder, before anything is loaded; ``from_pretrained`` then reads it with ``local_files_only``,
    ``use_safetensors`` (pickled ``.bin`` weights are refused) and no remote code. A folder that does not load
    refuses every later request with the same error, without hashing or loading it again.

    Checked on CPU by tests/test_diffusers_generator.py: a seeded random-weight TextToVideoSDPipeline, run through
    the generation step, decodes to exactly the frames the pipeline makes called directly. Not run: a GPU, a released
    model.
    """

    capabilities = Capabilities(kinds=frozenset({"prompt-schedule"}), prompt_schedule=False, conditioning=frozenset())

    def __init__(self, model: str, weights_sha256: str, steps: str = "25", guidance: str = "7.5",
                 pipeline: str = "TextToVideoSDPipeline", device: str = "cpu") -> None:
        if not re.fullmatch(r"[0-9a-fA-F]{64}", weights_sha256):
            raise ValueError("-g weights_sha256= must be the 64-hex digest of the model folder (tree_sha256)")
        if not (steps.isdigit() and int(steps) >= 1):
            raise ValueError(f"-g steps={steps}: must be a whole number of 1 or more")
        scale = finite_at_least_zero(guidance)
        if scale is None:
            raise ValueError(f"-g guidance={guidance}: must be a finite number of 0 or more")
        if not re.fullmatch(r"cpu|cuda(:[0-9]+)?", device):
            raise ValueError(f"-g device={device}: must be cpu, cuda or cuda:N")
        self.folder, self.expected = Path(model), weights_sha256.lower()
        self.steps, self.guidance, self.pipeline_class, self.device = int(steps), scale, pipeline, device
        if not self.folder.is_dir():
            raise ValueError(f"-g model={model}: not a folder")
        named = _model_index(self.folder).get("_class_name")
        if named != pipeline:
            raise ValueError(f"{self.folder / 'model_index.json'}: a {named} folder, not a {pipeline} one "
                             "(-g pipeline=)")
        self._pipeline: Any = None
        self._failure: Exception | None = None   # why the folder does not load, once found: every request gets it

    def signature(self) -> Signature:
        return Signature(model=f"diffusers {self.pipeline_class}", weights=f"sha256:{self.expected}",
                         settings={"steps": self.steps, "guidance": self.guidance, "dtype": "float32",
                                   "device": self.device, "seed": "the request's (none: 0), CPU torch.Generator",
                                   "codec": "libx264rgb crf 0"})

    def _loaded(self) -> Any:
        """The pipeline, loaded once, after its folder hashed to the pinned digest; a folder that does not load
        refuses every later request with the same error, without hashing or loading again."""
        if self._failure is not None:
            raise self._failure.with_traceback(None)
        if self._pipeline is None:
            try:
                found = tree_sha256(self.folder)
                if found != self.expected:
                    raise ValueError(f"{self.folder}: its files hash to {found}, not the pinned -g weights_sha256="
                                     f"{self.expected} (a file added, changed or removed)")
                self._pipeline = self._load()
            except Exception as exc:
                self._failure = exc
                raise
        return self._pipeline

    def _load(self) -> Any:
        import inspect

        import diffusers
        import torch

        made = getattr(diffusers, self.pipeline_class, None)
        if not (isinstance(made, type) and issubclass(made, diffusers.DiffusionPipeline)):
            raise ValueError(f"-g pipeline={self.pipeline_class}: not a diffusers pipeline")
        takes = inspect.signature(made.__call__).parameters
        missing = [k for k in CALL_KEYWORDS if k not in takes]
        if missing:
            raise ValueError(f"-g pipeline={self.pipeline_class}: not a text-to-video pipeline (its call takes no "
                             f"{', '.join(missing)})")
        pipeline = made.from_pretrained(self.folder, local_files_only=True, use_safetensors=True,
                                        trust_remote_code=False, torch_dtype=torch.float32)
        pipeline.set_progress_bar_config(disable=True)
        return pipeline.to(self.device)

    def generate(self, request: Request, out: Path) -> None:
        import torch

        refusal = self.capabilities.refusal(request)   # the step refuses these before it starts; so does a caller
        if refusal:
            raise ValueError(refusal)
        prompt = request.prompts[0]
        if prompt.start_seconds != 0:
            raise ValueError(f"its one prompt starts at second {prompt.start_seconds:g}; a text-to-video pipeline "
                             "conditions every frame on it")
        seed = int(request.seed or "0")   # the decimal string as an exact integer, never through a float
        if seed >= SEED_LIMIT:
            raise ValueError(f"seed {request.seed} does not fit torch's 64-bit generator")
        result = self._loaded()(prompt.text, negative_prompt=request.negative_prompt, num_frames=request.frames,
                                height=request.height, width=request.width, num_inference_steps=self.steps,
                                guidance_scale=self.guidance, output_type="np",
                                generator=torch.Generator("cpu").manual_seed(seed))
        frames = np.asarray(result.frames[0])
        expected = (request.frames, request.height, request.width, 3)
        if frames.shape != expected or frames.dtype.kind != "f":
            raise ValueError(f"the pipeline made {frames.dtype} frames of shape {frames.shape}, not {expected} floats")
        if not np.isfinite(frames).all() or frames.min() < 0 or frames.max() > 1:
            raise ValueError("the pipeline made pixels outside [0, 1] or not finite")
        write_video(out, (frames * 255).round().astype(np.uint8), request.fps, crf=0, codec="libx264rgb",
                    pix_fmt="rgb24")


def _model_index(folder: Path) -> dict[str, Any]:
    """A pipeline folder's ``model_index.json``; ValueError naming it when it is not a JSON object."""
    path = folder / "model_index.json"
    try:
        index = loads_finite_json(read_regular_bytes(path).decode("utf-8"))
    except FileError as exc:   # absent, a folder, a FIFO: it names the file
        raise ValueError(str(exc)) from None
    except ValueError as exc:   # not UTF-8, not JSON
        raise ValueError(f"{path}: not a pipeline's model index ({exc})") from None
    if not isinstance(index, dict):
        raise ValueError(f"{path}: not a pipeline's model index (not a JSON object)")
    return index


diffusers = Diffusers   # the factory: its -g options are the class's, checked against them before it is built
