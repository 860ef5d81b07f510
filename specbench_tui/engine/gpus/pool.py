"""The GPU pool: disjoint sets of GPU indices handed out to configurations, and the wait for GPUs to be
released. A GPU that reported a fault while nobody held it is fenced off (:meth:`GpuPool.fence`): never handed out
again in this sweep; a configuration that needs more GPUs than are left is refused (:class:`PlacementRefused`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from specbench_tui.core.gpu_faults import FAULT_FIX, GpuFault, refused_reason
from specbench_tui.engine.gpus.backend import GpuBackend


class PlacementRefused(Exception):
    """The configuration cannot be placed: the pool's GPUs without a fault are fewer than it needs (the message
    says which faults and what to do)."""


class GpuPool:
    """Hands out disjoint sets of GPU indices; ``acquire`` waits until enough are free."""

    def __init__(self, indices: tuple[int, ...]) -> None:
        self.indices = tuple(indices)
        self._free = list(self.indices)
        self._changed = asyncio.Condition()
        self.fenced: dict[int, GpuFault] = {}
        """GPUs fenced off by a fault seen while nobody held them, with the fault."""

    @property
    def free(self) -> tuple[int, ...]:
        return tuple(self._free)

    @property
    def healthy(self) -> tuple[int, ...]:
        """The pool's GPUs that no fault fenced off."""
        return tuple(i for i in self.indices if i not in self.fenced)

    async def fence(self, fault: GpuFault) -> bool:
        """Place nothing on ``fault.gpu`` again (it is taken out of the free GPUs; a waiting ``acquire`` that can no
        longer be served is refused); False when it is not the pool's or already fenced."""
        if fault.gpu not in self.indices or fault.gpu in self.fenced:
            return False
        async with self._changed:
            self.fenced[fault.gpu] = fault
            if fault.gpu in self._free:
                self._free.remove(fault.gpu)
            self._changed.notify_all()
        return True

    def ending(self) -> str | None:
        """What the sweep's ending says of the GPUs faults fenced off (the last configuration's too), or None."""
        if not self.fenced:
            return None
        return f"GPU fault: {'; '.join(f.reason() for f in self.fenced.values())} ({FAULT_FIX})"

    def refusal(self, count: int) -> PlacementRefused | None:
        """Why ``count`` GPUs can never be had now that faults fenced some off (None: they can)."""
        healthy = len(self.healthy)
        if count <= healthy or not self.fenced:
            return None
        return PlacementRefused(refused_reason(self.fenced.values(), count, healthy))

    def can_serve(self, count: int) -> bool:
        """Enough GPUs are free, or waiting is pointless (a fault left too few: :meth:`refusal` says why)."""
        return len(self._free) >= count or self.refusal(count) is not None

    async def acquire(self, count: int) -> tuple[int, ...]:
        if count > len(self.indices):
            raise ValueError(f"needs {count} GPUs but the pool has {len(self.indices)}")
        async with self._changed:
            await self._changed.wait_for(lambda: self.can_serve(count))
            if (refused := self.refusal(count)) is not None:
                raise refused
            taken = tuple(self._free[:count])
            del self._free[:count]
            return taken

    async def release(self, indices: tuple[int, ...]) -> None:
        async with self._changed:
            self._free.extend(i for i in indices if i not in self._free and i not in self.fenced)
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
