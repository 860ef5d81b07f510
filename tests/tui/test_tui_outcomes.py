"""Issue 28/30's TUI items, each with a test that failed before its fix: commands answered with their outcome,
the detach dialog centred, a history that keeps every notification, the end toast's zero-out count and the
pointer to the user's own sweep file for an excluded configuration."""

from __future__ import annotations


import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import cast

from tui_fakes import DEMO_SWEEP, T0, FakeEngine

from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    ConfigStateChanged,
    Event,
    GpuSampled,
    Notice,
    QueuePaused,
    QueueResumed,
)
from specbench_tui.core.plan import build_plan
from specbench_tui.core.sweep.loader import parse_sweep
from specbench_tui.engine.control import Answer, Outcome, answered, outcome_of
from specbench_tui.engine.control_socket import ControlServer, encode, hello
from specbench_tui.tui.app import SpecbenchApp
from specbench_tui.tui.detach_screen import DetachOrStopScreen
from specbench_tui.tui.gpu_panel import GpuLine, GpuPanel
from specbench_tui.tui.queue_panel import QueuePanel


def make_app(engine: FakeEngine) -> SpecbenchApp:
    app = SpecbenchApp(engine, clock=lambda: T0 + 600)
    app.animation_level = "none"
    return app


async def ready(app: SpecbenchApp, pilot) -> None:
    while not app.panels_ready:
        await pilot.pause(0.02)


def play_until_first_running(engine: FakeEngine) -> None:
    for index, event in enumerate(engine.events):
        if isinstance(event, ConfigStateChanged) and event.state is ConfigState.RUNNING:
            engine.play(index + 1)
            return
    raise AssertionError("the script has no running configuration")


def queue_state(app: SpecbenchApp, name: str) -> str:
    view = app.state.by_name(name)
    assert view is not None
    return app.sweep_screen.query_one(QueuePanel).get_cell(view.config_id, "state").text


class FinishedElsewhere(FakeEngine):
    """An engine where ``ar-tp1`` finished a moment ago, before this view heard of it: a skip finds nothing to do
    and says so."""

    def skip(self, config_id: str) -> Answer:
        self.calls.append(("skip", config_id))
        name = self.plan.by_id(config_id).name
        return answered(outcome_of("skip", state=ConfigState.DONE, name=name, config_id=config_id))


async def test_a_skip_that_finds_the_configuration_done_says_already_done_at_once(tmp_path: Path) -> None:
    engine = FinishedElsewhere(tmp_path / "run")
    app = make_app(engine)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await ready(app, pilot)
        play_until_first_running(engine)
        app.drain_events()
        view = app.state.by_name("ar-tp1")
        assert view is not None and view.state is ConfigState.RUNNING
        app.skip_config(view.config_id)
        assert ("skip", view.config_id) in engine.calls
        app.drain_events()  # the engine's answer is in
        await pilot.pause()
        assert view.config_id not in app.optimistic
        assert queue_state(app, "ar-tp1") != "skipped"  # not "skipped" for 15 s, then back
        assert any("already done" in n.message for n in app.notifier.on_screen())


async def test_a_second_view_pressing_p_leaves_the_queue_paused(tmp_path: Path) -> None:
    """``p`` sends ``pause`` or ``resume``, never a toggle: a view that had not heard of another's pause asks to
    pause too, and the engine answers "already paused" (the queue stays paused)."""
    engine = FakeEngine(tmp_path / "run")
    app = make_app(engine)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await ready(app, pilot)
        play_until_first_running(engine)
        app.drain_events()
        engine._paused = True  # another view paused it; this view has not seen the event yet
        await pilot.press("p")
        app.drain_events()
        await pilot.pause()
        assert engine.calls[-1] == ("pause",) and engine.paused
        assert app.pause_requested is None  # the engine's answer replaced what the key showed


async def test_the_detach_dialog_is_centred(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path / "run")
    engine.engine_pid = 4242  # an attached view: q asks detach / stop / keep watching
    app = make_app(engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(app, pilot)
        play_until_first_running(engine)
        app.drain_events()
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, DetachOrStopScreen)
        dialog = app.screen.query_one("#quit-dialog").region
        left, right = dialog.x, 120 - dialog.right
        top, bottom = dialog.y, 40 - dialog.bottom
        assert abs(left - right) <= 1 and abs(top - bottom) <= 1, dialog


async def test_the_history_keeps_paused_after_resume_and_skipped_after_retry(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path / "run")
    app = make_app(engine)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await ready(app, pilot)
        play_until_first_running(engine)
        app.drain_events()
        view = app.state.by_name("dflash-b16-tp1")
        assert view is not None
        engine.emit(QueuePaused(ts=T0 + 1))
        app.drain_events()
        engine.emit(QueueResumed(ts=T0 + 2))
        app.drain_events()
        # What the control socket publishes for another client's skip and retry (the same topic).
        engine.emit(Notice(level="info", text=f"alice skipped {view.name}", config_id=view.config_id, ts=T0 + 3))
        app.drain_events()
        engine.emit(Notice(level="info", text=f"alice queued {view.name} again", config_id=view.config_id,
                           ts=T0 + 4))
        app.drain_events()
        await pilot.pause()
        messages = [entry.message for entry in app.notifier.history]
        assert any(m.startswith("Queue paused") for m in messages), messages
        assert any(m.startswith("Queue resumed") for m in messages), messages
        assert f"alice skipped {view.name}" in messages and f"alice queued {view.name} again" in messages


async def test_the_end_toast_counts_zero_output(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path / "run")
    app = make_app(engine)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await ready(app, pilot)
        engine.play()
        app.drain_events()
        await pilot.pause()
        entry = next(e for e in app.notifier.history if e.title == "Sweep finished")
        # ddtree-b16-tp1 answered the arithmetic workload with no tokens: a done one, said inside "done".
        assert "(1 zero-out)" in entry.message, entry.message


async def test_r_on_an_excluded_configuration_points_at_the_users_sweep_file(tmp_path: Path) -> None:
    """A resumed (or attached) run's plan is read from the run directory's copy; the exclude rule is fixed in the
    file the user ran."""
    text = DEMO_SWEEP.replace("matrix = { budget = [8, 16, 32], tp = [1] }",
                              "matrix = { budget = [8, 16, 32, 64], tp = [1] }\n"
                              "exclude = [{ budget = 64, reason = \"known crash on SM120\" }]")
    copy = "runs/2026-01-01_100000_demo/sweep.toml"
    plan = build_plan(parse_sweep(text, Path("sweeps/demo.toml"), copy))
    excluded = plan.by_name("ddtree-b64-tp1")
    assert excluded is not None
    engine = FakeEngine(tmp_path / "run", plan=plan)
    app = make_app(engine)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await ready(app, pilot)
        play_until_first_running(engine)
        engine.emit(ConfigFinished(config_id=excluded.id, name=excluded.name, state=ConfigState.SKIPPED,
                                   reason=excluded.skip_reason, ts=T0 + 1))
        app.drain_events()
        app.retry_config(excluded.id)
        message = next(e.message for e in app.notifier.history if "excludes it" in e.message)
        assert "sweeps/demo.toml" in message and copy not in message
        assert "specbench run sweeps/demo.toml" in message


# ------------------------------------------------------------------------------------------ the wire


class _Control:
    """The orchestrator's control surface as far as the socket sees it: its answers follow the engine's rule."""

    def __init__(self) -> None:
        self.paused = False

    def pause(self) -> Outcome:
        outcome = outcome_of("pause", paused=self.paused)
        self.paused = True
        return outcome

    def resume(self) -> Outcome:
        outcome = outcome_of("resume", paused=self.paused)
        self.paused = False
        return outcome


async def test_a_no_op_command_is_acknowledged_with_its_outcome_and_adds_no_notice(tmp_path: Path) -> None:
    published: list[Notice] = []
    control = _Control()
    server = ControlServer(tmp_path, control, status=lambda: {"paused": control.paused},
                           publish=lambda event: published.append(event) if isinstance(event, Notice) else None)
    await server.start()
    try:
        reader, writer = await asyncio.open_unix_connection(str(server.path))
        writer.write(encode(hello("control", "alice")))
        welcome = json.loads(await reader.readline())
        assert welcome.get("welcome")
        acks = []
        for ident in (1, 2):
            writer.write(encode({"cmd": "pause", "id": ident}))
            await writer.drain()
            acks.append(json.loads(await asyncio.wait_for(reader.readline(), 30)))
        assert [a["ack"] for a in acks] == [1, 2] and all(a["ok"] for a in acks)
        assert acks[0]["changed"] is True and acks[0]["outcome"] == "paused the queue"
        assert acks[1]["changed"] is False and acks[1]["outcome"] == "already paused"
        assert control.paused
        assert [n.text for n in published] == ["alice paused the queue"]  # the second pause added none
        assert Outcome.from_ack("pause", acks[1]).changed is False
        writer.close()
    finally:
        await server.close()


# ------------------------------------------------------------------------------------------ 80x24


def _eight_gpus(engine: FakeEngine) -> GpuSampled:
    samples = tuple({"index": index, "name": "NVIDIA H200", "util_pct": 90.0 + index, "mem_used_mib": 121_344.0,
                     "mem_total_mib": 143_771.0, "pids": []} for index in range(8))
    return GpuSampled(samples=samples, ts=T0 + 5)


async def test_at_80x24_the_queue_shows_four_configurations_and_the_gpu_line_every_gpu(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path / "run")
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(app, pilot)
        engine.play_until_running()
        engine.emit(_eight_gpus(engine))
        app.drain_events()
        await pilot.pause()
        queue = app.sweep_screen.query_one(QueuePanel)
        assert queue.scrollable_content_region.height - 1 >= 4  # rows under the header (was 3)
        line = app.sweep_screen.query_one(GpuLine)
        text = line.render().plain
        assert len(text) <= 80, text
        for index in range(8):  # no GPU cut off the end (was: after GPU 4)
            assert f"{index} {90 + index}%" in text, text


# ------------------------------------------------------------------------------------------ GPUs of another run


def _another_run_holding(leases: Path, keys: list[str]) -> subprocess.Popen[bytes]:
    """Another specbench run, as far as leases go: a second process holding ``keys`` (returns once it does)."""
    holder = subprocess.Popen([sys.executable, "-c", (
        "import time; from pathlib import Path; from specbench_tui.engine.leases import Leases\n"
        f"l = Leases(Path({str(leases)!r}), note={{'run_dir': 'runs/theirs', 'config': 'eagle-tp1'}})\n"
        f"held = [l.take(k) for k in {keys!r}]\n"
        "print('held', flush=True); time.sleep(60)")], stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
    return holder


def test_gpu_samples_name_the_other_run_that_leases_a_gpu(tmp_path: Path) -> None:
    from specbench_tui.engine.gpus import GpuSample
    from specbench_tui.engine.leases import Leases
    from specbench_tui.engine.local_executor import held_by_other_runs
    from specbench_tui.engine.machine import Machine

    leases = Leases(tmp_path, note={"run_dir": "runs/ours"})
    ours = leases.take("gpu-index-0")  # this run's own server: its configuration names it, not the lease
    holder = _another_run_holding(tmp_path, ["gpu-index-1"])
    try:
        keys = {0: "gpu-index-0", 1: "gpu-index-1", 2: "gpu-index-2"}
        held = held_by_other_runs(leases, keys)
        assert set(held) == {1}
        assert f"pid {holder.pid}" in held[1] and "runs/theirs" in held[1]
        published: list[GpuSampled] = []
        machine = Machine.__new__(Machine)  # only its sampling side: no backend, no sweep
        machine.owners, machine._publish = {}, cast("Callable[[Event], None]", published.append)
        machine.held_elsewhere, machine._elsewhere, machine._elsewhere_at = (
            lambda: held_by_other_runs(leases, keys), {}, float("-inf"))
        machine.on_samples([GpuSample(index=i) for i in range(3)])
        samples = published[-1].samples
        assert "held_elsewhere" not in samples[0] and "held_elsewhere" not in samples[2]
        assert samples[1]["held_elsewhere"] == held[1]
    finally:
        holder.kill()
        holder.wait()
        assert ours is not None
        ours.release()


async def test_the_gpu_panel_shows_a_gpu_leased_by_another_run_as_that_runs(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path / "run")
    app = make_app(engine)
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(app, pilot)
        play_until_first_running(engine)
        samples = ({"index": 0, "util_pct": 97.0, "mem_used_mib": 1000.0, "mem_total_mib": 143_771.0, "pids": []},
                   {"index": 1, "util_pct": 99.0, "mem_used_mib": 120_000.0, "mem_total_mib": 143_771.0,
                    "pids": [], "held_elsewhere": "specbench pid 777 of bob (run_dir runs/theirs)"})
        engine.emit(GpuSampled(samples=samples, ts=T0 + 5))
        app.drain_events()
        await pilot.pause()
        table = app.sweep_screen.query_one(GpuPanel).table
        rows = [table.texts_at(i) for i in range(table.row_count)]
        assert rows[1][-1] == "leased: specbench pid 777 of bob (run_dir runs/theirs)", rows  # never "–" (free)


# ------------------------------------------------------------------------------------------ one view per refresh


async def test_queue_and_header_draw_one_view_built_in_the_application_layer(tmp_path: Path) -> None:
    """The queue's words and the header's counts come from the same SweepView (application/viewmodel.py), which
    the app builds once per refresh; neither panel works out a state of its own."""
    from specbench_tui.application.viewmodel import build_view
    from specbench_tui.tui.header import SweepHeader

    engine = FakeEngine(tmp_path / "run")
    app = make_app(engine)
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(app, pilot)
        engine.play()
        app.drain_events()
        while not app.analysis_settled:
            await pilot.pause(0.02)
        await pilot.pause()
        view = app.view
        assert view == build_view(app.state, partial=app.partial_ids, asked=app.optimistic,
                                  pause_requested=app.pause_requested)
        header = app.sweep_screen.query_one(SweepHeader)
        assert header.view is view
        words = {line.name: line.word for line in view.lines}
        assert words["ddtree-b16-tp1"] == "zero-out" and words["ddtree-b8-tp1"] == "crashed"
        assert all(queue_state(app, name) == word for name, word in words.items())
        text = header.render().plain
        assert f"{view.ran}/{view.to_run} ran" in text and f"{view.zero_out} zero-out" in text


def test_an_attached_view_gets_each_commands_outcome_from_the_engines_acknowledgement(tmp_path: Path) -> None:
    """The real client (AttachedEngine) against the real control socket: its ``pause`` future holds the engine's
    answer, and a second pause is answered "already paused" (changed: False)."""
    import threading

    from specbench_tui.engine.attached import AttachedEngine

    (tmp_path / "sweep.toml").write_text(DEMO_SWEEP, encoding="utf-8")
    (tmp_path / "run.json").write_text(json.dumps({"sweep_path": "sweeps/demo.toml"}), encoding="utf-8")
    control = _Control()
    server = ControlServer(tmp_path, control, status=lambda: {"paused": control.paused}, publish=lambda event: None)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(30)
        engine = AttachedEngine(tmp_path, name="test")
        engine.start()
        first = engine.pause().result(30)
        second = engine.pause().result(30)
        assert first is not None and first.changed and first.text == "paused the queue"
        assert second is not None and not second.changed and second.text == "already paused"
        resumed = engine.resume().result(30)
        assert resumed is not None and resumed.changed and not control.paused
        engine.detach()
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
