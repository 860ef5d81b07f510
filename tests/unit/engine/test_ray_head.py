"""A lost Ray head, without a cluster: the head watch (a TCP probe of the head's GCS port) and how the Ray
executor names a job's end when a Ray call fails (a lost node while the head answers; an interruption once the
head is lost). The whole path on a fake cluster: tests/real_servers/test_ray_cluster.py (a killed head, then --resume)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from specbench_tui.engine.cluster.head import HeadWatch, split_address
from specbench_tui.engine.executor import Outcome


async def _listening() -> tuple[asyncio.AbstractServer, str]:
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"127.0.0.1:{port}"


async def _close(server: asyncio.AbstractServer) -> None:
    server.close()
    await server.wait_closed()


def test_split_address() -> None:
    assert split_address("10.0.0.1:6379") == ("10.0.0.1", 6379)
    assert split_address("ray://head:10001") == ("head", 10001)
    assert split_address("[fe80::1]:6379") == ("fe80::1", 6379)
    assert split_address("auto") is None


async def test_a_head_that_answers_is_not_lost_and_a_silent_one_is_lost_once() -> None:
    server, address = await _listening()
    reasons: list[str] = []
    watch = HeadWatch(address, reasons.append, probe_s=0.05, lost_after_s=0.5)
    watch.start()
    try:
        assert await asyncio.wait_for(watch.confirm(), 5) is False  # a Ray error while the head answers
        await asyncio.sleep(0.6)
        assert watch.lost is None and not reasons
        await _close(server)
        silent_at = time.monotonic()
        await asyncio.wait_for(watch.lost_event.wait(), 10)
        assert time.monotonic() - silent_at >= 0.5
        assert await asyncio.wait_for(watch.confirm(), 1) is True
        await asyncio.sleep(0.2)
    finally:
        await watch.stop()
    (reason,) = reasons  # once
    assert reason.startswith(f"the Ray head at {address} is lost: nothing answered there for")


async def test_confirm_waits_for_the_verdict() -> None:
    """A Ray call failed as the head went: the job is not called a lost node before the watch decides."""
    server, address = await _listening()
    watch = HeadWatch(address, lambda reason: None, probe_s=0.05, lost_after_s=0.5)
    watch.start()
    try:
        await asyncio.sleep(0.1)
        await _close(server)
        asked = time.monotonic()
        assert await asyncio.wait_for(watch.confirm(), 10) is True
        assert time.monotonic() - asked >= 0.3
    finally:
        await watch.stop()


@pytest.fixture
def executor(tmp_path: Path) -> Any:
    from ray_cluster import require_ray

    require_ray()
    from engine_helpers import plan_for
    from sweep_builder import inline, sim_sweep, write

    from specbench_tui.engine.cluster.ray_executor import RayExecutor

    sweep = sim_sweep("head", configs=[{"name": "ar", "algorithm": "autoregressive", "args": inline()}],
                      workloads=[{"kind": "code", "items": ["fibonacci"]}])
    sweep["cluster"] = {"executor": "ray"}
    return RayExecutor(plan_for(write(tmp_path, sweep, {})))  # never opened: no cluster is reached


async def test_a_ray_error_is_a_lost_node_while_the_head_answers(executor: Any) -> None:
    import ray

    server, address = await _listening()
    executor.watch = HeadWatch(address, lambda reason: None, probe_s=0.05, lost_after_s=5)
    executor.watch.start()
    try:
        failed: asyncio.Future[Outcome | None] = asyncio.get_running_loop().create_future()
        failed.set_exception(ray.exceptions.ActorDiedError())
        outcome = await asyncio.wait_for(executor._outcome(failed, "host/n1"), 5)
    finally:
        await executor.watch.stop()
        await _close(server)
    assert outcome.kind == "node_lost" and "node host/n1 lost (ActorDiedError)" in outcome.reason


async def test_a_ray_error_as_the_head_goes_is_an_interruption(executor: Any) -> None:
    import ray

    server, address = await _listening()
    lost: list[str] = []
    executor.watch = HeadWatch(address, lost.append, probe_s=0.05, lost_after_s=0.3)
    executor.watch.start()
    try:
        await asyncio.sleep(0.1)
        await _close(server)  # the head goes; the actors die with their owner's node at once
        failed: asyncio.Future[Outcome | None] = asyncio.get_running_loop().create_future()
        failed.set_exception(ray.exceptions.ActorDiedError())
        outcome = await asyncio.wait_for(executor._outcome(failed, "host/n1"), 10)
    finally:
        await executor.watch.stop()
    assert outcome.kind == "interrupted" and outcome.state.value == "pending"
    assert outcome.reason == f"interrupted: {lost[0]}"


async def test_a_node_that_goes_on_after_the_head_is_lost_is_interrupted(executor: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The head is lost while the node still runs the job: the node is told to stop now; its own ``interrupted``
    says why the sweep stopped, and a node that says nothing within the bound is not waited for longer."""
    from specbench_tui.engine.cluster import ray_executor

    monkeypatch.setattr(ray_executor, "STOP_AFTER_HEAD_LOST_S", 0.5)
    server, address = await _listening()
    executor.watch = HeadWatch(address, lambda reason: None, probe_s=0.05, lost_after_s=0.3)
    executor.watch.start()
    try:
        silent: asyncio.Future[Outcome | None] = asyncio.get_running_loop().create_future()
        stopping: asyncio.Future[Outcome | None] = asyncio.get_running_loop().create_future()
        jobs = asyncio.gather(executor._outcome(silent, "host/n1"), executor._outcome(stopping, "host/n2"))
        await asyncio.sleep(0.1)
        await _close(server)
        await asyncio.wait_for(executor.watch.lost_event.wait(), 10)
        stopping.set_result(Outcome("interrupted", "stopped on request"))
        started = time.monotonic()
        never, stopped = await asyncio.wait_for(jobs, 10)
    finally:
        await executor.watch.stop()
    assert silent.cancelled() and time.monotonic() - started < 5
    assert never.kind == stopped.kind == "interrupted"
    assert stopped.reason == never.reason == f"interrupted: {executor.watch.lost}"


async def test_a_call_in_a_daemon_thread_answers_raises_or_hands_a_late_result_to_its_orphan() -> None:
    """What a Ray call that needs the head gives back: its result, its exception, and a result that came after
    nobody waited any more goes to ``orphan`` (a placement group or an actor to undo), never lost."""
    import threading

    from specbench_tui.engine.cluster.ray_executor import _in_daemon_thread

    assert await _in_daemon_thread(lambda: 42, 5.0) == 42

    def boom() -> int:
        raise ValueError("the head said no")

    with pytest.raises(ValueError, match="the head said no"):
        await _in_daemon_thread(boom, 5.0)
    late = threading.Event()
    orphans: list[str] = []

    def slow() -> str:
        late.wait(5.0)
        return "group"

    with pytest.raises(asyncio.TimeoutError):
        await _in_daemon_thread(slow, 0.05, orphans.append)
    late.set()
    for _ in range(100):
        if orphans:
            break
        await asyncio.sleep(0.02)
    assert orphans == ["group"]
