"""image-camera (RememBench I2V): the initial frame turned with the camera's yaw along the trajectory, no model.

Frame i takes the pose at the same fraction of the path (not the paper's 64-position resampling) and pans the
initial frame by its yaw from pose 0 at the focal length of the intrinsics (given at 832 x 480), wrapping at the
edges: a rotation-only 2D warp, no parallax. A stand-in for an image-to-video model that reads both its files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from pinbench.core.generation import Capabilities, Request, Signature
from pinbench.media.video import write_video


class ImageCamera:
    capabilities = Capabilities(kinds=frozenset({"image-camera"}),
                                conditioning=frozenset({"initial_frame", "trajectory"}))

    def signature(self) -> Signature:
        return Signature(model="docs image-camera adapter", weights="none", settings={"warp": "yaw pan, wrapped"})

    def generate(self, request: Request, out: Path) -> None:
        with Image.open(request.path("initial_frame")) as image:
            picture = np.asarray(image.convert("RGB").resize((request.width, request.height)))
        with np.load(request.path("trajectory"), allow_pickle=False) as data:   # c2w poses, OpenCV axes
            poses, fx = data["poses"], float(data["intrinsics"].reshape(-1, 4)[0, 0]) * request.width / 832

        def frame(i: int) -> np.ndarray:   # the pose at frame i's fraction of the path, in the first camera's axes
            turn = poses[0, :3, :3].T @ poses[round(i * (len(poses) - 1) / max(request.frames - 1, 1)), :3, :3]
            return np.roll(picture, -round(float(np.arctan2(turn[0, 2], turn[2, 2])) * fx), axis=1)

        write_video(out, (frame(i) for i in range(request.frames)), request.fps, crf=0, pix_fmt="yuv444p")


def make() -> ImageCamera:
    return ImageCamera()
