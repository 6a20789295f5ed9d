"""The Porter stemmer exactly as NLTK's ``PorterStemmer()`` (its default mode, ``NLTK_EXTENSIONS``) stems a word.

Why a second copy: ``rouge_score`` stems through ``nltk.stem.porter``, and importing any part of NLTK runs
``nltk/__init__``, which imports scikit-learn and SciPy when they are installed (1,658 modules, about 2 s of CPU,
150 MB): more than a whole score-only CameraBench run. This is the same algorithm, step for step (Porter 1980
with Martin Porter's and NLTK's extensions: the irregular forms, ``ies``/``ied`` on four-letter words, ``alli``
first, ``fulli``, ``logi``, *o on two-letter stems, ``y`` -> ``i`` after a consonant); the tests compare it with
NLTK's on every word of the caption data and on generated words that take every rule's branches.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

_VOWELS = frozenset("aeiou")
# NLTK's table of irregular forms (word -> stem); these skip the steps.
_IRREGULAR = {"sky": "sky", "skies": "sky", "dying": "die", "lying": "lie", "tying": "tie", "news": "news",
              "innings": "inning", "inning": "inning", "outings": "outing", "outing": "outing",
              "cannings": "canning", "canning": "canning", "howe": "howe", "proceed": "proceed",
              "exceed": "exceed", "succeed": "succeed"}

Rule = tuple[str, str, Callable[[str], bool] | None]


def _consonants(word: str) -> list[bool]:
    """Whether each letter is a consonant: not a vowel, and a ``y`` only when the letter before it is not one."""
    flags: list[bool] = []
    for i, ch in enumerate(word):
        flags.append(False if ch in _VOWELS else (i == 0 or not flags[i - 1]) if ch == "y" else True)
    return flags


def _is_consonant(word: str, i: int) -> bool:
    return _consonants(word[: i + 1])[i]


def _measure(stem: str) -> int:
    """m of [C](VC){m}[V]: the number of vowel-to-consonant transitions."""
    return "".join("c" if c else "v" for c in _consonants(stem)).count("vc")


def _positive_measure(stem: str) -> bool:
    return _measure(stem) > 0


def _contains_vowel(stem: str) -> bool:
    return not all(_consonants(stem))


def _ends_double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _is_consonant(word, len(word) - 1)


def _ends_cvc(word: str) -> bool:
    """*o: consonant-vowel-consonant, the last not w, x or y; or (NLTK) a two-letter vowel-consonant word."""
    if len(word) >= 3:
        c = _consonants(word)
        if c[-3] and not c[-2] and c[-1] and word[-1] not in "wxy":
            return True
    if len(word) == 2:
        c = _consonants(word)
        return not c[0] and c[1]
    return False


def _apply(word: str, rules: list[Rule]) -> str:
    """The first rule whose suffix the word ends with (``*d``: a double consonant) decides: its replacement when
    its condition holds on the stem, else the word unchanged; no later rule is tried."""
    for suffix, replacement, condition in rules:
        if suffix == "*d" and _ends_double_consonant(word):
            stem = word[:-2]
            return stem + replacement if condition is None or condition(stem) else word
        if word.endswith(suffix):
            stem = word[: len(word) - len(suffix)]
            return stem + replacement if condition is None or condition(stem) else word
    return word


def _step1a(word: str) -> str:
    if word.endswith("ies") and len(word) == 4:
        return word[:-3] + "ie"
    return _apply(word, [("sses", "ss", None), ("ies", "i", None), ("ss", "ss", None), ("s", "", None)])


def _step1b(word: str) -> str:
    if word.endswith("ied"):
        return word[:-3] + ("ie" if len(word) == 4 else "i")
    if word.endswith("eed"):
        stem = word[:-3]
        return stem + "ee" if _measure(stem) > 0 else word
    for suffix in ("ed", "ing"):
        if word.endswith(suffix) and _contains_vowel(word[: -len(suffix)]):
            stem = word[: -len(suffix)]
            break
    else:
        return word
    return _apply(stem, [
        ("at", "ate", None), ("bl", "ble", None), ("iz", "ize", None),
        ("*d", stem[-1], lambda _: stem[-1] not in "lsz"),
        ("", "e", lambda s: _measure(s) == 1 and _ends_cvc(s)),
    ])


def _step1c(word: str) -> str:
    return _apply(word, [("y", "i", lambda s: len(s) > 1 and _is_consonant(s, len(s) - 1))])


_STEP2 = [(suffix, replacement, _positive_measure) for suffix, replacement in (
    ("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"), ("izer", "ize"), ("bli", "ble"),
    ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous"), ("ization", "ize"), ("ation", "ate"),
    ("ator", "ate"), ("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous"), ("aliti", "al"),
    ("iviti", "ive"), ("biliti", "ble"), ("fulli", "ful"))]


def _step2(word: str) -> str:
    if word.endswith("alli") and _positive_measure(word[:-4]):
        return _step2(word[:-4] + "al")
    # the l of logi stays with the stem for the measure ("geo", "theo" work like "archaeo")
    return _apply(word, [*_STEP2, ("logi", "log", lambda _: _positive_measure(word[:-3]))])


_STEP3 = [(suffix, replacement, _positive_measure) for suffix, replacement in (
    ("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"), ("ful", ""), ("ness", ""))]


def _measure_above_one(stem: str) -> bool:
    return _measure(stem) > 1


_STEP4 = [(suffix, "", _measure_above_one) for suffix in ("al", "ance", "ence", "er", "ic", "able", "ible", "ant",
                                                           "ement", "ment", "ent")]
_STEP4 += [("ion", "", lambda s: _measure(s) > 1 and s[-1] in "st")]
_STEP4 += [(suffix, "", _measure_above_one) for suffix in ("ou", "ism", "ate", "iti", "ous", "ive", "ize")]


def _step5a(word: str) -> str:
    if word.endswith("e"):
        stem = word[:-1]
        m = _measure(stem)
        if m > 1 or (m == 1 and not _ends_cvc(stem)):
            return stem
    return word


def _step5b(word: str) -> str:
    return _apply(word, [("ll", "l", lambda _: _measure(word[:-1]) > 1)])


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """NLTK ``PorterStemmer().stem(word)``: lowercased, irregular forms looked up, words of 1-2 letters kept."""
    lowered = word.lower()
    if lowered in _IRREGULAR:
        return _IRREGULAR[lowered]
    if len(word) <= 2:
        return lowered
    return _step5b(_step5a(_apply(_apply(_step2(_step1c(_step1b(_step1a(lowered)))), _STEP3), _STEP4)))
