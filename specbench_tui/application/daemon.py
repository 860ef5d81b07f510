"""The engine process: a sweep that outlives the terminal that started it.

``specbench run`` (without ``--foreground``) calls :func:`spawn`, which starts ``python -m
specbench_tui.application.daemon`` (isolated: :func:`specbench_tui.paths.isolated_python`, so that nothing is
imported from the working directory or the user site) in a session of its own (no controlling terminal, so an SSH drop's SIGHUP never
reaches it), with standard input from ``/dev/null``. The engine prepares the run exactly as a foreground run
does (same checks, same messages on the caller's terminal, same exit code 2 when nothing can run), takes the
run directory's lock, then points its standard output and error at ``engine.log`` in the run directory, opens
the control socket (:mod:`specbench_tui.engine.control_socket`) and tells the caller it is ready through a
pipe. From then on clients attach and detach as they like.

It ends when the sweep ends (``summary.txt`` and the exit code in the run's metadata), when stopped by a client or
``specbench stop``, or on SIGTERM / SIGINT (the same clean stop as headless: the request in flight gets
:data:`~specbench_tui.application.host.SIGNAL_GRACE_S`, then everything is torn down). SIGHUP is ignored. The
servers are the engine's children under the keeper, so no server outlives it, SIGKILL included; measurements
are on disk as they happen, so ``specbench run --resume`` continues a killed engine's run.

The run, its orchestrator, the stop signals and the ending come from :mod:`specbench_tui.application.host`; the
request arrives as JSON (:meth:`~specbench_tui.application.session.RunRequest.to_json`) with the command the user
typed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict

from specbench_tui.application.host import OwnedRun, StopSignals
from specbench_tui.application.session import RunRequest
from specbench_tui.core.events import Event
from specbench_tui.core.outcomes import SweepFailure, SweepState
from specbench_tui.engine.control_socket import ControlServer
from specbench_tui.engine.engines_registry import forget, register, registry_dir
from specbench_tui.paths import PrivateDirError, isolated_python
from specbench_tui.rundir.store import RunDir

if TYPE_CHECKING:
    from specbench_tui.engine.orchestrator import Orchestrator, SweepOutcome

READY_TIMEOUT_S = 120.0
"""How long :func:`spawn` waits for the engine to own its run directory and listen (pre-flight included)."""
ENGINE_LOG = "engine.log"
SUMMARY = "summary.txt"
USAGE = ("usage: python -m specbench_tui.application.daemon --status-fd FD REQUEST\n"
         "(specbench run starts it: REQUEST is {\"request\": a RunRequest as JSON, \"argv\": the command typed})")


def spawn(request: RunRequest) -> tuple[Path, int] | int:
    """Start the engine process for ``request``; (run directory, engine pid) once it listens, or the exit code
    after its reasons went to this terminal's standard error."""
    try:
        registry_dir()  # the engine registers in this user's private folder: refused here, with the fix
    except PrivateDirError as exc:
        print(exc, file=sys.stderr)
        return 2
    read_fd, write_fd = os.pipe()
    payload = {"request": request.to_json(), "argv": list(sys.argv)}
    command = isolated_python("specbench_tui.application.daemon", "--status-fd", str(write_fd),
                              json.dumps(payload))  # nothing imported from the working directory
    try:
        proc = subprocess.Popen(command, pass_fds=(write_fd,), start_new_session=True, stdin=subprocess.DEVNULL,
                                stdout=sys.stderr.fileno(), stderr=sys.stderr.fileno(), close_fds=True)
    finally:
        os.close(write_fd)
    with os.fdopen(read_fd, "rb") as status:
        line = status.readline()  # EOF when the engine ended before it was ready
    if line.startswith(b"ready\t"):
        return Path(line[6:].decode("utf-8", errors="surrogateescape").rstrip("\n")), proc.pid
    try:
        code = proc.wait(timeout=READY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = 1
    return code if code else 1


class _Ending(TypedDict):
    """How the engine's run ended, as the run directory's run record keeps it (with the exit code and the time)."""

    state: SweepState
    ending: str
    failure: SweepFailure | Literal["engine"] | None
    """What failed the sweep; ``engine``: the engine process itself stopped unexpectedly (the run record only)."""


class _Progress:
    """What ``specbench ps`` shows of this engine: the ledger's progress (as every view counts), kept current
    from the event stream."""

    def __init__(self, orchestrator: Orchestrator, run_dir: RunDir, resumed: bool) -> None:
        from specbench_tui.core.ledger import Ledger

        self.orchestrator = orchestrator
        self.run_dir = run_dir.path
        self.ledger = Ledger(plan_json=orchestrator.plan.to_json())
        if resumed:
            with contextlib.suppress(Exception):
                self.ledger = Ledger.from_run(self.ledger.plan_json, run_dir.read_measurements(),
                                              run_dir.read_events())
        self.started = time.time()

    def __call__(self, event: Event) -> None:
        self.ledger.apply(event)

    def status(self) -> dict[str, object]:
        plan = self.orchestrator.plan
        states = dict(self.orchestrator.states)
        names = {c.id: c.name for c in plan.configs}
        counts = self.ledger.progress()
        return {"sweep": plan.sweep.name, "run_dir": str(self.run_dir), "pid": os.getpid(),
                "since": self.started, "configs": counts.total, "ran": counts.ran,
                "finished": counts.ran + counts.skipped, "skipped": counts.skipped,
                "running": [names.get(i, i) for i, s in states.items() if s.active],
                "measurements": counts.measurements, "paused": bool(self.orchestrator.paused)}


async def _serve(owned: OwnedRun, status_fd: int) -> int:
    from specbench_tui.application.headless import Printer

    run_dir, plan = owned.run_dir, owned.plan
    orchestrator = owned.orchestrator()
    progress = _Progress(orchestrator, run_dir, owned.resumed)
    server = ControlServer(run_dir.path, orchestrator, status=progress.status, publish=orchestrator.publish,
                           names={c.id: c.name for c in plan.configs})
    orchestrator.subscribe(progress)
    orchestrator.subscribe(Printer(plan, sys.stdout))  # engine.log: the headless lines of the whole run
    orchestrator.subscribe(server)
    await server.start()
    # No terminal: every signal gets the grace, and SIGHUP is ignored (main()).
    with StopSignals(orchestrator, _say, (signal.SIGTERM, signal.SIGINT), interactive=False):
        register(run_dir.path, plan.sweep.name)
        with contextlib.suppress(OSError):
            os.write(status_fd, f"ready\t{run_dir.path}\n".encode("utf-8", errors="surrogateescape"))
            os.close(status_fd)
        code = 1
        ending: _Ending | None = None
        try:
            code, ending = _end(owned, await owned.run(orchestrator))
        except BaseException as exc:
            _say(f"stopped unexpectedly: {exc!r}")
            ending = {"state": "failed", "ending": f"the engine stopped unexpectedly: {exc!r}", "failure": "engine"}
            raise
        finally:
            _record_end(run_dir, code, ending)
            await server.close()
            forget(run_dir.path)
    return code


def _say(text: str) -> None:
    print(f"specbench engine: {text}", flush=True)


def _end(owned: OwnedRun, outcome: SweepOutcome) -> tuple[int, _Ending]:
    """The exit code and what the run's metadata records of the ending; ``summary.txt`` written."""
    ending = owned.end(outcome)
    if ending.table is not None:
        text = ending.table + (f"\n{ending.left_out_line}" if ending.left_out_line else "")
        try:
            (owned.run_dir.path / SUMMARY).write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            _say(f"no summary: {exc}")
    elif not ending.preflight_failed:
        _say(f"no summary: {ending.problem}")
    return int(ending.code), {"state": outcome.state, "ending": ending.line, "failure": outcome.failure}


def _record_end(run_dir: RunDir, code: int, ending: _Ending | None) -> None:
    """The exit code and ending line in the run's metadata (what ``attach``, ``stop`` and ``ps`` report)."""
    with contextlib.suppress(Exception):
        if ending is None:
            run_dir.update_meta(exit_code=code, ended=time.time())
        else:
            run_dir.update_meta(exit_code=code, ended=time.time(), **ending)


def main(argv: list[str] | None = None) -> int:
    try:
        status_fd, request, typed = _parse(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        print(f"specbench-engine: {exc}\n{USAGE}", file=sys.stderr)
        return 2
    if typed:
        sys.argv = typed  # the lock and the run's metadata name the command the user typed
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # no terminal to lose; a stray SIGHUP changes nothing
    os.umask(os.umask(0o022) | 0o022)
    owned = OwnedRun.prepare(request)
    if isinstance(owned, int):
        return owned
    meta = owned.run_dir.read_meta()
    for stale in ("exit_code", "ended", "state", "ending", "failure"):
        meta.pop(stale, None)
    meta.update({"engine_pid": os.getpid(), "detached": True, "engine_started": time.time()})
    owned.run_dir.write_meta(meta)
    _redirect(owned.run_dir.path / ENGINE_LOG)
    try:
        return asyncio.run(_serve(owned, status_fd))
    finally:
        owned.release()


def _parse(argv: list[str]) -> tuple[int, RunRequest, list[str]]:
    """``--status-fd FD REQUEST``: the pipe to say ``ready`` on, the request, the command the user typed."""
    if len(argv) != 3 or argv[0] != "--status-fd" or not argv[1].isdigit():
        raise ValueError(f"expected --status-fd FD REQUEST, got {argv!r}")
    try:
        payload = json.loads(argv[2])
    except json.JSONDecodeError as exc:
        raise ValueError(f"REQUEST is not JSON: {exc}") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("request"), dict):
        raise ValueError("REQUEST must be an object with a \"request\" object")
    typed = payload.get("argv")
    return int(argv[1]), RunRequest.from_json(payload["request"]), [str(a) for a in typed] if isinstance(typed, list) else []


def _redirect(log: Path) -> None:
    """Standard output and error to the run directory's engine log; standard input from /dev/null."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.close(null)


if __name__ == "__main__":
    from specbench_tui.engine.cluster import end_process

    sys.exit(end_process(main()))
