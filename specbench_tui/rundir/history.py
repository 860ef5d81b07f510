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

import contextlib
import dataclasses
import gc
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from math import isfinite
from pathlib import Path

from specbench_tui.core.events import (
    EVENT_TYPES,
    ConfigFinished,
    ConfigState,
    ConfigStateChanged,
    Event,
    LogLines,
    MeasurementRecorded,
    SweepFinished,
    event_from_json,
)
from specbench_tui.core.ledger import Ledger
from specbench_tui.core.records import STATUSES, Measurement, check_field_types
from specbench_tui.rundir.tail import Tail
from specbench_tui.rundir.store import EVENTS, RESULTS, ReadReport

MEASUREMENT_LINE = b'{"type":"MeasurementRecorded"'
"""How the store wrote a measurement's copy into the events file (compact JSON, its type first)."""
_MEASUREMENT_TYPE = MEASUREMENT_LINE + b'"'
STATE_TYPES = frozenset({b"ConfigStateChanged", b"ConfigFinished", b"SweepFinished", b"SweepStarted"})
"""The events a fold for the listing of runs reads (where each configuration stands, how the sweep ended)."""
_TYPE_AT = len(b'{"type":"')
_LAUNCH_TYPE = b"ServerLaunching"
BATCH_LINES = 4096
"""Lines of the events file parsed in one call (an attaching view's fold)."""
PAUSE_GC_BYTES = 1 << 20
"""A fold of more than this many new bytes pauses the cyclic garbage collector (see :func:`no_cyclic_collection`);
the small steps of a live run's own entry leave it alone."""


_TUPLES = ("argv", "gpus", "excerpt", "samples", "leftover_pids", "lines")


@dataclasses.dataclass(frozen=True)
class _Shape:
    names: frozenset[str]
    required: frozenset[str]
    defaults: dict[str, object]
    factories: dict[str, Callable[[], object]]
    tuples: tuple[str, ...]
    """Its fields JSON gives as arrays and the event holds as tuples."""


_SHAPES: dict[type, _Shape] = {}


def _shape(cls: type) -> _Shape:
    shape = _SHAPES.get(cls)
    if shape is None:
        every = dataclasses.fields(cls)
        shape = _SHAPES[cls] = _Shape(
            names=frozenset(f.name for f in every),
            required=frozenset(f.name for f in every if f.default is dataclasses.MISSING
                               and f.default_factory is dataclasses.MISSING),
            defaults={f.name: f.default for f in every if f.default is not dataclasses.MISSING},
            factories={f.name: f.default_factory for f in every if f.default_factory is not dataclasses.MISSING},
            tuples=tuple(f.name for f in every if f.name in _TUPLES))
    return shape


def decode_event(data: Mapping[str, object]) -> Event:
    """:func:`~specbench_tui.core.events.event_from_json`, the same checks (field types, states, arrays as
    tuples) and the same event, built without the frozen ``__init__``'s per-field ``setattr`` (an events file of
    64 MB holds 300,000 of them). Anything unusual (an unknown type, a missing field, log batches) goes through
    ``event_from_json`` itself, which says what is wrong. ``data`` is left as it was."""
    return _decode_owned(dict(data))


@dataclasses.dataclass(frozen=True)
class _Layout:
    """What a record of one layout (its keys, in order, and the type of each value) takes to become its event,
    learnt from the first record of its type and layout that passed every check: the checks that depend on a value's
    type alone (:func:`~specbench_tui.core.records.check_field_types` but for a float's finiteness, the keys
    required and known) hold for every record of the layout, so they are not made again."""

    cls: type
    floats: tuple[str, ...]
    """Its float values (each must still be finite)."""
    state: bool
    """It has a ``state`` to turn into a :class:`~specbench_tui.core.events.ConfigState` (the value still checked)."""
    tuples: tuple[str, ...]
    """Its arrays the event holds as tuples."""
    extra: tuple[str, ...]
    """Its keys the event has no field for (a newer writer's): left out."""
    defaults: dict[str, object]
    """The fields it leaves out, with their defaults."""
    factories: dict[str, Callable[[], object]]


_LayoutKey = tuple[str, tuple[str, ...], tuple[type, ...]]
"""A record's type, its keys in order and the type of each value."""
_LAYOUTS: dict[_LayoutKey, _Layout] = {}
_STATES: dict[object, ConfigState] = {state.value: state for state in ConfigState}
"""A record's ``state`` value (whatever it holds) -> its state."""


def _learn(layout_key: _LayoutKey, cls: type) -> None:
    shape = _shape(cls)
    _, names, kinds = layout_key
    present = dict(zip(names, kinds))
    del present["type"]
    _LAYOUTS[layout_key] = _Layout(
        cls=cls, floats=tuple(n for n, k in present.items() if k is float),
        state="state" in present and (cls is ConfigStateChanged or cls is ConfigFinished),
        tuples=tuple(n for n in shape.tuples if present.get(n) is list),
        extra=tuple(n for n in present if n not in shape.names),
        defaults={n: v for n, v in shape.defaults.items() if n not in present},
        factories={n: f for n, f in shape.factories.items() if n not in present})


def _decode_owned(data: dict[str, object]) -> Event:
    """:func:`decode_event` of a record the caller hands over (it is made the event's own fields): a record of
    a layout seen before (:class:`_Layout`) is checked for what its layout does not say and built at once."""
    kind = data.get("type")
    if type(kind) is not str:
        return _decode_checked(data)
    layout_key = (kind, tuple(data), tuple(map(type, data.values())))
    layout = _LAYOUTS.get(layout_key)
    if layout is not None:
        state = _STATES.get(data["state"]) if layout.state else None
        finite = True
        for name in layout.floats:  # floats by the layout: the type test narrows, never refuses
            value = data[name]
            finite = finite and type(value) is float and isfinite(value)
        if finite and (state is not None or not layout.state):
            del data["type"]
            if state is not None:
                data["state"] = state
            for name in layout.tuples:  # arrays by the layout, as above
                value = data[name]
                data[name] = tuple(value) if type(value) is list else value
            for name in layout.extra:
                del data[name]
            if layout.defaults:
                data.update(layout.defaults)
            for name, factory in layout.factories.items():
                data[name] = factory()
            event: Event = object.__new__(layout.cls)
            object.__setattr__(event, "__dict__", data)
            return event
    event = _decode_checked(data)
    if layout is None and type(event) is not LogLines and type(event) is not MeasurementRecorded:
        _learn(layout_key, type(event))
    return event


def _decode_checked(data: dict[str, object]) -> Event:
    """:func:`decode_event` with every check made (``data`` left as it was)."""
    kind = data.get("type")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None or cls is LogLines or cls is MeasurementRecorded:
        return event_from_json(data)
    shape = _shape(cls)
    kwargs = dict(data)
    del kwargs["type"]
    if not kwargs.keys() <= shape.names:  # keys the event does not have (a newer writer's): left out
        kwargs = {k: v for k, v in kwargs.items() if k in shape.names}
    if not shape.required <= kwargs.keys():
        return event_from_json(data)
    check_field_types(cls, kwargs)
    if "state" in kwargs and (cls is ConfigStateChanged or cls is ConfigFinished):
        kwargs["state"] = ConfigState(kwargs["state"])
    for key in shape.tuples:
        value = kwargs.get(key)
        if isinstance(value, list):
            kwargs[key] = tuple(value)
    event: Event = object.__new__(cls)
    values = event.__dict__
    values.update(shape.defaults)
    for name, factory in shape.factories.items():
        if name not in kwargs:
            values[name] = factory()
    values.update(kwargs)
    return event


_UNREADABLE = object()
_MEASUREMENT_NAMES = frozenset(f.name for f in dataclasses.fields(Measurement))
_MEASUREMENT_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Measurement)
                         if f.default is not dataclasses.MISSING}
_MEASUREMENT_LAYOUTS: dict[tuple[tuple[str, ...], tuple[type, ...]], tuple[tuple[str, ...], tuple[str, ...]]] = {}
"""A measurement record's keys in order and the type of each value -> its float values (each must still be
finite) and its keys the record has no field for (a newer writer's: left out), learnt from the first record of
the layout that :meth:`~specbench_tui.core.records.Measurement.from_json` took: its checks but for a float's
finiteness and the status's value depend on the layout alone."""


def decode_measurement(data: dict[str, object]) -> Measurement:
    """:meth:`~specbench_tui.core.records.Measurement.from_json` of a record the caller hands over: the same
    checks and the same measurement, a record of a layout seen before built at once (a results file of 20,000
    records is read by every attach before its first frame). ``ValueError`` or ``TypeError`` for what it refuses."""
    layout_key = (tuple(data), tuple(map(type, data.values())))
    layout = _MEASUREMENT_LAYOUTS.get(layout_key)
    if layout is not None:
        floats, extra = layout
        fine = data["status"] in STATUSES
        for name in floats:  # floats by the layout: the type test narrows, never refuses
            value = data[name]
            fine = fine and type(value) is float and isfinite(value)
        if fine:
            for name in extra:
                del data[name]
            record: Measurement = object.__new__(Measurement)
            values = record.__dict__
            values.update(_MEASUREMENT_DEFAULTS)
            values.update(data)
            return record
    record = Measurement.from_json(data)
    if layout is None:
        _MEASUREMENT_LAYOUTS[layout_key] = (
            tuple(name for name, kind in zip(*layout_key) if kind is float),
            tuple(name for name in layout_key[0] if name not in _MEASUREMENT_NAMES))
    return record


def _batches(lines: Iterable[bytes]) -> Iterator[list[bytes]]:
    """The lines that are not blank, :data:`BATCH_LINES` at a time."""
    kept = [raw for raw in lines if raw.strip()]
    for first in range(0, len(kept), BATCH_LINES):
        yield kept[first:first + BATCH_LINES]


def _parsed(lines: list[bytes]) -> list[object] | None:
    """``lines`` parsed as one JSON array (one call instead of one per line); None when they are not one value a
    line (a line not JSON, cut, or holding two): the caller reads them line by line."""
    try:
        values = json.loads(b"[" + b",".join(lines) + b"]")
    except (ValueError, RecursionError):
        return None
    return values if isinstance(values, list) and len(values) == len(lines) else None


_DECODER = json.JSONDecoder()


def _loads(raw: bytes) -> object:
    """``json.loads`` of one record line (its newline after it), without its per-call checks of encoding and
    whitespace: the same value, and ``ValueError`` for what it refuses (text after the value included)."""
    text = raw.decode("utf-8")
    try:
        value, end = _DECODER.raw_decode(text)
    except ValueError:
        return json.loads(text)  # leading white space, or not JSON: its own answer
    if text[end:].strip():
        raise ValueError(f"extra data at column {end + 1}")
    return value


def _line_type(raw: bytes) -> bytes | None:
    """The event type a line written by the store starts with (None: a line written otherwise: parse it)."""
    if not raw.startswith(b'{"type":"'):
        return None
    end = raw.find(b'"', _TYPE_AT)
    return raw[_TYPE_AT:end] if end > 0 else None


@contextlib.contextmanager
def no_cyclic_collection() -> Iterator[None]:
    """The cyclic garbage collector paused while a fold builds its records: they hold no cycles (reference
    counting frees what is dropped), and its collections, triggered again and again by 300,000 new objects and
    each walking all of them, took more than half of the time to fold a 64 MB events file. Its state is put
    back as it was (a caller that paused it keeps it paused), and what the fold made is frozen
    (``gc.freeze``: reference counting still frees it; the collector no longer walks it)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()  # what the fold made is kept (the view's history): out of the collector's reach, as the
        if was:      # TUI freezes what it keeps, instead of a collection walking all of it the moment it is on
            gc.enable()


class RunFold:
    """One run directory's ledger and the offsets it has been folded to; see the module docstring."""

    def __init__(self, run_dir: Path, plan_json: Mapping[str, object] | None = None, *, every_event: bool = True,
                 ledger_events: bool = True, pause_gc: bool = True) -> None:
        self.run_dir = run_dir
        self.pause_gc = pause_gc
        """Pause the cyclic garbage collector over a large fold (:func:`no_cyclic_collection`); a fold on a
        thread of a process that runs other work (a run's own checkpoints) leaves it alone, as its freezing
        would keep that work's garbage."""
        self._plan_json = dict(plan_json or {})
        self.every_event = every_event
        """Keep every persisted event in :attr:`events` (an attaching view's history); else only what the
        ledger folds (states, endings), read from lines of those types alone."""
        self.ledger_events = ledger_events
        """Fold the events into :attr:`ledger` too (a caller that folds :attr:`events` itself, as an attaching
        view does, needs the measurements alone: the last per key)."""
        self._reset()

    def _reset(self) -> None:
        self.events_tail = Tail(self.run_dir / EVENTS)
        self.results_tail = Tail(self.run_dir / RESULTS)
        self.ledger = Ledger(plan_json=self._plan_json)
        self.events: list[Event] = []
        """Every event read, in file order (with ``every_event``), measurements' copies apart."""
        self.ended: SweepFinished | None = None
        """The last sweep ending recorded."""
        self.launches = 0
        """Server launches the events record, counted by a fold for the listing (``every_event`` false) from each
        line's type, unparsed; a line not written by the store that names one (or escapes a character, so it
        might) counts too: never fewer than a scanner parsing every line would find."""
        self.report = ReadReport()

    def advance(self, events_upto: int | None = None, results_upto: int | None = None) -> RunFold:
        """Fold what the files hold past the offsets (up to those byte counts; None: their ends now).
        :class:`~specbench_tui.rundir.store.StoreError` when one is not a regular file."""
        with no_cyclic_collection() if self.pause_gc and self._pending() > PAUSE_GC_BYTES else contextlib.nullcontext():
            for attempt in (1, 2):
                self._fold_events(events_upto)
                self._fold_results(results_upto)
                if not (self.events_tail.restarted or self.results_tail.restarted) or attempt == 2:
                    break
                self._reset()  # a file replaced under us: fold again from nothing
        return self

    def _pending(self) -> int:
        """Bytes written past the offsets (about: a file replaced reads as its size)."""
        pending = 0
        for tail in (self.events_tail, self.results_tail):
            with contextlib.suppress(OSError):
                pending += max(0, os.lstat(tail.path).st_size - tail.offset)
        return pending

    def _fold_events(self, upto: int | None) -> None:
        every = self.every_event
        for block in self.events_tail.batches(upto):
            if every:  # every event but the measurements' copies, parsed BATCH_LINES at a time
                for batch in _batches(raw for raw in block if not raw.startswith(_MEASUREMENT_TYPE)):
                    self._fold_batch(batch)
                continue
            for raw in block:
                kind = _line_type(raw)
                if kind is not None and kind not in STATE_TYPES:
                    if kind == _LAUNCH_TYPE or b"\\" in kind:  # an escaped type may spell it
                        self.launches += 1
                    continue
                if _LAUNCH_TYPE in raw or b"\\" in raw:  # a line parsed whole that may be one (duplicate keys,
                    self.launches += 1                    # escapes): counted, as a scanner would find it
                event = self._event(raw)
                if event is not None:
                    self._fold(event)

    def _fold_batch(self, lines: list[bytes]) -> None:
        """Lines parsed as one JSON array (:func:`_parsed`); a batch that is not one value per line is read line
        by line, each refused line counted."""
        values = _parsed(lines)
        if values is None:
            for raw in lines:
                event = self._event(raw)
                if event is not None:
                    self._fold(event)
            return
        decode, report = _decode_owned, self.report
        kept = self.events.append if self.every_event and not self.ledger_events else None
        fold = self._fold
        for data in values:
            if type(data) is not dict or data.get("type") == "MeasurementRecorded":
                continue
            try:
                event = decode(data)
            except (ValueError, TypeError) as exc:
                report.add(EVENTS, f"{EVENTS}: {exc}")
                continue
            if kept is not None and type(event) is not SweepFinished:  # an attaching view's: kept, no more
                kept(event)
            else:
                fold(event)

    def _fold(self, event: Event) -> None:
        if self.every_event:
            self.events.append(event)
        if isinstance(event, SweepFinished):
            self.ended = event
        if self.ledger_events and (self.every_event or isinstance(event, (ConfigStateChanged, ConfigFinished,
                                                                          SweepFinished))):
            self.ledger.apply(event)

    def _event(self, raw: bytes) -> Event | None:
        if not raw.strip():
            return None
        try:
            data = _loads(raw)
        except (ValueError, RecursionError):
            self.report.add(EVENTS, f"{EVENTS}: unreadable line skipped (torn by a crash?)")
            return None
        return self._decoded(data)

    def _decoded(self, data: object) -> Event | None:
        if not isinstance(data, dict) or data.get("type") == "MeasurementRecorded":
            return None
        try:
            return _decode_owned(data)
        except (ValueError, TypeError) as exc:
            self.report.add(EVENTS, f"{EVENTS}: {exc}")
            return None

    def _fold_results(self, upto: int | None) -> None:
        add, report = self.ledger.add, self.report
        for block in self.results_tail.batches(upto):
            for batch in _batches(block):  # BATCH_LINES records parsed in one call
                values = _parsed(batch)
                if values is None:
                    values = [self._result(raw) for raw in batch]  # line by line, each refused line counted
                for data in values:
                    if data is _UNREADABLE:
                        continue
                    if type(data) is not dict:
                        report.add(RESULTS, f"{RESULTS}: not a JSON object, skipped")
                        continue
                    try:
                        add(decode_measurement(data))
                    except (TypeError, ValueError) as exc:
                        report.add(RESULTS, f"{RESULTS}: malformed record skipped ({exc})")

    def _result(self, raw: bytes) -> object:
        """One results line parsed (:data:`_UNREADABLE`, counted, when it is not JSON)."""
        try:
            return _loads(raw)
        except (ValueError, RecursionError):
            self.report.add(RESULTS, f"{RESULTS}: unreadable line skipped (torn by a crash?)")
            return _UNREADABLE

    def measurements(self) -> list[Measurement]:
        """One per key, the last recorded (in the place of the key's first record)."""
        return list(self.ledger.measurements.values())
