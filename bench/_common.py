"""Shared by the engine benches: a sweep against the simulator written into a folder, run by the real orchestrator
in this process, and the figure / verdict lines ``run_all.py`` reads."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from specbench_tui.core.events import Event  # noqa: E402
from specbench_tui.core.plan import build_plan  # noqa: E402
from specbench_tui.core.sweep.loader import load_sweep  # noqa: E402
from specbench_tui.engine.orchestrator import Orchestrator  # noqa: E402
from specbench_tui.engine.server import find_free_port  # noqa: E402
from specbench_tui.rundir.store import RunDir  # noqa: E402


def write_sim_sweep(folder: Path, profile: str, sweep: str, port_start: int) -> Path:
    """``profile.toml`` and ``sweep.toml`` in ``folder``; ``{port}`` in ``sweep`` becomes a free port base."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "profile.toml").write_text(profile)
    port = find_free_port("127.0.0.1", port_start)
    path = folder / "sweep.toml"
    path.write_text(sweep.replace("{port}", str(port)))
    return path


async def run_sweep(path: Path, subscribers: Iterable[Callable[[Event], None]] = ()) -> tuple[RunDir, list[Event]]:
    """Run the sweep at ``path`` in this process into ``runs/`` beside it; the run directory and every event
    (``subscribers`` are handed each event as it is published, too)."""
    plan = build_plan(load_sweep(path))
    run_dir = RunDir.create(path.parent / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
    orchestrator = Orchestrator(plan, run_dir)
    events: list[Event] = []
    orchestrator.subscribe(events.append)
    for subscriber in subscribers:
        orchestrator.subscribe(subscriber)
    try:
        await orchestrator.run()
    finally:
        run_dir.close()
    return run_dir, events


def figure(name: str, value: str, target: str, ok: bool) -> None:
    """One ``FIGURE|name|value|target|pass`` line (``FAIL`` when not ``ok``)."""
    print(f"FIGURE|{name}|{value}|{target}|{'pass' if ok else 'FAIL'}")


def verdict(failures: list[str]) -> int:
    """Print each failure (or PASS); the exit status: 1 when anything failed."""
    for failure in failures:
        print(f"FAIL: {failure}")
    if not failures:
        print("PASS")
    return 1 if failures else 0
