"""The pure reducer: RunState folded from events (no Textual involved)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from narrowing import present
from tui_fakes import T0, DemoScript, demo_plan

from specbench_tui.core.analysis import analyse
from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    ConfigStateChanged,
    MeasurementRecorded,
    QueuePaused,
    QueueResumed,
    ServerLaunching,
    SweepStarted,
    WorkloadFinished,
)
from specbench_tui.core.state import PAUSED, RunState, read_events, replay


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> DemoScript:
    return DemoScript(demo_plan(), tmp_path_factory.mktemp("run"))


def test_core_state_imports_no_textual() -> None:
    code = ("import sys; import specbench_tui.core.state\n"
            "bad = [m for m in ('textual', 'rich') if m in sys.modules]\nassert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_replay_of_the_demo(script: DemoScript) -> None:
    state = replay(script.events, demo_plan())
    names = {v.name: v for v in state.configs.values()}
    assert state.outcome == "completed"
    assert state.finished_count == state.total == 5
    crashed = names["ddtree-b8-tp1"]
    assert crashed.state is ConfigState.CRASHED
    assert crashed.signature == "cuda_illegal_instruction"
    assert crashed.crash_log_line is not None
    assert script.log_lines["ddtree-b8-tp1"][crashed.crash_log_line - 1] == crashed.crash_line
    assert crashed.startup_s == pytest.approx(52.3)
    assert crashed.gpus == () and crashed.last_gpus == (0,)
    assert names["ddtree-b16-tp1"].zero_output == 4
    assert state.zero_output == 4
    assert state.measurements == sum(v.measurements for v in state.configs.values())


def test_medians_exclude_zero_output_and_speedup_uses_matched_baseline(script: DemoScript) -> None:
    """The state aggregates nothing itself: its ledger's analysis is the report's."""
    state = replay(script.events, demo_plan())
    ar = state.by_name("ar-tp1")
    dflash = state.by_name("dflash-b16-tp1")
    b16 = state.by_name("ddtree-b16-tp1")
    assert ar and dflash and b16
    analysis = state.ledger.analyse()
    ar_code = analysis.row(ar.config_id, "code")
    assert ar_code and ar_code.decode_tps and ar_code.decode_tps.median == pytest.approx(101.0)
    spec = analysis.row(dflash.config_id, "code")
    assert spec and spec.speedup and spec.speedup.median == pytest.approx(183.0 / 101.0)
    assert ar_code.speedup_note == "baseline"
    zero_cell = analysis.row(b16.config_id, "arithmetic")
    assert zero_cell and zero_cell.n_zero_output == 4 and zero_cell.n_ok == 0
    assert zero_cell.decode_tps is None and zero_cell.speedup is None
    assert not hasattr(state, "speedup") and not hasattr(state, "cells")  # one analysis, not two


def test_replay_without_a_plan_still_builds_rows(script: DemoScript) -> None:
    state = replay(script.events)
    assert len(state.configs) == 5
    assert state.sweep_name == "demo"
    row = state.ledger.analyse().row(present(state.by_name("dflash-b16-tp1")).config_id, "code")
    assert row and row.decode_tps and row.speedup is None  # baselines unknown


def test_resume_starts_from_the_run_directory(script: DemoScript) -> None:
    """A resumed run opens with its past: states, counts and results as they were (as the report reads them),
    no GPU held; a retried key replaces its error (counted once)."""
    plan = demo_plan()
    cut = script.events[:script.running_cutoff]
    measurements = [e.measurement for e in cut if isinstance(e, MeasurementRecorded) and e.measurement]
    state = RunState.from_history(plan, "runs/x", measurements, [e for e in cut if e.persist])
    names = {v.name: v for v in state.configs.values()}
    assert names["ar-tp1"].state is ConfigState.DONE and names["ddtree-b8-tp1"].state is ConfigState.CRASHED
    assert names["ddtree-b32-tp1"].state is ConfigState.RUNNING and names["ddtree-b32-tp1"].gpus == ()
    assert state.measurements == len(measurements) == sum(v.measurements for v in state.configs.values())
    again = measurements[0]
    state.apply(MeasurementRecorded(config_id=again.config_id, record=again.to_json()))
    assert state.measurements == len(measurements)


def test_paused_shows_on_pending_configs_only(script: DemoScript) -> None:
    state = replay(script.events[:script.running_cutoff], demo_plan())
    state.apply(QueuePaused(ts=T0))
    shown = {v.name: state.display_state(v) for v in state.configs.values()}
    assert shown["ddtree-b32-tp1"] == "running"
    state.apply(ConfigStateChanged(config_id=present(state.by_name("ddtree-b32-tp1")).config_id, name="ddtree-b32-tp1",
                                   state=ConfigState.PENDING, ts=T0))
    assert state.display_state(present(state.by_name("ddtree-b32-tp1"))) == PAUSED
    state.apply(QueueResumed(ts=T0))
    assert state.display_state(present(state.by_name("ddtree-b32-tp1"))) == "pending"


def test_retry_clears_the_crash_and_relaunch_counts_the_attempt(script: DemoScript) -> None:
    state = replay(script.events, demo_plan())
    view = present(state.by_name("ddtree-b8-tp1"))
    state.apply(ConfigStateChanged(config_id=view.config_id, name=view.name, state=ConfigState.PENDING, ts=T0))
    assert view.state is ConfigState.PENDING and view.signature is None and view.reason is None
    state.apply(ServerLaunching(config_id=view.config_id, name=view.name, argv=("x",), gpus=(1,), port=1, pid=2,
                                log_path="logs/x.log", attempt=2, ts=T0 + 1))
    assert view.gpus == (1,) and view.attempt == 2
    assert state.gpu_holders() == {1: "ddtree-b8-tp1"}


def test_eta_learns_from_finished_configs() -> None:
    plan = demo_plan()
    state = RunState.from_plan(plan)
    state.apply(SweepStarted(sweep="demo", run_dir="r", total_configs=5, ts=0.0))
    assert state.eta_s(10.0) is None
    first, second = plan.configs[0], plan.configs[1]
    state.apply(ServerLaunching(config_id=first.id, name=first.name, argv=(), gpus=(0,), port=1, pid=1,
                                log_path="l", ts=0.0))
    state.apply(ConfigFinished(config_id=first.id, name=first.name, state=ConfigState.DONE, ts=100.0))
    state.apply(ServerLaunching(config_id=second.id, name=second.name, argv=(), gpus=(0,), port=1, pid=1,
                                log_path="l", ts=100.0))
    # three pending at 100 s each, the running one has 70 s left
    assert state.eta_s(130.0) == pytest.approx(370.0)
    assert state.elapsed_s(130.0) == pytest.approx(130.0)


def test_malformed_records_never_raise() -> None:
    state = RunState()
    state.apply(MeasurementRecorded(config_id="c", record={"workload": "w", "status": "ok", "decode_tps": "fast"}))
    state.apply(MeasurementRecorded(config_id="c", record={"status": "weird"}))
    state.apply(MeasurementRecorded(config_id="c", record="not a dict"))  # type: ignore[arg-type]
    assert state.measurements == 0  # what a report of the same records counts: none is a measurement
    state.ledger.analyse()


def test_read_events_skips_cut_lines(tmp_path: Path, script: DemoScript) -> None:
    path = tmp_path / "events.jsonl"
    persisted = [e for e in script.events if e.persist]
    lines = [json.dumps(e.to_json()) for e in persisted]
    path.write_text("\n".join(lines) + "\n{\"type\": \"ConfigFinish", encoding="utf-8")
    events = read_events(path)
    assert len(events) == len(persisted)
    state = replay(events)
    assert present(state.by_name("ddtree-b8-tp1")).state is ConfigState.CRASHED


def test_state_keeps_what_the_analysis_reads_besides_the_records(script: DemoScript) -> None:
    """The TUI's table is the report's analysis: crash states and the server's own per-workload figures must
    reach it, not only the measurements (a vLLM run without per-request acceptance shows the server's)."""
    plan = demo_plan()
    state = replay(script.events, plan)
    kinds = {type(e).__name__ for e in state.ledger.events}
    assert {"ConfigFinished", "ConfigStateChanged"} <= kinds
    assert not kinds & {"LogLine", "MeasurementRecorded", "GpuSampled"}
    spec = plan.configs[1]
    state.apply(WorkloadFinished(config_id=spec.id, workload=plan.workloads[0].name, measured=1, errors=0,
                                 zero_output=0, server_log={"source": "metrics", "accept_length": 2.5}))
    analysis = analyse(plan.to_json(), [], state.ledger.events)
    assert dict(present(analysis.config(spec.id)).workload_log_accept)[plan.workloads[0].name] == 2.5
