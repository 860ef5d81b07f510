"""Placement over cluster nodes (core/cluster_placement.py): one node per configuration, disjoint GPUs, and
a makespan close to the lower bound on a 4 x 8-GPU cluster."""

from __future__ import annotations

import random

import pytest

from specbench_tui.core.cluster_placement import best_order, lower_bound, pick_node, simulate
from specbench_tui.core.placement import Job


def test_tightest_fit_keeps_whole_nodes_for_wide_jobs() -> None:
    assert pick_node([8, 3, 5], 3) == 1
    assert pick_node([8, 3, 5], 4) == 2
    assert pick_node([8, 8], 8) == 0
    assert pick_node([7, 7], 8) is None


def test_every_job_on_one_node_with_disjoint_gpus() -> None:
    rng = random.Random(5)
    jobs = [Job(f"j{i}", rng.choice([1, 2, 4, 8]), rng.uniform(1, 10)) for i in range(60)]
    schedule = simulate(jobs, [8, 8, 4])
    by_key = {j.key: j for j in jobs}
    for a in schedule.slots:
        assert len(a.gpus) == by_key[a.key].gpus and max(a.gpus) < (4 if a.node == 2 else 8)
        for b in schedule.slots:
            if a is not b and a.node == b.node and a.start_s < b.end_s and b.start_s < a.end_s:
                assert not set(a.gpus) & set(b.gpus), (a, b)


def test_a_job_wider_than_every_node_is_refused() -> None:
    with pytest.raises(ValueError, match="largest node has 4"):
        simulate([Job("tp8", 8, 1.0)], [4, 4])


def test_lower_bound_counts_wide_jobs_one_per_node() -> None:
    jobs = [Job(f"w{i}", 8, 10.0) for i in range(4)]
    assert lower_bound(jobs, [8, 8]) == 20.0
    assert best_order(jobs, [8, 8]).makespan_s == 20.0


def test_mixed_tp_on_four_nodes_is_within_ten_percent_of_the_bound() -> None:
    for seed in range(6):
        rng = random.Random(seed)
        jobs = [Job(f"c{i}", rng.choices([1, 4, 8], [0.6, 0.3, 0.1])[0], rng.uniform(60, 600))
                for i in range(rng.randint(48, 120))]
        schedule = best_order(jobs, [8, 8, 8, 8])
        assert schedule.ratio <= 1.10, (seed, schedule.ratio)
