"""Ports and GPUs leased machine-wide, across every specbench on the box (any user), with file locks.

The lease directory is ``$SPECBENCH_LEASE_DIR``, else ``<tmp>/specbench-leases`` (``/tmp/specbench-leases``
on Linux). It is created with mode ``1777`` (sticky and world-writable, like ``/tmp`` itself) so that every
user's specbench can take leases in it, and each lease file (``port-30000.lease``, ``gpu-<uuid>.lease``) is
created with mode ``0666``, so that whoever holds the lease can say who they are in it. A lease is an
exclusive ``flock`` on its file: it is held while the resource is used and the kernel releases it when its
holder dies, however it dies, so a lease is never stale. The file's content (pid, user, host, run directory,
configuration) is only a note for messages; the lock is the lease. Lease files are never deleted (deleting
a file someone else holds a lock on would let a third process lock a new file of the same name).

If the directory cannot be used (it exists but belongs to someone who made it private), leasing falls back
to ``<tmp>/specbench-leases-<uid>`` and says that other users' specbench instances are not seen.

A GPU is also not placed on when it holds more than :data:`FOREIGN_MEMORY_MIB` of other processes' memory
(a job that does not use specbench), whatever its lease says.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import getpass
import json
import os
import socket
import stat
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench_tui.engine.gpus import DescribedBackend, GpuBackend, GpuPool, GpuSample

LEASE_DIR_VAR = "SPECBENCH_LEASE_DIR"
FOREIGN_MEMORY_MIB = 1024.0
"""Memory held on a GPU by processes that are not this specbench's servers above which it is not placed on."""
POLL_S = 1.0
"""How often a configuration waiting for GPUs leased elsewhere looks again (another process frees them)."""


def lease_dir() -> tuple[Path, str | None]:
    """The lease directory (created when missing) and a warning when the shared one could not be used."""
    configured = os.environ.get(LEASE_DIR_VAR)
    shared = Path(configured) if configured else Path(tempfile.gettempdir()) / "specbench-leases"
    problem = _usable(shared, shared_mode=not configured)
    if problem is None:
        return shared, None
    private = Path(tempfile.gettempdir()) / f"specbench-leases-{os.getuid()}"
    if _usable(private, shared_mode=False) is None:
        return private, (f"the shared lease directory {shared} cannot be used ({problem}); leases are kept in "
                         f"{private}, so other users' specbench runs are not seen")
    raise OSError(f"no usable lease directory: {shared} ({problem})")


def _usable(path: Path, shared_mode: bool) -> str | None:
    try:
        path.mkdir(mode=0o700, exist_ok=False)
        created = True
    except FileExistsError:
        created = False
    except OSError as exc:
        return exc.strerror or str(exc)
    try:
        info = path.lstat()
        if not stat.S_ISDIR(info.st_mode):
            return "not a directory"
        if created and shared_mode:
            os.chmod(path, 0o1777)
        elif created:
            os.chmod(path, 0o700)
    except OSError as exc:
        return exc.strerror or str(exc)
    if not os.access(path, os.W_OK | os.X_OK):
        return "not writable"
    return None


def _who() -> dict[str, Any]:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return {"pid": os.getpid(), "user": user, "host": socket.gethostname(), "since": time.time()}


@dataclass
class Lease:
    """A held lease; :meth:`release` lets go of it (the kernel does when the process dies)."""

    name: str
    fd: int | None

    def release(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, 0)
            with contextlib.suppress(OSError):
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None

    def __del__(self) -> None:
        self.release()


class Leases:
    """Leases in one lease directory, taken by this process."""

    def __init__(self, directory: Path | None = None, note: dict[str, Any] | None = None) -> None:
        self.warning: str | None = None
        if directory is None:
            directory, self.warning = lease_dir()
        self.directory = directory
        self.note = note or {}

    def _path(self, name: str) -> Path:
        return self.directory / f"{name}.lease"

    def take(self, name: str, **note: Any) -> Lease | None:
        """The lease ``name``, or None when another process holds it."""
        path = self._path(name)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except PermissionError:
            try:  # someone else's file in a sticky directory: a read-only descriptor still locks
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None
        with contextlib.suppress(OSError):
            if os.fstat(fd).st_uid == os.getuid():
                os.fchmod(fd, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        text = json.dumps({**_who(), **self.note, **note}) + "\n"
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, text.encode(), 0)
        return Lease(name, fd)

    def holder(self, name: str) -> dict[str, Any] | None:
        """Who holds ``name`` (its note), or None when nobody does."""
        path = self._path(name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                pass  # held: read who
            else:
                fcntl.flock(fd, fcntl.LOCK_UN)
                return None
            try:
                data = json.loads(os.pread(fd, 65536, 0) or b"{}")
            except (OSError, ValueError):
                data = {}
            return data if isinstance(data, dict) else {}
        finally:
            os.close(fd)


def describe_holder(note: dict[str, Any] | None) -> str:
    """``specbench pid 123 of alice (run runs/x, config ar)`` from a lease note."""
    if not note:
        return "another specbench"
    parts = [f"specbench pid {note.get('pid', '?')} of {note.get('user', '?')}"]
    if note.get("host") and note.get("host") != socket.gethostname():
        parts[0] += f" on {note['host']}"
    extra = [f"{key} {note[key]}" for key in ("run_dir", "config") if note.get(key)]
    return parts[0] + (f" ({', '.join(extra)})" if extra else "")


# ------------------------------------------------------------------------------------------------------ ports


def port_is_free(host: str, port: int) -> bool:
    """Whether a server could bind ``host:port`` now (SO_REUSEADDR, as uvicorn binds)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


@dataclass
class PortChoice:
    port: int
    lease: Lease
    skipped: list[tuple[int, str]]
    """Ports passed over before ``port`` and why (leased by another specbench, in use by a program)."""


def lease_port(leases: Leases, host: str, start: int, taken: Iterable[int] = (), attempts: int = 200,
               **note: Any) -> PortChoice:
    """The first port from ``start`` that this process does not use (``taken``), that no other specbench
    holds a lease on, and that is free; leased to us. OSError when none is within ``attempts``."""
    ours = set(taken)
    skipped: list[tuple[int, str]] = []
    for port in range(start, min(start + attempts, 65536)):
        if port in ours:
            continue
        lease = leases.take(f"port-{port}", port=port, **note)
        if lease is None:
            skipped.append((port, f"leased by {describe_holder(leases.holder(f'port-{port}'))}"))
            continue
        if not port_is_free(host, port):
            lease.release()
            skipped.append((port, "in use by another program"))
            continue
        return PortChoice(port, lease, skipped)
    raise OSError(f"no free port in {start}..{start + attempts - 1} on {host}")


# ------------------------------------------------------------------------------------------------------- GPUs


def gpu_keys(backend: GpuBackend, indices: Iterable[int]) -> dict[int, str]:
    """The lease name of each GPU: its UUID where the driver gives one (the same GPU whatever the index
    order), else its index."""
    uuids: dict[int, str] = {}
    if isinstance(backend, DescribedBackend):
        with contextlib.suppress(Exception):
            for info in backend.describe().gpus:
                if info.uuid:
                    uuids[info.index] = info.uuid
    return {i: f"gpu-{_safe(uuids[i])}" if i in uuids else f"gpu-index-{i}" for i in indices}


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:100]


def foreign_memory(samples: Iterable[GpuSample], indices: Iterable[int], ours: set[int]) -> dict[int, float]:
    """MiB held on each of ``indices`` by processes not in ``ours``, from the latest GPU samples."""
    wanted = set(indices)
    out: dict[int, float] = {}
    for sample in samples:
        if sample.index not in wanted:
            continue
        listed = [mib for pid, mib in sample.pids if pid not in ours]
        out[sample.index] = float(sum(m for m in listed if m is not None))
    return out


class LeasedGpuPool(GpuPool):
    """A :class:`GpuPool` whose GPUs are also leased machine-wide: a GPU another specbench holds, or that
    holds more than :data:`FOREIGN_MEMORY_MIB` of other processes' memory, is passed over; a configuration
    waits (looking again every :data:`POLL_S`) until enough are free here and there."""

    def __init__(self, indices: tuple[int, ...], leases: Leases, keys: dict[int, str], *,
                 samples: Callable[[], list[GpuSample]] = list, ours: Callable[[], set[int]] = set) -> None:
        """``samples``: the latest GPU samples (the engine's sampler; no call to the driver here); ``ours``:
        the pids of this specbench's servers."""
        super().__init__(indices)
        self.leases = leases
        self.keys = keys
        self._samples = samples
        self._ours = ours
        self._held: dict[int, Lease] = {}

    def taken_elsewhere(self, indices: Iterable[int] | None = None,
                        samples: list[GpuSample] | None = None) -> dict[int, str]:
        """GPUs of ``indices`` (default: the pool's free ones) held by another specbench or by foreign memory,
        with who holds them. Takes and drops each lease to look (cheap: a file lock)."""
        indices = list(self._free if indices is None else indices)
        busy: dict[int, str] = {}
        for index in indices:
            if index in self._held:
                continue
            lease = self.leases.take(self.keys[index])
            if lease is None:
                busy[index] = describe_holder(self.leases.holder(self.keys[index]))
            else:
                lease.release()
        samples = self._samples() if samples is None else samples
        for index, mib in foreign_memory(samples, [i for i in indices if i not in busy], self._ours()).items():
            if mib > FOREIGN_MEMORY_MIB:
                busy[index] = f"other processes ({mib:.0f} MiB)"
        return busy

    async def acquire(self, count: int, *, on_wait: Callable[[str], None] | None = None,
                      **note: Any) -> tuple[int, ...]:
        """``count`` GPUs free in this pool and leased to us; ``on_wait`` is told (once per change) who holds
        the GPUs it waits for."""
        if count > len(self.indices):
            raise ValueError(f"needs {count} GPUs but the pool has {len(self.indices)}")
        said: str | None = None
        while True:
            async with self._changed:
                await self._changed.wait_for(lambda: len(self._free) >= count)
                candidates = list(self._free)
            foreign = foreign_memory(self._samples(), candidates, self._ours()) if count else {}
            got: list[int] = []
            busy: dict[int, str] = {}
            async with self._changed:
                for index in [i for i in self._free if i in candidates]:
                    if len(got) == count:
                        break
                    if foreign.get(index, 0.0) > FOREIGN_MEMORY_MIB:
                        busy[index] = f"other processes ({foreign[index]:.0f} MiB)"
                        continue
                    lease = self.leases.take(self.keys[index], gpu=index, **note)
                    if lease is None:
                        busy[index] = describe_holder(self.leases.holder(self.keys[index]))
                        continue
                    self._held[index] = lease
                    got.append(index)
                if len(got) == count:
                    for index in got:
                        self._free.remove(index)
                    return tuple(got)
                for index in got:
                    self._held.pop(index).release()
            text = ", ".join(f"GPU {i} by {who}" for i, who in sorted(busy.items()))
            if on_wait is not None and busy and text != said:
                on_wait(f"waiting for {count} GPU{'s' if count != 1 else ''}: held elsewhere: {text}")
                said = text
            async with self._changed:  # a GPU of ours freed, or look again in a moment (another process)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), timeout=POLL_S)

    def close(self) -> None:
        """Let go of every lease still held (the sweep is over; GPUs kept back after a failed release too)."""
        for index in list(self._held):
            self._held.pop(index).release()

    async def release(self, indices: tuple[int, ...]) -> None:
        for index in indices:
            lease = self._held.pop(index, None)
            if lease is not None:
                lease.release()
        await super().release(indices)
