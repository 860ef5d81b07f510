"""Pilot tests: the app driven from the keyboard against the scripted FakeEngine."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from narrowing import plain, present
from textual.command import CommandList
from tui_fakes import CRASH_LINE, SETTLE_TIMEOUT_S, T0, FakeEngine, at_rest, same_look, until

from specbench_tui.application.rows import Mark

from specbench_tui.core.events import ConfigState, GpuSampled, LogLine
from specbench_tui.core.ledger import LedgerSnapshot
from specbench_tui.tui.app import SpecbenchApp
from specbench_tui.tui.confirm_quit import ConfirmQuitScreen
from specbench_tui.tui.gpu_panel import NO_GPU_HINT, WAITING_HINT, GpuPanel, GpuTable
from specbench_tui.tui.log_file_view import LogFileView
from specbench_tui.tui.log_panel import MAX_LINES, ServerLogPanel
from specbench_tui.tui.log_screen import FullLogScreen
from specbench_tui.tui.queue_panel import QueuePanel
from specbench_tui.tui.results_panel import ResultsPanel


@pytest.fixture
def engine(tmp_path: Path) -> FakeEngine:
    return FakeEngine(tmp_path / "runs" / "2026-01-01_100000_demo")


def make_app(engine: FakeEngine) -> SpecbenchApp:
    return SpecbenchApp(engine, clock=lambda: T0 + 600)


async def settle(app: SpecbenchApp, pilot) -> None:
    while not app.panels_ready:
        await pilot.pause(0.02)
    app.drain_events()
    await pilot.pause()
    await analysed(app, pilot)


async def analysed(app: SpecbenchApp, pilot, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
    """Wait until the results table shows the ledger as it is (the analysis runs in a worker thread)."""
    deadline = time.monotonic() + timeout_s
    while not app.analysis_settled:
        assert time.monotonic() < deadline, "the analysis never settled"
        await pilot.pause(0.02)
    await pilot.pause()


async def press(pilot, *keys: str) -> None:
    """Press ``keys``, then let the app process what they did."""
    await pilot.press(*keys)
    await pilot.pause()


async def select_config(app: SpecbenchApp, pilot, name: str) -> str:
    queue = app.sweep_screen.query_one(QueuePanel)
    queue.focus()
    view = app.state.by_name(name)
    assert view is not None
    queue.select_config(view.config_id)
    await pilot.pause()
    assert queue.selected_config_id == view.config_id
    return view.config_id


async def test_starts_engine_and_lists_every_config(engine: FakeEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        assert ("start",) in engine.calls
        queue = app.sweep_screen.query_one(QueuePanel)
        assert queue.row_count == len(engine.plan.configs)


async def test_events_from_another_thread_update_every_panel(engine: FakeEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        engine.play_from_thread()
        await at_rest(pilot)  # the drain timer (10 Hz) folds the events, then the analysis runs
        await analysed(app, pilot)
        state = app.state
        assert state.outcome == "completed"
        assert state.configs[present(engine.plan.by_name("ddtree-b8-tp1")).id].state is ConfigState.CRASHED
        results = app.sweep_screen.query_one(ResultsPanel)
        assert results.row_count == 9
        log = app.sweep_screen.query_one(ServerLogPanel)
        assert any(CRASH_LINE in line and line.startswith("✖") for line in log.lines)
        assert app.sweep_screen.query_one(GpuPanel).table.row_count == 2


async def test_an_analysis_does_not_write_the_ledger_out_as_text_on_the_ui_thread(
        engine: FakeEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Textual describes a worker by the repr() of its arguments unless it is given a description: for the
    analysis that is the whole ledger snapshot, written out on the UI thread at every analysis (8 ms and 1.4 MB of
    text for 2,400 measurements; the paced full garbage collection then had that much more to walk)."""
    described: list[int] = []

    def counted_repr(snapshot: LedgerSnapshot) -> str:
        described.append(len(snapshot.measurements))
        return "LedgerSnapshot(…)"

    monkeypatch.setattr(LedgerSnapshot, "__repr__", counted_repr)
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        engine.play_from_thread()
        await at_rest(pilot)
        await analysed(app, pilot)
        assert app.analysis is not None
    assert described == []


async def test_gpu_panel_says_no_gpu_instead_of_waiting_forever(engine: FakeEngine) -> None:
    """A machine without a driver: the engine publishes one empty sample, and the panel says there is no GPU."""
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        hint = app.sweep_screen.query_one("#gpu-hint")
        assert str(hint.render()) == WAITING_HINT
        engine.emit(GpuSampled(samples=()))
        await pilot.pause(0.3)
        app.drain_events()
        await pilot.pause()
        assert str(hint.render()) == NO_GPU_HINT and hint.display


async def test_pause_and_resume_reach_the_engine(engine: FakeEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        engine.play_until_running()
        await settle(app, pilot)
        await pilot.press("p")
        await settle(app, pilot)
        assert engine.calls[-1] == ("pause",)
        assert app.state.paused
        assert "PAUSED" in plain(app.sweep_screen.query_one("#header").render())
        await pilot.press("p")
        await settle(app, pilot)
        assert engine.calls[-1] == ("resume",)
        assert not app.state.paused


async def test_skip_selected_and_skip_running(engine: FakeEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        engine.play(20)
        await settle(app, pilot)
        pending_id = await select_config(app, pilot, "ddtree-b32-tp1")
        await pilot.press("s")
        await settle(app, pilot)
        assert ("skip", pending_id) in engine.calls
        assert app.state.configs[pending_id].state is ConfigState.SKIPPED
        running = app.state.active()
        assert running
        await pilot.press("S")
        await settle(app, pilot)
        assert engine.calls[-1] == ("skip", running[0].config_id)


async def test_retry_crashed_config(engine: FakeEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        engine.play_until_running()
        await settle(app, pilot)
        crashed_id = await select_config(app, pilot, "ddtree-b8-tp1")
        await pilot.press("r")
        await settle(app, pilot)
        assert engine.calls[-1] == ("retry", crashed_id)
        assert app.state.configs[crashed_id].state is ConfigState.PENDING
        done_id = await select_config(app, pilot, "ar-tp1")
        await pilot.press("r")
        await settle(app, pilot)
        assert ("retry", done_id) not in engine.calls


async def test_open_crashed_log_and_search_finds_the_crash_line(engine: FakeEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        engine.play_until_running()
        await settle(app, pilot)
        await select_config(app, pilot, "ddtree-b8-tp1")
        await press(pilot, "l")
        screen = app.screen
        assert isinstance(screen, FullLogScreen)
        view = screen.query_one(LogFileView)
        lines = len(engine.script.log_lines["ddtree-b8-tp1"])
        await until(pilot, lambda: view.line_count == lines, "the log screen indexes the whole file")
        assert view.line_count == lines
        await press(pilot, "slash", *"illegal", "enter")
        assert view.cursor_line is not None
        assert CRASH_LINE in view.line_text(view.cursor_line)
        crash = view.cursor_line
        await press(pilot, "slash", *"cuda", "enter")  # from the crash line: the next match below it
        below = view.cursor_line
        assert below is not None and below > crash and "cuda" in view.line_text(below).lower()
        await press(pilot, "n")  # no match further down: wraps to the first one
        assert view.cursor_line is not None and view.cursor_line < crash
        await press(pilot, "N")
        assert view.cursor_line == below
        await press(pilot, "f3")
        assert view.cursor_line is not None and view.cursor_line < crash
        await press(pilot, "g", "c")
        assert view.line_text(view.cursor_line) == CRASH_LINE
        await press(pilot, "e")
        assert view.problems_only and 0 < view.visible_count < view.line_count
        assert all(view.file_line_at(row) is not None for row in range(view.visible_count))
        await press(pilot, "escape")
        assert not isinstance(app.screen, FullLogScreen)


async def test_enter_on_a_queue_row_opens_its_log(engine: FakeEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        engine.play_until_running()
        await settle(app, pilot)
        await select_config(app, pilot, "ar-tp1")
        await press(pilot, "enter")
        assert isinstance(app.screen, FullLogScreen)
        assert app.screen.config_name == "ar-tp1"


async def test_quit_asks_while_servers_run_then_stops_the_engine(engine: FakeEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        engine.play_until_running()
        await settle(app, pilot)
        await press(pilot, "q")
        assert isinstance(app.screen, ConfirmQuitScreen)
        await press(pilot, "n")
        assert not isinstance(app.screen, ConfirmQuitScreen)
        assert not engine.stopped
        await press(pilot, "q")
        await press(pilot, "y")
        await app.workers.wait_for_complete()
        await pilot.pause()
    assert ("abort", True) in engine.calls
    assert any(call[0] == "stop" for call in engine.calls)
    assert app.engine_stopped
    assert app.return_code == 0


async def test_quit_after_the_sweep_finished_does_not_ask(engine: FakeEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        engine.play()
        await settle(app, pilot)
        await press(pilot, "q")
        assert not isinstance(app.screen, ConfirmQuitScreen)
        await app.workers.wait_for_complete()
        await pilot.pause()
    assert engine.stopped
    assert ("abort", True) not in engine.calls


async def test_notifications_on_crash_and_zero_output(engine: FakeEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        engine.play()
        await settle(app, pilot)
        notes = app.notifier.on_screen()
        texts = [n.message for n in notes]
        assert any("ddtree-b8-tp1 crashed: cuda_illegal_instruction" in t for t in texts)
        assert any("zero output" in t and "ddtree-b16-tp1" in t for t in texts)
        crash_titles = [n for n in notes if n.title.endswith(("Server crashed", "Configuration crashed"))]
        assert len(crash_titles) == 1  # CrashDetected and ConfigFinished announce it once


async def test_results_highlight_crash_and_zero_output(engine: FakeEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        engine.play()
        await settle(app, pilot)
        results = app.sweep_screen.query_one(ResultsPanel)
        b16 = present(engine.plan.by_name("ddtree-b16-tp1")).id
        zero = results.get_cell(f"{b16}\x1farithmetic", "tps")
        assert zero.text == "zero output" and zero.mark is Mark.ZERO_OUT
        assert same_look(results.drawn_style(f"{b16}\x1farithmetic", "tps"), app.palette.zero_output)
        b8 = present(engine.plan.by_name("ddtree-b8-tp1")).id
        crash_note = results.get_cell(f"{b8}\x1fcode", "note")
        assert "cuda_illegal_instruction" in crash_note.text and crash_note.mark is Mark.CRASHED
        assert same_look(results.drawn_style(f"{b8}\x1fcode", "note"), app.palette.crash)
        speedup = results.get_cell(f"{present(engine.plan.by_name('dflash-b16-tp1')).id}\x1fcode", "speedup")
        assert speedup.text == "1.81×"


async def test_sorting_keeps_rows_and_orders_by_throughput(engine: FakeEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        engine.play()
        await settle(app, pilot)
        results = app.sweep_screen.query_one(ResultsPanel)
        await press(pilot, "2", "o")
        rows = results.rows
        cut = [row.cut for row in rows]
        assert cut == sorted(cut) and any(cut)  # crashed or cut-short rows after every measured one
        numbers = [row.cells[3].sort for row in rows if not row.cut and isinstance(row.cells[3].sort, float)
                   and row.cells[3].sort >= 0]
        assert numbers == sorted(numbers, reverse=True)
        assert rows[-1].cells[0].text.startswith("✖ ddtree-b8-tp1")  # its one fast measurement does not top the list
        assert results.row_count == 9


async def test_focus_keys_and_maximise(engine: FakeEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        engine.play_until_running()
        await settle(app, pilot)
        screen = app.sweep_screen
        for key, kind in (("2", ResultsPanel), ("3", ServerLogPanel), ("1", QueuePanel)):
            await press(pilot, key)
            assert isinstance(screen.focused, kind)
        await press(pilot, "4")
        assert isinstance(screen.focused, GpuTable) and isinstance(screen.focused.parent, GpuPanel)
        await press(pilot, "m")
        assert isinstance(screen.maximized_panel, GpuPanel)
        await press(pilot, "m")
        assert screen.maximized_panel is None


async def test_the_panel_rows_are_hidden_under_the_panels_that_cover_them(engine: FakeEngine) -> None:
    """The rows only place the panels: hidden, the compositor does not draw their lines under the panels on every
    frame (a theme change's frame 25 -> 18 ms headless). The panels are shown and cover their rows, so nothing of a
    row would show anyway (the screen snapshots hold the looks); a maximised panel is shown too."""
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        engine.play_until_running()
        await settle(app, pilot)
        screen = app.sweep_screen
        rows = list(screen.query("#top-row, #bottom-row"))
        assert len(rows) == 2 and not any(row.visible for row in rows)
        panels = [panel for row in rows for panel in row.children]
        assert len(panels) == 4 and all(panel.visible for panel in panels)
        # every line between the header and the key bar is the panels' (no row shows through)
        width, height = screen.size
        assert sum(panel.outer_size.area for panel in panels) == width * (height - 2)
        await press(pilot, "2")
        await press(pilot, "m")
        maximised = screen.maximized_panel
        assert isinstance(maximised, ResultsPanel) and maximised.visible and maximised.region.area > 0


async def test_narrow_terminal_hides_gpus_until_asked(engine: FakeEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        engine.play_until_running()
        await settle(app, pilot)
        screen = app.sweep_screen
        gpu = screen.query_one(GpuPanel)
        assert screen.has_class("-narrow")
        assert gpu.region.area == 0
        await press(pilot, "4")
        assert screen.maximized_panel is gpu and gpu.region.area > 0
        await press(pilot, "1")
        assert isinstance(screen.maximized_panel, QueuePanel)
        await press(pilot, "m")
        assert screen.maximized_panel is None


async def test_theme_key_cycles_and_recolours_cells(engine: FakeEngine) -> None:
    """A theme change is one refresh: the rows are the same records, drawn in the new theme's colours."""
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        engine.play()
        await settle(app, pilot)
        dark_crash = app.palette.crash
        results = app.sweep_screen.query_one(ResultsPanel)
        rows = results.rows
        b8 = present(engine.plan.by_name("ddtree-b8-tp1")).id
        assert same_look(results.drawn_style(f"{b8}\x1fcode", "note"), dark_crash)
        await press(pilot, "t")
        assert app.theme == "specbench-high-contrast"
        await pilot.pause()
        assert app.palette.crash != dark_crash
        assert all(new is old for new, old in zip(results.rows, rows, strict=True))  # nothing rebuilt
        assert same_look(results.drawn_style(f"{b8}\x1fcode", "note"), app.palette.crash)


def highlighted_command(app: SpecbenchApp) -> str:
    """The text of the command the palette would run on Enter ("" while it is still searching)."""
    commands = app.screen.query(CommandList)
    if not commands:
        return ""
    command_list = commands.first()
    if command_list.highlighted is None:
        return ""
    return str(command_list.get_option_at_index(command_list.highlighted).prompt)


async def test_command_palette_runs_sweep_commands(engine: FakeEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        engine.play_until_running()
        await settle(app, pilot)
        await press(pilot, "ctrl+p")
        await pilot.press(*"pause")
        await until(pilot, lambda: "pause" in highlighted_command(app).lower(), "the palette offers Pause")
        await press(pilot, "enter")
        await until(pilot, lambda: ("pause",) in engine.calls, "the palette's Pause reaches the engine")


async def test_log_bursts_are_coalesced_into_one_write(engine: FakeEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        config_id = engine.plan.configs[0].id
        count = 50_000

        emit_s: list[float] = []

        def flood() -> None:
            started = time.thread_time()
            for i in range(count):
                engine.emit(LogLine(config_id=config_id, line=f"line {i}", ts=T0 + i))
            emit_s.append(time.thread_time() - started)

        thread = threading.Thread(target=flood)
        thread.start()
        thread.join(120)  # the UI thread is blocked here: a round trip to it per line would never return
        assert not thread.is_alive(), "the engine side waited for the UI thread"
        # The engine side only enqueues: counted in CPU seconds of the emitting thread, which a loaded machine
        # does not inflate as it does wall time (2.7 s of wall at load 9 on 2 cores).
        assert emit_s and emit_s[0] < 6.0, emit_s
        app.drain_events()
        await pilot.pause()
        log = app.sweep_screen.query_one(ServerLogPanel)
        assert log.lines_received == count
        assert log.line_count == MAX_LINES
        assert log.lines[-1].endswith(f"line {count - 1}")


async def test_a_keys_answer_comes_before_the_logs_next_lines_for_at_most_key_first_s(
        engine: FakeEngine) -> None:
    """Within ``KEY_FIRST_S`` (0.3 s) of a key, the drains leave the server log's new lines for later (a log frame
    in the key's answer made it slower beside a flooding server); the lines come once it is over, and however fast
    keys come (a key held down) they wait no longer than that from the first drain that left them. The drains
    run on the app's own timer; the pacer's clock is set by hand."""
    from specbench_tui.tui.app import KEY_FIRST_S

    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        log = app.sweep_screen.query_one(ServerLogPanel)
        config_id = engine.plan.configs[0].id
        now = [1000.0]
        app.gc_pacer.clock = lambda: now[0]

        async def lines_after(text: str) -> bool:
            await until(pilot, lambda: app.log_feed.received >= seen_put[0] + 1, "the line put")
            for _ in range(3):  # three drains at the app's own interval
                await pilot.pause(app._drain_interval_s + 0.02)
            return any(line.endswith(text) for line in log.lines)

        seen_put = [app.log_feed.received]
        engine.emit(LogLine(config_id=config_id, line="before any key", ts=T0))
        assert await lines_after("before any key")  # no key: taken at once

        app.gc_pacer.key_pressed()
        seen_put = [app.log_feed.received]
        engine.emit(LogLine(config_id=config_id, line="after the key", ts=T0 + 1))
        assert not await lines_after("after the key")  # the drains left it (the clock stands still)
        now[0] += KEY_FIRST_S + 0.01
        assert await lines_after("after the key")

        now[0] += 1.0  # a key held down: one every 30 ms, each a new answer to draw
        app.gc_pacer.key_pressed()
        seen_put = [app.log_feed.received]
        engine.emit(LogLine(config_id=config_id, line="while keys repeat", ts=T0 + 2))
        shown_at = None
        for step in range(20):
            now[0] += 0.03
            app.gc_pacer.key_pressed()
            await pilot.pause(app._drain_interval_s + 0.02)
            if any(line.endswith("while keys repeat") for line in log.lines):
                shown_at = step
                break
        assert shown_at is not None and 0.03 * (shown_at + 1) <= 2 * KEY_FIRST_S, shown_at
        app.gc_pacer.clock = time.monotonic


async def test_full_garbage_collections_are_paced_while_the_app_runs(engine: FakeEngine) -> None:
    """One garbage-collection policy, the pacer: automatic full collections are off while the app runs (it runs
    them between keys), and the collector's own thresholds are back once the app has gone."""
    import gc

    from specbench_tui.tui.gc_pacing import OUT_OF_REACH

    saved = gc.get_threshold()
    app = make_app(engine)
    async with app.run_test() as pilot:
        await settle(app, pilot)
        assert app.gc_pacer.running and gc.get_threshold()[2] == OUT_OF_REACH
        before = app.gc_pacer._key_at
        await press(pilot, "o")
        assert app.gc_pacer._key_at > before  # a key keeps the collection away for a moment
    assert gc.get_threshold() == saved


async def test_results_rows_are_built_off_the_ui_thread(engine: FakeEngine, monkeypatch) -> None:
    import specbench_tui.tui.app as app_module
    import specbench_tui.tui.results_panel as results_module

    threads: list[int] = []
    real = results_module.build_rows

    def spy(*args, **kwargs):
        threads.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(app_module, "build_rows", spy)
    monkeypatch.setattr(results_module, "build_rows", spy)
    app = make_app(engine)
    async with app.run_test() as pilot:
        await settle(app, pilot)
        engine.play()
        app.drain_events()
        await analysed(app, pilot)
        assert app.sweep_screen.query_one(ResultsPanel).row_count > 0
    assert threads and threading.main_thread().ident not in threads  # 1,600 rows would hold up a key
