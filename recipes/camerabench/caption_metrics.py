"""Caption metrics exactly as ``caption_evaluation.py`` computes them, under names that say what they are.

Upstream calls five lexical scores "spice", "cider", "bleu2", "rouge_l" and "meteor"; three of those
names belong to other metrics. Here each keeps its upstream formula and gets an honest name:

| here | upstream key | what it is |
|---|---|---|
| ``word_f1`` | ``spice`` | F1 of the word *sets* (lowercased, punctuation stripped, split on whitespace); not SPICE |
| ``bow_cosine`` | ``cider`` | cosine of bag-of-words count vectors of the same tokens; not CIDEr |
| ``bleu2`` | ``bleu2`` | NLTK ``sentence_bleu`` on the same tokens, weights (0.5, 0.5), smoothing method1 |
| ``rouge_l`` | ``rouge_l`` | ``rouge_score`` ROUGE-L F-measure with the Porter stemmer, on the raw strings |
| ``meteor_simplified`` | ``meteor`` | 10PR/(R+9P), P and R = 0.8 unigram + 0.2 bigram set overlap (no stemming, |
| | | synonyms or fragmentation penalty) |

Only rows with no error and a non-empty reference and caption are scored upstream; this recipe counts
the others as failed samples instead of leaving them out silently.
"""

from __future__ import annotations

import math
import string
from collections import Counter
from functools import lru_cache
from typing import Any

LEXICAL = ("word_f1", "bow_cosine", "bleu2", "rouge_l", "meteor_simplified")
UPSTREAM_NAMES = {"word_f1": "spice", "bow_cosine": "cider", "bleu2": "bleu2", "rouge_l": "rouge_l",
                  "meteor_simplified": "meteor", "gen_match": "gen_match"}
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def tokens(text: str) -> list[str]:
    """Upstream's preprocessing: lowercase, delete ASCII punctuation, split on whitespace."""
    return text.lower().translate(_PUNCTUATION).split()


def word_f1(reference: str, candidate: str) -> float:
    ref, cand = set(tokens(reference)), set(tokens(candidate))
    if not cand:
        return 0.0
    common = len(ref & cand)
    precision = common / len(cand)
    recall = common / len(ref) if ref else 0.0
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def bow_cosine(reference: str, candidate: str) -> float:
    ref, cand = Counter(tokens(reference)), Counter(tokens(candidate))
    dot = sum(ref[w] * cand[w] for w in ref.keys() & cand.keys())
    ref_norm = math.sqrt(sum(c * c for c in ref.values()))
    cand_norm = math.sqrt(sum(c * c for c in cand.values()))
    return 0.0 if ref_norm == 0 or cand_norm == 0 else dot / (ref_norm * cand_norm)


def bleu2(reference: str, candidate: str) -> float:
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    ref, cand = tokens(reference), tokens(candidate)
    if not ref or not cand:
        return 0.0
    return float(sentence_bleu([ref], cand, weights=(0.5, 0.5), smoothing_function=SmoothingFunction().method1))


@lru_cache(maxsize=1)
def _rouge_scorer() -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(reference: str, candidate: str) -> float:
    return float(_rouge_scorer().score(reference, candidate)["rougeL"].fmeasure)


def meteor_simplified(reference: str, candidate: str) -> float:
    ref, cand = tokens(reference), tokens(candidate)
    if not ref or not cand:
        return 0.0
    ref_uni, cand_uni = set(ref), set(cand)
    ref_bi, cand_bi = set(zip(ref, ref[1:], strict=False)), set(zip(cand, cand[1:], strict=False))
    uni = len(ref_uni & cand_uni)
    bi = len(ref_bi & cand_bi)
    precision = 0.8 * (uni / len(cand_uni)) + 0.2 * (bi / len(cand_bi) if cand_bi else 0.0)
    recall = 0.8 * (uni / len(ref_uni)) + 0.2 * (bi / len(ref_bi) if ref_bi else 0.0)
    if precision + recall == 0:
        return 0.0
    return 10 * precision * recall / (recall + 9 * precision)


def lexical_metrics(reference: str, candidate: str) -> dict[str, float]:
    """All five lexical scores of one caption; both texts must be non-empty (upstream skips the rest)."""
    if not reference or not candidate:
        raise ValueError("reference and caption must both be non-empty")
    return {"word_f1": word_f1(reference, candidate), "bow_cosine": bow_cosine(reference, candidate),
            "bleu2": bleu2(reference, candidate), "rouge_l": rouge_l(reference, candidate),
            "meteor_simplified": meteor_simplified(reference, candidate)}
