"""Cluster placement benchmark: makespan / lower bound on a simulated 4 x 8-GPU cluster with mixed TP.

The discrete simulation of :mod:`specbench_tui.core.cluster_placement` (the Ray executor's dispatcher: strictly
in order, each configuration on one node where it fits tightest, a TP group never split over nodes) over
random campaign-sized mixes of TP1, TP4 and TP8 configurations of 1-10 minutes, 48-160 of them (a campaign
big enough to want four nodes). The lower bound is max(longest configuration, GPU-seconds / 32, TP8s one per
node at a time); the ratio is makespan / that bound. Exits 1 when the worst ratio exceeds 1.10. Well under a
second per mix; no Ray, no processes.

    .venv/bin/python bench/bench_cluster_placement.py [--mixes 24] [--nodes 8,8,8,8]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specbench_tui.core.cluster_placement import best_order, simulate  # noqa: E402
from specbench_tui.core.placement import Job  # noqa: E402

LIMIT = 1.10


def mix(seed: int) -> list[Job]:
    rng = random.Random(seed)
    return [Job(f"c{i:03d}", rng.choices([1, 4, 8], [0.6, 0.3, 0.1])[0], rng.uniform(60, 600))
            for i in range(rng.randint(48, 160))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mixes", type=int, default=24)
    parser.add_argument("--nodes", default="8,8,8,8", help="GPUs per node, comma-separated")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    nodes = [int(n) for n in args.nodes.split(",")]
    started = time.monotonic()
    print(f"cluster placement: {len(nodes)} nodes x {nodes} GPUs, {args.mixes} random mixes of TP1/TP4/TP8 (1-10 min)")
    print(f"   {'mix':>3} {'n':>4} {'tp1/4/8':>9} {'plan order':>11} {'placed':>9} {'lower bd':>9} {'ratio':>6}")
    worst = 0.0
    for k in range(args.mixes):
        jobs = mix(args.seed + k)
        naive = simulate(jobs, nodes)
        plan = best_order(jobs, nodes)
        worst = max(worst, plan.ratio)
        sizes = "/".join(str(sum(j.gpus == g for j in jobs)) for g in (1, 4, 8))
        print(f"   {k:>3} {len(jobs):>4} {sizes:>9} {naive.makespan_s:>10.0f}s {plan.makespan_s:>8.0f}s "
              f"{plan.lower_bound_s:>8.0f}s {plan.ratio:>6.3f}")
    ok = worst <= LIMIT
    print(f"\ncluster makespan / lower bound, worst of {args.mixes}: {worst:.3f}: {'OK' if ok else 'FAIL'} "
          f"(limit {LIMIT:.2f}); {time.monotonic() - started:.1f} s in all")
    print(f"FIGURE|cluster makespan / lower bound ({len(nodes)} x {max(nodes)} GPUs, mixed TP)|{worst:.3f}|"
          f"< {LIMIT:.2f}|{'pass' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
