"""What an analysis of one run holds (:class:`RunAnalysis` and its parts), the flags and words it uses, and the
figures derived from it (geometric means, plain JSON). :mod:`specbench_tui.core.analysis` builds one;
:mod:`specbench_tui.core.cells` computes each configuration × workload cell. Pure: no I/O, no Textual.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specbench_tui.core.acceptance import AcceptanceAnalysis
    from specbench_tui.core.crossover.results import LoadAnalysis, PointRow

IDLE_ACCEPTANCE = 1.05
"""Below this mean acceptance length a speculative configuration is flagged as doing nothing."""

ACCEPT_FROM_SERVER = "server"
"""``accept_method`` of an acceptance taken from the server's per-workload figure (no per-request one)."""

FAILED_STATES = frozenset({"crashed", "failed", "skipped"})

# Flags a row can carry (stable strings: the CSV, JSON and TUI show them).
FLAG_ZERO_OUTPUT = "zero_output"
FLAG_ERRORS = "errors"
FLAG_IDLE = "speculation_idle"
FLAG_MISMATCH = "lossless_mismatch"
FLAG_CLAMPED = "clamped"
FLAG_NO_BASELINE = "no_baseline"
FLAG_PARTIAL = "partial"
"""The workload was cut short: fewer measured items than it has (see ``CellRow.coverage``)."""
FLAG_CRASH_CUT = "cut_by_crash"
"""A request was in flight when the server died (recorded as an error with the crash as its reason)."""
FLAG_BURST = "streamed_in_one_burst"
"""Every ok answer arrived in one piece (first token = last token): no decode rate can be measured, and none is
shown. vLLM's CPU build on a busy small machine does this; so does a server that buffers its stream."""

FLAG_FROM_MEMORY = "drafted_from_memory"
"""An n-gram configuration measured warm: its repeats are drafted from its server's memory of the earlier ones
(SGLang's NGRAM corpus keeps every past input and output until ``/flush_cache``)."""
FLAG_RETRACTED = "retracted"
"""The server retracted some requests to free KV cache (``num_retractions``): they are kept out of latency
percentiles."""
FROM_MEMORY_TEXT = "repeats drafted from memory"

COVERAGE_COMPLETE = "complete"
COVERAGE_PARTIAL = "partial"
COVERAGE_RUNNING = "running"
COVERAGE_NOT_RUN = "not run"
COVERAGE_NONE = "none"
"""Nothing measured and nothing said about it (a pending configuration)."""

LOSSLESS_PASS = "pass"
LOSSLESS_MISMATCH = "mismatch"
LOSSLESS_NOT_CHECKED = "not checked"
LOSSLESS_NA = "n/a"


@dataclass(frozen=True)
class Spread:
    """A median with the range of the per-repeat values behind it."""

    median: float
    low: float
    high: float
    repeats: int
    """How many per-repeat values the range spans (1: no spread to speak of)."""

    def overlaps(self, other: Spread) -> bool:
        """Whether the two ranges share any value (a difference inside the noise)."""
        return self.low <= other.high and other.low <= self.high


@dataclass(frozen=True)
class WorkloadInfo:
    """A workload of the plan, with what the analysis needs to know about it."""

    name: str
    kind: str
    temperature: float | None
    """Sampling temperature (0: greedy, so outputs can be compared); None when the plan does not say."""
    repeats: int | None


@dataclass(frozen=True)
class ConfigSummary:
    """One configuration: what it is and how its run ended."""

    id: str
    name: str
    algorithm: str
    tp: int | None
    budget: int | None
    """Draft budget (DDTree budget or number of draft tokens); None for autoregressive servers."""
    baseline: str | None
    """Name of the matched baseline configuration as the plan declares it."""
    is_baseline: bool
    """Some other configuration names this one as its baseline."""
    speculative: bool
    state: str
    """done, crashed, failed, skipped, a live state (launching, running…), interrupted (left running by an
    engine that is gone), incomplete (measured, no state recorded) or pending."""
    reason: str | None = None
    signature: str | None = None
    """Crash signature name, e.g. ``cuda_illegal_instruction``."""
    crash_line: str | None = None
    excerpt: tuple[str, ...] = ()
    """Log lines around the crash."""
    server_log_accept_length: float | None = None
    gpu_summary: dict[str, Any] | None = None
    workloads_not_run: tuple[tuple[str, str], ...] = ()
    """(workload, reason) for workloads never started because the server was gone."""
    workload_log_accept: tuple[tuple[str, float], ...] = ()
    """(workload, acceptance from the server's log lines while it ran), where the engine published it."""
    in_plan: bool = True
    startup_s: float | None = None
    """Launch to ready, of its latest server that became ready."""


@dataclass(frozen=True)
class Mismatch:
    """One speculative output that differs from the baseline's under greedy sampling."""

    config: str
    workload: str
    item: str
    repeat: int
    output_sha: str
    baseline_sha: str


@dataclass(frozen=True)
class LosslessCheck:
    """Outcome of comparing a cell's outputs with its baseline's."""

    status: str
    """pass, mismatch, not checked (with ``note`` saying why) or n/a (not speculative, or the baseline)."""
    checked: int = 0
    mismatches: tuple[Mismatch, ...] = ()
    note: str | None = None


@dataclass(frozen=True)
class CellRow:
    """One configuration × workload: the figures a decision rests on."""

    config_id: str
    config: str
    workload: str
    algorithm: str
    tp: int | None
    budget: int | None
    state: str
    n_ok: int
    n_zero_output: int
    n_error: int
    n_clamped: int
    decode_tps: Spread | None
    ttft_s: Spread | None
    accept_length: float | None
    accept_method: str | None
    """verify-weighted, mean (no verify counts), server (no request carries one: the engine's own counters over
    the workload, as vLLM gives them) or None."""
    server_log_accept_length: float | None
    """The server's own acceptance from its decode log lines: over this workload when the engine published
    it (``WorkloadFinished.server_log``), else over the server's whole life (``ConfigFinished``)."""
    server_log_scope: str | None
    """workload, lifetime or None."""
    speedup: Spread | None
    speedup_note: str | None
    """Why there is no speedup (no baseline…), or "baseline" for the baseline itself."""
    lossless: LosslessCheck
    flags: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    """Distinct error texts of the cell's failed requests (first few)."""
    n_crash: int = 0
    """Requests in flight when the server died (among ``n_error``; not measured items)."""
    expected: int | None = None
    """Items × repeats the workload has for this configuration (None when no event said so)."""
    coverage: str = COVERAGE_NONE
    """complete, partial (cut short), running (being measured now), not run, or none (see ``coverage_text``)."""
    not_run: str | None = None
    """Why the workload never ran, when it did not."""
    paired: int = 0
    """(item, repeat) pairs the speedup is computed over (measured ok here and by the baseline)."""
    cache: str | None = None
    """The cache policy its measurements ran under: ``cold``, ``warm``, ``mixed``, or None (recorded before)."""
    from_memory: str | None = None
    """:data:`FROM_MEMORY_TEXT` for a warm n-gram cell (its later repeats saw their own earlier outputs)."""
    n_retracted: int = 0
    """Measurements the server retracted at least once (kept out of the latency figures)."""
    accept_by_repeat: tuple[tuple[int, float], ...] = ()
    """(repeat, acceptance length over that repeat's ok measurements): a warm n-gram cell's rise shows here."""

    @property
    def measured(self) -> bool:
        return self.n_ok + self.n_zero_output + self.n_error > 0

    @property
    def items_measured(self) -> int:
        """Keys with a measurement of their own (the request cut by a crash is not one)."""
        return self.n_ok + self.n_zero_output + self.n_error - self.n_crash

    @property
    def partial(self) -> bool:
        return self.coverage == COVERAGE_PARTIAL

    def coverage_text(self) -> str:
        """``partial (3 of 9 items)``, ``running (2 of 9 items)``, ``not run``, or "" for a complete cell."""
        if self.coverage in (COVERAGE_PARTIAL, COVERAGE_RUNNING):
            total = f" of {self.expected}" if self.expected else ""
            return f"{self.coverage} ({self.items_measured}{total} items)"
        if self.coverage == COVERAGE_NOT_RUN:
            return COVERAGE_NOT_RUN
        return ""


@dataclass(frozen=True)
class Barred:
    """A faster cell that cannot be the best, and why."""

    config: str
    decode_tps: float | None
    why: str


@dataclass(frozen=True)
class Best:
    """The fastest eligible configuration for a workload (and a TP, unless ``tp`` is None)."""

    workload: str
    tp: int | None
    config_id: str
    config: str
    decode_tps: Spread
    speedup: Spread | None
    runner_up: str | None = None
    runner_up_tps: Spread | None = None
    close_call: bool = False
    """The runner-up's repeat range overlaps the winner's: the ranking is within the noise."""
    barred: tuple[Barred, ...] = ()


@dataclass(frozen=True)
class ConfigTotals:
    """One configuration over every workload: what a one-line summary shows."""

    config_id: str
    n_ok: int
    n_zero_output: int
    n_error: int
    ttft_s: Spread | None
    """Over every ok measurement of the configuration."""
    accept_length: float | None
    accept_method: str | None
    """As :func:`acceptance` over every ok measurement; ``server`` when only the engine's counters gave one
    (their mean over the workloads)."""
    speedup: float | None
    """Geometric mean of the per-workload speedups (:func:`aggregate`); None when it is not fair to give one."""
    speedup_note: str | None = None
    """Why there is no mean speedup (crashed, partial, a workload without one)."""


@dataclass(frozen=True)
class RunAnalysis:
    """Everything a report or the results table shows about one run."""

    sweep: str
    configs: tuple[ConfigSummary, ...]
    workloads: tuple[WorkloadInfo, ...]
    rows: tuple[CellRow, ...]
    best: tuple[Best, ...]
    notes: tuple[str, ...] = ()
    history: tuple[str, ...] = ()
    """Warnings and errors of earlier attempts (a pre-flight a resume got past, a launch a retry replaced)."""
    measurement_counts: tuple[int, int, int] = (0, 0, 0)
    """ok, zero-output and error measurements in the whole run (one per key: a retried key counts once)."""
    totals: tuple[ConfigTotals, ...] = ()
    """One per configuration, in plan order."""
    load: LoadAnalysis | None = None
    """:class:`specbench_tui.core.crossover.results.LoadAnalysis` of the workloads with a load axis (they have no
    cells: their figures are per load point), or None when the run has none."""
    ladder: Any = None
    """:class:`specbench_tui.core.crossover.ladder.LadderAnalysis` of the ``context_ladder`` workloads (per rung
    figures, C*), or None when the run has none (their cells stay: a ladder is also a sequential workload)."""
    acceptance: AcceptanceAnalysis | None = None
    """:class:`specbench_tui.core.acceptance.AcceptanceAnalysis`: per cell the named acceptance figures,
    per-position acceptance, the histogram and the step cost; per workload the category matrices."""
    intervals: Any = None
    """:class:`specbench_tui.core.intervals.IntervalAnalysis`: bootstrap confidence intervals on each cell's
    speedup and acceptance; None unless asked for (:func:`~specbench_tui.core.intervals.with_intervals`, which a
    report's loader calls; the TUI's live analysis does without)."""
    _rows_by_key: dict[tuple[str, str], CellRow] = field(default_factory=dict, repr=False, compare=False)
    _configs_by_id: dict[str, ConfigSummary] = field(default_factory=dict, repr=False, compare=False)
    _rows_by_config: dict[str, list[CellRow]] = field(default_factory=dict, repr=False, compare=False)
    _totals_by_config: dict[str, ConfigTotals] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._rows_by_key.update({(r.config_id, r.workload): r for r in self.rows})
        self._configs_by_id.update({c.id: c for c in self.configs})
        rows: dict[str, list[CellRow]] = {}  # looked up once per configuration: a scan each was quadratic
        for row in self.rows:
            rows.setdefault(row.config_id, []).append(row)
        object.__setattr__(self, "_rows_by_config", rows)
        object.__setattr__(self, "_totals_by_config", {t.config_id: t for t in reversed(self.totals)})  # the first

    def row(self, config_id: str, workload: str) -> CellRow | None:
        return self._rows_by_key.get((config_id, workload))

    def config(self, config_id: str) -> ConfigSummary | None:
        return self._configs_by_id.get(config_id)

    def rows_for(self, workload: str) -> list[CellRow]:
        return [r for r in self.rows if r.workload == workload]

    def problems(self) -> list[ConfigSummary]:
        """Crashed, failed and skipped configurations, in plan order."""
        return [c for c in self.configs if c.state in FAILED_STATES]

    def best_for(self, workload: str, tp: int | None = None) -> Best | None:
        return next((b for b in self.best if b.workload == workload and b.tp == tp), None)

    def totals_for(self, config_id: str) -> ConfigTotals | None:
        return self._totals_by_config.get(config_id)

    def rows_of(self, config_id: str) -> list[CellRow]:
        return list(self._rows_by_config.get(config_id, ()))

    @property
    def measurement_count(self) -> int:
        return sum(self.measurement_counts)

    def all_zero_output(self) -> list[ConfigSummary]:
        """Configurations whose every request returned no tokens (the run then exits 1, like a crash)."""
        out = []
        for config in self.configs:
            rows: list[CellRow | PointRow] = [*self.rows_of(config.id)]
            if self.load is not None:
                rows += [p for p in self.load.points if p.config_id == config.id]
            if sum(r.n_zero_output for r in rows) > 0 and sum(r.n_ok for r in rows) == 0:
                out.append(config)
        return out

    def why_not_averaged(self, config_id: str) -> str | None:
        """Why a configuration is kept out of geometric means (crashed, failed, skipped, partial…), or None."""
        config = self.config(config_id)
        if config is None:
            return "unknown configuration"
        if config.state in FAILED_STATES:
            return config.state
        partial = [r.workload for r in self.rows_of(config_id) if r.partial]
        if partial:
            return "partial: " + ", ".join(partial)
        return None


def geometric_mean(values: Sequence[float]) -> float | None:
    """Geometric mean of positive values (None when empty): the fair average of ratios."""
    positive = [v for v in values if v > 0]
    if not positive or len(positive) != len(values):
        return None
    return math.exp(sum(math.log(v) for v in positive) / len(positive))


AGGREGATE_METRICS = ("speedup", "decode_tps", "accept_length")


def cell_value(row: CellRow | None, metric: str) -> float | None:
    """A cell's figure for ``metric`` (one of :data:`AGGREGATE_METRICS`): its median, or None."""
    if row is None:
        return None
    if metric == "speedup":
        return row.speedup.median if row.speedup else None
    if metric == "decode_tps":
        return row.decode_tps.median if row.decode_tps else None
    if metric == "accept_length":
        return row.accept_length
    raise ValueError(f"unknown metric {metric!r} (one of {', '.join(AGGREGATE_METRICS)})")


def aggregate(analysis: RunAnalysis, config_id: str, metric: str,
              workloads: Sequence[str] | None = None) -> float | None:
    """One configuration's figure over ``workloads`` (all of the run's by default): the geometric mean of its
    speedups or tok/s, the mean of its acceptance lengths. None unless every workload has a value and the
    configuration is neither crashed, failed, skipped nor partial anywhere (:meth:`RunAnalysis.why_not_averaged`):
    a mean over the workloads a cut run happened to reach would rank it on its easy items."""
    names = list(workloads) if workloads is not None else [w.name for w in analysis.workloads]
    if not names or analysis.why_not_averaged(config_id) is not None:
        return None
    values = [cell_value(analysis.row(config_id, name), metric) for name in names]
    if any(v is None for v in values):
        return None
    present = [float(v) for v in values if v is not None]
    if metric == "accept_length":
        return statistics.fmean(present)
    return geometric_mean(present)


def to_json(analysis: RunAnalysis, digits: int = 4) -> dict[str, Any]:
    """The analysis as plain JSON data (floats rounded to ``digits`` decimals so output is stable)."""
    data: dict[str, Any] = plain_json(analysis, digits)
    return data


def plain_json(value: object, digits: int = 4) -> Any:
    """Dataclasses, mappings and sequences as plain JSON data, floats rounded to ``digits`` decimals."""

    def clean(value: object) -> Any:
        if isinstance(value, float):
            return round(value, digits) if math.isfinite(value) else None
        if isinstance(value, dict):
            return {str(k): clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        if hasattr(value, "__dataclass_fields__"):
            return {name: clean(getattr(value, name)) for name in value.__dataclass_fields__
                    if not name.startswith("_")}
        return value

    return clean(value)
