"""The smaller things a newcomer met on the screen (issue 46, point 6): keys and commands offered only where they
can act, and words that say what happened.

A finished sweep's palette offers no pause (nor skip or retry), and its key bar lists none of them; a read-only view
(the browser's, without ``--control``) lists none of p, s, S and r, and a press still says why nothing happens.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_fakes import T0, FakeEngine, at_rest

from specbench_tui.tui.app import SpecbenchApp
from specbench_tui.tui.commands import SweepCommands
from specbench_tui.tui.key_bar import KeyBar

STEERING_KEYS = {"p", "s", "S", "r"}


@pytest.fixture
def engine(tmp_path: Path) -> FakeEngine:
    return FakeEngine(tmp_path / "runs" / "2026-01-01_100000_demo")


async def _ready(app: SpecbenchApp, pilot) -> None:
    while not app.panels_ready:
        await pilot.pause(0.02)


def _titles(app: SpecbenchApp) -> list[str]:
    return [title for title, _, _ in SweepCommands(app.screen)._commands()]


def _keys(app: SpecbenchApp) -> set[str]:
    return {item.key for item in app.sweep_screen.query_one(KeyBar).items()}


async def test_a_finished_sweep_offers_no_pause(engine: FakeEngine) -> None:
    app = SpecbenchApp(engine, clock=lambda: T0 + 600)
    async with app.run_test(size=(160, 48)) as pilot:
        await _ready(app, pilot)
        engine.play_until_running()
        app.drain_events()
        await at_rest(pilot)
        running = _titles(app)
        assert "sweep: pause the queue" in running and any(t.startswith("sweep: skip the running") for t in running)
        assert STEERING_KEYS <= _keys(app)
        engine.play()
        app.drain_events()
        await at_rest(pilot)
        assert app.state.outcome == "completed"
        ended = _titles(app)
        assert not [title for title in ended if title.startswith("sweep:")], ended
        assert "quit" in ended and any(title.startswith("log: ") for title in ended)
        assert not STEERING_KEYS & _keys(app), _keys(app)
        assert "q" in _keys(app) and "l" in _keys(app)


async def test_a_read_only_view_lists_no_steering_keys(engine: FakeEngine) -> None:
    engine.read_only = True
    app = SpecbenchApp(engine, clock=lambda: T0 + 600)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await _ready(app, pilot)
        engine.play_until_running()
        app.drain_events()
        await at_rest(pilot)
        keys = _keys(app)
        assert not STEERING_KEYS & keys, keys
        assert {"q", "l", "c", "n"} <= keys
        assert not [title for title in _titles(app) if title.startswith("sweep:")]
        await pilot.press("p")  # not listed, still answered: the view says why it does nothing
        await pilot.pause()
        assert any("read-only" in n.message for n in app.notifier.on_screen())
        assert ("pause",) not in engine.calls


async def test_the_acceptance_screen_calls_a_zero_out_configuration_zero_out(engine: FakeEngine) -> None:
    from textual.widgets import Static

    from specbench_tui.tui.acceptance_screen import AcceptanceScreen, open_acceptance

    app = SpecbenchApp(engine, clock=lambda: T0 + 600)
    async with app.run_test(size=(160, 48)) as pilot:
        await _ready(app, pilot)
        engine.play()
        app.drain_events()
        await at_rest(pilot)
        zero = app.state.by_name("ddtree-b16-tp1")
        assert zero is not None and zero.state.value == "done" and zero.zero_output
        open_acceptance(app, zero.config_id)
        await at_rest(pilot)
        screen = app.screen
        assert isinstance(screen, AcceptanceScreen) and screen.detail is not None
        assert screen.detail.state == "zero-out"
        title = str(screen.query_one("#acceptance-title", Static).render())
        assert "zero-out" in title and "done" not in title, title
