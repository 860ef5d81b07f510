"""Bootstrap confidence intervals on a run's speedups and acceptance, computed with ``scipy.stats.bootstrap``.

Per configuration × workload cell (the sequential cells of :mod:`specbench_tui.core.analysis`):

- **speedup**: the paired speedup (median decode tok/s over the (item, repeat) pairs both the configuration and
  its matched baseline measured ok, over the baseline's median on the same pairs,
  :func:`specbench_tui.core.cells.paired_speedup`). The unit resampled is the *pair*: each resample draws
  pairs with replacement and keeps both sides of a pair together (``paired=True``), so the interval carries the
  pairing the figure rests on. Resampling the two sides independently would throw away that an item that is
  slow for one configuration is slow for its baseline too;
- **acceptance length** (the results table's ``accept len``: per-request acceptance weighted by verify steps),
  the client's **acceptance length** (Σ completion tokens ÷ Σ verify steps) and the **draft acceptance rate**
  (Σ accepted ÷ Σ proposed drafts): ratios of sums over the cell's ok requests; the unit is the request, its
  numerator and denominator resampled together. Figures over the same requests (a cell's usually are) come from
  one call that resamples the requests once for all of them (seeded by the cell and ``acceptance``).

Fixed choices, each stated in every report and in the JSON:

- confidence level :data:`LEVEL` (95 %), :data:`N_RESAMPLES` resamples;
- method :data:`METHOD` (the percentile bootstrap). Not BCa: the speedup is a ratio of *medians*, and BCa's
  acceleration comes from a jackknife, which is not consistent for a median (deleting one value moves a median
  between two neighbours only), while ties among the resampled medians bias its bias correction. The percentile
  interval needs neither, stays inside the values a resample can take, and costs no jackknife; the acceptance
  figures use the same method so that every ± of a report means the same thing;
- deterministic: each interval draws from its own ``numpy.random.Generator`` seeded with :data:`SEED` and a CRC-32
  of (configuration id, workload, figure) (:func:`seed_for`), so a report is the same every time it is made, a
  cell's interval does not move when another configuration is added, and a test can hold the numbers.

No interval (``Interval.why`` says why, every view shows it as such, nothing warns): fewer than
:data:`MIN_UNITS` units (a bootstrap of 4 values has 35 distinct resamples, and its 2.5 and 97.5 percentiles are
its extremes), no variation over the units (every resample gives the same figure), or a figure that is not finite.

``scipy`` (and ``numpy``) are imported when the first interval is computed, never by ``specbench --help``, the TUI
or :mod:`specbench_tui.core.analysis`; the report's loader adds the intervals to the analysis
(:func:`with_intervals`). Pure: no I/O.
"""

from __future__ import annotations

import math
import warnings
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeGuard

from specbench_tui.core.acceptance import CellAcceptance
from specbench_tui.core.fold import last_per_key
from specbench_tui.core.records import STATUS_OK, Measurement
from specbench_tui.core.results import ACCEPT_FROM_SERVER, CellRow, RunAnalysis

if TYPE_CHECKING:  # numpy is imported when the first interval is computed
    import numpy as np
    import numpy.typing as npt

    Floats = npt.NDArray[np.float64]

LEVEL = 0.95
METHOD = "percentile"
N_RESAMPLES = 2000
"""Enough for the 2.5 and 97.5 percentiles to sit on 50 resamples each (Efron and Tibshirani suggest 1000-2000
for percentile intervals). The cost grows with resamples × units: about 40 ms of CPU for a cell of 195 pairs
(bench/bench_analysis.py: 9-11 s for the 252 cells of 50k measurements on a loaded 2-core box)."""
SEED = 27
MAX_BATCH_VALUES = 4_000_000
"""Resampled values drawn at once per array (resamples × units, 32 MB of floats): a cell of 100,000 requests
(MAX_REQUESTS) is resampled 40 resamples at a time instead of all 2000 at once (1.6 GB an array)."""
MIN_UNITS = 5

SPEEDUP_UNIT = "(item, repeat) pair measured ok by the configuration and its baseline"
REQUEST_UNIT = "ok request"


@dataclass(frozen=True)
class Interval:
    """A figure with its bootstrap interval, or the figure and why it has none (``low`` and ``high`` None)."""

    estimate: float
    low: float | None
    high: float | None
    n: int
    """Units resampled (pairs for a speedup, requests for acceptance)."""
    why: str | None = None
    level: float = LEVEL
    method: str = METHOD

    @property
    def ok(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def minus(self) -> float:
        return self.estimate - self.low if self.low is not None else math.nan

    @property
    def plus(self) -> float:
        return self.high - self.estimate if self.high is not None else math.nan


@dataclass(frozen=True)
class CellIntervals:
    """The intervals of one configuration × workload (None: the cell has no such figure)."""

    config_id: str
    workload: str
    speedup: Interval | None = None
    accept_length: Interval | None = None
    """On the results table's acceptance length (per-request, weighted by verify steps)."""
    acceptance_length: Interval | None = None
    """On the client's acceptance length (Σ completion tokens ÷ Σ verify steps)."""
    draft_acceptance_rate: Interval | None = None


@dataclass(frozen=True)
class IntervalAnalysis:
    """Every cell's intervals, with how they were computed."""

    level: float = LEVEL
    method: str = METHOD
    n_resamples: int = N_RESAMPLES
    seed: int = SEED
    min_units: int = MIN_UNITS
    speedup_unit: str = SPEEDUP_UNIT
    acceptance_unit: str = REQUEST_UNIT
    cells: tuple[CellIntervals, ...] = ()
    _by_key: dict[tuple[str, str], CellIntervals] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_key.update({(c.config_id, c.workload): c for c in self.cells})

    def cell(self, config_id: str, workload: str) -> CellIntervals | None:
        return self._by_key.get((config_id, workload))

    @property
    def described(self) -> str:
        """One line for a report: ``±: 95% bootstrap interval (percentile, 2000 resamples, seed 27) ...``."""
        return (f"±: {self.level:.0%} bootstrap confidence interval ({self.method}, {self.n_resamples} resamples, "
                f"seed {self.seed}; scipy.stats.bootstrap) of the speedup, resampling the {self.speedup_unit}s, "
                f"and of acceptance, resampling {self.acceptance_unit}s; 'n<{self.min_units}': too few units for "
                "an interval, '±0': no variation")


# ---------------------------------------------------------------------------------------------- the bootstrap


def seed_for(*key: str) -> list[int]:
    """The seed of one interval's generator: :data:`SEED` and a CRC-32 of its key (stable across processes,
    unlike ``hash``)."""
    return [SEED, zlib.crc32("\0".join(key).encode("utf-8"))]


Statistic = Callable[..., "Floats"]


def _median(values: Floats, axis: int) -> Floats:
    """``numpy.median`` along ``axis`` (the same values: the middle one, or the mean of the middle two), from one
    ``numpy.partition`` instead of its general path: a quarter of the cost on 2000 resamples."""
    import numpy as np

    n = values.shape[axis]
    half = n // 2
    if n % 2:
        middle: Floats = np.take(np.partition(values, half, axis=axis), half, axis=axis)
        return middle
    parted = np.partition(values, (half - 1, half), axis=axis)
    mean: Floats = (np.take(parted, half - 1, axis=axis) + np.take(parted, half, axis=axis)) / 2
    return mean


def _median_ratio(x: Floats, y: Floats, axis: int = -1) -> Floats:
    return _median(x, axis) / _median(y, axis)


def _sum_ratio(x: Floats, y: Floats, axis: int = -1) -> Floats:
    ratio: Floats = x.sum(axis=axis) / y.sum(axis=axis)
    return ratio


def _sum_ratios(*arrays: Floats, axis: int = -1) -> Floats:
    """Σ numerator ÷ Σ denominator of each (numerator, denominator) pair of ``arrays``, stacked: the figures of
    one set of units, resampled with the same draws."""
    import numpy as np

    return np.stack([arrays[i].sum(axis=axis) / arrays[i + 1].sum(axis=axis) for i in range(0, len(arrays), 2)])


def _interval(estimate: float, low: float, high: float, n: int) -> Interval:
    if not math.isfinite(estimate):
        return Interval(estimate, None, None, n, "the figure is not finite")
    if not (math.isfinite(low) and math.isfinite(high)):
        return Interval(estimate, None, None, n, "a resample's figure is not finite")
    if high - low <= 1e-12 * max(abs(estimate), 1.0):
        return Interval(estimate, estimate, estimate, n, "no variation")
    return Interval(estimate, low, high, n)


def bootstrap_many(estimates: Sequence[float], data: Sequence[Sequence[float]], statistic: Statistic,
                   key: Sequence[str]) -> list[Interval]:
    """The intervals of a ``statistic`` giving one figure per ``estimates`` (the figures the analysis shows) over
    paired samples ``data`` (equal lengths, resampled together: one draw of units serves every figure)."""
    n = len(data[0]) if data else 0
    if n < MIN_UNITS:
        return [Interval(e, None, None, n, f"n<{MIN_UNITS}") for e in estimates]
    import numpy as np
    from scipy.stats import bootstrap as scipy_bootstrap

    arrays = tuple(np.asarray(d, dtype=float) for d in data)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        result = scipy_bootstrap(arrays, statistic, paired=True, vectorized=True, n_resamples=N_RESAMPLES,
                                 batch=max(1, min(N_RESAMPLES, MAX_BATCH_VALUES // n)), confidence_level=LEVEL,
                                 method=METHOD, rng=np.random.default_rng(seed_for(*key)))
    lows = np.atleast_1d(result.confidence_interval.low)
    highs = np.atleast_1d(result.confidence_interval.high)
    return [_interval(e, float(low), float(high), n) for e, low, high in zip(estimates, lows, highs)]


def bootstrap(estimate: float, data: Sequence[Sequence[float]], statistic: Statistic, key: Sequence[str]) -> Interval:
    """The interval of ``statistic`` over paired samples ``data`` (equal lengths, resampled together), around the
    figure the analysis shows (``estimate``)."""
    return bootstrap_many([estimate], data, statistic, key)[0]


def paired_values(ok: Iterable[Measurement], base_ok: Iterable[Measurement]) -> tuple[list[float], list[float]]:
    """(this configuration's, its baseline's) decode tok/s over the (item, repeat) pairs both measured, in key
    order: the pairs :func:`~specbench_tui.core.cells.paired_speedup` divides."""
    mine = {(m.item, m.repeat): float(m.decode_tps) for m in ok if _finite(m.decode_tps)}
    theirs = {(m.item, m.repeat): float(m.decode_tps) for m in base_ok if _finite(m.decode_tps)}
    pairs = sorted(mine.keys() & theirs.keys())
    return [mine[k] for k in pairs], [theirs[k] for k in pairs]


def speedup_interval(estimate: float, ok: Iterable[Measurement], base_ok: Iterable[Measurement],
                     key: Sequence[str]) -> Interval:
    mine, theirs = paired_values(ok, base_ok)
    return bootstrap(estimate, (mine, theirs), _median_ratio, key)


def _finite(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# ---------------------------------------------------------------------------------------------- per cell


def _accept_parts(ok: Sequence[Measurement]) -> tuple[list[Measurement], list[float], list[float]]:
    """The row's acceptance as a ratio of sums (:func:`specbench_tui.core.cells.acceptance`): its requests, accept
    length × verify steps over verify steps, else the plain mean (accept length over 1)."""
    weighted = [m for m in ok if m.accept_length is not None and m.verify_ct is not None and m.verify_ct > 0]
    if weighted:
        return weighted, [float(m.accept_length or 0) * float(m.verify_ct or 0) for m in weighted], \
            [float(m.verify_ct or 0) for m in weighted]
    plain = [m for m in ok if m.accept_length is not None]
    return plain, [float(m.accept_length or 0) for m in plain], [1.0] * len(plain)


def cell_intervals(row: CellRow, ok: Sequence[Measurement], base_ok: Sequence[Measurement] | None,
                   acceptance: CellAcceptance | None = None) -> CellIntervals:
    """The intervals of one :class:`~specbench_tui.core.results.CellRow` from its ok measurements and its
    baseline's (None: no baseline); ``acceptance``: its :class:`~specbench_tui.core.acceptance.CellAcceptance`."""
    key = (row.config_id, row.workload)
    speedup = None
    if base_ok is not None and row.speedup is not None and row.speedup_note != "baseline":
        speedup = speedup_interval(row.speedup.median, ok, base_ok, (*key, "speedup"))
    figures: dict[str, _Ratio] = {}
    if row.accept_length is not None and row.accept_method != ACCEPT_FROM_SERVER:
        figures["accept_length"] = (row.accept_length, *_accept_parts(ok))
    if acceptance is not None:
        figures.update(_acceptance_ratios(ok, acceptance))
    found = _ratio_intervals(figures, key)
    return CellIntervals(row.config_id, row.workload, speedup, found.get("accept_length"),
                         found.get("acceptance_length"), found.get("draft_acceptance_rate"))


_Ratio = tuple[float, Sequence[Measurement], Sequence[float], Sequence[float]]
"""A ratio-of-sums figure: (its value, the requests it is over, their numerators, their denominators)."""


def _acceptance_ratios(ok: Sequence[Measurement], acceptance: CellAcceptance) -> dict[str, _Ratio]:
    """The cell's acceptance length (tokens per verify step) and draft acceptance rate as ratios of sums over the
    requests that count them, those the cell has."""
    figures: dict[str, _Ratio] = {}
    counted = [m for m in ok if m.verify_ct and m.completion_tokens]
    if acceptance.acceptance_length is not None:
        figures["acceptance_length"] = (acceptance.acceptance_length, counted,
                                        [float(m.completion_tokens or 0) for m in counted],
                                        [float(m.verify_ct or 0) for m in counted])
    drafts = [m for m in counted if m.correct_drafts is not None and m.proposed_drafts]
    if acceptance.draft_acceptance_rate is not None:
        figures["draft_acceptance_rate"] = (acceptance.draft_acceptance_rate, drafts,
                                            [float(m.correct_drafts or 0) for m in drafts],
                                            [float(m.proposed_drafts or 0) for m in drafts])
    return figures


def _ratio_intervals(figures: dict[str, _Ratio], key: tuple[str, str]) -> dict[str, Interval]:
    """The intervals of ratio-of-sums figures: those over the same requests (as a cell's figures usually are) from
    one bootstrap call, resampling the requests once for all of them; each of the others from its own."""
    units = {name: tuple(id(m) for m in f[1]) for name, f in figures.items()}
    shared = [name for name in figures if units[name] == next(iter(units.values()))]
    out: dict[str, Interval] = {}
    if len(shared) > 1:
        data = [column for name in shared for column in (figures[name][2], figures[name][3])]
        found = bootstrap_many([figures[name][0] for name in shared], data, _sum_ratios, (*key, "acceptance"))
        out.update(zip(shared, found))
    for name, (estimate, _units, numerators, denominators) in figures.items():
        if name not in out:
            out[name] = bootstrap(estimate, (numerators, denominators), _sum_ratio, (*key, name))
    return out


def analyse_intervals(analysis: RunAnalysis, measurements: Iterable[Measurement]) -> IntervalAnalysis:
    """Every measured sequential cell's intervals (rows in the analysis' order)."""
    loaded = {w.name for w in analysis.load.workloads} if analysis.load is not None else set()
    by_cell: dict[tuple[str, str], list[Measurement]] = defaultdict(list)
    for m in last_per_key(measurements):
        if m.status == STATUS_OK and m.load is None and m.workload not in loaded:
            by_cell[(m.config_id, m.workload)].append(m)
    ids = {c.name: c.id for c in analysis.configs}
    accept = analysis.acceptance
    cells = []
    for row in analysis.rows:
        ok = by_cell.get((row.config_id, row.workload), [])
        if not ok:
            continue
        config = analysis.config(row.config_id)
        base_id = ids.get(config.baseline) if config is not None and config.baseline else None
        base_ok = by_cell.get((base_id, row.workload), []) if base_id is not None else None
        cell = accept.cell(row.config_id, row.workload) if accept is not None else None
        cells.append(cell_intervals(row, ok, base_ok, cell))
    return IntervalAnalysis(cells=tuple(cells))


def with_intervals(analysis: RunAnalysis, measurements: Iterable[Measurement]) -> RunAnalysis:
    """``analysis`` with its intervals (``RunAnalysis.intervals``) computed from the run's ``measurements``."""
    fields_ = {name: getattr(analysis, name) for name in analysis.__dataclass_fields__ if not name.startswith("_")}
    return RunAnalysis(**{**fields_, "intervals": analyse_intervals(analysis, measurements)})
