"""Stalls mean stalls: the stall watch counts only requests in flight, so the idle gap of an open-loop schedule
slower than ``stall_timeout_s`` is not a stalled server; ``validate`` warns about such rates, and about a point
that would take longer than an hour."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from specbench_tui.core.load import arrival_offsets
from specbench_tui.core.plan import build_plan
from specbench_tui.core.sweep.loader import load_sweep
from engine_helpers import plan_for, run_plan, write_sweep


SLOW_RATE = """
[sweep]
name = "slow-rate"
gpus = 1
repeats = 1
warmup = 0
[engine]
launcher = "simulator"
startup_timeout_s = 60
stall_timeout_s = 10
port_base = {port}
[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 4096
[measure]
cache = "warm"
[[configs]]
name = "ar"
[[workloads]]
kind = "code"
max_new_tokens = 9
request_rate = [RATE]
requests = REQUESTS
arrival_seed = 3
"""


def _slow(rate: str = "0.05", requests: int = 2) -> str:
    return SLOW_RATE.replace("RATE", rate).replace("REQUESTS", str(requests))


@pytest.mark.e2e
def test_an_open_loop_gap_longer_than_the_stall_timeout_is_measured_not_stalled(tmp_path: Path) -> None:
    # seed 3 sends the second request 15 s after the first: 5 s past stall_timeout_s with nothing in flight
    gap = arrival_offsets(0.05, 2, 3, "code", "r0.05", 1)[1]
    assert 12.0 < gap < 20.0, gap
    path = write_sweep(tmp_path, _slow())
    outcome, events, run_dir, _ = asyncio.run(run_plan(plan_for(path), tmp_path / "runs", timeout_s=240))
    records = [json.loads(line) for line in (run_dir.path / "results.jsonl").read_text().splitlines()]
    stalled = [e for e in events if "stalled" in json.dumps(getattr(e, "__dict__", {}), default=str)]
    assert not stalled, stalled
    assert len(records) == 2 and all(r["status"] == "ok" for r in records), records
    assert all(r["load"] == "r0.05" for r in records)
    states = json.dumps([getattr(e, "state", None) for e in events], default=str)
    assert "failed" not in states.lower(), states


def _warnings(tmp_path: Path, body: str) -> tuple[Path, list[str]]:
    path = write_sweep(tmp_path, body)
    return path, [n for n in build_plan(load_sweep(path)).notes if ": warning: " in n]


def test_validate_warns_about_a_rate_slower_than_the_stall_timeout(tmp_path: Path) -> None:
    path, warnings = _warnings(tmp_path, _slow())
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("request_rate"))
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"{path}:{line}: warning: 'code' request_rate = 0.05: its mean gap"), warnings[0]
    assert "20.0 s" in warnings[0] and "stall_timeout_s = 10" in warnings[0]


def test_validate_warns_about_a_point_that_takes_longer_than_an_hour(tmp_path: Path) -> None:
    path, warnings = _warnings(tmp_path, _slow("1e-6", 64))
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("request_rate"))
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"{path}:{line}: warning: 'code' request_rate = 1e-06: 64 requests arrive"), warnings
    assert "within an hour" in warnings[0] and "days" in warnings[0]


def test_a_loaded_rate_validates_without_a_warning(tmp_path: Path) -> None:
    _, warnings = _warnings(tmp_path, _slow("4", 64))
    assert warnings == []
