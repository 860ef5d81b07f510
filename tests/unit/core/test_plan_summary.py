"""The stored plan read once into typed records (core/plan_summary.py): what the analysis reads of plan.json, and
a plan.json that is not what a plan writes, read without a traceback."""

from __future__ import annotations

from specbench_tui.core.analysis import analyse
from specbench_tui.core.plan_summary import PlannedRecord, PlanSummary


def test_a_written_plan_reads_back_field_by_field() -> None:
    plan = PlanSummary.parse({
        "sweep": "demo", "engine": "vllm", "notes": ["one", ""],
        "configs": [{"id": "a1", "name": "ar", "algorithm": "autoregressive", "argv": ["--tp", "2"], "tp": 2,
                     "speculative": False, "params": {"budget": 8}, "draft_budget": None},
                    {"id": "b2", "name": "eagle", "baseline": "ar", "skip_reason": "excluded"}],
        "workloads": [{"name": "code", "kind": "code", "temperature": 0, "repeats": 3},
                      {"name": "chat", "load": {"concurrency": [1, 4]}}]})
    assert (plan.sweep, plan.engine, plan.notes, plan.has_configs) == ("demo", "vllm", ("one",), True)
    first, second = plan.configs
    assert first == PlannedRecord(id="a1", name="ar", algorithm="autoregressive", argv=("--tp", "2"), tp=2,
                                  speculative=False, params={"budget": 8}, draft_budget=None, budget_recorded=True)
    assert (second.baseline, second.skip_reason, second.speculative, second.budget_recorded) == \
        ("ar", "excluded", None, False)
    assert plan.baseline_names == {"ar"} and plan.loaded == {"chat"}
    assert [(w.name, w.kind, w.temperature, w.repeats) for w in plan.workloads] == \
        [("code", "code", 0.0, 3), ("chat", "?", None, None)]


def test_a_plan_of_the_wrong_shapes_reads_as_absent_fields() -> None:
    hostile = {"configs": [{"id": 7, "params": "x", "tp": "4", "argv": "oops", "draft_budget": True,
                            "speculative": "yes"}, {"name": "no id"}, "not a table"],
               "workloads": "not a list", "notes": "abc", "sweep": None}
    plan = PlanSummary.parse(hostile)
    assert plan.configs == (PlannedRecord(id="7", name="7", budget_recorded=True),)
    assert (plan.workloads, plan.notes, plan.sweep, plan.engine) == ((), (), "?", "sglang")
    assert PlanSummary.parse(None) == PlanSummary() and not PlanSummary().has_configs
    analysis = analyse(hostile, [])  # a params of "x" once raised AttributeError here
    assert [(c.id, c.budget, c.tp) for c in analysis.configs] == [("7", None, None)]
