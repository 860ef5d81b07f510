"""The chart screen (key ``c``): the results as a plot, from the analysis the results table shows, redrawn live.

Snapshots at 160×48 and 80×24 show it on ``tests/data/report_run_a`` (crashed, skipped, partial and empty
cells); the Pilot tests open it in the real app with ``c``, check it draws the app's own analysis (the worker's,
not one of its own) and follows a newer one, and that its marks are glyphs and words (``NO_COLOR``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_tui_snapshots import make_app, ready, steady
from textual.app import App
from textual_plotext import PlotextPlot
from tui_fakes import FakeEngine

from specbench_tui.core.results import RunAnalysis
from specbench_tui.report.load import load_run
from specbench_tui.tui.chart_screen import ChartScreen

RUN_A = Path(__file__).parent / "data" / "report_run_a"


class Host(App[None]):
    """The chart screen alone over a fixed analysis."""

    def __init__(self, analysis: RunAnalysis | None, view: str = "speedup") -> None:
        super().__init__()
        self.analysis = analysis
        self.view = view

    def on_mount(self) -> None:
        screen = ChartScreen(lambda: self.analysis)
        screen.view = self.view
        self.push_screen(screen)


@pytest.fixture(scope="module")
def analysis_a() -> RunAnalysis:
    return load_run(RUN_A).analysis


def _text(screen: ChartScreen, selector: str) -> str:
    return str(screen.query_one(selector).render())


def test_chart_wide(analysis_a: RunAnalysis, snap_compare: Any) -> None:
    assert snap_compare(Host(analysis_a), terminal_size=(160, 48))


def test_chart_narrow(analysis_a: RunAnalysis, snap_compare: Any) -> None:
    assert snap_compare(Host(analysis_a), terminal_size=(80, 24))


def test_chart_acceptance_narrow(analysis_a: RunAnalysis, snap_compare: Any) -> None:
    assert snap_compare(Host(analysis_a, "acceptance"), terminal_size=(80, 24))


async def test_marks_are_glyphs_and_words_without_colour(analysis_a: RunAnalysis,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = Host(analysis_a)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ChartScreen) and app.no_color
        marks = _text(screen, "#chart-marks")
        assert "× no value: dflash-b16-tp2 no baseline, ddtree-b8-tp1 crashed, ddtree-b64-tp4 skipped" in marks
        assert "! fewer measurements than planned: ddtree-b12-tp1 partial, crashed" in marks
        plot = str(screen.query_one(PlotextPlot).render())
        assert "ddtree-b12-tp1 3.47x!" in plot and "█" in plot and "▒" in plot  # ▒: the partial cell's bar
        assert "ddtree-b8-tp1" not in plot  # a crashed configuration has no bar (not a bar of 0)
        await pilot.press("w")
        assert "haiku (2/3 workloads)" in _text(screen, "#chart-title")
        await pilot.press("v")
        assert "acceptance length vs draft budget" in _text(screen, "#chart-title")
        assert "ddtree TP1 b8 crashed" in _text(screen, "#chart-marks")
        await pilot.press("escape")
        assert not isinstance(app.screen, ChartScreen)


async def test_c_opens_the_chart_of_the_apps_analysis_and_follows_it(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    engine = FakeEngine(tmp_path / "runs" / "2026-01-01_100000_demo")
    app = make_app(engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, ChartScreen)
        assert "waiting for the first results" in _text(screen, "#chart-title") or screen.shown is app.analysis
        await pilot.press("escape")
        engine.play_until_running()
        await steady(pilot)
        first = app.analysis
        assert first is not None and first.rows
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, ChartScreen) and screen.shown is first  # the worker's analysis, not its own
        assert "speedup" in _text(screen, "#chart-title") or "tok/s" in _text(screen, "#chart-title")
        engine.play()
        await steady(pilot)
        assert app.analysis is not first
        while screen.shown is not app.analysis:  # the next poll draws the newer analysis
            await pilot.pause(0.1)
        assert isinstance(app.screen, ChartScreen)


def _many_configs(n: int) -> RunAnalysis:
    from specbench_tui.core.analysis import analyse
    from specbench_tui.core.records import Measurement

    configs: list[dict[str, Any]] = [
        {"id": "c0", "name": "ar", "algorithm": "autoregressive", "argv": [], "params": {}, "baseline": None}]
    configs += [{"id": f"c{i}", "name": f"spec-{i}", "algorithm": "dflash", "argv": [], "params": {},
                 "baseline": "ar"} for i in range(1, n)]
    plan = {"sweep": "many", "configs": configs, "workloads": [{"name": "w", "kind": "code", "temperature": 0.0,
                                                                 "repeats": 1}]}
    ms = [Measurement(config_id=c["id"], config=c["name"], workload="w", item="x", repeat=1, status="ok",
                      decode_tps=100.0 + i, ttft_s=0.01, e2e_s=0.1, completion_tokens=20, started_at=1.0)
          for i, c in enumerate(configs)]
    return analyse(plan, ms, [])


async def test_a_big_sweep_shows_the_highest_bars_that_fit_one_row_each() -> None:
    app = Host(_many_configs(60))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ChartScreen)
        assert "showing the 14 highest of 60 values" in _text(screen, "#chart-marks")
        plot = str(screen.query_one(PlotextPlot).render())
        assert "spec-59" in plot and "spec-46" in plot and "spec-45 " not in plot
