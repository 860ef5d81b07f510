"""GPU telemetry from NVML (``nvidia-ml-py``), imported lazily: a box without a driver costs nothing."""

from __future__ import annotations

import atexit
import importlib
import logging
import threading
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any, SupportsFloat, SupportsInt

from specbench_tui.engine.gpus.backend import BoxInfo, GpuInfo, GpuSample, MIB

if TYPE_CHECKING:
    from specbench_tui.engine.gpus.faults import KernelLog

log = logging.getLogger(__name__)


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


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _mib(value: SupportsFloat | None) -> float | None:
    return None if value is None else float(value) / MIB


def _watts(milliwatts: SupportsFloat | None) -> float | None:
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
        self._handles: list[object] = []
        """NVML's opaque device handles, by index."""
        self._names: dict[int, str | None] = {}
        self._missing_functions: set[str] = set()
        self._closed = False
        self._xid_set: object = None
        """NVML's event set registered for every GPU's Xid critical errors (False: cannot be had here)."""
        self._xids: list[tuple[int, int, float]] = []
        """(GPU, Xid, Unix time seen) read and not yet taken."""
        self._xid_lock = threading.Lock()
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

    def _query(self, function: str, *args: object) -> Any:
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

    def _handle(self, index: int) -> object:
        return self._handles[index] if 0 <= index < len(self._handles) else None

    def _device_query(self, function: str, index: int, *args: object) -> Any:
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

    def energy_mj(self, indices: tuple[int, ...]) -> dict[int, float | None]:
        """NVML's total energy counter of each GPU (millijoules since the driver loaded; Volta and later); None
        for a GPU without one."""
        out: dict[int, float | None] = {}
        for index in indices:
            value = self._device_query("nvmlDeviceGetTotalEnergyConsumption", index)
            out[index] = float(value) if isinstance(value, int | float) else None
        return out

    def host_kernel_log(self) -> KernelLog:
        """This host's kernel log (``/dev/kmsg``, else ``dmesg``), read for ``NVRM: Xid`` lines with the events."""
        from specbench_tui.engine.gpus.faults import KernelLog

        return KernelLog()

    def xid_events(self, indices: tuple[int, ...]) -> list[tuple[int, int, float]]:
        """The (GPU, Xid, Unix time seen) critical-error events of ``indices`` since the last call, taken (events of
        other GPUs are kept for their owner). The event set is registered on the first call; never blocks (a 0 ms
        wait). Once registered, every :meth:`sample` reads the set too, so an event's time is the sampler's."""
        with self._xid_lock:
            if self._xid_set is None:
                self._xid_set = self._register_xids()
            if self._xid_set is not False:
                self._drain_xids()
            taken = [event for event in self._xids if event[0] in indices]
            self._xids = [event for event in self._xids if event[0] not in indices]
        return taken

    def xid_registration(self) -> str:
        """Whether Xid events can be had on this machine, in words (for the probe)."""
        with self._xid_lock:
            if self._xid_set is None:
                self._xid_set = self._register_xids()
        if self._xid_set is False:
            return "not registered: NVML gives no critical-error events here (no GPU, or a driver without them)"
        return f"registered for Xid critical errors on {len(self._handles)} GPUs"

    def _register_xids(self) -> object:
        kind = getattr(self._nvml, "nvmlEventTypeXidCriticalError", None)
        event_set = self._query("nvmlEventSetCreate") if kind is not None and self._handles else None
        if event_set is None:
            return False
        registered = [self._device_query("nvmlDeviceRegisterEvents", i, kind) for i in range(len(self._handles))]
        if not any(self._handle(i) is not None for i, _ in enumerate(registered)):
            return False
        return event_set

    def _drain_xids(self) -> None:
        for _ in range(64):  # a burst is read in one call; an endless one never holds the caller
            data = self._query("nvmlEventSetWait_v2", self._xid_set, 0)
            if data is None:
                return
            index = self._query("nvmlDeviceGetIndex", getattr(data, "device", None))
            code = getattr(data, "eventData", None)
            if isinstance(index, int) and isinstance(code, int):
                self._xids.append((index, code, time.time()))

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
        with self._xid_lock:  # events are timed when seen, not when a placement asks (a 0 ms wait)
            if self._xid_set not in (None, False):
                self._drain_xids()
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


def cuda_version_text(value: SupportsInt | str | None) -> str | None:
    """NVML's integer CUDA version (12080) as "12.8"; None stays None."""
    if value is None:
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return f"{number // 1000}.{(number % 1000) // 10}"
