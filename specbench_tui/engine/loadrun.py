"""Runs one load point of a workload: closed loop (N requests in flight) or open loop (seeded Poisson arrivals).

Each request is the workload's own request for its item (the same prompt as at batch 1), sent through the same
streaming client, whose token times are the kernel's receive stamps of each connection
(:mod:`specbench_tui.engine.stream`); the client keeps a connection per request in flight alive across requests,
so no request waits in our code for another's connection and none times a connect. A finished request is recorded at once with its load point
(``Measurement.load``) and its keyed item (``fibonacci#3``: the item, cycled, and its round), so every
configuration's request *j* carries the same prompt and speedups pair requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from specbench_tui.core.load import AXIS_CONCURRENCY, arrival_offsets, parse_label, point_item
from specbench_tui.core.records import STATUS_ERROR, Measurement
from specbench_tui.engine.workloads import Labels, Session, Workload


@dataclass
class PointRun:
    """What one repeat of a load point did."""

    wall_s: float = 0.0
    """First request sent to last answer read (monotonic)."""
    sent: int = 0
    errors: int = 0
    stopped: bool = False
    """A stop came before every request was sent: the point is partial (those sent were answered)."""


FD_RESERVE = 128
"""Descriptors a load point leaves free beside one connection per request in flight: the run directory's files,
the server's log pipes, the control socket, the GPU sampler."""


def open_files_refusal(concurrency: int) -> str | None:
    """Why a point of ``concurrency`` requests in flight cannot run under this process's open-file limit, else None.
    The soft limit is raised to the hard one first where that is allowed (it is per process, and only ours)."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return None
    try:
        open_now = len(os.listdir("/proc/self/fd"))
    except OSError:
        open_now = 16
    need = open_now + concurrency + FD_RESERVE
    if need <= soft or soft == resource.RLIM_INFINITY:
        return None
    target = hard if hard == resource.RLIM_INFINITY else min(hard, max(need, soft))
    with contextlib.suppress(OSError, ValueError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    if need <= soft or soft == resource.RLIM_INFINITY:
        return None
    return (f"concurrency {concurrency:,} needs about {need:,} open files ({concurrency:,} connections, "
            f"{open_now:,} open now, {FD_RESERVE} kept free) but this process may open {soft:,} (RLIMIT_NOFILE, "
            f"hard limit {hard:,}): raise it before the run (e.g. `ulimit -n {need:,}`, or the hard limit in "
            "/etc/security/limits.conf or systemd's LimitNOFILE), or lower the concurrency")


async def warm_up(workload: Workload, session: Session, label: str) -> None:
    """Unmeasured warm-up before a point: closed loop, ``warmup`` waves of N requests at once (so the server
    has run this batch size and the client holds a live connection per slot: the first measured wave then leaves
    together, instead of one request per fresh connection, each arriving after the previous one's prefill);
    open loop, ``warmup`` requests at once."""
    waves = workload.spec.warmup
    if waves <= 0:
        return
    axis, value = parse_label(label)
    width = int(value) if axis == AXIS_CONCURRENCY else waves
    text = workload.warmup_text()
    for _ in range(waves if axis == AXIS_CONCURRENCY else 1):
        await asyncio.gather(*(session.generate(text, workload.spec.max_new_tokens, workload.spec)
                               for _ in range(width)))


async def run_point(workload: Workload, session: Session, labels: Labels, label: str, repeat: int, count: int,
                    seed: int, record: Callable[[Measurement], None], in_flight: set[str],
                    on_send: Callable[[bool], None] | None = None,
                    stopping: Callable[[], bool] = lambda: False) -> PointRun:
    """Send the point's ``count`` requests for one repeat and record each as it finishes. ``in_flight`` holds the
    keyed items sent and not yet answered (what a server's death cuts; empty in an open-loop gap); ``on_send`` is
    told of each send, with whether nothing was in flight before it (the stall clock starts then). Once
    ``stopping()`` says so (a graceful stop), nothing more is sent: the requests in flight are answered and the
    point ends, within :data:`STOP_POLL_S` of the stop however far the next arrival is."""
    axis, value = parse_label(label)
    items = workload.items()
    run = PointRun()

    async def one(index: int) -> None:
        base, keyed = point_item(items, index)
        idle_before = not in_flight
        in_flight.add(keyed)
        if on_send is not None:
            on_send(idle_before)
        run.sent += 1
        try:
            measurement = await workload.run(base, repeat, session, labels)
        except Exception as exc:  # noqa: BLE001 - a request that failed outside the client's handling is recorded
            measurement = Measurement(config_id=labels.config_id, config=labels.config, workload=labels.workload,
                                      item=base, repeat=repeat, status=STATUS_ERROR, error_kind="connection",
                                      error=f"{type(exc).__name__}: {exc}"[:500])
        measurement = replace(measurement, item=keyed, load=label)
        in_flight.discard(keyed)
        if measurement.status != "ok":
            run.errors += 1
        record(measurement)

    start = time.monotonic()
    if axis == AXIS_CONCURRENCY:
        next_index = iter(range(count))

        async def worker() -> None:
            for index in next_index:  # a shared iterator: each worker takes the next request when it is free
                if stopping():
                    run.stopped = True
                    return
                await one(index)

        await asyncio.gather(*(worker() for _ in range(min(int(value), count))))
    else:
        offsets = arrival_offsets(value, count, seed, labels.workload, label, repeat)
        tasks: list[asyncio.Task[None]] = []
        try:
            for index, offset in enumerate(offsets):
                if not await _wait_until(start + offset, stopping):
                    run.stopped = True
                    break
                tasks.append(asyncio.create_task(one(index)))
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
    run.wall_s = time.monotonic() - start
    return run


STOP_POLL_S = 0.25
"""How often an open-loop point waiting for its next arrival looks for a stop."""


async def _wait_until(when: float, stopping: Callable[[], bool]) -> bool:
    """Sleep until monotonic ``when``; False (at once) when a stop comes first."""
    while True:
        if stopping():
            return False
        delay = when - time.monotonic()
        if delay <= 0:
            return True
        await asyncio.sleep(min(delay, STOP_POLL_S))
