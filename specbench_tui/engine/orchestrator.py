"""The orchestrator: walks the plan, runs each configuration's server and workloads, publishes the truth.

Everything it learns is an event, published to every subscriber (the run directory's ``events.jsonl``
first, then the TUI or the headless printer) and every measurement is appended to ``results.jsonl`` the
moment it exists. It implements :class:`~specbench_tui.engine.control.SweepControl`; commands only set
flags, acted on at safe points (between requests, before a launch), except ``skip`` of the running
configuration and ``abort(now=True)``, which cancel the request in flight.

State rules: *crashed* means the server died after it was launched with a crash
signature in its log, or died while serving; *failed* means it never became ready (exit before ready,
start-up timeout, unusable launch), stalled, or stopped answering its health check. Either way the
remaining workloads are published as :class:`WorkloadNotRun`, never as measurements. An interrupted
configuration (abort, Ctrl-C, kill) gets no :class:`ConfigFinished`, so resume runs it again from its first
missing measurement key.

Where the server's own figures go: per workload, :class:`WorkloadFinished.server_log` (mean ``accept len``
and ``gen throughput`` of the ``Decode batch`` lines logged during the measured requests); per
configuration, :attr:`ConfigFinished.server_log_accept_length` (mean over all of them).

GPUs (see :mod:`specbench_tui.engine.gpus`): a :class:`GpuSampler` polls the backend off the loop about twice
a second and publishes :class:`GpuSampled` (each GPU process named by the configuration that owns it); a
window per configuration, open from ``ready`` to the end of its last workload, becomes
:attr:`ConfigFinished.gpu_summary` (:meth:`GpuSummary.to_json`). A backend that scripts itself after the
servers (the simulator's fake box) has ``attach``/``set_busy``/``detach`` called on it; the orchestrator asks
for those methods by name and never for a backend type, so the real NVML path runs no fake-specific code.
Servers get ``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (NVML's indices). After a
teardown the GPUs go back to the pool only once none of the server's processes holds memory on them (its
process tree, and every pid NVML showed appearing on its GPUs while it was up: in a container NVML lists the
host's pids, which match none of ours); past
``engine.gpu_release_timeout_s`` the sweep fails cleanly (nothing new launches, those GPUs are never reused,
``SweepOutcome.failure == "gpu_release"``). ``env.json`` (:mod:`specbench_tui.engine.fingerprint`) is
written once per run directory, in a worker thread, while the first server starts.

Concurrency (``sweep.concurrent``): configurations run side by side on disjoint GPUs. The pending queue is
put in :func:`specbench_tui.core.placement.order_configs` order before each dispatch, with each
configuration's expected duration taken from the configurations finished so far (its own earlier wall time,
else the mean of those with as many GPUs, else the mean of all; 1.0 before any has finished). Every
:class:`ConfigFinished` carries ``concurrent=True`` and a notice at the start says neighbours may disturb
the measurements.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from specbench_tui.core.budget import planned_reserved_tokens
from specbench_tui.core.engines import engine_flags
from specbench_tui.core.outcomes import DEATH_CRASH, DEATH_STALL, DEATH_UNHEALTHY, SweepFailure, SweepState
from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    ConfigStateChanged,
    Event,
    GpuSampled,
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
    WorkloadStarted,
)
from specbench_tui.core.launch import launch_env, redact_argv, server_argv
from specbench_tui.core.logparse import BatchLine, summarize_decode
from specbench_tui.core.placement import Placeable, order_configs
from specbench_tui.core.plan import Plan, PlannedConfig
from specbench_tui.core.records import (
    ERROR_KIND_CRASH,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_ZERO_OUTPUT,
    Measurement,
    MeasurementKey,
)
from specbench_tui.core.signatures import SignatureSet
from specbench_tui.engine.client import ServerClient
from specbench_tui.engine.cluster import cluster_problems
from specbench_tui.engine.fingerprint import collect_async
from specbench_tui.engine.gpus import (
    GpuBackend,
    GpuPool,
    GpuSample,
    ScriptedBackend,
    GpuSampler,
    GpuSummary,
    NullBackend,
    release_failure_message,
    samples_to_json,
    wait_gpus_released,
)
from specbench_tui.engine.leases import Lease, LeasedGpuPool, Leases, gpu_keys, lease_port
from specbench_tui.engine.leftovers import find_leftovers, format_leftovers
from specbench_tui.engine.loadsweep import MAX_ROUNDS, LoadDriver
from specbench_tui.engine.profiles import EngineProfile, get_profile
from specbench_tui.engine.server import (
    Death,
    ServerProcess,
    find_free_port,
    first_of,
    process_tree,
)
from specbench_tui.store import ReadReport, RunDir, StoreError
from specbench_tui.engine.workloads import (
    Labels,
    Session,
    Workload,
    WorkloadError,
    build_workload,
)

T = TypeVar("T")
Subscriber = Callable[[Event], None]

PORT_RETRIES = 3
"""How many times a configuration whose port was taken by a stranger before its server bound it is launched
again on another port."""
SIMULATOR_GPUS = 8
"""GPUs the simulator pretends to have when the machine has none (the seed campaign's 8-GPU box)."""


class ServerGone(Exception):
    """The server died (or was skipped/aborted) while we waited on it."""

    def __init__(self, death: Death | None) -> None:
        super().__init__(death.reason if death else "interrupted")
        self.death = death


class PreflightError(Exception):
    """The sweep cannot start: each problem is one line of the message."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass
class SweepOutcome:
    """How the sweep ended, for the caller's exit code and summary."""

    state: SweepState
    reason: str | None = None
    states: dict[str, ConfigState] = field(default_factory=dict)
    failure: SweepFailure | None = None
    """For a failed sweep, what failed: ``preflight``, ``store`` (the run directory cannot be written) or
    ``gpu_release`` (a stopped server's GPUs stayed held past ``engine.gpu_release_timeout_s``)."""


@dataclass
class _Running:
    """Book-keeping of one configuration while its server is up."""

    config: PlannedConfig
    server: ServerProcess | None = None
    gpus: tuple[int, ...] = ()
    stats: list[BatchLine] | None = None
    all_stats: list[BatchLine] = field(default_factory=list)
    last_progress: float = field(default_factory=time.monotonic)
    in_flight: bool = False
    skip: asyncio.Event = field(default_factory=asyncio.Event)
    gpu_summary: GpuSummary | None = None
    """The GPUs over the measured window (from ready to the end of the last workload)."""
    gpu_pids_before: frozenset[int] = frozenset()
    """Pids NVML listed on these GPUs before the server was launched (normally none)."""
    gpu_pids: set[int] = field(default_factory=set)
    """Pids NVML listed on these GPUs while the server was up that were not there before: the server's, in
    whatever pid namespace NVML reports (a container's NVML gives the host's pids, which match no pid of ours)."""


# ------------------------------------------------------------------------------------------------- helpers


def _local_path(value: str) -> bool:
    """Whether a model argument names a local path rather than a hub repo id."""
    return value.startswith(("/", "./", "../", "~"))


def _arg_values(argv: tuple[str, ...], flags: tuple[str, ...]) -> list[str]:
    return [argv[i + 1] for i, part in enumerate(argv[:-1]) if part in flags]


def expected_keys(config_id: str, workload: Workload) -> list[MeasurementKey]:
    """Every measurement key a workload produces for one configuration, in run order."""
    return [(config_id, workload.spec.name, item, repeat)
            for repeat in range(1, workload.spec.repeats + 1) for item in workload.items()]


# ---------------------------------------------------------------------------------------------- orchestrator


class Orchestrator:
    """Runs one plan into one run directory; a :class:`SweepControl`."""

    def __init__(self, plan: Plan, run_dir: RunDir, *, backend: GpuBackend | None = None,
                 python: str = sys.executable, resumed: bool = False, retry_crashed: bool = False,
                 api_key: str | None = None, gpu_sample_interval_s: float = 0.5, excerpt_wait_s: float = 0.2,
                 write_env: bool = True, port_base: int | None = None, lease_dir: Path | None = None) -> None:
        """``port_base`` (``--port-base``) overrides the sweep's ``engine.port_base``; ``lease_dir`` the lease
        directory (:func:`specbench_tui.engine.leases.lease_dir`)."""
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
        self._api_key = api_key
        self._gpu_sample_interval_s = gpu_sample_interval_s
        self._excerpt_wait_s = excerpt_wait_s
        self._subscribers: list[Subscriber] = []
        self.workloads = [build_workload(w) for w in plan.workloads]
        self._sweep_reserved = max((planned_reserved_tokens(self.profile.name, c.argv) for c in plan.runnable()),
                                   default=0)
        """The most context any configuration's server reserves for speculative decoding: long prompts are sized
        with it for every configuration, so each one is sent the same prompt and the speedups stay paired."""
        self.states: dict[str, ConfigState] = {c.id: ConfigState.PENDING for c in plan.configs}
        self.done_keys: set[MeasurementKey] = set()
        self._error_keys: set[MeasurementKey] = set()
        self._attempts: dict[str, int] = {}
        self._queue: deque[str] = deque()
        self._running: dict[str, _Running] = {}
        self._unpaused = asyncio.Event()
        self._unpaused.set()
        self._queue_changed = asyncio.Event()
        self._aborting = False
        self._abort_now = asyncio.Event()
        self._store_error: str | None = None
        self._skip_pending: set[str] = set()
        self._ports: set[int] = set()
        self.port_base = port_base if port_base is not None else self.sweep.engine.port_base
        self._lease_dir = lease_dir
        self._port_moved_said = False
        self._ever_ours: set[int] = set()
        self._port_conflicts: set[int] = set()
        """Ports a stranger took from one of our servers: never chosen again in this sweep."""
        self._port_retries: dict[str, int] = {}
        self._requeue: set[str] = set()
        self.leases: Leases | None = None
        """Machine-wide port and GPU leases (:mod:`specbench_tui.engine.leases`), taken once the sweep starts."""
        self.pool: GpuPool | None = None
        self.sampler: GpuSampler | None = None
        self.owners: dict[int, str] = {}
        """pid -> configuration name of every server process we know of (the GPU panel's "held by")."""
        self._durations: dict[str, float] = {}
        """Wall seconds of each configuration's last run, launch to GPUs released (placement estimates)."""
        self._held_gpus: set[int] = set()
        """GPUs a stopped server still held at the release timeout: never handed out again."""
        self._gpu_failure: str | None = None
        self._env_task: asyncio.Task[None] | None = None
        self._ordered_for: tuple[frozenset[str], int] | None = None
        self.load = LoadDriver(plan)
        """Workloads with a load axis: which points each configuration runs (the adaptive search), and running
        them (engine/loadsweep.py)."""

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
            self._fail_store(str(exc))
        for subscriber in list(self._subscribers):
            try:
                subscriber(event)
            except Exception as exc:  # noqa: BLE001 - isolation between readers and the engine
                print(f"specbench: event reader failed: {exc!r}", file=sys.stderr)

    def _fail_store(self, reason: str) -> None:
        if self._store_error is None:
            self._store_error = reason
            self.abort(now=True)

    def _set_state(self, config: PlannedConfig, state: ConfigState, reason: str | None = None) -> None:
        self.states[config.id] = state
        self.publish(ConfigStateChanged(config_id=config.id, name=config.name, state=state, reason=reason))

    # -- control ---------------------------------------------------------------------------------------

    @property
    def paused(self) -> bool:
        return not self._unpaused.is_set()

    def pause(self) -> None:
        if self._unpaused.is_set():
            self._unpaused.clear()
            self.publish(QueuePaused())

    def resume(self) -> None:
        if not self._unpaused.is_set():
            self._unpaused.set()
            self.publish(QueueResumed())

    def skip(self, config_id: str) -> None:
        running = self._running.get(config_id)
        if running is not None:
            running.skip.set()
        elif self.states.get(config_id) == ConfigState.PENDING:
            if config_id in self._queue:  # not reached yet: skipped now, so every view says so at once
                self._queue.remove(config_id)
                self._finish_config(self.plan.by_id(config_id), ConfigState.SKIPPED, "skipped by the user")
            else:  # being placed (waiting for GPUs): the queue drops it there
                self._skip_pending.add(config_id)
            self._queue_changed.set()

    def retry(self, config_id: str) -> None:
        state = self.states.get(config_id)
        if state in (ConfigState.CRASHED, ConfigState.FAILED, ConfigState.SKIPPED) and config_id not in self._queue:
            config = self.plan.by_id(config_id)
            if config.skip_reason is not None:
                return
            self._skip_pending.discard(config_id)
            self._forget_errors(config_id)
            self._queue.append(config_id)
            self._set_state(config, ConfigState.PENDING, "queued again")
            self._queue_changed.set()

    def abort(self, now: bool = False) -> None:
        self._aborting = True
        if now:
            self._abort_now.set()
            for running in self._running.values():  # a grace wait in progress ends now: SIGKILL of every tree
                if running.server is not None:
                    running.server.hurry()
        self._unpaused.set()
        self._queue_changed.set()

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
                self._durations[event.config_id] = max(0.0, event.ts - launched.pop(event.config_id))
            if isinstance(event, ConfigStateChanged) and event.config_id in self.states:
                if event.state in (ConfigState.LAUNCHING, ConfigState.PENDING):
                    in_progress.add(event.config_id)
            if isinstance(event, ConfigFinished) and event.config_id in self.states:
                self.states[event.config_id] = event.state
                in_progress.discard(event.config_id)
        for config_id in in_progress:
            self.states[config_id] = ConfigState.PENDING
        for measurement in self.run_dir.read_measurements(skipped):
            self.load.observe(measurement)
            self.done_keys.add(measurement.key)
            if measurement.status == STATUS_ERROR:
                self._error_keys.add(measurement.key)
        for warning in skipped.summary():  # a skipped measurement is measured again
            self.publish(Notice(level="warning", text=warning))

    def seed_estimates(self, seconds: dict[str, float]) -> None:
        """Expected wall seconds per configuration id (from an earlier run of the same plan), so that a
        concurrent sweep is placed well from its start; configurations finishing here refine them."""
        known = {c.id for c in self.plan.configs}
        self._durations.update({k: float(v) for k, v in seconds.items() if k in known and v >= 0})

    def _forget_errors(self, config_id: str) -> None:
        """A retried configuration re-measures the keys that errored; its good measurements are kept."""
        errored = {k for k in self._error_keys if k[0] == config_id}
        self.load.forget(errored)
        self.done_keys -= errored
        self._error_keys -= errored

    # -- pre-flight ------------------------------------------------------------------------------------

    def gpu_indices(self) -> tuple[int, ...]:
        """The GPU pool: the sweep's list, else every visible GPU, else 8 pretend ones for the simulator."""
        if self.sweep.gpus is not None:
            return self.sweep.gpus
        count = self.backend.device_count()
        if count == 0 and self.sweep.engine.launcher == "simulator":
            return tuple(range(SIMULATOR_GPUS))
        return tuple(range(count))

    def _on_cpu(self) -> bool:
        """The engine runs without a GPU (llama.cpp) and this machine has none: configurations take no GPU."""
        return (engine_flags(self.sweep.engine.profile).runs_on_cpu and self.sweep.gpus is None
                and self.sweep.engine.launcher != "simulator" and self.backend.device_count() == 0)

    def preflight(self) -> list[str]:
        """Problems that would make every launch fail or wait for nothing; empty when all is well."""
        problems: list[str] = []
        engine = self.sweep.engine
        runnable = [c for c in self.plan.runnable() if self.states[c.id] == ConfigState.PENDING]
        missing: dict[str, str] = {}
        for config in runnable:
            for flag, what in engine_flags(engine.profile).model_flags:
                for value in _arg_values(config.argv, flag):
                    if _local_path(value) and not Path(value).expanduser().exists():
                        missing.setdefault(value, what)
        for value, what in missing.items():
            hint = (" (/dev/shm is a RAM disk: it is emptied by every reboot; copy the model back first)"
                    if value.startswith("/dev/shm") else "")
            problems.append(f"{what} path {value} does not exist{hint}")
        if engine.launcher != "command" and engine.python and "/" in engine.python \
                and not Path(engine.python).expanduser().exists():
            problems.append(f"engine.python {engine.python} does not exist")
        if engine.launcher == "command" and engine.command and not Path(engine.command[0]).exists() \
                and not any((Path(p) / engine.command[0]).exists() for p in os.environ.get("PATH", "").split(":")):
            problems.append(f"engine.command {engine.command[0]} is not an executable path")
        indices = self.gpu_indices()
        visible = self.backend.device_count()
        if runnable and visible == 0 and (not indices or engine.launcher != "simulator") and not self._on_cpu():
            hint = self.backend.hint or "no GPU is visible"
            problems.append(f"no GPUs to run on ({engine.launcher} launcher): {hint}")
        elif visible and self.sweep.gpus is not None and max(self.sweep.gpus) >= visible:
            problems.append(f"sweep.gpus asks for GPU {max(self.sweep.gpus)} but only {visible} are visible")
        needed = max((c.gpus_needed for c in runnable), default=0)
        if indices and needed > len(indices):
            problems.append(f"a configuration needs {needed} GPUs but {len(indices)} are available")
        problems.extend(cluster_problems(self.sweep.cluster))
        probe = self.run_dir.path / ".write-test"
        try:
            probe.write_text("ok")
            probe.unlink()
        except OSError as exc:
            problems.append(f"the run directory {self.run_dir.path} is not writable: {exc.strerror or exc}")
        return problems

    # -- the sweep -------------------------------------------------------------------------------------

    async def run(self) -> SweepOutcome:
        """Run every configuration still to run; returns how the sweep ended. Never leaves a server up."""
        await self._report_leftovers()
        if self._resumed:
            self.load_previous()
            if self._retry_crashed:
                for config_id, state in list(self.states.items()):
                    if state in (ConfigState.CRASHED, ConfigState.FAILED):
                        self.states[config_id] = ConfigState.PENDING
                        self._forget_errors(config_id)
        problems = self.preflight()
        if problems:
            for problem in problems:
                self.publish(Notice(level="error", text=f"pre-flight: {problem}"))
            self.publish(SweepFinished(state="failed", reason="pre-flight failed: " + "; ".join(problems)))
            if not self._resumed and self.run_dir.discard():  # nothing ran: leave no run directory behind
                self.publish(Notice(level="info", text=f"nothing ran: {self.run_dir.path} was removed"))
            return SweepOutcome("failed", "pre-flight failed", dict(self.states), failure="preflight")
        self.pool = await self._leased_pool()
        self.publish(SweepStarted(sweep=self.sweep.name, run_dir=str(self.run_dir.path),
                                  total_configs=len(self.plan.configs), resumed=self._resumed))
        if not self._resumed:
            for note in self.plan.notes:
                self.publish(Notice(level="info", text=note))
        if self.backend.hint:
            self.publish(Notice(level="info", text=self.backend.hint))
        await self._say_gpus_taken()
        if self.sweep.concurrent:
            self.publish(Notice(level="info", text=f"concurrent: configurations run side by side on disjoint GPUs "
                                                   f"of the pool {list(self.pool.indices)}; neighbours can disturb "
                                                   "each other's measurements (recorded in every result)"))
        self._env_task = asyncio.create_task(self._write_env(), name="env-fingerprint")
        self._start_sampler()
        self.load.refresh()
        self._queue_initial()
        try:
            await self._drain_queue()
            await self._search_rounds()
        finally:
            await self._stop_all()
            if isinstance(self.pool, LeasedGpuPool):
                self.pool.close()
            if self.sampler is not None:
                self.sampler.stop()
                await self._last_sample()
            await self._await_env()
        return self._finish()

    async def _leased_pool(self) -> GpuPool:
        """The GPU pool, leased machine-wide (a plain pool, with a warning, when no lease directory works)."""
        indices = self.gpu_indices()
        try:
            self.leases = Leases(self._lease_dir, note={"run_dir": str(self.run_dir.path)})
        except OSError as exc:
            self.publish(Notice(level="warning", text=f"ports and GPUs are not leased: {exc}; another specbench "
                                                      "on this machine could pick the same ones"))
            return GpuPool(indices)
        if self.leases.warning:
            self.publish(Notice(level="warning", text=self.leases.warning))
        keys = await asyncio.to_thread(gpu_keys, self.backend, indices)
        return LeasedGpuPool(indices, self.leases, keys, samples=lambda: self.sampler.latest if self.sampler else [],
                             ours=self._our_pids)

    def _our_pids(self) -> set[int]:
        """Every pid any of our servers had (their trees, and what NVML listed on their GPUs): a GPU sample,
        which may be a moment old, never makes our own last server look like another job."""
        for running in self._running.values():
            self._ever_ours |= running.gpu_pids
            if running.server is not None:
                self._ever_ours |= running.server.pids_seen
        return self._ever_ours | set(self.owners)

    async def _say_gpus_taken(self) -> None:
        """Pre-flight, said not failed: GPUs of the pool another specbench (or another job's memory) holds now;
        configurations wait for them."""
        pool = self.pool
        if not isinstance(pool, LeasedGpuPool) or self._on_cpu() or not pool.indices:
            return
        try:
            samples = await asyncio.to_thread(self.backend.sample)
        except Exception:  # noqa: BLE001 - telemetry must never stop a sweep
            samples = []
        busy = await asyncio.to_thread(pool.taken_elsewhere, pool.indices, samples)
        if not busy:
            return
        held = "; ".join(f"GPU {i}: {who}" for i, who in sorted(busy.items()))
        if len(busy) == len(pool.indices):
            self.publish(Notice(level="warning", text=f"pre-flight: the whole GPU pool {list(pool.indices)} is taken "
                                                      f"({held}); configurations wait until GPUs are free"))
        else:
            self.publish(Notice(level="info", text=f"GPUs held elsewhere are not placed on while they are: {held}"))

    async def _last_sample(self) -> None:
        """One sample after the last teardown, so the GPU panel is left showing the box as the sweep left it
        (free, or what a leftover still holds), not as it was during the last request."""
        try:
            samples = await asyncio.to_thread(self.backend.sample)
        except Exception:  # noqa: BLE001 - telemetry must never cost the end of a sweep
            return
        if samples:
            self._on_samples(samples)

    async def _report_leftovers(self) -> None:
        """A warning for each server of an earlier run (in this run directory's folder, or the sweep's
        ``runs_dir``) that is still alive, with the command that ends it; nothing is killed."""
        roots = [self.run_dir.path.parent]
        runs_dir = self.sweep.runs_dir if self.sweep.runs_dir.is_absolute() else Path.cwd() / self.sweep.runs_dir
        with contextlib.suppress(OSError):
            if runs_dir.resolve() != roots[0].resolve():
                roots.append(runs_dir)
        try:
            found = await asyncio.to_thread(find_leftovers, roots)
        except Exception as exc:  # noqa: BLE001 - a look at /proc must never stop a sweep
            print(f"specbench: looking for leftover servers failed: {exc!r}", file=sys.stderr)
            return
        for text in format_leftovers(found):
            self.publish(Notice(level="warning", text=text))

    # -- GPUs and the fingerprint ----------------------------------------------------------------------

    def _start_sampler(self) -> None:
        """Poll the backend in its thread; samples come back on this loop as :class:`GpuSampled`."""
        if self.backend.device_count() == 0:
            # Nothing to poll: one empty sample says so, and the GPU panel shows "no GPU visible" instead of
            # waiting for telemetry that will never come (the backend's hint is published as a notice).
            self.publish(GpuSampled(samples=()))
            return
        self.sampler = GpuSampler(self.backend, self._on_samples, interval_s=self._gpu_sample_interval_s,
                                  loop=asyncio.get_running_loop())
        self.sampler.start()

    def _on_samples(self, samples: list[GpuSample]) -> None:
        self.publish(GpuSampled(samples=samples_to_json(samples, self.owners)))

    def _script(self, tell: Callable[[ScriptedBackend], object]) -> None:
        """Tell a scripted backend what the servers do (``attach``, ``set_busy``, ``detach``): only the
        simulator's fake box is one (:class:`~specbench_tui.engine.gpus.ScriptedBackend`); a real backend
        has nothing to be told."""
        if isinstance(self.backend, ScriptedBackend):
            try:
                tell(self.backend)
            except Exception as exc:  # noqa: BLE001 - telemetry must never cost a measurement
                print(f"specbench: the scripted GPU backend failed: {exc!r}", file=sys.stderr)

    async def _write_env(self) -> None:
        """``env.json``, once per run directory (a resumed run keeps the first one)."""
        if not self._write_env_json or (self.run_dir.path / "env.json").exists():
            return
        assert self.pool is not None
        try:
            doc = await collect_async(
                backend=self.backend, sweep_path=self.run_dir.path / "sweep.toml",
                python=self.sweep.engine.python or self._python,
                # One path resolution at start-up, before any server runs: not worth a thread.
                extra={"sweep_source": str(Path(self.sweep.path).resolve()),  # noqa: ASYNC240
                       "launcher": self.sweep.engine.launcher,
                       "engine_profile": self.profile.name, "concurrent": self.sweep.concurrent,
                       "gpu_pool": list(self.pool.indices)})
            self.run_dir.write_json("env.json", doc)
        except Exception as exc:  # noqa: BLE001 - a fingerprint problem is said, never fatal
            self.publish(Notice(level="warning", text=f"env.json could not be written: {exc}"))

    async def _await_env(self) -> None:
        task = self._env_task
        if task is None or task.done():
            return
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(task), timeout=3.0 if self._abort_now.is_set() else 40.0)

    def _expected(self, config_id: str, workload: Workload) -> list[MeasurementKey]:
        """Keys a workload must have for a configuration: its items × repeats, or (with a load axis) every
        request of the load points the search wants of it now."""
        if workload.spec.load is not None:
            return [*self.load.keys(config_id, workload)]
        return expected_keys(config_id, workload)

    async def _search_rounds(self) -> None:
        """The adaptive load search: while finished configurations miss points it now wants (their baseline's
        probes, a configuration's next probe), queue them again."""
        if not self.load.active:
            return
        for _ in range(MAX_ROUNDS):
            if self._aborting:
                return
            self.load.refresh()
            again = [c for c in self.plan.configs
                     if self.states[c.id] == ConfigState.DONE and c.skip_reason is None and not self._all_done(c)]
            if not again:
                return
            self.load.rounds += 1
            why = self.load.describe()() or "measure the baseline at its configurations' probes"
            for config in again:
                self.states[config.id] = ConfigState.PENDING
                self.publish(ConfigStateChanged(config_id=config.id, name=config.name, state=ConfigState.PENDING,
                                                reason=f"adaptive load search, round {self.load.rounds + 1}"))
                self._queue.append(config.id)
            self.publish(Notice(level="info", text=f"adaptive load search, round {self.load.rounds + 1}: {why}"))
            await self._drain_queue()
        self.publish(Notice(level="warning", text=f"the adaptive load search stopped after {MAX_ROUNDS} rounds"))

    def _queue_initial(self) -> None:
        for config in self.plan.configs:
            state = self.states[config.id]
            if config.skip_reason is not None:
                if not self._resumed or state != ConfigState.SKIPPED:
                    self._set_state(config, ConfigState.SKIPPED, config.skip_reason)
                    self.publish(ConfigFinished(config_id=config.id, name=config.name, state=ConfigState.SKIPPED,
                                                reason=config.skip_reason, concurrent=self.sweep.concurrent))
                continue
            if state == ConfigState.PENDING:
                self._queue.append(config.id)
                if self._resumed:
                    self.publish(ConfigStateChanged(config_id=config.id, name=config.name, state=state,
                                                    reason="resumed"))

    async def _drain_queue(self) -> None:
        tasks: set[asyncio.Task[None]] = set()
        while not self._aborting:
            if not self._queue:
                if not tasks:
                    break
                self._queue_changed.clear()
                await first_of(self._queue_changed.wait(), *tasks)
                tasks = {t for t in tasks if not t.done()}
                continue
            await self._unpaused.wait()
            if self._aborting:
                break
            if self.sweep.concurrent:
                self._order_queue()
            config = self.plan.by_id(self._queue.popleft())
            if config.id in self._skip_pending:
                self._skip_pending.discard(config.id)
                self._finish_config(config, ConfigState.SKIPPED, "skipped by the user")
                continue
            if self._all_done(config):
                self._finish_config(config, ConfigState.DONE, "every measurement already recorded")
                continue
            gpus = await self._acquire(config)
            if gpus is None:
                if config.id in self._skip_pending:
                    self._skip_pending.discard(config.id)
                    self._finish_config(config, ConfigState.SKIPPED, "skipped by the user")
                    continue
                break  # aborting (or the GPUs are gone): the configuration stays pending
            task = asyncio.create_task(self._run_config_guarded(config, gpus), name=f"config-{config.name}")
            tasks.add(task)
            if not self.sweep.concurrent:
                await task
            tasks = {t for t in tasks if not t.done()}
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _acquire(self, config: PlannedConfig) -> tuple[int, ...] | None:
        """GPUs for ``config`` from the pool, waiting for them; None when the sweep stops, the configuration
        is skipped meanwhile, or the pool can no longer supply that many (GPUs still held after a teardown)."""
        assert self.pool is not None
        count = 0 if self._on_cpu() else config.gpus_needed
        if isinstance(self.pool, LeasedGpuPool):
            def waiting(text: str) -> None:
                self.publish(Notice(level="info", config_id=config.id, text=f"{config.name}: {text}"))

            acquire = asyncio.ensure_future(self.pool.acquire(count, on_wait=waiting, config=config.name))
        else:
            acquire = asyncio.ensure_future(self.pool.acquire(count))
        try:
            while not acquire.done():
                if self._aborting or config.id in self._skip_pending:
                    break
                self._queue_changed.clear()
                await first_of(acquire, self._queue_changed.wait())
        finally:
            if not acquire.done():
                acquire.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await acquire
        if acquire.cancelled():
            return None
        gpus = acquire.result()
        if self._aborting or config.id in self._skip_pending:
            await self.pool.release(gpus)
            return None
        return gpus

    def _order_queue(self) -> None:
        """Concurrent mode: the queue in placement order (widest and longest first, packed to end soonest).
        Recomputed only when the queue or the estimates changed since the last time (popping the head of
        an ordered queue leaves the rest in order)."""
        assert self.pool is not None
        key = (frozenset(self._queue), len(self._durations))
        if len(self._queue) < 2 or (self._ordered_for is not None and key[1] == self._ordered_for[1]
                                    and key[0] <= self._ordered_for[0]):
            return
        configs = [self.plan.by_id(config_id) for config_id in self._queue]
        ordered = order_configs(configs, self.pool.indices, True, estimate=self._estimate)
        self._queue = deque(config.id for config in ordered)
        self._ordered_for = key

    def _estimate(self, config: Placeable) -> float | None:
        """Expected wall seconds of ``config`` from the configurations finished so far (None: unknown)."""
        if config.id in self._durations:
            return self._durations[config.id]
        by_id = {c.id: c for c in self.plan.configs}
        same = [d for cid, d in self._durations.items() if by_id[cid].gpus_needed == config.gpus_needed]
        pool = same or list(self._durations.values())
        return sum(pool) / len(pool) if pool else None

    def _all_done(self, config: PlannedConfig) -> bool:
        return all(k in self.done_keys for w in self.workloads for k in self._expected(config.id, w))

    async def _run_config_guarded(self, config: PlannedConfig, gpus: tuple[int, ...]) -> None:
        """Run one configuration; an unexpected error fails it (with the reason) instead of the sweep."""
        try:
            await self._run_config(config, gpus)
        except Exception as exc:  # noqa: BLE001 - one configuration's bug must not take the sweep down
            self.publish(Notice(level="error", text=f"{config.name}: internal error {exc!r}", config_id=config.id))
            if not self.states[config.id].final:
                self._finish_config(config, ConfigState.FAILED, f"internal error: {exc!r}")
        finally:
            assert self.pool is not None
            await self.pool.release(tuple(i for i in gpus if i not in self._held_gpus))
            if config.id in self._requeue:  # lost its port to a stranger: first in line again
                self._requeue.discard(config.id)
                if not self._aborting:
                    self._queue.appendleft(config.id)
                    self._queue_changed.set()

    def _server_env(self, config: PlannedConfig, gpus: tuple[int, ...]) -> dict[str, str]:
        env = dict(os.environ)
        env.update(launch_env(config.env))
        env.update(self.profile.shutdown_env)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in gpus)
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # CUDA's default order can differ from NVML's (our indices)
        env["PYTHONUNBUFFERED"] = "1"
        if self.sweep.engine.sim_profile:
            env["SPECBENCH_SIM_PROFILE"] = self.sweep.engine.sim_profile
        return env

    async def _run_config(self, config: PlannedConfig, gpus: tuple[int, ...]) -> None:
        engine = self.sweep.engine
        started = time.monotonic()
        running = _Running(config, gpus=gpus)
        self._running[config.id] = running
        attempt = self._attempts.get(config.id, 0) + 1
        self._attempts[config.id] = attempt
        port, port_lease = self._choose_port(config)
        self._ports.add(port)
        argv = server_argv(engine, config, self._python, port, self._api_key)
        log_path = self.run_dir.log_path(config.name, config.id)
        server = ServerProcess(config.id, argv, self._server_env(config, gpus), log_path, self.profile,
                               self.signatures, self.publish, on_stats=lambda s: self._on_stats(running, s),
                               excerpt_wait_s=self._excerpt_wait_s, on_store_error=self._fail_store, port=port)
        running.server = server
        self._set_state(config, ConfigState.LAUNCHING, f"attempt {attempt}" if attempt > 1 else None)
        outcome: tuple[ConfigState, str | None] | None = None
        client: ServerClient | None = None
        try:
            running.gpu_pids_before = frozenset(await self._pids_on(gpus))
            try:
                pid = await server.start()
            except StoreError as exc:  # logs/ cannot be written: the sweep stops, resume runs this one again
                self._fail_store(str(exc))
                outcome = (ConfigState.PENDING, "the run directory cannot be written: resume runs it again")
                return
            except OSError as exc:
                outcome = (ConfigState.FAILED, f"cannot start the server: {exc.strerror or exc}")
                return
            self.owners[pid] = config.name
            self._script(lambda box: box.attach(config.name, gpus, (pid,), **self._mem_fraction(config)))
            self.publish(ServerLaunching(config_id=config.id, name=config.name, argv=redact_argv(argv), gpus=gpus,
                                         port=port, pid=pid, log_path=str(log_path), attempt=attempt,
                                         keeper_pid=server.keeper_pid, tree_id=server.tree_id))
            client = ServerClient(f"http://{_url_host(engine.host)}:{port}", self.profile, api_key=self._api_key,
                                  request_timeout_s=engine.request_timeout_s)
            outcome = await self._serve(config, running, server, client)
        finally:
            if self.sampler is not None:  # the measured window ends with the last workload
                running.gpu_summary = self.sampler.close_window(config.id) or running.gpu_summary
            if client is not None:
                await client.aclose()
            if server.pid is not None:
                await self._note_gpu_pids(config, running)
            report = await server.stop(engine.shutdown_grace_s, now=self._abort_now.is_set())
            self._script(lambda box: box.detach(gpus))
            self._ever_ours |= server.pids_seen | running.gpu_pids | ({server.pid} if server.pid else set())
            holding = await self._wait_released(config, gpus, server.pids_seen | running.gpu_pids)
            for pid in server.pids_seen | running.gpu_pids | ({server.pid} if server.pid is not None else set()):
                if pid not in holding:  # a pid still holding memory keeps its name in the GPU panel
                    self.owners.pop(pid, None)
            leftover = tuple(sorted(set(report.leftover_pids) | holding))
            if server.pid is not None:
                self.publish(ServerStopped(config_id=config.id, exit_code=report.exit_code,
                                           teardown_s=round(report.teardown_s, 3), leftover_pids=leftover))
            if report.leftover_pids:
                self.publish(Notice(level="warning", config_id=config.id,
                                    text=f"{config.name}: processes {list(report.leftover_pids)} still alive "
                                         "after teardown"))
            self._ports.discard(port)
            if port_lease is not None:
                port_lease.release()
            self._running.pop(config.id, None)
            if outcome is not None:
                if outcome[0] != ConfigState.PENDING:
                    self._durations[config.id] = time.monotonic() - started
                await self._conclude(config, running, server, *outcome)

    def _choose_port(self, config: PlannedConfig) -> tuple[int, Lease | None]:
        """A port from ``port_base`` that none of our servers uses, no other specbench leases and nothing
        listens on; leased until the server is gone. A notice (once) when ports were passed over."""
        engine = self.sweep.engine
        if self.leases is None:
            return find_free_port(engine.host, self.port_base, self._ports | self._port_conflicts), None
        choice = lease_port(self.leases, engine.host, self.port_base, self._ports | self._port_conflicts,
                            config=config.name)
        if choice.skipped and not self._port_moved_said:
            self._port_moved_said = True
            why = "; ".join(f"{port} {reason}" for port, reason in choice.skipped[:4])
            more = f" (and {len(choice.skipped) - 4} more)" if len(choice.skipped) > 4 else ""
            self.publish(Notice(level="info", config_id=config.id,
                                text=f"port {choice.skipped[0][0]} is taken ({why}{more}): {config.name} listens on "
                                     f"{choice.port}; servers take the next free port (set --port-base or "
                                     f"engine.port_base to choose)"))
        return choice.port, choice.lease

    async def _pids_on(self, gpus: tuple[int, ...]) -> set[int]:
        """Pids NVML lists on ``gpus`` now (none without GPUs; a failing backend counts as none)."""
        if not gpus:
            return set()
        try:
            return await asyncio.to_thread(self.backend.pids_holding, gpus)
        except Exception:  # noqa: BLE001 - telemetry must never cost a measurement
            return set()

    async def _note_gpu_pids(self, config: PlannedConfig, running: _Running) -> None:
        """Remember the pids that appeared on the server's GPUs since its launch, and name them in the GPU
        panel: where NVML shares our pid namespace they are the server's own; in a container they are the
        host's numbers for them, the only ones the release wait can watch."""
        new = await self._pids_on(running.gpus) - running.gpu_pids_before
        running.gpu_pids |= new
        for pid in new:
            self.owners.setdefault(pid, config.name)

    async def _wait_released(self, config: PlannedConfig, gpus: tuple[int, ...], pids: set[int]) -> set[int]:
        """Wait until the stopped server's processes (``pids``: its process tree, and the pids NVML showed
        appearing on its GPUs) hold no memory on ``gpus``; pids still holding then.

        Past ``engine.gpu_release_timeout_s`` the GPUs are kept out of the pool for good and the sweep fails
        cleanly (nothing new launches). After ``abort(now=True)`` nothing is waited for: leftovers are
        only reported, since the sweep is ending anyway."""
        timeout = self.sweep.engine.gpu_release_timeout_s
        if self._abort_now.is_set():
            holding = await wait_gpus_released(self.backend, gpus, pids, 0.0)
            if holding:
                self.publish(Notice(level="warning", config_id=config.id,
                                    text=f"{config.name}: pids {sorted(holding)} still hold GPU memory on "
                                         f"{','.join(map(str, gpus))} (aborted: not waited for)"))
            return holding
        holding = await wait_gpus_released(self.backend, gpus, pids, timeout)
        if holding:
            message = release_failure_message(gpus, holding, timeout)
            self._held_gpus.update(gpus)
            self.publish(Notice(level="error", config_id=config.id, text=f"{config.name}: {message}"))
            if self._gpu_failure is None:
                self._gpu_failure = message
                self.abort(now=False)  # the running neighbours finish their request; nothing new launches
        return holding

    def _mem_fraction(self, config: PlannedConfig) -> dict[str, float]:
        """``--mem-fraction-static`` of the configuration, for a scripted backend's memory curve."""
        for value in _arg_values(config.argv, ("--mem-fraction-static",)):
            try:
                return {"mem_fraction": float(value)}
            except ValueError:
                pass
        return {}

    async def _conclude(self, config: PlannedConfig, running: _Running, server: ServerProcess,
                        state: ConfigState, reason: str | None) -> None:
        if state == ConfigState.PENDING:  # interrupted by abort: no ConfigFinished, resume reruns it
            self._set_state(config, ConfigState.PENDING, reason)
            return
        crash = await server.crash_report()
        summary = summarize_decode(running.all_stats)
        gpu_summary = running.gpu_summary.to_json() if running.gpu_summary is not None else None
        self._finish_config(config, state, reason, signature=crash.signature if crash else None,
                            server_log_accept_length=summary.accept_length, gpu_summary=gpu_summary)

    def _finish_config(self, config: PlannedConfig, state: ConfigState, reason: str | None, **extra: Any) -> None:
        self._set_state(config, state, reason)
        self.publish(ConfigFinished(config_id=config.id, name=config.name, state=state, reason=reason,
                                    concurrent=self.sweep.concurrent, **extra))

    # -- one server ------------------------------------------------------------------------------------

    async def _serve(self, config: PlannedConfig, running: _Running, server: ServerProcess,
                     client: ServerClient) -> tuple[ConfigState, str | None]:
        """Readiness, then the workloads; returns the configuration's final state and reason."""
        ready = asyncio.ensure_future(server.wait_ready(client, self.sweep.engine.startup_timeout_s))
        try:
            death = await self._guard(running, ready, watch_stall=False)
        except ServerGone as gone:
            state, reason = self._interrupted(running, gone)
        else:
            if death is None:
                return await self._serve_ready(config, running, server, client)
            state = ConfigState.CRASHED if death.kind == DEATH_CRASH else ConfigState.FAILED
            reason = death.reason
        if state in (ConfigState.CRASHED, ConfigState.FAILED):
            if await self._port_conflict(config, server):
                return ConfigState.PENDING, f"port conflict: {server.stranger}; launched again on another port"
            reason = f"{await self._final_reason(server, reason)} (before ready)"
            self._not_run(config, 0, f"server {state.value} before it was ready: {reason}")
        return state, reason

    async def _port_conflict(self, config: PlannedConfig, server: ServerProcess) -> bool:
        """Whether a server that died before ready lost its port to a stranger (a process outside its tree took
        it between our choice and its bind, e.g. a specbench that leases elsewhere): then it is no crash. The
        configuration is launched again on another port (at most :data:`PORT_RETRIES` times)."""
        if self._aborting or server.port is None:
            return False
        if server.stranger is None:
            await server.look_for_stranger()
        if server.stranger is None or self._port_retries.get(config.id, 0) >= PORT_RETRIES:
            return False
        self._port_retries[config.id] = self._port_retries.get(config.id, 0) + 1
        self._port_conflicts.add(server.port)
        self._requeue.add(config.id)
        self.publish(Notice(level="warning", config_id=config.id,
                            text=f"{config.name}: {server.stranger}; it is launched again on another port"))
        return True

    @staticmethod
    async def _final_reason(server: ServerProcess, reason: str | None) -> str | None:
        """The crash's final signature and line (after its trailing lines), else ``reason`` as it was."""
        crash = await server.crash_report()
        return f"{crash.signature}: {crash.line.strip()[:300]}" if crash is not None else reason

    def _not_run(self, config: PlannedConfig, first: int, why: str) -> None:
        """Publish the workloads from index ``first`` that still miss measurements as not run, with why."""
        for workload in self.workloads[first:]:
            if any(k not in self.done_keys for k in self._expected(config.id, workload)):
                self.publish(WorkloadNotRun(config_id=config.id, workload=workload.spec.name, reason=why))

    async def _serve_ready(self, config: PlannedConfig, running: _Running, server: ServerProcess,
                           client: ServerClient) -> tuple[ConfigState, str | None]:
        """The server is ready: record it, then run the workloads."""
        startup_s = time.monotonic() - server.started_at
        info = await client.server_info() or {}
        context_length = await client.context_length(info)
        self.publish(ServerReady(config_id=config.id, startup_s=round(startup_s, 3), context_length=context_length))
        too_long = next((w.spec for w in self.workloads if context_length and w.spec.max_new_tokens >= context_length),
                        None)
        if too_long is not None:  # refused before any request is sent: the server would answer each with a 400
            why = (f"workload '{too_long.name}' asks for max_new_tokens = {too_long.max_new_tokens:,}, but the "
                   f"server's context length is {context_length:,}: lower max_new_tokens (or raise the context)")
            self.publish(Notice(level="error", text=f"{config.name}: {why}", config_id=config.id))
            self._not_run(config, 0, why)
            return ConfigState.FAILED, why
        self._set_state(config, ConfigState.RUNNING)
        if server.pid is not None:  # the ranks' children exist now: name them in the GPU panel too
            for pid in await asyncio.to_thread(process_tree, server.pid):
                self.owners.setdefault(pid, config.name)
        await self._note_gpu_pids(config, running)  # the model is loaded: its CUDA contexts are listed
        if self.sampler is not None:
            self.sampler.open_window(config.id, running.gpus)
        session = Session(client, lambda: self._progress(running), context_length,
                          lambda level, text: self.publish(Notice(level=level, text=text, config_id=config.id)),
                          reserved_tokens=max(self.profile.reserved_tokens(info), self._sweep_reserved),
                          max_req_input_len=self.profile.input_limit(info))
        labels = Labels(config.id, config.name, "")
        for index, workload in enumerate(self.workloads):
            if workload.spec.load is not None:
                self.load.refresh()
            keys = [k for k in self._expected(config.id, workload) if k not in self.done_keys]
            if not keys:
                continue
            try:
                if index > 0 and not await self._healthy(running, client):
                    server.mark_dead(Death(DEATH_UNHEALTHY, "the server stopped answering its health check"))
                    raise ServerGone(server.death.result())
                workload_labels = Labels(labels.config_id, labels.config, workload.spec.name)
                if workload.spec.load is not None:
                    await self.load.run_workload(self, running, workload, session, workload_labels, self.done_keys)
                else:
                    await self._run_workload(running, workload, session, workload_labels, keys)
            except ServerGone as gone:
                return await self._gone(config, running, gone, index)
            if self._aborting:
                return ConfigState.PENDING, "aborted: resume runs the rest"
        if running.skip.is_set():
            return ConfigState.SKIPPED, "skipped by the user"
        return ConfigState.DONE, None

    def _interrupted(self, running: _Running, gone: ServerGone) -> tuple[ConfigState, str | None]:
        if running.skip.is_set():
            return ConfigState.SKIPPED, "skipped by the user"
        if gone.death is None:
            return ConfigState.PENDING, "aborted: resume runs it again"
        state = ConfigState.CRASHED if gone.death.kind == DEATH_CRASH else ConfigState.FAILED
        return state, gone.death.reason

    async def _gone(self, config: PlannedConfig, running: _Running, gone: ServerGone,
                    index: int) -> tuple[ConfigState, str | None]:
        """The server is gone mid-run: the rest is not run (never measured); say why."""
        state, reason = self._interrupted(running, gone)
        if state == ConfigState.PENDING:
            return state, reason
        death = gone.death
        if death is not None and death.kind not in (DEATH_CRASH, DEATH_STALL, DEATH_UNHEALTHY):
            state = ConfigState.CRASHED  # it served, then died
        if running.server is not None:
            reason = await self._final_reason(running.server, reason)
        why = "skipped by the user" if state == ConfigState.SKIPPED else f"server {state.value}: {reason}"
        self._not_run(config, index, why)
        return state, reason

    async def _healthy(self, running: _Running, client: ServerClient) -> bool:
        check = asyncio.ensure_future(client.healthy())
        return await self._guard(running, check, watch_stall=False)

    async def _run_workload(self, running: _Running, workload: Workload, session: Session, labels: Labels,
                            keys: list[MeasurementKey]) -> None:
        config = running.config
        self.publish(WorkloadStarted(config_id=config.id, workload=workload.spec.name,
                                     expected=len(self._expected(config.id, workload))))
        try:
            await self._guard(running, asyncio.ensure_future(workload.prepare(session)))
        except WorkloadError as exc:
            self.publish(Notice(level="error", config_id=config.id, text=f"{workload.spec.name}: {exc}"))
            for key in keys:
                self._record(Measurement(config_id=config.id, config=config.name, workload=key[1], item=key[2],
                                         repeat=key[3], status=STATUS_ERROR, error=str(exc)))
            return
        self._script(lambda box: box.set_busy(running.gpus, True))
        try:
            await self._guard(running, asyncio.ensure_future(workload.warmup(session)))
            counters_before = await self._guard(running, asyncio.ensure_future(session.counters()))
            running.stats = []
            counts = {STATUS_OK: 0, STATUS_ERROR: 0, STATUS_ZERO_OUTPUT: 0}
            for key in keys:
                await self._wait_unpaused(running)
                if self._aborting or running.skip.is_set():
                    break
                try:
                    measurement = await self._guard(running, asyncio.ensure_future(
                        workload.run(key[2], key[3], session, labels)))
                    await self._raise_if_died(running, measurement)
                except ServerGone as gone:
                    self._record_cut(config, key, gone)
                    raise
                self._record(measurement)
                counts[measurement.status] = counts.get(measurement.status, 0) + 1
        finally:
            self._script(lambda box: box.set_busy(running.gpus, False))
        summary = summarize_decode(running.stats)
        running.stats = None
        if self._aborting or running.skip.is_set():
            if running.skip.is_set():
                raise ServerGone(None)
            return
        server_log = summary.to_json()
        if counters_before is not None:  # the engine's own counters over the measured requests (llama.cpp)
            counters_after = await self._guard(running, asyncio.ensure_future(session.counters()))
            server_log.update(session.counter_figures(counters_before, counters_after, summary.accept_length))
        self.publish(WorkloadFinished(config_id=config.id, workload=workload.spec.name,
                                      measured=sum(counts.values()), errors=counts[STATUS_ERROR],
                                      zero_output=counts[STATUS_ZERO_OUTPUT], server_log=server_log))

    async def _raise_if_died(self, running: _Running, measurement: Measurement) -> None:
        """A request cut by a lost connection (a killed server's stream just ends, without ``[DONE]``), or by the
        stream error an engine sends when its core died (the profile's ``fatal_stream_error``: vLLM's API server
        answers in-flight streams with ``EngineCore encountered an issue`` and exits about 0.5 s later), is the
        server's death, not a measurement, once the process exit is seen."""
        server = running.server
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

    def _record_cut(self, config: PlannedConfig, key: MeasurementKey, gone: ServerGone) -> None:
        """The request in flight when its server died is on record: an error whose reason is the death (a skip
        or an abort records nothing; resume measures the key again). ``--retry-crashed`` re-runs it."""
        if gone.death is None:
            return
        self._record(Measurement(config_id=config.id, config=config.name, workload=key[1], item=key[2],
                                 repeat=key[3], status=STATUS_ERROR, error_kind=ERROR_KIND_CRASH,
                                 error=f"in flight when the server died: {gone.death.reason}"[:500]))

    def _record(self, measurement: Measurement) -> None:
        try:
            self.run_dir.append_measurement(measurement)
        except StoreError as exc:
            self._fail_store(str(exc))
            raise ServerGone(None) from exc
        self.done_keys.add(measurement.key)
        self.load.observe(measurement)
        if measurement.status == STATUS_ERROR:
            self._error_keys.add(measurement.key)
        self.publish(MeasurementRecorded(config_id=measurement.config_id, record=measurement.to_json()))

    async def _wait_unpaused(self, running: _Running) -> None:
        if self._unpaused.is_set():
            return
        assert running.server is not None
        self._script(lambda box: box.set_busy(running.gpus, False))
        await first_of(self._unpaused.wait(), running.skip.wait(), running.server.death)
        self._script(lambda box: box.set_busy(running.gpus, True))

    # -- guarding a request ------------------------------------------------------------------------------

    def _progress(self, running: _Running) -> None:
        running.last_progress = time.monotonic()

    async def _guard(self, running: _Running, task: asyncio.Future[T], watch_stall: bool = True) -> T:
        """Await ``task`` unless the server dies, stalls, is skipped or the sweep aborts now; then cancel it
        at once and raise :class:`ServerGone` (with the death, or None for skip/abort)."""
        server = running.server
        assert server is not None
        running.last_progress = time.monotonic()
        running.in_flight = True
        watchers = [running.skip.wait(), self._abort_now.wait(), server.death]
        if watch_stall:
            watchers.append(self._stall_watch(running))
        try:
            await first_of(task, *watchers)
        finally:
            running.in_flight = False
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if not task.cancelled():
            return task.result()
        if server.dead:
            raise ServerGone(server.death.result())
        raise ServerGone(None)

    async def _stall_watch(self, running: _Running) -> None:
        """Mark the server dead when the request in flight makes no progress for ``stall_timeout_s``."""
        limit = self.sweep.engine.stall_timeout_s
        server = running.server
        assert server is not None
        while True:
            idle = time.monotonic() - running.last_progress
            if idle >= limit:
                server.mark_dead(Death(DEATH_STALL, f"stalled: no progress on the request in flight for "
                                                    f"{idle:.0f} s (stall_timeout_s = {limit:g}) while the server "
                                                    "process is alive"))
                return
            await asyncio.sleep(min(1.0, max(0.05, limit - idle)))

    @staticmethod
    def _on_stats(running: _Running, stats: BatchLine) -> None:
        """Keep the server's figures logged while measured requests run (warm-up and idle lines are not)."""
        if running.stats is not None:
            running.stats.append(stats)
            running.all_stats.append(stats)

    # -- the end ---------------------------------------------------------------------------------------

    async def _stop_all(self) -> None:
        """Tear down whatever is still up (an exception or cancellation got here first)."""
        for running in list(self._running.values()):
            if running.server is not None:
                await running.server.stop(0.0 if self._abort_now.is_set() else self.sweep.engine.shutdown_grace_s,
                                          now=self._abort_now.is_set())

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
        elif self._aborting:
            state = "aborted"
            reason = f"stopped on request; continue with specbench run --resume {self.run_dir.path}"
        else:
            state, reason = "completed", None
        with contextlib.suppress(StoreError):
            self.publish(SweepFinished(state=state, reason=reason))
        return SweepOutcome(state, reason, dict(self.states), failure=failure)


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host
