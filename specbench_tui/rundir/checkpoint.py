"""A fold checkpoint: an attaching view's fold of a large run directory, kept so that the next attach reads only
what was written since.

An attaching view (the TUI, ``specbench logs``, ``attach``) folds the run's events and results
(:class:`~specbench_tui.rundir.history.RunFold`): a 64 MB events file is 300,000 records to parse and build.
When a fold has read at least :data:`MIN_BYTES`, what it made is written to
``<private dir>/fold-cache/<sha256 of the run directory's resolved path>.bin`` (this user's private folder, as the
run index is: :func:`specbench_tui.paths.private_dir`; never the run directory, which may be someone else's), and
the next fold of that directory starts from it and reads the files from where it stopped.

A checkpoint is a cache, and is believed only while it describes the files as they are; else it is ignored and
the files folded from nothing (and the checkpoint written again). It is used when:

- it is a regular file of this user's that no one else may write, at most :data:`LIMIT` bytes, written by this
  format version under this Python (its bytes are marshal's), and its digest (BLAKE2b over the rest) matches:
  a file cut short, corrupt or planted is refused before it is decoded;
- it was written for this directory (its resolved path and inode);
- each record file is the one it read (device and inode), at least as long as it read, the same size and
  modification time when it has not grown since, and the same bytes at :data:`SAMPLES` places spread over what
  it read (a file rewritten, truncated or replaced reads as another);
- it read no further than the caller may (an attaching client stops where its stream starts).

At most :data:`KEEP` checkpoints are kept (the ones used last); writing one never fails the caller.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import sys
import threading
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import NotRequired, TypedDict

from specbench_tui.core.events import EVENT_TYPES, ConfigFinished, ConfigState, ConfigStateChanged, Event, SweepFinished
from specbench_tui.core.records import Measurement
from specbench_tui.paths import PrivateDirError, private_dir
from specbench_tui.rundir.history import RunFold, no_cyclic_collection
from specbench_tui.rundir.index import read_private, write_private
from specbench_tui.rundir.tail import Tail
from specbench_tui.rundir.store import EVENTS, RESULTS, StoreError, open_regular

FORMAT = 2
"""2: the events may be held in compressed chunks too (a run's own checkpoints, :class:`RunCheckpoints`)."""
MAGIC = b"specbench-fold\x00\x01"
CACHE_DIR = "fold-cache"
MIN_BYTES = 8 << 20
SAVE_AFTER_S = 2.0
"""A checkpoint is written this long after the fold it keeps (an attaching view draws its first frame first)."""
"""A fold that read at least this many bytes is kept (a smaller one folds again faster than this is worth)."""
LIMIT = 512 << 20
"""A checkpoint larger than this is not written (nor believed)."""
INFLATED_LIMIT = 2 << 30
"""The most a checkpoint's compressed parts may inflate to, all together: a planted zlib bomb (kilobytes that
inflate to gigabytes) is refused as it inflates, not after it has filled the memory."""
KEEP = 4
"""Checkpoints kept: the four run directories attached last."""
ABANDONED_S = 600
"""A leftover of a writer that died (a new file never renamed) older than this is removed."""
SAMPLES = 16
SAMPLE_BYTES = 4096
_DIGEST = 32
_STATES: dict[object, ConfigState] = {state.value: state for state in ConfigState}


class _FileKey(TypedDict):
    """What a checkpoint says of one record file (:func:`_file_key`): its identity (device, inode; None: it was
    missing), how far the tail read it and the tail's state there, and (when it was there) its size and
    modification time then and a digest of its bytes at :data:`SAMPLES` places."""

    identity: tuple[int, int] | None
    offset: int
    too_long: int
    skipping: bool
    size: NotRequired[int]
    mtime: NotRequired[int]
    samples: NotRequired[bytes]


class _Report(TypedDict):
    skipped: list[str]
    counts: dict[str, int]


class _Checkpoint(TypedDict):
    """A checkpoint's document, as :func:`_save` marshals it."""

    format: int
    python: int
    run_dir: str
    dir_inode: int | None
    chunks: list[bytes]
    """Events in compressed chunks of rows (:func:`_chunk`), before :attr:`events`."""
    events: list[object]
    """Rows (:func:`_rows`): each event's class name, then its fields."""
    ended: int
    measurements: list[dict[str, object]]
    tails: dict[str, _FileKey]
    report: _Report


def checkpoint_path(run_dir: Path) -> Path | None:
    """Where ``run_dir``'s checkpoint is kept (None: no private folder to keep it in)."""
    try:
        base = private_dir(CACHE_DIR)
    except (PrivateDirError, OSError):
        return None
    return base / f"{hashlib.sha256(os.fsencode(os.path.realpath(run_dir))).hexdigest()}.bin"


def _file_key(tail: Tail) -> _FileKey | None:
    """What a checkpoint says of one record file: as the tail read it (identity, offset, the bytes at
    :data:`SAMPLES` places) and as it is now (size, modification time). None: it cannot be said (the file
    replaced since it was read, or not readable)."""
    try:
        fd = open_regular(tail.path)
    except FileNotFoundError:
        return {"identity": None, "offset": 0, "too_long": 0, "skipping": False} if tail.offset == 0 else None
    except (OSError, StoreError):
        return None
    try:
        info = os.fstat(fd)
        identity = (info.st_dev, info.st_ino)
        if tail._identity is not None and identity != tail._identity:
            return None
        return {"identity": identity, "offset": tail.offset, "size": info.st_size, "mtime": info.st_mtime_ns,
                "samples": _samples(fd, tail.offset), "too_long": tail.too_long, "skipping": tail._skipping}
    except OSError:
        return None
    finally:
        os.close(fd)


def _samples(fd: int, offset: int) -> bytes:
    """A digest of the bytes at :data:`SAMPLES` places spread over the first ``offset`` bytes (its first and
    last :data:`SAMPLE_BYTES` among them)."""
    digest = hashlib.blake2b(str(offset).encode(), digest_size=16)
    if offset:
        span = max(0, offset - SAMPLE_BYTES)
        for place in range(SAMPLES):
            at = span * place // (SAMPLES - 1)
            digest.update(os.pread(fd, min(SAMPLE_BYTES, offset - at), at))
    return digest.digest()


def _matches(tail: Tail, saved: _FileKey) -> bool:
    """Whether the file ``tail`` reads is still the one ``saved`` describes, up to what was read of it."""
    offset: int = saved["offset"]
    try:
        fd = open_regular(tail.path)
    except FileNotFoundError:
        return bool(offset == 0 and saved["identity"] is None)
    except (OSError, StoreError):
        return False
    try:
        info = os.fstat(fd)
        if saved["identity"] is None:
            return offset == 0
        if (info.st_dev, info.st_ino) != tuple(saved["identity"]) or info.st_size < offset:
            return False
        if info.st_size == saved["size"] and info.st_mtime_ns != saved["mtime"]:
            return False  # rewritten in place, to the same length
        return bool(_samples(fd, offset) == saved["samples"])
    except OSError:
        return False
    finally:
        os.close(fd)


def _dir_inode(run_dir: Path) -> int | None:
    try:
        return os.stat(run_dir).st_ino
    except OSError:
        return None


def save(fold: RunFold) -> bool:
    """Write ``fold``'s checkpoint (an attaching view's fold: every event, no ledger of events); False when it is
    not written (nothing to keep it in, a file changed meanwhile, a value marshal cannot hold, a full disk)."""
    if not fold.every_event or fold.ledger_events:
        return False
    return _save(fold, [], _rows(fold.events), _place_of(fold.ended, fold.events))


def _place_of(event: Event | None, events: list[Event]) -> int:
    """Where ``event`` is among ``events``, the last time (-1: not there)."""
    return next((n for n in range(len(events) - 1, -1, -1) if events[n] is event), -1)


def _rows(events: list[Event]) -> list[object]:
    """The rows a checkpoint holds the events in: each one's class name (marshal writes each name once), then its
    fields."""
    rows: list[object] = []
    append = rows.append
    for event in events:
        values = event.__dict__
        if "state" in values and isinstance(values["state"], ConfigState):
            values = dict(values, state=values["state"]._value_)
        append(type(event).__name__)
        append(values)
    return rows


def _chunk(events: list[Event]) -> bytes:
    """Events as one compressed chunk of rows (:func:`_rows`)."""
    return zlib.compress(marshal.dumps(_rows(events)), 1)


def _save(fold: RunFold, chunks: list[bytes], rows: list[object], ended: int) -> bool:
    """Write the checkpoint of ``fold``'s files as its tails read them, holding the events of ``chunks`` and then
    of ``rows`` (``ended``: the place of the sweep's ending among them, -1: none) and the fold's measurements."""
    path = checkpoint_path(fold.run_dir)
    events_key, results_key = _file_key(fold.events_tail), _file_key(fold.results_tail)
    if path is None or events_key is None or results_key is None:
        return False
    doc: _Checkpoint = {"format": FORMAT, "python": sys.hexversion, "run_dir": os.path.realpath(fold.run_dir),
           "dir_inode": _dir_inode(fold.run_dir), "chunks": chunks, "events": rows,
           "ended": ended, "measurements": [m.__dict__ for m in fold.ledger.measurements.values()],
           "tails": {EVENTS: events_key, RESULTS: results_key},
           "report": {"skipped": fold.report.skipped, "counts": fold.report.counts}}
    try:
        body = zlib.compress(marshal.dumps(dict(doc)), 1)
    except ValueError:  # a value marshal cannot hold: no checkpoint
        return False
    if len(body) + len(MAGIC) + _DIGEST > LIMIT:
        return False
    written = write_private(path, MAGIC + hashlib.blake2b(body, digest_size=_DIGEST).digest() + body)
    _prune(path.parent)
    return written


def _prune(folder: Path) -> None:
    """Keep the :data:`KEEP` checkpoints used last (and no leftover of a writer that died)."""
    try:
        with os.scandir(folder) as listing:
            found = [(entry.stat(follow_symlinks=False).st_mtime_ns, entry.path) for entry in listing
                     if entry.is_file(follow_symlinks=False)]
    except OSError:
        return
    found.sort(reverse=True)
    kept = set([path for _, path in found if path.endswith(".bin")][:KEEP])
    abandoned = time.time_ns() - ABANDONED_S * 10**9  # a writer's new file, not yet renamed, is left alone
    for mtime, path in found:
        if path not in kept and (path.endswith(".bin") or mtime < abandoned):
            with contextlib.suppress(OSError):
                os.unlink(path)


class _Inflater:
    """Decompresses a checkpoint's parts within :data:`INFLATED_LIMIT` bytes in all (``zlib.error`` past it)."""

    def __init__(self) -> None:
        self.left = INFLATED_LIMIT

    def __call__(self, data: bytes) -> bytes:
        inflater = zlib.decompressobj()
        out = inflater.decompress(data, self.left + 1)
        if len(out) > self.left or inflater.unconsumed_tail:
            raise zlib.error(f"a fold checkpoint inflating past {INFLATED_LIMIT:,} bytes (INFLATED_LIMIT)")
        self.left -= len(out)
        return out


def _load(path: Path) -> _Checkpoint | None:
    """The checkpoint's document, when its file and digest are sound and it is of this format and Python."""
    return _load_within(path, _Inflater())


def _load_within(path: Path, inflate: _Inflater) -> _Checkpoint | None:
    """:func:`_load`, inflating within what ``inflate`` has left (its chunks then inflate within the rest)."""
    raw = read_private(path, LIMIT)
    if raw is None or not raw.startswith(MAGIC):
        return None
    digest, body = raw[len(MAGIC):len(MAGIC) + _DIGEST], raw[len(MAGIC) + _DIGEST:]
    if hashlib.blake2b(body, digest_size=_DIGEST).digest() != digest:
        return None
    try:  # our own bytes (the digest matched): shaped as _save wrote them, each field read in a try (restore)
        doc: _Checkpoint = marshal.loads(inflate(body))
    except (ValueError, EOFError, TypeError, zlib.error, MemoryError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("python") != sys.hexversion:
        return None
    return doc


def restore(run_dir: Path, events_upto: int | None = None, results_upto: int | None = None) -> RunFold | None:
    """The fold ``run_dir``'s checkpoint holds, ready to go on from its offsets; None when there is none that
    holds (see the module docstring) or it read past ``events_upto`` / ``results_upto``."""
    path = checkpoint_path(run_dir)
    if path is None:
        return None
    with no_cyclic_collection():  # 300,000 records made at once (see history.no_cyclic_collection)
        inflate = _Inflater()
        doc = _load_within(path, inflate)
        try:
            fold = _rebuild(run_dir, doc, events_upto, results_upto, inflate) if doc is not None else None
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, EOFError, zlib.error, MemoryError):
            fold = None
    if fold is None:
        return None
    with contextlib.suppress(OSError):
            os.utime(path)  # used: kept by the pruning
    return fold


def _rebuild(run_dir: Path, doc: _Checkpoint, events_upto: int | None, results_upto: int | None,
             inflate: _Inflater | None = None) -> RunFold | None:
    inflate = inflate or _Inflater()
    if doc["run_dir"] != os.path.realpath(run_dir) or doc["dir_inode"] != _dir_inode(run_dir):
        return None
    fold = RunFold(run_dir, ledger_events=False)
    tails = doc["tails"]
    for tail, name, upto in ((fold.events_tail, EVENTS, events_upto), (fold.results_tail, RESULTS, results_upto)):
        saved = tails[name]
        if (upto is not None and saved["offset"] > upto) or not _matches(tail, saved):
            return None
        tail.offset = saved["offset"]
        identity = saved["identity"]
        tail._identity = (identity[0], identity[1]) if identity is not None else None
        tail.too_long, tail._skipping = saved["too_long"], saved["skipping"]
    events: list[Event] = []
    for chunk in doc["chunks"]:
        events.extend(_events(marshal.loads(inflate(chunk))))
    fold.events = events + _events(doc["events"]) if events else _events(doc["events"])
    if doc["ended"] >= 0:
        ended = fold.events[doc["ended"]]
        fold.ended = ended if isinstance(ended, SweepFinished) else None
    for values in doc["measurements"]:
        measurement = object.__new__(Measurement)
        object.__setattr__(measurement, "__dict__", values)
        fold.ledger.add(measurement)
    fold.report.skipped = list(doc["report"]["skipped"])
    fold.report.counts = dict(doc["report"]["counts"])
    return fold


def _events(rows: Sequence[object]) -> list[Event]:
    """The events the rows hold (class name, fields: as :func:`save` wrote them); ``TypeError`` for a row that is
    not (a name a checkpoint believed by its digest always is, so the test never refuses)."""
    stated = {ConfigStateChanged.__name__, ConfigFinished.__name__}
    new, assign, states, classes = object.__new__, object.__setattr__, _STATES, EVENT_TYPES
    events: list[Event] = []
    append = events.append
    pairs = iter(rows)
    for name, values in zip(pairs, pairs):
        if type(name) is not str or type(values) is not dict:
            raise TypeError("a fold checkpoint row that is not a class name and its fields")
        if name in stated:
            values["state"] = states[values["state"]]
        event = new(classes[name])
        assign(event, "__dict__", values)
        append(event)
    return events


def attach_fold(run_dir: Path, events_upto: int | None = None, results_upto: int | None = None) -> RunFold:
    """An attaching view's fold of ``run_dir`` up to those byte counts (None: the files' ends now): from its
    checkpoint where one holds, the rest read; kept as the next one's checkpoint when it read
    :data:`MIN_BYTES` or more (written on a thread of its own, :func:`save`)."""
    fold = restore(run_dir, events_upto, results_upto)
    before = fold.events_tail.offset + fold.results_tail.offset if fold is not None else 0
    fold = (fold or RunFold(run_dir, ledger_events=False)).advance(events_upto, results_upto)
    if fold.events_tail.offset + fold.results_tail.offset - before >= MIN_BYTES:
        # Written after the caller's next steps (a view's first frame), not before them nor beside them (its
        # marshalling holds the interpreter); not a daemon: a short command's exit waits for it rather than
        # leave it half written.
        writer = threading.Thread(target=_save_later, args=(fold,), name="specbench-checkpoint")
        _WRITERS.append(writer)
        writer.start()
    return fold


_WRITERS: list[threading.Thread] = []
_NOW = threading.Event()


def _save_later(fold: RunFold) -> None:
    _NOW.wait(SAVE_AFTER_S)
    save(fold)


def wait_for_writes(timeout: float = 30.0) -> None:
    """Write the checkpoints waiting to be written now, and wait until they are (tests, a caller about to
    read one)."""
    _NOW.set()
    try:
        while _WRITERS:
            _WRITERS.pop().join(timeout)
    finally:
        _NOW.clear()


KEEP_EVERY_BYTES = MIN_BYTES
"""A running sweep writes its checkpoint again each time its events file has grown this much since the last."""
CHECK_EVERY_S = 0.5
"""How often, at most, a running sweep looks at its events file's size (one ``lstat``)."""


class RunCheckpoints:
    """A run's own writer of its fold checkpoint, so that attaching to a long run (live or ended) never starts
    from nothing: called with every event the run directory records (see
    :attr:`specbench_tui.rundir.store.RunDir.after_event`), it looks at most every :data:`CHECK_EVERY_S` at the events
    file's size, and each time it has grown :data:`KEEP_EVERY_BYTES` since the last checkpoint it wakes a thread
    of its own that folds what was written since, as an attaching view folds it (the same
    :class:`~specbench_tui.rundir.history.RunFold`, so the checkpoint holds what a fold of the files from nothing
    makes, and is believed by the same rules), and writes the checkpoint. The events folded before are kept only
    as compressed chunks (about a seventh of their bytes), each written once: a checkpoint costs the fold of the
    new bytes and the writing of the file, not the fold of the whole run again. The engine's thread pays one
    ``lstat`` now and then; the fold runs beside it, on the thread. Never raises: a checkpoint not written costs
    the next attach a longer fold."""

    def __init__(self, run_dir: Path, every_bytes: int = KEEP_EVERY_BYTES) -> None:
        self.run_dir = run_dir
        self.every_bytes = every_bytes
        self.writes = 0
        """Checkpoints written."""
        self._events = os.fspath(run_dir / EVENTS)
        self._checked = float("-inf")
        self._kept = 0
        """The events file's bytes the last checkpoint holds."""
        self._fold: RunFold | None = None
        self._keys: dict[str, _FileKey] = {}
        """The record files as the fold read them (:func:`_file_key`): a file changed otherwise since is folded
        again from nothing."""
        self._chunks: list[bytes] = []
        self._count = 0
        self._ended = -1
        self._wake = threading.Event()
        self._closed = False
        self._busy = threading.Lock()
        self._thread: threading.Thread | None = None

    def __call__(self, event: Event) -> None:
        now = time.monotonic()
        if now - self._checked < CHECK_EVERY_S or self._closed:
            return
        self._checked = now
        try:
            size = os.lstat(self._events).st_size
        except OSError:
            return
        if size - self._kept >= self.every_bytes:
            if self._thread is None:
                self._thread = threading.Thread(target=self._main, name="specbench-run-checkpoint", daemon=True)
                self._thread.start()
            self._wake.set()

    def _main(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._closed:
                return
            self.write()

    def write(self) -> bool:
        """Fold what was written since the last checkpoint and write the checkpoint now; False when it is not."""
        with self._busy:
            try:
                return self._write()
            except Exception:  # noqa: BLE001 - a cache: the run goes on whatever happens to it
                return False

    def _write(self) -> bool:
        fold = self._fold
        if fold is not None and not (_matches(fold.events_tail, self._keys[EVENTS])
                                     and _matches(fold.results_tail, self._keys[RESULTS])):
            fold = None  # a file rewritten or replaced since (whatever its inode): folded again from nothing
        if fold is None:
            fold = RunFold(self.run_dir, ledger_events=False, pause_gc=False)
            self._chunks, self._count, self._ended = [], 0, -1
        tail = fold.events_tail
        fold.advance()
        if fold.events_tail is not tail:  # replaced as it was read: the fold began again from nothing
            self._chunks, self._count, self._ended = [], 0, -1
        self._fold = fold
        new = fold.events
        if new:
            if fold.ended is not None and (at := _place_of(fold.ended, new)) >= 0:
                self._ended = self._count + at
            self._chunks.append(_chunk(new))
            self._count += len(new)
            fold.events = []
        events_key, results_key = _file_key(fold.events_tail), _file_key(fold.results_tail)
        if events_key is None or results_key is None:
            self._fold = None
            return False
        self._keys = {EVENTS: events_key, RESULTS: results_key}
        written = _save(fold, self._chunks, [], self._ended)
        self._kept = fold.events_tail.offset
        if written:
            self.writes += 1
        return written

    def close(self, timeout: float = 30.0) -> None:
        """No more checkpoints: a write under way is finished (within ``timeout``), none is started."""
        self._closed = True
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
