"""Read a run directory for a report: whatever is readable, with a warning for whatever is not.

A run directory in progress, cut by a crash, or copied without some files is still worth a report, so only a
path that is not a run directory at all is an error (:class:`NotARunDir`); torn lines, a missing plan or
environment file become warnings that the report prints. The files are read through the run-directory package.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from specbench_tui.core.energy import EnergyCell, energy_from_run
from specbench_tui.core.results import RunAnalysis
from specbench_tui.core.intervals import with_intervals
from specbench_tui.core.ledger import Ledger, Progress
from specbench_tui.core.measuring_host import HostLoad, host_loads, saturated_warning
from specbench_tui.core.nodes import RunHardware, run_hardware
from specbench_tui.rundir import (ENV_JSON, EVENTS, PLAN_JSON, RESULTS, RUN_DIR_MARKERS, engine_owns, has_file,
                                  read_object)
from specbench_tui.rundir.store import MAX_JSON_BYTES, ReadReport, RunDir, StoreError

__all__ = ["RUN_DIR_MARKERS", "LoadedRun", "NotARunDir", "engine_owns", "load_run"]


class NotARunDir(Exception):
    """The path is not a run directory; the message says what is there instead."""


@dataclass(frozen=True)
class LoadedRun:
    """A run directory read and analysed."""

    path: Path
    analysis: RunAnalysis
    env: dict[str, object] | None
    warnings: tuple[str, ...] = field(default=())
    """What could not be read (torn lines, missing files), to be shown with the report."""
    hardware: RunHardware = field(default_factory=RunHardware)
    """Where each configuration ran: nodes, GPUs, GPU models (:mod:`specbench_tui.core.nodes`)."""
    progress: Progress = field(default_factory=lambda: Progress(0, 0, 0, 0))
    """Configurations ran / to run / skipped and measurements, as ``logs``, ``ps``, ``runs`` and the TUI count."""
    host_loads: Mapping[tuple[str, str], HostLoad] = field(default_factory=dict)
    """Per (configuration id, workload): the most loaded window of the measuring host on record."""
    energy: tuple[EnergyCell, ...] = ()
    """Per configuration and workload, the energy figures (:mod:`specbench_tui.core.energy`); none for a run that
    measured no energy."""

    @property
    def name(self) -> str:
        return self.path.name


def _read_json(path: Path, name: str, warnings: list[str], required_for: str | None) -> dict[str, object] | None:
    try:  # the plan and the environment document grow with the configurations (10,000 of them: about 9 MB): the store's limit
        data = read_object(path, name, MAX_JSON_BYTES)
    except StoreError as exc:
        warnings.append(f"{exc}; ignored")
        return None
    except OSError as exc:
        warnings.append(f"{name} is unreadable ({exc.__class__.__name__}: {str(exc)[:200]}); ignored")
        return None
    if data is None and required_for:
        warnings.append(f"{name} is missing: {required_for}")
    return data


def load_run(path: str | Path) -> LoadedRun:
    """Read and analyse the run directory at ``path``; raise :class:`NotARunDir` when it is not one."""
    path = Path(path).expanduser()
    if not path.exists():
        raise NotARunDir(f"{path}: no such directory")
    if not path.is_dir():
        raise NotARunDir(f"{path}: is a file, not a run directory")
    if not any(has_file(path, marker) for marker in RUN_DIR_MARKERS):
        raise NotARunDir(f"{path}: not a run directory (none of {', '.join(RUN_DIR_MARKERS)} is there)")
    warnings: list[str] = []
    plan = _read_json(path, PLAN_JSON, warnings,
                      "configurations are taken from results and events, without TP, budget or baseline")
    env = _read_json(path, ENV_JSON, warnings, None)
    run = RunDir(path)
    report = ReadReport()
    try:
        measurements = run.read_measurements(report)
        events = run.read_events(report)
    except StoreError as exc:
        raise NotARunDir(str(exc)) from None
    except OSError as exc:
        raise NotARunDir(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not has_file(path, RESULTS):
        warnings.append(f"{RESULTS} is missing: no measurements")
    if not has_file(path, EVENTS):
        warnings.append(f"{EVENTS} is missing: states, crash signatures and skip reasons are unknown")
    warnings.extend(report.summary())
    ledger = Ledger.from_run(plan, measurements, events, engine_alive=engine_owns(path) is not False)
    analysis = with_intervals(ledger.analyse(), ledger.measurements.values())  # the report's ± (core/intervals.py)
    loads = host_loads(ledger.events)
    hot = saturated_warning(loads)
    if hot is not None:
        warnings.append(hot)
    return LoadedRun(path=path, analysis=analysis, env=env, warnings=tuple(warnings),
                     hardware=run_hardware(ledger.events, ledger.measurements.values(), env),
                     progress=ledger.progress(), host_loads=loads,
                     energy=tuple(energy_from_run(plan, events, ledger.measurements.values())))
