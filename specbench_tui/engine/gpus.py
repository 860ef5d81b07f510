"""GPU telemetry and the GPU pool (interface; the NVML and fake backends are filled in by the GPU work).

The orchestrator uses only what is below: a :class:`GpuPool` to place servers on disjoint GPUs, a backend
to sample telemetry and to see which pids still hold memory, and :func:`wait_gpus_released`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Protocol


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
    pids: tuple[tuple[int, float], ...] = ()
    """(pid, used MiB) of the compute processes on it."""


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
        self.hint = hint

    def device_count(self) -> int:
        return 0

    def sample(self) -> list[GpuSample]:
        return []

    def pids_holding(self, indices: tuple[int, ...]) -> set[int]:
        return set()


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
    """Wait until none of ``pids`` holds memory on ``indices``; return the pids still holding at timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        holding = backend.pids_holding(indices) & pids
        if not holding or time.monotonic() >= deadline:
            return holding
        await asyncio.sleep(poll_s)
