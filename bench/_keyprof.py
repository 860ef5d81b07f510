"""Headless CPU cost of each key on the 200×8 table (a development helper: cProfile per key).

    .venv/bin/python bench/_keyprof.py [KEYS...] [--profile KEY]

Environment: ``SORT=tottime`` orders the profile; ``FRAMES=1`` prints each press's frames (start, CPU ms);
``GCLOG=1`` prints the garbage collections (``GCLOG=2`` each full one); ``GARBAGE=1`` what 5 s of flood leave
as cyclic garbage; ``PACE=S`` runs the app's paced full collections every S seconds.
"""
from __future__ import annotations

import asyncio
import cProfile
import gc
import os
import pstats
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _flood_app import FloodEngine, table_sweep  # noqa: E402

from specbench_tui.core.plan import build_plan  # noqa: E402
from specbench_tui.core.sweep.loader import parse_sweep  # noqa: E402


SORT = "cumulative"
SEQUENCES = {"l": ["l", "escape"], "/": ["l", "/", "escape", "escape"], "ctrl+p": ["ctrl+p", "escape"],
             "c": ["c", "escape"]}
"""The keys pressed to measure one key (and to leave the screen it opens)."""


def _build_app() -> tuple[Any, FloodEngine]:
    import specbench_tui.tui.app as app_module
    from specbench_tui.tui.app import SpecbenchApp

    plan = build_plan(parse_sweep(table_sweep(200, 8), Path("table.toml")))
    engine = FloodEngine(plan, Path("/tmp/specbench-flood-prof"), 10000, 10**9, table=True)

    class BenchApp(SpecbenchApp):
        CSS_PATH = str(Path(app_module.__file__).with_name("app.tcss"))

    if os.environ.get("PACE"):
        import specbench_tui.tui.gc_pacing as pacing
        pacing.AT_MOST_S = pacing.EVERY_S = float(os.environ["PACE"])
    return BenchApp(engine), engine


def _time_frames() -> list[tuple[float, float]]:
    """Stamps every compositor refresh (start, CPU ms) into the returned list."""
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
    return frames


def _log_collections() -> list[tuple[int, float, int]]:
    """With ``GCLOG`` set, records every garbage collection (generation, ms, collected) into the returned list."""
    collections: list[tuple[int, float, int]] = []
    started: dict[str, float] = {}

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started["t"] = time.perf_counter()
            return
        collections.append((info["generation"], (time.perf_counter() - started.get("t", 0)) * 1000,
                            info.get("collected", 0)))
        if info["generation"] == 2 and os.environ.get("GCLOG") == "2":
            print(f"gen2 at {time.monotonic():.1f}: {collections[-1][1]:.0f} ms, collected {info.get('collected')}, "
                  f"frozen {gc.get_freeze_count()}, tracked {len(gc.get_objects(2))}")

    if os.environ.get("GCLOG"):
        gc.callbacks.append(on_gc)
    return collections


async def _press(pilot: Any, key: str, profile: str | None, rounds: int, frames: list[tuple[float, float]]) -> None:
    """Presses ``key`` (with what leaves its screen) ``rounds`` times and prints its CPU ms per press."""
    times = []
    prof = cProfile.Profile() if key == profile else None
    for _ in range(rounds):
        for k in SEQUENCES.get(key, [key]):
            await pilot.pause(0.3)
            t0 = time.thread_time()
            w0 = time.monotonic()
            measured = k == key
            if prof and measured:
                prof.enable()
            await pilot.press(k)
            await pilot.pause()
            if prof and measured:
                prof.disable()
            if not measured:
                continue
            times.append((time.thread_time() - t0) * 1000)
            if os.environ.get("FRAMES"):
                await pilot.pause(0.3)
                print(key, "frames", [(round((w - w0) * 1000), round(c)) for w, c in frames if w >= w0][:12])
    in_order = [round(t) for t in times]
    times.sort()
    print(f"{key:8} cpu ms: median {times[len(times)//2]:.1f}  max {times[-1]:.1f}  in order {in_order}")
    if prof:
        pstats.Stats(prof).sort_stats(SORT).print_stats(45)


async def _print_garbage(pilot: Any) -> None:
    """What 5 s of flood leave as cyclic garbage, by type."""
    gc.collect()
    await pilot.pause(5.0)
    gc.set_debug(gc.DEBUG_SAVEALL)
    gc.collect()
    print("garbage in 5 s:", len(gc.garbage), Counter(type(o).__qualname__ for o in gc.garbage).most_common(30))
    gc.set_debug(0)
    gc.garbage.clear()


def _print_collections(collections: list[tuple[int, float, int]]) -> None:
    print(Counter(type(o).__name__ for o in gc.get_objects(2)).most_common(25))
    for generation in (0, 1, 2):
        times = sorted(ms for g, ms, _ in collections if g == generation)
        if times:
            print(f"gc gen{generation}: {len(times)} collections, median {times[len(times)//2]:.1f} ms, "
                  f"max {times[-1]:.1f} ms, total {sum(times):.0f} ms")


async def main(keys: list[str], profile: str | None, rounds: int) -> None:
    app, engine = _build_app()
    frames = _time_frames()
    collections = _log_collections()
    async with app.run_test(size=(160, 48), headless=True, notifications=True) as pilot:  # toasts, as the real app
        for _ in range(60):
            await pilot.pause(0.1)
            if app.analysis is not None and app.analysis_settled:
                break
        await pilot.pause(1.0)
        for key in keys:
            await _press(pilot, key, profile, rounds, frames)
        chart = getattr(app, "_chart", None)
        if chart is not None:
            print(f"chart drawings made on the UI thread: {chart.drawn_on_ui_thread}")
        if os.environ.get("GARBAGE"):
            await _print_garbage(pilot)
        engine.flood.stop.set()
        if os.environ.get("GCLOG"):
            _print_collections(collections)


if __name__ == "__main__":
    SORT = os.environ.get("SORT", "cumulative")
    args = sys.argv[1:]
    profile = None
    if "--profile" in args:
        i = args.index("--profile")
        profile = args[i + 1]
        del args[i:i + 2]
    print("load average", os.getloadavg())
    asyncio.run(main(args or ["p", "m", "o", "t", "s", "r", "S", "l", "/", "ctrl+p", "c"], profile, 6))
