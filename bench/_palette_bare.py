"""What Textual's command palette costs by itself: UI CPU from ``ctrl+p`` to the palette's first frame, in a bare
Textual app and in ours (the 200×8 table, 10,000 log lines/s), headless at 160×48 (a development helper).

    .venv/bin/python bench/_palette_bare.py [PRESSES]

On 2026-12-07, on 2 cores: bare 52 ms, ours 57 ms (medians of 12): what ``ctrl+p`` costs is Textual's palette,
built afresh on every press (its screen and ~15 widgets mounted and styled, its discovery worker, four layouts).
"""
from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from textual.app import App, ComposeResult  # noqa: E402
from textual.screen import Screen  # noqa: E402
from textual.widget import Widget  # noqa: E402
from textual.widgets import Static  # noqa: E402

from _keyprof import _build_app  # noqa: E402


class BareApp(App[None]):
    """A Textual app with a screen of text and nothing else: Textual's own palette, its own system commands."""

    def compose(self) -> ComposeResult:
        yield Static("specbench " * 1500)


class FirstFrame:
    """The UI thread's CPU from each ``ctrl+p`` to the first frame that draws the palette's prompt."""

    def __init__(self) -> None:
        self.cpu_ms: list[float] = []
        self._since: float | None = None
        self._drawn = False
        render_lines, refresh = Widget.render_lines, Screen._compositor_refresh
        frames = self

        def lines(widget: Widget, crop: Any) -> Any:
            if frames._since is not None and type(widget).__name__ == "CommandInput":
                frames._drawn = True
            return render_lines(widget, crop)

        def frame(screen: Screen[Any]) -> None:
            refresh(screen)
            if frames._since is not None and frames._drawn:
                frames.cpu_ms.append((time.thread_time() - frames._since) * 1000)
                frames._since = None

        Widget.render_lines = lines  # type: ignore[method-assign]
        Screen._compositor_refresh = frame  # type: ignore[method-assign]

    def press(self) -> None:
        self._since, self._drawn = time.thread_time(), False


async def measure(app: App[Any], frames: FirstFrame, presses: int) -> list[float]:
    frames.cpu_ms.clear()
    async with app.run_test(size=(160, 48), headless=True, notifications=True) as pilot:
        await pilot.pause(6.0)  # the table filled, the flood on
        for _ in range(presses):
            frames.press()
            await pilot.press("ctrl+p")
            await pilot.pause(0.4)
            await pilot.press("escape")
            await pilot.pause(0.5)
    return sorted(frames.cpu_ms)


def main() -> None:
    presses = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    frames = FirstFrame()
    bare = asyncio.run(measure(BareApp(), frames, presses))
    ours, engine = _build_app()
    try:
        mine = asyncio.run(measure(ours, frames, presses))
    finally:
        engine.flood.stop.set()
    for label, cpu in (("bare Textual app", bare), ("specbench", mine)):
        print(f"{label:18} ctrl+p to its first frame, UI CPU ms: median {cpu[len(cpu) // 2]:.1f}  "
              f"max {cpu[-1]:.1f}  (n={len(cpu)})")


if __name__ == "__main__":
    main()
