"""GPU faults as the engine reads them: the Xid critical-error events of the GPUs a configuration holds, from a
backend that offers ``xid_events(indices)`` (NVML's event set, the simulator's fake box), turned into the crash
cause of :func:`specbench_tui.core.gpu_faults.xid_cause`."""

from __future__ import annotations

from typing import Any

from specbench_tui.core.gpu_faults import xid_cause

XID_POLL_S = 0.5
"""How often a configuration's GPUs are asked for Xid events while its requests run."""


def can_watch_xids(backend: Any) -> bool:
    return callable(getattr(backend, "xid_events", None))


def take_xid_cause(backend: Any, gpus: tuple[int, ...]) -> str | None:
    """The cause the first pending Xid of ``gpus`` gives ("Xid 79 on GPU 3 (fell off the bus)"), the events taken;
    None when there is none (or the backend cannot say: telemetry never fails a run)."""
    reader = getattr(backend, "xid_events", None)
    if reader is None or not gpus:
        return None
    try:
        events = reader(gpus)
    except Exception:  # noqa: BLE001 - a failed read is no event
        return None
    for event in events or ():
        if isinstance(event, tuple) and len(event) == 2:
            return xid_cause(int(event[1]), int(event[0]))
    return None
