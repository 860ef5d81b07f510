"""The results as a chart (key ``c``): speedup per configuration on one workload, or acceptance length against
draft budget, drawn with textual-plotext and redrawn live as the sweep runs.

It draws the analysis the results table shows (the app's latest, computed in its worker thread), as
:func:`specbench_tui.application.chartview.chart_view` picks it out (the same data as the report's figures).

Drawing a plot is the slow part (plotext builds a character matrix: tens of milliseconds for a 200-configuration
table on a slow core), so it is never done on the UI thread when it can be helped: the app keeps one chart screen
(installed once) and has it drawn ahead in a worker thread, at the terminal's size and in the current theme, each
time a newer analysis arrives (at most every :data:`AHEAD_EVERY_S` while the screen is closed). ``c`` then only
pushes the screen with a drawing that is ready. While it is open, newer analyses, ``v`` and ``w`` are drawn in the
worker too, and shown when done. Only a drawing that matches nothing (a terminal resized since, a first press
before the first drawing) is made on the UI thread, once.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult, RenderResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.visual import Visual, visualize
from textual.widgets import Static
from textual_plotext import Plot, PlotextPlot

from specbench_tui.application.chartview import (
    MAX_MARK_LINES,
    VIEW_ACCEPTANCE,
    VIEW_SPEEDUP,
    ChartView,
    chart_view,
)
from specbench_tui.core.results import RunAnalysis
from specbench_tui.tui.key_bar import KeyBar

__all__ = ["VIEW_ACCEPTANCE", "VIEW_SPEEDUP", "ChartPlot", "ChartScreen", "Drawing", "draw", "draw_plot"]

ROWS_AROUND_BARS = 10
"""Screen rows that are not bars: title, axes, marks, key bar (at most one row per bar keeps each readable)."""
ROWS_OUTSIDE_PLOT = 2
"""The title line above the plot and the key bar below the marks."""
POLL_S = 0.5
"""How often the open screen looks for a newer analysis (an identity check; drawing happens only when it changed)."""
AHEAD_EVERY_S = 2.0
"""While the screen is closed, a newer analysis is drawn ahead at most this often (about 60 ms of CPU each on the
UI bench's table, in a worker); ``c`` shows the newest drawing at once and the next poll brings it up to date."""

Key = tuple[int, str, int, int, int, str]
"""What a drawing depends on: (id of the analysis, view, workload index, screen width, height, plot theme)."""


@dataclass(frozen=True)
class Drawing:
    """A chart drawn for one :data:`Key`: the chart's data, its marks wrapped to the width and the plot's text."""

    key: Key
    analysis: RunAnalysis | None
    chart: ChartView
    marks: tuple[str, ...]
    plot_size: tuple[int, int]
    plot: Text


def mark_lines(marks: tuple[str, ...], width: int) -> tuple[str, ...]:
    """The marks wrapped to ``width``, at most :data:`MAX_MARK_LINES` lines (the last one ends with ``…`` when
    some were left out): the screen's layout, and so the plot's size, is known before anything is drawn."""
    lines = [line for mark in marks for line in (textwrap.wrap(mark, max(8, width)) or [""])]
    if len(lines) > MAX_MARK_LINES:
        lines = lines[:MAX_MARK_LINES]
        last = lines[-1]
        lines[-1] = (last if len(last) < width else last[: max(0, width - 1)]) + "…"
    return tuple(lines)


def draw_plot(chart: ChartView, width: int, height: int, theme: str) -> Text:
    """``chart`` drawn by plotext at ``width`` × ``height`` in plot theme ``theme`` (any thread: a plot of its own)."""
    plt = Plot()
    for series in chart.series:
        # No label: plotext would draw its legend inside the plot, over the lines (it is one of the marks instead).
        plt.plot(list(series.xs), list(series.ys), marker=series.marker, color=series.color)
    if chart.yticks is not None:
        plt.yticks(list(chart.yticks[0]), list(chart.yticks[1]))
    if chart.xticks is not None:
        plt.xticks(list(chart.xticks[0]), list(chart.xticks[1]))
    if chart.ylim is not None:
        plt.ylim(*chart.ylim)
    if chart.xlim is not None:
        plt.xlim(*chart.xlim)
    if chart.vline is not None:
        plt.vline(chart.vline)
    if chart.xlabel:
        plt.xlabel(chart.xlabel)
    # After the data, and then the size once more, as textual-plotext's own widget does: plotsize alone is cut to
    # the size plotext takes for the terminal's (80x24 without one); _set_size is what its widget sets after it.
    plt.plotsize(width, height)
    plt._set_size(width, height)
    plt.theme(theme)
    return Text.from_ansi(plt.build())


def draw(key: Key, analysis: RunAnalysis | None) -> Drawing:
    """The chart of ``key`` (any thread): its data, marks and plot at the size the screen will give it."""
    _, view, workload_index, width, height, theme = key
    chart = chart_view(analysis, view, workload_index, height - ROWS_AROUND_BARS)
    marks = mark_lines(chart.marks, width)
    size = (width, max(1, height - ROWS_OUTSIDE_PLOT - len(marks)))
    return Drawing(key, analysis, chart, marks, size, draw_plot(chart, *size, theme))


class ChartPlot(PlotextPlot):
    """The plot of a :class:`Drawing`: its ready text when the widget has the size it was drawn for.

    Its lines are kept between opens of the screen (``c``, Esc, ``c``…): Textual turns a widget's text into lines
    again each time its screen is shown (about 10 ms for a 160×44 plot), these are turned once per drawing, size
    and style."""

    drawing: Drawing | None = None
    _lines: tuple[Drawing | None, int, int, VisualStyle, list[Strip]] | None = None

    def plot_theme(self) -> str:
        """The plotext theme of the app's theme, registered with plotext (UI thread; the drawing reads it)."""
        self._register_theme(self.app.theme)  # textual-plotext does this only in its widget's on_mount
        return f"textual-auto-{self.app.theme}" if self.theme == "auto" else self.theme

    def render(self) -> RenderResult:
        drawing = self.drawing
        if drawing is None:
            return Text()
        size = (self.size.width, self.size.height)
        theme = self.plot_theme()
        if size != drawing.plot_size or theme != drawing.key[5]:  # the layout differs from the one foreseen
            self.drawing = drawing = Drawing(drawing.key, drawing.analysis, drawing.chart, drawing.marks, size,
                                             draw_plot(drawing.chart, *size, theme))
        return drawing.plot

    def render_line(self, y: int) -> Strip:
        width, height = self.size
        style = self.visual_style
        kept = self._lines
        if kept is None or kept[0] is not self.drawing or kept[1:4] != (width, height, style):
            text = self.render()  # may draw again (a size not foreseen): self.drawing is the one drawn then
            kept = self._lines = (self.drawing, width, height, style,
                                  Visual.to_strips(self, visualize(self, text), width, height, style))
        lines = kept[4]
        return lines[y] if 0 <= y < len(lines) else Strip.blank(width, style.rich_style)


class ChartScreen(Screen[None]):
    """A plot of the latest analysis; ``v`` switches between the two views, ``w`` steps through the workloads."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", id="chart-close"),
        Binding("v", "next_view", "View", id="chart-view", tooltip="speedup per configuration / acceptance vs budget"),
        Binding("w", "next_workload", "Workload", id="chart-workload", tooltip="the next workload"),
        Binding("q", "close", "Back", show=False, id="chart-close-q"),
        Binding("c", "close", "Back", show=False, id="chart-close-c"),
        Binding("r", "recommend", "Recommend", show=False, id="chart-recommend",
                tooltip="the winner per band and its exact server command (specbench recommend)"),
    ]
    DEFAULT_CSS = """
    ChartScreen #chart-title { height: 1; background: $panel; }
    ChartScreen #chart-plot { height: 1fr; }
    ChartScreen #chart-marks { height: auto; max-height: 4; color: $text-muted; }
    """

    def __init__(self, source: Callable[[], RunAnalysis | None]) -> None:
        super().__init__()
        self.source = source
        """The analysis the results table shows now (the app's latest), or None before the first."""
        self.view = VIEW_SPEEDUP
        self.workload_index = 0
        self.shown: RunAnalysis | None = None
        """The analysis drawn now (redrawn when the source hands a newer one)."""
        self.plot = ChartPlot(id="chart-plot")
        self.ready: Drawing | None = None
        """The newest drawing (made ahead, or the one shown)."""
        self.drawn_on_ui_thread = 0
        """How many drawings had to be made on the UI thread (nothing ready matched)."""
        self._job: Key | None = None
        self._again = False
        self._ahead_at = float("-inf")
        self._ahead_timer = False

    def compose(self) -> ComposeResult:
        yield Static(id="chart-title")
        yield self.plot
        yield Static(id="chart-marks")
        yield KeyBar()

    def on_mount(self) -> None:
        self.set_interval(POLL_S, self._poll)

    def on_screen_resume(self) -> None:
        """Shown (``c``): the drawing made ahead when it fits the screen (of an older analysis, if a newer one came
        since: the worker draws that one now), else one drawn here."""
        key = self._key()
        ready = self.ready
        if ready is None or ready.key[1:] != key[1:]:
            self.drawn_on_ui_thread += 1
            ready = self.ready = draw(key, self.source())
        self._show(ready)
        if ready.key != key:
            self.prepare()

    @property
    def drawing_pending(self) -> bool:
        """Whether a drawing is being made in the worker (the tests wait for it)."""
        return self._job is not None

    def _poll(self) -> None:
        if self.is_current and self.source() is not self.shown:
            self.prepare()

    def action_close(self) -> None:
        self.dismiss()

    def action_recommend(self) -> None:
        """``specbench recommend``'s answer for the analysis on screen, over the chart (tui/recommend_screen.py)."""
        from specbench_tui.application.recommend_text import recommendation_text
        from specbench_tui.tui.recommend_screen import RecommendScreen

        plan = getattr(getattr(self.app, "engine", None), "plan", None)
        self.app.push_screen(RecommendScreen(recommendation_text(self.source(), plan.to_json() if plan else None)))

    def action_next_view(self) -> None:
        self.view = VIEW_ACCEPTANCE if self.view == VIEW_SPEEDUP else VIEW_SPEEDUP
        self.prepare()

    def action_next_workload(self) -> None:
        self.workload_index += 1
        self.prepare()

    def _key(self) -> Key:
        size = self.app.size
        return (id(self.source()), self.view, self.workload_index, size.width, size.height, self.plot.plot_theme())

    def prepare(self) -> None:
        """Draw the chart as it is now in a worker thread (one at a time; a request meanwhile runs next); while
        the screen is closed, at most every :data:`AHEAD_EVERY_S`. UI thread."""
        if not self.app.is_running:  # a drawing that finished as the app quits: nothing more to draw
            return
        if not self.is_current:
            wait = self._ahead_at + AHEAD_EVERY_S - time.monotonic()
            if wait > 0:
                if not self._ahead_timer:
                    self._ahead_timer = True
                    self.app.set_timer(wait, self._prepare_later)
                return
        key, analysis = self._key(), self.source()
        if self.ready is not None and self.ready.key == key and self.ready.analysis is analysis:
            return
        if self._job is not None:
            self._again = True
            return
        self._job, self._again, self._ahead_at = key, False, time.monotonic()
        loop, context = asyncio.get_running_loop(), contextvars.copy_context()  # the app's, for the callback

        def work() -> None:
            drawing: Drawing | None = None
            try:
                drawing = draw(key, analysis)
            finally:
                with contextlib.suppress(RuntimeError):  # the app's loop is closed: it is gone
                    loop.call_soon_threadsafe(self._drawn, drawing, context=context)

        self.app.run_worker(work, thread=True, group="chart", exit_on_error=False, description="chart")

    def _prepare_later(self) -> None:
        self._ahead_timer = False
        self.prepare()

    def _drawn(self, drawing: Drawing | None) -> None:
        self._job = None
        if drawing is not None:
            self.ready = drawing
            if self.is_current and drawing.key == self._key():
                self._show(drawing)
        if self._again:
            self.prepare()

    def _show(self, drawing: Drawing) -> None:
        self.shown = drawing.analysis
        self.query_one("#chart-title", Static).update(
            Text(f" chart · {drawing.chart.title}", no_wrap=True, overflow="ellipsis"))
        self.query_one("#chart-marks", Static).update(Text("\n".join(drawing.marks), no_wrap=True,
                                                           overflow="ellipsis"))
        self.plot.drawing = drawing
        self.plot.refresh()

