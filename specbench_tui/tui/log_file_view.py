"""A server log read from disk, rendering only the visible lines (line API over an index of offsets).

The file is indexed in a thread (the byte offset where each line starts); visible lines are read on demand
and kept in an LRU cache, so a log of millions of lines opens at once and scrolls smoothly. Search and the
errors-and-warnings filter run as byte regexes over a memory map of the file.
"""

from __future__ import annotations

import bisect
import mmap
import os
import re
from pathlib import Path
from typing import BinaryIO, ClassVar

from rich.segment import Segment
from rich.text import Text
from textual import work
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.worker import Worker

from specbench_tui.tui.log_style import LogHighlighter, classify, problem_keywords
from specbench_tui.tui.palette import DEFAULT_PALETTE, palette_of
from specbench_tui.tui.safe_text import MAX_LINE_CHARS, clean

READ_CHUNK = 8 * 1024 * 1024
MAX_READ_BYTES = MAX_LINE_CHARS * 4
"""Bytes of one line read for display; a longer line shows how much was left out."""


class LogFileView(ScrollView, can_focus=True):
    """The lines of one log file, with a gutter of line numbers, a cursor line and search highlights."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "log-file-view--gutter", "log-file-view--cursor", "log-file-view--match",
    }

    class Indexed(Message):
        """A thread finished indexing ``[start, end)`` of the file: ``starts`` are new line starts."""

        def __init__(self, start: int, end: int, starts: list[int], reset: bool = False,
                     error: str | None = None) -> None:
            super().__init__()
            self.start = start
            self.end = end
            self.starts = starts
            self.reset = reset
            self.error = error
            """Why the file could not be read, when it could not."""

    class Changed(Message):
        """The line count, cursor, filter or follow state changed (the screen's title follows)."""

    cursor_line: reactive[int | None] = reactive(None)
    """0-based file line of the current search hit or crash line."""
    problems_only: reactive[bool] = reactive(False)
    """Show only fatal, error and warning lines."""
    follow: reactive[bool] = reactive(False)
    """Keep reading the file as it grows and stay at the end."""

    def __init__(self, path: Path, *, follow: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.path = Path(path)
        self.highlighter = LogHighlighter(DEFAULT_PALETTE, live=False)
        self.crash_index: int | None = None
        """The 0-based line the engine recorded as the crash (drawn as one; no other line of a file is)."""
        self.query_text = ""
        """The search term highlighted in visible lines."""
        self.missing: str | None = None
        """Why the file cannot be read, when it cannot."""
        self._starts: list[int] = [0]
        self._file_size = 0
        self._indexing = False
        self._problems: list[int] = []
        self._problems_scanned = 0
        self._line_cache: LRUCache[int, str] = LRUCache(4096)
        self._widest_line = 0
        self._file_handle: BinaryIO | None = None
        self._end_y: float | None = None
        """Where following last scrolled to the end (the user scrolling elsewhere since stops the catch-up)."""
        self.set_reactive(LogFileView.follow, follow)

    # ------------------------------------------------------------------------------------------ indexing

    def on_mount(self) -> None:
        self._index(0)
        self.set_interval(0.5, self._poll)

    def on_unmount(self) -> None:
        if self._file_handle is not None:
            self._file_handle.close()
            self._file_handle = None

    def _poll(self) -> None:
        if not self.follow:
            return
        if not self.is_vertical_scroll_end and self._end_y is not None and abs(self.scroll_y - self._end_y) < 1:
            # The end moved after the last scroll to it (it was taken before the layout caught up with the new
            # lines): catch up, unless the user has scrolled elsewhere since.
            self._to_end()
        if not self._indexing:
            self._index(self._file_size)

    def _follow_to_end(self) -> None:
        """Stay at the end once the view has been laid out with what changed."""
        self.call_after_refresh(self._to_end)

    def _to_end(self) -> None:
        self.scroll_end(animate=False, immediate=True)
        self._end_y = self.scroll_y

    def reload(self) -> None:
        """Read whatever was appended since the last index."""
        if not self._indexing:
            self._index(self._file_size)

    def _index(self, start: int) -> None:
        self._indexing = True
        self._index_file(start)

    @work(thread=True, exclusive=True, group="log-index", exit_on_error=False)
    def _index_file(self, start: int) -> None:
        """Find the line starts from ``start`` to the end of the file, posting them in chunks."""
        try:
            size = os.stat(self.path).st_size
        except OSError as exc:
            self.post_message(LogFileView.Indexed(start, start, [], error=f"cannot read the log: {exc.strerror or exc}"))
            return
        if size < start:
            self.post_message(LogFileView.Indexed(0, 0, [], reset=True))
            start = 0
        with open(self.path, "rb") as handle:
            handle.seek(start)
            position = start
            while position < size:
                chunk = handle.read(min(READ_CHUNK, size - position))
                if not chunk:
                    break
                starts = [position + m.end() for m in re.finditer(b"\n", chunk)]
                self.post_message(LogFileView.Indexed(position, position + len(chunk), starts))
                position += len(chunk)
        if position == start:
            self.post_message(LogFileView.Indexed(start, start, []))

    def on_log_file_view_indexed(self, message: Indexed) -> None:
        message.stop()
        self.missing = message.error
        if message.reset:
            if self._file_handle is not None:
                self._file_handle.close()
                self._file_handle = None
            self._starts = [0]
            self._file_size = 0
            self._problems = []
            self._problems_scanned = 0
            self._line_cache.clear()
        if message.start != self._file_size or message.end <= message.start:
            self.post_message(LogFileView.Changed())
            return
        last = self.line_count - 1
        if last >= 0:
            self._line_cache.discard(last)
        self._starts.extend(message.starts)
        self._file_size = message.end
        if self.problems_only:
            self._scan_problems()
        self._update_virtual_size()
        if self.follow:
            self._follow_to_end()
        self.refresh()
        self.post_message(LogFileView.Changed())

    def watch_show_horizontal_scrollbar(self, shown: bool) -> None:
        """The horizontal scrollbar came or went (a wider line was drawn): a followed log stays at its end."""
        if self.follow:
            self._follow_to_end()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if getattr(event.worker, "group", None) == "log-index" and event.worker.is_finished:
            self._indexing = False

    @property
    def line_count(self) -> int:
        """Lines in the file (a last line without a newline counts)."""
        if self._file_size == 0:
            return 0
        return len(self._starts) - 1 if self._starts[-1] >= self._file_size else len(self._starts)

    @property
    def visible_count(self) -> int:
        return len(self._problems) if self.problems_only else self.line_count

    def _gutter_width(self) -> int:
        return len(str(max(self.line_count, 1))) + 1

    def _update_virtual_size(self) -> None:
        self.virtual_size = Size(self._widest_line + self._gutter_width() + 1, self.visible_count)

    # ------------------------------------------------------------------------------------------ reading

    def _span(self, line: int) -> tuple[int, int]:
        start = self._starts[line]
        end = self._starts[line + 1] - 1 if line + 1 < len(self._starts) else self._file_size
        return start, max(start, end)

    def line_text(self, line: int) -> str:
        """The cleaned text of 0-based ``line`` (cut to :data:`MAX_LINE_CHARS` for display)."""
        cached = self._line_cache.get(line)
        if cached is not None:
            return cached
        start, end = self._span(line)
        try:
            if self._file_handle is None:
                self._file_handle = open(self.path, "rb", buffering=0)  # noqa: SIM115 - unbuffered: the file changes
            self._file_handle.seek(start)
            data = self._file_handle.read(min(end - start, MAX_READ_BYTES))
        except OSError:
            return ""
        left_out = (end - start) - len(data)
        text = clean(data.decode("utf-8", "replace").rstrip("\r"))
        if left_out > 0:
            text += f" … [+{left_out} bytes]"
        self._line_cache[line] = text
        return text

    def file_line_at(self, row: int) -> int | None:
        """The file line shown on virtual row ``row``."""
        if self.problems_only:
            return self._problems[row] if 0 <= row < len(self._problems) else None
        return row if 0 <= row < self.line_count else None

    def row_of(self, line: int) -> int | None:
        """The virtual row showing file line ``line`` (None when filtered out)."""
        if not self.problems_only:
            return line if 0 <= line < self.line_count else None
        index = bisect.bisect_left(self._problems, line)
        return index if index < len(self._problems) and self._problems[index] == line else None

    # ------------------------------------------------------------------------------------------ rendering

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        base = self.rich_style
        line = self.file_line_at(scroll_y + y)
        if line is None:
            return Strip.blank(width, base)
        gutter_width = self._gutter_width()
        gutter_style = base + self.get_component_rich_style("log-file-view--gutter")
        gutter = Strip([Segment(f"{line + 1:>{gutter_width - 1}} ", gutter_style)], gutter_width)
        body = Text(self.line_text(line), style=base, no_wrap=True, end="")
        self.highlighter.palette = palette_of(self)
        self.highlighter.highlight(body)
        if line == self.crash_index:
            body.stylize(self.highlighter.palette.crash)
        if self.query_text:
            match_style = self.get_component_rich_style("log-file-view--match")
            for match in re.finditer(re.escape(self.query_text), body.plain, re.IGNORECASE):
                body.stylize(match_style, match.start(), match.end())
        if line == self.cursor_line:
            body.stylize(self.get_component_rich_style("log-file-view--cursor"))
        body_width = max(1, width - gutter_width)
        if body.cell_len > self._widest_line:
            self._widest_line = body.cell_len
            self.call_after_refresh(self._update_virtual_size)
        body_strip = Strip(body.render(self.app.console), body.cell_len)
        cursor_fill = base + self.get_component_rich_style("log-file-view--cursor") if line == self.cursor_line \
            else base
        body_strip = body_strip.crop_extend(scroll_x, scroll_x + body_width, cursor_fill)
        return Strip.join([gutter, body_strip])

    def watch_cursor_line(self) -> None:
        self.refresh()
        self.post_message(LogFileView.Changed())

    def watch_problems_only(self, problems_only: bool) -> None:
        if problems_only:
            self._scan_problems()
        self._update_virtual_size()
        self.scroll_to(y=0, animate=False)
        if self.cursor_line is not None:
            self.show_line(self.cursor_line)
        self.refresh()
        self.post_message(LogFileView.Changed())

    def watch_follow(self, follow: bool) -> None:
        if follow:
            self.reload()
            self._to_end()
        self.post_message(LogFileView.Changed())

    def show_line(self, line: int, reveal: bool = False) -> None:
        """Scroll so that file line ``line`` is in the middle of the view; a line the filter hides is shown only
        with ``reveal`` (the filter goes off), else the view stays where it is."""
        row = self.row_of(line)
        if row is None and self.problems_only and reveal:
            self.problems_only = False
            row = self.row_of(line)
        if row is None:
            return
        self.follow = False
        self.scroll_to(y=max(0, row - self.size.height // 2), animate=False, immediate=True)

    # ------------------------------------------------------------------------------------------ search

    def _map(self) -> mmap.mmap | None:
        if self._file_size == 0:
            return None
        try:
            with open(self.path, "rb") as handle:
                return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            return None

    def _line_of_offset(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset) - 1

    def _keyword_lines(self, mapped: mmap.mmap, start: int, limit: int) -> list[int]:
        """Lines in ``[start, limit)`` holding any of :func:`problem_keywords`, in order."""
        lines: set[int] = set()
        for keyword in problem_keywords():
            position = mapped.find(keyword, start, limit)
            while position >= 0:
                line = self._line_of_offset(position)
                lines.add(line)
                next_start = self._starts[line + 1] if line + 1 < len(self._starts) else limit
                position = mapped.find(keyword, next_start, limit) if next_start < limit else -1
        return sorted(lines)

    def _scan_problems(self) -> None:
        """Add the fatal, error and warning lines of the part of the file not scanned yet."""
        mapped = self._map()
        if mapped is None:
            return
        with mapped:
            limit = min(self._file_size, len(mapped))
            start_line = self._line_of_offset(self._problems_scanned) if self._problems_scanned else 0
            if self._problems and self._problems[-1] >= start_line:
                start_line = self._problems[-1] + 1
            start = self._starts[start_line] if start_line < len(self._starts) else limit
            candidates = self._keyword_lines(mapped, start, limit)
        self._problems.extend(line for line in candidates if classify(self.line_text(line)) != "info")
        self._problems_scanned = limit

    def find(self, query: str, forward: bool = True) -> tuple[int | None, int]:
        """Move the cursor to the next (or previous) line containing ``query``, wrapping around; with the
        errors-and-warnings filter on, only among the lines it shows (search and filter compose).

        Returns the line found (None when nowhere, or nowhere the filter shows) and how many matches the whole
        file has.
        """
        self.query_text = query
        self.refresh()
        if not query:
            return None, 0
        mapped = self._map()
        if mapped is None:
            return None, 0
        pattern = re.compile(re.escape(query.encode("utf-8", "replace")), re.IGNORECASE)
        with mapped:
            limit = min(self._file_size, len(mapped))
            total = sum(1 for _ in pattern.finditer(mapped, 0, limit))
            if total == 0:
                return None, 0
            current = self.cursor_line
            if current is None:
                top = self.file_line_at(round(self.scroll_y))
                current = (top - 1) if (forward and top is not None) else (top if top is not None else 0)
            candidates = self._matching_lines(pattern, mapped, limit, current, forward)
        visible = [line for line in candidates if self.row_of(line) is not None]
        chosen = visible[0] if visible else None
        if chosen is None:
            return None, total
        self.cursor_line = chosen
        self.show_line(chosen)
        return chosen, total

    def _matching_lines(self, pattern: re.Pattern[bytes], mapped: mmap.mmap, limit: int, current: int,
                        forward: bool) -> list[int]:
        """Lines with a match after (or before) ``current``, nearest first, then the wrapped-around ones."""
        lines: list[int] = []
        for match in pattern.finditer(mapped, 0, limit):
            line = self._line_of_offset(match.start())
            if not lines or lines[-1] != line:
                lines.append(line)
            if len(lines) > 100_000:
                break
        if forward:
            after = [n for n in lines if n > current]
            return after + [n for n in lines if n <= current]
        before = [n for n in reversed(lines) if n < current]
        return before + [n for n in reversed(lines) if n >= current]

    def jump_to(self, line: int) -> None:
        """Put the cursor on 0-based ``line`` and scroll to it."""
        if 0 <= line < max(self.line_count, 1):
            self.cursor_line = line
            self.show_line(line, reveal=True)

    def find_last(self, text: str) -> int | None:
        """The last line containing ``text`` exactly (for locating a crash line)."""
        mapped = self._map()
        if mapped is None or not text:
            return None
        with mapped:
            needle = text.encode("utf-8", "replace")
            offset = mapped.rfind(needle, 0, min(self._file_size, len(mapped)))
        return self._line_of_offset(offset) if offset >= 0 else None
