"""The recommendation over the chart (key ``r`` on the chart, issue 47): ``specbench recommend``'s own answer for
the analysis on screen, per band the winner and its exact server command; Esc, ``q`` or ``r`` back to the chart."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from test_recommend_report import COMMANDS, load_run
from textual.app import App

from specbench_tui.application.recommend_text import NOTHING_YET
from specbench_tui.core.results import RunAnalysis
from specbench_tui.tui.chart_screen import ChartScreen
from specbench_tui.tui.recommend_screen import RecommendScreen


class Host(App[None]):
    """The chart screen over a fixed analysis, with the engine's plan the chart reads the commands from."""

    def __init__(self, analysis: RunAnalysis | None, plan: dict[str, Any] | None) -> None:
        super().__init__()
        self.analysis = analysis
        self.engine = SimpleNamespace(plan=SimpleNamespace(to_json=lambda: plan) if plan else None)

    def on_mount(self) -> None:
        self.push_screen(ChartScreen(lambda: self.analysis))


def shown(app: App[None]) -> str:
    return str(app.screen.query_one("#recommend-text").render())


async def test_r_on_the_chart_shows_each_bands_winner_and_its_command(tmp_path: Path) -> None:
    run = load_run(tmp_path)
    plan = json.loads((tmp_path / "plan.json").read_text())
    app = Host(run.analysis, plan)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, RecommendScreen)
        text = shown(app)
        assert "c1: eagle3 by +" in text and "c16: ar by +" in text
        for command in COMMANDS.values():
            assert f"command: {command}" in text
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, ChartScreen)


async def test_nothing_measured_says_so() -> None:
    app = Host(None, None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, RecommendScreen) and NOTHING_YET in shown(app)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ChartScreen)
