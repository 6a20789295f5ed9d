"""tools/bench_view.py: its preview step, the one part of the benchmark that calls the library directly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from bench_view import hash_and_preview

from pinbench.media.video import video_info, write_video


def test_hash_and_preview_makes_the_preview_the_server_would(tmp_path: Path) -> None:
    """Was: make_preview called without its keyword-only ``fd``, a TypeError after 750 rollouts were scored."""
    video = write_video(tmp_path / "i2v.mp4", (np.full((48, 64, 3), 10 * t, np.uint8) for t in range(10)), 16, crf=0)
    hashed, made, preview = hash_and_preview(video, tmp_path / "previews")
    assert hashed >= 0 and made > 0
    assert preview.path.parent == tmp_path / "previews" and video_info(preview.path).n_frames == 10
