"""Headless CPU cost of each key on the 200×8 table (a development helper: cProfile per key).

    .venv/bin/python bench/_keyprof.py [KEYS...] [--profile KEY]
"""
from __future__ import annotations

import asyncio
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _flood_app import FloodEngine, table_sweep  # noqa: E402

from specbench_tui.core.plan import build_plan  # noqa: E402
from specbench_tui.core.sweep.loader import parse_sweep  # noqa: E402


SORT = "cumulative"


async def main(keys: list[str], profile: str | None, rounds: int) -> None:
    import specbench_tui.tui.app as app_module
    from specbench_tui.tui.app import SpecbenchApp

    plan = build_plan(parse_sweep(table_sweep(200, 8), Path("table.toml")))
    engine = FloodEngine(plan, Path("/tmp/specbench-flood-prof"), 10000, 10**9, table=True)

    class BenchApp(SpecbenchApp):
        CSS_PATH = str(Path(app_module.__file__).with_name("app.tcss"))

    app = BenchApp(engine)
    from textual.screen import Screen
    frames: list[tuple[float, float]] = []
    original = Screen._compositor_refresh

    def timed(self):  # noqa: ANN001, ANN202
        t0 = time.thread_time()
        w0 = time.monotonic()
        result = original(self)
        frames.append((w0, (time.thread_time() - t0) * 1000))
        return result

    Screen._compositor_refresh = timed  # type: ignore[method-assign]
    async with app.run_test(size=(160, 48), headless=True) as pilot:
        for _ in range(60):
            await pilot.pause(0.1)
            if app.analysis is not None and app.analysis_settled:
                break
        await pilot.pause(1.0)
        for key in keys:
            sequence = {"l": ["l", "escape"], "/": ["l", "/", "escape", "escape"],
                        "ctrl+p": ["ctrl+p", "escape"]}.get(key, [key])
            times = []
            prof = cProfile.Profile() if key == profile else None
            for _ in range(rounds):
                for k in sequence:
                    await pilot.pause(0.3)
                    t0 = time.thread_time()
                    w0 = time.monotonic()
                    if prof and k == key:
                        prof.enable()
                    await pilot.press(k)
                    await pilot.pause()
                    await app.screen._compositor_refresh() if False else None
                    if prof and k == key:
                        prof.disable()
                    if k == key:
                        times.append((time.thread_time() - t0) * 1000)
                        if os.environ.get("FRAMES"):
                            await pilot.pause(0.3)
                            print(key, "frames", [(round((w - w0) * 1000), round(c)) for w, c in frames if w >= w0][:12])
            times.sort()
            print(f"{key:8} cpu ms: median {times[len(times)//2]:.1f}  max {times[-1]:.1f}  {[round(t) for t in times]}")
            if prof:
                pstats.Stats(prof).sort_stats(SORT).print_stats(45)
        engine.flood.stop.set()


if __name__ == "__main__":
    import os
    SORT = os.environ.get("SORT", "cumulative")
    args = sys.argv[1:]
    profile = None
    if "--profile" in args:
        i = args.index("--profile")
        profile = args[i + 1]
        del args[i:i + 2]
    asyncio.run(main(args or ["p", "m", "o", "t", "s", "r", "S", "l", "/", "ctrl+p"], profile, 6))
