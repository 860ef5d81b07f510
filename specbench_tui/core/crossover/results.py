"""What the load analysis produces, as frozen data every view reads: one :class:`PointRow` per configuration ×
workload × load point, a :class:`Crossover` per speculative configuration and load axis, a
:class:`ScheduleEntry` per load point, all in one :class:`LoadAnalysis`; and the load workloads of a plan."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from specbench_tui.core.crossover.stats import Pcts, Stat
from specbench_tui.core.load import AXIS_CONCURRENCY, LoadSpec

NEVER_PAYS = "never_pays"
ALWAYS_PAYS = "always_pays"
CROSSES = "crosses"
UNDETERMINED = "undetermined"
NOT_MONOTONIC = "not_monotonic"
"""The speedup falls under 1 and comes back above it at a higher load: more than one crossing, so no single B*."""

ONE_CROSSING = "assumes one crossing"
"""What a verdict from fewer points than the grid rests on: the speedup crosses 1 at most once along the axis."""


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
    starved: str | None = None
    """Why the measuring client was starved at this point (then also noisy, with this as its noise)."""
    running_cap: int | None = None
    """The server's running-request cap its measurements recorded (the smallest, if it changed)."""
    capped: str | None = None
    """``capped (64 in flight, cap 48)`` when the point sends more requests at once than the server runs: the
    rest queue on the server, so the point measures the cap, not the configuration."""
    spec_steps: tuple[int, ...] | None = None
    """An adaptive server's candidate speculative steps at the batch sizes it ran (None: not adaptive)."""
    speculation: str | None = None
    """An adaptive server's speculation at this point: ``on``, ``off`` (every step 0) or ``mixed``."""
    n_retracted: int = 0
    """Requests the server retracted (kept out of the latency percentiles)."""
    cache: str | None = None
    """The cache policy of its measurements (``cold``, ``warm``, ``mixed``; None: recorded before policies)."""
    from_memory: str | None = None
    """``repeats drafted from memory`` for a warm n-gram configuration."""
    graph_share: float | None = None
    """The share of the point's decode lines that ran a captured graph (``cuda graph: True``); None: not said."""
    eager_batches: tuple[int, ...] = ()
    """The batch sizes whose decode lines ran eager (``cuda graph: False``)."""

    @property
    def steps_text(self) -> str:
        """``steps 0,1`` / ``speculation off`` for an adaptive point, else ""."""
        if self.speculation == "off":
            return "speculation off (steps 0)"
        if self.spec_steps:
            return "steps " + ",".join(map(str, self.spec_steps))
        return ""


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
    """crosses, never_pays, always_pays, not_monotonic or undetermined."""
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
    capped: tuple[str, ...] = ()
    """The capped points it rests on (``eagle3 c64: capped (64 in flight, cap 48)``, its own or its baseline's)."""

    @property
    def interval_text(self) -> str:
        if self.status == NEVER_PAYS:
            return f"≤ {self.high:g}" if self.high is not None else "–"
        if self.status == ALWAYS_PAYS:
            return f"> {self.low:g}" if self.low is not None else "–"
        if self.status in (CROSSES, NOT_MONOTONIC) and self.high is not None:
            return f"({self.low:g}, {self.high:g}]" if self.low is not None else f"≤ {self.high:g}"
        return "?"

    @property
    def text(self) -> str:
        """As a reader reads it: ``(16, 24]  ≈19.7``, ``never pays (under 1 at 1)``, ``pays at every point``;
        ``[capped]`` after it when it rests on a point above a server's running cap (:attr:`capped_text` says
        which)."""
        return self._status_text + (" [capped]" if self.capped else "")

    @property
    def assumed(self) -> str:
        """``assumes one crossing: 3 of 12 points measured`` when the verdict rests on fewer points than the grid
        (the adaptive search), else ""."""
        if self.status == NOT_MONOTONIC or self.measured >= self.grid:
            return ""
        return f"{ONE_CROSSING}: {self.measured} of {self.grid} points measured"

    @property
    def _status_text(self) -> str:
        if self.status == NEVER_PAYS:
            return self._with_assumption("never pays", f"under 1 at {self.high:g}" if self.high is not None else "")
        if self.status == ALWAYS_PAYS:
            every = "pays at every measured point" if self.assumed else "pays at every point"
            return self._with_assumption(every, f"> {self.low:g}" if self.low is not None else "")
        if self.status == NOT_MONOTONIC:
            return f"not monotonic ({self.note})" if self.note else "not monotonic"
        if self.status == CROSSES:
            est = f"  ≈{self.estimate:.3g}" if self.estimate is not None else ""
            return f"{self.interval_text}{est}"
        return f"undetermined ({self.note})" if self.note else "undetermined"

    def _with_assumption(self, verdict: str, where: str) -> str:
        inside = "; ".join(part for part in (where, self.assumed) if part)
        return f"{verdict} ({inside})" if inside else verdict

    @property
    def capped_text(self) -> str:
        """``rests on capped points: eagle3 c64 capped (64 in flight, cap 48)``, or "" when none."""
        return ("rests on capped point" + ("s" if len(self.capped) > 1 else "") + ": " + "; ".join(self.capped)
                if self.capped else "")


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
    capped: tuple[tuple[str, str], ...] = ()
    """(configuration, ``capped (n in flight, cap c)``) of the candidates whose server capped this point: the
    choice then rests on a capped point."""
    held: str = ""
    """Why the previous point's choice was kept though another configuration's median is higher here (it is
    faster only within the repeat spread); "" when the fastest was chosen."""


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


def plan_workloads(plan_json: Mapping[str, object]) -> list[Mapping[str, object]]:
    """The workload tables of a run's plan (read back, never trusted: what is not a table is skipped)."""
    raw = plan_json.get("workloads")
    return [w for w in raw if isinstance(w, Mapping)] if isinstance(raw, list) else []


def load_workloads(plan_json: Mapping[str, object]) -> list[LoadWorkload]:
    out = []
    for raw in plan_workloads(plan_json):
        name = raw.get("name")
        if isinstance(name, str):
            spec = LoadSpec.from_json(raw.get("load"))
            if spec is not None:
                out.append(LoadWorkload(name, spec))
    return out
