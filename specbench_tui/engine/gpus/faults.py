"""GPU faults as the engine reads them: the Xid critical-error events of the GPUs a configuration holds, from a
backend that offers ``xid_events(indices)`` (NVML's event set, the simulator's fake box), turned into the crash
cause of :func:`specbench_tui.core.gpu_faults.xid_cause`; read between configurations from the GPUs nobody holds
(:func:`take_faults`), they fence those GPUs off placement (:class:`~specbench_tui.engine.gpus.pool.GpuPool`).

An event is ``(gpu, xid)`` or ``(gpu, xid, seen_at)`` (Unix time it was seen)."""

from __future__ import annotations

from typing import Any

import time

from specbench_tui.core.gpu_faults import GpuFault, xid_cause

XID_POLL_S = 0.5
"""How often a configuration's GPUs are asked for Xid events while its requests run."""


def can_watch_xids(backend: Any) -> bool:
    return callable(getattr(backend, "xid_events", None))


def take_xid_cause(backend: Any, gpus: tuple[int, ...]) -> str | None:
    """The cause the first pending Xid of ``gpus`` gives ("Xid 79 on GPU 3 (fell off the bus)"), the events taken;
    None when there is none (or the backend cannot say: telemetry never fails a run)."""
    faults = take_faults(backend, gpus)
    return xid_cause(faults[0].code, faults[0].gpu) if faults else None


def take_faults(backend: Any, gpus: tuple[int, ...]) -> list[GpuFault]:
    """Every pending Xid of ``gpus``, taken (none when the backend cannot say: telemetry never fails a run)."""
    reader = getattr(backend, "xid_events", None)
    if reader is None or not gpus:
        return []
    try:
        events = reader(gpus)
    except Exception:  # noqa: BLE001 - a failed read is no event
        return []
    faults = []
    for event in events or ():
        if isinstance(event, tuple) and len(event) in (2, 3):
            seen_at = event[2] if len(event) == 3 and isinstance(event[2], int | float) else time.time()
            faults.append(GpuFault(int(event[0]), int(event[1]), float(seen_at)))
    return faults
