"""Helpers for the dynamic-degree tests: textured videos with known motion, RAFT weight files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from pinbench.media.video import write_video
from pinbench_recipes.dynamic_degree.fixture import FixtureVideo, render


@pytest.fixture
def texture_video(tmp_path: Path) -> Callable[..., Path]:
    """Factory: a texture moving ``velocity`` px per frame, written as MP4 under tmp_path."""

    def _make(name: str, *, fps: float = 8.0, n_frames: int = 20, velocity: tuple[int, int] = (3, 0),
              height: int = 52, width: int = 68, seed: int = 0) -> Path:
        video = FixtureVideo(name, fps, n_frames, velocity, n_frames if any(velocity) else 0, 0.0)
        frames = render(video, np.random.default_rng(seed), height=height, width=width)
        return write_video(tmp_path / f"{name}.mp4", frames, fps, crf=12)

    return _make


def random_raft_state(seed: int = 0) -> dict:
    """A seeded random torchvision raft_large state dict (weights and BatchNorm statistics)."""
    from torchvision.models.optical_flow import raft_large

    from pinbench_recipes.dynamic_degree.flow import seeded_random_state

    return seeded_random_state(raft_large(weights=None).state_dict(), seed)
