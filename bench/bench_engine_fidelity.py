"""How truthful is the engine? Measured against the simulator's deterministic mode, where the truth is known.

Runs a small sweep in-process: three configurations with exact decode rates and TTFT (autoregressive at
65 tok/s, DDTree b15 at 140 tok/s with 4 tokens per step, DDTree b16 at 120 tok/s with 3), and eight
configurations that crash with a CUDA illegal instruction after their first request. It prints

- the relative error of our median decode tok/s against the configured rate, per configuration (the
  rate over whole verify steps: see :func:`truth_tok_s`);
- the absolute error of our median TTFT against the configured prefill time;
- the crash-to-detection latency: from the crash line's own timestamp (``SGLANG_LOG_MS=1``) to the moment
  the engine matched its signature (``CrashDetected.ts``), p50 and p95.

Exit status 1 when tok/s error > 0.5 %, TTFT error > 2 ms or detection p95 > 0.5 s; 0 otherwise.
Usage: ``python bench/bench_engine_fidelity.py`` (about 40 s on two cores).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from specbench_tui.core.events import CrashDetected, Event
from specbench_tui.core.logparse import line_timestamp
from specbench_tui.core.metrics import percentile
from specbench_tui.core.plan import build_plan
from specbench_tui.core.sweep import load_sweep
from specbench_tui.engine.orchestrator import Orchestrator
from specbench_tui.engine.server import find_free_port
from specbench_tui.engine.store import RunDir

TTFT_MS = 25.0
STEP = {"ar": (65.0, 1), "ddtree-b15": (140.0, 4), "ddtree-b16": (120.0, 3)}
"""Configured (tok/s, tokens per verify step) of each measured configuration."""
MAX_NEW = 133
"""1 + 132 tokens: 132 is a multiple of 1, 3 and 4, so no request ends on a partial verify step."""


def truth_tok_s(name: str, max_new: int = MAX_NEW) -> float:
    """What a perfect client measures: the tokens after the first over whole verify steps of a/tok_s each
    (a last step that commits fewer tokens still takes a full step, so it is counted as the sim runs it)."""
    tok_s, accept = STEP[name]
    steps = -(-(max_new - 1) // accept)
    return (max_new - 1) / (steps * accept / tok_s)
CRASH_BUDGETS = (8, 12, 20, 24, 40, 48, 56, 64)
LIMITS = {"tok_s_rel": 0.005, "ttft_abs_s": 0.002, "detect_p95_s": 0.5}

PROFILE = f"""
seed = 11
[deterministic]
enabled = true
tok_s = 120.0
accept_length = 3.0
ttft_ms = {TTFT_MS}
[[deterministic.config]]
algorithm = "NONE"
tok_s = 65.0
[[deterministic.config]]
algorithm = "DDTREE"
budget = 15
tok_s = 140.0
accept_length = 4.0
[output]
eos = false
[shutdown]
poll_s = 0.05
[[crash]]
algorithm = "DDTREE"
budget = {list(CRASH_BUDGETS)}
when = "after_requests"
after_requests = 1
signature = "cuda_illegal_instruction"
"""

SWEEP = """
[sweep]
name = "engine-fidelity"
gpus = 1
repeats = 3
warmup = 1
[engine]
launcher = "simulator"
sim_profile = "profile.toml"
port_base = {port}
startup_timeout_s = 60
shutdown_grace_s = 5
gpu_release_timeout_s = 1
[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 8192
[server.env]
SGLANG_LOG_MS = "1"
[[configs]]
name = "ar"
algorithm = "autoregressive"
args = { tp-size = 1 }
[[configs]]
name = "ddtree-b{budget}"
algorithm = "ddtree"
matrix = { budget = [15, 16, CRASHES] }
[configs.args]
speculative-algorithm = "DDTREE"
speculative-draft-model-path = "z-lab/Qwen3-8B-DFlash-b16"
page-size = 1
[configs.fork_args]
speculative-ddtree-budget = "{budget}"
[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci"]
max_new_tokens = MAXNEW
"""


async def _run(folder: Path) -> tuple[Orchestrator, list[Event], RunDir]:
    (folder / "profile.toml").write_text(PROFILE)
    port = find_free_port("127.0.0.1", 32100)
    text = SWEEP.replace("{port}", str(port)).replace("CRASHES", ", ".join(map(str, CRASH_BUDGETS)))
    text = text.replace("MAXNEW", str(MAX_NEW))
    (folder / "sweep.toml").write_text(text)
    plan = build_plan(load_sweep(folder / "sweep.toml"))
    run_dir = RunDir.create(folder / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
    orchestrator = Orchestrator(plan, run_dir)
    events: list[Event] = []
    orchestrator.subscribe(events.append)
    await orchestrator.run()
    run_dir.close()
    return orchestrator, events, run_dir


def main() -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="specbench-fidelity-") as tmp:
        orchestrator, events, run_dir = asyncio.run(_run(Path(tmp)))
        records = run_dir.read_measurements()
    failures: list[str] = []
    print(f"{'configuration':<14} {'truth tok/s':>11} {'ours (median)':>13} {'rel err':>8} "
          f"{'TTFT truth':>10} {'ours':>8} {'abs err':>8}")
    for name in STEP:
        truth = truth_tok_s(name)
        ok = [r for r in records if r.config == name and r.status == "ok"]
        if not ok:
            failures.append(f"{name}: no successful measurement")
            continue
        tps = statistics.median(r.decode_tps for r in ok if r.decode_tps)
        ttft = statistics.median(r.ttft_s for r in ok if r.ttft_s is not None)
        rel = abs(tps - truth) / truth
        ttft_err = abs(ttft - TTFT_MS / 1000)
        print(f"{name:<14} {truth:>11.2f} {tps:>13.2f} {rel:>7.3%} {TTFT_MS:>8.1f}ms {ttft * 1000:>6.2f}ms "
              f"{ttft_err * 1000:>6.2f}ms")
        if rel > LIMITS["tok_s_rel"]:
            failures.append(f"{name}: tok/s error {rel:.3%} > {LIMITS['tok_s_rel']:.1%}")
        if ttft_err > LIMITS["ttft_abs_s"]:
            failures.append(f"{name}: TTFT error {ttft_err * 1000:.2f} ms > {LIMITS['ttft_abs_s'] * 1000:.0f} ms")
    latencies = []
    for crash in (e for e in events if isinstance(e, CrashDetected)):
        first = next((line for line in crash.excerpt if "hit an exception" in line), None)
        stamp = line_timestamp(first) if first else None
        if stamp is not None:
            latencies.append(crash.ts - stamp)
    if len(latencies) < len(CRASH_BUDGETS):
        failures.append(f"only {len(latencies)} of {len(CRASH_BUDGETS)} crashes were detected")
    if latencies:
        p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
        print(f"\ncrash-to-detection latency over {len(latencies)} crashes: p50 {p50 * 1000:.1f} ms, "
              f"p95 {p95 * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms "
              "(log timestamps have 1 ms resolution)")
        if p95 > LIMITS["detect_p95_s"]:
            failures.append(f"detection p95 {p95:.3f} s > {LIMITS['detect_p95_s']} s")
    print(f"\nran in {time.monotonic() - started:.1f} s")
    for failure in failures:
        print(f"FAIL: {failure}")
    if not failures:
        print("PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
