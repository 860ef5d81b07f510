"""What a report of a load run at the documented configuration limit costs: 10,000 configurations x 3 load
points (30,000 measurements, built without a server through the run directory's writers by
tests/report_scale.py), then ``report`` (txt, md, csv, json, html) and ``compare`` of the run with itself, each in a
fresh process as a user runs it. CPU seconds of each process are the figure (a loaded box stretches the wall
clock, not the work).

Target: each under 30 s on 2 cores (html 60 s) (the loadview orders, groupings and Pareto front and the baseline match
were quadratic: 1,000 configurations took 6 s, 10,000 did not finish in 600 s).

    .venv/bin/python bench/bench_report_scale.py [configurations]
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

sys.path.insert(0, str(ROOT))

from tests.report_scale import build_scale_run  # noqa: E402

TARGET_S = 30.0
HTML_TARGET_S = 60.0
"""The HTML report draws its figures too (of the best configurations, report/figscope.py): a minute."""


def _cpu_of_child(argv: list[str]) -> tuple[int, float, float]:
    """Exit status, CPU seconds (user + system) and wall seconds of ``argv`` run to the end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=900)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
    return done.returncode, cpu, wall


def main() -> int:
    configs = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        run = build_scale_run(Path(folder), configs)
        print(f"built {configs:,} configurations x 3 load points in {time.perf_counter() - started:.1f} s")
        cli = [sys.executable, "-m", "specbench_tui"]
        cases = [(f"report --format {fmt}", [*cli, "report", str(run), "--format", fmt], TARGET_S)
                 for fmt in ("txt", "md", "csv", "json")]
        cases.append(("report --format html", [*cli, "report", str(run), "--format", "html"], HTML_TARGET_S))
        cases.append(("compare", [*cli, "compare", str(run), str(run)], TARGET_S))
        for name, argv, target in cases:
            code, cpu, wall = _cpu_of_child(argv)
            ok = code == 0 and cpu < target
            figure(f"{name}, {configs:,} configurations x 3 load points", f"{cpu:.1f} s CPU ({wall:.1f} s wall)",
                   f"< {target:g} s", ok)
            if not ok:
                failures.append(f"{name}: exit {code}, {cpu:.1f} s CPU")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
