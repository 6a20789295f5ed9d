"""The frames ``process.py`` scores, decoded and resized the way it does (``utils.VideoStreamReader``).

Why reproduce rather than "improve": the native cross-check must see the very pixels the official metrics
saw, quirks included:

* PyAV decodes sequentially; frames before ``start`` are decoded and thrown away (no seeking), and each
  frame becomes RGB through ``to_rgb()`` (swscale's default yuv->rgb24);
* ``transform_image``: a frame whose aspect is exactly the canvas's (``h*1280 == w*720``) is resized to
  720x1280; any other is scaled by ``max(1280/w, 720/h)`` (sides rounded with Python's ``round``) and
  centre-cropped. Both resizes are bilinear on float [0, 255] values **without antialiasing**, so 1080p
  GT is downsampled with aliasing; then ``/255`` and a clamp to [0, 1];
* only full 100-frame chunks before the one that ends the read are scored (``layout.frames_scored``).

The canvas is a parameter only so that the CPU fixture can run the same code at a small size; real runs
use ``OFFICIAL_CANVAS``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
import torch
import torch.nn.functional as F

from pinbench_recipes.mind.layout import LayoutError


@dataclass(frozen=True)
class Canvas:
    """The (height, width) every frame is brought to before any metric."""

    height: int
    width: int

    def __post_init__(self) -> None:
        if self.height < 16 or self.width < 16:
            raise ValueError(f"canvas {self.height}x{self.width} is too small for SSIM's 11x11 window and AlexNet")

    def __str__(self) -> str:
        return f"{self.height}x{self.width}"


OFFICIAL_CANVAS = Canvas(720, 1280)


def iter_frames(path: Path, start: int, count: int) -> Iterator[np.ndarray]:
    """RGB uint8 frames ``[start, start + count)`` of a video, decoding (not seeking) past the first ``start``.

    Stops early, like the upstream reader, if the stream ends; the caller checks how many it got.
    """
    if count <= 0:
        return
    try:
        with av.open(str(path)) as container:
            for index, frame in enumerate(container.decode(video=0)):
                if index >= start + count:
                    break
                if index >= start:
                    yield frame.to_rgb().to_ndarray()
    except av.error.FFmpegError as exc:
        raise LayoutError(path, f"decoding failed: {exc}") from None


def read_frames(path: Path, start: int, count: int) -> np.ndarray:
    """``iter_frames`` as one (count, H, W, 3) array; LayoutError naming the file if the stream is shorter."""
    frames = list(iter_frames(path, start, count))
    if len(frames) != count:
        raise LayoutError(path, f"stream ended after {start + len(frames)} frames, needed {start + count}")
    return np.stack(frames) if frames else np.empty((0, 0, 0, 3), np.uint8)


def resized_size(height: int, width: int, canvas: Canvas) -> tuple[int, int]:
    """The size ``transform_image`` resizes a (height, width) frame to before its centre crop."""
    if height * canvas.width == width * canvas.height:
        return canvas.height, canvas.width
    scale = max(canvas.width / width, canvas.height / height)
    return round(height * scale), round(width * scale)


def ingest(frames: np.ndarray, canvas: Canvas = OFFICIAL_CANVAS) -> torch.Tensor:
    """uint8 (N, H, W, 3) RGB -> float32 (N, 3, canvas) in [0, 1], exactly as ``transform_image`` + clamp."""
    if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"expected uint8 (N, H, W, 3) frames, got {frames.dtype} {frames.shape}")
    # a reversed view (the mirror test's time flip) keeps a negative stride even where numpy calls it contiguous
    # (one frame): torch refuses those, so such a view is copied
    frames = frames.copy() if any(stride < 0 for stride in frames.strides) else np.ascontiguousarray(frames)
    images = torch.from_numpy(frames).float().permute(0, 3, 1, 2)
    height, width = frames.shape[1:3]
    size = resized_size(height, width, canvas)
    if size != (height, width):
        images = F.interpolate(images, size=size, mode="bilinear", align_corners=False, antialias=False)
    if size != (canvas.height, canvas.width):
        top = int(round((size[0] - canvas.height) / 2.0))
        left = int(round((size[1] - canvas.width) / 2.0))
        images = images[:, :, top: top + canvas.height, left: left + canvas.width]
    return torch.clamp(images / 255.0, 0.0, 1.0)
