"""Deterministic small data for ``--fixture`` and the tests: a synthetic CameraBench and its score files.

``write_fixture`` lays out a data directory in the official layout and a score directory in the official
Script 1 shapes, written here as plain JSON (independently of this recipe's writer), the way a user's
upstream run would leave them (``build_fixture``: once per ``FIXTURE_VERSION`` for a run). The VQA scores
come as per-task files of one skill (Script 1 without ``--combine_tasks``), so the fixture also exercises the
pooling that upstream gets wrong. Every value below is chosen so the official formulas can be done by hand:

* Move_In, labels 1 1 0 0 0, scores .5 .5 .5 .5 .1: four tied at the top. AP = 2/4 = 0.5 (the tie
  enters at once: precision 2/4 at recall 1); AUC = (.5 + .5 + 1) * 2 / 6 = 2/3.
* Pan_Left, labels 1 0 1 0, scores 1.0 1.0 .9 .2 (saturated tie): AP = .5 * 1/2 + .5 * 2/3 = 7/12;
  AUC = (.5 + 1 + 0 + 1) / 4 = 0.625.
* Static, all "No": one class, so AP = AUC = 0 and it still counts: overall AP = (1/2 + 7/12 + 0) / 3
  = 13/36, overall AUC = (2/3 + 5/8 + 0) / 3 = 31/72.
* VQA (yes, no per combination, see ``_VQA``): complex_description pair 1 all right (4/4, 2/2,
  text, image, group), pair 2 a yes/no tie at (pos, pos) (ties are wrong: 3/4, 1/2, and text only);
  motion_direction pair 1 all right, pair 2 all wrong (0/4, 0/2), pair 3 image only with 2/4, 1/2.
  Per skill (binary_acc, question_acc, text, image, group): complex_description (7/8, 3/4, 1, 1/2, 1/2),
  motion_direction (1/2, 1/2, 1/3, 2/3, 1/3); overall = their means: 11/16, 5/8, 2/3, 7/12, 5/12.

``bit_frames`` makes tiny real videos whose frame index can be read back after decoding and resizing,
for the frame-sampling tests of Script 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pinbench.core.files import write_atomic
from pinbench.core.fixture_data import build_once

if TYPE_CHECKING:
    import numpy as np

SEED = 20261130
FIXTURE_VERSION = 1  # bump when the written files change: a run directory's fixture_data is reused otherwise
MODEL_NAME = "fixture-method"

# split -> rows of (video, label, score)
_BINARY: dict[str, list[tuple[str, str, float]]] = {
    "Move_In": [("a1.0.0.mp4", "Yes", 0.5), ("a2.0.0.mp4", "Yes", 0.5), ("a3.0.0.mp4", "No", 0.5),
                ("a4.0.0.mp4", "No", 0.5), ("a5.0.0.mp4", "No", 0.1)],
    "Pan_Left": [("a1.0.0.mp4", "Yes", 1.0), ("a2.0.0.mp4", "No", 1.0), ("a3.0.0.mp4", "Yes", 0.9),
                 ("a4.0.0.mp4", "No", 0.2)],
    "Static": [("a1.0.0.mp4", "No", 0.7), ("a5.0.0.mp4", "No", 0.3), ("b1.0.0.mp4", "No", 0.3)],
}
_QUESTIONS = {"Move_In": "Does the camera move forward?", "Pan_Left": "Does the camera pan left?",
              "Static": "Is the camera completely still without any motion or shaking?"}
_COMBOS = ("pos_text_pos_image", "pos_text_neg_image", "neg_text_pos_image", "neg_text_neg_image")
# (skill, task) -> pairs of (pos video, neg video, pos question, neg question, yes[4], no[4])
_VQA: dict[tuple[str, str], list[tuple[str, str, str, str, tuple[float, ...], tuple[float, ...]]]] = {
    ("complex_description", "all"): [
        ("a1.0.0.mp4", "a2.0.0.mp4", "Does the camera movement match 'pan left'?",
         "Does the camera movement match 'pan right'?", (0.9, 0.2, 0.1, 0.8), (0.1, 0.8, 0.9, 0.2)),
        ("a3.0.0.mp4", "a4.0.0.mp4", "Does the camera movement match 'dolly in'?",
         "Does the camera movement match 'dolly out'?", (0.5, 0.55, 0.2, 0.6), (0.5, 0.7, 0.8, 0.1)),
    ],
    ("motion_direction", "pan_left_vs_pan_right"): [
        ("a1.0.0.mp4", "a2.0.0.mp4", "Does the camera pan left?", "Does the camera pan right?",
         (0.8, 0.3, 0.2, 0.7), (0.2, 0.7, 0.8, 0.3)),
        ("a2.0.0.mp4", "a1.0.0.mp4", "Does the camera pan right?", "Does the camera pan left?",
         (0.2, 0.9, 0.9, 0.1), (0.8, 0.1, 0.1, 0.9)),
    ],
    ("motion_direction", "tilt_up_vs_tilt_down"): [
        ("b1.0.0.mp4", "a5.0.0.mp4", "Does the camera tilt up?", "Does the camera tilt down?",
         (0.6, 0.1, 0.65, 0.7), (0.3, 0.8, 0.3, 0.9)),
    ],
}
# video, reference, generated caption
_CAPTIONS = [
    ("a1.0.0.mp4", "The camera pans left.", "The camera pans left."),
    ("a2.0.0.mp4", "The camera pans right while moving forward.", "The camera moves forward and pans right."),
    ("a3.0.0.mp4", "The camera is static.", "A static shot of a city street."),
]
CAPTION_QUESTION = "Describe the camera movement in this video."


def build_fixture(root: Path) -> tuple[Path, Path]:
    """``write_fixture``'s two folders under ``root``, written once per fixture version (``build_once``): shards
    that start together write them once, and a rerun reads the very files it scored before."""
    build_once(root, FIXTURE_VERSION, _write)
    return root / "data", root / "scores"


def _write(folder: Path) -> None:
    write_fixture(folder)  # looked up when called: a test replaces write_fixture


def write_fixture(root: Path) -> tuple[Path, Path]:
    """Write ``root/data`` (official layout) and ``root/scores`` (official Script 1 shapes); return both."""
    data, scores = root / "data", root / "scores"
    for split, rows in _BINARY.items():
        _write_jsonl(data / "binary_classification" / f"{split}.jsonl", [
            {"image": video, "question": _QUESTIONS[split], "label": label, "task": split.replace("_", " "),
             "label_name": f"fixture.{split}"} for video, label, _ in rows])
        _write_json(scores / f"classification_scores_{MODEL_NAME}_{split}.json", {
            "metadata": {"model_name": MODEL_NAME, "checkpoint": None, "split_name": split,
                         "method_type": "Fixture_Method", "generation_timestamp": "2026-11-30T00:00:00"},
            "scores": [{"video_path": video, "question": _QUESTIONS[split], "ground_truth_label": label,
                        "method": MODEL_NAME, "score": score, "error": None} for video, label, score in rows]})
    for (skill, task), pairs in _VQA.items():
        _write_jsonl(data / "vqa_and_retrieval" / skill / f"{task}.jsonl", [
            {"skill": skill, "task": task, "images": [pv, nv], "texts": [pq, nq], "pos_video": pv, "neg_video": nv,
             "pos_text": pq, "neg_text": nq, "pos_question": pq, "neg_question": nq}
            for pv, nv, pq, nq, _, _ in pairs])
        _write_json(scores / f"vqa_retrieval_scores_{MODEL_NAME}_{skill}_{task}.json", {
            "metadata": {"model_name": MODEL_NAME, "checkpoint": None, "skill_name": skill.replace("_", " "),
                         "task_name": task.replace("_", " "), "combined_tasks": False,
                         "method_type": "Fixture_Method"},
            "scores": [{"pos_video": pv, "neg_video": nv, "pos_question": pq, "neg_question": nq,
                        "method": MODEL_NAME, "yes_scores": dict(zip(_COMBOS, yes, strict=True)),
                        "no_scores": dict(zip(_COMBOS, no, strict=True)), "error": None}
                       for pv, nv, pq, nq, yes, no in pairs]})
    _write_json(data / "caption_data.json",
                [{"video": v, "question": CAPTION_QUESTION, "answer": ref} for v, ref, _ in _CAPTIONS])
    _write_json(scores / f"caption_results_{MODEL_NAME}_20261130_000000.json", {
        "metadata": {"method_type": "Fixture_Method", "model_name": MODEL_NAME, "checkpoint": None},
        "captions": [{"sample_id": str(i), "video_path": v, "question": CAPTION_QUESTION, "reference_answer": ref,
                      "method": MODEL_NAME, "generated_caption": cap, "error": None}
                     for i, (v, ref, cap) in enumerate(_CAPTIONS)]})
    return data, scores


def _write_json(path: Path, value: Any) -> None:
    write_atomic(path, json.dumps(value, indent=1) + "\n")


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    write_atomic(path, "".join(json.dumps(row) + "\n" for row in rows))


def bit_frames(n_frames: int, height: int = 48, width: int = 64, bits: int = 8) -> np.ndarray:
    """(T, H, W, 3) frames whose index is written as ``bits`` vertical black/white bands."""
    import numpy as np  # 12 MB: a score-only run imports this module and never makes frames

    frames = np.zeros((n_frames, height, width, 3), np.uint8)
    band = width // bits
    for t in range(n_frames):
        for b in range(bits):
            if (t >> b) & 1:
                frames[t, :, b * band:(b + 1) * band] = 255
    return frames


def read_bits(frame: np.ndarray, bits: int = 8) -> int:
    """The index ``bit_frames`` wrote into a frame ((H, W, 3) or (3, H, W) or (H, W)), at any size."""
    import numpy as np

    array = np.asarray(frame, dtype=np.float64)
    if array.ndim == 3:
        array = array.mean(axis=0 if array.shape[0] == 3 else -1)
    band = array.shape[1] / bits
    return sum(1 << b for b in range(bits) if array[:, int((b + 0.5) * band)].mean() > 127)
