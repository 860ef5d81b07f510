"""What a newcomer waits for the demo's reports (issue 46): ``specbench report RUN --format html`` and
``specbench report RUN --figures DIR`` on the demo's own run (tests/data/figure_demo_run: a headless run of
sweeps/demo.toml on the simulator, 14 configurations, 7 figures), each in a fresh process as a user runs it.
Wall seconds and the process's CPU seconds are printed; the wall clock is the figure (what a user waits).

Target: HTML ≤ 3 s and ``--figures`` ≤ 10 s on 2 cores. Each command runs :data:`RUNS` times (after one unmeasured
run that warms the page cache); the figure is the median wall time, with the range and the median CPU seconds
(the process and its figure workers) beside it: on 2 cores the figures are drawn in two worker processes, so a
busy box shows in the wall time first.

    .venv/bin/python bench/bench_report_demo.py [RUN_DIR] [--runs N]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, figure, verdict  # noqa: E402

TARGETS = {"html": 3.0, "figures": 10.0}
RUNS = 5


def _timed(args: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "specbench_tui", *args], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", nargs="?", default=str(ROOT / "tests" / "data" / "figure_demo_run"))
    parser.add_argument("--runs", type=int, default=RUNS, help=f"measured runs of each command (default {RUNS})")
    args = parser.parse_args()
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = {"html": ["report", args.run_dir, "--format", "html", "-o", str(Path(tmp) / "report.html")],
                "figures": ["report", args.run_dir, "--figures", str(Path(tmp) / "figures")]}
        for name, argv in runs.items():
            _timed(argv)  # the page cache and the font cache warm, as for a user's second report
            times = [_timed(argv) for _ in range(args.runs)]
            wall = statistics.median(t for t, _ in times)
            cpu = statistics.median(c for _, c in times)
            ok = wall <= TARGETS[name]
            print(f"{name}: wall {', '.join(f'{t:.2f}' for t, _ in times)} s; cpu {', '.join(f'{c:.2f}' for _, c in times)}"
                  f" s; load {os.getloadavg()[0]:.1f}")
            figure(f"demo report {name} wall (median of {args.runs})",
                   f"{wall:.2f} s ({min(t for t, _ in times):.2f}-{max(t for t, _ in times):.2f}; cpu {cpu:.2f} s)",
                   f"<= {TARGETS[name]:.0f} s", ok)
            if not ok:
                failures.append(f"{name}: {wall:.2f} s > {TARGETS[name]:.0f} s")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
