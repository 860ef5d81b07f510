"""Under load: figures per load point, the matched baseline per point, goodput, the crossover B*, the schedule,
and the adaptive search that decides which load points to measure next.

Pure, part of the single analysis (:func:`specbench_tui.core.analysis.analyse` calls :func:`analyse_load` and
keeps the result in ``RunAnalysis.load``); every view reads it from there.

Rules, and why:

- a load point's figures are taken per repeat (one repeat = the point's requests sent once, closed- or
  open-loop) and summarised over repeats: with ``repeats >= 3`` by the **median and the MAD** (median absolute
  deviation), otherwise by the median and the range. A point whose relative spread (MAD ÷ median) exceeds the
  workload's ``noise_threshold`` (default 0.1, vLLM's tuner's rule) is **noisy**: it is shown, flagged, and never
  decides a crossover or a schedule entry;
- total output tok/s = completion tokens of the repeat's ok requests ÷ the repeat's window (its first request
  starting to leave the client to its last answer read); per-user tok/s = the median request's decode tok/s; request throughput = ok
  requests ÷ window; TTFT, ITL (each request's p99 inter-token latency) and e2e as p50/p90/p99 over the
  point's ok requests; acceptance per request (verify-weighted) beside the server's own figure;
- **goodput** under the workload's SLO: requests that met every limit (TTFT ≤ ttft_ms, the request's p99 ITL
  ≤ itl_ms, e2e ≤ e2e_ms) per second of the window, and their output tok/s; the point *meets* the SLO when the
  SLO's percentile (p99 by default) of each figure over the point's requests is within its limit;
- the **speedup** at a load point pairs requests with the matched baseline *at the same workload and load
  point* (same request index, same repeat), exactly as at batch 1
  (:func:`specbench_tui.core.analysis.paired_speedup`); its noise is the spread of the per-repeat ratios;
- the **crossover** of a speculative configuration on a load axis is where its speedup falls below 1: the
  interval (lo, hi] between the highest non-noisy point still ≥ 1 below the first one under 1. ``never_pays``
  when the lowest point is already under 1, ``always_pays`` when the highest is still ≥ 1;
- the **schedule**: per load point, the configuration with the highest per-user tok/s among those measured there
  (noisy points, crashed configurations and lossy ones excluded), its margin over the runner-up, and whether
  that margin exceeds the repeat spread (1.4826 × the two MADs with ≥ 3 repeats, else the two ranges);
- the **adaptive search** (:func:`search_needs`): measure both ends of the axis; stop a configuration that is
  under 1 at the lowest point (every higher load is dominated) or still ≥ 1 at the highest; otherwise probe
  inside the bracket: with two points at the log-interpolated root, with three or more at both grid
  neighbours of the root of a fitted ``S(B) = (p + qB) / (1 + rB)`` (the speedup of two servers whose step times
  grow linearly in the batch is exactly this ratio), until the bracket's ends are neighbours on the grid. The
  matched baseline measures the union of its configurations' probes.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from specbench_tui.core.events import Event, LoadPointFinished
from specbench_tui.core.load import (
    AXIS_CONCURRENCY,
    AXIS_RATE,
    SEARCH_GRID,
    LoadSpec,
    Slo,
    parse_label,
)
from specbench_tui.core.metrics import percentile
from specbench_tui.core.records import STATUS_ERROR, STATUS_OK, STATUS_ZERO_OUTPUT, Measurement

MAD_SCALE = 1.4826
"""MAD × this estimates a normal standard deviation (vLLM's tune_speculative_k scores median − 1.4826·MAD)."""

NEVER_PAYS = "never_pays"
ALWAYS_PAYS = "always_pays"
CROSSES = "crosses"
UNDETERMINED = "undetermined"


@dataclass(frozen=True)
class Stat:
    """A figure over a point's repeats: median, MAD (≥ 3 repeats) and range."""

    median: float
    mad: float | None
    low: float
    high: float
    repeats: int

    @property
    def rel_spread(self) -> float | None:
        """MAD ÷ median (None with fewer than 3 repeats: no spread to judge)."""
        if self.mad is None or self.median == 0:
            return None
        return self.mad / abs(self.median)


def stat_of(values: Sequence[float]) -> Stat | None:
    vals = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if not vals:
        return None
    med = statistics.median(vals)
    mad = statistics.median(abs(v - med) for v in vals) if len(vals) >= 3 else None
    return Stat(med, mad, min(vals), max(vals), len(vals))


@dataclass(frozen=True)
class Pcts:
    p50: float | None
    p90: float | None
    p99: float | None


def _pcts(values: Sequence[float]) -> Pcts | None:
    vals = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if not vals:
        return None
    return Pcts(percentile(vals, 50), percentile(vals, 90), percentile(vals, 99))


@dataclass(frozen=True)
class PointRow:
    """One configuration × workload × load point."""

    config_id: str
    config: str
    workload: str
    load: str
    axis: str
    value: float
    n_ok: int
    n_error: int
    n_zero_output: int
    repeats: int
    """Repeats with at least one measurement."""
    complete: bool
    """Every repeat sent all of its requests (what the search counts as measured)."""
    output_tps: Stat | None = None
    per_user_tps: Stat | None = None
    request_tps: Stat | None = None
    ttft_s: Pcts | None = None
    itl_s: Pcts | None = None
    e2e_s: Pcts | None = None
    accept_length: float | None = None
    server_accept_length: float | None = None
    goodput_rps: float | None = None
    goodput_tps: float | None = None
    slo_attainment: float | None = None
    """Fraction of the point's ok requests that met every SLO limit."""
    meets_slo: bool | None = None
    speedup: Stat | None = None
    speedup_pairs: int = 0
    baseline: str | None = None
    noisy: bool = False
    noise: str | None = None
    """Why the point is noisy (or None)."""


@dataclass(frozen=True)
class Evidence:
    load: str
    value: float
    speedup: float | None
    noisy: bool


@dataclass(frozen=True)
class Crossover:
    """Where a speculative configuration's speedup over its matched baseline falls below 1 on one load axis."""

    config_id: str
    config: str
    workload: str
    axis: str
    status: str
    """crosses, never_pays, always_pays or undetermined."""
    low: float | None
    """B* > low (None: below the first point)."""
    high: float | None
    """B* ≤ high (None: beyond the last point)."""
    estimate: float | None
    """Log-linear interpolation of the speedup between ``low`` and ``high``."""
    measured: int
    grid: int
    evidence: tuple[Evidence, ...] = ()
    note: str = ""

    @property
    def interval_text(self) -> str:
        if self.status == NEVER_PAYS:
            return f"≤ {self.high:g}" if self.high is not None else "–"
        if self.status == ALWAYS_PAYS:
            return f"> {self.low:g}" if self.low is not None else "–"
        if self.status == CROSSES:
            return f"({self.low:g}, {self.high:g}]" if self.low is not None else f"≤ {self.high:g}"
        return "?"

    @property
    def text(self) -> str:
        """As a reader reads it: ``(16, 24]  ≈19.7``, ``never pays (under 1 at 1)``, ``pays at every point``."""
        if self.status == NEVER_PAYS:
            return f"never pays (under 1 at {self.high:g})" if self.high is not None else "never pays"
        if self.status == ALWAYS_PAYS:
            return f"pays at every point (> {self.low:g})" if self.low is not None else "pays at every point"
        if self.status == CROSSES:
            est = f"  ≈{self.estimate:.3g}" if self.estimate is not None else ""
            return f"{self.interval_text}{est}"
        return f"undetermined ({self.note})" if self.note else "undetermined"


@dataclass(frozen=True)
class ScheduleEntry:
    workload: str
    load: str
    axis: str
    value: float
    best: str | None
    best_tps: float | None
    runner_up: str | None
    runner_up_tps: float | None
    margin: float | None
    """best ÷ runner-up − 1."""
    significant: bool | None
    """Whether the margin exceeds the repeat spread (None: no runner-up)."""
    candidates: int
    excluded: tuple[tuple[str, str], ...] = ()
    """(configuration, why) left out at this point: noisy, crashed, lossy."""


@dataclass(frozen=True)
class LoadWorkload:
    name: str
    spec: LoadSpec


@dataclass(frozen=True)
class LoadAnalysis:
    workloads: tuple[LoadWorkload, ...] = ()
    points: tuple[PointRow, ...] = ()
    crossovers: tuple[Crossover, ...] = ()
    schedule: tuple[ScheduleEntry, ...] = ()
    points_measured: int = 0
    """(configuration, load point) pairs measured, over every load workload."""
    grid_points: int = 0
    """(configuration, load point) pairs of the full grid (runnable configurations × points)."""
    _rows: dict[tuple[str, str, str], PointRow] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._rows.update({(p.config_id, p.workload, p.load): p for p in self.points})

    def point(self, config_id: str, workload: str, load: str) -> PointRow | None:
        return self._rows.get((config_id, workload, load))

    def points_of(self, config_id: str, workload: str) -> list[PointRow]:
        return sorted((p for p in self.points if p.config_id == config_id and p.workload == workload),
                      key=lambda p: (p.axis != AXIS_CONCURRENCY, p.value))

    def crossover(self, config_id: str, workload: str, axis: str = AXIS_CONCURRENCY) -> Crossover | None:
        return next((c for c in self.crossovers
                     if c.config_id == config_id and c.workload == workload and c.axis == axis), None)

    @property
    def empty(self) -> bool:
        return not self.workloads


def load_workloads(plan_json: Mapping[str, Any]) -> list[LoadWorkload]:
    out = []
    for raw in plan_json.get("workloads", []) or []:
        if isinstance(raw, Mapping) and isinstance(raw.get("name"), str):
            spec = LoadSpec.from_json(raw.get("load"))
            if spec is not None:
                out.append(LoadWorkload(raw["name"], spec))
    return out


# ------------------------------------------------------------------------------------------------ the points


def _finite(v: Any) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _good(m: Measurement, slo: Slo) -> bool:
    itl = m.itl_p99_s if m.itl_p99_s is not None else m.itl_p95_s
    checks = ((slo.ttft_ms, m.ttft_s), (slo.itl_ms, itl), (slo.e2e_ms, m.e2e_s))
    for limit, value in checks:
        if limit is None:
            continue
        if value is None:
            if limit is slo.itl_ms and (m.completion_tokens or 0) <= 1:
                continue  # one token: no inter-token latency to judge
            return False
        if value * 1000.0 > limit:
            return False
    return True


def _wall(ms: list[Measurement], event: LoadPointFinished | None) -> float | None:
    """A repeat's window: its first request starting to leave the client to its last answer read (the requests'
    own clocks, so the client's connection set-up before the first byte is not the server's time); the runner's
    wall time of the point when the records lack times."""
    spans = [(m.started_at, m.started_at + m.e2e_s) for m in ms if _finite(m.started_at) and _finite(m.e2e_s)]
    if spans:
        wall = max(e for _, e in spans) - min(s for s, _ in spans)
        if wall > 0:
            return wall
    if event is not None and _finite(event.wall_s) and event.wall_s > 0:
        return float(event.wall_s)
    return None


def _point_row(config_id: str, config: str, workload: LoadWorkload, label: str, ms: list[Measurement],
               events: Mapping[int, LoadPointFinished], expected_per_repeat: int, repeats: int,
               accept_fn: Any) -> PointRow:
    axis, value = parse_label(label)
    ok = [m for m in ms if m.status == STATUS_OK]
    by_repeat: dict[int, list[Measurement]] = defaultdict(list)
    for m in ms:
        by_repeat[m.repeat].append(m)
    out_tps, user_tps, req_tps, good_rps, good_tps = [], [], [], [], []
    slo = workload.spec.slo
    for repeat, group in sorted(by_repeat.items()):
        rep_ok = [m for m in group if m.status == STATUS_OK]
        wall = _wall(group, events.get(repeat))
        decode = [float(m.decode_tps) for m in rep_ok if _finite(m.decode_tps)]
        if decode:
            user_tps.append(statistics.median(decode))
        if wall:
            out_tps.append(sum(m.completion_tokens or 0 for m in rep_ok) / wall)
            req_tps.append(len(rep_ok) / wall)
            if slo is not None:
                good = [m for m in rep_ok if _good(m, slo)]
                good_rps.append(len(good) / wall)
                good_tps.append(sum(m.completion_tokens or 0 for m in good) / wall)
    complete = len(by_repeat) >= repeats and all(len(g) >= expected_per_repeat for g in by_repeat.values())
    attainment = meets = None
    if slo is not None and ok:
        attainment = sum(1 for m in ok if _good(m, slo)) / len(ok)
        q = slo.percentile
        meets = True
        for limit, vals in ((slo.ttft_ms, [m.ttft_s for m in ok]),
                            (slo.itl_ms, [m.itl_p99_s if m.itl_p99_s is not None else m.itl_p95_s for m in ok]),
                            (slo.e2e_ms, [m.e2e_s for m in ok])):
            if limit is None:
                continue
            got = percentile([float(v) for v in vals if _finite(v)], q)
            if got is None or got * 1000.0 > limit:
                meets = False
    server = [float(e.server_log["accept_length"]) for e in events.values()
              if isinstance(e.server_log, dict) and _finite(e.server_log.get("accept_length"))]
    accept, _ = accept_fn(ok)
    per_user = stat_of(user_tps)
    noise = None
    if per_user is not None and per_user.rel_spread is not None and per_user.rel_spread > workload.spec.noise_threshold:
        noise = f"per-user tok/s MAD is {per_user.rel_spread:.0%} of its median"
    return PointRow(
        config_id=config_id, config=config, workload=workload.name, load=label, axis=axis, value=value,
        n_ok=len(ok), n_error=sum(1 for m in ms if m.status == STATUS_ERROR),
        n_zero_output=sum(1 for m in ms if m.status == STATUS_ZERO_OUTPUT), repeats=len(by_repeat),
        complete=complete, output_tps=stat_of(out_tps), per_user_tps=per_user, request_tps=stat_of(req_tps),
        ttft_s=_pcts([m.ttft_s for m in ok if _finite(m.ttft_s)]),
        itl_s=_pcts([float(v) for m in ok for v in [m.itl_p99_s if m.itl_p99_s is not None else m.itl_p95_s]
                     if _finite(v)]),
        e2e_s=_pcts([m.e2e_s for m in ok if _finite(m.e2e_s)]),
        accept_length=accept, server_accept_length=statistics.median(server) if server else None,
        goodput_rps=statistics.median(good_rps) if good_rps else None,
        goodput_tps=statistics.median(good_tps) if good_tps else None,
        slo_attainment=attainment, meets_slo=meets, noisy=noise is not None, noise=noise,
    )


def analyse_load(plan_json: Mapping[str, Any], measurements: Iterable[Measurement], events: Iterable[Event],
                 configs: Sequence[Any], lossy: Iterable[str] = ()) -> LoadAnalysis:
    """The load figures of a run. ``measurements``: one per key (as the analysis keeps them); ``configs``: the
    analysis' :class:`~specbench_tui.core.analysis.ConfigSummary` list; ``lossy``: names of configurations
    whose outputs differ from their baseline's (barred from the schedule)."""
    from specbench_tui.core.analysis import FAILED_STATES, acceptance, paired_speedup

    workloads = load_workloads(plan_json)
    if not workloads:
        return LoadAnalysis()
    names = {w.name: w for w in workloads}
    cells: dict[tuple[str, str, str], list[Measurement]] = defaultdict(list)
    for m in measurements:
        if m.workload in names:
            cells[(m.config_id, m.workload, m.load or "c1")].append(m)
    finished: dict[tuple[str, str, str], dict[int, LoadPointFinished]] = defaultdict(dict)
    for e in events:
        if isinstance(e, LoadPointFinished):
            finished[(e.config_id, e.workload, e.load)][e.repeat] = e
    items_of = {str(w.get("name")): w for w in plan_json.get("workloads", []) if isinstance(w, Mapping)}
    by_name = {c.name: c for c in configs}
    rows: list[PointRow] = []
    for config in configs:
        for workload in workloads:
            repeats = items_of.get(workload.name, {}).get("repeats")
            repeats = repeats if isinstance(repeats, int) and repeats > 0 else 1
            for label in workload.spec.points():
                ms = cells.get((config.id, workload.name, label))
                if not ms:
                    continue
                rows.append(_point_row(config.id, config.name, workload, label, ms,
                                       finished.get((config.id, workload.name, label), {}),
                                       workload.spec.requests_at(label), repeats, acceptance))
    by_key = {(r.config_id, r.workload, r.load): r for r in rows}
    # the matched baseline at the same workload and load point
    final: list[PointRow] = []
    for row in rows:
        config = next(c for c in configs if c.id == row.config_id)
        base = by_name.get(config.baseline) if config.baseline else None
        if base is None or not config.speculative:
            final.append(row)
            continue
        base_row = by_key.get((base.id, row.workload, row.load))
        mine = [m for m in cells[(row.config_id, row.workload, row.load)] if m.status == STATUS_OK]
        theirs = [m for m in cells.get((base.id, row.workload, row.load), []) if m.status == STATUS_OK]
        central, ratios, pairs = paired_speedup(mine, theirs)
        speed = None
        if central is not None:
            s = stat_of(ratios) or Stat(central, None, central, central, 0)
            speed = Stat(central, s.mad, min(s.low, central), max(s.high, central), s.repeats)
        noise = row.noise
        threshold = names[row.workload].spec.noise_threshold
        if noise is None and speed is not None and speed.rel_spread is not None and speed.rel_spread > threshold:
            noise = f"speedup MAD is {speed.rel_spread:.0%} of its median"
        if noise is None and base_row is not None and base_row.noisy:
            noise = f"the baseline's point is noisy ({base_row.noise})"
        final.append(_with(row, speedup=speed, speedup_pairs=pairs, baseline=base.name, noisy=noise is not None,
                           noise=noise))
    crossovers: list[Crossover] = []
    final_by = {(r.config_id, r.workload, r.load): r for r in final}
    for config in configs:
        if not config.speculative or not config.baseline or config.baseline not in by_name:
            continue
        for workload in workloads:
            for axis in (AXIS_CONCURRENCY, AXIS_RATE):
                grid = workload.spec.axis_points(axis)
                if not grid:
                    continue
                pts = [final_by.get((config.id, workload.name, label)) for label in grid]
                crossovers.append(_crossover(config, workload.name, axis, grid, pts))
    runnable = [c for c in configs if getattr(c, "in_plan", True) and c.state != "skipped"]
    grid_points = len(runnable) * sum(len(w.spec.points()) for w in workloads)
    lossy_set = set(lossy)
    schedule = [_schedule_entry(workload.name, label, [final_by[k] for k in final_by if k[1] == workload.name
                                                        and k[2] == label], configs, FAILED_STATES, lossy_set)
                for workload in workloads for label in workload.spec.points()
                if any(k[1] == workload.name and k[2] == label for k in final_by)]
    return LoadAnalysis(workloads=tuple(workloads), points=tuple(final), crossovers=tuple(crossovers),
                        schedule=tuple(schedule), points_measured=len(final), grid_points=grid_points)


def _with(row: PointRow, **changes: Any) -> PointRow:
    data = {name: getattr(row, name) for name in row.__dataclass_fields__}
    data.update(changes)
    return PointRow(**data)


def _usable(row: PointRow | None) -> bool:
    return row is not None and row.speedup is not None and not row.noisy


def _crossover(config: Any, workload: str, axis: str, grid: list[str], pts: list[PointRow | None]) -> Crossover:
    values = [parse_label(label)[1] for label in grid]
    evidence = tuple(Evidence(p.load, p.value, p.speedup.median if p.speedup else None, p.noisy)
                     for p in pts if p is not None)
    measured = sum(1 for p in pts if p is not None)
    usable = [(v, p.speedup.median) for v, p in zip(values, pts) if _usable(p) and p is not None and p.speedup]
    base = {"config_id": config.id, "config": config.name, "workload": workload, "axis": axis, "measured": measured,
                "grid": len(grid), "evidence": evidence}
    if not usable:
        return Crossover(status=UNDETERMINED, low=None, high=None, estimate=None,
                         note="no load point with a speedup that is not noisy", **base)
    loses = [v for v, s in usable if s < 1.0]
    hi = min(loses) if loses else None
    pays = [(v, s) for v, s in usable if s >= 1.0 and (hi is None or v < hi)]
    if hi is not None and hi == values[0]:
        s0 = dict(usable)[hi]
        return Crossover(status=NEVER_PAYS, low=None, high=hi, estimate=None,
                         note=f"{s0:.2f}× at the lowest load: every higher load is dominated", **base)
    if hi is None:
        top = max(v for v, _ in usable)
        status = ALWAYS_PAYS if top == values[-1] else UNDETERMINED
        note = (f"{dict(usable)[top]:.2f}× at the highest load point" if status == ALWAYS_PAYS
                else "no usable point under 1, and the highest load point is not usable")
        return Crossover(status=status, low=top, high=None, estimate=None, note=note, **base)
    if not pays:
        return Crossover(status=CROSSES, low=None, high=hi, estimate=None,
                         note="no usable point at or above 1 below this one", **base)
    lo, s_lo = max(pays)
    s_hi = dict(usable)[hi]
    est = _log_root(lo, s_lo, hi, s_hi)
    inside = [v for v in values if lo < v < hi]
    note = f"{len(inside)} grid point(s) inside not measured or noisy" if inside else ""
    nonmono = [v for v, s in usable if v > hi and s >= 1.0]
    if nonmono:
        note = (note + "; " if note else "") + f"speedup back above 1 at {nonmono[0]:g} (not monotone)"
    return Crossover(status=CROSSES, low=lo, high=hi, estimate=est, note=note, **base)


def _log_root(lo: float, s_lo: float, hi: float, s_hi: float) -> float | None:
    if s_lo == s_hi or lo <= 0 or hi <= 0:
        return None
    t = (s_lo - 1.0) / (s_lo - s_hi)
    return math.exp(math.log(lo) + t * (math.log(hi) - math.log(lo)))


def _schedule_entry(workload: str, label: str, rows: list[PointRow], configs: Sequence[Any],
                    failed_states: frozenset[str], lossy: set[str]) -> ScheduleEntry:
    axis, value = parse_label(label)
    states = {c.id: c.state for c in configs}
    excluded: list[tuple[str, str]] = []
    candidates = []
    for row in rows:
        if row.per_user_tps is None:
            continue
        if states.get(row.config_id) in failed_states:
            excluded.append((row.config, str(states.get(row.config_id))))
        elif row.config in lossy:
            excluded.append((row.config, "outputs differ from the baseline's"))
        elif row.noisy:
            excluded.append((row.config, f"noisy: {row.noise}"))
        else:
            candidates.append(row)
    candidates.sort(key=lambda r: -(r.per_user_tps.median if r.per_user_tps else 0.0))
    if not candidates:
        return ScheduleEntry(workload, label, axis, value, None, None, None, None, None, None, 0, tuple(excluded))
    best = candidates[0]
    assert best.per_user_tps is not None
    if len(candidates) == 1:
        return ScheduleEntry(workload, label, axis, value, best.config, best.per_user_tps.median, None, None, None,
                             None, 1, tuple(excluded))
    second = candidates[1]
    assert second.per_user_tps is not None
    b, r = best.per_user_tps, second.per_user_tps
    margin = b.median / r.median - 1.0 if r.median > 0 else None
    if b.mad is not None and r.mad is not None:
        significant = (b.median - r.median) > MAD_SCALE * (b.mad + r.mad)
    else:
        significant = b.low > r.high
    return ScheduleEntry(workload, label, axis, value, best.config, b.median, second.config, r.median, margin,
                         significant, len(candidates), tuple(excluded))


# ------------------------------------------------------------------------------------------ adaptive search


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
    """Load values to measure next on one axis for one configuration, and why (empty: the search is done)."""
    ends = [values[0], values[-1]]
    missing = [v for v in ends if v not in measured]
    if missing:
        return missing, "the ends of the load axis"
    loses = [v for v, s in usable.items() if s < 1.0]
    hi = min(loses) if loses else None
    if hi is not None and hi == values[0]:
        return [], "dominated: under 1 at the lowest load"
    pays = [v for v, s in usable.items() if s >= 1.0 and (hi is None or v < hi)]
    lo = max(pays) if pays else None
    if hi is None and lo == values[-1]:
        return [], "pays at the highest load"
    low_v = lo if lo is not None else -math.inf
    high_v = hi if hi is not None else math.inf
    candidates = [v for v in values if low_v < v < high_v and v not in measured]
    if not candidates:
        return [], "bracketed"
    guess = None
    pts = sorted(usable.items())
    if len(pts) >= 3:
        guess = _fit_root(pts)
    if guess is not None and lo is not None and hi is not None and lo < guess <= hi:
        below = [v for v in values if v < guess]
        above = [v for v in values if v >= guess]
        pair = [v for v in (below[-1] if below else None, above[0] if above else None)
                if v is not None and v in candidates]
        if pair:
            return pair, f"both neighbours of the fitted root {guess:.3g}"
    if lo is not None and hi is not None:
        guess = _log_root(lo, usable[lo], hi, usable[hi])
    if guess is None:
        guess = math.sqrt(max(candidates[0], 1e-9) * candidates[-1])
    best = min(candidates, key=lambda v: abs(math.log(v) - math.log(max(guess, 1e-9))))
    return [best], f"nearest the interpolated root {guess:.3g}"


@dataclass(frozen=True)
class SearchStep:
    needs: dict[str, dict[str, tuple[str, ...]]]
    """config id → workload → load labels it must have measured (done ones included)."""
    reasons: tuple[str, ...] = ()


def search_needs(load: LoadAnalysis, configs: Sequence[Any]) -> SearchStep:
    """Which load points each configuration must have measured now, given what is measured so far. A
    configuration whose needs are all measured has nothing to run; the sweep is done when none has."""
    by_name = {c.name: c for c in configs}
    needs: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    reasons: list[str] = []
    dependents: dict[str, list[Any]] = defaultdict(list)
    for c in configs:
        if c.speculative and c.baseline in by_name:
            dependents[by_name[c.baseline].id].append(c)
    for workload in load.workloads:
        spec = workload.spec
        for config in configs:
            is_searched = config.speculative and config.baseline in by_name and spec.search != SEARCH_GRID
            if spec.search == SEARCH_GRID or (not is_searched and not dependents.get(config.id)):
                needs[config.id][workload.name].update(spec.points())
                continue
            if not is_searched:
                continue
            base = by_name[config.baseline]
            for axis in (AXIS_CONCURRENCY, AXIS_RATE):
                grid = spec.axis_points(axis)
                if not grid:
                    continue
                values = [parse_label(g)[1] for g in grid]
                label_of = dict(zip(values, grid))
                measured = set()
                usable: dict[float, float] = {}
                for v, label in zip(values, grid):
                    mine = load.point(config.id, workload.name, label)
                    theirs = load.point(base.id, workload.name, label)
                    if mine is not None and theirs is not None and mine.complete and theirs.complete:
                        measured.add(v)
                        if _usable(mine) and mine.speedup is not None:
                            usable[v] = mine.speedup.median
                probes, why = _probes(values, usable, measured)
                chosen = {label_of[v] for v in probes} | {label_of[v] for v in measured}
                needs[config.id][workload.name].update(chosen)
                needs[base.id][workload.name].update(chosen)
                if probes:
                    reasons.append(f"{config.name} {workload.name}: {', '.join(label_of[v] for v in probes)} ({why})")
    return SearchStep({cid: {w: tuple(sorted(v, key=_label_order)) for w, v in ws.items()}
                       for cid, ws in needs.items()}, tuple(reasons))


def _label_order(label: str) -> tuple[int, float]:
    axis, value = parse_label(label)
    return (0 if axis == AXIS_CONCURRENCY else 1, value)
