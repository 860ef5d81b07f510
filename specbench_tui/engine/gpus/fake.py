"""The scripted GPU box of the demo and the simulator: memory, utilisation, power and heat follow the
servers it is told about."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from specbench_tui.engine.gpus.backend import BoxInfo, GpuInfo, GpuSample

if TYPE_CHECKING:
    from specbench_tui.engine.gpus.faults import KernelLog


@dataclass
class _Lease:
    """One simulated server's hold on some GPUs."""

    config: str
    indices: tuple[int, ...]
    pids: tuple[int, ...]
    target_mib: float
    attached_at: float
    busy: bool = False
    detached_at: float | None = None


@dataclass
class _Thermal:
    temp_c: float
    updated_at: float


class FakeOptions(TypedDict, total=False):
    """The keywords :class:`FakeBackend` takes (what ``open_backend("fake", ...)`` passes on)."""

    count: int
    name: str
    mem_total_mib: float
    power_limit_w: float
    compute_capability: str
    driver_version: str
    cuda_driver_version: str
    release_delay_s: float
    load_s: float
    idle_mem_mib: float
    clock: Callable[[], float]
    seed: int
    pid_offset: int


class FakeBackend:
    """A scripted 8-GPU box whose memory, utilisation, power and heat follow the simulated servers.

    The orchestrator tells it what the servers do: :meth:`attach` when a server starts on some GPUs (its
    memory climbs to ``mem_fraction`` of each card over ``load_s``, as weights, KV cache and CUDA graphs
    load), :meth:`set_busy` while requests are in flight (utilisation near 90-99 %, power near the limit,
    temperature rising), :meth:`detach` when it is stopped (its processes keep their memory for
    ``release_delay_s``, as a dying CUDA context does, then vanish). ``clock`` and ``seed`` make it
    deterministic in tests. Thread-safe: the sampler thread and the event loop call it at once.
    """

    DEFAULT_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"

    def __init__(self, count: int = 8, *, name: str = DEFAULT_NAME, mem_total_mib: float = 97887.0,
                 power_limit_w: float = 600.0, compute_capability: str = "12.0",
                 driver_version: str = "580.95.05", cuda_driver_version: str = "13.0",
                 release_delay_s: float = 0.0, load_s: float = 2.0, idle_mem_mib: float = 3.0,
                 clock: Callable[[], float] = time.monotonic, seed: int = 0, pid_offset: int = 0) -> None:
        self.hint: str | None = None
        self.pid_offset = pid_offset
        """NVML in a container with its own pid namespace lists the host's pids, not ours: the fake then shows
        each attached pid plus this offset."""
        self.count = count
        self.gpu_name = name
        self.mem_total_mib = mem_total_mib
        self.power_limit_w_value = power_limit_w
        self.compute_capability = compute_capability
        self.driver_version = driver_version
        self.cuda_driver_version = cuda_driver_version
        self.release_delay_s = release_delay_s
        self.load_s = load_s
        self.idle_mem_mib = idle_mem_mib
        self._clock = clock
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._leases: list[_Lease] = []
        now = clock()
        self._thermal = [_Thermal(31.0 + self._random.uniform(0, 3), now) for _ in range(count)]
        self._energy_j = [0.0] * count
        """Each GPU's energy counter (NVML's total energy), the exact integral of :meth:`nominal_power_w`."""
        self._energy_at = now
        self._xids: list[tuple[int, int, float]] = []
        """Xid events injected (:meth:`inject_xid`) and not yet taken."""
        self.kernel_log: KernelLog | None = None
        """The box's kernel log (a :class:`~specbench_tui.engine.gpus.faults.KernelLog`), which a test may give it:
        the simulator's box has no kernel of its own."""

    # The script.

    def attach(self, config_name: str, indices: Iterable[int], pids: Iterable[int],
               mem_fraction: float = 0.85) -> None:
        """A server for ``config_name`` started on ``indices`` with process ids ``pids``."""
        indices_t = self._check(indices)
        with self._lock:
            self._integrate()
            self._leases.append(_Lease(config=config_name, indices=indices_t,
                                       pids=tuple(pid + self.pid_offset for pid in pids),
                                       target_mib=max(0.0, min(mem_fraction, 1.0)) * self.mem_total_mib,
                                       attached_at=self._clock()))

    def set_busy(self, indices: Iterable[int], busy: bool) -> None:
        """Requests are (or are no longer) in flight on the servers attached to ``indices``."""
        wanted = set(self._check(indices))
        with self._lock:
            self._integrate()
            for lease in self._leases:
                if lease.detached_at is None and wanted & set(lease.indices):
                    lease.busy = busy

    def detach(self, indices: Iterable[int]) -> None:
        """The servers on ``indices`` were stopped; their memory is freed after ``release_delay_s``."""
        wanted = set(self._check(indices))
        with self._lock:
            self._integrate()
            now = self._clock()
            for lease in self._leases:
                if lease.detached_at is None and wanted & set(lease.indices):
                    lease.detached_at = now
                    lease.busy = False

    def owners(self) -> dict[int, str]:
        """pid -> configuration name of every process the fake shows."""
        with self._lock:
            self._expire()
            return {pid: lease.config for lease in self._leases for pid in lease.pids}

    def _check(self, indices: Iterable[int]) -> tuple[int, ...]:
        indices_t = tuple(indices)
        bad = [i for i in indices_t if not 0 <= i < self.count]
        if bad:
            raise ValueError(f"GPU indices {bad} are outside this {self.count}-GPU fake box")
        return indices_t

    def _expire(self) -> None:
        now = self._clock()
        self._leases = [lease for lease in self._leases
                        if lease.detached_at is None or now < lease.detached_at + self.release_delay_s]

    # The backend.

    def device_count(self) -> int:
        return self.count

    def sample(self) -> list[GpuSample]:
        with self._lock:
            self._expire()
            now = self._clock()
            return [self._sample_one(index, now) for index in range(self.count)]

    def _sample_one(self, index: int, now: float) -> GpuSample:
        leases = [lease for lease in self._leases if index in lease.indices]
        jitter = self._random.uniform
        mem = self.idle_mem_mib
        pids: list[tuple[int, float | None]] = []
        state = "idle"
        for lease in leases:
            loaded = 1.0 if self.load_s <= 0 else min(1.0, max(0.0, (now - lease.attached_at) / self.load_s))
            held = lease.target_mib * loaded
            mem += held
            share = held / max(1, len(lease.pids))
            pids.extend((pid, round(share, 1)) for pid in lease.pids)
            if lease.detached_at is not None:
                continue
            if lease.busy:
                state = "busy"
            elif state != "busy":
                state = "loading" if loaded < 1.0 else "attached"
        util, power_frac, clock_mhz, target_temp = {
            "idle": (0.0, 0.06 + jitter(0, 0.01), 210.0, 32.0),
            "attached": (jitter(0, 2), 0.15 + jitter(0, 0.02), 1110.0, 44.0),
            "loading": (jitter(15, 45), 0.30 + jitter(0, 0.08), 2100.0, 50.0),
            "busy": (jitter(88, 99), 0.78 + jitter(0, 0.18), 2280.0 + jitter(0, 240), 74.0),
        }[state]
        thermal = self._thermal[index]
        dt = max(0.0, now - thermal.updated_at)
        thermal.temp_c += (target_temp - thermal.temp_c) * (1.0 - 2.718281828 ** (-dt / 20.0))
        thermal.updated_at = now
        return GpuSample(
            index=index, name=self.gpu_name, util_pct=round(util, 1),
            mem_used_mib=round(min(mem, self.mem_total_mib), 1), mem_total_mib=self.mem_total_mib,
            temp_c=round(thermal.temp_c, 1),
            power_w=round(power_frac * self.power_limit_w_value, 1), power_limit_w=self.power_limit_w_value,
            sm_clock_mhz=round(clock_mhz), pids=tuple(pids),
        )

    # Energy: power follows load, so the energy is known exactly.

    NOMINAL_POWER = {"idle": 0.065, "attached": 0.16, "loading": 0.34, "busy": 0.87}
    """Each state's power as a fraction of the limit: the middle of the jittered samples' range."""

    def state(self, index: int, now: float) -> tuple[str, float | None]:
        """GPU ``index``'s state at ``now`` (idle, loading, attached, busy), and when a loading server is loaded
        (the next change that is not a script call; None: none due)."""
        state, change = "idle", None
        for lease in self._leases:
            if index not in lease.indices or lease.detached_at is not None:
                continue
            loaded_at = lease.attached_at + self.load_s
            if lease.busy:
                state = "busy"
            elif state != "busy":
                if now < loaded_at:
                    state, change = "loading", loaded_at if change is None else min(change, loaded_at)
                elif state != "loading":
                    state = "attached"
        return state, change

    def nominal_power_w(self, index: int, now: float) -> float:
        """GPU ``index``'s power at ``now`` in the model the energy counter integrates."""
        return self.NOMINAL_POWER[self.state(index, now)[0]] * self.power_limit_w_value

    def _integrate(self) -> None:
        """Bring every energy counter up to now (call with the lock held, before the script changes)."""
        now = self._clock()
        for index in range(self.count):
            start = self._energy_at
            while start < now:
                _, change = self.state(index, start)
                end = now if change is None or change <= start else min(now, change)
                self._energy_j[index] += self.nominal_power_w(index, start) * (end - start)
                start = end
        self._energy_at = now

    def energy_mj(self, indices: Iterable[int]) -> dict[int, float | None]:
        """NVML's total energy counter of each GPU of ``indices`` (millijoules since the box started)."""
        wanted = self._check(indices)
        with self._lock:
            self._integrate()
            return {index: self._energy_j[index] * 1000.0 for index in wanted}

    # GPU faults: Xid events, as NVML's critical-error event set gives them.

    def inject_xid(self, index: int, code: int, seen_at: float | None = None) -> None:
        """GPU ``index`` reports Xid ``code`` (79: it fell off the bus), seen at ``seen_at`` (Unix time; now)."""
        self._check((index,))
        with self._lock:
            self._xids.append((index, code, time.time() if seen_at is None else seen_at))

    def host_kernel_log(self) -> KernelLog | None:
        """The kernel log to watch with this box's events: the one a test gave it, else none."""
        return self.kernel_log

    def xid_events(self, indices: Iterable[int]) -> list[tuple[int, int, float]]:
        """The (GPU, Xid, Unix time seen) events of ``indices`` since the last call, taken (others are left for their
        owner)."""
        wanted = set(self._check(indices))
        with self._lock:
            taken = [event for event in self._xids if event[0] in wanted]
            self._xids = [event for event in self._xids if event[0] not in wanted]
        return taken

    def pids_holding(self, indices: tuple[int, ...]) -> set[int]:
        with self._lock:
            self._expire()
            return {pid for lease in self._leases if set(indices) & set(lease.indices) for pid in lease.pids}

    def describe(self) -> BoxInfo:
        return BoxInfo(
            backend="fake", driver_version=self.driver_version, cuda_driver_version=self.cuda_driver_version,
            nvml_version=None, hint=self.hint,
            gpus=tuple(GpuInfo(index=i, name=self.gpu_name, uuid=f"GPU-fake-{i:04d}",
                               pci_bus_id=f"00000000:{0x18 + 0x10 * i:02X}:00.0", mem_total_mib=self.mem_total_mib,
                               power_limit_w=self.power_limit_w_value, compute_capability=self.compute_capability)
                       for i in range(self.count)),
        )
