"""The main screen: header, the four panels and the footer of key bindings."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.events import Resize
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget

from specbench_tui.core.state import RunState
from specbench_tui.tui.gpu_panel import GpuLine, GpuPanel
from specbench_tui.tui.header import SweepHeader
from specbench_tui.tui.key_bar import KeyBar
from specbench_tui.tui.log_panel import ServerLogPanel
from specbench_tui.tui.queue_panel import QueuePanel
from specbench_tui.tui.results_panel import ResultsPanel
from specbench_tui.tui.table_view import TableView

_PANELS = Binding.Group("Panels", compact=True)


class SweepScreen(Screen[None]):
    """Queue and results above, server log and GPUs below; stacked on narrow terminals.

    The key bar lists the keys by priority (quit first), so a narrow terminal cuts the least needed ones; under
    120 columns the GPU panel gives way to a one-line GPU summary above it.
    """

    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (40, "-tall")]
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "app.request_quit", "Quit", id="quit", tooltip="quit (asks while servers run)"),
        Binding("p", "app.toggle_pause", "Pause", id="sweep-pause", tooltip="pause or resume the queue"),
        Binding("s", "app.skip_selected", "Skip", id="sweep-skip-selected",
                tooltip="skip the selected configuration"),
        Binding("S", "app.skip_running", "Skip running", id="sweep-skip-running",
                tooltip="stop the running server and mark its configuration skipped"),
        Binding("r", "app.retry_selected", "Retry", id="sweep-retry", tooltip="queue the selected configuration again"),
        Binding("l", "app.open_log", "Log", id="log-open", tooltip="open the selected configuration's full log"),
        Binding("m", "app.toggle_maximize", "Max", id="panel-maximize", tooltip="maximise or restore the panel"),
        Binding("o", "app.cycle_sort", "Sort", id="results-sort", tooltip="sort the results by the next column"),
        Binding("c", "app.open_chart", "Chart", id="results-chart",
                tooltip="the results as a chart: speedup per configuration, acceptance vs budget"),
        Binding("a", "open_acceptance", "Acceptance", id="results-acceptance",
                tooltip="the selected configuration's acceptance per workload: by position, histogram, cost"),
        Binding("n", "app.notifications", "Notices", id="notifications",
                tooltip="every notification of this session"),
        Binding("t", "app.cycle_theme", "Theme", id="theme-next", tooltip="switch to the next theme"),
        Binding("1", "app.focus_panel('queue')", "Queue", id="focus-queue", group=_PANELS),
        Binding("2", "app.focus_panel('results')", "Results", id="focus-results", group=_PANELS),
        Binding("3", "app.focus_panel('log')", "Log", id="focus-log", group=_PANELS),
        Binding("4", "app.focus_panel('gpus')", "GPUs", id="focus-gpus", group=_PANELS),
    ]
    MAXIMIZED_HINT = " · m restores"
    maximized_panel: Widget | None = None
    """The panel shown alone (``m``, or a panel key for a panel the layout hides), if any."""

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
            yield ResultsPanel(id="results-panel", engine=str(self.state.ledger.plan_json.get("engine") or "sglang"))
        with Horizontal(id="bottom-row"):
            yield ServerLogPanel(id="log-panel")
            yield GpuPanel(id="gpu-panel")
        yield GpuLine(self.state, id="gpu-line")
        yield KeyBar(id="footer")

    def on_mount(self) -> None:
        self.query_one(QueuePanel).focus()
        self.post_message(SweepScreen.PanelsMounted())

    def on_resize(self, event: Resize) -> None:
        self.query_one(KeyBar).show_palette = event.size.width >= 120

    @property
    def panels(self) -> tuple[Widget, ...]:
        return (self.query_one(QueuePanel), self.query_one(ResultsPanel), self.query_one(ServerLogPanel),
                self.query_one(GpuPanel))

    def maximize_panel(self, panel: Widget) -> None:
        """Show ``panel`` alone, its title saying how to get back.

        Done with inline ``display`` rules rather than ``Screen.maximize``, whose screen-wide class change restyles
        every widget of the screen on each ``m``.
        """
        if self.maximized_panel is panel:
            return
        if self.maximized_panel is not None:
            self.restore_panels()
        for row in self.query("#top-row, #bottom-row"):
            row.styles.display = "block" if panel in row.children else "none"
        for other in self.panels:
            other.styles.display = "block" if other is panel else "none"
        panel.border_title = str(panel.border_title or "") + self.MAXIMIZED_HINT
        self.maximized_panel = panel

    def restore_panels(self) -> None:
        """Every panel back in its place."""
        panel = self.maximized_panel
        if panel is None:
            return
        self.maximized_panel = None
        for widget in (*self.query("#top-row, #bottom-row"), *self.panels):
            widget.styles.clear_rule("display")
            widget.refresh(layout=True)
        self.refresh(layout=True)
        panel.border_title = str(panel.border_title or "").removesuffix(self.MAXIMIZED_HINT)

    def action_open_acceptance(self) -> None:
        """``a``: the acceptance of the results table's selected configuration (the queue's when the results
        table has no focus) per workload, over the app's latest analysis."""
        from specbench_tui.tui.acceptance_screen import open_acceptance

        results = self.query_one(ResultsPanel)
        config_id = results.selected_config_id if results.has_focus else None
        open_acceptance(self.app, config_id or self.query_one(QueuePanel).selected_config_id)

    @on(TableView.RowSelected, "#queue-panel")
    @on(TableView.RowSelected, "#results-panel")
    def _row_chosen(self, event: TableView.RowSelected) -> None:
        event.stop()
        # Screen.app is typed App; this screen is pushed by SpecbenchApp only.
        self.app.action_open_log()  # type: ignore[attr-defined]
