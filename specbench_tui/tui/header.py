"""The one-line header: sweep, progress, elapsed time, ETA and the run directory."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual.widget import Widget

from specbench_tui.core.eta import describe, estimate
from specbench_tui.application.viewmodel import SweepView, build_view
from specbench_tui.core.state import RunState
from specbench_tui.core.verdicts import PARTIAL, ZERO_OUTPUT
from specbench_tui.tui.palette import palette_of
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
        self._shown_run_dir = display_path(state.run_dir)
        self._run_dir_source = state.run_dir
        self.view: SweepView | None = None
        """The sweep view the app built at its last refresh (None: built here from the state alone)."""

    def render(self) -> Text:
        state = self.state
        palette = palette_of(self)
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
        views = list(state.configs.values())
        shown = self.view if self.view is not None else build_view(state)
        narrow = self.size.width < 110
        gap = " " if narrow else "  "
        # Skipped configurations are not "done": they are counted apart, and out of the total to run. The
        # outcome classes come before the clock and the measurement count, which a narrow terminal cuts first.
        text.append(f"{shown.ran}/{shown.to_run} ran", style="bold")
        for count, glyph, word, style in ((shown.crashed, "✖", "crashed", palette.crash),
                                          (shown.zero_out, "▲", ZERO_OUTPUT, palette.zero_output),
                                          (shown.partial, "◐", PARTIAL, palette.warning),
                                          (shown.skipped, "↷", "skipped", palette.muted)):
            if count:
                text.append(f"{gap}{glyph}{'' if narrow else ' '}{count} {word}", style=style)
        if shown.paused:
            text.append(f"{gap}⏸ PAUSED", style=palette.zero_output)
        if state.outcome is not None:
            text.append(f"{gap}{state.outcome}",
                        style=palette.success if state.outcome == "completed" else palette.crash)
        else:
            text.append(f"{gap}ETA ")
            eta = estimate(views, now)  # the one rule and its words (core.eta), as `specbench logs` says it
            words = describe(eta)
            if eta is None:
                text.append(words, style=palette.muted)
            elif " (" in words:
                likely, spread = words.split(" (", 1)
                text.append(likely)
                text.append(f" ({spread}", style=palette.muted)
            else:
                text.append(words)
        text.append(f"{gap}⏱ {format_duration(state.elapsed_s(now))}")
        text.append(f" · {state.measurements} meas")
        if self._shown_run_dir:
            text.append("  ")
            text.append(clean(self._shown_run_dir, 300), style=palette.muted)
        return text
