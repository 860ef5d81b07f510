"""The chart screen (key ``c``): the results as a plot, from the analysis the results table shows, redrawn live.

Snapshots at 160×48 and 80×24 (and 80×24 under ``NO_COLOR``) show it on ``tests/data/report_run_a`` (crashed, skipped, partial and empty
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
from tui_fakes import FakeEngine, until

from repo_paths import TESTS
from specbench_tui.core.results import RunAnalysis
from specbench_tui.report.load import load_run
from specbench_tui.tui.chart_screen import ChartScreen

RUN_A = TESTS / "data" / "report_run_a"


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
    """What a widget of the screen shows, its lines joined (the marks come wrapped to the width)."""
    return str(screen.query_one(selector).render()).replace("\n", " ")


async def _drawn(pilot: Any, screen: ChartScreen) -> None:
    """Wait until the drawing asked for (``v``, ``w``, a newer analysis) is made in its worker and shown."""
    await pilot.pause()
    while screen.drawing_pending:
        await pilot.pause(0.02)
    await pilot.pause()


def test_chart_wide(analysis_a: RunAnalysis, snap_compare: Any) -> None:
    assert snap_compare(Host(analysis_a), terminal_size=(160, 48))


def test_chart_narrow(analysis_a: RunAnalysis, snap_compare: Any) -> None:
    assert snap_compare(Host(analysis_a), terminal_size=(80, 24))


def test_chart_narrow_without_colour(analysis_a: RunAnalysis, snap_compare: Any,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``NO_COLOR`` the bars, the partial bar (▒), the baseline line and the marks read the same."""
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(Host(analysis_a), terminal_size=(80, 24))


def test_chart_acceptance_narrow(analysis_a: RunAnalysis, snap_compare: Any) -> None:
    assert snap_compare(Host(analysis_a, "acceptance"), terminal_size=(80, 24))


def _drawn_ahead(chart: ChartScreen, app: Any) -> bool:
    """The worker has drawn the chart of the app's latest analysis, and no drawing is pending."""
    return not chart.drawing_pending and chart.ready is not None and chart.ready.analysis is app.analysis


async def _chart_of_the_finished_demo(pilot: Any, engine: FakeEngine) -> None:
    """In the real app: the stand-in sweep played to its end, then ``c`` (the chart drawn ahead in its worker)."""
    app = pilot.app
    await ready(pilot)
    engine.play()
    await steady(pilot)
    chart = app.chart_screen()
    await until(pilot, lambda: _drawn_ahead(chart, app), "the worker draws the chart of the latest analysis")
    await pilot.press("c")
    await pilot.pause()
    assert isinstance(app.screen, ChartScreen) and chart.drawn_on_ui_thread == 0


@pytest.mark.parametrize("size", [(160, 48), (80, 24)], ids=["wide", "narrow"])
def test_c_in_the_app(size: tuple[int, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                      snap_compare: Any) -> None:
    """The chart as ``c`` shows it in the app (the drawing made ahead in the worker, at the terminal's size)."""
    monkeypatch.chdir(tmp_path)
    engine = FakeEngine(tmp_path / "runs" / "2026-01-01_100000_demo")

    async def run_before(pilot: Any) -> None:
        await _chart_of_the_finished_demo(pilot, engine)

    assert snap_compare(make_app(engine), terminal_size=size, run_before=run_before)


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
        await _drawn(pilot, screen)
        assert "haiku (2/3 workloads)" in _text(screen, "#chart-title")
        await pilot.press("v")
        await _drawn(pilot, screen)
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


async def test_c_shows_a_chart_drawn_ahead_in_a_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once an analysis is in, the chart is drawn in a worker thread before ``c``: the key only pushes the screen
    (no plot drawn on the UI thread), and a newer analysis is drawn in the worker too while it is open."""
    import threading

    import specbench_tui.tui.chart_screen as chart_module

    threads: list[int] = []
    real_draw_plot = chart_module.draw_plot

    def recording_draw_plot(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.get_ident())
        return real_draw_plot(*args, **kwargs)

    monkeypatch.setattr(chart_module, "draw_plot", recording_draw_plot)
    monkeypatch.chdir(tmp_path)
    engine = FakeEngine(tmp_path / "runs" / "2026-01-01_100000_demo")
    app = make_app(engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        engine.play_until_running()
        await steady(pilot)
        ui_thread = threading.get_ident()
        chart = app.chart_screen()
        await until(pilot, lambda: _drawn_ahead(chart, app), "the worker draws the chart of the latest analysis")
        assert chart.ready is not None and chart.ready.analysis is app.analysis
        assert threads and ui_thread not in threads  # drawn ahead, in the worker
        await pilot.press("c")
        assert app.screen is chart and chart.shown is app.analysis
        assert chart.drawn_on_ui_thread == 0 and ui_thread not in threads
        first = app.analysis
        engine.play()
        await steady(pilot)
        assert app.analysis is not first
        while chart.shown is not app.analysis:  # the next poll draws the newer analysis, in the worker
            await pilot.pause(0.1)
        assert ui_thread not in threads and chart.drawn_on_ui_thread == 0
        await pilot.press("escape")
        await pilot.press("c")  # the same screen again, at once
        assert app.screen is chart and chart.drawn_on_ui_thread == 0


def test_marks_wrap_to_the_width_in_four_lines_at_most() -> None:
    from specbench_tui.tui.chart_screen import mark_lines

    assert mark_lines(("a b c d e f g h i j",), 10) == ("a b c d e", "f g h i j")
    lines = mark_lines(tuple("word " * 30 for _ in range(3)), 20)
    assert len(lines) == 4 and lines[-1].endswith("…") and all(len(line) <= 20 for line in lines)


async def test_an_analysis_that_finishes_as_the_app_quits_draws_no_chart(tmp_path: Path) -> None:
    """The analysis worker can finish while the app is closing: installing the chart screen then raised
    Textual's SignalError (a flaky failure of whichever test ended just as its analysis came in)."""
    engine = FakeEngine(tmp_path / "run")
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot)
    assert not app.is_running
    app.prepare_chart()  # raised SignalError before
    assert app._chart is None


async def test_a_chart_import_that_finishes_as_the_app_quits_installs_nothing(tmp_path: Path) -> None:
    """The chart module's import runs in a worker thread and calls back on the app's loop: a tab closed by serve's
    Ctrl-C while it ran printed Textual's SignalError from that callback (CI, stop 52)."""
    import specbench_tui.tui.chart_screen  # noqa: F401  (imported, as the worker leaves it)

    engine = FakeEngine(tmp_path / "run")
    app = make_app(engine)
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot)
        app._chart_importing = True
    assert not app.is_running
    app._chart_imported()  # raised SignalError before
    assert app._chart is None and not app._chart_importing


def test_the_legend_is_under_the_plot_never_over_its_lines(analysis_a: RunAnalysis) -> None:
    """plotext draws a legend in the plot's top-left corner, over the lines that pass there (issue 46: it covered
    ddtree TP1's line): the acceptance chart names its lines in a mark under the plot, and the plot holds none."""
    from specbench_tui.application.chartview import VIEW_ACCEPTANCE, chart_view
    from specbench_tui.tui.chart_screen import draw_plot

    chart = chart_view(analysis_a, VIEW_ACCEPTANCE, 0, 30)
    labels = [s.label for s in chart.series if s.label]
    assert labels, "the fixture run has lines to name"
    plot = draw_plot(chart, 100, 30, "default").plain
    assert not [label for label in labels if label in plot], plot
    legend = chart.marks[0]
    assert legend.startswith("lines: ") and all(f"{s.marker} {s.label}" in legend for s in chart.series)
