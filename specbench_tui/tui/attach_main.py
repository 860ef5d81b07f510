"""The TUI as a client of an engine process: ``specbench run`` (detached, the default) and ``specbench attach``.

The app is the same as a foreground run's; only its engine adapter differs
(:class:`~specbench_tui.engine.attached.AttachedEngine`). When the app closes, the terminal keeps what
happened: after a detach, how to come back and how to stop the sweep; after the sweep ended (or was stopped
from here), the summary, the ending line and the exit code the engine left in the run directory.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from specbench_tui.engine.ending import EXIT_CONFIG_FAILED as EXIT_FAILED

TAB_PARENT_VAR = "SPECBENCH_TAB_PARENT"
"""Set by ``specbench serve`` in each browser tab's environment: its pid, which the tab must not outlive."""
PR_SET_PDEATHSIG = 1


def die_with_serve() -> None:
    """In a browser tab's process: be SIGKILLed when ``serve`` ends, however it ends (``PR_SET_PDEATHSIG``, as the
    keeper does); already orphaned (serve died before this ran): exit now. Linux only; elsewhere serve's own
    shutdown ends its tabs."""
    parent = os.environ.pop(TAB_PARENT_VAR, "")
    if not parent.isdigit() or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != int(parent):
        os._exit(EXIT_FAILED)


def attach_tui(run_dir: Path, *, role: str = "control", theme: str | None = None, mouse: bool = True,
               name: str | None = None) -> int:
    """Open the TUI on the engine of ``run_dir``; the exit code (0 after a detach, else the sweep's)."""
    in_tab = bool(os.environ.get(TAB_PARENT_VAR))
    die_with_serve()
    from specbench_tui.engine.attached import AttachedEngine, AttachError

    try:
        engine = AttachedEngine(run_dir, role=role, name=name)
    except AttachError as exc:
        from specbench_tui.application.runstatus import report_unattachable

        # A browser tab's page shows what the tab wrote to its standard error (its output is the screen's stream).
        return report_unattachable(run_dir, str(exc), out=sys.stderr if in_tab else None)
    from specbench_tui.tui.app import SpecbenchApp

    for variable in ("COLUMNS", "LINES"):
        if not os.environ.get("TEXTUAL_DRIVER"):  # the browser's driver sizes itself from these
            os.environ.pop(variable, None)
    app = SpecbenchApp(engine, theme=theme)
    try:
        app.run(mouse=mouse)
    finally:
        if not engine.closed.is_set() and not app.engine_stopped:
            engine.detach()
    if app.stop_error is not None:
        print(f"specbench: stopping the sweep failed: {app.stop_error}", file=sys.stderr)
        return EXIT_FAILED
    if engine.detached and not engine.finished:
        return say_detached(engine.run_dir, engine.engine_pid)
    from specbench_tui.application.runstatus import print_ending

    return print_ending(engine.run_dir)


def say_detached(run_dir: Path, pid: int | None) -> int:
    lines = (f"specbench: detached; the sweep goes on in its engine (pid {pid}).",
             f"  watch it again:  specbench attach {run_dir}",
             f"  follow it:       specbench logs {run_dir} --follow",
             f"  stop it:         specbench stop {run_dir}")
    try:
        print("\n".join(lines))
    except OSError:
        pass
    return 0
