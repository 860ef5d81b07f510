"""The recommendation over the chart (key ``r`` there): per workload and band the configuration to deploy and its
exact server command, as ``specbench recommend`` prints it (:mod:`specbench_tui.application.recommend_text`)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from specbench_tui.tui.key_bar import KeyBar
from specbench_tui.tui.safe_text import clean


class RecommendScreen(ModalScreen[None]):
    """A scrollable copy of ``specbench recommend``'s text for the analysis the chart shows."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", id="recommend-close"),
        Binding("q", "close", "Back", show=False, id="recommend-close-q"),
        Binding("r", "close", "Back", show=False, id="recommend-close-r"),
    ]
    DEFAULT_CSS = """
    RecommendScreen { align: center middle; }
    RecommendScreen #recommend-box { width: 90%; height: 80%; border: round $accent; background: $surface; }
    RecommendScreen #recommend-title { height: 1; background: $panel; }
    """

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="recommend-box"):
            yield Static(Text(" recommendation: the winner per band and its command  (Esc: back)", no_wrap=True),
                         id="recommend-title")
            lines = [clean(line, 2000) for line in self.text.splitlines()]
            yield Static(Text("\n".join(lines)), id="recommend-text")
        yield KeyBar()

    def action_close(self) -> None:
        self.dismiss()
