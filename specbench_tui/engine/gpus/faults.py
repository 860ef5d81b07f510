"""GPU faults as the engine reads them: the Xid critical-error events of the GPUs a configuration holds, from a
backend that offers ``xid_events(indices)`` (NVML's event set, the simulator's fake box), and the kernel's
``NVRM: Xid`` lines where the kernel log is readable (:class:`KernelLog`), both kept per box by its machine's
:class:`FaultLedger`. Taken while a configuration runs they are its crash cause
(:meth:`FaultLedger.take_xid_cause`), and one that needs a reset (:func:`specbench_tui.core.gpu_faults.needs_reset`)
is kept until its configuration lets go of the GPU (:meth:`FaultLedger.take_crash_faults`); read between
configurations from the GPUs nobody holds they fence those GPUs off placement
(:class:`~specbench_tui.engine.gpus.pool.GpuPool`). Fenced GPUs are recorded in the run directory (:func:`fences_doc`)
and fenced again on resume (:func:`restore_fences`) while the same GPU (its UUID) is there.

An event is ``(gpu, xid)`` or ``(gpu, xid, seen_at)`` (Unix time it was seen)."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping

from specbench_tui.core.gpu_faults import FENCE_FILE, GpuFault, XID_MEANINGS, kernel_xids, needs_reset, xid_cause

XID_POLL_S = 0.5
"""How often a configuration's GPUs are asked for Xid events while its requests run."""
DMESG_EVERY_S = 2.0
"""How often ``dmesg`` is run when /dev/kmsg cannot be read (it prints the whole ring buffer)."""


class KernelLog:
    """New kernel-log text since the last :meth:`read`: ``/dev/kmsg`` (from its end when opened), else the
    ``NVRM: Xid`` lines of ``dmesg`` not seen before; ``problem`` says once why neither can be read (the log is
    then not watched; NVML's events still are). ``reader`` replaces both (tests: a fake kernel log)."""

    def __init__(self, reader: Callable[[], str] | None = None, kmsg: str = "/dev/kmsg",
                 dmesg: tuple[str, ...] = ("dmesg",)) -> None:
        self._reader = reader
        self._kmsg = kmsg
        self._dmesg = dmesg
        self._fd: int | None = None
        self._seen: set[str] | None = None
        self._next_dmesg = 0.0
        self.problem: str | None = None
        self.unreadable = False
        self._kmsg_problem = kmsg

    def read(self) -> str:
        """What the kernel logged since the last call ("" when nothing, or unreadable: never raises)."""
        if self.unreadable:
            return ""
        if self._reader is not None:
            try:
                return self._reader()
            except OSError as exc:
                return self._give_up(f"the kernel log: {exc.strerror or exc}")
        if self._fd is None and self._seen is None:
            self._open()
        if self._fd is not None:
            return self._read_kmsg()
        return self._read_dmesg() if not self.unreadable else ""

    def _open(self) -> None:
        try:
            self._fd = os.open(self._kmsg, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            os.lseek(self._fd, 0, os.SEEK_END)  # from now on: what came before the sweep is no fault of it
        except OSError as exc:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self._kmsg_problem = f"{self._kmsg}: {exc.strerror or exc}"
            self._seen = set()
            self._read_dmesg()  # what is there already came before the sweep: seen, not a fault of it

    def _read_kmsg(self) -> str:
        assert self._fd is not None
        records: list[str] = []
        while True:
            try:
                data = os.read(self._fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records overwritten before they were read: go on
                    continue
                return self._give_up(f"{self._kmsg}: {exc.strerror or exc}")
            if not data:
                break
            records.append(data.decode("utf-8", "replace").split(";", 1)[-1])
        return "".join(records)

    def _read_dmesg(self) -> str:
        if time.monotonic() < self._next_dmesg:
            return ""
        self._next_dmesg = time.monotonic() + DMESG_EVERY_S
        try:
            done = subprocess.run(self._dmesg, capture_output=True, text=True, timeout=5, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            return self._give_up(f"{self._kmsg_problem}; {self._dmesg[0]}: {exc}")
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            return self._give_up(f"{self._kmsg_problem}; {self._dmesg[0]}: {said}")
        lines = [line for line in done.stdout.splitlines() if "NVRM: Xid" in line]
        assert self._seen is not None
        new = [line for line in lines if line not in self._seen]
        self._seen.update(new)
        return "\n".join(new)

    def _give_up(self, why: str) -> str:
        self.unreadable = True
        self.problem = (f"the kernel log is not readable ({why}): its NVRM: Xid lines are not watched, NVML's "
                        "Xid events still are (run as a user who may read /dev/kmsg, or sysctl "
                        "kernel.dmesg_restrict=0, to watch them too)")
        self.close()
        return ""

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


class FaultLedger:
    """The Xid faults of one GPU box (a :class:`~specbench_tui.engine.machine.Machine` holds one for its backend):
    the kernel log watched with the backend's events, the kernel's faults not yet taken, and the reset-needing
    faults that crashed a configuration (fenced once it lets go of the GPU). ``backend`` offers
    ``xid_events(indices)`` (NVML's event set, the simulator's fake box) and ``host_kernel_log()`` (NVML: this
    host's kernel log; the fake box: a log a test gives it); either may be missing."""

    def __init__(self, backend: object) -> None:
        self.backend = backend
        self.kernel: KernelLog | None = None
        self.buses: dict[str, int] = {}
        """PCI bus id -> GPU index, to tie a kernel line to its GPU."""
        self.pending: list[GpuFault] = []
        self.crashed: dict[int, GpuFault] = {}
        self._problem_said = False

    def can_watch(self) -> bool:
        """Whether a configuration's faults can be seen while it runs (events, or a kernel log)."""
        return callable(getattr(self.backend, "xid_events", None)) or self.kernel is not None

    def watch_kernel_log(self, log: KernelLog, buses: Mapping[str, int]) -> None:
        """Read ``log``'s ``NVRM: Xid`` lines with the backend's events; ``buses``: PCI bus id -> GPU index."""
        self.kernel, self.buses = log, dict(buses)

    def watch_host_kernel_log(self, buses: Mapping[str, int]) -> None:
        """Watch the kernel log the backend names (``host_kernel_log()``), unless one is watched already."""
        named = getattr(self.backend, "host_kernel_log", None)
        if self.kernel is None and callable(named) and isinstance(log := named(), KernelLog):
            self.watch_kernel_log(log, buses)

    def stop_watching(self) -> None:
        """Close the watched kernel log (its ``/dev/kmsg`` descriptor) and watch none; faults kept are kept."""
        if self.kernel is not None:
            self.kernel.close()
        self.kernel = None

    def kernel_log_problem(self) -> str | None:
        """Why the watched kernel log cannot be read, once (None after, or when it can)."""
        if self.kernel is None or self.kernel.problem is None or self._problem_said:
            return None
        self._problem_said = True
        return self.kernel.problem

    def take_xid_cause(self, gpus: tuple[int, ...]) -> str | None:
        """The cause the first pending Xid of ``gpus`` gives ("Xid 79 on GPU 3 (fell off the bus)"), the events
        taken (a reset-needing one kept for :meth:`take_crash_faults`); None when there is none (or the backend
        cannot say: telemetry never fails a run)."""
        faults = self.take_faults(gpus)
        for fault in faults:
            if needs_reset(fault.code):
                self.crashed.setdefault(fault.gpu, fault)
        return xid_cause(faults[0].code, faults[0].gpu) if faults else None

    def take_crash_faults(self, gpus: Iterable[int], config: str | None) -> list[GpuFault]:
        """The reset-needing faults that crashed the configuration ``config`` on ``gpus``, taken, naming it."""
        return [GpuFault(f.gpu, f.code, f.seen_at, config) for gpu in gpus if (f := self.crashed.pop(gpu, None))]

    def take_faults(self, gpus: tuple[int, ...]) -> list[GpuFault]:
        """Every pending Xid of ``gpus`` (NVML's events and the kernel log's lines), taken (none when the backend
        cannot say: telemetry never fails a run)."""
        if not gpus:
            return []
        self._kernel_faults()
        faults = [f for f in self.pending if f.gpu in gpus]
        self.pending = [f for f in self.pending if f.gpu not in gpus]
        reader = getattr(self.backend, "xid_events", None)
        if reader is None:
            return faults
        try:
            events = reader(gpus)
        except Exception:  # noqa: BLE001 - a failed read is no event
            return faults
        for event in events or ():
            if isinstance(event, tuple) and len(event) in (2, 3):
                seen_at = event[2] if len(event) == 3 and isinstance(event[2], int | float) else time.time()
                faults.append(GpuFault(int(event[0]), int(event[1]), float(seen_at)))
        return faults

    def _kernel_faults(self) -> None:
        if self.kernel is None:
            return
        text = self.kernel.read()
        if not text:
            return
        by_bus = {_bus_key(bus): gpu for bus, gpu in self.buses.items()}
        for bus, code in kernel_xids(text):
            gpu = by_bus.get(_bus_key(bus))
            if gpu is not None:
                self.pending.append(GpuFault(gpu, code, time.time()))


def _bus_key(pci: str) -> str:
    parts = pci.lower().split(":")
    return ":".join(part.split(".")[0] for part in parts[-2:])


# -- kept across a resume ----------------------------------------------------------------------------------


def fences_doc(fenced: Iterable[GpuFault], uuids: Mapping[int, str]) -> dict[str, object]:
    """The run directory's :data:`~specbench_tui.core.gpu_faults.FENCE_FILE`: each fenced GPU's index, UUID,
    Xid, when and which configuration it crashed."""
    return {"fenced": [{"gpu": f.gpu, "uuid": uuids.get(f.gpu), "xid": f.code, "seen_at": f.seen_at,
                        "config": f.config} for f in fenced]}


def restore_fences(doc: Mapping[str, object] | None, uuids: Mapping[int, str],
                   run_dir: str) -> tuple[list[GpuFault], list[str]]:
    """The faults an earlier run recorded that still fence a GPU here (found by UUID, whatever its index now),
    and the notices to say: each one kept and how to clear it, each GPU that is no longer there (reported,
    not fenced)."""
    rows = doc.get("fenced") if doc is not None else None
    if not isinstance(rows, list):
        return [], []
    by_uuid = {uuid: index for index, uuid in uuids.items()}
    faults: list[GpuFault] = []
    notices: list[str] = []
    clear = f"delete {os.path.join(run_dir, FENCE_FILE)} once it is reset, then resume, to place on it again"
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("gpu"), int) or not isinstance(row.get("xid"), int):
            continue
        uuid = row.get("uuid") if isinstance(row.get("uuid"), str) else None
        gpu = by_uuid.get(uuid) if uuid is not None else (row["gpu"] if row["gpu"] in uuids or not uuids else None)
        seen_at = row.get("seen_at")
        config = row.get("config")
        fault = GpuFault(row["gpu"] if gpu is None else gpu, row["xid"],
                         float(seen_at) if isinstance(seen_at, int | float) else None,
                         config if isinstance(config, str) else None)
        if gpu is None:
            meaning = XID_MEANINGS.get(fault.code, "see NVIDIA's Xid catalogue")
            notices.append(f"GPU {row['gpu']} ({uuid or 'no UUID'}), fenced by Xid {fault.code} ({meaning}) in "
                           f"the earlier run, is no longer here (a reboot or a swap): not fenced; check "
                           f"nvidia-smi, then delete {os.path.join(run_dir, FENCE_FILE)}")
            continue
        faults.append(fault)
        notices.append(f"kept from the earlier run: {fault.reason()}; {clear}")
    return faults, notices


def gpu_identity(backend: object) -> tuple[dict[int, str], dict[str, int]]:
    """Each GPU's UUID and its PCI bus id -> index, as the backend describes its box (empty when it cannot)."""
    uuids: dict[int, str] = {}
    buses: dict[str, int] = {}
    describe = getattr(backend, "describe", None)
    if callable(describe):
        with contextlib.suppress(Exception):
            for info in describe().gpus:
                if info.uuid:
                    uuids[info.index] = info.uuid
                if info.pci_bus_id:
                    buses[info.pci_bus_id] = info.index
    return uuids, buses
