"""PAI-Bench-C's generation requests: one ``control-video`` request per task and modality.

Each holds what cosmos-framework's input row holds (``rows.py``: the seed's sampling settings, the task's caption,
negative prompt, fps, seed and aspect ratio, the modality's control guidance and hint) and the files it reads: the
task's GT video as context (the first frame conditions the rollout, ``num_conditional_frames: 1``; edge and blur
controls are computed from it) and, for depth and segmentation, the dataset's precomputed control video. A rollout
is 121 frames at the task's fps and the 720 tier's size for its aspect ratio (1104 x 832 for 4:3, 1280 x 720 for
16:9, cosmos-framework's ``docs/inference.md``); it goes to ``<modality>/<task>.mp4``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pinbench.core.config import RecipeError
from pinbench.core.generation import Prompt, Request, staged
from pinbench.core.inputs import InputDigests
from pinbench_recipes.paibench_c.generate import row_key
from pinbench_recipes.paibench_c.rows import NUM_FRAMES, PRECOMPUTED_CONTROL, Task, build_row

SIZE_720 = {"4,3": (1104, 832), "16,9": (1280, 720)}   # the aspect ratios tasks.json uses


def build(tasks: Sequence[Task], modalities: Sequence[str], dataset_dir: Path, *, root: Path,
          digests: InputDigests, frames: int = NUM_FRAMES,
          size: tuple[int, int] | None = None) -> list[Request]:
    """The requests of every task in every modality, modality by modality (``size``: the fixture's own)."""
    requests = []
    for modality in modalities:
        for task in tasks:
            vision = dataset_dir / task.video_path
            files = [staged("context", vision, root, digests)]
            if modality in PRECOMPUTED_CONTROL:
                control = dataset_dir / task.control_path(modality)
                files.append(staged("control", control, root, digests))
            if size is None and task.aspect_ratio not in SIZE_720:
                raise RecipeError(f"{task.task_id}: aspect ratio {task.aspect_ratio}: its 720-tier size is not "
                                  f"known here (known: {', '.join(SIZE_720)})")
            width, height = size or SIZE_720[task.aspect_ratio]
            requests.append(Request(
                id=f"{modality}.{task.task_id}", kind="control-video", recipe="paibench-c",
                output=f"{modality}/{task.task_id}.mp4", frames=frames, fps=task.fps, width=width, height=height,
                seed=str(task.seed), prompts=(Prompt(task.prompt),), negative_prompt=task.negative_prompt,
                conditioning=tuple(files),
                settings={"modality": modality, "aspect_ratio": task.aspect_ratio,
                          "row": row_key(build_row(task, modality, dataset_dir), dataset_dir)}))
    return requests
