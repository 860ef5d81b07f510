"""The main screen: header, the four panels and the footer of key bindings."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer

from specbench_tui.core.state import RunState
from specbench_tui.tui.gpu_panel import GpuPanel
from specbench_tui.tui.header import SweepHeader
from specbench_tui.tui.log_panel import ServerLogPanel
from specbench_tui.tui.queue_panel import QueuePanel
from specbench_tui.tui.results_panel import ResultsPanel

_PANELS = Binding.Group("Panels", compact=True)


class SweepScreen(Screen):
    """Queue and results above, server log and GPUs below; stacked on narrow terminals."""

    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-narrow"), (120, "-wide")]
    ALLOW_IN_MAXIMIZED_VIEW = "SweepHeader, Footer"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "app.toggle_pause", "Pause/Resume", id="sweep-pause", tooltip="pause or resume the queue"),
        Binding("s", "app.skip_selected", "Skip", id="sweep-skip-selected",
                tooltip="skip the selected configuration"),
        Binding("S", "app.skip_running", "Skip running", id="sweep-skip-running",
                tooltip="stop the running server and mark its configuration skipped"),
        Binding("r", "app.retry_selected", "Retry", id="sweep-retry", tooltip="queue the selected configuration again"),
        Binding("l", "app.open_log", "Log", id="log-open", tooltip="open the selected configuration's full log"),
        Binding("1", "app.focus_panel('queue')", "Queue", id="focus-queue", group=_PANELS),
        Binding("2", "app.focus_panel('results')", "Results", id="focus-results", group=_PANELS),
        Binding("3", "app.focus_panel('log')", "Log", id="focus-log", group=_PANELS),
        Binding("4", "app.focus_panel('gpus')", "GPUs", id="focus-gpus", group=_PANELS),
        Binding("m", "app.toggle_maximize", "Max", id="panel-maximize", tooltip="maximise or restore the panel"),
        Binding("o", "app.cycle_sort", "Sort", id="results-sort", tooltip="sort the results by the next column"),
        Binding("t", "app.cycle_theme", "Theme", id="theme-next", tooltip="switch to the next theme"),
        Binding("q", "app.request_quit", "Quit", id="quit", tooltip="quit (asks while servers run)"),
    ]

    class PanelsMounted(Message):
        """The panels exist: the app may fill them and start feeding events."""

    def __init__(self, state: RunState, clock: Callable[[], float]) -> None:
        super().__init__()
        self.state = state
        self.clock = clock

    def compose(self) -> ComposeResult:
        yield SweepHeader(self.state, self.clock, id="header")
        with Horizontal(id="top-row"):
            yield QueuePanel(id="queue-panel")
            yield ResultsPanel(id="results-panel")
        with Horizontal(id="bottom-row"):
            yield ServerLogPanel(id="log-panel")
            yield GpuPanel(id="gpu-panel")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(QueuePanel).focus()
        self.post_message(SweepScreen.PanelsMounted())

    @on(DataTable.RowSelected, "#queue-panel")
    @on(DataTable.RowSelected, "#results-panel")
    def _row_chosen(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.app.action_open_log()  # type: ignore[attr-defined]
