"""GPU faults (issue 48): an Xid that NVML's critical-error events report on a GPU a configuration holds becomes
that configuration's crash cause ("Xid 79 on GPU 1 (fell off the bus)"), injected here through the simulator's
fake GPU box; an Xid on another GPU is not its."""

from __future__ import annotations

import subprocess
import sys

import pytest

from engine_helpers import SimulatorSweep, plan_for
from test_energy import PROFILE, SWEEP

from repo_paths import REPO
from specbench_tui.application.session import make_backend
from specbench_tui.core.events import ConfigFinished, ConfigState, Event, MeasurementRecorded, ServerLaunching
from specbench_tui.core.gpu_faults import xid_cause
from specbench_tui.engine.gpus import FakeBackend
from specbench_tui.engine.gpus.faults import FaultLedger

ROOT = REPO


def test_an_xid_is_named_and_taken_only_by_the_gpus_it_is_on() -> None:
    assert xid_cause(79, 3) == "Xid 79 on GPU 3 (fell off the bus)"
    assert xid_cause(999, 0) == "Xid 999 on GPU 0 (see NVIDIA's Xid catalogue)"
    box = FakeBackend(count=4)
    box.inject_xid(2, 48)
    faults = FaultLedger(box)
    assert faults.take_xid_cause((0, 1)) is None
    assert faults.take_xid_cause((2, 3)) == "Xid 48 on GPU 2 (double-bit ECC error)"
    assert faults.take_xid_cause((2, 3)) is None  # taken once


def test_the_kernel_logs_xid_lines_are_read_and_tied_to_their_gpu() -> None:
    from specbench_tui.core.gpu_faults import kernel_xid_cause, kernel_xids

    log = ("[ 12.5] NVRM: loading NVIDIA UNIX x86_64 Kernel Module\n"
           "[812.1] NVRM: Xid (PCI:0000:38:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n")
    assert kernel_xids(log) == [("0000:38:00", 79)]
    buses = {"00000000:18:00.0": 0, "00000000:38:00.0": 1}
    assert kernel_xid_cause("0000:38:00", 79, buses) == "Xid 79 on GPU 1 (fell off the bus)"
    assert kernel_xid_cause("0000:99:00", 48, buses) == "Xid 48 on the GPU at PCI 0000:99:00 (double-bit ECC error)"


@pytest.mark.e2e
def test_an_xid_injected_during_a_configuration_becomes_its_crash_cause(simulator_sweep: SimulatorSweep) -> None:
    plan = plan_for(simulator_sweep.write(SWEEP, PROFILE))
    backend = make_backend(plan)
    assert isinstance(backend, FakeBackend)
    names = {c.id: c.name for c in plan.configs}
    gpus: dict[str, tuple[int, ...]] = {}
    injected: list[int] = []
    finished: list[ConfigFinished] = []

    def watch(event: Event) -> None:
        if isinstance(event, ServerLaunching):
            gpus[event.config_id] = event.gpus
        elif isinstance(event, MeasurementRecorded) and names[event.config_id] == "dflash-tp2" and not injected:
            injected.append(gpus[event.config_id][1])
            backend.inject_xid(gpus[event.config_id][1], 79)  # the second of its two GPUs falls off the bus
        elif isinstance(event, ConfigFinished):
            finished.append(event)

    simulator_sweep.run_sync(plan, backend=backend, subscribers=[watch], timeout_s=240)
    by_name = {names[e.config_id]: e for e in finished}
    assert by_name["ar"].state == ConfigState.DONE
    crashed = by_name["dflash-tp2"]
    assert crashed.state == ConfigState.CRASHED, crashed
    assert crashed.reason == f"Xid 79 on GPU {injected[0]} (fell off the bus)", crashed.reason


def test_the_probe_says_cleanly_when_there_is_no_gpu() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu_probe.py"), "--faults"], capture_output=True,
                            text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "energy counter:" in result.stdout and "Xid events:" in result.stdout and "kernel log:" in result.stdout
    assert "Traceback" not in result.stderr


def test_the_probe_reads_the_fake_box_energy_and_an_injected_xid() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu_probe.py"), "--fake", "--faults"],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "energy counter: GPU 0: " in result.stdout
    assert "Xid events: Xid 79 on GPU 0 (fell off the bus)" in result.stdout
