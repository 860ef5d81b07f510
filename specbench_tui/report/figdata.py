"""What each figure shows, picked out of a :class:`~specbench_tui.core.results.RunAnalysis`: pure data, no
plotting library, so the static figures (:mod:`specbench_tui.report.figures`), the terminal text charts
(:mod:`specbench_tui.report.charts`) and the TUI's chart screen draw the same points.

A value that does not exist (a crashed, skipped or failed configuration, a cell whose every answer was empty, a
workload never run) is never a 0: it is ``None`` with the reason beside it (:attr:`Bar.mark`,
:attr:`Line.missing`), which every view draws as a mark.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from specbench_tui.core.results import (
    FAILED_STATES,
    FLAG_BURST,
    FLAG_ZERO_OUTPUT,
    CellRow,
    ConfigSummary,
    RunAnalysis,
    Spread,
    aggregate,
)

METRICS = {"speedup": "speedup over baseline (x)", "decode_tps": "decode tok/s", "accept_length": "acceptance length"}

MARK_CRASHED = "crashed"
MARK_ZERO = "zero output"
MARK_PARTIAL = "partial"
MARK_BASELINE = "baseline"
MARK_NO_BASELINE = "no baseline"
MARK_PENDING = "pending"
MARK_NO_VALUE = "no value"
MARK_NO_RATE = "no decode rate"


@dataclass(frozen=True)
class ChartSeries:
    """One line: ``points`` are (x, y) with y None where there is no value."""

    label: str
    points: tuple[tuple[float, float | None], ...]


@dataclass(frozen=True)
class Line:
    """A series with the reason for each point it lacks: ``missing`` holds (x, why)."""

    label: str
    points: tuple[tuple[float, float | None], ...]
    missing: tuple[tuple[float, str], ...] = ()

    @property
    def series(self) -> ChartSeries:
        return ChartSeries(self.label, self.points)


@dataclass(frozen=True)
class Bar:
    """One configuration on one workload: its median with the repeat range, or no value and why.

    ``mark`` is "" for a plain value; "baseline" for the baseline itself; with a value, "partial", "zero output"
    or "crashed" (joined by ", ") say the value stands on fewer measurements than planned; without one it says
    why there is none (crashed, skipped, zero output, pending…)."""

    config_id: str
    config: str
    value: float | None
    low: float | None = None
    high: float | None = None
    mark: str = ""
    ci_low: float | None = None
    """The 95 % bootstrap interval of the value (``RunAnalysis.intervals``), where it has one."""
    ci_high: float | None = None

    @property
    def drawn(self) -> bool:
        return self.value is not None and math.isfinite(self.value)

    @property
    def has_ci(self) -> bool:
        return self.ci_low is not None and self.ci_high is not None

    @property
    def right(self) -> float:
        """The rightmost of the value, its repeat range and its interval (where a label may start)."""
        return max(v for v in (self.value, self.high, self.ci_high, 0.0) if v is not None)


@dataclass(frozen=True)
class BarPanel:
    workload: str
    bars: tuple[Bar, ...]


def _missing_mark(row: CellRow | None, config: ConfigSummary) -> str:
    """Why a cell has no value: the configuration's fate first, then the cell's."""
    if config.state in FAILED_STATES:
        return config.state
    if row is None or not row.measured:
        return "not run" if row is not None and row.not_run else MARK_PENDING
    if row.n_ok == 0 and row.n_zero_output > 0:
        return MARK_ZERO
    if row.n_ok == 0:
        return "errors only"
    if FLAG_BURST in row.flags:
        return MARK_NO_RATE
    if row.speedup_note and row.speedup_note.startswith("no baseline"):
        return MARK_NO_BASELINE
    return MARK_NO_VALUE


def _value_marks(row: CellRow, config: ConfigSummary) -> str:
    marks = []
    if row.speedup_note == "baseline":
        marks.append(MARK_BASELINE)
    if row.partial:
        marks.append(MARK_PARTIAL)
    if FLAG_ZERO_OUTPUT in row.flags or row.n_zero_output:
        marks.append(f"{MARK_ZERO} {row.n_zero_output}/{row.n_ok + row.n_zero_output}")
    if config.state == MARK_CRASHED:
        marks.append(MARK_CRASHED)
    return ", ".join(marks)


def _spread(row: CellRow, metric: str) -> Spread | None:
    """The row's figure for ``metric`` with its repeat range (acceptance: over the per-repeat figures)."""
    if metric == "speedup":
        return row.speedup
    if metric == "decode_tps":
        return row.decode_tps
    if row.accept_length is None:
        return None
    per_repeat = [a for _, a in row.accept_by_repeat] or [row.accept_length]
    return Spread(row.accept_length, min(per_repeat), max(per_repeat), len(per_repeat))


def _interval(analysis: RunAnalysis, row: CellRow, metric: str) -> tuple[float | None, float | None]:
    """The row's bootstrap interval for ``metric`` (speedup, acceptance length), (None, None) without one."""
    cells = analysis.intervals.cell(row.config_id, row.workload) if analysis.intervals is not None else None
    interval = getattr(cells, metric, None) if cells is not None and metric != "decode_tps" else None
    if interval is None or not interval.ok:
        return None, None
    return interval.low, interval.high


def cell_bar(analysis: RunAnalysis, config: ConfigSummary, workload: str, metric: str) -> Bar:
    """The bar of ``config`` on ``workload`` for ``metric`` (``speedup``, ``decode_tps`` or ``accept_length``),
    with its bootstrap interval where the analysis has one."""
    row = analysis.row(config.id, workload)
    spread = None if row is None else _spread(row, metric)
    if row is None or spread is None or not math.isfinite(spread.median):
        mark = _missing_mark(row, config)
        if row is not None and metric == "speedup" and mark == MARK_NO_VALUE and row.speedup_note:
            mark = row.speedup_note
        return Bar(config.id, config.name, None, mark=mark)
    ci_low, ci_high = _interval(analysis, row, metric) if row.speedup_note != "baseline" else (None, None)
    return Bar(config.id, config.name, spread.median, spread.low, spread.high, _value_marks(row, config),
               ci_low, ci_high)


def speedup_metric(analysis: RunAnalysis) -> str:
    """``speedup`` when some configuration has one over a baseline, else ``decode_tps`` (no baseline planned)."""
    has = any(r.speedup is not None and r.speedup_note != "baseline" for r in analysis.rows)
    return "speedup" if has else "decode_tps"


def bar_panels(analysis: RunAnalysis, metric: str | None = None) -> tuple[str, list[BarPanel]]:
    """(metric, one panel per workload without a load axis, every configuration of the plan in plan order; for
    ``accept_length`` the speculative ones)."""
    metric = metric or speedup_metric(analysis)
    load_names = {w.name for w in analysis.load.workloads} if analysis.load is not None else set()
    panels = []
    shown = [c for c in analysis.configs if c.in_plan and (metric != "accept_length" or c.speculative)]
    for workload in analysis.workloads:
        if workload.name in load_names:
            continue
        bars = tuple(cell_bar(analysis, c, workload.name, metric) for c in shown)
        panels.append(BarPanel(workload.name, bars))
    return metric, panels


def budgeted_algorithms(analysis: RunAnalysis, min_budgets: int = 2) -> list[str]:
    """Algorithms with at least ``min_budgets`` distinct draft budgets in the plan, in plan order."""
    budgets: dict[str, set[int]] = {}
    for config in analysis.configs:
        if config.budget is not None:
            budgets.setdefault(config.algorithm, set()).add(config.budget)
    return [a for a, b in budgets.items() if len(b) >= min_budgets]


def _why_missing(analysis: RunAnalysis, config: ConfigSummary) -> str:
    why = analysis.why_not_averaged(config.id)
    if why:
        return why.split(":")[0]
    marks = {_missing_mark(analysis.row(config.id, w.name), config) for w in analysis.workloads}
    return ", ".join(sorted(marks))


def _tp_label(tp: int | None) -> str:
    return f"TP{tp}" if tp is not None else "TP?"


def _line(label: str, points: list[tuple[float, float | None, str]]) -> Line:
    """A line through (x, value, why missing) points, in x order, the missing ones with their reasons."""
    points = sorted(points, key=lambda p: p[0])
    return Line(label, tuple((x, y) for x, y, _ in points), tuple((x, why) for x, y, why in points if y is None))


def budget_lines(analysis: RunAnalysis, metric: str, algorithm: str, workload: str | None = None) -> list[Line]:
    """``metric`` against draft budget for ``algorithm``, one line per TP: per configuration the geometric mean
    over workloads (the mean for acceptance; :func:`~specbench_tui.core.results.aggregate`), or one
    ``workload``'s value; a point without a value says why in ``missing``."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r} (one of {', '.join(METRICS)})")
    workloads = [workload] if workload else [w.name for w in analysis.workloads]
    by_tp: dict[int | None, list[tuple[float, float | None, str]]] = {}
    for config in analysis.configs:
        if config.algorithm != algorithm or config.budget is None:
            continue
        value = aggregate(analysis, config.id, metric, workloads)
        why = "" if value is not None else _why_missing(analysis, config)
        by_tp.setdefault(config.tp, []).append((float(config.budget), value, why))
    return [_line(_tp_label(tp), points) for tp, points in sorted(by_tp.items(),
                                                                  key=lambda kv: (kv[0] is None, kv[0] or 0))]


def budget_series(analysis: RunAnalysis, metric: str, algorithm: str,
                  workload: str | None = None) -> list[ChartSeries]:
    """As :func:`budget_lines`, without the reasons (what the text charts draw)."""
    return [line.series for line in budget_lines(analysis, metric, algorithm, workload)]


_TP_IN_NAME = re.compile(r"[-_]?tp\d+", re.IGNORECASE)


def family(config: ConfigSummary) -> str:
    """A configuration's name without its TP (``ddtree-b16-tp4`` -> ``ddtree-b16``): what a TP line joins."""
    stripped = _TP_IN_NAME.sub("", config.name).strip("-_")
    if stripped and stripped != config.name:
        return stripped
    return config.algorithm + (f"-b{config.budget}" if config.budget is not None else "")


def tp_lines(analysis: RunAnalysis) -> list[Line]:
    """Decode tok/s (geometric mean over the workloads) against TP, one line per configuration family; empty
    when the plan has fewer than two TPs."""
    tps = {c.tp for c in analysis.configs if c.tp is not None}
    if len(tps) < 2:
        return []
    lines: dict[str, list[tuple[float, float | None, str]]] = {}
    for config in analysis.configs:
        if config.tp is None or not config.in_plan:
            continue
        value = aggregate(analysis, config.id, "decode_tps")
        why = "" if value is not None else _why_missing(analysis, config)
        lines.setdefault(family(config), []).append((float(config.tp), value, why))
    return [_line(label, points) for label, points in lines.items()]


@dataclass(frozen=True)
class ParetoPoint:
    config: str
    x: float
    y: float
    label: str = ""
    front: bool = False


def pareto_flags(points: list[tuple[str, float, float, str]], maximise_y: bool) -> list[ParetoPoint]:
    """Every (config, x, y, label) with ``front`` set where no other point is at least as good on both (x is
    maximised; y is maximised or minimised)."""
    def better(a: tuple[str, float, float, str], b: tuple[str, float, float, str]) -> bool:
        y_ok = a[2] >= b[2] if maximise_y else a[2] <= b[2]
        return a[1] >= b[1] and y_ok and (a[1] > b[1] or a[2] != b[2])

    return [ParetoPoint(p[0], p[1], p[2], p[3], not any(better(q, p) for q in points if q is not p)) for p in points]


def cell_pareto(analysis: RunAnalysis, workload: str) -> tuple[list[ParetoPoint], list[str]]:
    """Decode tok/s (more is better) against TTFT in ms (less is better) per configuration on ``workload``, the
    front marked; and the configurations left out, with why (``ddtree-b8-tp1: crashed``)."""
    points: list[tuple[str, float, float, str]] = []
    absent = []
    for config in analysis.configs:
        row = analysis.row(config.id, workload)
        if row is not None and row.decode_tps is not None and row.ttft_s is not None:
            points.append((config.name, row.decode_tps.median, row.ttft_s.median * 1000, ""))
        elif config.in_plan:
            absent.append(f"{config.name}: {_missing_mark(row, config)}")
    return pareto_flags(points, maximise_y=False), absent


def position_lines(analysis: RunAnalysis, workload: str) -> tuple[list[Line], list[str]]:
    """Conditional acceptance at draft position k (P(k accepted | 1..k−1 accepted)) per configuration on
    ``workload``, from the acceptance analysis (``RunAnalysis.acceptance``); and the speculative configurations
    without one, with why."""
    acceptance = analysis.acceptance
    lines: list[Line] = []
    absent: list[str] = []
    for config in analysis.configs:
        if not config.speculative or not config.in_plan:
            continue
        cell = acceptance.cell(config.id, workload) if acceptance is not None else None
        values = tuple(cell.conditional) if cell is not None else ()
        if any(v is not None for v in values):
            points = tuple((float(k), v) for k, v in enumerate(values, start=1))
            lines.append(Line(config.name, points))
        else:
            why = _missing_mark(analysis.row(config.id, workload), config)
            absent.append(f"{config.name}: {why if why != MARK_NO_VALUE else 'no histogram'}")
    return lines, absent
