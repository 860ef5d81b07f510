"""Every notification of the session, newest first (key ``n``): what a toast said after it went away."""

from __future__ import annotations

import time
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Static

from specbench_tui.tui.key_bar import KeyBar
from specbench_tui.tui.notifier import Entry
from specbench_tui.tui.palette import Palette
from specbench_tui.tui.safe_text import clean

SEVERITY_WORDS = {"error": ("✖", "error"), "warning": ("▲", "warning"), "information": ("·", "info")}
"""Glyph and word per severity, so a line reads the same without colour."""


class NotificationsScreen(Screen[None]):
    """A table of the session's notifications (time, severity, title, message)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", id="notifications-close"),
        Binding("q", "close", "Back", show=False, id="notifications-close-q"),
        Binding("n", "close", "Back", show=False, id="notifications-close-n"),
    ]

    def __init__(self, entries: list[Entry], palette: Palette) -> None:
        super().__init__()
        self.entries = list(entries)
        self.palette = palette

    def compose(self) -> ComposeResult:
        count = len(self.entries)
        yield Static(Text(f" notifications  {count} this session, newest first  (Esc: back)", no_wrap=True),
                     id="notifications-title")
        table: DataTable[Text] = DataTable(id="notifications-table", cursor_type="row", zebra_stripes=False)
        yield table
        yield KeyBar()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for key, label in (("time", "time"), ("level", "level"), ("title", "what"), ("message", "message")):
            table.add_column(label, key=key)
        palette = self.palette
        styles = {"error": palette.crash, "warning": palette.zero_output, "information": palette.muted}
        for index, entry in enumerate(reversed(self.entries)):
            glyph, word = SEVERITY_WORDS.get(entry.severity, ("·", entry.severity))
            style = styles.get(entry.severity, palette.plain)
            message = clean(entry.message.replace("\n", " · "), 400)
            table.add_row(Text(time.strftime("%H:%M:%S", time.localtime(entry.at))),
                          Text(f"{glyph} {word}", style=style), Text(clean(entry.title, 60), style=style),
                          Text(message), key=str(index))
        if not self.entries:
            table.add_row(Text(""), Text(""), Text("nothing yet"), Text(""))
        table.focus()

    def action_close(self) -> None:
        self.dismiss()
