"""Rewriting the cells of a ``DataTable`` row without measuring the whole column.

``DataTable.update_cell(..., update_width=True)`` re-measures every cell of the column whenever the new value
is narrower than the column, so rewriting every row (a theme change restyles them all) costs rows² cell
measurements: minutes for a 1,600-row results table. Here a column only ever grows, measured from the new cell
alone, which is what a live table wants anyway (columns that shrink and grow back make the table jitter).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.text import Text
from textual.widgets import DataTable
from textual.timer import Timer
from textual.widgets.data_table import ColumnKey, RowKey


def update_row(table: DataTable, row_key: str, column_keys: Sequence[str], cells: Sequence[Text]) -> None:
    """Write ``cells`` into row ``row_key``; a column is widened only when a new cell is wider than it."""
    columns = table.columns
    for column_key, cell in zip(column_keys, cells):
        column = columns.get(ColumnKey(column_key))
        grow = column is not None and cell.cell_len > column.content_width
        table.update_cell(row_key, column_key, cell, update_width=grow)


def _write_off_screen(table: DataTable, row_key: str, column_keys: Sequence[str], cells: Sequence[Text]) -> bool:
    """Put the cells of a row that is not on screen in place without asking for a repaint (a repaint per row of
    a 1,600-row table is what makes a restyle slow); False when that is not possible (the caller then writes
    them the ordinary way). Relies on ``DataTable._data`` and ``_update_count`` (Textual 8), checked here."""
    data = getattr(table, "_data", None)
    if not isinstance(data, dict) or not isinstance(getattr(table, "_update_count", None), int):
        return False
    row = data.get(RowKey(row_key))
    if row is None:
        return False
    columns = table.columns
    for column_key, cell in zip(column_keys, cells):
        key = ColumnKey(column_key)
        column = columns.get(key)
        if column is None or cell.cell_len > column.content_width:
            return False
    for column_key, cell in zip(column_keys, cells):
        row[ColumnKey(column_key)] = cell
    table._update_count += 1  # the render caches are keyed by it: the row is drawn anew when it scrolls in
    return True


SLICE_ROWS = 120
"""Rows rewritten per slice when a whole table is restyled (about 15 ms on a slow core)."""
SLICE_INTERVAL_S = 0.02


class SlicedRestyle:
    """Rewrites every row of a big table in slices, the rows on screen first, so keys are answered in between.

    ``make_cells(row_key)`` returns the row's new cells (None: the row is gone, nothing to write).
    """

    def __init__(self, table: DataTable, column_keys: Sequence[str],
                 make_cells: Callable[[str], Sequence[Text] | None]) -> None:
        self.table = table
        self.column_keys = tuple(column_keys)
        self.make_cells = make_cells
        self._backlog: list[str] = []
        self._timer: Timer | None = None

    @property
    def pending(self) -> int:
        """Rows still to be rewritten."""
        return len(self._backlog)

    def start(self) -> None:
        """Rewrite every row: those on screen now, the others a slice at a time."""
        table = self.table
        rows = [row.key.value for row in table.ordered_rows if row.key.value is not None]
        top = max(0, int(table.scroll_y))
        bottom = min(len(rows), top + max(1, table.size.height))
        on_screen = rows[top:bottom]
        self._backlog = rows[:top] + rows[bottom:]
        self._rewrite(on_screen)
        if self._backlog and self._timer is None:
            self._timer = table.set_interval(SLICE_INTERVAL_S, self._slice)
        elif not self._backlog:
            self.stop()

    def _slice(self) -> None:
        chunk, self._backlog = self._backlog[:SLICE_ROWS], self._backlog[SLICE_ROWS:]
        top = max(0, int(self.table.scroll_y))
        shown = {row.key.value for row in self.table.ordered_rows[top:top + max(1, self.table.size.height)]}
        self._rewrite([k for k in chunk if k in shown])
        self._rewrite([k for k in chunk if k not in shown], on_screen=False)
        if not self._backlog:
            self.stop()

    def finish(self) -> None:
        """Rewrite whatever is left now (tests, and before a rebuild that needs current cells)."""
        chunk, self._backlog = self._backlog, []
        self._rewrite(chunk)
        self.stop()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def _rewrite(self, keys: Sequence[str], on_screen: bool = True) -> None:
        table = self.table
        for key in keys:
            cells = self.make_cells(key)
            if cells is None or key not in table.rows:
                continue
            if on_screen or not _write_off_screen(table, key, self.column_keys, cells):
                update_row(table, key, self.column_keys, cells)
