"""The load axis inside a sweep: which load points each configuration runs, and running them.

The driver (:class:`LoadDriver`) is the engine's side: it says which points a configuration still misses
(the job sink's ``points``); :func:`run_load_workload` is the executor's side, run against the live server.
Which points are wanted comes from the single analysis
(:func:`specbench_tui.core.crossover.search.search_needs` over
:func:`specbench_tui.core.analysis.analyse`), recomputed after every point: with ``search = "adaptive"`` a
configuration starts with the ends of the axis and probes towards its crossover, and its matched baseline
measures the union of its configurations' probes. A configuration that finished while its search still wants
points is queued again (another round) by the orchestrator. Nothing here is remembered that the run
directory does not hold, so a resumed run continues the same search.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar

from specbench_tui.core.analysis import analyse
from specbench_tui.core.context_ladder import KIND as LADDER_KIND
from specbench_tui.core.crossover.ladder import ladder_needs
from specbench_tui.core.crossover.search import SearchStep, search_needs
from specbench_tui.core.events import LoadPointFinished, WorkloadFinished, WorkloadStarted
from specbench_tui.core.load import AXIS_CONCURRENCY, parse_label, point_keys
from specbench_tui.core.measuring_host import server_ttft_mean, starved
from specbench_tui.core.plan import Plan, PlannedConfig
from specbench_tui.core.records import ERROR_KIND_CRASH, STATUS_ERROR, Measurement, MeasurementKey
from specbench_tui.engine.executor import JobSink
from specbench_tui.engine.gpus.energy import EnergyMeter
from specbench_tui.engine.host_meter import HostMeter
from specbench_tui.engine.loadrun import open_files_refusal, run_point, warm_up
from specbench_tui.engine.workloads import Labels, Session, Workload, WorkloadError, server_ttft_counters

if TYPE_CHECKING:
    from specbench_tui.core.logparse import BatchLine
    from specbench_tui.core.sweep.schema import WorkloadSpec

T = TypeVar("T")


class LoadAttempt(Protocol):
    """What a load workload needs of the attempt it runs in (:class:`specbench_tui.engine.attempt.Attempt`):
    the configuration and its sink, the guard around requests, the pause and cache-policy steps, and the
    server's figures over a point."""

    @property
    def config(self) -> PlannedConfig: ...
    @property
    def sink(self) -> JobSink: ...
    @property
    def aborting(self) -> bool: ...
    @property
    def skipped(self) -> bool: ...
    async def guard(self, task: asyncio.Future[T], watch_stall: bool = True,
                    active: Callable[[], int] | None = None) -> T: ...
    def publish_notice(self, level: str, text: str) -> None: ...
    def record(self, measurement: Measurement) -> None: ...
    async def wait_unpaused(self) -> None: ...
    async def start_measurement(self, session: Session, spec: WorkloadSpec) -> bool: ...
    def stamp(self, measurement: Measurement, spec: WorkloadSpec, cold: bool) -> Measurement: ...
    def open_window(self) -> None: ...
    def busy(self, busy: bool) -> None: ...
    def request_sent(self, idle_before: bool) -> None: ...
    def take_stats(self) -> list[BatchLine]: ...
    def server_figures(self, stats: list[BatchLine]) -> dict[str, object]: ...
    def note_retractions(self, what: str, figures: Mapping[str, object]) -> None: ...
    def energy_meter(self) -> EnergyMeter: ...


MAX_ROUNDS = 64
"""Search rounds (relaunches of the configurations that still miss points) before the sweep gives up."""


class LoadDriver:
    """Search state of one sweep: which load points each configuration must still measure."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self._plan_json = plan.to_json()
        self.specs = {w.name: w for w in plan.workloads if w.load is not None}
        self.ladders = {w.name: w for w in plan.workloads if w.kind == LADDER_KIND}
        """Context ladders: which rungs each configuration runs is searched the same way (core/crossover/ladder.py)."""
        self.records: dict[MeasurementKey, Measurement] = {}
        self.step = SearchStep({})
        self.rounds = 0

    @property
    def active(self) -> bool:
        return bool(self.specs) or bool(self.ladders)

    def observe(self, measurement: Measurement) -> None:
        if measurement.workload in self.specs or measurement.workload in self.ladders:
            self.records[measurement.key] = measurement

    def forget(self, keys: set[MeasurementKey]) -> None:
        for key in keys:
            self.records.pop(key, None)

    def refresh(self) -> SearchStep:
        if not self.active:
            return self.step
        analysis = analyse(self._plan_json, list(self.records.values()), ())
        self.step = search_needs(analysis.load, list(analysis.configs)) if analysis.load else SearchStep({})
        if analysis.ladder is not None:
            needs, reasons = ladder_needs(analysis.ladder, list(analysis.configs))
            merged = {cid: dict(ws) for cid, ws in self.step.needs.items()}
            for cid, ws in needs.items():
                merged.setdefault(cid, {}).update({w: tuple(v) for w, v in ws.items()})
            self.step = SearchStep(merged, (*self.step.reasons, *reasons))
        return self.step

    def ladder_keys(self, config_id: str, workload: Workload) -> list[MeasurementKey]:
        """Every key of the rungs this configuration must have measured now (done ones included), in run order:
        repeat by repeat, rungs from the smallest context up."""
        wanted = set(self.labels(config_id, workload.spec.name))
        return [(config_id, workload.spec.name, item, repeat) for repeat in range(1, workload.spec.repeats + 1)
                for item in workload.items() if item in wanted]

    def labels(self, config_id: str, workload: str) -> tuple[str, ...]:
        return self.step.needs.get(config_id, {}).get(workload, ())

    def keys(self, config_id: str, workload: Workload) -> list[tuple[str, str, str, int, str]]:
        """Every key of the points this configuration must have measured now (done ones included)."""
        spec = workload.spec
        assert spec.load is not None
        return [k for label in self.labels(config_id, spec.name)
                for k in point_keys(config_id, spec.name, workload.items(), label, spec.repeats,
                                    spec.load.requests_at(label))]

    def todo(self, config_id: str, workload: Workload, done: set[MeasurementKey]) -> list[tuple[str, int]]:
        """The ``(label, repeat)`` points of this configuration that still miss a measurement, in order."""
        spec = workload.spec
        assert spec.load is not None
        out = []
        for label in self.labels(config_id, spec.name):
            count = spec.load.requests_at(label)
            for repeat in range(1, spec.repeats + 1):
                keys = point_keys(config_id, spec.name, workload.items(), label, 1, count)
                if any((k[0], k[1], k[2], repeat, k[4]) not in done for k in keys):
                    out.append((label, repeat))
        return out

    def describe(self) -> Callable[[], str]:
        return lambda: "; ".join(self.step.reasons)


def point_refusal(label: str) -> str | None:
    """Why a closed-loop point cannot run on this machine (too few open files for its connections), else None."""
    axis, value = parse_label(label)
    return open_files_refusal(int(value)) if axis == AXIS_CONCURRENCY else None


def refuse_point(attempt: LoadAttempt, workload: Workload, label: str, repeat: int, why: str) -> None:
    """Record every request of a point-repeat as not sent, with why (it is not tried on this machine again)."""
    spec, config = workload.spec, attempt.config
    assert spec.load is not None
    attempt.publish_notice("error", f"{config.name} {spec.name} {label} repeat {repeat}: not run: {why}")
    for key in point_keys(config.id, spec.name, workload.items(), label, 1, spec.load.requests_at(label)):
        attempt.record(Measurement(config_id=config.id, config=config.name, workload=spec.name, item=key[2],
                                   repeat=repeat, status=STATUS_ERROR, load=label, error_kind="open_files",
                                   error=f"not sent: {why}"[:500]))


async def run_load_workload(attempt: LoadAttempt, workload: Workload, session: Session, labels: Labels) -> None:
    """Measure every point-repeat this configuration still misses, asking the sink after each (the search is
    refreshed by every measurement), until it wants nothing more of this server. A point-repeat is run whole (a
    cut one is sent again in full, so its load is what it says)."""
    spec = workload.spec
    load = spec.load
    assert load is not None
    config, sink = attempt.config, attempt.sink
    keys = sink.expected(workload)
    sink.publish(WorkloadStarted(config_id=config.id, workload=spec.name, expected=len(keys)))
    try:
        await attempt.guard(asyncio.ensure_future(workload.prepare(session)))
    except WorkloadError as exc:
        attempt.publish_notice("error", f"{spec.name}: {exc}")
        for key in keys:
            attempt.record(Measurement(config_id=config.id, config=config.name, workload=key[1], item=key[2],
                                       repeat=key[3], status=STATUS_ERROR, error=str(exc),
                                       load=key[4] if len(key) == 5 else None))
        return
    warmed: set[str] = set()
    measured = errors = 0
    while not attempt.aborting and not attempt.skipped:
        todo = sink.points(workload)
        if not todo:
            break
        label, repeat = todo[0]
        await attempt.wait_unpaused()
        if attempt.aborting or attempt.skipped:
            break
        refusal = point_refusal(label)
        if refusal is not None:
            refuse_point(attempt, workload, label, repeat, refusal)
            errors += load.requests_at(label)
            continue
        if label not in warmed:
            await attempt.guard(asyncio.ensure_future(warm_up(workload, session, label)))
            warmed.add(label)
        in_flight: set[str] = set()
        cold = await attempt.start_measurement(session, spec)  # after the warm-up: the point starts cold

        taken: list[Measurement] = []

        def record(measurement: Measurement, cold: bool = cold, taken: list[Measurement] = taken) -> None:
            measurement = attempt.stamp(measurement, spec, cold)
            taken.append(measurement)
            attempt.record(measurement)

        counters = await attempt.guard(asyncio.ensure_future(server_ttft_counters(session)))
        attempt.open_window()
        meter, energy = HostMeter(), attempt.energy_meter()
        attempt.busy(True)
        try:
            point = await attempt.guard(asyncio.ensure_future(run_point(
                workload, session, labels, label, repeat, load.requests_at(label), load.arrival_seed,
                record, in_flight, attempt.request_sent, lambda: attempt.aborting)), active=in_flight.__len__)
        except BaseException as gone:
            death = getattr(gone, "death", None)
            for item in sorted(in_flight):  # the requests a dead server cut are on record, as sequentially
                if death is not None:
                    attempt.record(Measurement(config_id=config.id, config=config.name, workload=spec.name,
                                               item=item, repeat=repeat, status=STATUS_ERROR, load=label,
                                               error_kind=ERROR_KIND_CRASH,
                                               error=f"in flight when the server died: {death.reason}"[:500]))
            raise
        finally:
            attempt.busy(False)
        host, joules = meter.finish(), energy.finish()
        figures = attempt.server_figures(attempt.take_stats())
        attempt.note_retractions(f"{spec.name} {label} repeat {repeat}", figures)
        measured += point.sent
        errors += point.errors
        if point.stopped:  # a graceful stop cut the point: partial, not reported (resume sends it again whole)
            break
        after = await attempt.guard(asyncio.ensure_future(server_ttft_counters(session)))
        why = starved(taken, server_ttft_mean(counters, after, session.client.profile.ttft_histogram))
        if why is not None:
            attempt.publish_notice("warning", f"{config.name} {spec.name} {label} repeat {repeat}: {why} "
                                              f"({host.describe()}); the point is not reported")
        sink.publish(LoadPointFinished(config_id=config.id, workload=spec.name, load=label, repeat=repeat,
                                       wall_s=round(point.wall_s, 6), requests=point.sent, errors=point.errors,
                                       server_log=figures, host=host.to_json(), starved=why,
                                       energy=joules.to_json()))
    sink.publish(WorkloadFinished(config_id=config.id, workload=spec.name, measured=measured, errors=errors))
