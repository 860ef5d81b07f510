"""Hostile server-provided strings reach every panel and never crash or garble the app."""

from __future__ import annotations

from pathlib import Path

from tui_fakes import T0, FakeEngine, until

from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    ConfigStateChanged,
    CrashDetected,
    GpuSampled,
    LogLine,
    MeasurementRecorded,
    Notice,
    ServerLaunching,
    SweepStarted,
    WorkloadNotRun,
)
from specbench_tui.tui.app import SpecbenchApp
from specbench_tui.tui.log_file_view import LogFileView
from specbench_tui.tui.log_panel import ServerLogPanel
from specbench_tui.tui.log_screen import FullLogScreen
from specbench_tui.tui.safe_text import MAX_LINE_CHARS, clean

HOSTILE = [
    "[/crash]",
    "[bold red]not bold[/]",
    "[@click=app.quit]quit[/]",
    "\x1b[31mred\x1b[0m [m] \x1b]0;title\x07 \x9b2J",
    "nul\x00byte and bell\x07",
    "bad \udcff surrogate \ud800",
    "tab\there\rcarriage\nnewline\u2028sep\x85nel",
    "$variable $$ \\[escaped]",
    "x" * 1_000_000,
]
BIG = len(HOSTILE) - 1


def test_clean_makes_one_printable_line() -> None:
    for text in HOSTILE:
        out = clean(text)
        out.encode("utf-8")
        assert "\x1b" not in out and "\x00" not in out and "\n" not in out and "\r" not in out
        assert len(out) <= MAX_LINE_CHARS + 40
    assert clean("[/crash]") == "[/crash]"
    assert clean("\x1b[31mred\x1b[0m") == "red"


async def test_hostile_strings_reach_every_panel(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path / "run")
    app = SpecbenchApp(engine, clock=lambda: T0 + 60)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        cid = "hostile00001"
        name = "[/model] \x1b[1mQwen\x00 \udcff"
        log_path = tmp_path / "run" / "logs" / "hostile.log"
        engine.emit(SweepStarted(sweep="[/sweep]", run_dir="\x1b[31m[b]/tmp/run", total_configs=6, ts=T0))
        engine.emit(ConfigStateChanged(config_id=cid, name=name, state=ConfigState.RUNNING, ts=T0))
        engine.emit(ServerLaunching(config_id=cid, name=name, argv=("[/x]",), gpus=(0,), port=1, pid=2,
                                    log_path=str(log_path), ts=T0))
        for text in HOSTILE:
            engine.emit(LogLine(config_id=cid, line=text, level="error", ts=T0))
            engine.emit(Notice(level="warning", text=text[:5000], config_id=cid, ts=T0))
            engine.emit(MeasurementRecorded(config_id=cid, record={
                "config_id": cid, "config": name, "workload": text[:300], "item": text[:50], "repeat": 0,
                "status": "zero_output", "error": text}, ts=T0))
            engine.emit(WorkloadNotRun(config_id=cid, workload=text[:300], reason=text, ts=T0))
        engine.emit(GpuSampled(samples=({"index": 0, "name": "[/gpu] \x1b[31m", "util_pct": "[/x]",
                                         "mem_used_mib": float("nan"), "temp_c": None},
                                        {"index": "bad"}), ts=T0))
        engine.emit(CrashDetected(config_id=cid, signature="[/sig]", line=HOSTILE[BIG], excerpt=tuple(HOSTILE),
                                  log_line_number=10**9, ts=T0))
        engine.emit(ConfigFinished(config_id=cid, name=name, state=ConfigState.CRASHED, reason="[/reason]\x00",
                                   signature="[/sig]", ts=T0))
        app.drain_events()
        await pilot.pause()
        app.export_screenshot()  # renders every visible widget
        log = app.sweep_screen.query_one(ServerLogPanel)
        assert any("[/crash]" in line for line in log.lines)
        assert all(len(line) < MAX_LINE_CHARS + 100 for line in log.lines)
        assert all("\x1b" not in line and "\x00" not in line for line in log.lines)
        assert app.state.by_name(name) is not None
        for key in ("o", "t"):  # re-sort and recolour every hostile cell
            await pilot.press(key)
        await pilot.pause()
        app.export_screenshot()

        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_bytes(b"\n".join([
            b"ok line", b"[/crash] [bold]x", b"\xff\xfe invalid utf-8 \xc3", b"nul \x00 byte",
            b"\x1b[31mRuntimeError: ansi\x1b[0m", b"y" * 1_000_000, b"CUDA error: [/x] illegal", b"last"]))
        app.sweep_screen.query_one("#queue-panel").focus()
        app.open_log_of(cid)
        await pilot.pause()
        assert isinstance(app.screen, FullLogScreen)
        view = app.screen.query_one(LogFileView)
        await until(pilot, lambda: view.line_count == 8, "the log screen indexes the whole file")
        assert view.line_count == 8
        assert view.line_text(1) == "[/crash] [bold]x"
        assert "\ufffd" in view.line_text(2)
        assert len(view.line_text(5)) < MAX_LINE_CHARS + 100
        app.screen.search("[/x]")
        assert view.cursor_line == 6
        for key in ("e", "c", "e", "end", "right", "f"):
            await pilot.press(key)
        await pilot.pause()
        app.export_screenshot()
        await pilot.press("escape")
        await pilot.press("ctrl+p")
        await pilot.press(*"[/")
        await pilot.pause(0.3)
        app.export_screenshot()
        await pilot.press("escape")
        await pilot.pause()
        assert app.is_running
