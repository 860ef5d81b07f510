"""One launch of one configuration on this machine, from a started server to its verdict.

Readiness, then the workloads with a health check between them; every request runs under a guard that
cancels it at once when the server dies (crash signature, exit), stalls (no progress for
``engine.stall_timeout_s``), is skipped, or the sweep aborts now. What it learns goes to the job's sink
(:class:`~specbench_tui.engine.executor.JobSink`); what it is told comes from its
:class:`~specbench_tui.engine.executor.JobControl`.

State rules: *crashed* means the server died after it was launched with a crash signature in its log, or
died while serving; *failed* means it never became ready (exit before ready, start-up timeout, unusable
launch), stalled, or stopped answering its health check. Either way the remaining workloads are published as
:class:`WorkloadNotRun`, never as measurements. The server's own figures: per workload,
:attr:`WorkloadFinished.server_log` (mean ``accept len`` and ``gen throughput`` of the ``Decode batch`` lines
logged during the measured requests); per configuration, the mean over all of them (the outcome's
``server_log_accept_length``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from specbench_tui.core.events import (
    ConfigState,
    Notice,
    ServerReady,
    WorkloadFinished,
    WorkloadNotRun,
    WorkloadStarted,
)
from specbench_tui.core.logparse import STEPS, BatchLine, adaptive_figures, summarize_decode
from specbench_tui.core.measuring_host import starved
from specbench_tui.core.outcomes import DEATH_CRASH, DEATH_STALL, DEATH_UNHEALTHY
from specbench_tui.core.records import (
    CACHE_COLD,
    CACHE_WARM,
    ERROR_KIND_CRASH,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_ZERO_OUTPUT,
    Measurement,
    MeasurementKey,
)
from specbench_tui.engine.client import ServerClient
from specbench_tui.engine.executor import Job, JobControl, JobSink, StopJob
from specbench_tui.engine.gpus import GpuSummary
from specbench_tui.engine.gpus.energy import EnergyMeter
from specbench_tui.engine.gpus.faults import XID_POLL_S
from specbench_tui.engine.host_meter import HostMeter
from specbench_tui.engine.loadsweep import run_load_workload
from specbench_tui.engine.machine import Machine
from specbench_tui.core.engines.base import EngineProfile
from specbench_tui.engine.server import Death, ServerProcess, first_of, process_tree
from specbench_tui.engine.server_figures import ServerFigures, read_server_figures
from specbench_tui.engine.workloads import Labels, Session, Workload, WorkloadError

if TYPE_CHECKING:
    from specbench_tui.core.sweep.schema import EngineSpec, WorkloadSpec

T = TypeVar("T")
FLUSH_DEADLINE_S = 10.0
"""The longest a cold-cache flush is retried while the server refuses it (SGLang: while requests still leave)."""
Verdict = tuple[ConfigState, "str | None"]


class ServerGone(Exception):
    """The server died (or was skipped/aborted) while we waited on it."""

    def __init__(self, death: Death | None) -> None:
        super().__init__(death.reason if death else "interrupted")
        self.death = death


def expected_keys(config_id: str, workload: Workload) -> list[MeasurementKey]:
    """Every measurement key a workload produces for one configuration, in run order."""
    return [(config_id, workload.spec.name, item, repeat)
            for repeat in range(1, workload.spec.repeats + 1) for item in workload.items()]


class Attempt:
    """One configuration's server on this machine while it is up, and the guard around its requests."""

    def __init__(self, job: Job, sink: JobSink, control: JobControl, machine: Machine, profile: EngineProfile,
                 engine: EngineSpec, *, sweep_reserved: int = 0) -> None:
        self.job = job
        self.config = job.config
        self.gpus = job.placement.gpus
        self.sink = sink
        self.control = control
        self.machine = machine
        self.profile = profile
        self.engine = engine
        self.sweep_reserved = sweep_reserved
        """The most context any configuration's server reserves for speculative decoding: long prompts are sized
        with it for every configuration, so each one is sent the same prompt and the speedups stay paired."""
        self.server: ServerProcess | None = None
        self.stats: list[BatchLine] | None = None
        self.all_stats: list[BatchLine] = []
        self.last_progress = time.monotonic()
        self.in_flight = False
        self.xid: str | None = None
        """The cause an Xid on one of its GPUs gave the server's end (:mod:`specbench_tui.engine.gpus.faults`)."""
        self.gpu_summary: GpuSummary | None = None
        """The GPUs over the measured window (from ready to the end of the last workload)."""
        self.gpu_pids_before: frozenset[int] = frozenset()
        """Pids NVML listed on these GPUs before the server was launched (normally none)."""
        self.running_cap: int | None = None
        """The server's running-request cap, read from its info endpoint once it is ready (None: not said)."""
        self.adaptive = profile.adaptive_flag is not None and profile.adaptive_flag in self.config.argv
        """The server changes its speculative steps with the batch (SGLang's ``--speculative-adaptive``)."""
        self._flush_refused = False
        """A flush of this server failed: it is not asked again (the rest is measured warm)."""
        self.current_steps: int | None = None
        """An adaptive server's speculative steps now, from its log (None: not said)."""
        self._window_steps: int | None = None
        self.gpu_pids: set[int] = set()
        """Pids NVML listed on these GPUs while the server was up that were not there before: the server's, in
        whatever pid namespace NVML reports (a container's NVML gives the host's pids, which match none of ours)."""

    @property
    def aborting(self) -> bool:
        return self.control.stop_soon.is_set()

    @property
    def skipped(self) -> bool:
        return self.control.skip.is_set()

    def publish_notice(self, level: str, text: str) -> None:
        self.sink.publish(Notice(level=level, text=text, config_id=self.config.id))

    # -- readiness -------------------------------------------------------------------------------------

    async def serve(self, server: ServerProcess, client: ServerClient) -> tuple[Verdict, bool]:
        """Readiness, then the workloads: the final state and reason, and whether it died before ready."""
        ready = asyncio.ensure_future(server.wait_ready(client, self.engine.startup_timeout_s))
        try:
            death = await self.guard(ready, watch_stall=False)
        except ServerGone as gone:
            return self.interrupted(gone), True
        if death is None:
            return await self.serve_ready(server, client), False
        state = ConfigState.CRASHED if death.kind == DEATH_CRASH else ConfigState.FAILED
        return (state, death.reason), True

    async def serve_ready(self, server: ServerProcess, client: ServerClient) -> Verdict:
        """The server is ready: record it, then run the workloads."""
        config = self.config
        startup_s = time.monotonic() - server.started_at
        figures = await read_server_figures(client, self.profile)
        for level, text in figures.notices:
            self.publish_notice(level, f"{config.name}: {text}")
        context_length = figures.context_length
        ceiling = self.note_caps(figures)
        self.note_adaptive(self.profile.served_adaptive(figures.info))
        self.sink.publish(ServerReady(config_id=config.id, startup_s=round(startup_s, 3),
                                      context_length=context_length, running_cap=self.running_cap,
                                      graph_ceiling=ceiling))
        self.note_policy()
        too_long = next((w.spec for w in self.job.workloads
                         if context_length and w.spec.max_new_tokens >= context_length), None)
        if too_long is not None:  # refused before any request is sent: the server would answer each with a 400
            why = (f"workload '{too_long.name}' asks for max_new_tokens = {too_long.max_new_tokens:,}, but the "
                   f"server's context length is {context_length:,}: lower max_new_tokens (or raise the context)")
            self.publish_notice("error", f"{config.name}: {why}")
            self.not_run(0, why)
            return ConfigState.FAILED, why
        self.sink.state(ConfigState.RUNNING)
        if server.pid is not None:  # the ranks' children exist now: name them in the GPU panel too
            for pid in await asyncio.to_thread(process_tree, server.pid):
                self.machine.owners.setdefault(pid, config.name)
        await self.note_gpu_pids()  # the model is loaded: its CUDA contexts are listed
        if self.machine.sampler is not None:
            self.machine.sampler.open_window(config.id, self.gpus)
        session = Session(client, self.progress, context_length, self.publish_notice,
                          reserved_tokens=max(figures.reserved_tokens, self.sweep_reserved),
                          max_req_input_len=figures.input_limit)
        for index, workload in enumerate(self.job.workloads):
            keys = self.sink.todo(workload)
            if not keys:
                continue
            try:
                if index > 0 and not await self.healthy(client):
                    server.mark_dead(Death(DEATH_UNHEALTHY, "the server stopped answering its health check"))
                    raise ServerGone(server.death.result())
                labels = Labels(config.id, config.name, workload.spec.name)
                if workload.spec.load is not None:
                    await run_load_workload(self, workload, session, labels)
                else:
                    await self.run_workload(workload, session, labels, keys)
            except ServerGone as gone:
                return await self.gone(gone, index)
            if self.aborting:
                return ConfigState.PENDING, "aborted: resume runs the rest"
        if self.skipped:
            return ConfigState.SKIPPED, "skipped by the user"
        return ConfigState.DONE, None

    def note_caps(self, figures: ServerFigures) -> int | None:
        """Keep the server's running-request cap (and return its CUDA-graph ceiling), read from its info endpoint,
        and say them: every measurement carries the cap, so a load point above it reads as capped in every view."""
        self.running_cap = figures.running_cap
        ceiling = figures.graph_ceiling
        no_graphs = ceiling is None and self.profile.graphs_captured(figures.info) is False
        if self.running_cap is None and ceiling is None and not no_graphs:
            return None
        parts = []
        if self.running_cap is not None:
            parts.append(f"runs at most {self.running_cap:,} requests at once (max_running_requests)")
        if ceiling is not None:
            parts.append(f"CUDA graphs up to batch {ceiling:,}")
        elif no_graphs:
            parts.append("no CUDA graphs captured (decode_cuda_graph_bs is empty)")
        self.publish_notice("info", f"{self.config.name}: the server " + "; ".join(parts))
        return ceiling

    def note_adaptive(self, served: bool | None) -> None:
        """What the server says of adaptive speculation wins over the command line: SGLang switches
        ``--speculative-adaptive`` off for NGRAM, DFLASH, topk > 1, attention DP and multi-layer EAGLE."""
        if served is None or served == self.adaptive:
            return
        if not served:
            self.publish_notice("warning", f"{self.config.name}: the server runs without adaptive speculation "
                                "(its /server_info says speculative_adaptive: false; SGLang switched the flag off, "
                                "see its 'speculative_adaptive disabled' warning): no step tiers are reported")
        self.adaptive = served

    def note_policy(self) -> None:
        """Say the cache policy the workloads run under (every view states it; the log panel too)."""
        policies = sorted({w.spec.cache for w in self.job.workloads})
        if not policies:
            return
        text = {CACHE_COLD: "cold: the server is flushed before every measured request and load point",
                "warm": "warm: the server keeps its caches between requests (a repeat may meet its own prefix)"}
        self.publish_notice("info", f"{self.config.name}: caches " + "; ".join(text.get(p, p) for p in policies))
        caveat = self.profile.flush_caveat(self.config.argv) if CACHE_COLD in policies else None
        if caveat is not None:
            self.publish_notice("warning", f"{self.config.name}: {caveat}")

    async def start_measurement(self, session: Session, spec: WorkloadSpec) -> bool:
        """Under ``cache = "cold"``, flush the server's caches now and say whether it did; under ``warm``, False at
        once. A refused flush is retried for at most :meth:`flush_deadline_s` (well within the stall timeout; the
        retries are no progress); once it failed, this server is not asked again: the rest of the configuration
        is measured warm, and each record says so (:meth:`stamp`)."""
        if spec.cache != CACHE_COLD or self._flush_refused:
            return False
        deadline = self.flush_deadline_s()
        flushed = await self.guard(asyncio.ensure_future(session.client.flush_cache(deadline_s=deadline)))
        if not flushed:
            self._flush_refused = True
            self.publish_notice("warning", f"{self.config.name}: the server did not flush its caches within "
                                f"{deadline:g} s ({session.client.profile.flush_cache_path or 'no flush endpoint'}): "
                                "it is not asked again, and the rest of this configuration is measured warm (each "
                                "record says cache = warm, started_cold = false)")
        return flushed

    def flush_deadline_s(self) -> float:
        """How long one flush may be retried: 10 s, and never more than a third of the stall timeout (so a flush
        that never answers degrades the configuration before the stall watchdog could fail it)."""
        return min(FLUSH_DEADLINE_S, self.engine.stall_timeout_s / 3)

    def stamp(self, measurement: Measurement, spec: WorkloadSpec, cold: bool) -> Measurement:
        """The measurement with the cache policy that held (``warm`` where a cold one could not be had), whether it
        started cold and the server's running cap."""
        cache = CACHE_WARM if spec.cache == CACHE_COLD and not cold else spec.cache
        return replace(measurement, cache=cache, started_cold=cold, running_cap=self.running_cap)

    def server_figures(self, stats: list[BatchLine]) -> dict[str, object]:
        """The server's own figures over a window: its decode summary, retractions, and (adaptive) the steps."""
        summary = summarize_decode(stats)
        figures = summary.to_json()
        if self.adaptive and self.profile.adaptive_steps is not None:
            figures.update(adaptive_figures(stats, self.profile.adaptive_steps, self._window_steps))
        return figures

    def note_retractions(self, what: str, figures: Mapping[str, object]) -> None:
        if figures.get("retract_warnings"):
            self.publish_notice("warning", f"{self.config.name}: {what}: the server retracted "
                                f"{figures.get('retracted_requests', 0)} request(s) in {figures['retract_warnings']} "
                                "warning(s) (KV cache pool is full): they are flagged and kept out of latency "
                                "percentiles")

    async def note_gpu_pids(self) -> None:
        """Remember the pids that appeared on the server's GPUs since its launch, and name them in the GPU
        panel: where NVML shares our pid namespace they are the server's own; in a container they are the
        host's numbers for them, the only ones the release wait can watch."""
        new = await self.machine.pids_on(self.gpus) - self.gpu_pids_before
        self.gpu_pids |= new
        for pid in new:
            self.machine.owners.setdefault(pid, self.config.name)

    # -- verdicts --------------------------------------------------------------------------------------

    def not_run(self, first: int, why: str) -> None:
        """Publish the workloads from index ``first`` that still miss measurements as not run, with why."""
        for workload in self.job.workloads[first:]:
            if self.sink.todo(workload):
                self.sink.publish(WorkloadNotRun(config_id=self.config.id, workload=workload.spec.name, reason=why))

    def interrupted(self, gone: ServerGone) -> Verdict:
        if self.skipped:
            return ConfigState.SKIPPED, "skipped by the user"
        if gone.death is None:
            return ConfigState.PENDING, "aborted: resume runs it again"
        state = ConfigState.CRASHED if gone.death.kind == DEATH_CRASH else ConfigState.FAILED
        return state, gone.death.reason

    async def gone(self, gone: ServerGone, index: int) -> Verdict:
        """The server is gone mid-run: the rest is not run (never measured); say why."""
        state, reason = self.interrupted(gone)
        if state == ConfigState.PENDING:
            return state, reason
        death = gone.death
        if death is not None and death.kind not in (DEATH_CRASH, DEATH_STALL, DEATH_UNHEALTHY):
            state = ConfigState.CRASHED  # it served, then died
        if self.server is not None:
            reason = await final_reason(self.server, reason)
        xid = self.xid or self.machine.faults.take_xid_cause(tuple(self.gpus))
        if xid is not None and state == ConfigState.CRASHED and not (reason or "").startswith(xid):
            reason = f"{xid}; {reason}" if reason else xid  # the GPU's fault first, what the server said after
        why = "skipped by the user" if state == ConfigState.SKIPPED else f"server {state.value}: {reason}"
        self.not_run(index, why)
        return state, reason

    # -- workloads -------------------------------------------------------------------------------------

    async def healthy(self, client: ServerClient) -> bool:
        check = asyncio.ensure_future(client.healthy())
        return await self.guard(check, watch_stall=False)

    async def run_workload(self, workload: Workload, session: Session, labels: Labels,
                           keys: list[MeasurementKey]) -> None:
        config = self.config
        self.sink.publish(WorkloadStarted(config_id=config.id, workload=workload.spec.name,
                                          expected=len(self.sink.expected(workload))))
        try:
            await self.guard(asyncio.ensure_future(workload.prepare(session)))
        except WorkloadError as exc:
            self.publish_notice("error", f"{workload.spec.name}: {exc}")
            for key in keys:
                self.record(Measurement(config_id=config.id, config=config.name, workload=key[1], item=key[2],
                                        repeat=key[3], status=STATUS_ERROR, error=str(exc)))
            return
        self.busy(True)
        try:
            await self.guard(asyncio.ensure_future(workload.warmup(session)))
            counters_before = await self.guard(asyncio.ensure_future(session.counters()))
            self.open_window()
            meter, energy = HostMeter(), self.energy_meter()
            taken: list[Measurement] = []
            counts = {STATUS_OK: 0, STATUS_ERROR: 0, STATUS_ZERO_OUTPUT: 0}
            for key in keys:
                await self.wait_unpaused()
                if self.aborting or self.skipped:
                    break
                cold = await self.start_measurement(session, workload.spec)
                try:
                    measurement = await self.guard(asyncio.ensure_future(
                        workload.run(key[2], key[3], session, labels)))
                    await self.raise_if_died(measurement)
                except ServerGone as gone:
                    self.record_cut(key, gone)
                    raise
                measurement = self.stamp(measurement, workload.spec, cold)
                self.record(measurement)
                taken.append(measurement)
                counts[measurement.status] = counts.get(measurement.status, 0) + 1
        finally:
            self.busy(False)
        host, joules = meter.finish(), energy.finish()
        server_log = self.server_figures(self.take_stats())
        if self.aborting or self.skipped:
            if self.skipped:
                raise ServerGone(None)
            return
        self.note_retractions(workload.spec.name, server_log)
        if counters_before is not None:  # the engine's own counters over the measured requests (llama.cpp)
            counters_after = await self.guard(asyncio.ensure_future(session.counters()))
            accept = server_log["accept_length"]
            server_log.update(session.counter_figures(counters_before, counters_after,
                                                      accept if isinstance(accept, int | float) else None))
        why = starved(taken)
        if why is not None:
            self.publish_notice("warning", f"{config.name} {workload.spec.name}: {why} ({host.describe()})")
        self.sink.publish(WorkloadFinished(config_id=config.id, workload=workload.spec.name,
                                           measured=sum(counts.values()), errors=counts[STATUS_ERROR],
                                           zero_output=counts[STATUS_ZERO_OUTPUT], server_log=server_log,
                                           host=host.to_json(), energy=joules.to_json()))

    def energy_meter(self) -> EnergyMeter:
        """The energy counters of this configuration's GPUs from now (:mod:`specbench_tui.engine.gpus.energy`)."""
        idle = self.machine.idle_w
        idle_w = sum(idle[g] for g in self.gpus) if self.gpus and all(g in idle for g in self.gpus) else None
        return EnergyMeter(self.machine.backend, tuple(self.gpus), idle_w=idle_w)

    def busy(self, busy: bool) -> None:
        """Tell a scripted GPU backend (the simulator's fake box) whether this server's GPUs compute."""
        self.machine.script(lambda box: box.set_busy(self.gpus, busy))

    async def raise_if_died(self, measurement: Measurement) -> None:
        """A request cut by a lost connection (a killed server's stream just ends, without ``[DONE]``), or by the
        stream error an engine sends when its core died (the profile's ``fatal_stream_error``: vLLM's API server
        answers in-flight streams with ``EngineCore encountered an issue`` and exits about 0.5 s later), is the
        server's death, not a measurement, once the process exit is seen."""
        server = self.server
        if measurement.status != STATUS_ERROR or server is None:
            return
        fatal = self.profile.fatal_stream_error
        dying = measurement.error_kind == "connection" or (
            measurement.error_kind == "sse" and fatal is not None and fatal.search(measurement.error or ""))
        if not dying:
            return
        await first_of(server.death, timeout_s=2.0)
        if server.dead:
            raise ServerGone(server.death.result())

    def record_cut(self, key: MeasurementKey, gone: ServerGone) -> None:
        """The request in flight when its server died is on record: an error whose reason is the death (a skip
        or an abort records nothing; resume measures the key again). ``--retry-crashed`` re-runs it."""
        if gone.death is None:
            return
        self.record(Measurement(config_id=self.config.id, config=self.config.name, workload=key[1], item=key[2],
                                repeat=key[3], status=STATUS_ERROR, error_kind=ERROR_KIND_CRASH,
                                error=f"in flight when the server died: {gone.death.reason}"[:500]))

    def record(self, measurement: Measurement) -> None:
        try:
            self.sink.record(measurement)
        except StopJob as exc:
            raise ServerGone(None) from exc

    async def wait_unpaused(self) -> None:
        if self.control.unpaused.is_set():
            return
        assert self.server is not None
        self.busy(False)
        await first_of(self.control.unpaused.wait(), self.control.skip.wait(), self.server.death)
        self.busy(True)

    # -- guarding a request ------------------------------------------------------------------------------

    def progress(self) -> None:
        self.last_progress = time.monotonic()

    def request_sent(self, idle_before: bool) -> None:
        """A request leaves; when none was in flight before it, the stall clock starts now (an idle gap of an
        open-loop schedule is no progress lost). A request sent beside others restarts nothing: a server stuck on
        all of them is stalled however many more arrive."""
        if idle_before:
            self.last_progress = time.monotonic()

    async def guard(self, task: asyncio.Future[T], watch_stall: bool = True,
                    active: Callable[[], int] | None = None) -> T:
        """Await ``task`` unless the server dies, stalls, is skipped or the sweep aborts now; then cancel it
        at once and raise :class:`ServerGone` (with the death, or None for skip/abort). ``active`` counts the
        requests in flight now (an open-loop point waits between its arrivals): only while some are is the stall clock
        running; without it, ``task`` is a request all along."""
        server = self.server
        assert server is not None
        self.last_progress = time.monotonic()
        self.in_flight = True
        watchers = [self.control.skip.wait(), self.control.stop_now.wait(), server.death]
        if watch_stall:
            watchers.append(self.stall_watch(active))
        if self.machine.faults.can_watch():
            watchers.append(self.xid_watch())
        try:
            await first_of(task, *watchers)
        finally:
            self.in_flight = False
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if not task.cancelled():
            return task.result()
        if server.dead:
            raise ServerGone(server.death.result())
        raise ServerGone(None)

    async def stall_watch(self, active: Callable[[], int] | None = None) -> None:
        """Mark the server dead when the requests in flight make no progress for ``stall_timeout_s``. While
        ``active`` says none is in flight, nothing is owed: the clock waits (and restarts when a request is sent,
        :meth:`request_sent`)."""
        limit = self.engine.stall_timeout_s
        server = self.server
        assert server is not None
        while True:
            if active is not None and not active():
                self.last_progress = time.monotonic()
                await asyncio.sleep(min(1.0, limit / 4))
                continue
            idle = time.monotonic() - self.last_progress
            if idle >= limit:
                server.mark_dead(Death(DEATH_STALL, f"stalled: no progress on the requests in flight for "
                                                    f"{idle:.0f} s (stall_timeout_s = {limit:g}) while the server "
                                                    "process is alive"))
                return
            await asyncio.sleep(min(1.0, max(0.05, limit - idle)))

    async def xid_watch(self) -> None:
        """Mark the server crashed, the Xid as its cause, when a GPU it holds reports one."""
        server = self.server
        assert server is not None
        while True:
            cause = self.machine.faults.take_xid_cause(tuple(self.gpus))
            if cause is not None:
                self.xid = cause
                server.mark_dead(Death(DEATH_CRASH, cause))
                return
            await asyncio.sleep(XID_POLL_S)

    def open_window(self) -> None:
        """Measured requests start: keep the server's figures from now on (with the adaptive steps in force)."""
        self.stats = []
        self._window_steps = self.current_steps

    def take_stats(self) -> list[BatchLine]:
        """The server's figures kept since :meth:`open_window`, and the window closed (later lines are not kept)."""
        stats, self.stats = self.stats or [], None
        return stats

    def on_stats(self, stats: BatchLine) -> None:
        """Keep the server's figures logged while measured requests run (warm-up and idle lines are not)."""
        if stats.kind == STEPS:
            self.current_steps = stats.num_token
        if self.stats is not None:
            self.stats.append(stats)
            self.all_stats.append(stats)


async def final_reason(server: ServerProcess, reason: str | None) -> str | None:
    """The crash's final signature and its one cause (after its trailing lines), else ``reason`` as it was."""
    crash = await server.crash_report()
    return f"{crash.signature}: {crash.shown_cause[:300]}" if crash is not None else reason
