"""Helpers for the engine's tests: sweeps written into a temporary folder, in-process runs, leftover checks."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import pytest

from specbench_tui.core.events import Event
from specbench_tui.core.plan import Plan, build_plan
from specbench_tui.core.sweep.loader import load_sweep
from specbench_tui.engine.orchestrator import Orchestrator, SweepOutcome
from sim_sweeps import SweepRun, run_sim_sweep, write_sim_sweep
from specbench_tui.rundir.store import RunDir

DATA = Path(__file__).parent / "data"


def write_sweep(folder: Path, text: str, profile: str | None = None, name: str = "sweep.toml") -> Path:
    """A sweep file (and its simulator profile) in ``folder``; ``{port}`` in ``text`` becomes a free port base
    (:func:`sim_sweeps.write_sim_sweep`)."""
    return write_sim_sweep(folder, text, profile, name=name)


def copy_data(folder: Path, *names: str) -> None:
    for name in names:
        shutil.copy(DATA / name, folder / name)


def plan_for(path: Path) -> Plan:
    return build_plan(load_sweep(path))


async def run_plan(plan: Plan, runs: Path, *, timeout_s: float | None = None,
                   **kwargs) -> tuple[SweepOutcome, list[Event], RunDir, Orchestrator]:
    """Run ``plan`` in-process into a new run directory under ``runs`` (within ``timeout_s`` when given);
    returns every event published (:func:`sim_sweeps.run_sim_sweep`)."""
    run = await run_sim_sweep(plan, runs, timeout_s=timeout_s, **kwargs)
    return run.outcome, run.events, run.run_dir, run.orchestrator


class SimulatorSweep:
    """What the ``simulator_sweep`` fixture gives a test: write a sweep (and its simulator profile) into the
    test's folder, run it in this process, stop at red (``stop_when=crashed``) or at its end."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def write(self, text: str, profile: str | None = None, **options: Any) -> Path:
        return write_sim_sweep(self.folder, text, profile, **options)

    async def run(self, sweep: Path | str | Plan, profile: str | None = None, **options: Any) -> SweepRun:
        """Run ``sweep``: a sweep file, its plan, or a sweep's text (written first, with ``profile``)."""
        if isinstance(sweep, str):
            sweep = self.write(sweep, profile)
        if isinstance(sweep, Plan):
            options.setdefault("runs", self.folder / "runs")
        return await run_sim_sweep(sweep, **options)

    def run_sync(self, sweep: Path | str | Plan, profile: str | None = None, **options: Any) -> SweepRun:
        """:meth:`run` from a test that is not async."""
        return asyncio.run(self.run(sweep, profile, **options))


def proc_stat(pid: int) -> tuple[str, int] | None:
    """``(state, parent pid)`` of ``pid`` from ``/proc/<pid>/stat``; None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return fields[0].decode(), int(fields[1])


def processes_where(matches: Callable[[bytes], bool], exclude: Collection[int] = frozenset(),
                    dead: Collection[str] = ("Z",)) -> list[int]:
    """Live processes (this one and ``exclude`` left out) whose raw environment satisfies ``matches``;
    a process whose state is in ``dead`` does not count."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        if pid == os.getpid() or pid in exclude:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        if matches(environ):
            stat = proc_stat(pid)
            if stat is not None and stat[0] not in dead:
                found.append(pid)
    return found


def processes_with_env(marker: str) -> list[int]:
    """Live processes whose environment mentions ``marker`` (a test's temporary folder)."""
    needle = marker.encode()
    return processes_where(lambda environ: needle in environ)


def wait_until_none(find: Callable[[], list[int]], timeout_s: float = 10.0) -> list[int]:
    """Wait until ``find()`` comes back empty; the survivors (then SIGKILLed, so tests leave nothing). Death is
    not instant: a process killed by its parent-death signal needs a scheduling slot to exit, seconds on a
    loaded box, so the default is generous (the wait ends when nothing is left)."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = find()
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return alive


def wait_no_processes(marker: str, timeout_s: float = 10.0) -> list[int]:
    """Wait until no process carries ``marker``; the survivors (then SIGKILLed, so tests leave nothing)."""
    return wait_until_none(lambda: processes_with_env(marker), timeout_s)


def as_from_a_terminal() -> None:
    """``preexec_fn``: Ctrl-C and hang-up back to their defaults, as for a command typed at a terminal.

    A test suite started in the background or under ``nohup`` hands its children SIGINT and SIGHUP ignored,
    and specbench keeps an inherited ignore on purpose (``nohup specbench run`` must survive the hang-up), so
    without this the signal tests would depend on how pytest was launched."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def headless_engine(args: list[str], cwd: Path, env: dict[str, str] | None = None, *, tui: bool = False,
                    new_session: bool = False) -> subprocess.Popen[bytes]:
    """``specbench run ARGS --headless`` (without ``--headless`` when ``tui``) as a subprocess, its output piped."""
    argv = [sys.executable, "-m", "specbench_tui", "run", *args, *([] if tui else ["--headless"])]
    return subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=new_session,
                            preexec_fn=as_from_a_terminal)  # noqa: PLW1509 - no threads start a child here


def record_key(record: dict) -> tuple:
    """What identifies a measurement: (configuration, workload, item, repeat)."""
    return record["config_id"], record["workload"], record["item"], record["repeat"]


def of_type(events: list[Event], cls: type) -> list:
    return [e for e in events if isinstance(e, cls)]


REPO = Path(__file__).resolve().parent.parent


SETUP_STEPS = {"tools/setup_vllm.sh": "vllm", "tools/setup_llama_server.sh": "llama-server",
               "tools/setup_sglang_cpu.sh": "sglang"}
"""Each setup script's step in ``tools/setup_test_deps.sh``, whose output is kept in ``<logs>/<step>.log``."""


def _why_not_prepared(script: str, said: str) -> str:
    """What ``--print-paths`` said was missing, and the last lines of the setup step's own log when
    ``tools/setup_test_deps.sh`` ran it (in CI the setup's output scrolls away; a full disk shows here)."""
    why = f"\n{script} --print-paths says: {said}" if said else ""
    step = SETUP_STEPS.get(script)
    log = REPO / os.environ.get("SPECBENCH_SETUP_LOGS", ".venv/setup-logs") / f"{step}.log" if step else None
    if log is not None and log.is_file():
        tail = log.read_text(errors="replace").splitlines()[-12:]
        why += f"\nthe last lines of {log}:\n" + "\n".join(f"    {line}" for line in tail)
    return why


def real_engine_paths(script: str, needed: tuple[str, ...], *, require_env: str, what: str) -> dict[str, str]:
    """The KEY=VALUE paths ``script --print-paths`` prints (``tools/setup_llama_server.sh``,
    ``tools/setup_vllm.sh``) when everything it prepares is in place; it never installs anything. When something
    is missing the test is skipped with the command to run, or fails when ``require_env`` is ``1`` (CI)."""
    paths: dict[str, str] = {}
    said = ""
    try:
        done = subprocess.run(["bash", str(REPO / script), "--print-paths"], capture_output=True, text=True,
                              timeout=120, check=False)
        said = done.stderr.strip()
        if done.returncode == 0:
            for line in done.stdout.splitlines():
                key, _, value = line.partition("=")
                if key and value:
                    paths[key] = shlex.split(value)[0] if value.strip() else ""
    except (OSError, subprocess.TimeoutExpired) as exc:
        said = f"{script} --print-paths: {exc}"
    if all(paths.get(k) and Path(paths[k]).exists() for k in needed):
        return paths
    message = f"{what} is not prepared: run {script}, then rerun these tests" + _why_not_prepared(script, said)
    if os.environ.get(require_env) == "1":
        pytest.fail(message)
    warnings.warn(message, UserWarning, stacklevel=2)
    pytest.skip(message)


def md_table(markdown: str, title: str) -> list[dict[str, str]]:
    """The rows of the Markdown report's table under ``## {title}``, each keyed by its column heading (the
    name the report gives the figure)."""
    lines = markdown.splitlines()
    start = lines.index(f"## {title}")
    block: list[str] = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if line.startswith("|"):
            block.append(line)
        elif block:
            break
    head = [cell.strip() for cell in block[0].strip("|").split("|")]
    return [dict(zip(head, (cell.strip() for cell in row.strip("|").split("|")))) for row in block[2:]]
