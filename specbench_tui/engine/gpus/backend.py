"""What every GPU backend gives (samples, static facts, a hint when nothing can be seen), the protocols
that declare it, and the backend that sees nothing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Literal, Protocol, runtime_checkable




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
    node: str | None = None
    """The cluster node it is on (``ServerLaunching.node``); None: this machine."""


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


def samples_to_json(samples: Iterable[GpuSample], owners: Mapping[int, str] | None = None,
                    node: str | None = None) -> tuple[dict[str, object], ...]:
    """Samples as plain dicts for :class:`~specbench_tui.core.events.GpuSampled`: the fields of
    :class:`GpuSample` (``pids`` as ``[[pid, MiB], ...]``; ``node`` only for a cluster node's, ``node`` given
    here or on the sample) plus ``processes``, where each process names its configuration when ``owners``
    (pid -> configuration name) knows it."""
    owners = owners or {}
    out = []
    for s in samples:
        data = asdict(s)
        data["node"] = node if node is not None else s.node
        if data["node"] is None:
            del data["node"]
        data["pids"] = [[pid, mem] for pid, mem in s.pids]
        data["processes"] = [{"pid": pid, "mem_mib": mem, "config": owners.get(pid)} for pid, mem in s.pids]
        out.append(data)
    return tuple(out)


def fmt(value: float | None, unit: str = "", digits: int = 0) -> str:
    """A figure for display, or "n/a"."""
    if value is None:
        return NA
    return f"{value:.{digits}f}{unit}"


@runtime_checkable
class DescribedBackend(GpuBackend, Protocol):
    """A backend that knows its box's static facts (GPU names, UUIDs, driver)."""

    def describe(self) -> BoxInfo: ...


@runtime_checkable
class ScriptedBackend(Protocol):
    """A backend told what the servers do, so that its figures follow them (the simulator's fake box); a real
    backend measures instead and implements none of this."""

    def attach(self, config_name: str, indices: Iterable[int], pids: Iterable[int],
               mem_fraction: float = 0.85) -> None: ...

    def set_busy(self, indices: Iterable[int], busy: bool) -> None: ...

    def detach(self, indices: Iterable[int]) -> None: ...

    def owners(self) -> dict[int, str]: ...
