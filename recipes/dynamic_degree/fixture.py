"""Synthetic videos with known answers for the CPU fixture run and the tests.

Smooth random textures (seeded) are cropped from a larger canvas whose window moves by a whole
number of pixels per frame, so the true flow is known exactly. Speeds are chosen far from the
threshold on both sides, so a
clip's verdict does not depend on the codec or on the flow estimator's small errors. With tau = 1.22 px
the moving videos shift 2.8 to 4 px per sampled transition, the static frames not at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from pinbench.core.fixture_data import build_once
from pinbench.media.video import write_video

SEED = 20260909
# Lossless H.264 (libx264 at CRF 0 is QP 0 for 8-bit video): a decoder gets back exactly the YUV planes the
# encoder was given, whatever the encoder decided, so per-clip values cannot move with the encoder's choices
# (tools/encode_determinism.py measures the bytes as well).
FIXTURE_CRF = 0
FIXTURE_VERSION = 2  # bump when the written videos change (2: lossless instead of CRF 12)
WIDTH, HEIGHT = 68, 52  # not multiples of 8, so padding is exercised; tau = 6 * 52 / 256 = 1.22 px


@dataclass(frozen=True)
class FixtureVideo:
    """One synthetic video: ``velocity`` (dx, dy) px/frame while moving, ``moving_frames`` how long."""

    name: str
    fps: float
    n_frames: int
    velocity: tuple[int, int]
    moving_frames: int
    expected: float  # the dynamic degree this video must score


FIXTURE_VIDEOS = (
    # 8 fps, 40 frames: clips [0,16) [16,32) and the tail [24,40); k = 1, N = 16, n = 4.
    FixtureVideo("texture_right_8fps", 8.0, 40, (3, 0), 40, 1.0),
    # 12 fps, 30 frames: clips [0,24) and tail [6,30); k = 2, N = 12, n = 3.
    FixtureVideo("texture_diagonal_12fps", 12.0, 30, (1, 1), 30, 1.0),
    # 8 fps, 24 frames, never moves: every clip 0.
    FixtureVideo("static_8fps", 8.0, 24, (0, 0), 0, 0.0),
    # 16 fps, 64 frames: clips [0,32) moving and [32,64) frozen -> 0.5; k = 2, N = 16, n = 4.
    FixtureVideo("stop_and_go_16fps", 16.0, 64, (0, 2), 32, 0.5),
    # 8 fps, 10 frames: shorter than one 2 s clip -> one "full" clip; N = 10, n = 2.
    FixtureVideo("short_8fps", 8.0, 10, (-3, 0), 10, 1.0),
)
EXPECTED_SUITE_SCORE = sum(v.expected for v in FIXTURE_VIDEOS) / len(FIXTURE_VIDEOS)


def texture(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A smooth, high-contrast RGB texture: blurred noise at two scales, stretched to 0..255."""
    coarse = cv2.resize(rng.random((height // 8, width // 8, 3), dtype=np.float32), (width, height),
                        interpolation=cv2.INTER_CUBIC)
    fine = cv2.GaussianBlur(rng.random((height, width, 3), dtype=np.float32), (0, 0), 1.5)
    image = coarse + 0.6 * fine
    image -= image.min()
    image /= max(float(image.max()), 1e-6)
    return (image * 255.0).round().astype(np.uint8)


def render(video: FixtureVideo, rng: np.random.Generator, height: int = HEIGHT, width: int = WIDTH) -> np.ndarray:
    """(T, H, W, 3) frames: a window over a large texture, shifted by ``velocity`` per moving frame."""
    dx, dy = video.velocity
    travel = video.moving_frames
    margin_x, margin_y = abs(dx) * travel, abs(dy) * travel
    canvas = texture(rng, height + 2 * margin_y, width + 2 * margin_x)
    frames = np.empty((video.n_frames, height, width, 3), np.uint8)
    for t in range(video.n_frames):
        step = min(t, travel)
        # the camera moves by +velocity, so the content moves by -velocity on screen
        x0 = margin_x + dx * step
        y0 = margin_y + dy * step
        frames[t] = canvas[y0:y0 + height, x0:x0 + width]
    return frames


def write_fixture(dest: Path) -> Path:
    """The folder of fixture videos, ``dest``, written once per fixture version (``build_once``): shards that start
    together write them once, and a rerun finds the very videos it scored before."""
    build_once(dest, FIXTURE_VERSION, write_videos)
    return dest


def write_videos(folder: Path) -> dict[str, int]:
    """Write the fixture videos into ``folder`` (deterministic: one seeded generator per video)."""
    for number, video in enumerate(FIXTURE_VIDEOS):
        rng = np.random.default_rng([SEED, number])
        write_video(folder / f"{video.name}.mp4", render(video, rng), video.fps, crf=FIXTURE_CRF)
    return {"seed": SEED, "crf": FIXTURE_CRF}
