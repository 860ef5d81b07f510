"""The full log of one configuration's server, from disk: search, errors-only filter, crash jump, follow."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Input, Static

from specbench_tui.tui.header import display_path
from specbench_tui.tui.key_bar import KeyBar
from specbench_tui.tui.log_file_view import LogFileView
from specbench_tui.tui.palette import palette_of
from specbench_tui.tui.safe_text import clean


class FullLogScreen(Screen[None]):
    """One server log file, rendered lazily, with search (/, n, N, F3) and a jump to the crash."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "start_search", "Search", id="log-search"),
        Binding("n", "find_next", "Next", id="log-find-next"),
        Binding("N", "find_previous", "Prev", id="log-find-previous"),
        Binding("f3", "find_next", "Next", show=False, id="log-find-next-f3"),
        Binding("shift+f3", "find_previous", "Prev", show=False, id="log-find-previous-f3"),
        Binding("e", "toggle_problems", "Errors only", id="log-problems-only"),
        Binding("c", "jump_crash", "Crash", id="log-jump-crash"),
        Binding("f", "toggle_follow", "Follow", id="log-follow"),
        Binding("g", "top", "Top", show=False, id="log-top"),
        Binding("G", "bottom", "End", show=False, id="log-bottom"),
        Binding("escape", "close", "Back", id="log-close"),
        Binding("q", "close", "Back", show=False, id="log-close-q"),
    ]

    def __init__(self, name: str, path: Path, *, follow: bool = False,
                 crash_line_number: int | None = None, crash_line: str | None = None,
                 signature: str | None = None) -> None:
        super().__init__()
        self.config_name = name
        """Name of the configuration whose log this is (server-provided text: shown cleaned)."""
        self.path = Path(path)
        self.crash_line_number = crash_line_number
        """1-based line of the crash line, when the engine reported it."""
        self.crash_line = crash_line
        self.signature = signature
        self.status = ""
        """The last search result or action outcome, shown in the title."""
        self._initial_follow = follow

    def retarget(self, *, follow: bool, crash_line_number: int | None, crash_line: str | None,
                 signature: str | None) -> None:
        """Bring a kept screen up to date before it is shown again (the server may have crashed since)."""
        self.crash_line_number = crash_line_number
        self.crash_line = crash_line
        self.signature = signature
        if self.is_mounted:
            view = self.view
            view.crash_index = crash_line_number - 1 if crash_line_number else None
            view.reload()
            if follow and not view.follow:
                view.follow = True
            self._update_title()

    def compose(self) -> ComposeResult:
        yield Static(id="log-title")
        view = LogFileView(self.path, follow=self._initial_follow, id="log-view")
        yield view
        search = Input(placeholder="search (Enter: find, Esc: close)", id="log-search-input")
        search.display = False
        yield search
        yield KeyBar()

    @property
    def view(self) -> LogFileView:
        return self.query_one(LogFileView)

    def on_mount(self) -> None:
        self.view.crash_index = self.crash_line_number - 1 if self.crash_line_number else None
        self.view.focus()
        self._update_title()

    @on(LogFileView.Changed)
    def _view_changed(self) -> None:
        self._update_title()

    def _update_title(self) -> None:
        view = self.view
        palette = palette_of(self)
        title = Text(no_wrap=True, overflow="ellipsis", end="")
        title.append(" log ", style=palette.accent)
        title.append(clean(self.config_name, 80), style="bold")
        title.append(f"  {view.line_count:,} lines")
        if view.problems_only:
            title.append(f" ({view.visible_count:,} errors & warnings)", style=palette.warning)
        if view.follow:
            title.append("  following", style=palette.success)
        if self.signature:
            title.append("  ✖ ", style=palette.crash)
            title.append(clean(self.signature, 80), style=palette.crash)
            title.append(" (c)", style=palette.muted)
        if self.status:
            title.append("  ")
            title.append(clean(self.status, 120))
        if view.missing:
            title.append("  ")
            title.append(clean(view.missing, 200), style=palette.crash)
        title.append("  ")
        title.append(clean(display_path(str(self.path)), 300), style=palette.muted)
        self.query_one("#log-title", Static).update(title)

    # ------------------------------------------------------------------------------------------ actions

    def action_start_search(self) -> None:
        search = self.query_one("#log-search-input", Input)
        search.display = True
        search.focus()

    @on(Input.Submitted, "#log-search-input")
    def _search_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        event.input.display = False
        self.view.focus()
        self.search(event.value, forward=True)

    def search(self, query: str, forward: bool = True) -> int | None:
        """Find ``query`` after (or before) the cursor; returns the 0-based line found."""
        line, total = self.view.find(query, forward)
        if not query:
            self.status = ""
        elif line is None and total and self.view.problems_only:
            self.status = (f"“{query}”: not among the errors & warnings ({total} match{'es' if total != 1 else ''} "
                           "in the whole log: e shows every line)")
        elif line is None:
            self.status = f"“{query}”: not found"
        else:
            self.status = f"“{query}”: line {line + 1} ({total} match{'es' if total != 1 else ''})"
        self._update_title()
        return line

    def action_find_next(self) -> None:
        if self.view.query_text:
            self.search(self.view.query_text, forward=True)
        else:
            self.action_start_search()

    def action_find_previous(self) -> None:
        if self.view.query_text:
            self.search(self.view.query_text, forward=False)
        else:
            self.action_start_search()

    def action_toggle_problems(self) -> None:
        """Errors and warnings only, or every line; a search goes on within what is shown."""
        view = self.view
        view.problems_only = not view.problems_only
        hidden = view.cursor_line is None or view.row_of(view.cursor_line) is None
        if view.query_text and view.problems_only and hidden:
            self.search(view.query_text, forward=True)

    def action_toggle_follow(self) -> None:
        self.view.follow = not self.view.follow

    def action_top(self) -> None:
        self.view.follow = False
        self.view.scroll_home(animate=False)

    def action_bottom(self) -> None:
        self.view.scroll_end(animate=False)

    def action_jump_crash(self) -> None:
        """Put the cursor on the crash line the engine recorded: its line number, else its text (the TUI guesses
        none from the file's words: a line is a crash when the engine said so)."""
        view = self.view
        line: int | None = None
        if self.crash_line_number is not None and 0 < self.crash_line_number <= view.line_count:
            line = self.crash_line_number - 1
        if line is None and self.crash_line:
            line = view.find_last(self.crash_line)
        view.crash_index = line
        if line is None:
            self.status = "no crash line in this log"
        else:
            view.jump_to(line)
            self.status = f"crash at line {line + 1}"
        self._update_title()

    def action_close(self) -> None:
        search = self.query_one("#log-search-input", Input)
        if search.display:
            search.display = False
            self.view.focus()
            return
        self.dismiss()
