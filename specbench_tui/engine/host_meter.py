"""The measuring host over one window: its load average, its cores and our own process's CPU time
(:class:`specbench_tui.core.measuring_host.HostLoad`, recorded with every workload and load point)."""

from __future__ import annotations

import os
import time

from specbench_tui.core.measuring_host import HostLoad


class HostMeter:
    """Measures one window: ``meter = HostMeter()`` at its start, ``meter.finish()`` at its end."""

    def __init__(self) -> None:
        self._cpu = time.process_time()
        self._wall = time.monotonic()

    def finish(self) -> HostLoad:
        return HostLoad(load_avg=os.getloadavg()[0], cpus=len(os.sched_getaffinity(0)),
                        client_cpu_s=time.process_time() - self._cpu, wall_s=time.monotonic() - self._wall)
