"""A graceful stop ends an open-loop load point in seconds (issue 49, point 6): no wait for the next arrival at
0.02 requests/s; the requests in flight are answered; the cut point is not reported."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from engine_helpers import SimulatorSweep

from specbench_tui.core.events import Event
from specbench_tui.core.records import Measurement
from specbench_tui.engine.loadrun import PointRun, run_point
from specbench_tui.engine.workloads import Labels


class FastWorkload:
    def items(self) -> list[str]:
        return ["a"]

    async def run(self, item: str, repeat: int, session: object, labels: Labels) -> Measurement:
        await asyncio.sleep(0.05)
        return Measurement(config_id=labels.config_id, config=labels.config, workload=labels.workload, item=item,
                           repeat=repeat, status="ok")


def _point(label: str, count: int, stop_after_s: float) -> tuple[float, PointRun, list[Measurement]]:
    records: list[Measurement] = []

    async def scenario() -> tuple[float, PointRun]:
        loop = asyncio.get_running_loop()
        stop_at = loop.time() + stop_after_s
        start = time.monotonic()
        run = await run_point(FastWorkload(), None, Labels("c1", "ar", "w"), label, 1, count, 3,  # type: ignore[arg-type]
                              records.append, set(), None, lambda: loop.time() >= stop_at)
        return time.monotonic() - start, run

    took, run = asyncio.run(scenario())
    return took, run, records


def test_a_stop_ends_an_open_loop_point_without_waiting_for_its_next_arrival() -> None:
    took, run, records = _point("r0.02", 3, 0.3)  # the next arrival is tens of seconds away
    assert took < 2.0, took
    assert run.stopped and run.sent == len(records) <= 1


def test_a_stop_ends_a_closed_loop_point_after_the_requests_in_flight() -> None:
    took, run, records = _point("c2", 400, 0.3)
    assert took < 2.0, took
    assert run.stopped and 0 < run.sent < 400 and len(records) == run.sent
    assert all(r.status == "ok" for r in records)


SWEEP = """
[sweep]
name = "slow-stop"
gpus = 1
repeats = 1
warmup = 0
[engine]
launcher = "simulator"
startup_timeout_s = 60
stall_timeout_s = 10
port_base = {port}
[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 4096
[measure]
cache = "warm"
[[configs]]
name = "ar"
[[workloads]]
kind = "code"
max_new_tokens = 4
request_rate = [0.02]
requests = 3
arrival_seed = 3
"""


@pytest.mark.e2e
def test_specbench_stop_at_0_02_requests_per_second_takes_seconds(simulator_sweep: SimulatorSweep) -> None:
    stopped_at: list[float] = []

    def first_record(event: Event) -> bool:  # stop once the first request of the point is on record
        if type(event).__name__ == "MeasurementRecorded":
            stopped_at.append(time.monotonic())
            return True
        return False

    run = simulator_sweep.run_sync(SWEEP, stop_when=first_record, timeout_s=120)
    took, run_dir = time.monotonic() - stopped_at[0], run.run_dir
    assert took < 10.0, took
    records = [json.loads(line) for line in (run_dir.path / "results.jsonl").read_text().splitlines()]
    assert 1 <= len(records) < 3, records
