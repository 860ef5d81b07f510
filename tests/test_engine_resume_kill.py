"""SIGKILL the engine mid-sweep: no server survives it, and resume loses and repeats nothing (done-when test 2)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from engine_helpers import headless_engine, processes_with_env, record_key, wait_no_processes, write_sweep

pytestmark = pytest.mark.e2e

PROFILE = """
seed = 3
[deterministic]
enabled = true
tok_s = 400.0
accept_length = 2.0
ttft_ms = 10.0
[output]
eos = false
[shutdown]
poll_s = 0.05
"""

SWEEP = """
[sweep]
name = "kill-resume"
gpus = 2
repeats = 2
warmup = 1

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
args = { tp-size = 1 }

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
max_new_tokens = 64

[[workloads]]
name = "math"
kind = "arithmetic"
count = 1
max_new_tokens = 64
"""

EXPECTED = 3 * (2 * 2 + 1 * 2)


def _records(run_dir: Path) -> list[dict]:
    out = []
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a line torn by the kill is ignored, as resume does
    return out


def test_sigkill_mid_sweep_then_resume(tmp_path):
    marker = str(tmp_path)
    path = write_sweep(tmp_path, SWEEP, PROFILE)
    runs = tmp_path / "runs"
    engine = headless_engine([str(path), "--runs-dir", str(runs)], tmp_path)
    try:
        deadline = time.monotonic() + 40
        run_dir = None
        while time.monotonic() < deadline:
            found = list(runs.glob("*/results.jsonl")) if runs.exists() else []
            if found and len(_records(found[0].parent)) >= 8:
                run_dir = found[0].parent
                break
            assert engine.poll() is None, engine.stdout.read().decode()
            time.sleep(0.02)
        assert run_dir is not None, "the sweep did not get far enough"
        assert processes_with_env(marker), "a server should be running when the engine is killed"
        os.kill(engine.pid, signal.SIGKILL)
        engine.wait(5)
    finally:
        if engine.poll() is None:
            engine.kill()
    survivors = wait_no_processes(marker, timeout_s=3.0)
    assert survivors == [], f"server processes outlived the engine: {survivors}"

    before = _records(run_dir)
    resumed = headless_engine(["--resume", str(run_dir)], tmp_path)
    output = resumed.communicate(timeout=60)[0].decode()
    assert resumed.returncode == 0, output
    assert "(resumed)" in output

    after = _records(run_dir)
    counts = Counter(record_key(r) for r in after)
    assert max(counts.values()) == 1, [k for k, n in counts.items() if n > 1]
    assert len(counts) == EXPECTED
    kept = {record_key(r): r for r in after}
    for record in before:
        assert kept[record_key(record)] == record, "a completed measurement was lost or rewritten"
    assert all(r["status"] == "ok" and r["decode_tps"] > 0 for r in after)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    finished = [e for e in events if e["type"] == "ConfigFinished"]
    assert sorted(e["state"] for e in finished) == ["done"] * 3
    assert wait_no_processes(marker) == []
