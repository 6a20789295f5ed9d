"""Counts in words (pinbench.core.wording): run, status, check and doctor lines said "1 samples", "1 problem(s)"."""

from __future__ import annotations

from pinbench.core.wording import counted


def test_a_count_of_one_is_singular_and_every_other_plural() -> None:
    assert [counted(n, "sample") for n in (0, 1, 2)] == ["0 samples", "1 sample", "2 samples"]
    assert [counted(n, "entry", "entries") for n in (1, 3)] == ["1 entry", "3 entries"]
