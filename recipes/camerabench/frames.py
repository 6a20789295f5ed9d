"""Which frames, at which size, qwen-vl-utils 0.0.10 (decord reader) hands Qwen2.5-VL for one video.

t2v_metrics 3.0 asks for ``fps: 8.0`` and ``max_pixels: 360 * 420`` per video. qwen-vl-utils then takes

* ``n = floor_even(min(max(total / video_fps * 8, 4), floor_even(min(768, total)), total))`` frames,
* at indices ``linspace(0, total - 1, n)`` rounded half to even (torch float32, as the library does),
* each resized (bicubic, antialiased) by ``smart_resize`` to multiples of 28 with between
  128 * 28 * 28 = 100,352 and min(151,200, max(min(768 * 28 * 28, total_pixels / n * 2), 105,369))
  pixels, where total_pixels is 128,000 * 28 * 28 * 0.9 unless the VIDEO_MAX_PIXELS env var is set.

The scorer checks every decoded video against this (a silent fallback to another reader, or another
library version, would change the frames), and the tests check the library against it on real videos.
"""

from __future__ import annotations

import math

import torch

SAMPLE_FPS = 8.0
MAX_PIXELS = 360 * 420  # 151,200, set per video by t2v_metrics
FRAME_FACTOR = 2
FPS_MIN_FRAMES = 4
FPS_MAX_FRAMES = 768
IMAGE_FACTOR = 28
VIDEO_MIN_PIXELS = 128 * 28 * 28
VIDEO_MAX_PIXELS = 768 * 28 * 28
VIDEO_TOTAL_PIXELS = int(128000 * 28 * 28 * 0.9)
MAX_RATIO = 200


def _floor_even(x: float) -> int:
    return math.floor(x / FRAME_FACTOR) * FRAME_FACTOR


def sampled_frame_count(total_frames: int, video_fps: float, fps: float = SAMPLE_FPS) -> int:
    """How many frames are sampled; ValueError where qwen-vl-utils raises (fewer than 2 possible)."""
    min_frames = math.ceil(FPS_MIN_FRAMES / FRAME_FACTOR) * FRAME_FACTOR
    max_frames = _floor_even(min(FPS_MAX_FRAMES, total_frames))
    wanted = total_frames / video_fps * fps
    n = _floor_even(min(min(max(wanted, min_frames), max_frames), total_frames))
    if not FRAME_FACTOR <= n <= total_frames:
        raise ValueError(f"{total_frames} frames at {video_fps} fps give {n} sampled frames; need 2..{total_frames}")
    return n


def sampled_frame_indices(total_frames: int, n_frames: int) -> list[int]:
    """Evenly spaced indices from the first to the last frame, as torch computes and rounds them."""
    return torch.linspace(0, total_frames - 1, n_frames).round().long().tolist()


def resized_size(height: int, width: int, n_frames: int, max_pixels: int = MAX_PIXELS,
                 total_pixels: int = VIDEO_TOTAL_PIXELS) -> tuple[int, int]:
    """(height, width) every sampled frame is resized to."""
    budget = max(min(VIDEO_MAX_PIXELS, total_pixels / n_frames * FRAME_FACTOR), int(VIDEO_MIN_PIXELS * 1.05))
    return smart_resize(height, width, VIDEO_MIN_PIXELS, min(max_pixels, budget))


def smart_resize(height: int, width: int, min_pixels: float, max_pixels: float,
                 factor: int = IMAGE_FACTOR) -> tuple[int, int]:
    """Nearest multiples of ``factor`` keeping the aspect ratio, scaled into [min_pixels, max_pixels]."""
    if max(height, width) / min(height, width) > MAX_RATIO:
        raise ValueError(f"aspect ratio of {width}x{height} exceeds {MAX_RATIO}")
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = math.floor(height / beta / factor) * factor
        w = math.floor(width / beta / factor) * factor
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w
