"""The orchestrator: one plan into one run directory; the event bus, the resume fold and the control API.

Everything the engine learns is an event, published to every subscriber (the run directory's event record
first, then the TUI or the headless printer), and every measurement is appended to the run's results (its one
record) the moment it exists. The orchestrator implements
:class:`~specbench_tui.engine.control.SweepControl`, in one place (:meth:`Orchestrator.pause` ...
:meth:`Orchestrator.abort`); commands only set flags, acted on at safe points (between requests, before a
launch), except ``skip`` of the running configuration and ``abort(now=True)``, which cancel the request in
flight.

The rest lives at its seams (docs/executors.md): :mod:`~specbench_tui.engine.scheduler` (queue, placement,
estimates) hands each configuration to an executor (:mod:`~specbench_tui.engine.executor`); the local one
(:mod:`~specbench_tui.engine.local_executor`, :mod:`~specbench_tui.engine.attempt`) runs it on this machine,
whose GPUs are :mod:`~specbench_tui.engine.machine`; :mod:`~specbench_tui.engine.preflight` checks first.

A sweep fails cleanly (nothing new launches, ``SweepOutcome.failure``) when the run directory cannot be
written (``store``), a stopped server's GPUs stay held past ``engine.gpu_release_timeout_s``
(``gpu_release``: those GPUs are never reused) or the Ray cluster's head is lost (``cluster``: what runs is
interrupted at once; ``--resume --ray-address`` continues on a new cluster). In a concurrent sweep every :class:`ConfigFinished` carries
``concurrent=True`` and a notice at the start says neighbours may disturb the measurements.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from specbench_tui.core.events import (ConfigFinished, ConfigState, ConfigStateChanged, Event, MeasurementRecorded,
                                       Notice, QueuePaused, QueueResumed, ServerLaunching, SweepFinished, SweepStarted)
from specbench_tui.core.outcomes import SweepFailure, SweepState
from specbench_tui.core.plan import Plan, PlannedConfig
from specbench_tui.core.records import STATUS_ERROR, Measurement, MeasurementKey
from specbench_tui.core.signatures import SignatureSet
from specbench_tui.engine.attempt import ServerGone, expected_keys
from specbench_tui.engine.cluster import cluster_executor, placement_note
from specbench_tui.engine.control import Outcome, outcome_of
from specbench_tui.engine.executor import Executor, StopJob
from specbench_tui.engine.gpus import GpuBackend, GpuPool, GpuSampler, NullBackend
from specbench_tui.engine.leases import Leases
from specbench_tui.engine.loadsweep import LoadDriver
from specbench_tui.engine.local_executor import PORT_RETRIES, LocalExecutor, LocalPlacer
from specbench_tui.engine.machine import SIMULATOR_GPUS, Machine
from specbench_tui.engine.preflight import preflight, report_leftovers, say_gpus_taken, write_env
from specbench_tui.core.engines.base import EngineProfile
from specbench_tui.core.engines.registry import get_profile
from specbench_tui.engine.scheduler import Scheduler
from specbench_tui.engine.workloads import Workload, build_workload
from specbench_tui.rundir.store import ReadReport, RunDir, StoreError

__all__ = ["PORT_RETRIES", "SIMULATOR_GPUS", "Orchestrator", "ServerGone", "SweepOutcome", "expected_keys"]

Subscriber = Callable[[Event], None]


@dataclass
class SweepOutcome:
    """How the sweep ended, for the caller's exit code and summary."""

    state: SweepState
    reason: str | None = None
    states: dict[str, ConfigState] = field(default_factory=dict)
    failure: SweepFailure | None = None
    """For a failed sweep, what failed: ``preflight``, ``store`` (the run directory cannot be written) or
    ``gpu_release`` (a stopped server's GPUs stayed held past ``engine.gpu_release_timeout_s``)."""


class Orchestrator:
    """Runs one plan into one run directory; a :class:`SweepControl`."""

    def __init__(self, plan: Plan, run_dir: RunDir, *, backend: GpuBackend | None = None,
                 python: str = sys.executable, resumed: bool = False, retry_crashed: bool = False,
                 api_key: str | None = None, gpu_sample_interval_s: float = 0.5, excerpt_wait_s: float = 0.2,
                 write_env: bool = True, port_base: int | None = None, lease_dir: Path | None = None,
                 executor: Executor | None = None) -> None:
        """``port_base`` (``--port-base``) overrides the sweep's ``engine.port_base``; ``lease_dir`` the lease
        directory (:func:`specbench_tui.engine.leases.lease_dir`); ``executor`` runs the configurations (the
        local executor on this machine when not given)."""
        self.plan = plan
        self.sweep = plan.sweep
        self.run_dir = run_dir
        self.backend: GpuBackend = backend or NullBackend()
        self.profile: EngineProfile = get_profile(self.sweep.engine.profile)
        self.signatures = SignatureSet(self.sweep.engine.crash_signatures, builtins=self.profile.crash_signatures)
        self._python = python
        self._write_env_json = write_env
        self._resumed = resumed
        self._retry_crashed = retry_crashed
        self._gpu_sample_interval_s = gpu_sample_interval_s
        self._subscribers: list[Subscriber] = []
        self.workloads = [build_workload(w) for w in plan.workloads]
        self.states: dict[str, ConfigState] = {c.id: ConfigState.PENDING for c in plan.configs}
        self.done_keys: set[MeasurementKey] = set()
        self._error_keys: set[MeasurementKey] = set()
        self._attempts: dict[str, int] = {}
        self._store_error: str | None = None
        self._gpu_failure: str | None = None
        self._cluster_lost: str | None = None
        self._env_task: asyncio.Task[None] | None = None
        self.port_base = port_base if port_base is not None else self.sweep.engine.port_base
        self.machine = Machine(self.backend, self.sweep, self.publish)
        self.local: LocalExecutor | None = None
        executor = executor or cluster_executor(plan, self.publish, api_key, self.port_base, excerpt_wait_s,
                                                self.cluster_lost)
        if executor is None:
            executor = self.local = LocalExecutor(
                plan, run_dir, self.machine, self.publish, profile=self.profile, signatures=self.signatures,
                python=python, api_key=api_key, excerpt_wait_s=excerpt_wait_s, port_base=self.port_base,
                lease_dir=lease_dir)
        self.executor: Executor = executor
        self.scheduler = Scheduler(self, executor)
        self.load = LoadDriver(plan)
        """Workloads with a load axis: which points each configuration runs (the adaptive search,
        engine/loadsweep.py)."""

    # -- what the GPU side looks like (this machine) ---------------------------------------------------

    @property
    def owners(self) -> dict[int, str]:
        """pid -> configuration name of every server process we know of (the GPU panel's "held by")."""
        return self.machine.owners

    @property
    def sampler(self) -> GpuSampler | None:
        return self.machine.sampler

    @property
    def pool(self) -> GpuPool | None:
        """This machine's GPU pool, once the sweep started (with the local executor)."""
        placer = self.scheduler.placer
        return placer.pool if isinstance(placer, LocalPlacer) else None

    @property
    def leases(self) -> Leases | None:
        """Machine-wide port and GPU leases (:mod:`specbench_tui.engine.leases`), taken once the sweep starts."""
        return self.local.leases if self.local is not None else None

    def gpu_indices(self) -> tuple[int, ...]:
        return self.machine.gpu_indices()

    def gpus_needed(self, config: PlannedConfig) -> int:
        return 0 if self.machine.on_cpu() else config.gpus_needed

    # -- events ----------------------------------------------------------------------------------------

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Receive every event from now on; returns a function that unsubscribes."""
        self._subscribers.append(subscriber)
        return lambda: self._subscribers.remove(subscriber) if subscriber in self._subscribers else None

    def publish(self, event: Event) -> None:
        """Persist (when the event says so) then hand to every subscriber; a reader's bug never stops the run."""
        try:
            self.run_dir.append_event(event)
        except StoreError as exc:
            self.fail_store(str(exc))
        for subscriber in list(self._subscribers):
            try:
                subscriber(event)
            except Exception as exc:  # noqa: BLE001 - isolation between readers and the engine
                print(f"specbench: event reader failed: {exc!r}", file=sys.stderr)

    def fail_store(self, reason: str) -> None:
        if self._store_error is None:
            self._store_error = reason
            self.abort(now=True)

    def log_path(self, config: PlannedConfig) -> Path:
        """Where ``config``'s server log goes in the run directory."""
        return self.run_dir.log_path(config.name, config.id)

    def gpus_held(self, message: str) -> None:
        """A stopped server's GPUs stayed held: the sweep fails cleanly (the running neighbours finish their
        request; nothing new launches)."""
        if self._gpu_failure is None:
            self._gpu_failure = message
            self.abort(now=False)

    def cluster_lost(self, reason: str) -> None:
        """The cluster's head is lost: the sweep stops at once (what runs is interrupted, nothing new launches)."""
        if self._cluster_lost is None:
            self._cluster_lost = reason
            self.abort(now=True)

    def set_state(self, config: PlannedConfig, state: ConfigState, reason: str | None = None) -> None:
        self.states[config.id] = state
        self.publish(ConfigStateChanged(config_id=config.id, name=config.name, state=state, reason=reason))

    def finish_config(self, config: PlannedConfig, state: ConfigState, reason: str | None, *, signature: str | None = None,
                      server_log_accept_length: float | None = None, gpu_summary: dict[str, object] | None = None) -> None:
        self.set_state(config, state, reason)
        self.publish(ConfigFinished(config_id=config.id, name=config.name, state=state, reason=reason, signature=signature,
                                    server_log_accept_length=server_log_accept_length, gpu_summary=gpu_summary,
                                    concurrent=self.sweep.concurrent))

    def record(self, measurement: Measurement) -> None:
        """One measurement into the run's results (its one record) and the fold; :class:`StopJob` when it cannot be written."""
        try:
            self.run_dir.append_measurement(measurement)
        except StoreError as exc:
            self.fail_store(str(exc))
            raise StopJob(str(exc)) from exc
        self.done_keys.add(measurement.planned_key)
        self.load.observe(measurement)
        if measurement.status == STATUS_ERROR:
            self._error_keys.add(measurement.planned_key)
        self.publish(MeasurementRecorded(config_id=measurement.config_id, record=measurement.to_json()))

    def next_attempt(self, config_id: str) -> int:
        self._attempts[config_id] = self._attempts.get(config_id, 0) + 1
        return self._attempts[config_id]

    def expected(self, config_id: str, workload: Workload) -> list[MeasurementKey]:
        """Keys a workload must have for a configuration: its items × repeats, or (with a load axis) every
        request of the load points the search wants of it now."""
        if workload.spec.load is not None:
            return [*self.load.keys(config_id, workload)]
        if workload.spec.name in self.load.ladders:  # a context ladder: the rungs its search wants now
            return self.load.ladder_keys(config_id, workload)
        return expected_keys(config_id, workload)

    def all_done(self, config: PlannedConfig) -> bool:
        return all(k in self.done_keys for w in self.workloads for k in self.expected(config.id, w))

    # -- control: the one place ------------------------------------------------------------------------

    @property
    def paused(self) -> bool:
        return self.scheduler.paused

    def pause(self) -> Outcome:
        outcome = outcome_of("pause", paused=self.paused)
        if outcome.changed and self.scheduler.pause():
            self.publish(QueuePaused())
        return outcome

    def resume(self) -> Outcome:
        outcome = outcome_of("resume", paused=self.paused)
        if outcome.changed and self.scheduler.resume():
            self.publish(QueueResumed())
        return outcome

    def _command_outcome(self, command: str, config_id: str) -> Outcome:
        """What ``skip`` or ``retry`` of ``config_id`` does now (:func:`~specbench_tui.engine.control.outcome_of`)."""
        config = self.plan.by_id(config_id) if any(c.id == config_id for c in self.plan.configs) else None
        state = self.states.get(config_id) if config is not None else None
        return outcome_of(command, state=state, queued=self.scheduler.queued(config_id),
                          excluded=config.skip_reason if config is not None else None,
                          name=config.name if config is not None else config_id, config_id=config_id)

    def skip(self, config_id: str) -> Outcome:
        outcome = self._command_outcome("skip", config_id)
        pending = outcome.changed and self.states.get(config_id) == ConfigState.PENDING
        if self.scheduler.skip(config_id, pending=pending) == "dequeued":  # not reached yet: skipped now, so
            # every view says so at once (one being placed is dropped when placement reaches it)
            self.finish_config(self.plan.by_id(config_id), ConfigState.SKIPPED, "skipped by the user")
        return outcome

    def retry(self, config_id: str) -> Outcome:
        outcome = self._command_outcome("retry", config_id)
        if outcome.changed:
            config = self.plan.by_id(config_id)
            self._forget_errors(config_id)
            self.set_state(config, ConfigState.PENDING, "queued again")
            self.scheduler.requeue(config_id)
        return outcome

    def abort(self, now: bool = False) -> Outcome:
        self.scheduler.abort(now)  # now: the request in flight is cancelled, a grace wait ends (SIGKILL)
        return outcome_of("abort")

    # -- resume ----------------------------------------------------------------------------------------

    def load_previous(self) -> None:
        """Read the run directory: kept measurements, final states and attempts of an earlier run."""
        in_progress: set[str] = set()
        launched: dict[str, float] = {}
        skipped = ReadReport()
        for event in self.run_dir.read_events(skipped):
            if isinstance(event, ServerLaunching):
                self._attempts[event.config_id] = max(self._attempts.get(event.config_id, 0), event.attempt)
                launched[event.config_id] = event.ts
            if isinstance(event, ConfigFinished) and event.config_id in launched:
                self.scheduler.record_duration(event.config_id, event.ts - launched.pop(event.config_id))
            if isinstance(event, ConfigStateChanged) and event.config_id in self.states:
                if event.state in (ConfigState.LAUNCHING, ConfigState.PENDING, ConfigState.NODE_LOST):
                    in_progress.add(event.config_id)
            if isinstance(event, ConfigFinished) and event.config_id in self.states:
                self.states[event.config_id] = event.state
                in_progress.discard(event.config_id)
        for config_id in in_progress:
            self.states[config_id] = ConfigState.PENDING
        for measurement in self.run_dir.read_measurements(skipped):
            self.load.observe(measurement)
            self.done_keys.add(measurement.planned_key)
            if measurement.status == STATUS_ERROR:
                self._error_keys.add(measurement.planned_key)
        for warning in skipped.summary():  # a skipped measurement is measured again
            self.publish(Notice(level="warning", text=warning))

    def seed_estimates(self, seconds: dict[str, float]) -> None:
        """Expected wall seconds per configuration id (from an earlier run of the same plan), so that a
        concurrent sweep is placed well from its start; configurations finishing here refine them."""
        known = {c.id for c in self.plan.configs}
        self.scheduler.seed_durations({k: float(v) for k, v in seconds.items() if k in known and v >= 0})

    def _forget_errors(self, config_id: str) -> None:
        """A retried configuration re-measures the keys that errored; its good measurements are kept."""
        errored = {k for k in self._error_keys if k[0] == config_id}
        self.load.forget(errored)
        self.done_keys -= errored
        self._error_keys -= errored

    def preflight(self) -> list[str]:
        """Problems that would make every launch fail or wait for nothing; empty when all is well."""
        pending = {cid for cid, state in self.states.items() if state == ConfigState.PENDING}
        return preflight(self.plan, pending, self.machine, self.run_dir)

    # -- the sweep -------------------------------------------------------------------------------------

    async def run(self) -> SweepOutcome:
        """Run every configuration still to run; returns how the sweep ended. Never leaves a server up."""
        await report_leftovers(self.plan, self.run_dir, self.publish)
        if self._resumed:
            self.load_previous()
            if self._retry_crashed:
                for config_id, state in list(self.states.items()):
                    if state in (ConfigState.CRASHED, ConfigState.FAILED):
                        self.states[config_id] = ConfigState.PENDING
                        self._forget_errors(config_id)
        scheduler = self.scheduler
        problems = self.preflight() or await scheduler.open()  # the executor's own problems (a Ray head not there)
        if problems:
            for problem in problems:
                self.publish(Notice(level="error", text=f"pre-flight: {problem}"))
            self.publish(SweepFinished(state="failed", reason="pre-flight failed: " + "; ".join(problems)))
            if not self._resumed and self.run_dir.discard():  # nothing ran: leave no run directory behind
                self.publish(Notice(level="info", text=f"nothing ran: {self.run_dir.path} was removed"))
            return SweepOutcome("failed", "pre-flight failed", dict(self.states), failure="preflight")
        placer = scheduler.opened
        self.publish(SweepStarted(sweep=self.sweep.name, run_dir=str(self.run_dir.path),
                                  total_configs=len(self.plan.configs), resumed=self._resumed))
        if not self._resumed:
            for note in self.plan.notes:
                self.publish(Notice(level="info", text=note))
        if self.backend.hint:
            self.publish(Notice(level="info", text=self.backend.hint))
        await say_gpus_taken(self.pool, self.machine, self.publish)
        if placing := placement_note(self.sweep, placer):  # concurrent, or on a cluster: say how it places
            self.publish(Notice(level="info", text=placing))
        if self._write_env_json:
            self._env_task = asyncio.create_task(write_env(
                self.plan, self.run_dir, self.machine, placer.indices, python=self._python,
                profile=self.profile.name, publish=self.publish), name="env-fingerprint")
        self.machine.start_sampler(self._gpu_sample_interval_s)
        self.load.refresh()
        scheduler.queue_initial(self._resumed)
        try:
            await scheduler.drain()
            await scheduler.search_rounds()
        finally:
            await self.executor.close(now=scheduler.stopping_now)
            await self.machine.stop_sampler()
            await self._await_env()
        return self._finish()

    async def _await_env(self) -> None:
        task = self._env_task
        if task is None or task.done():
            return
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(task),
                                   timeout=3.0 if self.scheduler.stopping_now else 40.0)

    def _finish(self) -> SweepOutcome:
        failure: SweepFailure | None = None
        state: SweepState
        if self._store_error:
            state, reason = "failed", f"the run directory cannot be written: {self._store_error}"
            failure = "store"
        elif self._gpu_failure:
            state = "failed"
            reason = f"{self._gpu_failure}; the rest can run later with specbench run --resume {self.run_dir.path}"
            failure = "gpu_release"
        elif self._cluster_lost:
            state, failure = "failed", "cluster"
            reason = (f"{self._cluster_lost}; start a cluster again and continue on it with specbench run --resume "
                      f"{self.run_dir.path} --ray-address NEW_HEAD:6379")
        elif self.scheduler.aborting:
            state = "aborted"
            reason = f"stopped on request; continue with specbench run --resume {self.run_dir.path}"
        else:
            state, reason = "completed", None
        with contextlib.suppress(StoreError):
            self.publish(SweepFinished(state=state, reason=reason or (self.pool.ending() if self.pool else None)))
        return SweepOutcome(state, reason, dict(self.states), failure=failure)
