"""What a newcomer waits for the demo's reports (issue 46): ``specbench report RUN --format html`` and
``specbench report RUN --figures DIR`` on the demo's own run (tests/data/figure_demo_run: a headless run of
sweeps/demo.toml on the simulator, 14 configurations, 7 figures), each in a fresh process as a user runs it.
Wall seconds and the process's CPU seconds are printed; the wall clock is the figure (what a user waits).

Target: HTML ≤ 3 s and ``--figures`` ≤ 10 s on 2 cores.

    .venv/bin/python bench/bench_report_demo.py [RUN_DIR]
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, figure, verdict  # noqa: E402

TARGETS = {"html": 3.0, "figures": 10.0}


def _timed(args: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "specbench_tui", *args], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    run_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests" / "data" / "figure_demo_run"
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = {"html": ["report", str(run_dir), "--format", "html"],
                "figures": ["report", str(run_dir), "--figures", str(Path(tmp) / "figures")]}
        for name, args in runs.items():
            wall, cpu = _timed(args)
            ok = wall <= TARGETS[name]
            figure(f"demo report {name} wall", f"{wall:.2f} s (cpu {cpu:.2f} s)", f"<= {TARGETS[name]:.0f} s", ok)
            if not ok:
                failures.append(f"{name}: {wall:.2f} s > {TARGETS[name]:.0f} s")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
