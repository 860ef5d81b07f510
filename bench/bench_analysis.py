"""What the results table costs the TUI: the run's analysis runs in a worker thread, and only the ledger's snapshot
(a copy of references) is taken on the UI thread. Times both over campaign-sized ledgers: 64 configurations x 4
workloads x 3 repeats, with 1k, 10k and 50k measurements. No processes; a few seconds.

Targets: the snapshot under 5 ms (a frame is 16 ms), the analysis of 50k measurements under 2 s (it never blocks
the screen, but a table that lags the run by more than that would look stuck). The snapshot's figure is the median
of five, each taken after the ledger changed (a measurement recorded again, as a live run does between two): one
timing alone is as often the cyclic garbage collector's pass over every object the process made (the 50k
measurements just built, 4-5 ms here) as the snapshot's copy of references (under 1 ms); the slowest is printed.

The report's bootstrap intervals (core/intervals.py, scipy) are timed apart: the TUI's live analysis does without
them, a report computes them once. Target: under 15 s of CPU for 50k measurements (252 speculative cells of 195
(item, repeat) pairs: two scipy.stats.bootstrap calls each, the speedup's and the acceptance figures' together,
2000 resamples; about 40 ms a cell on a loaded 2-core box, most of it gathering the resampled values), with
scipy's import counted in the first row. Times are wall and CPU (the process' own), with the load average.

    .venv/bin/python bench/bench_analysis.py
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import figure, verdict  # noqa: E402

from specbench_tui.core.events import ConfigFinished, ConfigState  # noqa: E402
from specbench_tui.core.ledger import Ledger  # noqa: E402
from specbench_tui.core.records import Measurement  # noqa: E402

CONFIGS, WORKLOADS, REPEATS = 64, 4, 3


def ledger_of(total: int) -> Ledger:
    configs = [{"id": f"c{i}", "name": f"cfg{i}", "algorithm": "ddtree" if i else "autoregressive", "tp": 1,
                "argv": [], "params": {"budget": i}, "baseline": None if i == 0 else "cfg0", "skip_reason": None}
               for i in range(CONFIGS)]
    plan = {"sweep": "bench", "configs": configs,
            "workloads": [{"name": f"w{j}", "kind": "code", "temperature": 0.0, "repeats": REPEATS}
                          for j in range(WORKLOADS)]}
    rng = random.Random(0)
    items = max(1, total // (CONFIGS * WORKLOADS * REPEATS))
    measurements = [Measurement(c["id"], c["name"], f"w{j}", f"i{k}", r, "ok", decode_tps=rng.uniform(50, 300),
                                ttft_s=0.05, accept_length=rng.uniform(2.5, 3.5), verify_ct=20, output_sha="x",
                                completion_tokens=rng.randint(50, 70), correct_drafts=40, proposed_drafts=60)
                    for c in configs for j in range(WORKLOADS) for r in range(1, REPEATS + 1) for k in range(items)]
    events = [ConfigFinished(config_id=c["id"], name=c["name"], state=ConfigState.DONE) for c in configs]
    return Ledger.from_run(plan, measurements, events)


def main() -> int:
    from specbench_tui.core.intervals import with_intervals

    failures: list[str] = []
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'measurements':>12}  {'snapshot (UI thread)':>20}  {'analysis (worker)':>18}  "
          f"{'intervals (report), wall / CPU':>30}")
    for total in (1_000, 10_000, 50_000):
        ledger = ledger_of(total)
        snaps = []
        for _ in range(5):
            ledger.add(next(iter(ledger.measurements.values())))  # a change: the snapshot is taken anew
            started = time.perf_counter()
            snapshot = ledger.snapshot()
            snaps.append((time.perf_counter() - started) * 1000)
        snap_ms = statistics.median(snaps)
        started = time.perf_counter()
        analysis = snapshot.analyse()
        analyse_ms = (time.perf_counter() - started) * 1000
        started, cpu = time.perf_counter(), time.process_time()
        with_intervals(analysis, snapshot.measurements)
        ci_s, ci_cpu = time.perf_counter() - started, time.process_time() - cpu
        print(f"{len(snapshot.measurements):>12}  {snap_ms:>17.2f} ms  {analyse_ms:>15.0f} ms  "
              f"{ci_s:>17.2f} s / {ci_cpu:.2f} s   (snapshots: slowest {max(snaps):.2f} ms)")
        if total == 50_000:
            figure("bootstrap intervals of a report, 50k measurements (CPU)", f"{ci_cpu:.1f} s", "< 15 s",
                   ci_cpu < 15)
            if ci_cpu >= 15:
                failures.append(f"intervals took {ci_cpu:.1f} s of CPU")
        if total == 50_000:
            figure("ledger snapshot on the UI thread, 50k measurements", f"{snap_ms:.2f} ms", "< 5 ms", snap_ms < 5)
            figure("analysis in the worker, 50k measurements", f"{analyse_ms:.0f} ms", "< 2000 ms",
                   analyse_ms < 2000)
            if snap_ms >= 5:
                failures.append(f"snapshot took {snap_ms:.2f} ms")
            if analyse_ms >= 2000:
                failures.append(f"analysis took {analyse_ms:.0f} ms")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
