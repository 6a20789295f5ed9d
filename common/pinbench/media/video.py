"""Video probing, decoding and writing shared by every recipe.

Why one module: each recipe must decode a video the same way (same backend order, same frame count,
same errors), and a bad file must stop with one line naming the file and what is wrong.

Frame count policy (what ``video_info`` reports and ``read_video`` enforces):

* MP4/MOV (ISO BMFF) files are first checked structurally: every top-level box must fit inside the file
  and a ``moov`` box must exist. A file cut short (writer killed, partial copy) fails here as
  ``truncated: ...`` whichever backend would have decoded it.
* For a structurally complete MP4/MOV the sample count of the video track (``stream.frames``) is used, once
  its sample table (no sample read) places every sample inside one of its ``mdat`` boxes; else the file is
  ``truncated`` ("container declares N frames, holds M"), or, when the track's data reference names another
  file, ``undecodable`` (its samples are not in this file). Of a complete file, the frames FFmpeg's decoders show
  are counted: its index leaves out the samples past an edit list's end and flags "discard" those before its start
  (``ffmpeg -ss T -i in.mp4 -c copy`` writes one) or B-frames past its end; pyav and OpenCV show neither. Decord
  counts the flagged ones, and its read of such a file is refused as ``undecodable``, saying so: its frame i is not
  the same frame read in order and after a seek.
* For other containers, or when the header has no count, the video packets are counted by demuxing
  (no decoding), less those FFmpeg flags "discard" (a fragmented MP4's edit list: decord's read is refused as
  above). If the header declared more frames than there are packets, or the packets end well
  before the declared duration (the video's own, never a longer audio track's), the file is reported
  ``truncated``. A fragmented MP4's samples (``moov``'s and each ``trun``'s, of every audio and video track) must
  lie whole inside its ``mdat`` boxes too (``_check_fragments``); a cut where a fragment starts leaves a complete
  shorter file, which nothing FFmpeg writes tells apart.
* The video is the one video stream that is not a cover picture (``video_stream``), for every read. OpenCV reads
  the first one listed, so a file whose cover is listed first is refused to it. A file with two or more such
  streams is refused by every read, naming them: decord picks one by its own ranking, pyav and OpenCV the first,
  and an unflagged one-frame picture track listed first (a Matroska muxer's cover) read as a 1-frame "video". One
  listed after the video is no second video (``_one_picture_each``): every reader reads the video before it.
* A backend whose stream ends before a requested frame (or, for decord, whose index holds a different
  count) reports ``truncated``. ``is_valid_video`` decodes every frame and requires exactly that count.

Decoders: every caller names its backend (each recipe declares the one its upstream used as a ``decoder``
option). There is no silent fallback to another decoder, whose pixels can differ; a backend that is not
installed (decord has no aarch64 wheel) is a ``DecoderUnavailable`` error naming the option.

Frames are returned as stored: rotation metadata is not applied by any backend.
"""

from __future__ import annotations

import bisect
import codecs
import importlib
import math
import os
import re
import struct
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from queue import Full, Queue
from typing import Any, BinaryIO, NamedTuple, TypeVar, cast

import av
import numpy as np

from pinbench.core.files import FileError, atomic_path, counted, open_regular

T = TypeVar("T")
BACKENDS = ("decord", "pyav", "opencv")
_BMFF_FIRST_BOXES = {b"ftyp", b"moov", b"mdat", b"wide", b"free", b"skip", b"styp"}
_EVEN_SIZE_PIX_FMTS = {"yuv420p", "yuvj420p", "nv12", "nv21", "yuv420p10le"}
_CRF_CODECS = {"libx264", "libx264rgb", "libx265"}
# No macroblock tree in libx264: with it, the x264 in PyAV's wheel (core 165) wrote bytes that depended on what freshly
# allocated memory held (with its AVX-512 code; asm limited to AVX2, or none, was stable), so a streamed encode (the
# preview's) gave another file now and then. Measured: 64x48 60-frame CRF 18 and 23 encodes and 1376x768 CRF 23 ones,
# each in fresh processes with MALLOC_PERTURB_=255 and =85, gave two digests with it and one without; the 26 lossless
# (crf 0) videos of the fixtures and generators are the same bytes either way.
_NO_MBTREE = {"mbtree": "0"}
_CODEC_OPTIONS = {"libx264": _NO_MBTREE, "libx264rgb": _NO_MBTREE}


class VideoError(ValueError):
    """A video that cannot be used; ``str(e)`` is ``"<path>: <reason>"`` on one line."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = Path(path)
        self.reason = " ".join(str(reason).split())
        super().__init__(self.path, self.reason)

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass(frozen=True)
class VideoInfo:
    """Container facts of a video; ``n_frames`` is the count decoding yields (see module doc)."""

    path: Path
    n_frames: int
    fps: float
    width: int
    height: int
    codec: str
    duration_s: float
    container: str   # PyAV's format name: "mov,mp4,m4a,3gp,3g2,mj2", "matroska,webm", ...


@dataclass
class DecodedVideo:
    """Decoded RGB frames plus the backend that produced them (recorded for provenance)."""

    frames: np.ndarray
    info: VideoInfo   # the container's facts, read for the decode (a caller needing both opens the file once)
    backend: str
    indices: list[int] = field(default_factory=list)

    @property
    def fps(self) -> float:
        return self.info.fps


@dataclass(frozen=True)
class _Probe:
    """What the header read of ``video_info`` found: its facts, and what decord's read is refused by (that read had
    opened the header a second time for them)."""

    info: VideoInfo
    discarded: int   # samples FFmpeg's index flags "discard" (an edit list's)
    cover_first: bool = False   # a cover picture is listed before the video (OpenCV reads the first one listed)


class DecoderUnavailable(RuntimeError):
    """The chosen video backend cannot be imported here (one line naming the ``decoder`` option)."""


class _BackendFailure(Exception):
    """One backend could not deliver the frames; ``kind`` is "truncated" or "undecodable"."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = " ".join(message.split())


@contextmanager
def opened_video(path: str | os.PathLike[str], fd: int | None = None) -> Iterator[int]:
    """A descriptor of the regular file ``path``, closed on leaving; VideoError (one line naming it) when there is none.
    ``fd``, a descriptor of it a caller opened so already, is handed back as it is (its owner closes it).

    Why: a path checked and then opened again by name reads whatever is there by then (a FIFO put there held the
    reader for ever). The file is opened once (``core.files.open_regular``: a FIFO or a folder is refused at once,
    never waited on) and every later read (``fd=`` of ``video_info``, ``read_video``, ``iter_frames``) is of it.
    """
    if fd is not None:
        yield fd
        return
    path = Path(path)
    try:
        own = open_regular(path)
    except FileError as exc:   # absent, a dangling link, a FIFO, a folder: its reason
        raise VideoError(path, exc.reason) from None
    try:
        yield own
    finally:
        os.close(own)


def _fd_path(fd: int) -> Path:
    """A name that opens the file ``fd`` is open on (not what its path names by then), for the decoders that open
    names (decord, OpenCV, PyAV's by-name reads)."""
    return Path(f"/dev/fd/{fd}")


@contextmanager
def _reader(fd: int) -> Iterator[BinaryIO]:
    """The bytes of the open descriptor ``fd`` from their start (left open: its owner closes it)."""
    with os.fdopen(fd, "rb", closefd=False) as fh:
        fh.seek(0)
        yield fh


@contextmanager
def open_video(path: Path, fd: int, options: dict[str, str] | None = None) -> Iterator[av.container.InputContainer]:
    """PyAV's container of the bytes of ``fd``, an open descriptor of ``path`` (``opened_video``'s or
    ``core.files.open_regular``'s: what was opened and checked, never what the path names by then; PyAV reads it as a
    file object)."""
    with _reader(fd) as fh, av.open(fh, options=options) as container:
        yield container


@dataclass(frozen=True)
class _Bmff:
    """Where a complete MP4/MOV keeps its samples and its index (payload byte ranges)."""

    media: list[tuple[int, int]]   # every top-level 'mdat', in file order
    moov: tuple[int, int]
    fragments: list[tuple[int, int]]   # every top-level 'moof' (none: unfragmented)


def _check_bmff_structure(path: Path, size: int, fd: int) -> _Bmff | None:
    """Walk the top-level MP4/MOV boxes; where its ``mdat``, ``moov`` and ``moof`` payloads lie, or None when the
    file is not ISO BMFF.

    Why: with ``moov`` at the end a cut file cannot even be opened (decoders say "invalid data"),
    and with ``moov`` first backends disagree (error, or a silent short read). The box sizes say
    exactly whether bytes are missing, independent of any decoder.
    """
    with _reader(fd) as fh:
        head = fh.read(8)
        if len(head) < 8 or head[4:8] not in _BMFF_FIRST_BOXES:
            return None
        offset, seen, media, moov, fragments = 0, set(), [], (0, 0), []
        while offset < size:
            fh.seek(offset)
            header = fh.read(16)
            if len(header) < 8:
                raise VideoError(path, f"truncated: incomplete box header at byte {offset} of {size}")
            box_size, box_type = struct.unpack(">I4s", header[:8])
            header_size = 16 if box_size == 1 else 8
            if box_size == 1:
                if len(header) < 16:
                    raise VideoError(path, f"truncated: incomplete box header at byte {offset} of {size}")
                box_size = struct.unpack(">Q", header[8:16])[0]
            elif box_size == 0:
                box_size = size - offset
            if box_size < header_size:
                raise VideoError(path, f"undecodable: corrupt MP4 box at byte {offset} (size {box_size})")
            name = box_type.decode("latin-1")
            if offset + box_size > size:
                raise VideoError(
                    path,
                    f"truncated: '{name}' box at byte {offset} needs {box_size} bytes, "
                    f"only {size - offset} present",
                )
            seen.add(box_type)
            if box_type == b"mdat":
                media.append((offset + header_size, offset + box_size))
            elif box_type == b"moov":
                moov = (offset + header_size, offset + box_size)
            elif box_type == b"moof":
                fragments.append((offset + header_size, offset + box_size))
            offset += box_size
    if b"moov" not in seen:
        raise VideoError(path, "truncated: MP4 has no 'moov' box (file incomplete)")
    return _Bmff(media, moov, fragments)


_INDEXED = hasattr(av.video.stream.VideoStream, "index_entries")   # PyAV 17 and later


class _Sample(NamedTuple):
    """A sample of a stream's index as ``_samples_held`` reads it: where it starts in the file, its size, and whether
    FFmpeg flags it "discard" (an edit list's)."""
    pos: int
    size: int
    is_discard: bool


def _index(container: av.container.InputContainer, *streams: av.stream.Stream) -> list[Sequence[_Sample]]:
    """Each of ``streams``' index as FFmpeg read it from ``moov`` (PyAV 17's ``index_entries``, no sample read); with
    an older PyAV (MIND's image keeps upstream's 16.1, CameraBench's 14.2: ``av.index`` made pinbench fail to import
    there), their packets demuxed in one pass, each sample's bytes read but none decoded: a sample cut by the file's
    end is a packet flagged corrupt (its bytes are what is left), left out as the index counts it outside every
    mdat."""
    if _INDEXED:
        return [stream.index_entries for stream in streams]
    samples: dict[int, list[_Sample]] = {stream.index: [] for stream in streams}
    try:
        for packet in container.demux(*streams):
            if packet.size and not packet.is_corrupt:
                samples[packet.stream.index].append(_Sample(packet.pos, packet.size, packet.is_discard))
    except av.error.FFmpegError:   # a cut file: the samples read before it
        pass
    return [samples[stream.index] for stream in streams]


def _samples_held(entries: Sequence[_Sample], media: list[tuple[int, int]]) -> int:
    """How many of the samples ``entries`` (a stream's index, read from ``moov`` without reading a sample) lie whole
    inside an ``mdat`` payload of the file.

    Why: a ``moov`` whose sample table outlives its media (an ``mdat`` cut and its size patched, or one of size 0
    "to the end of the file" cut short) fits the file box by box, yet every decoder stops early; counting by the
    index costs no decode, where counting the decoded frames read the whole file.
    """
    starts = [start for start, _ in media]
    held = 0
    for i in range(len(entries)):   # the last mdat starting at or before a sample is the only one that can hold it
        sample = entries[i]
        k = bisect.bisect_right(starts, sample.pos) - 1
        held += k >= 0 and sample.pos + sample.size <= media[k][1]
    return held


def _children(fh: BinaryIO, payload: tuple[int, int], box_type: bytes | None) -> Iterator[tuple[int, int]]:
    """The payload byte ranges of the children (of type ``box_type``; any when None) of the box whose payload is
    ``payload``; a child that does not fit ends the walk (a 64-bit size cut off by the file's end raised
    struct.error)."""
    offset, end = payload
    while offset + 8 <= end:
        fh.seek(offset)
        head = fh.read(16)
        size, kind = struct.unpack(">I4s", head[:8])
        header = 8
        if size == 1:
            if offset + 16 > end:
                return
            size, header = struct.unpack(">Q", head[8:16])[0], 16
        elif size == 0:
            size = end - offset
        if size < header or offset + size > end:
            return
        if box_type in (None, kind):
            yield offset + header, offset + size
        offset += size


def _nested(fh: BinaryIO, payload: tuple[int, int], *path: bytes) -> Iterator[tuple[int, int]]:
    """The payload byte ranges of the boxes down ``path`` (one type a level) below the box whose payload is
    ``payload``."""
    if not path:
        yield payload
        return
    for child in _children(fh, payload, path[0]):
        yield from _nested(fh, child, *path[1:])


def _external_data(fd: int, moov: tuple[int, int], track_id: int) -> bool:
    """Whether track ``track_id`` has a data reference entry not flagged self-contained: its chunk offsets then point
    into another file, which FFmpeg does not open (it reads this one at those offsets)."""
    with _reader(fd) as fh:
        for trak in _children(fh, moov, b"trak"):
            for tkhd in _children(fh, trak, b"tkhd"):
                fh.seek(tkhd[0])
                head = fh.read(min(24, tkhd[1] - tkhd[0]))
                at = 20 if head[:1] == b"\x01" else 12   # track_ID, after version-sized times
                if head[at:at + 4] != (track_id % 2**32).to_bytes(4, "big"):   # (a tkhd too short for one: no match)
                    continue
                for dref in _nested(fh, trak, b"mdia", b"minf", b"dinf", b"dref"):
                    for entry in _children(fh, (dref[0] + 8, dref[1]), None):   # the entries follow flags and count
                        fh.seek(entry[0])
                        if not int.from_bytes(fh.read(4), "big") & 1:
                            return True
    return False


def _fragment_samples(fd: int, fragments: list[tuple[int, int]]) -> dict[int, int]:
    """How many samples the ``trun`` boxes of each track (by track_ID) declare in the ``moof`` payloads
    ``fragments``: what a fragmented file holds beyond ``moov``'s own samples, read from the boxes as an older PyAV
    has no index. One pass for every track: the boxes were read once per track."""
    counts: dict[int, int] = {}
    with _reader(fd) as fh:
        for moof in fragments:
            for traf in _children(fh, moof, b"traf"):
                tfhd = next(_children(fh, traf, b"tfhd"), None)   # version and flags, then track_ID
                if tfhd is None:
                    continue
                fh.seek(tfhd[0] + 4)
                track_id = int.from_bytes(fh.read(4), "big")
                for trun in _children(fh, traf, b"trun"):   # version and flags, then sample_count
                    fh.seek(trun[0] + 4)
                    counts[track_id] = counts.get(track_id, 0) + int.from_bytes(fh.read(4), "big")
    return counts


def _check_fragments(path: Path, fd: int, container: av.container.InputContainer, bmff: _Bmff) -> None:
    """VideoError unless every sample a fragmented file declares (``moov``'s and each ``trun``'s) lies whole inside
    an ``mdat``, for every audio and video track, as for an unfragmented file. Every track is read from one container
    with the edit list ignored, in one pass where there is no index (it was opened, and demuxed, once per track): the
    probe's own container, whose packets count the frames, cannot serve, as its edit list leaves samples out (27 of
    a 30-sample file listed, one flagged discard, where all 30 are with it ignored).

    Why: a fragment's ``mdat`` cut and its size patched (or one of size 0 cut short) fits the file box by box, and a
    sample or two lost is within the duration check's margin; the fragments' audio lost with the video whole was read
    as a whole video. A file cut exactly where a fragment starts is a complete shorter file: FFmpeg writes no total
    (no ``mehd``; ``mvhd`` holds the first fragment's duration), so such a cut cannot be told.
    """
    tracks = [s for s in container.streams if s.type in ("video", "audio") and not _is_cover(s)]
    with open_video(path, fd, {"ignore_editlist": "1"}) as again:   # every sample, an edit list's too: one container
        holds = [_samples_held(entries, bmff.media)   # (PyAV 17's index is read while its container is open)
                 for entries in _index(again, *(again.streams[stream.index] for stream in tracks))]
    fragment_samples = _fragment_samples(fd, bmff.fragments)
    for stream, held in zip(tracks, holds, strict=True):
        declared = (stream.frames or 0) + fragment_samples.get(stream.id % 2**32, 0)
        if held < declared:
            what = counted(declared, "frame") if stream.type == "video" else f"{declared} {stream.type} samples"
            raise VideoError(path, f"truncated: container declares {what}, holds {held}")


def _stream_fps(stream: av.video.stream.VideoStream) -> float | None:
    for rate in (stream.average_rate, stream.guessed_rate, stream.base_rate):
        if rate and rate > 0:
            return float(rate)
    return None


def _is_cover(stream: av.stream.Stream) -> bool:
    """Whether FFmpeg flags the stream an attached picture (a cover), which it lists as a one-frame video stream."""
    return bool(stream.disposition & av.stream.Disposition.attached_pic)


def video_stream(path: Path, container: av.container.InputContainer) -> av.video.stream.VideoStream:
    """The video stream every read takes: the first that is not a cover picture; VideoError (one line) when none is.

    Why: FFmpeg lists a cover (an MP4's 'covr' image, flagged an attached picture) as a one-frame video stream, first
    when the file's metadata comes before its track; taken as the video, such a file read as that one picture.
    """
    stream = next((s for s in container.streams.video if not _is_cover(s)), None)
    if stream is None:
        raise VideoError(path, "undecodable: only a cover picture, no video stream" if container.streams.video
                         else "undecodable: no video stream")
    return stream


def _one_picture_each(path: Path, fd: int, streams: list[av.video.stream.VideoStream]) -> bool:
    """Whether each of ``streams``, listed after the video, holds one picture at most (its index's count, else a
    demux): a cover with no cover flag, as ``ffmpeg -map 0 -c copy`` writes an MP4's into Matroska, which pyav, OpenCV
    and decord all read past: such a file was refused by every read as "2 video streams"."""
    if all(s.frames for s in streams):
        return all(s.frames == 1 for s in streams)
    seen = dict.fromkeys((s.index for s in streams), 0)
    with open_video(path, fd) as again:
        try:
            for packet in again.demux(*(again.streams[i] for i in seen)):
                seen[packet.stream.index] += packet.size > 0
                if seen[packet.stream.index] > 1:
                    return False
        except av.error.FFmpegError:
            return False
    return True


def _count_packets(path: Path, container: av.container.InputContainer,
                   stream: av.video.stream.VideoStream) -> tuple[int, int, float | None]:
    """Count video packets by demuxing: those shown, those flagged "discard" (an edit list's: a fragmented MP4's
    too), and the end time (s) the packets cover."""
    start = stream.start_time or 0
    count, discarded, end = 0, 0, None
    try:
        for packet in container.demux(stream):
            if packet.size == 0:
                continue
            if packet.is_discard:
                discarded += 1
            else:
                count += 1
            if packet.pts is not None and stream.time_base is not None:
                packet_end = float((packet.pts - start + (packet.duration or 0)) * stream.time_base)
                end = packet_end if end is None else max(end, packet_end)
    except av.error.FFmpegError as exc:
        raise VideoError(path, f"truncated: demuxing stopped after {count + discarded} packets: {exc}") from exc
    return count, discarded, end


_DURATION_TAG = re.compile(r"([0-9]+):([0-9]{2}):([0-9]{2}(?:\.[0-9]+)?)")   # Matroska's per-track DURATION


def _declared_seconds(container: av.container.InputContainer, stream: av.video.stream.VideoStream) -> float | None:
    """How long the video stream says it is: its own duration, else its Matroska DURATION tag, else the container's
    where no other stream could make that longer. A complete 1.2 s Matroska video with a 3 s audio track was refused as
    "truncated: container declares 3.003 s but frames end at 1.200 s"."""
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if tag := _DURATION_TAG.fullmatch(stream.metadata.get("DURATION", "")):
        return int(tag[1]) * 3600 + int(tag[2]) * 60 + float(tag[3])
    others = [s for s in container.streams if s is not stream and s.type in ("video", "audio", "subtitle")
              and not _is_cover(s)]
    return container.duration / av.time_base if container.duration is not None and not others else None


def video_info(path: str | os.PathLike[str], *, fd: int | None = None) -> VideoInfo:
    """Read the container facts of a video (no decoding); VideoError if it is missing/empty/cut/bad. With ``fd``, an
    open descriptor of the regular file ``path`` (``opened_video``), its bytes are read and ``path`` names them;
    without, ``path`` is opened once and only that descriptor is read."""
    path = Path(path)
    with opened_video(path, fd) as fd:
        return _probe(path, fd=fd).info


def _probe(path: Path, fd: int) -> _Probe:
    size = os.fstat(fd).st_size
    if size == 0:
        raise VideoError(path, "empty file (0 bytes)")
    try:
        bmff = _check_bmff_structure(path, size, fd)
    except OSError as exc:
        raise VideoError(path, f"unreadable: {exc.strerror or exc}") from exc
    with ExitStack() as stack:
        try:
            container = stack.enter_context(open_video(path, fd))
        except av.error.FFmpegError as exc:
            raise VideoError(path, f"undecodable: {_text_head(fd) or exc.strerror or exc}") from exc
        if container.format.name.endswith("_pipe") or container.format.name in ("image2", *_ANIMATIONS):  # pictures
            raise VideoError(path, f"undecodable: {_pictures(container)}, not a video container")
        stream = video_stream(path, container)
        videos = [s for s in container.streams.video if not _is_cover(s)]
        if len(videos) > 1 and not _one_picture_each(path, fd, videos[1:]):
            named = ", ".join(f"#{s.index} {s.codec_context.name} {s.codec_context.width}x{s.codec_context.height}"
                              for s in videos)
            raise VideoError(path, f"undecodable: {len(videos)} video streams ({named}): decoders differ on which "
                                   f"is the video")
        ctx = stream.codec_context
        width, height, codec = ctx.width, ctx.height, ctx.name
        container_name = container.format.name
        cover_first = stream is not container.streams.video[0]
        fps = _stream_fps(stream)
        declared = stream.frames if stream.frames and stream.frames > 0 else None
        declared_s = _declared_seconds(container, stream)
        if bmff is not None and not bmff.fragments and declared is not None:
            entries, = _index(container, stream)
            shown = len(entries)
            if shown < declared:   # FFmpeg's index leaves out the samples past an edit list's end: judge by them all
                with open_video(path, fd, {"ignore_editlist": "1"}) as whole:
                    held = _samples_held(_index(whole, video_stream(path, whole))[0], bmff.media)
            else:
                held = _samples_held(entries, bmff.media)
            if held < declared:
                if _external_data(fd, bmff.moov, stream.id):
                    raise VideoError(path, "undecodable: its samples are in another file (an external data reference)")
                raise VideoError(path, f"truncated: container declares {counted(declared, 'frame')}, holds {held}")
            # What FFmpeg's decoders show: its index, less the samples it flags "discard" (before the edit list's
            # start, or B-frames past its end)
            n_frames = shown - sum(entries[i].is_discard for i in range(shown))
            discarded = shown - n_frames
        else:
            n_frames, discarded, covered_s = _count_packets(path, container, stream)
            if declared is not None and n_frames + discarded < declared:
                raise VideoError(path, f"truncated: container declares {counted(declared, 'frame')}, "
                                       f"holds {n_frames + discarded}")
            if fps and declared_s and covered_s is not None:
                missing_s = declared_s - covered_s
                if missing_s > max(2.0 / fps, 0.02 * declared_s):
                    raise VideoError(
                        path,
                        f"truncated: container declares {declared_s:.3f} s but frames end at "
                        f"{covered_s:.3f} s ({counted(n_frames, 'frame')})",
                    )
            if bmff is not None and bmff.fragments:
                _check_fragments(path, fd, container, bmff)
    if n_frames == 0:
        raise VideoError(path, "undecodable: no video frames")
    if not width or not height:
        raise VideoError(path, "undecodable: video stream has no frame size")
    if fps is None:
        if not declared_s:
            raise VideoError(path, "undecodable: no frame rate in container")
        fps = n_frames / declared_s
    duration_s = declared_s if declared_s else n_frames / fps
    return _Probe(VideoInfo(path, n_frames, fps, width, height, codec, duration_s, container_name), discarded,
                  cover_first)


# The container a video's extension names, as a name in FFmpeg's demuxer of it ("mov,mp4,m4a,3gp,3g2,mj2",
# "matroska,webm": a .mov in MP4 or a .mkv in WebM is what its name says); another extension names none
_NAMED_CONTAINERS = {".mp4": "mp4", ".m4v": "mp4", ".mov": "mov", ".mkv": "matroska", ".webm": "webm", ".avi": "avi"}


def unnamed_container(info: VideoInfo, suffix: str) -> str | None:
    """The container the extension ``suffix`` names (``_NAMED_CONTAINERS``) when ``info``'s is not it, else None
    (an extension that names none, or the container it names): a recipe's inputs (``misnamed``) and a generator's
    rollouts (``check_rollout``) are held to one table."""
    wanted = _NAMED_CONTAINERS.get(suffix.lower())
    return None if wanted is None or wanted in info.container.split(",") else wanted


def misnamed(info: VideoInfo) -> str | None:
    """Why a recipe's input is refused whose container is not the one its extension names (a Matroska or AVI file
    named ``.mp4``: a reader of the container's own facts, or a page that serves it by its name, takes it for
    another), or None. Rollouts have their recipe's own rule (``rollout_container``)."""
    wanted = unnamed_container(info, info.path.suffix)
    if wanted is None:
        return None
    article = "an" if info.container[:1] in "aeiou" else "a"   # an avi container
    return (f"{article} {info.container} container under the extension {info.path.suffix} (which names {wanted}): "
            "rename it to its format's extension")


def named_video_info(path: str | os.PathLike[str], *, fd: int | None = None) -> VideoInfo:
    """``video_info`` of an input its recipe reads as the container its extension names; VideoError (``misnamed``)
    when it is another: every reader of such inputs refuses it alike, in one line naming the file."""
    info = video_info(path, fd=fd)
    if (why := misnamed(info)) is not None:
        raise VideoError(info.path, why)
    return info


# FFmpeg demuxers of animated pictures, which read one as a video: what a page calls it
_ANIMATIONS = {"gif": "a GIF", "apng": "an APNG"}


def _pictures(container: av.container.InputContainer) -> str:
    """What a file FFmpeg reads with a picture demuxer is: such a demuxer also reads pictures one after another (PNGs
    concatenated: 10 frames to PyAV) and an animated WebP (one packet, which this FFmpeg cannot decode), so it is
    named a picture format, with its count of pictures where it has more than one packet. A GIF or an APNG (FFmpeg's
    own demuxers read an animated one as a video) is named a GIF or APNG picture, an animation where it has more than
    one."""
    try:
        n = sum(1 for packet in container.demux(container.streams.video[0]) if packet.size)
    except av.error.FFmpegError:
        n = 0
    if container.format.name in _ANIMATIONS:
        return f"{_ANIMATIONS[container.format.name]} picture" + (f" (an animation of {n} pictures)" if n > 1 else "")
    count = f": {n} pictures one after another" if n > 1 else ""
    return f"a picture format ({container.format.name.removesuffix('_pipe')}{count})"


def _text_head(fd: int) -> str | None:
    """What a file FFmpeg cannot open is when it starts with text (a failed download saved an HTML error page as
    ``x.mp4``): its first words, cut short; None when its first bytes are no text."""
    read = os.pread(fd, 256, 0)
    head = read.removeprefix(b"\xef\xbb\xbf")
    try:   # valid UTF-8 only (bytes >= 0x80 that are no UTF-8 are binary), bar a character cut at byte 256
        text = codecs.getincrementaldecoder("utf-8")().decode(head, final=len(read) < 256)
    except UnicodeDecodeError:
        return None
    if b"\0" in head or not text.strip() or not all(c.isprintable() or c in "\t\n\r" for c in text):
        return None
    words = " ".join(text.split())   # lines joined: an HTML page's first line is ``<html>``, its status comes later
    return f"not a video (it starts with text: {words[:60] + ('...' if len(words) > 60 else '')!r})"


def require_backend(name: str) -> None:
    """DecoderUnavailable unless backend ``name`` imports here; call it before any work starts."""
    if name not in BACKENDS:
        raise ValueError(f"unknown video backend {name!r}; choose one of {', '.join(BACKENDS)}")
    module = {"decord": "decord", "pyav": "av", "opencv": "cv2"}[name]
    try:
        importlib.import_module(module)
    except Exception as exc:  # a missing wheel or a broken native library
        others = ", ".join(b for b in BACKENDS if b != name)
        raise DecoderUnavailable(f"video decoder {name!r} is not available here ({type(exc).__name__}: {exc}); "
                                 f"choose another with -o decoder=<{others}>") from None


def _decord_reader(path: Path, probe: _Probe):  # -> decord.VideoReader (decord has no type stubs)
    """Decord's reader of ``path`` (the probe has refused a file of two video streams, of which decord picks one by
    its own ranking)."""
    require_backend("decord")
    import decord

    info, discarded = probe.info, probe.discarded
    try:
        reader = decord.VideoReader(str(path), ctx=decord.cpu(0))
    except Exception as exc:  # decord raises RuntimeError, DECORDError or TVMError subclasses
        raise _BackendFailure("undecodable", f"{type(exc).__name__}: {exc}") from exc
    if discarded and len(reader) == info.n_frames + discarded:
        # Not "truncated": what ``ffmpeg -ss T -c copy`` writes is whole. Nor read: of such a cut (a 100-frame H.264
        # with B-frames cut at 1.3 s: 70 samples, 3 flagged) decord's frame i was pyav's frame i read in order, frame
        # i-3 after a seek, and its last 3 were the last again.
        raise _BackendFailure("undecodable", f"counts the {discarded} of {len(reader)} samples the edit list "
                                             "discards, which pyav and OpenCV skip "
                                             f"({counted(info.n_frames, 'frame')})")
    if len(reader) != info.n_frames:
        raise _BackendFailure("truncated", f"the reader sees {counted(len(reader), 'frame')}, "
                                           f"the container holds {info.n_frames}")
    return reader


_DECORD_PADDED = re.compile(r"from_size == to_size \((\d+) vs\. (\d+)\)")


def _decord_batch(reader, info: VideoInfo, wanted: list[int]) -> np.ndarray:
    try:
        frames = reader.get_batch(wanted).asnumpy()
    except Exception as exc:  # decord raises RuntimeError, DECORDError or TVMError subclasses
        if padded := _DECORD_PADDED.search(str(exc)):
            # Measured with decord 0.6.0, H.264 16 high: widths 2, 4, 6, 8, 12, 16, 24, 48 and 72 failed so (a read of
            # one frame as of 10,000), 15 others from 10 to 74 read; its own message carries a time and a build path
            raise _BackendFailure("undecodable", f"cannot copy its {info.width}x{info.height} frames (a buffer of "
                                                 f"{padded[1]} bytes a frame for {padded[2]}); pyav and OpenCV read "
                                                 f"them") from exc
        raise _BackendFailure("undecodable", f"{type(exc).__name__}: {exc}") from exc
    expected = (len(wanted), info.height, info.width, 3)
    if frames.shape != expected or frames.dtype != np.uint8:
        raise _BackendFailure(
            "undecodable", f"decord returned {frames.dtype} {frames.shape}, expected {expected}"
        )
    return frames


def _decode_decord(path: Path, probe: _Probe, wanted: list[int]) -> np.ndarray:
    reader = _decord_reader(path, probe)
    if not wanted:
        return np.empty((0, probe.info.height, probe.info.width, 3), np.uint8)
    return _decord_batch(reader, probe.info, wanted)


def _sequential(info: VideoInfo, wanted: list[int], frames_iter: Iterable[Callable[[], np.ndarray]]) -> np.ndarray:
    """Walk decoded frames in order, converting only the wanted ones; shared by PyAV and OpenCV.

    ``frames_iter`` yields, per decoded frame, a thunk that converts it to RGB, so unwanted frames
    are never converted; it stops at the end of the stream, and stopping early means truncated.
    """
    out = np.empty((len(wanted), info.height, info.width, 3), np.uint8)
    if not wanted:
        return out
    slot = {index: pos for pos, index in enumerate(wanted)}
    last, decoded = wanted[-1], 0
    for to_rgb in frames_iter:
        if decoded in slot:
            rgb = to_rgb()
            if rgb.shape != out.shape[1:]:
                raise _BackendFailure(
                    "undecodable", f"frame {decoded} is {rgb.shape}, expected {out.shape[1:]}"
                )
            out[slot[decoded]] = rgb
        decoded += 1
        if decoded > last:
            return out
    raise _BackendFailure("truncated", f"stream ended after {decoded} of {counted(info.n_frames, 'frame')}")


def _streamed(info: VideoInfo, frames_iter: Iterable[Callable[[], np.ndarray]]) -> Iterator[np.ndarray]:
    """Every frame in order, converted one at a time (``_sequential`` for all frames, without holding them)."""
    decoded = 0
    for to_rgb in frames_iter:
        rgb = to_rgb()
        if rgb.shape != (info.height, info.width, 3):
            raise _BackendFailure(
                "undecodable", f"frame {decoded} is {rgb.shape}, expected {(info.height, info.width, 3)}"
            )
        yield rgb
        decoded += 1
        if decoded == info.n_frames:
            return
    raise _BackendFailure("truncated", f"stream ended after {decoded} of {counted(info.n_frames, 'frame')}")


def _pyav_thunks(path: Path, container: av.container.InputContainer) -> Iterator[Callable[[], np.ndarray]]:
    stream = video_stream(path, container)
    stream.thread_type = "AUTO"
    return (lambda frame=frame: frame.to_ndarray(format="rgb24") for frame in container.decode(stream))


def _decode_pyav(path: Path, probe: _Probe, wanted: list[int]) -> np.ndarray:
    try:
        with av.open(str(path)) as container:
            return _sequential(probe.info, wanted, _pyav_thunks(path, container))
    except av.error.FFmpegError as exc:
        raise _BackendFailure("undecodable", f"decoding failed: {exc}") from exc


def _stream_pyav(path: Path, probe: _Probe) -> Iterator[np.ndarray]:
    try:
        with av.open(str(path)) as container:
            yield from _streamed(probe.info, _pyav_thunks(path, container))
    except av.error.FFmpegError as exc:
        raise _BackendFailure("undecodable", f"decoding failed: {exc}") from exc


def _open_capture(path: Path, probe: _Probe):  # -> cv2.VideoCapture (opened, orientation metadata ignored)
    """OpenCV's capture of ``path``; refused when a cover picture is listed before the video: OpenCV reads the first
    video stream listed (the picture: one frame), and its FFmpeg backend takes no choice of stream."""
    import cv2

    if probe.cover_first:
        raise _BackendFailure("undecodable", "a cover picture comes before its video stream: OpenCV reads the "
                                             "picture, pyav and decord the video")
    capture = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    if not capture.isOpened():
        capture.release()
        raise _BackendFailure("undecodable", "cannot open")
    capture.set(cv2.CAP_PROP_ORIENTATION_AUTO, 0)  # match decord/PyAV: frames as stored
    return capture


def _opencv_thunks(capture) -> Iterator[Callable[[], np.ndarray]]:
    import cv2

    while capture.grab():

        def to_rgb() -> np.ndarray:
            ok, bgr = capture.retrieve()
            if not ok:
                raise _BackendFailure("undecodable", "retrieve failed")
            return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)

        yield to_rgb


def _decode_opencv(path: Path, probe: _Probe, wanted: list[int]) -> np.ndarray:
    capture = _open_capture(path, probe)
    try:
        return _sequential(probe.info, wanted, _opencv_thunks(capture))
    finally:
        capture.release()


def _stream_opencv(path: Path, probe: _Probe) -> Iterator[np.ndarray]:
    capture = _open_capture(path, probe)
    try:
        yield from _streamed(probe.info, _opencv_thunks(capture))
    finally:
        capture.release()


_DECORD_BATCH = 16


def _stream_decord(path: Path, probe: _Probe) -> Iterator[np.ndarray]:
    reader, info = _decord_reader(path, probe), probe.info
    for start in range(0, info.n_frames, _DECORD_BATCH):
        yield from _decord_batch(reader, info, list(range(start, min(info.n_frames, start + _DECORD_BATCH))))


_DECODERS: dict[str, Callable[[Path, _Probe, list[int]], np.ndarray]] = {
    "decord": _decode_decord,
    "pyav": _decode_pyav,
    "opencv": _decode_opencv,
}
_STREAMS: dict[str, Callable[[Path, _Probe], Iterator[np.ndarray]]] = {
    "decord": _stream_decord,
    "pyav": _stream_pyav,
    "opencv": _stream_opencv,
}


def _wanted_indices(
    path: Path, n_frames: int, indices: Sequence[int] | None, max_frames: int | None
) -> list[int]:
    if indices is None:
        if max_frames is not None and max_frames < 0:
            raise ValueError(f"read_video: max_frames must be >= 0, got {max_frames}")
        count = n_frames if max_frames is None else min(n_frames, max_frames)
        return list(range(count))
    if max_frames is not None:
        raise ValueError("read_video: pass either indices or max_frames, not both")
    chosen = [int(i) for i in indices]
    bad = [i for i in chosen if not 0 <= i < n_frames]
    if bad:
        raise VideoError(path, f"frame index {bad[0]} out of range (video has {counted(n_frames, 'frame')})")
    return chosen


def read_video(
    path: str | os.PathLike[str],
    indices: Sequence[int] | None = None,
    *,
    max_frames: int | None = None,
    min_frames: int | None = None,
    backend: str,
    fd: int | None = None,
) -> DecodedVideo:
    """Decode the frames at ``indices`` (default: all, or the first ``max_frames``) as RGB uint8 with ``backend``.

    Only the requested frames are converted and kept. Raises VideoError (one line naming the file)
    for missing, empty, truncated or undecodable files, out-of-range indices, and files with fewer
    than ``min_frames`` frames; DecoderUnavailable when the backend is not installed. ``fd``: as ``video_info``'s;
    without it the file is opened once, and what is checked is what every backend decodes.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown video backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    path = Path(path)
    with opened_video(path, fd) as fd:
        probe = _probe(path, fd=fd)
        info = probe.info
        if min_frames is not None and info.n_frames < min_frames:
            raise VideoError(path, f"too few frames: {info.n_frames} < {min_frames}")
        wanted = _wanted_indices(path, info.n_frames, indices, max_frames)
        unique = sorted(set(wanted))
        try:
            decoded = _DECODERS[backend](_fd_path(fd), probe, unique)
        except _BackendFailure as failure:
            raise VideoError(path, f"{failure.kind}: {backend}: {failure.message[:200]}") from None
    if wanted != unique:
        decoded = decoded[np.searchsorted(unique, wanted)]
    frames = np.ascontiguousarray(decoded, dtype=np.uint8)
    return DecodedVideo(frames=frames, info=info, backend=backend, indices=wanted)


def iter_frames(path: str | os.PathLike[str], *, backend: str, fd: int | None = None) -> Iterator[np.ndarray]:
    """Every frame of a video in order, as RGB uint8 (H, W, 3), decoded with ``backend`` one at a time.

    Why: ``read_video`` of a whole 379-frame 1376x768 rollout holds 1.2 GB; a caller that needs each
    frame once (a thumbnail of every frame) holds one. The same checks and errors as ``read_video``: a
    missing, cut or undecodable file is a VideoError at the call, a stream that ends before the frame
    count is a ``truncated`` VideoError while iterating. ``fd``: as ``video_info``'s (held open by its owner while the
    frames are read); without it the file is opened once, here, and closed when the frames end or the iterator is
    closed or dropped.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown video backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    frames = _checked_frames(Path(path), backend, fd)
    next(frames)  # opened and checked now, at the call
    return cast(Iterator[np.ndarray], frames)


READ_AHEAD_FRAMES = 8


def read_ahead(frames: Iterable[T], depth: int = READ_AHEAD_FRAMES) -> Iterator[T]:
    """The items of ``frames`` (a decoder's), produced by a reader thread up to ``depth`` ahead of the consumer.

    Why: OpenCV and PyAV decode without holding the GIL, so a metric computed frame by frame (TempSSIM, the blur
    SSIM) runs while the next frames decode; on two free cores decode and compute then cost about the larger of the
    two instead of their sum. The reader's exception (a truncated file's VideoError) is raised here, at the item
    where it happened; a consumer that stops early stops the reader and closes the decoder.
    """
    if depth < 1:
        raise ValueError(f"read-ahead depth must be >= 1, got {depth}")
    queue: Queue[tuple[str, Any]] = Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                queue.put(item, timeout=0.1)
                return True
            except Full:
                continue
        return False

    def reader() -> None:
        iterator = iter(frames)
        try:
            for frame in iterator:
                if not put(("frame", frame)):
                    return
            put(("end", None))
        except BaseException as exc:  # handed to the consumer, raised there
            put(("error", exc))
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=reader, name="pinbench-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = queue.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()
        thread.join()


def _checked_frames(path: Path, backend: str, fd: int | None) -> Iterator[np.ndarray | None]:
    """None once the file is open and checked, then its frames: the descriptor stays open while they are read."""
    with opened_video(path, fd) as fd:
        probe = _probe(path, fd=fd)
        if backend == "decord":
            require_backend(backend)
        yield None
        try:
            yield from _STREAMS[backend](_fd_path(fd), probe)
        except _BackendFailure as failure:
            raise VideoError(path, f"{failure.kind}: {backend}: {failure.message[:200]}") from None


def is_valid_video(path: str | os.PathLike[str], min_frames: int) -> bool:
    """True when the file decodes completely (PyAV, every frame) and has at least ``min_frames``.

    Why a full decode: resume-by-validity must not keep a file whose tail is corrupt. Frames are
    decoded but not colour-converted, so this costs about one decode pass. The file is opened once: what is
    checked is what is decoded (a FIFO is not valid, and never waited on).
    """
    path = Path(path)
    try:
        with opened_video(path) as fd:
            info = video_info(path, fd=fd)
            if info.n_frames < min_frames:
                return False
            decoded = 0
            with open_video(path, fd) as container:
                stream = video_stream(path, container)
                stream.thread_type = "AUTO"
                for _ in container.decode(stream):
                    decoded += 1
    except (VideoError, av.error.FFmpegError):
        return False
    return decoded == info.n_frames


def _frame_rate(path: Path, fps: float | Fraction) -> Fraction:
    if not math.isfinite(float(fps)) or fps <= 0:
        raise ValueError(f"{path}: fps must be a positive finite number, got {fps!r}")
    return fps if isinstance(fps, Fraction) else Fraction(float(fps)).limit_denominator(1001)


def _check_frame(path: Path, index: int, frame: np.ndarray, size: tuple[int, int] | None) -> None:
    if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
        raise ValueError(
            f"{path}: frame {index} must be uint8 (H, W, 3) RGB, got {frame.dtype} {frame.shape}"
        )
    if size is not None and frame.shape[:2] != size:
        raise ValueError(f"{path}: frame {index} is {frame.shape[:2]}, first frame was {size}")


def write_video(
    path: str | os.PathLike[str],
    frames: np.ndarray | Iterable[np.ndarray],
    fps: float | Fraction,
    *,
    crf: int = 18,
    codec: str = "libx264",
    pix_fmt: str = "yuv420p",
) -> Path:
    """Encode RGB uint8 frames with PyAV, atomically: a temp file in the same folder, then rename.

    ``frames`` is a (T, H, W, 3) array or an iterable of (H, W, 3) arrays. ``fps`` may be fractional
    (29.97 -> 2997/100, 30000/1001 -> 30000/1001) or a Fraction. ``crf`` applies to libx264/libx265;
    ``crf=0`` with libx264 is lossless (QP 0): a decoder returns exactly the YUV planes the encoder was given.
    libx264 runs without its macroblock tree, whose bytes depended on more than the frames (``_CODEC_OPTIONS``).
    yuv420p-style formats need even width and height: an odd size raises ValueError naming the path.
    Nothing is left behind on error, and an existing file at ``path`` is only replaced on success.
    """
    path = Path(path)
    rate = _frame_rate(path, fps)
    with atomic_path(path, suffix=path.suffix) as tmp:
        _encode(path, tmp, frames, rate, crf=crf, codec=codec, pix_fmt=pix_fmt)
    return path


def _encode(
    path: Path,
    tmp: Path,
    frames: np.ndarray | Iterable[np.ndarray],
    rate: Fraction,
    *,
    crf: int,
    codec: str,
    pix_fmt: str,
) -> None:
    with av.open(str(tmp), mode="w") as container:
        stream = None
        size: tuple[int, int] | None = None
        for index, frame in enumerate(frames):
            frame = np.asarray(frame)
            _check_frame(path, index, frame, size)
            if stream is None:
                size = frame.shape[:2]
                height, width = size
                if pix_fmt in _EVEN_SIZE_PIX_FMTS and (width % 2 or height % 2):
                    raise ValueError(
                        f"{path}: frame size {width}x{height} is odd; {pix_fmt} needs even W and H"
                    )
                stream = container.add_stream(codec, rate=rate)
                stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
                # One thread, for the encoder and (PyAV passes this count on) the RGB->YUV conversion before
                # it: with automatic threading libx264 was seen to write different bytes for the same frames,
                # which breaks byte-for-byte fixtures and caches. Single-threaded, tools/encode_determinism.py
                # measured every fixture video (dynamic-degree, RememBench, PAI-Bench-C, MIND; CameraBench's
                # fixture has none) at 100 identical encodes of 100 in 10 fresh processes. The libx264
                # fixtures also encode losslessly (crf 0), so their decoded pixels cannot depend on the
                # encoder's choices; PAI-Bench-C's writes MPEG-4 Part 2.
                stream.codec_context.thread_count = 1
                if codec in _CRF_CODECS:
                    stream.options = {"crf": str(int(crf)), "threads": "1", **_CODEC_OPTIONS.get(codec, {})}
            video_frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")
            video_frame.pts = index
            container.mux(stream.encode(video_frame))
        if stream is None:
            raise ValueError(f"{path}: no frames to write")
        container.mux(stream.encode(None))
