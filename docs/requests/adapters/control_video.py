"""control-video (PAI-Bench-C), in the command form: a program run once per request, reading its JSON, no model.

Frame t is the conditioning frame (context frame 0) blended half and half with control frame t: the depth or
segmentation video the request names, or, for edge and blur (which cosmos-framework computes from the context
video), the gradient magnitude of context frame t (not Canny, not a blur). The last frame is held when a video is
shorter than the request. It ignores the caption. A stand-in for a control-to-video model, in any language.
"""

import argparse
import json
from pathlib import Path

import numpy as np
from PIL import Image

from pinbench.media.video import read_video, write_video

parser = argparse.ArgumentParser()
parser.add_argument("--request", required=True)   # a file holding the request (its JSON, with "root")
parser.add_argument("--out", required=True)       # where the rollout goes
args = parser.parse_args()
request = json.loads(Path(args.request).read_text(encoding="utf-8"))
files = {c["role"]: Path(request["root"]) / c["path"] for c in request["conditioning"]}


def frames(role: str) -> list[np.ndarray]:   # a video's first frames, at the request's size, as floats
    video = read_video(files[role], max_frames=request["frames"], backend="pyav").frames
    return [np.asarray(Image.fromarray(f).resize((request["width"], request["height"])), float) for f in video]


context = frames("context")
if "control" in files:
    control = frames("control")
else:
    control = [np.repeat(np.hypot(*np.gradient(f.mean(axis=2)))[..., None], 3, axis=2) * 4 for f in context]
made = [np.clip((context[0] + c) / 2, 0, 255).astype(np.uint8) for c in control]
write_video(args.out, made + made[-1:] * (request["frames"] - len(made)), request["fps"], crf=0, pix_fmt="yuv444p")
