"""End to end against the simulator: the seed campaign's shape at TP1 (done-when test 1)."""

from __future__ import annotations

import json

import pytest

from engine_helpers import copy_data, of_type, plan_for, run_plan, wait_no_processes, write_sweep
from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    CrashDetected,
    log_lines,
    MeasurementRecorded,
    ServerReady,
    ServerStopped,
    WorkloadFinished,
    WorkloadNotRun,
)
from specbench_tui.core.engines.sglang import line_timestamp

pytestmark = pytest.mark.e2e


async def test_seed_campaign_shape(tmp_path, monkeypatch):
    # Log lines stamped to the millisecond (SGLang's SGLANG_LOG_MS, which the servers inherit): whole-second
    # stamps put up to a second of rounding into "detected within a second of the line" below.
    monkeypatch.setenv("SGLANG_LOG_MS", "1")
    folder = tmp_path / "sweep"
    folder.mkdir()
    copy_data(folder, "engine_seed.toml", "engine_sim_profile.toml")
    text = (folder / "engine_seed.toml").read_text().replace("port_base = 31200", "port_base = {port}")
    path = write_sweep(folder, text, name="engine_seed.toml")
    plan = plan_for(path)
    outcome, events, run_dir, _ = await run_plan(plan, tmp_path / "runs")
    assert outcome.state == "completed"
    finished = {e.name: e for e in of_type(events, ConfigFinished)}
    assert set(finished) == {"ar-tp1", *(f"ddtree-b{b}-tp1" for b in (8, 12, 15, 16, 32, 64))}

    # Budgets 8 and 12 crash with the named signature and an excerpt, detected within a second of the line.
    crashes = {e.config_id: e for e in of_type(events, CrashDetected)}
    for budget in (8, 12):
        config = plan.by_name(f"ddtree-b{budget}-tp1")
        assert finished[config.name].state == ConfigState.CRASHED, finished[config.name]
        assert finished[config.name].signature == "cuda_illegal_instruction"
        crash = crashes[config.id]
        assert crash.signature == "cuda_illegal_instruction"
        assert any("illegal instruction" in line for line in crash.excerpt)
        assert any("Scheduler hit an exception" in line for line in crash.excerpt)
        first = next(line for line in crash.excerpt if "hit an exception" in line)
        assert 0 <= crash.ts - line_timestamp(first) < 1.0, first  # milliseconds quiet
        assert not any(e.config_id == config.id for e in of_type(events, MeasurementRecorded))
        assert {e.workload for e in of_type(events, WorkloadNotRun) if e.config_id == config.id} == \
            {"code", "long-context", "agent-calculator"}
        log = run_dir.log_path(config.name, config.id).read_text()
        assert "illegal instruction" in log

    # The others complete, with real measurements and the server's own figures beside them.
    for name in ("ar-tp1", "ddtree-b15-tp1", "ddtree-b16-tp1", "ddtree-b32-tp1", "ddtree-b64-tp1"):
        assert finished[name].state == ConfigState.DONE, finished[name]
    ready = of_type(events, ServerReady)
    assert len(ready) == 5 and all(r.context_length == 32768 and r.startup_s > 0 for r in ready)
    assert all(s.leftover_pids == () for s in of_type(events, ServerStopped))
    spec = [w for w in of_type(events, WorkloadFinished) if w.config_id == plan.by_name("ddtree-b64-tp1").id]
    assert any(w.server_log and w.server_log["lines"] > 0 and w.server_log["accept_length"] for w in spec)
    assert finished["ddtree-b64-tp1"].server_log_accept_length is not None
    assert any(e.level == "fatal" for e in log_lines(events))

    # results.jsonl: no zero-throughput success, and long context at 32768 with 256 output never a 400.
    records = [json.loads(line) for line in (run_dir.path / "results.jsonl").read_text().splitlines()]
    assert len(records) == 5 * (1 + 3 + 1)
    for record in records:
        assert record["status"] == "ok", record
        assert record["decode_tps"] and record["decode_tps"] > 0
        assert record["completion_tokens"] > 0 and record["http_status"] == 200
    long = [r for r in records if r["workload"] == "long-context"]
    by_item = {(r["config"], r["item"]): r for r in long}
    for config in ("ar-tp1", "ddtree-b64-tp1"):
        full = by_item[(config, "max")]
        assert 32768 - 256 - 32 - 200 <= full["prompt_tokens"] <= 32768 - 256 - 32
        assert full["completion_tokens"] == 256
        # A clamped prompt is filed under the size sent, with the request beside it (issue 46), never "40000".
        assert (config, "40000") not in by_item
        clamped = next(r for r in long if r["config"] == config and r["requested_prompt_tokens"] == 40000)
        assert clamped["clamped"] and clamped["item"] == str(clamped["prompt_tokens"]), clamped
        assert int(clamped["item"]) < 32768 - 256
        assert not by_item[(config, "1024")]["clamped"]
    spec_records = [r for r in records if r["config"].startswith("ddtree")]
    assert all(r["accept_length"] and r["accept_length"] > 1 for r in spec_records)
    assert all(r["accept_length"] is None for r in records if r["config"] == "ar-tp1")
    assert not wait_no_processes(str(folder))
