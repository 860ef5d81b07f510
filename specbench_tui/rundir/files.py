"""The small state files of a run directory, read by the run directory's rules (see the package docstring).

``run.json`` (how the run was started and how its engine ended), ``plan.json``, ``sweep.toml`` (the plan as
``--resume`` rebuilds it), ``.owner.lock`` (who runs it, and whether that process still lives), and the record
files read up to a byte count (what a client that attaches late reads before the live stream).
"""

from __future__ import annotations

import json
import math
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from specbench_tui.rundir.store import (
    EVENTS,
    OWNER_LOCK,
    PLAN_JSON,
    RESULTS,
    RUN_JSON,
    SWEEP_TOML,
    StoreError,
    open_to_read,
    read_regular,
)

if TYPE_CHECKING:
    from specbench_tui.core.plan import Plan

RUN_DIR_MARKERS = (SWEEP_TOML, PLAN_JSON, RESULTS, EVENTS)
"""Files of which at least one must exist for a directory to be taken as a run directory."""
META_LIMIT = 1 << 20
"""``run.json`` and ``.owner.lock`` larger than this are not a file specbench wrote."""
TEXT_LIMIT = 16 << 20
"""``sweep.toml``, ``summary.txt``, ``engine.log`` read at most this much."""
FUTURE_SLACK_S = 86_400.0
"""A time stamp this far past now is no time (a clock may be off by hours, never by days)."""

def has_file(run_dir: Path, name: str) -> bool:
    """Whether ``name`` exists in the run directory (whatever it is: a reader still checks it)."""
    return os.path.lexists(run_dir / name)


def is_run_dir(path: Path) -> bool:
    """A directory holding at least one of :data:`RUN_DIR_MARKERS`."""
    return path.is_dir() and any(has_file(path, marker) for marker in RUN_DIR_MARKERS)


def plausible_time(value: object, now: float | None = None) -> float | None:
    """``value`` as epoch seconds when it can be one (finite, after 1970, not days in the future); else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    seconds = float(value)
    limit = (time.time() if now is None else now) + FUTURE_SLACK_S
    return seconds if math.isfinite(seconds) and 0 < seconds <= limit else None


def read_object(run_dir: Path, name: str, limit: int = META_LIMIT) -> dict[str, object] | None:
    """The JSON object in ``name``: None when it is missing; :class:`StoreError` naming the file when it is not a
    regular file, too large, not JSON or not an object."""
    path = run_dir / name
    try:
        raw = read_regular(path, limit)
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError) as exc:
        raise StoreError(f"{path} is unreadable (not JSON: {str(exc)[:120]})") from None
    if not isinstance(data, dict):
        raise StoreError(f"{path} is unreadable (not a JSON object)")
    return data


def read_meta(run_dir: Path) -> dict[str, object]:
    """``run.json``, or ``{}`` when it is missing or unusable (a reader that must say why calls
    :func:`read_object`)."""
    try:
        return read_object(run_dir, RUN_JSON) or {}
    except (StoreError, OSError):
        return {}


def read_text(run_dir: Path, name: str, limit: int = TEXT_LIMIT) -> str:
    """A text file of the run directory (``sweep.toml``, ``summary.txt``, ``engine.log``): the regular-file and
    size rules; ``FileNotFoundError`` when missing, :class:`StoreError` otherwise."""
    return read_regular(run_dir / name, limit).decode("utf-8", errors="replace")


def load_plan(run_dir: Path) -> Plan:
    """The plan of a run directory, from the sweep it stores (as ``--resume`` rebuilds it). Raises
    :class:`StoreError` for a file of the wrong kind, ``FileNotFoundError`` without a sweep, and
    :class:`~specbench_tui.core.errors.SweepError` when the stored sweep no longer loads."""
    from specbench_tui.core.plan import build_plan
    from specbench_tui.core.sweep.loader import parse_sweep

    meta = read_meta(run_dir)
    text = read_text(run_dir, SWEEP_TOML)
    stored = run_dir / SWEEP_TOML
    origin = meta.get("sweep_path")
    return build_plan(parse_sweep(text, Path(origin) if isinstance(origin, str) and origin else stored, str(stored)))


def held_locks() -> frozenset[str] | None:
    """The files flocked on this machine now, as ``maj:min:inode`` (from ``/proc/locks``); None when it
    cannot be read. A listing of many runs reads it once and hands it to :func:`engine_owns`."""
    try:
        locks = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    held: set[str] = set()
    for line in locks.splitlines():
        fields = line.split()
        if "FLOCK" in fields:
            held.update(field.lower() for field in fields if field.count(":") == 2)
    return frozenset(held)


def engine_owns(run_dir: Path, locks: frozenset[str] | None = None) -> bool | None:
    """Whether a live specbench holds the run directory's lock (``.owner.lock``), read from ``/proc/locks``
    without taking any lock (taking one, even shared, could make a starting engine refuse the directory); None
    when it cannot be told (no lock file: an older run directory; no ``/proc/locks``). A lock file that is not
    a regular file is nobody's: specbench never locks anything else. ``locks``: :func:`held_locks` read once
    for many directories (None: read now)."""
    try:
        info = os.lstat(run_dir / OWNER_LOCK)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return False
    held = held_locks() if locks is None else locks
    if held is None:
        return None
    return f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}" in held


def file_size(run_dir: Path, name: str) -> int:
    """Bytes in a record file now (0 when missing or not a regular file)."""
    try:
        info = os.lstat(run_dir / name)
    except OSError:
        return 0
    return info.st_size if stat.S_ISREG(info.st_mode) else 0


LINES_BLOCK = 1 << 20
"""Bytes read at a time by the line readers below."""


def records_mtime(run_dir: Path | str) -> float | None:
    """When ``events.jsonl`` was last written (None when it is missing or not a regular file)."""
    try:
        info = os.lstat(f"{os.fspath(run_dir)}/{EVENTS}")  # no Path made: a scan asks it of 10,000 runs
    except OSError:
        return None
    return info.st_mtime if stat.S_ISREG(info.st_mode) else None


def read_prefix(run_dir: Path, name: str, size: int | None, skip: bytes | None = None) -> list[dict[str, object]]:
    """The JSON objects in the first ``size`` bytes (None: all) of a record file (a torn line is skipped); lines
    that start with ``skip`` are passed over unparsed. Missing: empty; not a regular file: :class:`StoreError`."""
    out: list[dict[str, object]] = []
    for raw in _lines(run_dir / name, size):
        if not raw.strip() or skip is not None and raw.startswith(skip):
            continue
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def event_lines(run_dir: Path) -> Iterator[bytes]:
    """The raw lines of ``events.jsonl`` (for scanners that look for one kind of event); nothing when it is
    missing or not a regular file."""
    try:
        yield from _lines(run_dir / EVENTS, None)
    except (StoreError, OSError):
        return


def _lines(path: Path, size: int | None) -> Iterator[bytes]:
    try:
        fd = open_to_read(path)
    except FileNotFoundError:
        return
    with os.fdopen(fd, "rb") as handle:  # a block at a time, split in one call (a folder of 10,000 runs is
        left = size                      # 10,000 files of a few lines each, read by every scan of it)
        carry = b""
        while left is None or left > 0:
            block = handle.read(LINES_BLOCK if left is None else min(LINES_BLOCK, left))
            if not block:
                break
            if left is not None:
                left -= len(block)
            lines = (carry + block).split(b"\n")
            carry = lines.pop()  # after the last newline
            for line in lines:
                yield line + b"\n"
        if carry:
            yield carry  # the last line, without its newline (cut by a crash, or being written)
