"""The event stream: typed, frozen, JSON-round-trippable facts the engine publishes.

Readers (the TUI, the headless printer, the run's event log) subscribe to one stream; replaying the persisted
events rebuilds the state of a run (see :mod:`specbench_tui.core.state`). Events are past-tense facts.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from functools import cached_property
from typing import Any, ClassVar

from specbench_tui.core.records import Measurement, check_field_types


class ConfigState(str, Enum):
    """Where a configuration is in its life."""

    PENDING = "pending"
    LAUNCHING = "launching"
    READY = "ready"
    RUNNING = "running"
    DONE = "done"
    CRASHED = "crashed"
    FAILED = "failed"
    SKIPPED = "skipped"
    NODE_LOST = "node_lost"
    """The cluster node (or its worker) went away mid-run: not a crash; the configuration is queued again."""

    @property
    def final(self) -> bool:
        return self in (ConfigState.DONE, ConfigState.CRASHED, ConfigState.FAILED, ConfigState.SKIPPED)

    @property
    def active(self) -> bool:
        return self in (ConfigState.LAUNCHING, ConfigState.READY, ConfigState.RUNNING)


@dataclass(frozen=True)
class Event:
    """Base of every event; ``ts`` is wall-clock seconds since the epoch."""

    ts: float = field(default_factory=time.time, kw_only=True)
    persist: ClassVar[bool] = True
    """Whether the event goes to the run's event log (log lines and GPU samples do not)."""

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        for key, value in data.items():
            if isinstance(value, Enum):
                data[key] = value.value
        return {"type": type(self).__name__, **data}


@dataclass(frozen=True)
class SweepStarted(Event):
    sweep: str
    run_dir: str
    total_configs: int
    resumed: bool = False


@dataclass(frozen=True)
class ConfigStateChanged(Event):
    config_id: str
    name: str
    state: ConfigState
    reason: str | None = None


@dataclass(frozen=True)
class ServerLaunching(Event):
    config_id: str
    name: str
    argv: tuple[str, ...]
    gpus: tuple[int, ...]
    port: int
    pid: int
    log_path: str
    attempt: int = 1
    keeper_pid: int | None = None
    """The keeper the server runs under (:mod:`specbench_tui.keeper`)."""
    tree_id: str | None = None
    """``SPECBENCH_TREE`` in the environment of every process of this server: how leftovers are recognised."""
    node: str | None = None
    """The cluster node it runs on (``host/node-id``, the Ray executor); None: this machine."""


@dataclass(frozen=True)
class ServerReady(Event):
    config_id: str
    startup_s: float
    context_length: int | None = None
    running_cap: int | None = None
    """The server's running-request cap (SGLang's ``/server_info``), a fact of the configuration; None: not said."""
    graph_ceiling: int | None = None
    """The largest batch the server runs as a CUDA graph, when its info endpoint says."""


@dataclass(frozen=True)
class LogLine(Event):
    config_id: str
    line: str
    level: str = "info"
    """info, warning, error or fatal (from the crash signatures)."""
    persist: ClassVar[bool] = False


@dataclass(frozen=True)
class LogLines(Event):
    """One read of a server's output: its lines in order (the log file on disk has every one of them)."""

    config_id: str
    first: int
    """1-based line number of the batch's first line in the server log."""
    text: str
    """The lines, joined by ``\\n`` (split only by a reader that wants them one by one: :attr:`lines`)."""
    count: int = 0
    """How many lines ``text`` holds (counted when not given)."""
    marked: tuple[tuple[int, str], ...] = ()
    """``(index in lines, level)`` of the lines the engine found fatal (its crash signatures); sparse: a flood
    of plain lines costs nothing here."""
    persist: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if self.count <= 0:
            object.__setattr__(self, "count", self.text.count("\n") + 1)

    @cached_property
    def lines(self) -> tuple[str, ...]:
        return tuple(self.text.split("\n"))

    def to_json(self) -> dict[str, object]:
        """Without ``asdict``'s deep copy."""
        return {"type": "LogLines", "ts": self.ts, "config_id": self.config_id, "first": self.first,
                "text": self.text, "count": self.count, "marked": [list(m) for m in self.marked]}

    def levels(self) -> list[str | None]:
        """The engine's level of every line, in order (None: not marked; a reader's own words decide)."""
        out: list[str | None] = [None] * len(self.lines)
        for index, level in self.marked:
            if 0 <= index < len(out):
                out[index] = level
        return out

    def as_lines(self) -> list[LogLine]:
        """The batch as one :class:`LogLine` per line (for readers that go line by line)."""
        return [LogLine(config_id=self.config_id, line=line, level=level or "info", ts=self.ts)
                for line, level in zip(self.lines, self.levels(), strict=True)]


def log_lines(events: Iterable[Event]) -> list[LogLine]:
    """Every log line in ``events``, batches (:class:`LogLines`) expanded, in order."""
    out: list[LogLine] = []
    for event in events:
        if isinstance(event, LogLines):
            out.extend(event.as_lines())
        elif isinstance(event, LogLine):
            out.append(event)
    return out


@dataclass(frozen=True)
class CrashDetected(Event):
    """A crash signature matched. Published twice: at once with the matched line (``complete`` false: the
    configuration is crashed from that moment), then with the excerpt and the most specific signature once the
    trailing lines are in (``complete`` true)."""

    config_id: str
    signature: str
    line: str
    excerpt: tuple[str, ...]
    log_line_number: int | None = None
    complete: bool = True
    cause: str = ""
    """The crash's one cause, the same in every view (:func:`~specbench_tui.core.signatures.crash_cause`): the
    traceback's exception line, or the signature's own line; read through :attr:`shown_cause`."""

    @property
    def shown_cause(self) -> str:
        """The cause, for records written before ``cause`` was (their matched line)."""
        return self.cause or self.line.strip()


@dataclass(frozen=True)
class WorkloadStarted(Event):
    config_id: str
    workload: str
    expected: int | None = None
    """Measurement keys (items × repeats) the workload has for this configuration, earlier runs' included: what
    a cut workload is ``partial`` of."""


@dataclass(frozen=True)
class MeasurementRecorded(Event):
    config_id: str
    record: dict[str, Any]
    """The :class:`~specbench_tui.core.records.Measurement` as stored in the run's results."""

    @cached_property
    def measurement(self) -> Measurement | None:
        """The record as a typed :class:`Measurement` (parsed once); None when it is malformed."""
        if not isinstance(self.record, dict):
            return None
        try:
            return Measurement.from_json(self.record)
        except (TypeError, ValueError):
            return None


@dataclass(frozen=True)
class WorkloadNotRun(Event):
    """A workload skipped because its server is gone; never a measurement."""

    config_id: str
    workload: str
    reason: str


@dataclass(frozen=True)
class WorkloadFinished(Event):
    """A workload of one configuration ran to its end; ``server_log`` holds the server's own decode figures.

    ``server_log`` is :meth:`specbench_tui.core.logparse.DecodeSummary.to_json` over the ``Decode batch``
    lines logged while this workload ran (measured requests only): lines, accept_length, accept_rate,
    gen_throughput, gen_throughput_max.
    """

    config_id: str
    workload: str
    measured: int = 0
    errors: int = 0
    zero_output: int = 0
    server_log: dict[str, Any] | None = None
    host: dict[str, Any] | None = None
    """The measuring host over the workload (:class:`specbench_tui.core.measuring_host.HostLoad` as JSON)."""
    energy: dict[str, Any] | None = None
    """The GPUs' energy over the measured window (:class:`specbench_tui.core.energy.EnergyWindow` as JSON)."""

    def to_json(self) -> dict[str, object]:
        return _without_energy(super().to_json())


@dataclass(frozen=True)
class ServerStopped(Event):
    config_id: str
    exit_code: int | None
    teardown_s: float
    leftover_pids: tuple[int, ...] = ()


@dataclass(frozen=True)
class ConfigFinished(Event):
    config_id: str
    name: str
    state: ConfigState
    reason: str | None = None
    signature: str | None = None
    server_log_accept_length: float | None = None
    gpu_summary: dict[str, Any] | None = None
    """:meth:`specbench_tui.engine.gpus.GpuSummary.to_json` over the measured window (None: no telemetry)."""
    concurrent: bool = False
    """The sweep ran configurations side by side (``sweep.concurrent``): neighbours may have disturbed it."""


@dataclass(frozen=True)
class QueuePaused(Event):
    pass


@dataclass(frozen=True)
class QueueResumed(Event):
    pass


@dataclass(frozen=True)
class Notice(Event):
    """Something the user should read: a clamped prompt, a missing baseline, a pre-flight failure."""

    level: str
    text: str
    config_id: str | None = None


@dataclass(frozen=True)
class GpuSampled(Event):
    """The latest sample of every GPU of one node (:func:`specbench_tui.engine.gpus.samples_to_json`)."""

    samples: tuple[dict[str, Any], ...]
    node: str | None = None
    """The node whose GPUs these are (as in :attr:`ServerLaunching.node`); None: this machine."""
    persist: ClassVar[bool] = False


@dataclass(frozen=True)
class NodeFingerprinted(Event):
    """A cluster node's environment fingerprint (the environment document the run holds for this machine, taken on that
    node by a remote executor): the engine records it in the run's environment document under ``nodes``."""

    node: str
    """As in :attr:`ServerLaunching.node` (``host/node-id``)."""
    fingerprint: dict[str, Any]


@dataclass(frozen=True)
class LoadPointFinished(Event):
    """One repeat of one load point of a workload ran to its end (:mod:`specbench_tui.core.load`).

    ``wall_s`` is the point's measured window (first request sent to last answer read), which throughputs and
    goodput divide by; ``server_log`` the server's own decode figures over that window, as in
    :class:`WorkloadFinished`.
    """

    config_id: str
    workload: str
    load: str
    repeat: int
    wall_s: float
    requests: int = 0
    errors: int = 0
    server_log: dict[str, Any] | None = None
    host: dict[str, Any] | None = None
    """The measuring host over the point (:class:`specbench_tui.core.measuring_host.HostLoad` as JSON)."""
    energy: dict[str, Any] | None = None
    """The GPUs' energy over the point (:class:`specbench_tui.core.energy.EnergyWindow` as JSON)."""

    def to_json(self) -> dict[str, object]:
        return _without_energy(super().to_json())
    starved: str | None = None
    """Why the measuring client was starved over this point (:func:`specbench_tui.core.measuring_host.starved`);
    its figures are then not reported."""


@dataclass(frozen=True)
class SweepFinished(Event):
    state: str
    """completed, aborted or failed."""
    reason: str | None = None


def _without_energy(data: dict[str, object]) -> dict[str, object]:
    """A window without an energy reading writes no ``energy`` key (the event log reads as before energy)."""
    if data.get("energy") is None:
        data.pop("energy", None)
    return data


EVENT_TYPES: dict[str, type[Event]] = {
    cls.__name__: cls
    for cls in (SweepStarted, ConfigStateChanged, ServerLaunching, ServerReady, LogLine, LogLines, CrashDetected,
                WorkloadStarted, MeasurementRecorded, WorkloadNotRun, WorkloadFinished, ServerStopped,
                ConfigFinished, QueuePaused, QueueResumed, Notice, GpuSampled, NodeFingerprinted, LoadPointFinished,
                SweepFinished)
}


def _marks(raw: list[object]) -> tuple[tuple[int, str], ...]:
    marks: list[tuple[int, str]] = []
    for m in raw:
        if not (isinstance(m, list) and len(m) == 2 and type(m[0]) is int and isinstance(m[1], str)):
            raise ValueError("field 'marked' has the wrong type: pairs of (line index, level) expected")
        marks.append((m[0], m[1]))
    return tuple(marks)


def event_from_json(data: Mapping[str, object]) -> Event:
    """Rebuild an event from its JSON form; raises ValueError for unknown or malformed data."""
    kind = data.get("type")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown event type {kind!r}")
    names = {f.name for f in fields(cls)}
    kwargs: dict[str, Any] = {k: v for k, v in data.items() if k in names}  # each checked against its field:
    check_field_types(cls, kwargs)
    if "state" in kwargs and cls in (ConfigStateChanged, ConfigFinished):
        kwargs["state"] = ConfigState(kwargs["state"])
    for key in ("argv", "gpus", "excerpt", "samples", "leftover_pids"):
        if key in kwargs and isinstance(kwargs[key], list):
            kwargs[key] = tuple(kwargs[key])
    if cls is LogLines and isinstance(kwargs.get("marked"), list):
        kwargs["marked"] = _marks(kwargs["marked"])
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ValueError(str(exc)) from None
