"""What the results table costs the TUI: the run's analysis runs in a worker thread, and only the ledger's snapshot
(a copy of references) is taken on the UI thread. Times both over campaign-sized ledgers: 64 configurations x 4
workloads x 3 repeats, with 1k, 10k and 50k measurements. No processes; a few seconds.

Targets: the snapshot under 5 ms (a frame is 16 ms), the analysis of 50k measurements under 2 s (it never blocks
the screen, but a table that lags the run by more than that would look stuck).

    .venv/bin/python bench/bench_analysis.py
"""

from __future__ import annotations

import random
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
                                ttft_s=0.05, accept_length=3.0, verify_ct=20, output_sha="x")
                    for c in configs for j in range(WORKLOADS) for r in range(1, REPEATS + 1) for k in range(items)]
    events = [ConfigFinished(config_id=c["id"], name=c["name"], state=ConfigState.DONE) for c in configs]
    return Ledger.from_run(plan, measurements, events)


def main() -> int:
    failures: list[str] = []
    print(f"{'measurements':>12}  {'snapshot (UI thread)':>20}  {'analysis (worker)':>18}")
    for total in (1_000, 10_000, 50_000):
        ledger = ledger_of(total)
        started = time.perf_counter()
        snapshot = ledger.snapshot()
        snap_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        snapshot.analyse()
        analyse_ms = (time.perf_counter() - started) * 1000
        print(f"{len(snapshot.measurements):>12}  {snap_ms:>17.2f} ms  {analyse_ms:>15.0f} ms")
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
