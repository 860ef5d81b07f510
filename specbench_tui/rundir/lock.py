"""One owner per run directory: an exclusive OS file lock held by the engine for its whole life.

``<run dir>/.owner.lock`` is locked with ``flock(LOCK_EX | LOCK_NB)`` before anything is written and held
until the sweep ends; the kernel releases it when the process dies, however it dies, so a crash or a SIGKILL
never leaves a stale lock behind. The file also says who holds it (pid, host, user, start time, command
line), written by the holder after it took the lock. A second ``specbench run --resume`` of the same
directory is refused at once (exit 2) with that owner named, having written nothing.

The lock file is opened close-on-exec, so no server inherits it (a server outliving specbench could
otherwise keep the directory locked).
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import json
import os
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from specbench_tui.rundir.store import ENGINE_SOCKET, OWNER_LOCK, StoreError, open_regular, read_regular

LOCK_NAME = OWNER_LOCK
NOTE_LIMIT = 64 << 10
"""A lock note larger than this is not one specbench wrote."""


class RunDirBusy(Exception):
    """The run directory is owned by another live specbench."""

    def __init__(self, path: Path, owner: Mapping[str, object]) -> None:
        self.path = path
        self.owner = owner
        super().__init__(describe_owner(path, owner))


def describe_owner(path: Path, owner: Mapping[str, object]) -> str:
    """The refusal: who owns ``path`` and how to watch or stop it."""
    pid = owner.get("pid", "?")
    host = owner.get("host") or "?"
    user = owner.get("user") or "?"
    started = owner.get("started")
    when = "?"
    if isinstance(started, (int, float)) and not isinstance(started, bool):
        with contextlib.suppress(OverflowError, OSError, ValueError):
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started))
    argv = owner.get("argv")
    command = (" ".join(str(a) for a in argv) if isinstance(argv, list) else "") or "specbench"
    here = host == socket.gethostname()
    where = "" if here else f" on {host}"
    head = (f"{path} is already being run by another specbench: pid {pid} on {host}, user {user}, "
            f"started {when} ({command}). Only one specbench may own a run directory. ")
    if (path / ENGINE_SOCKET).exists():  # a detached engine: the campaign commands reach it
        return (head + f"Watch it with: specbench attach {path}   Stop it with: specbench stop {path} (it stops "
                "cleanly), then resume it here")
    # a foreground run (--headless or --foreground) has no control socket: its events file and its signal
    return (head + f"Watch it with: specbench logs {path} --follow   Stop it with: Ctrl-C in its terminal or "
            f"kill -INT {pid}{where} (it stops cleanly), then resume it here")


@dataclass
class RunLock:
    """A held lock; :meth:`release` (or the process's end) lets go of it."""

    path: Path
    fd: int | None

    def release(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None

    def __del__(self) -> None:
        self.release()


def read_owner(run_dir: Path) -> dict[str, object]:
    """What the lock file says about its holder (empty when unreadable, too large or not a regular file: a FIFO
    is refused unopened, never waited on)."""
    try:
        data = json.loads(read_regular(run_dir / LOCK_NAME, NOTE_LIMIT).decode("utf-8", errors="replace"))
    except (OSError, StoreError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def acquire(run_dir: Path) -> RunLock:
    """Take the run directory's lock, or raise :class:`RunDirBusy` naming the owner (nothing is written then).
    OSError when the lock file cannot be opened at all, :class:`StoreError` when it is not a regular file (a
    FIFO, a device, a symbolic link: never followed, never waited on)."""
    path = run_dir / LOCK_NAME
    try:
        fd = open_regular(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)  # never blocks on a FIFO
    except OSError as exc:
        if os.path.islink(path):
            raise StoreError(f"{path} is a symbolic link, not a regular file: this run directory has been "
                             "tampered with") from None
        raise StoreError(f"cannot open {path}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RunDirBusy(run_dir, read_owner(run_dir)) from None
    except OSError:
        os.close(fd)
        raise
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    note = {"pid": os.getpid(), "host": socket.gethostname(), "user": user, "started": time.time(),
            "argv": sys.argv}
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(note) + "\n").encode(), 0)
    return RunLock(path, fd)
