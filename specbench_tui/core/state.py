"""The state of a run, rebuilt from its events by a pure reducer.

:class:`RunState` folds the event stream of :mod:`specbench_tui.core.events` into what a screen shows: each
configuration's state, reason, crash signature, start-up time and GPUs; the measurements aggregated per
configuration × workload with the speedup over the matched baseline; counts; and an ETA that learns from the
configurations finished so far. It imports nothing of Textual, so the TUI, the headless printer and a replay
of ``events.jsonl`` share it.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    ConfigStateChanged,
    CrashDetected,
    Event,
    GpuSampled,
    MeasurementRecorded,
    Notice,
    QueuePaused,
    QueueResumed,
    ServerLaunching,
    ServerReady,
    ServerStopped,
    SweepFinished,
    SweepStarted,
    WorkloadFinished,
    WorkloadNotRun,
    WorkloadStarted,
    event_from_json,
)
from specbench_tui.core.plan import Plan
from specbench_tui.core.records import STATUS_OK, STATUS_ZERO_OUTPUT, Measurement

_ANALYSED = (ConfigFinished, ConfigStateChanged, CrashDetected, WorkloadNotRun, WorkloadFinished)

PAUSED = "paused"
"""Display state of a pending configuration while the queue is paused (not a :class:`ConfigState`)."""


@dataclass
class ConfigView:
    """One configuration as the queue shows it."""

    config_id: str
    name: str
    order: int
    state: ConfigState = ConfigState.PENDING
    reason: str | None = None
    """One line saying why it did not finish (or why it was skipped)."""
    signature: str | None = None
    """Crash signature name, e.g. ``cuda_illegal_instruction``."""
    crash_line: str | None = None
    crash_excerpt: tuple[str, ...] = ()
    crash_log_line: int | None = None
    """1-based line number of the crash line in the server log, when the engine knows it."""
    gpus: tuple[int, ...] = ()
    """GPUs held right now (empty when no server runs)."""
    last_gpus: tuple[int, ...] = ()
    """GPUs of the latest launch, kept after teardown for display."""
    log_path: str | None = None
    attempt: int = 0
    startup_s: float | None = None
    launched_at: float | None = None
    finished_at: float | None = None
    workload: str | None = None
    """The workload in progress."""
    baseline: str | None = None
    """Name of the matched baseline configuration (same TP)."""
    is_baseline: bool = False
    tp: int | None = None
    algorithm: str | None = None
    measurements: int = 0
    zero_output: int = 0
    errors: int = 0


@dataclass
class ResultCell:
    """Measurements of one configuration on one workload."""

    config_id: str
    workload: str
    decode_tps: list[float] = field(default_factory=list)
    ttft_s: list[float] = field(default_factory=list)
    accept_length: list[float] = field(default_factory=list)
    ok: int = 0
    zero_output: int = 0
    errors: int = 0
    clamped: int = 0
    not_run: str | None = None
    """Why the workload was not run, when it was not."""

    @property
    def count(self) -> int:
        return self.ok + self.zero_output + self.errors

    @property
    def median_decode_tps(self) -> float | None:
        return _median(self.decode_tps)

    @property
    def median_ttft_s(self) -> float | None:
        return _median(self.ttft_s)

    @property
    def median_accept_length(self) -> float | None:
        return _median(self.accept_length)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


@dataclass
class RunState:
    """Everything a screen shows about a run; :meth:`apply` folds one event in."""

    sweep_name: str = ""
    run_dir: str = ""
    total_configs: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    outcome: str | None = None
    """completed, aborted or failed once the sweep has finished."""
    outcome_reason: str | None = None
    paused: bool = False
    configs: dict[str, ConfigView] = field(default_factory=dict)
    cells: dict[tuple[str, str], ResultCell] = field(default_factory=dict)
    workloads: list[str] = field(default_factory=list)
    """Workload names in plan order (extended as measurements arrive)."""
    gpu_samples: tuple[dict[str, Any], ...] = ()
    gpu_sampled_at: float | None = None
    notices: list[Notice] = field(default_factory=list)
    measurements: int = 0
    zero_output: int = 0
    records: list[Measurement] = field(default_factory=list)
    """Every well-formed measurement, for :func:`specbench_tui.core.analysis.analyse`."""
    analysis_events: list[Event] = field(default_factory=list)
    """The events :func:`~specbench_tui.core.analysis.analyse` reads besides the records (states, crashes,
    workloads not run, the server's own per-workload figures, warnings): a few per configuration."""
    last_event_at: float | None = None

    # ------------------------------------------------------------------------------------ construction

    @classmethod
    def from_plan(cls, plan: Plan, run_dir: str = "") -> RunState:
        """A state listing every configuration of ``plan`` as pending (or skipped with the plan's reason)."""
        state = cls(sweep_name=plan.sweep.name, run_dir=run_dir, total_configs=len(plan.configs))
        baselines = {c.baseline for c in plan.configs if c.baseline}
        for order, config in enumerate(plan.configs):
            view = ConfigView(config_id=config.id, name=config.name, order=order, baseline=config.baseline,
                              is_baseline=config.name in baselines, tp=config.tp, algorithm=config.algorithm)
            if config.skipped:
                view.state = ConfigState.SKIPPED
                view.reason = config.skip_reason
            state.configs[config.id] = view
        state.workloads = [w.name for w in plan.workloads]
        return state

    def _config(self, config_id: str, name: str | None = None) -> ConfigView:
        view = self.configs.get(config_id)
        if view is None:
            view = ConfigView(config_id=config_id, name=name or config_id, order=len(self.configs))
            self.configs[config_id] = view
        elif name and view.name != name:
            view.name = name
        return view

    def _cell(self, config_id: str, workload: str) -> ResultCell:
        cell = self.cells.get((config_id, workload))
        if cell is None:
            cell = ResultCell(config_id, workload)
            self.cells[(config_id, workload)] = cell
            if workload not in self.workloads:
                self.workloads.append(workload)
        return cell

    # ------------------------------------------------------------------------------------ the reducer

    def apply(self, event: Event) -> None:
        """Fold one event into the state; unknown events are ignored."""
        self.last_event_at = event.ts
        if isinstance(event, _ANALYSED) or (isinstance(event, Notice) and event.level in ("warning", "error")):
            self.analysis_events.append(event)
        if isinstance(event, SweepStarted):
            self.sweep_name = event.sweep
            self.run_dir = event.run_dir
            self.total_configs = max(event.total_configs, self.total_configs)
            if self.started_at is None or not event.resumed:
                self.started_at = event.ts
            self.finished_at = None
            self.outcome = None
        elif isinstance(event, ConfigStateChanged):
            view = self._config(event.config_id, event.name)
            self._set_state(view, event.state, event.reason, event.ts)
        elif isinstance(event, ServerLaunching):
            view = self._config(event.config_id, event.name)
            if not view.state.active:
                self._set_state(view, ConfigState.LAUNCHING, None, event.ts)
            view.gpus = tuple(event.gpus)
            view.last_gpus = tuple(event.gpus)
            view.log_path = event.log_path
            view.attempt = event.attempt
            view.launched_at = event.ts
            view.startup_s = None
            view.finished_at = None
        elif isinstance(event, ServerReady):
            view = self._config(event.config_id)
            view.startup_s = event.startup_s
        elif isinstance(event, CrashDetected):
            view = self._config(event.config_id)
            view.signature = event.signature
            view.crash_line = event.line
            view.crash_excerpt = tuple(event.excerpt)
            view.crash_log_line = event.log_line_number
        elif isinstance(event, WorkloadStarted):
            self._config(event.config_id).workload = event.workload
            if event.workload not in self.workloads:
                self.workloads.append(event.workload)
        elif isinstance(event, MeasurementRecorded):
            self._measurement(event)
        elif isinstance(event, WorkloadNotRun):
            self._cell(event.config_id, event.workload).not_run = event.reason
        elif isinstance(event, ServerStopped):
            view = self._config(event.config_id)
            view.gpus = ()
        elif isinstance(event, ConfigFinished):
            view = self._config(event.config_id, event.name)
            self._set_state(view, event.state, event.reason, event.ts)
            if event.signature:
                view.signature = event.signature
        elif isinstance(event, QueuePaused):
            self.paused = True
        elif isinstance(event, QueueResumed):
            self.paused = False
        elif isinstance(event, Notice):
            self.notices.append(event)
        elif isinstance(event, GpuSampled):
            self.gpu_samples = tuple(s for s in event.samples if isinstance(s, dict))
            self.gpu_sampled_at = event.ts
        elif isinstance(event, SweepFinished):
            self.finished_at = event.ts
            self.outcome = event.state
            self.outcome_reason = event.reason
            self.paused = False
            for view in self.configs.values():
                view.gpus = ()

    def _set_state(self, view: ConfigView, state: ConfigState, reason: str | None, ts: float) -> None:
        if state in (ConfigState.PENDING, ConfigState.LAUNCHING) and (view.state.final or view.signature):
            view.signature = None
            view.crash_line = None
            view.crash_excerpt = ()
            view.crash_log_line = None
        view.state = state
        if reason is not None or state in (ConfigState.PENDING, ConfigState.LAUNCHING, ConfigState.DONE):
            view.reason = reason
        if state.final:
            view.finished_at = ts
            view.gpus = ()
            view.workload = None
        elif state is ConfigState.PENDING:
            view.finished_at = None
            view.gpus = ()

    def _measurement(self, event: MeasurementRecorded) -> None:
        record = event.record if isinstance(event.record, dict) else {}
        workload = str(record.get("workload", "?"))
        config_id = str(record.get("config_id") or event.config_id)
        view = self._config(config_id, record.get("config") if isinstance(record.get("config"), str) else None)
        cell = self._cell(config_id, workload)
        status = record.get("status")
        try:
            self.records.append(Measurement.from_json(record))
        except (ValueError, TypeError):
            pass
        self.measurements += 1
        view.measurements += 1
        if record.get("clamped"):
            cell.clamped += 1
        if status == STATUS_ZERO_OUTPUT:
            cell.zero_output += 1
            view.zero_output += 1
            self.zero_output += 1
        elif status == STATUS_OK:
            cell.ok += 1
            for key, values in (("decode_tps", cell.decode_tps), ("ttft_s", cell.ttft_s),
                                ("accept_length", cell.accept_length)):
                value = record.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value):
                    values.append(float(value))
        else:
            cell.errors += 1
            view.errors += 1

    # ------------------------------------------------------------------------------------ derived views

    def display_state(self, view: ConfigView) -> str:
        """The state word the queue shows: a pending configuration reads ``paused`` while the queue is."""
        if self.paused and view.state is ConfigState.PENDING:
            return PAUSED
        return view.state.value

    def ordered_configs(self) -> list[ConfigView]:
        return sorted(self.configs.values(), key=lambda v: v.order)

    def by_name(self, name: str) -> ConfigView | None:
        return next((v for v in self.configs.values() if v.name == name), None)

    def active(self) -> list[ConfigView]:
        """Configurations with a server starting or running."""
        return [v for v in self.ordered_configs() if v.state.active]

    @property
    def finished_count(self) -> int:
        return sum(1 for v in self.configs.values() if v.state.final)

    @property
    def total(self) -> int:
        return max(self.total_configs, len(self.configs))

    def counts(self) -> dict[str, int]:
        """How many configurations are in each display state."""
        out: dict[str, int] = {}
        for view in self.configs.values():
            key = self.display_state(view)
            out[key] = out.get(key, 0) + 1
        return out

    def gpu_holders(self) -> dict[int, str]:
        """GPU index → name of the configuration whose server holds it."""
        return {gpu: view.name for view in self.ordered_configs() for gpu in view.gpus}

    def speedup(self, config_id: str, workload: str) -> float | None:
        """Median decode tok/s over the matched baseline's (same TP, same workload); None when unknown."""
        view = self.configs.get(config_id)
        cell = self.cells.get((config_id, workload))
        if view is None or cell is None or cell.median_decode_tps is None:
            return None
        if view.is_baseline and not view.baseline:
            return 1.0
        if not view.baseline:
            return None
        base_view = self.by_name(view.baseline)
        if base_view is None:
            return None
        base_cell = self.cells.get((base_view.config_id, workload))
        base = base_cell.median_decode_tps if base_cell else None
        if not base:
            return None
        return cell.median_decode_tps / base

    def elapsed_s(self, now: float) -> float:
        if self.started_at is None:
            return 0.0
        end = self.finished_at if self.finished_at is not None else now
        return max(0.0, end - self.started_at)

    def mean_config_s(self) -> float | None:
        """Mean wall time of the configurations that ran to an end (launch to finish)."""
        durations = [v.finished_at - v.launched_at for v in self.configs.values()
                     if v.state in (ConfigState.DONE, ConfigState.CRASHED, ConfigState.FAILED)
                     and v.launched_at is not None and v.finished_at is not None and v.finished_at >= v.launched_at]
        return sum(durations) / len(durations) if durations else None

    def eta_s(self, now: float) -> float | None:
        """Seconds until the sweep ends, learnt from the finished configurations; None until one finishes.

        A running configuration past the mean is assumed to need a tenth of it more.
        """
        if self.outcome is not None:
            return 0.0
        mean = self.mean_config_s()
        if mean is None:
            return None
        pending = sum(1 for v in self.configs.values() if v.state is ConfigState.PENDING)
        active = [v for v in self.configs.values() if v.state.active]
        left = pending * mean + sum(max(mean - (now - (v.launched_at or now)), 0.1 * mean) for v in active)
        return left / max(1, len(active))


def replay(events: Iterable[Event], plan: Plan | None = None) -> RunState:
    """The state after ``events`` (on top of ``plan``'s configurations when given)."""
    state = RunState.from_plan(plan) if plan is not None else RunState()
    for event in events:
        state.apply(event)
    return state


def read_events(path: str | Path) -> list[Event]:
    """Events of an ``events.jsonl``; a malformed or cut line is skipped, never fatal."""
    events: list[Event] = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                data = json.loads(line)
                events.append(event_from_json(data))
            except (ValueError, TypeError, AttributeError):
                continue
    return events
