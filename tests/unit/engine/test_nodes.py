"""Nodes in the core, the store and the GPU telemetry: where each configuration ran, on which GPU model, and
every node's fingerprint in env.json (driven by events a remote executor sends; no Ray needed)."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

from node_fakes import H100, H200, NODE_A, NODE_B, fingerprint
from tui_fakes import demo_plan

from specbench_tui.application.headless import Printer

from specbench_tui.core.events import (
    ConfigState,
    ConfigStateChanged,
    GpuSampled,
    NodeFingerprinted,
    ServerLaunching,
    ServerStopped,
    event_from_json,
)
from specbench_tui.core.nodes import compare_warnings, node_labels, node_totals, run_hardware
from specbench_tui.core.records import Measurement
from specbench_tui.core.state import RunState
from specbench_tui.engine.gpus import GpuSample, GpuSampler, GpuSummariser, samples_to_json
from specbench_tui.engine.gpus.fake import FakeBackend
from specbench_tui.rundir.store import RunDir


def launch(config_id: str, node: str | None, gpus: tuple[int, ...], ts: float) -> ServerLaunching:
    return ServerLaunching(config_id=config_id, name=config_id, argv=("x",), gpus=gpus, port=1, pid=2,
                           log_path="l", node=node, ts=ts)


def measured(config_id: str, started_at: float | None, item: str = "i") -> Measurement:
    return Measurement(config_id=config_id, config=config_id, workload="w", item=item, repeat=0, status="ok",
                       decode_tps=1.0, started_at=started_at)


def test_node_labels_are_short_and_unambiguous() -> None:
    assert node_labels([None, NODE_A, NODE_B]) == {None: "local", NODE_A: "gpu-a", NODE_B: "gpu-b"}
    # three raylets of one machine (the fake cluster of the tests): the host plus the start of the id
    assert node_labels(["h/aaaaaaaa11", "h/bbbbbbbb22"]) == {"h/aaaaaaaa11": "h/aaaaaaaa", "h/bbbbbbbb22": "h/bbbbbbbb"}
    assert node_labels(["h/aaaaaaaa1", "h/aaaaaaaa2", "plain"]) == {"h/aaaaaaaa1": "h/aaaaaaaa1",
                                                                    "h/aaaaaaaa2": "h/aaaaaaaa2", "plain": "plain"}
    assert node_labels(["local/x", None]) == {"local/x": "local/x", None: "local"}


def test_each_measurement_belongs_to_the_launch_before_it() -> None:
    """A configuration that lost its node and ran again elsewhere was measured on both, and says so."""
    events = [NodeFingerprinted(node=NODE_A, fingerprint=fingerprint(H200, "gpu-a"), ts=0),
              NodeFingerprinted(node=NODE_B, fingerprint=fingerprint(H100, "gpu-b"), ts=0),
              launch("c1", NODE_A, (1,), 10.0), launch("c1", NODE_B, (0,), 100.0), launch("c2", NODE_A, (0,), 5.0),
              launch("c3", NODE_A, (0,), 200.0), launch("c3", NODE_B, (1,), 300.0)]
    hardware = run_hardware(events, [measured("c1", 50.0, "a"), measured("c1", 150.0, "b"), measured("c2", None),
                                     measured("c3", 250.0)], env=None)
    assert hardware.where("c1") == "gpu-a 1; gpu-b 0" and hardware.model("c1") == f"{H200} + {H100}"
    assert hardware.where("c2") == "gpu-a 0" and hardware.model("c2") == H200
    assert hardware.where("c3") == "gpu-a 0"  # its second launch measured nothing
    assert hardware.on_nodes and hardware.mixed_models
    warnings = hardware.warnings({"c1": "one", "c2": "two", "c3": "three"}, {"c1": "c2"})
    assert any("different GPU models" in w and f"{H100}: one" in w for w in warnings)
    assert any(w.startswith("one was measured on 2 GPU models (gpu-a 1; gpu-b 0") for w in warnings)
    assert any("over a baseline measured on another GPU model: one" in w for w in warnings)
    assert hardware.node_lines() == [f"gpu-a: 2x {H200} (driver 570.86.15) [{NODE_A}]",
                                     f"gpu-b: 2x {H100} (driver 570.86.15) [{NODE_B}]"]


def test_this_machine_on_one_gpu_model_has_nothing_to_warn() -> None:
    env = fingerprint(H200, "box")
    hardware = run_hardware([launch("c1", None, (0,), 1.0), launch("c2", None, (1,), 2.0)],
                            [measured("c1", 5.0), measured("c2", 6.0)], env)
    assert not hardware.on_nodes and hardware.model("c1") == H200
    assert hardware.warnings({}, {"c1": "c2"}) == []
    mixed = {**env, "gpus": {**env["gpus"], "devices": [{"index": 0, "name": H200}, {"index": 1, "name": H100}]}}
    hardware = run_hardware([launch("c1", None, (0,), 1.0), launch("c2", None, (1,), 2.0)], [], mixed)
    assert hardware.warnings({"c1": "spec", "c2": "base"}, {"c1": "c2"})[-1] == (
        f"speedups over a baseline measured on another GPU model: spec ({H200}) over base ({H100})")


def test_compare_warns_per_pair_of_models() -> None:
    a = run_hardware([launch("c1", None, (0,), 1.0), launch("c2", None, (0,), 1.0)], [], fingerprint(H100, "a"))
    b = run_hardware([launch("c1", None, (0,), 1.0), launch("c2", None, (0,), 1.0)], [], fingerprint(H200, "b"))
    assert compare_warnings(a, b, {"c1": "one", "c2": "two"}) == [
        f"different GPU models: A measured on {H100} and B on {H200} (2 configurations: one, two); the changes "
        "compare hardware as well as settings"]
    assert compare_warnings(a, a, {"c1": "one"}) == []


def test_node_totals_sum_memory_and_power_and_average_utilisation() -> None:
    totals = node_totals([{"name": H200, "util_pct": 100.0, "mem_used_mib": 10.0, "temp_c": 60, "power_w": 500},
                          {"name": H200, "util_pct": 0.0, "mem_used_mib": 2.0, "temp_c": float("nan")},
                          {"name": H100, "util_pct": True}])
    assert totals["util_pct"] == 50.0 and totals["mem_used_mib"] == 12.0 and totals["temp_c"] == 60
    assert totals["power_w"] == 500 and totals["mem_total_mib"] is None and totals["models"] == {H200: 2, H100: 1}


def test_run_state_keeps_each_nodes_samples_and_holders() -> None:
    state = RunState()
    state.apply(launch("c1", NODE_A, (0,), 1.0))
    state.apply(launch("c2", None, (0,), 1.0))
    state.apply(GpuSampled(samples=({"index": 1}, {"index": 0, "node": "forged"}), node=NODE_A))
    state.apply(GpuSampled(samples=({"index": 0},)))
    assert [(s["node"], s["index"]) for s in state.gpu_samples] == [(None, 0), (NODE_A, 0), (NODE_A, 1)]
    assert state.gpu_holders() == {0: "c2"}  # this machine's GPU 0, not gpu-a's
    assert state.node_gpu_holders() == {(NODE_A, 0): "c1", (None, 0): "c2"}
    assert state.on_nodes and state.node_labels() == {None: "local", NODE_A: "gpu-a"}
    state.apply(ServerStopped(config_id="c1", exit_code=0, teardown_s=1.0))
    state.apply(ConfigStateChanged(config_id="c1", name="c1", state=ConfigState.DONE))
    assert state.configs["c1"].node == NODE_A and state.configs["c1"].gpus == ()
    state.apply(NodeFingerprinted(node=NODE_B, fingerprint={"gpus": {}}))
    assert state.nodes() == [None, NODE_A, NODE_B]


def test_node_events_survive_the_json_round_trip() -> None:
    for event in (GpuSampled(samples=({"index": 0},), node=NODE_A),
                  NodeFingerprinted(node=NODE_A, fingerprint=fingerprint(H200, "gpu-a"))):
        assert event_from_json(json.loads(json.dumps(event.to_json()))) == event
    assert not GpuSampled.persist and NodeFingerprinted.persist


def test_env_json_records_every_nodes_fingerprint(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "s", "", {})
    run.append_event(NodeFingerprinted(node=NODE_A, fingerprint=fingerprint(H200, "gpu-a")))
    assert not (run.path / "env.json").exists()  # the engine's own fingerprint comes first; this one waits
    run.write_json("env.json", {"host": {"name": "head"}, "gpus": {"count": 0}})
    env = json.loads((run.path / "env.json").read_text())
    assert env["host"] == {"name": "head"} and env["nodes"][NODE_A]["gpus"]["names"] == {H200: 2}
    run.append_event(NodeFingerprinted(node=NODE_B, fingerprint=fingerprint(H100, "gpu-b")))
    env = json.loads((run.path / "env.json").read_text())
    assert set(env["nodes"]) == {NODE_A, NODE_B} and env["host"] == {"name": "head"}
    run.close()
    resumed = RunDir.open(run.path)  # a resume on a new cluster adds its nodes to the first env.json
    resumed.append_event(NodeFingerprinted(node="gpu-c/1", fingerprint=fingerprint(H100, "gpu-c")))
    assert set(json.loads((run.path / "env.json").read_text())["nodes"]) == {NODE_A, NODE_B, "gpu-c/1"}
    assert [type(e).__name__ for e in resumed.read_events()] == ["NodeFingerprinted"] * 3
    resumed.close()


def test_gpu_samples_and_summaries_carry_a_cluster_nodes_name() -> None:
    sample = GpuSample(index=0, name=H200, util_pct=50.0)
    assert "node" not in samples_to_json([sample])[0]  # this machine's samples are as they were
    assert samples_to_json([sample], node=NODE_A)[0]["node"] == NODE_A
    summariser = GpuSummariser([0], NODE_A)
    summariser.add([sample], at=1.0)
    assert summariser.summary().to_json()["node"] == NODE_A
    assert "node" not in GpuSummariser([0]).summary().to_json()
    sampler = GpuSampler(FakeBackend(1), node=NODE_B)
    sampler.open_window("c", [0])
    assert {s.node for s in sampler.poll_once()} == {NODE_B}
    summary = sampler.close_window("c")
    assert summary is not None and summary.node == NODE_B


def test_headless_output_names_the_node() -> None:
    plan = demo_plan()
    out = io.StringIO()
    printer = Printer(plan, out=out)
    config = plan.configs[0]
    printer(NodeFingerprinted(node=NODE_A, fingerprint=fingerprint(H200, "gpu-a")))
    printer(dataclasses.replace(launch(config.id, NODE_A, (0, 1), 1.0), name=config.name))
    printer(NodeFingerprinted(node=NODE_B, fingerprint={}))
    lines = out.getvalue().splitlines()
    assert lines[0].endswith(f"node {NODE_A}: 2x {H200} (driver 570.86.15)")
    assert lines[1].endswith(f"{config.name}: launching on GPU 0,1 of node {NODE_A}, port 1 (pid 2)")
    assert lines[2].endswith(f"node {NODE_B}: no fingerprint")
