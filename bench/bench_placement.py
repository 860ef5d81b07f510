"""Placement benchmark: the real orchestrator against the simulator on an 8-GPU pool, sequential vs concurrent.

Section 1 (measured, the done-when figure of the GPU issue): a mix of TP1, TP4 and TP8 configurations is
run by :class:`specbench_tui.engine.orchestrator.Orchestrator` against ``python -m specbench_tui.sim`` with
scaled-down times (``SPECBENCH_SIM_TIME_SCALE`` for start-up, deterministic request times of a second or
two), on the simulator's fake 8-GPU box:

1. sequentially (``sweep.concurrent = false``): the sequential makespan, and each configuration's measured
   duration (launch to end, i.e. how long it held its GPUs);
2. concurrently (``sweep.concurrent = true``) with those durations as the placement's estimates (what a
   re-run or a resumed run knows); with ``--blind`` also without them (the orchestrator then only learns from
   configurations finishing during the run).

The lower bound is max(longest configuration, total GPU-seconds / 8) over the durations the configurations
had in the concurrent run itself (on a 2-core machine, simulators starting side by side slow each other's
start-up down; that is contention, not placement), and the ratio is concurrent makespan / that bound: what
the dispatcher loses to order, gaps and idle GPUs. The bound over the sequential durations is printed too.
Exits 1 when the informed ratio exceeds 1.10. About 50 s on 2 cores.

Section 2 (planned, ``--mixes N``): the discrete simulation of :mod:`specbench_tui.core.placement` over
random campaign-sized mixes (24-48 configurations of 1-10 min): the same ratio, without processes.

    .venv/bin/python bench/bench_placement.py [--blind] [--mixes 12]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specbench_tui.core.events import ConfigFinished, Event, ServerLaunching  # noqa: E402
from specbench_tui.core.placement import Job, best_order, lower_bound, sequential, tight_lower_bound  # noqa: E402
from specbench_tui.core.plan import Plan, build_plan  # noqa: E402
from specbench_tui.core.sweep.loader import load_sweep  # noqa: E402
from specbench_tui.engine.gpus import FakeBackend  # noqa: E402
from specbench_tui.engine.orchestrator import Orchestrator  # noqa: E402
from specbench_tui.engine.server import find_free_port  # noqa: E402
from specbench_tui.rundir.store import RunDir  # noqa: E402

POOL = 8
LIMIT = 1.10
TOKENS = 40
"""Output tokens per request; each configuration runs 2 requests, so its duration is 2 x 40 / tok_s."""

MIX = [(8, 2.0), (4, 2.4), (4, 2.4), (4, 2.4), (1, 2.4), (1, 2.4), (1, 2.4), (1, 2.4)]
"""(TP, seconds of requests) per configuration: 1 x TP8, 3 x TP4, 4 x TP1. A perfect packing exists (the TP8
alone, two TP4 side by side, a TP4 beside four TP1), so the ratio shows what the dispatcher itself loses."""

PROFILE = """
time_scale = 0.02
[deterministic]
enabled = true
tok_s = 100.0
accept_length = 1.0
ttft_ms = 2.0
[output]
eos = false
[shutdown]
poll_s = 0.02
{rules}
"""

RULE = """
[[deterministic.config]]
model = "{model}"
tok_s = {tok_s}
"""

SWEEP = """
[sweep]
name = "placement-{mode}"
gpus = {pool}
concurrent = {concurrent}
repeats = 1
warmup = 0

[engine]
launcher = "simulator"
sim_profile = "sim_profile.toml"
port_base = {port}
startup_timeout_s = 60
shutdown_grace_s = 2
gpu_release_timeout_s = 5

[server.args]
context-length = 4096

[[workloads]]
name = "math"
kind = "arithmetic"
count = 2
max_new_tokens = {tokens}
{configs}
"""

CONFIG = """
[[configs]]
name = "{name}"
algorithm = "autoregressive"
args = {{ tp-size = {tp}, model-path = "bench/{model}" }}
"""


def _write(folder: Path, mode: str, concurrent: bool) -> Plan:
    folder.mkdir(parents=True, exist_ok=True)
    rules, configs = [], []
    for i, (tp, seconds) in enumerate(MIX):
        model = f"m{i:02d}-tp{tp}"
        rules.append(RULE.format(model=model, tok_s=round(2 * TOKENS / seconds, 3)))
        configs.append(CONFIG.format(name=f"c{i:02d}-tp{tp}-{seconds:g}s", tp=tp, model=model))
    (folder / "sim_profile.toml").write_text(PROFILE.format(rules="".join(rules)))
    port = find_free_port("127.0.0.1", 21000 + (os.getpid() * 53) % 20000)
    path = folder / "sweep.toml"
    path.write_text(SWEEP.format(mode=mode, pool=POOL, concurrent=str(concurrent).lower(), port=port,
                                 tokens=TOKENS, configs="".join(configs)))
    return build_plan(load_sweep(path))


async def _run(plan: Plan, runs: Path, estimates: dict[str, float] | None) -> tuple[float, dict[str, float], int]:
    """Wall makespan, each configuration's held time (launch to end), and the peak of servers up at once."""
    run_dir = RunDir.create(runs, plan.sweep.name, plan.sweep.text, plan.to_json())
    orchestrator = Orchestrator(plan, run_dir, backend=FakeBackend(POOL, load_s=0.2), write_env=False)
    if estimates:
        orchestrator.seed_estimates(estimates)
    events: list[Event] = []
    orchestrator.subscribe(events.append)
    started = time.monotonic()
    try:
        outcome = await orchestrator.run()
    finally:
        run_dir.close()
    makespan = time.monotonic() - started
    if outcome.state != "completed" or any(s.value != "done" for s in outcome.states.values()):
        raise SystemExit(f"the {plan.sweep.name} run did not complete: {outcome}")
    launched = {e.config_id: e.ts for e in events if isinstance(e, ServerLaunching)}
    ended = {e.config_id: e.ts for e in events if isinstance(e, ConfigFinished)}
    held = {plan.by_id(cid).name: ended[cid] - ts for cid, ts in launched.items()}
    points = sorted([(ts, 1) for ts in launched.values()] + [(ts, -1) for ts in ended.values()])
    peak = level = 0
    for _, step in points:
        level += step
        peak = max(peak, level)
    return makespan, held, peak


def measured(blind: bool) -> float:
    os.environ["SPECBENCH_SIM_TIME_SCALE"] = "0.02"
    print(f"1. measured: the orchestrator against the simulator, pool {POOL} GPUs, "
          f"{sum(t == 1 for t, _ in MIX)} x TP1 + {sum(t == 4 for t, _ in MIX)} x TP4 + "
          f"{sum(t == 8 for t, _ in MIX)} x TP8")
    with tempfile.TemporaryDirectory(prefix="bench-placement-") as tmp:
        root = Path(tmp)
        seq_plan = _write(root / "sequential", "sequential", False)
        seq_makespan, seq_held, _ = asyncio.run(_run(seq_plan, root / "runs", None))
        plan = _write(root / "concurrent", "concurrent", True)
        estimates = {plan.by_name(name).id: seconds for name, seconds in seq_held.items()}
        rows = [("informed", *asyncio.run(_run(plan, root / "runs", estimates)))]
        if blind:
            rows.append(("blind", *asyncio.run(_run(plan, root / "runs", None))))
    seq_jobs = [Job(c.name, c.gpus_needed, seq_held[c.name]) for c in seq_plan.configs]
    seq_bound = lower_bound(seq_jobs, POOL)
    print("   held (s, launch to end, sequential run): "
          + ", ".join(f"{j.key.split('-', 1)[1]}={j.duration_s:.1f}" for j in seq_jobs))
    print(f"   sequential makespan {seq_makespan:6.1f} s   (lower bound over these durations {seq_bound:.1f} s, "
          f"planned concurrent schedule {best_order(seq_jobs, POOL).makespan_s:.1f} s)")
    ratio = 0.0
    for label, makespan, held, peak in rows:
        jobs = [Job(c.name, c.gpus_needed, held[c.name]) for c in plan.configs]
        bound = lower_bound(jobs, POOL)
        print(f"   concurrent ({label}): makespan {makespan:5.1f} s, lower bound {bound:5.1f} s "
              f"(tight {tight_lower_bound(jobs, POOL):.1f} s) -> ratio {makespan / bound:.3f}; "
              f"up to {peak} servers at once; {seq_makespan / makespan:.2f}x faster than sequential; "
              f"vs the sequential durations' bound {makespan / seq_bound:.3f}")
        if label == "informed":
            ratio = makespan / bound
    print("   (the ratio's bound is over the durations the configurations had in that run: on a small CPU the "
          "simulators' start-ups slow each other down, which is not the placement's doing)")
    return ratio


def mix(seed: int) -> list[Job]:
    rng = random.Random(seed)
    return [Job(f"c{i:02d}", rng.choices([1, 4, 8], [0.6, 0.3, 0.1])[0], rng.uniform(60, 600))
            for i in range(rng.randint(24, 48))]


def planned(mixes: int, seed: int) -> float:
    print(f"\n2. planned: the discrete dispatcher simulation, {mixes} random mixes of 24-48 configurations (1-10 min)")
    print(f"   {'mix':>3} {'n':>3} {'tp1/4/8':>8} {'sequential':>11} {'concurrent':>11} {'lower bd':>9} {'ratio':>6} "
          f"{'tight':>6}")
    worst = 0.0
    for k in range(mixes):
        jobs = mix(seed + k)
        plan = best_order(jobs, POOL)
        worst = max(worst, plan.ratio)
        sizes = "/".join(str(sum(j.gpus == g for j in jobs)) for g in (1, 4, 8))
        print(f"   {k:>3} {len(jobs):>3} {sizes:>8} {sequential(jobs, POOL).makespan_s:>10.0f}s "
              f"{plan.makespan_s:>10.0f}s {plan.lower_bound_s:>8.0f}s {plan.ratio:>6.3f} "
              f"{plan.makespan_s / tight_lower_bound(jobs, POOL):>6.3f}")
    print(f"   worst planned ratio {worst:.3f}")
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blind", action="store_true", help="also run concurrently without duration estimates")
    parser.add_argument("--mixes", type=int, default=12, help="random mixes of section 2 (0: skip it)")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    started = time.monotonic()
    ratio = measured(args.blind)
    worst_planned = planned(args.mixes, args.seed) if args.mixes > 0 else 0.0
    ok = ratio <= LIMIT and worst_planned <= LIMIT
    print(f"\nmeasured concurrent/lower-bound ratio {ratio:.3f}, worst planned {worst_planned:.3f}: "
          f"{'OK' if ok else 'FAIL'} (limit {LIMIT:.2f}); {time.monotonic() - started:.1f} s in all")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
