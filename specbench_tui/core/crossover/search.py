"""The adaptive search: which load points each configuration must have measured now, given what is measured so
far: both ends of the axis first, then probes inside the bracket at the root of a fitted speedup curve (or of
the log-linear interpolation), until the bracket's ends are neighbours on the grid."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass


from specbench_tui.core.crossover.bracket import is_usable, log_root
from specbench_tui.core.crossover.results import LoadAnalysis
from specbench_tui.core.load import AXIS_CONCURRENCY, AXIS_RATE, SEARCH_GRID, parse_label
from specbench_tui.core.results import ConfigSummary


def _fit_root(points: list[tuple[float, float]]) -> float | None:
    """Root of S(B) = 1 for S(B) = (p + qB) / (1 + rB) fitted to ``points`` by least squares on
    p + qB − rSB = S (exact with three points)."""
    if len(points) < 3:
        return None
    rows = [(1.0, b, -s * b, s) for b, s in points]
    ata = [[sum(r[i] * r[j] for r in rows) for j in range(3)] for i in range(3)]
    atb = [sum(r[i] * r[3] for r in rows) for i in range(3)]
    sol = _solve3(ata, atb)
    if sol is None:
        return None
    p, q, r = sol
    if abs(q - r) < 1e-15:
        return None
    root = (1.0 - p) / (q - r)
    return root if math.isfinite(root) and root > 0 else None


def _solve3(a: list[list[float]], b: list[float]) -> tuple[float, float, float] | None:
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for col in range(3):
        pivot = max(range(col, 3), key=lambda i: abs(m[i][col]))
        if abs(m[pivot][col]) < 1e-18:
            return None
        m[col], m[pivot] = m[pivot], m[col]
        for i in range(3):
            if i != col:
                f = m[i][col] / m[col][col]
                m[i] = [x - f * y for x, y in zip(m[i], m[col])]
    return m[0][3] / m[0][0], m[1][3] / m[1][1], m[2][3] / m[2][2]


def _probes(values: list[float], usable: dict[float, float], measured: set[float]) -> tuple[list[float], str]:
    """Load values to measure next on one axis for one configuration, and why (empty: the search is done).

    The bisection assumes one crossing (the speedup falls under 1 at most once along the axis); the search
    checks that assumption where it can: ends that agree (both pay, or both lose) get their geometric middle
    measured before a verdict, and points that disagree with it (a point under 1 below one that pays) have the
    whole gap between them measured, for a "not monotonic" verdict from the points themselves."""
    ends = [values[0], values[-1]]
    missing = [v for v in ends if v not in measured]
    if missing:
        return missing, "the ends of the load axis"
    dip = _dip_gap(values, usable, measured)
    if dip is not None:
        return dip
    lo, hi = _bracket(usable)
    if (hi is not None and hi == values[0]) or (hi is None and lo == values[-1]):
        return _ends_agree(values, measured, dominated=hi == values[0])
    candidates = _unmeasured_inside(values, measured, lo, hi)
    if not candidates:
        return [], "bracketed"
    pts = sorted(usable.items())
    guess = _fit_root(pts) if len(pts) >= 3 else None
    if guess is not None and lo is not None and hi is not None and lo < guess <= hi:
        pair = _neighbours(values, candidates, guess)
        if pair:
            return pair, f"both neighbours of the fitted root {guess:.3g}"
    return _interpolated(usable, candidates, lo, hi, guess)


def _ends_agree(values: list[float], measured: set[float], *, dominated: bool) -> tuple[list[float], str]:
    """Both ends lose (``dominated``) or both pay: the middle of the axis to check the one crossing assumed,
    then the verdict."""
    middle = _middle_check(values, measured)
    if middle is not None:
        return [middle], "the middle of the axis: checks the one crossing assumed, as both ends agree"
    return [], ("dominated: under 1 at the lowest load" if dominated else "pays at the highest load")


def _unmeasured_inside(values: list[float], measured: set[float], lo: float | None,
                       hi: float | None) -> list[float]:
    """The grid points strictly inside the bracket (an end that is None is open) not measured yet."""
    low_v = lo if lo is not None else -math.inf
    high_v = hi if hi is not None else math.inf
    return [v for v in values if low_v < v < high_v and v not in measured]


def _bracket(usable: dict[float, float]) -> tuple[float | None, float | None]:
    """The highest load that pays below the lowest that loses, and that lowest (None: none such)."""
    loses = [v for v, s in usable.items() if s < 1.0]
    hi = min(loses) if loses else None
    pays = [v for v, s in usable.items() if s >= 1.0 and (hi is None or v < hi)]
    return (max(pays) if pays else None), hi


def _neighbours(values: list[float], candidates: list[float], guess: float) -> list[float]:
    """The grid points either side of ``guess`` that are still to measure."""
    below = [v for v in values if v < guess]
    above = [v for v in values if v >= guess]
    return [v for v in (below[-1] if below else None, above[0] if above else None)
            if v is not None and v in candidates]


def _interpolated(usable: dict[float, float], candidates: list[float], lo: float | None, hi: float | None,
                  fitted: float | None) -> tuple[list[float], str]:
    """The candidate nearest the log-linear interpolation's root between the bracket's ends; with an end
    missing, nearest the ``fitted`` root, else the candidates' geometric middle."""
    guess = log_root(lo, usable[lo], hi, usable[hi]) if lo is not None and hi is not None else fitted
    if guess is None:
        guess = math.sqrt(max(candidates[0], 1e-9) * candidates[-1])
    best = min(candidates, key=lambda v: abs(math.log(v) - math.log(max(guess, 1e-9))))
    return [best], f"nearest the interpolated root {guess:.3g} (assumes one crossing)"


def _dip_gap(values: list[float], usable: dict[float, float],
             measured: set[float]) -> tuple[list[float], str] | None:
    """When a point under 1 lies below a point that pays (the speedup dips and comes back: more than one
    crossing), every grid point not yet measured between the last paying point below the dip and the highest
    paying point above it, and why; None when the points measured agree with one crossing."""
    loses = [v for v, s in usable.items() if s < 1.0]
    if not loses:
        return None
    back = [v for v, s in usable.items() if s >= 1.0 and v > min(loses)]
    if not back:
        return None
    below = [v for v, s in usable.items() if s >= 1.0 and v < min(loses)]
    start, stop = (max(below) if below else values[0]), max(back)
    gap = [v for v in values if start < v < stop and v not in measured]
    return gap, (f"not monotonic: under 1 at {min(loses):g}, above 1 again at {max(back):g}; measuring the gap"
                 if gap else "not monotonic: the gap is measured")


def _middle_check(values: list[float], measured: set[float]) -> float | None:
    """The grid point nearest the geometric middle of the axis, when no point inside the axis is measured yet
    (None: one is, or the axis has no inside)."""
    inside = values[1:-1]
    if not inside or any(v in measured for v in inside):
        return None
    middle = math.sqrt(max(values[0], 1e-9) * values[-1])
    return min(inside, key=lambda v: abs(math.log(max(v, 1e-9)) - math.log(middle)))


@dataclass(frozen=True)
class SearchStep:
    needs: dict[str, dict[str, tuple[str, ...]]]
    """config id → workload → load labels it must have measured (done ones included)."""
    reasons: tuple[str, ...] = ()


def search_needs(load: LoadAnalysis, configs: Sequence[ConfigSummary]) -> SearchStep:
    """Which load points each configuration must have measured now, given what is measured so far. A
    configuration whose needs are all measured has nothing to run; the sweep is done when none has."""
    by_name: dict[str | None, ConfigSummary] = {c.name: c for c in configs}
    needs: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    reasons: list[str] = []
    dependents: dict[str, list[ConfigSummary]] = defaultdict(list)
    for c in configs:
        if c.speculative and c.baseline in by_name:
            dependents[by_name[c.baseline].id].append(c)
    for workload in load.workloads:
        spec = workload.spec
        for config in configs:
            is_searched = config.speculative and config.baseline in by_name and spec.search != SEARCH_GRID
            if spec.search == SEARCH_GRID or (not is_searched and not dependents.get(config.id)):
                needs[config.id][workload.name].update(spec.points())
            elif is_searched:
                base = by_name[config.baseline]
                for axis in (AXIS_CONCURRENCY, AXIS_RATE):
                    grid = spec.axis_points(axis)
                    if not grid:
                        continue
                    chosen, probes, why = _axis_step(load, config.id, base.id, workload.name, grid)
                    needs[config.id][workload.name].update(chosen)
                    needs[base.id][workload.name].update(chosen)
                    if probes:
                        reasons.append(f"{config.name} {workload.name}: {', '.join(probes)} ({why})")
    return SearchStep({cid: {w: tuple(sorted(v, key=_label_order)) for w, v in ws.items()}
                       for cid, ws in needs.items()}, tuple(reasons))


def _axis_step(load: LoadAnalysis, config_id: str, base_id: str, workload: str,
               grid: Sequence[str]) -> tuple[set[str], list[str], str]:
    """On one axis of a searched configuration: the labels both it and its baseline must have measured (what
    both have, and the probes next), the probes, and why those."""
    values = [parse_label(g)[1] for g in grid]
    label_of = dict(zip(values, grid))
    measured = set()
    usable: dict[float, float] = {}
    for v, label in zip(values, grid):
        mine = load.point(config_id, workload, label)
        theirs = load.point(base_id, workload, label)
        if mine is not None and theirs is not None and mine.complete and theirs.complete:
            measured.add(v)
            if is_usable(mine) and mine.speedup is not None:
                usable[v] = mine.speedup.median
    probes, why = _probes(values, usable, measured)
    return {label_of[v] for v in probes} | {label_of[v] for v in measured}, [label_of[v] for v in probes], why


def _label_order(label: str) -> tuple[int, float]:
    axis, value = parse_label(label)
    return (0 if axis == AXIS_CONCURRENCY else 1, value)
