"""The index of a runs folder: one line of figures per run directory, so listing 10,000 runs reads one file.

``<private dir>/run-index/<sha256 of the runs folder's resolved path>.json`` (in this user's private folder,
:func:`specbench_tui.paths.private_dir`, mode 0700 and verified; never inside the runs folder, which holds run
directories only and may be another user's) holds, with the runs folder's resolved path, device and inode (a
folder moved, replaced or recreated does not match, and is read again), per run directory, what ``specbench runs`` and ``latest`` show
(its sweep, when it started, how it ended, the ledger's counts, what could not be read) with the key it was
read under: the inode, size, modification time and kind of the directory and of each of its state and record
files (:data:`KEYED`). An entry whose key still matches the files is used as it is; any other (a run that went
on, a file replaced, a directory new to the folder) is read again, through the incremental fold
(:class:`~specbench_tui.rundir.history.RunFold`), and the index rewritten. So the index is a cache: missing,
stale, corrupt or planted, it is rebuilt, and nothing it says outlives a change of the files it describes.

It is kept current by the run as it starts, as its configurations finish (at most every
:data:`UPDATE_EVERY_S`) and as it ends (:class:`IndexUpdater`), each time by appending its entry as one line to
the index's journal (:func:`journal_path`, beside it: a run never reads nor rewrites an index of 10,000 runs on
its engine's thread), and by any listing that found it stale or a journal beside it: the listing writes a new
index beside the old and renames it over (atomic), so a reader sees one whole index or the one before, then
removes the journal it folded in. Writers never lock; two racing lose at worst an entry, which the next listing
reads again.

The run directory's rules hold for the index and its journal too: opened without following a link and
without blocking, a regular file of at most :data:`INDEX_LIMIT` (:data:`JOURNAL_LIMIT`) bytes, owned by this user and writable by no one else (a file
planted there is ignored, never believed), every entry's fields checked before use. A user listing someone
else's runs folder keeps that folder's index in their own private folder; the runs folder is never written.
Whether a run is live is never cached: it is read from the run directory's lock at each listing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, TypeGuard, cast

from specbench_tui.core.events import ConfigFinished, Event, SweepFinished, SweepStarted
from specbench_tui.paths import PrivateDirError, private_dir
from specbench_tui.rundir.files import FUTURE_SLACK_S, META_LIMIT, RUN_DIR_MARKERS, plausible_time, read_object
from specbench_tui.rundir.history import RunFold
from specbench_tui.rundir.store import EVENTS, FILE_MODE, MAX_JSON_BYTES, PLAN_JSON, RESULTS, RUN_JSON, SWEEP_TOML, StoreError

INDEX_VERSION = 2
"""2: each entry says how many server launches its events record (:attr:`Entry.launches`)."""
INDEX_DIR = "run-index"
"""The sub-folder of this user's private folder that holds one index per runs folder."""
INDEX_LIMIT = 256 << 20
"""An index larger than this is not one specbench wrote (10,000 runs take about 4 MB)."""
KEYED = (RUN_JSON, PLAN_JSON, EVENTS, RESULTS)
"""The files whose identity an entry is keyed by (with the directory's inode; the stored sweep, written once,
only says that the directory is a run directory when none of them is there)."""
UPDATE_EVERY_S = 2.0
"""A running sweep rewrites its entry at most this often as configurations finish (always at start and end)."""
PROGRESS_INDEX_BYTES = 256 << 10
"""A journal larger than this (about 600 entries since the last listing) is added to by a running sweep only as
it starts and ends, not as its configurations finish (the listing reads a live run's few changed files anyway)."""
JOURNAL_LIMIT = 16 << 20
"""A journal is never made larger than this (nor read past it): its runs are read again by the next listing."""
_MISSING = (0, -1, 0, 0)
_EVENTS_AT = 1 + 4 * KEYED.index(EVENTS)
"""Where the identity of ``events.jsonl`` sits in a :data:`Key` (and of ``run.json``: :data:`_META_AT`)."""
_META_AT = 1 + 4 * KEYED.index(RUN_JSON)
_KEY_LENGTH = 1 + 4 * len(KEYED)

Key = list[int]
"""The directory's inode, then four numbers (inode, size, modification time in ns, kind) for each of
:data:`KEYED`."""


class EntryRecord(TypedDict):
    """An :class:`Entry` as the index and its journal hold it (:meth:`Entry.to_json`)."""

    key: Key
    sweep: str
    started: float
    ended: str | None
    unreadable: bool
    total: int
    ran: int
    skipped: int
    measurements: int
    problem: str | None
    launches: int


class _Folder(TypedDict):
    """The runs folder an index or a journal line was written for: its resolved path, device and inode."""

    path: str
    dev: int
    ino: int


def _identity(path: str, follow: bool = False) -> tuple[int, int, int, int]:
    try:
        info = os.stat(path) if follow else os.lstat(path)
    except OSError:
        return _MISSING
    return info.st_ino, info.st_size, info.st_mtime_ns, stat.S_IFMT(info.st_mode)


def key_of(run_dir: Path | str, inode: int | None = None) -> Key | None:
    """What an entry of ``run_dir`` is keyed by (the directory's inode, given when a listing already has it,
    and the identity of each of :data:`KEYED`); None when it is not a run directory (not a directory, or none
    of :data:`~specbench_tui.rundir.files.RUN_DIR_MARKERS` in it)."""
    base = os.fspath(run_dir)
    if inode is None:
        try:
            info = os.stat(base)
        except OSError:
            return None
        if not stat.S_ISDIR(info.st_mode):
            return None
        inode = info.st_ino
    key = [inode]
    marked = False
    lstat, kind = os.lstat, stat.S_IFMT
    for name in KEYED:
        try:
            info = lstat(f"{base}/{name}")
        except OSError:
            key.extend(_MISSING)
            continue
        key.extend((info.st_ino, info.st_size, info.st_mtime_ns, kind(info.st_mode)))
        marked = marked or name in RUN_DIR_MARKERS
    if not marked and _identity(f"{base}/{SWEEP_TOML}") == _MISSING:
        return None
    return key


@dataclass(frozen=True)
class Entry:
    """What the index says of one run directory."""

    key: Key
    sweep: str
    started: float
    """The run's recorded start when it is a time, else the directory's modification time (0: neither)."""
    ended: str | None
    """How the sweep ended (completed, aborted, failed), None while no end is recorded."""
    unreadable: bool
    """The run's own records could not be read (a file of the wrong kind: :attr:`problem` says which)."""
    total: int
    ran: int
    skipped: int
    measurements: int
    problem: str | None
    launches: int = 0
    """Server launches its events file records (at least: a line that may be one counts), so a scan for
    servers left behind (:mod:`specbench_tui.engine.leftovers`) passes over a run that launched none without
    reading it (:func:`launch_free`)."""

    def to_json(self) -> EntryRecord:
        return {"key": self.key, "sweep": self.sweep, "started": self.started, "ended": self.ended,
                "unreadable": self.unreadable, "total": self.total, "ran": self.ran, "skipped": self.skipped,
                "measurements": self.measurements, "problem": self.problem, "launches": self.launches}

    @classmethod
    def from_json(cls, data: object, key: Key | None = None) -> Entry | None:
        """The entry ``data`` holds, or None when any field is missing or of the wrong type (or, given ``key``,
        when it was read under another key: stale)."""
        if not isinstance(data, dict) or not _key_fits(data.get("key"), key):
            return None
        stored = data.get("key")
        counts = (data.get("total"), data.get("ran"), data.get("skipped"), data.get("measurements"),
                  data.get("launches"))
        started, ended, problem, sweep = data.get("started"), data.get("ended"), data.get("problem"), data.get("sweep")
        values = [count for count in counts if type(count) is int and count >= 0]
        if len(values) != len(counts) or not _start_time(started) or not _texts_fit(data):
            return None
        total, ran, skipped, measurements, launches = values
        return cls(key=list(key if key is not None else cast("list[int]", stored)), sweep=str(sweep),
                   started=float(started), ended=ended,
                   unreadable=data["unreadable"], total=total, ran=ran, skipped=skipped, measurements=measurements,
                   problem=problem, launches=launches)


def _key_fits(stored: object, key: Key | None) -> bool:
    """The stored key is ``key`` (when given: else the entry is stale), or a key's shape (a list of ints)."""
    if key is not None:
        return stored == key
    return isinstance(stored, list) and len(stored) == _KEY_LENGTH and all(type(v) is int for v in stored)


def _start_time(started: object) -> TypeGuard[float]:
    """A number (no bool) that is 0 (unknown) or a plausible time."""
    return (isinstance(started, (int, float)) and not isinstance(started, bool)
            and (started == 0 or plausible_time(started) is not None))


def _texts_fit(data: dict[str, object]) -> bool:
    """The sweep's name a string, the ending and the problem strings or None, ``unreadable`` a bool."""
    ended, problem = data.get("ended"), data.get("problem")
    return (type(data.get("sweep")) is str and (ended is None or type(ended) is str)
            and (problem is None or type(problem) is str) and type(data.get("unreadable")) is bool)


def _started(path: Path, meta: Mapping[str, object], problems: list[str]) -> float:
    recorded = meta.get("started")
    started = plausible_time(recorded)
    if started is None and recorded is not None:
        problems.append(f"{path / RUN_JSON}: 'started' = {str(recorded)[:40]} is not a time; ignored")
    if started is None:
        try:
            started = plausible_time(path.stat().st_mtime) or 0.0
        except OSError:
            started = 0.0
    return started


def read_entry(run_dir: Path, key: Key, fold: RunFold | None = None,
               plan: Mapping[str, object] | None = None) -> Entry:
    """Read ``run_dir`` (its key taken before, so a change meanwhile makes the entry stale, never wrong):
    its plan (unless given: a run's own writer read it once) and metadata, and its records through ``fold``
    (advanced from where it was) or a new one. Nothing raises: what cannot be read is said in
    :attr:`Entry.problem`."""
    problems: list[str] = []
    objects: dict[str, Mapping[str, object]] = {} if plan is None else {PLAN_JSON: plan}
    for name in (PLAN_JSON, RUN_JSON) if plan is None else (RUN_JSON,):
        try:
            objects[name] = read_object(run_dir, name, MAX_JSON_BYTES if name == PLAN_JSON else META_LIMIT) or {}
        except (StoreError, OSError) as exc:
            problems.append(str(exc))
            objects[name] = {}
    plan, meta = objects[PLAN_JSON], objects[RUN_JSON]
    unreadable = False
    try:
        fold = (fold or RunFold(run_dir, plan, every_event=False)).advance()
        counts = fold.ledger.progress()
        ended = fold.ended.state if fold.ended is not None else None
        launches = fold.launches
    except (StoreError, OSError) as exc:
        problems.append(str(exc))
        unreadable, ended = True, None
        counts = RunFold(run_dir, plan).ledger.progress()
        launches = 1  # not read: it may have launched one
    sweep = plan.get("sweep")
    return Entry(key=key, sweep=sweep if isinstance(sweep, str) and sweep else run_dir.name,
                 started=_started(run_dir, meta, problems), ended=ended, unreadable=unreadable, total=counts.total,
                 ran=counts.ran, skipped=counts.skipped, measurements=counts.measurements,
                 problem="; ".join(problems) or None, launches=launches)


def _folder_identity(runs_dir: Path) -> tuple[str, int, int] | None:
    """The runs folder's resolved path, device and inode (None: not a folder that can be read)."""
    try:
        resolved = os.path.realpath(runs_dir)
        info = os.stat(resolved)
    except (OSError, ValueError):
        return None
    return (resolved, info.st_dev, info.st_ino) if stat.S_ISDIR(info.st_mode) else None


def index_path(runs_dir: Path, resolved: str | None = None) -> Path | None:
    """Where ``runs_dir``'s index is kept: ``<private dir>/run-index/<sha256 of its resolved path>.json``, in this
    user's own private folder (:func:`specbench_tui.paths.private_dir`), never in the runs folder itself (which
    holds run directories only, and may be someone else's). None when there is no private folder to keep it in
    (the listing then reads every run: the index is a cache)."""
    if resolved is None:
        folder = _folder_identity(runs_dir)
        if folder is None:
            return None
        resolved = folder[0]
    try:
        base = private_dir(INDEX_DIR)
    except (PrivateDirError, OSError):
        return None
    return base / f"{hashlib.sha256(os.fsencode(resolved)).hexdigest()}.json"


def read_private(path: Path, limit: int = INDEX_LIMIT) -> bytes | None:
    """The bytes of ``path`` when it is a regular file of this user's that no one else may write, of at most
    ``limit`` bytes (opened without following a link and without blocking); else None."""
    return _read_private(path, limit)[0]


Identity = tuple[int, int, int, int]
"""A file's device, inode, size and modification time (ns)."""


def _read_private(path: Path, limit: int, known: Identity | None = None) -> tuple[bytes | None, Identity | None]:
    """:func:`read_private`, and the identity of the file read; when it is ``known`` (the file read before,
    unchanged), its bytes are not read again (None with the identity)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None, None
    try:
        info = os.fstat(fd)
        if (not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022
                or info.st_size > limit):
            return None, None
        identity = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
        if identity == known:
            return None, identity
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read(limit + 1), identity
    except OSError:
        return None, None
    finally:
        os.close(fd)


def write_private(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` in this user's private folder: a new file (mode 0644, never through a link)
    renamed over the old, so a reader sees the one or the other whole; False when it cannot be (a full disk)."""
    return _write_private(path, data) is not None


def _write_private(path: Path, data: bytes) -> Identity | None:
    """:func:`write_private`; the identity of the file written (None: not written)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), FILE_MODE)
            handle.write(data)
            handle.flush()
            info = os.fstat(handle.fileno())
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return None
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


_READ: dict[str, tuple[Identity, dict[str, object] | None]] = {}
"""The index this process last read or wrote at each path, by the identity of its file: a command that reads
it twice (``run --resume latest``: ``latest``, then the scan for leftover servers) parses 4 MB once. A file
changed, replaced or rewritten by another process has another identity and is read again."""


def _index_doc(path: Path) -> dict[str, object] | None:
    """The parsed index at ``path`` (None: none there that can be believed, or not JSON); do not change it."""
    cached = _READ.get(str(path))
    raw, identity = _read_private(path, INDEX_LIMIT, cached[0] if cached is not None else None)
    if identity is None:
        return None
    if raw is None and cached is not None:
        return cached[1]
    try:
        data = json.loads(raw) if raw is not None else None
    except (ValueError, RecursionError):
        data = None
    doc = data if isinstance(data, dict) else None
    _READ.clear()  # one index kept: a listing reads one folder
    _READ[str(path)] = (identity, doc)
    return doc


def load_index(runs_dir: Path) -> dict[str, object] | None:
    """The entries of ``runs_dir``'s index as stored, with those its runs appended since (:func:`append_entry`;
    each checked by :meth:`Entry.from_json` when used); None when there is none it can believe (missing, not a
    regular file, a link, someone else's or writable by others, too large, not JSON, another version, or
    written for another folder: the runs folder's path, device or inode differ, so a folder moved, replaced or
    recreated is read again)."""
    return _load(runs_dir)[0]


def _folder_doc(folder: tuple[str, int, int]) -> _Folder:
    return {"path": folder[0], "dev": folder[1], "ino": folder[2]}


def _load(runs_dir: Path) -> tuple[dict[str, object] | None, int]:
    """:func:`load_index`, and the size of the journal read with it (0: none)."""
    folder = _folder_identity(runs_dir)
    path = index_path(runs_dir, folder[0]) if folder is not None else None
    if path is None or folder is None:
        return None, 0
    data = _index_doc(path)
    runs: dict[str, object] | None = None
    stored = data.get("runs") if data is not None else None
    if (data is not None and data.get("version") == INDEX_VERSION and isinstance(stored, dict)
            and data.get("folder") == _folder_doc(folder)):
        runs = dict(stored)  # a copy: the parsed index may be read again (:data:`_READ`)
    appended, size = _journal(journal_path(path), folder)
    if appended:
        runs = {**(runs or {}), **appended}
    return runs, size


def journal_path(index: Path) -> Path:
    """Where the runs of a folder append their entries between two writes of its index (beside it)."""
    return index.with_suffix(".journal")


def _journal(path: Path, folder: tuple[str, int, int]) -> tuple[dict[str, object], int]:
    """The entries a journal holds for ``folder`` (the last line per run directory wins; a line that is not one
    is passed over), and its size."""
    raw = read_private(path, JOURNAL_LIMIT)
    if not raw:
        return {}, 0
    expected = _folder_doc(folder)
    entries: dict[str, object] = {}
    for line in raw.split(b"\n"):
        try:
            record = json.loads(line) if line else None
        except (ValueError, RecursionError):
            continue
        if (isinstance(record, dict) and record.get("version") == INDEX_VERSION
                and record.get("folder") == expected and type(record.get("name")) is str):
            entries[record["name"]] = record.get("entry")
    return entries, len(raw)


def append_entry(runs_dir: Path, name: str, entry: Entry) -> bool:
    """Add run directory ``name``'s entry to its folder's index by appending one line to the index's journal
    (:func:`journal_path`; the next listing folds it into the index): a run's own writer never reads nor
    rewrites an index of 10,000 runs. False when it is not written (no private folder, a journal that is not a
    regular file of this user's alone, or one of :data:`JOURNAL_LIMIT` bytes already)."""
    folder = _folder_identity(runs_dir)
    path = index_path(runs_dir, folder[0]) if folder is not None else None
    if path is None or folder is None:
        return False
    line = json.dumps({"version": INDEX_VERSION, "folder": _folder_doc(folder), "name": name,
                       "entry": entry.to_json()}, separators=(",", ":")).encode() + b"\n"
    try:
        fd = os.open(journal_path(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                     | os.O_CLOEXEC, FILE_MODE)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if (not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022
                or info.st_size + len(line) > JOURNAL_LIMIT):
            return False
        return os.write(fd, line) == len(line)  # one write of one line: appends never interleave
    except OSError:
        return False
    finally:
        os.close(fd)


def _journal_size(runs_dir: Path) -> int:
    path = index_path(runs_dir)
    try:
        return os.lstat(journal_path(path)).st_size if path is not None else 0
    except OSError:
        return 0


def save_index(runs_dir: Path, entries: Mapping[str, Entry | object]) -> bool:
    """Write the index (a new file renamed over the old: atomic), with the runs folder's path, device and inode;
    False when it cannot be (no private folder, a full disk): the index is a cache, and its absence costs only
    time. Each run's value is its :class:`Entry`, or its record as the index or journal held it (kept as read)."""
    folder = _folder_identity(runs_dir)
    path = index_path(runs_dir, folder[0]) if folder is not None else None
    if path is None or folder is None:
        return False
    doc = {"version": INDEX_VERSION, "folder": _folder_doc(folder),
           "runs": {name: entry.to_json() if isinstance(entry, Entry) else entry for name, entry in entries.items()}}
    identity = _write_private(path, json.dumps(doc, separators=(",", ":")).encode())
    if identity is not None:
        _READ.clear()
        _READ[str(path)] = (identity, doc)  # what this process wrote is what it would read back
    return identity is not None


def run_dir_entries(runs_dir: Path) -> list[os.DirEntry[str]]:
    """The entries of ``runs_dir`` that may be run directories: directories (or links to one), never a dotfile
    nor any other file (a run directory is never named with a leading dot)."""
    try:
        with os.scandir(runs_dir) as listing:
            return [child for child in listing if not child.name.startswith(".") and child.is_dir()]
    except OSError:
        return []


def scan(runs_dir: Path) -> list[tuple[Path, Entry]]:
    """Every run directory directly under ``runs_dir`` with its entry: from the index where it is fresh, read
    again where not (and the index rewritten when anything changed). Unordered."""
    children = run_dir_entries(runs_dir)
    if not children:
        return []
    known, journal = _load(runs_dir)
    stored = known or {}
    entries: dict[str, Entry | object] = {}
    changed = known is None or journal > 0  # a journal is folded into the index, and emptied
    out: list[tuple[Path, Entry]] = []
    for child in children:
        key = key_of(child.path, child.inode() if not child.is_symlink() else None)
        if key is None:
            continue
        path = Path(child.path)
        raw = stored.get(child.name)
        entry = Entry.from_json(raw, key)
        if entry is None:  # new, stale or malformed: read again
            entry = entries[child.name] = read_entry(path, key)
            changed = True
        else:
            entries[child.name] = raw if isinstance(raw, dict) else entry
        out.append((path, entry))
    if (changed or len(entries) != len(stored)) and save_index(runs_dir, entries) and journal:
        _empty_journal(runs_dir, journal)
    return out


def _empty_journal(runs_dir: Path, size: int) -> None:
    """Remove the journal folded into the index just written, unless it grew since it was read (a run's line
    appended meanwhile stays, folded in by the next listing; one appended in the instant between the two
    calls is lost, and its run read again: the index is a cache)."""
    path = index_path(runs_dir)
    if path is None:
        return
    with contextlib.suppress(OSError):
        if os.lstat(journal_path(path)).st_size == size:
            os.unlink(journal_path(path))


JOURNAL_FEW = 64
"""An ordering that read at most this many run directories again adds their entries to the journal (a line each)
instead of rewriting the index."""


class Ordering:
    """The run directories of a runs folder in the order they started, for ``latest`` and ``latest~N``
    (:func:`~specbench_tui.report.runs.find_run`): :attr:`order` is each one's start and name, oldest first (by
    start, then name, as :func:`~specbench_tui.report.runs.list_runs` orders them), and :meth:`entry` the whole
    entry of the one picked.

    A start is what the run's ``run.json`` says (or its directory's time when it says none), so an index entry
    gives it as long as that file is the one it was read from; and a directory is a run directory as long as its
    events file is the one the entry was read from. So each run costs two ``lstat`` calls here, not the four of
    a fresh entry (:func:`key_of`): the one picked is made fresh by :meth:`entry` (read again if any of its files
    changed), and any other whose ``run.json`` or events file changed, or that is new to the folder, is read
    again now. Those read again go to the index's journal (at most :data:`JOURNAL_FEW`; more, or a folder with no
    index, rewrite the index)."""

    def __init__(self, runs_dir: Path) -> None:
        self.runs_dir = runs_dir
        self.order: list[tuple[float, str]] = []
        self._stored: dict[str, object] = {}
        self._fresh: dict[str, Entry] = {}
        children = run_dir_entries(runs_dir)
        if not children:
            return
        known, journal = _load(runs_dir)
        stored = self._stored = known or {}
        fresh = self._fresh
        order = self.order
        latest = time.time() + FUTURE_SLACK_S
        for child in children:
            name = child.name
            started = None if child.is_symlink() else _start_of(stored.get(name), child, latest)
            if started is None:
                key = key_of(child.path, None if child.is_symlink() else child.inode())
                if key is None:
                    continue
                entry = Entry.from_json(stored.get(name), key)
                if entry is None:
                    entry = fresh[name] = read_entry(Path(child.path), key)
                started = entry.started
            order.append((started, name))
        order.sort()
        if known is None or len(fresh) > JOURNAL_FEW or not all(
                append_entry(runs_dir, name, entry) for name, entry in fresh.items()):
            listed = {name for _, name in order}
            entries = {name: fresh.get(name) or stored[name] for name in listed}
            if save_index(runs_dir, entries) and journal:
                _empty_journal(runs_dir, journal)

    def entry(self, name: str) -> Entry | None:
        """The fresh entry of run directory ``name`` of :attr:`order` (read again if any of its files changed;
        None: no longer a run directory)."""
        if name in self._fresh:
            return self._fresh[name]
        path = self.runs_dir / name
        key = key_of(path)
        if key is None:
            return None
        entry = Entry.from_json(self._stored.get(name), key)
        if entry is None:
            entry = self._fresh[name] = read_entry(path, key)
            append_entry(self.runs_dir, name, entry)
        return entry


def _start_of(raw: object, child: os.DirEntry[str], latest: float) -> float | None:
    """The start an index entry gives, when its directory is the one it was read from and its ``run.json`` and
    events file too (see :class:`Ordering`), and it is a time (0, or after 1970 and at most ``latest``, as
    :func:`~specbench_tui.rundir.files.plausible_time` has it); None: read the entry whole."""
    if type(raw) is not dict:
        return None
    key = raw.get("key")
    started = raw.get("started")
    if type(key) is not list or len(key) != _KEY_LENGTH or key[0] != child.inode() \
            or key[_EVENTS_AT + 1] == -1:  # no events file: whether it is a run directory needs the whole key
        return None
    if not (isinstance(started, (float, int)) and type(started) is not bool
            and (started == 0 or 0 < started <= latest)):  # NaN fails both
        return None
    path = child.path
    if not (_same_identity(key, _META_AT, f"{path}/{RUN_JSON}")  # both missing is the same
            and _same_identity(key, _EVENTS_AT, f"{path}/{EVENTS}")):  # the key has one (checked above)
        return None
    return float(started)


def _same_identity(key: Key, at: int, path: str) -> bool:
    """Whether the identity that ``key`` holds at ``at`` is that of the file at ``path`` now."""
    return tuple(key[at:at + 4]) == _identity(path)


def entry_of(run_dir: Path) -> Entry | None:
    """The entry of one run directory: its index entry when fresh, else read (None: not a run directory)."""
    key = key_of(run_dir)
    if key is None:
        return None
    entry = Entry.from_json((load_index(run_dir.parent) or {}).get(run_dir.name), key)
    return entry if entry is not None else read_entry(run_dir, key)


class LaunchFree:
    """Which run directories launched no server, from their folders' indexes: True for a run directory when its
    folder's index has an entry for it that counts no launch (:attr:`Entry.launches`) and was read from the
    events file that is there now (the same inode, size, modification time and kind). Anything else (no index,
    no entry, an events file written since, an entry that is not one) is False: read the run. Each folder's
    index is loaded once per checker (make one per scan)."""

    def __init__(self) -> None:
        self._folders: dict[str, Callable[[str], bool]] = {}

    def __call__(self, run_dir: Path | str) -> bool:
        folder, name = os.path.split(os.fspath(run_dir).rstrip("/"))
        return self.folder(folder)(name)

    def folder(self, folder: str) -> Callable[[str], bool]:
        """The check for the run directories of ``folder``, by name."""
        check = self._folders.get(folder)
        if check is None:
            check = self._folders[folder] = _launch_free_in(folder, load_index(Path(folder or ".")) or {})
        return check


def _launch_free_in(folder: str, runs: Mapping[str, object]) -> Callable[[str], bool]:
    def check(name: str) -> bool:
        raw = runs.get(name)
        if type(raw) is not dict or raw.get("launches") != 0 or type(raw["launches"]) is not int:
            return False
        key = raw.get("key")
        return (type(key) is list and len(key) == _KEY_LENGTH and key[_EVENTS_AT + 1] != -1
                and _same_identity(key, _EVENTS_AT, f"{folder}/{name}/{EVENTS}"))
    return check


class IndexUpdater:
    """A run's own writer of its entry: called with every event the run directory records (see
    :attr:`specbench_tui.rundir.store.RunDir.after_event`), it folds the run's files on from where it stopped and
    rewrites the entry as the sweep starts, ends, and at most every :data:`UPDATE_EVERY_S` as configurations
    finish (while the index is under :data:`PROGRESS_INDEX_BYTES`). It never raises: a runs folder it cannot
    write costs the next listing a read."""

    def __init__(self, run_dir: Path, every_s: float = UPDATE_EVERY_S) -> None:
        self.run_dir = run_dir
        self.every_s = every_s
        self._fold: RunFold | None = None
        self._plan: Mapping[str, object] = {}
        self._last = float("-inf")
        self.writes = 0

    def __call__(self, event: Event) -> None:
        if isinstance(event, (SweepStarted, SweepFinished)) or (
                isinstance(event, ConfigFinished) and time.monotonic() - self._last >= self.every_s
                and _journal_size(self.run_dir.parent) <= PROGRESS_INDEX_BYTES):
            self.write()

    def write(self) -> None:
        """Rewrite the entry now."""
        self._last = time.monotonic()
        try:
            key = key_of(self.run_dir)
            if key is None:
                return
            if self._fold is None:
                try:
                    self._plan = read_object(self.run_dir, PLAN_JSON, MAX_JSON_BYTES) or {}
                except (StoreError, OSError):
                    self._plan = {}
                self._fold = RunFold(self.run_dir, self._plan, every_event=False)
            entry = read_entry(self.run_dir, key, self._fold, self._plan)  # the plan, written once, read once
            if append_entry(self.run_dir.parent, self.run_dir.name, entry):
                self.writes += 1
        except Exception:  # noqa: BLE001 - the index is a cache: the run goes on whatever happens to it
            return
