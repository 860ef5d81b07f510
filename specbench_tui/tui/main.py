"""``specbench run`` on a terminal: build the engine, open the app, and always stop the engine after."""

from __future__ import annotations

import argparse
import os
import sys

EXIT_FAILED = 1
EXIT_INVALID = 2
STOP_TIMEOUT_S = 60.0


def run_tui(args: argparse.Namespace) -> int:
    """Run the sweep named by ``args`` in the TUI; returns the process exit code.

    The engine comes from ``specbench_tui.engine.runner.make_engine(args)``, which may return None (or an
    exit code) after printing why the sweep cannot run.
    """
    try:
        from specbench_tui.engine.runner import make_engine
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
        return EXIT_FAILED
    print(f"specbench: run directory {engine.run_dir}")
    return int(result or 0)
