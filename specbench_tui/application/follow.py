"""``specbench logs RUN [--follow]``: a run's events as headless lines, each with the progress count and an ETA.

The past comes from the run directory; with ``--follow`` and a live engine the lines go on from its stream
(attached read-only, exactly where the file ended) until the sweep ends. Each line reads
``[HH:MM:SS 12/200 ran, 3 skipped, 1,234 meas, ETA ~1:02:00] text``: configurations ran of those to run (the
skipped and excluded ones apart), measurements on record (one per key), and the time left, counted and
estimated as the TUI's header does (the ledger's progress, :mod:`specbench_tui.core.eta`).
"""

from __future__ import annotations

import heapq
import queue
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TextIO

from specbench_tui.core.errors import SweepError
from specbench_tui.core.eta import describe, estimate
from specbench_tui.core.events import Event, MeasurementRecorded, SweepFinished
from specbench_tui.core.plan import Plan
from specbench_tui.core.records import Measurement
from specbench_tui.core.state import RunState
from specbench_tui.application.headless import Printer
from specbench_tui.rundir import load_plan
from specbench_tui.rundir.store import StoreError


class ProgressPrinter(Printer):
    """The headless printer, its lines stamped with the event's time, progress and ETA: the ledger's
    :class:`~specbench_tui.core.ledger.Progress` and :func:`~specbench_tui.core.eta.estimate`, as the TUI's
    header counts and estimates them."""

    def __init__(self, plan: Plan, out: TextIO | None = None) -> None:
        super().__init__(plan, out if out is not None else sys.stdout)
        self.view = RunState.from_plan(plan)
        """Each configuration's times (what the estimate reads)."""
        self._ts = time.time()

    def __call__(self, event: Event) -> None:
        self._ts = event.ts
        self.view.apply(event)
        super().__call__(event)

    def eta(self) -> str:
        progress = self.ledger.progress()
        return describe(estimate(self.view.configs.values(), self._ts), left=progress.left)

    def say_end(self) -> None:
        """The closing line of a run directory's record: where its counts stand after its last event."""
        self._say("end of the run directory's record")

    def _say(self, text: str) -> None:
        stamp = time.strftime("%H:%M:%S", time.localtime(self._ts))
        progress = self.ledger.progress()
        self.write(f"[{stamp} {progress.text}, ETA {self.eta()}] {text}")


def _when(measurement: Measurement) -> float:
    started = measurement.started_at or 0.0
    return started + (measurement.e2e_s or 0.0)


def in_order(events: Iterable[Event], measurements: Iterable[Measurement]) -> Iterator[Event]:
    """The run's events with its measurements (the results file, their only record) put back among them by time."""
    recorded = sorted((MeasurementRecorded(config_id=m.config_id, record=m.to_json(), ts=_when(m))
                       for m in measurements), key=lambda e: e.ts)
    return heapq.merge(events, recorded, key=lambda e: e.ts)


def follow(run_dir: Path, *, live: bool, out: TextIO | None = None) -> int:
    """Print the run's events (and, ``live``, the engine's until the sweep ends); the exit code."""
    from specbench_tui.engine.attached import AttachedEngine, AttachError, client_name, history_of

    try:
        plan = load_plan(run_dir)
    except (OSError, StoreError, SweepError) as exc:  # an unreadable run directory is said, not raised
        print(f"specbench logs: cannot read {run_dir}: {exc}", file=sys.stderr)
        return 2
    printer = ProgressPrinter(plan, out)
    engine = None
    if live:
        try:
            engine = AttachedEngine(run_dir, role="view", name=client_name("specbench logs"))
        except AttachError as exc:
            printer.write(f"(no live engine: {exc}; printing what the run directory holds)")
    try:
        measurements, events = (engine.history() if engine is not None else history_of(run_dir, None, None))
    except (OSError, StoreError) as exc:
        print(f"specbench logs: cannot read {run_dir}: {exc}", file=sys.stderr)
        return 2
    for event in in_order(events, measurements):  # in the order the engine published them
        printer(event)
    if engine is None:  # the counts as the record leaves them (the last event may have printed no line)
        printer.say_end()
        return 0
    inbox: queue.SimpleQueue[Event] = queue.SimpleQueue()
    engine.subscribe(inbox.put)
    engine.start()
    try:
        while True:
            try:
                event = inbox.get(timeout=0.5)
            except queue.Empty:
                if engine.closed.is_set():
                    break
                continue
            printer(event)
            if isinstance(event, SweepFinished):
                break
    except KeyboardInterrupt:
        pass
    finally:
        engine.detach()
    return 0
