"""Failure modes against the simulator: a stall, empty outputs, and a failed start; plus import hygiene."""

from __future__ import annotations

import subprocess
import sys

import pytest

from engine_helpers import of_type, plan_for, run_plan, wait_no_processes
from sweep_builder import dflash_configs, inline, sim_profile, sim_sweep
from specbench_tui.core.events import ConfigFinished, ConfigState, MeasurementRecorded, WorkloadNotRun

PROFILE = sim_profile(tok_s=None, time_scale=0.02,
                      hang=[{"algorithm": "DFLASH", "budget": 8, "when": "after_requests", "after_requests": 1}],
                      empty_output=[{"algorithm": "DFLASH", "budget": 16}])

SWEEP = sim_sweep(
    # A stall is 5 s without progress: a healthy server starved of CPU on a loaded 2-core box can go a second.
    "failures", sweep={"repeats": None}, engine={"stall_timeout_s": 5, "gpu_release_timeout_s": 1},
    server_args={"context-length": None},
    configs=[*dflash_configs()[1:],
             # declared, so the sweep loads; the server refuses it at start-up
             {"name": "bad-flag", "algorithm": "nope",
              "args": inline(**{"tp-size": 1, "speculative-algorithm": "NOPE"})}],
    workloads=[{"name": "code", "kind": "code", "items": ["fibonacci", "quicksort"], "max_new_tokens": 32},
               {"name": "haiku", "kind": "haiku", "count": 1, "max_new_tokens": 16}])


@pytest.mark.e2e
async def test_stall_empty_output_and_failed_start(sweep_file, tmp_path):
    plan = plan_for(sweep_file(SWEEP, PROFILE))
    outcome, events, run_dir, _ = await run_plan(plan, tmp_path / "runs")
    finished = {e.name: e for e in of_type(events, ConfigFinished)}
    stalled = finished["dflash-b8"]
    assert stalled.state == ConfigState.FAILED and "stalled" in stalled.reason
    # The request in flight when it stalled is on record as an error with the stall as its reason (so "code"
    # was cut short, not "not run"); the workload after it never ran.
    cut = [e.record for e in of_type(events, MeasurementRecorded) if e.config_id == stalled.config_id]
    assert [(r["item"], r["status"], r["error_kind"]) for r in cut] == [("fibonacci", "ok", None),
                                                                        ("quicksort", "error", "crash")]
    assert "stalled" in cut[1]["error"]
    assert {e.workload for e in of_type(events, WorkloadNotRun) if e.config_id == stalled.config_id} == {"haiku"}
    empty = finished["dflash-b16"]
    records = [e.record for e in of_type(events, MeasurementRecorded) if e.config_id == empty.config_id]
    assert records and all(r["status"] == "zero_output" and r["decode_tps"] is None for r in records)
    failed = finished["bad-flag"]
    assert failed.state in (ConfigState.FAILED, ConfigState.CRASHED) and "before ready" in failed.reason
    assert outcome.state == "completed"
    assert not wait_no_processes(str(tmp_path))


def test_core_and_engine_import_no_textual():
    code = ("import sys, importlib\n"
            "for m in ('engine.orchestrator', 'application.headless', 'engine.server', 'engine.client',\n"
            "          'engine.workloads', 'engine.logpump', 'engine.scheduler', 'engine.local_executor'):\n"
            "    importlib.import_module('specbench_tui.' + m)\n"
            "for m in ('signatures', 'logparse', 'metrics', 'budget', 'prompts', 'engines.registry', 'engines.sglang',\n"
            "          'engines.llamacpp', 'engines.vllm'):\n"
            "    importlib.import_module('specbench_tui.core.' + m)\n"
            "assert 'textual' not in sys.modules, 'textual imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True)
