"""The node side of the Ray executor: a Ray actor that runs one configuration with the local executor.

Ray places the actor in the configuration's placement group (``tp × dp`` GPUs packed on one node), so the
GPUs it was given (``get_accelerator_ids``) are the server's ``CUDA_VISIBLE_DEVICES``. The actor runs the very
code a local sweep runs (:class:`~specbench_tui.engine.local_executor.LocalExecutor`: a leased port, the server
under its keeper in a process group of its own, its log pumped line by line through the crash signatures,
the workload client on this node next to the server, the teardown and the GPU release wait) and streams what
happens back to the engine as batches of :class:`Item` (a Ray streaming generator). The engine alone writes
the run directory: the local executor here writes only a scratch directory on the node (the server's log as
this node saw it), removed afterwards.

Nothing here imports Ray at module level: the engine makes the actor class with :func:`actor_class`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specbench_tui.core.engines import simulator
from specbench_tui.core.engines.registry import get_profile
from specbench_tui.core.events import ConfigState, Event, GpuSampled, LogLine, LogLines, NodeFingerprinted, Notice
from specbench_tui.core.plan import Plan, PlannedConfig
from specbench_tui.core.records import Measurement, MeasurementKey
from specbench_tui.core.signatures import SignatureSet
from specbench_tui.core.sweep.schema import Sweep
from specbench_tui.engine.fingerprint import collect_async
from specbench_tui.engine.executor import Job, JobControl, Outcome, Placement, StopJob
from specbench_tui.engine.gpus import GpuBackend, GpuSample, GpuSampler, open_backend, samples_to_json
from specbench_tui.engine.local_executor import LocalExecutor
from specbench_tui.engine.machine import Machine
from specbench_tui.engine.workloads import Workload, build_workload
from specbench_tui.rundir.store import RunDir

CONTROLS = ("skip", "stop_now", "stop_soon", "pause", "unpause")


@dataclass(frozen=True)
class Item:
    """One thing the node tells the engine: ``kind`` is event, state, record, store_failed or outcome."""

    kind: str
    value: Any
    reason: str | None = None


@dataclass(frozen=True)
class NodeJob:
    """What the engine sends with a job: the configuration, and what is still to measure (only this job
    measures this configuration while it runs, so the engine's answer at the start stays true)."""

    plan: Plan
    config: PlannedConfig
    attempt: int
    todo: dict[str, list[MeasurementKey]]
    """Per workload name: the keys still missing."""
    expected: dict[str, list[MeasurementKey]]
    """Per workload name: every key it has for this configuration."""
    api_key: str | None = None
    port_base: int = 30000
    excerpt_wait_s: float = 0.2
    fingerprint: bool = False
    """The first job on its node: take the node's environment fingerprint (the run's environment document, under ``nodes``)."""
    node: str = ""
    """The node as events name it (``host/node-id``)."""
    gpu_sample_interval_s: float = 0.5


@dataclass(frozen=True)
class NodeInfo:
    node_id: str
    host: str
    gpus: tuple[int, ...]
    pid: int


class _Sink:
    """The local executor's :class:`~specbench_tui.engine.executor.JobSink` on the node: everything is queued
    for the engine; ``todo``/``expected`` answer from the job's snapshot."""

    def __init__(self, job: NodeJob, queue: asyncio.Queue[Item]) -> None:
        self._job = job
        self._queue = queue
        self.stopped = False

    def publish(self, event: Event) -> None:
        self._queue.put_nowait(Item("event", event))

    def state(self, state: ConfigState, reason: str | None = None) -> None:
        self._queue.put_nowait(Item("state", state, reason))

    def record(self, measurement: Measurement) -> None:
        if self.stopped:
            raise StopJob("the engine can take no more measurements")
        self._queue.put_nowait(Item("record", measurement))

    def server_log(self, lines: Sequence[str]) -> None:  # the local executor writes its own (scratch) log
        pass

    def store_failed(self, reason: str) -> None:
        self._queue.put_nowait(Item("store_failed", reason))

    def todo(self, workload: Workload) -> list[MeasurementKey]:
        return list(self._job.todo.get(workload.spec.name, []))

    def expected(self, workload: Workload) -> list[MeasurementKey]:
        return list(self._job.expected.get(workload.spec.name, []))

    def points(self, workload: Workload) -> list[tuple[str, int]]:
        return []  # load-axis workloads are refused before a Ray sweep starts


@dataclass
class _Running:
    control: JobControl = field(default_factory=JobControl)
    sink: _Sink | None = None


class NodeWorker:
    """The actor (see the module's docstring). One per placement group, so one configuration at a time."""

    def __init__(self) -> None:
        self._running = _Running()
        self._running.control.unpaused.set()

    async def where(self) -> NodeInfo:
        """The node and the GPUs Ray gave this actor (indices on the node, NVML order)."""
        import ray  # the actor runs inside Ray

        context = ray.get_runtime_context()
        ids = context.get_accelerator_ids().get("GPU", [])
        return NodeInfo(node_id=context.get_node_id(), host=socket.gethostname(),
                        gpus=tuple(sorted(int(i) for i in ids)), pid=os.getpid())

    async def control(self, what: str) -> None:
        """The engine's control signals for the job in flight."""
        control = self._running.control
        if what == "pause":
            control.unpaused.clear()
        elif what == "unpause":
            control.unpaused.set()
        elif what in ("skip", "stop_now", "stop_soon"):
            getattr(control, what).set()
            if what != "skip" and self._running.sink is not None and what == "stop_now":
                self._running.sink.stopped = True

    async def run(self, job: NodeJob, gpus: tuple[int, ...], node_id: str) -> AsyncIterator[list[Item]]:
        """Run ``job`` on ``gpus`` of this node; yields batches of items, the last one holding the outcome."""
        queue: asyncio.Queue[Item] = asyncio.Queue()
        sink = _Sink(job, queue)
        self._running.sink = sink
        task = asyncio.ensure_future(_run_local(job, gpus, node_id, sink, self._running.control))
        try:
            while True:
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await getter
                    batch = []
                else:
                    batch = [getter.result()]
                while not queue.empty():
                    batch.append(queue.get_nowait())
                if task.done():
                    while not queue.empty():
                        batch.append(queue.get_nowait())
                    try:
                        outcome = task.result()
                    except Exception as exc:  # noqa: BLE001 - reported to the engine, never lost
                        outcome = Outcome("failed", f"internal error on the node: {exc!r}")
                    batch.append(Item("outcome", outcome))
                    yield batch
                    return
                if batch:
                    yield batch
        finally:
            if not task.done():  # the engine went away mid-job (cancelled generator): tear down at once
                self._running.control.stop_now.set()
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task


class NodeMachine(Machine):
    """This node's GPUs as a local executor on it sees them, with its samples, sampler windows and summaries
    stamped with the node (the GPU panel groups them under it; ``Outcome.gpu_summary`` names it)."""

    def __init__(self, backend: GpuBackend, sweep: Sweep, publish: Callable[[Event], None], node: str) -> None:
        super().__init__(backend, sweep, publish)
        self.node = node

    def start_sampler(self, interval_s: float) -> None:
        if self.backend.device_count() == 0:
            return
        self.sampler = GpuSampler(self.backend, self.on_samples, interval_s=interval_s,
                                  loop=asyncio.get_running_loop(), node=self.node)
        self.sampler.start()

    def on_samples(self, samples: list[GpuSample]) -> None:
        self._publish(GpuSampled(samples=samples_to_json(samples, self.owners, node=self.node), node=self.node))


def _node_backend(plan: Plan) -> GpuBackend:
    if simulator.simulated(plan.sweep.engine):
        return open_backend("fake", count=max(8, max(plan.sweep.gpus or (0,)) + 1))
    return open_backend("auto")


async def _run_local(job: NodeJob, gpus: tuple[int, ...], node_id: str, sink: _Sink,
                     control: JobControl) -> Outcome:
    """The local executor on this node, in a scratch run directory, for one job."""
    plan = job.plan
    scratch = Path(tempfile.mkdtemp(prefix="specbench-node-"))
    try:
        run_dir = RunDir.create(scratch, plan.sweep.name, plan.sweep.text, {})
        profile = get_profile(plan.sweep.engine.profile)
        signatures = SignatureSet(plan.sweep.engine.crash_signatures, builtins=profile.crash_signatures)
        machine = NodeMachine(_node_backend(plan), plan.sweep, sink.publish, job.node)
        executor = LocalExecutor(plan, run_dir, machine, sink.publish, profile=profile, signatures=signatures,
                                 api_key=job.api_key, excerpt_wait_s=job.excerpt_wait_s, port_base=job.port_base,
                                 )
        await executor.open()
        if job.fingerprint:
            await _fingerprint(plan, machine, job.node, sink)
        machine.start_sampler(job.gpu_sample_interval_s)
        try:
            workloads = [build_workload(spec) for spec in plan.workloads]
            local_job = Job(config=job.config, attempt=job.attempt, placement=Placement(gpus, node_id),
                            workloads=workloads)
            return await executor.run(local_job, sink, control)
        finally:
            await executor.close(now=control.stop_now.is_set())
            await machine.stop_sampler()  # one last sample: the node as this job left it
            run_dir.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


async def _fingerprint(plan: Plan, machine: Machine, node: str, sink: _Sink) -> None:
    """This node's environment document (taken here, redacted here), as :class:`NodeFingerprinted`."""
    engine = plan.sweep.engine
    try:
        doc = await collect_async(backend=machine.backend, python=engine.python or sys.executable,
                                  packages=get_profile(engine.profile).python_packages,
                                  extra={"launcher": engine.launcher, "engine_profile": engine.profile})
    except Exception as exc:  # noqa: BLE001 - a fingerprint problem is said, never fatal
        sink.publish(Notice(level="warning", text=f"node {node}: no environment fingerprint: {exc}"))
        return
    sink.publish(NodeFingerprinted(node=node, fingerprint=doc))


def server_lines(event: Event) -> list[str]:
    """The lines of ``event`` that came from the server (a batch's, or one line that is not a note of
    specbench's own about it); empty for any other event."""
    if isinstance(event, LogLines):
        return list(event.lines)
    if isinstance(event, LogLine) and not event.line.startswith("specbench: "):
        return [event.line]
    return []


def actor_class() -> Any:
    """:class:`NodeWorker` as a Ray actor class (imports Ray)."""
    import ray

    return ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)(NodeWorker)
