"""The Ray executor on a local fake cluster (tests/ray_cluster.py: a head without GPUs and three raylets with 8
fake GPUs each), the simulator as the server: placement on one node with disjoint GPUs, the same measurements
as the local executor, node loss survived, and nothing left running."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import of_type, plan_for, run_plan
from ray_cluster import FakeCluster
from sweep_builder import inline, sim_profile, sim_sweep, write

from specbench_tui.core.events import (ConfigFinished, ConfigStateChanged, Event, GpuSampled, MeasurementRecorded,
                                       NodeFingerprinted, ServerLaunching)
from specbench_tui.core.plan import Plan
from specbench_tui.engine.local_executor import PORT_RETRIES

pytestmark = [pytest.mark.ray, pytest.mark.e2e]

TPS = (1, 4, 8, 4, 1)
"""A mix whose TP8 needs a whole node: with three 8-GPU nodes some run side by side on one node."""

DETERMINISTIC = ("config_id", "workload", "item", "repeat", "status", "completion_tokens", "accept_length",
                 "finish_reason")
"""The fields of a measurement the simulator's deterministic profile fixes (the rest are clocks)."""


def _sweep(folder: Path, *, tps: tuple[int, ...] = TPS, count: int = 2, tok_s: float = 400.0,
           cluster: dict[str, Any] | None = None, concurrent: bool = True, repeats: int = 1) -> Plan:
    configs = [{"name": f"ar-tp{tp}-{i}", "algorithm": "autoregressive", "args": inline(**{"tp-size": tp, "random-seed": i})}
               for i, tp in enumerate(tps)]
    sweep = sim_sweep("cluster", configs=configs,
                      workloads=[{"kind": "code", "items": ["fibonacci", "quicksort"][:count],
                                  "max_new_tokens": 48}],
                      sweep={"gpus": 8, "concurrent": concurrent, "repeats": repeats})
    if cluster is not None:
        sweep["cluster"] = cluster
    return plan_for(write(folder, sweep, sim_profile(tok_s=tok_s, accept_length=2.5)))


async def _run_on_ray(plan: Plan, runs: Path, timeout_s: float = 240.0) -> tuple[Any, list[Event], Any]:
    """The engine as a sweep with ``[cluster] executor = "ray"`` runs it (Ray is already connected here)."""
    assert plan.sweep.cluster.on_ray
    outcome, events, run_dir, orchestrator = await run_plan(plan, runs, timeout_s=timeout_s)
    assert type(orchestrator.executor).__name__ == "RayExecutor"
    return outcome, events, run_dir


def _all_gpus_free(timeout_s: float = 60.0) -> None:
    """Every placement group removed: the cluster's GPUs are all available again (Ray reports freed resources
    asynchronously, late on a loaded box; the wait ends when they are back)."""
    import ray

    deadline = time.monotonic() + timeout_s
    while ray.available_resources().get("GPU", 0) < ray.cluster_resources().get("GPU", 0):
        assert time.monotonic() < deadline, (ray.available_resources(), ray.cluster_resources())
        time.sleep(0.2)
    assert all(g["state"] == "REMOVED" for g in ray.util.placement_group_table().values())


def _windows(events: list[Event]) -> list[tuple[str, tuple[int, ...], float, float, str]]:
    """(node, gpus, start, end, config id) of every launch."""
    ends = {e.config_id: e.ts for e in events if isinstance(e, ConfigFinished)}
    return [(e.node or "", e.gpus, e.ts, ends.get(e.config_id, float("inf")), e.config_id)
            for e in events if isinstance(e, ServerLaunching)]


async def test_mixed_tp_on_three_nodes_matches_the_local_executor(ray_cluster: FakeCluster, tmp_path: Path) -> None:
    plan = _sweep(tmp_path / "ray", cluster={"executor": "ray"})
    outcome, events, run_dir = await _run_on_ray(plan, tmp_path / "runs-ray")
    assert outcome.state == "completed", outcome.reason
    assert {s.value for s in outcome.states.values()} == {"done"}

    launches = _windows(events)
    # every configuration launched; more than once only when a server found its port taken at bind (a parallel
    # test's server on a busy box) and was launched again on another (engine/local_executor.py, PORT_RETRIES)
    assert sorted({launch[4] for launch in launches}) == sorted(c.id for c in plan.configs), launches
    assert len(launches) <= len(TPS) + PORT_RETRIES, launches
    labels = {node for node, *_ in launches}
    assert all(labels) and len(labels) >= 2, labels  # every launch names its node; the mix spreads out
    tp_of = {c.id: c.gpus_needed for c in plan.configs}
    for node, gpus, start, end, config_id in launches:
        assert len(gpus) == tp_of[config_id] and len(set(gpus)) == len(gpus) and max(gpus) < 8
        for other in launches:  # side by side on one node: disjoint GPUs
            if other[4] != config_id and other[0] == node and other[2] < end and start < other[3]:
                assert not set(gpus) & set(other[1]), (config_id, other[4], gpus, other[1])

    _all_gpus_free()

    local_plan = _sweep(tmp_path / "local")
    local, _, local_dir, _ = await run_plan(local_plan, tmp_path / "runs-local", timeout_s=240)
    assert local.state == "completed"

    def shape(run: Any) -> list[tuple]:
        return sorted(tuple(getattr(m, f) for f in DETERMINISTIC) for m in run.read_measurements())

    on_ray = shape(run_dir)
    assert on_ray == shape(local_dir) and len(on_ray) == len(TPS) * 2
    assert all(m[4] == "ok" and m[5] == 48 for m in on_ray)
    assert len(of_type(events, MeasurementRecorded)) == len(TPS) * 2

    env = json.loads((run_dir.path / "env.json").read_text())  # every node's fingerprint, taken on the node
    assert set(env["nodes"]) == labels and all(doc["gpus"] and doc["host"] for doc in env["nodes"].values())
    assert len(of_type(events, NodeFingerprinted)) == len(labels)  # once per node
    sampled = {e.node for e in of_type(events, GpuSampled) if e.samples}  # each node samples its own GPUs
    assert sampled == labels and all(s["node"] == e.node for e in of_type(events, GpuSampled) for s in e.samples)
    summaries = [e.gpu_summary for e in of_type(events, ConfigFinished)]
    assert all(summary and summary.get("node") in labels for summary in summaries), summaries
    log = next(run_dir.path.glob("logs/*.log")).read_text()
    assert "Decode batch" in log or "server" in log.lower()  # the server's log came back line by line


async def test_node_lost_mid_configuration_reruns_elsewhere(ray_cluster: FakeCluster, tmp_path: Path) -> None:
    plan = _sweep(tmp_path, tps=(4,), count=2, tok_s=40.0, cluster={"executor": "ray", "node_retries": 2},
                  concurrent=False)
    from specbench_tui.engine.orchestrator import Orchestrator
    from specbench_tui.rundir.store import RunDir

    run_dir = RunDir.create(tmp_path / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
    orchestrator = Orchestrator(plan, run_dir)
    events: list[Event] = []
    removed: list[str] = []

    def on_event(event: Event) -> None:
        events.append(event)
        if isinstance(event, MeasurementRecorded) and not removed:  # one measurement in: the node goes
            launch = next(e for e in reversed(events) if isinstance(e, ServerLaunching))
            node_id = next(n for n in ray_cluster.node_ids() if launch.node and launch.node.endswith("/" + n))
            removed.append(node_id)
            ray_cluster.remove(node_id)

    orchestrator.subscribe(on_event)
    try:
        outcome = await asyncio.wait_for(orchestrator.run(), 240)
    finally:
        run_dir.close()
        if removed:
            ray_cluster.add_node()  # the next test gets three nodes again
    assert removed, "no measurement arrived before the node could be removed"
    assert outcome.state == "completed", outcome.reason
    launches = of_type(events, ServerLaunching)
    assert len(launches) == 2 and launches[0].node != launches[1].node
    states = [e.state.value for e in of_type(events, ConfigStateChanged)]
    lost = states.index("node_lost")  # a state of its own, then queued again, then a fresh launch
    assert states[lost + 1] == "pending" and "launching" in states[lost + 1:] and "crashed" not in states
    keys = [m.key for m in run_dir.read_measurements()]
    assert sorted(keys) == sorted(set(keys)) and len(keys) == 2  # every measurement exactly once
    assert [e.state.value for e in of_type(events, ConfigFinished)] == ["done"]
    _all_gpus_free()


def test_fake_cluster_is_three_8_gpu_nodes(ray_cluster: FakeCluster) -> None:
    import ray

    assert ray.cluster_resources().get("GPU") == 24.0
    started = time.monotonic()
    assert len(ray_cluster.node_ids()) == 3
    assert time.monotonic() - started < 1


def _wait_for(path: Path, what: str, count: int, timeout_s: float = 120.0) -> list[dict]:
    """The events of type ``what`` in the one run directory under ``path`` once there are ``count``."""

    deadline = time.monotonic() + timeout_s
    found: list[dict] = []
    while time.monotonic() < deadline:
        for events in path.glob("*/events.jsonl"):
            if what == "MeasurementRecorded":  # a measurement is written once, to results.jsonl
                results = events.with_name("results.jsonl")
                found = [json.loads(x) for x in results.read_text().splitlines()] if results.exists() else []
            else:
                found = [e for e in map(json.loads, events.read_text().splitlines()) if e.get("type") == what]
            if len(found) >= count:
                return found
        time.sleep(0.2)
    raise AssertionError(f"no {count} {what} events under {path} within {timeout_s} s (found {len(found)})")


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_no_server_survives_the_engine(ray_cluster: FakeCluster, tmp_path: Path, how: str) -> None:
    """Ctrl-C (how a headless run is quit), SIGTERM and SIGKILL of an engine process whose servers run on the
    cluster's nodes: afterwards no process of those servers is alive on any node."""
    import signal

    from engine_helpers import headless_engine, processes_with_env, wait_no_processes

    _sweep(tmp_path, tps=(4, 4), count=2, tok_s=5.0, cluster={"executor": "ray"})
    runs = tmp_path / "runs"
    engine = headless_engine([str(tmp_path / "sweep.toml"), "--runs-dir", str(runs), "--foreground",
                              "--ray-address", ray_cluster.address], tmp_path)
    try:
        launches = _wait_for(runs, "ServerReady", 2)
        assert len(launches) == 2
        assert processes_with_env(str(tmp_path)), "the servers run on the nodes with the sweep's environment"
        engine.send_signal(getattr(signal, how))
        engine.wait(timeout=90)
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait()
    survivors = wait_no_processes(str(tmp_path), timeout_s=45.0)
    assert survivors == [], f"{how}: {survivors} outlived the engine"


async def test_tui_shows_each_configurations_node_and_quit_leaves_nothing(ray_cluster: FakeCluster,
                                                                          tmp_path: Path) -> None:
    """The real app (Pilot) over the real engine on the cluster: the queue names each configuration's node with
    its GPUs there; quitting (ctrl+q, then y) leaves no server process on any node."""
    from engine_helpers import processes_with_env, wait_no_processes

    from specbench_tui.application.runner import EngineThread, make_engine
    from specbench_tui.application.session import RunRequest
    from specbench_tui.tui.app import SpecbenchApp
    from specbench_tui.tui.confirm_quit import ConfirmQuitScreen
    from specbench_tui.tui.queue_panel import QueuePanel

    plan = _sweep(tmp_path, tps=(8, 4), count=2, tok_s=5.0, cluster={"executor": "ray"})
    engine = make_engine(RunRequest(sweep=str(tmp_path / "sweep.toml"), runs_dir=tmp_path / "runs"))
    assert isinstance(engine, EngineThread)
    app = SpecbenchApp(engine)
    ids = ray_cluster.node_ids()

    def shown() -> dict[str, str]:
        queue = app.query_one(QueuePanel)
        cells = {}
        for config in plan.configs:
            try:
                cells[config.id] = str(queue.get_cell(config.id, "gpus"))
            except Exception:  # noqa: BLE001 - the row is not there yet
                pass
        return cells

    try:
        async with app.run_test(size=(160, 40)) as pilot:
            deadline = time.monotonic() + 120
            while not (len(cells := shown()) == 2 and all(" @ " in text for text in cells.values())):
                assert time.monotonic() < deadline, f"the queue never named the nodes: {shown()}"
                await asyncio.sleep(0.2)
            for config in plan.configs:  # "0,1,2,3 @ host/1a2b3c4d": the raylets share this host
                gpus, node = cells[config.id].split(" @ ")
                assert any(node.endswith("/" + node_id[:8]) for node_id in ids), cells
                assert len(gpus.split(",")) == config.gpus_needed, cells
            assert cells[plan.configs[0].id].split(" @ ")[1] != cells[plan.configs[1].id].split(" @ ")[1]
            assert processes_with_env(str(tmp_path))
            await pilot.press("ctrl+q")
            await pilot.pause()
            if isinstance(app.screen, ConfirmQuitScreen):
                await pilot.press("y")
            deadline = time.monotonic() + 60
            while not (app.engine_stopped or app.stop_error is not None):
                assert time.monotonic() < deadline, "the engine did not stop"
                await asyncio.sleep(0.1)
    finally:
        engine.stop(timeout=30)
    assert wait_no_processes(str(tmp_path), timeout_s=45.0) == []


def test_resume_after_the_engine_died_continues_on_the_cluster(ray_cluster: FakeCluster, tmp_path: Path) -> None:
    """The run directory is the truth, not Ray: an engine killed mid-sweep (SIGKILL) is resumed with
    ``--resume RUN --ray-address``; it measures only what is missing, so every measurement exists once."""
    import signal

    from engine_helpers import headless_engine, wait_no_processes

    _sweep(tmp_path, tps=(4, 1), count=2, tok_s=12.0, cluster={"executor": "ray"})
    runs = tmp_path / "runs"
    engine = headless_engine([str(tmp_path / "sweep.toml"), "--runs-dir", str(runs), "--foreground",
                              "--ray-address", ray_cluster.address], tmp_path)
    try:
        _wait_for(runs, "MeasurementRecorded", 1)
        engine.send_signal(signal.SIGKILL)
        engine.wait(timeout=30)
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait()
    assert wait_no_processes(str(tmp_path), timeout_s=45.0) == []
    (run_dir,) = runs.glob("*")
    before = _results(run_dir)
    assert 1 <= len(before) < 4
    _resume_completes_every_measurement_once(run_dir, before, ray_cluster.address, tmp_path)


def _results(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]


def _resume_completes_every_measurement_once(run_dir: Path, before: list[dict], address: str, cwd: Path) -> None:
    """``specbench run --resume`` on the cluster at ``address`` ends well, with each of the sweep's 4 measurements
    exactly once and what arrived before the interruption kept as it was."""
    resumed = subprocess.run([sys.executable, "-m", "specbench_tui", "run", "--resume", str(run_dir), "--headless",
                              "--foreground", "--ray-address", address],
                             cwd=cwd, capture_output=True, text=True, timeout=240)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    after = _results(run_dir)
    keys = [(m["config_id"], m["workload"], m["item"], m["repeat"]) for m in after]
    assert len(keys) == 4 and len(set(keys)) == 4, keys
    assert after[:len(before)] == before


def test_a_lost_head_stops_the_sweep_cleanly_and_resume_continues_on_a_new_cluster(ray_cluster: FakeCluster,
                                                                                   tmp_path: Path) -> None:
    """A second cluster (a head and one 8-GPU raylet) runs a sweep from an engine process; its head is killed
    mid-sweep. The engine stops within the bound with exit code 5: the configurations in flight interrupted
    (pending again: never crashed, never node_lost, no zero), what was measured kept, the reason naming the lost
    head and the resume command, no server left. ``--resume RUN --ray-address`` on another cluster (the
    module's) then measures only what is missing: every measurement exactly once."""

    from engine_helpers import headless_engine, wait_no_processes
    from ray_cluster import start_cluster

    from specbench_tui.engine.ending import EXIT_CLUSTER_LOST

    # 12 s a request, and the head lost after 2 s of silence: the second requests are in flight at the loss
    _sweep(tmp_path, tps=(4, 4), count=2, tok_s=4.0, cluster={"executor": "ray", "head_timeout_s": 2})
    runs = tmp_path / "runs"
    doomed = start_cluster(nodes=1, connect=False)
    engine = None
    try:
        engine = headless_engine([str(tmp_path / "sweep.toml"), "--runs-dir", str(runs), "--foreground",
                                  "--ray-address", doomed.address], tmp_path)
        _wait_for(runs, "MeasurementRecorded", 1)
        lost_at = time.monotonic()
        doomed.cluster.remove_node(doomed.cluster.head_node, allow_graceful=False)
        code = engine.wait(timeout=90)
        stopped_s = time.monotonic() - lost_at
        output = engine.stdout.read().decode(errors="replace") if engine.stdout else ""
    finally:
        if engine is not None and engine.poll() is None:
            engine.kill()
            engine.wait()
        doomed.cluster.shutdown()
    print(f"the engine stopped {stopped_s:.1f} s after its cluster's head was killed")
    assert code == EXIT_CLUSTER_LOST, output[-3000:]
    assert stopped_s < 2 + 40, output[-3000:]  # the bound ending.py states: head_timeout_s + 40 s
    assert wait_no_processes(str(tmp_path), timeout_s=30.0) == []
    (run_dir,) = runs.glob("*")
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    (finished,) = [e for e in events if e["type"] == "SweepFinished"]
    resume = f"specbench run --resume {run_dir} --ray-address"
    assert finished["state"] == "failed" and f"the Ray head at {doomed.address} is lost" in finished["reason"]
    assert resume in finished["reason"] and resume in output, output[-3000:]
    states = [e["state"] for e in events if e["type"] == "ConfigStateChanged"]
    assert not {"crashed", "node_lost", "failed"} & set(states), states
    assert not [e for e in events if e["type"] == "ConfigFinished"]  # both in flight: interrupted, to run again
    interrupted = [e for e in events if e["type"] == "ConfigStateChanged" and e["state"] == "pending"
                   and (e.get("reason") or "").startswith("interrupted: the Ray head")]
    assert len(interrupted) == 2, states
    before = _results(run_dir)
    assert 1 <= len(before) < 4 and all(m["status"] == "ok" and m["completion_tokens"] == 48 for m in before)

    _resume_completes_every_measurement_once(run_dir, before, ray_cluster.address, tmp_path)
    assert wait_no_processes(str(tmp_path), timeout_s=30.0) == []


async def test_skip_and_pause_reach_the_node(ray_cluster: FakeCluster, tmp_path: Path) -> None:
    """The control API on a cluster: a pause holds the next request on the node, and a skip of the running
    configuration cancels its request there and tears its server down (skipped, never crashed)."""
    from engine_helpers import wait_no_processes

    from specbench_tui.core.events import QueuePaused, QueueResumed
    from specbench_tui.engine.orchestrator import Orchestrator
    from specbench_tui.rundir.store import RunDir

    plan = _sweep(tmp_path, tps=(4,), count=2, tok_s=8.0, cluster={"executor": "ray"}, concurrent=False,
                  repeats=2)  # 4 requests of 6 s each
    run_dir = RunDir.create(tmp_path / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
    orchestrator = Orchestrator(plan, run_dir)
    events: list[Event] = []
    orchestrator.subscribe(events.append)
    config_id = plan.configs[0].id

    def measured() -> int:
        return len(of_type(events, MeasurementRecorded))

    task = asyncio.ensure_future(orchestrator.run())
    try:
        deadline = time.monotonic() + 120
        while not measured():
            assert time.monotonic() < deadline and not task.done(), "no first measurement"
            await asyncio.sleep(0.1)
        orchestrator.pause()  # the request in flight (the second of four) finishes; no new one is sent
        deadline = time.monotonic() + 60  # its measurement comes back over Ray: late on a loaded box
        while measured() < 2:
            assert time.monotonic() < deadline, "the request in flight at the pause never finished"
            await asyncio.sleep(0.1)
        held = measured()
        await asyncio.sleep(8.0)  # longer than a request (6 s): one sent while paused would be back by now
        assert measured() == held == 2, "a request was sent while paused"
        orchestrator.skip(config_id)
        orchestrator.resume()
        outcome = await asyncio.wait_for(task, 60)
    finally:
        if not task.done():
            orchestrator.abort(now=True)
            await asyncio.wait_for(task, 60)
        run_dir.close()
    assert outcome.states[config_id].value == "skipped" and measured() == held < 4
    assert of_type(events, QueuePaused) and of_type(events, QueueResumed)
    assert "crashed" not in {e.state.value for e in of_type(events, ConfigStateChanged)}
    assert wait_no_processes(str(tmp_path), timeout_s=30.0) == []
    _all_gpus_free()
