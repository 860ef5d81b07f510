"""SVG snapshots at fixed sizes with deterministic content (scripted events, frozen clock, relative paths).

Review changes with ``pytest tests/tui/test_tui_snapshots.py --snapshot-update`` only after looking at the report.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from narrowing import present
from tui_fakes import T0, FakeEngine, at_rest, repaint_all

from specbench_tui.tui.app import SpecbenchApp
from specbench_tui.tui.queue_panel import QueuePanel


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeEngine:
    monkeypatch.chdir(tmp_path)
    return FakeEngine(tmp_path / "runs" / "2026-01-01_100000_demo")


def make_app(engine: FakeEngine, theme: str | None = None) -> SpecbenchApp:
    app = SpecbenchApp(engine, theme=theme, clock=lambda: T0 + 754)
    app.animation_level = "none"
    return app


async def ready(pilot) -> None:
    """Wait until the app has subscribed to the engine (events published before would be missed)."""
    while not pilot.app.panels_ready:
        await pilot.pause(0.02)


async def steady(pilot) -> None:
    """Fold pending events, drop toasts, and wait until the screen is at rest: the analysis (which may ask for
    another when it ends), the tables' measuring of new rows, a followed row, the log's repaint."""
    app = pilot.app
    app.drain_events()
    await at_rest(pilot)
    app.clear_notifications()
    await at_rest(pilot)
    repaint_all(app)
    await at_rest(pilot)


def test_mid_run_wide(engine: FakeEngine, snap_compare) -> None:
    async def run_before(pilot) -> None:
        await ready(pilot)
        engine.play_until_running()
        await steady(pilot)

    assert snap_compare(make_app(engine), terminal_size=(160, 48), run_before=run_before)


def test_mid_run_narrow(engine: FakeEngine, snap_compare) -> None:
    async def run_before(pilot) -> None:
        await ready(pilot)
        engine.play_until_running()
        await steady(pilot)

    assert snap_compare(make_app(engine), terminal_size=(80, 24), run_before=run_before)


def test_finished_light_theme_sorted(engine: FakeEngine, snap_compare) -> None:
    async def run_before(pilot) -> None:
        await ready(pilot)
        engine.play()
        await steady(pilot)
        await pilot.press("2", "o")
        await steady(pilot)

    assert snap_compare(make_app(engine, theme="specbench-light"), terminal_size=(160, 48), run_before=run_before)


def test_crash_log_screen(engine: FakeEngine, snap_compare) -> None:
    async def run_before(pilot) -> None:
        await ready(pilot)
        engine.play_until_running()
        await steady(pilot)
        app = pilot.app
        queue = app.sweep_screen.query_one(QueuePanel)
        queue.select_config(present(engine.plan.by_name("ddtree-b8-tp1")).id)
        await pilot.press("l")
        await at_rest(pilot)  # the log screen has indexed the file
        await pilot.press("c")
        await steady(pilot)

    assert snap_compare(make_app(engine), terminal_size=(80, 24), run_before=run_before)


def test_crash_zero_output_and_partial_at_80x24(engine: FakeEngine, snap_compare) -> None:
    """Three troubles, three looks: ✖ crashed, ▲ zero-out, ◐ partial (queue, results and header), at 80×24."""
    async def run_before(pilot) -> None:
        await ready(pilot)
        engine.play()
        await steady(pilot)
        await pilot.press("1", "ctrl+end")  # the queue's last rows: crashed, zero-out, partial
        await steady(pilot)

    assert snap_compare(make_app(engine), terminal_size=(80, 24), run_before=run_before)


def test_crash_zero_output_and_partial_without_colour(engine: FakeEngine, snap_compare,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The same with NO_COLOR: symbols and words carry the meaning; a crash is reversed, never a dim grey."""
    monkeypatch.setenv("NO_COLOR", "1")

    async def run_before(pilot) -> None:
        await ready(pilot)
        engine.play()
        await steady(pilot)
        await pilot.press("2", "o")  # by tok/s: the crashed and partial rows come after the measured ones
        await steady(pilot)

    assert snap_compare(make_app(engine), terminal_size=(120, 36), run_before=run_before)
