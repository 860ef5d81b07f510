"""Control semantics in-process, fast: the orchestrator's control API and the scheduler against a fake executor.

The fake executor (:class:`FakeExecutor`) honours the executor contract (engine/executor.py) the way the local
one does: it asks the sink what to measure, records each request as it finishes, waits while paused, cancels
the request in flight on ``skip`` or ``stop_now``, and ends with an :class:`Outcome`. Requests take a few tens
of milliseconds, so these tests show pause, skip (pending and running), retry, abort (after the request in
flight and at once) and a lost node in well under a second each; tests/e2e/test_engine_control.py shows the same
against the simulator, end to end.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from engine_helpers import of_type, plan_for
from narrowing import present
from sweep_builder import inline, sim_profile, sim_sweep, write

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
    log_lines,
)
from specbench_tui.core.plan import Plan
from specbench_tui.core.records import ERROR_KIND_CRASH, STATUS_ERROR, STATUS_OK, Measurement
from specbench_tui.engine.executor import Job, JobControl, JobSink, Outcome, Placement
from specbench_tui.engine.orchestrator import Orchestrator, SweepOutcome
from specbench_tui.engine.server import first_of
from specbench_tui.rundir.store import RunDir

REQUEST_S = 0.03


def make_plan(folder: Path, *, seeds=(1, 2, 3), count=4, concurrent=False, cluster=None, engine=None) -> Plan:
    document = sim_sweep(
        "fake", sweep={"gpus": 2, "concurrent": concurrent}, engine=engine,
        configs=[{"name": "c{seed}", "algorithm": "autoregressive", "matrix": inline(seed=list(seeds)),
                  "args": inline(**{"random-seed": "{seed}"})}],
        workloads=[{"name": "math", "kind": "arithmetic", "count": count, "max_new_tokens": 16}])
    if cluster is not None:
        document["cluster"] = cluster
    return plan_for(write(folder, document, sim_profile()))


class FakePlacer:
    def __init__(self, count: int) -> None:
        self.indices = tuple(range(count))
        self.free = list(self.indices)
        self.kept: set[int] = set()
        self.closed = False
        self._changed = asyncio.Condition()

    async def acquire(self, count: int, *, config: str,
                      on_wait: Callable[[str], None] | None = None) -> Placement:
        async with self._changed:
            await self._changed.wait_for(lambda: len(self.free) >= count)
            got, self.free = tuple(self.free[:count]), self.free[count:]
        return Placement(got, node="fake-node")

    async def release(self, placement: Placement, keep: tuple[int, ...] = ()) -> None:
        async with self._changed:
            self.kept.update(keep)
            self.free.extend(i for i in placement.gpus if i not in keep)
            self._changed.notify_all()

    def close(self) -> None:
        self.closed = True


class FakeExecutor:
    """Runs a configuration as ``REQUEST_S`` sleeps, one per missing key; scripted crashes and lost nodes."""

    def __init__(self, *, crash_once_at: dict[str, int] | None = None, lose_node: dict[str, int] | None = None,
                 hold_gpus: frozenset[str] = frozenset()) -> None:
        self.placer = FakePlacer(2)
        self.crash_once_at = dict(crash_once_at or {})
        """config name -> 1-based request at which its first attempt crashes."""
        self.lose_node = dict(lose_node or {})
        """config name -> how many of its attempts lose their node."""
        self.hold_gpus = hold_gpus
        self.started: list[tuple[str, int, Placement]] = []
        self.cut: list[tuple] = []
        """Keys whose request was in flight when it was cancelled (skip, abort now)."""
        self.in_flight: str | None = None
        self.closed: bool | None = None

    async def open(self) -> FakePlacer:
        return self.placer

    async def close(self, now: bool = False) -> None:
        self.closed = now
        self.placer.close()

    async def run(self, job: Job, sink: JobSink, control: JobControl) -> Outcome:
        name = job.config.name
        self.started.append((name, job.attempt, job.placement))
        sink.state(ConfigState.LAUNCHING)
        sink.server_log([f"fake server of {name}, attempt {job.attempt}"])  # a remote executor's log lines
        if self.lose_node.get(name, 0) >= job.attempt:
            return Outcome("node_lost", f"node {job.placement.node} went away", wall_s=0.01)
        sink.state(ConfigState.RUNNING)
        sent = 0
        for workload in job.workloads:
            for key in sink.todo(workload):
                if not control.unpaused.is_set():
                    await first_of(control.unpaused.wait(), control.skip.wait(), control.stop_now.wait())
                if control.stopping:
                    break
                sent += 1
                self.in_flight = name
                request = asyncio.ensure_future(asyncio.sleep(REQUEST_S))
                await first_of(request, control.skip.wait(), control.stop_now.wait())
                self.in_flight = None
                if not request.done():
                    request.cancel()
                    self.cut.append(key)
                    break
                done = Measurement(config_id=job.config.id, config=name, workload=key[1], item=key[2],
                                   repeat=key[3], status=STATUS_OK, completion_tokens=16)
                if job.attempt == 1 and self.crash_once_at.get(name) == sent:
                    sink.record(replace(done, status=STATUS_ERROR, error_kind=ERROR_KIND_CRASH,
                                        completion_tokens=None, error="in flight when the server died"))
                    return Outcome("crashed", "crash signature cuda_error: CUDA error", signature="cuda_error")
                sink.record(done)
        held = (0,) if name in self.hold_gpus else ()
        if control.skip.is_set():
            return Outcome("skipped", "skipped by the user", held_gpus=held)
        if control.stop_soon.is_set() or control.stop_now.is_set():
            return Outcome("interrupted", "aborted: resume runs the rest", held_gpus=held)
        return Outcome("done", held_gpus=held, held_message="GPU 0 still held" if held else None, wall_s=0.1)


class Sweep:
    def __init__(self, plan: Plan, runs: Path, executor: FakeExecutor) -> None:
        self.plan = plan
        self.executor = executor
        self.run_dir = RunDir.create(runs, plan.sweep.name, plan.sweep.text, plan.to_json())
        self.orchestrator = Orchestrator(plan, self.run_dir, write_env=False, executor=executor)
        self.events: list[Event] = []
        self.orchestrator.subscribe(self.events.append)
        self.task = asyncio.create_task(self.orchestrator.run())

    def id(self, name: str) -> str:
        return present(self.plan.by_name(name)).id

    def measured(self, name: str) -> list[dict]:
        return [e.record for e in of_type(self.events, MeasurementRecorded) if e.config_id == self.id(name)]

    def finished(self, name: str) -> list[ConfigFinished]:
        return [e for e in of_type(self.events, ConfigFinished) if e.config_id == self.id(name)]

    async def until(self, predicate: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not predicate():
            if self.task.done():
                self.task.result()
                raise AssertionError(f"the sweep ended before {what}")
            assert loop.time() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.002)

    async def finish(self) -> SweepOutcome:
        try:
            return await asyncio.wait_for(self.task, 20.0)
        finally:
            self.run_dir.close()


async def test_a_sweep_runs_every_configuration_through_the_executor(tmp_path):
    sweep = Sweep(make_plan(tmp_path), tmp_path / "runs", FakeExecutor())
    outcome = await sweep.finish()
    assert outcome.state == "completed"
    assert [(name, attempt) for name, attempt, _ in sweep.executor.started] == [("c1", 1), ("c2", 1), ("c3", 1)]
    assert all(placement.gpus and placement.node == "fake-node" for _, _, placement in sweep.executor.started)
    for name in ("c1", "c2", "c3"):
        assert len(sweep.measured(name)) == 4 and [f.state for f in sweep.finished(name)] == [ConfigState.DONE]
    assert sweep.executor.closed is False and sweep.executor.placer.closed
    assert len(sweep.run_dir.path.joinpath("results.jsonl").read_text().splitlines()) == 12
    c2 = sweep.plan.by_name("c2")
    assert sweep.run_dir.log_path(c2.name, c2.id).read_text() == "fake server of c2, attempt 1\n"


async def test_pause_finishes_the_request_in_flight_and_sends_nothing_more_until_resume(tmp_path):
    sweep = Sweep(make_plan(tmp_path), tmp_path / "runs", FakeExecutor())
    await sweep.until(lambda: sweep.executor.in_flight == "c1" and len(sweep.measured("c1")) == 1, "c1's 2nd request")
    sweep.orchestrator.pause()
    sweep.orchestrator.pause()  # twice: one QueuePaused
    assert sweep.orchestrator.paused
    await sweep.until(lambda: len(sweep.measured("c1")) == 2, "the request in flight to finish")
    await asyncio.sleep(8 * REQUEST_S)
    assert len(sweep.measured("c1")) == 2 and sweep.executor.in_flight is None, "nothing sent while paused"
    assert [name for name, _, _ in sweep.executor.started] == ["c1"]
    sweep.orchestrator.resume()
    outcome = await sweep.finish()
    assert outcome.state == "completed" and len(sweep.measured("c1")) == 4
    assert len(of_type(sweep.events, QueuePaused)) == 1 and len(of_type(sweep.events, QueueResumed)) == 1


async def test_paused_between_configurations_launches_nothing(tmp_path):
    sweep = Sweep(make_plan(tmp_path), tmp_path / "runs", FakeExecutor())
    await sweep.until(lambda: len(sweep.measured("c1")) == 3, "c1's 3rd measurement")
    sweep.orchestrator.pause()
    await sweep.until(lambda: sweep.finished("c1"), "c1 to finish")
    await asyncio.sleep(6 * REQUEST_S)
    assert [name for name, _, _ in sweep.executor.started] == ["c1"], "nothing launched while paused"
    sweep.orchestrator.resume()
    assert (await sweep.finish()).state == "completed"


async def test_skip_a_pending_configuration_finishes_it_at_once_and_never_runs_it(tmp_path):
    sweep = Sweep(make_plan(tmp_path), tmp_path / "runs", FakeExecutor())
    await sweep.until(lambda: sweep.measured("c1"), "c1 to measure")
    sweep.orchestrator.skip(sweep.id("c2"))
    finished = sweep.finished("c2")
    assert [(f.state, f.reason) for f in finished] == [(ConfigState.SKIPPED, "skipped by the user")], "at once"
    outcome = await sweep.finish()
    assert [name for name, _, _ in sweep.executor.started] == ["c1", "c3"]
    assert outcome.states[sweep.id("c2")] == ConfigState.SKIPPED and not sweep.measured("c2")


async def test_skip_the_running_configuration_cancels_its_request_in_flight(tmp_path):
    sweep = Sweep(make_plan(tmp_path), tmp_path / "runs", FakeExecutor())
    await sweep.until(lambda: sweep.executor.in_flight == "c1" and len(sweep.measured("c1")) == 1, "c1's 2nd request")
    sweep.orchestrator.skip(sweep.id("c1"))
    outcome = await sweep.finish()
    assert len(sweep.measured("c1")) == 1, "the request in flight was cancelled, not recorded"
    assert [k[:4] for k in sweep.executor.cut] == [(sweep.id("c1"), "math", "arith-2", 1)]
    assert outcome.states[sweep.id("c1")] == ConfigState.SKIPPED
    assert outcome.states[sweep.id("c2")] == outcome.states[sweep.id("c3")] == ConfigState.DONE


async def test_skip_a_configuration_waiting_for_gpus_drops_it_there(tmp_path):
    executor = FakeExecutor()
    sweep = Sweep(make_plan(tmp_path), tmp_path / "runs", executor)
    executor.placer.free = []  # every GPU taken elsewhere: c1 waits in placement
    await sweep.until(lambda: sweep.orchestrator.scheduler.queue and len(sweep.orchestrator.scheduler.queue) == 2,
                      "c1 to wait for GPUs")
    sweep.orchestrator.skip(sweep.id("c1"))
    await sweep.until(lambda: sweep.finished("c1"), "c1 to be skipped")
    await executor.placer.release(Placement((0, 1)))
    outcome = await sweep.finish()
    assert [name for name, _, _ in executor.started] == ["c2", "c3"]
    assert outcome.states[sweep.id("c1")] == ConfigState.SKIPPED


async def test_retry_a_crashed_configuration_measures_only_what_is_missing(tmp_path):
    executor = FakeExecutor(crash_once_at={"c1": 3})
    sweep = Sweep(make_plan(tmp_path, seeds=(1, 2)), tmp_path / "runs", executor)
    await sweep.until(lambda: sweep.finished("c1"), "c1 to crash")
    crashed = sweep.finished("c1")[0]
    assert (crashed.state, crashed.signature) == (ConfigState.CRASHED, "cuda_error")
    sweep.orchestrator.retry(sweep.id("c1"))
    assert sweep.orchestrator.states[sweep.id("c1")] == ConfigState.PENDING
    outcome = await sweep.finish()
    assert outcome.states[sweep.id("c1")] == ConfigState.DONE
    assert [(n, a) for n, a, _ in executor.started] == [("c1", 1), ("c2", 1), ("c1", 2)]
    items = [(r["item"], r["status"]) for r in sweep.measured("c1")]
    # two good, one crashed, then the retry: the crashed one again and the one never sent; the good ones kept
    assert items[:3] == [("arith-1", "ok"), ("arith-2", "ok"), ("arith-3", "error")]
    assert sorted(items[3:]) == [("arith-3", "ok"), ("arith-4", "ok")]
    states = [e.state for e in of_type(sweep.events, ConfigStateChanged) if e.config_id == sweep.id("c1")]
    assert ConfigState.PENDING in states[states.index(ConfigState.CRASHED):]


async def test_retry_is_refused_for_a_done_or_running_configuration(tmp_path):
    sweep = Sweep(make_plan(tmp_path, seeds=(1, 2)), tmp_path / "runs", FakeExecutor())
    await sweep.until(lambda: sweep.finished("c1") and sweep.executor.in_flight == "c2", "c2 to run")
    sweep.orchestrator.retry(sweep.id("c1"))
    sweep.orchestrator.retry(sweep.id("c2"))
    await sweep.finish()
    assert [(n, a) for n, a, _ in sweep.executor.started] == [("c1", 1), ("c2", 1)]


async def test_abort_finishes_the_request_in_flight_and_leaves_the_rest_for_resume(tmp_path):
    sweep = Sweep(make_plan(tmp_path), tmp_path / "runs", FakeExecutor())
    await sweep.until(lambda: sweep.executor.in_flight == "c1" and len(sweep.measured("c1")) == 1, "c1's 2nd request")
    sweep.orchestrator.abort()
    outcome = await sweep.finish()
    assert outcome.state == "aborted" and "--resume" in (outcome.reason or "")
    assert len(sweep.measured("c1")) == 2, "the request in flight was finished and recorded"
    assert not sweep.executor.cut
    assert set(outcome.states.values()) == {ConfigState.PENDING}, "interrupted: no ConfigFinished, resume reruns"
    assert not of_type(sweep.events, ConfigFinished)
    assert [name for name, _, _ in sweep.executor.started] == ["c1"] and sweep.executor.closed is False


async def test_abort_now_cancels_the_request_in_flight(tmp_path):
    sweep = Sweep(make_plan(tmp_path), tmp_path / "runs", FakeExecutor())
    await sweep.until(lambda: sweep.executor.in_flight == "c1" and len(sweep.measured("c1")) == 1, "c1's 2nd request")
    sweep.orchestrator.abort(now=True)
    outcome = await sweep.finish()
    assert outcome.state == "aborted" and len(sweep.measured("c1")) == 1 and len(sweep.executor.cut) == 1
    assert sweep.executor.closed is True, "the executor is closed without grace"


async def test_a_lost_node_is_queued_again_not_crashed(tmp_path):
    executor = FakeExecutor(lose_node={"c1": 1})
    sweep = Sweep(make_plan(tmp_path, seeds=(1, 2)), tmp_path / "runs", executor)
    outcome = await sweep.finish()
    assert outcome.state == "completed" and outcome.states[sweep.id("c1")] == ConfigState.DONE
    assert [(n, a) for n, a, _ in executor.started] == [("c1", 1), ("c1", 2), ("c2", 1)], "first in line again"
    reasons = [e.reason for e in of_type(sweep.events, ConfigStateChanged)
               if e.config_id == sweep.id("c1") and e.state == ConfigState.PENDING]
    assert any("node lost: node fake-node went away; queued again" == r for r in reasons)
    assert [f.state for f in sweep.finished("c1")] == [ConfigState.DONE]


@pytest.mark.parametrize("retries", [0, 1])
async def test_a_node_lost_more_often_than_node_retries_fails_the_configuration(tmp_path, retries):
    executor = FakeExecutor(lose_node={"c1": 5})
    plan = make_plan(tmp_path, seeds=(1, 2), cluster={"node_retries": retries})
    sweep = Sweep(plan, tmp_path / "runs", executor)
    outcome = await sweep.finish()
    assert [a for n, a, _ in executor.started if n == "c1"] == list(range(1, retries + 2))
    finished = sweep.finished("c1")
    assert [f.state for f in finished] == [ConfigState.FAILED]
    assert finished[0].reason == f"node lost {retries + 1} times: node fake-node went away"
    assert outcome.states[sweep.id("c2")] == ConfigState.DONE


async def test_gpus_held_after_a_teardown_fail_the_sweep_cleanly(tmp_path):
    executor = FakeExecutor(hold_gpus=frozenset({"c1"}))
    sweep = Sweep(make_plan(tmp_path), tmp_path / "runs", executor)
    outcome = await sweep.finish()
    assert outcome.state == "failed" and outcome.failure == "gpu_release" and "GPU 0 still held" in outcome.reason
    assert [name for name, _, _ in executor.started] == ["c1"], "nothing new launches"
    assert executor.placer.kept == {0} and 0 not in executor.placer.free


async def test_concurrent_configurations_get_disjoint_gpus_and_skip_reaches_the_right_one(tmp_path):
    executor = FakeExecutor()
    sweep = Sweep(make_plan(tmp_path, seeds=(1, 2, 3, 4), concurrent=True), tmp_path / "runs", executor)
    await sweep.until(lambda: len(executor.started) >= 2, "two configurations side by side")
    first, second = executor.started[0], executor.started[1]
    assert set(first[2].gpus).isdisjoint(second[2].gpus)
    sweep.orchestrator.skip(sweep.id(second[0]))
    outcome = await sweep.finish()
    assert outcome.states[sweep.id(second[0])] == ConfigState.SKIPPED
    assert sorted(s for s in outcome.states.values()) == sorted([ConfigState.SKIPPED] + [ConfigState.DONE] * 3)


# ---------------------------------------------------------------------- the local executor, a stand-in server


async def test_cancelling_the_local_executor_tears_its_server_down_at_once(tmp_path):
    """Cancellable (the executor contract): a cancelled run tears its server down without the shutdown grace,
    here against a stand-in server that ignores SIGTERM and never becomes ready (grace 30 s)."""
    stubborn = tmp_path / "stubborn.py"
    stubborn.write_text(f"#!{sys.executable}\nimport signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                        "print('stand-in server up', flush=True)\nwhile True:\n    time.sleep(1)\n")
    stubborn.chmod(0o755)
    plan = make_plan(tmp_path, seeds=(1,), engine={"python": str(stubborn), "shutdown_grace_s": 30,
                                                   "startup_timeout_s": 120})
    run_dir = RunDir.create(tmp_path / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
    orchestrator = Orchestrator(plan, run_dir, write_env=False)
    events: list[Event] = []
    orchestrator.subscribe(events.append)
    task = asyncio.create_task(orchestrator.run())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while not any("stand-in server up" in e.line for e in log_lines(events)):
        assert not task.done() and loop.time() < deadline, "the stand-in server never started"
        await asyncio.sleep(0.01)
    launch = of_type(events, ServerLaunching)[0]
    cancelled = loop.time()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    took = loop.time() - cancelled
    run_dir.close()
    assert took < 10, f"a cancelled run waited {took:.1f} s (the shutdown grace is 30 s)"
    with pytest.raises(ProcessLookupError):
        os.killpg(launch.pid, 0)
    assert [e.config_id for e in of_type(events, ServerStopped)] == [launch.config_id]
