"""The orchestrator: walks the plan, runs each configuration's server and workloads, publishes the truth.

Everything it learns is an event, published to every subscriber (the run directory's ``events.jsonl``
first, then the TUI or the headless printer) and every measurement is appended to ``results.jsonl`` the
moment it exists. It implements :class:`~specbench_tui.engine.control.SweepControl`; commands only set
flags, acted on at safe points (between requests, before a launch), except ``skip`` of the running
configuration and ``abort(now=True)``, which cancel the request in flight.

State rules (see ``ARCHITECTURE.md``): *crashed* means the server died after it was launched with a crash
signature in its log, or died while serving; *failed* means it never became ready (exit before ready,
start-up timeout, unusable launch), stalled, or stopped answering its health check. Either way the
remaining workloads are published as :class:`WorkloadNotRun`, never as measurements. An interrupted
configuration (abort, Ctrl-C, kill) gets no :class:`ConfigFinished`, so resume runs it again from its first
missing measurement key.

Where the server's own figures go: per workload, :class:`WorkloadFinished.server_log` (mean ``accept len``
and ``gen throughput`` of the ``Decode batch`` lines logged during the measured requests); per
configuration, :attr:`ConfigFinished.server_log_accept_length` (mean over all of them).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

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
from specbench_tui.core.launch import redact_argv, server_argv
from specbench_tui.core.logparse import BatchLine, summarize_decode
from specbench_tui.core.plan import Plan, PlannedConfig
from specbench_tui.core.records import STATUS_ERROR, STATUS_OK, STATUS_ZERO_OUTPUT, Measurement, MeasurementKey
from specbench_tui.core.signatures import SignatureSet
from specbench_tui.engine.client import ServerClient
from specbench_tui.engine.gpus import GpuBackend, GpuPool, NullBackend, wait_gpus_released
from specbench_tui.engine.profiles import EngineProfile, get_profile
from specbench_tui.engine.server import (
    DEATH_CRASH,
    DEATH_STALL,
    Death,
    ServerProcess,
    find_free_port,
    first_of,
    port_is_free,
)
from specbench_tui.engine.store import RunDir, StoreError
from specbench_tui.engine.workloads import Labels, Session, Workload, WorkloadError, build_workload

T = TypeVar("T")
Subscriber = Callable[[Event], None]
Sampler = Callable[[Callable[[Event], None]], Coroutine[Any, Any, None]]
"""An optional telemetry loop: called with ``publish``, runs until cancelled."""

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

    state: str
    """completed, aborted or failed."""
    reason: str | None = None
    states: dict[str, ConfigState] = field(default_factory=dict)


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
    gpu_peak_mib: dict[int, float] = field(default_factory=dict)
    gpu_util: list[float] = field(default_factory=list)
    gpu_power: list[float] = field(default_factory=list)


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
                 sampler: Sampler | None = None, python: str = sys.executable, resumed: bool = False,
                 retry_crashed: bool = False, api_key: str | None = None, gpu_sample_interval_s: float = 1.0,
                 excerpt_wait_s: float = 0.2) -> None:
        self.plan = plan
        self.sweep = plan.sweep
        self.run_dir = run_dir
        self.backend: GpuBackend = backend or NullBackend()
        self.profile: EngineProfile = get_profile(self.sweep.engine.profile)
        self.signatures = SignatureSet(self.sweep.engine.crash_signatures)
        self._sampler = sampler
        self._python = python
        self._resumed = resumed
        self._retry_crashed = retry_crashed
        self._api_key = api_key
        self._gpu_sample_interval_s = gpu_sample_interval_s
        self._excerpt_wait_s = excerpt_wait_s
        self._subscribers: list[Subscriber] = []
        self.workloads = [build_workload(w) for w in plan.workloads]
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
        self.pool: GpuPool | None = None

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
        self._unpaused.set()
        self._queue_changed.set()

    # -- resume ----------------------------------------------------------------------------------------

    def load_previous(self) -> None:
        """Read the run directory: kept measurements, final states and attempts of an earlier run."""
        in_progress: set[str] = set()
        for event in self.run_dir.read_events():
            if isinstance(event, ServerLaunching):
                self._attempts[event.config_id] = max(self._attempts.get(event.config_id, 0), event.attempt)
            if isinstance(event, ConfigStateChanged) and event.config_id in self.states:
                if event.state in (ConfigState.LAUNCHING, ConfigState.PENDING):
                    in_progress.add(event.config_id)
            if isinstance(event, ConfigFinished) and event.config_id in self.states:
                self.states[event.config_id] = event.state
                in_progress.discard(event.config_id)
        for config_id in in_progress:
            self.states[config_id] = ConfigState.PENDING
        for measurement in self.run_dir.read_measurements():
            self.done_keys.add(measurement.key)
            if measurement.status == STATUS_ERROR:
                self._error_keys.add(measurement.key)

    def _forget_errors(self, config_id: str) -> None:
        """A retried configuration re-measures the keys that errored; its good measurements are kept."""
        errored = {k for k in self._error_keys if k[0] == config_id}
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

    def preflight(self) -> list[str]:
        """Problems that would make every launch fail or wait for nothing; empty when all is well."""
        problems: list[str] = []
        engine = self.sweep.engine
        runnable = [c for c in self.plan.runnable() if self.states[c.id] == ConfigState.PENDING]
        missing: dict[str, str] = {}
        for config in runnable:
            for flag, what in ((("--model-path", "--model"), "model"),
                               (("--speculative-draft-model-path", "--speculative-draft-model"), "draft model")):
                for value in _arg_values(config.argv, flag):
                    if _local_path(value) and not Path(value).expanduser().exists():
                        missing.setdefault(value, what)
        for value, what in missing.items():
            hint = (" (/dev/shm is a RAM disk: it is emptied by every reboot; copy the model back first)"
                    if value.startswith("/dev/shm") else "")
            problems.append(f"{what} path {value} does not exist{hint}")
        if engine.launcher == "command" and engine.command and not Path(engine.command[0]).exists() \
                and not any((Path(p) / engine.command[0]).exists() for p in os.environ.get("PATH", "").split(":")):
            problems.append(f"engine.command {engine.command[0]} is not an executable path")
        if runnable and not port_is_free(engine.host, engine.port_base):
            problems.append(f"port {engine.port_base} on {engine.host} is in use: another server is running there "
                            "(stop it, or set engine.port_base)")
        indices = self.gpu_indices()
        visible = self.backend.device_count()
        if runnable and visible == 0 and (not indices or engine.launcher != "simulator"):
            hint = self.backend.hint or "no GPU is visible"
            problems.append(f"no GPUs to run on ({engine.launcher} launcher): {hint}")
        elif visible and self.sweep.gpus is not None and max(self.sweep.gpus) >= visible:
            problems.append(f"sweep.gpus asks for GPU {max(self.sweep.gpus)} but only {visible} are visible")
        needed = max((c.gpus_needed for c in runnable), default=0)
        if indices and needed > len(indices):
            problems.append(f"a configuration needs {needed} GPUs but {len(indices)} are available")
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
            return SweepOutcome("failed", "pre-flight failed", dict(self.states))
        self.pool = GpuPool(self.gpu_indices())
        self.publish(SweepStarted(sweep=self.sweep.name, run_dir=str(self.run_dir.path),
                                  total_configs=len(self.plan.configs), resumed=self._resumed))
        if not self._resumed:
            for note in self.plan.notes:
                self.publish(Notice(level="info", text=note))
        self._queue_initial()
        telemetry = asyncio.create_task(self._telemetry(), name="gpu-telemetry")
        try:
            await self._drain_queue()
        finally:
            telemetry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await telemetry
            await self._stop_all()
        return self._finish()

    def _queue_initial(self) -> None:
        for config in self.plan.configs:
            state = self.states[config.id]
            if config.skip_reason is not None:
                if not self._resumed or state != ConfigState.SKIPPED:
                    self._set_state(config, ConfigState.SKIPPED, config.skip_reason)
                    self.publish(ConfigFinished(config_id=config.id, name=config.name, state=ConfigState.SKIPPED,
                                                reason=config.skip_reason))
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
            config = self.plan.by_id(self._queue.popleft())
            if config.id in self._skip_pending:
                self._skip_pending.discard(config.id)
                self._finish_config(config, ConfigState.SKIPPED, "skipped by the user")
                continue
            if self._all_done(config):
                self._finish_config(config, ConfigState.DONE, "every measurement already recorded")
                continue
            assert self.pool is not None
            gpus = await self.pool.acquire(config.gpus_needed)
            task = asyncio.create_task(self._run_config_guarded(config, gpus), name=f"config-{config.name}")
            tasks.add(task)
            if not self.sweep.concurrent:
                await task
            tasks = {t for t in tasks if not t.done()}
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _all_done(self, config: PlannedConfig) -> bool:
        return all(k in self.done_keys for w in self.workloads for k in expected_keys(config.id, w))

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
            await self.pool.release(gpus)

    def _server_env(self, config: PlannedConfig, gpus: tuple[int, ...]) -> dict[str, str]:
        env = dict(os.environ)
        env.update(config.env)
        env.update(self.profile.shutdown_env)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in gpus)
        env["PYTHONUNBUFFERED"] = "1"
        if self.sweep.engine.sim_profile:
            env["SPECBENCH_SIM_PROFILE"] = self.sweep.engine.sim_profile
        return env

    async def _run_config(self, config: PlannedConfig, gpus: tuple[int, ...]) -> None:
        engine = self.sweep.engine
        running = _Running(config, gpus=gpus)
        self._running[config.id] = running
        attempt = self._attempts.get(config.id, 0) + 1
        self._attempts[config.id] = attempt
        port = find_free_port(engine.host, engine.port_base, self._ports)
        self._ports.add(port)
        argv = server_argv(engine, config, self._python, port, self._api_key)
        log_path = self.run_dir.log_path(config.name)
        server = ServerProcess(config.id, argv, self._server_env(config, gpus), log_path, self.profile,
                               self.signatures, self.publish, on_stats=lambda s: self._on_stats(running, s),
                               excerpt_wait_s=self._excerpt_wait_s)
        running.server = server
        client = ServerClient(f"http://{_url_host(engine.host)}:{port}", self.profile, api_key=self._api_key,
                              request_timeout_s=engine.request_timeout_s)
        self._set_state(config, ConfigState.LAUNCHING, f"attempt {attempt}" if attempt > 1 else None)
        outcome: tuple[ConfigState, str | None] | None = None
        try:
            try:
                pid = await server.start()
            except OSError as exc:
                outcome = (ConfigState.FAILED, f"cannot start the server: {exc.strerror or exc}")
                return
            self.publish(ServerLaunching(config_id=config.id, name=config.name, argv=redact_argv(argv), gpus=gpus,
                                         port=port, pid=pid, log_path=str(log_path), attempt=attempt))
            outcome = await self._serve(config, running, server, client)
        finally:
            await client.aclose()
            report = await server.stop(engine.shutdown_grace_s, now=self._abort_now.is_set())
            holding = await wait_gpus_released(self.backend, gpus, server.pids_seen,
                                               0.0 if self._abort_now.is_set() else engine.gpu_release_timeout_s)
            leftover = tuple(sorted(set(report.leftover_pids) | holding))
            if server.pid is not None:
                self.publish(ServerStopped(config_id=config.id, exit_code=report.exit_code,
                                           teardown_s=round(report.teardown_s, 3), leftover_pids=leftover))
            if leftover:
                self.publish(Notice(level="warning", config_id=config.id,
                                    text=f"{config.name}: processes {list(leftover)} still alive or holding GPU "
                                         "memory after teardown"))
            self._ports.discard(port)
            self._running.pop(config.id, None)
            if outcome is not None:
                await self._conclude(config, running, server, *outcome)

    async def _conclude(self, config: PlannedConfig, running: _Running, server: ServerProcess,
                        state: ConfigState, reason: str | None) -> None:
        if state == ConfigState.PENDING:  # interrupted by abort: no ConfigFinished, resume reruns it
            self._set_state(config, ConfigState.PENDING, reason)
            return
        crash = await server.crash_report()
        summary = summarize_decode(running.all_stats)
        self._finish_config(config, state, reason, signature=crash.signature if crash else None,
                            server_log_accept_length=summary.accept_length, gpu_summary=self._gpu_summary(running))

    def _finish_config(self, config: PlannedConfig, state: ConfigState, reason: str | None, **extra: Any) -> None:
        self._set_state(config, state, reason)
        self.publish(ConfigFinished(config_id=config.id, name=config.name, state=state, reason=reason, **extra))

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
            reason = f"{await self._final_reason(server, reason)} (before ready)"
            self._not_run(config, 0, f"server {state.value} before it was ready: {reason}")
        return state, reason

    @staticmethod
    async def _final_reason(server: ServerProcess, reason: str | None) -> str | None:
        """The crash's final signature and line (after its trailing lines), else ``reason`` as it was."""
        crash = await server.crash_report()
        return f"{crash.signature}: {crash.line.strip()[:300]}" if crash is not None else reason

    def _not_run(self, config: PlannedConfig, first: int, why: str) -> None:
        """Publish the workloads from index ``first`` that still miss measurements as not run, with why."""
        for workload in self.workloads[first:]:
            if any(k not in self.done_keys for k in expected_keys(config.id, workload)):
                self.publish(WorkloadNotRun(config_id=config.id, workload=workload.spec.name, reason=why))

    async def _serve_ready(self, config: PlannedConfig, running: _Running, server: ServerProcess,
                           client: ServerClient) -> tuple[ConfigState, str | None]:
        """The server is ready: record it, then run the workloads."""
        startup_s = time.monotonic() - server.started_at
        info = await client.server_info() or {}
        context_length = self.profile.context_length(info)
        self.publish(ServerReady(config_id=config.id, startup_s=round(startup_s, 3), context_length=context_length))
        self._set_state(config, ConfigState.RUNNING)
        session = Session(client, lambda: self._progress(running), context_length,
                          lambda level, text: self.publish(Notice(level=level, text=text, config_id=config.id)))
        labels = Labels(config.id, config.name, "")
        for index, workload in enumerate(self.workloads):
            keys = [k for k in expected_keys(config.id, workload) if k not in self.done_keys]
            if not keys:
                continue
            try:
                if index > 0 and not await self._healthy(running, client):
                    server.mark_dead(Death("unhealthy", "the server stopped answering its health check"))
                    raise ServerGone(server.death.result())
                await self._run_workload(running, workload, session, Labels(labels.config_id, labels.config,
                                                                            workload.spec.name), keys)
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
        if death is not None and death.kind not in (DEATH_CRASH, DEATH_STALL, "unhealthy"):
            state = ConfigState.CRASHED  # it served, then died
        if running.server is not None:
            reason = await self._final_reason(running.server, reason)
        why = "skipped by the user" if state == ConfigState.SKIPPED else f"server {state.value}: {reason}"
        self._not_run(config, index, why)
        return state, reason

    async def _healthy(self, running: _Running, client: ServerClient) -> bool:
        check = asyncio.ensure_future(client.healthy())
        return bool(await self._guard(running, check, watch_stall=False))

    async def _run_workload(self, running: _Running, workload: Workload, session: Session, labels: Labels,
                            keys: list[MeasurementKey]) -> None:
        config = running.config
        self.publish(WorkloadStarted(config_id=config.id, workload=workload.spec.name))
        try:
            await self._guard(running, asyncio.ensure_future(workload.prepare(session)))
        except WorkloadError as exc:
            self.publish(Notice(level="error", config_id=config.id, text=f"{workload.spec.name}: {exc}"))
            for key in keys:
                self._record(Measurement(config_id=config.id, config=config.name, workload=key[1], item=key[2],
                                         repeat=key[3], status=STATUS_ERROR, error=str(exc)))
            return
        await self._guard(running, asyncio.ensure_future(workload.warmup(session)))
        running.stats = []
        counts = {STATUS_OK: 0, STATUS_ERROR: 0, STATUS_ZERO_OUTPUT: 0}
        for key in keys:
            await self._wait_unpaused(running)
            if self._aborting or running.skip.is_set():
                break
            measurement = await self._guard(running, asyncio.ensure_future(
                workload.run(key[2], key[3], session, labels)))
            self._record(measurement)
            counts[measurement.status] = counts.get(measurement.status, 0) + 1
        summary = summarize_decode(running.stats)
        running.stats = None
        if self._aborting or running.skip.is_set():
            if running.skip.is_set():
                raise ServerGone(None)
            return
        self.publish(WorkloadFinished(config_id=config.id, workload=workload.spec.name,
                                      measured=sum(counts.values()), errors=counts[STATUS_ERROR],
                                      zero_output=counts[STATUS_ZERO_OUTPUT], server_log=summary.to_json()))

    def _record(self, measurement: Measurement) -> None:
        try:
            self.run_dir.append_measurement(measurement)
        except StoreError as exc:
            self._fail_store(str(exc))
            raise ServerGone(None) from exc
        self.done_keys.add(measurement.key)
        if measurement.status == STATUS_ERROR:
            self._error_keys.add(measurement.key)
        self.publish(MeasurementRecorded(config_id=measurement.config_id, record=measurement.to_json()))

    async def _wait_unpaused(self, running: _Running) -> None:
        if self._unpaused.is_set():
            return
        assert running.server is not None
        await first_of(self._unpaused.wait(), running.skip.wait(), running.server.death)

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

    # -- telemetry ---------------------------------------------------------------------------------------

    async def _telemetry(self) -> None:
        if self._sampler is not None:
            await self._sampler(self.publish)
            return
        if self.backend.device_count() == 0:
            return
        while True:
            samples = await asyncio.to_thread(self.backend.sample)
            if samples:
                self.publish(GpuSampled(samples=tuple(asdict(s) for s in samples)))
                for running in self._running.values():
                    for sample in samples:
                        if sample.index in running.gpus:
                            self._accumulate(running, sample)
            await asyncio.sleep(self._gpu_sample_interval_s)

    @staticmethod
    def _accumulate(running: _Running, sample: Any) -> None:
        if sample.mem_used_mib is not None:
            running.gpu_peak_mib[sample.index] = max(running.gpu_peak_mib.get(sample.index, 0.0), sample.mem_used_mib)
        if sample.util_pct is not None:
            running.gpu_util.append(sample.util_pct)
        if sample.power_w is not None:
            running.gpu_power.append(sample.power_w)

    @staticmethod
    def _gpu_summary(running: _Running) -> dict[str, Any] | None:
        if not running.gpu_peak_mib and not running.gpu_util:
            return None
        return {"gpus": list(running.gpus), "peak_mem_mib": max(running.gpu_peak_mib.values(), default=None),
                "mean_util_pct": sum(running.gpu_util) / len(running.gpu_util) if running.gpu_util else None,
                "mean_power_w": sum(running.gpu_power) / len(running.gpu_power) if running.gpu_power else None}

    # -- the end ---------------------------------------------------------------------------------------

    async def _stop_all(self) -> None:
        """Tear down whatever is still up (an exception or cancellation got here first)."""
        for running in list(self._running.values()):
            if running.server is not None:
                await running.server.stop(0.0 if self._abort_now.is_set() else self.sweep.engine.shutdown_grace_s,
                                          now=self._abort_now.is_set())

    def _finish(self) -> SweepOutcome:
        if self._store_error:
            state, reason = "failed", f"the run directory cannot be written: {self._store_error}"
        elif self._aborting:
            state, reason = "aborted", "stopped on request; continue with specbench run --resume " \
                                       f"{self.run_dir.path}"
        else:
            state, reason = "completed", None
        with contextlib.suppress(StoreError):
            self.publish(SweepFinished(state=state, reason=reason))
        return SweepOutcome(state, reason, dict(self.states))


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host
