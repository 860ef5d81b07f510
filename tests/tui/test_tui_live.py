"""The live screen answers every key at once and says the right thing (issue 19): optimistic rows, coalesced
toasts and their history, the palette's own commands, Ctrl-C twice, small terminals, NO_COLOR, one fatal rule."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from narrowing import plain, present
from textual.color import Color
from textual.widgets import DataTable
from tui_fakes import DEMO_SWEEP, T0, FakeEngine, at_rest, until

from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    ConfigStateChanged,
    LogLine,
    MeasurementRecorded,
    Notice,
    SweepFinished,
)
from specbench_tui.core.plan import build_plan
from specbench_tui.core.records import Measurement
from specbench_tui.core.sweep.loader import parse_sweep
from specbench_tui.engine.control import Answer
from specbench_tui.tui.app import SpecbenchApp
from specbench_tui.tui.confirm_quit import ConfirmQuitScreen
from specbench_tui.tui.gpu_panel import GpuLine
from specbench_tui.tui.key_bar import KeyBar
from specbench_tui.tui.log_panel import ServerLogPanel, format_live_line
from specbench_tui.tui.log_screen import FullLogScreen
from specbench_tui.tui.log_style import is_fatal
from specbench_tui.tui.notifications_screen import NotificationsScreen
from specbench_tui.tui.notifier import MAX_SHOWN
from specbench_tui.tui.preflight_screen import PreflightFailedScreen
from specbench_tui.tui.queue_panel import QueuePanel
from specbench_tui.tui.results_panel import ResultsPanel
from specbench_tui.tui.sweep_screen import SweepScreen
from specbench_tui.tui.themes import load_themes

SIGQUIT_LINE = "[2026-01-01 10:00:09] Received sigquit from a child process. It usually means the child failed."
CRASH_LINE = "torch.AcceleratorError: CUDA error: an illegal instruction was encountered"


class SilentEngine(FakeEngine):
    """Records control calls and answers none of them (an engine busy elsewhere): what the screen shows after a
    key is then the app's own doing."""

    def pause(self) -> Answer | None:
        self.calls.append(("pause",))
        return None

    def resume(self) -> Answer | None:
        self.calls.append(("resume",))
        return None

    def skip(self, config_id: str) -> Answer | None:
        self.calls.append(("skip", config_id))
        return None

    def retry(self, config_id: str) -> Answer | None:
        self.calls.append(("retry", config_id))
        return None


@pytest.fixture
def engine(tmp_path: Path) -> SilentEngine:
    return SilentEngine(tmp_path / "runs" / "2026-01-01_100000_demo")


def make_app(engine: FakeEngine) -> SpecbenchApp:
    app = SpecbenchApp(engine, clock=lambda: T0 + 600)
    app.animation_level = "none"
    return app


async def ready(app: SpecbenchApp, pilot) -> None:
    while not app.panels_ready:
        await pilot.pause(0.02)


def play_until_first_running(engine: FakeEngine) -> None:
    """Up to the moment the first configuration runs: every other one is pending."""
    for index, event in enumerate(engine.events):
        if isinstance(event, ConfigStateChanged) and event.state is ConfigState.RUNNING:
            engine.play(index + 1)
            return
    raise AssertionError("the script has no running configuration")


def queue_state(app: SpecbenchApp, name: str) -> str:
    view = app.state.by_name(name)
    assert view is not None
    return app.sweep_screen.query_one(QueuePanel).get_cell(view.config_id, "state").text


async def select(app: SpecbenchApp, pilot, name: str) -> str:
    queue = app.sweep_screen.query_one(QueuePanel)
    queue.focus()
    view = app.state.by_name(name)
    assert view is not None
    queue.select_config(view.config_id)
    await pilot.pause()
    return view.config_id


# ---------------------------------------------------------------------------------------- optimistic keys

async def test_s_marks_a_pending_row_skipped_at_once(engine: SilentEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(app, pilot)
        play_until_first_running(engine)
        app.drain_events()
        config_id = await select(app, pilot, "ddtree-b16-tp1")
        assert queue_state(app, "ddtree-b16-tp1") == "pending"
        await pilot.press("s")
        assert queue_state(app, "ddtree-b16-tp1") == "skipped"  # before any event from the engine
        assert ("skip", config_id) in engine.calls
        assert "1 skipped" in str(app.sweep_screen.query_one(QueuePanel).border_subtitle)
        header = plain(app.sweep_screen.query_one("#header").render())
        assert "0/4 ran" in header and "↷ 1 skipped" in header  # skipped is counted apart, never as done
        await pilot.press("s")  # a second press does not ask again
        assert engine.calls.count(("skip", config_id)) == 1
        engine.emit(ConfigFinished(config_id=config_id, name="ddtree-b16-tp1", state=ConfigState.SKIPPED,
                                   reason="skipped by the user", ts=T0 + 30))
        app.drain_events()
        assert config_id not in app.optimistic and queue_state(app, "ddtree-b16-tp1") == "skipped"


async def test_capital_s_marks_the_running_row_skipped_at_once(engine: SilentEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(app, pilot)
        play_until_first_running(engine)
        app.drain_events()
        await pilot.press("S")
        assert queue_state(app, "ar-tp1") == "skipped"
        view = present(app.state.by_name("ar-tp1"))
        note = app.sweep_screen.query_one(QueuePanel).get_cell(view.config_id, "note").text
        assert "stopping its server" in note
        await pilot.press("S")  # nothing else runs: the key says so instead of asking again
        assert [c for c in engine.calls if c[0] == "skip"] == [("skip", view.config_id)]


async def test_r_requeues_at_once_and_p_pauses_at_once(engine: SilentEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await ready(app, pilot)
        play_until_first_running(engine)
        app.drain_events()
        config_id = await select(app, pilot, "ddtree-b32-tp1")
        engine.emit(ConfigFinished(config_id=config_id, name="ddtree-b32-tp1", state=ConfigState.SKIPPED,
                                   ts=T0 + 30))
        app.drain_events()
        await pilot.press("r")
        assert queue_state(app, "ddtree-b32-tp1") == "pending"
        assert ("retry", config_id) in engine.calls
        await pilot.press("p")
        assert ("pause",) in engine.calls
        assert "PAUSED" in plain(app.sweep_screen.query_one("#header").render())
        assert queue_state(app, "ddtree-b16-tp1") == "paused"
        assert any("Queue paused" in n.message for n in app.notifier.on_screen())
        await pilot.press("p")
        assert ("resume",) in engine.calls
        assert "PAUSED" not in plain(app.sweep_screen.query_one("#header").render())
        assert [n.message for n in app.notifier.on_screen() if "Queue" in n.message] == ["Queue resumed."]


async def test_an_unconfirmed_request_goes_back_to_the_engine_state(engine: SilentEngine, monkeypatch) -> None:
    app = make_app(engine)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await ready(app, pilot)
        play_until_first_running(engine)
        app.drain_events()
        await select(app, pilot, "ddtree-b16-tp1")
        await pilot.press("s")
        monkeypatch.setattr("specbench_tui.tui.app.OPTIMISTIC_TIMEOUT_S", -1.0)
        app._expire_optimistic()
        assert queue_state(app, "ddtree-b16-tp1") == "pending"
        assert any("has not confirmed" in n.message for n in app.notifier.on_screen())


async def test_r_on_an_excluded_configuration_explains(tmp_path: Path) -> None:
    text = DEMO_SWEEP.replace("matrix = { budget = [8, 16, 32], tp = [1] }",
                              "matrix = { budget = [8, 16, 32, 64], tp = [1] }\n"
                              "exclude = [{ budget = 64, reason = \"known crash on SM120\" }]")
    plan = build_plan(parse_sweep(text, Path("sweeps/demo.toml")))
    excluded = plan.by_name("ddtree-b64-tp1")
    assert excluded is not None and excluded.skip_reason
    engine = SilentEngine(tmp_path / "run", plan=plan)
    app = make_app(engine)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await ready(app, pilot)
        play_until_first_running(engine)
        engine.emit(ConfigFinished(config_id=excluded.id, name=excluded.name, state=ConfigState.SKIPPED,
                                   reason=excluded.skip_reason, ts=T0 + 1))
        app.drain_events()
        await select(app, pilot, "ddtree-b64-tp1")
        await pilot.press("r")
        assert not [c for c in engine.calls if c[0] == "retry"]
        assert queue_state(app, "ddtree-b64-tp1") == "skipped"
        message = next(n.message for n in app.notifier.on_screen() if "excludes it" in n.message)
        assert "known crash on SM120" in message and "sweeps/demo.toml" in message


# ---------------------------------------------------------------------------------------- notifications

def _zero(config_id: str, name: str, workload: str, ts: float) -> MeasurementRecorded:
    record = Measurement(config_id=config_id, config=name, workload=workload, item="a0", repeat=0,
                         status="zero_output", completion_tokens=0, started_at=ts).to_json()
    return MeasurementRecorded(config_id=config_id, record=record, ts=ts)


async def test_a_burst_is_one_toast_placed_off_the_state_column_and_kept_in_the_history(
        engine: SilentEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ready(app, pilot)
        play_until_first_running(engine)
        view = present(app.state.by_name("ar-tp1"))
        for index, workload in enumerate(("code", "arithmetic", "long-context", "agent")):
            engine.emit(_zero(view.config_id, view.name, workload, T0 + 10 + index))
        engine.emit(Notice(level="warning", text="a", ts=T0 + 20))
        engine.emit(Notice(level="warning", text="b", config_id=view.config_id, ts=T0 + 21))
        engine.emit(ConfigFinished(config_id=view.config_id, name=view.name, state=ConfigState.CRASHED,
                                   signature="cuda_oom", ts=T0 + 22))
        app.drain_events()
        await pilot.pause()
        await pilot.pause(0.2)
        toasts = app.notifier.on_screen()
        zero = [n for n in toasts if "zero output" in n.message]
        assert len(zero) <= 1
        entry = next(e for e in app.notifier.history if "zero output" in e.message)
        assert "on 4 workloads" in entry.message and entry.count == 4
        assert len(toasts) <= MAX_SHOWN
        assert any("crashed" in n.message or "crashed" in n.title for n in toasts)
        # Every toast sits right of the queue's state column.
        queue = app.sweep_screen.query_one(QueuePanel)
        state_right = queue.region.x + 1 + sum(width + 2 for width in queue.column_widths[:3])
        shown = list(app.screen.query("Toast"))  # Textual's own toasts, as mounted
        assert len(shown) <= MAX_SHOWN
        assert shown
        for toast in shown:
            assert toast.region.x >= state_right, (toast.region, state_right)
        await pilot.press("n")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, NotificationsScreen)
        table = screen.query_one("#notifications-table", DataTable)
        assert table.row_count == len(app.notifier.history) >= 3
        first = [cell.plain for cell in table.get_row_at(0)]
        assert "error" in first[1] and "crashed" in first[3]  # newest first, severity as a word
        await pilot.press("escape")
        assert isinstance(app.screen, SweepScreen)


async def test_preflight_reasons_stay_until_dismissed(engine: SilentEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await ready(app, pilot)
        engine.emit(Notice(level="error", text="pre-flight: GPU 3 is held by pid 4242 (python)", ts=T0))
        engine.emit(Notice(level="error", text="pre-flight: port 30000 is in use", ts=T0))
        engine.emit(SweepFinished(state="failed", reason="pre-flight failed: …", ts=T0))
        app.drain_events()
        await until(pilot, lambda: isinstance(app.screen, PreflightFailedScreen), "the pre-flight screen opens")
        assert isinstance(app.screen, PreflightFailedScreen)
        assert app.preflight_problems == ["GPU 3 is held by pid 4242 (python)", "port 30000 is in use"]
        await pilot.pause(1.0)
        assert isinstance(app.screen, PreflightFailedScreen)  # no timeout takes it away
        await pilot.press("enter")
        assert isinstance(app.screen, SweepScreen)


# ---------------------------------------------------------------------------------------- palette, quitting

async def test_palette_has_only_the_apps_commands(engine: SilentEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(app, pilot)
        assert list(app.get_system_commands(app.screen)) == []
        from specbench_tui.tui.commands import SweepCommands
        provider = SweepCommands(app.screen)
        titles = [title for title, _, _ in provider._commands()]
        assert "quit" in titles
        assert not any("screenshot" in t.lower() or "keys" in t.lower() for t in titles)
        quit_callback = next(cb for title, cb, _ in provider._commands() if title == "quit")
        assert quit_callback == app.action_request_quit  # asks first, like q
        short = [title for title, _, _ in provider._commands(every_config=False)]
        assert not any(title.startswith("log: ddtree") for title in short)  # the first list stays short


async def test_ctrl_c_twice_quits(engine: SilentEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(app, pilot)
        play_until_first_running(engine)
        app.drain_events()
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmQuitScreen)
        await pilot.press("ctrl+c")
        await pilot.pause()
        await app.workers.wait_for_complete()
        assert ("abort", True) in engine.calls and engine.stopped


# ---------------------------------------------------------------------------------------- small terminals

async def test_80x24_footer_keeps_quit_and_a_gpu_line(engine: SilentEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(app, pilot)
        engine.play_until_running()
        app.drain_events()
        await pilot.pause()
        bar = app.sweep_screen.query_one(KeyBar)
        assert bar.region.width == 80 and bar.region.y == 23
        text = bar.plain()
        assert text.startswith("q Quit") and len(text) <= 80
        shown = bar.shown_keys()
        assert shown[:6] == ["q", "p", "s", "S", "r", "l"]  # by priority; what does not fit is cut from the end
        assert len(shown) < len(bar.items())
        line = app.sweep_screen.query_one(GpuLine)
        assert line.display and line.region.height == 1
        assert "GPUs" in line.render().plain and "98%" in line.render().plain


async def test_maximise_resets_on_resize(engine: SilentEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(app, pilot)
        await pilot.press("1", "m")
        await pilot.pause()
        screen = app.sweep_screen
        assert screen.maximized_panel is screen.query_one(QueuePanel)
        assert "m restores" in str(screen.query_one(QueuePanel).border_title)
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        assert screen.maximized_panel is None
        assert "m restores" not in str(screen.query_one(QueuePanel).border_title)


def _luminance(color: Color) -> float:
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    return 0.2126 * channel(color.r) + 0.7152 * channel(color.g) + 0.0722 * channel(color.b)


def _contrast(a: Color, b: Color) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


async def test_unfocused_borders_stand_out_in_every_theme(engine: SilentEngine) -> None:
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(app, pilot)
        for theme in load_themes()[0]:
            app.theme = theme.name
            await pilot.pause()
            results = app.sweep_screen.query_one(ResultsPanel)
            assert not results.has_focus
            _, border = results.styles.border_top
            background = results.styles.background
            seen = background + border  # the border colour as drawn over the panel
            assert _contrast(seen, background) >= 3.0, (theme.name, seen, background)


# ---------------------------------------------------------------------------------------- colour-free looks

async def test_no_color_crash_looks_stronger_than_text(engine: SilentEngine, monkeypatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(engine)
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(app, pilot)
        engine.play()
        app.drain_events()
        await pilot.pause()
        assert app.no_color
        assert app.palette.crash.reverse and app.palette.crash.bold and app.palette.crash.color is None
        view = present(app.state.by_name("ddtree-b8-tp1"))
        queue = app.sweep_screen.query_one(QueuePanel)
        glyph = queue.get_cell(view.config_id, "glyph")
        state = queue.get_cell(view.config_id, "state")
        assert glyph.text == "✖" and state.text == "crashed"
        drawn = queue.drawn_style(view.config_id, "state")
        assert drawn.reverse and drawn.bold  # the monochrome filter greys its hue: reversed, it still stands out


# ---------------------------------------------------------------------------------------- one fatal rule

TEARDOWN_LINE = "[2026-01-01 10:00:09] SIGQUIT received. signum=None, frame=None. It usually means one child failed."


def test_teardown_sigquit_is_not_fatal_but_a_cuda_crash_is() -> None:
    assert not is_fatal(SIGQUIT_LINE, "info")
    assert is_fatal(CRASH_LINE, "fatal") and format_live_line("ar-tp1", CRASH_LINE, "fatal").startswith("✖ ")


@pytest.mark.parametrize("line", [TEARDOWN_LINE, SIGQUIT_LINE])
@pytest.mark.parametrize("level", [None, "info"])
def test_a_teardown_line_is_not_marked_at_a_normal_end(line: str, level: str | None) -> None:
    """The engine marks a crash signature's line fatal unless it read it while stopping the server: unmarked,
    SGLang's ``SIGQUIT received … one child failed`` is the teardown's (said at every normal end), no ``!``; marked
    by the engine, the same words are the crash (issue 46, point 6)."""
    assert format_live_line("ar-tp1", line, level).startswith("  ar-tp1"), format_live_line("ar-tp1", line, level)
    assert format_live_line("ar-tp1", line, "fatal").startswith("✖ ")
    assert format_live_line("ar-tp1", "ERROR: the metrics endpoint failed to respond", level).startswith("! "), \
        "an error line that is no crash signature keeps its mark"


CORE_DUMPED_INFO = "[2026-01-01 10:00:09] INFO: the tokenizer worker restarted (previous one core dumped)"


def test_fatal_is_the_engines_verdict_only_never_a_pattern_of_the_tui() -> None:
    """A line the engine called ``info`` is never drawn as a crash, whatever words it holds (issue 28: an INFO
    line with "core dumped" was drawn red with no crash recorded); the engine's ``fatal`` always is."""
    assert not is_fatal(CORE_DUMPED_INFO, "info")
    assert not format_live_line("ar-tp1", CORE_DUMPED_INFO, "info").startswith("✖")
    assert not is_fatal("Traceback (most recent call last):", "error")  # the engine said error: an error line
    assert is_fatal("anything at all", "fatal")
    # Read back from disk (no level): no line is a crash by its words; the log screen draws the engine's record.
    assert not is_fatal(CORE_DUMPED_INFO) and not is_fatal(CRASH_LINE)


async def test_live_log_and_log_screen_agree_on_the_crash_line(engine: SilentEngine, tmp_path: Path) -> None:
    app = make_app(engine)
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(app, pilot)
        play_until_first_running(engine)
        view = present(app.state.by_name("ar-tp1"))
        log = Path(view.log_path or tmp_path / "x.log")
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("[2026-01-01 10:00:08] Decode batch, #running-req: 1\n" + SIGQUIT_LINE + "\n")
        engine.emit(LogLine(config_id=view.config_id, line=SIGQUIT_LINE, level="info", ts=T0 + 9))
        app.drain_events()
        await pilot.pause()
        panel = app.sweep_screen.query_one(ServerLogPanel)
        live = panel.lines[-1]
        assert not live.startswith("✖")
        screen = FullLogScreen(view.name, log)
        await app.push_screen(screen)
        await at_rest(pilot)  # the screen has indexed the file
        await pilot.press("c")
        await pilot.pause()
        assert screen.status == "no crash line in this log"


# ---------------------------------------------------------------------------------------- results follow

async def _b16_arithmetic(app: SpecbenchApp, engine: FakeEngine, pilot,
                          play: Callable[[], object]) -> tuple[ResultsPanel, int]:
    """Play the demo with ``play`` and settle: the results table and the index of ddtree-b16-tp1's arithmetic row
    (the newest alarming row: zero output)."""
    await ready(app, pilot)
    play()
    app.drain_events()
    await at_rest(pilot)
    results = app.sweep_screen.query_one(ResultsPanel)
    return results, results.get_row_index(f"{present(engine.plan.by_name('ddtree-b16-tp1')).id}\x1farithmetic")


def _in_view(results: ResultsPanel, index: int, height: int) -> bool:
    """Whether row ``index`` is on screen in a table that shows ``height`` rows."""
    return results.scroll_y <= index < results.scroll_y + height


async def test_results_follow_a_new_crash_row_unless_scrolled_away(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path / "run")
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        results, index = await _b16_arithmetic(app, engine, pilot, engine.play)
        height = results.scrollable_content_region.height - 1  # under the header
        assert index >= height  # below the fold in plan order …
        assert _in_view(results, index, height)  # … and yet on screen: followed
        results.scroll_to(y=0, animate=False, immediate=True)  # back to the top: still following
        results.scroll_to(y=1, animate=False, immediate=True)  # the user scrolls elsewhere
        await pilot.pause()
        b32 = present(engine.plan.by_name("ddtree-b32-tp1"))
        engine.emit(ConfigFinished(config_id=b32.id, name=b32.name, state=ConfigState.CRASHED,
                                   signature="cuda_oom", ts=T0 + 999))
        app.drain_events()
        await at_rest(pilot)
        assert results.scroll_y == 1  # not pulled away from what the user reads


async def test_a_followed_row_stays_in_view_when_the_panel_shrinks(tmp_path: Path) -> None:
    """The follow was done at one height and the panel then got shorter (a line shown below it, a frame late on
    a busy machine): the row is brought back into view, and not once the user has scrolled elsewhere."""
    engine = FakeEngine(tmp_path / "run")
    app = make_app(engine)
    async with app.run_test(size=(80, 30)) as pilot:
        results, index = await _b16_arithmetic(app, engine, pilot, engine.play)
        await pilot.resize_terminal(80, 24)
        await at_rest(pilot)
        height = results.scrollable_content_region.height - 1  # under the header
        assert _in_view(results, index, height)
        results.scroll_to(y=0, animate=False, immediate=True)
        results.scroll_to(y=1, animate=False, immediate=True)  # the user scrolls elsewhere
        await pilot.resize_terminal(80, 22)
        await at_rest(pilot)
        assert results.scroll_y == 1


async def test_a_followed_row_stays_in_view_when_the_horizontal_scrollbar_comes(tmp_path: Path) -> None:
    """A follow done before the table's horizontal scrollbar came (a frame late on a busy machine) was held one
    row short by the taller range of that moment; when the scrollbar comes the row is brought into view."""
    engine = FakeEngine(tmp_path / "run")
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        results, index = await _b16_arithmetic(app, engine, pilot, engine.play_until_running)
        height = results.scrollable_content_region.height - 1  # under the header
        assert results.show_horizontal_scrollbar
        assert _in_view(results, index, height)
        results.show_horizontal_scrollbar = False  # as before it came …
        results.scroll_to(y=index - height, animate=False, immediate=True)
        results._followed_y = results.scroll_y  # … with the follow held a row short
        assert not _in_view(results, index, height)
        await at_rest(pilot)  # the layout brings the scrollbar back
        assert results.show_horizontal_scrollbar
        assert _in_view(results, index, height)
