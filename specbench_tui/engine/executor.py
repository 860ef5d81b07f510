"""The seam between the scheduler and whatever runs one configuration: the executor interface.

The scheduler (:mod:`specbench_tui.engine.scheduler`: queue, placement, estimates) decides *what* runs and
*where*; an :class:`Executor` runs one configuration there and says how it ended. The local executor
(:mod:`specbench_tui.engine.local_executor`) runs it on this machine (server under its keeper, client,
workloads, guard and stall watch, teardown, GPU release wait); a remote executor (Ray) runs the same thing on
a node and streams what happens back. The contract, in order:

1. **Placement.** :meth:`Executor.open` is called once, before the first configuration, and returns the
   :class:`Placer` the scheduler takes GPUs from. Each configuration is handed a :class:`Placement`: the GPU
   indices (NVML order, what ``CUDA_VISIBLE_DEVICES`` will say on that node) and the node (``None`` for this
   machine).
2. **Start.** :meth:`Executor.run` is awaited with a :class:`Job` (the configuration, its attempt number and
   placement), a :class:`JobSink` and a :class:`JobControl`. It returns once the server is gone (teardown
   done, GPUs released or given up on) with an :class:`Outcome`.
3. **Events out.** Everything the executor learns goes to the sink: :meth:`JobSink.publish` for events
   (``ServerLaunching``, ``ServerReady``, ``LogLine``, ``CrashDetected``, ``Workload*``, ``LoadPointFinished``,
   ``Notice``, ``ServerStopped``), :meth:`JobSink.record` for each measurement, :meth:`JobSink.state` for the
   ``launching``/``running`` transitions and :meth:`JobSink.server_log` for raw log lines when the executor
   does not write the log file itself. Only the engine writes the run directory. The final state is the
   engine's: it publishes ``ConfigFinished`` from the outcome.
4. **What to measure.** The executor asks the sink, not its own memory: :meth:`JobSink.todo` before each
   workload (the keys still missing), and, for a workload with a load axis, :meth:`JobSink.points` before each
   load point (the adaptive search is refreshed by every recorded measurement), so a resume and a retry
   measure only what is missing.
5. **Control in.** :class:`JobControl` holds the engine's signals: ``skip`` (this configuration),
   ``stop_now`` (abort at once: cancel the request in flight, no grace), ``stop_soon`` (abort after the
   request in flight) and ``unpaused`` (cleared while the queue is paused: finish the request in flight, then
   wait). They are :class:`asyncio.Event` objects of the engine's loop; a remote executor watches them and
   forwards them.
6. **Cancellation.** Cancelling the :meth:`Executor.run` task tears the server down at once (no grace) before
   :class:`asyncio.CancelledError` propagates.
7. **Teardown.** :meth:`Executor.close` ends whatever is still up; after it returns no process this executor
   started is alive and every lease it took is let go.

Outcomes (:data:`OutcomeKind`): ``done``, ``crashed`` (the server died with a crash signature, or died while
serving), ``failed`` (never ready, stalled, unhealthy, unusable launch), ``skipped``, ``interrupted`` (abort or
a store failure: no ``ConfigFinished``, resume runs it again), ``relaunch`` (the launch lost its port to a
stranger: no crash, launched again first in line) and ``node_lost`` (a remote node or its worker went away:
the server's fate is unknown, which is not a crash; the scheduler queues the configuration again).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from specbench_tui.core.events import ConfigState, Event
from specbench_tui.core.plan import PlannedConfig
from specbench_tui.core.records import Measurement, MeasurementKey
from specbench_tui.engine.workloads import Workload

OutcomeKind = Literal["done", "crashed", "failed", "skipped", "interrupted", "relaunch", "node_lost"]
"""How one configuration's run ended (see the module's docstring)."""

OUTCOME_STATES: dict[OutcomeKind, ConfigState] = {
    "done": ConfigState.DONE, "crashed": ConfigState.CRASHED, "failed": ConfigState.FAILED,
    "skipped": ConfigState.SKIPPED, "interrupted": ConfigState.PENDING, "relaunch": ConfigState.PENDING,
    "node_lost": ConfigState.PENDING,
}
"""The configuration state each outcome leaves (``node_lost`` becomes ``failed`` once its retries are spent)."""


class OpenFailed(Exception):
    """Raised by :meth:`Executor.open` when nothing can run (a cluster that cannot be reached, no node wide
    enough): each problem is a pre-flight problem, and the sweep fails as a failed pre-flight does."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class StopJob(Exception):
    """Raised by :meth:`JobSink.record` when the engine can take no more (the run directory cannot be written):
    the executor stops at once, tears down, and returns ``interrupted``."""


@dataclass(frozen=True)
class Placement:
    """Where a configuration runs."""

    gpus: tuple[int, ...]
    """GPU indices on the node, in NVML (PCI bus) order: the server gets ``CUDA_VISIBLE_DEVICES`` of them.
    Empty for an engine that runs on the CPU."""
    node: str | None = None
    """``None``: this machine. Otherwise the executor's own name for the node (a Ray node id)."""
    note: str | None = None
    """Why it was placed there and not where it would have been (a GPU fenced off by a fault); None: as usual."""


@dataclass(frozen=True)
class Job:
    """One configuration to run once."""

    config: PlannedConfig
    attempt: int
    """1 for the first launch of this configuration in this run directory, then 2, 3, ..."""
    placement: Placement
    workloads: Sequence[Workload]
    """The sweep's workloads, in order (built once by the engine; a remote executor rebuilds them from
    ``workload.spec``)."""


@dataclass
class Outcome:
    """How a job ended; the engine turns it into the configuration's state and ``ConfigFinished``."""

    kind: OutcomeKind
    reason: str | None = None
    signature: str | None = None
    """The crash signature (``crashed`` with a signature)."""
    server_log_accept_length: float | None = None
    """Mean ``accept len`` of the server's own log lines over every measured request."""
    gpu_summary: dict[str, object] | None = None
    """:meth:`~specbench_tui.engine.gpus.GpuSummary.to_json` of the measured window, when GPUs were sampled."""
    held_gpus: tuple[int, ...] = ()
    """GPUs the stopped server still held past ``engine.gpu_release_timeout_s``: never placed on again, and
    the sweep fails cleanly (``failure == "gpu_release"``)."""
    held_message: str | None = None
    wall_s: float = 0.0
    """Launch to teardown done (placement estimates)."""

    @property
    def state(self) -> ConfigState:
        return OUTCOME_STATES[self.kind]


class JobSink(Protocol):
    """Engine side, per job: where the executor's events and measurements go, and what is left to measure."""

    def publish(self, event: Event) -> None:
        """An event for every reader (persisted in the run directory when the event says so)."""

    def state(self, state: ConfigState, reason: str | None = None) -> None:
        """The configuration moved to ``launching`` or ``running`` (final states come from the outcome)."""

    def record(self, measurement: Measurement) -> None:
        """Append one measurement to the run's results; raises :class:`StopJob` when it cannot."""

    def server_log(self, lines: Sequence[str]) -> None:
        """Raw (already redacted) server output lines, appended to ``logs/<config>.log`` by the engine: for an
        executor that does not write the log file itself (a remote one). The local executor writes it."""

    def store_failed(self, reason: str) -> None:
        """The run directory failed under the executor (the log file cannot be written): the sweep stops."""

    def todo(self, workload: Workload) -> list[MeasurementKey]:
        """Keys of this configuration's ``workload`` still to measure, in run order (none: skip it)."""

    def expected(self, workload: Workload) -> list[MeasurementKey]:
        """Every key ``workload`` has for this configuration now, measured or not (``WorkloadStarted`` counts
        them): its items x repeats, or, with a load axis, every request of the points the search wants now."""

    def points(self, workload: Workload) -> list[tuple[str, int]]:
        """Load-axis workload: the ``(load label, repeat)`` points still to measure, in order, with the adaptive
        search refreshed by every measurement so far (asked again before each point; empty: done)."""


@dataclass
class JobControl:
    """Engine to executor: the signals of the control API for one job (events of the engine's loop)."""

    skip: asyncio.Event = field(default_factory=asyncio.Event)
    """Skip this configuration: cancel the request in flight, tear down, outcome ``skipped``."""
    stop_now: asyncio.Event = field(default_factory=asyncio.Event)
    """The sweep aborts at once: cancel the request in flight, tear down without grace, ``interrupted``."""
    stop_soon: asyncio.Event = field(default_factory=asyncio.Event)
    """The sweep aborts after the request in flight: ``interrupted``."""
    unpaused: asyncio.Event = field(default_factory=asyncio.Event)
    """Set while the queue runs; cleared on pause: finish the request in flight, then wait here."""

    @property
    def stopping(self) -> bool:
        """Whether nothing more is to be sent (skip or abort)."""
        return self.skip.is_set() or self.stop_soon.is_set() or self.stop_now.is_set()


class Placer(Protocol):
    """Hands out GPUs; the scheduler waits on it for each configuration."""

    @property
    def indices(self) -> tuple[int, ...]:
        """Every GPU it can place on (placement packs configurations over them)."""

    async def acquire(self, count: int, *, config: str,
                      on_wait: Callable[[str], None] | None = None) -> Placement:
        """``count`` GPUs on one node, waiting until they are free (``on_wait`` is told why it waits)."""

    async def release(self, placement: Placement, keep: tuple[int, ...] = ()) -> None:
        """Give the placement's GPUs back, except ``keep`` (held past the release timeout: never again)."""

    def close(self) -> None:
        """The sweep is over: let go of every lease still held."""


class Executor(Protocol):
    """Runs configurations (see the module's docstring for the whole contract)."""

    async def open(self) -> Placer:
        """Once, before the first job: what configurations can be placed on."""

    async def run(self, job: Job, sink: JobSink, control: JobControl) -> Outcome:
        """Run ``job`` to its end (teardown included); cancellable."""

    async def close(self, now: bool = False) -> None:
        """End everything still up (``now``: without grace); afterwards nothing it started is alive."""
