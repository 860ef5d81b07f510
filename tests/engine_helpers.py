"""Helpers for the engine's tests: sweeps written into a temporary folder, in-process runs, leftover checks."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from specbench_tui.core.events import Event
from specbench_tui.core.plan import Plan, build_plan
from specbench_tui.core.sweep import load_sweep
from specbench_tui.engine.orchestrator import Orchestrator, SweepOutcome
from specbench_tui.engine.server import find_free_port
from specbench_tui.engine.store import RunDir

DATA = Path(__file__).parent / "data"


def write_sweep(folder: Path, text: str, profile: str | None = None, name: str = "sweep.toml") -> Path:
    """A sweep file (and its simulator profile) in ``folder``; ``{port}`` in ``text`` becomes a free port base."""
    folder.mkdir(parents=True, exist_ok=True)
    if profile is not None:
        (folder / "sim_profile.toml").write_text(profile)
    port = find_free_port("127.0.0.1", 20000 + (os.getpid() * 37) % 20000)
    path = folder / name
    path.write_text(text.replace("{port}", str(port)))
    return path


def copy_data(folder: Path, *names: str) -> None:
    for name in names:
        shutil.copy(DATA / name, folder / name)


def plan_for(path: Path) -> Plan:
    return build_plan(load_sweep(path))


async def run_plan(plan: Plan, runs: Path, **kwargs) -> tuple[SweepOutcome, list[Event], RunDir, Orchestrator]:
    """Run ``plan`` in-process into a new run directory under ``runs``; returns every event published."""
    run_dir = RunDir.create(runs, plan.sweep.name, plan.sweep.text, plan.to_json())
    orchestrator = Orchestrator(plan, run_dir, **kwargs)
    events: list[Event] = []
    orchestrator.subscribe(events.append)
    try:
        outcome = await orchestrator.run()
    finally:
        run_dir.close()
    return outcome, events, run_dir, orchestrator


def processes_with_env(marker: str) -> list[int]:
    """Live processes whose environment mentions ``marker`` (a test's temporary folder)."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ and state != b"Z":
            found.append(int(entry))
    return found


def wait_no_processes(marker: str, timeout_s: float = 5.0) -> list[int]:
    """Wait until no process carries ``marker``; the survivors (then SIGKILLed, so tests leave nothing)."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = processes_with_env(marker)
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for pid in alive:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    return alive


def of_type(events: list[Event], cls: type) -> list:
    return [e for e in events if isinstance(e, cls)]
