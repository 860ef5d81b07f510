"""A scripted stand-in for the engine adapter, so the TUI can be driven without servers.

:class:`FakeEngine` implements the adapter API the app codes against (``plan``, ``run_dir``,
``subscribe``, ``start``, ``stop`` and the :class:`~specbench_tui.engine.control.SweepControl` methods) by
replaying a demo-like run: a baseline, a DFlash and three DDTree configurations, where ``ddtree-b8-tp1``
crashes with ``cuda_illegal_instruction`` and ``ddtree-b16-tp1`` answers the arithmetic workload with zero
output tokens. Every control call is recorded in :attr:`FakeEngine.calls`.

Run as a script (``python tests/tui_fakes.py``) it opens the real app over a real-time replay, for looking at
the UI in a terminal or tmux.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    ConfigStateChanged,
    CrashDetected,
    Event,
    GpuSampled,
    LogLine,
    MeasurementRecorded,
    QueuePaused,
    QueueResumed,
    ServerLaunching,
    ServerReady,
    ServerStopped,
    SweepFinished,
    SweepStarted,
    WorkloadNotRun,
    WorkloadStarted,
)
from specbench_tui.core.plan import Plan, build_plan
from specbench_tui.core.records import Measurement
from specbench_tui.core.sweep.loader import parse_sweep
from specbench_tui.engine.control import Answer, Outcome, answered, outcome_of

T0 = 1_767_261_600.0
"""2026-01-01 10:00:00 UTC: the scripted run's start, so snapshots are deterministic."""

DEMO_SWEEP = """\
[sweep]
name = "demo"
description = "scripted stand-in for the demo sweep"
baseline = "ar-tp{tp}"
gpus = 2
repeats = 2

[engine]
launcher = "simulator"

[server.args]
model-path = "Qwen/Qwen3-8B"

[[configs]]
name = "ar-tp{tp}"
algorithm = "autoregressive"
matrix = { tp = [1] }
args = { tp-size = "{tp}" }

[[configs]]
name = "dflash-b16-tp{tp}"
algorithm = "dflash"
matrix = { tp = [1] }
[configs.args]
tp-size = "{tp}"
speculative-algorithm = "DFLASH"
speculative-draft-model-path = "z-lab/Qwen3-8B-DFlash-b16"
speculative-num-draft-tokens = 16

[[configs]]
name = "ddtree-b{budget}-tp{tp}"
algorithm = "ddtree"
matrix = { budget = [8, 16, 32], tp = [1] }
[configs.args]
tp-size = "{tp}"
speculative-algorithm = "DDTREE"
speculative-draft-model-path = "z-lab/Qwen3-8B-DFlash-b16"
page-size = 1
[configs.fork_args]
speculative-ddtree-budget = "{budget}"

[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci", "quicksort"]
max_new_tokens = 256

[[workloads]]
name = "arithmetic"
kind = "arithmetic"
count = 2
max_new_tokens = 128
"""

CRASH_LINE = "torch.AcceleratorError: CUDA error: an illegal instruction was encountered"


def demo_plan() -> Plan:
    """The plan of the scripted demo sweep."""
    return build_plan(parse_sweep(DEMO_SWEEP, Path("sweeps/demo.toml")))


class _Clock:
    def __init__(self, start: float) -> None:
        self.now = start

    def tick(self, seconds: float = 1.0) -> float:
        self.now += seconds
        return self.now


def _stamp(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


def _decode(accept: float | None, tps: float) -> str:
    spec = f"accept len: {accept:.2f}, accept rate: {accept / 5:.2f}, " if accept else ""
    return (f"Decode batch, #running-req: 1, #token: 412, token usage: 0.01, {spec}cuda graph: True, "
            f"gen throughput (token/s): {tps:.2f}, #queue-req: 0")


class DemoScript:
    """Builds the scripted events and writes each configuration's log file under ``run_dir/logs``."""

    def __init__(self, plan: Plan, run_dir: Path) -> None:
        self.plan = plan
        self.run_dir = run_dir
        self.clock = _Clock(T0)
        self.events: list[Event] = []
        self.running_cutoff = 0
        """Index of the first event after which ``ddtree-b32-tp1`` is running (the 'mid-run' point)."""
        self.log_lines: dict[str, list[str]] = {}
        self._build()

    # -------------------------------------------------------------------------------------------- helpers

    def _emit(self, event: Event) -> None:
        self.events.append(event)

    def _log(self, config_id: str, name: str, message: str, level: str = "info", raw: bool = False) -> None:
        ts = self.clock.tick(0.5)
        line = message if raw else f"[{_stamp(ts)}] {message}"
        self.log_lines.setdefault(name, []).append(line)
        self._emit(LogLine(config_id=config_id, line=line, level=level, ts=ts))

    def _gpus(self, held: dict[int, float]) -> None:
        samples = []
        for index in (0, 1):
            busy = index in held
            samples.append({
                "index": index, "name": "NVIDIA H200", "util_pct": held.get(index, 0.0),
                "mem_used_mib": 121_344.0 if busy else 512.0, "mem_total_mib": 143_771.0,
                "temp_c": 64.0 if busy else 31.0, "power_w": 612.5 if busy else 74.0, "power_limit_w": 700.0,
                "sm_clock_mhz": 1980.0, "pids": [[4242 + index, 120_832.0]] if busy else [],
            })
        self._emit(GpuSampled(samples=tuple(samples), ts=self.clock.tick(0.1)))

    def _measure(self, config_id: str, name: str, workload: str, item: str, repeat: int, *,
                 tps: float | None, accept: float | None, status: str = "ok") -> None:
        ts = self.clock.tick(3.0)
        record = Measurement(
            config_id=config_id, config=name, workload=workload, item=item, repeat=repeat, status=status,
            prompt_tokens=180, completion_tokens=0 if status == "zero_output" else 256, ttft_s=0.042 + repeat / 1000,
            e2e_s=1.4, decode_tps=0.0 if status == "zero_output" else tps, accept_length=accept,
            finish_reason="stop" if status == "zero_output" else "length", started_at=ts - 1.4,
        ).to_json()
        self._emit(MeasurementRecorded(config_id=config_id, record=record, ts=ts))

    def _launch(self, name: str, gpu: int, startup_s: float) -> str:
        config = self.plan.by_name(name)
        assert config is not None
        cid = config.id
        self._emit(ConfigStateChanged(config_id=cid, name=name, state=ConfigState.LAUNCHING, ts=self.clock.tick()))
        log_path = str(self.run_dir / "logs" / f"{name}.log")
        self._emit(ServerLaunching(config_id=cid, name=name, argv=("python", "-m", "sglang.launch_server",
                                                                    *config.argv), gpus=(gpu,), port=30000 + gpu,
                                   pid=4242 + gpu, log_path=log_path, ts=self.clock.tick()))
        self._log(cid, name, f"server_args=ServerArgs(model_path='Qwen/Qwen3-8B', tp_size=1, port={30000 + gpu})")
        self._log(cid, name, "Load weight begin. avail mem=139.10 GB")
        self._log(cid, name, "Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=123.40 GB")
        self._log(cid, name, "KV Cache is allocated. #tokens: 500000, K size: 34.33 GB, V size: 34.33 GB")
        self._log(cid, name, "Capture cuda graph begin. This can take up to several minutes. avail mem=50.20 GB")
        self._log(cid, name, f"INFO:     Uvicorn running on http://127.0.0.1:{30000 + gpu} (Press CTRL+C to quit)")
        self._log(cid, name, "The server is fired up and ready to roll!")
        self._emit(ServerReady(config_id=cid, startup_s=startup_s, context_length=32768, ts=self.clock.tick(startup_s)))
        self._emit(ConfigStateChanged(config_id=cid, name=name, state=ConfigState.READY, ts=self.clock.tick()))
        self._emit(ConfigStateChanged(config_id=cid, name=name, state=ConfigState.RUNNING, ts=self.clock.tick()))
        return cid

    def _finish(self, cid: str, name: str, state: ConfigState = ConfigState.DONE, reason: str | None = None,
                signature: str | None = None, exit_code: int | None = 0) -> None:
        self._emit(ServerStopped(config_id=cid, exit_code=exit_code, teardown_s=2.5, ts=self.clock.tick(2.5)))
        self._emit(ConfigFinished(config_id=cid, name=name, state=state, reason=reason, signature=signature,
                                  ts=self.clock.tick()))

    def _workloads(self, cid: str, name: str, gpu: int, code_tps: float, arith_tps: float, accept: float | None,
                   arithmetic_zero: bool = False) -> None:
        for workload, tps in (("code", code_tps), ("arithmetic", arith_tps)):
            self._emit(WorkloadStarted(config_id=cid, workload=workload, ts=self.clock.tick()))
            items = ("fibonacci", "quicksort") if workload == "code" else ("a0", "a1")
            for item in items:
                for repeat in (0, 1):
                    self._log(cid, name, "Prefill batch, #new-seq: 1, #new-token: 180, #cached-token: 0, token usage: "
                              "0.00, #running-req: 0, #queue-req: 0, #pending-token: 0, cuda graph: False, "
                              "input throughput (token/s): 5120.00")
                    zero = arithmetic_zero and workload == "arithmetic"
                    self._log(cid, name, _decode(accept, 0.0 if zero else tps + repeat))
                    self._measure(cid, name, workload, item, repeat, tps=tps + repeat * 2, accept=accept,
                                  status="zero_output" if zero else "ok")
            self._gpus({gpu: 97.0})

    # -------------------------------------------------------------------------------------------- script

    def _build(self) -> None:
        configs = self.plan.configs
        self._emit(SweepStarted(sweep=self.plan.sweep.name, run_dir=str(self.run_dir),
                                total_configs=len(configs), ts=self.clock.now))
        for config in configs:
            self._emit(ConfigStateChanged(config_id=config.id, name=config.name, state=ConfigState.PENDING,
                                          ts=self.clock.now))
        self._gpus({})
        cid = self._launch("ar-tp1", 0, 41.2)
        self._workloads(cid, "ar-tp1", 0, 100.0, 104.0, None)
        self._finish(cid, "ar-tp1")

        cid = self._launch("dflash-b16-tp1", 0, 48.9)
        self._workloads(cid, "dflash-b16-tp1", 0, 182.0, 210.0, 3.91)
        self._finish(cid, "dflash-b16-tp1")

        name = "ddtree-b8-tp1"
        cid = self._launch(name, 0, 52.3)
        self._emit(WorkloadStarted(config_id=cid, workload="code", ts=self.clock.tick()))
        self._log(cid, name, _decode(4.4, 240.0))
        self._measure(cid, name, "code", "fibonacci", 0, tps=240.0, accept=4.4)
        self._log(cid, name, "WARNING:  ddtree: tree budget 8 below recommended minimum 12", level="warning")
        crash_start = len(self.log_lines[name]) + 1
        excerpt = [
            f"[{_stamp(self.clock.now)}] Scheduler hit an exception: Traceback (most recent call last):",
            ('  File "/usr/lib/python3/site-packages/sglang/srt/managers/scheduler.py", line 3214, in '
             "run_scheduler_process"),
            "    scheduler.run_event_loop()",
            '  File "/usr/lib/python3/site-packages/sglang/srt/speculative/ddtree_worker.py", line 512, in verify_tree',
            "    logits_output = self.target_worker.forward_batch_generation(",
            CRASH_LINE,
            "CUDA kernel errors might be asynchronously reported at some other API call.",
        ]
        for line in excerpt:
            self._log(cid, name, line, level="fatal" if line == CRASH_LINE else "error", raw=True)
        crash_line_number = crash_start + excerpt.index(CRASH_LINE)
        self._emit(CrashDetected(config_id=cid, signature="cuda_illegal_instruction", line=CRASH_LINE,
                                 excerpt=tuple(excerpt), log_line_number=crash_line_number, ts=self.clock.tick()))
        self._log(cid, name, "Received sigquit from a child process. It usually means the child failed.",
                  level="error")
        self._emit(WorkloadNotRun(config_id=cid, workload="arithmetic", reason="the server crashed",
                                  ts=self.clock.tick()))
        self._finish(cid, name, ConfigState.CRASHED, reason="CUDA error: an illegal instruction was encountered",
                     signature="cuda_illegal_instruction", exit_code=-9)
        self._gpus({})

        name = "ddtree-b16-tp1"
        cid = self._launch(name, 1, 50.1)
        self._workloads(cid, name, 1, 251.0, 280.0, 4.62, arithmetic_zero=True)
        self._finish(cid, name)

        name = "ddtree-b32-tp1"
        cid = self._launch(name, 1, 55.0)
        self._emit(WorkloadStarted(config_id=cid, workload="code", ts=self.clock.tick()))
        self._log(cid, name, _decode(5.1, 262.0))
        self._measure(cid, name, "code", "fibonacci", 0, tps=262.0, accept=5.1)
        self._gpus({1: 98.0})
        self.running_cutoff = len(self.events)
        self._log(cid, name, _decode(5.2, 266.0))
        self._measure(cid, name, "code", "fibonacci", 1, tps=266.0, accept=5.2)
        self._emit(WorkloadStarted(config_id=cid, workload="arithmetic", ts=self.clock.tick()))
        for item in ("a0", "a1"):
            self._measure(cid, name, "arithmetic", item, 0, tps=300.0, accept=5.0)
        self._finish(cid, name)
        self._gpus({})
        self._emit(SweepFinished(state="completed", ts=self.clock.tick()))

    def write_logs(self, upto: int | None = None) -> None:
        """Write each configuration's log file (all of it, or only the lines among the first ``upto`` events)."""
        logs = self.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        if upto is None:
            lines = self.log_lines
        else:
            lines = {}
            names = {c.id: c.name for c in self.plan.configs}
            for event in self.events[:upto]:
                if isinstance(event, LogLine):
                    lines.setdefault(names[event.config_id], []).append(event.line)
        for name, text in lines.items():
            (logs / f"{name}.log").write_text("\n".join(text) + "\n", encoding="utf-8")


class FakeEngine:
    """The engine adapter's API over a scripted run; control calls are recorded and answered with events."""

    def __init__(self, run_dir: Path, plan: Plan | None = None, *, realtime: bool = False,
                 delay_s: float = 0.15) -> None:
        self.plan = plan or demo_plan()
        self.run_dir = Path(run_dir)
        self.script = DemoScript(self.plan, self.run_dir)
        self.script.write_logs()
        self.realtime = realtime
        self.delay_s = delay_s
        self.calls: list[tuple] = []
        """Every call made by the app: ("start",), ("pause",), ("skip", config_id), ("stop", timeout)…"""
        self.started = False
        self.stopped = False
        self.read_only = False
        self.engine_pid: int | None = None
        self.live = False
        self._subscribers: list[Callable[[Event], None]] = []
        self._position = 0
        self._paused = False
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # -------------------------------------------------------------------------------------- adapter API

    def subscribe(self, callback: Callable[[Event], None]) -> None:
        self._subscribers.append(callback)

    def start(self) -> None:
        self.calls.append(("start",))
        self.started = True
        if self.realtime:
            self._thread = threading.Thread(target=self._run_realtime, daemon=True, name="fake-engine")
            self._thread.start()

    def stop(self, timeout: float = 30.0) -> bool:
        self.calls.append(("stop", timeout))
        self.stopped = True
        if self._thread is not None:
            self._thread.join(timeout=2)
        return self._thread is None or not self._thread.is_alive()

    def history(self) -> tuple[list[Measurement], list[Event]]:
        return [], []

    def detach(self) -> None:
        raise RuntimeError("the fake engine runs in this process: nothing to detach from")

    def pause(self) -> Answer | None:  # None: no answer (SweepControl allows it; a subclass may not answer)
        self.calls.append(("pause",))
        if self._paused:
            return answered(outcome_of("pause", paused=True))
        self._paused = True
        self.emit(QueuePaused(ts=self._now()))
        return answered(outcome_of("pause", paused=False))

    def resume(self) -> Answer | None:
        self.calls.append(("resume",))
        if not self._paused:
            return answered(outcome_of("resume", paused=False))
        self._paused = False
        self.emit(QueueResumed(ts=self._now()))
        return answered(outcome_of("resume", paused=True))

    def skip(self, config_id: str) -> Answer | None:
        self.calls.append(("skip", config_id))
        name = self.plan.by_id(config_id).name
        self.emit(ConfigFinished(config_id=config_id, name=name, state=ConfigState.SKIPPED,
                                 reason="skipped by the user", ts=self._now()))
        return answered(Outcome("skip", True, f"skipped {name}", config_id))

    def retry(self, config_id: str) -> Answer | None:
        self.calls.append(("retry", config_id))
        name = self.plan.by_id(config_id).name
        self.emit(ConfigStateChanged(config_id=config_id, name=name, state=ConfigState.PENDING, ts=self._now()))
        return answered(Outcome("retry", True, f"queued {name} again", config_id))

    def abort(self, now: bool = False) -> Answer:
        self.calls.append(("abort", now))
        return answered(outcome_of("abort"))

    @property
    def paused(self) -> bool:
        return self._paused

    # -------------------------------------------------------------------------------------- scripting

    @property
    def events(self) -> list[Event]:
        return self.script.events

    def _now(self) -> float:
        with self._lock:
            last = self.script.events[max(self._position - 1, 0)]
        return last.ts + 0.5

    def emit(self, event: Event) -> None:
        for callback in list(self._subscribers):
            callback(event)

    def play(self, count: int | None = None) -> int:
        """Publish the next ``count`` scripted events (all remaining when None); returns how many."""
        with self._lock:
            end = len(self.script.events) if count is None else min(self._position + count, len(self.script.events))
            batch = self.script.events[self._position:end]
            self._position = end
        for event in batch:
            self.emit(event)
        return len(batch)

    def play_until_running(self) -> None:
        """Publish events up to the point where ``ddtree-b32-tp1`` runs and ``ddtree-b8-tp1`` has crashed."""
        self.play(self.script.running_cutoff - self._position)

    def play_from_thread(self, count: int | None = None) -> None:
        """Like :meth:`play`, from another thread (as the real engine does), waiting until it is done."""
        thread = threading.Thread(target=self.play, args=(count,))
        thread.start()
        thread.join()

    def _run_realtime(self) -> None:
        """Publish the script one event at a time, stamped with the real time, until stopped."""
        while not self.stopped:
            if self._paused:
                time.sleep(0.05)
                continue
            with self._lock:
                if self._position >= len(self.script.events):
                    return
                event = self.script.events[self._position]
                self._position += 1
            self.emit(dataclasses.replace(event, ts=time.time()))
            time.sleep(self.delay_s)


def _main() -> int:
    """Open the real app over a real-time replay (for looking at the UI in a terminal)."""
    import argparse
    import tempfile

    from specbench_tui.tui.app import SpecbenchApp

    parser = argparse.ArgumentParser(description="the specbench TUI over a scripted fake engine")
    parser.add_argument("--delay", type=float, default=0.15, help="seconds between scripted events")
    parser.add_argument("--theme", default=None)
    parser.add_argument("--no-mouse", action="store_true")
    parser.add_argument("--hostile", action="store_true", help="also publish hostile log lines")
    options = parser.parse_args()
    for variable in ("COLUMNS", "LINES"):  # as run_tui does: the terminal knows its size better
        os.environ.pop(variable, None)
    with tempfile.TemporaryDirectory() as tmp:
        engine = FakeEngine(Path(tmp) / "runs" / "2026-01-01_100000_demo", realtime=True, delay_s=options.delay)
        if options.hostile:
            cid = engine.plan.configs[0].id
            for line in ("[/crash] [bold]x", "\x1b[31mred\x1b[0m", "nul\x00byte", "bad \udcff surrogate"):
                engine.script.events.insert(20, LogLine(config_id=cid, line=line, level="error", ts=T0 + 20))
        app = SpecbenchApp(engine, theme=options.theme)
        app.run(mouse=not options.no_mouse)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())


# ------------------------------------------------------------------------------------------ waiting in tests

SETTLE_TIMEOUT_S = 60.0
"""How long :func:`at_rest` and :func:`until` wait for the screen to come to rest: generous, for a loaded 2-core CI box."""


def unsettled(app) -> list[str]:
    """What the app still has to do before the screen shows every event it was given (empty: at rest).

    Every item is a condition the app reaches on its own given time (no timer of more than a fraction of a
    second is involved), so a test waits for it instead of sleeping a fixed time that a loaded machine overruns.
    """
    from textual.worker import WorkerState

    from specbench_tui.tui.log_panel import ServerLogPanel
    from specbench_tui.tui.table_view import TableView

    waiting: list[str] = []
    if not app._inbox.empty():
        waiting.append("engine events not drained")
    if not app.analysis_settled:
        waiting.append("analysis running or wanted")
    busy = [w.name for w in app.workers if w.state in (WorkerState.PENDING, WorkerState.RUNNING)]
    if busy:
        waiting.append(f"workers {busy}")
    for screen in app.screen_stack:
        for table in screen.query(TableView):
            if table.follow_pending:
                waiting.append(f"{table!r}: follow a row")
        for log in screen.query(ServerLogPanel):
            if log._paint_timer is not None:
                waiting.append(f"{log!r}: repaint due")
    return waiting


def repaint_all(app) -> None:
    """Ask every widget of the current screen to be drawn again from its state now, and the screen to be laid out
    again: a snapshot then shows the state, never a line the compositor kept from before."""
    from textual.widget import Widget

    for widget in app.screen.walk_children(Widget, with_self=False):
        widget.refresh()
    app.screen.refresh(layout=True)


async def at_rest(pilot, timeout: float = SETTLE_TIMEOUT_S) -> None:
    """Wait until :func:`unsettled` is empty on two checks in a row (a finished analysis may ask for another,
    a measured row may be followed), or fail naming what never came to rest."""
    app = pilot.app
    deadline = time.monotonic() + timeout
    quiet = 0
    while True:
        await app.workers.wait_for_complete()
        await pilot.pause()
        waiting = unsettled(app)
        quiet = quiet + 1 if not waiting else 0
        if quiet >= 2:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the app did not come to rest in {timeout:.0f} s: {waiting}")


async def until(pilot, predicate: Callable[[], bool], what: str, timeout: float = SETTLE_TIMEOUT_S) -> None:
    """Let the app run until ``predicate()`` holds (a worker, a timer or a pushed screen finishing its work), or
    fail saying ``what`` never happened: the test asserts the condition anyway, this only gives it time."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        await pilot.pause(0.02)


def same_look(drawn, wanted) -> bool:
    """Whether a cell drawn with the Rich style ``drawn`` (a table's component class, resolved from the theme) has
    the colour, weight and reversal of ``wanted`` (the app's palette style for the same meaning)."""
    def truecolor(colour):
        return None if colour is None else tuple(colour.get_truecolor())

    return (truecolor(drawn.color) == truecolor(wanted.color) and bool(drawn.bold) == bool(wanted.bold)
            and bool(drawn.reverse) == bool(wanted.reverse))
