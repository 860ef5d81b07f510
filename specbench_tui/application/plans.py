"""Loading a sweep into a plan for a command, with its problems said on stderr. Cheap to import (core only):
``specbench validate`` uses it."""

from __future__ import annotations

import sys
from pathlib import Path

from specbench_tui.core.errors import SweepError
from specbench_tui.core.plan import Plan, build_plan
from specbench_tui.core.sweep.loader import load_sweep
from specbench_tui.paths import resolve_sweep


def load_plan_or_report(sweep_argument: str) -> Plan | None:
    """Load and expand a sweep (a path, or a shipped sweep's stem), printing the errors to stderr; None when
    invalid."""
    path = resolve_sweep(sweep_argument)
    try:
        sweep = load_sweep(path, display_path=str(path) if Path(sweep_argument).exists() else str(path))
        return build_plan(sweep)
    except SweepError as exc:
        count = len(exc.issues)
        print(f"specbench: {path}: {count} problem{'s' if count != 1 else ''}; nothing was launched", file=sys.stderr)
        for issue in exc.issues:
            print(f"  {issue}", file=sys.stderr)
        return None
