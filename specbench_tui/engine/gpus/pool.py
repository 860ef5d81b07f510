"""The GPU pool: disjoint sets of GPU indices handed out to configurations, and the wait for GPUs to be
released."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from specbench_tui.engine.gpus.backend import GpuBackend


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
