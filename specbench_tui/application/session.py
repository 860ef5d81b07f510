"""Setting up a run, shared by the headless runner and the TUI: the plan, the run directory, the GPU backend."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from specbench_tui.core.engines import simulator
from specbench_tui.application.plans import load_plan_or_report
from specbench_tui.core.cluster import ClusterSpec, with_address
from specbench_tui.core.errors import SweepError
from specbench_tui.core.events import Event
from specbench_tui.core.plan import Plan
from specbench_tui.engine.ending import EXIT_INVALID
from specbench_tui.engine.gpus import GpuBackend, NullBackend, open_backend
from specbench_tui.rundir import load_plan
from specbench_tui.rundir.checkpoint import RunCheckpoints
from specbench_tui.rundir.index import IndexUpdater
from specbench_tui.rundir.lock import RunDirBusy, acquire
from specbench_tui.rundir.store import RunDir, StoreError

_T = TypeVar("_T")


@dataclass(frozen=True)
class RunRequest:
    """What ``specbench run`` was asked for: a sweep to start, or a run directory to resume.

    The command line builds it (``cli.py``); it travels to the engine process as JSON (:meth:`to_json`,
    :meth:`from_json`), so nothing below the command line reads the parser's options."""

    sweep: str | None = None
    """The sweep file, or a shipped sweep's stem (ignored when resuming)."""
    resume: Path | None = None
    """A run directory to continue."""
    runs_dir: Path | None = None
    """Where a new run directory goes (default: the sweep's ``runs_dir``)."""
    retry_crashed: bool = False
    """With ``resume``: run crashed and failed configurations again."""
    port_base: int | None = None
    """The first port servers listen on (overrides the sweep's ``engine.port_base``)."""
    ray_address: str | None = None
    """``--ray-address``: run on this Ray cluster (overrides the sweep's ``[cluster]``; a resume may name a new one)."""
    notify: tuple[str, ...] = ()
    """``--notify URL``: Apprise URLs called on crashes, stalls and the end, beside the sweep's ``[notify]``."""
    metrics_port: int | None = None
    """``--metrics-port``: serve Prometheus metrics on 127.0.0.1 there (overrides ``[metrics] port``)."""
    otlp_endpoint: str | None = None
    """``--otlp-endpoint``: push the same metrics over OTLP there (overrides ``[metrics] otlp_endpoint``)."""

    @classmethod
    def of(cls, options: object) -> RunRequest:
        """The request that an object with ``specbench run``'s option names as attributes makes (the command
        line's parsed options; a request is returned as it is)."""
        if isinstance(options, RunRequest):
            return options
        resume, runs_dir = getattr(options, "resume", None), getattr(options, "runs_dir", None)
        return cls(sweep=getattr(options, "sweep", None), resume=Path(resume) if resume else None,
                   runs_dir=Path(runs_dir) if runs_dir else None,
                   retry_crashed=bool(getattr(options, "retry_crashed", False)),
                   port_base=getattr(options, "port_base", None), ray_address=getattr(options, "ray_address", None),
                   notify=tuple(getattr(options, "notify", None) or ()),
                   metrics_port=getattr(options, "metrics_port", None),
                   otlp_endpoint=getattr(options, "otlp_endpoint", None))

    def to_json(self) -> dict[str, str | int | bool | list[str] | None]:
        """The request as JSON values (paths as text), for :meth:`from_json` in another process."""
        return {"sweep": self.sweep, "resume": None if self.resume is None else str(self.resume),
                "runs_dir": None if self.runs_dir is None else str(self.runs_dir),
                "retry_crashed": self.retry_crashed, "port_base": self.port_base, "ray_address": self.ray_address,
                "notify": list(self.notify), "metrics_port": self.metrics_port, "otlp_endpoint": self.otlp_endpoint}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> RunRequest:
        """The request :meth:`to_json` wrote; ValueError naming the field that is not what it wrote."""
        unknown = sorted(set(data) - {field.name for field in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"run request: unknown fields {unknown}")
        resume, runs_dir = _optional(data, "resume", str), _optional(data, "runs_dir", str)
        port_base, metrics_port = _optional(data, "port_base", int), _optional(data, "metrics_port", int)
        retry_crashed = data.get("retry_crashed", False)
        if not isinstance(retry_crashed, bool) or isinstance(port_base, bool) or isinstance(metrics_port, bool):
            raise ValueError("run request: retry_crashed must be true or false, port_base and metrics_port numbers")
        return cls(sweep=_optional(data, "sweep", str), resume=Path(resume) if resume is not None else None,
                   runs_dir=Path(runs_dir) if runs_dir is not None else None, retry_crashed=retry_crashed,
                   port_base=port_base, ray_address=_optional(data, "ray_address", str), notify=_urls(data),
                   metrics_port=metrics_port, otlp_endpoint=_optional(data, "otlp_endpoint", str))


def _urls(data: Mapping[str, object]) -> tuple[str, ...]:
    value = data.get("notify", [])
    if not isinstance(value, list) or not all(isinstance(url, str) for url in value):
        raise ValueError("run request: notify must be a list of strings")
    return tuple(value)


def _optional(data: Mapping[str, object], name: str, kind: type[_T]) -> _T | None:
    value = data.get(name)
    if value is None or isinstance(value, kind):
        return value
    raise ValueError(f"run request: {name} must be a {kind.__name__} or null, not {value!r}")


def prepare_run(request: RunRequest) -> tuple[Plan, RunDir] | int:
    """The plan and run directory (new, or resumed with ``request.resume``), or exit code 2 after saying why."""
    try:
        with_address(ClusterSpec(), request.ray_address)
    except ValueError as exc:
        print(f"specbench: {exc}", file=sys.stderr)
        return EXIT_INVALID
    prepared = _prepare_run(request)
    if isinstance(prepared, int) or request.ray_address is None:
        return prepared
    plan, run_dir = prepared
    cluster = with_address(plan.sweep.cluster, request.ray_address)
    return dataclasses.replace(plan, sweep=dataclasses.replace(plan.sweep, cluster=cluster)), run_dir


def _prepare_run(args: RunRequest) -> tuple[Plan, RunDir] | int:
    if args.resume:
        try:
            run_dir = RunDir.open(args.resume)
            take_ownership(run_dir)
            plan = load_plan(run_dir.path)
            keep_index(run_dir)
        except RunDirBusy as exc:
            print(f"specbench: cannot resume: {exc}", file=sys.stderr)
            return EXIT_INVALID
        except (StoreError, OSError) as exc:
            print(f"specbench: cannot resume {args.resume}: {exc}", file=sys.stderr)
            return EXIT_INVALID
        except SweepError as exc:
            print(f"specbench: the sweep stored in {args.resume} no longer loads:", file=sys.stderr)
            for issue in exc.issues:
                print(f"  {issue}", file=sys.stderr)
            return EXIT_INVALID
        return plan, run_dir
    loaded = load_plan_or_report(args.sweep) if args.sweep else None
    if loaded is None:
        return EXIT_INVALID
    plan = loaded
    runs_dir = args.runs_dir or plan.sweep.runs_dir
    if not runs_dir.is_absolute():
        runs_dir = Path.cwd() / runs_dir
    try:
        run_dir = RunDir.create(runs_dir, plan.sweep.name, plan.sweep.text, plan.to_json())
        take_ownership(run_dir)
        run_dir.write_meta({"sweep_path": str(plan.sweep.path.resolve()), "started": time.time(), "argv": sys.argv})
        keep_index(run_dir)
    except (StoreError, RunDirBusy) as exc:
        print(f"specbench: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except OSError as exc:
        print(f"specbench: cannot lock the run directory: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_INVALID
    return plan, run_dir


def keep_index(run_dir: RunDir) -> None:
    """The run keeps its entry in its runs folder's index as it starts, progresses and ends
    (:class:`~specbench_tui.rundir.index.IndexUpdater`): ``runs`` and ``latest`` read it, not the run's files;
    and its fold checkpoint as its events grow (:class:`~specbench_tui.rundir.checkpoint.RunCheckpoints`): an
    attach to a long run starts from it."""
    keepers = RunKeepers(IndexUpdater(run_dir.path), RunCheckpoints(run_dir.path))
    run_dir.after_event = keepers
    run_dir.on_close.append(keepers.checkpoints.close)
    keepers.index.write()


@dataclass(frozen=True)
class RunKeepers:
    """What a run keeps up to date as it records its events: its index entry and its fold checkpoint."""

    index: IndexUpdater
    checkpoints: RunCheckpoints

    def __call__(self, event: Event) -> None:
        self.index(event)
        self.checkpoints(event)


def take_ownership(run_dir: RunDir) -> None:
    """Hold the run directory's lock (:mod:`specbench_tui.rundir.lock`) until :func:`give_up_ownership`
    or the end of the process; raises RunDirBusy naming the owner."""
    run_dir.owner_lock = acquire(run_dir.path)


def give_up_ownership(run_dir: RunDir) -> None:
    """Release the run directory's lock (the sweep is over)."""
    lock, run_dir.owner_lock = run_dir.owner_lock, None
    if lock is not None:
        lock.release()


def make_backend(plan: Plan) -> GpuBackend:
    """Real NVML for real servers; for the simulator, the scripted 8-GPU box that follows its servers; none on a
    Ray cluster (each node samples its own GPUs and sends them with the node's name)."""
    if plan.sweep.cluster.on_ray:
        return NullBackend("GPUs are sampled on the Ray cluster's nodes, grouped by node in the GPU panel")
    if simulator.simulated(plan.sweep.engine):
        count = max(8, max(plan.sweep.gpus or (0,)) + 1)
        return open_backend("fake", count=count)
    try:
        return open_backend("auto")
    except Exception as exc:  # noqa: BLE001 - telemetry is optional; the sweep still runs
        return open_backend("none") if not str(exc) else NullBackend(f"GPU telemetry unavailable: {exc}")
