"""Why the sweep could not start, on screen until the user dismisses it (the same reasons print at exit)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from specbench_tui.tui.safe_text import clean


class PreflightFailedScreen(ModalScreen[bool]):
    """The pre-flight's reasons; Enter or Esc closes it, q quits."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter,escape", "close", "Close", id="preflight-close"),
        Binding("q", "quit", "Quit", id="preflight-quit"),
    ]

    def __init__(self, reasons: Sequence[str]) -> None:
        super().__init__()
        self.reasons = list(reasons)

    def compose(self) -> ComposeResult:
        message = Text(no_wrap=False)
        message.append("✖ Pre-flight failed: nothing was launched\n\n", style="bold")
        for reason in self.reasons or ["(no reason given)"]:
            message.append("• ")
            message.append(clean(reason, 600))
            message.append("\n")
        message.append("\nFix the cause and run the sweep again. These reasons are printed again when you quit.")
        with Vertical(id="preflight-dialog"):
            yield Static(message, id="preflight-message")
            with Horizontal(id="preflight-buttons"):
                yield Button("Close (Enter)", variant="primary", id="preflight-close")
                yield Button("Quit (q)", variant="error", id="preflight-quit")

    def on_mount(self) -> None:
        self.query_one("#preflight-close", Button).focus()

    @on(Button.Pressed, "#preflight-close")
    def action_close(self) -> None:
        self.dismiss(False)

    @on(Button.Pressed, "#preflight-quit")
    def action_quit(self) -> None:
        self.dismiss(True)
