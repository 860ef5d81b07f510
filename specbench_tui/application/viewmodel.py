"""What a view of a sweep shows, worded once for every view (the TUI, and the texts it shares with the CLI).

The TUI draws; what a configuration's outcome *is* ("zero-out", "partial") is decided below it
(:func:`specbench_tui.core.verdicts.config_verdict`), and the sentences a user reads about the sweep file are
written here, not in a widget.
"""

from __future__ import annotations

from specbench_tui.core.plan import Plan, PlannedConfig


def _shown(text: str, limit: int) -> str:
    """``text`` as one printable line of at most ``limit`` characters (names and reasons are untrusted)."""
    line = "".join(ch if ch.isprintable() else " " for ch in str(text))
    return line if len(line) <= limit else line[: limit - 1] + "…"


def sweep_file(plan: Plan) -> str:
    """The sweep file the user ran: a resumed or attached run's plan is read from the run directory's copy, but
    its exclude rules are edited in the user's own file (``run.json``'s ``sweep_path``)."""
    return str(plan.sweep.path)


def excluded_hint(plan: Plan, config: PlannedConfig) -> str:
    """Why ``r`` cannot queue an excluded configuration, and the fix: the rule lives in the sweep file the user
    ran (never the run directory's copy, which a resume reads back unchanged)."""
    path = _shown(sweep_file(plan), 200)
    return (f"{_shown(config.name, 80)} cannot run: the sweep file excludes it ({_shown(config.skip_reason or '', 200)})."
            f" Remove or narrow that exclude rule in {path}, then start a new run: specbench run {path}")
