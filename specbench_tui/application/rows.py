"""Rows as the screen's tables draw them: frozen records of text and sort values, each with a semantic class.

The application layer words every cell and says what it *means* (:class:`Mark`: crashed, zero-out, partial…);
the screen decides how a meaning looks, from the current theme, when it draws (a theme change restyles nothing
here). No Rich style and no Textual name is in these records.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple


class Mark(str, Enum):
    """What a row or a cell means, for the screen to colour (its value is the component class's suffix)."""

    PLAIN = "plain"
    CRASHED = "crashed"
    """The configuration's server crashed or failed."""
    ZERO_OUT = "zero-out"
    """It answered with no tokens."""
    PARTIAL = "partial"
    """A workload was cut short: its figures cover only the items it reached."""
    CAPPED = "capped"
    """A load point sent more requests at once than the server runs."""
    BEST = "best"
    """The best speedup of its workload."""
    NOISY = "noisy"
    """A load point whose figures spread too much to rank."""
    IDLE_DRAFT = "idle-draft"
    """The draft model accepted next to nothing (acceptance length about 1)."""
    FASTER = "faster"
    """A speedup of at least 1."""
    SLOWER = "slower"
    """A speedup under 1."""
    ACTIVE = "active"
    """Running now, or holding GPUs."""
    DONE = "done"
    MUTED = "muted"
    """Secondary text: notes, the baseline, idle GPUs."""
    STRONG = "strong"
    """A heading cell (a node's totals, a GPU's index)."""


def clean_text(text: object, limit: int) -> str:
    """``text`` as one printable line of at most ``limit`` characters (names, reasons and notes are untrusted)."""
    line = str(text)
    if not line.isprintable():
        line = "".join(ch if ch.isprintable() else " " for ch in line)
    return line if len(line) <= limit else line[: limit - 1] + "…"


SortValue = float | int | str | tuple[int, int] | None


class ViewCell(NamedTuple):
    """One cell: its text (printable, one line), what it means, and the value it sorts by (a tuple: rows of
    thousands of cells are compared at C speed when a new analysis comes)."""

    text: str
    mark: Mark = Mark.PLAIN
    sort: SortValue = None

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class ViewRow:
    """One row of a table: a stable key, its cells in column order, and the row's own meaning."""

    key: str
    cells: tuple[ViewCell, ...]
    mark: Mark = Mark.PLAIN
    cut: bool = False
    """Crashed or cut short: sorted after every measured row whichever way a column is sorted."""

    def cell(self, index: int) -> ViewCell:
        return self.cells[index]
