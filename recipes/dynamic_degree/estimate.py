"""How long the official metric would take on CPU, said by ``pinbench doctor`` before the run starts.

RAFT at full resolution is a GPU model: on CPU a folder of long videos takes hours. The estimate counts the frame
pairs the run will score (the clips and sampling of ``clips.py``), scales them by pixel count to the size the rate
was measured at, and divides by that rate.

The rates were measured by ``tools/gpu_check.py`` (``make gpu-check``) on a lent H200 machine, torch 2.11.0+cu130,
RAFT-things at 832x480, batch 8, fp32 with TF32 off: 0.711 frame pairs/s on that machine's CPU and 25.1 on the GPU
(x35.4), as the notes of that session record (issue 12, "GPU"). A CPU of another kind, or another torch, runs at
another rate: the estimate says where its rate comes from, and the torch this environment has when it is not the
one the rate was measured with (read from the installed distribution, so it follows the lock).
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from pinbench.core.files import counted
from pinbench.core.findings import Finding, warning
from pinbench.ops.doctor import visible_gpus
from pinbench_recipes.dynamic_degree.clips import sampled_frames, split_clips

if TYPE_CHECKING:
    from pinbench.media.video import VideoInfo

CPU_PAIRS_PER_S = 0.711
GPU_PAIRS_PER_S = 25.1
RATE_PIXELS = 832 * 480
RATE_TORCH = "2.11.0+cu130"  # the torch the rates were measured with (a fact of that measurement)


def rate_source() -> str:
    """Where the rates come from, and this environment's torch when it is another (its local build tag aside)."""
    try:
        here: str | None = version("torch")
    except PackageNotFoundError:
        here = None
    source = (f"tools/gpu_check.py at 832x480 on a lent H200 machine's CPU (torch {RATE_TORCH}, batch 8, fp32): "
              f"{CPU_PAIRS_PER_S} pairs/s, against {GPU_PAIRS_PER_S} on its GPU")
    if here is None or here.partition("+")[0] != RATE_TORCH.partition("+")[0]:
        source += f"; this environment has torch {here or '(none)'}, at a rate not measured"
    return source


def raft_pairs(n_frames: int, fps: float) -> int:
    """Frame pairs RAFT scores in one video: consecutive sampled frames of each of its clips."""
    return sum(max(0, len(sampled_frames(clip, fps)) - 1) for clip in split_clips(n_frames, fps))


def _duration(seconds: float) -> str:
    """``about 13 s``, ``under 1 s``: the whole phrase, so that no range reads ``about under 1 s``."""
    if seconds < 1:
        return "under 1 s"
    if seconds < 120:
        return f"about {seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"about {seconds / 60:.0f} min"
    return f"about {seconds / 3600:.1f} h"


def cpu_time_finding(videos: Iterable[VideoInfo], *, flow: str, device: str,
                     gpus: list[tuple[str, str, float]] | None | bool = True) -> Finding | None:
    """A WARNING when RAFT would run on CPU (``device`` cpu, or auto with no GPU visible), with the estimated time;
    None when it runs on a GPU or is not RAFT. ``videos``: the facts the doctor read of those that decode (it names
    the others); each was opened once, for its first frame, not again here."""
    visible = visible_gpus() if gpus is True else (gpus or None)
    if flow != "raft" or device.startswith("cuda") or (device == "auto" and visible):
        return None
    pairs = work = 0.0
    n_videos = 0
    for info in videos:
        try:
            n = raft_pairs(info.n_frames, info.fps)
        except ValueError:
            continue
        n_videos += 1
        pairs += n
        work += n * info.width * info.height / RATE_PIXELS
    if not n_videos:
        return None
    why = "-o device=cpu" if device == "cpu" else "no GPU visible"
    return warning("cpu", f"RAFT would run on CPU ({why}): {pairs:.0f} frame pairs in {counted(n_videos, 'video')}, "
                          f"{_duration(work / CPU_PAIRS_PER_S)} (rate: {rate_source()}; a GPU: "
                          f"{_duration(work / GPU_PAIRS_PER_S)}); -o flow=farneback is the CPU preview")
