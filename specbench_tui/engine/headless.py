"""``specbench run --headless`` (also chosen when there is no TTY): the sweep as plain lines, then a summary.

One line per event that matters (launches, readiness, crashes with their excerpt, workload summaries,
failed or empty requests, notices, the end of each configuration) and a summary table at the end. No
colour, no cursor movement: the output is meant for logs, ``tee`` and CI.

Ctrl-C once finishes the request in flight, tears the servers down and stops cleanly (resume later);
Ctrl-C twice aborts at once (the request in flight is cancelled and not recorded; servers are killed).

Exit codes:

- ``0``: the sweep completed and every configuration is done (or skipped by the plan or the user);
- ``1``: the sweep completed but at least one configuration crashed or failed (its results are still valid);
- ``2``: nothing ran: the sweep file is invalid, the run directory cannot be resumed, or pre-flight failed;
- ``3``: the run directory could not be written mid-run (full disk, permissions): the sweep stopped;
- ``130``: interrupted by Ctrl-C (or SIGTERM); continue with ``specbench run --resume RUN_DIR``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import time
from collections import defaultdict
from typing import Any, TextIO

from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    CrashDetected,
    Event,
    MeasurementRecorded,
    Notice,
    QueuePaused,
    QueueResumed,
    ServerLaunching,
    ServerReady,
    ServerStopped,
    SweepFinished,
    SweepStarted,
    WorkloadFinished,
    WorkloadNotRun,
)
from specbench_tui.core.plan import Plan
from specbench_tui.core.records import STATUS_OK, Measurement
from specbench_tui.engine.session import make_backend, prepare_run

EXIT_OK = 0
EXIT_CONFIG_FAILED = 1
EXIT_INVALID = 2
EXIT_STORE = 3
EXIT_INTERRUPTED = 130


class Printer:
    """Turns events into plain lines and collects what the summary table needs."""

    def __init__(self, plan: Plan, out: TextIO = sys.stdout) -> None:
        self.plan = plan
        self.out = out
        self.names = {c.id: c.name for c in plan.configs}
        self.started = time.monotonic()
        self.finished: dict[str, ConfigFinished] = {}
        self.startup: dict[str, float] = {}
        self.records: dict[str, list[Measurement]] = defaultdict(list)
        self.server_log: dict[tuple[str, str], dict[str, Any]] = {}
        self.not_run: dict[str, list[str]] = defaultdict(list)

    def _say(self, text: str) -> None:
        elapsed = time.monotonic() - self.started
        print(f"[{int(elapsed // 60):02d}:{elapsed % 60:04.1f}] {text}", file=self.out, flush=True)

    def __call__(self, event: Event) -> None:  # noqa: C901 - one branch per event type, flat on purpose
        name = self.names.get(getattr(event, "config_id", ""), "")
        if isinstance(event, SweepStarted):
            self._say(f"sweep {event.sweep}: {event.total_configs} configurations"
                      f"{' (resumed)' if event.resumed else ''} -> {event.run_dir}")
        elif isinstance(event, ServerLaunching):
            attempt = f" attempt {event.attempt}" if event.attempt > 1 else ""
            self._say(f"{name}: launching{attempt} on GPU {','.join(map(str, event.gpus)) or '-'} port {event.port} "
                      f"(pid {event.pid})")
        elif isinstance(event, ServerReady):
            self.startup[event.config_id] = event.startup_s
            context = f", context {event.context_length}" if event.context_length else ""
            self._say(f"{name}: ready in {event.startup_s:.1f} s{context}")
        elif isinstance(event, CrashDetected):
            self._say(f"{name}: CRASH {event.signature} (log line {event.log_line_number}): {event.line.strip()[:200]}")
            for line in event.excerpt:
                print(f"    | {line[:300]}", file=self.out)
        elif isinstance(event, MeasurementRecorded):
            self._measurement(name, event)
        elif isinstance(event, WorkloadFinished):
            self._workload(name, event)
        elif isinstance(event, WorkloadNotRun):
            self.not_run[event.config_id].append(event.workload)
        elif isinstance(event, ServerStopped):
            if event.leftover_pids:
                self._say(f"{name}: server stopped, but pids {list(event.leftover_pids)} survived")
        elif isinstance(event, ConfigFinished):
            self.finished[event.config_id] = event
            if self.not_run.get(event.config_id):
                self._say(f"{event.name}: not run: {', '.join(self.not_run.pop(event.config_id))}")
            if event.state == ConfigState.SKIPPED and event.reason and not self.startup.get(event.config_id):
                self._say(f"{event.name}: skipped ({event.reason})")
            else:
                extra = f" [{event.signature}]" if event.signature else ""
                self._say(f"{event.name}: {event.state.value.upper()}{extra}"
                          f"{f' - {event.reason}' if event.reason else ''}")
        elif isinstance(event, Notice):
            self._say(f"{event.level}: {event.text}")
        elif isinstance(event, (QueuePaused, QueueResumed)):
            self._say("queue paused" if isinstance(event, QueuePaused) else "queue resumed")
        elif isinstance(event, SweepFinished):
            self._say(f"sweep {event.state}{f': {event.reason}' if event.reason else ''}")

    def _measurement(self, name: str, event: MeasurementRecorded) -> None:
        try:
            record = Measurement.from_json(event.record)
        except (TypeError, ValueError):
            return
        self.records[record.config_id].append(record)
        if record.status != STATUS_OK:
            self._say(f"{name}: {record.workload}/{record.item}#{record.repeat}: {record.status.upper()}"
                      f" - {record.error or ''}")
        elif record.clamped:
            self._say(f"{name}: {record.workload}/{record.item}: prompt clamped to {record.prompt_tokens} tokens")

    def _workload(self, name: str, event: WorkloadFinished) -> None:
        ok = [r for r in self.records.get(event.config_id, [])
              if r.workload == event.workload and r.status == STATUS_OK]
        tps = _median([r.decode_tps for r in ok])
        ttft = _median([r.ttft_s for r in ok])
        accept = _median([r.accept_length for r in ok])
        log = event.server_log or {}
        self.server_log[(event.config_id, event.workload)] = log
        parts = [f"{event.measured} requests"]
        if tps is not None:
            parts.append(f"{tps:.1f} tok/s")
        if ttft is not None:
            parts.append(f"TTFT {ttft * 1000:.0f} ms")
        if accept is not None:
            parts.append(f"accept {accept:.2f}")
        if log.get("lines"):
            server = f"server log: {log['gen_throughput']:.1f} tok/s" if log.get("gen_throughput") else "server log:"
            if log.get("accept_length") is not None:
                server += f", accept {log['accept_length']:.2f}"
            parts.append(server)
        if event.errors:
            parts.append(f"{event.errors} errors")
        if event.zero_output:
            parts.append(f"{event.zero_output} zero-output")
        self._say(f"{name}: {event.workload}: " + ", ".join(parts))

    def summary(self) -> str:
        """The table printed at the end: one row per configuration, median decode tok/s per workload."""
        workloads = [w.name for w in self.plan.workloads]
        head = ["configuration", "state", "start s", *workloads, "TTFT ms", "accept", "note"]
        rows = [head]
        for config in self.plan.configs:
            finished = self.finished.get(config.id)
            records = [r for r in self.records.get(config.id, []) if r.status == STATUS_OK]
            state = finished.state.value if finished else "not run"
            cells = [config.name, state, _fmt(self.startup.get(config.id), "{:.1f}")]
            for workload in workloads:
                cells.append(_fmt(_median([r.decode_tps for r in records if r.workload == workload]), "{:.1f}"))
            ttft = _median([r.ttft_s for r in records])
            cells.append(_fmt(ttft * 1000 if ttft is not None else None, "{:.0f}"))
            cells.append(_fmt(_median([r.accept_length for r in records]), "{:.2f}"))
            note = ""
            if finished is not None and finished.state != ConfigState.DONE:
                note = finished.signature or (finished.reason or "")
            cells.append(note[:60])
            rows.append(cells)
        widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
        lines = ["  ".join(cell.ljust(widths[i]) if i in (0, 1, len(head) - 1) else cell.rjust(widths[i])
                           for i, cell in enumerate(row)).rstrip() for row in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "decode tok/s (median over requests) per workload\n" + "\n".join(lines)


def _median(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def _fmt(value: float | None, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


# ------------------------------------------------------------------------------------------------ entry point


def run_headless(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    """Run (or resume) a sweep without a UI; returns the exit code documented in this module."""
    loaded = prepare_run(args)
    if isinstance(loaded, int):
        return loaded
    plan, run_dir = loaded
    return asyncio.run(_run(plan, run_dir, bool(args.resume), bool(getattr(args, "retry_crashed", False)), out))


async def _run(plan: Plan, run_dir: Any, resumed: bool, retry_crashed: bool, out: TextIO) -> int:
    from specbench_tui.engine.orchestrator import Orchestrator

    api_key = os.environ.get(plan.sweep.engine.api_key_env) if plan.sweep.engine.api_key_env else None
    orchestrator = Orchestrator(plan, run_dir, backend=make_backend(plan), resumed=resumed, retry_crashed=retry_crashed,
                                api_key=api_key)
    printer = Printer(plan, out)
    orchestrator.subscribe(printer)
    interrupts = 0

    def on_interrupt() -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts == 1:
            print("\nstopping after the request in flight (Ctrl-C again to abort now)", file=out, flush=True)
            orchestrator.abort(now=False)
        else:
            print("\naborting now", file=out, flush=True)
            orchestrator.abort(now=True)

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_interrupt)
    try:
        outcome = await orchestrator.run()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        run_dir.close()
    if outcome.state == "failed" and (outcome.reason or "").startswith("pre-flight"):
        return EXIT_INVALID
    print("", file=out)
    print(printer.summary(), file=out)
    print(f"\nrun directory: {run_dir.path}", file=out, flush=True)
    if outcome.state == "failed":
        return EXIT_STORE if outcome.reason and "cannot be written" in outcome.reason else EXIT_INVALID
    if outcome.state == "aborted":
        return EXIT_INTERRUPTED
    if any(state in (ConfigState.CRASHED, ConfigState.FAILED) for state in outcome.states.values()):
        return EXIT_CONFIG_FAILED
    return EXIT_OK
