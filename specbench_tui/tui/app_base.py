"""What every part of the app shares: its state, the engine it steers, the panels and a few helpers.

:class:`~specbench_tui.tui.app.SpecbenchApp` is put together from parts by responsibility (announcements,
control keys, screens, quitting); each part derives from :class:`AppBase`, which declares what they share.
"""

from __future__ import annotations

import queue
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from textual.app import App
from textual.css.query import QueryError

from specbench_tui.application.viewmodel import SweepView, build_view
from specbench_tui.core.events import Event
from specbench_tui.core.plan import Plan
from specbench_tui.core.records import Measurement
from specbench_tui.core.results import RunAnalysis
from specbench_tui.core.state import ConfigView, RunState
from specbench_tui.engine.control import Outcome, SweepControl
from specbench_tui.tui.gpu_panel import GpuPanel
from specbench_tui.tui.header import SweepHeader
from specbench_tui.tui.gc_pacing import GarbagePacer
from specbench_tui.tui.log_panel import ServerLogPanel
from specbench_tui.tui.log_screen import FullLogScreen
from specbench_tui.tui.notifier import Notifier, Severity
from specbench_tui.tui.palette import Palette
from specbench_tui.tui.queue_panel import QueuePanel
from specbench_tui.tui.results_panel import ResultsPanel
from specbench_tui.tui.sweep_screen import SweepScreen


class EngineAdapter(SweepControl, Protocol):
    """What the app needs of the engine: the sweep's control commands plus its plan, run directory, event
    stream, history and life cycle (the engine thread, an attached engine process; a scripted fake in tests)."""

    plan: Plan
    read_only: bool
    """Whether control requests are refused (a view opened without control)."""
    engine_pid: int | None
    """The engine process's pid when the sweep runs in a process of its own (this app is one of its clients);
    None when it runs in this process."""
    live: bool
    """Whether the history already holds a live sweep's past (an attached view; a resumed run is not live)."""

    @property
    def run_dir(self) -> Path: ...

    def subscribe(self, callback: Callable[[Event], None]) -> None: ...
    def start(self) -> None: ...
    def stop(self, timeout: float) -> bool: ...
    def history(self) -> tuple[list[Measurement], list[Event]]: ...
    def detach(self) -> None: ...


class AppBase(App[int]):
    """The shared attributes and helpers of the app's parts (set in ``SpecbenchApp.__init__``)."""

    engine: EngineAdapter
    state: RunState
    analysis: RunAnalysis | None
    notifier: Notifier
    gc_pacer: GarbagePacer
    optimistic: dict[str, tuple[str, str, float]]
    pause_requested: bool | None
    partial_ids: frozenset[str]
    capped_notes: dict[str, str]
    view: SweepView
    preflight_problems: list[str]
    detached: bool
    engine_stopped: bool
    _announced: set[tuple[object, ...]]
    _pending_controls: list[Callable[[], None]]
    _answers: queue.SimpleQueue[Outcome]
    _log_screens: OrderedDict[str, FullLogScreen]
    _quitting: bool
    _panels_ready: bool
    _screen_size: tuple[int, int] | None

    _palette: tuple[tuple[str, bool], Palette] | None = None

    @property
    def palette(self) -> Palette:
        """Rich styles of the current theme, for text styled in Python (the header, log lines), read when drawn:
        worked out once per theme."""
        key = (self.theme, self.no_color)
        if self._palette is None or self._palette[0] != key:
            self._palette = (key, Palette.from_variables(self.get_css_variables(), no_color=self.no_color))
        return self._palette[1]

    @property
    def sweep_screen(self) -> SweepScreen:
        for screen in self.screen_stack:
            if isinstance(screen, SweepScreen):
                return screen
        raise LookupError("the sweep screen is not installed")

    def _panels_attached(self) -> bool:
        """Whether the panels can be updated (not before they mount, nor while the app shuts down)."""
        try:
            return self._panels_ready and self._header().is_attached
        except (LookupError, QueryError):
            return False

    def _header(self) -> SweepHeader:
        return self.sweep_screen.query_one(SweepHeader)

    def _log_panel(self) -> ServerLogPanel:
        return self.sweep_screen.query_one(ServerLogPanel)

    def _queue_panel(self) -> QueuePanel:
        return self.sweep_screen.query_one(QueuePanel)

    def _results_panel(self) -> ResultsPanel:
        return self.sweep_screen.query_one(ResultsPanel)

    def _gpu_panel(self) -> GpuPanel:
        return self.sweep_screen.query_one(GpuPanel)

    def selected_config(self) -> ConfigView | None:
        """The configuration under the cursor of the results table when it has focus, else of the queue."""
        try:
            screen = self.sweep_screen
            results = screen.query_one(ResultsPanel)
            config_id = results.selected_config_id if results.has_focus else None
            if config_id is None:
                config_id = screen.query_one(QueuePanel).selected_config_id
        except LookupError:
            return None
        return self.state.configs.get(config_id) if config_id else None


    def _show_view(self, force: bool = False) -> None:
        """Build the sweep view once (state, analysis, what keys asked) and hand it to the queue and header."""
        self.view = build_view(self.state, partial=self.partial_ids, asked=self.optimistic,
                               pause_requested=self.pause_requested, capped=self.capped_notes)
        self._queue_panel().sync(self.view, force)
        header = self._header()
        header.view = self.view
        header.refresh()

    def _hint(self, message: str, severity: Severity = "warning") -> None:
        """A short answer to a key (not kept in the history)."""
        self.notifier.answer(message, severity=severity, timeout=4, topic=("hint",))

    @property
    def attached(self) -> bool:
        """Whether the engine runs in its own process and this app is one of its clients."""
        return self.engine.engine_pid is not None

    def action_request_quit(self) -> None:
        raise NotImplementedError  # QuitActions

    def _stop_engine(self, abort: bool) -> Any:
        raise NotImplementedError  # SpecbenchApp
