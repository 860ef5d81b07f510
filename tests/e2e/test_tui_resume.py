"""Kill a sweep mid-run, resume it in the TUI: the app shows what ``specbench report`` shows for the same run
directory (states, rows, counts, speedups), before the resume does anything and after it has finished."""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import headless_engine, processes_with_env, wait_no_processes, write_sweep

from specbench_tui.application.runner import make_engine
from specbench_tui.core.results import RunAnalysis
from specbench_tui.report.load import load_run
from specbench_tui.tui.app import SpecbenchApp
from specbench_tui.tui.queue_panel import QueuePanel
from specbench_tui.tui.results_panel import ResultsPanel, build_rows

pytestmark = pytest.mark.e2e

PROFILE = """
seed = 3
[deterministic]
enabled = true
tok_s = 300.0
accept_length = 2.0
ttft_ms = 10.0
[[deterministic.config]]
algorithm = "DFLASH"
tok_s = 600.0
[output]
eos = false
[shutdown]
poll_s = 0.05
"""

SWEEP = """
[sweep]
name = "tui-resume"
baseline = "ar"
gpus = 1
repeats = 2
warmup = 0

[engine]
launcher = "simulator"
sim_profile = "sim_profile.toml"
port_base = {port}
startup_timeout_s = 60
shutdown_grace_s = 5
gpu_release_timeout_s = 1

[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 8192

[[configs]]
name = "ar"
algorithm = "autoregressive"

[[configs]]
name = "dflash-b{budget}"
algorithm = "dflash"
matrix = { budget = [8, 16] }
[configs.args]
speculative-algorithm = "DFLASH"
speculative-draft-model-path = "z-lab/Qwen3-8B-DFlash-b16"
speculative-num-draft-tokens = "{budget}"

[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci", "quicksort"]
max_new_tokens = 48

[[workloads]]
name = "math"
kind = "arithmetic"
count = 1
max_new_tokens = 48
"""

KILL_AFTER = 8
"""Records before the kill: ar done (6), dflash-b8 part-way through."""


def _records(run_dir: Path) -> int:
    path = run_dir / "results.jsonl"
    return sum(1 for line in path.read_text().splitlines() if line.strip()) if path.exists() else 0


def _kill_mid_sweep(tmp_path: Path) -> Path:
    """A headless sweep SIGKILLed (frozen first, so the state seen is the state it dies in) with a server up."""
    runs = tmp_path / "runs"
    engine = headless_engine([str(tmp_path / "sweep.toml"), "--runs-dir", str(runs)], tmp_path)
    deadline = time.monotonic() + 120
    try:
        while True:
            assert engine.poll() is None, engine.stdout.read().decode() if engine.stdout else "ended"
            assert time.monotonic() < deadline, "the sweep never got far enough"
            found = list(runs.glob("*/results.jsonl")) if runs.exists() else []
            if found and _records(found[0].parent) >= KILL_AFTER and processes_with_env(str(tmp_path)):
                engine.send_signal(signal.SIGSTOP)
                engine.send_signal(signal.SIGKILL)
                engine.wait(30)
                break
            time.sleep(0.02)
    finally:
        if engine.poll() is None:
            engine.kill()
    assert wait_no_processes(str(tmp_path)) == []
    return found[0].parent


class _GatedEngine:
    """The real engine, whose start waits until the test has looked at the screen as the run directory was."""

    def __init__(self, engine: Any) -> None:
        self.inner = engine
        self.gate = threading.Event()
        self.plan = engine.plan
        self.run_dir = engine.run_dir

    def start(self) -> None:
        self.gate.wait(60)
        self.inner.start()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def _settled(app: SpecbenchApp, pilot, until=lambda: True, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        app.drain_events()
        await pilot.pause(0.05)
        if until() and app.analysis_settled and app.analysis is not None:
            await pilot.pause()
            if app.analysis_settled:
                return
        assert time.monotonic() < deadline, "the app never settled"


def _figures(analysis: RunAnalysis) -> dict[tuple[str, str], tuple]:
    return {(r.config_id, r.workload): (r.n_ok + r.n_zero_output + r.n_error,
                                        round(r.decode_tps.median, 6) if r.decode_tps else None,
                                        round(r.speedup.median, 6) if r.speedup else None, r.coverage)
            for r in analysis.rows if r.measured}


def _check_same_as_report(app: SpecbenchApp, run_dir: Path) -> RunAnalysis:
    report = load_run(run_dir).analysis
    state = app.state
    assert {v.config_id: v.state.value for v in state.configs.values()} == {c.id: c.state for c in report.configs}
    assert state.measurements == report.measurement_count
    assert {v.config_id: v.measurements for v in state.configs.values()} == {
        c.id: sum(r.n_ok + r.n_zero_output + r.n_error for r in report.rows_of(c.id)) for c in report.configs}
    assert app.analysis is not None
    assert _figures(app.analysis) == _figures(report)
    table = app.sweep_screen.query_one(ResultsPanel)
    rows = build_rows(state, report)
    assert table.row_count == len(rows)
    for key, row in rows.items():
        assert table.get_cell(key, "n").text == str(row.count)
        speedup = table.get_cell(key, "speedup").text
        expected = "base" if row.is_baseline and row.tps is not None else (
            f"{row.speedup:.2f}×" if row.speedup is not None else "–")
        assert speedup == expected, (key, speedup, expected)
    return report


async def test_resume_in_the_tui_shows_what_the_report_shows(tmp_path: Path) -> None:
    write_sweep(tmp_path, SWEEP, PROFILE)
    run_dir = _kill_mid_sweep(tmp_path)
    engine = make_engine(argparse.Namespace(sweep=None, resume=str(run_dir), retry_crashed=False, runs_dir=None))
    assert not isinstance(engine, int)
    gated = _GatedEngine(engine)
    app = SpecbenchApp(gated)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            # Before the resumed engine does anything: the past, as the report reads it.
            await _settled(app, pilot)
            before = _check_same_as_report(app, run_dir)
            assert any(c.state == "done" for c in before.configs)  # not all "pending", as it used to read
            assert any(r.speedup is not None and r.speedup_note != "baseline" for r in before.rows)
            assert app.sweep_screen.query_one(QueuePanel).row_count == len(before.configs)
            gated.gate.set()
            await _settled(app, pilot, until=lambda: app.state.outcome is not None)
            assert app.state.outcome == "completed"
            after = _check_same_as_report(app, run_dir)
            assert after.measurement_count == 3 * (2 * 2 + 1 * 2)
            assert {c.state for c in after.configs} == {"done"}
            await pilot.press("q")
    finally:
        gated.gate.set()
        engine.stop(timeout=60)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    assert any(e["type"] == "SweepStarted" and e.get("resumed") for e in events)
    assert wait_no_processes(str(tmp_path)) == []
