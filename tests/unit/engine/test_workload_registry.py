"""Workload kinds behind a registry: a kind registered from one place (its parameters and its builder) is
validated by the sweep loader like a built-in one and measured by the engine against the simulator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from engine_helpers import of_type, plan_for, run_plan
from sweep_builder import sim_profile, sim_sweep

from specbench_tui.core.errors import SweepError
from specbench_tui.core.events import ConfigFinished, ConfigState
from specbench_tui.core.prompts import PromptItem
from specbench_tui.core.sweep.schema import WorkloadSpec
from specbench_tui.core.workload_kinds import KINDS, ParamSpec
from specbench_tui.engine import workloads
from specbench_tui.engine.workloads import BUILDERS, Workload, build_workload, register_workload_kind


def _echo(spec: WorkloadSpec) -> Workload:
    word = spec.param("word")
    return Workload(spec, [PromptItem(f"echo-{i + 1}", f"Say '{word}' {i + 1} times.", "chat")
                           for i in range(spec.param("count"))])


@pytest.fixture
def echo_kind() -> Iterator[None]:
    """The toy kind ``echo`` registered for one test, and the registries as they were afterwards."""
    kinds, builders = dict(KINDS), dict(BUILDERS)
    register_workload_kind("echo", {"count": ParamSpec((int,), 2, "how many prompts", positive=True),
                                    "word": ParamSpec((str,), "hello", "the word to repeat")}, _echo)
    yield
    KINDS.clear()
    KINDS.update(kinds)
    BUILDERS.clear()
    BUILDERS.update(builders)


def _sweep(**echo: object) -> dict:
    return sim_sweep("echo", configs=[{"name": "ar", "algorithm": "autoregressive"}],
                     workloads=[{"name": "echo", "kind": "echo", "max_new_tokens": 8, **echo}])


def test_every_built_in_kind_has_a_builder() -> None:
    assert set(BUILDERS) == set(KINDS)


def test_a_registered_kind_is_validated_and_built(echo_kind: None, sweep_file) -> None:
    plan = plan_for(sweep_file(_sweep(count=3, word="spec"), sim_profile()))
    workload = build_workload(plan.sweep.workloads[0])
    assert workload.items() == ["echo-1", "echo-2", "echo-3"]
    assert workload.prompts[2].text == "Say 'spec' 3 times."
    with pytest.raises(SweepError) as caught:
        plan_for(sweep_file(_sweep(count=0, wrod="x"), sim_profile(), name="bad.toml"))
    text = "\n".join(str(issue) for issue in caught.value.issues)
    assert "bad.toml" in text and "count" in text and "wrod" in text


def test_a_kind_cannot_be_registered_twice_or_shadow_a_common_parameter(echo_kind: None) -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_workload_kind("echo", {}, _echo)
    with pytest.raises(ValueError, match="every workload"):
        register_workload_kind("echo2", {"max_new_tokens": ParamSpec((int,), 1, "clash")}, _echo)
    assert "echo2" not in KINDS and "echo2" not in workloads.BUILDERS


@pytest.mark.e2e
async def test_a_registered_kind_is_measured_by_the_engine(echo_kind: None, sweep_file, tmp_path) -> None:
    plan = plan_for(sweep_file(_sweep(count=2), sim_profile(tok_s=400.0)))
    outcome, events, run_dir, _ = await run_plan(plan, tmp_path / "runs", timeout_s=120)
    assert outcome.state == "completed"
    assert [e.state for e in of_type(events, ConfigFinished)] == [ConfigState.DONE]
    records = [m for m in run_dir.read_measurements() if m.workload == "echo"]
    assert sorted(r.item for r in records) == ["echo-1", "echo-2"] and all(r.status == "ok" for r in records)
