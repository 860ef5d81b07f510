"""One way to run a simulator sweep for tests and benches: write the sweep file (and its simulator profile) into
a folder, run it with the real orchestrator in this process, and stop at the event the caller waits for (the
first crash: red) or at the sweep's end.

The tests reach it through the ``simulator_sweep`` fixture (tests/conftest.py) and ``tests/engine_helpers.py``;
the engine benches through ``bench/_common.py`` (as ``tests.sim_sweeps``). It lives beside the tests, not in the
package: the product constructs its orchestrator in one place (application/host.py), and this is no product code.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specbench_tui.core.events import CrashDetected, Event
from specbench_tui.core.plan import Plan, build_plan
from specbench_tui.core.sweep.loader import load_sweep
from specbench_tui.engine.orchestrator import Orchestrator, SweepOutcome
from specbench_tui.engine.server import find_free_port
from specbench_tui.rundir.store import RunDir

__all__ = ["SweepRun", "crashed", "run_sim_sweep", "write_sim_sweep"]

PORT_MARK = "{port}"
"""Written in a sweep's text where its ``port_base`` goes: replaced by a port found free when the file is written."""


def crashed(event: Event) -> bool:
    """``stop_when`` for "wait for red": the first crash signature matched (the configuration reads crashed)."""
    return isinstance(event, CrashDetected)


def write_sim_sweep(folder: Path, text: str, profile: str | None = None, *, name: str = "sim.toml",
                    profile_name: str = "sim_profile.toml", port_start: int | None = None) -> Path:
    """``text`` as ``folder/name`` (and ``profile``, the simulator profile it names, as ``folder/profile_name``);
    ``{port}`` in ``text`` becomes a port base found free from ``port_start`` (by default one of this process's
    own, so parallel workers do not start from the same port)."""
    folder.mkdir(parents=True, exist_ok=True)
    if profile is not None:
        (folder / profile_name).write_text(profile)
    start = port_start if port_start is not None else 20000 + (os.getpid() * 37) % 20000
    path = folder / name
    path.write_text(text.replace(PORT_MARK, str(find_free_port("127.0.0.1", start))) if PORT_MARK in text else text)
    return path


@dataclass
class SweepRun:
    """A sweep that ran: how it ended, every event it published, its run directory (closed) and orchestrator."""

    plan: Plan
    outcome: SweepOutcome
    run_dir: RunDir
    orchestrator: Orchestrator
    events: list[Event] = field(default_factory=list)
    stopped_by: Event | None = None
    """The event ``stop_when`` answered true for (the sweep was aborted there), or None."""

    def of_type(self, cls: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, cls)]


async def run_sim_sweep(sweep: Path | Plan, runs: Path | None = None, *, timeout_s: float | None = None,
                        subscribers: Iterable[Callable[[Event], None]] = (),
                        stop_when: Callable[[Event], bool] | None = None, stop_now: bool = False,
                        run_dir: RunDir | None = None, **orchestrator_args: Any) -> SweepRun:
    """Run ``sweep`` (a sweep file, or its plan) in this process into a new run directory under ``runs``
    (default: ``runs/`` beside the sweep file), or into ``run_dir`` when given (a resume), within ``timeout_s``
    when given (``TimeoutError`` past it). ``subscribers`` see each event as it is published. When
    ``stop_when(event)`` is true the sweep is aborted there (after the request in flight, or at once with
    ``stop_now``); the run says which event stopped it. ``orchestrator_args`` go to :class:`Orchestrator`."""
    plan = sweep if isinstance(sweep, Plan) else build_plan(load_sweep(sweep))
    if run_dir is None:
        if runs is None:
            if isinstance(sweep, Plan):
                raise ValueError("run_sim_sweep: give `runs` (where the run directory goes) with a plan")
            runs = sweep.parent / "runs"
        run_dir = RunDir.create(runs, plan.sweep.name, plan.sweep.text, plan.to_json())
    orchestrator = Orchestrator(plan, run_dir, **orchestrator_args)
    events: list[Event] = []
    stopped: list[Event] = []
    orchestrator.subscribe(events.append)
    for subscriber in subscribers:
        orchestrator.subscribe(subscriber)
    if stop_when is not None:
        def stop(event: Event) -> None:
            if not stopped and stop_when(event):
                stopped.append(event)
                orchestrator.abort(now=stop_now)

        orchestrator.subscribe(stop)
    try:
        run = orchestrator.run()
        outcome = await (run if timeout_s is None else asyncio.wait_for(run, timeout_s))
    finally:
        run_dir.close()
    return SweepRun(plan, outcome, run_dir, orchestrator, events, stopped[0] if stopped else None)
