"""``specbench run --headless`` (also chosen when there is no TTY): the sweep as plain lines, then a summary.

One line per event that matters (launches, readiness, crashes with their excerpt, workload summaries,
failed or empty requests, notices, the end of each configuration) and a summary table at the end. No
colour, no cursor movement: the output is meant for logs, ``tee`` and CI.

The summary table is :func:`specbench_tui.core.analysis.analyse` over the run directory (plan.json,
results.jsonl, events.jsonl), so headless, the TUI and ``specbench report`` show the same figures: per
workload the median decode tok/s with its speedup over the matched baseline, the geometric mean of those
speedups, the median TTFT, and the acceptance length weighted by verify steps (a median of per-request
ratios would snap to values such as 128/32 = 4.00 and show the same figure for different configurations).
A configuration whose every request returned no tokens says ZERO OUTPUT in its note.

Signals: Ctrl-C (SIGINT) once finishes the request in flight, tears the servers down and stops cleanly
(resume later); a second one aborts at once (the request in flight is cancelled and not recorded; servers
are killed). SIGTERM (systemd, Docker, ``kill``) and SIGHUP (the SSH session or terminal went away) ask for
the same clean stop, but nobody is there to press Ctrl-C again, so after :data:`SIGNAL_GRACE_S` seconds the
request in flight is abandoned and everything is torn down. A signal ignored when the program started
(``nohup`` ignores SIGHUP) stays ignored. After SIGHUP the output may have nowhere to go; lines that
cannot be written are dropped, never fatal.

Exit codes:

- ``0``: the sweep completed and every configuration is done (or skipped by the plan or the user);
- ``1``: the sweep completed but at least one configuration crashed or failed (its results are still valid);
- ``2``: nothing ran: the sweep file is invalid, the run directory cannot be resumed, or pre-flight failed;
- ``3``: the run directory could not be written mid-run (full disk, permissions): the sweep stopped;
- ``4``: a stopped server's GPUs were still held after ``engine.gpu_release_timeout_s``: nothing more was
  launched (free the GPUs, then ``specbench run --resume RUN_DIR``);
- ``129``: stopped by SIGHUP; ``130``: stopped by Ctrl-C or SIGTERM; continue with
  ``specbench run --resume RUN_DIR``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import sys
import time
from collections import defaultdict
from typing import Any, TextIO

from specbench_tui.core.analysis import (
    ACCEPT_FROM_SERVER,
    RunAnalysis,
    acceptance,
    analyse,
    geometric_mean,
    spread_of,
)
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
from specbench_tui.engine.store import StoreError

EXIT_OK = 0
EXIT_CONFIG_FAILED = 1
EXIT_INVALID = 2
EXIT_STORE = 3
EXIT_GPU_HELD = 4
EXIT_HANGUP = 129
EXIT_INTERRUPTED = 130

SIGNAL_GRACE_S = 5.0
"""After SIGTERM or SIGHUP, how long the request in flight may take to finish before it is abandoned."""


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
        self.broken = False
        """The output could not be written (its terminal went away): nothing more is printed."""

    def _say(self, text: str) -> None:
        elapsed = time.monotonic() - self.started
        self.write(f"[{int(elapsed // 60):02d}:{elapsed % 60:04.1f}] {text}")

    def write(self, text: str) -> None:
        """One line (or block) out; when the output is gone (a dropped SSH session) it is dropped silently."""
        if self.broken:
            return
        try:
            print(text, file=self.out, flush=True)
        except (OSError, ValueError):  # EIO from a vanished terminal, EPIPE, a closed file
            self.broken = True
            _silence(self.out)

    def __call__(self, event: Event) -> None:  # noqa: C901 - one branch per event type, flat on purpose
        name = self.names.get(getattr(event, "config_id", ""), "")
        if isinstance(event, SweepStarted):
            self._say(f"sweep {event.sweep}: {event.total_configs} configurations"
                      f"{' (resumed)' if event.resumed else ''} -> {event.run_dir}")
        elif isinstance(event, ServerLaunching):
            attempt = f" attempt {event.attempt}" if event.attempt > 1 else ""
            where = f"GPU {','.join(map(str, event.gpus))}" if event.gpus else "CPU (no GPU)"
            self._say(f"{name}: launching{attempt} on {where}, port {event.port} "
                      f"(pid {event.pid})")
        elif isinstance(event, ServerReady):
            self.startup[event.config_id] = event.startup_s
            context = f", context {event.context_length}" if event.context_length else ""
            self._say(f"{name}: ready in {event.startup_s:.1f} s{context}")
        elif isinstance(event, CrashDetected):
            self._say(f"{name}: CRASH {event.signature} (log line {event.log_line_number}): {event.line.strip()[:200]}")
            self.write("\n".join(f"    | {line[:300]}" for line in event.excerpt))
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
        tps = _centre(spread_of(ok, "decode_tps"))
        ttft = _centre(spread_of(ok, "ttft_s"))
        accept = acceptance(ok)[0]
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
        elif log.get("source") == "metrics" and log.get("accept_length") is not None:
            drafted = log.get("draft_tokens") or 0
            parts.append(f"server counters: accept {log['accept_length']:.2f}, "
                         + (f"{log.get('accepted_tokens', 0)} of {drafted} drafted tokens accepted" if drafted
                            else "nothing drafted"))
        if event.errors:
            parts.append(f"{event.errors} errors")
        if event.zero_output:
            parts.append(f"{event.zero_output} zero-output")
        self._say(f"{name}: {event.workload}: " + ", ".join(parts))

    def summary(self, plan_json: dict[str, Any], measurements: list[Measurement], events: list[Event]) -> str:
        """The table printed at the end, from :func:`analyse` over the run directory (earlier runs of a resumed
        one included): one row per configuration, per workload the median decode tok/s and its speedup over the
        matched baseline."""
        analysis = analyse(plan_json, measurements, events)
        startup = {e.config_id: e.startup_s for e in events if isinstance(e, ServerReady)}
        by_config: dict[str, list[Measurement]] = defaultdict(list)
        for measurement in measurements:
            by_config[measurement.config_id].append(measurement)
        workloads = [w.name for w in analysis.workloads]
        head = ["configuration", "state", "start s", *workloads, "speedup", "TTFT ms", "accept", "note"]
        rows = [head]
        left = {0, 1, len(head) - 1}
        for config in analysis.configs:
            cells = [config.name, config.state, _fmt(startup.get(config.id), "{:.1f}")]
            speedups: list[float] = []
            for workload in workloads:
                row = analysis.row(config.id, workload)
                if row is None or row.decode_tps is None:
                    cells.append("-")
                    continue
                text = f"{row.decode_tps.median:.1f}"
                if row.speedup is not None and not config.is_baseline:
                    text += f" {row.speedup.median:.2f}x"
                    speedups.append(row.speedup.median)
                cells.append(text)
            records = [r for r in by_config.get(config.id, []) if r.status == STATUS_OK]
            # Over every workload or not at all: a mean over the workloads a crashed run reached misleads.
            mean = geometric_mean(speedups) if speedups and len(speedups) == len(workloads) else None
            cells.append("base" if config.is_baseline and any(
                (r := analysis.row(config.id, w)) is not None and r.decode_tps is not None for w in workloads)
                else _fmt(mean, "{:.2f}x"))
            ttft = _centre(spread_of(records, "ttft_s"))
            cells.append(_fmt(ttft * 1000 if ttft is not None else None, "{:.0f}"))
            accept = acceptance(records)[0]
            if accept is not None:
                cells.append(f"{accept:.2f}")
            else:  # no per-request figure (vLLM): the server's counters over each workload, marked ^
                served = [r.accept_length for w in workloads if (r := analysis.row(config.id, w)) is not None
                          and r.accept_method == ACCEPT_FROM_SERVER and r.accept_length is not None]
                cells.append(f"{statistics.fmean(served):.2f}^" if served else "-")
            cells.append(_note(analysis, config.id, workloads)[:70])
            rows.append(cells)
        widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
        lines = ["  ".join(cell.ljust(widths[i]) if i in left else cell.rjust(widths[i])
                           for i, cell in enumerate(row)).rstrip() for row in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        out = [("decode tok/s per workload (median over requests; Nx = speedup over the matched baseline); "
                "speedup: geometric mean over all workloads; accept: acceptance length weighted by verify steps "
                "(^: from the server's counters, the engine gives none per request)"),
               *lines]
        best = [b for b in analysis.best if b.tp is None]
        if best:
            out.append("")
            for b in best:
                speed = f" ({b.speedup.median:.2f}x)" if b.speedup is not None else ""
                close = f", within the noise of {b.runner_up}" if b.close_call and b.runner_up else ""
                out.append(f"best {b.workload}: {b.config} {b.decode_tps.median:.1f} tok/s{speed}{close}")
        for note in analysis.notes:
            if not note.startswith("info:"):
                out.append(f"note: {note}")
        return "\n".join(out)


def _note(analysis: RunAnalysis, config_id: str, workloads: list[str]) -> str:
    """Why a row needs a second look: crash signature or reason, ZERO OUTPUT, errors, flags."""
    config = analysis.config(config_id)
    assert config is not None
    cells = [r for w in workloads if (r := analysis.row(config_id, w)) is not None]
    ok = sum(r.n_ok for r in cells)
    zero = sum(r.n_zero_output for r in cells)
    errors = sum(r.n_error for r in cells)
    parts: list[str] = []
    if config.state != "done":
        parts.append(config.signature or config.reason or "")
    if zero and not ok:
        parts.insert(0, f"ZERO OUTPUT: all {zero} requests returned no tokens")
    elif zero:
        parts.append(f"{zero} zero-output")
    if errors:
        parts.append(f"{errors} errors")
    flags = sorted({f for r in cells for f in r.flags} - {"zero_output", "errors", "no_baseline"})
    parts += [f.replace("_", " ") for f in flags]
    return "; ".join(p for p in parts if p)


def _centre(spread: Any) -> float | None:
    return None if spread is None else float(spread.median)


def _fmt(value: float | None, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


def _silence(out: TextIO) -> None:
    """Point a dead output's file descriptor at /dev/null, so later writes and the final flush succeed."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = out.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)


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
    signals: list[int] = []
    loop = asyncio.get_running_loop()

    def on_signal(sig: int) -> None:
        signals.append(sig)
        if len(signals) > 1:
            printer.write("\naborting now")
            orchestrator.abort(now=True)
            return
        if sig == signal.SIGINT:
            printer.write("\nstopping after the request in flight (Ctrl-C again to abort now)")
        else:
            printer.write(f"\n{signal.Signals(sig).name}: stopping after the request in flight "
                          f"(at most {SIGNAL_GRACE_S:g} s more), then tearing everything down")
            loop.call_later(SIGNAL_GRACE_S, orchestrator.abort, True)
        orchestrator.abort(now=False)

    handled = [sig for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
               if sig == signal.SIGTERM or signal.getsignal(sig) is not signal.SIG_IGN]  # nohup stays nohup
    for sig in handled:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        try:
            outcome = await orchestrator.run()
        finally:
            run_dir.close()
        if outcome.failure == "preflight":
            return EXIT_INVALID
        printer.write("")
        try:
            printer.write(printer.summary(plan.to_json(), run_dir.read_measurements(), run_dir.read_events()))
        except StoreError as exc:
            printer.write(f"no summary: {exc}")
        printer.write(f"\nrun directory: {run_dir.path}")
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
    if outcome.failure == "gpu_release":
        return EXIT_GPU_HELD
    if outcome.state == "failed":
        return EXIT_STORE if outcome.failure == "store" else EXIT_INVALID
    if outcome.state == "aborted":
        return EXIT_HANGUP if signals and signals[0] == signal.SIGHUP else EXIT_INTERRUPTED
    if any(state in (ConfigState.CRASHED, ConfigState.FAILED) for state in outcome.states.values()):
        return EXIT_CONFIG_FAILED
    return EXIT_OK
