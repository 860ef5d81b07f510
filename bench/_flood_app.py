"""The real specbench app, on whatever terminal it is given, fed a flood of server log lines (a bench helper).

Run by the bench scripts inside a pseudo-terminal (see ``_pty.py``), never by hand in CI:

    python bench/_flood_app.py --rate 10000 --lines 600000 [--sweep SWEEP.toml --run-dir DIR] [--result OUT.json]

- Without ``--sweep`` the engine is a stand-in: one configuration "running", and a flood thread that publishes
  ``LogLines`` events as the engine's log watch does (from another thread, one batch every 10 ms), with the
  mix of lines a speculative SGLang server prints (``Decode batch`` lines, access lines, prefill lines, an
  occasional warning).
- With ``--sweep`` the engine is the real :class:`~specbench_tui.application.runner.EngineThread` running that sweep
  against the simulator, *and* the flood thread publishes into the same app on top: the measuring engine
  thread, the UI thread and the flood share one process (and one GIL), as in ``specbench run``.

The flood thread names itself ``bench-flood`` (``/proc/PID/task/TID/comm``) so that the parent can leave its
CPU time out of the UI's. ``--result`` receives JSON: lines published, the first-screen time (when the panels
were mounted, from process start) and whether the engine finished. The app exits when ``--exit-after`` seconds
have passed, or (with ``--sweep``) once the sweep has finished, or on ``q``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    ConfigStateChanged,
    CrashDetected,
    Event,
    LogLines,
    MeasurementRecorded,
    QueuePaused,
    QueueResumed,
    ServerLaunching,
    ServerReady,
    ServerStopped,
    SweepFinished,
    SweepStarted,
)
from specbench_tui.core.plan import Plan, build_plan
from specbench_tui.core.records import Measurement
from specbench_tui.core.sweep.loader import load_sweep, parse_sweep

FLOOD_SWEEP = Path(__file__).resolve().parent.parent / "sweeps" / "demo.toml"


def _name_thread(name: str) -> None:
    """Set the kernel name of the calling thread (``/proc/.../comm``), so its CPU time can be told apart."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


def flood_lines(n: int, start: int = 0) -> list[str]:
    """``n`` log lines of a busy speculative SGLang server (the shapes the live panel handles)."""
    out = []
    for i in range(start, start + n):
        stamp = f"[2026-01-01 10:{(i // 60000) % 60:02d}:{(i // 1000) % 60:02d}.{i % 1000:03d}]"
        kind = i % 20
        if kind < 14:
            out.append(f"{stamp} Decode batch, #running-req: {1 + i % 8}, #token: {4000 + i % 997}, token usage: 0.01, "
                       f"accept len: {3 + (i % 100) / 100:.2f}, accept rate: 0.{60 + i % 39}, cuda graph: True, "
                       f"gen throughput (token/s): {150 + i % 113}.{i % 100:02d}, #queue-req: 0")
        elif kind < 18:
            out.append(f'{stamp} INFO:     127.0.0.1:{40000 + i % 20000} - "POST /generate HTTP/1.1" 200 OK')
        elif kind < 19:
            out.append(f"{stamp} Prefill batch, #new-seq: 1, #new-token: {100 + i % 900}, #cached-token: 0, token usage: "
                       "0.00, #running-req: 0, #queue-req: 0, #pending-token: 0, cuda graph: False, "
                       f"input throughput (token/s): {5000 + i % 3000}.00")
        else:
            out.append(f"{stamp} WARNING:  request {i} hit max_new_tokens")
    return out


class Flood:
    """Publishes ``total`` log lines at ``rate`` per second to ``publish`` from a thread of its own."""

    def __init__(self, config_id: str, rate: float, total: int, publish: Callable[[Event], None]) -> None:
        self.config_id = config_id
        self.rate = rate
        self.total = total
        self.publish = publish
        self.sent = 0
        self.started_at = 0.0
        self.finished_at = 0.0
        self.stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-flood", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        _name_thread("bench-flood")
        pool = flood_lines(2000)
        self.started_at = time.monotonic()
        tick = 0.01
        next_at = self.started_at
        while self.sent < self.total and not self.stop.is_set():
            due = min(self.total, int((time.monotonic() - self.started_at) * self.rate)) if self.rate > 0 else \
                min(self.total, self.sent + 2000)
            now = time.time()
            if self.sent < due:  # one batch per tick, as the engine's watch publishes a read of the pipe
                lines = [pool[n % len(pool)] for n in range(self.sent, due)]
                self.publish(LogLines(config_id=self.config_id, first=self.sent + 1, text="\n".join(lines),
                                      count=len(lines), ts=now))
                self.sent = due
            next_at += tick
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif self.rate <= 0:
                time.sleep(0.001)
        self.finished_at = time.monotonic()


def table_sweep(configs: int, workloads: int) -> str:
    """A sweep of ``configs`` configurations × ``workloads`` workloads (for a results table of that size)."""
    names = ", ".join(str(n) for n in range(1, configs))
    text = f"""[sweep]
name = "table-{configs}x{workloads}"
baseline = "ar"
gpus = 8

[engine]
launcher = "simulator"

[server.args]
model-path = "Qwen/Qwen3-8B"

[[configs]]
name = "ar"
algorithm = "autoregressive"

[[configs]]
name = "ddtree-b{{budget}}"
algorithm = "ddtree"
matrix = {{ budget = [{names}] }}
[configs.args]
speculative-algorithm = "DDTREE"
speculative-draft-model-path = "z-lab/Qwen3-8B-DFlash-b16"
page-size = 1
[configs.fork_args]
speculative-ddtree-budget = "{{budget}}"
"""
    for index in range(workloads):
        text += f"""
[[workloads]]
name = "w{index}"
kind = "arithmetic"
count = 1
max_new_tokens = 64
"""
    return text


class FloodEngine:
    """The adapter API over a stand-in engine: one configuration running, its log flooding.

    With ``table=True`` the plan's configurations start out measured (a full results table: every workload of
    every configuration, a few crashed, zero-output or partial), the last quarter pending; the engine answers
    pause, skip and retry as the real one does (a confirming event a moment later), and a skipped running
    configuration is replaced by the next pending one, so that every control key can be pressed again and
    again.
    """

    def __init__(self, plan: Plan, run_dir: Path, rate: float, total: int, *, table: bool = False) -> None:
        self.plan = plan
        self.run_dir = run_dir
        self._subscribers: list[Callable[[Event], None]] = []
        self.table = table
        self.config = plan.configs[-1] if table else plan.configs[0]
        self.flood = Flood(self.config.id, rate, total, self._publish)
        self._paused = False
        self._lock = threading.Lock()
        self.log_path = run_dir / "flood.log"
        self._finished: set[str] = set()
        self.read_only = False  # as EngineThread: the sweep runs in this process, its view may steer it
        self.engine_pid: int | None = None
        self.live = False

    def subscribe(self, callback: Callable[[Event], None]) -> None:
        self._subscribers.append(callback)

    def _publish(self, event: Event) -> None:
        for callback in self._subscribers:
            callback(event)

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "w", encoding="utf-8") as handle:
            handle.write("\n".join(flood_lines(5000)) + "\n")
        self._publish(SweepStarted(sweep=self.plan.sweep.name, run_dir=str(self.run_dir),
                                   total_configs=len(self.plan.configs)))
        for other in self.plan.configs:
            self._publish(ConfigStateChanged(config_id=other.id, name=other.name, state=ConfigState.PENDING))
        if self.table:
            self._fill_table()
        self._launch(self.config)
        self.flood.start()

    def _launch(self, c) -> None:  # noqa: ANN001
        self._publish(ConfigStateChanged(config_id=c.id, name=c.name, state=ConfigState.LAUNCHING))
        self._publish(ServerLaunching(config_id=c.id, name=c.name, argv=("python", "-m", "sglang.launch_server"),
                                      gpus=(0,), port=30000, pid=os.getpid(), log_path=str(self.log_path)))
        self._publish(ConfigStateChanged(config_id=c.id, name=c.name, state=ConfigState.RUNNING))

    def _fill_table(self) -> None:
        """Measure three quarters of the configurations on every workload (two repeats each)."""
        configs = self.plan.configs
        measured = configs[: len(configs) * 3 // 4]
        now = time.time() - 3600
        for index, c in enumerate(measured):
            self._publish(ConfigStateChanged(config_id=c.id, name=c.name, state=ConfigState.RUNNING, ts=now))
            self._publish(ServerReady(config_id=c.id, startup_s=40.0 + index % 7, ts=now))
            crashed = index % 23 == 5
            for w_index, workload in enumerate(self.plan.sweep.workloads):
                if crashed and w_index >= 2:
                    break
                zero = index % 31 == 7 and w_index == 3
                for repeat in (0, 1):
                    now += 0.5
                    tps = 100.0 if c.name == "ar" else 120.0 + (index * 37 + w_index * 11) % 180
                    record = Measurement(
                        config_id=c.id, config=c.name, workload=workload.name, item="a0", repeat=repeat,
                        status="zero_output" if zero else "ok", prompt_tokens=120,
                        completion_tokens=0 if zero else 64, ttft_s=0.04 + index % 9 / 1000, e2e_s=0.5,
                        decode_tps=0.0 if zero else tps + repeat, accept_length=None if c.name == "ar" else 3.5,
                        finish_reason="length", started_at=now).to_json()
                    self._publish(MeasurementRecorded(config_id=c.id, record=record, ts=now))
            if crashed:
                line = "torch.AcceleratorError: CUDA error: an illegal instruction was encountered"
                self._publish(CrashDetected(config_id=c.id, signature="cuda_illegal_instruction", line=line,
                                            excerpt=(line,), ts=now))
            self._publish(ServerStopped(config_id=c.id, exit_code=-9 if crashed else 0, teardown_s=2.0, ts=now))
            self._publish(ConfigFinished(config_id=c.id, name=c.name,
                                         state=ConfigState.CRASHED if crashed else ConfigState.DONE,
                                         signature="cuda_illegal_instruction" if crashed else None, ts=now))

    def stop(self, timeout: float) -> None:
        self.flood.stop.set()

    def _later(self, delay_s: float, action: Callable[[], None]) -> None:
        timer = threading.Timer(delay_s, action)
        timer.daemon = True
        timer.start()

    def pause(self) -> None:
        self._paused = True
        self._later(0.2, lambda: self._publish(QueuePaused()))

    def resume(self) -> None:
        self._paused = False
        self._later(0.2, lambda: self._publish(QueueResumed()))

    def skip(self, config_id: str) -> None:
        c = next((c for c in self.plan.configs if c.id == config_id), None)
        if c is None:
            return

        def confirm() -> None:
            with self._lock:
                running = c.id == self.config.id
                if running:
                    self._publish(ServerStopped(config_id=c.id, exit_code=0, teardown_s=0.3))
                self._publish(ConfigFinished(config_id=c.id, name=c.name, state=ConfigState.SKIPPED,
                                             reason="skipped by the user"))
                if running:  # the queue moves on: the next pending configuration floods now
                    pending = [x for x in self.plan.configs[len(self.plan.configs) * 3 // 4:]
                               if x.id not in self._finished and x.id != c.id]
                    self._finished.add(c.id)
                    if pending:
                        self.config = pending[0]
                        self.flood.config_id = pending[0].id
                        self._launch(pending[0])
                else:
                    self._finished.add(c.id)

        self._later(0.3, confirm)

    def retry(self, config_id: str) -> None:
        c = next((c for c in self.plan.configs if c.id == config_id), None)
        if c is None:
            return
        self._finished.discard(config_id)
        self._later(0.2, lambda: self._publish(ConfigStateChanged(config_id=c.id, name=c.name,
                                                                   state=ConfigState.PENDING,
                                                                   reason="queued again")))

    def abort(self, now: bool = False) -> None:
        self.flood.stop.set()

    @property
    def paused(self) -> bool:
        return self._paused


class EngineWithFlood:
    """The real engine thread, with a log flood published into the same app on top."""

    def __init__(self, engine, rate: float, total: int) -> None:
        self.engine = engine
        self.plan = engine.plan
        self.run_dir = engine.run_dir
        self._subscribers: list[Callable[[Event], None]] = []
        self.flood = Flood(self.plan.configs[0].id, rate, total, self._publish)
        self.finished = threading.Event()
        engine.subscribe(self._from_engine)

    def _from_engine(self, event: Event) -> None:
        if isinstance(event, SweepFinished):
            self.finished.set()
        self._publish(event)

    def _publish(self, event: Event) -> None:
        for callback in self._subscribers:
            callback(event)

    def subscribe(self, callback: Callable[[Event], None]) -> None:
        self._subscribers.append(callback)

    def start(self) -> None:
        self.engine.start()
        self.flood.start()

    def stop(self, timeout: float) -> None:
        self.flood.stop.set()
        self.engine.stop(timeout)

    def __getattr__(self, name: str):
        return getattr(self.engine, name)


def _time_turns(path: str, at_least_ms: float = 2.0) -> Callable[[], None]:
    """Writes every turn of the event loop (a callback or a task's step) that took ``at_least_ms`` of the UI
    thread's CPU to ``path`` at exit, as (monotonic start, CPU ms, wall ms, what ran): ``bench_ui.py --turns``
    pairs them with each press."""
    import asyncio.events
    import pickle

    turns: list[tuple[float, float, float, str]] = []
    run = asyncio.events.Handle._run

    def timed(handle: asyncio.events.Handle) -> None:
        cpu, wall = time.thread_time(), time.monotonic()
        run(handle)
        spent = (time.thread_time() - cpu) * 1000
        if spent >= at_least_ms:
            callback = getattr(handle, "_callback", None)
            owner = getattr(callback, "__self__", None)
            name = getattr(callback, "__qualname__", repr(callback))
            if isinstance(owner, asyncio.Task):
                coro = owner.get_coro()
                name = f"{getattr(coro, '__qualname__', repr(coro))} [{owner.get_name()}]"
            turns.append((wall, spent, (time.monotonic() - wall) * 1000, name))

    asyncio.events.Handle._run = timed  # type: ignore[method-assign]

    def dump() -> None:
        with open(path, "wb") as handle:
            pickle.dump(turns, handle)

    return dump


def main() -> int:
    started = time.monotonic()
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=10000.0, help="lines per second (0: as fast as it goes)")
    parser.add_argument("--lines", type=int, default=10**9)
    parser.add_argument("--sweep", help="run this sweep with the real engine (and flood on top)")
    parser.add_argument("--run-dir", default=None)
    parser.add_argument("--exit-after", type=float, default=None, help="seconds after the first screen")
    parser.add_argument("--result", default=None)
    parser.add_argument("--profile", default=None, help="sample the UI thread's stack into this file")
    parser.add_argument("--table", default=None, metavar="CONFIGSxWORKLOADS",
                        help="a stand-in plan this big, three quarters of it measured (e.g. 200x8)")
    parser.add_argument("--exit-when-done", action="store_true",
                        help="exit once every line was published and drained into the log panel")
    args = parser.parse_args()
    for variable in ("COLUMNS", "LINES"):
        os.environ.pop(variable, None)
    dump_samples = None
    if args.profile:
        from _sampler import start as start_sampler

        dump_samples = start_sampler(args.profile, 0.002)

    dump_turns = _time_turns(os.environ["SPECBENCH_TURNS"]) if os.environ.get("SPECBENCH_TURNS") else None

    from specbench_tui.tui.app import SpecbenchApp

    if args.sweep:
        from specbench_tui.application.runner import EngineThread
        from specbench_tui.rundir.store import RunDir

        plan = build_plan(load_sweep(Path(args.sweep)))
        run_dir = RunDir.create(Path(args.run_dir), plan.sweep.name, plan.sweep.text, plan.to_json())
        engine = EngineWithFlood(EngineThread(plan, run_dir), args.rate, args.lines)
    elif args.table:
        configs, workloads = (int(n) for n in args.table.lower().split("x"))
        plan = build_plan(parse_sweep(table_sweep(configs, workloads), Path("table.toml")))
        engine = FloodEngine(plan, Path(args.run_dir or "/tmp/specbench-flood"), args.rate, args.lines, table=True)
    else:
        plan = build_plan(load_sweep(FLOOD_SWEEP))
        engine = FloodEngine(plan, Path(args.run_dir or "/tmp/specbench-flood"), args.rate, args.lines)

    info: dict[str, object] = {}

    import specbench_tui.tui.app as app_module

    class BenchApp(SpecbenchApp):
        CSS_PATH = str(Path(app_module.__file__).with_name("app.tcss"))

        def on_sweep_screen_panels_mounted(self, message) -> None:
            super().on_sweep_screen_panels_mounted(message)
            info.setdefault("first_screen_s", time.monotonic() - started)
            self.call_after_refresh(lambda: info.setdefault("first_paint_s", time.monotonic() - started))
            if args.exit_after is not None:
                self.set_timer(args.exit_after, self._bench_exit)
            if args.sweep or args.exit_when_done:
                self.set_interval(0.2, self._bench_poll)

        def _bench_poll(self) -> None:
            if args.sweep and engine.finished.is_set() and engine.flood.sent >= min(args.lines, 1):
                self._bench_exit()
            panel = self.sweep_screen.query_one("ServerLogPanel")
            if args.exit_when_done and panel.lines_received >= args.lines:
                self._bench_exit()

        def _bench_exit(self) -> None:
            engine.flood.stop.set()
            info["lines_published"] = engine.flood.sent
            info["lines_received"] = self.sweep_screen.query_one("ServerLogPanel").lines_received
            self.exit(0)

    app = BenchApp(engine)
    app.run(mouse=False)
    if dump_samples is not None:
        dump_samples()
    if dump_turns is not None:
        dump_turns()
    engine.stop(60.0)
    info.setdefault("lines_published", engine.flood.sent)
    info["flood_s"] = (engine.flood.finished_at or time.monotonic()) - engine.flood.started_at
    info["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.result:
        Path(args.result).write_text(json.dumps(info))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
