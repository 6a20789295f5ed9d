"""Measure whether the fixture videos encode to the same bytes, run after run (a measurement, not a test).

Why: fixture runs are compared with references and cached by SHA-256, so an encoder that writes
different bytes for the same frames moves per-sample values and defeats the caches (issue 10.8 saw
libx264 differ in up to 33 of 150 encodes on the development machine). This script encodes every
fixture video of every recipe with the same call the fixture uses (``pinbench.media.video.write_video``,
same codec, CRF and frames; MIND's are recorded from its own fixture writer; CameraBench's fixture
writes none), ``--runs`` times, spread over ``--processes`` fresh Python processes
(a fresh process has a fresh heap, so a dependence on uninitialised memory would show), and counts
the distinct byte digests and decoded-pixel digests per video. Exit status 1 if any video has more
than one of either.

    .venv/bin/python tools/encode_determinism.py --runs 100 --processes 10 [--only mind/]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

EncodeJob = tuple[str, Callable[[Path], Path]]


def _dynamic_degree() -> Iterator[EncodeJob]:
    from pinbench.media.video import write_video
    from pinbench_recipes.dynamic_degree import fixture

    for number, video in enumerate(fixture.FIXTURE_VIDEOS):
        frames = fixture.render(video, np.random.default_rng([fixture.SEED, number]))
        yield (f"dynamic-degree/{video.name}",
               lambda dest, f=frames, v=video: write_video(dest, f, v.fps, crf=fixture.FIXTURE_CRF))


def _remembench() -> Iterator[EncodeJob]:
    from pinbench.media.video import write_video
    from pinbench_recipes.remembench import fixture

    rng = np.random.default_rng(fixture.SEED)
    t2v = fixture.t2v_frames(rng)
    yield "remembench/t2v", lambda dest: write_video(dest, t2v, fixture.T2V.fps, crf=fixture.FIXTURE_CRF)
    poses = fixture.i2v_poses(rng, "rotation_180", "left", fixture.I2V.num_frames)
    i2v = fixture.i2v_frames(rng, poses, translation=False)
    yield "remembench/i2v-rotation", lambda dest: write_video(dest, i2v, fixture.I2V.fps, crf=fixture.FIXTURE_CRF)


def _paibench_c() -> Iterator[EncodeJob]:
    from pinbench.media.video import write_video
    from pinbench_recipes.paibench_c import fixture

    for index in range(fixture.N_TASKS):
        frames = fixture._gt_frames(index)
        yield (f"paibench-c/gt-{index}",
               lambda dest, f=frames: write_video(dest, f, fixture.FPS, codec=fixture.FIXTURE_CODEC))


def _mind() -> Iterator[EncodeJob]:
    """Every video mind's fixture writes, with the very frames it passes: recorded from one run of its writer."""
    from unittest import mock

    from pinbench.media.video import write_video
    from pinbench_recipes.mind import fixture

    calls = []

    def record(path: Path, frames: np.ndarray, fps: float, **kwargs: object) -> Path:
        calls.append((Path(path), np.asarray(frames), fps, kwargs))
        return Path(path)

    with tempfile.TemporaryDirectory(prefix="encode-determinism-mind-") as tmp, \
            mock.patch.object(fixture, "write_video", record):
        fixture._write_fixture(Path(tmp))  # what build_fixture runs, in the folder it then renames into place
        names = [path.relative_to(tmp).as_posix() for path, _, _, _ in calls]
    for name, (_, frames, fps, kwargs) in zip(names, calls, strict=True):
        yield f"mind/{name}", lambda dest, f=frames, r=fps, k=kwargs: write_video(dest, f, r, **k)


def _jobs() -> list[EncodeJob]:
    return [*_dynamic_degree(), *_remembench(), *_paibench_c(), *_mind()]


def _pixels_digest(path: Path) -> str:
    from pinbench.media.video import read_video

    return hashlib.sha256(read_video(path, backend="pyav").frames.tobytes()).hexdigest()


def worker(runs: int, only: str = "") -> list[dict[str, str]]:
    """``runs`` encodes of every fixture video (whose name starts with ``only``) in this process."""
    rows = []
    jobs = [(name, encode) for name, encode in _jobs() if name.startswith(only)]
    with tempfile.TemporaryDirectory(prefix="encode-determinism-") as tmp:
        for run in range(runs):
            for name, encode in jobs:
                path = encode(Path(tmp) / f"{name.replace('/', '__')}-{run}.mp4")
                rows.append({"video": name, "bytes": hashlib.sha256(path.read_bytes()).hexdigest(),
                             "pixels": _pixels_digest(path)})
                path.unlink()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100, help="encodes of each video in total")
    parser.add_argument("--processes", type=int, default=10, help="fresh processes the runs are spread over")
    parser.add_argument("--only", default="", help="only the videos whose name starts with this (e.g. mind/)")
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        json.dump(worker(args.worker, args.only), sys.stdout)
        return 0
    if args.runs < 1 or not 1 <= args.processes <= args.runs:
        parser.error("need --runs >= 1 and 1 <= --processes <= --runs")
    shares = [args.runs // args.processes + (i < args.runs % args.processes) for i in range(args.processes)]
    rows: list[dict[str, str]] = []
    for share in shares:  # one after the other: the measurement is about the encoder, not about load
        done = subprocess.run([sys.executable, __file__, "--worker", str(share), "--only", args.only], check=True,
                              capture_output=True, text=True)
        rows += json.loads(done.stdout)
    by_video: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: {"bytes": Counter(), "pixels": Counter()})
    for row in rows:
        by_video[row["video"]]["bytes"][row["bytes"]] += 1
        by_video[row["video"]]["pixels"][row["pixels"]] += 1
    if not rows:
        parser.error(f"no fixture video's name starts with {args.only!r}")
    print(f"{args.runs} encodes per video in {args.processes} fresh processes "
          f"(python {sys.version.split()[0]}, PyAV {_pyav_version()})")
    print(f"{'video':64} {'identical bytes':>16} {'identical pixels':>17}")
    differing = 0
    for video, counts in by_video.items():
        top_bytes, top_pixels = counts["bytes"].most_common(1)[0][1], counts["pixels"].most_common(1)[0][1]
        differing += len(counts["bytes"]) > 1 or len(counts["pixels"]) > 1
        print(f"{video:64} {top_bytes:>9} of {args.runs:<4} {top_pixels:>10} of {args.runs:<4}")
    print("all identical" if not differing else f"{differing} video(s) encoded to different results")
    return 1 if differing else 0


def _pyav_version() -> str:
    import av

    return f"{av.__version__} (libavcodec {'.'.join(map(str, av.library_versions['libavcodec']))})"


if __name__ == "__main__":
    sys.exit(main())
