"""Fixture mode: a small synthetic RememBench release, rollouts and evaluator weights, all seeded.

What is real: the row validation, the release checksums, the decoder, TempSSIM, Drift (chunk layout,
four frames per chunk, BGR input), the I2V revisit selection from camera poses, the CLIP and LPIPS
loading code paths and the aggregation. What is a stand-in (test double): the rows and videos are
synthetic (64 x 48 px, the paper's frame counts and chunk layouts), CLIP is a two-layer ViT with
seeded random weights in the open_clip file format, the LPIPS AlexNet trunk is seeded random, and
the I2V camera poses are constructed instead of reconstructed by Pi3X. Weights are drawn from numpy
generators (not torch's initialisers) so the files are identical across torch versions.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from scipy.spatial.transform import Rotation

from pinbench.core.files import sha256_file
from pinbench.core.fixture_data import build_once
from pinbench.media.video import write_video
from pinbench_recipes.remembench.dataset import I2V_PAPER, T2V_PAPER, PaperSettings

SEED = 20260521
VERSION = 4  # bump when the generated data changes
FIXTURE_CRF = 0  # lossless H.264 (CRF 0 is QP 0 for 8-bit libx264): decoders get back the encoder's YUV planes
WIDTH, HEIGHT = 64, 48
T2V = PaperSettings("t2v", T2V_PAPER.num_frames, 24, WIDTH, HEIGHT, 23, 4, 5, 17, n_rows=3)
I2V = PaperSettings("i2v", I2V_PAPER.num_frames, 16, WIDTH, HEIGHT, 16, 4, 13, 16, n_rows=4, latent_frames=64)
SETTINGS = ("rotation_180", "translation_180")
T2V_SEEDS = ("9007199254740993", "18446744073709551615", "42")  # 2^53 + 1 and 2^64 - 1 survive as ints
# (sample_id, scene_id, scene_type, setting, direction)
I2V_SAMPLES = (("s01-rot180", "s01", "indoor", "rotation_180", "left"),
               ("s02-rot180", "s02", "outdoor", "rotation_180", "right"),
               ("s02-tr180", "s02", "outdoor", "translation_180", "left"),
               ("s03-tr180", "s03", "outdoor", "translation_180", "right"))
BASE_ROTATION = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])  # camera looks along world +y
TINY_CLIP = {
    "model_cfg": {"embed_dim": 16,
                  "vision_cfg": {"image_size": 32, "layers": 2, "width": 32, "head_width": 16, "patch_size": 8},
                  "text_cfg": {"context_length": 8, "vocab_size": 64, "width": 16, "heads": 2, "layers": 1}},
    "preprocess_cfg": {"mean": [0.48145466, 0.4578275, 0.40821073],
                       "std": [0.26862954, 0.26130258, 0.27577711]},
}


@dataclass(frozen=True)
class FixtureData:
    root: Path
    dataset_dir: Path
    videos: Path
    annotations: Path
    poses_dir: Path
    clip_dir: Path
    clip_sha256: str
    lpips_trunk: Path
    lpips_sha256: str
    paper: dict[str, PaperSettings]
    images: Path   # the I2V initial frames, prepared as i2v_images.py prepares DL3DV's (<image_path> under it)


def _triangle(n: int) -> np.ndarray:
    """0 -> 1 -> 0 over n samples, peak in the middle (an out-and-back camera path)."""
    u = np.linspace(0.0, 1.0, n)
    return 1.0 - np.abs(2.0 * u - 1.0)


def _smooth_field(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A seeded, smooth uint8 RGB texture with a few bright blobs (something for CLIP and SSIM to see)."""
    coarse = rng.uniform(0, 255, (max(2, height // 8), max(2, width // 8), 3)).astype(np.float32)
    field = cv2.resize(coarse, (width, height), interpolation=cv2.INTER_CUBIC)
    for _ in range(6):
        cx, cy, r = rng.integers(0, width), rng.integers(0, height), int(rng.integers(3, 8))
        cv2.circle(field, (int(cx), int(cy)), r, tuple(float(c) for c in rng.uniform(0, 255, 3)), -1)
    return np.clip(field, 0, 255).astype(np.uint8)


def t2v_frames(rng: np.random.Generator) -> np.ndarray:
    """A slow pan over a texture with a square that appears, leaves, stays away and comes back."""
    n = T2V.num_frames
    panorama = _smooth_field(rng, HEIGHT, WIDTH * 2)
    colour = tuple(int(c) for c in rng.integers(0, 256, 3))
    starts = [int(s * T2V.fps) for s in (0.0, 3.6, 6.2, 11.2)]
    frames = np.empty((n, HEIGHT, WIDTH, 3), np.uint8)
    for t, offset in enumerate((_triangle(n) * WIDTH * 0.5).round().astype(int)):
        frame = panorama[:, offset : offset + WIDTH].copy()
        if t < starts[1] or t >= starts[3]:
            cv2.rectangle(frame, (22, 14), (42, 34), colour, -1)
        frames[t] = frame
    return frames


def i2v_poses(rng: np.random.Generator, setting: str, direction: str, n: int) -> np.ndarray:
    """Out-and-back camera-to-world poses: a yaw turn (rotation) or a dolly forward (translation)."""
    kind, degrees = setting.split("_")
    sign = 1.0 if direction == "left" else -1.0
    tri = _triangle(n)
    # rotation: turn out and back, overshooting the start by 20 degrees at the end (a rollout that does
    # not land exactly where it began), so the revisit is where the return crosses the start
    overshoot = 20.0 * np.clip((np.linspace(0.0, 1.0, n) - 0.8) / 0.2, 0.0, 1.0)
    yaw = sign * np.radians(float(degrees) * tri - overshoot) if kind == "rotation" else np.zeros(n)
    yaw = yaw + np.radians(rng.normal(0.0, 0.4, n))  # reconstruction-like jitter
    poses = np.tile(np.eye(4), (n, 1, 1))
    poses[:, :3, :3] = Rotation.from_euler("z", yaw[:, None]).as_matrix() @ BASE_ROTATION
    poses[:, :3, 3] = [0.0, 0.0, 1.5]
    if kind == "translation":
        poses[:, 1, 3] += tri * 2.0 + rng.normal(0.0, 0.01, n)
    return poses


def i2v_frames(rng: np.random.Generator, poses: np.ndarray, translation: bool) -> np.ndarray:
    """Views of a 360-degree texture following the poses' yaw (and a zoom for the dolly)."""
    pano_width = WIDTH * 6
    panorama = _smooth_field(rng, HEIGHT, pano_width)
    wrapped = np.concatenate([panorama, panorama], axis=1)
    forward = poses[:, :3, 2]
    yaw = np.degrees(np.arctan2(-forward[:, 0], forward[:, 1]))
    frames = np.empty((len(poses), HEIGHT, WIDTH, 3), np.uint8)
    for t in range(len(poses)):
        x0 = int(round((yaw[t] % 360.0) / 360.0 * pano_width))
        view = wrapped[:, x0 : x0 + WIDTH]
        if translation:
            zoom = 1.0 + 0.6 * (poses[t, 1, 3] - poses[0, 1, 3]) / 2.0
            w, h = max(8, int(WIDTH / zoom)), max(6, int(HEIGHT / zoom))
            top, left = (HEIGHT - h) // 2, (WIDTH - w) // 2
            view = cv2.resize(view[top : top + h, left : left + w], (WIDTH, HEIGHT), interpolation=cv2.INTER_AREA)
        brighter = view.astype(np.int16) + int(round(16 * t / len(poses)))  # slow lighting drift
        frames[t] = np.clip(brighter, 0, 255).astype(np.uint8)
    return frames


def _fixture_weights(rng: np.random.Generator, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """Seeded weights of a sensible scale: ones for norm gains, fan-in scaled matrices, small biases."""
    if len(shape) <= 1:
        centre = 1.0 if ("ln" in name and name.endswith("weight")) else 0.0
        return np.asarray(centre + 0.1 * rng.standard_normal(shape), dtype=np.float32)
    if name.endswith("proj") or name.endswith("projection"):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
    if "embedding" in name:
        return (0.5 * rng.standard_normal(shape)).astype(np.float32)
    return (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)


def write_tiny_clip(folder: Path, seed: int = SEED) -> str:
    """open_clip_config.json + open_clip_model.safetensors of a tiny CLIP; returns the weights' SHA-256."""
    import open_clip
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "open_clip_config.json").write_text(json.dumps(TINY_CLIP, indent=2) + "\n")
    with torch.device("meta"):
        model = open_clip.model.CLIP(**TINY_CLIP["model_cfg"])
    rng = np.random.default_rng(seed)
    state = {k: torch.from_numpy(_fixture_weights(rng, k, tuple(v.shape)))
             for k, v in sorted(model.state_dict().items())}
    save_file(state, str(folder / "open_clip_model.safetensors"))
    return sha256_file(folder / "open_clip_model.safetensors")


def _savez(path: Path, **arrays: np.ndarray) -> None:
    """``np.savez`` that gives the same bytes for the same arrays under every Python: the poses are an input, keyed
    by their SHA-256.

    Why: ``np.savez`` streams each member with ``force_zip64``, and the header that writes changed between Python
    releases: 3.11.7 (a host) wrote zip64 fields (version 45) where 3.11.2 (Debian's, in an image) wrote version 20,
    so the host and the image keyed the same poses differently. ``writestr`` of a small member writes no zip64."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, array in arrays.items():
            member = io.BytesIO()
            np.save(member, array, allow_pickle=False)
            archive.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0)), member.getvalue())


def write_random_alexnet(path: Path, seed: int = SEED) -> str:
    """An AlexNet trunk file with seeded weights (``write_alexnet_trunk``); returns its SHA-256."""
    import torch

    from pinbench.media.lpips import write_alexnet_trunk  # torch: not for what reads the fixture's layout

    rng = np.random.default_rng(seed + 1)
    return write_alexnet_trunk(path, lambda kind, shape: torch.from_numpy(
        _fixture_weights(rng, "conv" if kind == "weight" else "bias", shape)))


def _t2v_rows() -> list[dict]:
    return [{"scene_id": f"t2v-{i:03d}", "source_index": 10 * i, "target_description": f"a coloured block {i}",
             "prompts": [f"block {i} appears", f"block {i} leaves", "the room stays empty", f"block {i} returns"],
             "prompt_start_seconds": [0.0, 3.6, 6.2, 11.2], "seed": seed, "num_frames": T2V.num_frames,
             "fps": T2V.fps, "width": WIDTH, "height": HEIGHT, "num_chunks": T2V.num_chunks,
             "denoising_steps_per_chunk": 4} for i, seed in enumerate(T2V_SEEDS)]


def _i2v_row(sample_id: str, scene: str, scene_type: str, setting: str, direction: str) -> dict:
    kind, degrees = setting.split("_")
    return {"sample_id": sample_id, "scene_id": scene, "scene_type": scene_type, "prompt": f"synthetic {scene}",
            "image_path": f"images/{scene}.png", "trajectory_path": f"trajectories/{sample_id}.npz",
            "setting": setting, "rotation_degrees": int(degrees), "direction": direction,
            "translation": kind == "translation", "seed": "0", "num_frames": I2V.num_frames, "fps": I2V.fps,
            "width": WIDTH, "height": HEIGHT, "num_chunks": I2V.num_chunks, "latent_frames": 64,
            "denoising_steps_per_chunk": 4, "pose_samples": 257, "intrinsics_samples": 1}


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _layout(root: Path, clip_sha256: str = "", lpips_sha256: str = "") -> FixtureData:
    return FixtureData(root=root, dataset_dir=root / "RememBench", videos=root / "rollouts",
                       annotations=root / "annotations.json", poses_dir=root / "poses", clip_dir=root / "clip",
                       clip_sha256=clip_sha256, lpips_trunk=root / "alexnet-random.pth", lpips_sha256=lpips_sha256,
                       paper={"t2v": T2V, "i2v": I2V}, images=root / "i2v-images")


def build_fixture(root: Path) -> FixtureData:
    """The fixture under ``root``, written once per fixture version (``build_once``): shards that start together
    write it once, a rerun finds the very files it scored before, and no process reads a half-written one."""
    saved = build_once(root, VERSION, _write_fixture, stamp="manifest.json")
    return _layout(root, saved["clip_sha256"], saved["lpips_sha256"])


def _write_fixture(root: Path) -> dict[str, object]:
    """Every fixture file under ``root``: release, rollouts, annotations, poses, weights; returns what the
    manifest (the stamp) keeps."""
    data = _layout(root)
    rng = np.random.default_rng(SEED)
    release = data.dataset_dir
    t2v_rows = _t2v_rows()
    _write_jsonl(release / "data/t2v/test.jsonl", t2v_rows)
    _write_jsonl(release / "data/i2v/test.jsonl", [_i2v_row(*s) for s in I2V_SAMPLES])
    annotations = {}
    for row in t2v_rows:
        write_video(data.videos / f"{row['scene_id']}.mp4", t2v_frames(rng), T2V.fps, crf=FIXTURE_CRF)
        annotations[row["scene_id"]] = {"departure_frame": 40, "revisit_frame": int(rng.integers(290, 370))}
    data.annotations.write_text(json.dumps(annotations, indent=2) + "\n")
    (release / "trajectories").mkdir(parents=True, exist_ok=True)
    data.poses_dir.mkdir(parents=True, exist_ok=True)
    for sample_id, _scene, _type, setting, direction in I2V_SAMPLES:
        source = i2v_poses(rng, setting, direction, 257)  # the input trajectory a generator would follow
        _savez(release / "trajectories" / f"{sample_id}.npz", poses=source.astype(np.float32),
               intrinsics=np.array([[60.0, 60.0, 32.0, 24.0]], np.float32))
        poses = i2v_poses(rng, setting, direction, I2V.num_frames)  # stands in for Pi3X's reconstruction
        _savez(data.poses_dir / f"{sample_id}.npz", poses=poses, idx=np.arange(len(poses)))
        frames = i2v_frames(rng, poses, setting.startswith("translation"))
        write_video(data.videos / f"{sample_id}.mp4", frames, I2V.fps, crf=FIXTURE_CRF)
    files = sorted(p for p in release.rglob("*") if p.is_file() and p.name != "checksums.sha256")
    (release / "checksums.sha256").write_text(
        "".join(f"{sha256_file(p)}  {p.relative_to(release).as_posix()}\n" for p in files))
    clip_sha = write_tiny_clip(data.clip_dir)
    lpips_sha = write_random_alexnet(data.lpips_trunk)
    _write_initial_frames(data.images)
    return {"seed": SEED, "clip_sha256": clip_sha, "lpips_sha256": lpips_sha}


def _write_initial_frames(folder: Path) -> None:
    """One prepared initial frame per I2V scene (its own generator: the rollouts above keep their bytes)."""
    from PIL import Image

    rng = np.random.default_rng([SEED, 4])
    for scene in sorted({scene for _, scene, *_ in I2V_SAMPLES}):
        (folder / "images").mkdir(parents=True, exist_ok=True)
        Image.fromarray(_smooth_field(rng, HEIGHT, WIDTH)).save(folder / "images" / f"{scene}.png")
