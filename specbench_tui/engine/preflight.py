"""Before the first launch: what would make every launch fail, what is left of earlier runs, who holds our GPUs,
and the run directory's environment fingerprint.

The fingerprint (:mod:`specbench_tui.engine.fingerprint`) is written once per run directory, in a worker thread,
while the first server starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Collection
from pathlib import Path

from specbench_tui.core.engines import simulator
from specbench_tui.core.engines.registry import engine_flags
from specbench_tui.core.events import Event, Notice
from specbench_tui.core.plan import Plan, PlannedConfig
from specbench_tui.core.sweep.schema import EngineSpec
from specbench_tui.core.engines.registry import get_profile
from specbench_tui.engine.cluster import cluster_problems, cluster_workload_problems
from specbench_tui.engine.fingerprint import collect_async
from specbench_tui.engine.leases import LeasedGpuPool
from specbench_tui.engine.leftovers import find_leftovers, format_leftovers
from specbench_tui.engine.local_executor import arg_values
from specbench_tui.engine.machine import Machine
from specbench_tui.rundir.store import RunDir

Publish = Callable[[Event], None]


def _local_path(value: str) -> bool:
    """Whether a model argument names a local path rather than a hub repo id."""
    return value.startswith(("/", "./", "../", "~"))


def preflight(plan: Plan, pending: Collection[str], machine: Machine, run_dir: RunDir) -> list[str]:
    """Problems that would make every launch fail or wait for nothing (``pending``: the ids of the
    configurations still to run); empty when all is well."""
    runnable = [c for c in plan.runnable() if c.id in pending]
    return [*_missing_models(plan, runnable), *_missing_programs(plan.sweep.engine),
            *_gpu_problems(plan, runnable, machine), *cluster_problems(plan.sweep.cluster), *_unwritable(run_dir)]


def _missing_models(plan: Plan, runnable: list[PlannedConfig]) -> list[str]:
    """Each local model path (of any model flag of the configurations to run) that does not exist."""
    missing: dict[str, str] = {}
    for config in runnable:
        for flag, what in engine_flags(plan.sweep.engine.profile).model_flags:
            for value in arg_values(config.argv, flag):
                if _local_path(value) and not Path(value).expanduser().exists():
                    missing.setdefault(value, what)
    problems = []
    for value, what in missing.items():
        hint = (" (/dev/shm is a RAM disk: it is emptied by every reboot; copy the model back first)"
                if value.startswith("/dev/shm") else "")
        problems.append(f"{what} path {value} does not exist{hint}")
    return problems


def _missing_programs(engine: EngineSpec) -> list[str]:
    """The engine's Python, or the command it launches, when it is not there."""
    problems = []
    if engine.launcher != "command" and engine.python and "/" in engine.python \
            and not Path(engine.python).expanduser().exists():
        problems.append(f"engine.python {engine.python} does not exist")
    if engine.launcher == "command" and engine.command and not Path(engine.command[0]).exists() \
            and not any((Path(p) / engine.command[0]).exists() for p in os.environ.get("PATH", "").split(":")):
        problems.append(f"engine.command {engine.command[0]} is not an executable path")
    return problems


def _gpu_problems(plan: Plan, runnable: list[PlannedConfig], machine: Machine) -> list[str]:
    """No GPU to run on, a pool naming GPUs that are not there, or a configuration needing more than there are;
    on a Ray cluster, what its workloads need of it."""
    sweep = plan.sweep
    indices = machine.gpu_indices()
    visible = machine.backend.device_count()
    problems = []
    if sweep.cluster.on_ray:  # the GPUs are the cluster's nodes' (checked when the executor opens)
        problems.extend(cluster_workload_problems(plan))
    elif runnable and visible == 0 and (not indices or not simulator.simulated(sweep.engine)) and not machine.on_cpu():
        hint = machine.backend.hint or "no GPU is visible"
        problems.append(f"no GPUs to run on ({sweep.engine.launcher} launcher): {hint}")
    elif visible and sweep.gpus is not None and max(sweep.gpus) >= visible:
        problems.append(f"sweep.gpus asks for GPU {max(sweep.gpus)} but only {visible} are visible")
    needed = max((c.gpus_needed for c in runnable), default=0)
    if indices and needed > len(indices) and not sweep.cluster.on_ray:
        problems.append(f"a configuration needs {needed} GPUs but {len(indices)} are available")
    return problems


def _unwritable(run_dir: RunDir) -> list[str]:
    """The run directory, when a file cannot be written in it."""
    probe = run_dir.path / ".write-test"
    try:
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        return [f"the run directory {run_dir.path} is not writable: {exc.strerror or exc}"]
    return []


async def report_leftovers(plan: Plan, run_dir: RunDir, publish: Publish) -> None:
    """A warning for each server of an earlier run (in this run directory's folder, or the sweep's
    ``runs_dir``) that is still alive, with the command that ends it; nothing is killed."""
    roots = [run_dir.path.parent]
    runs_dir = plan.sweep.runs_dir if plan.sweep.runs_dir.is_absolute() else Path.cwd() / plan.sweep.runs_dir
    with contextlib.suppress(OSError):
        if runs_dir.resolve() != roots[0].resolve():
            roots.append(runs_dir)
    try:
        found = await asyncio.to_thread(find_leftovers, roots)
    except Exception as exc:  # noqa: BLE001 - a look at /proc must never stop a sweep
        print(f"specbench: looking for leftover servers failed: {exc!r}", file=sys.stderr)
        return
    for item in found:  # another live run's server is said as that run's, never as ours to end
        for text in format_leftovers([item]):
            publish(Notice(level="info" if item.owner is not None else "warning", text=text))


async def say_gpus_taken(pool: object, machine: Machine, publish: Publish) -> None:
    """Pre-flight, said not failed: GPUs of the pool another specbench (or another job's memory) holds now;
    configurations wait for them."""
    if not isinstance(pool, LeasedGpuPool) or machine.on_cpu() or not pool.indices:
        return
    try:
        samples = await asyncio.to_thread(machine.backend.sample)
    except Exception:  # noqa: BLE001 - telemetry must never stop a sweep
        samples = []
    busy = await asyncio.to_thread(pool.taken_elsewhere, pool.indices, samples)
    if not busy:
        return
    held = "; ".join(f"GPU {i}: {who}" for i, who in sorted(busy.items()))
    if len(busy) == len(pool.indices):
        publish(Notice(level="warning", text=f"pre-flight: the whole GPU pool {list(pool.indices)} is taken "
                                             f"({held}); configurations wait until GPUs are free"))
    else:
        publish(Notice(level="info", text=f"GPUs held elsewhere are not placed on while they are: {held}"))


async def write_env(plan: Plan, run_dir: RunDir, machine: Machine, gpu_pool: tuple[int, ...], *, python: str,
                    profile: str, publish: Publish) -> None:
    """The environment fingerprint, once per run directory (a resumed run keeps the first one)."""
    sweep = plan.sweep
    if run_dir.has_env():
        return
    try:
        doc = await collect_async(
            backend=machine.backend, sweep_path=run_dir.sweep_file, python=sweep.engine.python or python,
            packages=get_profile(profile).python_packages,
            # One path resolution at start-up, before any server runs: not worth a thread.
            extra={"sweep_source": str(Path(sweep.path).resolve()),  # noqa: ASYNC240
                   "launcher": sweep.engine.launcher, "engine_profile": profile, "concurrent": sweep.concurrent,
                   "gpu_pool": list(gpu_pool)})
        run_dir.write_env(doc)
    except Exception as exc:  # noqa: BLE001 - a fingerprint problem is said, never fatal
        publish(Notice(level="warning", text=f"the environment fingerprint could not be written: {exc}"))
