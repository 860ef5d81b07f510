"""Runs one load point of a workload: closed loop (N requests in flight) or open loop (seeded Poisson arrivals).

Each request is the workload's own request for its item (the same prompt as at batch 1), sent through the same
streaming client, whose token times are the kernel's receive stamps of each connection
(:mod:`specbench_tui.engine.rxclock`); the client's pool holds a connection per request in flight, so no
request waits in our code for another's connection. A finished request is recorded at once with its load point
(``Measurement.load``) and its keyed item (``fibonacci#3``: the item, cycled, and its round), so every
configuration's request *j* carries the same prompt and speedups pair requests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from specbench_tui.core.load import AXIS_CONCURRENCY, arrival_offsets, parse_label, point_item
from specbench_tui.core.records import Measurement
from specbench_tui.engine.workloads import Labels, Session, Workload


@dataclass
class PointRun:
    """What one repeat of a load point did."""

    wall_s: float = 0.0
    """First request sent to last answer read (monotonic)."""
    sent: int = 0
    errors: int = 0


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
                    on_send: Callable[[bool], None] | None = None) -> PointRun:
    """Send the point's ``count`` requests for one repeat and record each as it finishes. ``in_flight`` holds the
    keyed items sent and not yet answered (what a server's death cuts; empty in an open-loop gap); ``on_send`` is
    told of each send, with whether nothing was in flight before it (the stall clock starts then)."""
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
        measurement = await workload.run(base, repeat, session, labels)
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
                await one(index)

        await asyncio.gather(*(worker() for _ in range(min(int(value), count))))
    else:
        offsets = arrival_offsets(value, count, seed, labels.workload, label, repeat)
        tasks: list[asyncio.Task[None]] = []
        try:
            for index, offset in enumerate(offsets):
                delay = start + offset - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(one(index)))
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
    run.wall_s = time.monotonic() - start
    return run
