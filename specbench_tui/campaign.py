"""The campaign commands: a sweep in an engine process of its own, and the clients that watch and steer it.

``specbench run`` (detached by default on a terminal; ``--detach`` for headless), ``attach``, ``ps``, ``stop``,
``logs`` and ``serve``. Each imports what it needs when it runs, as the rest of the CLI does.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from specbench_tui.core.safetext import printable
from specbench_tui.application.runstatus import print_ending, report_unattachable, run_condition

if TYPE_CHECKING:
    from specbench_tui.application.session import RunRequest

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INVALID = 2
STOP_WAIT_S = 120.0
"""How long ``specbench stop`` waits for the engine to tear its servers down and end."""


class Subcommands(Protocol):
    """Where the CLI's subcommands are added (what ``ArgumentParser.add_subparsers`` returns)."""

    def add_parser(self, name: str, *, help: str | None = ..., description: str | None = ...) -> argparse.ArgumentParser:
        ...


def add_commands(commands: Subcommands) -> None:
    """The campaign subcommands, added to the CLI's parser."""
    attach = commands.add_parser(
        "attach", help="open the TUI on a running sweep (started by specbench run)",
        description="Open the TUI on the engine of a running sweep. q asks: detach (the sweep goes on) or "
                    "stop the sweep. Several terminals may attach at once; each sees the others' actions.")
    _run_arguments(attach, LIVE_DEFAULT)
    attach.add_argument("--no-mouse", action="store_true", help="do not capture the mouse")
    attach.add_argument("--theme", help="theme name (see themes/)")
    attach.add_argument("--read-only", action="store_true", help=argparse.SUPPRESS)
    commands.add_parser("ps", help="list the sweeps running on this machine (yours)",
                        description="The engines you started on this machine: sweep, engine pid, progress, "
                                    "current configuration, attached clients, since when. An engine that died "
                                    "without finishing is listed as crashed, with the command that resumes it.")
    stop = commands.add_parser("stop", help="stop a running sweep (servers torn down; resume later)",
                               description="Stop the sweep of RUN: the request in flight finishes (or, with --now, "
                                           "is abandoned), every server is torn down, the engine ends. Exit 0 "
                                           "once it has.")
    _run_arguments(stop)
    stop.add_argument("--now", action="store_true", help="do not wait for the request in flight")
    logs = commands.add_parser("logs", help="print a run's events as plain lines, with progress and ETA",
                               description="Print the event stream of RUN as headless lines, each with the "
                                           "progress count and an ETA; --follow keeps printing while it runs.")
    _run_arguments(logs)
    logs.add_argument("--follow", "-f", action="store_true", help="keep printing until the sweep ends")
    serve = commands.add_parser(
        "serve", help="serve the TUI of a running sweep to a browser (textual-serve)",
        description="Serve RUN's TUI over HTTP for a browser: each tab is a client of the running engine. "
                    "Bound to 127.0.0.1 (reach it with ssh -L PORT:127.0.0.1:PORT); the URL printed carries a "
                    "random token, required for every connection. Read-only unless --control.")
    _run_arguments(serve, LIVE_DEFAULT)
    serve.add_argument("--port", type=int, default=None,
                       help="port to listen on (default 8765, or the next free one, said; 0 picks any; a port "
                            "given and taken is an error)")
    serve.add_argument("--max-tabs", type=int, default=4, metavar="N",
                       help="browser tabs served at once (default 4; one more is told so in its page)")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to bind (default 127.0.0.1; any other still requires the token)")
    serve.add_argument("--control", action="store_true", help="let the browser pause, skip, retry and stop")


def dispatch(args: argparse.Namespace) -> int | None:
    """Run a campaign command; None when ``args.command`` is not one."""
    handlers = {"attach": attach_command, "ps": ps_command, "stop": stop_command, "logs": logs_command,
                "serve": serve_command}
    handler = handlers.get(args.command)
    return handler(args) if handler else None


# ------------------------------------------------------------------------------------------------ run


def run_detached(request: RunRequest, *, tui: bool, theme: str | None = None, mouse: bool = True) -> int:
    """Start the engine process for ``request``; then the TUI attached to it (``tui``, with ``theme`` and
    ``mouse``), or say where it runs and return."""
    from specbench_tui.application.daemon import spawn

    if tui:  # the app's imports meanwhile: the engine prepares the run in its own process, on another core
        import threading

        threading.Thread(target=_import_app, daemon=True).start()
    started = spawn(request)
    if isinstance(started, int):
        return started
    run_dir, pid = started
    if tui:
        from specbench_tui.tui.attach_main import attach_tui

        return attach_tui(run_dir, theme=theme, mouse=mouse)
    print(f"specbench: the sweep runs in engine pid {pid}, detached; run directory {run_dir}\n"
          f"  watch it:   specbench attach {run_dir}\n"
          f"  follow it:  specbench logs {run_dir} --follow\n"
          f"  stop it:    specbench stop {run_dir}")
    return EXIT_OK


def _import_app() -> None:
    import specbench_tui.tui.attach_main
    import specbench_tui.tui.app  # noqa: F401


# ------------------------------------------------------------------------------------------------ finding runs


def resolve_run(text: str | None, args: argparse.Namespace | None = None) -> Path | None:
    """The run directory ``text`` names, as every command reads it (:func:`~specbench_tui.report.runs.find_run`):
    ``latest`` is the newest run directory under ``--runs-dir`` (default runs/), live or not; with ``--live``, the
    newest live one; ``latest~N``, a path, or a run directory's name there (else the run directory or sweep name of
    an engine started here). None after saying why not."""
    from specbench_tui.report.runs import DEFAULT_RUNS_DIR, RunNotFound, find_run, is_latest

    runs_dir = Path(getattr(args, "runs_dir", None) or DEFAULT_RUNS_DIR)
    live = bool(getattr(args, "live", False))
    if text == LIVE_DEFAULT:  # attach / serve with no run named: the newest sweep a live engine runs
        try:
            found = find_run("latest", runs_dir, live=True).path.resolve()
        except RunNotFound as exc:
            print(f"specbench: {exc}", file=sys.stderr)
            return None
        print(f"specbench: the newest live sweep: {found}", file=sys.stderr)
        return found
    if not is_latest(text):
        path = Path(str(text)).expanduser()
        if path.is_dir():
            return path.resolve()
        if not (runs_dir / str(text)).is_dir():
            from specbench_tui.engine.engines_registry import entries

            matches = [e for e in entries() if Path(e["run_dir"]).name == text or e.get("sweep") == text]
            if matches:
                return Path(matches[-1]["run_dir"])
    try:
        return find_run(text, runs_dir, live=live).path.resolve()
    except RunNotFound as exc:
        print(f"specbench: {exc}", file=sys.stderr)
        return None


LIVE_DEFAULT = "the newest live sweep"
"""What ``attach`` and ``serve`` take when no run is named: ``latest`` with ``--live`` (a running sweep, as the
README promises), said when it is found and when there is none."""


def _run_arguments(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    """RUN, ``--runs-dir`` and ``--live``: how every command that takes a run names it."""
    help_text = ("a run directory, its name, 'latest' (the newest run directory under --runs-dir, live or not; "
                 "with --live the newest live one) or 'latest~N'")
    if default is None:
        parser.add_argument("run", help=help_text)
    else:
        parser.add_argument("run", nargs="?", default=default, help=f"{help_text} (default: {default})")
    parser.add_argument("--runs-dir", metavar="DIR", help="where 'latest' and names are looked up (default: runs)")
    parser.add_argument("--live", action="store_true", help="'latest' is the newest run a live engine runs")


# ------------------------------------------------------------------------------------------------ commands


def attach_command(args: argparse.Namespace) -> int:
    run_dir = resolve_run(args.run, args)
    if run_dir is None:
        return EXIT_INVALID
    if run_condition(run_dir) != "live":  # ended or crashed: said without opening a screen
        return report_unattachable(run_dir, "no engine runs it")
    from specbench_tui.tui.attach_main import attach_tui

    web = bool(os.environ.get("TEXTUAL_DRIVER"))
    if not web and not (sys.stdout.isatty() and sys.stdin.isatty()):
        print("specbench attach needs a terminal; without one, use: specbench logs RUN --follow", file=sys.stderr)
        return EXIT_INVALID
    return attach_tui(run_dir, role="view" if args.read_only else "control", theme=args.theme,
                      mouse=not args.no_mouse, name=None if not web else f"browser tab (pid {os.getpid()})")


def ps_command(args: argparse.Namespace) -> int:
    from specbench_tui.engine.engines_registry import drop, entries

    rows = []
    crashed = []
    for entry in entries():
        run_dir = Path(entry["run_dir"])
        condition = run_condition(run_dir) if run_dir.is_dir() else "gone"
        if condition in ("ended", "gone"):
            drop(entry)
        elif condition == "crashed":
            crashed.append(entry)
        else:
            rows.append(_ps_row(entry, run_dir))
    if not rows and not crashed:
        print("specbench: no sweep of yours is running on this machine")
        return EXIT_OK
    if rows:
        header = ("SWEEP", "PID", "PROGRESS", "CURRENT", "CLIENTS", "SINCE", "RUN DIRECTORY")
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    for entry in crashed:
        print(f"CRASHED  {printable(entry.get('sweep', '?'))}: engine pid {printable(entry['pid'])} is gone without "
              f"finishing; resume with: specbench run --resume {printable(entry['run_dir'])}")
    return EXIT_OK


def _ps_row(entry: Mapping[str, object], run_dir: Path) -> tuple[str, ...]:
    """A live engine's line of ``specbench ps``, as it answers its status (or why it does not)."""
    from specbench_tui.core.ledger import Progress
    from specbench_tui.engine.attached import AttachError, engine_status

    try:
        status: Mapping[str, object] = engine_status(run_dir)  # what another process said: read, not trusted
    except AttachError as exc:
        return tuple(printable(c) for c in (entry.get("sweep", "?"), entry["pid"], "?", f"not answering: {exc}", "?",
                                            _since(entry.get("started")), run_dir))
    skipped = _count(status.get("skipped"))
    ran = _count(status["ran"]) if "ran" in status else _count(status.get("finished")) - skipped  # older engines
    counts = Progress(total=_count(status.get("configs")), ran=ran, skipped=skipped,
                      measurements=_count(status.get("measurements")))
    progress = counts.text + (", PAUSED" if status.get("paused") else "")
    clients = status.get("clients")
    running = status.get("running")
    names = ", ".join(map(str, running)) if isinstance(running, list) else ""
    return tuple(printable(c) for c in (status.get("sweep", "?"), status.get("pid", entry["pid"]), progress,
                                        names or "-", len(clients) if isinstance(clients, list) else 0,
                                        _since(status.get("since")), run_dir))


def _count(value: object) -> int:
    """A count an engine's status gives (0 when it gives none, or not a number)."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _since(started: object) -> str:
    if not isinstance(started, (int, float)):
        return "?"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(started))


def stop_command(args: argparse.Namespace) -> int:
    run_dir = resolve_run(args.run, args)
    if run_dir is None:
        return EXIT_INVALID
    from specbench_tui.engine.attached import AttachedEngine, AttachError, client_name

    try:
        engine = AttachedEngine(run_dir, role="control", name=client_name("specbench stop"), with_plan=False)
    except AttachError as exc:
        condition = run_condition(run_dir)
        if condition == "ended":
            print(f"specbench: the sweep of {run_dir} has already ended")
            print_ending(run_dir)
            return EXIT_OK
        return report_unattachable(run_dir, str(exc))
    engine.start()
    ident = engine._send("abort", now=bool(args.now))
    ack = engine.wait_ack(ident)
    if ack is not None and not ack.get("ok"):
        print(f"specbench: the engine refused to stop: {printable(ack.get('error'))}", file=sys.stderr)
        engine.detach()
        return EXIT_FAILED
    print(f"specbench: stopping the sweep of {printable(run_dir)} (engine pid {printable(engine.engine_pid)})"
          + ("" if args.now else " after the request in flight") + "…", flush=True)
    if not engine.stop(STOP_WAIT_S):
        print(f"specbench: the engine has not ended within {STOP_WAIT_S:.0f} s; it is still tearing down. "
              f"Force it with: kill -TERM {engine.engine_pid}", file=sys.stderr)
        return EXIT_FAILED
    print_ending(run_dir)
    return EXIT_OK


def logs_command(args: argparse.Namespace) -> int:
    run_dir = resolve_run(args.run, args)
    if run_dir is None:
        return EXIT_INVALID
    from specbench_tui.application.follow import follow

    return follow(run_dir, live=bool(args.follow))


def serve_command(args: argparse.Namespace) -> int:
    run_dir = resolve_run(args.run, args)
    if run_dir is None:
        return EXIT_INVALID
    try:
        from specbench_tui.tui.web import serve
    except ImportError as exc:
        print(f"specbench serve needs textual-serve ({exc}); install it with: pip install 'specbench-tui[serve]'",
              file=sys.stderr)
        return EXIT_FAILED
    return serve(run_dir, host=args.host, port=args.port, control=args.control, max_tabs=args.max_tabs)
