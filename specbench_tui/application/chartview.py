"""What the TUI's chart screen (key ``c``) plots, picked out of the run's analysis: pure data, no plotting library.

:func:`chart_view` turns the analysis the results table shows into a :class:`ChartView`: the title, the series to
draw (each with its marker and colour), the ticks and limits, and the marks printed under the plot. It takes a
few milliseconds on a 200-configuration table and runs with the drawing in a worker thread, ahead of the key
(:mod:`specbench_tui.tui.chart_screen`). The points are :mod:`specbench_tui.report.figdata`'s, the same data as
the report's figures. A configuration without a value (crashed, skipped, every answer empty) gets no bar and no
point: it is named with ``×`` and its reason under the plot; a value on fewer measurements than planned is
marked ``!`` and drawn ``▒``. Every mark is a glyph and a word, so the chart reads the same under ``NO_COLOR``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from specbench_tui.application.logview import clean
from specbench_tui.core.results import RunAnalysis
from specbench_tui.report.figdata import METRICS, Bar, bar_panels, budget_lines, budgeted_algorithms

VIEW_SPEEDUP = "speedup"
VIEW_ACCEPTANCE = "acceptance"
MARKERS = ("o", "+", "x", "*", "#", "@", "%", "&")
"""One marker per line, so lines differ without colour."""
BLOCK, PARTIAL_BLOCK = "█", "▒"
ALGORITHM_COLORS = {"autoregressive": "gray", "dflash": "blue", "ddtree": "orange", "eagle3": "green",
                    "eagle": "green", "ngram": "magenta"}
"""The report figures' colour per algorithm, in plotext's names."""
MAX_MARK_LINES = 4
"""Lines of marks under the plot at most (the last one cut with ``…``)."""


@dataclass(frozen=True)
class Series:
    """One line of the plot: ``xs``/``ys`` joined by ``marker``; ``color`` None takes the theme's next colour."""

    xs: tuple[float, ...]
    ys: tuple[float, ...]
    marker: str
    color: str | None = None
    label: str | None = None


@dataclass(frozen=True)
class ChartView:
    """Everything the chart screen draws for one view of one analysis."""

    title: str
    marks: tuple[str, ...] = ()
    series: tuple[Series, ...] = ()
    xlabel: str = ""
    xticks: tuple[tuple[float, ...], tuple[str, ...]] | None = None
    yticks: tuple[tuple[float, ...], tuple[str, ...]] | None = None
    xlim: tuple[float, float] | None = None
    ylim: tuple[float, float] | None = None
    vline: float | None = None
    """An x drawn as a vertical line (speedup 1.0: the baseline)."""


def _bar_label(bar: Bar, metric: str) -> str:
    value = f"{bar.value:.2f}x" if metric == "speedup" else f"{bar.value:.0f}"
    flag = "!" if bar.mark and bar.mark != "baseline" else ""
    return f"{clean(bar.config, 28)} {value}{flag}"


def _listing(prefix: str, items: list[str], limit: int = 8) -> str:
    """``prefix`` and the first ``limit`` items, then how many more (a line of marks stays a line or two)."""
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return prefix + ", ".join(clean(item, 60) for item in items[:limit]) + more


def chart_view(analysis: RunAnalysis | None, view: str, workload_index: int, bar_rows: int) -> ChartView:
    """The chart of ``analysis``: ``view`` is :data:`VIEW_SPEEDUP` (bars on the ``workload_index``-th workload
    without a load axis, modulo their count; at most ``bar_rows`` bars, the highest) or :data:`VIEW_ACCEPTANCE`."""
    if analysis is None:
        return ChartView("waiting for the first results", ("nothing measured yet",))
    if view == VIEW_SPEEDUP:
        return _bars(analysis, workload_index, max(4, bar_rows))
    return _acceptance(analysis)


def _bars(analysis: RunAnalysis, workload_index: int, room: int) -> ChartView:
    metric, panels = bar_panels(analysis)
    if not panels:
        return ChartView("no workload without a load axis to chart")
    panel = panels[workload_index % len(panels)]
    drawn = [b for b in panel.bars if b.drawn and b.value is not None]
    marks = []
    if len(drawn) > room:  # one row per bar at most: the fastest that fit, still in plan order
        fastest = {b.config_id for b in sorted(drawn, key=lambda b: b.value or 0.0, reverse=True)[:room]}
        marks.append(f"showing the {room} highest of {len(drawn)} values")
        drawn = [b for b in drawn if b.config_id in fastest]
    view = _bar_series(analysis, drawn, metric) if drawn else ChartView("", xlabel=METRICS[metric])
    where = f"{clean(panel.workload, 40)} ({workload_index % len(panels) + 1}/{len(panels)} workloads)"
    return replace(view, title=f"{METRICS[metric]} · {where} · live", marks=(*marks, *_bar_marks(panel.bars, drawn)))


def _bar_series(analysis: RunAnalysis, drawn: list[Bar], metric: str) -> ChartView:
    """Each bar a line of blocks (plotext's filled bars cost ~10x more to draw): ▒ when flagged."""
    algorithms = {c.id: c.algorithm for c in analysis.configs}
    series: list[Series] = []
    for y, bar in enumerate(reversed(drawn)):
        short = bool(bar.mark) and bar.mark != "baseline"
        series.append(Series((0.0, bar.value or 0.0), (float(y), float(y)), PARTIAL_BLOCK if short else BLOCK,
                             ALGORITHM_COLORS.get(algorithms.get(bar.config_id, ""), "blue")))
    return ChartView("", xlabel=METRICS[metric], series=tuple(series),
                     yticks=(tuple(float(y) for y in range(len(drawn))),
                             tuple(_bar_label(b, metric) for b in reversed(drawn))),
                     ylim=(-0.5, len(drawn) - 0.5), xlim=(0.0, max(b.value or 0.0 for b in drawn) * 1.05),
                     vline=1.0 if metric == "speedup" else None)


def _bar_marks(bars: Sequence[Bar], drawn: list[Bar]) -> list[str]:
    """What the chart does not show as it is: bars without a value, bars with fewer measurements than planned,
    bars not measured yet."""
    marks = []
    missing = [f"{b.config} {b.mark}" for b in bars if not b.drawn and b.mark != "pending"]
    if missing:
        marks.append(_listing("× no value: ", missing))
    flagged = [f"{b.config} {b.mark}" for b in drawn if b.mark and b.mark != "baseline"]
    if flagged:
        marks.append(_listing("! fewer measurements than planned: ", flagged))
    pending = sum(1 for b in bars if b.mark == "pending")
    if pending:
        marks.append(f"{pending} not measured yet")
    return marks


def _acceptance(analysis: RunAnalysis) -> ChartView:
    marks: list[str] = []
    series: list[Series] = []
    budgets: set[float] = set()
    for algorithm in budgeted_algorithms(analysis):
        for line in budget_lines(analysis, "accept_length", algorithm):
            points = [(x, y) for x, y in line.points if y is not None]
            if points:
                series.append(Series(tuple(x for x, _ in points), tuple(y for _, y in points),
                                     MARKERS[len(series) % len(MARKERS)], label=f"{algorithm} {line.label}"))
                budgets.update(x for x, _ in points)
            marks += [f"{algorithm} {line.label} b{x:g} {why}" for x, why in line.missing]
    title = "acceptance length vs draft budget (mean over workloads) · live"
    if not series:
        title += ": no algorithm with several budgets measured yet"
    ticks = (tuple(sorted(budgets)), tuple(f"{b:g}" for b in sorted(budgets))) if budgets else None
    return ChartView(title, (*legend_marks(series), *((_listing("× no value: ", marks),) if marks else ())),
                     tuple(series), "draft budget", xticks=ticks)


def legend_marks(series: Sequence[Series]) -> tuple[str, ...]:
    """The legend as a line under the plot (``lines: o ddtree tp1 · + ddtree tp2``): plotext draws its own in the
    plot's top-left corner, over whatever line passes there (issue 46: it covered ddtree TP1's), so the plot is
    drawn without one."""
    labelled = [f"{s.marker} {s.label}" for s in series if s.label]
    return ("lines: " + " · ".join(labelled),) if labelled else ()
