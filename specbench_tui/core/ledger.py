"""The results ledger: one fold of a run's events and measurements that every view reads.

A :class:`Ledger` is built from what a run directory holds (``plan.json``, ``events.jsonl``, ``results.jsonl``)
and kept current by the live event stream; ``specbench report``, ``compare``, the headless printer, the end
summary and the TUI all read one, and all take their figures from :func:`~specbench_tui.core.analysis.analyse`
over it. A resume, or a client that attaches late, replays the same fold, so it sees the same truth.

What it keeps:

- measurements, one per key (config id, workload, item, repeat), the last recorded winning: a retried request
  replaces its earlier error, and counts once;
- the events the analysis reads (states, launches, crashes, workloads started / finished / not run, notices,
  sweep starts and ends), in order; log lines and GPU samples are not kept;
- counts of ok / zero-output / error measurements, overall and per configuration, updated as measurements
  replace each other (cheap enough to read on every frame).

It is pure: no I/O, no threads, no Textual. :meth:`Ledger.snapshot` hands an immutable copy to another thread,
where :meth:`LedgerSnapshot.analyse` runs the analysis (the TUI does so off its UI thread).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from specbench_tui.core.results import RunAnalysis
from specbench_tui.core.analysis import analyse
from specbench_tui.core.events import (
    ConfigFinished,
    ConfigStateChanged,
    CrashDetected,
    Event,
    LoadPointFinished,
    MeasurementRecorded,
    NodeFingerprinted,
    Notice,
    ServerLaunching,
    ServerReady,
    SweepFinished,
    SweepStarted,
    WorkloadFinished,
    WorkloadNotRun,
    WorkloadStarted,
)
from specbench_tui.core.records import STATUS_OK, STATUS_ZERO_OUTPUT, Measurement, MeasurementKey

KEPT_EVENTS = (ConfigFinished, ConfigStateChanged, CrashDetected, Notice, ServerLaunching, ServerReady, SweepFinished,
               SweepStarted, WorkloadFinished, WorkloadNotRun, WorkloadStarted, LoadPointFinished, NodeFingerprinted)
"""The events the analysis and :mod:`~specbench_tui.core.nodes` read (a few per configuration and workload)."""


@dataclass
class Counts:
    """Measurements by outcome (one per key)."""

    ok: int = 0
    zero_output: int = 0
    errors: int = 0

    @property
    def total(self) -> int:
        return self.ok + self.zero_output + self.errors

    def add(self, measurement: Measurement, sign: int = 1) -> None:
        if measurement.status == STATUS_OK:
            self.ok += sign
        elif measurement.status == STATUS_ZERO_OUTPUT:
            self.zero_output += sign
        else:
            self.errors += sign


@dataclass(frozen=True)
class LedgerSnapshot:
    """An immutable copy of a ledger at one version, safe to analyse on another thread."""

    version: int
    plan_json: Mapping[str, Any]
    measurements: tuple[Measurement, ...]
    events: tuple[Event, ...]
    engine_alive: bool = True

    def analyse(self) -> RunAnalysis:
        return analyse(self.plan_json, self.measurements, self.events, engine_alive=self.engine_alive)


@dataclass
class Ledger:
    """Measurements by key and the events that say what became of each configuration; see the module docstring."""

    plan_json: Mapping[str, Any] = field(default_factory=dict)
    measurements: dict[MeasurementKey, Measurement] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)
    by_config: dict[str, Counts] = field(default_factory=dict)
    version: int = 0
    """Bumped on every change (a cached analysis is current while the version is the same)."""
    engine_alive: bool = True
    """Whether an engine owns the run (a live view, or a run directory whose lock is held); without one, a
    configuration left running is read as interrupted."""
    _analysis: tuple[int, RunAnalysis] | None = field(default=None, repr=False)

    @classmethod
    def from_run(cls, plan_json: Mapping[str, Any] | None, measurements: Iterable[Measurement],
                 events: Iterable[Event], *, engine_alive: bool = True) -> Ledger:
        """The fold of a run directory's contents (measurements in file order: the last per key wins).

        Measurements come from ``results.jsonl`` only (the store's truth, checked when read); the copies the
        events carry are not taken from a file."""
        ledger = cls(plan_json=dict(plan_json or {}), engine_alive=engine_alive)
        for event in events:
            if not isinstance(event, MeasurementRecorded):
                ledger.apply(event)
        for measurement in measurements:
            ledger.add(measurement)
        return ledger

    def apply(self, event: Event) -> Measurement | None:
        """Fold one live event in; for a measurement, returns the one it replaced (same key), if any."""
        if isinstance(event, MeasurementRecorded):
            measurement = event.measurement
            return self.add(measurement) if measurement is not None else None
        if isinstance(event, KEPT_EVENTS):
            self.events.append(event)
            self.version += 1
        return None

    def add(self, measurement: Measurement) -> Measurement | None:
        """Record a measurement; the earlier one with its key (a retry's error) is replaced and returned."""
        old = self.measurements.pop(measurement.key, None)
        self.measurements[measurement.key] = measurement
        per_config = self.by_config.setdefault(measurement.config_id, Counts())
        if old is not None:
            self.counts.add(old, -1)
            self.by_config.setdefault(old.config_id, Counts()).add(old, -1)
        self.counts.add(measurement)
        per_config.add(measurement)
        self.version += 1
        return old

    def config_counts(self, config_id: str) -> Counts:
        return self.by_config.get(config_id) or Counts()

    def snapshot(self) -> LedgerSnapshot:
        return LedgerSnapshot(self.version, self.plan_json, tuple(self.measurements.values()), tuple(self.events),
                              self.engine_alive)

    def analyse(self) -> RunAnalysis:
        """The analysis of the ledger as it is now (cached until the next change)."""
        if self._analysis is None or self._analysis[0] != self.version:
            self._analysis = (self.version, self.snapshot().analyse())
        return self._analysis[1]
