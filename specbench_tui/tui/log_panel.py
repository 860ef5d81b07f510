"""The live server log: lines of the running server(s), fatal and warning lines marked as they arrive."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Log

from specbench_tui.tui.log_style import (
    MARKERS,
    LogHighlighter,
    classify,
    compact_batch_line,
)
from specbench_tui.tui.palette import Palette
from specbench_tui.tui.safe_text import clean

MAX_LINES = 5000
"""Lines kept in memory; the full history is in the run directory's log files."""
NAME_WIDTH = 16
_SGLANG_STAMP = re.compile(r"^\[\d{4}-\d\d-\d\d (\d\d:\d\d:\d\d(?:\.\d+)?)((?: [A-Z]{2}\d+)*)\] ")


def format_live_line(name: str, line: str, level: str | None) -> str:
    """``"✖ ddtree-b8-tp1   │ text"``: level marker, configuration name, cleaned text."""
    text = clean(line)
    level_found = classify(text, level)
    if level_found == "info":
        text = compact_batch_line(text)
    text = _SGLANG_STAMP.sub(lambda m: f"{m[1]}{m[2]} ", text, count=1)
    marker = MARKERS.get(level_found, " ")
    label = clean(name, 40)
    return f"{marker} {label:<{NAME_WIDTH}} │ {text}"


class ServerLogPanel(Log):
    """A ``Log`` fed in batches; lines are cleaned strings, coloured at render time by the theme."""

    ALLOW_MAXIMIZE = True

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(highlight=True, max_lines=MAX_LINES, id=id, classes="panel")
        self.highlighter = LogHighlighter()
        self.border_title = "3 Server log"
        self.lines_received = 0
        """Every line handed to :meth:`append_lines`, including those dropped to keep up."""

    def set_palette(self, palette: Palette) -> None:
        """Recolour with the theme's styles."""
        self.highlighter.palette = palette
        self._render_line_cache.clear()
        self.refresh()

    def append_lines(self, lines: Sequence[str], dropped: int = 0) -> None:
        """Write a batch in one go (only the newest ``MAX_LINES`` of a burst are kept).

        ``dropped`` counts the lines of the burst the caller already left out.
        """
        self.lines_received += len(lines) + dropped
        if not lines:
            return
        if len(lines) > MAX_LINES:
            lines = lines[-MAX_LINES:]
        self.write_lines(lines)

    def set_sources(self, names: Sequence[str]) -> None:
        """Show which servers are being followed."""
        if names:
            self.border_subtitle = Text(clean(", ".join(names), 120))
        else:
            self.border_subtitle = Text("no server running")
