"""Web previews: a copy every browser plays of a video that some browsers cannot (a codec, a profile, a size).

Played as it is: H.264 Baseline/Main/High in 4:2:0 in an MP4, or VP8/VP9/AV1 in 4:2:0 in WebM or MP4, at most 4096
pixels on a side (the profiles browsers document). Anything else gets a preview: lossless H.264 (High 4:4:4
Predictive, what the fixtures write; Debian's Chromium plays it, a browser need not) and MPEG-4 Part 2 (PAI-Bench-C's
fixture; Chromium does not play it) among them.

A preview is H.264 High, 4:2:0, CRF 23 without the macroblock tree (``video.write_video``: the same bytes every time),
one frame per source frame at the source's frame rate (frame N of the preview is frame N of the rollout: a marked frame
is the same frame in both), padded to an even size, and shrunk by the whole factor that brings its long side to at most
1920 when that side is over 4096. It is made once per source content: cached as ``<cache>/<source sha256>.mp4`` with a
record of that digest and of the preview's own, and never handed out for other bytes: the source is hashed before and
again once the preview is written, and a cached preview whose own digest no longer matches its record is made again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from pinbench.core.files import exclusive, read_json_object, sha256_fd, sha256_file, write_atomic
from pinbench.media.video import (
    VideoError,
    iter_frames,
    open_video,
    opened_video,
    video_info,
    video_stream,
    write_video,
)

PREVIEW_CRF = 23
MAX_SIDE = 4096
PREVIEW_SIDE = 1920
_H264_PROFILES = {"Baseline", "Constrained Baseline", "Main", "High"}
_PIX_FMTS = {"yuv420p", "yuvj420p"}
_MP4 = {".mp4", ".m4v"}
_FORMAT = 1


@dataclass(frozen=True)
class VideoProbe:
    """What decides whether a browser plays a file, and what the page needs to step it frame by frame."""

    codec: str
    profile: str | None
    pix_fmt: str | None
    width: int
    height: int
    n_frames: int
    fps: float
    rate: Fraction

    def web_problem(self, suffix: str) -> str | None:
        """Why a browser may not play this file as it is (None: every browser does)."""
        if max(self.width, self.height) > MAX_SIDE:
            return f"{self.width}x{self.height} is larger than {MAX_SIDE} pixels on a side"
        if self.pix_fmt not in _PIX_FMTS:
            return f"{self.codec} in {self.pix_fmt}: browsers play 4:2:0 video"
        if self.codec == "h264" and suffix in _MP4:
            return None if self.profile in _H264_PROFILES else \
                f"H.264 {self.profile}: browsers document Baseline, Main and High"
        if self.codec in ("vp8", "vp9", "av1") and suffix in (*_MP4, ".webm"):
            return None
        return f"{self.codec} in a {suffix or 'suffix-less'} file: browsers play H.264 in MP4 and VP8/VP9/AV1"


def probe(path: Path, fd: int | None = None) -> VideoProbe:
    """The codec facts of a video (of the bytes of ``fd``, an open descriptor of it, when given; else of the file it
    opens once: ``opened_video``); VideoError (one line naming it) when it is missing, cut or undecodable."""
    with opened_video(path, fd) as fd:
        info = video_info(path, fd=fd)
        try:
            with open_video(path, fd) as container:
                stream = video_stream(path, container)
                ctx = stream.codec_context
                rate = next((Fraction(r) for r in (stream.average_rate, stream.guessed_rate) if r and r > 0),
                            Fraction(info.fps).limit_denominator(1001))
                return VideoProbe(ctx.name, ctx.profile, ctx.pix_fmt, info.width, info.height, info.n_frames,
                                  info.fps, rate)
        except av.error.FFmpegError as exc:
            raise VideoError(path, f"undecodable: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class Preview:
    path: Path
    source_sha256: str
    sha256: str


def cached_preview(cache: Path, source_sha256: str) -> Preview | None:
    """The preview of these source bytes in ``cache``, when its record and its own bytes still agree."""
    data = read_json_object(cache / f"{source_sha256}.json")
    path = cache / f"{source_sha256}.mp4"
    if data is None or data.get("format") != _FORMAT or data.get("source_sha256") != source_sha256:
        return None
    if not path.is_file() or sha256_file(path) != data.get("sha256"):
        return None
    return Preview(path, source_sha256, data["sha256"])


def make_preview(source: Path, source_sha256: str, cache: Path, *, fd: int) -> Preview:
    """The web preview of ``source``, whose bytes must hash to ``source_sha256``: from ``cache``, else made there.
    Its bytes are read (hashed, decoded) from ``fd``, the descriptor of it the caller opened and checked: a FIFO put
    at its path since held the request (and a bundle) for ever.

    VideoError when the source does not decode, or holds other bytes than ``source_sha256`` (before or after)."""
    cache.mkdir(parents=True, exist_ok=True)
    with exclusive(cache / f".{source_sha256}.lock"):
        found = cached_preview(cache, source_sha256)
        if found is not None:
            return found
        if sha256_fd(fd) != source_sha256:
            raise VideoError(source, "its bytes changed since it was hashed; no preview is made for other bytes")
        facts = probe(source, fd)
        path = cache / f"{source_sha256}.mp4"
        # under the lock no other preview of these bytes is being written: a temporary file of one is left by a
        # process that ended while making it (a stop of pinbench view does not wait for a preview)
        for stale in cache.glob(f".{path.name}.*.tmp.mp4"):
            stale.unlink(missing_ok=True)
        write_video(path, _web_frames(source, fd, facts), facts.rate, crf=PREVIEW_CRF)
        if sha256_fd(fd) != source_sha256:
            path.unlink()
            raise VideoError(source, "its bytes changed while its preview was made; the preview was removed")
        preview = Preview(path, source_sha256, sha256_file(path))
        write_atomic(cache / f"{source_sha256}.json", json.dumps({
            "format": _FORMAT, "source_sha256": source_sha256, "sha256": preview.sha256, "source": str(source),
            "frames": facts.n_frames, "rate": str(facts.rate),
            "encoder": f"libx264 CRF {PREVIEW_CRF} yuv420p no-mbtree (PyAV {av.__version__})"}, indent=1) + "\n")
        return preview


def _web_frames(source: Path, fd: int, facts: VideoProbe):  # -> Iterator[np.ndarray]
    """The source's frames, shrunk by the whole factor that brings a side over 4096 to at most 1920 (a mean over
    each k x k block) and padded to an even size (4:2:0 needs one)."""
    side = max(facts.width, facts.height)
    k = -(-side // PREVIEW_SIDE) if side > MAX_SIDE else 1
    for frame in iter_frames(source, backend="pyav", fd=fd):
        if k > 1:
            height, width = frame.shape[0] // k * k, frame.shape[1] // k * k
            blocks = frame[:height, :width].reshape(height // k, k, width // k, k, 3)
            frame = blocks.mean(axis=(1, 3)).round().astype(np.uint8)
        height, width = frame.shape[:2]
        if height % 2 or width % 2:
            frame = np.pad(frame, ((0, height % 2), (0, width % 2), (0, 0)), mode="edge")
        yield frame
