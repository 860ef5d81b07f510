"""The run's figures, drawn with matplotlib from the analysis: the HTML report shows them inline and
``specbench report RUN --figures DIR`` writes each as PDF, SVG and PNG with a ``figures.json`` index.

Why matplotlib: it is the field's default for static figures (a paper's PDF figure, a LaTeX
``\\includegraphics``), it writes all three formats from one drawing, and it needs no browser or network; its
Agg backend draws without a display. It is imported here only, and only when a figure is drawn, so
``specbench --help`` and the TUI never pay for it.

Every figure reads :mod:`specbench_tui.report.figdata` or the load analysis (``RunAnalysis.load``); nothing is
computed here. A configuration without a value (crashed, skipped, every answer empty) is marked with a ``×`` and
the reason, never drawn as 0; a value that stands on fewer measurements than planned (partial, some empty answers,
crashed part-way) is drawn hatched with the reason beside it. Figure names are stable (``speedup``,
``acceptance-vs-budget``, ``load-<workload>-concurrency``…): a paper's ``\\includegraphics`` keeps working when a
run is measured again.
"""

from __future__ import annotations

import io
import json
import math
import multiprocessing
import os
import re
import signal
import textwrap
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from specbench_tui.core.crossover.results import CROSSES, LoadAnalysis, PointRow
from specbench_tui.core.load import AXIS_CONCURRENCY, AXIS_RATE
from specbench_tui.core.results import RunAnalysis
from specbench_tui.report.figscope import best_speedups, figure_scope
from specbench_tui.report.figdata import (
    METRICS,
    Bar,
    BarPanel,
    Line,
    ParetoPoint,
    bar_panels,
    budget_lines,
    budgeted_algorithms,
    cell_pareto,
    pareto_flags,
    position_lines,
    tp_lines,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType

FILE_FORMATS = ("pdf", "svg", "png")
INDEX = "figures.json"
INDEX_SCHEMA = "specbench-figures/1"
STYLE: dict[RcKeyType, object] = {
    "font.family": "DejaVu Sans", "font.size": 9.0, "axes.titlesize": 10.0, "axes.titleweight": "bold",
    "axes.labelsize": 9.0, "xtick.labelsize": 8.0, "ytick.labelsize": 8.0, "legend.fontsize": 8.0,
    "legend.frameon": False, "axes.grid": True, "grid.color": "#e6e6e6", "grid.linewidth": 0.6,
    "axes.axisbelow": True, "axes.spines.top": False, "axes.spines.right": False, "axes.edgecolor": "#555555",
    "lines.linewidth": 1.6, "lines.markersize": 5.0, "hatch.linewidth": 0.8, "figure.dpi": 100.0,
    "savefig.dpi": 150.0, "savefig.bbox": None, "svg.fonttype": "none", "svg.hashsalt": "specbench",
    "pdf.fonttype": 42, "figure.facecolor": "white", "axes.titley": 1.0,
}
"""One look for every figure (the same in the page, the PDF and the PNG); a fixed SVG hash salt and no dates keep
the files the same from one export to the next. ``axes.titley`` places each panel's title at its axes' top (plus
``axes.titlepad``), where matplotlib's automatic placement puts it too since no figure has tick labels or a label
above its axes, without that placement's search (a quarter of a figure's drawing time, the same pixels)."""
ALGORITHM_COLORS = {"autoregressive": "#7f7f7f", "dflash": "#1f77b4", "ddtree": "#ff7f0e", "eagle3": "#2ca02c",
                    "eagle": "#2ca02c", "ngram": "#9467bd", "mtp": "#8c564b", "standalone": "#e377c2"}
CYCLE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
         "#17becf")
MISSING_COLOR = "#b22222"
HATCHED = "///"
METADATA: dict[str, dict[str, str | None]] = {"svg": {"Date": None}, "pdf": {"CreationDate": None, "ModDate": None},
                                       "png": {}}


class FigureEntry(TypedDict):
    """A figure as ``figures.json`` lists it: its name, title and caption, and its file per format."""

    name: str
    title: str
    caption: str
    files: dict[str, str]


@dataclass(frozen=True)
class FigureSpec:
    """One figure: its stable ``name`` (the file stem), what it shows and how to draw it."""

    name: str
    title: str
    caption: str
    size: tuple[float, float]
    """Width and height in inches."""
    draw: Callable[[Figure], None]


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "workload"


def _color(index: int) -> str:
    return CYCLE[index % len(CYCLE)]


# ---------------------------------------------------------------------------------------------- marks


MARK_STEP_PT = 16
"""Points between two reasons at one x: a 7-pt rotated line of text with its white box (pad 0.4 of the font size on
each side) is about 14 pt wide, so two at one TP never cover each other."""


def _mark_missing(ax: Axes, x: float, why: str, index: int = 0) -> None:
    """A point without a value: a dotted red line through the whole plot at its x, a × above the plot and the
    reason along the line; nothing at any y value (never a 0 on the y axis)."""
    ax.axvline(x, color=MISSING_COLOR, linestyle=(0, (1, 3)), linewidth=1.0, zorder=1)
    ax.plot([x], [1.0], marker="x", color=MISSING_COLOR, markersize=7, markeredgewidth=1.6,
            transform=ax.get_xaxis_transform(), clip_on=False, zorder=5)
    ax.annotate(why, xy=(x, 0.5), xycoords=ax.get_xaxis_transform(), xytext=(7 + MARK_STEP_PT * index, 0),
                textcoords="offset points", rotation=90, fontsize=7, color=MISSING_COLOR, ha="center",
                va="center", bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.4, "alpha": 0.85})


def _lines(ax: Axes, lines: Sequence[Line], colors: dict[str, str] | None = None) -> None:
    """Each line with its points (a missing value breaks it) and its missing points marked."""
    marked: dict[float, int] = {}
    for index, line in enumerate(lines):
        color = (colors or {}).get(line.label, _color(index))
        xs = [x for x, _ in line.points]
        ys = [math.nan if y is None else y for _, y in line.points]
        ax.plot(xs, ys, marker="o", color=color, label=line.label)
        for x, why in line.missing:
            _mark_missing(ax, x, f"{line.label}: {why}" if len(lines) > 1 else why, marked.get(x, 0))
            marked[x] = marked.get(x, 0) + 1


CROWDED = 0.09
"""Two ticks closer than this share of the axis (budgets 15 and 16 on a log axis from 8 to 32) get their labels on
two rows, so they never print as one number ("1516")."""


TICK_PAD = 3.5
"""matplotlib's default tick label pad (points); a label one row lower is 12 points further (a 10-point label)."""


def staggered(positions: Sequence[float]) -> list[int]:
    """The row of each tick's label: a crowded one a row lower than its left neighbour's (16 under 15)."""
    span = (max(positions) - min(positions)) if positions else 0.0
    rows: list[int] = []
    last_row: dict[int, float] = {}
    for pos in positions:
        row = 0
        while row in last_row and span > 0 and (pos - last_row[row]) / span < CROWDED and row < 2:
            row += 1
        last_row[row] = pos
        rows.append(row)
    return rows


def _pow2_axis(ax: Axes, values: Sequence[float], label: str) -> None:
    ax.set_xscale("log", base=2)
    ticks = sorted(v for v in set(values) if v > 0)
    ax.set_xticks(ticks, [f"{v:g}" for v in ticks])
    for tick, row in zip(ax.xaxis.get_major_ticks(), staggered([math.log2(v) for v in ticks])):
        if row:
            tick.set_pad(TICK_PAD + row * 12.0)
    ax.minorticks_off()
    ax.set_xlabel(label)
    if len(ticks) == 1:
        ax.set_xlim(ticks[0] / 1.5, ticks[0] * 1.5)


# ---------------------------------------------------------------------------------------------- bars


def _whiskers(bar: Bar, value: float) -> tuple[float, float]:
    """The bar's whiskers below and above its value: its 95 % bootstrap interval where it has one (the repeat range
    then drawn as a grey band behind it, :func:`_bands`), else the range of its repeats."""
    if bar.has_ci and bar.ci_low is not None and bar.ci_high is not None:
        return value - bar.ci_low, bar.ci_high - value
    return (value - (bar.low if bar.low is not None else value),
            (bar.high if bar.high is not None else value) - value)


def _missing_bar(ax: Axes, y: float, bar: Bar) -> None:
    ax.text(0.01, y, f"× {bar.mark}", transform=ax.get_yaxis_transform(), va="center", ha="left",
            fontsize=7.5, color=MISSING_COLOR, fontstyle="italic", zorder=4,
            bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.6})


RGBA = tuple[float, float, float, float]
"""A colour as matplotlib's ``to_rgba`` gives it."""
DrawnBar = tuple[float, float, Bar, str]
"""A bar with a value: its y, its value, the bar and its colour."""


def _bar_style(bar: Bar, color: str) -> tuple[RGBA, RGBA, str | None]:
    """Face colour, edge colour and hatch: hatched and paler when the value stands on fewer measurements."""
    from matplotlib.colors import to_rgba

    hatched = bool(bar.mark) and bar.mark != "baseline"
    alpha = 0.55 if hatched else 0.9
    return to_rgba(color, alpha), to_rgba(MISSING_COLOR if hatched else color, alpha), HATCHED if hatched else None


def _bands(ax: Axes, drawn: Sequence[DrawnBar]) -> None:
    """The repeat ranges of the bars whose whiskers show a bootstrap interval, as grey bands, in one call."""
    bands = [(y, bar.low, bar.high) for y, _, bar, _ in drawn
             if bar.has_ci and bar.low is not None and bar.high is not None and bar.high > bar.low]
    if bands:
        ax.hlines([y for y, _, _ in bands], [low for _, low, _ in bands], [high for _, _, high in bands],
                  colors="#9a9a9a", linewidth=4.0, alpha=0.55, zorder=3)


def _error_bars(ax: Axes, drawn: Sequence[DrawnBar]) -> None:
    """The whiskers in one call per cap size (wider caps on a bootstrap interval)."""
    for with_ci in (True, False):
        group = [(y, value, _whiskers(bar, value)) for y, value, bar, _ in drawn if bar.has_ci == with_ci]
        if group:
            ax.errorbar([v for _, v, _ in group], [y for y, _, _ in group],
                        xerr=[[w[0] for _, _, w in group], [w[1] for _, _, w in group]], fmt="none", elinewidth=0.9,
                        capsize=3 if with_ci else 2, ecolor="#222222", zorder=4, label="_nolegend_")


def _bars(ax: Axes, drawn: Sequence[DrawnBar]) -> None:
    """The drawn bars of a panel in one call, then their bands and whiskers (a call per bar cost a fifth of the
    figure's drawing time)."""
    styles = [_bar_style(bar, color) for _, _, bar, color in drawn]
    ax.barh([y for y, _, _, _ in drawn], [value for _, value, _, _ in drawn], height=0.7,
            color=[face for face, _, _ in styles], edgecolor=[edge for _, edge, _ in styles],
            hatch=[hatch for _, _, hatch in styles])
    _bands(ax, drawn)
    _error_bars(ax, drawn)


def _panels_top(panels: Sequence[BarPanel]) -> float:
    """The right end of the longest drawn bar (with its whisker) over every panel: one x-scale for all of them."""
    rights = [b.right for p in panels for b in p.bars if b.drawn]
    return max(rights) if rights else 1.0


def _bar_panel(ax: Axes, panel: BarPanel, metric: str, colors: Sequence[str], top: float) -> None:
    n = len(panel.bars)
    drawn: list[DrawnBar] = []
    for i, bar in enumerate(panel.bars):
        y = n - 1 - i
        if not bar.drawn or bar.value is None:
            _missing_bar(ax, y, bar)
            continue
        drawn.append((y, bar.value, bar, colors[i]))
        hatched = bool(bar.mark) and bar.mark != "baseline"
        text = {"speedup": f"{bar.value:.2f}x", "accept_length": f"{bar.value:.2f}"}.get(metric, f"{bar.value:.0f}")
        ax.text(bar.right + top * 0.02, y, text + (f"  {bar.mark}" if bar.mark else ""),
                va="center", fontsize=7, color=MISSING_COLOR if hatched else "#333333")
    if drawn:
        _bars(ax, drawn)
    if metric == "speedup":
        ax.axvline(1.0, color="#000000", linewidth=0.9, linestyle="--", zorder=3)
    ax.set_xlim(0, top * 1.55)
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_title(panel.workload)
    ax.set_xlabel(METRICS[metric])
    ax.grid(axis="y", visible=False)


def _draw_bars(analysis: RunAnalysis, metric: str, panels: Sequence[BarPanel]) -> Callable[[Figure], None]:
    def draw(fig: Figure) -> None:
        axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
        by_id = {c.id: c for c in analysis.configs}
        names = [b.config for b in panels[0].bars]
        colors = [ALGORITHM_COLORS.get(by_id[b.config_id].algorithm, _color(i)) for i, b in
                  enumerate(panels[0].bars)]
        top = _panels_top(panels)  # the panels share one x-scale: a bar's length compares across workloads
        for ax, panel in zip(axes, panels):
            _bar_panel(ax, panel, metric, colors, top)
        axes[0].set_yticks(range(len(names)), list(reversed(names)))

    return draw


def bar_figure(analysis: RunAnalysis) -> FigureSpec | None:
    metric, panels = bar_panels(analysis)
    if not panels or not any(b.drawn for p in panels for b in p.bars):
        return None
    n = len(panels[0].bars)
    if metric == "speedup":
        title = "Speedup over the matched baseline per configuration and workload"
    else:
        title = "Decode tok/s per configuration and workload (no baseline in the plan)"
    caption = (f"{title}: median over repeats; {WHISKERS}; the dashed line is 1x. Hatched: "
               "the value stands on fewer measurements than planned (partial, some empty answers, crashed part-way). "
               "× with a reason: no value (crashed, skipped, every answer empty), never drawn as 0.")
    width = min(3.0 + 3.2 * len(panels), 13.0)
    return FigureSpec("speedup" if metric == "speedup" else "decode-tps", title, caption,
                      (width, 1.3 + 0.26 * n), _draw_bars(analysis, metric, panels))


WHISKERS = ("whiskers with caps: the 95 % bootstrap confidence interval (percentile, over the paired items for a "
            "speedup, over the requests for acceptance), where the cell has one; grey band, or plain whiskers "
            "without one: the range of the per-repeat values")


def acceptance_bar_figure(analysis: RunAnalysis) -> FigureSpec | None:
    """Acceptance length per speculative configuration and workload, with its bootstrap interval."""
    _, panels = bar_panels(analysis, "accept_length")
    if not panels or not panels[0].bars or not any(b.drawn for p in panels for b in p.bars):
        return None
    title = "Acceptance length per configuration and workload"
    caption = (f"{title} (tokens per verify step, weighted by verify steps): {WHISKERS}. × with a reason: no "
               "value, never drawn as 0.")
    return FigureSpec("acceptance-length", title, caption,
                      (min(3.0 + 3.2 * len(panels), 13.0), 1.3 + 0.26 * len(panels[0].bars)),
                      _draw_bars(analysis, "accept_length", panels))


# ---------------------------------------------------------------------------------------------- lines


def _draw_budget(analysis: RunAnalysis, metric: str, algorithms: Sequence[str]) -> Callable[[Figure], None]:
    def draw(fig: Figure) -> None:
        axes = fig.subplots(1, len(algorithms), squeeze=False)[0]
        for ax, algorithm in zip(axes, algorithms):
            lines = budget_lines(analysis, metric, algorithm)
            _lines(ax, lines)
            _pow2_axis(ax, [x for line in lines for x, _ in line.points], "draft budget")
            ax.set_ylabel(METRICS[metric])
            ax.set_title(algorithm)
            if metric == "speedup":
                ax.axhline(1.0, color="#000000", linewidth=0.9, linestyle="--")
            ax.legend(title="TP", loc="upper left", bbox_to_anchor=(1.01, 1.0))
            ax.set_ylim(bottom=0)

    return draw


def budget_figure(analysis: RunAnalysis, metric: str) -> FigureSpec | None:
    algorithms = [a for a in budgeted_algorithms(analysis)
                  if any(y is not None for line in budget_lines(analysis, metric, a) for _, y in line.points)]
    if not algorithms:
        return None
    what = METRICS[metric].split(" (")[0]
    scope = "mean over workloads" if metric == "accept_length" else "geometric mean over workloads"
    title = f"{what.capitalize()} vs draft budget per algorithm"
    caption = (f"{title} ({scope}), one line per TP. A configuration that crashed, was skipped or was cut short "
               "has no point: a red × on the axis names why.")
    name = "acceptance-vs-budget" if metric == "accept_length" else f"{slug(metric)}-vs-budget"
    return FigureSpec(name, title, caption, (min(1.5 + 4.2 * len(algorithms), 13.0), 3.6),
                      _draw_budget(analysis, metric, algorithms))


def tp_figure(analysis: RunAnalysis) -> FigureSpec | None:
    lines = tp_lines(analysis)
    if not any(y is not None for line in lines for _, y in line.points):
        return None

    def draw(fig: Figure) -> None:
        ax = fig.subplots()
        _lines(ax, lines)
        _pow2_axis(ax, [x for line in lines for x, _ in line.points], "tensor parallelism (TP)")
        ax.set_ylabel("decode tok/s (geometric mean over workloads)")
        ax.set_ylim(bottom=0)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))

    title = "Decode tok/s vs tensor parallelism"
    caption = (f"{title}: one line per configuration family (its name without the TP), geometric mean over the "
               "workloads. A red × names a configuration without a value (crashed, skipped, cut short).")
    return FigureSpec("decode-tps-vs-tp", title, caption, (7.5, 3.8), draw)


def _pareto_axes(ax: Axes, points: Sequence[ParetoPoint], colors: dict[str, str], maximise_y: bool) -> None:
    if points:  # one collection for every point (a call per point costs more than all of them drawn)
        ax.scatter([p.x for p in points], [p.y for p in points], color=[colors.get(p.config, "#333333") for p in points],
                   s=22, zorder=3)
    front = sorted((p for p in points if p.front), key=lambda p: p.x)
    if front:
        ax.plot([p.x for p in front], [p.y for p in front], color="#000000", linewidth=0.9, linestyle=":",
                zorder=2)
        ax.scatter([p.x for p in front], [p.y for p in front], s=80, facecolors="none", edgecolors="#000000",
                   linewidths=0.9, zorder=4, label="Pareto front")
        for p in front:
            ax.annotate(p.config + (f" {p.label}" if p.label else ""), (p.x, p.y), xytext=(4, 4 if maximise_y
                        else -9), textcoords="offset points", fontsize=6.5)


def _algorithm_legend(ax: Axes, analysis: RunAnalysis) -> None:
    from matplotlib.lines import Line2D

    algorithms = list(dict.fromkeys(c.algorithm for c in analysis.configs))
    handles = [Line2D([], [], marker="o", linestyle="", color=ALGORITHM_COLORS.get(a, _color(i)), label=a)
               for i, a in enumerate(algorithms)]
    handles.append(Line2D([], [], marker="o", linestyle=":", markerfacecolor="none", markersize=9,
                          color="#000000", label="Pareto front"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def cell_pareto_figure(analysis: RunAnalysis) -> FigureSpec | None:
    load_names = {w.name for w in analysis.load.workloads} if analysis.load is not None else set()
    workloads = [w.name for w in analysis.workloads if w.name not in load_names]
    data = {w: cell_pareto(analysis, w) for w in workloads}
    workloads = [w for w in workloads if data[w][0]]
    if not workloads:
        return None
    colors = {c.name: ALGORITHM_COLORS.get(c.algorithm, _color(i)) for i, c in enumerate(analysis.configs)}
    absent = list(dict.fromkeys(a for w in workloads for a in data[w][1]))
    cols = min(len(workloads), 2)
    rows = math.ceil(len(workloads) / cols)

    def draw(fig: Figure) -> None:
        axes = fig.subplots(rows, cols, squeeze=False).flatten()
        for ax, workload in zip(axes, workloads):
            _pareto_axes(ax, data[workload][0], colors, maximise_y=False)
            ax.set_title(workload)
            ax.set_xlabel("decode tok/s (median)")
            ax.set_ylabel("TTFT ms (median)")
            ax.margins(x=0.25, y=0.12)
        for ax in axes[len(workloads):]:
            ax.set_visible(False)
        _algorithm_legend(axes[cols - 1], analysis)
        if absent:
            fig.supxlabel(textwrap.fill("× not shown (no value on some workload): " + "; ".join(absent), 150),
                          fontsize=7, color=MISSING_COLOR)

    title = "Latency vs throughput: TTFT against decode tok/s (Pareto front)"
    caption = (f"{title}, one point per configuration and workload, coloured by algorithm; ringed and joined: the "
               "configurations no other beats on both (faster and no later first token). Configurations without "
               "a value are named under the panels.")
    return FigureSpec("pareto-ttft-vs-tps", title, caption, (10.5, 0.9 + 3.3 * rows), draw)


THIN_DRAFTS = 2
"""A conditional acceptance resting on this many verify steps or fewer that reached its position is drawn hollow on a
dotted line, never with the solid line of the well-measured positions (k = 1 rests on every step)."""


def _reached(analysis: RunAnalysis, config_id: str, workload: str) -> list[int]:
    """Verify steps that reached each draft position 1..depth (the histogram's tail sums)."""
    cell = analysis.acceptance.cell(config_id, workload) if analysis.acceptance is not None else None
    histogram = list(cell.histogram) if cell is not None else []
    return [sum(histogram[k - 1:]) for k in range(1, len(histogram))]


def _position_lines(ax: Axes, lines: Sequence[Line], reached: dict[str, list[int]]) -> None:
    """Each configuration's line: solid over the positions enough steps reached, hollow markers on a dotted line
    from there over those that rest on :data:`THIN_DRAFTS` steps or fewer."""
    for index, line in enumerate(lines):
        color = _color(index)
        support = reached.get(line.label, [])
        thin = [i for i, (k, _) in enumerate(line.points) if 0 < k <= len(support) and support[int(k) - 1] <= THIN_DRAFTS]
        cut = thin[0] if thin else len(line.points)
        solid = [(x, math.nan if y is None else y) for x, y in line.points[:cut]]
        ax.plot([x for x, _ in solid], [y for _, y in solid], marker="o", color=color, label=line.label)
        if thin:
            tail = [(x, math.nan if y is None else y) for x, y in line.points[max(0, cut - 1):]]
            ax.plot([x for x, _ in tail], [y for _, y in tail], linestyle=":", color=color, linewidth=1.0)
            ax.plot([x for x, _ in line.points[cut:]], [math.nan if y is None else y for _, y in line.points[cut:]],
                    linestyle="none", marker="o", markerfacecolor="white", markeredgecolor=color)


def position_figure(analysis: RunAnalysis) -> FigureSpec | None:
    load_names = {w.name for w in analysis.load.workloads} if analysis.load is not None else set()
    data = {w.name: position_lines(analysis, w.name) for w in analysis.workloads if w.name not in load_names}
    workloads = [w for w, (lines, _) in data.items() if lines]
    if not workloads:
        return None
    cols = min(len(workloads), 2)
    rows = math.ceil(len(workloads) / cols)
    absent = list(dict.fromkeys(a for w in workloads for a in data[w][1]))

    ids = {c.name: c.id for c in analysis.configs}

    def draw(fig: Figure) -> None:
        axes = fig.subplots(rows, cols, squeeze=False).flatten()
        for ax, workload in zip(axes, workloads):
            lines = data[workload][0]
            _position_lines(ax, lines, {name: _reached(analysis, cid, workload) for name, cid in ids.items()})
            ax.set_xticks(sorted({x for line in lines for x, _ in line.points}))
            ax.set_ylim(0, 1.05)
            ax.set_title(workload)
            ax.set_xlabel("draft position k")
            ax.set_ylabel("P(k accepted | 1..k-1 accepted)")
        for ax in axes[len(workloads):]:
            ax.set_visible(False)
        axes[cols - 1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
        if absent:
            fig.supxlabel(textwrap.fill("× not shown: " + "; ".join(absent), 150), fontsize=7, color=MISSING_COLOR)

    title = "Conditional acceptance by draft position"
    caption = (f"{title}: per speculative configuration and workload, the chance that draft k is accepted when "
               "drafts 1..k-1 were, from the server's histogram of accepted drafts per verify step. Hollow points "
               f"on a dotted line rest on {THIN_DRAFTS} verify steps or fewer that reached the position. "
               "Configurations without a histogram are named under the panels.")
    return FigureSpec("acceptance-by-position", title, caption, (10.5, 0.9 + 3.3 * rows), draw)


# ---------------------------------------------------------------------------------------------- load

AXIS_LABELS = {AXIS_CONCURRENCY: "concurrency (requests in flight)", AXIS_RATE: "request rate (req/s)"}


def _load_series(ax: Axes, rows: Sequence[PointRow], value: Callable[[PointRow], float | None], label: str,
                 color: str) -> None:
    xs = [p.value for p in rows]
    ys = [math.nan if (v := value(p)) is None or p.n_ok == 0 else v for p in rows]
    ax.plot(xs, ys, marker="o", color=color, label=label)
    capped = [(p.value, y) for p, y in zip(rows, ys) if p.capped and not math.isnan(y)]
    if capped:
        ax.scatter([x for x, _ in capped], [y for _, y in capped], s=70, marker="s", facecolors="none",
                   edgecolors=MISSING_COLOR, linewidths=1.1, zorder=4)
    for index, p in enumerate(r for r in rows if r.n_ok == 0):
        _mark_missing(ax, p.value, f"{label}: {'zero output' if p.n_zero_output else 'errors'}", index)


def _load_legend(ax: Axes) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles, _ = ax.get_legend_handles_labels()
    handles += [Line2D([], [], marker="s", linestyle="", markerfacecolor="none", markeredgecolor=MISSING_COLOR,
                       markersize=8, label="capped point"),
                Patch(facecolor="#999999", alpha=0.25, label="B* interval (speedup crosses 1)")]
    ax.legend(handles=handles, loc="best")


def _load_panels(load: LoadAnalysis, workload: str, axis: str) -> Callable[[Figure], None]:
    ids = list(dict.fromkeys(p.config_id for p in load.points if p.workload == workload and p.axis == axis))

    def draw(fig: Figure) -> None:
        axes = fig.subplots(1, 3)
        figures: list[tuple[str, Callable[[PointRow], float | None]]] = [
            ("output tok/s (total)", lambda p: p.output_tps.median if p.output_tps else None),
            ("TTFT p50 ms", lambda p: p.ttft_s.p50 * 1000 if p.ttft_s and p.ttft_s.p50 is not None else None),
            ("speedup over the matched baseline (x)",
             lambda p: p.speedup.median if p.speedup and not p.noisy else None),
        ]
        for index, config_id in enumerate(ids):
            rows = [p for p in load.points_of(config_id, workload) if p.axis == axis]
            for ax, (_, value) in zip(axes, figures):
                _load_series(ax, rows, value, rows[0].config, _color(index))
            crossing = load.crossover(config_id, workload, axis)
            if crossing is not None and crossing.status == CROSSES and crossing.low and crossing.high:
                for ax in axes:
                    ax.axvspan(crossing.low, crossing.high, color=_color(index), alpha=0.12, linewidth=0)
                if crossing.estimate:
                    axes[2].axvline(crossing.estimate, color=_color(index), linestyle=":", linewidth=1.2)
        values = sorted({p.value for p in load.points if p.workload == workload and p.axis == axis})
        for ax, (label, _) in zip(axes, figures):
            if axis == AXIS_CONCURRENCY:
                _pow2_axis(ax, values, AXIS_LABELS[axis])
            else:
                ax.set_xlabel(AXIS_LABELS.get(axis, axis))
            ax.set_ylabel(label)
        axes[2].axhline(1.0, color="#000000", linewidth=0.9, linestyle="--")
        _load_legend(axes[0])

    return draw


def load_figures(analysis: RunAnalysis) -> list[FigureSpec]:
    load = analysis.load
    if not isinstance(load, LoadAnalysis) or load.empty:
        return []
    out = []
    for w in load.workloads:
        for axis in (AXIS_CONCURRENCY, AXIS_RATE):
            if not any(p.workload == w.name and p.axis == axis for p in load.points):
                continue
            title = f"{w.name}: throughput, TTFT and speedup vs {AXIS_LABELS[axis].split(' (')[0]}"
            caption = (f"{title}. Shaded: where each speculative configuration's speedup crosses 1 (B*), dotted its "
                       "estimate; a red square: a capped point (more requests in flight than the server runs, so "
                       "it measures the cap); a red ×: a point with no ok answer. Noisy speedups are left out.")
            out.append(FigureSpec(f"load-{slug(w.name)}-{axis}", title, caption, (13.0, 3.8),
                                  _load_panels(load, w.name, axis)))
        pareto = load_pareto(load, w.name)
        if pareto:
            out.append(pareto)
    return out


def load_pareto(load: LoadAnalysis, workload: str) -> FigureSpec | None:
    rows = [p for p in load.points if p.workload == workload and p.output_tps and p.per_user_tps]
    if not rows:
        return None
    points = pareto_flags([(p.config, p.output_tps.median, p.per_user_tps.median, p.load)  # type: ignore[union-attr]
                           for p in rows], maximise_y=True)
    ids = list(dict.fromkeys(p.config for p in rows))
    colors = {name: _color(i) for i, name in enumerate(ids)}

    def draw(fig: Figure) -> None:
        ax = fig.subplots()
        for name in ids:
            mine = sorted((p for p in points if p.config == name), key=lambda p: p.x)
            ax.plot([p.x for p in mine], [p.y for p in mine], color=colors[name], alpha=0.5, label=name)
        _pareto_axes(ax, points, colors, maximise_y=True)
        capped = [p for p in rows if p.capped]
        if capped:
            ax.scatter([p.output_tps.median for p in capped], [p.per_user_tps.median for p in capped],  # type: ignore[union-attr]
                       s=70, marker="s", facecolors="none", edgecolors=MISSING_COLOR, linewidths=1.1, zorder=4,
                       label="capped point")
        ax.set_xlabel("total output tok/s")
        ax.set_ylabel("output tok/s per user")
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))

    title = f"{workload}: per-user vs total output tok/s (Pareto front)"
    caption = (f"{title}: each configuration's load points joined in order; ringed: the points no other beats on "
               "both per-user and total tok/s; a red square: a capped point (it measures the server's cap).")
    return FigureSpec(f"pareto-{slug(workload)}", title, caption, (7.5, 4.2), draw)


# ---------------------------------------------------------------------------------------------- all


def best_speedup_figure(analysis: RunAnalysis) -> FigureSpec | None:
    """An aggregate of every configuration: how many reach each best speedup (drawn when the other figures show
    only the best ones, :mod:`specbench_tui.report.figscope`)."""
    values = sorted(best_speedups(analysis).values())
    if not values:
        return None

    def draw(fig: Figure) -> None:
        ax = fig.subplots()
        ax.hist(values, bins=min(60, max(10, len(values) // 20)), color=_color(0))
        ax.axvline(1.0, color="#000000", linewidth=0.9, linestyle="--")
        ax.set_xlabel("best median speedup of the configuration (x)")
        ax.set_ylabel("configurations")

    title = f"Best speedup of every configuration ({len(values):,} with one)"
    caption = (f"{title}: each configuration's best median speedup over its workloads and load points; the dashed "
               "line is 1x. The other figures draw only the best configurations.")
    return FigureSpec("best-speedup-histogram", title, caption, (7.5, 3.6), draw)


def figure_specs(analysis: RunAnalysis) -> list[FigureSpec]:
    """Every figure the run has data for, in the order the report shows them (no drawing yet): past
    :data:`~specbench_tui.report.figscope.MAX_FIGURE_CONFIGS` configurations, of the best ones, with an aggregate
    of them all."""
    full = analysis
    analysis, left_out = figure_scope(full)
    specs = [bar_figure(analysis), acceptance_bar_figure(analysis), budget_figure(analysis, "speedup"),
             budget_figure(analysis, "accept_length"),
             position_figure(analysis), tp_figure(analysis), cell_pareto_figure(analysis), *load_figures(analysis),
             best_speedup_figure(full) if left_out else None]
    out: list[FigureSpec] = []
    seen: set[str] = set()
    for spec in specs:
        if spec is None:
            continue
        name, n = spec.name, 2
        while name in seen:
            name, n = f"{spec.name}-{n}", n + 1
        seen.add(name)
        out.append(spec if name == spec.name else FigureSpec(name, spec.title, spec.caption, spec.size, spec.draw))
    return out


@contextmanager
def _style() -> Iterator[None]:
    import matplotlib

    matplotlib.use("Agg", force=False)
    with matplotlib.rc_context(STYLE):  # STYLE's keys are checked against matplotlib's (RcKeyType)
        yield


def render(spec: FigureSpec, formats: Sequence[str] = ("svg",)) -> dict[str, bytes]:
    """Draw ``spec`` once and save it in each of ``formats`` (``pdf``, ``svg``, ``png``), laid out once: the
    constrained layout (about half of a save's time) runs at the first save and the others keep its positions."""
    with _style():
        from matplotlib.figure import Figure

        fig = Figure(figsize=spec.size, layout="constrained")
        spec.draw(fig)
        fig.suptitle(spec.title, fontsize=10.5, fontweight="bold")
        out = {}
        for fmt in formats:
            buffer = io.BytesIO()
            fig.savefig(buffer, format=fmt, metadata=METADATA[fmt])
            out[fmt] = buffer.getvalue()
            fig.set_layout_engine("none")
        return out


_PENDING: Sequence[FigureSpec] = ()
"""The figures :func:`render_all` hands to its forked workers (a spec's ``draw`` is a closure: it cannot be
pickled, so each worker finds it here, in the memory it was forked with, by its index)."""


def _render_pending(index: int, formats: Sequence[str]) -> dict[str, bytes]:
    return render(_PENDING[index], formats)


def _cores() -> int:
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)


def _parallel_workers(count: int) -> int:
    """Worker processes for ``count`` figures: one per core, none (draw here) on one core, for one figure, where
    ``fork`` is missing, or in a process with other threads (a fork copies their locks, held or not: the TUI and
    pytest's workers draw in their own process)."""
    workers = min(count, _cores())
    if workers < 2 or "fork" not in multiprocessing.get_all_start_methods() or threading.active_count() > 1:
        return 0
    return workers


def render_all(specs: Sequence[FigureSpec], formats: Sequence[str] = ("svg",)) -> list[dict[str, bytes]]:
    """:func:`render` for each of ``specs``, in order: on a machine of several cores, in forked worker processes
    (matplotlib is imported first, so each worker starts with it), the largest figures first."""
    global _PENDING
    workers = _parallel_workers(len(specs))
    if not workers:
        return [render(spec, formats) for spec in specs]
    with _style():
        from matplotlib.figure import Figure  # noqa: F401  (imported once, before the fork)
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    order = sorted(range(len(specs)), key=lambda i: -specs[i].size[0] * specs[i].size[1])
    _PENDING = specs
    before = set(multiprocessing.active_children())
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"), initializer=_quiet_worker)
    try:
        futures = {i: pool.submit(_render_pending, i, tuple(formats)) for i in order}
        return [futures[i].result() for i in range(len(specs))]
    except BrokenProcessPool:  # a worker died (killed, out of memory): the figures are drawn here instead
        return [render(spec, formats) for spec in specs]
    except BaseException:  # Ctrl-C: the workers stop now, not after the figures still queued
        for process in set(multiprocessing.active_children()) - before:
            process.terminate()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _PENDING = ()


def _quiet_worker() -> None:
    """A worker leaves Ctrl-C to the report's process, which stops it (no traceback of every worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def write_figures(analysis: RunAnalysis, directory: Path, run_name: str = "") -> list[FigureEntry]:
    """Write every figure as ``<name>.pdf``, ``.svg`` and ``.png`` under ``directory`` with ``figures.json``
    (one entry per figure: name, title, files, caption); return the entries."""
    directory.mkdir(parents=True, exist_ok=True)
    entries: list[FigureEntry] = []
    specs = figure_specs(analysis)
    for spec, drawn in zip(specs, render_all(specs, FILE_FORMATS)):
        files: dict[str, str] = {}
        for fmt, data in drawn.items():
            path = directory / f"{spec.name}.{fmt}"
            path.write_bytes(data)
            files[fmt] = path.name
        entries.append({"name": spec.name, "title": spec.title, "caption": spec.caption, "files": files})
    index = {"schema": INDEX_SCHEMA, "run": run_name, "sweep": analysis.sweep, "figures": entries}
    (directory / INDEX).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    return entries
