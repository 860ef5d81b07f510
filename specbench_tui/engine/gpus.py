"""GPU telemetry and the GPU pool: NVML, a scripted fake box, a sampler thread and per-configuration summaries.

How the orchestrator uses this module::

    backend = open_backend("auto")        # "auto" | "nvml" | "fake" (demo/simulator) | "none"
    if backend.hint:                      # no driver / no GPU: say it once; everything else still works
        publish(Notice(level="info", text=backend.hint))
    pool = GpuPool(sweep.gpus if sweep.gpus is not None else tuple(range(backend.device_count())))

    sampler = GpuSampler(backend, lambda samples: publish(GpuSampled(samples=samples_to_json(samples, owners))),
                         loop=asyncio.get_running_loop())   # polled in a thread every 0.5 s, delivered on the loop
    sampler.start()
    for config in placement.order_configs(plan.runnable(), pool.indices, sweep.concurrent):  # strictly in order;
        # when sweep.concurrent, what follows acquire runs in a task per configuration
        gpus = await pool.acquire(config.gpus_needed)
        # launch with CUDA_VISIBLE_DEVICES=",".join(map(str, gpus)) and CUDA_DEVICE_ORDER=PCI_BUS_ID
        pid = await server.start()
        if isinstance(backend, FakeBackend):
            backend.attach(config.name, gpus, (pid,))     # demo: memory and utilisation follow the server
        sampler.open_window(config.id, gpus)              # the measured window starts
        backend.set_busy(gpus, True) ... (False)          # fake only: while requests are in flight
        summary = sampler.close_window(config.id)         # GpuSummary; ConfigFinished(gpu_summary=summary.to_json())
        ...stop the server; server.pids_seen is the tree snapshot taken before killing (as SGLang's tests do)
        if isinstance(backend, FakeBackend):
            backend.detach(gpus)
        leftover = await wait_gpus_released(backend, gpus, server.pids_seen, engine.gpu_release_timeout_s)
        if leftover:
            fail(release_failure_message(gpus, leftover, engine.gpu_release_timeout_s))
        await pool.release(gpus)
    sampler.stop()

``owners`` maps pid -> configuration name (``FakeBackend.owners()`` for the fake, or the orchestrator's own
map of server pids) so each GPU process shows which configuration holds it.

GPU indices are NVML's, which follow PCI bus order; CUDA's default order ("fastest first") can differ, so
servers must be launched with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` for ``CUDA_VISIBLE_DEVICES`` to name the same
cards. NVML is imported lazily inside :class:`NvmlBackend`, so nothing here costs anything until it is used.
NVML reports host pids: inside a container with its own pid namespace they do not match the server's pids,
and :func:`wait_gpus_released` then returns at once (SGLang's own helper has the same limit).
"""

from __future__ import annotations

import asyncio
import atexit
import importlib
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any, Literal, Protocol

log = logging.getLogger(__name__)

NA = "n/a"
"""How a figure the driver could not give is shown."""

MIB = 1024 * 1024

BackendKind = Literal["auto", "nvml", "fake", "none"]


@dataclass(frozen=True)
class GpuSample:
    """One GPU at one moment; None means the driver could not say ("n/a")."""

    index: int
    name: str | None = None
    util_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    temp_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    pids: tuple[tuple[int, float | None], ...] = ()
    """(pid, used MiB) of the compute processes on it; the MiB is None where the driver cannot tell."""


@dataclass(frozen=True)
class GpuInfo:
    """The static facts of one GPU, for the environment fingerprint."""

    index: int
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    mem_total_mib: float | None = None
    power_limit_w: float | None = None
    compute_capability: str | None = None
    """"major.minor", e.g. "12.0" for an SM120 (RTX PRO 6000 Blackwell) card."""

    @property
    def sm(self) -> str | None:
        """The architecture as compilers name it: "sm_120", "sm_90" (None when unknown)."""
        return sm_name(self.compute_capability)


@dataclass(frozen=True)
class BoxInfo:
    """The driver and every GPU of the machine, as a backend sees them."""

    backend: str
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    """The highest CUDA version the driver supports ("13.0"), not the toolkit torch was built with."""
    nvml_version: str | None = None
    gpus: tuple[GpuInfo, ...] = ()
    hint: str | None = None


def sm_name(compute_capability: str | None) -> str | None:
    """"12.0" -> "sm_120", "9.0" -> "sm_90"; None for anything else."""
    if not compute_capability:
        return None
    major, _, minor = compute_capability.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        return None
    return f"sm_{int(major)}{int(minor)}"


_ARCHITECTURES = {"7.0": "Volta", "7.5": "Turing", "8.0": "Ampere", "8.6": "Ampere", "8.7": "Ampere (Orin)",
                  "8.9": "Ada", "9.0": "Hopper", "10.0": "Blackwell (SM100)", "10.3": "Blackwell Ultra (SM103)",
                  "12.0": "Blackwell (SM120: RTX PRO / GeForce)", "12.1": "Blackwell (SM121: DGX Spark)"}


def architecture(compute_capability: str | None) -> str | None:
    """A human name for the compute capability ("12.0" -> "Blackwell (SM120: ...)"); None when unknown."""
    return _ARCHITECTURES.get(compute_capability or "")


class GpuBackend(Protocol):
    """Where GPU facts come from: NVML on a real box, a scripted fake for the demo and tests."""

    hint: str | None
    """Why no GPU can be seen (no driver, no device), shown once; None when all is well."""

    def device_count(self) -> int: ...

    def sample(self) -> list[GpuSample]: ...

    def pids_holding(self, indices: tuple[int, ...]) -> set[int]: ...


class NullBackend:
    """No GPUs visible; every figure is n/a."""

    def __init__(self, hint: str = "no NVIDIA driver or GPU found: GPU figures are n/a") -> None:
        self.hint: str | None = hint

    def device_count(self) -> int:
        return 0

    def sample(self) -> list[GpuSample]:
        return []

    def pids_holding(self, indices: tuple[int, ...]) -> set[int]:
        return set()

    def describe(self) -> BoxInfo:
        return BoxInfo(backend="none", hint=self.hint)


# --------------------------------------------------------------------------------------------------- NVML

def _nvml_hint(nvml: ModuleType, exc: Exception) -> str:
    """A one-line explanation, with what to do, of why NVML could not start."""
    code = getattr(exc, "value", None)
    if code == getattr(nvml, "NVML_ERROR_LIBRARY_NOT_FOUND", 12):
        return ("no NVIDIA driver found (libnvidia-ml.so.1 is missing): GPU figures are n/a. On a GPU machine, "
                "install the driver, or run the container with the NVIDIA container toolkit (--gpus all)")
    if code == getattr(nvml, "NVML_ERROR_DRIVER_NOT_LOADED", 9):
        return "the NVIDIA driver is installed but not loaded (try nvidia-smi): GPU figures are n/a"
    if code == getattr(nvml, "NVML_ERROR_NO_PERMISSION", 4):
        return "no permission to query the NVIDIA driver (NVML): GPU figures are n/a"
    if code == getattr(nvml, "NVML_ERROR_LIB_RM_VERSION_MISMATCH", 18):
        return ("the NVIDIA driver and its library differ in version (reboot after a driver upgrade): "
                "GPU figures are n/a")
    return f"NVML could not start ({exc}): GPU figures are n/a"


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _mib(value: Any) -> float | None:
    return None if value is None else float(value) / MIB


def _watts(milliwatts: Any) -> float | None:
    return None if milliwatts is None else float(milliwatts) / 1000.0


class NvmlBackend:
    """The real GPUs, through NVML (``pynvml`` from nvidia-ml-py), imported only when this is built.

    Every getter degrades to None instead of raising (nvitop's ``nvmlQuery``): one GPU that has fallen off
    the bus, a field a card does not support, or an old driver lacking a function costs that figure only.
    A machine without a driver or without GPUs is detected once, here, and explained in :attr:`hint`.
    """

    def __init__(self, nvml: ModuleType | None = None) -> None:
        self.hint: str | None = None
        self._nvml: ModuleType | None = None
        self._handles: list[Any] = []
        self._names: dict[int, str | None] = {}
        self._missing_functions: set[str] = set()
        self._closed = False
        if nvml is None:
            try:
                nvml = importlib.import_module("pynvml")
            except ImportError:
                self.hint = "the nvidia-ml-py package is not installed: GPU figures are n/a"
                return
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            self.hint = _nvml_hint(nvml, exc)
            return
        except OSError as exc:  # a broken library file
            self.hint = f"NVML could not be loaded ({exc}): GPU figures are n/a"
            return
        self._nvml = nvml
        atexit.register(self.close)
        count = self._query("nvmlDeviceGetCount")
        if not count:
            self.hint = "the NVIDIA driver is loaded but shows no GPU: GPU figures are n/a"
            return
        self._handles = [self._query("nvmlDeviceGetHandleByIndex", i) for i in range(int(count))]

    def close(self) -> None:
        """Shut NVML down (also registered with atexit); the backend then reports nothing."""
        if self._nvml is not None and not self._closed:
            self._closed = True
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001 - shutting down must never fail
                pass
            self._handles = []

    def _query(self, function: str, *args: Any) -> Any:
        """Call ``pynvml.<function>(*args)``; None on any NVML error or a function this version lacks."""
        nvml = self._nvml
        if nvml is None or self._closed:
            return None
        fn = getattr(nvml, function, None)
        if fn is None:
            self._note_missing(function)
            return None
        try:
            return fn(*args)
        except nvml.NVMLError as exc:
            if getattr(exc, "value", None) == getattr(nvml, "NVML_ERROR_FUNCTION_NOT_FOUND", 13):
                self._note_missing(function)
            return None
        except (OSError, ValueError, TypeError, AttributeError) as exc:  # ctypes trouble, odd structures
            log.debug("NVML %s failed: %s", function, exc)
            return None

    def _note_missing(self, function: str) -> None:
        if function not in self._missing_functions:
            self._missing_functions.add(function)
            log.warning("NVML function %s is not available (driver older than nvidia-ml-py?): its figure "
                        "is n/a", function)

    def _handle(self, index: int) -> Any:
        return self._handles[index] if 0 <= index < len(self._handles) else None

    def _device_query(self, function: str, index: int, *args: Any) -> Any:
        """``pynvml.<function>(handle, *args)`` for GPU ``index``; None when that GPU has no handle."""
        handle = self._handle(index)
        return None if handle is None else self._query(function, handle, *args)

    def device_count(self) -> int:
        return len(self._handles)

    # Getters, one per field; each returns None when NVML cannot say.

    def name(self, index: int) -> str | None:
        if index not in self._names or self._names[index] is None:
            self._names[index] = _text(self._device_query("nvmlDeviceGetName", index))
        return self._names[index]

    def util_pct(self, index: int) -> float | None:
        rates = self._device_query("nvmlDeviceGetUtilizationRates", index)
        return None if rates is None else float(rates.gpu)

    def memory_mib(self, index: int) -> tuple[float | None, float | None]:
        """(used, total) MiB."""
        info = self._device_query("nvmlDeviceGetMemoryInfo", index)
        if info is None:
            return None, None
        return _mib(getattr(info, "used", None)), _mib(getattr(info, "total", None))

    def temp_c(self, index: int) -> float | None:
        sensor = getattr(self._nvml, "NVML_TEMPERATURE_GPU", 0)
        value = self._device_query("nvmlDeviceGetTemperature", index, sensor)
        return None if value is None else float(value)

    def power_w(self, index: int) -> float | None:
        return _watts(self._device_query("nvmlDeviceGetPowerUsage", index))

    def power_limit_w(self, index: int) -> float | None:
        return _watts(self._device_query("nvmlDeviceGetEnforcedPowerLimit", index))

    def sm_clock_mhz(self, index: int) -> float | None:
        clock = getattr(self._nvml, "NVML_CLOCK_SM", 1)
        value = self._device_query("nvmlDeviceGetClockInfo", index, clock)
        return None if value is None else float(value)

    def processes(self, index: int) -> tuple[tuple[int, float | None], ...] | None:
        """(pid, used MiB) of the compute processes; None when NVML cannot list them."""
        procs = self._device_query("nvmlDeviceGetComputeRunningProcesses", index)
        if procs is None:
            return None
        out: list[tuple[int, float | None]] = []
        for proc in procs:
            pid = getattr(proc, "pid", None)
            if pid is None:
                continue
            out.append((int(pid), _mib(getattr(proc, "usedGpuMemory", None))))
        return tuple(out)

    def compute_capability(self, index: int) -> str | None:
        cc = self._device_query("nvmlDeviceGetCudaComputeCapability", index)
        if not cc or len(cc) != 2:
            return None
        return f"{int(cc[0])}.{int(cc[1])}"

    def sample(self) -> list[GpuSample]:
        samples = []
        for index in range(self.device_count()):
            used, total = self.memory_mib(index)
            samples.append(GpuSample(
                index=index, name=self.name(index), util_pct=self.util_pct(index), mem_used_mib=used,
                mem_total_mib=total, temp_c=self.temp_c(index), power_w=self.power_w(index),
                power_limit_w=self.power_limit_w(index), sm_clock_mhz=self.sm_clock_mhz(index),
                pids=self.processes(index) or (),
            ))
        return samples

    def pids_holding(self, indices: tuple[int, ...]) -> set[int]:
        """Pids of compute processes on ``indices`` (a GPU whose list NVML refuses counts as empty)."""
        held: set[int] = set()
        for index in indices:
            held.update(pid for pid, _ in self.processes(index) or ())
        return held

    def describe(self) -> BoxInfo:
        cuda = self._query("nvmlSystemGetCudaDriverVersion")
        gpus = []
        for index in range(self.device_count()):
            pci = self._device_query("nvmlDeviceGetPciInfo", index)
            gpus.append(GpuInfo(
                index=index, name=self.name(index), uuid=_text(self._device_query("nvmlDeviceGetUUID", index)),
                pci_bus_id=_text(getattr(pci, "busId", None)) if pci is not None else None,
                mem_total_mib=self.memory_mib(index)[1], power_limit_w=self.power_limit_w(index),
                compute_capability=self.compute_capability(index),
            ))
        return BoxInfo(
            backend="nvml", driver_version=_text(self._query("nvmlSystemGetDriverVersion")),
            cuda_driver_version=cuda_version_text(cuda), nvml_version=_text(self._query("nvmlSystemGetNVMLVersion")),
            gpus=tuple(gpus), hint=self.hint,
        )


def cuda_version_text(value: Any) -> str | None:
    """NVML's integer CUDA version (12080) as "12.8"; None stays None."""
    if value is None:
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return f"{number // 1000}.{(number % 1000) // 10}"


# --------------------------------------------------------------------------------------------------- Fake

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

    # The script.

    def attach(self, config_name: str, indices: Iterable[int], pids: Iterable[int],
               mem_fraction: float = 0.85) -> None:
        """A server for ``config_name`` started on ``indices`` with process ids ``pids``."""
        indices_t = self._check(indices)
        with self._lock:
            self._leases.append(_Lease(config=config_name, indices=indices_t,
                                       pids=tuple(pid + self.pid_offset for pid in pids),
                                       target_mib=max(0.0, min(mem_fraction, 1.0)) * self.mem_total_mib,
                                       attached_at=self._clock()))

    def set_busy(self, indices: Iterable[int], busy: bool) -> None:
        """Requests are (or are no longer) in flight on the servers attached to ``indices``."""
        wanted = set(self._check(indices))
        with self._lock:
            for lease in self._leases:
                if lease.detached_at is None and wanted & set(lease.indices):
                    lease.busy = busy

    def detach(self, indices: Iterable[int]) -> None:
        """The servers on ``indices`` were stopped; their memory is freed after ``release_delay_s``."""
        wanted = set(self._check(indices))
        with self._lock:
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


def open_backend(kind: BackendKind = "auto", **fake_options: Any) -> NvmlBackend | FakeBackend | NullBackend:
    """The backend for ``kind``.

    "auto": NVML when it sees at least one GPU, else a :class:`NullBackend` carrying NVML's hint;
    "nvml": NVML even when it sees nothing (its ``hint`` says why); "fake": the scripted box, with
    ``fake_options`` passed to :class:`FakeBackend`; "none": telemetry off.
    """
    if kind == "fake":
        return FakeBackend(**fake_options)
    if kind == "none":
        return NullBackend("GPU telemetry is off")
    if kind not in ("auto", "nvml"):
        raise ValueError(f"unknown GPU backend {kind!r}: expected auto, nvml, fake or none")
    nvml = NvmlBackend()
    if kind == "auto" and (nvml.hint is not None or nvml.device_count() == 0):
        nvml.close()
        return NullBackend(nvml.hint or "no GPU found: GPU figures are n/a")
    return nvml


def describe_backend(backend: GpuBackend) -> BoxInfo:
    """The backend's static facts (an empty description for backends without ``describe``)."""
    describe = getattr(backend, "describe", None)
    if callable(describe):
        return describe()
    return BoxInfo(backend=type(backend).__name__, hint=backend.hint)


def samples_to_json(samples: Iterable[GpuSample],
                    owners: Mapping[int, str] | None = None) -> tuple[dict[str, Any], ...]:
    """Samples as plain dicts for :class:`~specbench_tui.core.events.GpuSampled`: the fields of
    :class:`GpuSample` (``pids`` as ``[[pid, MiB], ...]``) plus ``processes``, where each process names its
    configuration when ``owners`` (pid -> configuration name) knows it."""
    owners = owners or {}
    out = []
    for s in samples:
        data = asdict(s)
        data["pids"] = [[pid, mem] for pid, mem in s.pids]
        data["processes"] = [{"pid": pid, "mem_mib": mem, "config": owners.get(pid)} for pid, mem in s.pids]
        out.append(data)
    return tuple(out)


def fmt(value: float | None, unit: str = "", digits: int = 0) -> str:
    """A figure for display, or "n/a"."""
    if value is None:
        return NA
    return f"{value:.{digits}f}{unit}"


# --------------------------------------------------------------------------------------------------- Summaries

@dataclass(frozen=True)
class GpuSummary:
    """A configuration's GPUs over its measured window, stored with its results (None: no figure)."""

    gpus: tuple[int, ...]
    samples: int
    """How many sampling instants the window saw."""
    duration_s: float | None = None
    peak_mem_mib: float | None = None
    """Highest memory used on any one of the GPUs."""
    peak_mem_total_mib: float | None = None
    """Highest memory used on all of the GPUs together."""
    mean_util_pct: float | None = None
    max_util_pct: float | None = None
    mean_power_w: float | None = None
    """Mean draw per GPU."""
    mean_power_total_w: float | None = None
    """Mean draw of all of the GPUs together."""
    max_temp_c: float | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["gpus"] = list(self.gpus)
        return data


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


class GpuSummariser:
    """Accumulates samples of some GPUs and summarises them; call :meth:`add` once per sampling instant."""

    def __init__(self, indices: Iterable[int]) -> None:
        self.indices = tuple(indices)
        self._wanted = set(self.indices)
        self._instants = 0
        self._first: float | None = None
        self._last: float | None = None
        self._mem: list[float] = []
        self._mem_total: list[float] = []
        self._util: list[float] = []
        self._power: list[float] = []
        self._power_total: list[float] = []
        self._temp: list[float] = []

    @property
    def instants(self) -> int:
        return self._instants

    def add(self, samples: Iterable[GpuSample], at: float | None = None) -> None:
        mine = [s for s in samples if s.index in self._wanted]
        if not mine:
            return
        self._instants += 1
        at = time.monotonic() if at is None else at
        self._first = at if self._first is None else self._first
        self._last = at
        mems = [s.mem_used_mib for s in mine if s.mem_used_mib is not None]
        self._mem.extend(mems)
        if len(mems) == len(mine):
            self._mem_total.append(sum(mems))
        self._util.extend(s.util_pct for s in mine if s.util_pct is not None)
        powers = [s.power_w for s in mine if s.power_w is not None]
        self._power.extend(powers)
        if len(powers) == len(mine):
            self._power_total.append(sum(powers))
        self._temp.extend(s.temp_c for s in mine if s.temp_c is not None)

    def summary(self) -> GpuSummary:
        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 2)

        duration = self._last - self._first if self._first is not None and self._last is not None else None
        return GpuSummary(
            gpus=self.indices, samples=self._instants, duration_s=rounded(duration),
            peak_mem_mib=max(self._mem, default=None), peak_mem_total_mib=max(self._mem_total, default=None),
            mean_util_pct=rounded(_mean(self._util)), max_util_pct=max(self._util, default=None),
            mean_power_w=rounded(_mean(self._power)), mean_power_total_w=rounded(_mean(self._power_total)),
            max_temp_c=max(self._temp, default=None),
        )


def summarise(series: Iterable[Iterable[GpuSample]], indices: Iterable[int]) -> GpuSummary:
    """Summarise a series of sampling instants restricted to ``indices`` (a pure helper for tests and reports)."""
    summariser = GpuSummariser(indices)
    for at, samples in enumerate(series):
        summariser.add(samples, at=float(at))
    return summariser.summary()


# --------------------------------------------------------------------------------------------------- Sampler

SampleCallback = Callable[[list[GpuSample]], None]


class GpuSampler:
    """Polls a backend in a daemon thread every ``interval_s`` and hands each sample list to ``callback``.

    NVML calls block for milliseconds, so they never run on the event loop. With ``loop`` given, the
    callback is scheduled on that loop (``call_soon_threadsafe``); otherwise it runs in the sampler thread.
    A backend with no device is not polled at all. Measured windows (:meth:`open_window` /
    :meth:`close_window`) summarise the samples taken while they were open.
    """

    def __init__(self, backend: GpuBackend, callback: SampleCallback | None = None, *, interval_s: float = 0.5,
                 loop: asyncio.AbstractEventLoop | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.backend = backend
        self.callback = callback
        self.interval_s = interval_s
        self.loop = loop
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._windows: dict[str, GpuSummariser] = {}
        self._latest: list[GpuSample] = []
        self._latest_at: float | None = None
        self._callback_failed = False
        self.rounds = 0
        """How many times the backend was sampled."""

    @property
    def latest(self) -> list[GpuSample]:
        with self._lock:
            return list(self._latest)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self.running or self.backend.device_count() == 0:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="specbench-gpu-sampler", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop polling and wait (up to ``timeout_s``) for the thread to end."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    def __enter__(self) -> GpuSampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def poll_once(self) -> list[GpuSample]:
        """Sample now, feed the open windows and the callback; what the thread does each round."""
        try:
            samples = self.backend.sample()
        except Exception:  # a backend must not kill the thread (logged); NVML getters do not raise
            log.exception("GPU backend failed to sample")
            samples = []
        at = self._clock()
        with self._lock:
            self._latest = samples
            self._latest_at = at
            for window in self._windows.values():
                window.add(samples, at)
            self.rounds += 1
        if samples and self.callback is not None:
            self._deliver(samples)
        return samples

    def _deliver(self, samples: list[GpuSample]) -> None:
        assert self.callback is not None
        try:
            if self.loop is not None:
                if self.loop.is_closed():
                    return
                self.loop.call_soon_threadsafe(self.callback, samples)
            else:
                self.callback(samples)
        except RuntimeError:  # the loop closed between the check and the call
            return
        except Exception:  # a faulty consumer is reported once (logged), polling goes on
            if not self._callback_failed:
                self._callback_failed = True
                log.exception("GPU sample callback failed")

    def _run(self) -> None:
        while not self._stop.is_set():
            started = self._clock()
            self.poll_once()
            self._stop.wait(max(0.0, self.interval_s - (self._clock() - started)))

    def open_window(self, key: str, indices: Iterable[int]) -> None:
        """Start summarising ``indices`` under ``key`` (e.g. the configuration id); reopening restarts it."""
        with self._lock:
            self._windows[key] = GpuSummariser(indices)

    def close_window(self, key: str) -> GpuSummary | None:
        """The summary of the window ``key`` (None if it was never opened). A window too short to see a
        sampling round is summarised from the latest sample."""
        with self._lock:
            window = self._windows.pop(key, None)
            if window is None:
                return None
            if window.instants == 0 and self._latest:
                window.add(self._latest, self._latest_at)
            return window.summary()


# --------------------------------------------------------------------------------------------------- Pool

class GpuPool:
    """Hands out disjoint sets of GPU indices; ``acquire`` waits until enough are free."""

    def __init__(self, indices: tuple[int, ...]) -> None:
        self.indices = tuple(indices)
        self._free = list(self.indices)
        self._changed = asyncio.Condition()

    @property
    def free(self) -> tuple[int, ...]:
        return tuple(self._free)

    async def acquire(self, count: int) -> tuple[int, ...]:
        if count > len(self.indices):
            raise ValueError(f"needs {count} GPUs but the pool has {len(self.indices)}")
        async with self._changed:
            await self._changed.wait_for(lambda: len(self._free) >= count)
            taken = tuple(self._free[:count])
            del self._free[:count]
            return taken

    async def release(self, indices: tuple[int, ...]) -> None:
        async with self._changed:
            self._free.extend(i for i in indices if i not in self._free)
            self._free.sort()
            self._changed.notify_all()


async def wait_gpus_released(backend: GpuBackend, indices: tuple[int, ...], pids: set[int],
                             timeout_s: float, poll_s: float = 0.5) -> set[int]:
    """Wait until none of ``pids`` holds memory on ``indices``; return the pids still holding at timeout.

    SGLang's tests do the same (``wait_for_gpu_release``: NVML every 0.5 s for up to 60 s) because a killed
    server's CUDA context can hold memory for seconds after the process is gone. ``pids`` must be the
    server's whole process tree, collected before it was killed. The NVML query runs in a worker thread.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        held = await asyncio.to_thread(backend.pids_holding, tuple(indices))
        holding = held & pids
        if not holding or time.monotonic() >= deadline:
            return holding
        await asyncio.sleep(poll_s)


def release_failure_message(indices: Iterable[int], holding: Iterable[int], timeout_s: float) -> str:
    """The clear failure for GPUs still held after :func:`wait_gpus_released` timed out."""
    gpus = ",".join(str(i) for i in indices)
    pids = ", ".join(str(p) for p in sorted(holding))
    return (f"GPU {gpus} still held by pid {pids} {timeout_s:g} s after the server was stopped; not reusing "
            f"them (check nvidia-smi, kill the leftover processes, or raise engine.gpu_release_timeout_s)")
