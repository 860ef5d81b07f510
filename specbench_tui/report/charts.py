"""Text charts for the terminal-only outputs (``specbench report --format txt``): a metric against draft budget,
one line per TP, as plain ASCII lines. The figures of the HTML report and of ``--figures`` are drawn by
:mod:`specbench_tui.report.figures` from the same data (:mod:`specbench_tui.report.figdata`). Two layers:

- :func:`~specbench_tui.report.figdata.budget_series` picks the points out of the analysis:
  ``metric`` is ``"speedup"``, ``"decode_tps"`` or ``"accept_length"``, for one ``algorithm``, either for one
  ``workload`` or (``workload=None``) the geometric mean over workloads, a point being shown only where every
  workload has a value and the configuration neither crashed nor was cut short anywhere
  (:func:`~specbench_tui.core.analysis.aggregate`: a configuration that crashed part-way would otherwise look
  better or worse than it is);
- :func:`render_chart` draws any series into ``width`` × ``height`` characters and returns the lines.

Budgets are placed evenly (8, 12, 16, 32, 64 are categories, not a linear scale); a missing point
(crashed, skipped) breaks the line and is named in the legend.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from specbench_tui.core.results import RunAnalysis
from specbench_tui.report.figdata import METRICS, ChartSeries, budget_series, budgeted_algorithms

MARKERS = "o+x*#@%&"
"""One marker per series, in order; line segments between points are drawn with '.'."""

__all__ = ["METRICS", "MARKERS", "ChartSeries", "budget_charts", "budget_series", "budgeted_algorithms",
           "render_chart"]


def _fmt_tick(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def render_chart(series: Sequence[ChartSeries], width: int = 72, height: int = 12, title: str = "",
                 x_label: str = "draft budget") -> list[str]:
    """Draw ``series`` as ASCII into at most ``width`` columns and ``height`` plot rows; return the lines."""
    xs = sorted({x for s in series for x, _ in s.points})
    ys = [y for s in series for _, y in s.points if y is not None and math.isfinite(y)]
    lines = [title] if title else []
    if not xs or not ys:
        return [*lines, "(no data to chart)"]
    height = max(height, 3)
    low, high = _y_range(ys)
    gutter = max(len(_fmt_tick(v)) for v in (low, high, (low + high) / 2)) + 1
    plot_width = max(width - gutter - 2, len(xs) * 4)
    step = (plot_width - 1) / max(len(xs) - 1, 1)
    column = {x: round(i * step) if len(xs) > 1 else plot_width // 2 for i, x in enumerate(xs)}

    def row_of(y: float) -> int:
        return round((high - y) / (high - low) * (height - 1))

    grid = [[" "] * plot_width for _ in range(height)]
    for index, s in enumerate(series):
        _draw(grid, s, MARKERS[index % len(MARKERS)], column, row_of)
    ticks = {0: high, (height - 1) // 2: (high + low) / 2, height - 1: low}
    for r in range(height):
        label = _fmt_tick(ticks[r]) if r in ticks else ""
        lines.append(f"{label.rjust(gutter - 1)} |{''.join(grid[r])}".rstrip())
    lines += _x_axis(column, plot_width, gutter, width, x_label)
    overlap = any("&" in row for row in grid)
    lines.append(" " * gutter + "  ".join(_legend(series)) + ("   & several series" if overlap else ""))
    return lines


def _y_range(ys: list[float]) -> tuple[float, float]:
    """The plot's lowest and highest y: the values' range (a flat one widened), with 5 % room either side."""
    low, high = min(ys), max(ys)
    if math.isclose(low, high):
        low, high = low - 0.5 if low >= 0.5 else 0.0, high + 0.5
    pad = (high - low) * 0.05
    return low - pad, high + pad


def _draw(grid: list[list[str]], s: ChartSeries, marker: str, column: dict[float, int],
          row_of: Callable[[float], int]) -> None:
    """One series into ``grid``: '.' segments between neighbouring budgets that both have a value, then its
    markers ('&' where another series' marker is already)."""
    previous: tuple[float, float | None] | None = None
    for x, y in s.points:
        if previous is not None and y is not None and previous[1] is not None:
            c0, r0, c1, r1 = column[previous[0]], row_of(previous[1]), column[x], row_of(y)
            for c in range(c0 + 1, c1):
                r = round(r0 + (r1 - r0) * (c - c0) / (c1 - c0))
                if grid[r][c] == " ":
                    grid[r][c] = "."
        previous = (x, y)
    for c, r in [(column[x], row_of(y)) for x, y in s.points if y is not None and math.isfinite(y)]:
        grid[r][c] = marker if grid[r][c] in " ." else "&"


def _x_axis(column: dict[float, int], plot_width: int, gutter: int, width: int, x_label: str) -> list[str]:
    """The x axis with a '+' at each budget, and the budgets under it (the axis' name too when it fits)."""
    axis = [" "] * plot_width
    labels = [" "] * (plot_width + 8)
    for x, c in column.items():
        axis[c] = "+"
        text = f"{x:g}"
        start = max(0, min(c - len(text) // 2, len(labels) - len(text)))
        labels[start:start + len(text)] = list(text)
    label_line = (" " * (gutter + 1) + "".join(labels)).rstrip()
    if len(label_line) + 3 + len(x_label) <= width:
        label_line += f"   {x_label}"
    return [" " * gutter + "+" + "".join(axis).replace(" ", "-"), label_line]


def _legend(series: Sequence[ChartSeries]) -> list[str]:
    """Each series' marker and label, with the budgets it has no value at."""
    legend = []
    for index, s in enumerate(series):
        missing = [f"{x:g}" for x, y in s.points if y is None]
        legend.append(f"{MARKERS[index % len(MARKERS)]} {s.label}" + (f" (no value at {', '.join(missing)})"
                                                                      if missing else ""))
    return legend


def budget_charts(analysis: RunAnalysis, width: int = 72, height: int = 10, workload: str | None = None) -> list[str]:
    """Speedup (tok/s when there is no baseline) and acceptance against budget for every budgeted algorithm."""
    out: list[str] = []
    scope = f"workload {workload}" if workload else "geometric mean over workloads"
    for algorithm in budgeted_algorithms(analysis):
        speed = budget_series(analysis, "speedup", algorithm, workload)
        metric = "speedup"
        if not any(y is not None for s in speed for _, y in s.points):
            speed, metric = budget_series(analysis, "decode_tps", algorithm, workload), "decode_tps"
        out += render_chart(speed, width, height, f"{algorithm}: {METRICS[metric]} vs draft budget ({scope})")
        out.append("")
        accept_scope = f"workload {workload}" if workload else "mean over workloads"
        out += render_chart(budget_series(analysis, "accept_length", algorithm, workload), width, height,
                            f"{algorithm}: {METRICS['accept_length']} vs draft budget ({accept_scope})")
        kept_out = [f"{c.name} ({why})" for c in analysis.configs
                    if c.algorithm == algorithm and c.budget is not None
                    and (why := analysis.why_not_averaged(c.id)) is not None and c.state != "skipped"]
        if kept_out:
            out.append("no point for " + ", ".join(kept_out))
        out.append("")
    return out[:-1] if out else ["(no algorithm with several draft budgets to chart)"]
