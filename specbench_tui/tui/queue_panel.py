"""The sweep queue: every configuration with its state, GPUs, start-up time and a one-line reason.

The rows are :func:`~specbench_tui.application.viewmodel.queue_row` records built from the sweep view; the panel
only draws them (:class:`~specbench_tui.tui.table_view.TableView`). When any configuration ran on a cluster node,
the GPUs cell names the node too (``0,1 @ gpu-a``); a sweep on this machine alone shows GPUs only."""

from __future__ import annotations

from typing import ClassVar

from specbench_tui.application.rows import Mark, ViewRow
from specbench_tui.application.viewmodel import (
    QUEUE_COLUMNS,
    QUEUE_MARKS,
    ConfigLine,
    ShownState,
    SweepView,
    queue_row,
    queue_summary,
)
from specbench_tui.tui.table_view import TableView

COLUMNS = tuple(zip(QUEUE_COLUMNS, ("", "config", "state", "GPUs", "start-up", "reason / progress")))
COLUMN_KEYS = QUEUE_COLUMNS
ACTIVE = (ShownState.LAUNCHING, ShownState.READY, ShownState.RUNNING)
"""The states of a configuration whose server is up or coming up: the row the queue keeps in view."""


class QueuePanel(TableView):
    """The configurations of the plan in run order; the cursor row is the 'selected' configuration."""

    ALLOW_MAXIMIZE = True
    COLUMNS: ClassVar[tuple[tuple[str, str], ...]] = COLUMNS
    MARKS: ClassVar[frozenset[Mark]] = QUEUE_MARKS
    DROPPABLE: ClassVar[tuple[str, ...]] = ("startup", "gpus")
    """On a narrow panel the start-up time goes first, then the GPUs (the GPU line below says them): the reason
    column (a zero-out count, a crash's cause, a skip's reason) gets their room."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="panel")
        self.border_title = "1 Sweep queue"
        self._worded: dict[str, tuple[ConfigLine, ViewRow]] = {}
        """Each configuration's line and its row, worded once per change."""
        self._running_shown: str | None = None
        """The configuration last brought into view because it started running."""

    @property
    def selected_config_id(self) -> str | None:
        """The configuration under the cursor."""
        return self.cursor_key

    def select_config(self, config_id: str) -> None:
        """Move the cursor to ``config_id``'s row."""
        if config_id in self._index:
            self.move_cursor(row=self.get_row_index(config_id))

    def sync(self, view: SweepView, force: bool = False) -> None:
        """Show the sweep view's configurations (each row as the application layer worded it)."""
        worded = {}
        for line in view.lines:
            known = self._worded.get(line.config_id)
            worded[line.config_id] = known if known is not None and known[0] == line else (line, queue_row(line))
        self._worded = worded
        self.set_rows([row for _, row in worded.values()])
        self.border_subtitle = queue_summary(view.lines)
        running = next((line.config_id for line in view.lines if line.state in ACTIVE), None)
        if running is not None and running != self._running_shown:
            # On a short queue panel (four rows at 80x24) the running row is otherwise below the fold; the
            # cursor stays where the user left it.
            self._running_shown = running
            self.follow(running, even_if_scrolled=True)
