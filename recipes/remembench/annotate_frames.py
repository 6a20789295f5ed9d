"""Frames for the annotation page: a thumbnail and a preview of every frame, the native frame on demand.

Why this shape: a T2V rollout is 379 frames of 1376x768, 1.2 GB decoded. One pass over the video
(``iter_frames``, one frame in memory) makes a small JPEG thumbnail (the strip) and a JPEG preview (the
main view) of every frame, a few MB per scene, kept for the last few scenes opened. The native frame, what
the scorer compares, is decoded on request as a lossless PNG, with its neighbours, since the next request
is usually one frame away. Every frame comes from the decoder the scorer uses (``-o decoder=``), so
frame ``i`` here is frame ``i`` there.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from pinbench.media.video import VideoError, iter_frames, read_video

THUMB_WIDTH = 112
PREVIEW_WIDTH = 768
THUMB_QUALITY = 80
PREVIEW_QUALITY = 92
SCENES_KEPT = 3  # the scene open now, the one before, the next (the page warms it)
NATIVE_NEIGHBOURS = 4  # decoded on each side of a requested native frame
NATIVE_KEPT = 24  # native frames held (decoded RGB: 3.2 MB each at 1376x768)


class FrameError(ValueError):
    """A frame that cannot be served because its rollout does not decode (one line)."""


class FrameNotFound(FrameError):
    """No such frame: a scene without a video, or a number outside the rollout."""


@dataclass(frozen=True)
class Rendition:
    """One image of one frame, ready to send."""

    body: bytes
    media_type: str


def _resized(frame: np.ndarray, width: int) -> np.ndarray:
    height, original = frame.shape[:2]
    if original <= width:
        return frame
    return cv2.resize(frame, (width, max(1, round(height * width / original))), interpolation=cv2.INTER_AREA)


def _encode(frame_rgb: np.ndarray, extension: str, params: list[int]) -> bytes:
    ok, data = cv2.imencode(extension, cv2.cvtColor(frame_rgb, cv2.COLOR_RGB2BGR), params)
    if not ok:
        raise FrameError(f"could not encode a {extension} image")
    return data.tobytes()


def jpeg(frame_rgb: np.ndarray, width: int, quality: int) -> bytes:
    return _encode(_resized(frame_rgb, width), ".jpg", [cv2.IMWRITE_JPEG_QUALITY, quality])


def png(frame_rgb: np.ndarray) -> bytes:
    return _encode(frame_rgb, ".png", [cv2.IMWRITE_PNG_COMPRESSION, 1])


class _SceneImages:
    """Thumbnails and previews of every frame of one rollout, made in one decoding pass on first use."""

    def __init__(self, video: Path, n_frames: int, decoder: str):
        self.video, self.n_frames, self.decoder = video, n_frames, decoder
        self._lock = threading.Lock()
        self._thumbs: list[bytes] | None = None
        self._previews: list[bytes] | None = None
        self._error: str | None = None

    def _build(self) -> None:
        thumbs, previews = [], []
        try:
            for frame in iter_frames(self.video, backend=self.decoder):
                thumbs.append(jpeg(frame, THUMB_WIDTH, THUMB_QUALITY))
                previews.append(jpeg(frame, PREVIEW_WIDTH, PREVIEW_QUALITY))
        except VideoError as exc:
            self._error = str(exc)
            return
        if len(thumbs) != self.n_frames:
            self._error = f"{self.video}: decoded {len(thumbs)} frames, the container says {self.n_frames}"
            return
        self._thumbs, self._previews = thumbs, previews

    def get(self, kind: str, frame: int) -> bytes:
        with self._lock:  # concurrent requests of one scene wait for the one pass
            if self._thumbs is None and self._error is None:
                self._build()
        images = self._thumbs if kind == "thumb" else self._previews
        if images is None:
            raise FrameError(self._error or f"{self.video}: not decoded")
        return images[frame]


class FrameStore:
    """Images of the frames of every scene's rollout: ``{scene_id: (video, n_frames)}``."""

    def __init__(self, videos: Mapping[str, tuple[Path, int]], decoder: str):
        self.videos = dict(videos)
        self.decoder = decoder
        self._lock = threading.Lock()
        self._scenes: OrderedDict[str, _SceneImages] = OrderedDict()
        self._native: OrderedDict[tuple[str, int], np.ndarray] = OrderedDict()
        self._native_locks: dict[str, threading.Lock] = {s: threading.Lock() for s in self.videos}

    def _check(self, scene_id: str, frame: int) -> tuple[Path, int]:
        if scene_id not in self.videos:
            raise FrameNotFound(f"scene {scene_id!r} has no video")
        video, n_frames = self.videos[scene_id]
        if not 0 <= frame < n_frames:
            raise FrameNotFound(f"scene {scene_id!r}: frame {frame} is not a frame of its rollout "
                                f"(0 to {n_frames - 1})")
        return video, n_frames

    def _scene(self, scene_id: str) -> _SceneImages:
        video, n_frames = self.videos[scene_id]
        with self._lock:
            images = self._scenes.pop(scene_id, None) or _SceneImages(video, n_frames, self.decoder)
            self._scenes[scene_id] = images
            while len(self._scenes) > SCENES_KEPT:
                self._scenes.popitem(last=False)
        return images

    def thumbnail(self, scene_id: str, frame: int) -> Rendition:
        self._check(scene_id, frame)
        return Rendition(self._scene(scene_id).get("thumb", frame), "image/jpeg")

    def preview(self, scene_id: str, frame: int) -> Rendition:
        self._check(scene_id, frame)
        return Rendition(self._scene(scene_id).get("preview", frame), "image/jpeg")

    def native(self, scene_id: str, frame: int) -> Rendition:
        """Frame ``frame`` at the rollout's own resolution, lossless."""
        video, n_frames = self._check(scene_id, frame)
        with self._native_locks[scene_id]:
            rgb = self._cached_native(scene_id, frame)
            if rgb is None:
                wanted = list(range(max(0, frame - NATIVE_NEIGHBOURS), min(n_frames, frame + NATIVE_NEIGHBOURS + 1)))
                try:
                    decoded = read_video(video, wanted, backend=self.decoder).frames
                except VideoError as exc:
                    raise FrameError(str(exc)) from None
                with self._lock:
                    for index, image in zip(wanted, decoded, strict=True):
                        self._native[(scene_id, index)] = image
                    while len(self._native) > NATIVE_KEPT:
                        self._native.popitem(last=False)
                rgb = decoded[wanted.index(frame)]
        return Rendition(png(rgb), "image/png")

    def _cached_native(self, scene_id: str, frame: int) -> np.ndarray | None:
        with self._lock:
            rgb = self._native.pop((scene_id, frame), None)
            if rgb is not None:
                self._native[(scene_id, frame)] = rgb
            return rgb
