"""GPU faults between configurations (issue 48): an Xid that a GPU reports while no configuration holds it fences
that GPU off placement for the rest of the sweep, said as a pre-flight notice ("GPU 1: Xid 79 at 12:04 (fell off
the bus) — not placed"). A later configuration that would have used it is placed elsewhere and says so in the
queue and the report; one that no longer fits is refused with the fault as its reason. Injected through the
simulator's fake GPU box."""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from engine_helpers import plan_for, write_sweep

from specbench_tui.application.session import make_backend
from specbench_tui.application.viewmodel import build_view
from specbench_tui.core.events import ConfigFinished, ConfigState, Event, Notice, ServerLaunching
from specbench_tui.core.state import replay
from specbench_tui.core.plan import Plan
from specbench_tui.engine.gpus import FakeBackend, GpuBackend
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


# -- a fault that crashed a configuration, kept across a resume, seen after the last one, read from the kernel log

TWO = SWEEP.split("[[configs]]")[0].replace('"fenced"', '"crashed"') + """
[[configs]]
name = "ar"
algorithm = "autoregressive"
[[configs]]
name = "ar2"
algorithm = "autoregressive"
[configs.args]
max-running-requests = 8
[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci"]
max_new_tokens = 32
"""


def _run(plan: Plan, run_dir: RunDir, backend: GpuBackend, on_event: Callable[[Event], None] | None = None,
         resumed: bool = False, retry_crashed: bool = False) -> list[Event]:
    orchestrator = Orchestrator(plan, run_dir, backend=backend, resumed=resumed, retry_crashed=retry_crashed)
    events: list[Event] = []

    def watch(event: Event) -> None:
        events.append(event)
        if on_event is not None:
            on_event(event)

    orchestrator.subscribe(watch)
    try:
        asyncio.run(asyncio.wait_for(orchestrator.run(), 240))
    finally:
        run_dir.close()
    return events


def _two_configurations(tmp_path: Path) -> tuple[Plan, RunDir, FakeBackend, dict[str, str]]:
    """The two-configuration sweep's plan, a new run directory, its fake GPUs and each configuration's name by id."""
    plan = plan_for(write_sweep(tmp_path, TWO, PROFILE))
    run_dir = RunDir.create(tmp_path / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
    backend = make_backend(plan)
    assert isinstance(backend, FakeBackend)
    return plan, run_dir, backend, {c.id: c.name for c in plan.configs}


def _crash_ar(tmp_path: Path, xid: int) -> tuple[Plan, RunDir, list[Event]]:
    from specbench_tui.core.events import ServerReady

    plan, run_dir, backend, names = _two_configurations(tmp_path)

    def inject(event: Event) -> None:
        if isinstance(event, ServerReady) and names[event.config_id] == "ar":
            backend.inject_xid(0, xid)  # while ar runs on GPU 0

    return plan, run_dir, _run(plan, run_dir, backend, inject)


def _launched(plan: Plan, events: list[Event]) -> dict[str, tuple[int, ...]]:
    names = {c.id: c.name for c in plan.configs}
    return {names[e.config_id]: e.gpus for e in events if isinstance(e, ServerLaunching)}


def _errors(events: list[Event]) -> list[str]:
    return [e.text for e in events if isinstance(e, Notice) and e.level in ("error", "warning")]


CRASH_FENCED = re.compile(r"GPU 0: Xid 79 at \d\d:\d\d \(fell off the bus, crashed ar\) \N{EM DASH} not placed")


def test_a_reset_needing_xid_that_crashed_a_configuration_fences_its_gpu_and_is_kept_on_resume(tmp_path: Path) -> None:
    import json

    from specbench_tui.core.events import SweepFinished

    plan, run_dir, events = _crash_ar(tmp_path, 79)
    names = {c.id: c.name for c in plan.configs}
    finished = {names[e.config_id]: e for e in events if isinstance(e, ConfigFinished)}
    assert finished["ar"].state == ConfigState.CRASHED and "Xid 79 on GPU 0 (fell off the bus)" in (finished["ar"].reason or "")
    assert _launched(plan, events) == {"ar": (0,), "ar2": (1,)}  # not on GPU 0 again
    assert any(text.startswith("pre-flight: ") and CRASH_FENCED.search(text) for text in _errors(events)), _errors(events)
    [ending] = [e for e in events if isinstance(e, SweepFinished)]
    assert CRASH_FENCED.search(ending.reason or ""), ending
    kept = json.loads((run_dir.path / "gpu_faults.json").read_text())
    assert kept["fenced"][0] | {"seen_at": None} == {"gpu": 0, "uuid": "GPU-fake-0000", "xid": 79, "seen_at": None,
                                                      "config": "ar"}

    cleared = tmp_path / "cleared"
    shutil.copytree(run_dir.path, cleared)

    # resumed: GPU 0 stays fenced, said with how to clear it; ar runs again elsewhere
    events = _run(plan, RunDir.open(run_dir.path), make_backend(plan), resumed=True, retry_crashed=True)
    said = [t for t in _errors(events) if t.startswith("pre-flight: kept from the earlier run: ")]
    assert said and CRASH_FENCED.search(said[0]) and f"delete {run_dir.path / 'gpu_faults.json'}" in said[0], said
    assert _launched(plan, events) == {"ar": (1,)}

    # the file deleted, as the notice says: GPU 0 is placed on again
    (cleared / "gpu_faults.json").unlink()
    events = _run(plan, RunDir.open(cleared), make_backend(plan), resumed=True, retry_crashed=True)
    assert not [t for t in _errors(events) if "kept from the earlier run" in t]
    assert _launched(plan, events) == {"ar": (0,)}


def test_a_fenced_gpu_gone_after_a_reboot_is_reported_not_fenced(tmp_path: Path) -> None:
    import json

    plan, run_dir, _ = _crash_ar(tmp_path, 79)
    path = run_dir.path / "gpu_faults.json"
    doc = json.loads(path.read_text())
    doc["fenced"][0]["uuid"] = "GPU-swapped-out"
    doc["fenced"].append({"gpu": 0, "uuid": "GPU-fake-0000", "xid": 48, "seen_at": 1.0, "config": "ar"})
    doc["fenced"][1]["uuid"] = "GPU-fake-0002"  # the same GPU now at index 2: fenced there
    path.write_text(json.dumps(doc))
    events = _run(plan, RunDir.open(run_dir.path), make_backend(plan), resumed=True, retry_crashed=True)
    said = _errors(events)
    assert any("GPU 0 (GPU-swapped-out), fenced by Xid 79 (fell off the bus) in the earlier run, is no longer here"
               in t and "not fenced" in t for t in said), said
    assert any("kept from the earlier run: GPU 2: Xid 48" in t for t in said), said
    assert _launched(plan, events) == {"ar": (0,)}


def test_an_application_xid_crashes_the_configuration_but_does_not_fence(tmp_path: Path) -> None:
    plan, run_dir, events = _crash_ar(tmp_path, 13)
    names = {c.id: c.name for c in plan.configs}
    finished = {names[e.config_id]: e for e in events if isinstance(e, ConfigFinished)}
    assert finished["ar"].state == ConfigState.CRASHED and "Xid 13 on GPU 0" in (finished["ar"].reason or "")
    assert _launched(plan, events) == {"ar": (0,), "ar2": (0,)}
    assert not any("not placed" in t for t in _errors(events)), _errors(events)
    assert not (run_dir.path / "gpu_faults.json").exists()


def test_a_fault_after_the_last_configuration_is_said_and_ends_the_summary(tmp_path: Path) -> None:
    from specbench_tui.core.events import SweepFinished

    plan, run_dir, backend, names = _two_configurations(tmp_path)

    def inject(event: Event) -> None:
        if isinstance(event, ConfigFinished) and names[event.config_id] == "ar2":
            backend.inject_xid(3, 74)  # nothing is placed after the last one

    events = _run(plan, run_dir, backend, inject)
    last = re.compile(r"GPU 3: Xid 74 at \d\d:\d\d \(NVLink error\) \N{EM DASH} not placed")
    assert any(last.search(t) for t in _errors(events)), _errors(events)
    [ending] = [e for e in events if isinstance(e, SweepFinished)]
    assert ending.state == "completed" and last.search(ending.reason or "") and "gpu_faults.json" in (ending.reason or "")


def test_the_kernel_logs_xid_lines_fence_like_nvml_events_and_an_unreadable_log_is_said_once(tmp_path: Path) -> None:
    from specbench_tui.engine.gpus.faults import KernelLog

    plan, run_dir, backend, names = _two_configurations(tmp_path)
    kernel: list[str] = []

    def fake_log() -> str:
        text, kernel[:] = "".join(kernel), []
        return text

    backend.kernel_log = KernelLog(reader=fake_log)  # the box's own PCI bus ids tie its lines to GPUs 0 and 1
    closed: list[bool] = []
    backend.kernel_log.close = lambda: closed.append(True)  # type: ignore[method-assign]

    def inject(event: Event) -> None:
        if isinstance(event, ConfigFinished) and names[event.config_id] == "ar":
            kernel.append("[ 812.1] NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', GPU has fallen off the bus.\n")

    events = _run(plan, run_dir, backend, inject)
    fenced = re.compile(r"GPU 0: Xid 79 at \d\d:\d\d \(fell off the bus\) \N{EM DASH} not placed")
    assert any(t.startswith("pre-flight: ") and fenced.search(t) for t in _errors(events)), _errors(events)
    assert _launched(plan, events) == {"ar": (0,), "ar2": (1,)}
    assert closed, "the executor's end left the kernel log open"

    plan, run_dir, backend, _ = _two_configurations(tmp_path / "b")
    backend.kernel_log = KernelLog(kmsg=str(tmp_path / "no-kmsg"), dmesg=("false",))
    events = _run(plan, run_dir, backend)
    said = [t for t in _errors(events) if t.startswith("the kernel log is not readable")]
    assert len(said) == 1 and "no-kmsg" in said[0] and "NVML's Xid events still are" in said[0], said
    names = {c.id: c.name for c in plan.configs}
    assert {names[e.config_id]: e.state for e in events if isinstance(e, ConfigFinished)} == {
        "ar": ConfigState.DONE, "ar2": ConfigState.DONE}
