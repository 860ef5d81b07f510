"""Placement of configurations on a GPU pool: sequential = sum, concurrent close to the lower bound."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specbench_tui.core.placement import (
    Job,
    best_order,
    lower_bound,
    order_configs,
    schedule_configs,
    sequential,
    simulate,
    tight_lower_bound,
)


@dataclass(frozen=True)
class Cfg:
    id: str
    name: str
    gpus_needed: int


def random_mix(seed: int, low: int = 24, high: int = 48) -> list[Job]:
    """A campaign-sized mix: mostly TP1, some TP4, a few TP8, durations 1-10 minutes."""
    rng = random.Random(seed)
    return [Job(f"c{i}", rng.choices([1, 4, 8], [0.6, 0.3, 0.1])[0], rng.uniform(60, 600))
            for i in range(rng.randint(low, high))]


def assert_valid(schedule, jobs, pool):
    """No GPU runs two jobs at once, every job gets exactly its GPUs from the pool, each job runs once."""
    by_key = {j.key: j for j in jobs}
    assert sorted(schedule.order) == sorted(by_key)
    for slot in schedule.slots:
        job = by_key[slot.key]
        assert len(slot.gpus) == job.gpus and set(slot.gpus) <= set(pool)
        assert slot.end_s - slot.start_s == pytest.approx(job.duration_s)
    for gpu in pool:
        spans = sorted((s.start_s, s.end_s) for s in schedule.slots if gpu in s.gpus)
        assert all(a_end <= b_start + 1e-9 for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
    assert schedule.makespan_s >= schedule.lower_bound_s - 1e-9


@pytest.mark.parametrize("seed", range(8))
def test_concurrent_makespan_within_ten_percent_of_the_lower_bound(seed):
    jobs = random_mix(seed)
    assert {j.gpus for j in jobs} == {1, 4, 8} or seed  # the mixes do mix the three sizes
    schedule = best_order(jobs, 8)
    assert_valid(schedule, jobs, range(8))
    assert schedule.ratio <= 1.10, (schedule.makespan_s, schedule.lower_bound_s)
    serial = sequential(jobs, 8)
    assert serial.makespan_s == pytest.approx(sum(j.duration_s for j in jobs))
    assert schedule.makespan_s < serial.makespan_s


def test_every_mix_has_all_three_sizes_often():
    assert sum({j.gpus for j in random_mix(s)} == {1, 4, 8} for s in range(8)) >= 6


def test_lower_bound_definition():
    jobs = [Job("a", 8, 100), Job("b", 1, 50), Job("c", 4, 10)]
    assert lower_bound(jobs, 8) == max(100, (800 + 50 + 40) / 8)
    assert lower_bound([Job("x", 1, 500)], 8) == 500
    assert lower_bound([], 8) == 0


def test_tight_lower_bound_knows_whole_pool_jobs_run_alone():
    jobs = [Job("a", 8, 100), Job("b", 8, 100), Job("c", 1, 100)]
    assert lower_bound(jobs, 8) == pytest.approx(212.5)
    assert tight_lower_bound(jobs, 8) == 300
    assert best_order(jobs, 8).makespan_s == 300
    three_tp4 = [Job(f"t{i}", 4, 100) for i in range(3)]
    assert tight_lower_bound(three_tp4, 8) == 150 and best_order(three_tp4, 8).makespan_s == 200


def test_eight_tp1_or_two_tp4_run_side_by_side():
    tp1 = [Job(f"a{i}", 1, 60) for i in range(8)]
    assert best_order(tp1, 8).makespan_s == 60
    assert sorted(s.gpus for s in best_order(tp1, 8).slots) == [(i,) for i in range(8)]
    tp4 = [Job("x", 4, 60), Job("y", 4, 60)]
    assert {s.gpus for s in best_order(tp4, 8).slots} == {(0, 1, 2, 3), (4, 5, 6, 7)}


def test_simulate_is_a_strict_in_order_dispatcher_like_gpupool():
    jobs = [Job("long", 4, 100), Job("short", 4, 10), Job("wide", 8, 10), Job("tiny", 1, 5)]
    schedule = simulate(jobs, (2, 3, 4, 5, 6, 7, 8, 9))
    slots = {s.key: s for s in schedule.slots}
    assert slots["long"].gpus == (2, 3, 4, 5) and slots["short"].gpus == (6, 7, 8, 9)
    assert slots["wide"].start_s == 100, "waits for the whole pool"
    assert slots["tiny"].start_s == 110, "never overtakes the job before it"
    assert schedule.makespan_s == 115


def test_sequential_keeps_the_plan_order():
    jobs = [Job("b", 1, 5), Job("a", 8, 3), Job("c", 4, 2)]
    serial = sequential(jobs, 8)
    assert serial.order == ("b", "a", "c") and serial.makespan_s == 10
    assert [s.start_s for s in serial.slots] == [0, 5, 8] and serial.slots[2].gpus == (0, 1, 2, 3)
    assert not serial.concurrent and serial.sequential_s == 10


def test_order_configs_for_the_orchestrator():
    configs = [Cfg("id1", "tp1-a", 1), Cfg("id8", "tp8", 8), Cfg("id4", "tp4", 4), Cfg("id1b", "tp1-b", 1)]
    assert order_configs(configs, range(8), concurrent=False) == configs
    ordered = order_configs(configs, range(8), concurrent=True)
    assert sorted(c.id for c in ordered) == sorted(c.id for c in configs)
    assert ordered[0].id == "id8", "the whole-box server goes first, before the box fragments"
    by_name = order_configs(configs, 8, True, estimate={"tp1-a": 500.0, "id1b": 10.0})
    assert by_name.index(configs[0]) < by_name.index(configs[3]), "the long TP1 is placed before the short"
    preview = schedule_configs(configs, 8, True, estimate=lambda c: 100.0 * c.gpus_needed)
    assert preview.makespan_s == pytest.approx(800 + 400) and preview.lower_bound_s == pytest.approx(1000 + 200 / 8)


def test_a_config_wider_than_the_pool_is_refused():
    with pytest.raises(ValueError, match="needs 8 GPUs but the pool has 4"):
        order_configs([Cfg("x", "tp8", 8)], range(4), concurrent=True)
    with pytest.raises(ValueError, match="needs 8 GPUs"):
        order_configs([Cfg("x", "tp8", 8)], (0, 1), concurrent=False)
    with pytest.raises(ValueError, match="empty"):
        best_order([Job("a", 1, 1)], ())
    with pytest.raises(ValueError, match="unique"):
        simulate([Job("a", 1, 1), Job("a", 1, 2)], 8)


def test_deterministic():
    jobs = random_mix(42)
    assert best_order(jobs, 8) == best_order(jobs, 8)


def test_empty():
    assert best_order([], 8).makespan_s == 0 and best_order([], 8).ratio == 1.0
    assert order_configs([], 8, True) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 2, 4, 8]), st.floats(0, 1000)), max_size=14),
       st.sampled_from([8, 12, 16]))
def test_any_schedule_is_valid_and_no_worse_than_sequential(spec, pool_size):
    jobs = [Job(f"j{i}", gpus, duration) for i, (gpus, duration) in enumerate(spec)]
    schedule = best_order(jobs, pool_size, max_evaluations=40)
    assert_valid(schedule, jobs, range(pool_size))
    assert schedule.makespan_s <= sum(j.duration_s for j in jobs) + 1e-6
    assert schedule.makespan_s >= tight_lower_bound(jobs, pool_size) - 1e-6
