"""Start-up: ``specbench --help``, and ``specbench run`` up to its first screen.

1. ``specbench --help``: wall time of the installed console script (``.venv/bin/specbench``, else
   ``python -m specbench_tui``) from spawn to exit, 7 runs, median. Target 0.3 s.
2. First screen: ``specbench run sweeps/demo.toml`` in a real pty (160×48) from spawn to the moment the pty
   output carries the main screen's panels (``Sweep queue`` and ``Server log`` titles), 5 runs, median: the
   engine process started and owning its run directory, then the TUI attached to it. The client is then
   SIGKILLed and the sweep stopped with ``specbench stop --now``.
   Target 1.5 s.

Exit status 1 when a median misses its target. About 20 s on 2 cores.

    .venv/bin/python bench/bench_startup.py
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _pty import PtyProcess

TARGETS = {"help_s": 0.3, "first_screen_s": 1.5}


def specbench() -> list[str]:
    script = Path(sys.executable).with_name("specbench")
    if script.exists():
        return [str(script)]
    found = shutil.which("specbench")
    return [found] if found else [sys.executable, "-m", "specbench_tui"]


def help_seconds(runs: int = 7) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.monotonic()
        subprocess.run([*specbench(), "--help"], check=True, stdout=subprocess.DEVNULL)
        times.append(time.monotonic() - started)
    return times


def first_screen_seconds(runs: int = 5) -> list[float]:
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="specbench-startup-") as tmp:
            with PtyProcess([*specbench(), "run", str(ROOT / "sweeps" / "demo.toml"), "--runs-dir", tmp],
                            cols=160, rows=48, cwd=tmp) as app:
                queue = app.wait_for(b"Sweep queue", 0, 15)
                log = app.wait_for(b"Server log", 0, 15)
                if queue is None or log is None:
                    raise RuntimeError("no first screen within 15 s:\n"
                                       + app.output_since(0)[-2000:].decode(errors="replace"))
                times.append(max(queue, log) - app.started_at)
                # Leaving: SIGKILL (PtyProcess.close) of the client; the sweep runs on in its engine process.
            for run_dir in Path(tmp).glob("*/engine.sock"):  # stop it, so that no demo sweep outlives the bench
                subprocess.run([*specbench(), "stop", str(run_dir.parent), "--now"], check=False,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    return times


def main() -> int:
    started = time.monotonic()
    helps = help_seconds()
    screens = first_screen_seconds()
    rows = [("specbench --help (s)", statistics.median(helps), TARGETS["help_s"], helps),
            ("first screen of specbench run (s)", statistics.median(screens), TARGETS["first_screen_s"], screens)]
    failures = []
    for name, value, target, runs in rows:
        print(f"{name:<36} median {value:.3f}  (runs: {', '.join(f'{v:.3f}' for v in runs)})  target < {target}")
        if value >= target:
            failures.append(name)
    print(f"\nran in {time.monotonic() - started:.1f} s")
    for name, value, target, _ in rows:
        print(f"FIGURE|start-up: {name}|{value:.3f} s|< {target} s|{'pass' if value < target else 'FAIL'}")
    print("PASS" if not failures else "FAIL: " + "; ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
