"""Counts in words, one rule for every message: ``1 sample``, ``2 samples`` (a run of one sample said
``1 samples``)."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``"1 sample"``, ``"0 samples"``; ``plural`` for a noun whose plural is not ``noun + "s"``."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
