"""Opening screens over the sweep: a configuration's full log (kept once built), the notifications history and the
chart."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specbench_tui.core.state import ConfigView
from specbench_tui.rundir.store import log_file_name
from specbench_tui.tui.app_base import AppBase
from specbench_tui.tui.log_screen import FullLogScreen
from specbench_tui.tui.notifications_screen import NotificationsScreen
from specbench_tui.tui.safe_text import clean

if TYPE_CHECKING:
    from specbench_tui.tui.chart_screen import ChartScreen

LOG_SCREENS_KEPT = 4
"""Full-log screens kept built after they close, so reopening one is instant."""
CHART_MODULE = "specbench_tui.tui.chart_screen"
"""Imported in a worker thread when the first analysis is in (it brings plotext: ~25 ms), not on the first ``c``."""


class ScreenActions(AppBase):
    """Screen keys of :class:`~specbench_tui.tui.app.SpecbenchApp` (``l``, ``n``, ``c``)."""

    _chart: ChartScreen | None = None
    _chart_importing = False
    _chart_deferred = False

    def chart_screen(self) -> ChartScreen:
        """The chart screen, built and installed once (kept between opens, so it is drawn ahead while closed)."""
        if self._chart is None:
            from specbench_tui.tui.chart_screen import ChartScreen

            self._chart = ChartScreen(lambda: self.analysis)
            self.install_screen(self._chart, "specbench-chart")
            self.theme_changed_signal.subscribe(self, lambda _: self.prepare_chart())  # redrawn in its colours
        return self._chart

    def prepare_chart(self) -> None:
        """A newer analysis is in: have the chart drawn ahead of ``c`` in a worker (its module imported in one
        first, so that the UI thread never waits for plotext); not while a key's answer is being drawn, nor once
        the app is closing (an analysis that finished as the app quit: the screen cannot be installed then)."""
        if not self.is_running:
            return
        if (held := self.gc_pacer.key_hold_left()) > 0:
            if not self._chart_deferred:
                self._chart_deferred = True
                self.set_timer(held, self._chart_after_key)
            return
        if CHART_MODULE in sys.modules:
            self.chart_screen().prepare()
        elif not self._chart_importing:
            self._chart_importing = True
            loop, context = asyncio.get_running_loop(), contextvars.copy_context()  # the app's, for the callback

            def load() -> None:
                try:
                    importlib.import_module(CHART_MODULE)
                finally:
                    with contextlib.suppress(RuntimeError):  # the app's loop is closed: it is gone
                        loop.call_soon_threadsafe(self._chart_imported, context=context)

            self.run_worker(load, thread=True, group="chart", exit_on_error=False, description="chart import")

    def _chart_after_key(self) -> None:
        self._chart_deferred = False
        self.prepare_chart()

    def _chart_imported(self) -> None:
        """The import worker is done; it may finish as the app quits (Ctrl-C in serve): nothing to install then."""
        self._chart_importing = False
        if self.is_running and CHART_MODULE in sys.modules:
            self.chart_screen().prepare()

    def action_open_chart(self) -> None:
        """``c``: the results as a chart (:class:`~specbench_tui.tui.chart_screen.ChartScreen`), from the same
        analysis as the results table, redrawn as newer ones arrive."""
        chart = self.chart_screen()
        if chart not in self.screen_stack:
            self.push_screen(chart)

    def action_notifications(self) -> None:
        """Open the history of this session's notifications."""
        if not any(isinstance(s, NotificationsScreen) for s in self.screen_stack):
            self.push_screen(NotificationsScreen(self.notifier.history, self.palette))

    def log_path_of(self, view: ConfigView) -> Path:
        """Where the configuration's server log is (as the engine announced it, else the run directory's)."""
        if view.log_path:
            path = Path(view.log_path)
            return path if path.is_absolute() else Path(self.engine.run_dir) / path
        return Path(self.engine.run_dir) / "logs" / log_file_name(view.name, view.config_id)

    def open_log_of(self, config_id: str) -> None:
        """Open the full-log screen for ``config_id``."""
        view = self.state.configs.get(config_id)
        if view is None:
            return
        path = self.log_path_of(view)
        if not path.exists():
            self._hint(f"{clean(view.name, 80)} has no log yet ({view.state.value}).")
            return
        screen = self._log_screens.get(config_id)
        if screen is not None and screen.path == path and screen.is_attached:
            self._log_screens.move_to_end(config_id)
            screen.retarget(follow=view.state.active, crash_line_number=view.crash_log_line,
                            crash_line=view.crash_line, signature=view.signature)
        else:
            if screen is not None:
                self._forget_log_screen(config_id)
            screen = FullLogScreen(view.name, path, follow=view.state.active,
                                   crash_line_number=view.crash_log_line, crash_line=view.crash_line,
                                   signature=view.signature)
            # Kept once built: opening the same log again (l, Esc, l…) costs no compose and no styling.
            self.install_screen(screen, f"specbench-log-{len(self._log_screens)}-{config_id}")
            self._log_screens[config_id] = screen
            for old_id in list(self._log_screens)[:-LOG_SCREENS_KEPT]:
                self._forget_log_screen(old_id)
        self.push_screen(screen)

    def _forget_log_screen(self, config_id: str) -> None:
        screen = self._log_screens.get(config_id)
        if screen is None or screen in self.screen_stack:
            return
        del self._log_screens[config_id]
        self.uninstall_screen(screen)
        if screen.is_attached:
            screen.remove()

    def action_open_log(self) -> None:
        view = self.selected_config()
        if view is None:
            self._hint("Select a configuration in the queue first.")
            return
        self.open_log_of(view.config_id)
