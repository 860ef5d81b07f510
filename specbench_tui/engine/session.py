"""Setting up a run, shared by the headless runner and the TUI: the plan, the run directory, the GPU backend."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from specbench_tui.core.errors import SweepError
from specbench_tui.core.plan import Plan, build_plan
from specbench_tui.core.sweep import parse_sweep
from specbench_tui.engine.gpus import GpuBackend, open_backend
from specbench_tui.engine.runlock import RunDirBusy, acquire
from specbench_tui.engine.store import RunDir, StoreError

EXIT_INVALID = 2


def prepare_run(args: argparse.Namespace) -> tuple[Plan, RunDir] | int:
    """The plan and run directory (new, or resumed with ``args.resume``), or exit code 2 after saying why."""
    from specbench_tui.cli import load_plan_or_report

    if args.resume:
        try:
            run_dir = RunDir.open(Path(args.resume))
            take_ownership(run_dir)
            meta = run_dir.read_json("run.json") or {}
            text = (run_dir.path / "sweep.toml").read_text(encoding="utf-8")
            origin = Path(meta.get("sweep_path") or run_dir.path / "sweep.toml")
            plan = build_plan(parse_sweep(text, origin, str(run_dir.path / "sweep.toml")))
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
    plan = load_plan_or_report(args.sweep)
    if plan is None:
        return EXIT_INVALID
    runs_dir = Path(args.runs_dir) if getattr(args, "runs_dir", None) else plan.sweep.runs_dir
    if not runs_dir.is_absolute():
        runs_dir = Path.cwd() / runs_dir
    try:
        run_dir = RunDir.create(runs_dir, plan.sweep.name, plan.sweep.text, plan.to_json())
        take_ownership(run_dir)
        run_dir.write_json("run.json", {"sweep_path": str(plan.sweep.path.resolve()), "started": time.time(),
                                        "argv": sys.argv})
    except (StoreError, RunDirBusy) as exc:
        print(f"specbench: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except OSError as exc:
        print(f"specbench: cannot lock the run directory: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_INVALID
    return plan, run_dir


def take_ownership(run_dir: RunDir) -> None:
    """Hold the run directory's lock (:mod:`specbench_tui.engine.runlock`) until :func:`give_up_ownership`
    or the end of the process; raises RunDirBusy naming the owner."""
    run_dir.owner_lock = acquire(run_dir.path)  # type: ignore[attr-defined]


def give_up_ownership(run_dir: RunDir) -> None:
    """Release the run directory's lock (the sweep is over)."""
    lock = getattr(run_dir, "owner_lock", None)
    if lock is not None:
        lock.release()


def make_backend(plan: Plan) -> GpuBackend:
    """Real NVML for real servers; for the simulator, the scripted 8-GPU box that follows its servers."""
    if plan.sweep.engine.launcher == "simulator":
        count = max(8, max(plan.sweep.gpus or (0,)) + 1)
        return open_backend("fake", count=count)
    try:
        return open_backend("auto")
    except Exception as exc:  # noqa: BLE001 - telemetry is optional; the sweep still runs
        return open_backend("none") if not str(exc) else _null(f"GPU telemetry unavailable: {exc}")


def _null(hint: str) -> GpuBackend:
    from specbench_tui.engine.gpus import NullBackend

    return NullBackend(hint)
