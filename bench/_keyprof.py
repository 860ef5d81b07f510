"""Headless CPU cost of each key on the 200×8 table (a development helper: cProfile per key).

    .venv/bin/python bench/_keyprof.py [KEYS...] [--profile KEY]

Environment: ``SORT=tottime`` orders the profile; ``FRAMES=1`` prints each press's frames (start, CPU ms);
``GCLOG=1`` prints the garbage collections (``GCLOG=2`` each full one); ``GARBAGE=1`` what 5 s of flood leave
as cyclic garbage; ``PACE=S`` runs the app's paced full collections every S seconds.
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
    if os.environ.get("PACE"):
        import specbench_tui.tui.gc_pacing as pacing
        pacing.AT_MOST_S = pacing.EVERY_S = float(os.environ["PACE"])
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
    import gc
    collections: list[tuple[int, float, int]] = []
    started: dict[str, float] = {}

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            started["t"] = time.perf_counter()
        else:
            collections.append((info["generation"], (time.perf_counter() - started.get("t", 0)) * 1000,
                                info.get("collected", 0)))
            if info["generation"] == 2 and os.environ.get("GCLOG") == "2":
                print(f"gen2 at {time.monotonic():.1f}: {collections[-1][1]:.0f} ms, collected {info.get('collected')}, "
                      f"frozen {gc.get_freeze_count()}, tracked {len(gc.get_objects(2))}")

    if os.environ.get("GCLOG"):
        gc.callbacks.append(on_gc)
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
        if os.environ.get("GARBAGE"):
            import gc as _gc
            from collections import Counter as _Counter
            _gc.collect()
            await pilot.pause(5.0)
            _gc.set_debug(_gc.DEBUG_SAVEALL)
            _gc.collect()
            print("garbage in 5 s:", len(_gc.garbage), _Counter(type(o).__qualname__ for o in _gc.garbage).most_common(30))
            _gc.set_debug(0)
            _gc.garbage.clear()
        engine.flood.stop.set()
        if os.environ.get("GCLOG"):
            from collections import Counter
            print(Counter(type(o).__name__ for o in gc.get_objects(2)).most_common(25))
            for generation in (0, 1, 2):
                times = sorted(ms for g, ms, _ in collections if g == generation)
                if times:
                    print(f"gc gen{generation}: {len(times)} collections, median {times[len(times)//2]:.1f} ms, "
                          f"max {times[-1]:.1f} ms, total {sum(times):.0f} ms")


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
