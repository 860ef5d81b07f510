"""The specbench Textual app: live panels over a running sweep, and the keys that control it.

The engine calls back from its own thread for every event; the app only puts events in a queue and drains
it about ten times a second on the UI thread, folding them into a :class:`RunState` and updating each
panel once per drain (all log lines of a burst go to the log panel in one write). The UI therefore never
blocks the engine, and a slow terminal never slows measurements.

The results table shows the run's analysis, computed in a worker thread from a snapshot of the state's ledger
(one analysis at a time; a newer one is asked for when the results changed meanwhile), never on the UI thread.
A resumed run's state starts from its run directory (:meth:`RunState.from_history`), so the past is on screen
from the first frame: earlier states, rows, speedups and counts, as ``specbench report`` shows them.

The app is put together from parts by responsibility: :mod:`~specbench_tui.tui.announcements` (toasts for
engine events), :mod:`~specbench_tui.tui.controls` (pause, skip, retry), :mod:`~specbench_tui.tui.screen_actions`
(log and notification screens), :mod:`~specbench_tui.tui.quitting`, over :mod:`~specbench_tui.tui.app_base`
(what they share). This module holds the event loop, the panels' updates, the analysis worker and themes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from textual import events, work
from textual.app import App, ScreenStackError
from textual.binding import Binding, BindingType
from textual.widget import Widget
from textual.worker import Worker, WorkerState

from specbench_tui.application.logview import LogFeed
from specbench_tui.application.results_rows import ConfigNotes, build_rows, config_notes, view_rows
from specbench_tui.application.rows import ViewRow
from specbench_tui.application.viewmodel import SweepView, capped_configs
from specbench_tui.core.results import RunAnalysis
from specbench_tui.core.events import (
    ConfigFinished,
    ConfigStateChanged,
    CrashDetected,
    Event,
    GpuSampled,
    MeasurementRecorded,
    QueuePaused,
    QueueResumed,
    ServerLaunching,
    ServerStopped,
    SweepFinished,
    SweepStarted,
    WorkloadNotRun,
)
from specbench_tui.core.ledger import LedgerSnapshot
from specbench_tui.core.state import RunState
from specbench_tui.core.verdicts import partial_configs
from specbench_tui.engine.control import Outcome
from specbench_tui.tui.announcements import Announcements
from specbench_tui.tui.app_base import AppBase, EngineAdapter
from specbench_tui.tui.commands import SweepCommands
from specbench_tui.tui.controls import ControlActions
from specbench_tui.tui.gpu_panel import GpuLine, GpuPanel
from specbench_tui.tui.gc_pacing import HOLD_S, GarbagePacer
from specbench_tui.tui.log_panel import MAX_LINES, ServerLogPanel
from specbench_tui.tui.log_screen import FullLogScreen
from specbench_tui.tui.notifier import Notifier
from specbench_tui.tui.queue_panel import QueuePanel
from specbench_tui.tui.quitting import QuitActions
from specbench_tui.tui.results_panel import ResultsPanel
from specbench_tui.tui.safe_text import clean
from specbench_tui.tui.screen_actions import ScreenActions
from specbench_tui.tui.sweep_screen import SweepScreen
from specbench_tui.tui.terminal_alerts import TerminalAlerts
from specbench_tui.tui.terminal_watch import HangupWatch
from specbench_tui.tui.theme_sheets import ThemeSheets
from specbench_tui.tui.themes import DEFAULT_THEME, FALLBACK_THEME, load_themes

STOP_TIMEOUT_S = 60.0
"""How long quitting waits for the engine to tear the servers down."""
ENGINE_SWITCH_INTERVAL_S = 0.0005
"""The GIL switch interval while the engine thread measures next to the UI (see ``_start_engine``)."""
OPTIMISTIC_TIMEOUT_S = 15.0
"""How long a row shows what a key asked for before the engine confirms it; then it shows the engine's state."""
KEY_FIRST_S = HOLD_S
"""After a key, the server log's new lines wait (for at most this long, however fast keys come) so that the key's
answer is drawn first: beside a flooding server a drain landing in a key's answer added a log frame to it. The
pacer's hold (0.3 s), not 0.1 s: beside two busy loops an answer takes 100-170 ms of wall time, and a drain at 0.1 s
landed in it (``bench/bench_ui.py --busy 2 --keys t,ctrl+p``: p95 167/170 -> 105/138 ms). Crashes and every other
event are not held (a crash turns its row red at once)."""
PRIME_EVERY_S = 1.0
"""The shipped themes' stylesheets are parsed one a second from the panels' first fill, before ``t`` needs them."""
RESULTS_INTERVAL_S = 0.5
"""Least time between two rebuilds of the results table once there are many measurements."""
THROTTLE_RESULTS_FROM = 300
"""Measurements from which the results table is rebuilt at most every :data:`RESULTS_INTERVAL_S`."""


RESULT_EVENTS = (MeasurementRecorded, ConfigFinished, CrashDetected, ConfigStateChanged, WorkloadNotRun)
"""Events after which the results table is built again."""
GPU_EVENTS = (ServerLaunching, ServerStopped, ConfigFinished, ConfigStateChanged, SweepFinished)
"""Events after which the GPU panel is drawn again (besides a GPU sample)."""


@dataclass
class _Dirty:
    """Which panels one drain of events changed."""

    queue: bool = False
    results: bool = False
    gpus: bool = False


class AnalysedRows(NamedTuple):
    """What the analysis worker hands back: the run's analysis, the results table's rows built from it, and
    the configurations cut short or capped (the queue's notes): nothing of it is computed on the UI thread."""

    analysis: RunAnalysis
    rows: dict[str, ViewRow]
    partial: frozenset[str]
    capped: dict[str, str]



class SpecbenchApp(Announcements, ControlActions, ScreenActions, QuitActions, AppBase):
    """Header, sweep queue, results, server log and GPUs over one engine."""

    CSS_PATH = "app.tcss"
    TITLE = "specbench"
    COMMANDS = App.COMMANDS | {SweepCommands}
    PANELS = (("queue", "sweep queue"), ("results", "results"), ("log", "server log"), ("gpus", "GPUs"))
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "request_quit", "Quit", show=False, priority=True, id="quit-ctrl-q"),
        Binding("ctrl+c", "interrupt", "Quit", show=False, priority=True, id="quit-ctrl-c"),
    ]

    def __init__(self, engine: EngineAdapter, *, theme: str | None = None, clock: Callable[[], float] = time.time,
                 drain_interval_s: float = 0.1, themes_dir: Path | None = None) -> None:
        super().__init__()
        self.engine = engine
        """The engine adapter: events come from it, control goes to it."""
        self.clock = clock
        """Wall clock for elapsed time and ETA (frozen in snapshot tests)."""
        self.state = _initial_state(engine)
        """Everything shown, folded from the events (owned by the UI thread)."""
        self.analysis: RunAnalysis | None = None
        """The latest analysis of the state's ledger (what the results table shows)."""
        self._analysis_running = False
        self._analysis_wanted = False
        self._analysis_deferred = False
        self.engine_stopped = False
        """Whether ``engine.stop`` has returned."""
        self.stop_error: BaseException | None = None
        self._inbox: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self._ui_loop: asyncio.AbstractEventLoop | None = None
        self.log_feed = LogFeed(keep=MAX_LINES)
        """Server log lines from the engine, formatted off the UI thread (the panel takes them per drain)."""
        self.log_feed.names({cid: view.name for cid, view in self.state.configs.items()})
        self._drain_interval_s = drain_interval_s
        self._log_held_since: float | None = None
        """When the log's new lines were first left for a key's answer (None: not left)."""
        self._announced: set[tuple[object, ...]] = set()
        self._pending_controls: list[Callable[[], None]] = []
        self._answers: queue.SimpleQueue[Outcome] = queue.SimpleQueue()
        self._results_pending = False
        self._results_synced_at = float("-inf")
        self._quitting = False
        self._panels_ready = False
        self.notifier = Notifier(self, clock)
        """Coalesced toasts and the session's notification history (key ``n``)."""
        self.optimistic: dict[str, tuple[str, str, float]] = {}
        """config id → (state shown, note, when asked): what a key asked for, shown until the engine confirms."""
        self.pause_requested: bool | None = None
        """The queue state ``p`` asked for, shown in the header until the engine confirms it."""
        self.view = SweepView()
        """What the panels draw, built once per refresh in the application layer (:meth:`_show_view`)."""
        self.partial_ids: frozenset[str] = frozenset()
        self.capped_notes: dict[str, str] = {}
        """Configurations with a workload cut short, from the latest analysis (queue and header show them)."""
        self.preflight_problems: list[str] = []
        """Why the sweep could not start (pre-flight), as the engine said; printed again at exit."""
        self._log_screens: OrderedDict[str, FullLogScreen] = OrderedDict()
        """Full-log screens built so far (the most recent :data:`LOG_SCREENS_KEPT`), by configuration."""
        self._screen_size: tuple[int, int] | None = None
        self.detached = False
        """Whether this client left an engine process running (``q`` then detach)."""
        self.gc_pacer = GarbagePacer(schedule=lambda delay_s, callback: self.set_timer(delay_s, callback))
        """Full garbage collections while no key is being pressed (see :mod:`~specbench_tui.tui.gc_pacing`), the one
        garbage-collection policy; it also says how long background work waits for a key's answer."""
        self.theme_sheets = ThemeSheets()
        """A parsed stylesheet per theme: a theme seen (or primed) before is not parsed again."""
        themes, problems = load_themes(themes_dir)
        self._theme_problems = problems
        self.specbench_themes = [t.name for t in themes]
        """Names of the themes loaded from ``themes/`` (``t`` cycles through them)."""
        for loaded in themes:
            self.register_theme(loaded)
        wanted = theme or os.environ.get("SPECBENCH_THEME") or DEFAULT_THEME
        if wanted not in self.available_themes:
            fallback = DEFAULT_THEME if DEFAULT_THEME in self.available_themes else FALLBACK_THEME
            if theme:
                self._theme_problems.append(f"no theme named '{wanted}'; using '{fallback}'")
            wanted = fallback
        self.theme = wanted

    # ------------------------------------------------------------------------------------ set-up

    def get_default_screen(self) -> SweepScreen:
        return SweepScreen(self.state, self.clock)

    def on_sweep_screen_panels_mounted(self, message: SweepScreen.PanelsMounted) -> None:
        """Colour and fill the panels, then subscribe to the engine and start it."""
        message.stop()
        if self._panels_ready:
            return
        self._panels_ready = True
        if self._theme_problems:
            self.notifier.post("\n".join(self._theme_problems), title="Theme files skipped", severity="error",
                               timeout=20, topic=("themes",))
        self.record_past_notices()
        self._ui_loop = asyncio.get_running_loop()
        self.engine.subscribe(self._engine_event)
        if (notify := self.engine.plan.sweep.notify).terminal:  # the bell and a desktop notification on alerts
            alerts = TerminalAlerts(self, interval_s=notify.min_interval_s, sweep=self.engine.plan.sweep.name)
            self.engine.subscribe(alerts.take)
            alerts.start()
        self.set_interval(self._drain_interval_s, self.drain_events)
        self.set_interval(1.0, self._tick)
        self.gc_pacer.start()
        self.set_timer(PRIME_EVERY_S, lambda: self._prime_theme_sheets(list(self.specbench_themes)))
        HangupWatch(self).start()
        self._sync_panels(queue=True, results=True, gpus=True, force=True)
        self._start_engine()

    def _engine_event(self, event: Event) -> None:
        """Called by the engine from its own thread: only enqueue (never touch widgets here). Log lines go to
        the log feed, which formats them off the UI thread."""
        if not self.log_feed.put(event):
            self._inbox.put(event)
            if isinstance(event, CrashDetected) and self._ui_loop is not None:  # red first: drain now, not next tick
                with contextlib.suppress(RuntimeError):  # the loop is closing: the app is going anyway
                    self._ui_loop.call_soon_threadsafe(self.drain_events)

    @work(thread=True, exclusive=True, group="engine-start", exit_on_error=False)
    def _start_engine(self) -> None:
        """Start the sweep (in a thread, so a slow pre-flight never freezes the screen)."""
        # The engine thread stamps every streamed chunk; when a chunk arrives while this (UI) thread holds
        # the GIL, the stamp waits until the UI thread is made to let go: up to the switch interval, 5 ms by
        # default, which is more than the whole TTFT error budget. 0.5 ms bounds that wait; the UI pays
        # nothing when the engine is idle (the interval only matters while another thread waits).
        sys.setswitchinterval(min(sys.getswitchinterval(), ENGINE_SWITCH_INTERVAL_S))
        self.engine.start()

    @work(thread=True, exclusive=True, group="engine-stop", exit_on_error=False)
    def _stop_engine(self, abort: bool) -> None:
        """Abort the sweep if it still runs and wait for the engine to tear the servers down."""
        if abort:
            self.engine.abort(now=True)
        self.engine.stop(timeout=STOP_TIMEOUT_S)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if worker.group == "engine-start" and event.state == WorkerState.ERROR:
            self.notifier.post(f"The sweep could not start: {clean(worker.error, 400)}", title="✖ Engine error",
                               severity="error", timeout=30, topic=("engine",))
        elif worker.group == "analysis" and event.state in (WorkerState.SUCCESS, WorkerState.ERROR,
                                                             WorkerState.CANCELLED):
            self._analysis_done(worker)
        elif worker.group == "engine-stop" and event.state in (WorkerState.SUCCESS, WorkerState.ERROR,
                                                               WorkerState.CANCELLED):
            self.engine_stopped = event.state == WorkerState.SUCCESS
            self.stop_error = worker.error
            self.exit(0 if self.stop_error is None else 1)

    # ------------------------------------------------------------------------------------ events

    @property
    def panels_ready(self) -> bool:
        """Whether the main screen's panels are mounted and fed with events."""
        return self._panels_ready

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key):
            self.gc_pacer.key_pressed()
        await super().on_event(event)

    def on_unmount(self) -> None:
        """Give the frozen objects back to the garbage collector (the app is going; so are they)."""
        self.gc_pacer.stop()
        self.log_feed.close()

    def _tick(self) -> None:
        if self._panels_attached():
            self.gc_pacer.tick()
            self._expire_optimistic()
            self._header().refresh()
            if self._results_pending:
                self._sync_panels()

    def drain_events(self) -> int:
        """Fold every queued event into the state and update the panels once; returns how many."""
        if not self._panels_attached():
            return 0
        answered = self._drain_answers()
        self._take_log_lines()
        events: list[Event] = []
        try:
            while True:
                events.append(self._inbox.get_nowait())
        except queue.Empty:
            pass
        if not events:
            if answered:
                self._sync_panels(queue=True)
            return 0
        dirty = _Dirty(queue=answered)
        for event in events:  # log lines never come here: the log feed takes them (see _engine_event)
            try:
                self.state.apply(event)
            except Exception as exc:  # noqa: BLE001 - a malformed event must not take the UI down
                self.log.warning(f"event not applied: {exc!r}")
                continue
            self._after_applied(event, dirty)
        if dirty.queue or dirty.results or dirty.gpus or self._results_pending:
            self._sync_panels(queue=dirty.queue, results=dirty.results, gpus=dirty.gpus)
        return len(events)

    def _take_log_lines(self) -> None:
        """The display lines the log feed formatted since the last drain (a list swap: no parsing here); within
        :data:`KEY_FIRST_S` of a key, left for the next drain."""
        now = self.gc_pacer.clock()
        if self.gc_pacer.key_hold_left() > 0:
            held_since = self._log_held_since = self._log_held_since or now
            if now - held_since < KEY_FIRST_S:
                return
        self._log_held_since = None
        burst = self.log_feed.take()
        if burst.lines or burst.dropped:
            self._log_panel().append_shown(burst.lines, dropped=burst.dropped)
        if (stamp := self.log_feed.last_line_at) is not None and stamp > (self.state.last_event_at or 0.0):
            self.state.last_event_at = stamp

    def _drain_answers(self) -> bool:
        """Take in the engine's answers to commands; whether one of them changed what the queue shows."""
        changed = False
        try:
            while True:
                changed = self.answered(self._answers.get_nowait()) or changed
        except queue.Empty:
            pass
        return changed

    def _after_applied(self, event: Event, dirty: _Dirty) -> None:
        """What an applied event (not a log line) asks of the panels, the pending keys and the toasts."""
        if isinstance(event, GpuSampled):
            dirty.gpus = True
            return
        if isinstance(event, SweepStarted) and self._pending_controls:
            pending, self._pending_controls = self._pending_controls, []
            for request in pending:
                request()
        self._confirmed(event)
        dirty.queue = True
        dirty.results = dirty.results or isinstance(event, RESULT_EVENTS)
        dirty.gpus = dirty.gpus or isinstance(event, GPU_EVENTS)
        self._announce(event)

    def _confirmed(self, event: Event) -> None:
        """Drop what a key asked for once the engine has said what became of it."""
        if isinstance(event, (ConfigStateChanged, ConfigFinished, ServerLaunching)):
            self.optimistic.pop(event.config_id, None)
        elif isinstance(event, (QueuePaused, QueueResumed)):
            self.pause_requested = None
        elif isinstance(event, SweepFinished):
            self.optimistic.clear()
            self.pause_requested = None
            with contextlib.suppress(LookupError):  # the key bar leaves out the keys that steered the sweep
                self.sweep_screen.refresh_bindings()

    def _expire_optimistic(self) -> None:
        """A request the engine never answered: the row goes back to the engine's state, and says so."""
        now = time.monotonic()
        for config_id, (_, _, asked_at) in list(self.optimistic.items()):
            if now - asked_at > OPTIMISTIC_TIMEOUT_S:
                del self.optimistic[config_id]
                view = self.state.configs.get(config_id)
                name = clean(view.name if view else config_id, 80)
                self.notifier.post(f"{name}: the engine has not confirmed the request; the row shows its state.",
                                   severity="warning", topic=("control", config_id))
                self._sync_panels(queue=True)


    def _sync_panels(self, *, queue: bool = False, results: bool = False, gpus: bool = False,
                     force: bool = False) -> None:
        if queue:
            self._show_view(force)
            self._log_panel().set_sources([v.name for v in self.state.active()])
        if results or self._results_pending:
            # The analysis walks every measurement: for big runs at most twice a second (the tick catches up).
            now = time.monotonic()
            if (force or self.state.measurements < THROTTLE_RESULTS_FROM
                    or now - self._results_synced_at >= RESULTS_INTERVAL_S):
                self._request_analysis()
                self._results_synced_at = now
                self._results_pending = False
            else:
                self._results_pending = True
        if gpus or queue:
            self._gpu_panel().sync(self.state)
            self.sweep_screen.query_one(GpuLine).refresh()
        self._header().refresh()

    def _request_analysis(self) -> None:
        """Analyse the ledger as it is now, in a worker; one at a time (a request meanwhile runs next)."""
        if self._analysis_running:
            self._analysis_wanted = True
            return
        if (held := self.gc_pacer.key_hold_left()) > 0:  # a key's answer is being drawn: it gets the GIL first
            self._analysis_wanted = True
            if not self._analysis_deferred:
                self._analysis_deferred = True
                self.set_timer(held, self._analysis_after_key)
            return
        self._analysis_running = True
        self._analysis_wanted = False
        self._analyse_in_thread(self.state.ledger.snapshot(), config_notes(self.state))

    def _analysis_after_key(self) -> None:
        self._analysis_deferred = False
        self._request_analysis()

    # A description of its own: without one Textual describes a worker by the repr() of its arguments, on the UI
    # thread, every time: the whole ledger snapshot (8 ms and 1.4 MB of text for 2,400 measurements).
    @work(thread=True, group="analysis", exit_on_error=False, description="analysis")
    def _analyse_in_thread(self, snapshot: LedgerSnapshot, notes: ConfigNotes) -> AnalysedRows:
        """The analysis of ``snapshot`` and the results table's rows, off the UI thread (it walks every
        measurement; the rows of a big run are thousands)."""
        analysis = snapshot.analyse()
        return AnalysedRows(analysis, view_rows(build_rows(None, analysis, notes)), partial_configs(analysis),
                            capped_configs(analysis))

    def _analysis_done(self, worker: Worker[Any]) -> None:
        self._analysis_running = False
        if worker.state == WorkerState.SUCCESS and isinstance(worker.result, AnalysedRows):
            self.analysis = worker.result.analysis
            rows = worker.result.rows
            partial, capped = worker.result.partial, worker.result.capped
            partial_changed = partial != self.partial_ids or capped != self.capped_notes
            self.partial_ids, self.capped_notes = partial, capped
            if self._panels_attached():
                self._results_panel().sync(self.state, False, self.analysis, rows)
                if partial_changed:
                    self._show_view()
                self.prepare_chart()  # drawn ahead of c, in a worker
        elif worker.state == WorkerState.ERROR:
            self.log.warning(f"analysis failed: {worker.error!r}")
        if self._analysis_wanted:
            self._request_analysis()

    @property
    def analysis_settled(self) -> bool:
        """No analysis is running or wanted: the results table shows the ledger as it is."""
        return not self._analysis_running and not self._analysis_wanted and not self._results_pending

    # ------------------------------------------------------------------------------------ theme

    def refresh_css(self, animate: bool = True) -> None:
        """Textual's restyle after a theme change, with the theme's stylesheet parsed once (:mod:`theme_sheets`)
        rather than on every change: the current screen and those under it restyled, the screen laid out again."""
        sheet = self.theme_sheets.sheet_for(self.get_css_variables(), self.stylesheet)
        self.stylesheet = sheet
        sheet.update(self, animate=animate)
        try:
            current = self.screen
        except ScreenStackError:  # no screen yet, or none any more
            return
        for screen in self.screen_stack:
            if screen is not current:
                sheet.update(screen, animate=animate)
        if current.is_mounted:
            current.refresh(layout=True)

    def _prime_theme_sheets(self, names: list[str]) -> None:
        """Parses the next of ``names``' stylesheets ahead of its first use, then the rest, a timer turn each."""
        if not names:
            return
        theme = self.get_theme(names[0])
        if theme is not None:
            variables = {**self.get_theme_variable_defaults(), **theme.to_color_system().generate(), **theme.variables}
            self.theme_sheets.prime(variables, self.stylesheet)
        self.set_timer(PRIME_EVERY_S, lambda: self._prime_theme_sheets(names[1:]))

    def set_theme(self, name: str) -> None:
        """Switch to theme ``name``: every widget takes its colours from the theme when it draws."""
        if name in self.available_themes:
            self.theme = name

    def action_cycle_theme(self) -> None:
        names = self.specbench_themes or [FALLBACK_THEME]
        index = names.index(self.theme) + 1 if self.theme in names else 0
        name = names[index % len(names)]
        self.notifier.answer_with(f"Theme: {name}", lambda: self.set_theme(name), timeout=3, topic=("theme",))

    # ------------------------------------------------------------------------------------ panels

    def _panel_widget(self, panel: str) -> Widget:
        screen = self.sweep_screen
        if panel == "queue":
            return screen.query_one(QueuePanel)
        if panel == "results":
            return screen.query_one(ResultsPanel)
        if panel == "log":
            return screen.query_one(ServerLogPanel)
        return screen.query_one(GpuPanel)

    def action_focus_panel(self, panel: str) -> None:
        screen = self.sweep_screen
        widget = self._panel_widget(panel)
        maximized = screen.maximized_panel
        shown = widget.display and widget.region.area > 0
        if maximized is not None and maximized is not widget or maximized is None and not shown:
            screen.maximize_panel(widget)
            shown = False
        target: Widget = widget
        if isinstance(widget, GpuPanel):
            target = widget.table if widget.table.display else widget
        if shown:
            target.focus()  # at once: the next key (m, s…) already acts on this panel
        else:
            self.call_after_refresh(target.focus)

    def action_toggle_maximize(self) -> None:
        screen = self.sweep_screen
        if screen.maximized_panel is not None:
            screen.restore_panels()
            return
        focused = screen.focused
        panel = next((w for w in ([focused] + list(focused.ancestors) if focused else [])
                      if isinstance(w, (QueuePanel, ResultsPanel, ServerLogPanel, GpuPanel))), None)
        if panel is not None:
            screen.maximize_panel(panel)

    def action_cycle_sort(self) -> None:
        label = self._results_panel().cycle_sort()
        self.notifier.answer(f"Results sorted by {label}.", timeout=3, topic=("sort",))


def _initial_state(engine: EngineAdapter) -> RunState:
    """The plan's configurations, on top of what the run directory already holds (a resumed run opens with its
    past; a fresh one has none)."""
    try:
        measurements, events = engine.history()
    except Exception:  # noqa: BLE001 - an unreadable run directory: the engine itself will say why
        measurements, events = [], []
    if measurements or events:
        return RunState.from_history(engine.plan, str(engine.run_dir), measurements, events, live=engine.live)
    return RunState.from_plan(engine.plan, run_dir=str(engine.run_dir))
