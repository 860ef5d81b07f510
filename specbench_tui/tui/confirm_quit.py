"""Asks before quitting while servers run, because quitting stops the sweep and tears them down."""

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


class ConfirmQuitScreen(ModalScreen[bool]):
    """Yes/no dialog; dismisses with True to quit."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "confirm", "Quit and stop servers", id="quit-confirm"),
        Binding("n,escape", "cancel", "Keep running", id="quit-cancel"),
    ]

    def __init__(self, running: Sequence[str]) -> None:
        super().__init__()
        self.running = list(running)
        """Names of the configurations whose servers are up."""

    def compose(self) -> ComposeResult:
        count = len(self.running)
        names = ", ".join(clean(n, 60) for n in self.running[:4]) + (" …" if count > 4 else "")
        message = Text(no_wrap=False)
        message.append("Quit specbench?\n\n", style="bold")
        message.append(f"{count} server{'s are' if count != 1 else ' is'} running: ")
        message.append(names)
        message.append(".\nQuitting stops the sweep and tears the servers down. Finished measurements stay in "
                       "the run directory; `specbench run --resume` continues later. Ctrl-C again quits.")
        with Vertical(id="quit-dialog"):
            yield Static(message, id="quit-message")
            with Horizontal(id="quit-buttons"):
                yield Button("Quit (y)", variant="error", id="quit-yes")
                yield Button("Keep running (n)", variant="primary", id="quit-no")

    def on_mount(self) -> None:
        self.query_one("#quit-no", Button).focus()

    @on(Button.Pressed, "#quit-yes")
    def action_confirm(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#quit-no")
    def action_cancel(self) -> None:
        self.dismiss(False)
