"""Energy over a measured window: NVML's total-energy counter of every GPU a configuration holds, read at the
window's start and end (:class:`EnergyMeter`, taken beside :class:`~specbench_tui.engine.host_meter.HostMeter`).

A backend offers ``energy_mj(indices)`` (NVML, the simulator's fake box) or does not (no GPU, a cluster's
engine side): the window then says :data:`~specbench_tui.core.energy.NO_COUNTER`, never a zero."""

from __future__ import annotations

import time
from collections.abc import Callable

from specbench_tui.core.energy import EnergyWindow, NO_COUNTER, SOURCE_COUNTER


def read_energy_mj(backend: object, gpus: tuple[int, ...]) -> dict[int, float] | None:
    """Each GPU's counter in millijoules, or None when the backend has none for one of them."""
    reader = getattr(backend, "energy_mj", None)
    if reader is None or not gpus:
        return None
    try:
        values = reader(gpus)
    except Exception:  # noqa: BLE001 - telemetry is optional: a failed read is "no counter", never a failed run
        return None
    if not isinstance(values, dict) or any(not isinstance(values.get(i), int | float) for i in gpus):
        return None
    return {i: float(values[i]) for i in gpus}


IDLE_WINDOW_S = 0.5
"""How long the GPUs' idle power is measured before the sweep (from the energy counter, not a power sample)."""


def measure_idle_w(backend: object, gpus: tuple[int, ...], seconds: float = IDLE_WINDOW_S,
                   clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep) -> dict[int, float]:
    """Each GPU's mean power over ``seconds`` from its energy counter (empty: no counter). Call before the
    sweep launches anything, off the event loop (it sleeps)."""
    start, started_at = read_energy_mj(backend, gpus), clock()
    if start is None:
        return {}
    sleep(seconds)
    end, elapsed = read_energy_mj(backend, gpus), clock() - started_at
    if end is None or elapsed <= 0:
        return {}
    return {i: max(0.0, (end[i] - start[i]) / 1000.0 / elapsed) for i in gpus}


def idle_line(idle_w: dict[int, float]) -> str:
    """The notice that states the subtraction."""
    each = ", ".join(f"GPU {i} {w:.1f} W" for i, w in sorted(idle_w.items()))
    return (f"energy: idle power measured before the sweep ({each}); the energy figures are net of it "
            "(each window's joules less the idle power of its GPUs over its length)")


class EnergyMeter:
    """One window: ``meter = EnergyMeter(backend, gpus)`` at its start, ``meter.finish()`` at its end."""

    def __init__(self, backend: object, gpus: tuple[int, ...], idle_w: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.gpus = tuple(gpus)
        self.backend = backend
        self.idle_w = idle_w
        self.clock = clock
        self._start = read_energy_mj(backend, self.gpus)
        self._started_at = clock()

    def finish(self) -> EnergyWindow:
        end = read_energy_mj(self.backend, self.gpus) if self._start is not None else None
        window_s = self.clock() - self._started_at
        if self._start is None or end is None:
            return EnergyWindow(gpus=self.gpus, window_s=window_s, source=None, note=NO_COUNTER)
        joules = tuple(max(0.0, (end[i] - self._start[i]) / 1000.0) for i in self.gpus)
        return EnergyWindow(gpus=self.gpus, window_s=window_s, source=SOURCE_COUNTER, joules=joules,
                            idle_w=self.idle_w)
