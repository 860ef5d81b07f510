"""Placement benchmark: concurrent makespan / lower bound next to the sequential makespan, on 8 GPUs.

Two measurements of random campaign-sized mixes of TP1, TP4 and TP8 configurations (durations 1-10 min):

1. planned: the discrete simulation of :mod:`specbench_tui.core.placement` (the dispatcher's timeline);
2. measured: the real dispatcher pieces run against the clock, scaled down (--scale, default 1/2000: a
   10-minute configuration lasts 0.3 s). The order from ``order_configs`` drives a real ``GpuPool``; each
   "server" is attached to a ``FakeBackend`` (memory follows it), detached at the end, and its GPUs are
   only returned after ``wait_gpus_released`` sees its pids gone (the fake's release delay, scaled too).

When the orchestrator (``specbench_tui.engine.orchestrator``) exists, say so; it is not driven here.
Exits 1 when any concurrent makespan exceeds 1.10 × the lower bound. Runs in a few seconds on 2 cores.

    .venv/bin/python bench/bench_placement.py [--mixes 12] [--measured 3] [--scale 0.0005]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specbench_tui.core.placement import Job, best_order, order_configs, sequential, tight_lower_bound  # noqa: E402
from specbench_tui.engine.gpus import FakeBackend, GpuPool, wait_gpus_released  # noqa: E402

POOL = 8
LIMIT = 1.10
RELEASE_DELAY_S = 5.0
"""Seconds a stopped server's memory stays held (before scaling)."""


@dataclass(frozen=True)
class Config:
    id: str
    name: str
    gpus_needed: int


def mix(seed: int) -> list[Job]:
    rng = random.Random(seed)
    return [Job(f"c{i:02d}", rng.choices([1, 4, 8], [0.6, 0.3, 0.1])[0], rng.uniform(60, 600))
            for i in range(rng.randint(24, 48))]


def describe(jobs: list[Job]) -> str:
    return "/".join(str(sum(j.gpus == g for j in jobs)) for g in (1, 4, 8))


async def measure(jobs: list[Job], scale: float) -> float:
    """Wall-clock makespan (unscaled seconds) of the dispatcher running ``jobs`` on a fake 8-GPU box."""
    durations = {j.key: j.duration_s for j in jobs}
    configs = [Config(j.key, j.key, j.gpus) for j in jobs]
    order = order_configs(configs, POOL, concurrent=True, estimate=durations)
    backend = FakeBackend(POOL, release_delay_s=RELEASE_DELAY_S * scale, load_s=0.0)
    pool = GpuPool(tuple(range(POOL)))
    poll_s = max(0.001, RELEASE_DELAY_S * scale / 4)

    async def run(config: Config, gpus: tuple[int, ...], pid: int) -> None:
        backend.attach(config.name, gpus, (pid,))
        backend.set_busy(gpus, True)
        await asyncio.sleep(max(0.0, durations[config.id] * scale - RELEASE_DELAY_S * scale))
        backend.detach(gpus)
        leftover = await wait_gpus_released(backend, gpus, {pid}, timeout_s=10.0, poll_s=poll_s)
        assert not leftover, leftover
        await pool.release(gpus)

    started = time.monotonic()
    tasks = []
    for pid, config in enumerate(order, start=1000):
        gpus = await pool.acquire(config.gpus_needed)
        tasks.append(asyncio.create_task(run(config, gpus, pid)))
    await asyncio.gather(*tasks)
    return (time.monotonic() - started) / scale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mixes", type=int, default=12, help="random mixes planned (default 12)")
    parser.add_argument("--measured", type=int, default=3, help="of which run against the clock (default 3)")
    parser.add_argument("--scale", type=float, default=1 / 2000, help="time scale of the measured runs")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    has_orchestrator = importlib.util.find_spec("specbench_tui.engine.orchestrator") is not None
    print(f"pool {POOL} GPUs; mixes of TP1/TP4/TP8 configurations, 1-10 min each; limit {LIMIT:.2f} x lower bound")
    print("orchestrator: " + ("present (not driven by this bench)" if has_orchestrator else
                              "not present: measured on GpuPool + FakeBackend + wait_gpus_released"))
    print(f"{'mix':>4} {'n':>3} {'tp1/4/8':>8} {'sequential':>11} {'concurrent':>11} {'lower bd':>9} "
          f"{'ratio':>6} {'tight':>6} {'measured':>9} {'ratio':>6}  s/plan")
    worst = 0.0
    started = time.monotonic()
    for k in range(args.mixes):
        jobs = mix(args.seed + k)
        t0 = time.perf_counter()
        plan = best_order(jobs, POOL)
        plan_s = time.perf_counter() - t0
        serial = sequential(jobs, POOL).makespan_s
        tight = plan.makespan_s / tight_lower_bound(jobs, POOL)
        worst = max(worst, plan.ratio)
        measured_text = ratio_text = "-"
        if k < args.measured:
            measured = asyncio.run(measure(jobs, args.scale))
            worst = max(worst, measured / plan.lower_bound_s)
            measured_text, ratio_text = f"{measured:9.0f}", f"{measured / plan.lower_bound_s:6.3f}"
        print(f"{k:>4} {len(jobs):>3} {describe(jobs):>8} {serial:>10.0f}s {plan.makespan_s:>10.0f}s "
              f"{plan.lower_bound_s:>8.0f}s {plan.ratio:>6.3f} {tight:>6.3f} {measured_text:>9} {ratio_text:>6}  "
              f"{plan_s:.3f}")
    verdict = "OK" if worst <= LIMIT else "FAIL"
    print(f"worst concurrent/lower-bound ratio {worst:.3f} ({verdict}); {time.monotonic() - started:.1f} s in all")
    return 0 if worst <= LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
