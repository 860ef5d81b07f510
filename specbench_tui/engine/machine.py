"""This machine's GPUs as the engine sees them: the backend, the sampler, who owns which process, the pool.

A :class:`~specbench_tui.engine.gpus.GpuSampler` polls the backend off the loop about twice a second and
publishes :class:`GpuSampled` (each GPU process named by the configuration that owns it, :attr:`Machine.owners`).
A backend that scripts itself after the servers (the simulator's fake box) is a
:class:`~specbench_tui.engine.gpus.ScriptedBackend` and is told ``attach``/``set_busy``/``detach``; the real
NVML path runs no fake-specific code.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from specbench_tui.core.engines import simulator
from specbench_tui.core.engines.registry import engine_flags
from specbench_tui.core.events import Event, GpuSampled

from specbench_tui.engine.gpus import GpuBackend, GpuSample, GpuSampler, ScriptedBackend, samples_to_json
from specbench_tui.engine.gpus.faults import FaultLedger

if TYPE_CHECKING:
    from specbench_tui.core.sweep.schema import Sweep

SIMULATOR_GPUS = 8
"""GPUs the simulator pretends to have when the machine has none (the seed campaign's 8-GPU box)."""


LEASE_LOOK_S = 2.0
"""How often the GPU samples look at who else leases this machine's GPUs."""


class Machine:
    """The GPU side of this machine for one sweep."""

    def __init__(self, backend: GpuBackend, sweep: Sweep, publish: Callable[[Event], None]) -> None:
        self.backend = backend
        self.faults = FaultLedger(backend)
        """The box's Xid faults: pending, kernel-logged, and those that crashed a configuration."""
        self.sweep = sweep
        self._publish = publish
        self.sampler: GpuSampler | None = None
        self.owners: dict[int, str] = {}
        """pid -> configuration name of every server process we know of (the GPU panel's "held by")."""
        self.held_elsewhere: Callable[[], dict[int, str]] | None = None
        """GPU index -> who holds its lease in another specbench run (set once the GPUs are leased)."""
        self._elsewhere: dict[int, str] = {}
        self._elsewhere_at = float("-inf")
        self.idle_w: dict[int, float] = {}
        """Each GPU's idle power measured before the sweep (:func:`~specbench_tui.engine.gpus.energy.measure_idle_w`;
        empty: not measured, the energy figures are gross)."""

    def gpu_indices(self) -> tuple[int, ...]:
        """The GPU pool: the sweep's list, else every visible GPU, else 8 pretend ones for the simulator."""
        if self.sweep.gpus is not None:
            return self.sweep.gpus
        count = self.backend.device_count()
        if count == 0 and simulator.simulated(self.sweep.engine):
            return tuple(range(SIMULATOR_GPUS))
        return tuple(range(count))

    def on_cpu(self) -> bool:
        """The engine runs without a GPU (llama.cpp; SGLang with ``device = "cpu"``) and this machine has none:
        configurations take no GPU."""
        flags = engine_flags(self.sweep.engine.profile)
        cpu_device = flags.cpu_device is not None and dict(self.sweep.server_args).get(flags.cpu_device[0]) \
            == flags.cpu_device[1]
        return ((flags.runs_on_cpu or cpu_device) and self.sweep.gpus is None
                and not simulator.simulated(self.sweep.engine) and self.backend.device_count() == 0)

    def start_sampler(self, interval_s: float) -> None:
        """Poll the backend in its thread; samples come back on this loop as :class:`GpuSampled`."""
        if self.backend.device_count() == 0:
            # Nothing to poll: one empty sample says so, and the GPU panel shows "no GPU visible" instead of
            # waiting for telemetry that will never come (the backend's hint is published as a notice).
            self._publish(GpuSampled(samples=()))
            return
        self.sampler = GpuSampler(self.backend, self.on_samples, interval_s=interval_s,
                                  loop=asyncio.get_running_loop())
        self.sampler.start()

    def on_samples(self, samples: list[GpuSample]) -> None:
        data = samples_to_json(samples, self.owners)
        elsewhere = self._leased_elsewhere()
        if elsewhere:  # another specbench run's GPU: the panel says whose, never "free"
            data = tuple({**sample, "held_elsewhere": elsewhere[index]}
                         if isinstance(index := sample.get("index"), int) and index in elsewhere else sample
                         for sample in data)
        self._publish(GpuSampled(samples=data))

    def _leased_elsewhere(self) -> dict[int, str]:
        """:attr:`held_elsewhere`, read at most every :data:`LEASE_LOOK_S` (a file lock per GPU each time)."""
        now = time.monotonic()
        if self.held_elsewhere is not None and now - self._elsewhere_at >= LEASE_LOOK_S:
            self._elsewhere_at = now
            try:
                self._elsewhere = self.held_elsewhere()
            except OSError:
                self._elsewhere = {}
        return self._elsewhere

    def latest(self) -> list[GpuSample]:
        return self.sampler.latest if self.sampler is not None else []

    async def stop_sampler(self) -> None:
        """Stop polling, then one sample after the last teardown, so the GPU panel is left showing the box as
        the sweep left it (free, or what a leftover still holds), not as it was during the last request."""
        if self.sampler is None:
            return
        self.sampler.stop()
        try:
            samples = await asyncio.to_thread(self.backend.sample)
        except Exception:  # noqa: BLE001 - telemetry must never cost the end of a sweep
            return
        if samples:
            self.on_samples(samples)

    def script(self, tell: Callable[[ScriptedBackend], object]) -> None:
        """Tell a scripted backend what the servers do (``attach``, ``set_busy``, ``detach``): only the
        simulator's fake box is one; a real backend has nothing to be told."""
        if isinstance(self.backend, ScriptedBackend):
            try:
                tell(self.backend)
            except Exception as exc:  # noqa: BLE001 - telemetry must never cost a measurement
                print(f"specbench: the scripted GPU backend failed: {exc!r}", file=sys.stderr)

    async def pids_on(self, gpus: tuple[int, ...]) -> set[int]:
        """Pids NVML lists on ``gpus`` now (none without GPUs; a failing backend counts as none)."""
        if not gpus:
            return set()
        try:
            return await asyncio.to_thread(self.backend.pids_holding, gpus)
        except Exception:  # noqa: BLE001 - telemetry must never cost a measurement
            return set()
