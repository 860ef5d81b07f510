"""The run directory: the unit of truth, appended as things happen and read back for resume and reports.

Layout::

    runs/<started>_<sweep>/
      sweep.toml  plan.json  env.json  events.jsonl  results.jsonl  logs/<config>.log

Appends are whole lines written with one ``write`` and flushed (results are also fsynced); a line torn by a
crash is skipped with a warning on reading, and the next append starts on a fresh line.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specbench_tui.core.events import Event, event_from_json
from specbench_tui.core.records import Measurement, MeasurementKey


_log = logging.getLogger(__name__)


class StoreError(Exception):
    """The run directory cannot be written (full disk, permissions): the sweep must stop cleanly."""


@dataclass
class ReadReport:
    """What reading a JSONL file skipped."""

    skipped: list[str] = field(default_factory=list)


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
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            try:
                size = os.fstat(fd).st_size
                if size > 0 and not _ends_with_newline(self.path):
                    # A crash tore the last line: start ours on a fresh one so it stays readable.
                    _write_all(fd, b"\n")
            except OSError:
                os.close(fd)
                raise
            self._fd = fd
        return self._fd

    def append(self, data: dict[str, Any]) -> None:
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

    def read(self, report: ReadReport | None = None) -> Iterator[dict[str, Any]]:
        """Every well-formed line; torn or corrupt lines are noted in ``report``, logged, and skipped."""
        try:
            handle = open(self.path, encoding="utf-8", errors="replace")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc.strerror or exc}") from exc
        with handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                except json.JSONDecodeError:
                    _skip(report, f"{self.path.name}:{number}: unreadable line skipped (torn by a crash?)")
                    continue
                if isinstance(data, dict):
                    yield data
                else:
                    _skip(report, f"{self.path.name}:{number}: not a JSON object, skipped")

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                try:
                    os.close(self._fd)
                except OSError:
                    pass
                self._fd = None


def _skip(report: ReadReport | None, message: str) -> None:
    """Record a skipped line where the caller can show it, and always in the log."""
    _log.warning("%s", message)
    if report is not None:
        report.skipped.append(message)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


_UNSAFE = re.compile(r"[^A-Za-z0-9._+\-]")


def safe_filename(name: str) -> str:
    """A configuration name made safe as a file name."""
    return _UNSAFE.sub("_", name)[:120] or "config"


class RunDir:
    """One run directory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events = JsonlFile(path / "events.jsonl")
        self.results = JsonlFile(path / "results.jsonl", fsync=True)
        self.logs = path / "logs"

    @classmethod
    def create(cls, runs_dir: Path, sweep_name: str, sweep_text: str, plan_json: dict[str, Any]) -> RunDir:
        """Make a new run directory (respecting the umask) and write the sweep and plan into it."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        try:
            runs_dir.mkdir(parents=True, exist_ok=True)
            path = runs_dir / f"{stamp}_{safe_filename(sweep_name)}"
            suffix = 1
            while path.exists():
                suffix += 1
                path = runs_dir / f"{stamp}-{suffix}_{safe_filename(sweep_name)}"
            path.mkdir()
            (path / "logs").mkdir()
            run = cls(path)
            _write_atomic(path / "sweep.toml", sweep_text)
            _write_atomic(path / "plan.json", json.dumps(plan_json, indent=2) + "\n")
        except OSError as exc:
            raise StoreError(f"cannot create a run directory under {runs_dir}: {exc.strerror or exc}") from exc
        return run

    @classmethod
    def open(cls, path: Path) -> RunDir:
        """An existing run directory, for resume or reports."""
        if not (path / "sweep.toml").is_file():
            raise StoreError(f"{path} is not a run directory (no sweep.toml)")
        run = cls(path)
        try:
            run.logs.mkdir(exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot use {path}: {exc.strerror or exc}") from exc
        return run

    def log_path(self, config_name: str) -> Path:
        return self.logs / f"{safe_filename(config_name)}.log"

    def write_json(self, name: str, data: dict[str, Any]) -> None:
        try:
            _write_atomic(self.path / name, json.dumps(data, indent=2, default=str) + "\n")
        except OSError as exc:
            raise StoreError(f"cannot write {self.path / name}: {exc.strerror or exc}") from exc

    def read_json(self, name: str) -> dict[str, Any] | None:
        try:
            return json.loads((self.path / name).read_text())
        except (OSError, json.JSONDecodeError):
            return None

    def append_event(self, event: Event) -> None:
        if event.persist:
            self.events.append(event.to_json())

    def append_measurement(self, measurement: Measurement) -> None:
        self.results.append(measurement.to_json())

    def read_events(self, report: ReadReport | None = None) -> list[Event]:
        out = []
        for data in self.events.read(report):
            try:
                out.append(event_from_json(data))
            except ValueError as exc:
                if report is not None:
                    report.skipped.append(f"events.jsonl: {exc}")
        return out

    def read_measurements(self, report: ReadReport | None = None) -> list[Measurement]:
        """Every measurement; for a key recorded twice (a retried configuration), the last one wins."""
        latest: dict[MeasurementKey, Measurement] = {}
        for data in self.results.read(report):
            try:
                measurement = Measurement.from_json(data)
            except (TypeError, ValueError) as exc:
                if report is not None:
                    report.skipped.append(f"results.jsonl: malformed record skipped ({exc})")
                continue
            latest.pop(measurement.key, None)
            latest[measurement.key] = measurement
        return list(latest.values())

    def close(self) -> None:
        self.events.close()
        self.results.close()


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
