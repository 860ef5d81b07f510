"""Results you can act on: per configuration × workload figures, speedups, acceptance, losslessness, the best.

Pure functions over what a run directory holds (no I/O, no Textual), shared by ``specbench report``,
``specbench compare`` and the TUI's results table.

API
---
``analyse(plan_json, measurements, events=()) -> RunAnalysis``

- ``plan_json``: the run's plan as a dict (``Plan.to_json()``), read once into a
  :class:`~specbench_tui.core.plan_summary.PlanSummary`; ``{}`` when it is missing, in which case configurations
  are taken from the measurements and events (no TP, budget or baseline, so no speedups).
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

from specbench_tui.core.acceptance import AcceptanceAnalysis, ServerCounts, analyse_acceptance, server_counts
from specbench_tui.core.cells import acceptance, best_cells, cell_row, spread_of
from specbench_tui.core.engines.base import EngineProfile, declared_speculation
from specbench_tui.core.engines.registry import get_profile
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
from specbench_tui.core.fold import last_per_key
from specbench_tui.core.plan_summary import PlanSummary, PlannedRecord
from specbench_tui.core.records import (
    STATUS_OK,
    STATUS_ZERO_OUTPUT,
    Measurement,
)
from specbench_tui.core.results import (
    ACCEPT_FROM_SERVER,
    aggregate,
    FLAG_MISMATCH,
    CellRow,
    ConfigSummary,
    ConfigTotals,
    RunAnalysis,
    WorkloadInfo,
)

BUDGET_PARAMS = ("budget", "draft_budget", "num_draft_tokens", "draft_tokens")
"""Matrix parameters read as the draft budget, in this order."""


STATE_INTERRUPTED = "interrupted"
"""A configuration its engine left starting or running when it died (a kill, a lost machine): no engine owns
the run directory any more, so it is not running; resume runs the rest."""


def analyse(plan_json: Mapping[str, object] | None, measurements: Iterable[Measurement],
            events: Iterable[Event] = (), *, engine_alive: bool = True) -> RunAnalysis:
    """Aggregate one run; see the module docstring for the rules. ``engine_alive=False`` says no engine owns
    the run directory: a configuration its events leave starting or running is then ``interrupted``."""
    plan_json = plan_json or {}
    plan = PlanSummary.parse(plan_json)
    measurements = last_per_key(measurements)  # one per key, the last recorded (a retried key counts once)
    events = list(events)
    notes = _plan_notes(plan)
    folds: dict[str, _Fold] = {}
    configs = _configs(plan, measurements, events, notes, folds)
    if not engine_alive:
        configs = _interrupted(configs)
    loaded = plan.loaded
    load_ms = [m for m in measurements if m.load is not None or m.workload in loaded]
    cell_ms = [m for m in measurements if m.load is None and m.workload not in loaded]
    workloads = [w for w in _workloads(plan, cell_ms) if w.name not in loaded]
    by_cell: dict[tuple[str, str], list[Measurement]] = defaultdict(list)
    for m in cell_ms:
        by_cell[(m.config_id, m.workload)].append(m)
    rows = _cell_rows(configs, workloads, folds, by_cell)
    notes += _missing_baselines(configs, notes)
    current, history = _notices(events, {c.id: c.name for c in configs})
    notes += current
    analysis = RunAnalysis(sweep=plan.sweep, configs=tuple(configs),
                           workloads=tuple(workloads), rows=tuple(rows), best=tuple(best_cells(rows, configs, workloads)),
                           notes=tuple(dict.fromkeys(notes)), history=tuple(dict.fromkeys(history)),
                           measurement_counts=_status_counts(measurements))
    by_config: dict[str, list[Measurement]] = defaultdict(list)
    for m in cell_ms:
        by_config[m.config_id].append(m)
    load = None
    if loaded or load_ms:
        from specbench_tui.core.crossover.analyse import analyse_load  # the load half: it reads the load specs

        load = analyse_load(plan_json, load_ms, events, configs, {r.config for r in rows if FLAG_MISMATCH in r.flags})
    from specbench_tui.core.crossover.ladder import analyse_ladder  # per rung figures and C* of context ladders

    return _replace_analysis(analysis, totals=tuple(_totals(analysis, c, by_config.get(c.id, [])) for c in configs),
                             load=load, ladder=analyse_ladder(plan_json, cell_ms, configs), acceptance=_acceptance_of(plan, configs, workloads, cell_ms, folds))


def _plan_notes(plan: PlanSummary) -> list[str]:
    """The plan's own notes, and one when there is no plan to read configurations from."""
    notes = list(plan.notes)
    if not plan.has_configs:
        notes.append("plan.json is missing or empty: configurations are taken from the results and events, "
                     "without TP, draft budget or baseline, so no speedups")
    return notes


def _interrupted(configs: list[ConfigSummary]) -> list[ConfigSummary]:
    """The configurations a dead engine left starting or running, said ``interrupted``."""
    return [_replace(c, state=STATE_INTERRUPTED, reason=c.reason or "its engine stopped; resume runs the rest")
            if c.state in ("launching", "ready", "running") else c for c in configs]


def _cell_rows(configs: list[ConfigSummary], workloads: list[WorkloadInfo], folds: dict[str, _Fold],
               by_cell: dict[tuple[str, str], list[Measurement]]) -> list[CellRow]:
    """One row per configuration and workload, each with its matched baseline's measurements."""
    by_name = {c.name: c for c in configs}
    expected = _expected(workloads, folds, by_cell, configs)
    rows: list[CellRow] = []
    for config in configs:
        baseline = by_name.get(config.baseline) if config.baseline else None
        fold = folds.get(config.id) or _Fold()
        for workload in workloads:
            base_ms = by_cell.get((baseline.id, workload.name), []) if baseline else []
            rows.append(cell_row(config, workload, by_cell.get((config.id, workload.name), []), baseline, base_ms,
                                 fold.not_run, fold.current_workload, expected.get((config.id, workload.name))))
    return rows


def _missing_baselines(configs: list[ConfigSummary], notes: list[str]) -> list[str]:
    """A note per baseline that configurations are matched to but the run does not hold (unless one says so)."""
    names = {c.name for c in configs}
    added: list[str] = []
    for name in sorted({c.baseline for c in configs if c.baseline and c.baseline not in names}):
        if not any(name in n for n in (*notes, *added)):
            added.append(f"baseline '{name}' is not in this run: configurations matched to it have no speedup")
    return added


def _status_counts(measurements: list[Measurement]) -> tuple[int, int, int]:
    """Measurements that are OK, zero-output and failed."""
    ok = sum(1 for m in measurements if m.status == STATUS_OK)
    zero = sum(1 for m in measurements if m.status == STATUS_ZERO_OUTPUT)
    return ok, zero, len(measurements) - ok - zero


def _acceptance_of(plan: PlanSummary, configs: list[ConfigSummary], workloads: list[WorkloadInfo],
                   cell_ms: list[Measurement], folds: dict[str, _Fold]) -> AcceptanceAnalysis:
    """The acceptance figures of every configuration, against its baseline's."""
    ids = {c.name: c.id for c in configs}
    return analyse_acceptance(
        [(c.id, c.name, ids.get(c.baseline) if c.baseline else None) for c in configs],
        [w.name for w in workloads], cell_ms,
        {(i, w): p for i, f in folds.items() for w, p in f.log_positions.items()},
        engine=plan.engine)


def _replace_analysis(analysis: RunAnalysis, **changes: object) -> RunAnalysis:
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
    attempt_of = _attempts(events)
    current_attempt = attempt_of[-1] if attempt_of else 0
    last_launch = _last_launches(events)
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


def _attempts(events: list[Event]) -> list[int]:
    """The attempt of the whole sweep each event belongs to: one ends with its SweepFinished (a failed pre-flight
    publishes one without a SweepStarted) or where the next SweepStarted finds one already started (an engine
    killed mid-run)."""
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
    return attempt_of


def _last_launches(events: list[Event]) -> dict[str, int]:
    """Per configuration, the index of the event that last launched or requeued it."""
    last_launch: dict[str, int] = {}
    for index, event in enumerate(events):
        if isinstance(event, ServerLaunching) or (isinstance(event, ConfigStateChanged)  # launched or requeued
                                                   and event.state == ConfigState.PENDING and event.reason != "resumed"):
            last_launch[event.config_id] = index
    return last_launch


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
    log_positions: dict[str, ServerCounts] = field(default_factory=dict)
    """workload → the server's speculative-decoding counters over it (vLLM, llama.cpp)."""
    expected: dict[str, int] = field(default_factory=dict)
    current_workload: str | None = None
    startup_s: float | None = None


def _fold_state(fold: _Fold, event: ConfigStateChanged) -> None:
    fold.state = event.state.value
    fold.name = fold.name or event.name
    if not event.state.final:  # it runs (or waits) again: its old end is past
        fold.finished = None
    if event.state in (ConfigState.PENDING, ConfigState.LAUNCHING):  # a new attempt
        fold.crash, fold.not_run, fold.current_workload = None, {}, None


def _fold_crash(fold: _Fold, event: CrashDetected) -> None:
    fold.crash = event
    if fold.state in ("launching", "ready", "running"):  # crashed from the first match on (red first)
        fold.state = ConfigState.CRASHED.value


def _fold_workload_started(fold: _Fold, event: WorkloadStarted) -> None:
    fold.current_workload = event.workload
    if isinstance(event.expected, int) and event.expected > 0:
        fold.expected[event.workload] = event.expected


def _fold_workload_finished(fold: _Fold, event: WorkloadFinished) -> None:
    fold.current_workload = None
    log = event.server_log
    if not isinstance(log, dict):
        return
    value = log.get("accept_length")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        fold.log_accept[event.workload] = float(value)
    positions = server_counts(log)
    if positions is not None:
        fold.log_positions[event.workload] = positions


def _fold_event(fold: _Fold, event: Event) -> None:
    """One event's part of its configuration's fold."""
    if isinstance(event, ConfigFinished):
        fold.finished, fold.state, fold.current_workload = event, event.state.value, None
        fold.name = fold.name or event.name
    elif isinstance(event, ConfigStateChanged):
        _fold_state(fold, event)
    elif isinstance(event, ServerLaunching):
        fold.crash, fold.not_run = None, {}
    elif isinstance(event, CrashDetected):
        _fold_crash(fold, event)
    elif isinstance(event, ServerReady):
        fold.startup_s = event.startup_s
    elif isinstance(event, WorkloadNotRun):
        fold.not_run[event.workload] = event.reason
    elif isinstance(event, WorkloadStarted):
        _fold_workload_started(fold, event)
    elif isinstance(event, WorkloadFinished):
        _fold_workload_finished(fold, event)


def _fold_events(events: list[Event]) -> dict[str, _Fold]:
    folds: dict[str, _Fold] = defaultdict(_Fold)
    for event in events:
        config_id = getattr(event, "config_id", None)
        if isinstance(config_id, str):
            _fold_event(folds[config_id], event)
    return folds


def _configs(plan: PlanSummary, measurements: list[Measurement], events: list[Event],
             notes: list[str], folds_out: dict[str, _Fold]) -> list[ConfigSummary]:
    folds = _fold_events(events)
    folds_out.update(folds)
    planned = plan.configs
    baseline_names = plan.baseline_names
    measured: dict[str, set[str]] = defaultdict(set)
    for m in measurements:
        measured[m.config_id].add(m.workload)
    engine = _engine(plan.engine)
    out: list[ConfigSummary] = []
    for record in planned:
        out.append(_summary(record, record.name in baseline_names, folds.get(record.id),
                            measured.get(record.id, set()), engine))
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
        stray = PlannedRecord(id=config_id, name=stray_names[config_id])
        summary = _summary(stray, False, folds.get(config_id), measured.get(config_id, set()), engine)
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


def _replace(summary: ConfigSummary, **changes: object) -> ConfigSummary:
    return ConfigSummary(**{**summary.__dict__, **changes})


def _engine(name: str) -> EngineProfile | None:
    """The engine the run's plan names (``sglang`` for a plan from before plans named it); None when it is
    not registered in this process (a report of a run on an engine added elsewhere: declared algorithms only)."""
    try:
        return get_profile(name)
    except KeyError:
        return None


def _summary(record: PlannedRecord, is_baseline: bool, fold: _Fold | None, measured: set[str],
             engine: EngineProfile | None) -> ConfigSummary:
    argv = list(record.argv)
    fold = fold or _Fold()
    finished = fold.finished
    state, reason, signature = _state(record.skip_reason, fold, measured)
    crash = fold.crash if state in ("crashed", "failed") else None
    return ConfigSummary(
        id=record.id, name=record.name, algorithm=record.algorithm, tp=record.tp,
        budget=_budget(record, argv, engine), baseline=record.baseline, is_baseline=is_baseline,
        speculative=_speculative(record, argv, engine), state=state, reason=reason,
        signature=signature or (crash.signature if crash else None),
        crash_line=crash.line if crash else None, excerpt=tuple(crash.excerpt) if crash else (),
        server_log_accept_length=finished.server_log_accept_length if finished else None,
        gpu_summary=finished.gpu_summary if finished else None,
        workloads_not_run=tuple((w, why) for w, why in fold.not_run.items() if w not in measured),
        workload_log_accept=tuple(fold.log_accept.items()), startup_s=fold.startup_s,
    )


def _speculative(record: PlannedRecord, argv: list[str], engine: EngineProfile | None) -> bool:
    """Whether the configuration speculates: as the plan recorded it, else (a plan from before plans recorded it)
    by the engine's rule."""
    if record.speculative is not None:
        return record.speculative
    if engine is not None:
        return engine.speculative(argv, record.algorithm)
    return declared_speculation(argv, record.algorithm)


def _state(skip_reason: str | None, fold: _Fold, measured: set[str]) -> tuple[str, str | None, str | None]:
    """The configuration's state, its reason and its crash signature: as it finished, else as its events leave it,
    else ``skipped`` by the plan, ``incomplete`` with measurements and no events, or ``pending``."""
    finished = fold.finished
    if finished is not None:
        return finished.state.value, finished.reason or skip_reason, finished.signature
    if skip_reason:
        return "skipped", skip_reason, None
    if fold.state is not None:
        return fold.state, skip_reason, None
    return ("incomplete" if measured else "pending"), skip_reason, None


def _budget(record: PlannedRecord, argv: Sequence[str], engine: EngineProfile | None) -> int | None:
    """A matrix parameter named as the draft budget, else the one the plan recorded from the argv (by the
    engine's rule), else the engine's rule now (a plan from before plans recorded it)."""
    for key in BUDGET_PARAMS:
        value = record.params.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    if record.budget_recorded:
        return record.draft_budget
    return engine.draft_budget(argv) if engine is not None else None


def _workloads(plan: PlanSummary, measurements: list[Measurement]) -> list[WorkloadInfo]:
    out = [WorkloadInfo(name=w.name, kind=w.kind, temperature=w.temperature, repeats=w.repeats)
           for w in plan.workloads]
    known = {w.name for w in out}
    for name in dict.fromkeys(m.workload for m in measurements):
        if name not in known:
            out.append(WorkloadInfo(name=name, kind="?", temperature=None, repeats=None))
            known.add(name)
    return out
