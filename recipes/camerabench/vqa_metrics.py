"""VQA accuracy and Winoground-style retrieval of one pair, and their means over a skill.

As ``vqa_and_retrieval_evaluation.py`` defines them. A pair has a pos question (true of the pos video)
and a neg question (true of the neg video); every (question, video) combination has P(Yes) and
P(No), each the model's probability of that answer's first token (``no`` is not 1 - ``yes``).

* VQA: a decision is correct when the right answer has the strictly larger probability (ties are
  wrong; there is no 0.5 threshold). ``binary_acc`` = correct decisions / 4; ``question_acc``
  counts a question as correct when it is answered right on both videos (/2), so chance is 25%.
* Retrieval uses P(Yes) only: ``text`` is right when each video prefers its own question, ``image``
  when each question prefers its own video, ``group`` when both hold.

Per skill every value is the mean over its pairs; the official overall value is the unweighted mean
over skills.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

COMBOS = ("pos_text_pos_image", "pos_text_neg_image", "neg_text_pos_image", "neg_text_neg_image")
SKILL_KEYS = ("binary_acc", "question_acc", "text", "image", "group")


class NonFiniteScore(ValueError):
    """A probability is NaN or infinite: the sample failed (the file itself is well formed)."""


def check_scores(scores: Any, what: str, *, finite: bool = True) -> dict[str, float]:
    """The four probabilities of one answer as floats; ValueError naming what is missing or outside [0, 1],
    NonFiniteScore (unless ``finite`` is False: then NaN and infinities are returned as they are)."""
    if not isinstance(scores, Mapping):
        raise ValueError(f"{what} must be an object with {', '.join(COMBOS)}, got {type(scores).__name__}")
    out = {}
    for combo in COMBOS:
        value = scores.get(combo)
        if type(value) is float and 0.0 <= value <= 1.0:  # the common case, all checks passed (NaN fails them)
            out[combo] = value
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{what}.{combo} must be a number, got {value!r:.40}")
        if finite and not math.isfinite(value):
            raise NonFiniteScore(f"{what}.{combo} is not finite ({value})")
        if math.isfinite(value) and not 0.0 <= value <= 1.0:
            raise ValueError(f"{what}.{combo} is {value}, outside [0, 1]: Script 1 writes the probability of "
                             "the answer's first token")
        out[combo] = float(value)
    return out


def pair_outcome(yes: Mapping[str, float], no: Mapping[str, float]) -> dict[str, int]:
    """Counts of correct VQA decisions (0-4) and questions (0-2), and the 0/1 retrieval outcomes."""
    pos_on_pos = yes["pos_text_pos_image"] > no["pos_text_pos_image"]
    pos_on_neg = no["pos_text_neg_image"] > yes["pos_text_neg_image"]
    neg_on_pos = no["neg_text_pos_image"] > yes["neg_text_pos_image"]
    neg_on_neg = yes["neg_text_neg_image"] > no["neg_text_neg_image"]
    text = (yes["pos_text_pos_image"] > yes["neg_text_pos_image"]
            and yes["neg_text_neg_image"] > yes["pos_text_neg_image"])
    image = (yes["pos_text_pos_image"] > yes["pos_text_neg_image"]
             and yes["neg_text_neg_image"] > yes["neg_text_pos_image"])
    return {
        "binary_correct": int(pos_on_pos) + int(pos_on_neg) + int(neg_on_pos) + int(neg_on_neg),
        "question_correct": int(pos_on_pos and pos_on_neg) + int(neg_on_pos and neg_on_neg),
        "text": int(text),
        "image": int(image),
        "group": int(text and image),
    }


def skill_metrics(outcomes: Sequence[Mapping[str, int]]) -> dict[str, Any]:
    """Means over the pairs of one skill (each pair weighs the same); ValueError when there are none."""
    n = len(outcomes)
    if n == 0:
        raise ValueError("a skill needs at least one pair")
    return {
        "binary_acc": sum(o["binary_correct"] for o in outcomes) / (4 * n),
        "question_acc": sum(o["question_correct"] for o in outcomes) / (2 * n),
        "text": sum(o["text"] for o in outcomes) / n,
        "image": sum(o["image"] for o in outcomes) / n,
        "group": sum(o["group"] for o in outcomes) / n,
        "num_samples": n,
    }
