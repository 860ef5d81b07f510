"""The ``specbench`` command line.

Importing this module must stay cheap: no Textual, httpx, torch or triton here. Each command imports what it
needs when it runs, so ``specbench --help`` answers at once over a slow SSH link.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specbench_tui import __version__
from specbench_tui.core.outcomes import ExitCode
from specbench_tui.paths import PrivateDirError

if TYPE_CHECKING:  # the CLI stays cheap to import: the plan's modules load when a command needs them
    from specbench_tui.core.plan import Plan

EXIT_OK = ExitCode.OK
EXIT_FAILED = ExitCode.FAILED
EXIT_INVALID = ExitCode.INVALID


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specbench",
        description="Sweep speculative-decoding configurations of LLM servers (SGLang, or the built-in "
                    "simulator) and measure throughput, latency and draft acceptance, live in the terminal.",
        epilog="Start with: specbench run sweeps/demo.toml   (runs against the built-in SGLang simulator)",
    )
    parser.add_argument("--version", action="version", version=f"specbench {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    validate = commands.add_parser(
        "validate", help="check a sweep file and print the expanded plan with exact argv",
        description="Check a sweep file and print every configuration with its id, GPUs and exact server "
                    "argv; skipped points show their reason. Exit 0 when valid, 2 with the errors otherwise. "
                    "Nothing is launched or written.")
    validate.add_argument("sweep", help="a sweep file, or the name of a shipped one (e.g. demo)")
    validate.add_argument("--json", action="store_true", help="print the plan as JSON")

    run = commands.add_parser(
        "run", help="run a sweep (TUI on a terminal, plain lines otherwise)",
        description="Run a sweep: launch each configuration's server, run the workloads, record every "
                    "measurement in a run directory as it happens. Exit codes: 0 every configuration done or "
                    "skipped; 1 one crashed or failed, or answered every request with no tokens; 2 nothing ran "
                    "(invalid sweep, pre-flight, the run directory owned by another specbench); 3 the run directory became unwritable; 4 a GPU stayed held; "
                    "129 SIGHUP; 130 stopped on request (continue with --resume). On a terminal the sweep runs in an "
                    "engine process of its own and the TUI attaches to it: losing the terminal ends only the TUI "
                    "(specbench attach brings it back; q asks: detach or stop the sweep).")
    run.add_argument("sweep", nargs="?", help="a sweep file, or the name of a shipped one (e.g. demo)")
    run.add_argument("--resume", metavar="RUN_DIR",
                     help="continue an interrupted run directory ('latest': the newest under --runs-dir, "
                          "default runs/, live or not; 'latest~N': N before it; 'specbench runs' lists them)")
    run.add_argument("--retry-crashed", action="store_true",
                     help="with --resume, run crashed and failed configurations again (with the request "
                          "that was in flight at the crash)")
    run.add_argument("--bisect-crashes", action="store_true",
                     help="with --resume: where a budget crashed below a working one of the same algorithm, run only "
                          "the budgets in between (bisecting) to find the first that works (docs/load.md)")
    run.add_argument("--headless", action="store_true",
                     help="no TUI: print a line per event and a summary (automatic without a TTY)")
    run.add_argument("--runs-dir", metavar="DIR", help="where the run directory goes (default: sweep.runs_dir)")
    run.add_argument("--port-base", metavar="PORT", type=_port,
                     help="the first port servers listen on (overrides engine.port_base; a port another "
                          "program or specbench holds is passed over with a notice)")
    run.add_argument("--ray-address", metavar="HOST:PORT",
                     help="run the configurations on the nodes of this Ray cluster (the head `ray start --head` "
                          "printed, or 'auto'; needs the ray extra): overrides [cluster] executor and address")
    run.add_argument("--notify", metavar="URL", action="append",
                     help="an Apprise URL called on a crash, a stall, a zero-output configuration, a pre-flight stop, "
                          "a paused queue and the end (repeatable; beside [notify] urls). Write a secret as "
                          "'${NAME}' in single quotes: the engine reads it from the environment (docs/notifications.md)")
    run.add_argument("--metrics-port", metavar="PORT", type=_port,
                     help="serve Prometheus metrics on 127.0.0.1:PORT while the sweep runs (overrides [metrics] port)")
    run.add_argument("--otlp-endpoint", metavar="URL",
                     help="push the same metrics over OTLP/HTTP to this collector, e.g. http://127.0.0.1:4318 "
                          "(needs the otlp extra; overrides [metrics] otlp_endpoint; docs/notifications.md)")
    run.add_argument("--foreground", action="store_true",
                     help="run the sweep inside this process (it ends with the terminal), not in a detached engine")
    run.add_argument("--detach", action="store_true",
                     help="start the sweep in a detached engine and return at once (no TUI; headless runs stay in "
                          "the foreground without it)")
    run.add_argument("--no-mouse", action="store_true", help="do not capture the mouse (TUI)")
    run.add_argument("--theme", help="theme name (TUI; see themes/)")

    runs = commands.add_parser(
        "runs", help="list run directories: state, progress, owner pid while live, path",
        description="List the run directories under a runs folder, oldest first: how each ended (or "
                    "'running' with the pid of the specbench running it, or 'interrupted'), configurations "
                    "finished of all, when it started, and its path (for --resume or report).")
    runs.add_argument("runs_dir", nargs="?", default=None, help="the runs folder (default: runs)")
    runs.add_argument("--runs-dir", dest="runs_dir_option", metavar="DIR", help="the same, as an option")

    report = commands.add_parser("report", help="write the tables of a run directory",
                                 description="Turn a run directory into tables: speedups, acceptance, "
                                             "crashes with their signatures, best configuration per workload.")
    report.add_argument("run_dir", help="a run directory, its name under --runs-dir, 'latest' (the newest) or "
                                        "'latest~N' (N before it)")
    report.add_argument("--runs-dir", metavar="DIR", help="where 'latest' and names are looked up (default: runs)")
    report.add_argument("--format", choices=("txt", "md", "csv", "json", "latex", "html"), default=None,
                        help="the report's format (default: txt; html holds the figures)")
    report.add_argument("--output", "-o", help="write to this file instead of standard output")
    report.add_argument("--figures", metavar="DIR", help="write each figure as PDF, SVG and PNG with a figures.json "
                                                         "index into DIR (the report too only with --format or -o)")

    recommend = commands.add_parser(
        "recommend", help="per workload and band: the winner as its exact server command, and a confirm sweep",
        description="Per workload and concurrency band: the winner with its margin and interval, the runner-up "
                    "and what was excluded and why; the winner's server command line, the SGLang recipe per band, "
                    "on vLLM the per-batch-size draft-token schedule; writes a confirm sweep (docs/load.md).")
    recommend.add_argument("run_dir", help="a run directory, its name under --runs-dir, or 'latest'")
    recommend.add_argument("--runs-dir", metavar="DIR", help="where 'latest' and names are looked up (default: runs)")
    recommend.add_argument("--confirm", metavar="FILE",
                           help="write the confirm sweep here (default: confirm.toml in the run directory)")

    compare = commands.add_parser("compare", help="compare two run directories",
                                  description="Per configuration (matched by id) and workload, what changed "
                                              "between two runs.")
    compare.add_argument("run_a", help="a run directory, its name, 'latest' or 'latest~N' (e.g. latest~1)")
    compare.add_argument("run_b", help="the same (e.g. latest)")
    compare.add_argument("--runs-dir", metavar="DIR", help="where 'latest' and names are looked up (default: runs)")
    compare.add_argument("--format", choices=("txt", "md", "html"), default="txt",
                         help="txt (default), md (Markdown tables) or html (one self-contained page): the same content")
    compare.add_argument("--output", "-o", help="write to this file instead of standard output")
    from specbench_tui.campaign import add_commands

    add_commands(commands)
    return parser


def _interrupts_raise() -> bool:
    """From here on Ctrl-C raises KeyboardInterrupt, which each command handles (``python -m specbench_tui``
    exits quietly on it until now: :func:`specbench_tui.__main__.quiet_interrupt`). True when this process is
    the program (not a caller of :func:`main`, such as a test): its exit is then :func:`_exits_with`'s."""
    import signal
    import threading

    handler = signal.getsignal(signal.SIGINT)
    program = threading.current_thread() is threading.main_thread() and \
        getattr(handler, "__name__", None) == "quiet_interrupt"  # its module is __main__ under python -m
    if program:
        import atexit

        atexit.register(_interrupts_ignored)  # before any of the commands' hooks: it runs after all of them
    if program and getattr(handler, "__module__", None) == "specbench_tui.__main__":
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return program


def _interrupts_ignored() -> None:
    """The program's last exit hook: Ctrl-C is ignored for the rest of the interpreter's shutdown, which would
    otherwise put SIGINT back to its default for the tenths of a second it takes to unload the modules (a
    Ctrl-C then killed the process by the signal: status -2 to its parent, the command's exit code lost)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _exits_with(code: int) -> int:
    """``code``. The command is over (a run's servers stopped, everything written) and the program only exits
    now: a Ctrl-C from here on ends it at once with ``code`` (any server still live told to end first, as the
    exit hook would), instead of raising KeyboardInterrupt in the shutdown's thread joins and exit hooks."""
    import signal
    from types import FrameType

    def exit_now(signum: int, frame: FrameType | None) -> None:
        processes = sys.modules.get("specbench_tui.engine.processes")
        if processes is not None:
            processes.kill_all_servers()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, RuntimeError):  # RuntimeError: the signal came inside a write
                pass
        os._exit(int(code))

    signal.signal(signal.SIGINT, exit_now)
    return code


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1024-65535)") from None
    if not 1024 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number from 1024 to 65535")
    return port


def main(argv: list[str] | None = None) -> int:
    """The CLI; Ctrl-C at any moment of it (the parser's imports included) ends it with status 130 and no
    traceback (a run's own Ctrl-C handling stops its servers first, see application/headless.py); once the
    command is over, Ctrl-C leaves its exit code as it is, up to the program's last instruction."""
    program = _interrupts_raise()
    code = _command(argv)
    return _exits_with(code) if program else code


def _command(argv: list[str] | None) -> int:
    try:
        parser = _parser()
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        return 130
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    try:
        if args.command == "validate":
            return _validate(args)
        if args.command == "run":
            from specbench_tui.engine.cluster import end_process

            return end_process(_run(args))
        if args.command == "runs":
            return _runs(args)
        if args.command == "report":
            from specbench_tui.report.cli import report_command

            return report_command(args) if _resolve_runs(args, "run_dir") else EXIT_INVALID
        if args.command == "recommend":
            from specbench_tui.report.recommend import recommend_command

            return recommend_command(args) if _resolve_runs(args, "run_dir") else EXIT_INVALID
        if args.command == "compare":
            from specbench_tui.report.cli import compare_command

            return compare_command(args) if _resolve_runs(args, "run_a", "run_b") else EXIT_INVALID
        from specbench_tui.campaign import dispatch

        code = dispatch(args)
        if code is not None:
            return code
    except KeyboardInterrupt:
        return 130
    except ImportError as exc:
        from specbench_tui.core.engines.registry import EngineLoadError  # loaded by now: it raised

        if not isinstance(exc, EngineLoadError):
            raise
        print(f"specbench: {exc}\n  fix the module, or take it out of SPECBENCH_ENGINES (docs/adding-an-engine.md)",
              file=sys.stderr)
        return EXIT_INVALID
    except PrivateDirError as exc:  # this user's private folder is someone else's: said with the fix
        print(exc, file=sys.stderr)
        return EXIT_INVALID
    except BrokenPipeError:
        # `specbench validate ... | head`: the reader left; exit quietly like other Unix tools.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    parser.error(f"unknown command {args.command}")
    return EXIT_INVALID


def _validate(args: argparse.Namespace) -> int:
    from specbench_tui.application.plans import load_plan_or_report

    plan = load_plan_or_report(args.sweep)
    if plan is None:
        return EXIT_INVALID
    if args.json:
        import json

        print(json.dumps(plan.to_json(), indent=2))
        return EXIT_OK
    from specbench_tui.core.planview import format_plan

    print(format_plan(plan, launcher_argv=_launcher_prefix(plan)))
    return EXIT_OK


def _launcher_prefix(plan: Plan) -> list[str]:
    from specbench_tui.core.launch import launcher_prefix

    return launcher_prefix(plan.sweep.engine, sys.executable)


def _runs(args: argparse.Namespace) -> int:
    from specbench_tui.report.runs import DEFAULT_RUNS_DIR, format_runs, list_runs

    runs_dir = Path(args.runs_dir_option or args.runs_dir or DEFAULT_RUNS_DIR)
    if not runs_dir.is_dir():
        print(f"specbench runs: {runs_dir}: no such folder (runs go to the sweep's runs_dir, default runs/)",
              file=sys.stderr)
        return EXIT_INVALID
    runs = list_runs(runs_dir)
    if not runs:
        print(f"no run directories in {runs_dir}")
        return EXIT_OK
    print(format_runs(runs))
    return EXIT_OK


def _resolve_latest(args: argparse.Namespace) -> bool:
    """Turn ``--resume latest`` (or ``latest~N``) into that run directory's path, as every command that takes a
    run reads ``latest`` (:func:`~specbench_tui.report.runs.find_run`); False (after saying why) when none."""
    from specbench_tui.report.runs import DEFAULT_RUNS_DIR, RunNotFound, find_run, is_latest

    if not is_latest(args.resume) or Path(args.resume).is_dir():
        return True
    runs_dir = Path(args.runs_dir or DEFAULT_RUNS_DIR)
    try:
        latest = find_run(args.resume, runs_dir)
    except RunNotFound as exc:
        print(f"specbench run: --resume {args.resume}: {exc}", file=sys.stderr)
        return False
    print(f"specbench: resuming the latest run, {latest.path} ({latest.state}, {latest.progress})",
          file=sys.stderr)
    args.resume = str(latest.path)
    return True


def _resolve_runs(args: argparse.Namespace, *names: str) -> bool:
    """``report`` and ``compare``: each run argument named ``latest``, ``latest~N`` or a run's name under
    ``--runs-dir`` becomes that run directory's path; False (after saying why) when one names none."""
    from specbench_tui.report.runs import DEFAULT_RUNS_DIR, RunNotFound, find_run, is_latest

    runs_dir = Path(getattr(args, "runs_dir", None) or DEFAULT_RUNS_DIR)
    for name in names:
        text = getattr(args, name)
        if Path(text).expanduser().exists() or not (is_latest(text) or (runs_dir / text).is_dir()):
            continue  # a path (whatever it holds: the report says) is taken as it is
        try:
            setattr(args, name, str(find_run(text, runs_dir).path))
        except RunNotFound as exc:
            print(f"specbench {args.command}: {text}: {exc}", file=sys.stderr)
            return False
    return True


def _run(args: argparse.Namespace) -> int:
    if not args.sweep and not args.resume:
        print("specbench run: give a sweep file (e.g. sweeps/demo.toml) or --resume RUN_DIR", file=sys.stderr)
        return EXIT_INVALID
    if args.resume and not _resolve_latest(args):
        return EXIT_INVALID
    if getattr(args, "bisect_crashes", False):
        if not args.resume:
            print("specbench run: --bisect-crashes bisects a run's crash boundaries: give --resume RUN_DIR",
                  file=sys.stderr)
            return EXIT_INVALID
        from specbench_tui.application.bisect import bisect_crashes

        return bisect_crashes(Path(args.resume))
    # Whatever the umask (000 included), nothing a run writes is group- or world-writable: its own files are
    # created 0644/0755 explicitly, and this covers everything else (servers' files too).
    os.umask(os.umask(0o022) | 0o022)
    headless = args.headless or not (sys.stdout.isatty() and sys.stdin.isatty()) or os.environ.get("TERM") == "dumb"
    if not headless and args.foreground:
        from specbench_tui.tui.main import run_tui

        return run_tui(args)
    from specbench_tui.application.session import RunRequest  # what the layers below are told: no parser options

    request = RunRequest.of(args)
    if headless and not args.detach:
        from specbench_tui.application.headless import run_headless

        return run_headless(request)
    from specbench_tui.campaign import run_detached  # the sweep in its own engine process (an SSH drop won't stop it)

    return run_detached(request, tui=not headless and not args.detach, theme=getattr(args, "theme", None),
                        mouse=not getattr(args, "no_mouse", False))
