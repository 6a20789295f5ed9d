"""Tests for pinbench.media.video: probing, decoding per backend, one-line errors, atomic writing."""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import importlib.util
import os
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
from fifo_swap import check_then_swap, swap_in_fifo, within

from pinbench.media import preview, video
from pinbench.media.video import (
    BACKENDS,
    DecoderUnavailable,
    VideoError,
    VideoInfo,
    is_valid_video,
    iter_frames,
    misnamed,
    read_video,
    require_backend,
    video_info,
    write_video,
)

# PyAV 17 and later: a stream's index (``make test-old-av`` runs this file under the older PyAV the recipe locks pin)
PYAV_17 = hasattr(av.video.stream.VideoStream, "index_entries")
needs_pyav_17 = pytest.mark.skipif(not PYAV_17, reason="writes its file with PyAV 17's API")


def needs(*backends: str) -> pytest.MarkDecorator:
    """Skip, saying why, where a backend's module does not import: CameraBench's and MIND's images have no OpenCV or
    no decord, and this file's tests of those backends failed there rather than skipped."""
    missing = []
    for backend in backends:
        try:
            require_backend(backend)
        except DecoderUnavailable as err:
            missing.append(str(err))
    return pytest.mark.skipif(bool(missing), reason="; ".join(missing))


@pytest.mark.parametrize("hidden", ["cv2", "decord", "torch"])
def test_the_video_tests_skip_where_opencv_decord_or_torch_does_not_import(hidden: str) -> None:
    """CameraBench's image has no OpenCV, MIND's no decord and no torch: there test_ssim.py and test_bench_kernels.py
    stopped in a collection error (``import cv2``, ``pinbench.media.ssim_torch`` at their top) rather than skipped
    (mounts86). Collected in a process where the module does not import, every file is collected or skipped, none an
    error; without torch, test_ssim.py's torch tests skip, saying why."""
    files = ["tests/test_video.py", "tests/test_ssim.py", "tests/test_bench_kernels.py"]
    code = (f"import sys; sys.modules[{hidden!r}] = None; import pytest; "
            f"sys.exit(pytest.main(['-q', '--collect-only', '-p', 'no:randomly', '-p', 'no:cacheprovider', *{files}]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[1], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and " error" not in done.stdout, done.stdout[-3000:]
    if hidden == "torch":
        code = ("import sys; sys.modules['torch'] = None; import pytest; sys.exit(pytest.main(['-q', '-rs', '-k', "
                "'torch', '-p', 'no:randomly', '-p', 'no:cacheprovider', 'tests/test_ssim.py']))")
        done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[1], capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0 and " passed" not in done.stdout, done.stdout[-3000:]
        assert "needs torch, not installed here" in done.stdout and " skipped" in done.stdout, done.stdout[-3000:]


def each(*backends: str) -> list[Any]:
    """``backends`` (every one when none) as parameters, each skipped where it does not import (``needs``)."""
    return [pytest.param(backend, marks=needs(backend)) for backend in backends or BACKENDS]


@pytest.fixture(params=["index", "demux"])
def mp4_index(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """An MP4's samples judged by PyAV 17's index, and by demuxing them as with an older PyAV (MIND's image keeps
    upstream's 16.1, CameraBench's lock 14.2, which have no ``av.index``: pinbench failed to import there): the same
    outcome either way."""
    if request.param == "index" and not PYAV_17:
        pytest.skip("PyAV before 17 has no index")
    monkeypatch.setattr(video, "_INDEXED", request.param == "index")


def _truncate(src: Path, dest: Path, fraction: float) -> Path:
    data = src.read_bytes()
    dest.write_bytes(data[: int(len(data) * fraction)])
    return dest


def _write_faststart_mp4(path: Path, frames: np.ndarray, fps: int, **options: str) -> Path:
    """An MP4 with 'moov' before 'mdat' (as web tools write), so a cut file still opens; ``options``, x264's."""
    with av.open(str(path), "w", options={"movflags": "faststart"}) as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        stream.options = {"crf": "18", "g": "8", **options}
        for i, frame in enumerate(frames):
            vf = av.VideoFrame.from_ndarray(frame, format="rgb24")
            vf.pts = i
            container.mux(stream.encode(vf))
        container.mux(stream.encode(None))
    return path


def _assert_one_line_error(err: VideoError, path: Path, reason_prefix: str) -> None:
    text = str(err)
    assert "\n" not in text
    assert text.startswith(f"{path}: ")
    assert err.path == path
    assert err.reason.startswith(reason_prefix), text


# ---------------------------------------------------------------- video_info


def test_probe_reports_what_was_written(make_video):
    path = make_video(n_frames=30, fps=8.0)
    info = video_info(path)
    assert info == VideoInfo(path, 30, 8.0, 64, 48, "h264", 3.75, "mov,mp4,m4a,3gp,3g2,mj2")


@pytest.mark.parametrize(
    ("fps", "expected"),
    [(29.97, 29.97), (30000 / 1001, 30000 / 1001), (Fraction(30000, 1001), 30000 / 1001), (12.5, 12.5)],
)
def test_probe_fractional_fps(make_video, fps, expected):
    info = video_info(make_video(n_frames=12, fps=fps))
    assert info.fps == pytest.approx(expected, abs=1e-9)
    assert info.n_frames == 12
    assert info.duration_s == pytest.approx(12 / expected, abs=1e-3)


def test_probe_counts_packets_for_containers_without_a_count(make_video):
    path = make_video("clip.mkv", n_frames=20)
    with av.open(str(path)) as container:
        assert container.streams.video[0].frames == 0  # Matroska stores no count: it must be counted
    assert video_info(path).n_frames == 20
    assert len(read_video(path, backend="pyav").frames) == 20


# ---------------------------------------------------------------- decoding


@pytest.mark.parametrize("backend", each())
def test_read_all_frames_matches_source(make_video, synthetic_frames, backend):
    path = make_video(n_frames=30)
    decoded = read_video(path, backend=backend)
    source = synthetic_frames(30)
    assert decoded.backend == backend
    assert decoded.frames.shape == (30, 48, 64, 3)
    assert decoded.frames.dtype == np.uint8
    assert decoded.frames.flags["C_CONTIGUOUS"]
    assert decoded.indices == list(range(30))
    assert decoded.fps == 8.0
    # crf 18 + 4:2:0 chroma: small mean error, and far from what a wrong frame order would give
    assert np.abs(decoded.frames.astype(int) - source).mean() < 8
    wrong_order = np.abs(decoded.frames[::-1].astype(int) - source).mean()
    assert wrong_order > 2 * np.abs(decoded.frames.astype(int) - source).mean()


@pytest.mark.parametrize("backend", each())
def test_selected_indices_equal_all_frames_at_those_indices(make_video, backend):
    path = make_video(n_frames=30)
    everything = read_video(path, backend=backend).frames
    indices = [29, 0, 7, 7, 15, 28]
    selected = read_video(path, indices, backend=backend)
    assert selected.indices == indices
    assert selected.frames.flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(selected.frames, everything[indices])


@pytest.mark.parametrize("backend", each())
def test_iterated_frames_equal_read_video(make_video, backend):
    path = make_video(n_frames=30)
    frames = iter_frames(path, backend=backend)
    first = next(frames)
    assert first.shape == (48, 64, 3) and first.dtype == np.uint8
    np.testing.assert_array_equal(np.stack([first, *frames]), read_video(path, backend=backend).frames)


def test_iter_frames_checks_the_file_and_backend_at_the_call(make_video, tmp_path):
    with pytest.raises(VideoError, match="file not found"):
        iter_frames(tmp_path / "absent.mp4", backend="pyav")
    with pytest.raises(ValueError, match="unknown video backend"):
        iter_frames(make_video(), backend="ffmpeg")


@needs("opencv")
def test_read_ahead_yields_the_frames_in_order_and_raises_where_the_stream_broke(make_video):
    """The reader thread's frames are the decoder's, in order; a stream that ends short raises at that frame."""
    path = make_video(n_frames=10)
    np.testing.assert_array_equal(np.stack(list(video.read_ahead(iter_frames(path, backend="opencv"), depth=2))),
                                  read_video(path, backend="opencv").frames)
    info = video_info(path)
    overstated = video._Probe(dataclasses.replace(info, n_frames=14), 0)
    seen = 0
    with pytest.raises(video._BackendFailure) as failure:
        for _ in video.read_ahead(video._STREAMS["opencv"](path, overstated), depth=3):
            seen += 1
    assert failure.value.kind == "truncated" and seen == 10
    with pytest.raises(ValueError, match="depth must be >= 1"):
        next(video.read_ahead([], depth=0))


def test_a_consumer_that_stops_early_stops_the_reader_and_closes_the_decoder():
    import threading

    produced, closed = [], threading.Event()

    def frames():
        try:
            for i in range(1000):
                produced.append(i)
                yield i
        finally:
            closed.set()

    decoder = frames()   # held here, so only an explicit close can end it
    stream = video.read_ahead(decoder, depth=2)
    assert [next(stream) for _ in range(3)] == [0, 1, 2]
    stream.close()
    assert closed.is_set() and len(produced) <= 3 + 2 + 1   # taken, queued, one in the reader's hand
    assert not any(t.name == "pinbench-read-ahead" for t in threading.enumerate())


@pytest.mark.parametrize("name", each("decord", "pyav", "opencv"))
def test_every_backend_stream_reports_a_short_stream_as_truncated(make_video, name):
    """Streaming never ends quietly short: the frame the container promised and the stream lacks is an error."""
    path = make_video(n_frames=10)
    info = video_info(path)
    overstated = video._Probe(dataclasses.replace(info, n_frames=14), 0)
    stream = video._STREAMS[name](path, overstated)
    with pytest.raises(video._BackendFailure) as failure:
        for _ in stream:
            pass
    assert failure.value.kind == "truncated"


def test_max_frames_returns_leading_frames(make_video):
    path = make_video(n_frames=20)
    head = read_video(path, max_frames=5, backend="pyav")
    assert head.indices == [0, 1, 2, 3, 4]
    np.testing.assert_array_equal(head.frames, read_video(path, backend="pyav").frames[:5])
    assert len(read_video(path, max_frames=50, backend="pyav").frames) == 20
    with pytest.raises(ValueError, match="either indices or max_frames"):
        read_video(path, [0], max_frames=1, backend="pyav")


def test_empty_index_list_gives_empty_array(make_video):
    decoded = read_video(make_video(), [], backend="pyav")
    assert decoded.frames.shape == (0, 48, 64, 3)


@needs(*BACKENDS)
def test_backends_agree_and_are_deterministic(make_video):
    path = make_video("clip.mp4", n_frames=24, fps=Fraction(30000, 1001))
    results = {name: read_video(path, backend=name) for name in BACKENDS}
    reference = results["pyav"].frames.astype(np.int16)
    for name, result in results.items():
        assert result.frames.shape == reference.shape, name
        assert result.fps == pytest.approx(30000 / 1001)
        assert np.abs(result.frames.astype(np.int16) - reference).mean() < 0.5, name
        np.testing.assert_array_equal(read_video(path, backend=name).frames, result.frames)


def test_a_missing_backend_is_named_never_replaced(make_video, monkeypatch):
    path = make_video()
    monkeypatch.setitem(sys.modules, "decord", None)  # test double: decord import fails (as on aarch64)
    with pytest.raises(DecoderUnavailable) as err:
        read_video(path, backend="decord")
    assert "-o decoder=" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(DecoderUnavailable):
        require_backend("decord")
    require_backend("pyav")  # the others are still there, but nothing switched to them silently


def test_unknown_backend_is_a_programming_error(make_video):
    with pytest.raises(ValueError, match="unknown video backend"):
        read_video(make_video(), backend="ffmpeg")


@pytest.mark.parametrize("name", each("decord", "pyav", "opencv"))
def test_every_backend_reports_a_short_stream_as_truncated(make_video, name):
    """The container promised more frames than the stream holds: no silent short read."""
    path = make_video(n_frames=10)
    info = video_info(path)
    overstated = video._Probe(dataclasses.replace(info, n_frames=14), 0)
    with pytest.raises(video._BackendFailure) as failure:
        video._DECODERS[name](path, overstated, [0, 12])
    assert failure.value.kind == "truncated"


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("backend", each())
def test_out_of_range_index_names_the_file(make_video, backend):
    path = make_video(n_frames=10)
    for bad in (10, -1):
        with pytest.raises(VideoError) as err:
            read_video(path, [0, bad], backend=backend)
        _assert_one_line_error(err.value, path, f"frame index {bad} out of range (video has 10 frames)")
    one = make_video(name="one.mp4", n_frames=1)   # read "video has 1 frames"
    with pytest.raises(VideoError) as err:
        read_video(one, [1], backend=backend)
    _assert_one_line_error(err.value, one, "frame index 1 out of range (video has 1 frame)")


def test_missing_file(tmp_path):
    path = tmp_path / "absent.mp4"
    for call in (video_info, functools.partial(read_video, backend="pyav")):
        with pytest.raises(VideoError) as err:
            call(path)
        _assert_one_line_error(err.value, path, "file not found")


def test_zero_byte_file(tmp_path):
    path = tmp_path / "empty.mp4"
    path.touch()
    with pytest.raises(VideoError) as err:
        read_video(path, backend="pyav")
    _assert_one_line_error(err.value, path, "empty file (0 bytes)")


def test_garbage_bytes(tmp_path):
    path = tmp_path / "garbage.mp4"
    path.write_bytes(np.random.default_rng(3).bytes(4096))
    with pytest.raises(VideoError) as err:
        read_video(path, backend="pyav")
    _assert_one_line_error(err.value, path, "undecodable: ")


def _readers(path: Path) -> dict[str, Any]:
    """Every reader of a video, each called on ``path``: its facts, each backend's frames, the validity check."""
    return {"video_info": lambda: video_info(path), "preview.probe": lambda: preview.probe(path),
            **{backend: functools.partial(read_video, path, backend=backend) for backend in BACKENDS}}


def _pictures(fmt: str, n: int) -> bytes:
    """``n`` pictures of format ``fmt``: one after another, or for ``WEBP-animated``, ``GIF-animated`` and
    ``PNG-animated`` one animated WebP, GIF or PNG (an APNG)."""
    import io

    from PIL import Image

    pictures = [Image.fromarray(np.full((16, 16, 3), 20 * i, np.uint8)) for i in range(n)]
    if fmt.endswith("-animated"):
        out = io.BytesIO()
        pictures[0].save(out, format=fmt.removesuffix("-animated"), save_all=True, append_images=pictures[1:],
                         duration=100)
        return out.getvalue()
    parts = []
    for picture in pictures:
        out = io.BytesIO()
        picture.save(out, format=fmt)
        parts.append(out.getvalue())
    return b"".join(parts)


@pytest.mark.parametrize("fmt, n, named", [
    ("PNG", 1, "a picture format (png)"), ("JPEG", 1, "a picture format (jpeg)"),
    ("PNG", 10, "a picture format (png: 10 pictures one after another)"),   # PyAV decoded its 10 frames
    ("WEBP-animated", 10, "a picture format (webp)"),                        # one packet this FFmpeg cannot decode
    ("GIF-animated", 5, "a GIF picture (an animation of 5 pictures)"),   # FFmpeg's GIF demuxer: a 5-frame 10 fps video
    ("GIF", 1, "a GIF picture"),
    ("PNG-animated", 5, "an APNG picture (an animation of 5 pictures)"),   # FFmpeg's APNG demuxer: read as a video
])
def test_a_picture_named_mp4_is_refused_as_a_picture_format_by_every_reader(tmp_path, fmt, n, named):
    """A PNG saved as ``x.mp4``: FFmpeg's image demuxer read it as a 1-frame 25 fps video (pyav and OpenCV scored
    it, decord said "broken metadata"); every reader now says what it is. "An image" was untrue of PNGs one after
    another and of an animated WebP, which the same demuxers read: a picture format, with its count of pictures. An
    animated GIF (or APNG) named ``.mp4`` was read by FFmpeg's GIF (APNG) demuxer as a video: a GIF (an APNG)
    picture, an animation."""
    path = tmp_path / "x.mp4"
    path.write_bytes(_pictures(fmt, n))
    for reader, read in _readers(path).items():
        with pytest.raises(VideoError) as err:
            read()
        assert str(err.value) == f"{path}: undecodable: {named}, not a video container", reader
    assert not is_valid_video(path, 1)


# each container PyAV writes for a name, with a codec it takes; the FFmpeg demuxer that reads it; what the name names
_CONTAINERS = {".mp4": "libx264", ".mov": "libx264", ".mkv": "libx264", ".webm": "libvpx-vp9", ".avi": "mpeg4"}
_DEMUXER = {".mp4": "mov", ".mov": "mov", ".mkv": "matroska", ".webm": "matroska", ".avi": "avi"}
_NAMES = {".mp4": "mp4", ".mov": "mov", ".mkv": "matroska", ".webm": "webm", ".avi": "avi"}


def test_a_video_whose_container_is_not_what_its_extension_names_is_said_so(synthetic_frames, tmp_path: Path) -> None:
    """An input's extension that names another container (a Matroska file named ``.mp4``, an MP4 named ``.avi``)
    is said in one line naming the file, its extension and the container found, for a recipe to refuse; every
    container PyAV writes under its own name (MP4, MOV, MKV, WebM, AVI) passes, as does a name that names none."""
    frames = synthetic_frames(4)
    for suffix, codec in _CONTAINERS.items():
        path = write_video(tmp_path / f"v{suffix}", frames, 8, codec=codec)
        found = video_info(path).container
        for other in _CONTAINERS:
            renamed = path.with_name(f"{path.stem}-{suffix[1:]}{other}")
            os.link(path, renamed)
            expected = None if _DEMUXER[other] == _DEMUXER[suffix] else (
                f"{'an' if suffix == '.avi' else 'a'} {found} container under the extension {other} (which names "
                f"{_NAMES[other]}): rename it to its format's extension")
            assert misnamed(video_info(renamed)) == expected, (suffix, other)
        raw = path.with_name(f"{path.stem}-{suffix[1:]}.bin")
        os.link(path, raw)
        assert misnamed(video_info(raw)) is None, suffix


@pytest.mark.parametrize("text, shown", [
    ("<html>\n<head><title>403 Forbidden</title></head>\n<body>403 Forbidden</body></html>\n",
     "'<html> <head><title>403 Forbidden</title></head> <body>403 F...'"),
    ("Access denied\n", "'Access denied'"),
    ("x" * 255 + "é and more", "'" + "x" * 60 + "...'"),   # its é cut at byte 256: still text
])
def test_a_text_file_named_mp4_says_it_starts_with_text(tmp_path, text, shown):
    """A failed download that saved its error page as ``x.mp4`` was "Invalid data found when processing input"."""
    path = tmp_path / "x.mp4"
    path.write_text(text)
    for reader, read in _readers(path).items():
        with pytest.raises(VideoError) as err:
            read()
        assert str(err.value) == f"{path}: undecodable: not a video (it starts with text: {shown})", reader


@pytest.mark.parametrize("head", [
    b"GARBAGE \xb1\xb2 abc " + bytes(range(0x80, 0x90)) + b" more" * 40,   # printable ASCII and bytes >= 0x80
    b"Access denied \xc3",                                                # a character cut before the file ends
])
def test_a_binary_head_that_is_no_utf8_is_not_called_text(tmp_path, head):
    """Bytes >= 0x80 that are no UTF-8 were dropped before the head was judged, so a binary head of printable ASCII
    and such bytes was said to "start with text"."""
    path = tmp_path / "x.mp4"
    path.write_bytes(head)
    with pytest.raises(VideoError) as err:
        video_info(path)
    _assert_one_line_error(err.value, path, "undecodable: ")
    assert "text" not in str(err.value)


@pytest.mark.usefixtures("mp4_index")
@pytest.mark.parametrize("backend", each())
@pytest.mark.parametrize("fraction", [0.6, 0.9])
def test_truncated_mp4_moov_at_end(make_video, tmp_path, backend, fraction):
    full = make_video(n_frames=30)
    cut = _truncate(full, tmp_path / "cut.mp4", fraction)
    with pytest.raises(VideoError) as err:
        read_video(cut, min_frames=10, backend=backend)
    _assert_one_line_error(err.value, cut, "truncated: ")


@pytest.mark.usefixtures("mp4_index")
@pytest.mark.parametrize("backend", each())
def test_truncated_mp4_moov_first(synthetic_frames, tmp_path, backend):
    full = _write_faststart_mp4(tmp_path / "fast.mp4", synthetic_frames(30), 8)
    cut = _truncate(full, tmp_path / "cut.mp4", 0.6)
    with pytest.raises(VideoError) as err:
        read_video(cut, [0], backend=backend)
    _assert_one_line_error(err.value, cut, "truncated: ")


@pytest.mark.parametrize("backend", each())
@pytest.mark.parametrize("fraction", [0.6, 0.9])
def test_truncated_matroska(make_video, tmp_path, backend, fraction):
    """Every backend silently decodes a cut .mkv short; the declared duration exposes it."""
    full = make_video("clip.mkv", n_frames=30)
    cut = _truncate(full, tmp_path / "cut.mkv", fraction)
    with pytest.raises(VideoError) as err:
        read_video(cut, backend=backend)
    _assert_one_line_error(err.value, cut, "truncated: ")


def test_too_few_frames(make_video):
    path = make_video(n_frames=10)
    assert len(read_video(path, min_frames=10, backend="pyav").frames) == 10
    with pytest.raises(VideoError) as err:
        read_video(path, min_frames=11, backend="pyav")
    _assert_one_line_error(err.value, path, "too few frames: 10 < 11")


def test_video_error_is_one_line_and_copyable(tmp_path):
    """deepcopy goes through the same reduce path as pickling across worker processes."""
    err = copy.deepcopy(VideoError(tmp_path / "a.mp4", "truncated: x\ny"))
    assert str(err) == f"{tmp_path / 'a.mp4'}: truncated: x y"


# ---------------------------------------------------------------- is_valid_video


def test_is_valid_video(make_video, tmp_path):
    path = make_video(n_frames=12)
    assert is_valid_video(path, 12)
    assert not is_valid_video(path, 13)
    assert not is_valid_video(_truncate(path, tmp_path / "cut.mp4", 0.9), 1)
    assert not is_valid_video(tmp_path / "absent.mp4", 1)
    (tmp_path / "empty.mp4").touch()
    assert not is_valid_video(tmp_path / "empty.mp4", 1)


# ---------------------------------------------------------------- one open: what is checked is what is read


@pytest.mark.parametrize("kind", ["fifo", "folder", "link to a fifo", "dangling link"])
def test_what_is_no_video_file_is_refused_in_one_line_never_waited_on(tmp_path: Path, kind: str) -> None:
    path, fifo = tmp_path / "v.mp4", tmp_path / "fifo"
    os.mkfifo(fifo)
    {"fifo": lambda: os.mkfifo(path), "folder": path.mkdir, "link to a fifo": lambda: path.symlink_to(fifo),
     "dangling link": lambda: path.symlink_to(tmp_path / "absent.mp4")}[kind]()
    reason = {"fifo": "a FIFO (named pipe), not a regular file", "folder": "is a directory, not a file",
              "link to a fifo": "a FIFO (named pipe), not a regular file",
              "dangling link": "a dangling symlink (to "}[kind]
    for call in (lambda: video_info(path), lambda: read_video(path, backend="pyav"),
                 lambda: iter_frames(path, backend="opencv")):
        with pytest.raises(VideoError) as err:
            within(10, path if kind == "fifo" else fifo, call)
        _assert_one_line_error(err.value, path, reason)
    assert within(10, path if kind == "fifo" else fifo, lambda: is_valid_video(path, 1)) is False


_READERS = {
    "read_video": lambda path, backend: read_video(path, backend=backend).frames,
    "iter_frames": lambda path, backend: np.stack(list(iter_frames(path, backend=backend))),
}


@pytest.mark.parametrize("backend", each())
@pytest.mark.parametrize("reader", sorted(_READERS))
def test_a_fifo_swapped_in_after_the_check_is_never_read_the_checked_file_is(make_video, monkeypatch, reader: str,
                                                                               backend: str) -> None:
    """read_video and iter_frames checked the path (video_info) and then decoded it by its name again: a FIFO put
    there in between held them for ever. They decode the descriptor the check was made on."""
    path = make_video(n_frames=10)
    want = read_video(path, backend=backend).frames
    monkeypatch.setattr(video, "_probe", check_then_swap(video._probe, path))
    np.testing.assert_array_equal(within(10, path, lambda: _READERS[reader](path, backend)), want)


def test_is_valid_video_decodes_the_file_it_checked(make_video, monkeypatch) -> None:
    path = make_video(n_frames=10)
    monkeypatch.setattr(video, "video_info", check_then_swap(video.video_info, path))
    assert within(10, path, lambda: is_valid_video(path, 10)) is True


def test_video_info_reads_the_file_it_opened(make_video, monkeypatch) -> None:
    """video_info checked the path (exists, regular) and then opened it twice by its name: a FIFO put there in
    between held it for ever."""
    path = make_video(n_frames=10)
    want = video_info(path)
    structure = video._check_bmff_structure

    def swap_then_walk(*args):  # the first read after the check
        swap_in_fifo(path)
        return structure(*args)

    monkeypatch.setattr(video, "_check_bmff_structure", swap_then_walk)
    assert within(10, path, lambda: video_info(path)) == want


# ---------------------------------------------------------------- write_video


def test_write_accepts_iterables_and_leaves_no_temp_files(tmp_path, synthetic_frames):
    frames = synthetic_frames(6)
    path = write_video(tmp_path / "sub" / "gen.mp4", (f for f in frames), Fraction(24000, 1001))
    assert sorted(os.listdir(path.parent)) == ["gen.mp4"]
    info = video_info(path)
    assert (info.n_frames, info.fps) == (6, pytest.approx(24000 / 1001))


def test_write_failure_keeps_old_file_and_leaves_nothing(tmp_path, synthetic_frames):
    path = write_video(tmp_path / "out.mp4", synthetic_frames(4), 8)
    before = path.read_bytes()

    def frames_then_crash():
        yield from synthetic_frames(3)
        raise RuntimeError("generator died")

    with pytest.raises(RuntimeError, match="generator died"):
        write_video(path, frames_then_crash(), 8)
    assert os.listdir(tmp_path) == ["out.mp4"]
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("frames", "fps", "message"),
    [
        (np.zeros((3, 47, 64, 3), np.uint8), 8, "frame size 64x47 is odd"),
        (np.zeros((3, 48, 63, 3), np.uint8), 8, "frame size 63x48 is odd"),
        (np.zeros((3, 48, 64, 3), np.float32), 8, "frame 0 must be uint8"),
        (np.zeros((3, 48, 64), np.uint8), 8, "frame 0 must be uint8"),
        ([np.zeros((48, 64, 3), np.uint8), np.zeros((32, 64, 3), np.uint8)], 8, "frame 1 is"),
        (np.zeros((0, 48, 64, 3), np.uint8), 8, "no frames to write"),
        (np.zeros((3, 48, 64, 3), np.uint8), 0, "fps must be a positive finite number"),
        (np.zeros((3, 48, 64, 3), np.uint8), float("nan"), "fps must be a positive finite number"),
    ],
)
def test_write_rejects_bad_input_naming_the_path(tmp_path, frames, fps, message):
    path = tmp_path / "bad.mp4"
    with pytest.raises(ValueError, match=message) as err:
        write_video(path, frames, fps)
    assert str(err.value).startswith(f"{path}: ")
    assert os.listdir(tmp_path) == []


def test_write_then_read_roundtrip_other_pix_fmt(tmp_path, synthetic_frames):
    frames = synthetic_frames(5, height=48, width=64)
    path = write_video(tmp_path / "hq.mkv", frames, 10, crf=0, pix_fmt="yuv444p")
    decoded = read_video(path, backend="pyav").frames
    assert np.abs(decoded.astype(int) - frames).mean() < 2.5


@needs_pyav_17
def test_crf_0_is_lossless_the_decoder_gets_the_encoders_yuv_planes_back(tmp_path: Path) -> None:
    """What the fixtures rely on: their decoded pixels cannot move with the encoder's decisions."""
    frames = np.random.default_rng(5).integers(0, 256, size=(6, 52, 68, 3), dtype=np.uint8)

    def planes(frame: av.VideoFrame) -> list[np.ndarray]:
        return [np.frombuffer(p, np.uint8).reshape(p.height, p.line_size)[:, :p.width].copy() for p in frame.planes]

    given = [planes(av.VideoFrame.from_ndarray(f, format="rgb24").reformat(format="yuv420p", threads=1))
             for f in frames]
    path = write_video(tmp_path / "lossless.mp4", frames, 8, crf=0)
    with av.open(str(path)) as container:
        decoded = [planes(f) for f in container.decode(video=0)]
    assert len(decoded) == len(given)
    assert all(np.array_equal(a, b) for got, want in zip(decoded, given, strict=True)
               for a, b in zip(got, want, strict=True))


def test_write_video_is_byte_deterministic(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    frames = rng.integers(0, 256, size=(12, 96, 128, 3), dtype=np.uint8)
    digests = set()
    for i in range(6):
        out = write_video(tmp_path / f"v{i}.mp4", frames, fps=24)
        digests.add(hashlib.sha256(out.read_bytes()).hexdigest())
    assert len(digests) == 1


def _digest_in_fresh_process(code: str, perturb: int) -> str:
    """The last line ``code`` prints, run by a fresh Python whose new allocations glibc fills with ``perturb ^ 255``
    (MALLOC_PERTURB_): memory an encoder reads before writing it holds other bytes in each."""
    env = {**os.environ, "MALLOC_PERTURB_": str(perturb)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                          check=True)
    return done.stdout.split()[-1]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="MALLOC_PERTURB_ is glibc's")
def test_a_lossy_encode_does_not_depend_on_what_fresh_memory_held(tmp_path: Path, synthetic_frames) -> None:
    """With x264's macroblock tree on, these 60 CRF 18 frames gave two digests: its AVX-512 code (on a CPU that has
    it) read memory nothing had written. Red with ``mbtree`` left on, on such a CPU."""
    np.save(tmp_path / "frames.npy", synthetic_frames(60))
    code = ("import hashlib, numpy as np; from pinbench.media.video import write_video; "
            f"out = write_video({str(tmp_path / 'v.mp4')!r}, np.load({str(tmp_path / 'frames.npy')!r}), 16); "
            "print(hashlib.sha256(out.read_bytes()).hexdigest())")
    assert len({_digest_in_fresh_process(code, perturb) for perturb in (255, 85, 1)}) == 1


@pytest.mark.parametrize("name", each())
def test_a_backend_failure_names_the_backend_once(make_video, monkeypatch, name):
    """The error said "undecodable: pyav: pyav: decoding failed": the wrapper and the backend both named it."""
    path = make_video(n_frames=10)
    info = video_info(path)
    overstated = video._Probe(dataclasses.replace(info, n_frames=14), 0)
    monkeypatch.setattr(video, "_probe", lambda _path, fd: overstated)  # a double: the container promises 14
    with pytest.raises(VideoError) as err:
        read_video(path, [12], backend=name)
    assert err.value.reason.count(f"{name}:") == 1 and f"{name} " not in err.value.reason, err.value.reason


def test_a_pyav_decoding_error_is_one_line_naming_pyav_once(make_video, monkeypatch):
    path = make_video(n_frames=10)

    def broken(_path, _container):
        raise av.error.InvalidDataError(1094995529, "Invalid data found when processing input")

    monkeypatch.setattr(video, "_pyav_thunks", broken)  # test double: FFmpeg fails mid-decode
    with pytest.raises(VideoError) as err:
        read_video(path, backend="pyav")
    _assert_one_line_error(err.value, path, "undecodable: pyav: decoding failed: ")


def test_a_fragmented_mp4_counts_the_frames_of_every_fragment(synthetic_frames, tmp_path: Path) -> None:
    """With ``-movflags frag_keyframe`` (no empty_moov) the 'moov' indexes only the first fragment's samples: the
    count it declares (8 of 30 here, one keyframe interval) was taken as the video's length; each 'moof' holds more."""
    frames = synthetic_frames(30)
    path = tmp_path / "frag.mp4"
    with av.open(str(path), "w", options={"movflags": "frag_keyframe"}) as container:
        stream = container.add_stream("libx264", rate=8)
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        stream.options = {"g": "8"}
        for i, frame in enumerate(frames):
            vf = av.VideoFrame.from_ndarray(frame, format="rgb24")
            vf.pts = i
            container.mux(stream.encode(vf))
        container.mux(stream.encode(None))
    assert video_info(path).n_frames == 30
    assert len(read_video(path, backend="pyav").frames) == 30


def _fragmented_mp4(path: Path, frames: np.ndarray, *, audio: bool = False) -> bytes:
    """A fragmented MP4 as PyAV writes one with movflags=frag_keyframe (keyframes every 4: 'moov' holds the first 4
    samples, then a 'moof' and its 'mdat' each 4; an 'mfra' last), with a tone as AAC when ``audio``; its bytes."""
    with av.open(str(path), "w", options={"movflags": "frag_keyframe"}) as container:
        stream = container.add_stream("libx264", rate=8)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.options = {"g": "4", "bf": "0"}
        sound = container.add_stream("aac", rate=8000) if audio else None
        for i, frame in enumerate(frames):
            vf = av.VideoFrame.from_ndarray(frame, format="rgb24")
            vf.pts = i
            container.mux(stream.encode(vf))
            if sound is not None:
                tone = np.sin(np.arange(1000) / 5)[None, :].astype(np.float32)
                af = av.AudioFrame.from_ndarray(tone, format="fltp", layout="mono")
                af.sample_rate, af.pts = 8000, i * 1000
                container.mux(sound.encode(af))
        container.mux(stream.encode(None))
        if sound is not None:
            container.mux(sound.encode(None))
    return path.read_bytes()


def _top_boxes(data: bytes) -> list[tuple[int, bytes, int]]:
    """(offset, type, size) of each top-level box (32-bit sizes)."""
    boxes, offset = [], 0
    while offset < len(data):
        size = int.from_bytes(data[offset:offset + 4], "big")
        boxes.append((offset, data[offset + 4:offset + 8], size))
        offset += size
    return boxes


def _cut_in_mdat(data: bytes, end: int) -> bytes:
    """``data`` cut at byte ``end``, inside an 'mdat' whose size is patched to what is left: it fits box by box."""
    mdat = next(offset for offset, kind, size in _top_boxes(data) if kind == b"mdat" and offset < end <= offset + size)
    return data[:mdat] + _u32s(end - mdat) + data[mdat + 4:end]


@pytest.mark.usefixtures("mp4_index")
@pytest.mark.parametrize("reader", ["video_info", "preview.probe", *BACKENDS])
def test_a_fragment_cut_inside_its_mdat_is_truncated_for_every_reader(synthetic_frames, tmp_path: Path,
                                                                      reader: str) -> None:
    """A fragmented MP4's last 'mdat' cut inside its last sample (its size patched, the 'mfra' after it gone): the
    sample lost is within the duration check's margin, and the cut one was demuxed as a packet, so the file read as
    a whole 12-frame video. A fragment's audio cut with its video whole (the cut past the video's samples) read as a
    whole video too. Each 'trun''s samples are judged against the 'mdat' payloads now, as 'moov''s are."""
    data = _fragmented_mp4(tmp_path / "frag.mp4", synthetic_frames(12))
    assert [kind for _, kind, _ in _top_boxes(data)].count(b"moof") == 2 and _top_boxes(data)[-1][1] == b"mfra"
    assert video_info(tmp_path / "frag.mp4").n_frames == 12
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(_cut_in_mdat(data, _top_boxes(data)[-1][0] - 2))   # 2 bytes of the last sample lost
    with pytest.raises(VideoError) as err:
        _readers(cut)[reader]()
    assert err.value.reason == "truncated: container declares 12 frames, holds 11"
    data = _fragmented_mp4(tmp_path / "both.mp4", synthetic_frames(12), audio=True)
    assert video_info(tmp_path / "both.mp4").n_frames == 12
    with av.open(str(tmp_path / "both.mp4")) as container:   # the second fragment's video, then its audio
        last_video = max(packet.pos + packet.size for packet in container.demux(video=0) if packet.size)
    cut.write_bytes(_cut_in_mdat(data, last_video + 10))
    with pytest.raises(VideoError) as err:
        _readers(cut)[reader]()
    assert re.fullmatch(r"truncated: container declares [0-9]+ audio samples, holds [0-9]+", err.value.reason)


class _CountingContainer:
    """TEST DOUBLE of a PyAV input container: the real one (every attribute its own), its demux passes counted."""

    def __init__(self, container: av.container.InputContainer, demuxed: list[int]) -> None:
        self._container, self._demuxed = container, demuxed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._container, name)

    def __enter__(self) -> _CountingContainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self._container.__exit__(*exc)

    def demux(self, *args: Any, **kwargs: Any) -> Any:
        self._demuxed.append(1)
        return self._container.demux(*args, **kwargs)


@pytest.mark.usefixtures("mp4_index")
def test_a_fragmented_mp4_with_audio_is_demuxed_once_for_its_fragment_check(synthetic_frames, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A fragmented MP4's probe keeps two containers: the one the frames are counted in (its packets demuxed, the edit
    list applied: which samples are shown and discarded) and one with the edit list ignored, whose every audio and
    video sample the fragment check judges, all tracks at once. It opened that second container once per track and,
    with an older PyAV (no index), demuxed it once per track: 3 demux passes of a file with video and audio."""
    path = tmp_path / "both.mp4"
    _fragmented_mp4(path, synthetic_frames(12), audio=True)
    opened: list[int] = []
    demuxed: list[int] = []
    real_open = av.open

    def counting_open(*args: Any, **kwargs: Any) -> _CountingContainer:
        opened.append(1)
        return _CountingContainer(real_open(*args, **kwargs), demuxed)

    monkeypatch.setattr(av, "open", counting_open)
    assert video_info(path).n_frames == 12
    assert (len(opened), len(demuxed)) == (2, 1 if video._INDEXED else 2)


def test_a_fragmented_mp4s_fragments_are_read_once_for_every_track(synthetic_frames, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The fragment check counts each track's ``trun`` samples from the ``moof`` boxes: it walked every ``moof`` once
    per track (twice for video and audio); one pass now gives every track's count, the same totals."""
    path = tmp_path / "both.mp4"
    _fragmented_mp4(path, synthetic_frames(12), audio=True)
    walked: list[tuple[int, int]] = []
    real_children = video._children

    def counting_children(fh: Any, payload: tuple[int, int], box_type: bytes | None) -> Any:
        if box_type == b"traf":
            walked.append(payload)
        return real_children(fh, payload, box_type)

    monkeypatch.setattr(video, "_children", counting_children)
    assert video_info(path).n_frames == 12
    assert walked and len(walked) == len(set(walked)), walked


def test_a_fragmented_mp4_cut_where_a_fragment_starts_is_a_whole_shorter_video(synthetic_frames,
                                                                                tmp_path: Path) -> None:
    """Nothing FFmpeg writes says more fragments were meant: no 'mehd', an 'mvhd' of the first fragment's duration,
    and the 'mfra' (last) goes with the cut. Such a file is read as the frames it holds."""
    data = _fragmented_mp4(tmp_path / "frag.mp4", synthetic_frames(12))
    assert b"mehd" not in data
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[:[offset for offset, kind, _ in _top_boxes(data) if kind == b"moof"][-1]])
    assert video_info(cut).n_frames == 8
    assert len(read_video(cut, backend="pyav").frames) == 8


# ---------------------------------------------------------------- where an MP4 keeps its samples
# Each file below is written by PyAV (write_video: 'ftyp', an 8-byte 'free', 'mdat', then 'moov'; one chunk) and then
# edited box by box; no binary fixture.

_STBL = (b"moov", b"trak", b"mdia", b"minf", b"stbl")


def _box(data: bytes, *path: bytes) -> tuple[int, int]:
    """(offset, size) of the box down ``path`` (one type a level, 32-bit sizes) from the top of ``data``."""
    start, end = 0, len(data)
    for kind in path:
        offset = start
        while data[offset + 4:offset + 8] != kind:
            offset += int.from_bytes(data[offset:offset + 4], "big")
        start, end = offset + 8, offset + int.from_bytes(data[offset:offset + 4], "big")
    return start - 8, end - start + 8


def _with_payload(data: bytes, path: tuple[bytes, ...], payload: bytes) -> bytes:
    """``data`` with the payload of the box at ``path`` replaced, each enclosing box's size patched (nothing after
    'moov' is referenced by offset, so nothing else moves)."""
    offset, size = _box(data, *path)
    grown, out = len(payload) - (size - 8), bytearray(data[:offset + 8] + payload + data[offset + size:])
    for depth in range(1, len(path) + 1):
        at, outer = _box(data, *path[:depth])
        out[at:at + 4] = (outer + grown).to_bytes(4, "big")
    return bytes(out)


def _u32s(*values: int) -> bytes:
    return b"".join(v.to_bytes(4, "big") for v in values)


def _one_chunk_mp4(path: Path, n: int = 30) -> tuple[bytes, list[int]]:
    """A written MP4's bytes and its sample sizes; it stores its samples as one chunk (checked)."""
    rng = np.random.default_rng(0)
    data = write_video(path, rng.integers(0, 255, (n, 48, 64, 3), dtype=np.uint8), 10).read_bytes()
    stsz, _ = _box(data, *_STBL, b"stsz")
    sizes = [int.from_bytes(data[stsz + 20 + 4 * i:stsz + 24 + 4 * i], "big") for i in range(n)]
    stco, _ = _box(data, *_STBL, b"stco")
    assert data[stco + 12:stco + 16] == _u32s(1) and data[stco + 16:stco + 20] == _u32s(_box(data, b"mdat")[0] + 8)
    return data, sizes


def _two_mdats(data: bytes, sizes: list[int], first: int) -> bytes:
    """``data`` with its 'mdat' split in two after sample ``first``: chunk 1 in the first, chunk 2 in the second."""
    mdat, size = _box(data, b"mdat")
    split = mdat + 8 + sum(sizes[:first])
    data = (data[:mdat] + _u32s(split - mdat) + data[mdat + 4:split] + _u32s(mdat + size - split + 8) + b"mdat"
            + data[split:])
    data = _with_payload(data, (*_STBL, b"stsc"), _u32s(0, 2, 1, first, 1, 2, len(sizes) - first, 1))
    return _with_payload(data, (*_STBL, b"stco"), _u32s(0, 2, mdat + 8, split + 8))


@pytest.mark.usefixtures("mp4_index")
def test_samples_in_a_second_mdat_are_held_and_a_cut_second_mdat_is_truncated(tmp_path: Path) -> None:
    """The check judges every sample by every top-level 'mdat' (here 12 samples in the first, 18 in the second);
    cutting the second one's bytes (its size patched) leaves the first 12 and part of the rest."""
    data, sizes = _one_chunk_mp4(tmp_path / "one.mp4")
    two = tmp_path / "two.mp4"
    two.write_bytes(_two_mdats(data, sizes, 12))
    assert video_info(two).n_frames == 30
    np.testing.assert_array_equal(read_video(two, backend="pyav").frames,
                                  read_video(tmp_path / "one.mp4", backend="pyav").frames)
    data = two.read_bytes()
    second = data.index(b"mdat", _box(data, b"mdat")[0] + 8) - 4
    size = int.from_bytes(data[second:second + 4], "big")
    kept = 8 + sum(sizes[12:21])   # samples 12..20 of the second chunk
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[:second] + _u32s(kept) + data[second + 4:second + kept] + data[second + size:])
    with pytest.raises(VideoError) as err:
        video_info(cut)
    assert err.value.reason == "truncated: container declares 30 frames, holds 21"


def _largesize(data: bytes, claimed: int) -> bytes:
    """``data`` with its 8-byte 'free' and the 'mdat' header after it made one 16-byte header of size 1 (what
    FFmpeg writes for an 'mdat' past 4 GiB) with the 64-bit size ``claimed``: no sample moves."""
    free, _ = _box(data, b"free")
    assert data[free + 12:free + 16] == b"mdat"
    return data[:free] + _u32s(1) + b"mdat" + claimed.to_bytes(8, "big") + data[free + 16:]


@pytest.mark.usefixtures("mp4_index")
def test_a_64_bit_mdat_size_is_read_whole_or_named_truncated(tmp_path: Path) -> None:
    data, _ = _one_chunk_mp4(tmp_path / "one.mp4")
    true_size = _box(data, b"mdat")[1] + 8
    for name, claimed, reason in [
        ("whole.mp4", true_size, None),
        ("over.mp4", true_size + 1000, f"truncated: 'mdat' box at byte 32 needs {true_size + 1000} bytes, only "
                                       f"{len(data) - 32} present"),
        ("tiny.mp4", 12, "undecodable: corrupt MP4 box at byte 32 (size 12)"),   # smaller than its own header
    ]:
        path = tmp_path / name
        path.write_bytes(_largesize(data, claimed))
        if reason is None:
            assert video_info(path).n_frames == 30 and len(read_video(path, backend="pyav").frames) == 30
        else:
            with pytest.raises(VideoError) as err:
                video_info(path)
            assert err.value.reason == reason


def test_an_mdat_of_size_0_runs_to_the_end_of_the_file_whole_or_cut(synthetic_frames, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Size 0: the last box runs to the end of the file, so a cut one fits box by box; its samples say it is short.
    By the index and by demuxing (``mp4_index``) alike: the demuxed sample the file's end cuts is a packet of what is
    left, flagged corrupt, which counted one sample more."""
    data = _write_faststart_mp4(tmp_path / "fast.mp4", synthetic_frames(30), 8).read_bytes()
    mdat, size = _box(data, b"mdat")
    assert mdat + size == len(data)
    whole = tmp_path / "whole.mp4"
    whole.write_bytes(data[:mdat] + _u32s(0) + data[mdat + 4:])
    cut = _truncate(whole, tmp_path / "cut.mp4", 0.7)
    reasons = []
    for indexed in (True, False) if PYAV_17 else (False,):
        monkeypatch.setattr(video, "_INDEXED", indexed)
        assert video_info(whole).n_frames == 30
        with pytest.raises(VideoError) as err:
            video_info(cut)
        reasons.append(err.value.reason)
    assert re.fullmatch(r"truncated: container declares 30 frames, holds [1-2][0-9]", reasons[0])
    assert reasons[-1] == reasons[0]


@pytest.mark.usefixtures("mp4_index")
def test_samples_in_another_file_are_named_so_not_truncated(tmp_path: Path) -> None:
    """A data reference without the self-contained flag: the chunk offsets are another file's. Reported as
    "holds 0" (truncated) before; a file flagged so whose offsets are its own is read, as FFmpeg reads it."""
    data, _ = _one_chunk_mp4(tmp_path / "one.mp4")
    url = data.index(b"url ", _box(data, *_STBL[:-1], b"dinf", b"dref")[0])
    external = bytearray(data)
    external[url + 4:url + 8] = _u32s(0)
    own = tmp_path / "own.mp4"
    own.write_bytes(external)
    assert video_info(own).n_frames == 30
    stco, _ = _box(data, *_STBL, b"stco")
    external[stco + 16:stco + 20] = _u32s(len(data) + 1000)
    elsewhere = tmp_path / "elsewhere.mp4"
    elsewhere.write_bytes(external)
    with pytest.raises(VideoError) as err:
        video_info(elsewhere)
    _assert_one_line_error(err.value, elsewhere, "undecodable: its samples are in another file")


@pytest.mark.parametrize("trak", [_u32s(16) + b"trak" + _u32s(1) + b"tkhd",   # a 64-bit size the file's end cuts
                                  _u32s(17) + b"trak" + _u32s(9) + b"tkhd\x01"])   # a version-1 tkhd of 1 byte
def test_a_cut_box_at_the_end_of_moov_is_no_traceback_when_samples_lie_outside(make_video, tmp_path: Path,
                                                                              trak: bytes) -> None:
    """A file whose samples lie outside its media has its data references read (is it another file's?): a last
    'trak' cut by the file's end raised struct.error out of video_info; it is truncated, as said without it."""
    data = bytearray(make_video(n_frames=30).read_bytes())
    moov, size = _box(bytes(data), b"moov")
    assert moov + size == len(data)   # moov last: what is appended to the file lies inside it
    stco, _ = _box(bytes(data), *_STBL, b"stco")
    data[stco + 16:stco + 20] = _u32s(len(data) + 1000)
    data[moov:moov + 4] = _u32s(size + len(trak))
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data + trak)
    with pytest.raises(VideoError) as err:
        video_info(cut)
    _assert_one_line_error(err.value, cut, "truncated: container declares 30 frames, holds 0")


@pytest.mark.usefixtures("mp4_index")
@needs("opencv", "decord")
def test_the_samples_before_an_edit_lists_start_are_not_counted(synthetic_frames, tmp_path: Path) -> None:
    """What ``ffmpeg -ss 0.5 -i in.mp4 -c copy`` writes: the edit list starts after the first sample(s), which FFmpeg
    indexes flagged "discard" and pyav and OpenCV do not show. Counted, the file read 30 frames and both backends
    stopped at 29 ("truncated" at decode). Here the edit starts one sample in (keyframes every 4, no B-frames).
    Decord counts that sample: its read was refused as "truncated" (30 frames, 29 held), which the file is not; it is
    refused for what it is, as decord's frame 20 is shown frame 20 read in order and shown frame 19 after a seek."""
    frames = synthetic_frames(30)
    data = bytearray(_write_faststart_mp4(tmp_path / "full.mp4", frames, 10, g="4", bf="0").read_bytes())
    stts, _ = _box(bytes(data), *_STBL, b"stts")
    assert data[stts + 8:stts + 16] == _u32s(0, 1)     # version 0, one entry: every sample lasts the same
    elst, _ = _box(bytes(data), b"moov", b"trak", b"edts", b"elst")
    assert data[elst + 8:elst + 16] == _u32s(0, 1)     # version 0, one entry
    data[elst + 20:elst + 24] = data[stts + 20:stts + 24]   # its media time: one sample's duration
    late = tmp_path / "late.mp4"
    late.write_bytes(data)
    assert video_info(late).n_frames == 29
    full = read_video(tmp_path / "full.mp4", backend="pyav").frames
    for backend in ("pyav", "opencv"):
        np.testing.assert_array_equal(read_video(late, backend=backend).frames, full[1:])
    with pytest.raises(VideoError) as err:
        read_video(late, backend="decord")
    assert err.value.reason == ("undecodable: decord: counts the 1 of 30 samples the edit list discards, which pyav "
                                "and OpenCV skip (29 frames)")
    import decord

    in_order = decord.VideoReader(str(late)).get_batch(list(range(21))).asnumpy()[20]
    after_seek = decord.VideoReader(str(late)).get_batch([20]).asnumpy()[0]
    np.testing.assert_array_equal(in_order, full[21])
    np.testing.assert_array_equal(after_seek, full[20])


@pytest.mark.usefixtures("mp4_index")
@pytest.mark.parametrize(("options", "shown", "read"),
                         [({"g": "4", "bf": "0"}, 20, 21), ({"g": "12", "bf": "3"}, 13, 25)],
                         ids=["no-b-frames", "b-frames"])
@needs("opencv")
def test_an_edit_list_that_ends_early_counts_the_frames_shown(synthetic_frames, tmp_path: Path, options: dict,
                                                              shown: int, read: int) -> None:
    """FFmpeg's index leaves out the samples of an edit list's end from the first keyframe after it, and flags those
    before that keyframe "discard": with keyframes every 4 and no B-frames an edit of 2 s of 3 shows 20 frames, flags
    1 and leaves out 9; in an x264 file with B-frames (bf=3, keyframes every 12) an edit of 1.3 s ending mid-GOP shows
    13 and flags 12. Judged by the index, the first file read "declares 30 frames, holds 21"; then it was refused as
    undecodable, though pyav and OpenCV read the frames it shows. Decord reads the flagged samples too, in order as
    copies of the last frame shown: its read is refused."""
    frames = synthetic_frames(30)
    data = bytearray(_write_faststart_mp4(tmp_path / "full.mp4", frames, 10, **options).read_bytes())
    assert video_info(tmp_path / "full.mp4").n_frames == 30
    elst, _ = _box(bytes(data), b"moov", b"trak", b"edts", b"elst")
    assert data[elst + 8:elst + 16] == _u32s(0, 1)   # version 0, one entry
    data[elst + 16:elst + 20] = _u32s(shown * 100)     # its duration, in the movie's 1/1000 s (10 frames a second)
    short = tmp_path / "short.mp4"
    short.write_bytes(data)
    assert video_info(short).n_frames == shown
    full = read_video(tmp_path / "full.mp4", backend="pyav").frames
    for backend in ("pyav", "opencv"):
        np.testing.assert_array_equal(read_video(short, backend=backend).frames, full[:shown])
    decord = pytest.importorskip("decord")
    reader = decord.VideoReader(str(short))
    assert len(reader) == read
    past = reader.get_batch(list(range(read))).asnumpy()[shown:]   # read in order (a seek there reads others)
    np.testing.assert_array_equal(past, full[[shown - 1] * (read - shown)])
    with pytest.raises(VideoError) as err:
        read_video(short, backend="decord")
    assert err.value.reason == (f"undecodable: decord: counts the {read - shown} of {read} samples the edit list "
                                f"discards, which pyav and OpenCV skip ({shown} frames)")


@needs("opencv")
def test_a_fragmented_mp4s_discarded_samples_are_not_counted(synthetic_frames, tmp_path: Path) -> None:
    """A fragmented MP4 whose 'moov' has an edit list (PyAV with movflags=frag_keyframe, use_editlist=1; 30 frames,
    keyframes every 4, the first fragment's 4 samples in 'moov'): FFmpeg demuxes 27 packets and flags the first
    "discard"; pyav and OpenCV show 26 frames (4-29). Its packets were counted as 27 frames: both reads were
    "truncated" (26 of 27), and decord's 27 (4-29, then 29 again) passed. The flagged packet is not counted now, and
    decord's read is refused as for an unfragmented file's edit list."""
    frames = synthetic_frames(30)
    path = tmp_path / "frag.mp4"
    with av.open(str(path), "w", options={"movflags": "frag_keyframe", "use_editlist": "1"}) as container:
        stream = container.add_stream("libx264", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.options = {"crf": "0", "g": "4", "bf": "0"}
        for i, frame in enumerate(frames):
            vf = av.VideoFrame.from_ndarray(frame, format="rgb24")
            vf.pts = i
            container.mux(stream.encode(vf))
        container.mux(stream.encode(None))
    _box(path.read_bytes(), b"moov", b"trak", b"edts", b"elst")   # the edit list is there
    assert b"moof" in path.read_bytes()
    assert video_info(path).n_frames == 26
    shown = read_video(path, backend="pyav").frames
    np.testing.assert_array_equal(read_video(path, backend="opencv").frames, shown)
    pytest.importorskip("decord")
    with pytest.raises(VideoError) as err:
        read_video(path, backend="decord")
    assert err.value.reason == ("undecodable: decord: counts the 1 of 27 samples the edit list discards, which pyav "
                                "and OpenCV skip (26 frames)")


def _cover_first(path: Path, n_frames: int = 10, *, video: bool = True) -> Path:
    """An MP4 with a 32x32 PNG cover picture (an attached picture: its 'covr' metadata), listed before its 64x48
    H.264 video stream (``n_frames`` of grey level 20 i): PyAV writes the metadata ('udta') after the track, which
    then comes first in 'moov'; moved before it, FFmpeg lists the picture as video stream 0. ``video=False``: the
    picture alone."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=10) if video else None
        cover = container.add_stream("png")
        cover.width, cover.height, cover.pix_fmt = 32, 32, "rgb24"
        cover.disposition = av.stream.Disposition.attached_pic
        if stream is not None:
            stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
            stream.options = {"crf": "0"}
            for i in range(n_frames):
                frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 20 * i, np.uint8), format="rgb24")
                frame.pts = i
                container.mux(stream.encode(frame))
            container.mux(stream.encode(None))
        picture = av.VideoFrame.from_ndarray(np.full((32, 32, 3), 200, np.uint8), format="rgb24")
        for packet in [*cover.encode(picture), *cover.encode(None)]:
            container.mux(packet)
    data = path.read_bytes()
    moov, size = _box(data, b"moov")
    children, offset = [], moov + 8
    while offset < moov + size:
        length = int.from_bytes(data[offset:offset + 4], "big")
        children.append(data[offset:offset + length])
        offset += length
    children.sort(key=lambda box: {b"mvhd": 0, b"udta": 1}.get(box[4:8], 2))   # moov's size and place stay
    path.write_bytes(data[:moov + 8] + b"".join(children) + data[moov + size:])
    return path


@needs_pyav_17
@needs("opencv")
def test_a_cover_picture_listed_first_is_not_read_as_the_video(tmp_path: Path) -> None:
    """Taken as the first video stream, the cover made this file a 1-frame 32x32 PNG "video" to video_info, pyav,
    OpenCV, the validity check and the preview's probe, and decord's read (decord picks the video: 10 frames) was
    "truncated". Every read takes the first stream that is not a cover; OpenCV, which reads the picture and takes no
    choice of stream, is refused saying so."""
    path = _cover_first(tmp_path / "cover.mp4")
    with av.open(str(path)) as container:
        assert container.streams.video[0].disposition & av.stream.Disposition.attached_pic
    assert video_info(path) == VideoInfo(path, 10, 10.0, 64, 48, "h264", 1.0, "mov,mp4,m4a,3gp,3g2,mj2")
    frames = read_video(path, backend="pyav").frames
    np.testing.assert_allclose(frames[:, 0, 0, 0], np.arange(10) * 20, atol=1)   # the video's (RGB -> YUV: +-1)
    np.testing.assert_array_equal(np.stack(list(iter_frames(path, backend="pyav"))), frames)
    assert is_valid_video(path, 10)
    assert preview.probe(path).codec == "h264"
    with pytest.raises(VideoError) as err:
        read_video(path, backend="opencv")
    assert err.value.reason == ("undecodable: opencv: a cover picture comes before its video stream: OpenCV reads "
                                "the picture, pyav and decord the video")
    pytest.importorskip("decord")
    np.testing.assert_array_equal(read_video(path, backend="decord").frames, frames)


def test_a_matroska_video_with_a_longer_audio_track_is_whole(tmp_path: Path) -> None:
    """Its video has no duration of its own, and the container's is its 3 s audio's: this complete 12-frame 1.2 s
    video was refused by every read as "truncated: container declares 3.0xx s but frames end at 1.200 s". The
    video's own DURATION tag is read instead (and the container's only where the video is its one stream)."""
    path = tmp_path / "audio.mkv"
    with av.open(str(path), "w") as container:
        video = container.add_stream("libx264", rate=10)
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        audio = container.add_stream("pcm_s16le", rate=8000, layout="mono")
        for i in range(12):
            container.mux(video.encode(av.VideoFrame.from_ndarray(np.full((48, 64, 3), 20 * i, np.uint8),
                                                                  format="rgb24")))
        container.mux(video.encode(None))
        for i in range(3):
            samples = av.AudioFrame.from_ndarray(np.zeros((1, 8000), np.int16), format="s16", layout="mono")
            samples.sample_rate, samples.pts = 8000, 8000 * i
            container.mux(audio.encode(samples))
        container.mux(audio.encode(None))
    with av.open(str(path)) as container:
        assert container.duration / av.time_base > 2.9
    info = video_info(path)
    assert (info.n_frames, info.fps, info.duration_s) == (12, 10.0, pytest.approx(1.2, abs=0.01))
    assert read_video(path, backend="pyav").frames.shape == (12, 48, 64, 3)
    assert is_valid_video(path, 12) and preview.probe(path).n_frames == 12


@needs_pyav_17
def test_a_file_holding_only_a_cover_picture_is_one_line(tmp_path: Path) -> None:
    path = _cover_first(tmp_path / "cover.mp4", video=False)
    for read in (lambda: video_info(path), lambda: read_video(path, backend="pyav"), lambda: preview.probe(path)):
        with pytest.raises(VideoError) as err:
            read()
        assert str(err.value) == f"{path}: undecodable: only a cover picture, no video stream"
    assert not is_valid_video(path, 1)


def test_every_read_refuses_a_file_with_two_video_streams(tmp_path: Path) -> None:
    """pyav and OpenCV read the first video stream; decord picks one by its own ranking: on two 64x48 x264 streams it
    read the second without a word. A Matroska file whose first track is an unflagged 1-frame MJPEG picture (as some
    muxers write a cover) read as a 1-frame 32x24 "video" to video_info, pyav, OpenCV and decord alike. Every read
    (and the preview, and the validity check) refuses such a file in one line naming the streams."""
    path = tmp_path / "two.mkv"
    with av.open(str(path), "w", format="matroska") as container:
        picture = container.add_stream("mjpeg", rate=10)
        picture.width, picture.height, picture.pix_fmt = 32, 24, "yuvj420p"
        video = container.add_stream("libx264", rate=10)
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        container.mux(picture.encode(av.VideoFrame.from_ndarray(np.full((24, 32, 3), 200, np.uint8), format="rgb24")))
        container.mux(picture.encode(None))
        for i in range(30):
            container.mux(video.encode(av.VideoFrame.from_ndarray(np.full((48, 64, 3), i * 4, np.uint8),
                                                                  format="rgb24")))
        container.mux(video.encode(None))
    reason = "undecodable: 2 video streams (#0 mjpeg 32x24, #1 h264 64x48): decoders differ on which is the video"
    reads = [lambda: video_info(path), lambda: preview.probe(path)]
    reads += [lambda b=b: read_video(path, backend=b) for b in ("pyav", "opencv")]
    reads += [lambda b=b: list(iter_frames(path, backend=b)) for b in ("pyav", "opencv")]
    if importlib.util.find_spec("decord"):
        reads += [lambda: read_video(path, backend="decord"), lambda: list(iter_frames(path, backend="decord"))]
    for read in reads:
        with pytest.raises(VideoError) as err:
            read()
        _assert_one_line_error(err.value, path, reason)
    assert not is_valid_video(path, 30)


@pytest.mark.parametrize("fmt", ["matroska", "mp4"])
@needs("opencv")
def test_a_one_picture_track_listed_after_the_video_is_no_second_video(tmp_path: Path, fmt: str) -> None:
    """``ffmpeg -i cover.mp4 -map 0 -c copy out.mkv`` writes the MP4's cover as a one-frame PNG track after the video,
    without the cover flag: every read refused it as "2 video streams", though pyav, OpenCV and decord each read the
    10-frame video (here a one-frame MJPEG track, which PyAV writes to Matroska and MP4). A one-picture track after
    the video is no video; a second track of two pictures still is."""
    def written(pictures: int) -> Path:
        path = tmp_path / f"{pictures}.{'mkv' if fmt == 'matroska' else 'mp4'}"
        with av.open(str(path), "w", format=fmt) as container:
            video = container.add_stream("libx264", rate=10)
            video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
            picture = container.add_stream("mjpeg", rate=10)
            picture.width, picture.height, picture.pix_fmt = 32, 24, "yuvj420p"
            for i in range(10):
                container.mux(video.encode(av.VideoFrame.from_ndarray(np.full((48, 64, 3), 20 * i, np.uint8),
                                                                      format="rgb24")))
            container.mux(video.encode(None))
            for i in range(pictures):
                frame = av.VideoFrame.from_ndarray(np.full((24, 32, 3), 200, np.uint8), format="rgb24")
                frame.pts = i
                container.mux(picture.encode(frame))
            container.mux(picture.encode(None))
        return path

    path = written(1)
    assert video_info(path).n_frames == 10 and preview.probe(path).n_frames == 10 and is_valid_video(path, 10)
    for backend in ("pyav", "opencv", *(["decord"] if importlib.util.find_spec("decord") else [])):
        frames = read_video(path, backend=backend).frames
        np.testing.assert_allclose(frames[:, 0, 0, 0], np.arange(10) * 20, atol=1)
    two = written(2)
    with pytest.raises(VideoError) as err:
        video_info(two)
    assert err.value.reason == ("undecodable: 2 video streams (#0 h264 64x48, #1 mjpeg 32x24): decoders differ on "
                                "which is the video")


@needs("opencv", "decord")
def test_decords_failure_on_a_narrow_frame_is_one_line_saying_so(make_video) -> None:
    """Decord 0.6.0 fails to copy some narrow frames (16 wide here; 24, 48 and 72 too) out of its buffer, whatever the
    count (one frame as of 10,000); its message carried a time and a build path. pyav and OpenCV read them."""
    path = make_video(n_frames=3, height=16, width=16)
    assert read_video(path, backend="pyav").frames.shape == (3, 16, 16, 3)
    np.testing.assert_array_equal(read_video(path, backend="opencv").frames, read_video(path, backend="pyav").frames)
    for read in (lambda: read_video(path, [0], backend="decord"), lambda: list(iter_frames(path, backend="decord"))):
        with pytest.raises(VideoError) as err:
            read()
        assert err.value.reason == ("undecodable: decord: cannot copy its 16x16 frames (a buffer of 1536 bytes a "
                                    "frame for 768); pyav and OpenCV read them")


@needs("decord")
def test_decords_read_opens_the_header_once(make_video, monkeypatch) -> None:
    """Decord's read opened the header a second time with PyAV for the streams and samples ``video_info``'s read had
    already listed (that open, timed apart: 0.8 ms against a 5.2 ms first-frame read of a 64x48 H.264, 4.2 against
    31 ms at 1376x768)."""
    path = make_video(n_frames=3)
    opened = []
    real = av.open

    def counted(*args, **kwargs):
        opened.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(av, "open", counted)
    read_video(path, [0], backend="decord")
    list(iter_frames(path, backend="decord"))
    assert len(opened) == 2   # the header, once a read


@pytest.mark.parametrize(("line", "read"), [
    ("av==1.0.0 \\", "1.0.0"), ("AV==1.0.0 \\", "1.0.0"), ("av[extra] == 1.0.0 \\", "1.0.0"),
    ('  Av ==1.0.0 ; python_version >= "3.10" \\', "1.0.0"), ("avro==1.0.0 \\", None),
    ("av>=1.0.0 \\", "names av"), ("av===1.0.0 \\", "names av"), ("av==1.0.0rc1 \\", "names av"),
    ("av==1.0.* \\", "names av"), ("av @ https://example.org/av-1.0.0-py3-none-any.whl \\", "names av")])
def test_make_test_old_av_reads_a_lock_s_av_line_as_pip_does_or_fails_naming_it(tmp_path: Path, line: str,
                                                                                 read: str | None) -> None:
    """``make test-old-av`` read only ``^av==X`` lines: AV==X, av[extra]==X or av ==X was skipped unsaid, its PyAV
    never tested (bounds67). Run on a copy of the Makefile and tools/old_av.py with a stand-in pip (it records what
    is installed) and a stand-in tests/test_video.py."""
    repo = Path(__file__).resolve().parents[1]
    (tmp_path / "Makefile").write_text((repo / "Makefile").read_text())
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "old_av.py").write_text((repo / "tools" / "old_av.py").read_text())
    (tmp_path / "recipes" / "toy").mkdir(parents=True)
    (tmp_path / "recipes" / "toy" / "requirements.lock").write_text(f"numpy==2.0.0 \\\n    --hash=sha256:0\n{line}\n"
                                                                    "    --hash=sha256:0\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_video.py").write_text("def test_stand_in() -> None:\n    pass\n")
    pip = tmp_path / "tools" / "bin" / "python"
    pip.parent.mkdir(parents=True)
    pip.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/installed\n')
    pip.chmod(0o755)
    venv = Path(sys.executable).parents[1]
    done = subprocess.run(["make", "-s", "test-old-av", f"VENV={venv}", f"TOOLS={tmp_path}/tools",
                           "-o", f"{venv}/.pinbench-installed"],
                          cwd=tmp_path, capture_output=True, text=True, check=False)
    installed = (tmp_path / "installed").read_text() if (tmp_path / "installed").exists() else ""
    if read is None:
        assert (done.returncode, installed) == (0, ""), done.stderr
    elif read == "names av":
        assert done.returncode != 0 and installed == ""
        assert done.stderr.splitlines()[0] == (f"make test-old-av: recipes/toy/requirements.lock: '{line}' names av "
                                               "but pins no plain av==X.Y.Z version")
    else:
        assert done.returncode == 0, done.stderr
        assert installed.split()[-1] == f"av=={read}" and f"PyAV {read}:" in done.stdout
