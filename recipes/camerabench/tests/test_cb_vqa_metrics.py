"""VQA decisions (strict yes > no, P(No) on its own), question accuracy and Winoground retrieval."""

from __future__ import annotations

import pytest

from pinbench_recipes.camerabench.vqa_metrics import (
    COMBOS,
    NonFiniteScore,
    check_scores,
    pair_outcome,
    skill_metrics,
)


def scores(ppi: float, pni: float, npi: float, nni: float) -> dict[str, float]:
    return dict(zip(COMBOS, (ppi, pni, npi, nni), strict=True))


def test_all_right() -> None:
    out = pair_outcome(scores(0.9, 0.2, 0.1, 0.8), scores(0.1, 0.8, 0.9, 0.2))
    assert out == {"binary_correct": 4, "question_correct": 2, "text": 1, "image": 1, "group": 1}


def test_a_yes_no_tie_is_wrong() -> None:
    out = pair_outcome(scores(0.5, 0.55, 0.2, 0.6), scores(0.5, 0.7, 0.8, 0.1))
    assert out["binary_correct"] == 3
    assert out["question_correct"] == 1  # the pos question fails on the pos video (tie)
    assert (out["text"], out["image"], out["group"]) == (1, 0, 0)


def test_no_is_its_own_probability_not_one_minus_yes() -> None:
    # yes = 0.3 on (pos question, pos video) is right only because P(No) = 0.2 is lower still
    out = pair_outcome(scores(0.3, 0.1, 0.1, 0.3), scores(0.2, 0.5, 0.5, 0.2))
    assert out["binary_correct"] == 4
    out = pair_outcome(scores(0.3, 0.1, 0.1, 0.3), scores(0.4, 0.5, 0.5, 0.2))
    assert out["binary_correct"] == 3


def test_question_needs_both_videos_and_retrieval_uses_yes_only() -> None:
    yes = scores(0.6, 0.1, 0.65, 0.7)
    out = pair_outcome(yes, scores(0.3, 0.8, 0.3, 0.9))
    assert (out["binary_correct"], out["question_correct"]) == (2, 1)
    assert (out["text"], out["image"], out["group"]) == (0, 1, 0)
    # changing P(No) never changes retrieval
    assert pair_outcome(yes, scores(0.99, 0.99, 0.99, 0.99))["image"] == 1
    flat_no = pair_outcome(scores(0.9, 0.2, 0.1, 0.8), scores(0.5, 0.5, 0.5, 0.5))
    assert (flat_no["text"], flat_no["image"], flat_no["group"]) == (1, 1, 1)


def test_skill_means() -> None:
    outs = [{"binary_correct": 4, "question_correct": 2, "text": 1, "image": 1, "group": 1},
            {"binary_correct": 0, "question_correct": 0, "text": 0, "image": 0, "group": 0},
            {"binary_correct": 2, "question_correct": 1, "text": 0, "image": 1, "group": 0}]
    m = skill_metrics(outs)
    assert m["binary_acc"] == pytest.approx(6 / 12)
    assert m["question_acc"] == pytest.approx(3 / 6)
    assert (m["text"], m["image"], m["group"]) == pytest.approx((1 / 3, 2 / 3, 1 / 3))
    with pytest.raises(ValueError):
        skill_metrics([])


def test_check_scores() -> None:
    assert check_scores(scores(1, 0, 0.5, 0.25), "yes") == scores(1.0, 0.0, 0.5, 0.25)
    with pytest.raises(ValueError, match="yes.neg_text_neg_image must be a number"):
        check_scores({k: 0.1 for k in COMBOS[:3]}, "yes")
    with pytest.raises(ValueError, match="must be a number"):
        check_scores(scores(True, 0, 0, 0), "yes")
    with pytest.raises(NonFiniteScore):
        check_scores(scores(float("nan"), 0, 0, 0), "yes")
    with pytest.raises(ValueError, match="must be an object"):
        check_scores([0.1, 0.2, 0.3, 0.4], "no")
