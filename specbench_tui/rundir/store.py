"""The run directory: the unit of truth, appended as things happen and read back for resume and reports.

Layout::

    runs/<started>_<sweep>/
      sweep.toml  plan.json  env.json  events.jsonl  results.jsonl  logs/<config>.log

Appends are whole lines written with one ``write`` and flushed (results are also fsynced); a line torn by a
crash is skipped with a warning on reading, and the next append starts on a fresh line. A measurement is written
once, to ``results.jsonl``; ``events.jsonl`` holds everything else that happened (run directories written before
this rule also hold copies of the measurements there, which every reader passes over).

Nothing read back is trusted: a file of the wrong kind (a directory, a FIFO, a link to ``/dev/zero``) is a
:class:`StoreError` saying so, never a hang or a ``MemoryError``; a line too long, not JSON, or a record whose
fields have the wrong types is skipped and counted (:class:`ReadReport`). Files are created ``0644`` and
folders ``0755`` whatever the umask: nothing in a run directory is group- or world-writable.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from specbench_tui.core.events import Event, MeasurementRecorded, NodeFingerprinted, ServerReady, event_from_json
from specbench_tui.core.fold import last_per_key
from specbench_tui.core.records import Measurement


_log = logging.getLogger(__name__)


class StoreError(Exception):
    """The run directory cannot be written (full disk, permissions): the sweep must stop cleanly."""


FILE_MODE = 0o644
DIR_MODE = 0o755
MAX_RECORD_BYTES = 16 << 20
"""A line of ``events.jsonl`` or ``results.jsonl`` longer than this is skipped unread."""
MAX_JSON_BYTES = 256 << 20
"""``plan.json``, ``env.json``, ``run.json`` larger than this are not read."""
EVENTS = "events.jsonl"
RESULTS = "results.jsonl"
RUN_JSON = "run.json"
PLAN_JSON = "plan.json"
SWEEP_TOML = "sweep.toml"
ENV_JSON = "env.json"
OWNER_LOCK = ".owner.lock"
SUMMARY = "summary.txt"
ENGINE_LOG = "engine.log"
ENGINE_SOCKET = "engine.sock"
"""The run directory's files: only the run-directory package (:mod:`specbench_tui.rundir`: this module, its lock,
the rest of the package) names them."""
EXAMPLES = 3
"""Skipped lines quoted per file; the rest are counted."""


@dataclass
class ReadReport:
    """What reading the run directory's files skipped: counted per file, with the first few examples."""

    skipped: list[str] = field(default_factory=list)
    """The first :data:`EXAMPLES` reasons per file."""
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, file: str, message: str) -> None:
        self.counts[file] = self.counts.get(file, 0) + 1
        if self.counts[file] <= EXAMPLES:
            self.skipped.append(message)

    def summary(self) -> list[str]:
        """One warning per file that had skipped lines, with the count and the first reasons."""
        out = []
        for file, count in self.counts.items():
            examples = [m for m in self.skipped if m.startswith(file)] or [f"{file}: a malformed record skipped"]
            more = count - len(examples)
            out.append("; ".join(examples) + (f" (and {more:,} more malformed records of {file} skipped: "
                                              f"{count:,} in all)" if more > 0 else ""))
        return out


def document_text(doc: Mapping[str, object]) -> str:
    """``doc`` as JSON for a reader and for a person: one key a line, each item of a list on a line of its own
    (what ``json.dumps(doc, indent=2)`` holds, in one call of the C encoder per item: ``indent`` takes the
    pure-Python encoder, seconds for a plan of 10,000 points)."""
    lines = ["{"]
    last = len(doc) - 1
    for number, (key, value) in enumerate(doc.items()):
        comma = "," if number < last else ""
        if isinstance(value, list) and value:
            lines.append(f"  {json.dumps(key)}: [")
            lines.append(",\n".join(f"    {json.dumps(item)}" for item in value))
            lines.append(f"  ]{comma}")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def check_regular(fd: int, path: Path) -> None:
    """Raise :class:`StoreError` unless ``fd`` is a regular file (a run directory holds nothing else)."""
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
                "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "not a regular file")
        raise StoreError(f"{path} is {kind}, not a regular file: this run directory has been tampered with")


def open_regular(path: Path, flags: int = os.O_RDONLY, mode: int = FILE_MODE) -> int:
    """``os.open`` that never blocks on a FIFO and refuses anything but a regular file (:class:`StoreError`);
    ``FileNotFoundError`` passes through."""
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    try:
        check_regular(fd, path)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_to_read(path: Path) -> int:
    """:func:`open_regular` for reading, any failure but ``FileNotFoundError`` a :class:`StoreError` naming the
    file."""
    try:
        return open_regular(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from exc


def read_regular(path: Path, limit: int = MAX_JSON_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; :class:`StoreError` otherwise (missing files
    raise ``FileNotFoundError``)."""
    fd = open_to_read(path)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise StoreError(f"{path} is larger than {limit:,} bytes: not a file specbench wrote")
    return data


_PATH_LOCKS: dict[str, threading.Lock] = {}
_PATH_LOCKS_GUARD = threading.Lock()


def _lock_for(path: Path) -> threading.Lock:
    """One lock per file in this process, shared by every :class:`JsonlFile` opened on it."""
    key = os.path.abspath(path)
    with _PATH_LOCKS_GUARD:
        return _PATH_LOCKS.setdefault(key, threading.Lock())


class JsonlFile:
    """An append-only JSON-lines file safe for concurrent appends from one process.

    Each record is encoded to one line and written with ``os.write`` on an ``O_APPEND`` descriptor under a
    per-file lock, so threads never interleave partial lines and a reader sees whole lines or a torn last one.
    """

    def __init__(self, path: Path, fsync: bool = False) -> None:
        self.path = path
        self._fsync = fsync
        self._lock = _lock_for(path)
        self._fd: int | None = None

    def _open(self) -> int:
        if self._fd is None:
            fd = open_regular(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
            try:
                size = os.fstat(fd).st_size
                if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
                    # A crash tore the last line: start ours on a fresh one so it stays readable.
                    _write_all(fd, b"\n")
            except OSError:
                os.close(fd)
                raise
            self._fd = fd
        return self._fd

    def append(self, data: Mapping[str, object]) -> None:
        """Write one record as one line and flush it (and fsync it when asked); raise StoreError on failure."""
        line = (json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str) + "\n").encode("utf-8")
        with self._lock:
            try:
                fd = self._open()
                _write_all(fd, line)
                if self._fsync:
                    os.fsync(fd)
            except OSError as exc:
                raise StoreError(f"cannot write {self.path}: {exc.strerror or exc}") from exc

    def read(self, report: ReadReport | None = None) -> Iterator[dict[str, object]]:
        """Every well-formed line; torn or corrupt lines are counted in ``report`` and skipped. A path that is
        not a regular file raises :class:`StoreError`; a missing one reads as empty."""
        try:
            fd = open_regular(self.path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc.strerror or exc}") from exc
        name = self.path.name
        report = ReadReport() if report is None else report
        with os.fdopen(fd, "rb") as handle:
            number = 0
            while True:
                raw = handle.readline(MAX_RECORD_BYTES + 1)
                if not raw:
                    break
                number += 1
                if len(raw) > MAX_RECORD_BYTES and not raw.endswith(b"\n"):
                    while raw and not raw.endswith(b"\n"):  # the rest of that line, unread
                        raw = handle.readline(MAX_RECORD_BYTES)
                    _skip(report, name, f"{name}:{number}: a line over {MAX_RECORD_BYTES:,} bytes, skipped")
                    continue
                if not raw.strip():
                    continue
                try:
                    data = json.loads(raw.decode("utf-8", errors="replace"))
                except (ValueError, RecursionError):
                    _skip(report, name, f"{name}:{number}: unreadable line skipped (torn by a crash?)")
                    continue
                if isinstance(data, dict):
                    yield data
                else:
                    _skip(report, name, f"{name}:{number}: not a JSON object, skipped")

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                try:
                    os.close(self._fd)
                except OSError:
                    pass
                self._fd = None


def _skip(report: ReadReport, file: str, message: str) -> None:
    """Count a skipped line where the caller can show it; the first few also go to the log."""
    report.add(file, message)
    if report.counts[file] <= EXAMPLES:
        _log.warning("%s", message)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


_UNSAFE = re.compile(r"[^A-Za-z0-9._+\-]")


def safe_filename(name: str) -> str:
    """A configuration name made safe as a file name."""
    return _UNSAFE.sub("_", name)[:120] or "config"


def log_file_name(config_name: str, config_id: str) -> str:
    """A configuration's log file name: a readable slug of its name plus its id, so two configurations never
    share one (names that differ only in characters the slug replaces, or past its length, included)."""
    return f"{_UNSAFE.sub('_', config_name)[:80] or 'config'}-{_UNSAFE.sub('_', config_id)[:40]}.log"


class OwnerLock(Protocol):
    """A held lock on a run directory (:mod:`specbench_tui.rundir.lock` makes them)."""

    def release(self) -> None: ...


class RunDir:
    """One run directory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events = JsonlFile(path / EVENTS)
        self.results = JsonlFile(path / RESULTS, fsync=True)
        self.logs = path / "logs"
        self.created = False
        """True when this process made the directory (it may then remove it, see :meth:`discard`)."""
        self.discarded = False
        self._made_runs_dir = False
        self.owner_lock: OwnerLock | None = None
        """The run directory's lock while this process owns the run (taken and released by the application)."""
        self.node_fingerprints: dict[str, Mapping[str, object]] = {}
        """Cluster node -> fingerprint, as :class:`NodeFingerprinted` events gave them: ``env.json``'s ``nodes``."""
        self.config_facts: dict[str, dict[str, object]] = {}
        """Configuration id -> what its server said of itself once ready (running cap, CUDA-graph ceiling), as
        :class:`ServerReady` events gave them: each configuration's ``facts`` in ``plan.json`` and ``env.json``'s
        ``config_facts``."""
        self.after_event: Callable[[Event], None] | None = None
        """Called with every event once it is recorded (the runs folder's index keeps the run's entry with
        :class:`specbench_tui.rundir.index.IndexUpdater`, the fold checkpoint is kept by
        :class:`specbench_tui.rundir.checkpoint.RunCheckpoints`); what it raises is not the run's concern."""
        self.on_close: list[Callable[[], None]] = []
        """Called as the run directory is closed (the checkpoint writer ends its thread)."""

    @classmethod
    def create(cls, runs_dir: Path, sweep_name: str, sweep_text: str, plan_json: Mapping[str, object]) -> RunDir:
        """Make a new run directory (respecting the umask) and write the sweep and plan into it."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        try:
            made_runs_dir = not runs_dir.exists()
            runs_dir.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
            path = runs_dir / f"{stamp}_{safe_filename(sweep_name)}"
            suffix = 1
            while path.exists():
                suffix += 1
                path = runs_dir / f"{stamp}-{suffix}_{safe_filename(sweep_name)}"
            path.mkdir(mode=DIR_MODE)
            os.chmod(path, DIR_MODE)  # whatever the umask: never group- or world-writable
            (path / "logs").mkdir(mode=DIR_MODE)
            os.chmod(path / "logs", DIR_MODE)
            run = cls(path)
            run.created = True
            run._made_runs_dir = made_runs_dir
            _write_atomic(path / SWEEP_TOML, sweep_text)
            _write_atomic(path / PLAN_JSON, document_text(plan_json))
        except OSError as exc:
            raise StoreError(f"cannot create a run directory under {runs_dir}: {exc.strerror or exc}") from exc
        return run

    @classmethod
    def open(cls, path: Path) -> RunDir:
        """An existing run directory, for resume or reports; its record files must be regular files."""
        if not (path / SWEEP_TOML).is_file():
            raise StoreError(f"{path} is not a run directory (no {SWEEP_TOML})")
        for name in (EVENTS, RESULTS, PLAN_JSON, RUN_JSON, SWEEP_TOML):
            try:
                os.close(open_regular(path / name))
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise StoreError(f"cannot read {path / name}: {exc.strerror or exc}") from exc
        run = cls(path)
        try:
            run.logs.mkdir(exist_ok=True, mode=DIR_MODE)
        except OSError as exc:
            raise StoreError(f"cannot use {path}: {exc.strerror or exc}") from exc
        return run

    def log_path(self, config_name: str, config_id: str) -> Path:
        return self.logs / log_file_name(config_name, config_id)

    def discard(self) -> bool:
        """Remove a run directory this process created and nothing ran in (a failed pre-flight), so that a
        sweep that never started leaves nothing behind. True when it was removed."""
        if not self.created:
            return False
        self.close()
        try:
            shutil.rmtree(self.path)
        except OSError:
            return False
        self.discarded = True
        if self._made_runs_dir:
            with contextlib.suppress(OSError):
                self.path.parent.rmdir()  # only when empty
        return True

    def write_json(self, name: str, data: Mapping[str, object]) -> None:
        """Write ``name`` atomically; ``env.json`` keeps the cluster nodes' fingerprints already recorded."""
        if name == ENV_JSON and self.node_fingerprints:
            nodes = data.get("nodes")
            data = {**data, "nodes": {**(nodes if isinstance(nodes, dict) else {}), **self.node_fingerprints}}
        if name == ENV_JSON and self.config_facts:
            facts = data.get("config_facts")
            data = {**data, "config_facts": {**(facts if isinstance(facts, dict) else {}), **self.config_facts}}
        try:
            _write_atomic(self.path / name, json.dumps(data, indent=2, default=str) + "\n")
        except OSError as exc:
            raise StoreError(f"cannot write {self.path / name}: {exc.strerror or exc}") from exc

    def read_json(self, name: str) -> dict[str, object] | None:
        """A JSON object the run directory holds, or None when it is missing or unreadable (a file of the
        wrong kind raises :class:`StoreError`)."""
        try:
            data = json.loads(read_regular(self.path / name).decode("utf-8", errors="replace"))
        except (OSError, ValueError, RecursionError):
            return None
        return data if isinstance(data, dict) else None

    def read_meta(self) -> dict[str, object]:
        """``run.json`` (how the run was started, how its engine ended); ``{}`` when missing or unreadable."""
        try:
            return self.read_json(RUN_JSON) or {}
        except StoreError:
            return {}

    def write_meta(self, meta: Mapping[str, object]) -> None:
        self.write_json(RUN_JSON, meta)

    def update_meta(self, **fields: object) -> None:
        """``run.json`` with ``fields`` added (the rest kept)."""
        self.write_meta({**self.read_meta(), **fields})

    def read_plan_json(self) -> dict[str, object] | None:
        """``plan.json`` as written at the start (None when missing or unreadable)."""
        return self.read_json(PLAN_JSON)

    @property
    def sweep_file(self) -> Path:
        """The copy of the sweep the run directory keeps (``--resume`` runs it)."""
        return self.path / SWEEP_TOML

    def write_env(self, doc: Mapping[str, object]) -> None:
        """The environment fingerprint (cluster nodes' fingerprints recorded so far are kept in it)."""
        self.write_json(ENV_JSON, doc)

    def has_env(self) -> bool:
        """Whether ``env.json`` has been written (a resumed run keeps the first one)."""
        return os.path.lexists(self.path / ENV_JSON)

    def append_event(self, event: Event) -> None:
        """Persist an event (those that say so). A measurement is written once, to ``results.jsonl`` (its truth,
        fsynced, what resume and every reader fold): its :class:`MeasurementRecorded` event is streamed to live
        readers but not copied into ``events.jsonl``; older run directories that hold copies read the same."""
        if event.persist and not self.discarded and not isinstance(event, MeasurementRecorded):
            self.events.append(event.to_json())
            if isinstance(event, NodeFingerprinted):
                self.record_node(event.node, event.fingerprint)
            if isinstance(event, ServerReady) and (event.running_cap is not None or event.graph_ceiling is not None):
                self.record_config_facts(event.config_id, {"running_cap": event.running_cap,
                                                           "graph_ceiling": event.graph_ceiling})
            if self.after_event is not None:
                with contextlib.suppress(Exception):
                    self.after_event(event)

    def record_node(self, node: str, fingerprint: Mapping[str, object]) -> None:
        """Add a cluster node's fingerprint to ``env.json`` under ``nodes`` (this machine's document stays as it
        is). Before the engine has written ``env.json`` the fingerprint waits, and is written with it."""
        self.node_fingerprints[node] = fingerprint
        env = self.read_json(ENV_JSON)
        if env is not None:
            self.write_json(ENV_JSON, env)

    def record_config_facts(self, config_id: str, facts: Mapping[str, object]) -> None:
        """Record what a configuration's server said of itself (``running_cap``, ``graph_ceiling``) as facts of
        the configuration: under its entry's ``facts`` in ``plan.json`` and under ``config_facts`` in ``env.json``
        (written with it when the engine writes ``env.json`` later). Nothing is rewritten when they are known."""
        if self.config_facts.get(config_id) == facts:
            return
        self.config_facts[config_id] = dict(facts)
        plan = self.read_json(PLAN_JSON)
        configs = plan.get("configs") if plan is not None else None
        entry = next((c for c in configs if isinstance(c, dict) and c.get("id") == config_id), None) \
            if isinstance(configs, list) else None
        if plan is not None and entry is not None and entry.get("facts") != {**(entry.get("facts") or {}), **facts}:
            entry["facts"] = {**(entry.get("facts") or {}), **facts}
            self.write_json(PLAN_JSON, plan)
        env = self.read_json(ENV_JSON)
        if env is not None:
            self.write_json(ENV_JSON, env)

    def append_measurement(self, measurement: Measurement) -> None:
        self.results.append(measurement.to_json())

    def read_events(self, report: ReadReport | None = None) -> list[Event]:
        report = ReadReport() if report is None else report
        out = []
        for data in self.events.read(report):
            try:
                out.append(event_from_json(data))
            except ValueError as exc:
                _skip(report, EVENTS, f"{EVENTS}: {exc}")
        return out

    def read_measurements(self, report: ReadReport | None = None) -> list[Measurement]:
        """Every measurement; for a key recorded twice (a retried configuration), the last one wins."""
        report = ReadReport() if report is None else report
        return last_per_key(self._measurements(report))

    def _measurements(self, report: ReadReport) -> Iterator[Measurement]:
        for data in self.results.read(report):
            try:
                yield Measurement.from_json(data)
            except (TypeError, ValueError) as exc:
                _skip(report, RESULTS, f"{RESULTS}: malformed record skipped ({exc})")

    def close(self) -> None:
        for closing in self.on_close:
            with contextlib.suppress(Exception):
                closing()
        self.on_close = []
        self.events.close()
        self.results.close()


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
