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
if str(ROOT / "tests") not in sys.path:  # tests/sim_sweeps.py: the tests run their simulator sweeps with it too
    sys.path.append(str(ROOT / "tests"))

import sim_sweeps as testing  # noqa: E402
from specbench_tui.core.events import Event  # noqa: E402
from specbench_tui.rundir.store import RunDir  # noqa: E402


def write_sim_sweep(folder: Path, profile: str, sweep: str, port_start: int) -> Path:
    """``profile.toml`` and ``sweep.toml`` in ``folder``; ``{port}`` in ``sweep`` becomes a free port base."""
    return testing.write_sim_sweep(folder, sweep, profile, name="sweep.toml", profile_name="profile.toml",
                                   port_start=port_start)


async def run_sweep(path: Path, subscribers: Iterable[Callable[[Event], None]] = ()) -> tuple[RunDir, list[Event]]:
    """Run the sweep at ``path`` in this process into ``runs/`` beside it; the run directory and every event
    (``subscribers`` are handed each event as it is published, too). The tests run sweeps with the same helper
    (tests/sim_sweeps.py)."""
    run = await testing.run_sim_sweep(path, subscribers=subscribers)
    return run.run_dir, run.events


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
