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


# ----------------------------------------------------------------------------- parity with NLTK and rouge-score

EDGE_PAIRS = [
    (REF, CAND), (REF, REF), (REF, "left camera"), ("pans", "pans pans pans pans"), ("a b a b a b", "a b a b"),
    ("The camera pans", "The camera pans right, then pans left, then tilts up slowly."),
    ("Zoom in 2x, then 3-D roll.", "zoom in 2x then 3 d roll"), ("Café crème: über-rapid dolly!", "cafe creme dolly"),
    ("İstanbul skyline; the camera tilts", "istanbul skyline the camera tilted"),
    ("flies dying lying skies news innings", "fly die lie sky news inning"),
    ("relational conditional hopefulness", "relate condition hopeful"), ("x", "y"), ("word", "word"),
    ("... !!!", "camera"), ("camera", "--- ???"), ("tracking tracked tracks tracker", "track"),
    ("yyyy yyyyy syzygy", "yyyy syzygy"), ("Ｆｕｌｌ-width ＣＡＭＥＲＡ", "full width camera"),
]


def _caption_pairs() -> list[tuple[str, str]]:
    """The edge cases, and every reference of the pinned caption data with its seed-0 synthetic caption."""
    from shared_data import shared_data

    from pinbench_recipes.camerabench.dataset import load_dataset
    from pinbench_recipes.camerabench.synthetic import synthetic_captions

    data_dir = shared_data("camerabench")
    if data_dir is None:
        return EDGE_PAIRS
    data = load_dataset(data_dir, ["caption"])
    captions = synthetic_captions(data, seed=0)
    return EDGE_PAIRS + [(s.reference, captions[s.sample_id].caption) for s in data.captions]


def test_bleu2_and_rouge_l_equal_nltk_and_rouge_score() -> None:
    """The values upstream's caption_evaluation.py computes with NLTK and rouge-score, to the bit."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    pairs = _caption_pairs()
    for reference, candidate in pairs:
        ref, cand = tokens(reference), tokens(candidate)
        theirs = (float(sentence_bleu([ref], cand, weights=(0.5, 0.5), smoothing_function=SmoothingFunction().method1))
                  if ref and cand else 0.0)
        assert bleu2(reference, candidate) == theirs, (reference, candidate)
        assert rouge_l(reference, candidate) == scorer.score(reference, candidate)["rougeL"].fmeasure, (reference,
                                                                                                        candidate)
    assert len({bleu2(r, c) for r, c in pairs}) > len(pairs) // 2  # the pairs are not all alike


def test_porter_stem_equals_nltk() -> None:
    """Every word of the caption data, and generated words that reach each step's rules and conditions."""
    import random
    import re

    from nltk.stem.porter import PorterStemmer

    from pinbench_recipes.camerabench.porter import stem

    words = {w for pair in _caption_pairs() for text in pair for w in re.findall(r"[a-z0-9]+", text.lower())}
    stems = ["happ", "relat", "condit", "valen", "hesit", "digit", "conform", "radic", "differ", "vil", "analog",
             "vietnam", "predic", "oper", "feud", "decis", "hope", "call", "form", "sensit", "sensib", "geo", "theo",
             "archaeo", "trip", "electr", "good", "reviv", "allow", "infer", "airlin", "gyroscop", "adjust", "defens",
             "irrit", "replac", "depend", "adopt", "homolog", "commun", "activ", "angular", "effect", "bowdler",
             "prob", "rat", "ceas", "control", "roll", "fli", "di", "ti", "spi", "plaster", "bl", "mot", "sing",
             "conflat", "troubl", "siz", "hopp", "tann", "fall", "hiss", "fizz", "fail", "fil", "fe", "agr", "cares",
             "pon", "cat", "toy", "syzyg", "yyy", "ay", "an", "o", "y", "eye", "play", "cry"]
    suffixes = ["", "s", "ies", "sses", "ss", "ed", "ied", "eed", "ing", "y", "ly", "ational", "tional", "enci",
                "anci", "izer", "bli", "alli", "entli", "eli", "ousli", "ization", "ation", "ator", "alism", "iveness",
                "fulness", "ousness", "aliti", "iviti", "biliti", "fulli", "logi", "icate", "ative", "alize", "iciti",
                "ical", "ful", "ness", "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent",
                "sion", "tion", "ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize", "e", "ll", "lled", "at", "bl",
                "iz", "ying", "yed"]
    words |= {a + b + c for a in stems for b in suffixes for c in ("", "s", "ed", "ing", "ness")}
    rng = random.Random(0)
    words |= {"".join(rng.choice("aeiouybcdlnrstz") for _ in range(rng.randint(1, 12))) for _ in range(20000)}
    words |= {"skies", "dying", "news", "innings", "exceed", "Skies", "CAT", "Happy", "I"}
    nltk_stemmer = PorterStemmer()
    # NLTK 3.9.1 (camerabench's lock) looks a word up in its irregular forms before lowercasing it ('Skies' -> 'ski'),
    # 3.10.4 (uv.lock's) after it ('sky'); the caption tokenizer lowercases first, so 3.9.1 is given lowercase words
    nltk_stem = nltk_stemmer.stem if nltk_stemmer.stem("Skies") == "sky" else lambda w: nltk_stemmer.stem(w.lower())
    differ = [(w, stem(w), nltk_stem(w)) for w in sorted(words) if stem(w) != nltk_stem(w)]
    assert not differ, f"{len(differ)} of {len(words)} words differ, e.g. {differ[:5]}"


def test_caption_metrics_do_not_import_nltk() -> None:
    """The point of computing them here: no NLTK (and so no scikit-learn or SciPy) in a caption run."""
    import subprocess
    import sys

    code = ("import sys; from pinbench_recipes.camerabench.caption_metrics import lexical_metrics; "
            "lexical_metrics('The camera pans left', 'camera panning left'); "
            "print(sorted(m for m in ('nltk', 'rouge_score', 'sklearn', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
