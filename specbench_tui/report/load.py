"""Read a run directory for a report: whatever is readable, with a warning for whatever is not.

A run directory in progress, cut by a crash, or copied without some files is still worth a report, so only a
path that is not a run directory at all is an error (:class:`NotARunDir`); torn lines, a missing
``plan.json`` or ``env.json`` become warnings that the report prints.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specbench_tui.core.results import RunAnalysis
from specbench_tui.core.ledger import Ledger
from specbench_tui.core.nodes import RunHardware, run_hardware
from specbench_tui.store import ReadReport, RunDir, StoreError, read_regular

RUN_DIR_MARKERS = ("sweep.toml", "plan.json", "results.jsonl", "events.jsonl")
"""Files of which at least one must exist for a directory to be taken as a run directory."""


class NotARunDir(Exception):
    """The path is not a run directory; the message says what is there instead."""


@dataclass(frozen=True)
class LoadedRun:
    """A run directory read and analysed."""

    path: Path
    analysis: RunAnalysis
    env: dict[str, Any] | None
    warnings: tuple[str, ...] = field(default=())
    """What could not be read (torn lines, missing files), to be shown with the report."""
    hardware: RunHardware = field(default_factory=RunHardware)
    """Where each configuration ran: nodes, GPUs, GPU models (:mod:`specbench_tui.core.nodes`)."""

    @property
    def name(self) -> str:
        return self.path.name


def _read_json(path: Path, warnings: list[str], required_for: str | None) -> dict[str, Any] | None:
    if not path.exists():
        if required_for:
            warnings.append(f"{path.name} is missing: {required_for}")
        return None
    try:
        data = json.loads(read_regular(path).decode("utf-8", errors="replace"))
    except StoreError as exc:
        warnings.append(f"{exc}; ignored")
        return None
    except (OSError, ValueError, RecursionError) as exc:
        warnings.append(f"{path.name} is unreadable ({exc.__class__.__name__}: {str(exc)[:200]}); ignored")
        return None
    if not isinstance(data, dict):
        warnings.append(f"{path.name} is not a JSON object; ignored")
        return None
    return data


def load_run(path: str | Path) -> LoadedRun:
    """Read and analyse the run directory at ``path``; raise :class:`NotARunDir` when it is not one."""
    path = Path(path).expanduser()
    if not path.exists():
        raise NotARunDir(f"{path}: no such directory")
    if not path.is_dir():
        raise NotARunDir(f"{path}: is a file, not a run directory")
    if not any((path / marker).exists() for marker in RUN_DIR_MARKERS):
        raise NotARunDir(f"{path}: not a run directory (none of {', '.join(RUN_DIR_MARKERS)} is there)")
    warnings: list[str] = []
    plan = _read_json(path / "plan.json", warnings,
                      "configurations are taken from results and events, without TP, budget or baseline")
    env = _read_json(path / "env.json", warnings, None)
    run = RunDir(path)
    report = ReadReport()
    try:
        measurements = run.read_measurements(report)
        events = run.read_events(report)
    except StoreError as exc:
        raise NotARunDir(str(exc)) from None
    except OSError as exc:
        raise NotARunDir(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not (path / "results.jsonl").exists():
        warnings.append("results.jsonl is missing: no measurements")
    if not (path / "events.jsonl").exists():
        warnings.append("events.jsonl is missing: states, crash signatures and skip reasons are unknown")
    warnings.extend(report.summary())
    ledger = Ledger.from_run(plan, measurements, events, engine_alive=engine_owns(path) is not False)
    return LoadedRun(path=path, analysis=ledger.analyse(), env=env, warnings=tuple(warnings),
                     hardware=run_hardware(ledger.events, ledger.measurements.values(), env))


def engine_owns(path: Path) -> bool | None:
    """Whether a live specbench holds the run directory's lock (``.owner.lock``), read from ``/proc/locks``
    without taking any lock (taking one, even shared, could make a starting engine refuse the directory); None
    when it cannot be told (no lock file: an older run directory; no ``/proc/locks``)."""
    try:
        stat = (path / ".owner.lock").stat()
        locks = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    wanted = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    for line in locks.splitlines():
        fields = line.split()
        if "FLOCK" in fields and any(f.lower() == wanted for f in fields):
            return True
    return False
