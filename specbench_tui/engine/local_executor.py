"""The local executor: runs one configuration on this machine (an :class:`~specbench_tui.engine.executor.Executor`).

Per job: a port (leased machine-wide, :mod:`specbench_tui.engine.leases`), the server under its keeper
(:class:`~specbench_tui.engine.server.ServerProcess`) with ``CUDA_VISIBLE_DEVICES`` of its placement and
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (NVML's indices), the client, readiness and workloads
(:class:`~specbench_tui.engine.attempt.Attempt`), then the teardown. After a teardown the GPUs go back to the
pool only once none of the server's processes holds memory on them (its process tree, and every pid NVML
showed appearing on its GPUs while it was up: in a container NVML lists the host's pids, which match none of
ours); past ``engine.gpu_release_timeout_s`` the outcome names the GPUs still held (never placed on again; the
sweep fails cleanly). A server that died before ready because a stranger took its port between our choice and
its bind is no crash: the outcome is ``relaunch`` (at most :data:`PORT_RETRIES` times), on another port.
"""

from __future__ import annotations

import asyncio
import os
from functools import partial
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from specbench_tui.core.engines import simulator
from specbench_tui.core.events import ConfigState, Event, Notice, ServerLaunching, ServerStopped
from specbench_tui.core.launch import launch_env, redact_argv, server_argv
from specbench_tui.core.logparse import summarize_decode
from specbench_tui.core.outcomes import DEATH_CRASH
from specbench_tui.core.plan import Plan, PlannedConfig
from specbench_tui.core.signatures import SignatureSet
from specbench_tui.engine.attempt import Attempt, Verdict, final_reason
from specbench_tui.engine.client import ServerClient
from specbench_tui.engine.executor import Job, JobControl, JobSink, Outcome, OutcomeKind, Placement
from specbench_tui.core.gpu_faults import FENCE_FILE, GpuFault, fence_notice, replaced_reason
from specbench_tui.engine.gpus import GpuPool, release_failure_message, wait_gpus_released
from specbench_tui.engine.gpus.faults import FaultLedger, fences_doc, gpu_identity, restore_fences
from specbench_tui.engine.leases import Lease, LeasedGpuPool, Leases, describe_holder, gpu_keys, lease_port
from specbench_tui.engine.machine import Machine
from specbench_tui.core.engines.base import EngineProfile
from specbench_tui.engine.server import ServerProcess, find_free_port
from specbench_tui.rundir.store import StoreError

if TYPE_CHECKING:
    from specbench_tui.rundir.store import RunDir

PORT_RETRIES = 3
"""How many times a configuration whose port was taken by a stranger before its server bound it is launched
again on another port."""
CRASHED_GRACE_S = 3.0
"""The teardown's grace for a server whose log matched a crash signature: it is dying anyway (SGLang's crash
handler can sleep 65 s in crash diagnostics before it exits, serving no signal meanwhile), so the tree is
SIGKILLed after this much, not after the sweep's whole ``shutdown_grace_s``."""

_KINDS: dict[ConfigState, OutcomeKind] = {
    ConfigState.DONE: "done", ConfigState.CRASHED: "crashed", ConfigState.FAILED: "failed",
    ConfigState.SKIPPED: "skipped", ConfigState.PENDING: "interrupted",
}


def arg_values(argv: tuple[str, ...], flags: tuple[str, ...]) -> list[str]:
    """The values given to any of ``flags`` in ``argv``."""
    return [argv[i + 1] for i, part in enumerate(argv[:-1]) if part in flags]


def held_by_other_runs(leases: Leases, keys: Mapping[int, str]) -> dict[int, str]:
    """GPU index -> who holds its lease, for the GPUs another specbench process holds (this one's own leases
    are its configurations', which the views name themselves): ``specbench pid 123 of alice (run_dir runs/x,
    config ar)``."""
    held: dict[int, str] = {}
    for index, key in keys.items():
        note = leases.holder(key)
        if note is not None and note.get("pid") != os.getpid():
            held[index] = describe_holder(note)
    return held


@dataclass
class LocalPlacer:
    """This machine's GPU pool as a :class:`~specbench_tui.engine.executor.Placer`. Before each placement, and on
    the GPUs it took, the backend's pending Xid events are read (the GPUs a running configuration holds are its
    own: their events are its crash cause): a faulted GPU is fenced off with a pre-flight notice, a configuration
    it moves says so, one that no longer fits is refused (:class:`~specbench_tui.engine.gpus.pool.PlacementRefused`)."""

    pool: GpuPool
    faults: FaultLedger
    """The box's Xid faults (its machine's ledger)."""
    publish: Callable[[Event], None] | None = None
    save: Callable[[dict[str, object]], None] | None = None
    """Records the fenced GPUs in the run directory (kept across a resume)."""
    uuids: dict[int, str] = field(default_factory=dict)
    configs: dict[int, str] = field(default_factory=dict)
    """The configuration each placed GPU was given to (a fault that crashed it names it)."""

    @property
    def indices(self) -> tuple[int, ...]:
        return self.pool.indices

    def _say(self, text: str, level: str = "error") -> None:
        if self.publish is not None:
            self.publish(Notice(level=level, text=text))

    async def restore(self, doc: dict[str, object] | None, run_dir: str) -> None:
        """Fence again what an earlier run of this run directory fenced (resume), said with how to clear it."""
        faults, notices = restore_fences(doc, self.uuids, run_dir)
        for fault in faults:
            await self.pool.fence(fault)
        for text in notices:
            self._say(f"pre-flight: {text}", "error" if faults else "warning")

    async def _fence(self, fault: GpuFault) -> bool:
        if not await self.pool.fence(fault):
            return False
        self._say(fence_notice(fault, self.pool.healthy))
        try:
            if self.save is not None:
                self.save(fences_doc(self.pool.fenced.values(), self.uuids))
        except StoreError as exc:
            self._say(f"{exc}: the fence is not kept for a resume", "warning")
        return True

    async def final_check(self) -> None:
        """The sweep placed its last configuration: a fault seen since (on any GPU) is still said and fenced (the
        sweep's ending names every fenced GPU)."""
        for fault in self.faults.take_faults(self.pool.healthy):
            await self._fence(fault)

    async def acquire(self, count: int, *, config: str,
                      on_wait: Callable[[str], None] | None = None) -> Placement:
        while True:
            await self.fence_faults(self.pool.free)
            if isinstance(self.pool, LeasedGpuPool):
                gpus = await self.pool.acquire(count, on_wait=on_wait, config=config)
            else:
                gpus = await self.pool.acquire(count)
            if not await self.fence_faults(gpus):
                self.configs.update(dict.fromkeys(gpus, config))
                moved = [f for f in self.pool.fenced.values() if gpus and f.gpu < max(gpus)]  # first free goes first
                return Placement(gpus, note=replaced_reason(moved, gpus) if moved else None)
            await self.pool.release(gpus)  # what a fault fenced off is not given back

    async def fence_faults(self, gpus: tuple[int, ...]) -> bool:
        """Fence off each GPU of ``gpus`` with a pending Xid (said in a notice); whether one was."""
        fenced = False
        if (problem := self.faults.kernel_log_problem()) is not None:
            self._say(problem, "warning")
        for fault in self.faults.take_faults(gpus):
            fenced = await self._fence(fault) or fenced
        return fenced

    async def release(self, placement: Placement, keep: tuple[int, ...] = ()) -> None:
        """Give the GPUs back, but for one a reset-needing Xid crashed its configuration on: fenced off."""
        config = next((self.configs[i] for i in placement.gpus if i in self.configs), None)
        for fault in self.faults.take_crash_faults(placement.gpus, config):
            await self._fence(fault)
        await self.pool.release(tuple(i for i in placement.gpus if i not in keep))

    def close(self) -> None:
        if isinstance(self.pool, LeasedGpuPool):
            self.pool.close()


class LocalExecutor:
    """Runs configurations on this machine, side by side when the scheduler places them so."""

    def __init__(self, plan: Plan, run_dir: RunDir, machine: Machine, publish: Callable[[Event], None], *,
                 profile: EngineProfile, signatures: SignatureSet, python: str = sys.executable,
                 api_key: str | None = None, excerpt_wait_s: float = 0.2, port_base: int,
                 lease_dir: Path | None = None) -> None:
        """``publish`` takes the notices that belong to no job (leases, ports); ``port_base`` is where port
        choice starts; ``lease_dir`` the lease directory (:func:`specbench_tui.engine.leases.lease_dir`)."""
        self.plan = plan
        self.sweep = plan.sweep
        self.run_dir = run_dir
        self.machine = machine
        self._publish = publish
        self.profile = profile
        self.signatures = signatures
        self._python = python
        self._api_key = api_key
        self._excerpt_wait_s = excerpt_wait_s
        self.port_base = port_base
        self._lease_dir = lease_dir
        self.leases: Leases | None = None
        """Machine-wide port and GPU leases, taken when the executor opens."""
        self.placer: LocalPlacer | None = None
        self._sweep_reserved = max((profile.planned_reserved(c.argv) for c in plan.runnable()),
                                   default=0)
        self.stream_options = profile.sweep_stream_options((c.argv, c.algorithm) for c in plan.runnable())
        """What every measured request asks of an OpenAI-format stream: one choice for the whole sweep."""
        self._attempts: dict[str, Attempt] = {}
        self._ports: set[int] = set()
        self._port_conflicts: set[int] = set()
        """Ports a stranger took from one of our servers: never chosen again in this sweep."""
        self._port_retries: dict[str, int] = {}
        self._port_moved_said = False
        self._ever_ours: set[int] = set()

    # -- the executor's life ---------------------------------------------------------------------------

    async def open(self) -> LocalPlacer:
        """The GPU pool, leased machine-wide (a plain pool, with a warning, when no lease directory works)."""
        indices = self.machine.gpu_indices()
        try:
            self.leases = Leases(self._lease_dir, note={"run_dir": str(self.run_dir.path)})
        except OSError as exc:
            self._publish(Notice(level="warning", text=f"ports and GPUs are not leased: {exc}; another specbench "
                                                       "on this machine could pick the same ones"))
            self.placer = LocalPlacer(GpuPool(indices), self.machine.faults, self._publish)
            return await self._faults_kept(self.placer)
        if self.leases.warning:
            self._publish(Notice(level="warning", text=self.leases.warning))
        keys = await asyncio.to_thread(gpu_keys, self.machine.backend, indices)
        pool = LeasedGpuPool(indices, self.leases, keys, samples=self.machine.latest, ours=self.our_pids)
        self.placer = LocalPlacer(pool, self.machine.faults, self._publish)
        self.machine.held_elsewhere = partial(held_by_other_runs, pool.leases, keys)  # simulated GPUs: private
        return await self._faults_kept(self.placer)

    async def _faults_kept(self, placer: LocalPlacer) -> LocalPlacer:
        """The placer records its fenced GPUs in the run directory, fences again those an earlier run did, and
        reads this host's kernel log with the backend's Xid events."""
        placer.uuids, buses = await asyncio.to_thread(gpu_identity, self.machine.backend)
        placer.save = partial(self.run_dir.write_json, FENCE_FILE)
        self.machine.faults.watch_host_kernel_log(buses)
        try:
            kept = self.run_dir.read_json(FENCE_FILE)
        except StoreError as exc:
            kept = None
            self._publish(Notice(level="warning", text=f"{exc}: the GPU fences of an earlier run are not read"))
        await placer.restore(kept, str(self.run_dir.path))
        return placer

    async def close(self, now: bool = False) -> None:
        """Tear down whatever is still up (an exception or cancellation got here first), then let go of the
        leases still held."""
        for attempt in list(self._attempts.values()):
            if attempt.server is not None:
                await attempt.server.stop(0.0 if now else self.sweep.engine.shutdown_grace_s, now=now)
        if self.placer is not None:
            await self.placer.final_check()
            self.placer.close()
        self.machine.faults.stop_watching()  # the kernel log it opened (/dev/kmsg) is closed

    def our_pids(self) -> set[int]:
        """Every pid any of our servers had (their trees, and what NVML listed on their GPUs): a GPU sample,
        which may be a moment old, never makes our own last server look like another job."""
        for attempt in self._attempts.values():
            self._ever_ours |= attempt.gpu_pids
            if attempt.server is not None:
                self._ever_ours |= attempt.server.pids_seen
        return self._ever_ours | set(self.machine.owners)

    # -- one configuration -----------------------------------------------------------------------------

    async def run(self, job: Job, sink: JobSink, control: JobControl) -> Outcome:
        """Launch, serve, tear down; the outcome once the server's tree is gone and its GPUs are released."""
        engine = self.sweep.engine
        config, gpus = job.config, job.placement.gpus
        started = time.monotonic()
        attempt = Attempt(job, sink, control, self.machine, self.profile, engine, sweep_reserved=self._sweep_reserved)
        self._attempts[config.id] = attempt
        port, port_lease = self._choose_port(config)
        self._ports.add(port)
        argv = server_argv(engine, config, self._python, port, self._api_key)
        log_path = self.run_dir.log_path(config.name, config.id)
        server = ServerProcess(config.id, argv, self._server_env(config, gpus), log_path, self.profile,
                               self.signatures, sink.publish, on_stats=attempt.on_stats,
                               excerpt_wait_s=self._excerpt_wait_s, on_store_error=sink.store_failed, port=port)
        attempt.server = server
        hurry = asyncio.ensure_future(self._hurry_on_stop_now(control, server))
        said = ([f"attempt {job.attempt}"] if job.attempt > 1 else []) + [job.placement.note or ""]
        sink.state(ConfigState.LAUNCHING, "; ".join(filter(None, said)) or None)  # note: a fault moved it
        verdict: Verdict | None = None
        relaunch = False
        client: ServerClient | None = None
        try:
            attempt.gpu_pids_before = frozenset(await self.machine.pids_on(gpus))
            try:
                pid = await server.start()
            except StoreError as exc:  # logs/ cannot be written: the sweep stops, resume runs this one again
                sink.store_failed(str(exc))
                verdict = (ConfigState.PENDING, "the run directory cannot be written: resume runs it again")
            except OSError as exc:
                verdict = (ConfigState.FAILED, f"cannot start the server: {exc.strerror or exc}")
            if verdict is None:
                self.machine.owners[pid] = config.name
                self.machine.script(lambda box: box.attach(config.name, gpus, (pid,), **self._mem_fraction(config)))
                sink.publish(ServerLaunching(config_id=config.id, name=config.name, argv=redact_argv(argv),
                                             gpus=gpus, port=port, pid=pid, log_path=str(log_path),
                                             attempt=job.attempt, keeper_pid=server.keeper_pid,
                                             tree_id=server.tree_id))
                client = ServerClient(f"http://{_url_host(engine.host)}:{port}", self.profile,
                                      api_key=self._api_key, request_timeout_s=engine.request_timeout_s,
                                      stream_options=self.stream_options)
                verdict, relaunch = await self._serve(attempt, server, client, control)
        except asyncio.CancelledError:  # cancelled: torn down at once, no grace
            server.hurry()
            raise
        finally:
            try:  # abort-now during the teardown's grace wait still cuts it short
                held, message = await self._teardown(attempt, server, client, control, port, port_lease)
            finally:
                hurry.cancel()
        assert verdict is not None
        outcome = self._outcome(verdict, attempt, started, relaunch=relaunch)
        outcome.held_gpus, outcome.held_message = held, message
        if outcome.kind == "done" and outcome.reason is None:
            outcome.reason = job.placement.note  # the queue and the report keep why it ran where it did
        if outcome.kind in ("done", "crashed", "failed", "skipped"):
            crash = await server.crash_report()
            outcome.signature = crash.signature if crash else None
        return outcome

    async def _serve(self, attempt: Attempt, server: ServerProcess, client: ServerClient,
                     control: JobControl) -> tuple[Verdict, bool]:
        """Readiness and the workloads; a death before ready says why (its final signature) and marks the
        workloads not run, unless a stranger took the port (then: launched again, no crash)."""
        verdict, before_ready = await attempt.serve(server, client)
        if not before_ready or verdict[0] not in (ConfigState.CRASHED, ConfigState.FAILED):
            return verdict, False
        if await self._port_conflict(attempt.config, server, control):
            return (ConfigState.PENDING, f"port conflict: {server.stranger}; launched again on another port"), True
        reason = f"{await final_reason(server, verdict[1])} (before ready)"
        attempt.not_run(0, f"server {verdict[0].value} before it was ready: {reason}")
        return (verdict[0], reason), False

    @staticmethod
    async def _hurry_on_stop_now(control: JobControl, server: ServerProcess) -> None:
        """Abort now: a grace wait in progress ends at once and the whole tree is SIGKILLed."""
        await control.stop_now.wait()
        server.hurry()

    def _outcome(self, verdict: Verdict, attempt: Attempt, started: float, relaunch: bool = False) -> Outcome:
        state, reason = verdict
        kind: OutcomeKind = "relaunch" if relaunch else _KINDS[state]
        summary = summarize_decode(attempt.all_stats)
        gpu_summary = attempt.gpu_summary.to_json() if attempt.gpu_summary is not None else None
        return Outcome(kind, reason, server_log_accept_length=summary.accept_length, gpu_summary=gpu_summary,
                       wall_s=time.monotonic() - started)

    async def _teardown(self, attempt: Attempt, server: ServerProcess, client: ServerClient | None,
                        control: JobControl, port: int, port_lease: Lease | None) -> tuple[tuple[int, ...], str | None]:
        """Stop the server, wait for its GPUs to be released, say how it went; the GPUs still held and why."""
        config, gpus = attempt.config, attempt.gpus
        sink = attempt.sink
        now = control.stop_now.is_set()
        if self.machine.sampler is not None:  # the measured window ends with the last workload
            attempt.gpu_summary = self.machine.sampler.close_window(config.id) or attempt.gpu_summary
        if client is not None:
            await client.aclose()
        if server.pid is not None:
            await attempt.note_gpu_pids()
        report = await server.stop(_grace(server, self.sweep.engine.shutdown_grace_s),
                                   now=control.stop_now.is_set())
        self.machine.script(lambda box: box.detach(gpus))
        own = server.pids_seen | attempt.gpu_pids | ({server.pid} if server.pid is not None else set())
        self._ever_ours |= own
        holding, held, message = await self._wait_released(attempt, server.pids_seen | attempt.gpu_pids,
                                                           now or control.stop_now.is_set())
        for pid in own:
            if pid not in holding:  # a pid still holding memory keeps its name in the GPU panel
                self.machine.owners.pop(pid, None)
        leftover = tuple(sorted(set(report.leftover_pids) | holding))
        if server.pid is not None:
            sink.publish(ServerStopped(config_id=config.id, exit_code=report.exit_code,
                                       teardown_s=round(report.teardown_s, 3), leftover_pids=leftover))
        if report.leftover_pids:
            sink.publish(Notice(level="warning", config_id=config.id,
                                text=f"{config.name}: processes {list(report.leftover_pids)} still alive "
                                     "after teardown"))
        self._ports.discard(port)
        if port_lease is not None:
            port_lease.release()
        self._attempts.pop(config.id, None)
        return held, message

    async def _wait_released(self, attempt: Attempt, pids: set[int],
                             now: bool) -> tuple[set[int], tuple[int, ...], str | None]:
        """Wait until the stopped server's processes (``pids``: its process tree, and the pids NVML showed
        appearing on its GPUs) hold no memory on its GPUs: the pids still holding then, and, past
        ``engine.gpu_release_timeout_s``, the GPUs to keep out of the pool for good and why. After
        ``abort(now=True)`` nothing is waited for: leftovers are only reported, since the sweep is ending."""
        config, gpus = attempt.config, attempt.gpus
        backend = self.machine.backend
        if now:
            holding = await wait_gpus_released(backend, gpus, pids, 0.0)
            if holding:
                attempt.publish_notice("warning", f"{config.name}: pids {sorted(holding)} still hold GPU memory on "
                                                  f"{','.join(map(str, gpus))} (aborted: not waited for)")
            return holding, (), None
        timeout = self.sweep.engine.gpu_release_timeout_s
        holding = await wait_gpus_released(backend, gpus, pids, timeout)
        if not holding:
            return holding, (), None
        message = release_failure_message(gpus, holding, timeout)
        attempt.publish_notice("error", f"{config.name}: {message}")
        return holding, gpus, message

    def _server_env(self, config: PlannedConfig, gpus: tuple[int, ...]) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.profile.default_env)  # the sweep's own values win
        env.update(launch_env(config.env))
        env.update(self.profile.shutdown_env)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in gpus)
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # CUDA's default order can differ from NVML's (our indices)
        env["PYTHONUNBUFFERED"] = "1"
        env.update(simulator.launch_env(self.sweep.engine))
        return env

    def _mem_fraction(self, config: PlannedConfig) -> dict[str, float]:
        """``--mem-fraction-static`` of the configuration, for a scripted backend's memory curve."""
        for value in arg_values(config.argv, ("--mem-fraction-static",)):
            try:
                return {"mem_fraction": float(value)}
            except ValueError:
                pass
        return {}

    # -- ports -----------------------------------------------------------------------------------------

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
            self._publish(Notice(level="info", config_id=config.id,
                                 text=f"port {choice.skipped[0][0]} is taken ({why}{more}): {config.name} listens on "
                                      f"{choice.port}; servers take the next free port (set --port-base or "
                                      f"engine.port_base to choose)"))
        return choice.port, choice.lease

    async def _port_conflict(self, config: PlannedConfig, server: ServerProcess, control: JobControl) -> bool:
        """Whether a server that died before ready lost its port to a stranger (a process outside its tree took
        it between our choice and its bind, e.g. a specbench that leases elsewhere): then it is no crash. The
        configuration is launched again on another port (at most :data:`PORT_RETRIES` times)."""
        if control.stop_soon.is_set() or server.port is None:
            return False
        if server.stranger is None:
            await server.look_for_stranger()
        if server.stranger is None and server.said_address_in_use():  # a port it needed, taken and perhaps let go
            server.stranger = f"a port the server binds (port {server.port} or one of its own) was in use"
        if server.stranger is None or self._port_retries.get(config.id, 0) >= PORT_RETRIES:
            return False
        self._port_retries[config.id] = self._port_retries.get(config.id, 0) + 1
        self._port_conflicts.add(server.port)
        self._publish(Notice(level="warning", config_id=config.id,
                             text=f"{config.name}: {server.stranger}; it is launched again on another port"))
        return True


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def _grace(server: ServerProcess, grace_s: float) -> float:
    """The teardown's grace: the sweep's, or :data:`CRASHED_GRACE_S` at most once a crash signature matched."""
    death = server.death.result() if server.dead else None
    if death is not None and death.kind == DEATH_CRASH and death.signature is not None:
        return min(grace_s, CRASHED_GRACE_S)
    return grace_s
