"""The scheduler: the queue, placement and estimates; it hands each configuration to an executor.

It walks the queue (the plan's order; :func:`specbench_tui.core.placement.order_configs` order before each
dispatch when ``sweep.concurrent``), takes GPUs for each configuration from the executor's
:class:`~specbench_tui.engine.executor.Placer`, and runs it through
:meth:`~specbench_tui.engine.executor.Executor.run` with a :class:`RunSink` (the engine's side: events, the run
directory, what is left to measure) and a :class:`~specbench_tui.engine.executor.JobControl` (the control API's
signals). The outcome becomes the configuration's state and :class:`ConfigFinished`.

Estimates (concurrent placement): each configuration's expected duration is taken from those finished so far
(its own earlier wall time, else the mean of those with as many GPUs, else the mean of all; 1.0 before any has
finished). An ``interrupted`` configuration (abort, Ctrl-C, kill) gets no :class:`ConfigFinished`, so resume
runs it again from its first missing measurement key; ``relaunch`` puts it first in line again; ``node_lost``
queues it again up to ``[cluster] node_retries`` times, then fails it.

The seam: the scheduler owns the queue and the control signals behind a small interface the orchestrator calls
(:meth:`Scheduler.pause`, :meth:`~Scheduler.resume`, :meth:`~Scheduler.abort`, :meth:`~Scheduler.skip`,
:meth:`~Scheduler.requeue`, :meth:`~Scheduler.queued`, :meth:`~Scheduler.record_duration`), and it sees the
orchestrator only as a :class:`Sweep` (what it needs of the engine that owns the sweep). Neither module imports
the other's class.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from specbench_tui.core.events import ConfigFinished, ConfigState, ConfigStateChanged, Event, Notice
from specbench_tui.core.cluster_placement import order_on_cluster
from specbench_tui.core.placement import Placeable, order_configs
from specbench_tui.core.plan import Plan, PlannedConfig
from specbench_tui.core.records import Measurement, MeasurementKey
from specbench_tui.engine.executor import Executor, Job, JobControl, OpenFailed, Outcome, Placement, Placer
from specbench_tui.engine.gpus.pool import PlacementRefused
from specbench_tui.engine.loadsweep import MAX_ROUNDS, LoadDriver
from specbench_tui.engine.server import first_of
from specbench_tui.engine.workloads import Workload

EXCLUDED_SAID = 20
"""Excluded configurations announced one by one at the start of a run (the rest in one notice)."""


class Sweep(Protocol):
    """What the scheduler needs of the engine that owns the sweep (:class:`~specbench_tui.engine.orchestrator.
    Orchestrator` is one): the plan and where each configuration stands, and where events and measurements go."""

    @property
    def plan(self) -> Plan: ...

    @property
    def states(self) -> dict[str, ConfigState]: ...

    @property
    def load(self) -> LoadDriver: ...

    @property
    def workloads(self) -> list[Workload]: ...

    @property
    def done_keys(self) -> set[MeasurementKey]: ...

    def publish(self, event: Event) -> None: ...

    def set_state(self, config: PlannedConfig, state: ConfigState, reason: str | None = None) -> None: ...

    def finish_config(self, config: PlannedConfig, state: ConfigState, reason: str | None, *,
                      signature: str | None = None, server_log_accept_length: float | None = None,
                      gpu_summary: dict[str, object] | None = None) -> None: ...

    def record(self, measurement: Measurement) -> None: ...

    def fail_store(self, reason: str) -> None: ...

    def expected(self, config_id: str, workload: Workload) -> list[MeasurementKey]: ...

    def all_done(self, config: PlannedConfig) -> bool: ...

    def next_attempt(self, config_id: str) -> int: ...

    def gpus_needed(self, config: PlannedConfig) -> int: ...

    def gpus_held(self, message: str) -> None: ...

    def log_path(self, config: PlannedConfig) -> Path:
        """Where the configuration's server log goes."""
        ...


SkipWhere = Literal["running", "dequeued", "placing"]
"""Where a skip found its configuration: running (its job is told), still queued (taken out: the caller
finishes it as skipped), or being placed (the queue drops it there)."""

@dataclass
class Signals:
    """The control API's state, shared by the scheduler and every job's :class:`JobControl`."""

    unpaused: asyncio.Event = field(default_factory=asyncio.Event)
    queue_changed: asyncio.Event = field(default_factory=asyncio.Event)
    stop_soon: asyncio.Event = field(default_factory=asyncio.Event)
    """The sweep aborts (after the request in flight): nothing new launches."""
    stop_now: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.unpaused.set()

    def control(self) -> JobControl:
        return JobControl(skip=asyncio.Event(), stop_now=self.stop_now, stop_soon=self.stop_soon,
                          unpaused=self.unpaused)


class RunSink:
    """The engine's side of one job (a :class:`~specbench_tui.engine.executor.JobSink`)."""

    def __init__(self, orch: Sweep, config: PlannedConfig) -> None:
        self.orch = orch
        self.config = config

    def publish(self, event: Event) -> None:
        self.orch.publish(event)

    def state(self, state: ConfigState, reason: str | None = None) -> None:
        self.orch.set_state(self.config, state, reason)

    def record(self, measurement: Measurement) -> None:
        self.orch.record(measurement)

    def server_log(self, lines: Sequence[str]) -> None:
        path = self.orch.log_path(self.config)
        try:
            with path.open("a", encoding="utf-8") as log:
                log.writelines(f"{line}\n" for line in lines)
        except OSError as exc:
            self.store_failed(f"cannot write the server log {path}: {exc.strerror or exc}")

    def store_failed(self, reason: str) -> None:
        self.orch.fail_store(reason)

    def todo(self, workload: Workload) -> list[MeasurementKey]:
        if workload.spec.load is not None or workload.spec.name in self.orch.load.ladders:
            self.orch.load.refresh()
        return [k for k in self.expected(workload) if k not in self.orch.done_keys]

    def expected(self, workload: Workload) -> list[MeasurementKey]:
        return self.orch.expected(self.config.id, workload)

    def points(self, workload: Workload) -> list[tuple[str, int]]:
        self.orch.load.refresh()
        return self.orch.load.todo(self.config.id, workload, self.orch.done_keys)


class Scheduler:
    """Queue, placement and estimates for one sweep."""

    def __init__(self, orch: Sweep, executor: Executor) -> None:
        self.orch = orch
        self.plan = orch.plan
        self.executor = executor
        self.signals = Signals()
        self.queue: deque[str] = deque()
        self.skip_pending: set[str] = set()
        """Configurations skipped while being placed (waiting for GPUs): the queue drops them there."""
        self.controls: dict[str, JobControl] = {}
        """The running configurations' controls."""
        self.placer: Placer | None = None
        self.durations: dict[str, float] = {}
        """Wall seconds of each configuration's last run, launch to GPUs released (placement estimates)."""
        self.held_gpus: set[int] = set()
        """GPUs a stopped server still held at the release timeout: never handed out again."""
        self._node_lost: dict[str, int] = {}
        self._node_retries = self.plan.sweep.cluster.node_retries
        self._ordered_for: tuple[frozenset[str], int] | None = None

    @property
    def aborting(self) -> bool:
        return self.signals.stop_soon.is_set()

    # -- the interface the orchestrator calls ----------------------------------------------------------

    @property
    def paused(self) -> bool:
        return not self.signals.unpaused.is_set()

    @property
    def stopping_now(self) -> bool:
        """``abort(now=True)`` was asked: the request in flight is abandoned."""
        return self.signals.stop_now.is_set()

    def pause(self) -> bool:
        """Nothing new starts (jobs stop between requests); True when this paused the queue."""
        if self.paused:
            return False
        self.signals.unpaused.clear()
        return True

    def resume(self) -> bool:
        """True when this resumed a paused queue."""
        if not self.paused:
            return False
        self.signals.unpaused.set()
        return True

    def abort(self, now: bool = False) -> None:
        """Nothing new launches; with ``now`` the request in flight is cancelled (and a grace wait ends)."""
        self.signals.stop_soon.set()
        if now:
            self.signals.stop_now.set()
        self.signals.unpaused.set()
        self.signals.queue_changed.set()

    def queued(self, config_id: str) -> bool:
        return config_id in self.queue

    def skip(self, config_id: str, *, pending: bool) -> SkipWhere | None:
        """Skip ``config_id``: a running one's job is told; a ``pending`` one is taken out of the queue (or
        dropped when placement reaches it). None: nothing to skip here."""
        control = self.controls.get(config_id)
        if control is not None:
            control.skip.set()
            return "running"
        if not pending:
            return None
        where: SkipWhere = "placing"
        if config_id in self.queue:
            self.queue.remove(config_id)
            where = "dequeued"
        else:
            self.skip_pending.add(config_id)
        self.signals.queue_changed.set()
        return where

    def requeue(self, config_id: str) -> None:
        """Queue ``config_id`` again, last in line (a retry)."""
        self.skip_pending.discard(config_id)
        self.queue.append(config_id)
        self.signals.queue_changed.set()

    def record_duration(self, config_id: str, seconds: float) -> None:
        """Wall seconds a configuration took (a resumed run's earlier ones, for placement estimates)."""
        self.durations[config_id] = max(0.0, seconds)

    def seed_durations(self, seconds: Mapping[str, float]) -> None:
        self.durations.update(seconds)

    def queue_initial(self, resumed: bool) -> None:
        """Queue what is to run. Excluded configurations cost nothing: every view reads them from the plan
        (skipped, with the rule's reason), so the first :data:`EXCLUDED_SAID` are said one by one and the rest
        in one notice, however many the sweep excludes."""
        orch = self.orch
        said = unsaid = 0
        for config in self.plan.configs:
            state = orch.states[config.id]
            if config.skip_reason is not None:
                orch.states[config.id] = ConfigState.SKIPPED
                if resumed and state == ConfigState.SKIPPED:
                    continue
                if said >= EXCLUDED_SAID:
                    unsaid += 1
                    continue
                said += 1
                orch.set_state(config, ConfigState.SKIPPED, config.skip_reason)
                orch.publish(ConfigFinished(config_id=config.id, name=config.name, state=ConfigState.SKIPPED,
                                            reason=config.skip_reason, concurrent=self.plan.sweep.concurrent))
                continue
            if state == ConfigState.PENDING:
                self.queue.append(config.id)
                if resumed:
                    orch.publish(ConfigStateChanged(config_id=config.id, name=config.name, state=state,
                                                    reason="resumed"))
        if unsaid:
            orch.publish(Notice(level="info", text=f"{unsaid:,} more configurations are excluded by the sweep and "
                                                   "skipped (specbench validate lists each with its reason)"))

    async def drain(self) -> None:
        """Run the queue until it is empty and nothing runs, or the sweep aborts."""
        tasks: set[asyncio.Task[None]] = set()
        signals = self.signals
        while not self.aborting:
            if not self.queue:
                if not tasks:
                    break
                signals.queue_changed.clear()
                await first_of(signals.queue_changed.wait(), *tasks)
                tasks = {t for t in tasks if not t.done()}
                continue
            await signals.unpaused.wait()
            if self.aborting:
                break
            if self.plan.sweep.concurrent:
                self._order_queue()
            config = self.plan.by_id(self.queue.popleft())
            if config.id in self.skip_pending:
                self.skip_pending.discard(config.id)
                self.orch.finish_config(config, ConfigState.SKIPPED, "skipped by the user")
                continue
            if self.orch.all_done(config):
                self.orch.finish_config(config, ConfigState.DONE, "every measurement already recorded")
                continue
            try:
                placement = await self._acquire(config)
            except PlacementRefused as exc:  # a GPU fault left too few GPUs: refused with the fault as its reason
                self.orch.finish_config(config, ConfigState.FAILED, str(exc))
                continue
            if placement is None:
                if config.id in self.skip_pending:
                    self.skip_pending.discard(config.id)
                    self.orch.finish_config(config, ConfigState.SKIPPED, "skipped by the user")
                    continue
                break  # aborting (or the GPUs are gone): the configuration stays pending
            task = asyncio.create_task(self._run(config, placement), name=f"config-{config.name}")
            tasks.add(task)
            if not self.plan.sweep.concurrent:
                await task
            tasks = {t for t in tasks if not t.done()}
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def search_rounds(self) -> None:
        """The adaptive load search: while finished configurations miss points it now wants (their baseline's
        probes, a configuration's next probe), queue them again."""
        orch, load = self.orch, self.orch.load
        if not load.active:
            return
        for _ in range(MAX_ROUNDS):
            if self.aborting:
                return
            load.refresh()
            again = [c for c in self.plan.configs
                     if orch.states[c.id] == ConfigState.DONE and c.skip_reason is None and not orch.all_done(c)]
            if not again:
                return
            load.rounds += 1
            why = load.describe()() or "measure the baseline at its configurations' probes"
            for config in again:
                orch.states[config.id] = ConfigState.PENDING
                orch.publish(ConfigStateChanged(config_id=config.id, name=config.name, state=ConfigState.PENDING,
                                                reason=f"adaptive load search, round {load.rounds + 1}"))
                self.queue.append(config.id)
            orch.publish(Notice(level="info", text=f"adaptive load search, round {load.rounds + 1}: {why}"))
            await self.drain()
        orch.publish(Notice(level="warning", text=f"the adaptive load search stopped after {MAX_ROUNDS} rounds"))

    async def _acquire(self, config: PlannedConfig) -> Placement | None:
        """GPUs for ``config``, waiting for them; None when the sweep stops, the configuration is skipped
        meanwhile, or the pool can no longer supply that many (GPUs still held after a teardown)."""
        assert self.placer is not None

        def waiting(text: str) -> None:
            self.orch.publish(Notice(level="info", config_id=config.id, text=f"{config.name}: {text}"))

        count = self.orch.gpus_needed(config)
        acquire = asyncio.ensure_future(self.placer.acquire(count, config=config.name, on_wait=waiting))
        try:
            while not acquire.done():
                if self.aborting or config.id in self.skip_pending:
                    break
                self.signals.queue_changed.clear()
                await first_of(acquire, self.signals.queue_changed.wait())
        finally:
            if not acquire.done():
                acquire.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await acquire
        if acquire.cancelled():
            return None
        placement = acquire.result()
        if self.aborting or config.id in self.skip_pending:
            await self.placer.release(placement)
            return None
        return placement

    async def open(self) -> list[str]:
        """Open the executor (its placer is then :attr:`opened`); the problems it raised instead
        (:class:`~specbench_tui.engine.executor.OpenFailed`: nothing can run, a failed pre-flight)."""
        try:
            self.placer = await self.executor.open()
        except OpenFailed as exc:
            await self.executor.close(now=True)
            return exc.problems
        return []

    @property
    def opened(self) -> Placer:
        assert self.placer is not None, "the executor is not open"
        return self.placer

    def _order_queue(self) -> None:
        """Concurrent mode: the queue in placement order (widest and longest first, packed to end soonest).
        Recomputed only when the queue or the estimates changed since the last time (popping the head of
        an ordered queue leaves the rest in order)."""
        assert self.placer is not None
        key = (frozenset(self.queue), len(self.durations))
        if len(self.queue) < 2 or (self._ordered_for is not None and key[1] == self._ordered_for[1]
                                   and key[0] <= self._ordered_for[0]):
            return
        configs = [self.plan.by_id(config_id) for config_id in self.queue]
        node_sizes = getattr(self.placer, "node_sizes", None)
        if node_sizes:  # a cluster: each configuration on one node (core/cluster_placement.py)
            self.queue = deque(order_on_cluster(configs, node_sizes, estimate=self.estimate))
        else:
            ordered = order_configs(configs, self.placer.indices, True, estimate=self.estimate)
            self.queue = deque(config.id for config in ordered)
        self._ordered_for = key

    def estimate(self, config: Placeable) -> float | None:
        """Expected wall seconds of ``config`` from the configurations finished so far (None: unknown)."""
        if config.id in self.durations:
            return self.durations[config.id]
        by_id = {c.id: c for c in self.plan.configs}
        same = [d for cid, d in self.durations.items() if by_id[cid].gpus_needed == config.gpus_needed]
        pool = same or list(self.durations.values())
        return sum(pool) / len(pool) if pool else None

    async def _run(self, config: PlannedConfig, placement: Placement) -> None:
        """Run one configuration; an unexpected error fails it (with the reason) instead of the sweep."""
        orch = self.orch
        control = self.signals.control()
        self.controls[config.id] = control
        outcome: Outcome | None = None
        try:
            job = Job(config, orch.next_attempt(config.id), placement, orch.workloads)
            outcome = await self.executor.run(job, RunSink(orch, config), control)
            self.controls.pop(config.id, None)
            self._conclude(config, outcome)
        except Exception as exc:  # noqa: BLE001 - one configuration's bug must not take the sweep down
            orch.publish(Notice(level="error", text=f"{config.name}: internal error {exc!r}", config_id=config.id))
            if not orch.states[config.id].final:
                orch.finish_config(config, ConfigState.FAILED, f"internal error: {exc!r}")
        finally:
            self.controls.pop(config.id, None)
            assert self.placer is not None
            # only this run's held GPUs: on a cluster, another node's GPU of the same index is not held
            await self.placer.release(placement, keep=outcome.held_gpus if outcome is not None else ())
            if outcome is not None and self._again(config, outcome) and not self.aborting:
                self.queue.appendleft(config.id)  # first in line again
                self.signals.queue_changed.set()

    def _again(self, config: PlannedConfig, outcome: Outcome) -> bool:
        return outcome.kind == "relaunch" or (outcome.kind == "node_lost"
                                              and self._node_lost.get(config.id, 0) <= self._node_retries)

    def _conclude(self, config: PlannedConfig, outcome: Outcome) -> None:
        orch = self.orch
        if outcome.state != ConfigState.PENDING:
            self.durations[config.id] = outcome.wall_s
        if outcome.held_gpus:
            self.held_gpus.update(outcome.held_gpus)
            orch.gpus_held(outcome.held_message or f"GPUs {list(outcome.held_gpus)} are still held")
        if outcome.kind == "node_lost":
            lost = self._node_lost[config.id] = self._node_lost.get(config.id, 0) + 1
            orch.set_state(config, ConfigState.NODE_LOST, outcome.reason)  # a state of its own: never a crash
            if lost > self._node_retries:
                orch.finish_config(config, ConfigState.FAILED, f"node lost {lost} times: {outcome.reason}")
            else:
                orch.set_state(config, ConfigState.PENDING, f"node lost: {outcome.reason}; queued again")
            return
        if outcome.state == ConfigState.PENDING:  # interrupted, or launched again: no ConfigFinished
            orch.set_state(config, ConfigState.PENDING, outcome.reason)
            return
        orch.finish_config(config, outcome.state, outcome.reason, signature=outcome.signature,
                           server_log_accept_length=outcome.server_log_accept_length, gpu_summary=outcome.gpu_summary)
