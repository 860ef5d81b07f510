"""Rewriting the cells of a ``DataTable`` row without measuring the whole column.

``DataTable.update_cell(..., update_width=True)`` re-measures every cell of the column whenever the new value
is narrower than the column, so rewriting every row (a theme change restyles them all) costs rows² cell
measurements: minutes for a 1,600-row results table. Here a column only ever grows, measured from the new cell
alone, which is what a live table wants anyway (columns that shrink and grow back make the table jitter).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey


def update_row(table: DataTable, row_key: str, column_keys: Sequence[str], cells: Sequence[Text]) -> None:
    """Write ``cells`` into row ``row_key``; a column is widened only when a new cell is wider than it."""
    columns = table.columns
    for column_key, cell in zip(column_keys, cells):
        column = columns.get(ColumnKey(column_key))
        grow = column is not None and cell.cell_len > column.content_width
        table.update_cell(row_key, column_key, cell, update_width=grow)
