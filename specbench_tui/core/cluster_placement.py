"""Placement over the nodes of a cluster: one configuration's GPUs always on one node, the sweep ending soonest.

Pure and deterministic, the cluster counterpart of :mod:`specbench_tui.core.placement` (whose :class:`Job`
it reuses). The model is the Ray executor's placer (:mod:`specbench_tui.engine.cluster.ray_executor`):
configurations are taken strictly in order; each waits until *some node* has ``gpus_needed`` free GPUs, then
goes to the node where it fits tightest (fewest free GPUs left over; ties: the earlier node), so that wide
configurations keep finding whole nodes; it holds those GPUs for its whole run. A TP group never spans nodes.

``lower_bound`` is max(longest job, total GPU-seconds / GPUs of the cluster, and per width class: jobs wider
than half a node run at most one per node at a time); no placement can beat it.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Sequence
from dataclasses import dataclass

from specbench_tui.core.placement import Estimate, Job, Placeable, jobs_for


@dataclass(frozen=True)
class NodeSlot:
    """Where and when one job runs on the cluster."""

    key: str
    node: int
    start_s: float
    end_s: float
    gpus: tuple[int, ...]
    """GPU indices on that node."""


@dataclass(frozen=True)
class ClusterSchedule:
    order: tuple[str, ...]
    slots: tuple[NodeSlot, ...]
    makespan_s: float
    lower_bound_s: float

    @property
    def ratio(self) -> float:
        return self.makespan_s / self.lower_bound_s if self.lower_bound_s > 0 else 1.0


def _check(jobs: Sequence[Job], nodes: Sequence[int]) -> None:
    if not nodes or any(n < 1 for n in nodes):
        raise ValueError(f"a cluster needs nodes with at least one GPU each, got {list(nodes)}")
    widest = max(nodes)
    for job in jobs:
        if job.gpus < 1:
            raise ValueError(f"'{job.key}' needs {job.gpus} GPUs; at least 1 is required")
        if job.gpus > widest:
            raise ValueError(f"'{job.key}' needs {job.gpus} GPUs on one node but the largest node has {widest}")
        if job.duration_s < 0:
            raise ValueError(f"'{job.key}' has a negative duration")
    if len({job.key for job in jobs}) != len(jobs):
        raise ValueError("job keys must be unique")


def lower_bound(jobs: Sequence[Job], nodes: Sequence[int]) -> float:
    """No placement of ``jobs`` on ``nodes`` (GPUs per node) ends sooner."""
    if not jobs:
        return 0.0
    bound = max(max(j.duration_s for j in jobs), sum(j.area for j in jobs) / sum(nodes))
    for node_gpus in set(nodes):  # jobs wider than half of every node that can hold them: one per node at once
        wide = [j for j in jobs if 2 * j.gpus > max(nodes)]
        if wide and node_gpus == max(nodes):
            fitting = sum(1 for n in nodes if n >= min(j.gpus for j in wide))
            bound = max(bound, sum(j.duration_s for j in wide) / fitting)
    return bound


def pick_node(free: Sequence[int], gpus: int) -> int | None:
    """The node a job of ``gpus`` GPUs goes to, given each node's free GPU count: the tightest fit (ties: the
    earlier node); None when no node has that many free."""
    fits = [(count - gpus, index) for index, count in enumerate(free) if count >= gpus]
    return min(fits)[1] if fits else None


def simulate(jobs: Sequence[Job], nodes: Sequence[int]) -> ClusterSchedule:
    """The timeline of the strict in-order dispatcher over ``nodes`` (GPUs per node)."""
    _check(jobs, nodes)
    free: list[list[int]] = [list(range(n)) for n in nodes]
    running: list[tuple[float, int, int, tuple[int, ...]]] = []
    now = 0.0
    slots: list[NodeSlot] = []
    for seq, job in enumerate(jobs):
        while True:
            while running and running[0][0] <= now:
                _, _, node, gpus = heapq.heappop(running)
                free[node].extend(gpus)
            node_index = pick_node([len(f) for f in free], job.gpus)
            if node_index is not None:
                break
            now = running[0][0]
        free[node_index].sort()
        taken, free[node_index] = tuple(free[node_index][:job.gpus]), free[node_index][job.gpus:]
        end = now + job.duration_s
        heapq.heappush(running, (end, seq, node_index, taken))
        slots.append(NodeSlot(job.key, node_index, now, end, taken))
    return ClusterSchedule(order=tuple(j.key for j in jobs), slots=tuple(slots),
                           makespan_s=max((s.end_s for s in slots), default=0.0),
                           lower_bound_s=lower_bound(jobs, nodes))


def best_order(jobs: Sequence[Job], nodes: Sequence[int], max_evaluations: int = 400,
               seed: int = 0) -> ClusterSchedule:
    """The shortest schedule found: the best classic order (widest, largest area, longest first), then a
    seeded local search of swaps and moves, stopping at the lower bound."""
    _check(jobs, nodes)
    if not jobs:
        return simulate([], nodes)
    candidates = [sorted(jobs, key=lambda j: (-j.gpus, -j.duration_s)),
                  sorted(jobs, key=lambda j: (-j.area, -j.gpus)),
                  sorted(jobs, key=lambda j: (-j.duration_s, -j.gpus))]
    scored = [(simulate(c, nodes), c) for c in candidates]
    best, best_jobs = min(scored, key=lambda pair: pair[0].makespan_s)
    rng = random.Random(seed)
    n, evaluations = len(best_jobs), len(candidates)
    while n > 1 and evaluations < max_evaluations and best.makespan_s > best.lower_bound_s * (1 + 1e-9):
        trial = list(best_jobs)
        i, k = rng.sample(range(n), 2)
        if rng.random() < 0.5:
            trial[i], trial[k] = trial[k], trial[i]
        else:
            trial.insert(k, trial.pop(i))
        schedule = simulate(trial, nodes)
        evaluations += 1
        if schedule.makespan_s <= best.makespan_s + 1e-9:
            best, best_jobs = schedule, trial
    return best


def order_on_cluster(configs: Sequence[Placeable], nodes: Sequence[int], estimate: Estimate = None) -> list[str]:
    """Configuration ids in the order the cluster's dispatcher should place them."""
    return list(best_order(jobs_for(configs, estimate), nodes).order)
