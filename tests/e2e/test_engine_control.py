"""The control interface against the simulator: pause, resume, skip (pending and running), retry, abort
(after the request in flight, and at once), and the EngineThread adapter the TUI drives from its own thread.

Every test also checks that no simulator process survives: by the process group of each launch (the
server leads its own group) and by the test's folder in the environment (which the children inherit).
Requests are short and deterministic (the simulator's deterministic mode), start-up is scaled down.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest
from engine_helpers import of_type, plan_for, record_key, wait_no_processes
from narrowing import present
from sweep_builder import dumps, inline, sim_profile, sim_sweep, write

from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    ConfigStateChanged,
    Event,
    MeasurementRecorded,
    QueuePaused,
    QueueResumed,
    ServerLaunching,
    ServerStopped,
    SweepFinished,
    WorkloadNotRun,
)
from specbench_tui.core.plan import Plan
from specbench_tui.engine.orchestrator import Orchestrator, SweepOutcome
from specbench_tui.rundir.store import RunDir

pytestmark = pytest.mark.e2e

def _profile(tok_s: float) -> dict:
    return sim_profile(tok_s=tok_s, seed=5)


def make_plan(folder: Path, *, tps=(1,), seeds=(1, 2), count=4, tok_s=300.0, code=False, extra="",
              shutdown_grace_s: float | None = None) -> Plan:
    engine: dict = {"stall_timeout_s": 15}
    if shutdown_grace_s is not None:
        engine["shutdown_grace_s"] = shutdown_grace_s
    workloads = [{"name": "math", "kind": "arithmetic", "count": count, "max_new_tokens": 48}]
    if code:
        workloads.append({"name": "code", "kind": "code", "items": ["fibonacci"], "max_new_tokens": 16})
    sweep = sim_sweep(
        "control", sweep={"gpus": 2}, engine=engine,
        configs=[{"name": "ar-tp{tp}-s{seed}", "algorithm": "autoregressive",
                  "matrix": inline(tp=list(tps), seed=list(seeds)),
                  "args": inline(**{"tp-size": "{tp}", "random-seed": "{seed}"})}],
        workloads=workloads)
    return plan_for(write(folder, sweep, _profile(tok_s), profile_extra=extra))


class Sweep:
    """An orchestrator running as a task, with every event it published."""

    def __init__(self, plan: Plan, runs: Path, **kwargs) -> None:
        self.plan = plan
        self.run_dir = RunDir.create(runs, plan.sweep.name, plan.sweep.text, plan.to_json())
        self.orchestrator = Orchestrator(plan, self.run_dir, write_env=False, **kwargs)
        self.events: list[Event] = []
        self.orchestrator.subscribe(self.events.append)
        self.task = asyncio.create_task(self.orchestrator.run())

    def id(self, name: str) -> str:
        return present(self.plan.by_name(name)).id

    def measured(self, name: str | None = None) -> list[MeasurementRecorded]:
        return [e for e in of_type(self.events, MeasurementRecorded)
                if name is None or e.config_id == self.id(name)]

    async def until(self, predicate, timeout_s: float = 30.0, what: str = "the event") -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if self.task.done():
                self.task.result()
                raise AssertionError(f"the sweep ended before {what}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            await asyncio.sleep(0.01)

    async def finish(self, timeout_s: float = 60.0) -> SweepOutcome:
        try:
            return await asyncio.wait_for(self.task, timeout_s)
        finally:
            self.run_dir.close()


def assert_no_server_left(events: list[Event], marker: str, timeout_s: float = 10.0) -> None:
    """No process is left in the group of any launch, and none carries the test's folder in its environment."""
    deadline = time.monotonic() + timeout_s
    for launch in of_type(events, ServerLaunching):
        while True:
            try:
                os.killpg(launch.pid, 0)
            except ProcessLookupError:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"process group {launch.pid} of {launch.name} is still alive")
            time.sleep(0.05)
    assert wait_no_processes(marker) == []


def keys_of(events: list[Event]) -> list[tuple]:
    return [record_key(e.record) for e in of_type(events, MeasurementRecorded)]


# ------------------------------------------------------------------------------------------------ pause


async def test_pause_finishes_the_request_in_flight_then_launches_nothing_until_resume(tmp_path):
    plan = make_plan(tmp_path, count=4, tok_s=150.0)  # ~0.3 s per request
    sweep = Sweep(plan, tmp_path / "runs")
    await sweep.until(lambda: sweep.measured("ar-tp1-s1"), what="a first measurement")
    await asyncio.sleep(0.08)  # the next request is in flight
    sweep.orchestrator.pause()
    assert sweep.orchestrator.paused
    at_pause = len(sweep.measured())
    await sweep.until(lambda: of_type(sweep.events, QueuePaused), what="QueuePaused")
    # The request in flight finishes and is recorded: late on a loaded box, so wait for it (a single look after
    # a fixed sleep counted it missing), then give a request sent while paused time to come back (~0.3 s each).
    await sweep.until(lambda: len(sweep.measured()) > at_pause, what="the request in flight at the pause")
    after = len(sweep.measured())
    assert after == at_pause + 1, "the request in flight finishes (and is recorded), no further one starts"
    assert all(e.record["status"] == "ok" for e in sweep.measured())
    await asyncio.sleep(1.2)
    assert len(sweep.measured()) == after, "nothing runs while paused"
    sweep.orchestrator.resume()
    await sweep.until(lambda: of_type(sweep.events, QueueResumed), what="QueueResumed")

    outcome = await sweep.finish()
    assert outcome.state == "completed"
    assert outcome.states == {sweep.id("ar-tp1-s1"): ConfigState.DONE, sweep.id("ar-tp1-s2"): ConfigState.DONE}
    assert sorted(keys_of(sweep.events)) == sorted(set(keys_of(sweep.events))) and len(keys_of(sweep.events)) == 8
    assert len(of_type(sweep.events, QueuePaused)) == 1 and len(of_type(sweep.events, QueueResumed)) == 1
    assert_no_server_left(sweep.events, str(tmp_path))


async def test_paused_before_a_launch_launches_nothing(tmp_path):
    plan = make_plan(tmp_path, seeds=(1, 2), count=1, tok_s=400.0)
    sweep = Sweep(plan, tmp_path / "runs")
    first = sweep.id("ar-tp1-s1")

    def pause_at_first_end(event: Event) -> None:
        if isinstance(event, ConfigFinished) and event.config_id == first:
            sweep.orchestrator.pause()

    sweep.orchestrator.subscribe(pause_at_first_end)
    await sweep.until(lambda: of_type(sweep.events, QueuePaused), what="the pause")
    await asyncio.sleep(0.6)
    assert [e.name for e in of_type(sweep.events, ServerLaunching)] == ["ar-tp1-s1"]
    sweep.orchestrator.resume()
    outcome = await sweep.finish()
    assert outcome.state == "completed" and len(of_type(sweep.events, ServerLaunching)) == 2
    assert_no_server_left(sweep.events, str(tmp_path))


# ------------------------------------------------------------------------------------------------ skip


async def test_skip_the_running_and_a_pending_configuration(tmp_path):
    plan = make_plan(tmp_path, seeds=(1, 2, 3), count=4, tok_s=150.0, code=True)
    sweep = Sweep(plan, tmp_path / "runs")
    running, pending = sweep.id("ar-tp1-s1"), sweep.id("ar-tp1-s3")
    await sweep.until(lambda: sweep.measured("ar-tp1-s1"), what="a first measurement")
    await asyncio.sleep(0.08)
    sweep.orchestrator.skip(pending)
    # A pending configuration is skipped at once, not when the queue reaches it (the TUI's row says so now).
    assert [e for e in of_type(sweep.events, ConfigFinished) if e.config_id == pending][-1].state == \
        ConfigState.SKIPPED
    sweep.orchestrator.skip(running)
    skipped_at = len(sweep.events)
    outcome = await sweep.finish()
    assert outcome.state == "completed"
    finished = {e.name: e for e in of_type(sweep.events, ConfigFinished)}
    assert finished["ar-tp1-s1"].state == ConfigState.SKIPPED and "skipped by" in finished["ar-tp1-s1"].reason
    assert finished["ar-tp1-s3"].state == ConfigState.SKIPPED and "skipped by" in finished["ar-tp1-s3"].reason
    assert finished["ar-tp1-s2"].state == ConfigState.DONE
    # The running one: torn down, the rest of its workloads not run, nothing measured after the skip.
    after = sweep.events[skipped_at:]
    assert not [e for e in of_type(after, MeasurementRecorded) if e.config_id == running]
    assert len(sweep.measured("ar-tp1-s1")) < 4
    assert [e for e in of_type(sweep.events, ServerStopped) if e.config_id == running]
    not_run = {e.workload: e.reason for e in of_type(sweep.events, WorkloadNotRun) if e.config_id == running}
    assert set(not_run) == {"math", "code"} and all("skipped" in r for r in not_run.values())
    # The pending one never launched.
    assert "ar-tp1-s3" not in {e.name for e in of_type(sweep.events, ServerLaunching)}
    assert_no_server_left(sweep.events, str(tmp_path))


# ------------------------------------------------------------------------------------------------ retry

CRASH = """
[[crash]]
tp = 2
when = "after_requests"
after_requests = 2
signature = "cuda_illegal_memory_access"
"""


async def test_retry_a_crashed_configuration_reruns_only_what_is_missing(tmp_path):
    plan = make_plan(tmp_path, tps=(2, 1), seeds=(1,), count=4, tok_s=400.0, extra=CRASH)
    assert [c.name for c in plan.configs] == ["ar-tp2-s1", "ar-tp1-s1"]
    sweep = Sweep(plan, tmp_path / "runs")
    crashing = sweep.id("ar-tp2-s1")
    loop = asyncio.get_running_loop()

    def retry_once(event: Event) -> None:
        if isinstance(event, ConfigFinished) and event.config_id == crashing and event.state == ConfigState.CRASHED:
            (tmp_path / "sim_profile.toml").write_text(dumps(_profile(400.0)))  # fixed now
            loop.call_soon(sweep.orchestrator.retry, crashing)

    sweep.orchestrator.subscribe(retry_once)
    outcome = await sweep.finish()
    assert outcome.state == "completed"
    finals = [e for e in of_type(sweep.events, ConfigFinished) if e.config_id == crashing]
    assert [e.state for e in finals] == [ConfigState.CRASHED, ConfigState.DONE]
    assert finals[0].signature == "cuda_illegal_memory_access"
    requeued = [e for e in of_type(sweep.events, ConfigStateChanged)
                if e.config_id == crashing and e.state == ConfigState.PENDING]
    assert requeued and requeued[-1].reason == "queued again"
    launches = [e.attempt for e in of_type(sweep.events, ServerLaunching) if e.config_id == crashing]
    assert launches == [1, 2]
    records = [e.record for e in of_type(sweep.events, MeasurementRecorded)]
    ok_keys = [record_key(r) for r in records if r["status"] == "ok"]
    assert len(ok_keys) == len(set(ok_keys)) == 8, "completed keys are not measured again"
    # The request in flight at the crash is on record as an error (the crash its reason), and only that key is
    # measured a second time, by the retry.
    cut = [r for r in records if r["status"] != "ok"]
    assert len(cut) == 1 and cut[0]["error_kind"] == "crash" and cut[0]["config_id"] == crashing
    assert len(records) == 9 and record_key(cut[0]) in ok_keys
    first_attempt = list(sweep.measured("ar-tp2-s1"))[:2]
    assert len(first_attempt) == 2 and all(e.record["status"] == "ok" for e in first_attempt)
    assert_no_server_left(sweep.events, str(tmp_path))


# ------------------------------------------------------------------------------------------------ abort


async def test_abort_after_the_request_in_flight(tmp_path):
    plan = make_plan(tmp_path, seeds=(1, 2), count=6, tok_s=150.0)
    sweep = Sweep(plan, tmp_path / "runs")
    await sweep.until(lambda: sweep.measured(), what="a first measurement")
    await asyncio.sleep(0.08)
    at_abort = len(sweep.measured())
    sweep.orchestrator.abort(now=False)
    outcome = await sweep.finish()
    assert outcome.state == "aborted" and "--resume" in outcome.reason
    assert len(sweep.measured()) == at_abort + 1, "the request in flight is finished and recorded"
    assert all(e.record["status"] == "ok" for e in sweep.measured())
    assert not of_type(sweep.events, ConfigFinished), "an interrupted configuration is left for resume"
    assert set(outcome.states.values()) == {ConfigState.PENDING}
    assert [e.name for e in of_type(sweep.events, ServerLaunching)] == ["ar-tp1-s1"]
    assert of_type(sweep.events, ServerStopped) and of_type(sweep.events, SweepFinished)[-1].state == "aborted"
    assert_no_server_left(sweep.events, str(tmp_path))


async def test_abort_now_stops_at_once(tmp_path):
    plan = make_plan(tmp_path, seeds=(1,), count=6, tok_s=60.0, shutdown_grace_s=30)  # ~0.8 s per request
    sweep = Sweep(plan, tmp_path / "runs")
    await sweep.until(lambda: sweep.measured(), what="a first measurement")
    await asyncio.sleep(0.1)
    at_abort = len(sweep.measured())
    started = time.monotonic()
    sweep.orchestrator.abort(now=True)
    outcome = await sweep.finish()
    took = time.monotonic() - started
    assert outcome.state == "aborted"
    assert len(sweep.measured()) == at_abort, "the request in flight is cancelled, not recorded"
    # At once: no wait for the request in flight (~0.8 s) nor for the shutdown grace (30 s); the bounds leave
    # room for a loaded 2-core box (quiet: ~0.3 s and ~0.1 s) and still fail a grace waited out.
    assert took < 10.0, f"abort(now=True) took {took:.1f} s"
    stopped = of_type(sweep.events, ServerStopped)
    assert stopped and stopped[0].teardown_s < 6.0
    assert_no_server_left(sweep.events, str(tmp_path))


# ------------------------------------------------------------------------------------------------ EngineThread


def test_engine_thread_control_from_another_thread_and_stop(tmp_path):
    from specbench_tui.application.runner import EngineThread

    plan = make_plan(tmp_path, seeds=(1, 2), count=6, tok_s=150.0)
    run_dir = RunDir.create(tmp_path / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
    engine = EngineThread(plan, run_dir)
    events: list[Event] = []
    threads: set[str] = set()

    def collect(event: Event) -> None:
        threads.add(threading.current_thread().name)
        events.append(event)

    engine.subscribe(collect)

    def wait(predicate, what: str, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            assert engine.running or predicate(), f"the engine ended before {what}: {engine.error!r}"
            time.sleep(0.01)

    engine.start()
    try:
        wait(lambda: of_type(events, MeasurementRecorded), "a first measurement")
        engine.pause()
        wait(lambda: of_type(events, QueuePaused), "QueuePaused")
        assert engine.paused
        engine.resume()
        wait(lambda: of_type(events, QueueResumed), "QueueResumed")
        assert not engine.paused
        wait(lambda: len(of_type(events, MeasurementRecorded)) >= 3, "more measurements")
        assert engine.stop(timeout=15), "the engine did not stop in time"
    finally:
        engine.stop(timeout=15)
    assert not engine.running and engine.error is None
    assert engine.outcome is not None and engine.outcome.state == "aborted"
    assert of_type(events, SweepFinished)[-1].state == "aborted"
    assert threads == {"specbench-engine"}, "events are delivered on the engine's thread"
    assert of_type(events, ServerStopped)
    assert_no_server_left(events, str(tmp_path))
    engine.pause()  # control after the end is a no-op, never an error
    assert (run_dir.path / "env.json").exists()
