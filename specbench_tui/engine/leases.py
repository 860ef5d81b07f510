"""Ports and GPUs leased machine-wide, across every specbench on the box (any user), with file locks.

The lease directory is ``$SPECBENCH_LEASE_DIR``, else ``<tmp>/specbench-leases`` (``/tmp/specbench-leases``
on Linux). A lease is an exclusive ``flock`` on its file (``port-30000.lease``, ``gpu-<uuid>.lease``): it is
held while the resource is used and the kernel releases it when its holder dies, however it dies, so a lease
is never stale. The file's content (pid, user, host, run directory, configuration) is only a note for
messages; the lock is the lease. Lease files are never deleted (deleting a file someone else holds a lock on
would let a third process lock a new file of the same name).

The directory is shared with every other user of the box, some of whom may be hostile, so:

- it is used only when it is a real directory (not a link) owned by root or by this user and, when others may
  write in it, sticky (``1777``, like ``/tmp``: nobody removes or renames another's file). A directory that
  another user created (a fresh box whose ``/tmp`` was wiped) is not used: its owner could remove anyone's
  lease files. Leasing then falls back to this user's private folder (:func:`specbench_tui.paths.private_dir`)
  and says so, with the fix: an administrator creates the shared one (``install -d -m 1777 -o root -g root
  /tmp/specbench-leases``, or a ``d /tmp/specbench-leases 1777 root root -`` line in ``tmpfiles.d``).
  When specbench creates it (no such directory yet), it makes it ``1777``;
- a lease file is created with ``O_EXCL`` (mode ``0666``, so that the next holder, of any user, can write its
  note) and opened otherwise with ``O_NOFOLLOW | O_NONBLOCK``: a planted symbolic link is never followed,
  a FIFO never blocks, and only a file this call created is ever ``fchmod``-ed;
- anything at a lease's name that is not a regular file with one link (a directory, a link, a loop, a FIFO,
  a hard link to another file) is a lease held by someone else: that resource is passed over, and the message
  says what is there;
- a note is read up to :data:`NOTE_LIMIT` bytes and is data: :func:`describe_holder` escapes control characters.

A GPU is also not placed on when it holds more than :data:`FOREIGN_MEMORY_MIB` of other processes' memory
(a job that does not use specbench), whatever its lease says.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
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

from specbench_tui.core.safetext import printable
from specbench_tui.engine.gpus import DescribedBackend, GpuBackend, GpuPool, GpuSample
from specbench_tui.paths import PrivateDirError, private_dir

LEASE_DIR_VAR = "SPECBENCH_LEASE_DIR"
FOREIGN_MEMORY_MIB = 1024.0
"""Memory held on a GPU by processes that are not this specbench's servers above which it is not placed on."""
POLL_S = 1.0
"""How often a configuration waiting for GPUs leased elsewhere looks again (another process frees them)."""
NOTE_LIMIT = 4096
"""The most bytes of a lease's note read (a note is a line of JSON; a larger file is someone else's)."""
SHARED_FIX = ("an administrator can create it for everyone: install -d -m 1777 -o root -g root {path} "
              "(or set SPECBENCH_LEASE_DIR to a shared directory owned by root, mode 1777)")


def lease_dir() -> tuple[Path, str | None]:
    """The lease directory (created when missing) and a warning when the shared one could not be used."""
    configured = os.environ.get(LEASE_DIR_VAR)
    shared = Path(configured) if configured else Path(tempfile.gettempdir()) / "specbench-leases"
    problem = _usable(shared, shared_mode=not configured)
    if problem is None:
        return shared, None
    try:
        private = private_dir("leases")
    except PrivateDirError as exc:
        raise OSError(f"no usable lease directory: {shared} ({problem}); and {exc}") from exc
    return private, (f"the shared lease directory {shared} cannot be used ({problem}); leases are kept in "
                     f"{private}, so other users' specbench runs are not seen; "
                     + SHARED_FIX.format(path=shared))


def _usable(path: Path, shared_mode: bool) -> str | None:
    """None when ``path`` can hold leases safely, else why not (see the module's notes)."""
    try:
        path.mkdir(mode=0o700, exist_ok=False)
        created = True
    except FileExistsError:
        created = False
    except OSError as exc:
        return exc.strerror or str(exc)
    try:
        if created and shared_mode:
            _make_shared(path)
        info = os.lstat(path)
    except OSError as exc:
        return exc.strerror or str(exc)
    return _trusted(info) or (None if os.access(path, os.W_OK | os.X_OK) else "not writable")


def _make_shared(path: Path) -> None:
    """Mode 1777 on the directory just created at ``path`` (through a descriptor: no link is followed)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fchmod(fd, 0o1777)
    finally:
        os.close(fd)


def _trusted(info: os.stat_result) -> str | None:
    """Why a lease directory of this ``lstat`` may not be trusted, or None."""
    if stat.S_ISLNK(info.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return "not a directory"
    if info.st_uid not in (0, os.getuid()):
        return (f"it belongs to {_user_name(info.st_uid)}, who could remove or replace anyone's lease files in it; "
                "only a directory of root's or of your own is used")
    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        return (f"others may write in it and it is not sticky (mode {stat.S_IMODE(info.st_mode):04o}): anyone "
                "could replace a lease file; it must be mode 1777")
    return None


def _user_name(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (KeyError, ImportError):
        return f"uid {uid}"


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
    writable: bool = True

    def release(self) -> None:
        if self.fd is not None:
            if self.writable:
                with contextlib.suppress(OSError):
                    os.ftruncate(self.fd, 0)
            with contextlib.suppress(OSError):
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None

    def __del__(self) -> None:
        self.release()


_OPEN = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))


def _not_a_lease(info: os.stat_result) -> str | None:
    """What is at a lease's name when it is not a lease file (a regular file with one link), else None."""
    for test, kind in _KINDS:
        if test(info.st_mode):
            return kind
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if info.st_nlink != 1:
        return "a hard link to another file"
    return None


def _open_existing(path: Path) -> tuple[int, bool] | str:
    """A descriptor on the existing lease file ``path`` and whether it is writable, or what is there instead.
    Never follows a link, never blocks, never creates."""
    try:
        return os.open(path, os.O_RDWR | _OPEN), True
    except PermissionError:
        pass  # someone else's file in a sticky directory: a read-only descriptor still locks
    except OSError as exc:
        return _open_problem(path, exc)
    try:
        return os.open(path, os.O_RDONLY | _OPEN), False
    except OSError as exc:
        return _open_problem(path, exc)


def _open_problem(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symbolic link"
    if exc.errno == errno.EISDIR:
        return "a directory"
    with contextlib.suppress(OSError):
        found = _not_a_lease(os.lstat(path))
        if found:
            return found
    return f"unreadable ({exc.strerror or exc})"


class Leases:
    """Leases in one lease directory, taken by this process."""

    def __init__(self, directory: Path | None = None, note: dict[str, Any] | None = None) -> None:
        self.warning: str | None = None
        self.machine_wide = False
        """Whether these are the default machine-wide leases (not a configured directory nor the private one)."""
        if directory is None:
            directory, self.warning = lease_dir()
            self.machine_wide = self.warning is None and not os.environ.get(LEASE_DIR_VAR)
        self.directory = directory
        self.note = note or {}

    def private(self) -> Leases:
        """Leases like these but in this user's private folder (resources nobody else can use), or these
        leases themselves when they are not the machine-wide ones (a configured directory is kept: tests give
        each sweep one)."""
        if not self.machine_wide:
            return self
        try:
            return Leases(private_dir("leases"), self.note)
        except PrivateDirError:  # no private folder: the machine-wide leases still work
            return self

    def _path(self, name: str) -> Path:
        return self.directory / f"{name}.lease"

    def _descriptor(self, path: Path) -> tuple[int, bool] | None:
        try:  # a new file: ours, so ours to make writable by the next holder whatever its user
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _OPEN, 0o666)
        except FileExistsError:
            opened = _open_existing(path)
        except OSError as exc:
            opened = _open_problem(path, exc)
        else:
            with contextlib.suppress(OSError):
                os.fchmod(fd, 0o666)
            return fd, True
        if isinstance(opened, str):
            return None
        fd, writable = opened
        try:
            problem = _not_a_lease(os.fstat(fd))
        except OSError as exc:
            problem = f"unreadable ({exc.strerror or exc})"
        if problem is not None:
            os.close(fd)
            return None
        return fd, writable

    def take(self, name: str, **note: object) -> Lease | None:
        """The lease ``name``, or None when another process holds it (or something that is not a lease file
        is at its name: :meth:`holder` says what)."""
        opened = self._descriptor(self._path(name))
        if opened is None:
            return None
        fd, writable = opened
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        if writable:
            text = json.dumps({**_who(), **self.note, **note}) + "\n"
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, text.encode()[:NOTE_LIMIT], 0)
        return Lease(name, fd, writable)

    def holder(self, name: str) -> dict[str, Any] | None:
        """Who holds ``name`` (its note), or None when nobody does. Something at its name that is not a lease
        file is held by someone else: ``{"problem": what is there}``."""
        path = self._path(name)
        opened = _open_existing(path)
        if isinstance(opened, str):
            return {"problem": f"{path} is {opened}, not a lease file"} if os.path.lexists(path) else None
        fd, _ = opened
        try:
            problem = _not_a_lease(os.fstat(fd))
            if problem is not None:
                return {"problem": f"{path} is {problem}, not a lease file"}
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                pass  # held: read who
            else:
                fcntl.flock(fd, fcntl.LOCK_UN)
                return None
            try:
                data = json.loads(os.pread(fd, NOTE_LIMIT, 0) or b"{}")
            except (OSError, ValueError):
                data = {}
            return data if isinstance(data, dict) else {}
        finally:
            os.close(fd)


def describe_holder(note: dict[str, Any] | None) -> str:
    """``specbench pid 123 of alice (run runs/x, config ar)`` from a lease note; every value of the note is
    someone else's text, printed escaped (:func:`specbench_tui.core.safetext.printable`)."""
    if not note:
        return "another specbench"
    if note.get("problem"):
        return f"someone else ({printable(note['problem'], 300)})"
    pid = note.get("pid")
    pid_text = str(pid) if isinstance(pid, int) and not isinstance(pid, bool) else "?"
    parts = [f"specbench pid {pid_text} of {printable(note.get('user', '?'), 64)}"]
    if note.get("host") and note.get("host") != socket.gethostname():
        parts[0] += f" on {printable(note['host'], 64)}"
    extra = [f"{key} {printable(note[key])}" for key in ("run_dir", "config") if note.get(key)]
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
               **note: object) -> PortChoice:
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


SIMULATED_GPU_KEY = "gpu-GPU-fake-"
"""Lease names of the simulated box's GPUs (:class:`~specbench_tui.engine.gpus.FakeBackend` UUIDs): they exist
for this user alone, so they are leased in this user's private folder, where another user's leases cannot make
a simulated sweep wait for hardware that does not exist."""


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
        simulated = bool(keys) and all(key.startswith(SIMULATED_GPU_KEY) for key in keys.values())
        self.leases = leases.private() if simulated else leases  # nobody else can hold our simulated GPUs
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
                      **note: object) -> tuple[int, ...]:
        """``count`` GPUs free in this pool and leased to us; ``on_wait`` is told (once per change) who holds
        the GPUs it waits for."""
        if count > len(self.indices):
            raise ValueError(f"needs {count} GPUs but the pool has {len(self.indices)}")
        said: str | None = None
        while True:
            async with self._changed:
                await self._changed.wait_for(lambda: self.can_serve(count))
                if (refused := self.refusal(count)) is not None:  # a fault fenced too many off
                    raise refused
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
