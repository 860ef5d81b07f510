"""Finding runs: every run directory under a runs folder with its state, progress and live owner.

``specbench runs`` prints them; ``specbench run --resume latest`` takes the newest. A run's state is read
from its events (how the sweep ended), its owner from the run directory's lock (a live specbench holds it), so
a run whose engine died mid-sweep reads ``interrupted`` and can be resumed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from specbench_tui.core.events import ConfigFinished, ConfigState, ConfigStateChanged, Event, SweepFinished
from specbench_tui.runlock import read_owner
from specbench_tui.store import ReadReport, RunDir, StoreError
from specbench_tui.report.load import RUN_DIR_MARKERS, engine_owns

DEFAULT_RUNS_DIR = Path("runs")


@dataclass(frozen=True)
class RunInfo:
    """One run directory as ``specbench runs`` lists it."""

    path: Path
    sweep: str
    state: str
    """running (a live specbench owns it), completed, aborted, failed, or interrupted (no end recorded)."""
    ran: int
    """Configurations that ran to an end (done, crashed or failed)."""
    skipped: int
    """Configurations skipped (by the plan or the user): out of the count to run, as in the TUI's header."""
    total: int
    owner_pid: int | None
    """The pid of the specbench running it, while one does."""
    started: float

    @property
    def progress(self) -> str:
        """``2/11 ran, 3 skipped``: the TUI header's words."""
        return progress_text(self.ran, self.total, self.skipped)


def progress_text(ran: int, total: int, skipped: int) -> str:
    """``2/11 ran, 3 skipped``: what ran of what is to run (skipped ones are counted apart, never as done)."""
    to_run = f"{max(0, total - skipped)}" if total else "?"
    return f"{ran}/{to_run} ran" + (f", {skipped} skipped" if skipped else "")


def _final_states(events: Iterable[Event]) -> dict[str, ConfigState]:
    states: dict[str, ConfigState] = {}
    for event in events:
        if isinstance(event, (ConfigStateChanged, ConfigFinished)):
            states[event.config_id] = event.state
    return states


def read_run(path: Path) -> RunInfo | None:
    """What ``path`` holds, or None when it is not a run directory."""
    if not path.is_dir() or not any((path / marker).exists() for marker in RUN_DIR_MARKERS):
        return None
    run = RunDir(path)
    plan = run.read_json("plan.json") or {}
    meta = run.read_json("run.json") or {}
    try:
        events = run.read_events(ReadReport())
    except (StoreError, OSError):
        events = []
    listed = plan.get("configs")
    configs = listed if isinstance(listed, list) else []
    sweep = plan.get("sweep") if isinstance(plan.get("sweep"), str) else None
    states = _final_states(events)
    skipped = sum(1 for state in states.values() if state is ConfigState.SKIPPED)
    ran = sum(1 for state in states.values() if state.final and state is not ConfigState.SKIPPED)
    ended = next((e for e in reversed(events) if isinstance(e, SweepFinished)), None)
    owned = engine_owns(path)
    owner_pid: int | None = None
    if owned:
        pid = read_owner(path).get("pid")
        owner_pid = pid if isinstance(pid, int) else None
        state = "running"
    elif ended is not None:
        state = ended.state
    else:
        state = "interrupted"
    started = meta.get("started")
    if not isinstance(started, (int, float)):
        try:
            started = path.stat().st_mtime
        except OSError:
            started = 0.0
    return RunInfo(path=path, sweep=str(sweep or path.name), state=state, ran=ran, skipped=skipped,
                   total=len(configs) or len(states), owner_pid=owner_pid, started=float(started))


def list_runs(runs_dir: Path = DEFAULT_RUNS_DIR) -> list[RunInfo]:
    """Every run directory directly under ``runs_dir``, oldest first."""
    try:
        children = list(runs_dir.iterdir())
    except OSError:
        return []
    runs = [info for child in children if (info := read_run(child)) is not None]
    return sorted(runs, key=lambda r: (r.started, r.path.name))


def latest_run(runs_dir: Path = DEFAULT_RUNS_DIR) -> RunInfo | None:
    """The run started last under ``runs_dir``."""
    runs = list_runs(runs_dir)
    return runs[-1] if runs else None


def format_runs(runs: list[RunInfo], now: float | None = None) -> str:
    """A table: state, progress, owner pid (while live), when it started, and the path."""
    now = time.time() if now is None else now
    head = ("STATE", "PROGRESS", "OWNER", "STARTED", "SWEEP", "PATH")
    rows = [head]
    for run in runs:
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.started)) if run.started else "?"
        rows.append((run.state, run.progress, f"pid {run.owner_pid}" if run.owner_pid else "-", started,
                     run.sweep, str(run.path)))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(head) - 1)]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row[:-1], widths)) + "  " + str(row[-1])
             for row in rows]
    return "\n".join(lines)
