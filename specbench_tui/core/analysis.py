"""Results you can act on: per configuration × workload figures, speedups, acceptance, losslessness, the best.

Pure functions over what a run directory holds (no I/O, no Textual), shared by ``specbench report``,
``specbench compare`` and the TUI's results table.

API
---
``analyse(plan_json, measurements, events=()) -> RunAnalysis``

- ``plan_json``: the run's ``plan.json`` as a dict (``Plan.to_json()``); ``{}`` when it is missing, in which
  case configurations are taken from the measurements and events (no TP, budget or baseline, so no speedups).
- ``measurements``: :class:`~specbench_tui.core.records.Measurement` objects (``RunDir.read_measurements()``).
- ``events``: :class:`~specbench_tui.core.events.Event` objects (``RunDir.read_events()``), for final states,
  crash signatures and excerpts, skip reasons, workloads not run, the server-log acceptance and notices.

``RunAnalysis`` holds, all in plan order:

- ``configs``: one :class:`ConfigSummary` per configuration (state, reason, crash signature and excerpt,
  server-log acceptance, workloads not run, TP, draft budget, matched baseline, whether it speculates);
- ``workloads``: one :class:`WorkloadInfo` per workload (kind, temperature, repeats);
- ``rows``: one :class:`CellRow` per configuration × workload, including configurations that crashed or
  were skipped (their figures are ``None``), with ``decode_tps``, ``ttft_s`` and ``speedup`` as
  :class:`Spread` (median with the min..max of the per-repeat values), acceptance weighted by verify steps,
  counts of ok / zero-output / error measurements, a :class:`LosslessCheck` and ``flags``;
- ``best``: :class:`Best` per workload over all TPs (``tp=None``) and per workload and TP;
- ``notes``: things the reader must know (plan notes, warnings published during the run, missing baselines).

Lookups: ``RunAnalysis.row(config_id, workload)``, ``RunAnalysis.config(config_id)``,
``RunAnalysis.rows_for(workload)``, ``RunAnalysis.problems()`` (crashed, failed and skipped configurations).

Rules, and why:

- zero-output and error measurements are counted but never averaged: an empty response is not fast;
- decode tok/s and TTFT are the median over every ok measurement of the cell; their spread is the min..max of
  the per-repeat medians, so one noisy repeat shows as a wide range instead of moving the centre;
- acceptance = sum(accept_length × verify_ct) / sum(verify_ct) (each request weighted by its verify steps, as
  SGLang PR #34743 does), the plain mean when no request carries ``verify_ct``; the server's own log figure
  (over the workload's decode log lines, ``WorkloadFinished.server_log``, else the whole server lifetime from
  ``ConfigFinished``) is kept beside it, never mixed in;
- a speculative configuration whose acceptance is below :data:`IDLE_ACCEPTANCE` is flagged: speculation is
  running but accepting nothing, so it costs and cannot win;
- speedup pairs items: it is the median decode tok/s over the (item, repeat) pairs both the configuration and
  its matched baseline measured ok, divided by the baseline's median over the same pairs; its spread is the
  min..max of the same ratio per repeat. A configuration that crashed after three of nine items is compared on
  those three items only (dividing by the baseline's median over all nine would credit it with the speed of
  the short items). A missing baseline is said, never guessed;
- a cell is *partial* when the workload was cut short (a crash, a failure, a kill): it has measurements, but
  fewer than the workload's items × repeats (``CellRow.coverage``: ``partial (k of n items)``); the request in
  flight when the server died is an error measurement with ``error_kind == "crash"``
  (:data:`~specbench_tui.core.records.ERROR_KIND_CRASH`), counted in ``n_crash``, never as a measured item.
  A crashed, failed or partial configuration is marked, and kept out of every geometric mean
  (:func:`aggregate`) and of "best";
- the server's own log figure for a cell is shown only when the cell has measurements: a workload that never ran
  gets no figure (not even the server's lifetime one);
- notices belong to an attempt: a run-level notice of an earlier attempt of the sweep (a failed pre-flight
  that a resume got past; an attempt ends with its ``SweepFinished``, or where a resume's ``SweepStarted`` follows
  a killed one) and a configuration's notice from before its latest launch are ``history``, not ``notes``;
- losslessness (greedy workloads only): each speculative output hash is compared with the baseline's for the
  same workload, item and repeat (any baseline repeat of the item when that one is missing); a mismatch
  flags the cell and bars it from "best": fast but wrong must not win;
- best = highest median decode tok/s among cells whose configuration did not crash, fail or get skipped, with
  no zero-output measurement and no lossless mismatch; faster cells that were barred are listed with why.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    ConfigStateChanged,
    CrashDetected,
    Event,
    Notice,
    ServerLaunching,
    ServerReady,
    SweepFinished,
    SweepStarted,
    WorkloadFinished,
    WorkloadNotRun,
    WorkloadStarted,
)
from specbench_tui.core.records import (
    ERROR_KIND_CRASH,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_ZERO_OUTPUT,
    Measurement,
    MeasurementKey,
)

IDLE_ACCEPTANCE = 1.05
"""Below this mean acceptance length a speculative configuration is flagged as doing nothing."""

ACCEPT_FROM_SERVER = "server"
"""``accept_method`` of an acceptance taken from the server's per-workload figure (no per-request one)."""

NON_SPECULATIVE_ALGORITHMS = frozenset({"autoregressive", "ar", "none", "baseline", "custom", "unknown"})
"""Algorithm names that mean "no speculation" when the argv has no ``--speculative-algorithm`` either."""

BUDGET_PARAMS = ("budget", "draft_budget", "num_draft_tokens", "draft_tokens")
"""Matrix parameters read as the draft budget, in this order."""

BUDGET_FLAGS = ("--speculative-ddtree-budget", "--speculative-num-draft-tokens")
"""Server flags read as the draft budget when no matrix parameter names it."""

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
    load: Any = None
    """:class:`specbench_tui.core.crossover.results.LoadAnalysis` of the workloads with a load axis (they have no
    cells: their figures are per load point), or None when the run has none."""
    _rows_by_key: dict[tuple[str, str], CellRow] = field(default_factory=dict, repr=False, compare=False)
    _configs_by_id: dict[str, ConfigSummary] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._rows_by_key.update({(r.config_id, r.workload): r for r in self.rows})
        self._configs_by_id.update({c.id: c for c in self.configs})

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
        return next((t for t in self.totals if t.config_id == config_id), None)

    def rows_of(self, config_id: str) -> list[CellRow]:
        return [r for r in self.rows if r.config_id == config_id]

    @property
    def measurement_count(self) -> int:
        return sum(self.measurement_counts)

    def all_zero_output(self) -> list[ConfigSummary]:
        """Configurations whose every request returned no tokens (the run then exits 1, like a crash)."""
        out = []
        for config in self.configs:
            rows: list[Any] = self.rows_of(config.id)
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


# ------------------------------------------------------------------------------------------------ analyse


STATE_INTERRUPTED = "interrupted"
"""A configuration its engine left starting or running when it died (a kill, a lost machine): no engine owns
the run directory any more, so it is not running; resume runs the rest."""


def analyse(plan_json: Mapping[str, Any] | None, measurements: Iterable[Measurement],
            events: Iterable[Event] = (), *, engine_alive: bool = True) -> RunAnalysis:
    """Aggregate one run; see the module docstring for the rules. ``engine_alive=False`` says no engine owns
    the run directory: a configuration its events leave starting or running is then ``interrupted``."""
    plan_json = plan_json or {}
    latest: dict[MeasurementKey, Measurement] = {}
    for measurement in measurements:  # one per key, the last recorded (a retried key counts once)
        latest.pop(measurement.key, None)
        latest[measurement.key] = measurement
    measurements = list(latest.values())
    events = list(events)
    notes: list[str] = [str(n) for n in plan_json.get("notes", []) if n]
    if not plan_json.get("configs"):
        notes.append("plan.json is missing or empty: configurations are taken from the results and events, "
                     "without TP, draft budget or baseline, so no speedups")

    folds: dict[str, _Fold] = {}
    configs = _configs(plan_json, measurements, events, notes, folds)
    if not engine_alive:
        configs = [_replace(c, state=STATE_INTERRUPTED, reason=c.reason or "its engine stopped; resume runs the rest")
                   if c.state in ("launching", "ready", "running") else c for c in configs]
    loaded = {str(w.get("name")) for w in plan_json.get("workloads", []) if isinstance(w, dict) and w.get("load")}
    load_ms = [m for m in measurements if m.load is not None or m.workload in loaded]
    cell_ms = [m for m in measurements if m.load is None and m.workload not in loaded]
    workloads = [w for w in _workloads(plan_json, cell_ms) if w.name not in loaded]
    by_cell: dict[tuple[str, str], list[Measurement]] = defaultdict(list)
    for m in cell_ms:
        by_cell[(m.config_id, m.workload)].append(m)
    by_name = {c.name: c for c in configs}
    expected = _expected(workloads, folds, by_cell, configs)

    rows: list[CellRow] = []
    for config in configs:
        baseline = by_name.get(config.baseline) if config.baseline else None
        fold = folds.get(config.id) or _Fold()
        for workload in workloads:
            rows.append(_row(config, workload, by_cell.get((config.id, workload.name), []), baseline,
                             by_cell.get((baseline.id, workload.name), []) if baseline else [],
                             fold, expected.get((config.id, workload.name))))

    missing = sorted({c.baseline for c in configs if c.baseline and c.baseline not in by_name})
    for name in missing:
        note = f"baseline '{name}' is not in this run: configurations matched to it have no speedup"
        if not any(name in n for n in notes):
            notes.append(note)
    current, history = _notices(events, {c.id: c.name for c in configs})
    notes += current
    counts = (sum(1 for m in measurements if m.status == STATUS_OK),
              sum(1 for m in measurements if m.status == STATUS_ZERO_OUTPUT),
              sum(1 for m in measurements if m.status not in (STATUS_OK, STATUS_ZERO_OUTPUT)))
    analysis = RunAnalysis(sweep=str(plan_json.get("sweep") or "?"), configs=tuple(configs),
                           workloads=tuple(workloads), rows=tuple(rows), best=tuple(_best(rows, configs, workloads)),
                           notes=tuple(dict.fromkeys(notes)), history=tuple(dict.fromkeys(history)),
                           measurement_counts=counts)
    by_config: dict[str, list[Measurement]] = defaultdict(list)
    for m in cell_ms:
        by_config[m.config_id].append(m)
    load = None
    if loaded or load_ms:
        from specbench_tui.core.crossover.analyse import analyse_load  # the load half of this one analysis

        lossy = {r.config for r in rows if FLAG_MISMATCH in r.flags}
        load = analyse_load(plan_json, load_ms, events, configs, lossy)
    return _replace_analysis(analysis, totals=tuple(_totals(analysis, c, by_config.get(c.id, [])) for c in configs),
                             load=load)


def _replace_analysis(analysis: RunAnalysis, **changes: Any) -> RunAnalysis:
    fields_ = {name: getattr(analysis, name) for name in analysis.__dataclass_fields__ if not name.startswith("_")}
    return RunAnalysis(**{**fields_, **changes})


def _totals(analysis: RunAnalysis, config: ConfigSummary, cell: list[Measurement]) -> ConfigTotals:
    ok = [m for m in cell if m.status == STATUS_OK]
    accept, method = acceptance(ok)
    if accept is None:  # no per-request figure (vLLM): the server's counters over each workload
        served = [r.accept_length for r in analysis.rows_of(config.id)
                  if r.accept_method == ACCEPT_FROM_SERVER and r.accept_length is not None]
        if served:
            accept, method = statistics.fmean(served), ACCEPT_FROM_SERVER
    speedup = aggregate(analysis, config.id, "speedup")
    note = None
    if speedup is None:
        note = analysis.why_not_averaged(config.id) or "not every workload has a speedup"
    return ConfigTotals(
        config_id=config.id, n_ok=len(ok), n_zero_output=sum(1 for m in cell if m.status == STATUS_ZERO_OUTPUT),
        n_error=sum(1 for m in cell if m.status not in (STATUS_OK, STATUS_ZERO_OUTPUT)),
        ttft_s=spread_of(ok, "ttft_s"), accept_length=accept, accept_method=method, speedup=speedup,
        speedup_note=note)


def _notices(events: list[Event], names: dict[str, str]) -> tuple[list[str], list[str]]:
    """Warnings and errors published during the run, one line per distinct text with the configurations:
    those of the current attempt, and those of earlier attempts (history)."""
    # Attempts of the whole sweep: one ends with its SweepFinished (a failed pre-flight publishes one without a
    # SweepStarted) or where the next SweepStarted finds one already started (an engine killed mid-run).
    attempt_of: list[int] = []
    attempt, started = 0, False
    for event in events:
        if isinstance(event, SweepStarted):
            if started:
                attempt += 1
            started = True
        attempt_of.append(attempt)
        if isinstance(event, SweepFinished):
            attempt, started = attempt + 1, False
    current_attempt = attempt_of[-1] if attempt_of else 0
    last_launch: dict[str, int] = {}
    for index, event in enumerate(events):
        if isinstance(event, ServerLaunching) or (isinstance(event, ConfigStateChanged)  # launched or requeued
                                                   and event.state == ConfigState.PENDING and event.reason != "resumed"):
            last_launch[event.config_id] = index
    grouped: dict[tuple[bool, str, str], list[str]] = {}
    for index, event in enumerate(events):
        if isinstance(event, Notice) and event.level in ("warning", "error"):
            if event.config_id:
                old = index < last_launch.get(event.config_id, -1)
            else:
                old = attempt_of[index] < current_attempt
            where = grouped.setdefault((old, event.level, event.text), [])
            if event.config_id and names.get(event.config_id, event.config_id) not in where:
                where.append(names.get(event.config_id, event.config_id))
    current: list[str] = []
    history: list[str] = []
    for (old, level, text), where in grouped.items():
        shown = ", ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
        (history if old else current).append(f"{level}: {text}" + (f" ({shown})" if where else ""))
    return current, history


@dataclass
class _Fold:
    """What the events say about one configuration, as of its latest attempt."""

    name: str | None = None
    state: str | None = None
    finished: ConfigFinished | None = None
    """The ConfigFinished that still stands (None once a retry or resume re-queued the configuration)."""
    crash: CrashDetected | None = None
    not_run: dict[str, str] = field(default_factory=dict)
    log_accept: dict[str, float] = field(default_factory=dict)
    expected: dict[str, int] = field(default_factory=dict)
    current_workload: str | None = None
    startup_s: float | None = None


def _fold_events(events: list[Event]) -> dict[str, _Fold]:
    folds: dict[str, _Fold] = defaultdict(_Fold)
    for event in events:
        config_id = getattr(event, "config_id", None)
        if not isinstance(config_id, str):
            continue
        fold = folds[config_id]
        if isinstance(event, ConfigFinished):
            fold.finished, fold.state, fold.current_workload = event, event.state.value, None
            fold.name = fold.name or event.name
        elif isinstance(event, ConfigStateChanged):
            fold.state = event.state.value
            fold.name = fold.name or event.name
            if not event.state.final:  # it runs (or waits) again: its old end is past
                fold.finished = None
            if event.state in (ConfigState.PENDING, ConfigState.LAUNCHING):  # a new attempt
                fold.crash, fold.not_run, fold.current_workload = None, {}, None
        elif isinstance(event, ServerLaunching):
            fold.crash, fold.not_run = None, {}
        elif isinstance(event, CrashDetected):
            fold.crash = event
        elif isinstance(event, ServerReady):
            fold.startup_s = event.startup_s
        elif isinstance(event, WorkloadNotRun):
            fold.not_run[event.workload] = event.reason
        elif isinstance(event, WorkloadStarted):
            fold.current_workload = event.workload
            if isinstance(event.expected, int) and event.expected > 0:
                fold.expected[event.workload] = event.expected
        elif isinstance(event, WorkloadFinished):
            fold.current_workload = None
            log = event.server_log
            value = log.get("accept_length") if isinstance(log, dict) else None
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                fold.log_accept[event.workload] = float(value)
    return folds


def _configs(plan_json: Mapping[str, Any], measurements: list[Measurement], events: list[Event],
             notes: list[str], folds_out: dict[str, _Fold]) -> list[ConfigSummary]:
    folds = _fold_events(events)
    folds_out.update(folds)
    planned: list[dict[str, Any]] = [c for c in plan_json.get("configs", []) if isinstance(c, dict) and "id" in c]
    baseline_names = {c.get("baseline") for c in planned if c.get("baseline")}
    measured: dict[str, set[str]] = defaultdict(set)
    for m in measurements:
        measured[m.config_id].add(m.workload)
    out: list[ConfigSummary] = []
    for raw in planned:
        out.append(_summary(raw, raw["name"] in baseline_names, folds.get(raw["id"]), measured.get(raw["id"], set())))
    known = {c.id for c in out}
    event_names = {i: f.name for i, f in folds.items() if f.name}
    strays = dict.fromkeys(m.config_id for m in measurements if m.config_id not in known)
    strays.update(dict.fromkeys(i for i in event_names if i not in known))
    stray_names = {m.config_id: m.config for m in measurements}
    stray_names.update(event_names)
    if strays and planned:
        notes.append(f"{len(strays)} configuration(s) in the results are not in plan.json: "
                     + ", ".join(stray_names[i] for i in strays))
    for config_id in strays:
        raw = {"id": config_id, "name": stray_names[config_id], "algorithm": "unknown", "tp": None,
               "params": {}, "argv": [], "baseline": None}
        summary = _summary(raw, False, folds.get(config_id), measured.get(config_id, set()))
        out.append(_replace(summary, in_plan=False))
    return out


def _expected(workloads: list[WorkloadInfo], folds: Mapping[str, _Fold],
              by_cell: Mapping[tuple[str, str], list[Measurement]],
              configs: list[ConfigSummary]) -> dict[tuple[str, str], int]:
    """Items × repeats per (configuration, workload): what the engine said when it started the workload, else
    the most keys any configuration that finished it measured (a run directory from before that was said)."""
    out: dict[tuple[str, str], int] = {}
    widest: dict[str, int] = {}
    for config in configs:
        fold = folds.get(config.id)
        for workload in workloads:
            said = fold.expected.get(workload.name) if fold else None
            if said:
                out[(config.id, workload.name)] = said
                widest[workload.name] = max(widest.get(workload.name, 0), said)
            elif config.state == "done" and not (fold and workload.name in fold.not_run):
                widest[workload.name] = max(widest.get(workload.name, 0),
                                            len(by_cell.get((config.id, workload.name), [])))
    for config in configs:
        for workload in workloads:
            if (config.id, workload.name) not in out and widest.get(workload.name):
                out[(config.id, workload.name)] = widest[workload.name]
    return out


def _replace(summary: ConfigSummary, **changes: Any) -> ConfigSummary:
    return ConfigSummary(**{**summary.__dict__, **changes})


def _summary(raw: dict[str, Any], is_baseline: bool, fold: _Fold | None, measured: set[str]) -> ConfigSummary:
    argv = [str(a) for a in raw.get("argv") or []]
    algorithm = str(raw.get("algorithm") or "unknown")
    speculative = "--speculative-algorithm" in argv or algorithm.lower() not in NON_SPECULATIVE_ALGORITHMS
    state, reason, signature = "pending", raw.get("skip_reason"), None
    fold = fold or _Fold()
    finished = fold.finished
    if reason:
        state = "skipped"
    if finished is not None:
        state, reason, signature = finished.state.value, finished.reason or reason, finished.signature
    elif fold.state is not None and not reason:
        state = fold.state
    elif measured and not reason:
        state = "incomplete"
    crash = fold.crash
    if crash is not None and state in ("crashed", "failed"):
        signature = signature or crash.signature
    show_crash = crash is not None and state in ("crashed", "failed")
    tp = raw.get("tp")
    return ConfigSummary(
        id=str(raw["id"]), name=str(raw["name"]), algorithm=algorithm,
        tp=int(tp) if isinstance(tp, int) else None, budget=_budget(raw.get("params") or {}, argv),
        baseline=raw.get("baseline"), is_baseline=is_baseline, speculative=speculative, state=state,
        reason=reason, signature=signature,
        crash_line=crash.line if show_crash and crash else None,
        excerpt=tuple(crash.excerpt) if show_crash and crash else (),
        server_log_accept_length=finished.server_log_accept_length if finished else None,
        gpu_summary=finished.gpu_summary if finished else None,
        workloads_not_run=tuple((w, why) for w, why in fold.not_run.items() if w not in measured),
        workload_log_accept=tuple(fold.log_accept.items()), startup_s=fold.startup_s,
    )


def _budget(params: Mapping[str, Any], argv: Sequence[str]) -> int | None:
    for key in BUDGET_PARAMS:
        value = params.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    for flag in BUDGET_FLAGS:
        if flag in argv:
            index = argv.index(flag)
            if index + 1 < len(argv) and argv[index + 1].isdigit():
                return int(argv[index + 1])
    return None


def _workloads(plan_json: Mapping[str, Any], measurements: list[Measurement]) -> list[WorkloadInfo]:
    out: list[WorkloadInfo] = []
    for raw in plan_json.get("workloads", []):
        if not isinstance(raw, dict) or "name" not in raw:
            continue
        temperature = raw.get("temperature")
        repeats = raw.get("repeats")
        out.append(WorkloadInfo(name=str(raw["name"]), kind=str(raw.get("kind") or "?"),
                                temperature=float(temperature) if isinstance(temperature, (int, float)) else None,
                                repeats=repeats if isinstance(repeats, int) else None))
    known = {w.name for w in out}
    for name in dict.fromkeys(m.workload for m in measurements):
        if name not in known:
            out.append(WorkloadInfo(name=name, kind="?", temperature=None, repeats=None))
            known.add(name)
    return out


# ------------------------------------------------------------------------------------------------ one cell


def _per_repeat_medians(ok: list[Measurement], attr: str) -> dict[int, float]:
    by_repeat: dict[int, list[float]] = defaultdict(list)
    for m in ok:
        value = getattr(m, attr)
        if isinstance(value, (int, float)) and math.isfinite(value):
            by_repeat[m.repeat].append(float(value))
    return {r: statistics.median(v) for r, v in sorted(by_repeat.items())}


def spread_of(ok: list[Measurement], attr: str) -> Spread | None:
    """Median of ``attr`` over the measurements, with the min..max of the per-repeat medians."""
    values = [float(getattr(m, attr)) for m in ok
              if isinstance(getattr(m, attr), (int, float)) and math.isfinite(getattr(m, attr))]
    if not values:
        return None
    per_repeat = _per_repeat_medians(ok, attr)
    return Spread(statistics.median(values), min(per_repeat.values()), max(per_repeat.values()), len(per_repeat))


def acceptance(ok: list[Measurement]) -> tuple[float | None, str | None]:
    """Mean acceptance length weighted by verify steps, else the plain mean; with the method used."""
    weighted = [(m.accept_length, m.verify_ct) for m in ok
                if m.accept_length is not None and m.verify_ct is not None and m.verify_ct > 0]
    if weighted:
        total = sum(v for _, v in weighted)
        return sum(a * v for a, v in weighted) / total, "verify-weighted"
    plain = [m.accept_length for m in ok if m.accept_length is not None]
    if plain:
        return statistics.fmean(plain), "mean"
    return None, None


def paired_speedup(ok: list[Measurement], base_ok: list[Measurement]) -> tuple[float | None, list[float], int]:
    """Median tok/s over the (item, repeat) pairs both measured, over the baseline's median on the same pairs;
    with the same ratio per repeat and how many pairs there were. The one speedup computation: cells and load
    points (:mod:`specbench_tui.core.crossover`) both use it."""
    mine = {(m.item, m.repeat): float(m.decode_tps) for m in ok if _finite(m.decode_tps)}
    theirs = {(m.item, m.repeat): float(m.decode_tps) for m in base_ok if _finite(m.decode_tps)}
    pairs = sorted(mine.keys() & theirs.keys())
    if not pairs:
        return None, [], 0
    denominator = statistics.median(theirs[k] for k in pairs)
    if denominator <= 0:
        return None, [], len(pairs)
    central = statistics.median(mine[k] for k in pairs) / denominator
    ratios: list[float] = []
    for repeat in sorted({r for _, r in pairs}):
        keys = [k for k in pairs if k[1] == repeat]
        below = statistics.median(theirs[k] for k in keys)
        if below > 0:
            ratios.append(statistics.median(mine[k] for k in keys) / below)
    return central, ratios, len(pairs)


def _speedup(ok: list[Measurement], base_ok: list[Measurement]) -> tuple[Spread | None, int]:
    """:func:`paired_speedup` as a :class:`Spread` (its range: the per-repeat ratios)."""
    central, ratios, n_pairs = paired_speedup(ok, base_ok)
    if central is None:
        return None, n_pairs
    pairs = range(n_pairs)
    if not ratios:
        return Spread(central, central, central, 0), len(pairs)
    return Spread(central, min(min(ratios), central), max(max(ratios), central), len(ratios)), len(pairs)


def _finite(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _lossless(config: ConfigSummary, workload: WorkloadInfo, cell: list[Measurement],
              baseline: ConfigSummary | None, base_cell: list[Measurement]) -> LosslessCheck:
    if config.is_baseline or not config.speculative:
        return LosslessCheck(LOSSLESS_NA)
    hashed = [m for m in cell if m.status == STATUS_OK and m.output_sha]
    if not cell:
        return LosslessCheck(LOSSLESS_NOT_CHECKED, note="no measurements")
    if workload.temperature is None:
        return LosslessCheck(LOSSLESS_NOT_CHECKED, note="sampling temperature unknown")
    if workload.temperature != 0:
        return LosslessCheck(LOSSLESS_NOT_CHECKED, note=f"sampling at temperature {workload.temperature:g}")
    if baseline is None:
        return LosslessCheck(LOSSLESS_NOT_CHECKED, note="no baseline")
    if not hashed:
        return LosslessCheck(LOSSLESS_NOT_CHECKED, note="no output hashes recorded")
    exact = {(m.item, m.repeat): m.output_sha for m in base_cell if m.status == STATUS_OK and m.output_sha}
    any_repeat: dict[str, str] = {}
    for (item, _), sha in sorted(exact.items()):
        any_repeat.setdefault(item, sha)
    checked = 0
    mismatches: list[Mismatch] = []
    for m in sorted(hashed, key=lambda m: (m.item, m.repeat)):
        reference = exact.get((m.item, m.repeat)) or any_repeat.get(m.item)
        if reference is None:
            continue
        checked += 1
        if reference != m.output_sha:
            mismatches.append(Mismatch(config.name, workload.name, m.item, m.repeat, str(m.output_sha), reference))
    if checked == 0:
        return LosslessCheck(LOSSLESS_NOT_CHECKED, note=f"baseline '{baseline.name}' has no outputs to compare")
    return LosslessCheck(LOSSLESS_MISMATCH if mismatches else LOSSLESS_PASS, checked, tuple(mismatches))


def _coverage(config: ConfigSummary, workload: WorkloadInfo, cell: list[Measurement], n_crash: int,
              fold: _Fold, expected: int | None) -> str:
    not_run = fold.not_run.get(workload.name)
    if not cell:
        return COVERAGE_NOT_RUN if not_run else COVERAGE_NONE
    items = len(cell) - n_crash
    if fold.current_workload == workload.name and config.state in ("launching", "ready", "running"):
        return COVERAGE_RUNNING
    if n_crash or not_run or (expected is not None and items < expected):
        return COVERAGE_PARTIAL
    return COVERAGE_COMPLETE


def _row(config: ConfigSummary, workload: WorkloadInfo, cell: list[Measurement],
         baseline: ConfigSummary | None, base_cell: list[Measurement], fold: _Fold,
         expected: int | None) -> CellRow:
    ok = [m for m in cell if m.status == STATUS_OK]
    n_zero = sum(1 for m in cell if m.status == STATUS_ZERO_OUTPUT)
    n_error = sum(1 for m in cell if m.status == STATUS_ERROR or m.status not in (STATUS_OK, STATUS_ZERO_OUTPUT))
    n_crash = sum(1 for m in cell if m.status == STATUS_ERROR and m.error_kind == ERROR_KIND_CRASH)
    coverage = _coverage(config, workload, cell, n_crash, fold, expected)
    accept, method = acceptance(ok)
    server_accept = dict(config.workload_log_accept).get(workload.name)
    if accept is None and ok and server_accept is not None:
        # vLLM reports no acceptance per request: the server's own counters over the workload stand in.
        accept, method = server_accept, ACCEPT_FROM_SERVER
    speedup: Spread | None = None
    note: str | None = None
    paired = 0
    tps = spread_of(ok, "decode_tps")
    if not ok:
        pass
    elif tps is None:
        note = "no decode rate"  # the answers came in one burst each (FLAG_BURST): nothing to compare
    elif config.is_baseline:
        speedup = Spread(1.0, 1.0, 1.0, tps.repeats)
        note = "baseline"
    elif config.baseline is None:
        note = "no baseline declared"
    elif baseline is None:
        note = f"no baseline: '{config.baseline}' is not in this run"
    else:
        base_ok = [m for m in base_cell if m.status == STATUS_OK]
        speedup, paired = _speedup(ok, base_ok)
        if speedup is None and any(_finite(m.decode_tps) for m in base_ok):
            note = f"no baseline: '{baseline.name}' measured none of the same items of {workload.name}"
        elif speedup is None:
            note = (f"no baseline: '{baseline.name}' {baseline.state}, no measurements of {workload.name}"
                    if baseline.state in FAILED_STATES else
                    f"no baseline: '{baseline.name}' has no ok measurements of {workload.name}")
    lossless = _lossless(config, workload, cell, baseline, base_cell)
    flags: list[str] = []
    if coverage == COVERAGE_PARTIAL:
        flags.append(FLAG_PARTIAL)
    if n_crash:
        flags.append(FLAG_CRASH_CUT)
    if n_zero:
        flags.append(FLAG_ZERO_OUTPUT)
    if n_error:
        flags.append(FLAG_ERRORS)
    if config.speculative and not config.is_baseline:
        per_workload_log = dict(config.workload_log_accept).get(workload.name)
        shown = accept if accept is not None else (per_workload_log if ok else None)
        if shown is not None and shown < IDLE_ACCEPTANCE:
            flags.append(FLAG_IDLE)
    if lossless.status == LOSSLESS_MISMATCH:
        flags.append(FLAG_MISMATCH)
    n_clamped = sum(1 for m in cell if m.clamped)
    per_workload = dict(config.workload_log_accept).get(workload.name) if cell else None
    # The server's figure only where this workload was measured: a lifetime figure on a workload that never ran
    # would be a number without measurements behind it.
    log_value = per_workload if per_workload is not None else (config.server_log_accept_length if cell else None)
    log_scope = None if log_value is None else ("workload" if per_workload is not None else "lifetime")
    if n_clamped:
        flags.append(FLAG_CLAMPED)
    if ok and speedup is None and not config.is_baseline and note != "no decode rate":
        flags.append(FLAG_NO_BASELINE)
    if ok and all(m.decode_tps is None and m.ttft_s is not None and m.e2e_s is not None and m.e2e_s - m.ttft_s < 1e-3
                  and (m.completion_tokens or 0) > 1 for m in ok):
        flags.append(FLAG_BURST)
    errors = tuple(dict.fromkeys(str(m.error) for m in cell if m.status == STATUS_ERROR and m.error))[:3]
    return CellRow(
        config_id=config.id, config=config.name, workload=workload.name, algorithm=config.algorithm, tp=config.tp,
        budget=config.budget, state=config.state, n_ok=len(ok), n_zero_output=n_zero, n_error=n_error,
        n_clamped=n_clamped, decode_tps=tps, ttft_s=spread_of(ok, "ttft_s"),
        accept_length=accept, accept_method=method, server_log_accept_length=log_value, server_log_scope=log_scope,
        speedup=speedup, speedup_note=note, lossless=lossless, flags=tuple(flags), errors=errors,
        n_crash=n_crash, expected=expected, coverage=coverage,
        not_run=fold.not_run.get(workload.name) if not cell else None, paired=paired,
    )


# ------------------------------------------------------------------------------------------------ best


def _why_barred(row: CellRow) -> str | None:
    if row.state in FAILED_STATES:
        return row.state
    if row.coverage in (COVERAGE_PARTIAL, COVERAGE_RUNNING):
        return row.coverage_text()
    if row.n_zero_output:
        return f"{row.n_zero_output} zero-output"
    if row.lossless.status == LOSSLESS_MISMATCH:
        return f"lossless mismatch ({len(row.lossless.mismatches)}/{row.lossless.checked})"
    return None


def _best(rows: list[CellRow], configs: list[ConfigSummary], workloads: list[WorkloadInfo]) -> list[Best]:
    out: list[Best] = []
    cut: dict[str, str] = {}
    for row in rows:
        if row.partial and row.config_id not in cut:
            cut[row.config_id] = f"partial on {row.workload}"

    def why_barred(row: CellRow) -> str | None:
        return _why_barred(row) or cut.get(row.config_id)

    tps_values = sorted({c.tp for c in configs if c.tp is not None})
    for workload in workloads:
        measured = [r for r in rows if r.workload == workload.name and r.decode_tps is not None]
        groups: list[tuple[int | None, list[CellRow]]] = [(None, measured)]
        if len(tps_values) > 1:
            groups += [(tp, [r for r in measured if r.tp == tp]) for tp in tps_values]
        for tp, group in groups:
            # ``measured`` holds only rows with a decode figure; mypy does not narrow through the filter.
            ranked = sorted(group, key=lambda r: (-r.decode_tps.median, r.config))  # type: ignore[union-attr]
            eligible = [r for r in ranked if why_barred(r) is None]
            if not eligible:
                continue
            winner = eligible[0]
            assert winner.decode_tps is not None
            barred = tuple(Barred(r.config, r.decode_tps.median if r.decode_tps else None, why_barred(r) or "")
                           for r in ranked if why_barred(r) and r.decode_tps
                           and r.decode_tps.median > winner.decode_tps.median)
            runner = eligible[1] if len(eligible) > 1 else None
            out.append(Best(
                workload=workload.name, tp=tp, config_id=winner.config_id, config=winner.config,
                decode_tps=winner.decode_tps, speedup=winner.speedup,
                runner_up=runner.config if runner else None,
                runner_up_tps=runner.decode_tps if runner else None,
                close_call=bool(runner and runner.decode_tps and runner.decode_tps.overlaps(winner.decode_tps)
                                and winner.decode_tps.repeats > 1),
                barred=barred,
            ))
    return out


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

    def clean(value: Any) -> Any:
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
