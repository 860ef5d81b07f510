"""GPU faults between configurations (issue 48): an Xid that a GPU reports while no configuration holds it fences
that GPU off placement for the rest of the sweep, said as a pre-flight notice ("GPU 1: Xid 79 at 12:04 (fell off
the bus) — not placed"). A later configuration that would have used it is placed elsewhere and says so in the
queue and the report; one that no longer fits is refused with the fault as its reason. Injected through the
simulator's fake GPU box."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from engine_helpers import plan_for, write_sweep

from specbench_tui.application.session import make_backend
from specbench_tui.application.viewmodel import build_view
from specbench_tui.core.events import ConfigFinished, ConfigState, Event, Notice, ServerLaunching
from specbench_tui.core.state import replay
from specbench_tui.engine.gpus import FakeBackend
from specbench_tui.engine.orchestrator import Orchestrator
from specbench_tui.rundir.store import RunDir

pytestmark = pytest.mark.e2e

PROFILE = """
seed = 3
[deterministic]
enabled = true
tok_s = 400.0
accept_length = 3.0
ttft_ms = 5
[output]
eos = false
[shutdown]
poll_s = 0.05
"""

SWEEP = """
[sweep]
name = "fenced"
gpus = 4
repeats = 1
warmup = 0
baseline = "ar"
[engine]
launcher = "simulator"
sim_profile = "sim_profile.toml"
port_base = {port}
startup_timeout_s = 60
shutdown_grace_s = 2
gpu_release_timeout_s = 1
[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 8192
[[configs]]
name = "ar"
algorithm = "autoregressive"
[[configs]]
name = "ar-tp2"
algorithm = "autoregressive"
[configs.args]
tp-size = 2
[[configs]]
name = "ar-tp4"
algorithm = "autoregressive"
[configs.args]
tp-size = 4
[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci"]
max_new_tokens = 32
"""

FENCED = re.compile(r"GPU 1: Xid 79 at \d\d:\d\d \(fell off the bus\) \N{EM DASH} not placed")


def test_a_fault_between_configurations_fences_its_gpu_off_placement(tmp_path: Path) -> None:
    plan = plan_for(write_sweep(tmp_path, SWEEP, PROFILE))
    run_dir = RunDir.create(tmp_path / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
    backend = make_backend(plan)
    assert isinstance(backend, FakeBackend)
    orchestrator = Orchestrator(plan, run_dir, backend=backend)
    names = {c.id: c.name for c in plan.configs}
    events: list[Event] = []

    def watch(event: Event) -> None:
        events.append(event)
        if isinstance(event, ConfigFinished) and names[event.config_id] == "ar":
            backend.inject_xid(1, 79)  # between ar (on GPU 0) and ar-tp2 (on GPU 0,1 were GPU 1 healthy)

    orchestrator.subscribe(watch)
    try:
        asyncio.run(asyncio.wait_for(orchestrator.run(), 240))
    finally:
        run_dir.close()

    notices = [e.text for e in events if isinstance(e, Notice) and e.level == "error"]
    assert any(text.startswith("pre-flight: ") and FENCED.search(text) and "goes on with GPU 0,2,3" in text
               for text in notices), notices
    launched = {names[e.config_id]: e.gpus for e in events if isinstance(e, ServerLaunching)}
    assert launched == {"ar": (0,), "ar-tp2": (0, 2)}, launched  # ar-tp4 never launched
    finished = {names[e.config_id]: e for e in events if isinstance(e, ConfigFinished)}
    assert finished["ar-tp2"].state == ConfigState.DONE, finished["ar-tp2"]  # not crashed by the other GPU's Xid
    assert FENCED.search(finished["ar-tp2"].reason or "") and "placed on GPU 0,2" in (finished["ar-tp2"].reason or "")
    refused = finished["ar-tp4"]
    assert refused.state == ConfigState.FAILED
    assert FENCED.search(refused.reason or "") and "needs 4 GPUs, 3 left without a fault" in (refused.reason or "")

    queue = {line.name: line.note for line in build_view(replay(events, plan)).lines}
    assert FENCED.search(queue["ar-tp2"]) and FENCED.search(queue["ar-tp4"]), queue

    from specbench_tui.report.formats import render
    from specbench_tui.report.load import load_run

    run = load_run(run_dir.path)
    text = render(run, "txt")
    assert FENCED.search(text) and "needs 4 GPUs, 3 left without a fault" in text, text
    assert "placed on GPU 0,2" in render(run, "csv")
