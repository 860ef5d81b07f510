"""``specbench run`` on a terminal: build the engine, open the app, and always stop the engine after.

Once the app has given the terminal back, what a headless run ends with is printed to it, so that it stays
in the scroll-back of the SSH session: the summary table, how the sweep ended (with the command that
continues it) and the run directory. The exit code is headless's too (:mod:`specbench_tui.engine.ending`):
0 done, 1 a configuration crashed, failed or returned no tokens at all, 130 quit mid-sweep, and so on.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from specbench_tui.engine.ending import EXIT_CONFIG_FAILED as EXIT_FAILED
from specbench_tui.engine.ending import EXIT_INVALID

if TYPE_CHECKING:
    from specbench_tui.core.results import RunAnalysis
    from specbench_tui.engine.orchestrator import SweepOutcome

STOP_TIMEOUT_S = 60.0


class EndedEngine(Protocol):
    """What the ending needs of the engine: how the sweep ended (None: it never got going), the error that
    stopped the engine thread, the summary table and the run's analysis."""

    outcome: SweepOutcome | None
    error: BaseException | None

    @property
    def run_dir(self) -> Path: ...

    def summary_table(self) -> str: ...
    def analysis(self) -> RunAnalysis: ...


def run_tui(args: argparse.Namespace) -> int:
    """Run the sweep named by ``args`` in the TUI; returns the process exit code.

    The engine comes from ``specbench_tui.application.runner.make_engine(args)``, which may return None (or an
    exit code) after printing why the sweep cannot run.
    """
    try:
        from specbench_tui.application.runner import make_engine
    except ImportError as exc:
        print(f"specbench run: the engine runner is not available ({exc}). "
              "Reinstall specbench-tui, or run with --headless to see whether the engine works.", file=sys.stderr)
        return EXIT_FAILED
    engine = make_engine(args)
    if engine is None:
        return EXIT_INVALID
    if isinstance(engine, int):
        return engine
    from specbench_tui.tui.app import SpecbenchApp

    # Textual sizes the screen from COLUMNS/LINES when they are set, and a stale exported value (common in
    # scripts and under tmux) would pin the layout to the wrong size; the terminal itself knows better.
    for variable in ("COLUMNS", "LINES"):
        os.environ.pop(variable, None)
    app = SpecbenchApp(engine, theme=getattr(args, "theme", None))
    try:
        result = app.run(mouse=not getattr(args, "no_mouse", False))
    finally:
        if not app.engine_stopped:
            try:
                engine.abort(now=True)
                engine.stop(timeout=STOP_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - report, but the terminal is already restored
                print(f"specbench run: stopping the engine failed: {exc}", file=sys.stderr)
    if app.stop_error is not None:
        print(f"specbench run: stopping the servers failed: {app.stop_error}", file=sys.stderr)
        print(f"specbench: run directory {engine.run_dir}")
        return EXIT_FAILED
    return _ending(engine, int(result or 0), preflight_problems=app.preflight_problems)


def _ending(engine: EndedEngine, app_result: int, preflight_problems: list[str] | None = None) -> int:
    """Print the summary, how the sweep ended and the run directory; the exit code.

    A failed pre-flight launched nothing: its reasons are printed (what the screen showed until dismissed),
    not a count of configurations that never had a chance to run."""
    from specbench_tui.engine.ending import ending_line, exit_code
    from specbench_tui.rundir.store import StoreError

    outcome = engine.outcome
    error = engine.error
    analysis = None
    try:
        if outcome is not None and outcome.failure != "preflight":
            try:
                print(engine.summary_table(), end="\n\n")
                analysis = engine.analysis()  # a silent server fails the run as headless
            except StoreError as exc:
                print(f"no summary: {exc}")
        if error is not None:
            print(f"specbench run: the engine stopped unexpectedly: {error!r}", file=sys.stderr)
        elif outcome is not None and outcome.failure == "preflight":
            print("specbench: pre-flight failed, nothing was launched:")
            for problem in preflight_problems or [outcome.reason or "(no reason given)"]:
                print(f"  - {problem}")
        elif outcome is not None:
            print(f"specbench: {ending_line(outcome, analysis)}")
        if outcome is None or outcome.failure != "preflight" or Path(engine.run_dir).exists():
            print(f"specbench: run directory {engine.run_dir}")
    except OSError:  # the terminal went away as the app ended (a dropped SSH session): the code still counts
        pass
    if error is not None:
        return EXIT_FAILED
    if outcome is None:  # the sweep never got going (its start failed, and the app said why)
        return app_result or EXIT_FAILED
    return exit_code(outcome, analysis=analysis)
