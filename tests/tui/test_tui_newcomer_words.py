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


def _ended_run(tmp_path: Path, summary: str | None) -> Path:
    """A run directory whose engine ended (its exit code and ending line in run.json), with or without a summary."""
    import json

    run_dir = tmp_path / "runs" / "2026-01-01_100000_demo"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"exit_code": 0, "ending": "sweep completed: 5 done"}),
                                      encoding="utf-8")
    if summary is not None:
        (run_dir / "summary.txt").write_text(summary, encoding="utf-8")
    return run_dir


@pytest.mark.parametrize("summary", ["demo: 5 configurations, 4 done, 1 crashed\nbest: ddtree-b16-tp1 2.50x\n", None])
def test_an_ended_sweeps_tab_shows_what_follows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str], summary: str | None) -> None:
    """A browser tab on an ended sweep: its page shows the tab's standard error, so the summary goes there, and
    "its summary follows" is said only when there is one."""
    from specbench_tui.engine import attached
    from specbench_tui.tui import attach_main

    def no_engine(run_dir: Path, **_: object) -> None:
        raise attached.AttachError(f"no engine answers on {run_dir}")

    run_dir = _ended_run(tmp_path, summary)
    monkeypatch.setenv(attach_main.TAB_PARENT_VAR, "1")
    monkeypatch.setattr(attach_main, "die_with_serve", lambda: None)
    monkeypatch.setattr(attached, "AttachedEngine", no_engine)
    assert attach_main.attach_tui(run_dir, role="view") == 0
    out, err = capsys.readouterr()
    assert out == "", "a tab's standard output is its screen's stream: nothing the page shows"
    assert "sweep completed: 5 done" in err
    if summary is None:
        assert "summary follows" not in err and "left no summary" in err, err
    else:
        assert "Its summary follows" in err and "best: ddtree-b16-tp1 2.50x" in err, err


async def test_the_palette_offers_skip_and_retry_of_a_configuration_only_where_they_act(engine: FakeEngine) -> None:
    """A running configuration is skipped by "skip the running" and never retried; a crashed one is retried, not
    skipped; a pending one is skipped, not retried (each refused command had been offered, then refused), and
    the search offers each once (the selected configuration's commands were listed twice)."""
    from specbench_tui.core.events import ConfigState
    from specbench_tui.tui.queue_panel import QueuePanel

    def offered(name: str) -> list[str]:
        return [t for t in _titles(app) if t.startswith("sweep: ") and t.endswith(f" {name}")]

    def select(state: ConfigState) -> str:
        view = next(v for v in app.state.ordered_configs() if v.state is state)
        app.sweep_screen.query_one(QueuePanel).select_config(view.config_id)
        assert app.selected_config() is view
        return view.name

    app = SpecbenchApp(engine, clock=lambda: T0 + 600)
    async with app.run_test(size=(160, 48)) as pilot:
        await _ready(app, pilot)
        while not any(v.state is ConfigState.RUNNING for v in app.state.configs.values()):
            assert engine.play(1), "the demo script ran nothing"
            app.drain_events()
        await at_rest(pilot)
        running = select(ConfigState.RUNNING)
        assert offered(running) == [f"sweep: skip the running {running}"], _titles(app)
        pending = select(ConfigState.PENDING)
        assert offered(pending) == [f"sweep: skip {pending}"], _titles(app)
        engine.play_until_running()  # ddtree-b8-tp1 has crashed by then
        app.drain_events()
        await at_rest(pilot)
        crashed = select(ConfigState.CRASHED)
        assert offered(crashed) == [f"sweep: retry {crashed}"], _titles(app)
