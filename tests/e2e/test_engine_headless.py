"""``specbench run SWEEP --headless`` as a subprocess, stopped by signals while a request is in flight.

First SIGINT: the request in flight finishes (and is recorded), the servers are torn down, exit 130, and the
run directory is left to resume (no ConfigFinished for the interrupted configuration). Second SIGINT: abort
at once (the request in flight is not recorded). SIGTERM: as the first Ctrl-C. SIGHUP (the SSH session
dropped): the same clean stop, exit 129. No simulator process survives any of them.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from engine_helpers import as_from_a_terminal, headless_engine, wait_no_processes
from sweep_builder import inline, sim_profile, sim_sweep, write

pytestmark = pytest.mark.e2e

PROFILE = sim_profile(tok_s=80.0)


def signals_sweep(name: str = "signals", seeds: tuple[int, ...] = (1, 2), **sweep: str) -> dict:
    return sim_sweep(name, sweep=sweep,
                     configs=[{"name": "ar-s{seed}", "algorithm": "autoregressive", "matrix": inline(seed=list(seeds)),
                               "args": inline(**{"random-seed": "{seed}"})}],
                     workloads=[{"name": "math", "kind": "arithmetic", "count": 6, "max_new_tokens": 48}])


SWEEP = signals_sweep()
"""48 tokens at 80 tok/s: each request takes ~0.6 s, so a signal lands while one is in flight."""


def _records(runs: Path) -> list[dict]:
    found = list(runs.glob("*/results.jsonl"))
    if not found:
        return []
    return [json.loads(line) for line in found[0].read_text().splitlines() if line.strip()]


def _wait_records(engine: subprocess.Popen[bytes], runs: Path, count: int) -> None:
    """Wait until the run directory holds ``count`` measurements while the engine runs (at most 40 s)."""
    deadline = time.monotonic() + 40
    while len(_records(runs)) < count:
        assert engine.poll() is None, engine.stdout.read().decode() if engine.stdout else "the engine ended"
        assert time.monotonic() < deadline, f"fewer than {count} measurements in time"
        time.sleep(0.02)


@pytest.mark.parametrize(("signals", "code", "in_flight_recorded"), [
    pytest.param([signal.SIGINT], 130, True, id="sigint"),
    pytest.param([signal.SIGINT, signal.SIGINT], 130, False, id="sigint-twice"),
    pytest.param([signal.SIGTERM], 130, True, id="sigterm"),
    pytest.param([signal.SIGHUP], 129, True, id="sighup"),
])
def test_signal_stops_the_sweep_cleanly(tmp_path, sweep_file, signals, code, in_flight_recorded):
    path = sweep_file(SWEEP, PROFILE)
    runs = tmp_path / "runs"
    engine = headless_engine([str(path), "--runs-dir", str(runs)], tmp_path)
    try:
        _wait_records(engine, runs, 1)
        time.sleep(0.1)  # the next request is in flight
        before = len(_records(runs))
        sent = time.monotonic()
        for sig in signals:
            engine.send_signal(sig)
            time.sleep(0.05)
        output = engine.communicate(timeout=30)[0].decode(errors="replace")
        took = time.monotonic() - sent
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait(5)
    assert engine.returncode == code, output
    assert not wait_no_processes(str(tmp_path)), "a simulator process survived"
    records = _records(runs)
    assert len(records) == before + (1 if in_flight_recorded else 0), output
    assert all(r["status"] == "ok" for r in records)
    run_dir = next(runs.iterdir())
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    assert events[-1]["type"] == "SweepFinished" and events[-1]["state"] == "aborted"
    assert not [e for e in events if e["type"] == "ConfigFinished"], "the interrupted configuration stays resumable"
    assert [e for e in events if e["type"] == "ServerStopped"]
    if signals[0] != signal.SIGHUP:
        assert f"specbench run --resume {run_dir}" in output or "--resume" in output
        assert "run directory:" in output
    if len(signals) == 2:  # a hang guard (the records show the request in flight was not waited for)
        assert took < 15.0, f"the second Ctrl-C took {took:.1f} s to stop"


def test_nohup_keeps_the_hang_up_ignored(tmp_path, sweep_file):
    """``nohup specbench run ...``: SIGHUP was ignored when the program started, so it stays ignored and the
    sweep goes on; SIGTERM still stops it cleanly."""
    def nohup() -> None:
        as_from_a_terminal()
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    path = sweep_file(SWEEP, PROFILE)
    runs = tmp_path / "runs"
    engine = subprocess.Popen([sys.executable, "-m", "specbench_tui", "run", str(path), "--headless",
                               "--runs-dir", str(runs)], cwd=tmp_path, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=nohup)  # noqa: PLW1509
    try:
        _wait_records(engine, runs, 1)
        engine.send_signal(signal.SIGHUP)
        _wait_records(engine, runs, len(_records(runs)) + 2)  # SIGHUP stopped nothing
        engine.send_signal(signal.SIGTERM)
        output = engine.communicate(timeout=30)[0].decode(errors="replace")
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait(5)
    assert engine.returncode == 130, output
    assert "SIGHUP" not in output and "SIGTERM: stopping" in output
    assert not wait_no_processes(str(tmp_path)), "a simulator process survived"


def test_sighup_after_the_terminal_is_gone(tmp_path, sweep_file):
    """The SSH session dropped: the terminal the lines go to is gone (writes fail with EIO), then SIGHUP.
    The engine still stops cleanly, tears the servers down and exits 129."""
    import os
    import pty

    path = sweep_file(SWEEP, PROFILE)
    runs = tmp_path / "runs"
    master, slave = pty.openpty()
    engine = subprocess.Popen([sys.executable, "-m", "specbench_tui", "run", str(path), "--headless",
                               "--runs-dir", str(runs)], cwd=tmp_path, stdin=subprocess.DEVNULL,
                              stdout=slave, stderr=slave, preexec_fn=as_from_a_terminal)  # noqa: PLW1509
    os.close(slave)
    os.set_blocking(master, False)
    try:
        deadline = time.monotonic() + 40
        while not _records(runs):
            assert engine.poll() is None
            assert time.monotonic() < deadline, "no measurement in time"
            try:
                os.read(master, 65536)  # keep the terminal drained while it exists
            except OSError:
                pass
            time.sleep(0.02)
        os.close(master)  # the terminal goes away; every later write fails
        time.sleep(0.1)
        engine.send_signal(signal.SIGHUP)
        code = engine.wait(timeout=30)
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait(5)
    assert code == 129
    assert not wait_no_processes(str(tmp_path)), "a simulator process survived"
    events = [json.loads(line) for line in next(runs.iterdir()).joinpath("events.jsonl").read_text().splitlines()]
    assert events[-1]["type"] == "SweepFinished" and events[-1]["state"] == "aborted"


def test_summary_uses_the_analysis(tmp_path):
    """The end-of-run table: speedup over the matched baseline, acceptance weighted by verify steps (not a
    median of per-request ratios), and ZERO OUTPUT for a configuration whose every request was empty."""
    from engine_helpers import plan_for

    from specbench_tui.core.events import ConfigFinished, ConfigState
    from specbench_tui.core.records import Measurement
    from specbench_tui.engine.ending import summary_table

    plan = plan_for(write(tmp_path, signals_sweep("summary", (1, 2, 3), baseline="ar-s1"), PROFILE))
    ids = {c.name: c.id for c in plan.configs}

    def m(name: str, item: str, status: str = "ok", **fields) -> Measurement:
        return Measurement(config_id=ids[name], config=name, workload="math", item=item, repeat=1, status=status,
                           **fields)

    measurements = [
        m("ar-s1", "a", decode_tps=100.0, ttft_s=0.01), m("ar-s1", "b", decode_tps=100.0, ttft_s=0.01),
        m("ar-s2", "a", decode_tps=200.0, ttft_s=0.02, accept_length=4.0, verify_ct=32),
        m("ar-s2", "b", decode_tps=200.0, ttft_s=0.02, accept_length=2.0, verify_ct=8),
        m("ar-s3", "a", "zero_output", completion_tokens=0), m("ar-s3", "b", "zero_output", completion_tokens=0),
    ]
    events = [ConfigFinished(config_id=i, name=n, state=ConfigState.DONE) for n, i in ids.items()]
    table = summary_table(plan.to_json(), measurements, events)
    rows = {line.split()[0]: line for line in table.splitlines() if line.startswith("ar-s")}
    assert "base" in rows["ar-s1"]
    assert "200.0 2.00x" in rows["ar-s2"] and "3.60" in rows["ar-s2"], table  # (128 + 16) / (32 + 8)
    assert "ZERO OUTPUT" in rows["ar-s3"] and "all 2 requests" in rows["ar-s3"], table
    assert "best math: ar-s2 200.0 tok/s (2.00x)" in table
