"""What a recipe's doctor says: one line per check, a problem or not (the contract between a recipe's ``doctor:``
function and ``pinbench doctor``, which runs it before any model loads)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    """One line of the report: ``ok`` False is a problem that stops the run. ``subject`` names the pin
    (``huggingface/<name>``, ``urls/<name>``) a cache finding is about."""

    ok: bool
    check: str
    line: str
    subject: str = ""
    warning: bool = False  # ok, but said even when only problems are shown (a run that will be slow)
    to_fetch: bool = False  # not here, and not a problem: this run downloads it first

    def render(self) -> str:
        label = "PROBLEM" if not self.ok else "WARNING" if self.warning else "FETCH  " if self.to_fetch else "ok     "
        return f"{label} {self.check}: {self.line}"


def ok(check: str, line: str, subject: str = "") -> Finding:
    return Finding(True, check, line, subject)


def warning(check: str, line: str) -> Finding:
    """Not a problem (the run starts), but the person starting it should read it first."""
    return Finding(True, check, line, warning=True)


def problem(check: str, line: str, subject: str = "") -> Finding:
    return Finding(False, check, line, subject)
