"""The crossover says what it assumed: the adaptive search bisects on the assumption of one crossing and says so;
when the points it measured disagree with it (a speedup that dips under 1 and comes back), it measures the gap
and reports "not monotonic" instead of a verdict. Measured by the search loop as the orchestrator runs it, against
a fake server whose speedup dips between c=3 and c=40."""

from __future__ import annotations

from collections.abc import Callable

from specbench_tui.core.analysis import analyse
from specbench_tui.core.crossover.results import ALWAYS_PAYS, NOT_MONOTONIC, LoadAnalysis
from specbench_tui.core.crossover.search import search_needs
from specbench_tui.core.load import LoadSpec, parse_label
from specbench_tui.core.records import Measurement
from test_crossover import AR, GRID, SP, load_of, plan, point


def dip(b: float) -> float:
    """Pays at 1-3, under 1 from 4 to 32 (the 10 of 12 grid points the issue's grid found under 1), back at 48."""
    return 1.3 if b <= 3 or b >= 40 else 0.7


def _search(speedup: Callable[[float], float], load: LoadSpec) -> tuple[LoadAnalysis, list[str], int]:
    p = plan(AR, SP, load=load, repeats=1)  # SP is s1, the speculative configuration
    measured: dict[tuple[str, str], list[Measurement]] = {}
    reasons: list[str] = []
    for _ in range(30):
        a = analyse(p, [m for ms in measured.values() for m in ms], [])
        step = search_needs(load_of(a), list(a.configs))
        reasons += step.reasons
        new = [(cid, label) for cid, ws in step.needs.items() for label in ws["w"] if (cid, label) not in measured]
        if not new:
            break
        for cid, label in new:
            tps = 100.0 if cid == "a0" else 100.0 * speedup(parse_label(label)[1])
            measured[(cid, label)] = point(cid, cid, label, 1, tps, n=load.requests_at(label))
    final = load_of(analyse(p, [m for ms in measured.values() for m in ms], []))
    return final, reasons, len({label for cid, label in measured if cid == "s1"})


def test_a_dipping_speedup_is_not_monotonic_not_paying_at_every_point() -> None:
    load, reasons, measured = _search(dip, LoadSpec(concurrency=GRID, waves=1))
    c = load.crossover("s1", "w")
    assert c is not None
    assert c.status == NOT_MONOTONIC, c
    assert "pays at every" not in c.text
    assert c.text.startswith("not monotonic (under 1 at 4–32, back above 1 at 48–64"), c.text
    assert measured == len(GRID), measured  # the gap was measured: the verdict rests on the points themselves
    assert any("not monotonic" in r and "measuring the gap" in r for r in reasons), reasons


def test_both_ends_paying_get_the_middle_checked_and_the_verdict_states_its_assumption() -> None:
    load, reasons, measured = _search(lambda b: 1.5 - b / 200, LoadSpec(concurrency=GRID, waves=1))
    c = load.crossover("s1", "w")
    assert c is not None and c.status == ALWAYS_PAYS
    assert measured == 3, measured  # the ends, then the middle
    assert any("checks the one crossing assumed" in r for r in reasons), reasons
    assert c.text == "pays at every measured point (> 64; assumes one crossing: 3 of 12 points measured)", c.text


def test_a_grid_that_measured_every_point_assumes_nothing() -> None:
    load, _, measured = _search(lambda b: 1.5 - b / 200, LoadSpec(concurrency=GRID, waves=1, search="grid"))
    c = load.crossover("s1", "w")
    assert c is not None and measured == len(GRID)
    assert c.text == "pays at every point (> 64)", c.text


def test_the_bisection_says_it_assumes_one_crossing() -> None:
    _, reasons, _ = _search(lambda b: 2.0 - b / 20, LoadSpec(concurrency=GRID, waves=1))
    assert any("(assumes one crossing)" in r for r in reasons), reasons


