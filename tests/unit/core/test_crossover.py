"""core.crossover and core.load: per-point figures, goodput under an SLO, the noisy-point rule, the matched
baseline per load point, B*, the schedule, the adaptive search, and seeded open-loop arrivals."""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest
from narrowing import present

from specbench_tui.core.analysis import analyse
from specbench_tui.core.crossover.results import ALWAYS_PAYS, CROSSES, NEVER_PAYS, Crossover, LoadAnalysis, PointRow
from specbench_tui.core.crossover.search import _fit_root, search_needs
from specbench_tui.core.crossover.stats import stat_of
from specbench_tui.core.events import LoadPointFinished
from specbench_tui.core.ledger import Ledger
from specbench_tui.core.load import AXIS_CONCURRENCY, LoadSpec, Slo, arrival_offsets, parse_label, point_item, point_keys
from specbench_tui.core.records import Measurement
from specbench_tui.core.results import RunAnalysis
from specbench_tui.sim.speed import ground_truth_crossover

GRID = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)


def cfg(cid: str, name: str, speculative: bool = True) -> dict[str, Any]:
    argv = ["--speculative-algorithm", "EAGLE3"] if speculative else []
    return {"id": cid, "name": name, "algorithm": "eagle3" if speculative else "autoregressive", "tp": 1,
            "argv": argv, "params": {}, "baseline": "ar" if speculative else None, "skip_reason": None}


def plan(*configs: dict[str, Any], load: LoadSpec, repeats: int = 3) -> dict[str, Any]:
    return {"sweep": "load", "configs": list(configs),
            "workloads": [{"name": "w", "kind": "code", "temperature": 0.0, "repeats": repeats,
                           "load": load.to_json()}]}


def point(cid: str, name: str, label: str, repeat: int, tps: float, n: int = 2, *, ttft: float = 0.01,
          itl: float = 0.01, tokens: int = 13, status: str = "ok") -> list[Measurement]:
    return [Measurement(config_id=cid, config=name, workload="w", item=point_item(["a", "b"], j)[1], repeat=repeat,
                        status=status, decode_tps=tps, ttft_s=ttft, itl_p99_s=itl, e2e_s=ttft + tokens / tps,
                        completion_tokens=tokens, started_at=1000.0 + j * 0.001, load=label)
            for j in range(n)]


AR = cfg("a0", "ar", speculative=False)
SP = cfg("s1", "spec")


def load_of(analysis: RunAnalysis) -> LoadAnalysis:
    """The run's load half (every plan here has a load workload)."""
    return present(analysis.load)


def row_at(load: LoadAnalysis, cid: str, label: str) -> PointRow:
    """Workload w's row of ``cid`` at load point ``label``, asserted measured."""
    return present(load.point(cid, "w", label))


def crossover_of(load: LoadAnalysis, cid: str, axis: str = AXIS_CONCURRENCY) -> Crossover:
    """Workload w's crossover of ``cid`` on ``axis``, asserted found."""
    return present(load.crossover(cid, "w", axis))


# ------------------------------------------------------------------------------------------- goodput, SLO


def test_goodput_counts_only_requests_within_every_slo_limit() -> None:
    load = LoadSpec(concurrency=(4,), requests=4, slo=Slo(ttft_ms=100, itl_ms=20))
    ms = [
        *[Measurement(config_id="a0", config="ar", workload="w", item="a#0", repeat=1, status="ok", decode_tps=50,
                      ttft_s=0.05, itl_p99_s=0.010, e2e_s=0.3, completion_tokens=13, load="c4")],  # good
        *[Measurement(config_id="a0", config="ar", workload="w", item="b#0", repeat=1, status="ok", decode_tps=50,
                      ttft_s=0.20, itl_p99_s=0.010, e2e_s=0.5, completion_tokens=13, load="c4"),   # TTFT too long
          Measurement(config_id="a0", config="ar", workload="w", item="a#1", repeat=1, status="ok", decode_tps=50,
                      ttft_s=0.05, itl_p99_s=0.030, e2e_s=0.5, completion_tokens=13, load="c4"),   # ITL too long
          Measurement(config_id="a0", config="ar", workload="w", item="b#1", repeat=1, status="error",
                      error="x", load="c4")],                                                        # failed
    ]
    # without request start times, the window is the runner's (LoadPointFinished.wall_s)
    events = [LoadPointFinished(config_id="a0", workload="w", load="c4", repeat=1, wall_s=2.0, requests=4,
                                server_log={"accept_length": 2.5})]
    row = row_at(load_of(analyse(plan(AR, load=load, repeats=1), ms, events)), "a0", "c4")
    # every view reads the ledger: it keeps the point's window and the server's own acceptance
    assert load_of(Ledger.from_run(plan(AR, load=load, repeats=1), ms, events).analyse()).point("a0", "w", "c4") == row
    assert row.server_accept_length == 2.5
    assert row.goodput_rps == pytest.approx(1 / 2.0)        # one good request in a 2 s window
    assert row.goodput_tps == pytest.approx(13 / 2.0)
    assert present(row.request_tps).median == pytest.approx(3 / 2.0)  # three ok requests
    assert present(row.output_tps).median == pytest.approx(39 / 2.0)
    assert row.slo_attainment == pytest.approx(1 / 3)
    assert row.meets_slo is False                            # p99 of TTFT is over 100 ms
    assert row.n_error == 1


def test_a_point_meets_the_slo_when_its_percentile_is_within_every_limit() -> None:
    load = LoadSpec(concurrency=(2,), requests=2, slo=Slo(ttft_ms=100, itl_ms=20, e2e_ms=5000))
    ms = point("a0", "ar", "c2", 1, 50.0, ttft=0.05, itl=0.015)
    row = row_at(load_of(analyse(plan(AR, load=load, repeats=1), ms, [])), "a0", "c2")
    assert row.meets_slo is True and row.slo_attainment == 1.0
    assert row.goodput_rps is not None and row.goodput_rps > 0  # window from the requests' own times


def test_no_slo_no_goodput() -> None:
    row = row_at(load_of(analyse(plan(AR, load=LoadSpec(concurrency=(2,), requests=2), repeats=1),
                                 point("a0", "ar", "c2", 1, 50.0), [])), "a0", "c2")
    assert row.goodput_rps is None and row.meets_slo is None


# ------------------------------------------------------------------------------------------ noisy points


def test_median_and_mad_over_three_or_more_repeats() -> None:
    s = present(stat_of([100.0, 104.0, 90.0]))
    assert s.median == 100.0 and s.mad == 4.0 and s.rel_spread == pytest.approx(0.04)
    two = present(stat_of([100.0, 150.0]))
    assert two.mad is None and two.rel_spread is None and (two.low, two.high) == (100.0, 150.0)


def test_a_noisy_point_is_flagged_and_never_decides_a_crossover_or_the_schedule() -> None:
    load = LoadSpec(concurrency=(1, 8, 64), requests=2)
    ms = []
    for r in (1, 2, 3):
        ms += point("a0", "ar", "c1", r, 100.0) + point("s1", "spec", "c1", r, 200.0)
        ms += point("a0", "ar", "c8", r, 80.0) + point("s1", "spec", "c8", r, [40.0, 120.0, 70.0][r - 1])  # noisy
        ms += point("a0", "ar", "c64", r, 50.0) + point("s1", "spec", "c64", r, 45.0)
    a = load_of(analyse(plan(AR, SP, load=load), ms, []))
    c8 = row_at(a, "s1", "c8")
    assert c8.noisy and "MAD" in (c8.noise or "")
    assert not row_at(a, "s1", "c1").noisy
    cross = crossover_of(a, "s1")
    # c8's median (70/80 = 0.875) would put B* in (1, 8]; being noisy it does not count: (1, 64]
    assert cross.status == CROSSES and (cross.low, cross.high) == (1.0, 64.0)
    assert any(e.load == "c8" and e.noisy for e in cross.evidence)
    entry = next(e for e in a.schedule if e.load == "c8")
    assert entry.best == "ar" and entry.candidates == 1 and entry.excluded[0][0] == "spec"


def test_quiet_repeats_are_not_noisy_and_the_margin_is_judged_against_the_spread() -> None:
    load = LoadSpec(concurrency=(1,), requests=2)
    ms = []
    for r, (x, y) in enumerate([(100.0, 101.0), (103.0, 99.0), (98.0, 102.0)], start=1):
        ms += point("a0", "ar", "c1", r, x) + point("s1", "spec", "c1", r, y)
    a = load_of(analyse(plan(AR, SP, load=load), ms, []))
    entry = a.schedule[0]
    assert entry.best == "spec" and entry.margin == pytest.approx(101 / 100 - 1)
    assert entry.significant is False  # 1 % apart, each with a MAD of 1-2 %


# ---------------------------------------------------------------------------- matched baseline per point


def test_the_speedup_at_a_load_point_pairs_with_the_baseline_at_that_same_point() -> None:
    load = LoadSpec(concurrency=(1, 8), requests=2)
    ms = (point("a0", "ar", "c1", 1, 100.0) + point("a0", "ar", "c8", 1, 50.0)
          + point("s1", "spec", "c1", 1, 150.0) + point("s1", "spec", "c8", 1, 60.0))
    a = load_of(analyse(plan(AR, SP, load=load, repeats=1), ms, []))
    assert present(row_at(a, "s1", "c1").speedup).median == pytest.approx(1.5)
    assert present(row_at(a, "s1", "c8").speedup).median == pytest.approx(60 / 50)  # not 60/100 against c1
    assert row_at(a, "s1", "c8").baseline == "ar"


def test_no_baseline_at_a_point_no_speedup_there() -> None:
    load = LoadSpec(concurrency=(1, 8), requests=2)
    ms = point("a0", "ar", "c1", 1, 100.0) + point("s1", "spec", "c1", 1, 150.0) + point("s1", "spec", "c8", 1, 60.0)
    a = load_of(analyse(plan(AR, SP, load=load, repeats=1), ms, []))
    assert row_at(a, "s1", "c8").speedup is None


def test_load_workloads_have_no_cells_and_sequential_ones_keep_theirs() -> None:
    load = LoadSpec(concurrency=(1, 8), requests=2)
    p = plan(AR, SP, load=load, repeats=1)
    p["workloads"].append({"name": "seq", "kind": "code", "temperature": 0.0, "repeats": 1})
    seq = [Measurement(config_id="a0", config="ar", workload="seq", item="x", repeat=1, status="ok", decode_tps=10.0)]
    a = analyse(p, point("a0", "ar", "c1", 1, 100.0) + seq, [])
    assert [w.name for w in a.workloads] == ["seq"]
    assert present(present(a.row("a0", "seq")).decode_tps).median == 10.0
    assert load_of(a).point("a0", "w", "c1") is not None


def test_a_measurement_without_a_load_point_reads_as_concurrency_one() -> None:
    old = Measurement.from_json({"config_id": "a0", "config": "ar", "workload": "w", "item": "a#0", "repeat": 1,
                                 "status": "ok", "decode_tps": 100.0})
    assert old.load is None and old.key == ("a0", "w", "a#0", 1)  # the key of a run directory from before
    a = analyse(plan(AR, load=LoadSpec(concurrency=(1, 8), requests=1), repeats=1), [old], [])
    assert present(row_at(load_of(a), "a0", "c1").per_user_tps).median == 100.0
    assert parse_label(None) == ("concurrency", 1.0)


# --------------------------------------------------------------------------------------------- crossover


def _curve_ms(speedups: dict[int, float], repeats: int = 1) -> list[Measurement]:
    ms = []
    for b, s in speedups.items():
        for r in range(1, repeats + 1):
            ms += point("a0", "ar", f"c{b}", r, 100.0) + point("s1", "spec", f"c{b}", r, 100.0 * s)
    return ms


@pytest.mark.parametrize(("curve", "status", "interval"), [
    ({1: 2.0, 8: 1.2, 16: 0.9, 64: 0.5}, CROSSES, (8.0, 16.0)),
    ({1: 0.95, 64: 0.4}, NEVER_PAYS, (None, 1.0)),
    ({1: 2.0, 64: 1.1}, ALWAYS_PAYS, (64.0, None)),
])
def test_crossover_status_and_interval(curve: dict[int, float], status: str, interval: tuple) -> None:
    load = LoadSpec(concurrency=(1, 8, 16, 64), requests=2)
    c = crossover_of(load_of(analyse(plan(AR, SP, load=load, repeats=1), _curve_ms(curve), [])), "s1")
    assert c.status == status and (c.low, c.high) == interval
    if status == CROSSES:
        assert 8 < present(c.estimate) < 16


def test_fitted_root_is_exact_for_a_ratio_of_linear_step_times() -> None:
    def s(b: float) -> float:
        return 3 * (0.01 + 0.00015 * (b - 1)) / (3 / 187 + 0.00015 * (b - 1) * 8)

    truth = ground_truth_crossover(100.0, 187.0, 3.0, 8, 0.15)
    assert _fit_root([(1.0, s(1)), (16.0, s(16)), (64.0, s(64))]) == pytest.approx(truth, rel=1e-9)


# ------------------------------------------------------------------------------------------ adaptive search


def _truth_speedup(b: float, tok_s: float, length: float, width: int, c_ms: float = 0.15) -> float:
    c = c_ms / 1000
    return length * (0.01 + c * (b - 1)) / (length / tok_s + c * (b - 1) * width)


DEMO = {"s2": (200.0, 2.4, 3), "s4": (95.0, 1.2, 5), "s5": (234.0, 3.0, 6), "s7": (187.0, 3.0, 8),
        "s11": (166.0, 3.0, 12), "s15": (121.0, 4.0, 16)}


def _search_against_the_truth(p: dict[str, Any], load: LoadSpec) -> dict[tuple[str, str], list[Measurement]]:
    """The search loop as the orchestrator runs it (refresh, measure what is wanted, repeat): each wanted point
    measured at the simulator's closed-form speedup on its load axis (the baseline, a0, at 100 tok/s)."""
    measured: dict[tuple[str, str], list[Measurement]] = {}
    for _ in range(20):
        a = analyse(p, [m for ms in measured.values() for m in ms], [])
        step = search_needs(load_of(a), list(a.configs))
        new = [(cid, label) for cid, ws in step.needs.items() for label in ws["w"] if (cid, label) not in measured]
        if not new:
            break
        for cid, label in new:
            value = parse_label(label)[1]
            tps = 100.0 if cid == "a0" else 100.0 * _truth_speedup(value, *DEMO[cid])
            measured[(cid, label)] = point(cid, cid, label, 1, tps, n=load.requests_at(label))
    return measured


def test_adaptive_search_on_the_closed_form_finds_every_crossover_with_under_half_the_grid() -> None:
    """The search loop as the orchestrator runs it (refresh, measure what is wanted, repeat), against the
    simulator's closed-form ground truth; every configuration's interval must hold its true B*."""
    configs = [AR] + [{**cfg(k, k), "name": k} for k in DEMO]
    load = LoadSpec(concurrency=GRID, waves=1)
    p = plan(*configs, load=load, repeats=1)
    measured = _search_against_the_truth(p, load)
    a = load_of(analyse(p, [m for ms in measured.values() for m in ms], []))
    for cid, (tok_s, length, width) in DEMO.items():
        truth = ground_truth_crossover(100.0, tok_s, length, width, 0.15)
        c = crossover_of(a, cid)
        low = c.low if c.low is not None else -math.inf
        high = c.high if c.high is not None else math.inf
        assert low < truth <= high, (cid, truth, c)
        if c.status == CROSSES:  # bracketed between grid neighbours
            assert GRID.index(int(present(c.high))) == GRID.index(int(present(c.low))) + 1
    assert len(measured) <= len(configs) * len(GRID) / 2
    assert a.points_measured == len(measured) and a.grid_points == len(configs) * len(GRID)


def test_grid_search_measures_every_point() -> None:
    load = LoadSpec(concurrency=(1, 4, 16), requests=2, search="grid")
    a = analyse(plan(AR, SP, load=load), [], [])
    step = search_needs(load_of(a), list(a.configs))
    assert step.needs["s1"]["w"] == ("c1", "c4", "c16") == step.needs["a0"]["w"]


def test_the_search_starts_with_the_ends_and_the_baseline_follows_its_configurations() -> None:
    a = analyse(plan(AR, SP, load=LoadSpec(concurrency=GRID)), [], [])
    step = search_needs(load_of(a), list(a.configs))
    assert step.needs["s1"]["w"] == ("c1", "c64") == step.needs["a0"]["w"]


# ------------------------------------------------------------------------------------------ arrivals, keys


def test_open_loop_arrivals_are_seeded_and_reproducible() -> None:
    a = arrival_offsets(4.0, 200, 7, "w", "r4", 1)
    assert a == arrival_offsets(4.0, 200, 7, "w", "r4", 1)           # same seed and point: same schedule
    assert a != arrival_offsets(4.0, 200, 8, "w", "r4", 1)           # another seed
    assert a != arrival_offsets(4.0, 200, 7, "w", "r4", 2)           # another repeat
    assert a[0] == 0.0 and all(x < y for x, y in zip(a, a[1:]))
    gaps = [y - x for x, y in zip(a, a[1:])]
    assert statistics.fmean(gaps) == pytest.approx(1 / 4.0, rel=0.2)  # exponential gaps at 4 req/s
    assert statistics.stdev(gaps) == pytest.approx(1 / 4.0, rel=0.25)  # Poisson: the spread equals the mean


def test_point_keys_cycle_items_and_number_rounds() -> None:
    keys = point_keys("c", "w", ["a", "b"], "c4", 2, 5)
    assert [k[2] for k in keys[:5]] == ["a#0", "b#0", "a#1", "b#1", "a#2"]
    assert {k[3] for k in keys} == {1, 2} and {k[4] for k in keys} == {"c4"} and len(set(keys)) == 10
    assert LoadSpec(concurrency=(8,)).requests_at("c8") == 32 and LoadSpec(request_rate=(2.0,)).requests_at("r2") == 64


def test_the_results_table_has_a_row_per_load_point_with_its_speedup_and_b_star() -> None:
    from specbench_tui.core.state import RunState
    from specbench_tui.tui.results_panel import build_rows

    load = LoadSpec(concurrency=(1, 8, 16, 64), requests=2)
    a = analyse(plan(AR, SP, load=load, repeats=1), _curve_ms({1: 2.0, 8: 1.2, 16: 0.9, 64: 0.5}), [])
    rows = build_rows(RunState(), a)
    spec_rows = sorted((r for r in rows.values() if r.config == "spec"), key=lambda r: r.order)
    assert [r.workload for r in spec_rows] == ["w @c1", "w @c8", "w @c16", "w @c64"]
    assert [round(present(r.speedup), 2) for r in spec_rows] == [2.0, 1.2, 0.9, 0.5]
    assert all("B* (8, 16]" in r.note for r in spec_rows)
    assert all(r.is_baseline for r in rows.values() if r.config == "ar")


def test_the_window_is_the_requests_own_span_when_they_carry_times() -> None:
    load = LoadSpec(concurrency=(2,), requests=2)
    ms = [Measurement(config_id="a0", config="ar", workload="w", item=f"a#{j}", repeat=1, status="ok",
                      decode_tps=50.0, ttft_s=0.01, e2e_s=0.5, completion_tokens=10, started_at=100.0 + j * 0.5,
                      load="c2") for j in range(2)]
    events = [LoadPointFinished(config_id="a0", workload="w", load="c2", repeat=1, wall_s=9.0, requests=2)]
    row = row_at(load_of(analyse(plan(AR, load=load, repeats=1), ms, events)), "a0", "c2")
    assert present(row.output_tps).median == pytest.approx(20 / 1.0)  # 100.0 → 101.0, not the runner's 9 s


def test_the_search_and_the_crossover_work_on_the_request_rate_axis_too() -> None:
    configs = [AR, {**cfg("s7", "s7"), "name": "s7"}]
    rates = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 24.0, 32.0, 64.0)
    load = LoadSpec(request_rate=rates, requests=2)
    p = plan(*configs, load=load, repeats=1)
    measured = _search_against_the_truth(p, load)
    c = crossover_of(load_of(analyse(p, [m for ms in measured.values() for m in ms], [])), "s7", "request_rate")
    truth = ground_truth_crossover(100.0, *DEMO["s7"], 0.15)
    assert c.status == CROSSES and (c.low, c.high) == (16.0, 24.0) and present(c.low) < truth <= present(c.high)
    assert len(measured) < 2 * len(rates)
