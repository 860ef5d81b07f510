"""The crossover of a speculative configuration on one load axis: the interval (lo, hi] where its speedup over
the matched baseline falls below 1, from the non-noisy points, with a log-linear estimate inside it."""

from __future__ import annotations

import math
from typing import TypedDict

from specbench_tui.core.crossover.results import (
    ALWAYS_PAYS,
    CROSSES,
    NEVER_PAYS,
    NOT_MONOTONIC,
    UNDETERMINED,
    Crossover,
    Evidence,
    PointRow,
)
from specbench_tui.core.load import parse_label
from specbench_tui.core.results import ConfigSummary


class _Base(TypedDict):
    """The fields every :class:`Crossover` of one configuration, workload and axis shares."""

    config_id: str
    config: str
    workload: str
    axis: str
    measured: int
    grid: int
    evidence: tuple[Evidence, ...]


def is_usable(row: PointRow | None) -> bool:
    return row is not None and row.speedup is not None and not row.noisy


def crossover_of(config: ConfigSummary, workload: str, axis: str, grid: list[str], pts: list[PointRow | None],
                 values: list[float] | None = None) -> Crossover:
    """``values``: the grid's positions on the axis (default: read from load labels; the context ladder passes
    its rungs' token counts)."""
    values = values if values is not None else [parse_label(label)[1] for label in grid]
    evidence = tuple(Evidence(p.load, p.value, p.speedup.median if p.speedup else None, p.noisy)
                     for p in pts if p is not None)
    measured = sum(1 for p in pts if p is not None)
    usable = [(v, p.speedup.median) for v, p in zip(values, pts) if is_usable(p) and p is not None and p.speedup]
    base: _Base = {"config_id": config.id, "config": config.name, "workload": workload, "axis": axis, "measured": measured,
                "grid": len(grid), "evidence": evidence}
    if not usable:
        return Crossover(status=UNDETERMINED, low=None, high=None, estimate=None,
                         note="no load point with a speedup that is not noisy", **base)
    loses = [v for v, s in usable if s < 1.0]
    if not loses:
        return _never_under(values, usable, base)
    return _under_at(values, usable, min(loses), base)


def _never_under(values: list[float], usable: list[tuple[float, float]], base: _Base) -> Crossover:
    """No usable point is under 1: it always pays when the highest load is one of them."""
    top = max(v for v, _ in usable)
    status = ALWAYS_PAYS if top == values[-1] else UNDETERMINED
    note = (f"{dict(usable)[top]:.2f}× at the highest load point" if status == ALWAYS_PAYS
            else "no usable point under 1, and the highest load point is not usable")
    return Crossover(status=status, low=top, high=None, estimate=None, note=note, **base)


def _under_at(values: list[float], usable: list[tuple[float, float]], hi: float, base: _Base) -> Crossover:
    """``hi`` is the lowest usable load under 1: not monotonic when a higher one pays again, never paying when it
    is the lowest load, else a crossing below it (bracketed by the highest paying point under it, if any)."""
    pays = [(v, s) for v, s in usable if s >= 1.0 and v < hi]
    back = [v for v, s in usable if v > hi and s >= 1.0]
    if back:  # under 1 at hi, then back above it: no single B* (whatever the ends say)
        under = [v for v, s in usable if s < 1.0]
        return Crossover(status=NOT_MONOTONIC, low=max(pays)[0] if pays else None, high=hi, estimate=None,
                         note=f"under 1 at {_span(under)}, back above 1 at {_span(back)}: more than one crossing",
                         **base)
    if hi == values[0]:
        return Crossover(status=NEVER_PAYS, low=None, high=hi, estimate=None,
                         note=f"{dict(usable)[hi]:.2f}× at the lowest load: every higher load is dominated", **base)
    if not pays:
        return Crossover(status=CROSSES, low=None, high=hi, estimate=None,
                         note="no usable point at or above 1 below this one", **base)
    lo, s_lo = max(pays)
    est = log_root(lo, s_lo, hi, dict(usable)[hi])
    inside = [v for v in values if lo < v < hi]
    note = f"{len(inside)} grid point(s) inside not measured or noisy" if inside else ""
    return Crossover(status=CROSSES, low=lo, high=hi, estimate=est, note=note, **base)


def _span(values: list[float]) -> str:
    """``3`` or ``3–40`` (the lowest and highest of ``values``)."""
    low, high = min(values), max(values)
    return f"{low:g}" if low == high else f"{low:g}–{high:g}"


def log_root(lo: float, s_lo: float, hi: float, s_hi: float) -> float | None:
    if s_lo == s_hi or lo <= 0 or hi <= 0:
        return None
    t = (s_lo - 1.0) / (s_lo - s_hi)
    return math.exp(math.log(lo) + t * (math.log(hi) - math.log(lo)))
