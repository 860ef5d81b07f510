"""The run host: a :class:`~specbench_tui.application.session.RunRequest` turned into an owned run, its
orchestrator, its stop signals and its ending, in one place for the three hosts of a sweep.

The hosts are the headless printer (:mod:`~specbench_tui.application.headless`), the engine process
(:mod:`~specbench_tui.application.daemon`) and the TUI's engine thread (:mod:`~specbench_tui.application.runner`).
Each asks this module for the same things, in this order:

1. :meth:`OwnedRun.prepare`: the plan and the run directory (new, or resumed), its lock held, or exit code 2
   after saying why.
2. :meth:`OwnedRun.orchestrator`: the only place the package constructs an
   :class:`~specbench_tui.engine.orchestrator.Orchestrator` (the GPU backend, the API key from the environment
   variable the sweep names, resume, retry and port options).
3. :class:`StopSignals` (the processes that own their terminal or none; the TUI reads Ctrl-C as a key): the
   first signal stops after the request in flight, a second one at once. SIGTERM and SIGHUP leave nobody to send
   a second one, so after :data:`SIGNAL_GRACE_S` the request in flight is abandoned and every server tree is
   torn down.
4. :meth:`OwnedRun.run`, :meth:`OwnedRun.release` and :meth:`OwnedRun.end`: the sweep run to its end with the run
   directory closed after it, the lock given up, then the :class:`Ending`: analysis, summary table and exit code.

The request is serialisable (:meth:`~specbench_tui.application.session.RunRequest.to_json`), so the engine process
gets it as JSON and the application layer never sees the command line's parser.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING

from specbench_tui.application.session import RunRequest, give_up_ownership, make_backend, prepare_run
from specbench_tui.core.engines import simulator
from specbench_tui.core.plan import Plan
from specbench_tui.engine.ending import ExitCode, ending_line, exit_code, render_summary, run_analysis
from specbench_tui.rundir.store import RunDir, StoreError

if TYPE_CHECKING:
    from specbench_tui.core.results import RunAnalysis
    from specbench_tui.engine.orchestrator import Orchestrator, SweepOutcome

SIGNAL_GRACE_S = 1.0
"""After SIGTERM or SIGHUP, how long the request in flight may take to finish before it is abandoned and every
server tree is SIGKILLed (whatever ``engine.shutdown_grace_s`` says: a stop signal leaves no time to wait)."""

SUMMARY_EXCLUDED = 20
"""Configurations the sweep excludes that the end-of-run table lists (the rest are counted in one line, as the
run's start says them: an all-excluded sweep of 10,000 points is not a table of 10,000 rows)."""


def summary_plan(plan_json: dict[str, object]) -> tuple[dict[str, object], int]:
    """The plan the end-of-run table is made of: every configuration but those the sweep excludes past the first
    :data:`SUMMARY_EXCLUDED` (they never run, have no result and no bearing on the exit code), and how many are
    left out."""
    configs = plan_json.get("configs")
    if not isinstance(configs, list):
        return plan_json, 0
    kept: list[object] = []
    excluded = 0
    for config in configs:
        if isinstance(config, dict) and config.get("skip_reason") is not None:
            excluded += 1
            if excluded > SUMMARY_EXCLUDED:
                continue
        kept.append(config)
    left_out = len(configs) - len(kept)
    return ({**plan_json, "configs": kept} if left_out else plan_json), left_out


@dataclass(frozen=True)
class Ending:
    """How a hosted sweep ended: what every host says and returns once :meth:`OwnedRun.run` is over."""

    outcome: SweepOutcome
    code: ExitCode
    """The process's exit code (:mod:`specbench_tui.engine.ending`)."""
    analysis: RunAnalysis | None = None
    """The run directory's analysis; None after a failed pre-flight or when the directory could not be read."""
    table: str | None = None
    """The end-of-run table (:func:`~specbench_tui.engine.ending.render_summary`), when there is an analysis."""
    left_out: int = 0
    """Configurations the sweep excludes that the table leaves out (:func:`summary_plan`)."""
    problem: str | None = None
    """Why there is no table although the sweep ran (the run directory's error, naming the file)."""

    @property
    def preflight_failed(self) -> bool:
        """Nothing was launched: the pre-flight's reasons are the whole story (no table, no count)."""
        return self.outcome.failure == "preflight"

    @property
    def line(self) -> str:
        """One line saying how the sweep ended and what to do next."""
        return ending_line(self.outcome, self.analysis)

    @property
    def left_out_line(self) -> str | None:
        """The line under the table that counts the excluded configurations it leaves out."""
        if not self.left_out:
            return None
        return (f"{self.left_out:,} more configurations excluded by the sweep are not in the table "
                "(specbench validate lists each with its reason)")


@dataclass
class OwnedRun:
    """A run directory this process owns (its lock held) and the plan it runs."""

    plan: Plan
    run_dir: RunDir
    resumed: bool = False
    retry_crashed: bool = False
    port_base: int | None = None
    notify_urls: tuple[str, ...] = ()
    """``--notify`` URLs, beside the sweep's ``[notify] urls`` (as typed: ``${NAME}`` expanded when sending)."""
    metrics_port: int | None = None
    """``--metrics-port``: serve Prometheus metrics there (overrides the sweep's ``[metrics] port``)."""
    otlp_endpoint: str | None = None
    """``--otlp-endpoint``: push the same metrics over OTLP there (overrides ``[metrics] otlp_endpoint``)."""

    @classmethod
    def prepare(cls, request: RunRequest) -> OwnedRun | int:
        """The run ``request`` asks for, owned; or exit code 2 after saying why on standard error."""
        prepared = prepare_run(request)
        if isinstance(prepared, int):
            return prepared
        plan, run_dir = prepared
        return cls(plan, run_dir, resumed=request.resume is not None, retry_crashed=request.retry_crashed,
                   port_base=request.port_base, notify_urls=request.notify, metrics_port=request.metrics_port,
                   otlp_endpoint=request.otlp_endpoint)

    def orchestrator(self) -> Orchestrator:
        """The sweep's orchestrator: the one place the package makes one."""
        from specbench_tui.engine.orchestrator import Orchestrator  # the runtime's imports once the run is owned

        api_key_env = self.plan.sweep.engine.api_key_env
        return Orchestrator(self.plan, self.run_dir, backend=make_backend(self.plan), resumed=self.resumed,
                            retry_crashed=self.retry_crashed,
                            api_key=os.environ.get(api_key_env) if api_key_env else None, port_base=self.port_base)

    async def run(self, orchestrator: Orchestrator) -> SweepOutcome:
        """Run the sweep to its end; the run directory is closed after it, whatever happened. The sweep's
        notification URLs are sent to from a thread of their own meanwhile (:mod:`specbench_tui.engine.notify`);
        after the sweep the last alerts get at most :data:`~specbench_tui.engine.notify.CLOSE_WAIT_S`."""
        from specbench_tui.engine.metrics_server import open_metrics
        from specbench_tui.engine.notify import open_notifications

        sender = open_notifications(self.plan.sweep.notify, self.notify_urls, orchestrator.publish,
                                    orchestrator.subscribe, self.plan.sweep.name)
        metrics = self.plan.sweep.metrics
        exporter = open_metrics(self.plan.to_json(), self.metrics_port or metrics.port, metrics.host,
                                orchestrator.publish, orchestrator.subscribe,
                                otlp_endpoint=self.otlp_endpoint or metrics.otlp_endpoint, sweep=self.plan.sweep.name)
        await self.measure_idle(orchestrator)
        try:
            return await orchestrator.run()
        finally:
            if sender is not None:
                await asyncio.to_thread(sender.close)
            if exporter is not None:
                await asyncio.to_thread(exporter.close)  # an OTLP export sends its last figures (seconds at most)
            self.run_dir.close()

    async def measure_idle(self, orchestrator: Orchestrator) -> None:
        """The GPUs' idle power before anything launches, where they have an energy counter (not on a resume, whose
        earlier windows were gross, nor on a cluster); the energy figures are then net of it, as a notice says."""
        from specbench_tui.core.events import Notice
        from specbench_tui.engine.gpus.energy import idle_line, measure_idle_w

        machine = orchestrator.machine
        if self.resumed or self.plan.sweep.cluster.on_ray:
            return
        machine.idle_w = await asyncio.to_thread(measure_idle_w, machine.backend, machine.gpu_indices())
        if machine.idle_w:
            orchestrator.publish(Notice(level="info", text=idle_line(machine.idle_w)))

    def release(self) -> None:
        """Give up the run directory's lock (a resume may take it from here)."""
        give_up_ownership(self.run_dir)

    def analysis(self, plan_json: dict[str, object] | None = None) -> RunAnalysis:
        """The run directory's ledger analysed over ``plan_json`` (default: the whole plan); raises
        :class:`~specbench_tui.rundir.store.StoreError` or OSError when the directory cannot be read."""
        return run_analysis(self.plan.to_json() if plan_json is None else plan_json,
                            self.run_dir.read_measurements(), self.run_dir.read_events())

    def end(self, outcome: SweepOutcome, *, hangup: bool = False, plan_json: dict[str, object] | None = None) -> Ending:
        """The :class:`Ending` of ``outcome``: the analysis and table over the run directory (its excluded
        configurations past :data:`SUMMARY_EXCLUDED` left out) and the exit code (``hangup``: stopped by SIGHUP)."""
        if outcome.failure == "preflight":
            return Ending(outcome, exit_code(outcome))
        summarised, left_out = summary_plan(self.plan.to_json() if plan_json is None else plan_json)
        try:
            analysis = self.analysis(summarised)
        except (StoreError, OSError) as exc:
            return Ending(outcome, exit_code(outcome, hangup=hangup), left_out=left_out, problem=str(exc))
        table = render_summary(analysis, simulated=simulator.simulated(self.plan.sweep.engine))
        return Ending(outcome, exit_code(outcome, hangup=hangup, analysis=analysis), analysis=analysis, table=table,
                      left_out=left_out)


def live_signals(*signals: signal.Signals) -> tuple[signal.Signals, ...]:
    """Of ``signals``, those the process did not start with ignored (``nohup`` stays nohup), SIGTERM always."""
    return tuple(sig for sig in signals if sig == signal.SIGTERM or signal.getsignal(sig) is not signal.SIG_IGN)


class StopSignals:
    """Stop signals on the running loop turned into the orchestrator's stops, for the ``with`` block's length.

    The first signal stops the sweep after the request in flight. With ``interactive`` a SIGINT is a person at the
    terminal who can press Ctrl-C again for an abort now; any other signal (and every SIGINT without
    ``interactive``) also gets an abort now after ``grace_s``. A second signal aborts at once. ``say`` gets one
    line per signal, for the host's own output."""

    def __init__(self, orchestrator: Orchestrator, say: Callable[[str], None], signals: Iterable[signal.Signals],
                 *, interactive: bool, grace_s: float = SIGNAL_GRACE_S) -> None:
        self.orchestrator = orchestrator
        self.say = say
        self.signals = tuple(signals)
        self.interactive = interactive
        self.grace_s = grace_s
        self.received: list[int] = []
        """The signals received, in order."""
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def hung_up(self) -> bool:
        """The first signal was SIGHUP: the terminal went away (exit code 129)."""
        return bool(self.received) and self.received[0] == signal.SIGHUP

    def __enter__(self) -> StopSignals:
        self._loop = asyncio.get_running_loop()
        for sig in self.signals:
            self._loop.add_signal_handler(sig, self._on_signal, sig)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self._loop is not None and not self._loop.is_closed():
            for sig in self.signals:
                self._loop.remove_signal_handler(sig)
        self._loop = None

    def _on_signal(self, sig: int) -> None:
        self.received.append(sig)
        if len(self.received) > 1:
            self.say("aborting now")
            self.orchestrator.abort(now=True)
            return
        if self.interactive and sig == signal.SIGINT:
            self.say("stopping after the request in flight (Ctrl-C again to abort now)")
        else:
            self.say(f"{signal.Signals(sig).name}: stopping after the request in flight "
                     f"(at most {self.grace_s:g} s more), then tearing everything down")
            if self._loop is not None:
                self._loop.call_later(self.grace_s, self.orchestrator.abort, True)
        self.orchestrator.abort(now=False)
