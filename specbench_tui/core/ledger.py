"""The results ledger: one fold of a run's events and measurements that every view reads.

A :class:`Ledger` is built from what a run directory holds (the plan, the events, the results)
and kept current by the live event stream; ``specbench report``, ``compare``, the headless printer, the end
summary and the TUI all read one, and all take their figures from :func:`~specbench_tui.core.analysis.analyse`
over it. A resume, or a client that attaches late, replays the same fold, so it sees the same truth.

What it keeps:

- measurements, one per key (config id, workload, item, repeat), the last recorded winning: a retried request
  replaces its earlier error, and counts once;
- the events the analysis reads (states, launches, crashes, workloads started / finished / not run, notices,
  sweep starts and ends), in order; log lines and GPU samples are not kept;
- counts of ok / zero-output / error measurements, overall and per configuration, updated as measurements
  replace each other (cheap enough to read on every frame);
- where each configuration stands (its last state event) and so the run's :class:`Progress`: configurations
  ran of those to run, skipped ones apart, measurements on record. ``logs``, ``ps``, ``runs``, the TUI's header
  and ``report`` all count with :func:`progress` (``tests/e2e/test_counts_agree.py`` holds them to it).

"The last record per key wins" is written once, in :mod:`specbench_tui.core.fold`; the ledger applies it one
measurement at a time, and readers of the run directory fold into a ledger or call it.

It is pure: no I/O, no threads, no Textual. :meth:`Ledger.snapshot` hands an immutable copy to another thread,
where :meth:`LedgerSnapshot.analyse` runs the analysis (the TUI does so off its UI thread).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from specbench_tui.core.fold import replace
from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
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

if TYPE_CHECKING:  # the analysis is imported when first run: a count of runs (``specbench runs``) needs none
    from specbench_tui.core.results import RunAnalysis

KEPT_EVENTS = (ConfigFinished, ConfigStateChanged, CrashDetected, Notice, ServerLaunching, ServerReady, SweepFinished,
               SweepStarted, WorkloadFinished, WorkloadNotRun, WorkloadStarted, LoadPointFinished, NodeFingerprinted)
"""The events the analysis and :mod:`~specbench_tui.core.nodes` read (a few per configuration and workload)."""
_KEPT_TYPES = frozenset(KEPT_EVENTS)


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
class Progress:
    """How far a run is: the one count every view shows (``2/11 ran, 3 skipped · 40 meas``)."""

    total: int
    """Configurations in the plan (every one, the excluded and skipped included)."""
    ran: int
    """Configurations that ran to an end: done, crashed or failed."""
    skipped: int
    """Configurations skipped, by the plan (excluded) or by a user: out of the count to run."""
    measurements: int
    """Measurements on record, one per key (a retried request counts once)."""

    @property
    def to_run(self) -> int:
        return max(0, self.total - self.skipped)

    @property
    def left(self) -> int:
        """Configurations still to run to an end."""
        return max(0, self.to_run - self.ran)

    @property
    def configs_text(self) -> str:
        """``2/11 ran, 3 skipped``: what ran of what is to run (skipped ones apart, never as done)."""
        to_run = f"{self.to_run}" if self.total else "?"
        return f"{self.ran}/{to_run} ran" + (f", {self.skipped} skipped" if self.skipped else "")

    @property
    def text(self) -> str:
        """``2/11 ran, 3 skipped, 40 meas``."""
        return f"{self.configs_text}, {self.measurements:,} meas"


def progress(states: Mapping[str, ConfigState], total: int, measurements: int) -> Progress:
    """The run's :class:`Progress` from where each configuration stands (``total``: the plan's configurations;
    0 when unknown, then the configurations seen)."""
    skipped = sum(1 for state in states.values() if state is ConfigState.SKIPPED)
    ran = sum(1 for state in states.values() if state.final and state is not ConfigState.SKIPPED)
    return Progress(total=max(total, len(states)) if total else len(states), ran=ran, skipped=skipped,
                    measurements=measurements)


@dataclass(frozen=True)
class LedgerSnapshot:
    """An immutable copy of a ledger at one version, safe to analyse on another thread."""

    version: int
    plan_json: Mapping[str, object]
    measurements: tuple[Measurement, ...]
    events: tuple[Event, ...]
    engine_alive: bool = True

    def analyse(self) -> RunAnalysis:
        from specbench_tui.core.analysis import analyse

        return analyse(self.plan_json, self.measurements, self.events, engine_alive=self.engine_alive)


@dataclass
class Ledger:
    """Measurements by key and the events that say what became of each configuration; see the module docstring."""

    plan_json: Mapping[str, object] = field(default_factory=dict)
    measurements: dict[MeasurementKey, Measurement] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)
    by_config: dict[str, Counts] = field(default_factory=dict)
    version: int = 0
    """Bumped on every change (a cached analysis is current while the version is the same)."""
    engine_alive: bool = True
    """Whether an engine owns the run (a live view, or a run directory whose lock is held); without one, a
    configuration left running is read as interrupted."""
    states: dict[str, ConfigState] = field(default_factory=dict)
    """Config id -> its last state event."""
    _analysis: tuple[int, RunAnalysis] | None = field(default=None, repr=False)

    @classmethod
    def from_run(cls, plan_json: Mapping[str, object] | None, measurements: Iterable[Measurement],
                 events: Iterable[Event], *, engine_alive: bool = True) -> Ledger:
        """The fold of a run directory's contents (measurements in file order: the last per key wins).

        Measurements come from the results file only (the store's truth, checked when read); the copies the
        events carry are not taken from a file."""
        ledger = cls(plan_json=dict(plan_json or {}), engine_alive=engine_alive)
        kept, states, append = _KEPT_TYPES, ledger.states, ledger.events.append
        folded = 0
        for event in events:  # what apply does, the kinds it keeps tested by their exact type (300,000 of them)
            kind = type(event)
            if kind in kept:
                append(event)
                if kind is ConfigStateChanged or kind is ConfigFinished:
                    states[event.config_id] = event.state  # type: ignore[attr-defined]
                folded += 1
            elif kind is not MeasurementRecorded:
                ledger.apply(event)
        ledger.version += folded
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
            if isinstance(event, (ConfigStateChanged, ConfigFinished)):
                self.states[event.config_id] = event.state
            self.version += 1
        return None

    def add(self, measurement: Measurement) -> Measurement | None:
        """Record a measurement; the earlier one with its key (a retry's error) is replaced and returned."""
        old = replace(self.measurements, measurement)  # the one rule (core/fold.py): the last per key wins
        per_config = self.by_config.setdefault(measurement.config_id, Counts())
        if old is not None:
            self.counts.add(old, -1)
            self.by_config.setdefault(old.config_id, Counts()).add(old, -1)
        self.counts.add(measurement)
        per_config.add(measurement)
        self.version += 1
        return old

    def progress(self) -> Progress:
        """Configurations ran / to run / skipped and measurements, as every view counts them."""
        listed = self.plan_json.get("configs")
        configs = [c for c in listed if isinstance(c, Mapping)] if isinstance(listed, list) else []
        states = {str(c.get("id")): ConfigState.SKIPPED for c in configs if c.get("skip_reason")}
        states.update(self.states)  # the plan's exclusions stand until the engine says so itself
        return progress(states, len(configs), len(self.measurements))

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
