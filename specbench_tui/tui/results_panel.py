"""Results as they arrive: configuration × workload with decode tok/s, TTFT, acceptance and speedup.

The rows are built and worded in the application layer (:mod:`specbench_tui.application.results_rows`, in the
app's analysis worker): every figure is the run's analysis, as ``specbench report`` prints it. The panel sorts
and draws them (:class:`~specbench_tui.tui.table_view.TableView`), and brings a new crashed or zero-output row
into view unless the user scrolled elsewhere."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from textual import on

from specbench_tui.application.results_rows import (
    COLUMN_KEYS,
    RESULT_MARKS,
    ConfigNotes,
    ResultRow,
    build_rows,
    config_notes,
    config_of_row_key,
    look,
    row_key,
    view_rows,
)
from specbench_tui.application.rows import Mark, ViewRow
from specbench_tui.core.acceptance import ACCEPTANCE_LENGTH, Definition, client_definition
from specbench_tui.core.results import RunAnalysis
from specbench_tui.core.state import RunState
from specbench_tui.tui.table_view import TableView

__all__ = ["ACCEPT_COLUMN", "COLUMNS", "COLUMN_KEYS", "SORTS", "ConfigNotes", "ResultRow", "ResultsPanel",
           "build_rows", "config_notes", "config_of_row_key", "row_key"]

ACCEPT_COLUMN = "accept"
"""The key of the acceptance column; its header is the glossary's short name of what the engine's client
measures (:func:`~specbench_tui.core.acceptance.client_definition`): ``acc.len`` on SGLang, ``tok/fwd`` on
llama.cpp and vLLM."""
COLUMNS = tuple(zip(COLUMN_KEYS, ("config", "workload", "n", "tok/s", "TTFT ms", ACCEPTANCE_LENGTH.short, "speedup",
                                  "note")))
SORTS: tuple[tuple[str | None, str, bool], ...] = (
    (None, "plan order", False), ("tps", "tok/s", True), ("speedup", "speedup", True), ("ttft", "TTFT", False),
    (ACCEPT_COLUMN, ACCEPTANCE_LENGTH.short, True),
)
"""(column, label, descending) in the order the sort key cycles through them (the acceptance column's label is
the panel's :attr:`ResultsPanel.figure`)."""
ALARMING = (Mark.CRASHED, Mark.ZERO_OUT)
"""Rows brought into view when they appear or turn so."""


class ResultsPanel(TableView):
    """Configuration × workload medians (zero-output requests are kept out and flagged)."""

    ALLOW_MAXIMIZE = True
    COLUMNS: ClassVar[tuple[tuple[str, str], ...]] = COLUMNS
    MARKS: ClassVar[frozenset[Mark]] = RESULT_MARKS

    def __init__(self, *, id: str | None = None, engine: str | None = None) -> None:
        super().__init__(id=id, classes="panel")
        self.figure: Definition = client_definition(engine or "sglang")
        """What the acceptance column shows: the engine's client figure, headed by its glossary short name."""
        self.labels[COLUMN_KEYS.index(ACCEPT_COLUMN)] = self.figure.short
        self.border_title = "2 Results"
        self.sort_index = 0
        """Position in :data:`SORTS`."""
        self.sort_reverse: bool | None = None
        """Overrides the sort's natural direction after a header click."""
        self._shown: dict[str, ViewRow] = {}

    def on_mount(self) -> None:
        self._update_subtitle()

    @property
    def selected_config_id(self) -> str | None:
        key = self.cursor_key
        return config_of_row_key(key) if key is not None else None

    def sync(self, state: RunState, force: bool = False, analysis: RunAnalysis | None = None,
             rows: Mapping[str, ViewRow] | None = None) -> None:
        """Show the rows of ``analysis`` (``rows``: already worded from it in the worker); the cursor stays on its
        row. Without an analysis yet, the rows shown stay as they are."""
        if analysis is None:
            return
        if rows is None:
            rows = view_rows(build_rows(state, analysis))
        alarming = [key for key, row in rows.items()
                    if row.mark in ALARMING and (key not in self._shown or self._shown[key].mark != row.mark)]
        self._shown = dict(rows)
        self.apply_sort()
        if alarming and not force:
            self.follow(alarming[-1])

    @staticmethod
    def look(row: ResultRow) -> str:
        """The row's class glyph (crashed, zero output, partial)."""
        return look(row)

    def sort_label(self) -> str:
        """The current sort's label (the acceptance column's is the short name of the figure it shows)."""
        column, label, _ = SORTS[self.sort_index]
        return self.figure.short if column == ACCEPT_COLUMN else label

    def cycle_sort(self) -> str:
        """Sort by the next column in :data:`SORTS`; returns its label."""
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self.sort_reverse = None
        self.apply_sort()
        return self.sort_label()

    def sort_by_column(self, column: str) -> None:
        """Sort by ``column`` (a header click); a second click on it reverses the order."""
        if column == "config":
            index: int | None = 0
        else:
            index = next((i for i, (key, _, _) in enumerate(SORTS) if key == column), None)
        if index is None:
            return
        if index == self.sort_index:
            current = SORTS[index][2] if self.sort_reverse is None else self.sort_reverse
            self.sort_reverse = not current
        else:
            self.sort_index = index
            self.sort_reverse = None
        self.apply_sort()

    def apply_sort(self) -> None:
        """Order the rows by the current sort: measured rows first in either direction, then crashed or cut-short
        ones, then rows without the figure (a crashed configuration's two partial measurements never top a
        ranking)."""
        column, _, descending = SORTS[self.sort_index]
        reverse = descending if self.sort_reverse is None else self.sort_reverse
        rows = list(self._shown.values())
        if column is None:
            rows.sort(key=lambda row: _plan_order(row, reverse))
        else:
            at = COLUMN_KEYS.index(column)

            def key(row: ViewRow) -> tuple[Any, ...]:
                value = row.cells[at].sort
                number = value if isinstance(value, (int, float)) else 0
                return (row.cut, value is None, -number if reverse else number)

            rows.sort(key=key)
        self.set_rows(rows)
        self._update_subtitle()

    def _update_subtitle(self) -> None:
        column, _, descending = SORTS[self.sort_index]
        reverse = descending if self.sort_reverse is None else self.sort_reverse
        arrow = "" if column is None else (" ↓" if reverse else " ↑")
        self.border_subtitle = f"sort: {self.sort_label()}{arrow} (o)"

    @on(TableView.HeaderSelected)
    def _header_clicked(self, event: TableView.HeaderSelected) -> None:
        event.stop()
        self.sort_by_column(event.column_key)


def _plan_order(row: ViewRow, reverse: bool) -> tuple[int, ...]:
    order = row.cells[0].sort
    values = order if isinstance(order, tuple) else (0, 0)
    return tuple(-v for v in values) if reverse else values
