"""Validation errors that point at the file, line and key a user must fix."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class SweepIssue:
    """One problem found in a sweep file."""

    path: str
    """The sweep file, as the user named it."""
    line: int | None
    """1-based line of the offending key (or its table), when known."""
    key: str
    """Dotted key path, e.g. ``configs[2].matrix.budget``."""
    message: str
    """What was wrong and what was expected."""
    hint: str | None = None
    """A suggested fix, e.g. the closest valid key; printed after the message, following a semicolon."""

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        text = f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"
        return f"{text}; {self.hint}" if self.hint else text


class SweepError(Exception):
    """A sweep file that cannot become a plan; carries every issue found."""

    def __init__(self, issues: Iterable[SweepIssue]) -> None:
        self.issues: list[SweepIssue] = list(issues)
        super().__init__("\n".join(str(issue) for issue in self.issues))


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The valid spelling closest to a misspelt one, if any is close enough."""
    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """A hint naming the closest valid spelling, or the valid ones when few."""
    options = sorted(choices)
    match = closest(word, options)
    if match:
        return f"did you mean '{match}'?"
    if 0 < len(options) <= 12:  # none valid: a bare "valid: " would read as a cut-off message
        return "valid: " + ", ".join(options)
    return None
