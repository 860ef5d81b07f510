"""What ``q`` asks in a client attached to an engine process: detach (the sweep goes on) or stop the sweep."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

DETACH = "detach"
STOP = "stop"


class DetachOrStopScreen(ModalScreen[str | None]):
    """Dismisses with :data:`DETACH`, :data:`STOP`, or None (keep watching)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "detach", "Detach", id="detach-detach"),
        Binding("s,y", "stop", "Stop the sweep", id="detach-stop"),
        Binding("n,escape", "cancel", "Keep watching", id="detach-cancel"),
    ]

    def __init__(self, running: int, engine_pid: int | None, read_only: bool = False) -> None:
        super().__init__()
        self.running = running
        """How many servers are up."""
        self.engine_pid = engine_pid
        """The engine process the sweep runs in."""
        self.read_only = read_only
        """A view without control: it can only detach."""

    def compose(self) -> ComposeResult:
        message = Text(no_wrap=False)
        message.append("Leave this view?\n\n", style="bold")
        message.append(f"The sweep runs in its own engine process (pid {self.engine_pid}); "
                       f"{self.running} server{'s are' if self.running != 1 else ' is'} up.\n"
                       "Detach: this view closes, the sweep goes on (attach again with `specbench attach`).\n")
        if not self.read_only:
            message.append("Stop: the sweep stops and its servers are torn down for every client "
                           "(`specbench run --resume` continues later).")
        with Vertical(id="quit-dialog"):
            yield Static(message, id="quit-message")
            with Horizontal(id="quit-buttons"):
                yield Button("Detach (d)", variant="primary", id="detach-yes")
                if not self.read_only:
                    yield Button("Stop sweep (s)", variant="error", id="detach-stop")
                yield Button("Keep watching (n)", id="detach-no")

    def on_mount(self) -> None:
        self.query_one("#detach-yes", Button).focus()

    @on(Button.Pressed, "#detach-yes")
    def action_detach(self) -> None:
        self.dismiss(DETACH)

    @on(Button.Pressed, "#detach-stop")
    def action_stop(self) -> None:
        if not self.read_only:
            self.dismiss(STOP)

    @on(Button.Pressed, "#detach-no")
    def action_cancel(self) -> None:
        self.dismiss(None)
