"""Which detached engines this user started on this machine: what ``specbench ps`` and ``attach latest`` read.

Each engine writes ``<pid>.json`` (its run directory, sweep and start time) into this user's private folder
(``engines`` in :func:`specbench_tui.paths.private_dir`: ``$XDG_RUNTIME_DIR/specbench/engines``, else
``<tmp>/specbench-<uid>/engines``, every level verified to be this user's with mode 0700) when it starts and
removes it when it ends. An entry whose engine died without ending (SIGKILL, OOM, a power cut of the process)
stays behind, and is how such a run is reported as crashed, with the command that resumes it, until a new
engine takes the run directory over.

Nothing in the folder is trusted for being there: an entry is read only when it is a regular file of this
user's (opened without following a link, without blocking on a FIFO, at most :data:`MAX_ENTRY_BYTES`), and only
its expected fields, of the expected types, are kept.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import time
from pathlib import Path
from typing import NotRequired, TypedDict

from specbench_tui.core.safetext import printable
from specbench_tui.paths import private_dir, verify_private

ENV_DIR = "SPECBENCH_ENGINES_DIR"
"""Overrides the registry's folder (tests); verified like the default."""
MAX_ENTRY_BYTES = 16384
"""An entry is a few hundred bytes; a larger file is not one of ours."""


def registry_dir() -> Path:
    """The registry's folder, this user's alone (:class:`specbench_tui.paths.PrivateDirError` otherwise)."""
    configured = os.environ.get(ENV_DIR)
    if configured:
        path = Path(configured)
        if not path.parent.is_dir():
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        return verify_private(path)
    return private_dir("engines")


def register(run_dir: Path, sweep: str) -> None:
    """Say that this process is the engine of ``run_dir`` (earlier entries for the same directory go)."""
    folder = registry_dir()
    resolved = str(Path(run_dir).resolve())
    for entry in entries():
        if entry.get("run_dir") == resolved:
            with contextlib.suppress(OSError):
                (folder / f"{entry['pid']}.json").unlink()
    note = {"pid": os.getpid(), "run_dir": resolved, "sweep": sweep, "started": time.time()}
    tmp = folder / f".{os.getpid()}.{time.monotonic_ns()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(note))
        os.replace(tmp, folder / f"{os.getpid()}.json")  # a link planted at the name is replaced, not followed
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


class EngineEntry(TypedDict):
    """One live engine's entry, as read back (checked field by field: see :func:`read_entry`)."""

    pid: int
    run_dir: str
    sweep: NotRequired[str]
    """Printable, at most 200 characters."""
    started: NotRequired[float]
    """Unix time the engine began."""


def forget(run_dir: Path) -> None:
    """This engine has ended cleanly: its entry goes."""
    with contextlib.suppress(OSError):
        (registry_dir() / f"{os.getpid()}.json").unlink()


def read_entry(path: Path) -> EngineEntry | None:
    """The entry in ``path``, or None when it is not one of this user's entries (a link, a FIFO, a folder,
    someone else's file, too large, not JSON, fields missing or of the wrong type)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_size > MAX_ENTRY_BYTES:
            return None
        data = json.loads(os.read(fd, MAX_ENTRY_BYTES + 1).decode("utf-8"))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    return _valid(data, path)


def _valid(data: object, path: Path) -> EngineEntry | None:
    if not isinstance(data, dict):
        return None
    pid, run_dir, sweep, started = data.get("pid"), data.get("run_dir"), data.get("sweep"), data.get("started")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or path.name != f"{pid}.json":
        return None
    if not isinstance(run_dir, str) or not os.path.isabs(run_dir) or "\0" in run_dir:
        return None
    entry: EngineEntry = {"pid": pid, "run_dir": run_dir}
    if isinstance(sweep, str):
        entry["sweep"] = printable(sweep, 200)  # shown by ps; a sweep's name is never a terminal command
    if isinstance(started, (int, float)) and not isinstance(started, bool) and math.isfinite(started) \
            and 0 <= started <= time.time() + 86400:
        entry["started"] = float(started)
    return entry


def entries() -> list[EngineEntry]:
    """Every entry, oldest first."""
    found = [entry for path in registry_dir().glob("*.json") if (entry := read_entry(path)) is not None]
    return sorted(found, key=lambda e: e.get("started") or 0)


def drop(entry: EngineEntry) -> None:
    with contextlib.suppress(OSError):
        (registry_dir() / f"{entry['pid']}.json").unlink()
