"""The one-line header: sweep, progress, elapsed time, ETA and the run directory."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual.widget import Widget

from specbench_tui.core.events import ConfigState
from specbench_tui.core.state import RunState
from specbench_tui.tui.palette import DEFAULT_PALETTE, Palette
from specbench_tui.tui.safe_text import clean


def format_duration(seconds: float | None) -> str:
    """``1:02:03`` / ``2:03``; ``--:--`` when unknown."""
    if seconds is None:
        return "--:--"
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def display_path(path: str) -> str:
    """A path relative to the working directory when inside it, else with ``~`` for the home directory."""
    if not path:
        return ""
    try:
        resolved = Path(path).resolve()
        cwd = Path.cwd().resolve()
        if resolved.is_relative_to(cwd):
            return str(resolved.relative_to(cwd))
        home = Path(os.path.expanduser("~")).resolve()
        if resolved.is_relative_to(home):
            return "~/" + str(resolved.relative_to(home))
    except (OSError, ValueError):
        pass
    return path


class SweepHeader(Widget):
    """Sweep name, configurations done/total, measurements, crash and zero-output counts, elapsed, ETA."""

    def __init__(self, state: RunState, clock: Callable[[], float], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.state = state
        self.clock = clock
        self.palette: Palette = DEFAULT_PALETTE
        """Styles from the current theme (set by the app)."""
        self._shown_run_dir = display_path(state.run_dir)
        self._run_dir_source = state.run_dir

    def render(self) -> Text:
        state = self.state
        palette = self.palette
        now = self.clock()
        if state.run_dir != self._run_dir_source:
            self._run_dir_source = state.run_dir
            self._shown_run_dir = display_path(state.run_dir)
        text = Text(no_wrap=True, overflow="ellipsis", end="")
        text.append(" specbench ", style=palette.accent)
        text.append(clean(state.sweep_name or "(starting)", 80), style="bold")
        if state.simulated:  # the simulator's servers on the fake GPU box: nothing here is real hardware
            text.append(" SIMULATED", style=palette.zero_output)
        text.append("  ")
        text.append(f"{state.finished_count}/{state.total} configs", style="bold")
        text.append(f" · {state.measurements} meas")
        text.append(f"  ⏱ {format_duration(state.elapsed_s(now))}")
        if state.outcome is not None:
            text.append(f"  {state.outcome}", style=palette.success if state.outcome == "completed" else palette.crash)
        else:
            eta = state.eta_s(now)
            text.append(f"  ETA {format_duration(eta) if eta is not None else 'learning'}", style=palette.muted
                        if eta is None else "")
        if getattr(self.app, "paused_shown", state.paused):
            text.append("  ⏸ PAUSED", style=palette.zero_output)
        counts = state.counts()
        crashed = counts.get(ConfigState.CRASHED.value, 0) + counts.get(ConfigState.FAILED.value, 0)
        if crashed:
            text.append(f"  ✖ {crashed} crashed", style=palette.crash)
        if state.zero_output:
            text.append(f"  ▲ {state.zero_output} zero-out", style=palette.zero_output)
        if self._shown_run_dir:
            text.append("  ")
            text.append(clean(self._shown_run_dir, 300), style=palette.muted)
        return text
