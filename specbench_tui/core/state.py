"""The state of a run, rebuilt from its events by a pure reducer.

:class:`RunState` folds the event stream of :mod:`specbench_tui.core.events` into what a screen shows: each
configuration's state, reason, crash signature, start-up time and GPUs; counts; and an ETA that learns from the
configurations finished so far. Results are not aggregated here: the state holds the run's
:class:`~specbench_tui.core.ledger.Ledger` (one measurement per key), and every median, speedup and acceptance
a screen shows is :func:`~specbench_tui.core.analysis.analyse` over it, the same figures ``specbench report``
prints. :meth:`RunState.from_history` starts from what a run directory already holds, so a resumed run opens
with its past. It imports nothing of Textual.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from specbench_tui.core.engines import simulator
from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    ConfigStateChanged,
    CrashDetected,
    Event,
    GpuSampled,
    MeasurementRecorded,
    NodeFingerprinted,
    Notice,
    QueuePaused,
    QueueResumed,
    ServerLaunching,
    ServerReady,
    ServerStopped,
    SweepFinished,
    SweepStarted,
    WorkloadStarted,
    event_from_json,
)
from specbench_tui.core.ledger import Ledger
from specbench_tui.core.nodes import node_labels
from specbench_tui.core.plan import Plan
from specbench_tui.core.records import Measurement

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
    node: str | None = None
    """The cluster node of the latest launch (``ServerLaunching.node``), kept after teardown; None: this machine."""
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
    workloads: list[str] = field(default_factory=list)
    """Workload names in plan order (extended as measurements arrive)."""
    gpu_samples: tuple[dict[str, Any], ...] = ()
    """The latest sample of every GPU, node by node (this machine's first), each carrying its ``node``."""
    gpu_samples_by_node: dict[str | None, tuple[dict[str, Any], ...]] = field(default_factory=dict)
    """The latest samples of each node (None: this machine), as its last :class:`GpuSampled` gave them."""
    gpu_sampled_at: float | None = None
    node_fingerprints: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Cluster node -> its environment fingerprint (:class:`NodeFingerprinted`)."""
    notices: list[Notice] = field(default_factory=list)
    ledger: Ledger = field(default_factory=Ledger)
    """The run's results (one measurement per key) and the events the analysis reads."""
    simulated: bool = False
    """The servers are the simulator's and the GPUs the fake box's: every figure is invented (said on screen)."""
    last_event_at: float | None = None

    @property
    def measurements(self) -> int:
        """Measurements in the run, one per key (a retried request counts once)."""
        return self.ledger.counts.total

    @property
    def zero_output(self) -> int:
        return self.ledger.counts.zero_output

    # ------------------------------------------------------------------------------------ construction

    @classmethod
    def from_plan(cls, plan: Plan, run_dir: str = "") -> RunState:
        """A state listing every configuration of ``plan`` as pending (or skipped with the plan's reason)."""
        state = cls(sweep_name=plan.sweep.name, run_dir=run_dir, total_configs=len(plan.configs),
                    ledger=Ledger(plan_json=plan.to_json()), simulated=simulator.simulated(plan.sweep.engine))
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

    @classmethod
    def from_history(cls, plan: Plan, run_dir: str, measurements: Iterable[Measurement],
                     events: Iterable[Event], *, live: bool = False) -> RunState:
        """The state a run directory already holds (a resumed run): every earlier state, result and count, as
        ``specbench report`` reads them (a configuration a killed engine left running reads running until the
        resumed engine re-queues it, a moment later); no GPU is held. ``live``: the engine that wrote it still
        runs (a client attaching), so the running configurations keep their GPUs."""
        state = cls.from_plan(plan, run_dir)
        for event in events:
            if not isinstance(event, MeasurementRecorded):  # the results file is the measurements' truth
                state.apply(event)
        for measurement in measurements:
            state.ledger.add(measurement)
            if measurement.workload not in state.workloads:
                state.workloads.append(measurement.workload)
        for view in state.configs.values():
            counts = state.ledger.config_counts(view.config_id)
            view.measurements, view.zero_output, view.errors = counts.total, counts.zero_output, counts.errors
            if not (live and view.state.active):
                view.gpus = ()
        return state

    def _config(self, config_id: str, name: str | None = None) -> ConfigView:
        view = self.configs.get(config_id)
        if view is None:
            view = ConfigView(config_id=config_id, name=name or config_id, order=len(self.configs))
            self.configs[config_id] = view
        elif name and view.name != name:
            view.name = name
        return view

    # ------------------------------------------------------------------------------------ the reducer

    def apply(self, event: Event) -> None:
        """Fold one event into the state; unknown events are ignored."""
        self.last_event_at = event.ts
        self.ledger.apply(event)
        for kind, reduce in self._REDUCERS:
            if isinstance(event, kind):
                reduce(self, event)
                return

    def _sweep_started(self, event: SweepStarted) -> None:
        self.sweep_name = event.sweep
        self.run_dir = event.run_dir
        self.total_configs = max(event.total_configs, self.total_configs)
        if self.started_at is None or not event.resumed:
            self.started_at = event.ts
        self.finished_at = None
        self.outcome = None

    def _state_changed(self, event: ConfigStateChanged) -> None:
        self._set_state(self._config(event.config_id, event.name), event.state, event.reason, event.ts)

    def _launching(self, event: ServerLaunching) -> None:
        view = self._config(event.config_id, event.name)
        if not view.state.active:
            self._set_state(view, ConfigState.LAUNCHING, None, event.ts)
        view.gpus = tuple(event.gpus)
        view.last_gpus = tuple(event.gpus)
        view.node = event.node if isinstance(event.node, str) else None
        view.log_path = event.log_path
        view.attempt = event.attempt
        view.launched_at = event.ts
        view.startup_s = None
        view.finished_at = None

    def _ready(self, event: ServerReady) -> None:
        self._config(event.config_id).startup_s = event.startup_s

    def _crash(self, event: CrashDetected) -> None:
        """A crash signature matched: the configuration reads crashed from this moment (red first); its server
        still holds its GPUs until :class:`ServerStopped`, and :class:`ConfigFinished` gives its final reason."""
        view = self._config(event.config_id)
        if view.state.active:
            view.state = ConfigState.CRASHED
        view.signature = event.signature
        view.crash_line = event.line
        view.crash_excerpt = tuple(event.excerpt)
        view.crash_log_line = event.log_line_number

    def _workload_started(self, event: WorkloadStarted) -> None:
        self._config(event.config_id).workload = event.workload
        if event.workload not in self.workloads:
            self.workloads.append(event.workload)

    def _server_stopped(self, event: ServerStopped) -> None:
        self._config(event.config_id).gpus = ()

    def _finished(self, event: ConfigFinished) -> None:
        view = self._config(event.config_id, event.name)
        self._set_state(view, event.state, event.reason, event.ts)
        if event.signature:
            view.signature = event.signature

    def _paused(self, event: QueuePaused | QueueResumed) -> None:
        self.paused = isinstance(event, QueuePaused)

    def _notice(self, event: Notice) -> None:
        self.notices.append(event)

    def _fingerprinted(self, event: NodeFingerprinted) -> None:
        if isinstance(event.fingerprint, dict):
            self.node_fingerprints[event.node] = event.fingerprint

    def _sweep_finished(self, event: SweepFinished) -> None:
        self.finished_at = event.ts
        self.outcome = event.state
        self.outcome_reason = event.reason
        self.paused = False
        for view in self.configs.values():
            view.gpus = ()

    def _gpu_sampled(self, event: GpuSampled) -> None:
        node = event.node if isinstance(event.node, str) else None
        samples = (sample if "node" in sample and sample["node"] == node else {**sample, "node": node}
                   for sample in event.samples if isinstance(sample, dict))
        self.gpu_samples_by_node[node] = tuple(sorted(samples, key=_by_index))
        self.gpu_samples = tuple(sample for key in sorted(self.gpu_samples_by_node, key=lambda n: (n is not None, n))
                                 for sample in self.gpu_samples_by_node[key])
        self.gpu_sampled_at = event.ts

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
        """Per-configuration counts follow the ledger's (so a retried key replaces its error, never adds)."""
        measurement = event.measurement
        if measurement is None:
            return
        view = self._config(measurement.config_id, measurement.config)
        counts = self.ledger.config_counts(measurement.config_id)
        view.measurements, view.zero_output, view.errors = counts.total, counts.zero_output, counts.errors
        if measurement.workload not in self.workloads:
            self.workloads.append(measurement.workload)

    _REDUCERS: ClassVar[tuple[tuple[type[Event] | tuple[type[Event], ...], Callable[..., None]], ...]] = (
        (SweepStarted, _sweep_started), (ConfigStateChanged, _state_changed), (ServerLaunching, _launching),
        (ServerReady, _ready), (CrashDetected, _crash), (WorkloadStarted, _workload_started),
        (MeasurementRecorded, _measurement), (ServerStopped, _server_stopped), (ConfigFinished, _finished),
        ((QueuePaused, QueueResumed), _paused), (Notice, _notice), (GpuSampled, _gpu_sampled),
        (NodeFingerprinted, _fingerprinted), (SweepFinished, _sweep_finished),
    )
    """How each kind of event changes the state (the first kind it is an instance of)."""

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
        """GPU index of this machine → name of the configuration whose server holds it."""
        return {gpu: view.name for view in self.ordered_configs() if view.node is None for gpu in view.gpus}

    def node_gpu_holders(self) -> dict[tuple[str | None, int], str]:
        """(node, GPU index) → name of the configuration whose server holds it (node None: this machine)."""
        return {(view.node, gpu): view.name for view in self.ordered_configs() for gpu in view.gpus}

    def node_labels(self) -> dict[str | None, str]:
        """Each node's short label for display (:func:`~specbench_tui.core.nodes.node_labels`)."""
        return node_labels(self.nodes())

    @property
    def on_nodes(self) -> bool:
        """Whether any configuration ran, or any GPU was sampled, on a cluster node other than this machine."""
        return (any(view.node is not None for view in self.configs.values())
                or any(node is not None for node in self.gpu_samples_by_node))

    def nodes(self) -> list[str | None]:
        """Every node seen (launches, GPU samples, fingerprints), this machine (None) first when seen."""
        seen: dict[str | None, None] = {}
        for key in self.gpu_samples_by_node:
            seen[key] = None
        for view in self.ordered_configs():
            if view.launched_at is not None or view.node is not None:
                seen[view.node] = None
        for node in self.node_fingerprints:
            seen[node] = None
        return sorted(seen, key=lambda n: (n is not None, n or ""))

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


def _by_index(sample: dict[str, Any]) -> tuple[bool, int]:
    index = sample.get("index")
    return (False, index) if isinstance(index, int) and not isinstance(index, bool) else (True, 0)


def replay(events: Iterable[Event], plan: Plan | None = None) -> RunState:
    """The state after ``events`` (on top of ``plan``'s configurations when given)."""
    state = RunState.from_plan(plan) if plan is not None else RunState()
    for event in events:
        state.apply(event)
    return state


def read_events(path: str | Path) -> list[Event]:
    """Events of a run's event log; a malformed or cut line is skipped, never fatal."""
    events: list[Event] = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                data = json.loads(line)
                events.append(event_from_json(data))
            except (ValueError, TypeError, AttributeError):
                continue
    return events
