"""UI cost and memory: the real app in a real pseudo-terminal under a flood of server log lines.

Figures (issue 9, 5 and 6):

1. **CPU**: CPU seconds the app process uses per wall second while 10,000 log lines a second pour in and nobody
   types, from ``/proc/PID/task/*/stat`` over a 10 s window, leaving out the bench's own line generator thread
   (``bench-flood``: in the product that work is the engine's log pump, not the UI's). Target < 0.15. The CPU
   while keys are being pressed (toasts animating) is printed too.
2. **Key-press-to-screen latency** under the same flood: a key is written to the terminal and the clock stops
   when the pty output first carries its effect. The key is ``o`` (sort the results by the next column), whose
   toast names the new order, so every press has its own text to wait for; 12 presses 0.8 s apart (5 orders
   cycle in 4 s, longer than a toast lives). p95 target < 100 ms. ``t`` (switch theme: restyles the whole
   screen, the dearest key there is) is measured too, and printed for information.
3. **Peak RSS after 1,000,000 log lines** (published at 50,000 a second, then drained into the panel):
   ``ru_maxrss`` of the app process. Target < 250 MB.

The app is the real ``SpecbenchApp`` on Textual's Linux driver (``bench/_flood_app.py``), 160×48, writing real
escape sequences that the bench drains as a terminal would. Exit status 1 when a target is missed.
About 55 s on 2 cores.

    .venv/bin/python bench/bench_ui.py
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _pty import PtyProcess

from specbench_tui.core.metrics import percentile

RATE = 10_000
CPU_WINDOW_S = 10.0
SORT_LABELS = ("tok/s", "speedup", "TTFT", "accept", "plan order")
THEMES = ("specbench-high-contrast", "specbench-light", "specbench-dark")
MEMORY_LINES = 1_000_000
MEMORY_RATE = 50_000
TARGETS = {"cpu": 0.15, "key_p95_ms": 100.0, "rss_mb": 250.0}


def _app(args: list[str]) -> PtyProcess:
    return PtyProcess([sys.executable, str(HERE / "_flood_app.py"), *args], cols=160, rows=48)


def flood_figures() -> dict[str, float | list[float]]:
    with _app(["--rate", str(RATE), "--exit-after", "40"]) as app:
        if app.wait_for(b"Sweep queue", 0, 20) is None:
            raise RuntimeError("the app did not draw its first screen")
        time.sleep(2.0)  # the flood is on and the panels have settled
        cpu0, total0, wall0 = app.cpu_seconds(("bench-flood",)), app.cpu_seconds(), time.monotonic()
        time.sleep(CPU_WINDOW_S)  # nobody types: the cost of the flood alone
        cpu1, total1, wall1 = app.cpu_seconds(("bench-flood",)), app.cpu_seconds(), time.monotonic()
        sort_ms: list[float] = []
        for i in range(12):
            sent = app.send(b"o")
            seen = app.wait_for(f"Results sorted by {SORT_LABELS[i % 5]}".encode(), sent, 3.0)
            sort_ms.append((seen - sent) * 1000 if seen is not None else 3000.0)
            time.sleep(max(0.0, sent + 0.8 - time.monotonic()))
        cpu2, wall2 = app.cpu_seconds(("bench-flood",)), time.monotonic()
        theme_ms: list[float] = []
        for i in range(3):
            sent = app.send(b"t")
            seen = app.wait_for(f"Theme: {THEMES[i]}".encode(), sent, 3.0)
            theme_ms.append((seen - sent) * 1000 if seen is not None else 3000.0)
            time.sleep(max(0.0, sent + 1.2 - time.monotonic()))
        app.send(b"\x11")  # ctrl+q: quits at once (no server runs)
        app.wait(10)
    return {"cpu": (cpu1 - cpu0) / (wall1 - wall0), "cpu_with_generator": (total1 - total0) / (wall1 - wall0),
            "cpu_typing": (cpu2 - cpu1) / (wall2 - wall1),
            "sort_ms": sort_ms, "theme_ms": theme_ms, "output_mb": app.total_bytes / 1e6}


def memory_figure() -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="specbench-ui-") as tmp:
        result = Path(tmp) / "result.json"
        started = time.monotonic()
        with _app(["--rate", str(MEMORY_RATE), "--lines", str(MEMORY_LINES), "--exit-when-done",
                   "--exit-after", "50", "--result", str(result)]) as app:
            app.wait(55)
        info = json.loads(result.read_text()) if result.exists() else {}
    return {"rss_mb": float(info.get("peak_rss_mb", float("nan"))), "lines": float(info.get("lines_received", 0)),
            "seconds": time.monotonic() - started}


def main() -> int:
    started = time.monotonic()
    flood = flood_figures()
    memory = memory_figure()
    sort_ms = flood["sort_ms"]
    theme_ms = flood["theme_ms"]
    assert isinstance(sort_ms, list) and isinstance(theme_ms, list)
    key_p95 = percentile(sort_ms, 95) or 0.0
    print(f"flood: {RATE} lines/s into the real app on a 160x48 pty ({flood['output_mb']:.1f} MB of screen output)")
    print(f"  key 'o' (sort) latencies, ms: {', '.join(f'{v:.0f}' for v in sort_ms)}")
    print(f"  key 't' (theme, restyles everything) latencies, ms: {', '.join(f'{v:.0f}' for v in theme_ms)}")
    print(f"  CPU with the line generator thread included: {flood['cpu_with_generator']:.3f} core; "
          f"while 'o' is pressed every 0.8 s (toasts animating): {flood['cpu_typing']:.3f} core")
    print(f"memory: {memory['lines']:.0f} lines at {MEMORY_RATE}/s, {memory['seconds']:.1f} s")
    rows = [
        ("UI CPU at 10k lines/s (cores)", flood["cpu"], TARGETS["cpu"], "{:.3f}"),
        ("key-to-screen p95 at 10k lines/s (ms)", key_p95, TARGETS["key_p95_ms"], "{:.0f}"),
        ("peak RSS after 1M log lines (MB)", memory["rss_mb"], TARGETS["rss_mb"], "{:.0f}"),
    ]
    failures = []
    print(f"\n{'figure':<42} {'value':>8} {'target':>8}")
    for name, value, target, fmt in rows:
        ok = value < target and memory["lines"] >= MEMORY_LINES if "RSS" in name else value < target
        print(f"{name:<42} {fmt.format(value):>8} {'< ' + fmt.format(target):>8}  {'PASS' if ok else 'FAIL'}")
        if not ok:
            failures.append(name)
    print(f"\nran in {time.monotonic() - started:.1f} s")
    print("PASS" if not failures else "FAIL: " + "; ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
