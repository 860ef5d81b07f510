"""The TUI shows a capped load point as capped: the queue's note and the results table's row for the point say
``capped (64 in flight, cap 48)``, decided in the application layer (application/viewmodel.py) from the analysis,
in the report's words."""

from __future__ import annotations

from dataclasses import replace

from specbench_tui.application.viewmodel import build_view, capped_configs, point_marks
from specbench_tui.core.analysis import analyse
from specbench_tui.core.events import ConfigFinished, ConfigState
from specbench_tui.core.load import LoadSpec
from specbench_tui.core.state import RunState
from specbench_tui.tui.results_panel import build_rows
from test_crossover import AR, SP, plan, point

CAPPED = "capped (64 in flight, cap 48)"


def _analysis():  # the speculative server caps its running requests at 48, as SGLang resets it
    load = LoadSpec(concurrency=(1, 64), requests=2)
    ms = []
    for label in ("c1", "c64"):
        ms += point("a0", "ar", label, 1, 100.0)
        ms += [replace(m, running_cap=48) for m in point("s1", "spec", label, 1, 150.0)]
    return analyse(plan(AR, SP, load=load, repeats=1), ms, [])


def test_a_capped_point_is_marked_capped_in_the_queue_and_the_results_rows() -> None:
    analysis = _analysis()
    capped_point = analysis.load.point("s1", "w", "c64")
    assert capped_point is not None and capped_point.capped == CAPPED
    assert point_marks(capped_point) == [CAPPED]
    assert capped_configs(analysis) == {"s1": f"capped at c64: {CAPPED}"}
    state = RunState()
    for cid, name in (("a0", "ar"), ("s1", "spec")):
        state.apply(ConfigFinished(config_id=cid, name=name, state=ConfigState.DONE))
    view = build_view(state, capped=capped_configs(analysis))
    notes = {line.config_id: line.note for line in view.lines}
    assert CAPPED in notes["s1"] and "capped" not in notes["a0"], notes
    rows = build_rows(state, analysis)
    by_point = {r.workload: r for r in rows.values() if r.config == "spec"}
    assert CAPPED in by_point["w @c64"].note and CAPPED not in by_point["w @c1"].note, by_point
