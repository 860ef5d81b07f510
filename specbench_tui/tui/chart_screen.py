"""The results as a chart (key ``c``): speedup per configuration on one workload, or acceptance length against
draft budget, drawn with textual-plotext and redrawn live as the sweep runs.

It draws the analysis the results table shows (the app's latest, computed in its worker thread; this screen only
picks the points out of it with :mod:`specbench_tui.report.figdata`, the same data as the report's figures). A
configuration without a value (crashed, skipped, every answer empty) gets no bar and no point: it is named with
``×`` and its reason under the plot; a value on fewer measurements than planned is marked ``!`` and drawn ``▒``. Every mark is a
glyph and a word, so the chart reads the same under ``NO_COLOR`` and at 80×24.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Static
from textual_plotext import PlotextPlot

from specbench_tui.core.results import RunAnalysis
from specbench_tui.report.figdata import METRICS, Bar, bar_panels, budget_lines, budgeted_algorithms
from specbench_tui.tui.key_bar import KeyBar
from specbench_tui.tui.safe_text import clean

VIEW_SPEEDUP = "speedup"
VIEW_ACCEPTANCE = "acceptance"
MARKERS = ("o", "+", "x", "*", "#", "@", "%", "&")
"""One marker per line, so lines differ without colour."""
BLOCK, PARTIAL_BLOCK = "█", "▒"
ALGORITHM_COLORS = {"autoregressive": "gray", "dflash": "blue", "ddtree": "orange", "eagle3": "green",
                    "eagle": "green", "ngram": "magenta"}
"""The report figures' colour per algorithm, in plotext's names."""
ROWS_AROUND_BARS = 10
"""Screen rows that are not bars: title, axes, marks, key bar (at most one row per bar keeps each readable)."""
POLL_S = 0.5
"""How often the screen looks for a newer analysis (an identity check; drawing happens only when it changed)."""


def _bar_label(bar: Bar, metric: str) -> str:
    value = f"{bar.value:.2f}x" if metric == "speedup" else f"{bar.value:.0f}"
    flag = "!" if bar.mark and bar.mark != "baseline" else ""
    return f"{clean(bar.config, 28)} {value}{flag}"


def _listing(prefix: str, items: list[str], limit: int = 8) -> str:
    """``prefix`` and the first ``limit`` items, then how many more (a line of marks stays a line or two)."""
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return prefix + ", ".join(clean(item, 60) for item in items[:limit]) + more


class ChartScreen(Screen[None]):
    """A plot of the latest analysis; ``v`` switches between the two views, ``w`` steps through the workloads."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", id="chart-close"),
        Binding("v", "next_view", "View", id="chart-view", tooltip="speedup per configuration / acceptance vs budget"),
        Binding("w", "next_workload", "Workload", id="chart-workload", tooltip="the next workload"),
        Binding("q", "close", "Back", show=False, id="chart-close-q"),
        Binding("c", "close", "Back", show=False, id="chart-close-c"),
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

    def compose(self) -> ComposeResult:
        yield Static(id="chart-title")
        yield PlotextPlot(id="chart-plot")
        yield Static(id="chart-marks")
        yield KeyBar()

    def on_mount(self) -> None:
        self.redraw()
        self.set_interval(POLL_S, self._poll)

    def _poll(self) -> None:
        if self.source() is not self.shown:
            self.redraw()

    def action_close(self) -> None:
        self.dismiss()

    def action_next_view(self) -> None:
        self.view = VIEW_ACCEPTANCE if self.view == VIEW_SPEEDUP else VIEW_SPEEDUP
        self.redraw()

    def action_next_workload(self) -> None:
        self.workload_index += 1
        self.redraw()

    def redraw(self) -> None:
        analysis = self.shown = self.source()
        plot = self.query_one(PlotextPlot)
        plt = plot.plt
        plt.clear_figure()
        if analysis is None:
            title, marks = "waiting for the first results", ["nothing measured yet"]
        elif self.view == VIEW_SPEEDUP:
            title, marks = self._draw_bars(analysis)
        else:
            title, marks = self._draw_acceptance(analysis)
        self.query_one("#chart-title", Static).update(Text(f" chart · {title}", no_wrap=True, overflow="ellipsis"))
        self.query_one("#chart-marks", Static).update(Text("\n".join(marks)))
        plot.refresh()

    def _draw_bars(self, analysis: RunAnalysis) -> tuple[str, list[str]]:
        metric, panels = bar_panels(analysis)
        if not panels:
            return "no workload without a load axis to chart", []
        panel = panels[self.workload_index % len(panels)]
        drawn = [b for b in panel.bars if b.drawn and b.value is not None]
        plt = self.query_one(PlotextPlot).plt
        room = max(4, self.app.size.height - ROWS_AROUND_BARS)
        shown_note = ""
        if len(drawn) > room:  # one row per bar at most: the fastest that fit, still in plan order
            fastest = {b.config_id for b in sorted(drawn, key=lambda b: b.value or 0.0, reverse=True)[:room]}
            shown_note = f"showing the {room} highest of {len(drawn)} values"
            drawn = [b for b in drawn if b.config_id in fastest]
        if drawn:  # each bar a line of blocks (plotext's filled bars cost ~10x more to draw): ▒ when flagged
            algorithms = {c.id: c.algorithm for c in analysis.configs}
            for y, bar in enumerate(reversed(drawn)):
                short = bool(bar.mark) and bar.mark != "baseline"
                plt.plot([0.0, bar.value or 0.0], [y, y], marker=PARTIAL_BLOCK if short else BLOCK,
                         color=ALGORITHM_COLORS.get(algorithms.get(bar.config_id, ""), "blue"))
            plt.yticks(list(range(len(drawn))), [_bar_label(b, metric) for b in reversed(drawn)])
            plt.ylim(-0.5, len(drawn) - 0.5)
            plt.xlim(0.0, max(b.value or 0.0 for b in drawn) * 1.05)
            if metric == "speedup":
                plt.vline(1.0)
        plt.xlabel(METRICS[metric])
        where = f"{clean(panel.workload, 40)} ({self.workload_index % len(panels) + 1}/{len(panels)} workloads)"
        marks = [shown_note] if shown_note else []
        missing = [f"{b.config} {b.mark}" for b in panel.bars if not b.drawn and b.mark != "pending"]
        if missing:
            marks.append(_listing("× no value: ", missing))
        flagged = [f"{b.config} {b.mark}" for b in drawn if b.mark and b.mark != "baseline"]
        if flagged:
            marks.append(_listing("! fewer measurements than planned: ", flagged))
        pending = sum(1 for b in panel.bars if b.mark == "pending")
        if pending:
            marks.append(f"{pending} not measured yet")
        return f"{METRICS[metric]} · {where} · live", marks

    def _draw_acceptance(self, analysis: RunAnalysis) -> tuple[str, list[str]]:
        plt = self.query_one(PlotextPlot).plt
        marks = []
        index = 0
        budgets: set[float] = set()
        for algorithm in budgeted_algorithms(analysis):
            for line in budget_lines(analysis, "accept_length", algorithm):
                points = [(x, y) for x, y in line.points if y is not None]
                if points:
                    plt.plot([x for x, _ in points], [y for _, y in points], marker=MARKERS[index % len(MARKERS)],
                             label=f"{algorithm} {line.label}")
                    budgets.update(x for x, _ in points)
                    index += 1
                marks += [f"{algorithm} {line.label} b{x:g} {why}" for x, why in line.missing]
        if budgets:
            plt.xticks(sorted(budgets), [f"{b:g}" for b in sorted(budgets)])
        plt.xlabel("draft budget")
        title = "acceptance length vs draft budget (mean over workloads) · live"
        if not index:
            title += ": no algorithm with several budgets measured yet"
        return title, [_listing("× no value: ", marks)] if marks else []
