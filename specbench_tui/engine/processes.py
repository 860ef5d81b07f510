"""The processes of a server: its keeper, its process tree, who listens on a port, waiting for exits.

Every server runs under a keeper (:mod:`specbench_tui.keeper`), signalled through a pidfd where the kernel has
them (never a pid that could have been reused). An ``atexit`` hook tells every live keeper to end its tree on
ordinary exits. psutil maps the kernel's socket table to pids, so that readiness can prove the listener on a
port is ours.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path

import psutil

from specbench_tui.engine.leases import port_is_free
from specbench_tui.paths import isolated_script

KEEPER_PATH = Path(__file__).resolve().parent.parent / "keeper.py"
"""The keeper (:mod:`specbench_tui.keeper`), run by path so that its start-up imports nothing of specbench."""


def keeper_argv(*options: str) -> list[str]:
    """The keeper's argv up to (not including) ``--`` and the server's argv: this interpreter in isolated mode
    (``-I``: nothing imported from the working directory, the keeper's folder or the user site; the keeper
    needs only the standard library)."""
    return isolated_script(KEEPER_PATH, *options)
REPORT_TIMEOUT_S = 30.0
"""How long the keeper may take to say its server's pid (a Python start-up: normally ~30 ms)."""


@dataclass
class _Keeper:
    """A live keeper, signalled through a pidfd where the kernel has them: a pid reused after the keeper was
    reaped can never receive its signals."""

    pid: int
    pidfd: int | None

    def signal(self, sig: int) -> bool:
        try:
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, sig)
            else:
                os.kill(self.pid, sig)
        except (ProcessLookupError, PermissionError, OSError):
            return False
        return True

    def close(self) -> None:
        if self.pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self.pidfd)
            self.pidfd = None


_LIVE_KEEPERS: dict[int, _Keeper] = {}
"""Keepers of servers that are running; told to end their trees by the atexit hook if the program exits early."""


def _open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _same_process(pid: int, created: float) -> bool:
    """Whether ``pid`` is still the process that started at ``created`` (psutil's create_time)."""
    try:
        proc = psutil.Process(pid)
        return proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def process_tree(root: int) -> set[int]:
    """``root`` and its living descendants (under a keeper, which is a subreaper: every process of the server,
    escaped sessions included)."""
    found: set[int] = set()
    try:
        top = psutil.Process(root)
        found.add(root)
        found.update(child.pid for child in top.children(recursive=True))
    except psutil.Error:
        pass
    return _alive(found)


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.add(pid)
    return alive


def _identities(pids: set[int]) -> dict[int, float]:
    """pid -> start time of each living process in ``pids`` (to tell them from a later process with the same pid)."""
    out = {}
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            out[pid] = psutil.Process(pid).create_time()
    return out


def tree_listens_on(root: int, port: int) -> bool:
    """Whether a process in ``root``'s tree holds a listening TCP socket on ``port`` (its own file
    descriptors, mapped through the kernel's socket table)."""
    for pid in process_tree(root):
        try:
            proc = psutil.Process(pid)
            conns = proc.net_connections(kind="tcp") if hasattr(proc, "net_connections") else proc.connections("tcp")
        except psutil.Error:
            continue
        if any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in conns):
            return True
    return False


def listening_pids(port: int) -> set[int] | None:
    """Pids of the processes with a listening TCP socket on ``port`` (the kernel's socket table mapped to pids;
    only this user's processes can be mapped); None when the table cannot be read at all."""
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return None
    return {c.pid for c in conns if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
            and c.pid is not None}


def port_listened(port: int) -> bool:
    """Whether any process (anyone's) listens on TCP ``port`` now."""
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return False
    return any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in conns)


def describe_pid(pid: int) -> str:
    """``pid 123 (user, 'cmd line')`` for messages; what can be read of it."""
    try:
        proc = psutil.Process(pid)
        cmd = " ".join(proc.cmdline())[:120] or proc.name()
        return f"pid {pid} ({proc.username()}, {cmd!r})"
    except psutil.Error:
        return f"pid {pid}"


@atexit.register
def kill_all_servers() -> None:
    """Tell every live keeper to end its tree: the program is exiting and nothing may outlive it."""
    for pid, keeper in list(_LIVE_KEEPERS.items()):
        keeper.signal(signal.SIGUSR2)
        _LIVE_KEEPERS.pop(pid, None)


def find_free_port(host: str, start: int, taken: frozenset[int] | set[int] = frozenset(), attempts: int = 200) -> int:
    """The first port from ``start`` that is free and not ``taken`` by another of our servers."""
    for port in range(start, min(start + attempts, 65535)):
        if port not in taken and port_is_free(host, port):
            return port
    raise OSError(f"no free port in {start}..{start + attempts - 1} on {host}")


def _read_report(fd: int, timeout_s: float) -> str:
    """The keeper's one line on ``fd`` (closed here); empty when it closed the pipe without a word."""
    import select

    data = b""
    deadline = time.monotonic() + timeout_s
    try:
        while b"\n" not in data:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                break
            chunk = os.read(fd, 256)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    return data.decode("ascii", errors="replace").strip()


async def _exited(proc: asyncio.subprocess.Process, timeout_s: float | None = None) -> int | None:
    """The exit code once ``proc`` has exited (None after ``timeout_s``). Not ``proc.wait()``: asyncio answers
    that only once every pipe is closed too, which a daemon that inherited the server's output can delay
    for as long as it lives."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while proc.returncode is None:
        if deadline is not None and time.monotonic() >= deadline:
            return None
        await asyncio.sleep(EXIT_POLL_S)
    return proc.returncode


EXIT_POLL_S = 0.01
"""How often a server's exit is looked for (its exit code is known to asyncio at once; the wait is ours)."""


async def first_of(*awaitables: Awaitable[object], timeout_s: float | None = None) -> None:
    """Wait until one of ``awaitables`` is done (or the timeout). Tasks made here from coroutines are
    cancelled afterwards, even when the caller is cancelled; futures passed in are left alone."""
    futures = [asyncio.ensure_future(a) for a in awaitables]  # a future passed in is itself
    created = [future for future, a in zip(futures, awaitables) if asyncio.iscoroutine(a)]
    try:
        await asyncio.wait(futures, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in created:
            task.cancel()


def _exit_text(code: int | None) -> str:
    if code is None:
        return "the server exited"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the server exited on {name}"
    return f"the server exited with code {code}"
