"""A run directory's ledger, folded incrementally: each :meth:`RunFold.advance` reads only what was written since.

The events and results files are read through a :class:`~specbench_tui.rundir.tail.Tail` each (from a
remembered offset, whole lines only: a cut last line is left for the next read, never fatal), and every record
is folded into one :class:`~specbench_tui.core.ledger.Ledger` as it is read, so a 64 MB events file is read
once, and a view that comes back to a run reads the new lines only. A file replaced or truncated under the
reader is folded again from nothing.

Measurements come from the results file alone (their one record); the copies older run directories hold in
the events file are passed over unparsed, as are the events a fold is not asked for (``every_event`` false:
the listing of runs needs states and endings only). A record that is not JSON, or an event or measurement whose
fields are wrong, is skipped and counted in :attr:`RunFold.report`, as the store's readers do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specbench_tui.core.events import ConfigFinished, ConfigStateChanged, Event, SweepFinished, event_from_json
from specbench_tui.core.ledger import Ledger
from specbench_tui.core.records import Measurement
from specbench_tui.rundir.tail import Tail
from specbench_tui.store import EVENTS, RESULTS, ReadReport

MEASUREMENT_LINE = b'{"type":"MeasurementRecorded"'
"""How the store wrote a measurement's copy into the events file (compact JSON, its type first)."""
STATE_TYPES = frozenset({b"ConfigStateChanged", b"ConfigFinished", b"SweepFinished", b"SweepStarted"})
"""The events a fold for the listing of runs reads (where each configuration stands, how the sweep ended)."""
_TYPE_AT = len(b'{"type":"')


def _line_type(raw: bytes) -> bytes | None:
    """The event type a line written by the store starts with (None: a line written otherwise: parse it)."""
    if not raw.startswith(b'{"type":"'):
        return None
    end = raw.find(b'"', _TYPE_AT)
    return raw[_TYPE_AT:end] if end > 0 else None


class RunFold:
    """One run directory's ledger and the offsets it has been folded to; see the module docstring."""

    def __init__(self, run_dir: Path, plan_json: Mapping[str, Any] | None = None, *, every_event: bool = True) -> None:
        self.run_dir = run_dir
        self._plan_json = dict(plan_json or {})
        self.every_event = every_event
        """Keep every persisted event in :attr:`events` (an attaching view's history); else only what the
        ledger folds (states, endings), read from lines of those types alone."""
        self._reset()

    def _reset(self) -> None:
        self.events_tail = Tail(self.run_dir / EVENTS)
        self.results_tail = Tail(self.run_dir / RESULTS)
        self.ledger = Ledger(plan_json=self._plan_json)
        self.events: list[Event] = []
        """Every event read, in file order (with ``every_event``), measurements' copies apart."""
        self.ended: SweepFinished | None = None
        """The last sweep ending recorded."""
        self.report = ReadReport()

    def advance(self, events_upto: int | None = None, results_upto: int | None = None) -> RunFold:
        """Fold what the files hold past the offsets (up to those byte counts; None: their ends now).
        :class:`~specbench_tui.store.StoreError` when one is not a regular file."""
        for attempt in (1, 2):
            self._fold_events(events_upto)
            self._fold_results(results_upto)
            if not (self.events_tail.restarted or self.results_tail.restarted) or attempt == 2:
                break
            self._reset()  # a file replaced under us: fold again from nothing
        return self

    def _fold_events(self, upto: int | None) -> None:
        every = self.every_event
        for raw in self.events_tail.lines(upto):
            kind = _line_type(raw)
            if kind == b"MeasurementRecorded" or (not every and kind is not None and kind not in STATE_TYPES):
                continue
            event = self._event(raw)
            if event is None:
                continue
            if every:
                self.events.append(event)
            if isinstance(event, SweepFinished):
                self.ended = event
            if every or isinstance(event, (ConfigStateChanged, ConfigFinished, SweepFinished)):
                self.ledger.apply(event)

    def _event(self, raw: bytes) -> Event | None:
        if not raw.strip():
            return None
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            self.report.add(EVENTS, f"{EVENTS}: unreadable line skipped (torn by a crash?)")
            return None
        if not isinstance(data, dict) or data.get("type") == "MeasurementRecorded":
            return None
        try:
            return event_from_json(data)
        except (ValueError, TypeError) as exc:
            self.report.add(EVENTS, f"{EVENTS}: {exc}")
            return None

    def _fold_results(self, upto: int | None) -> None:
        for raw in self.results_tail.lines(upto):
            if not raw.strip():
                continue
            try:
                data = json.loads(raw)
            except (ValueError, RecursionError):
                self.report.add(RESULTS, f"{RESULTS}: unreadable line skipped (torn by a crash?)")
                continue
            if not isinstance(data, dict):
                self.report.add(RESULTS, f"{RESULTS}: not a JSON object, skipped")
                continue
            try:
                self.ledger.add(Measurement.from_json(data))
            except (TypeError, ValueError) as exc:
                self.report.add(RESULTS, f"{RESULTS}: malformed record skipped ({exc})")

    def measurements(self) -> list[Measurement]:
        """One per key, the last recorded (in the place of the key's first record)."""
        return list(self.ledger.measurements.values())
