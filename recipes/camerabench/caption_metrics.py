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

``bleu2`` and ``rouge_l`` are computed here, in NLTK's and rouge-score's order of floating-point operations
(the Porter stemmer is ``porter.py``), not by importing them: any import of NLTK runs ``nltk/__init__``, which
pulls scikit-learn and SciPy (about 2 s of CPU and 150 MB, more than a whole score-only run). The tests compare
every metric with NLTK's and rouge-score's on the caption data and on edge cases, for equality.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter

from pinbench_recipes.camerabench.porter import stem

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
    """NLTK ``sentence_bleu([ref], cand, weights=(0.5, 0.5), smoothing_function=SmoothingFunction().method1)``:
    clipped unigram and bigram precisions (a zero count becomes 0.1 / its denominator), 0 without a unigram
    match, times the brevity penalty exp(1 - r / c) when the caption is not longer than the reference."""
    ref, cand = tokens(reference), tokens(candidate)
    if not ref or not cand:
        return 0.0
    precisions = [_clipped_precision(ref, cand, n) for n in (1, 2)]
    if precisions[0][0] == 0:
        return 0.0
    logs = [0.5 * math.log(num / den if num else 0.1 / den) for num, den in precisions]
    penalty = 1.0 if len(cand) > len(ref) else math.exp(1 - len(ref) / len(cand))
    return penalty * math.exp(math.fsum(logs))


def _clipped_precision(ref: list[str], cand: list[str], n: int) -> tuple[int, int]:
    """BLEU's modified n-gram precision as (clipped matches, max(1, n-grams of the candidate))."""
    counts, ref_counts = Counter(_ngrams(cand, n)), Counter(_ngrams(ref, n))
    return sum(min(c, ref_counts[g]) for g, c in counts.items()), max(1, sum(counts.values()))


def _ngrams(words: list[str], n: int) -> list[tuple[str, ...]]:
    return list(zip(*(words[i:] for i in range(n)), strict=False))


_NON_ALPHANUMERIC = re.compile(r"[^a-z0-9]+")


def rouge_tokens(text: str) -> list[str]:
    """rouge-score's tokenizer with its stemmer: lowercase, every run of characters other than a-z and 0-9 is a
    separator, words longer than 3 letters Porter-stemmed (an empty stem is dropped, as rouge-score drops it)."""
    stemmed = (stem(w) if len(w) > 3 else w for w in _NON_ALPHANUMERIC.sub(" ", text.lower()).split())
    return [w for w in stemmed if w]


def rouge_l(reference: str, candidate: str) -> float:
    """rouge-score ``RougeScorer(["rougeL"], use_stemmer=True).score(reference, candidate)["rougeL"].fmeasure``:
    the F-measure of the longest common subsequence of the stemmed tokens."""
    ref, cand = rouge_tokens(reference), rouge_tokens(candidate)
    if not ref or not cand:
        return 0.0
    lcs = _lcs_length(ref, cand)
    precision, recall = lcs / len(cand), lcs / len(ref)
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def _lcs_length(a: list[str], b: list[str]) -> int:
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


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
