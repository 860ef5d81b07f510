"""``specbench run --headless`` (also chosen when there is no TTY): the sweep as plain lines, then a summary.

One line per event that matters (launches, readiness, crashes with their excerpt, workload summaries,
failed or empty requests, notices, the end of each configuration) and a summary table at the end. No
colour, no cursor movement: the output is meant for logs, ``tee`` and CI.

The summary table and the exit codes are :mod:`specbench_tui.engine.ending`'s, shared with the TUI.

Signals: Ctrl-C (SIGINT) once finishes the request in flight, tears the servers down and stops cleanly
(resume later); a second one aborts at once (the request in flight is cancelled and not recorded; servers
are killed). SIGTERM (systemd, Docker, ``kill``) and SIGHUP (the SSH session or terminal went away) ask for
the same clean stop, but nobody is there to press Ctrl-C again, so after
:data:`~specbench_tui.application.host.SIGNAL_GRACE_S` seconds the
request in flight is abandoned and everything is torn down at once: abort-now cuts a server's
``shutdown_grace_s`` wait short and SIGKILLs its whole tree, so the servers are gone within about
``SIGNAL_GRACE_S`` + 0.5 s of the signal. A signal ignored when the program started
(``nohup`` ignores SIGHUP) stays ignored. After SIGHUP the output may have nowhere to go; lines that
cannot be written are dropped, never fatal. The run, its orchestrator, these signals and the ending come from
:mod:`specbench_tui.application.host`, as for the engine process and the TUI.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import ClassVar, TextIO

from specbench_tui.core.acceptance import client_definition
from specbench_tui.core.engines import simulator
from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    CrashDetected,
    Event,
    MeasurementRecorded,
    NodeFingerprinted,
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
from specbench_tui.core.ledger import Ledger
from specbench_tui.core.nodes import describe_gpus
from specbench_tui.core.plan import Plan
from specbench_tui.core.records import ERROR_KIND_CRASH, STATUS_OK
from specbench_tui.core.results import CellRow
from specbench_tui.engine.ending import EXIT_INTERRUPTED
from specbench_tui.application.host import Ending, OwnedRun, StopSignals, live_signals
from specbench_tui.application.session import RunRequest
from specbench_tui.rundir.store import StoreError

SIMULATED_LINE = ("hardware: SIMULATED (the SGLang simulator on a scripted GPU box): the figures are the "
                  "simulator's, not any GPU's")
"""Said once at the start of a simulator sweep (its GPU names and driver are the fake box's inventions)."""

class Printer:
    """Turns events into plain lines; every figure it prints comes from its :class:`Ledger`'s analysis."""

    def __init__(self, plan: Plan, out: TextIO = sys.stdout, ledger: Ledger | None = None) -> None:
        self.plan = plan
        self.out = out
        self.names = {c.id: c.name for c in plan.configs}
        self.started = time.monotonic()
        self.ledger = ledger if ledger is not None else Ledger(plan_json=plan.to_json())
        """The run's results: the run directory's (on resume) kept current by the events printed."""
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

    def __call__(self, event: Event) -> None:
        self.ledger.apply(event)
        name = self.names.get(getattr(event, "config_id", ""), "")
        for kind, say in self._SAYS:
            if isinstance(event, kind):
                say(self, name, event)
                return

    def _started(self, _: str, event: SweepStarted) -> None:
        self._say(f"sweep {event.sweep}: {event.total_configs} configurations"
                  f"{' (resumed)' if event.resumed else ''} -> {event.run_dir}")
        if simulator.simulated(self.plan.sweep.engine):
            self._say(SIMULATED_LINE)

    def _launching(self, name: str, event: ServerLaunching) -> None:
        attempt = f" attempt {event.attempt}" if event.attempt > 1 else ""
        where = f"GPU {','.join(map(str, event.gpus))}" if event.gpus else "CPU (no GPU)"
        where += f" of node {event.node}" if event.node else ""
        self._say(f"{name}: launching{attempt} on {where}, port {event.port} (pid {event.pid})")

    def _fingerprinted(self, _: str, event: NodeFingerprinted) -> None:
        self._say(f"node {event.node}: {describe_gpus(event.fingerprint)}")

    def _ready(self, name: str, event: ServerReady) -> None:
        context = f", context {event.context_length}" if event.context_length else ""
        self._say(f"{name}: ready in {event.startup_s:.1f} s{context}")

    def _crash(self, name: str, event: CrashDetected) -> None:
        self._say(f"{name}: CRASH {event.signature} (log line {event.log_line_number}): {event.shown_cause[:200]}")
        self.write("\n".join(f"    | {line[:300]}" for line in event.excerpt))

    def _workload_not_run(self, _: str, event: WorkloadNotRun) -> None:
        self.not_run[event.config_id].append(event.workload)

    def _stopped(self, name: str, event: ServerStopped) -> None:
        if event.leftover_pids:
            self._say(f"{name}: server stopped, but pids {list(event.leftover_pids)} survived")

    def _finished(self, _: str, event: ConfigFinished) -> None:
        self._not_run(event)
        if event.state == ConfigState.SKIPPED and event.reason and not self._started_server(event.config_id):
            self._say(f"{event.name}: skipped ({event.reason})")
        else:
            extra = f" [{event.signature}]" if event.signature else ""
            self._say(f"{event.name}: {event.state.value.upper()}{extra}"
                      f"{f' - {event.reason}' if event.reason else ''}")

    def _notice(self, _: str, event: Notice) -> None:
        self._say(f"{event.level}: {event.text}")

    def _queue(self, _: str, event: Event) -> None:
        self._say("queue paused" if isinstance(event, QueuePaused) else "queue resumed")

    def _sweep_finished(self, _: str, event: SweepFinished) -> None:
        self._say(f"sweep {event.state}{f': {event.reason}' if event.reason else ''}")

    _SAYS: ClassVar[tuple[tuple[type[Event] | tuple[type[Event], ...], Callable[..., None]], ...]] = (
        (SweepStarted, _started), (ServerLaunching, _launching), (NodeFingerprinted, _fingerprinted),
        (ServerReady, _ready), (CrashDetected, _crash),
        (MeasurementRecorded, lambda self, name, event: self._measurement(name, event)),
        (WorkloadFinished, lambda self, name, event: self._workload(name, event)),
        (WorkloadNotRun, _workload_not_run), (ServerStopped, _stopped), (ConfigFinished, _finished),
        (Notice, _notice), ((QueuePaused, QueueResumed), _queue), (SweepFinished, _sweep_finished),
    )
    """What each kind of event prints (the first kind it is an instance of)."""

    def _started_server(self, config_id: str) -> bool:
        return any(isinstance(e, ServerReady) and e.config_id == config_id for e in self.ledger.events)

    def _not_run(self, event: ConfigFinished) -> None:
        """The workloads a finished configuration did not measure: cut short (with how far) or not run."""
        workloads = self.not_run.pop(event.config_id, [])
        if not workloads:
            return
        analysis = self.ledger.analyse()
        cut, never = [], []
        for workload in workloads:
            row = analysis.row(event.config_id, workload)
            if row is not None and row.measured:
                cut.append(f"{workload} {row.coverage_text() or 'partial'}")
            else:
                never.append(workload)
        if cut:
            self._say(f"{event.name}: cut short: {', '.join(cut)}")
        if never:
            self._say(f"{event.name}: not run: {', '.join(never)}")

    def _measurement(self, name: str, event: MeasurementRecorded) -> None:
        record = event.measurement
        if record is None:
            return
        if record.status != STATUS_OK:
            cut = " (in flight when the server died)" if record.error_kind == ERROR_KIND_CRASH else ""
            self._say(f"{name}: {record.workload}/{record.item}#{record.repeat}: {record.status.upper()}{cut}"
                      f" - {record.error or ''}")
        elif record.clamped:
            self._say(f"{name}: {record.workload}/{record.item}: prompt clamped to {record.prompt_tokens} tokens "
                      f"(asked {record.requested_prompt_tokens})")

    def _workload(self, name: str, event: WorkloadFinished) -> None:
        row = self.ledger.analyse().row(event.config_id, event.workload)
        parts = [f"{event.measured} requests", *self._figures(row)]
        server = _server_log_part(event.server_log or {})
        if server:
            parts.append(server)
        if event.errors:
            parts.append(f"{event.errors} errors")
        if event.zero_output:
            parts.append(f"{event.zero_output} zero-output")
        self._say(f"{name}: {event.workload}: " + ", ".join(parts))

    def _figures(self, row: CellRow | None) -> list[str]:
        """The workload's median tok/s, speedup, TTFT and acceptance, those it has."""
        if row is None:
            return []
        parts = []
        if row.decode_tps:
            parts.append(f"{row.decode_tps.median:.1f} tok/s")
        if row.speedup is not None and row.speedup_note != "baseline":
            parts.append(f"{row.speedup.median:.2f}x")
        if row.ttft_s:
            parts.append(f"TTFT {row.ttft_s.median * 1000:.0f} ms")
        if row.accept_length is not None:
            parts.append(f"{client_definition(self.plan.sweep.engine.profile).name} {row.accept_length:.2f}")
        return parts


def _server_log_part(log: Mapping[str, object]) -> str | None:
    """What the server said of the workload: its log's throughput and acceptance, or its counters' acceptance."""
    if log.get("lines") and log.get("source") != "metrics":
        server = f"server log: {log['gen_throughput']:.1f} tok/s" if log.get("gen_throughput") else "server log:"
        if log.get("accept_length") is not None:
            server += f", acceptance length {log['accept_length']:.2f}"
        return server
    if log.get("source") == "metrics" and log.get("accept_length") is not None:
        drafted = log.get("draft_tokens") or 0
        return (f"server counters: acceptance length {log['accept_length']:.2f} per drafting step, "
                + (f"{log.get('accepted_tokens', 0)} of {drafted} drafted tokens accepted" if drafted
                   else "nothing drafted"))
    return None


def _silence(out: TextIO) -> None:
    """Point a dead output's file descriptor at /dev/null, so later writes and the final flush succeed."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = out.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)


# ------------------------------------------------------------------------------------------------ entry point


def run_headless(request: RunRequest, out: TextIO = sys.stdout) -> int:
    """Run (or resume) a sweep without a UI; returns the exit code documented in this module."""
    owned = OwnedRun.prepare(request)
    if isinstance(owned, int):
        return owned
    try:
        return asyncio.run(_run(owned, out))
    except KeyboardInterrupt:
        # A Ctrl-C outside the sweep's own handlers: the second of two racing the sweep's end, after the handlers
        # were let go. The sweep is over and torn down; the program ends as stopped on request, not killed by
        # the signal (Python would re-raise SIGINT at exit: status -2, no exit code a script can read).
        return EXIT_INTERRUPTED


def record_end(owned: OwnedRun, ending: Ending) -> Ending:
    """How the run ended, in its metadata as a detached engine writes it (``ended``, ``exit_code``, ``state``,
    ``ending``, ``failure``): ``attach``, ``serve``, ``stop`` and ``ps`` then read an ended sweep, not a crashed
    engine (issue 46, point 3)."""
    outcome = ending.outcome
    with contextlib.suppress(Exception):  # the run is over either way; a metadata write must not hide its end
        owned.run_dir.update_meta(exit_code=int(ending.code), ended=time.time(), state=outcome.state,
                                  ending=ending.line, failure=outcome.failure)
    return ending


async def _run(owned: OwnedRun, out: TextIO) -> int:
    orchestrator = owned.orchestrator()
    plan_json = owned.plan.to_json()  # once: a plan of 10,000 points takes a while to write out
    ledger = None
    if owned.resumed:  # the earlier runs' results, so every figure printed is over the whole run
        try:
            ledger = Ledger.from_run(plan_json, owned.run_dir.read_measurements(), owned.run_dir.read_events())
        except StoreError:
            pass
    if ledger is None:
        ledger = Ledger(plan_json=plan_json)
    printer = Printer(owned.plan, out, ledger)
    orchestrator.subscribe(printer)
    signals = live_signals(signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    with StopSignals(orchestrator, lambda text: printer.write(f"\n{text}"), signals, interactive=True) as stop:
        try:
            outcome = await owned.run(orchestrator)
        finally:
            owned.release()
        if outcome.failure == "preflight":
            return record_end(owned, owned.end(outcome)).code
        printer.write("")
        # aborted only by those signals
        ending = record_end(owned, owned.end(outcome, hangup=stop.hung_up, plan_json=plan_json))
        if ending.table is not None:
            printer.write(ending.table)
            if ending.left_out_line:
                printer.write(ending.left_out_line)
        else:
            printer.write(f"no summary: {ending.problem}")
        printer.write(f"\nrun directory: {owned.run_dir.path}")
    return ending.code
