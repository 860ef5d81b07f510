"""The sweep queue: every configuration with its state, GPUs, start-up time and a one-line reason.

When any configuration ran on a cluster node, the GPUs cell names the node too (``0,1 @ gpu-a``); a sweep on this
machine alone shows GPUs only."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.widgets.data_table import CellDoesNotExist, RowDoesNotExist

from specbench_tui.application.viewmodel import SweepView
from specbench_tui.core.state import PAUSED
from specbench_tui.core.verdicts import PARTIAL, ZERO_OUTPUT
from specbench_tui.tui.looks import GLYPHS
from specbench_tui.tui.palette import DEFAULT_PALETTE, Palette
from specbench_tui.tui.safe_text import clean, safe
from specbench_tui.tui.key_hold import answer_held_for
from specbench_tui.tui.textual_private import CachedCellsTable, SlicedRestyle, update_row

STATE_GLYPHS = GLYPHS
COLUMNS = (("glyph", ""), ("config", "config"), ("state", "state"), ("gpus", "GPUs"), ("startup", "start-up"),
           ("note", "reason / progress"))
COLUMN_KEYS = tuple(key for key, _ in COLUMNS)


def state_style(state: str, palette: Palette) -> Style:
    """The style of a state word (crashes follow the theme's error colour)."""
    if state in ("crashed", "failed"):
        return palette.crash
    if state in (PAUSED, ZERO_OUTPUT):
        return palette.zero_output
    if state in (PARTIAL, "node_lost"):
        return palette.warning
    if state in ("running", "launching", "ready"):
        return palette.accent
    if state == "done":
        return palette.success
    return palette.muted


class QueuePanel(CachedCellsTable):
    """The configurations of the plan in run order; the cursor row is the 'selected' configuration."""

    ALLOW_MAXIMIZE = True

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False, classes="panel")
        self.border_title = "1 Sweep queue"
        self.palette: Palette = DEFAULT_PALETTE
        """Styles from the current theme (set by the app)."""
        self._shown: dict[str, tuple[Any, ...]] = {}
        """Row key → the plain values last written, so unchanged cells are not rewritten."""
        self._restyle = SlicedRestyle(self, COLUMN_KEYS, self._cells_of, wait=lambda: answer_held_for(self.app))

    def _cells_of(self, key: str) -> list[Text] | None:
        values = self._shown.get(key)
        return self._cells(values) if values is not None else None

    def restyle(self) -> None:
        """Recolour every row with the current palette (rows on screen at once, the rest in slices)."""
        self._restyle.start()

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key)

    @property
    def selected_config_id(self) -> str | None:
        """The configuration under the cursor."""
        if self.row_count == 0:
            return None
        try:
            row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        except CellDoesNotExist:
            return None
        return row_key.value

    def select_config(self, config_id: str) -> None:
        """Move the cursor to ``config_id``'s row."""
        with contextlib.suppress(RowDoesNotExist):
            self.move_cursor(row=self.get_row_index(config_id))

    def sync(self, view: SweepView, force: bool = False) -> None:
        """Bring the rows up to date with the sweep view (only changed cells are written): each configuration's
        word and note as the application layer worded them (what a key asked for included)."""
        for line in view.lines:
            values = (line.word, line.name, line.where, line.startup, line.note, line.holding)
            if not force and self._shown.get(line.config_id) == values:
                continue
            cells = self._cells(values)
            if line.config_id not in self._shown:
                self.add_row(*cells, key=line.config_id)
            else:
                update_row(self, line.config_id, COLUMN_KEYS, cells)
            self._shown[line.config_id] = values
        self.border_subtitle = self._summary(self._shown.values())

    def _cells(self, values: tuple[Any, ...]) -> list[Text]:
        shown_state, name, gpus, startup, note, holding = values
        palette = self.palette
        style = state_style(shown_state, palette)
        alarming = shown_state in ("crashed", "failed")
        warned = shown_state in (ZERO_OUTPUT, PARTIAL)
        return [
            Text(STATE_GLYPHS.get(shown_state, "?"), style=style),
            safe(name, palette.crash if alarming else "", 120),
            Text(shown_state, style=style),
            Text(gpus, style=palette.accent if holding else palette.muted),
            Text(startup),
            safe(note, palette.crash if alarming else (style if warned else palette.muted), 200),
        ]

    @staticmethod
    def _summary(shown: Iterable[tuple[Any, ...]]) -> str:
        """``1 running 40 pending 3 skipped``: the rows as shown (what a key asked for included)."""
        counts: dict[str, int] = {}
        for values in shown:
            counts[values[0]] = counts.get(values[0], 0) + 1
        order = ("running", "launching", "ready", "pending", PAUSED, "done", ZERO_OUTPUT, PARTIAL, "crashed",
                 "failed", "skipped", "node_lost")
        return clean(" ".join(f"{counts[k]} {k}" for k in order if counts.get(k)), 200)
