"""The orchestrator's GPU side against the simulator: the fake box follows the servers, samples name their
configuration, a per-configuration summary over the measured window, env.json, CUDA_DEVICE_ORDER, GPUs
still held after a teardown (a clean failure), and concurrent configurations on disjoint GPUs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_helpers import of_type, plan_for, run_plan, wait_no_processes
from sim_sweeps import run_sim_sweep
from sweep_builder import inline, sim_profile, sim_sweep, write

from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    Event,
    GpuSampled,
    MeasurementRecorded,
    Notice,
    ServerLaunching,
    ServerReady,
    ServerStopped,
    event_from_json,
)
from specbench_tui.core.plan import Plan
from specbench_tui.engine.gpus import FakeBackend

pytestmark = pytest.mark.e2e

PROFILE = sim_profile(tok_s=300.0)


def make_plan(folder: Path, *, gpus=2, tps=(2,), seeds=(1,), count=4, concurrent=False, release=2) -> Plan:
    sweep = sim_sweep(
        "gpus", sweep={"gpus": gpus, "concurrent": concurrent}, engine={"gpu_release_timeout_s": release},
        server_args={"mem-fraction-static": 0.5},
        configs=[{"name": "ar-tp{tp}-s{seed}", "algorithm": "autoregressive",
                  "matrix": inline(tp=list(tps), seed=list(seeds)),
                  "args": inline(**{"tp-size": "{tp}", "random-seed": "{seed}"})}],
        workloads=[{"name": "math", "kind": "arithmetic", "count": count, "max_new_tokens": 48}])
    return plan_for(write(folder, sweep, PROFILE))


async def run(plan: Plan, runs: Path, **kwargs) -> tuple:
    return await run_plan(plan, runs, timeout_s=60, **kwargs)


async def test_fake_box_follows_the_server_and_the_summary_covers_the_measured_window(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 34)
    plan = make_plan(tmp_path, count=4)
    backend = FakeBackend(8, load_s=0.05)
    environ: dict[str, str] = {}

    def read_server_env(event: Event) -> None:
        if isinstance(event, ServerLaunching):
            pid = event.pid
        elif isinstance(event, ServerReady):
            pid = next(e.pid for e in of_type(events, ServerLaunching) if e.config_id == event.config_id)
        else:
            return
        raw = Path(f"/proc/{pid}/environ").read_bytes()
        for item in raw.split(b"\0"):
            if b"=" in item:
                key, value = item.decode().split("=", 1)
                environ[key] = value

    ran = await run_sim_sweep(plan, tmp_path / "runs", backend=backend, gpu_sample_interval_s=0.05,
                              subscribers=[read_server_env], timeout_s=60)
    events, run_dir, orchestrator = ran.events, ran.run_dir, ran.orchestrator
    assert ran.outcome.state == "completed"
    assert environ["CUDA_VISIBLE_DEVICES"] == "0,1" and environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"

    # Samples while the server ran name its processes by configuration, on its GPUs only.
    name = plan.configs[0].name
    launch = of_type(events, ServerLaunching)[0]
    held = [s for e in of_type(events, GpuSampled) for s in e.samples
            if any(p["config"] == name for p in s["processes"])]
    assert held, "no sample showed the server's process"
    assert {s["index"] for s in held} == {0, 1}
    assert any(p["pid"] == launch.pid for s in held for p in s["processes"])
    assert max(s["mem_used_mib"] for s in held) > 0.4 * 97887
    assert max(s["util_pct"] for s in held) > 80, "busy while requests ran"
    last = of_type(events, GpuSampled)[-1]
    assert events.index(last) > events.index(of_type(events, ServerStopped)[-1]), "the panel ends after teardown"
    assert all(not s["processes"] and s["mem_used_mib"] < 100 for s in last.samples), last

    finished = of_type(events, ConfigFinished)[0]
    summary = finished.gpu_summary
    assert summary is not None and summary["gpus"] == [0, 1] and summary["samples"] >= 2
    assert summary["peak_mem_mib"] > 0.4 * 97887
    assert summary["max_util_pct"] > 80 and summary["mean_util_pct"] > 20
    assert summary["mean_power_w"] > 0 and summary["max_temp_c"] > 20
    assert finished.concurrent is False
    assert event_from_json(json.loads(json.dumps(finished.to_json()))) == finished
    assert backend.pids_holding(tuple(range(8))) == set(), "detached at teardown"
    assert orchestrator.owners == {} and not orchestrator.sampler.running

    # env.json: the fake box, the server's python asked in a subprocess, no secret.
    text = (run_dir.path / "env.json").read_text()
    env = json.loads(text)
    assert env["gpus"]["backend"] == "fake" and env["gpus"]["count"] == 8 and env["gpus"]["sm"] == ["sm_120"]
    assert "sglang" in env["server_python"]["packages"] and env["server_python"]["error"] is None
    assert env["sweep"]["sha256"] and env["extra"]["gpu_pool"] == [0, 1] and env["extra"]["concurrent"] is False
    assert "hf_xxxx" not in text and "HF_TOKEN" not in env["env"] or env["env"]["HF_TOKEN"] == "<redacted>"
    assert not wait_no_processes(str(tmp_path))


async def test_gpus_still_held_after_teardown_fail_the_sweep_cleanly(tmp_path):
    plan = make_plan(tmp_path, gpus=2, tps=(2,), seeds=(1, 2), count=1, release=0.3)
    backend = FakeBackend(8, load_s=0.0, release_delay_s=60.0)  # a CUDA context that never lets go
    outcome, events, _, orchestrator = await run(plan, tmp_path / "runs", backend=backend, write_env=False)
    assert outcome.state == "failed" and outcome.failure == "gpu_release"
    assert "still held by pid" in outcome.reason and "gpu_release_timeout_s" in outcome.reason
    errors = [e for e in of_type(events, Notice) if e.level == "error"]
    assert errors and "GPU 0,1 still held" in errors[0].text
    assert [e.name for e in of_type(events, ServerLaunching)] == ["ar-tp2-s1"], "nothing more launches"
    first, second = plan.configs
    assert outcome.states[first.id] == ConfigState.DONE
    assert outcome.states[second.id] == ConfigState.PENDING, "left for resume"
    assert orchestrator.pool.free == (), "held GPUs are not handed out again"
    assert not wait_no_processes(str(tmp_path))


async def test_concurrent_configurations_run_side_by_side_on_disjoint_gpus(tmp_path):
    plan = make_plan(tmp_path, gpus=4, tps=(1, 2), seeds=(1, 2), count=3, concurrent=True)
    outcome, events, _, _ = await run(plan, tmp_path / "runs", backend=FakeBackend(8, load_s=0.0),
                                      gpu_sample_interval_s=0.1, write_env=False)
    assert outcome.state == "completed"
    launches = of_type(events, ServerLaunching)
    assert len(launches) == 4 and sum(len(e.gpus) for e in launches) == 6
    # Side by side: intervals from launch to stop overlap, and overlapping servers share no GPU and no port.
    spans = {}
    for launch in launches:
        stop = next(e for e in of_type(events, ServerStopped) if e.config_id == launch.config_id)
        spans[launch.config_id] = (launch.ts, stop.ts, set(launch.gpus), launch.port)
    overlapping = 0
    items = list(spans.values())
    for i, (a0, a1, ga, pa) in enumerate(items):
        for b0, b1, gb, pb in items[i + 1:]:
            if a0 < b1 and b0 < a1:
                overlapping += 1
                assert not ga & gb and pa != pb
    assert overlapping >= 1
    finished = of_type(events, ConfigFinished)
    assert len(finished) == 4 and all(e.state == ConfigState.DONE and e.concurrent for e in finished)
    assert all(event_from_json(e.to_json()) == e for e in finished)
    assert any("concurrent" in e.text for e in of_type(events, Notice))
    assert len(of_type(events, MeasurementRecorded)) == 12
    assert not wait_no_processes(str(tmp_path))


async def test_release_waits_for_the_pids_nvml_shows_even_in_another_pid_namespace(tmp_path):
    """In a container NVML lists the host's pids, which match none of the server's: the pids that appeared on
    the server's GPUs while it ran are waited for all the same, and named after it in the GPU panel."""
    plan = make_plan(tmp_path, gpus=2, tps=(2,), seeds=(1, 2), count=1, release=0.3)
    backend = FakeBackend(8, load_s=0.0, release_delay_s=60.0, pid_offset=4_000_000)
    outcome, events, _, orchestrator = await run(plan, tmp_path / "runs", backend=backend, write_env=False,
                                                 gpu_sample_interval_s=0.1)
    assert outcome.state == "failed" and outcome.failure == "gpu_release", "the held memory was not seen"
    errors = [e for e in of_type(events, Notice) if e.level == "error"]
    assert errors and "GPU 0,1 still held by pid 4" in errors[0].text
    named = {p["pid"]: p["config"] for e in of_type(events, GpuSampled) for s in e.samples for p in s["processes"]}
    assert named and all(pid > 4_000_000 and config == "ar-tp2-s1" for pid, config in named.items()), named
    assert not wait_no_processes(str(tmp_path))
