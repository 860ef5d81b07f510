"""Placement: in which order configurations take GPUs from the pool so that the whole sweep ends soonest.

Pure and deterministic; no I/O, no clock. The model is the orchestrator's dispatcher: configurations are
taken strictly in order, each waits until ``gpus_needed`` GPUs of the pool are free, then takes the lowest
free indices (exactly what :class:`specbench_tui.engine.gpus.GpuPool` does) and holds them for its whole
run (server start, workloads, shutdown, release).

How the orchestrator calls it::

    from specbench_tui.core.placement import order_configs, schedule_configs

    runnable = plan.runnable()
    order = order_configs(runnable, pool.indices, sweep.concurrent, estimate=previous_durations)
    preview = schedule_configs(runnable, pool.indices, sweep.concurrent, estimate=previous_durations)
    # preview.makespan_s, preview.lower_bound_s, preview.slots[i].gpus: the predicted timeline

    for config in order:                                   # one dispatcher, strictly in this order
        gpus = await pool.acquire(config.gpus_needed)      # waits for enough free GPUs
        task_group.create_task(run_config(config, gpus))   # releases the GPUs when done

With ``concurrent`` off the order is the plan's own and every configuration runs alone (makespan = sum of
durations). With it on, several orderings (largest first, longest first, largest area first) are simulated
and then improved by a bounded, seeded local search; the best one is returned. ``estimate`` gives each
configuration's expected duration in seconds (a mapping by configuration id or name, or a function); when
unknown every configuration counts 1.0, which still packs wide servers first and fills with narrow ones.

``lower_bound`` is max(longest job, total GPU-seconds / pool size): no placement can beat it. With a few
wide jobs it is loose (a TP8 server shares the box with nobody), so ``tight_lower_bound`` adds that; for the
campaign-sized mixes of the tests (24+ configurations of TP1/TP4/TP8 on 8 GPUs) the schedule lands within
a few percent of the plain bound.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar


class Placeable(Protocol):
    """What placement needs of a configuration (:class:`specbench_tui.core.plan.PlannedConfig` fits)."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def gpus_needed(self) -> int: ...


C = TypeVar("C", bound=Placeable)

Estimate = Mapping[str, float] | Callable[[Placeable], float | None] | None
"""Expected duration of a configuration, in seconds: by id or name, or computed; None: unknown."""

DEFAULT_DURATION_S = 1.0


@dataclass(frozen=True)
class Job:
    """A unit of placement: ``gpus`` GPUs held for ``duration_s`` seconds."""

    key: str
    gpus: int
    duration_s: float

    @property
    def area(self) -> float:
        """GPU-seconds."""
        return self.gpus * self.duration_s


@dataclass(frozen=True)
class Slot:
    """Where and when one job runs in a schedule."""

    key: str
    start_s: float
    end_s: float
    gpus: tuple[int, ...]


@dataclass(frozen=True)
class Schedule:
    """A placement: the dispatch order and the timeline it yields."""

    order: tuple[str, ...]
    """Job keys in dispatch order."""
    slots: tuple[Slot, ...]
    """One per job, in dispatch order."""
    makespan_s: float
    lower_bound_s: float
    concurrent: bool

    @property
    def ratio(self) -> float:
        """makespan / lower bound (1.0 is optimal; an empty schedule is 1.0)."""
        return self.makespan_s / self.lower_bound_s if self.lower_bound_s > 0 else 1.0

    @property
    def sequential_s(self) -> float:
        """The makespan of the same jobs one after another."""
        return sum(s.end_s - s.start_s for s in self.slots)


def _pool(pool: int | Sequence[int]) -> tuple[int, ...]:
    indices = tuple(range(pool)) if isinstance(pool, int) else tuple(pool)
    if not indices:
        raise ValueError("the GPU pool is empty")
    if len(set(indices)) != len(indices):
        raise ValueError(f"the GPU pool {indices} names a GPU twice")
    return indices


def _check(jobs: Sequence[Job], size: int) -> None:
    for job in jobs:
        if job.gpus < 1:
            raise ValueError(f"'{job.key}' needs {job.gpus} GPUs; at least 1 is required")
        if job.gpus > size:
            raise ValueError(f"'{job.key}' needs {job.gpus} GPUs but the pool has {size}")
        if job.duration_s < 0:
            raise ValueError(f"'{job.key}' has a negative duration")
    keys = [job.key for job in jobs]
    if len(set(keys)) != len(keys):
        raise ValueError("job keys must be unique")


def lower_bound(jobs: Iterable[Job], pool_size: int) -> float:
    """max(longest job, total GPU-seconds / pool size)."""
    jobs = list(jobs)
    if not jobs:
        return 0.0
    return max(max(j.duration_s for j in jobs), sum(j.area for j in jobs) / pool_size)


def tight_lower_bound(jobs: Iterable[Job], pool_size: int) -> float:
    """A sharper bound: jobs that take the whole pool overlap nothing, and at most ``k`` jobs wider than
    ``pool / (k + 1)`` run at once. Still no placement can beat it; used to judge small mixes honestly."""
    jobs = list(jobs)
    whole = sum(j.duration_s for j in jobs if j.gpus >= pool_size)
    rest = [j for j in jobs if j.gpus < pool_size]
    if not rest:
        return whole
    bound = lower_bound(rest, pool_size)
    for k in range(1, pool_size):
        bound = max(bound, sum(j.duration_s for j in rest if j.gpus * (k + 1) > pool_size) / k)
    return whole + bound


def simulate(jobs: Sequence[Job], pool: int | Sequence[int]) -> Schedule:
    """The timeline of the strict in-order dispatcher over ``pool`` (lowest free indices first)."""
    indices = _pool(pool)
    _check(jobs, len(indices))
    free = sorted(indices)
    running: list[tuple[float, int, tuple[int, ...]]] = []
    now = 0.0
    slots = []
    for seq, job in enumerate(jobs):
        while running and (running[0][0] <= now or len(free) < job.gpus):
            end, _, gpus = heapq.heappop(running)
            now = max(now, end)
            free.extend(gpus)
        free.sort()
        taken, free = tuple(free[:job.gpus]), free[job.gpus:]
        end = now + job.duration_s
        heapq.heappush(running, (end, seq, taken))
        slots.append(Slot(job.key, now, end, taken))
    makespan = max((s.end_s for s in slots), default=0.0)
    return Schedule(order=tuple(j.key for j in jobs), slots=tuple(slots), makespan_s=makespan,
                    lower_bound_s=lower_bound(jobs, len(indices)), concurrent=True)


def sequential(jobs: Sequence[Job], pool: int | Sequence[int]) -> Schedule:
    """Jobs one after another in the given order, each on the first GPUs of the pool."""
    indices = _pool(pool)
    _check(jobs, len(indices))
    now = 0.0
    slots = []
    for job in jobs:
        slots.append(Slot(job.key, now, now + job.duration_s, indices[:job.gpus]))
        now += job.duration_s
    return Schedule(order=tuple(j.key for j in jobs), slots=tuple(slots), makespan_s=now,
                    lower_bound_s=lower_bound(jobs, len(indices)), concurrent=False)


def _candidates(jobs: Sequence[Job]) -> list[list[Job]]:
    """Classic list-scheduling orders (LPT and its rigid-parallel variants); ties keep the input order."""
    return [
        sorted(jobs, key=lambda j: (-j.gpus, -j.duration_s)),
        sorted(jobs, key=lambda j: (-j.area, -j.gpus)),
        sorted(jobs, key=lambda j: (-j.duration_s, -j.gpus)),
    ]


def best_order(jobs: Sequence[Job], pool: int | Sequence[int], max_evaluations: int = 400,
               seed: int = 0) -> Schedule:
    """The shortest schedule found: the best classic order, then a seeded local search of swaps and moves
    (deterministic; ``max_evaluations`` simulations at most, stopping early at the lower bound)."""
    indices = _pool(pool)
    _check(jobs, len(indices))
    if not jobs:
        return simulate([], indices)
    best: Schedule | None = None
    best_jobs: list[Job] = []
    for candidate in _candidates(jobs):
        schedule = simulate(candidate, indices)
        if best is None or schedule.makespan_s < best.makespan_s - 1e-9:
            best, best_jobs = schedule, candidate
    assert best is not None
    bound = best.lower_bound_s
    rng = random.Random(seed)
    n = len(best_jobs)
    evaluations = 3
    while n > 1 and evaluations < max_evaluations and best.makespan_s > bound * (1 + 1e-9):
        trial = list(best_jobs)
        i, k = rng.sample(range(n), 2)
        if rng.random() < 0.5:
            trial[i], trial[k] = trial[k], trial[i]
        else:
            trial.insert(k, trial.pop(i))
        schedule = simulate(trial, indices)
        evaluations += 1
        if schedule.makespan_s <= best.makespan_s + 1e-9:  # sideways moves let it cross plateaus
            best, best_jobs = schedule, trial
    return best


def jobs_for(configs: Sequence[Placeable], estimate: Estimate = None) -> list[Job]:
    """One :class:`Job` per configuration, keyed by configuration id, with its estimated duration."""
    jobs = []
    for config in configs:
        duration: float | None
        if estimate is None:
            duration = None
        elif isinstance(estimate, Mapping):
            duration = estimate.get(config.id, estimate.get(config.name))
        else:
            duration = estimate(config)
        jobs.append(Job(config.id, int(config.gpus_needed),
                        DEFAULT_DURATION_S if duration is None or duration < 0 else float(duration)))
    return jobs


def schedule_configs(configs: Sequence[Placeable], pool: int | Sequence[int], concurrent: bool,
                     estimate: Estimate = None) -> Schedule:
    """The predicted schedule of ``configs`` (slots keyed by configuration id)."""
    jobs = jobs_for(configs, estimate)
    return best_order(jobs, pool) if concurrent else sequential(jobs, pool)


def order_configs(configs: Sequence[C], pool: int | Sequence[int], concurrent: bool,
                  estimate: Estimate = None) -> list[C]:
    """``configs`` in the order the dispatcher should take GPUs for them (the plan's order when sequential)."""
    if not concurrent:
        schedule_configs(configs, pool, False, estimate)  # validates sizes against the pool
        return list(configs)
    by_id = {config.id: config for config in configs}
    return [by_id[key] for key in schedule_configs(configs, pool, True, estimate).order]
