"""The live server log: lines of the running server(s), fatal and warning lines marked as they arrive.

A server can print thousands of lines a second, and only the few dozen on screen are ever looked at. Live
server lines arrive formatted and classified (:class:`~specbench_tui.application.logview.LogFeed` does that off
the UI thread, at a capped frame rate, the newest lines first); the panel stores them and colours a line by its
level marker only when it is drawn (then caches the result). Writing a burst costs a list extend; the terminal
sees at most one redraw per refresh. The full history is in the run directory's log files (key ``l``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Size
from textual.selection import Selection
from textual.strip import Strip
from textual.timer import Timer
from textual.widgets import Log

from specbench_tui.application.logview import NAME_WIDTH, format_live_line
from specbench_tui.tui.log_style import LogHighlighter
from specbench_tui.tui.palette import palette_of
from specbench_tui.tui.safe_text import clean

__all__ = ["MAX_LINES", "NAME_WIDTH", "PAINT_INTERVAL_S", "ServerLogPanel", "format_live_line"]

MAX_LINES = 5000
"""Lines kept in memory; the full history is in the run directory's log files."""
PAINT_INTERVAL_S = 0.25
"""Least time between two repaints of the panel while lines pour in (4 a second: a flood is not read line by
line; the queue, results and keys are not held up by it)."""

RawLine = tuple[str, str, str | None]
"""(configuration name, line as the server printed it, the engine's level); name :data:`SHOWN`: the line is
already formatted for display (by :class:`~specbench_tui.application.logview.LogFeed`, off the UI thread)."""
SHOWN = "\x00shown"


class ServerLogPanel(Log):
    """A ``Log`` of raw lines, formatted and coloured by the theme only when drawn."""

    ALLOW_MAXIMIZE = True

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(highlight=True, max_lines=MAX_LINES, id=id, classes="panel")
        self.highlighter = LogHighlighter()
        self.border_title = "3 Server log"
        self.lines_received = 0
        """Every line handed to :meth:`append_lines`, including those dropped to keep up."""
        self._raw: list[RawLine] = []
        self._first = 0
        """Sequence number of ``_raw[0]`` (lines ever written before it): the key of the caches."""
        self._formatted: LRUCache[int, str] = LRUCache(1024)
        self._strips: LRUCache[int, Strip] = LRUCache(1024)
        self._painted_at = float("-inf")
        self._paint_timer: Timer | None = None
        self._follow: bool | None = None
        """Whether the view was at the end when the unpainted lines arrived (None: all painted)."""
        self._first_painted = 0
        self._rich_style: Style | None = None
        self._widest = 0
        """The widest line drawn so far, in cells (the panel's horizontal extent)."""

    # -- writing ---------------------------------------------------------------------------------------

    def append_raw(self, lines: Sequence[RawLine], dropped: int = 0) -> None:
        """Write a burst of ``(name, line, level)`` in one go (only the newest ``MAX_LINES`` are kept).

        ``dropped`` counts the lines of the burst the caller already left out.
        """
        self.lines_received += len(lines) + dropped
        if not lines:
            return
        if self._follow is None:
            self._follow = self.is_vertical_scroll_end
        self._raw.extend(lines[-MAX_LINES:])
        excess = len(self._raw) - MAX_LINES
        if excess > 0:
            del self._raw[:excess]
            self._first += excess
        # Repaint at most every PAINT_INTERVAL_S: the lines are stored at once, the screen catches up.
        wait = self._painted_at + PAINT_INTERVAL_S - time.monotonic()
        if wait <= 0 or not self.is_mounted:
            self._paint()
        elif self._paint_timer is None:
            self._paint_timer = self.set_timer(wait, self._paint)

    def _paint(self) -> None:
        self._paint_timer = None
        self._painted_at = time.monotonic()
        follow, self._follow = self._follow, None
        if self.scroll_y > 0 and self._first_painted != self._first and not follow:
            # Lines dropped off the top: keep the lines the user is reading in place.
            self.scroll_to(y=max(0, self.scroll_y - (self._first - self._first_painted)), animate=False,
                           immediate=True)
        self._first_painted = self._first
        self.virtual_size = Size(self._widest, len(self._raw))
        if self.auto_scroll and follow and not self.is_vertical_scrollbar_grabbed:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        self.refresh()

    def append_shown(self, lines: Sequence[str], dropped: int = 0) -> None:
        """Write display lines formatted before they reached the UI thread (drawn as they are)."""
        self.append_raw([(SHOWN, line, None) for line in lines], dropped)

    def append_lines(self, lines: Sequence[str], dropped: int = 0) -> None:
        """Write already-formatted lines (shown as they are)."""
        self.append_raw([("", line, None) for line in lines], dropped)

    def write_lines(self, lines: Iterable[str], scroll_end: bool | None = None) -> ServerLogPanel:
        self.append_lines([part for line in lines for part in line.splitlines()])
        return self

    def clear(self) -> ServerLogPanel:
        self._first += len(self._raw)
        self._raw.clear()
        self._widest = 0
        self._strips.clear()
        self.virtual_size = Size(0, 0)
        return self

    # -- reading ---------------------------------------------------------------------------------------

    def _text(self, index: int) -> str:
        """Line ``index`` of those kept, formatted (cached by sequence number)."""
        key = self._first + index
        text = self._formatted.get(key)
        if text is None:
            name, line, level = self._raw[index]
            text = line if name == SHOWN else format_live_line(name, line, level) if name else clean(line)
            self._formatted[key] = text
        return text

    @property
    def lines(self) -> list[str]:
        """The kept lines, formatted as displayed (formats every one: for tests and selection only)."""
        return [self._text(i) for i in range(len(self._raw))]

    @property
    def line_count(self) -> int:
        return len(self._raw)

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        return selection.extract("\n".join(self.lines)), "\n"

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._rich_style = None
        self._strips.clear()

    def selection_updated(self, selection: Selection | None) -> None:
        self._strips.clear()
        self.refresh()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        index = scroll_y + y
        rich_style = self._rich_style
        if rich_style is None:  # computing it walks the DOM: once per style change, not once per line
            rich_style = self._rich_style = self.rich_style
        if index >= len(self._raw):
            return Strip.blank(width, rich_style)
        strip = self._strip(index, rich_style)
        return strip.crop_extend(scroll_x, scroll_x + width, rich_style).apply_offsets(scroll_x, index)

    def _strip(self, index: int, rich_style: Style) -> Strip:
        key = self._first + index
        selection = self.text_selection
        if selection is None and (cached := self._strips.get(key)) is not None:
            return cached
        plain = self._text(index)
        text = Text(plain, no_wrap=True)
        text.stylize(rich_style)
        highlighter = self.highlighter
        if isinstance(highlighter, LogHighlighter):  # set in __init__; Log types it as any Highlighter
            highlighter.palette = palette_of(self)
        highlighter.highlight(text)
        if selection is not None and (span := selection.get_span(index)) is not None:
            start, end = span
            text.stylize(self.screen.get_component_rich_style("screen--selection"), start, len(text) if end == -1 else end)
        length = cell_len(plain)
        strip = Strip(text.render(self.app.console), length)
        if length > self._widest:  # the horizontal extent grows with the widest line drawn so far
            self._widest = length
            self.call_later(self._grow_width)
        if selection is None:
            self._strips[key] = strip
        return strip

    def _grow_width(self) -> None:
        self.virtual_size = Size(self._widest, len(self._raw))

    def set_sources(self, names: Sequence[str]) -> None:
        """Show which servers are being followed."""
        if names:
            self.border_subtitle = Text(clean(", ".join(names), 120))
        else:
            self.border_subtitle = Text("no server running")
