"""Toasts say what changes a decision, in the words every other view uses (issue 46, points 2, 4 and 6).

A crash's toast names the final signature and the crash's one cause (the queue's and the report's), never the
first, generic match; a configuration's own information notes (caches cold, its batch limit) go to the notice
history without a toast; the history holds the notices said before the screen opened (a run's start-up).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_fakes import T0, FakeEngine

from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    ConfigStateChanged,
    CrashDetected,
    Event,
    Notice,
    ServerLaunching,
    SweepStarted,
)
from specbench_tui.core.records import Measurement
from specbench_tui.tui.app import SpecbenchApp

SCHEDULER_LINE = "[2026-01-01 10:00:03] Scheduler hit an exception: Traceback (most recent call last):"
CUDA_LINE = "torch.AcceleratorError: CUDA error: an illegal instruction was encountered"


@pytest.fixture
def engine(tmp_path: Path) -> FakeEngine:
    return FakeEngine(tmp_path / "runs" / "2026-01-01_100000_demo")


async def _ready(app: SpecbenchApp, pilot) -> None:
    while not app.panels_ready:
        await pilot.pause(0.02)


async def _running(app: SpecbenchApp, pilot, engine: FakeEngine) -> tuple[str, str]:
    await _ready(app, pilot)
    config = engine.plan.configs[0]
    engine.emit(ConfigStateChanged(config_id=config.id, name=config.name, state=ConfigState.LAUNCHING, ts=T0))
    engine.emit(ServerLaunching(config_id=config.id, name=config.name, argv=("x",), gpus=(0,), port=1, pid=2,
                                log_path="x.log", ts=T0))
    engine.emit(ConfigStateChanged(config_id=config.id, name=config.name, state=ConfigState.RUNNING, ts=T0 + 1))
    app.drain_events()
    await pilot.pause()
    return config.id, config.name


def _crash_toasts(app: SpecbenchApp) -> list[str]:
    return [n.message for n in app.notifier.on_screen() if n.title == "✖ Server crashed"]


async def test_the_crash_toast_says_the_final_signature_and_cause(engine: FakeEngine) -> None:
    """The engine publishes the first match at once (``scheduler_exception``, incomplete) and the most specific
    one with the cause once the trailing lines are in: the toast says the latter, as the queue does."""
    app = SpecbenchApp(engine, clock=lambda: T0 + 600)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        config_id, name = await _running(app, pilot, engine)
        engine.emit(CrashDetected(config_id=config_id, signature="scheduler_exception", line=SCHEDULER_LINE,
                                  excerpt=(SCHEDULER_LINE,), log_line_number=40, complete=False, ts=T0 + 2,
                                  cause=SCHEDULER_LINE))
        app.drain_events()
        await pilot.pause()
        assert app.state.configs[config_id].state is ConfigState.CRASHED, "the row reads crashed at once"
        assert _crash_toasts(app) == [], "no toast before the crash's final signature is known"
        engine.emit(CrashDetected(config_id=config_id, signature="cuda_illegal_instruction", line=CUDA_LINE,
                                  excerpt=(SCHEDULER_LINE, CUDA_LINE), log_line_number=45, complete=True,
                                  ts=T0 + 2, cause=CUDA_LINE))
        app.drain_events()
        await pilot.pause()
        toasts = _crash_toasts(app)
        assert toasts == [f"{name} crashed: cuda_illegal_instruction\n{CUDA_LINE}"], toasts
        line = next(line for line in app.view.lines if line.config_id == config_id)
        assert "cuda_illegal_instruction" in line.note, "the queue names the same signature"
        assert not any("scheduler_exception" in entry.message for entry in app.notifier.history)


async def test_a_crash_without_its_complete_event_is_told_by_its_final_reason(engine: FakeEngine) -> None:
    """An engine whose complete crash event never came (an older engine, a lost line): the configuration's ending
    says the crash in the queue's words, its signature and cause, once."""
    app = SpecbenchApp(engine, clock=lambda: T0 + 600)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        config_id, name = await _running(app, pilot, engine)
        reason = f"cuda_illegal_instruction: {CUDA_LINE}"
        engine.emit(ConfigFinished(config_id=config_id, name=name, state=ConfigState.CRASHED, reason=reason,
                                   signature="cuda_illegal_instruction", ts=T0 + 3))
        app.drain_events()
        await pilot.pause()
        toasts = [n.message for n in app.notifier.on_screen() if n.title == "✖ Configuration crashed"]
        assert toasts == [f"{name} crashed: {reason}"], toasts
        line = next(line for line in app.view.lines if line.config_id == config_id)
        assert line.note == reason, "the queue says the same"


async def test_caches_cold_goes_to_the_history_without_a_toast(engine: FakeEngine) -> None:
    app = SpecbenchApp(engine, clock=lambda: T0 + 600)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        config_id, name = await _running(app, pilot, engine)
        cold = f"{name}: caches cold: the server is flushed before every measured request and load point"
        warning = f"{name}: the server did not flush its caches within 5 s"
        engine.emit(Notice(level="info", text=cold, config_id=config_id, ts=T0 + 2))
        engine.emit(Notice(level="warning", text=warning, config_id=config_id, ts=T0 + 3))
        app.drain_events()
        await pilot.pause()
        shown = [n.message for n in app.notifier.on_screen()]
        assert cold not in shown, "a configuration's information note is no toast"
        assert warning in shown, "a warning still is"
        assert [e.message for e in app.notifier.history if e.message == cold] == [cold], "the history keeps it"


class _AttachedEngine(FakeEngine):
    """A sweep joined mid-run: its past (the start-up notices among it) comes from the run directory."""

    def __init__(self, run_dir: Path, past: list[Event]) -> None:
        super().__init__(run_dir)
        self.past = past
        self.live = True

    def history(self) -> tuple[list[Measurement], list[Event]]:
        return [], list(self.past)


async def test_the_history_holds_the_start_up_notices(tmp_path: Path) -> None:
    startup = ("configs[2] passes --speculative-algorithm DDTREE, which sglang 0.5.23 does not ship: the server "
               "must be a build (a fork) that registers it")
    idle = "energy: idle power measured before the sweep (GPU 0 39.0 W)"
    engine = _AttachedEngine(tmp_path / "runs" / "2026-01-01_100000_demo", [])
    engine.past = [SweepStarted(sweep="demo", run_dir=str(engine.run_dir), total_configs=5, ts=T0),
                   Notice(level="info", text=idle, ts=T0 + 0.1),
                   Notice(level="warning", text=startup, ts=T0 + 0.2)]
    app = SpecbenchApp(engine, clock=lambda: T0 + 600)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await _ready(app, pilot)
        await pilot.pause()
        history = [(entry.severity, entry.message) for entry in app.notifier.history]
        assert ("information", idle) in history and ("warning", startup) in history, history
        assert not any(n.message in (idle, startup) for n in app.notifier.on_screen()), "said before: no toast"
        engine.emit(Notice(level="warning", text=startup, ts=T0 + 0.2))  # the same notice again is not doubled
        app.drain_events()
        await pilot.pause()
        assert sum(1 for entry in app.notifier.history if entry.message == startup) == 1


async def test_replaced_toasts_leave_no_empty_holders_behind(engine: FakeEngine) -> None:
    """Textual's toast rack takes a replaced toast down but not the holder it mounted it in; the notifier removes
    the empty holders, so thirty answers leave the screen's node count where one did (each holder was restyled on
    every theme change and laid out on every layout). Toasts posted in a burst all still show."""
    app = SpecbenchApp(engine, theme="specbench-dark", clock=lambda: T0)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await _ready(app, pilot)
        for index in range(30):
            app.notifier.answer(f"answer {index}", topic=("key",))
            await pilot.pause(0.05)
        await pilot.pause(0.2)
        holders = list(app.screen.query("ToastHolder"))
        assert sum(1 for holder in holders if not holder.children) <= 1, len(holders)
        for index in range(3):  # a burst: each post sweeps while the one before is still being mounted
            app.notifier.post(f"burst {index}", topic=("burst", index))
        await pilot.pause(0.3)
        shown = {str(toast.render()) for toast in app.screen.query("Toast") if toast.is_mounted}
        assert all(any(f"burst {index}" in text for text in shown) for index in range(3)), shown
