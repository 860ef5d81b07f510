"""How a run's engine stands, from the run directory alone: live, ended (with its exit code), or crashed.

``attach``, ``stop`` and ``ps`` use it when no engine answers on the socket, and the attached TUI prints the
ending a detached engine left (its summary, and the ending line and exit code in the run's metadata), all read
through the run-directory package.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from specbench_tui.core.safetext import printable
from specbench_tui.rundir import ENGINE_LOG, ENGINE_SOCKET, SUMMARY, engine_owns, has_file, read_text
from specbench_tui.rundir import read_meta as _meta
from specbench_tui.rundir.lock import read_owner
from specbench_tui.rundir.store import StoreError

EXIT_FAILED = 1


def run_condition(run_dir: Path) -> str:
    """``live``, ``ended`` (the engine recorded its exit code) or ``crashed`` (gone without ending)."""
    if engine_owns(run_dir):
        return "live"
    return "ended" if "exit_code" in _meta(run_dir) else "crashed"


def report_unattachable(run_dir: Path, why: str, *, out: TextIO | None = None) -> int:
    """No engine answers in ``run_dir``: say whether its sweep ended or crashed, and what to do. An ended sweep's
    ending goes to ``out`` (standard output unless given: a browser tab shows only its standard error)."""
    condition = run_condition(run_dir)
    if condition == "ended":
        follows = "Its summary follows" if _summary(run_dir) else "It left no summary; its ending follows"
        print(f"specbench: nothing is live in {run_dir}: its sweep has ended. {follows}; the full "
              f"tables: specbench report {run_dir}", file=sys.stderr)
        return print_ending(run_dir, out=out)
    if condition == "crashed":
        pid = printable(_meta(run_dir).get("engine_pid"))
        print(f"specbench: the engine of {run_dir} (pid {pid}) is gone without finishing its sweep (crashed or "
              f"killed). Its measurements are on disk; continue with: specbench run --resume {run_dir}",
              file=sys.stderr)
        return EXIT_FAILED
    if not has_file(run_dir, ENGINE_SOCKET):  # owned, but by a foreground run: nothing to attach to
        pid = printable(read_owner(run_dir).get("pid", "?"))  # the owner lock's note is data
        print(f"specbench: {run_dir} is run in the foreground by pid {pid} (started with --foreground or "
              "--headless), which has no control socket: watch it with `specbench logs RUN --follow`; only a "
              "detached sweep (the default of `specbench run`) can be attached", file=sys.stderr)
        return EXIT_FAILED
    print(f"specbench: {printable(why, 2000)}", file=sys.stderr)
    return EXIT_FAILED


def _summary(run_dir: Path) -> str:
    """The summary an ended engine wrote ("" when there is none)."""
    try:
        return read_text(run_dir, SUMMARY)
    except (OSError, StoreError):
        return ""


def print_ending(run_dir: Path, *, out: TextIO | None = None) -> int:
    """What an ended engine left: the summary, the ending line, the run directory (to ``out``, standard output
    unless given); its exit code."""
    meta = _meta(run_dir)
    summary = _summary(run_dir)
    out = out or sys.stdout
    try:
        if summary:  # each line escaped: a forged line or an escape sequence in it stays data
            print("\n".join(printable(line, None) for line in summary.rstrip("\n").splitlines()), end="\n\n",
                  file=out)
        if meta.get("failure") == "preflight":
            _print_preflight(run_dir)
        if meta.get("ending"):
            print(f"specbench: {printable(meta['ending'], 2000)}", file=out)
        print(f"specbench: run directory {run_dir}", file=out)
    except OSError:
        pass
    code = meta.get("exit_code")
    return code if isinstance(code, int) else EXIT_FAILED


def _print_preflight(run_dir: Path) -> None:
    try:
        lines = read_text(run_dir, ENGINE_LOG).splitlines()
    except (OSError, StoreError):
        return
    for line in lines:
        if "pre-flight" in line:
            print(line.split("] ", 1)[-1], file=sys.stderr)
