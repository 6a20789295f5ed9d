"""The five lexical caption metrics on hand-computed examples."""

from __future__ import annotations

import math

import pytest

from pinbench_recipes.camerabench.caption_metrics import (
    LEXICAL,
    UPSTREAM_NAMES,
    bleu2,
    bow_cosine,
    lexical_metrics,
    meteor_simplified,
    rouge_l,
    tokens,
    word_f1,
)

REF = "The camera pans right, then pans left."
CAND = "Camera pans left!"


def test_tokens_lowercase_strip_punctuation() -> None:
    assert tokens(REF) == ["the", "camera", "pans", "right", "then", "pans", "left"]
    assert tokens("It's 3-D.") == ["its", "3d"]


def test_word_f1_uses_sets() -> None:
    # ref set {the, camera, pans, right, then, left} (6), cand {camera, pans, left} (3), common 3
    assert word_f1(REF, CAND) == pytest.approx(2 * 1.0 * 0.5 / 1.5)
    assert word_f1(REF, "...") == 0.0


def test_bow_cosine_uses_counts() -> None:
    # ref counts: the1 camera1 pans2 right1 then1 left1 -> |ref| = sqrt(9) = 3; cand all 1 -> sqrt(3)
    # dot = camera 1 + pans 2 + left 1 = 4
    assert bow_cosine(REF, CAND) == pytest.approx(4 / (3 * math.sqrt(3)))


def test_meteor_simplified() -> None:
    # unigram sets: 3 matches of cand 3 / ref 6; bigrams: cand {camera pans, pans left}, both in the
    # ref's 6 distinct bigrams -> 2 matches of cand 2 / ref 6
    p = 0.8 * 3 / 3 + 0.2 * 2 / 2
    r = 0.8 * 3 / 6 + 0.2 * 2 / 6
    assert meteor_simplified(REF, CAND) == pytest.approx(10 * p * r / (r + 9 * p))


def test_bleu2_with_brevity_penalty() -> None:
    # p1 = 3/3 (clipped counts), p2 = 2/2 (camera pans, pans left); c = 3, r = 7 -> BP = exp(1 - 7/3)
    expected = math.exp(1 - 7 / 3) * math.sqrt(1.0 * 1.0)
    assert bleu2(REF, CAND) == pytest.approx(expected)


def test_bleu2_smoothing_method1_when_no_bigram_matches() -> None:
    # the one bigram "left camera" does not match: method1 replaces the 0 count by epsilon 0.1 -> p2 = 0.1 / 1
    expected = math.exp(1 - 7 / 2) * math.sqrt(1.0 * 0.1)
    assert bleu2(REF, "left camera") == pytest.approx(expected)


def test_rouge_l_stems_and_uses_lcs() -> None:
    # stemmed tokens: ref [the camera pan right then pan left], cand [camera pan left]; LCS 3
    p, r = 3 / 3, 3 / 7
    assert rouge_l(REF, CAND) == pytest.approx(2 * p * r / (p + r))


def test_rouge_l_matches_word_forms_through_the_stemmer() -> None:
    # "pans" and "panning" both stem to "pan": LCS 3 of 4 reference and 3 candidate tokens (2 without stemming)
    p, r = 3 / 3, 3 / 4
    assert rouge_l("The camera pans left", "camera panning left") == pytest.approx(2 * p * r / (p + r))


def test_identical_caption_scores_one_everywhere() -> None:
    assert lexical_metrics(REF, REF) == pytest.approx(dict.fromkeys(LEXICAL, 1.0))


def test_empty_texts_are_not_scored() -> None:
    with pytest.raises(ValueError):
        lexical_metrics(REF, "")


def test_upstream_names_cover_every_metric() -> None:
    assert set(UPSTREAM_NAMES) == {*LEXICAL, "gen_match"}
    assert UPSTREAM_NAMES["word_f1"] == "spice" and UPSTREAM_NAMES["bow_cosine"] == "cider"
