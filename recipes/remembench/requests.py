"""RememBench's generation requests: one per row of the cohort a run scores, with every setting the paper fixes.

T2V (``prompt-schedule``): the scene's four prompts at their nominal start seconds (appears, disappears, remains out
of sight, reappears), the exact seed as the release's decimal string, 379 frames at 24 fps, 1376 x 768, and the
decoded chunk layout Drift reads (frames 0-4, then 22 chunks of 17). I2V (``image-camera``): the scene's prompt, its
initial frame as ``i2v_images`` prepares it from DL3DV (832 x 480 centre crop, Lanczos; the SHA-256 of its RGB
pixels checked against the release's ``sources/i2v_images.jsonl`` where the release has one), the trajectory
``.npz`` (per-frame c2w poses and intrinsics at 832 x 480), 253 frames at 16 fps, and the paper's resampling of
the trajectory to 64 latent positions (slerp for rotations, linear for positions) as the conditioning to follow.
A rollout goes to ``<sample_id>.mp4``, where the scorer looks for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pinbench.core.config import RecipeError
from pinbench.core.generation import Prompt, Request, staged
from pinbench.core.inputs import InputDigests
from pinbench_recipes.remembench.dataset import I2VRow, T2VRow
from pinbench_recipes.remembench.i2v_images import SOURCES_FILE, read_sources, rgb_sha256
from pinbench_recipes.remembench.prepare import Group
from pinbench_recipes.remembench.release import Release
from pinbench_recipes.remembench.trajectory import LATENT_POSITIONS


def build(groups: Sequence[Group], *, release: Release, images: Path | None, root: Path,
          digests: InputDigests) -> list[Request]:
    """The requests of every row of ``groups``, their files under ``root`` (``pinbench.core.generation.staged``)."""
    sources = read_sources(release.path(SOURCES_FILE)) if (release.root / SOURCES_FILE).is_file() else None
    requests = []
    for group in groups:
        layout = [list(chunk) for chunk in group.paper.chunk_layout()]
        for row in group.rows:
            common = dict(id=row.sample_id, recipe="remembench", output=f"{row.sample_id}.mp4", frames=row.num_frames,
                          fps=row.fps, width=row.width, height=row.height, seed=row.seed_text)
            settings = {"split": group.split, "chunk_layout": layout, "num_chunks": row.num_chunks,
                        "denoising_steps_per_chunk": row.denoising_steps_per_chunk}
            if isinstance(row, T2VRow):
                requests.append(Request(kind="prompt-schedule", **common, settings={
                    **settings, "scene_id": row.scene_id, "target_description": row.target_description},
                    prompts=tuple(Prompt(text, start) for text, start in zip(row.prompts, row.prompt_start_seconds,
                                                                             strict=True))))
            elif isinstance(row, I2VRow):
                requests.append(_i2v(row, common, settings, release, images, sources, root, digests))
    return requests


def _i2v(row: I2VRow, common: dict, settings: dict, release: Release, images: Path | None, sources: dict | None,
         root: Path, digests: InputDigests) -> Request:
    from PIL import Image

    if images is None:
        raise RecipeError("remembench: I2V requests need the prepared initial frames: -o images=DIR "
                          "(python -m pinbench_recipes.remembench.i2v_images --out DIR)")
    image = images / row.image_path
    if not image.is_file():
        raise RecipeError(f"{image}: no prepared initial frame for {row.sample_id} (-o images=DIR; "
                          "python -m pinbench_recipes.remembench.i2v_images prepares them)")
    with Image.open(image) as picture:
        pixels = rgb_sha256(picture)
        size = picture.size
    expected = sources[row.scene_id].rgb_sha256 if sources is not None and row.scene_id in sources else None
    if expected is not None and pixels != expected:
        raise RecipeError(f"{image}: its RGB pixels hash to {pixels}, {SOURCES_FILE} pins {expected}")
    if size != (row.width, row.height):
        raise RecipeError(f"{image}: {size[0]}x{size[1]}, the split's frames are {row.width}x{row.height}")
    trajectory = release.path(row.trajectory_path)
    return Request(kind="image-camera", **common, prompts=(Prompt(row.prompt),), settings={
        **settings, "scene_id": row.scene_id, "setting": row.setting, "translation": row.translation,
        "initial_frame_rgb_sha256": pixels, "latent_positions": LATENT_POSITIONS,
        "trajectory_resampling": "linspace(0, N-1, 64) over the poses: slerp of rotations (quaternion signs made "
                                 "continuous), linear positions; intrinsics [fx, fy, cx, cy] at 832x480"},
        conditioning=(staged("initial_frame", image, root, digests),
                      staged("trajectory", trajectory, root, digests)))
