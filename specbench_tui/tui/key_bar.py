"""One line of the keys that work on the current screen, most needed first, drawn as one piece of text.

Textual's ``Footer`` mounts a widget per key and rebuilds them all whenever the focus or the bindings change
(tens of milliseconds with a dozen keys, on every panel switch and every screen change), and on a narrow
terminal it cuts whatever comes last. This bar is a single renderable: the keys are listed in the order the
screen declares them (quit first), and those that do not fit the width are left out from the end, so ``q``
always shows. A click on a key runs it.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.dom import DOMNode
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget

SEPARATOR = "  "
STEERING_ACTIONS = frozenset({"app.toggle_pause", "app.skip_selected", "app.skip_running", "app.retry_selected"})
"""The sweep screen's keys that steer the sweep (left out where the app cannot steer)."""


class KeyItem(NamedTuple):
    """One entry of the bar: what is shown and what a click runs."""

    key: str
    description: str
    action: str | None
    node: DOMNode | None
    enabled: bool


class KeyBar(Widget):
    """The screen's shown bindings in declaration order, cut from the end to fit (the first never)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"key-bar--key", "key-bar--description", "key-bar--disabled"}

    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $footer-background;
        color: $footer-foreground;
    }
    KeyBar > .key-bar--key {
        color: $footer-key-foreground;
        text-style: bold;
    }
    KeyBar > .key-bar--description {
        color: $footer-description-foreground;
    }
    KeyBar > .key-bar--disabled {
        text-style: dim;
    }
    """

    def __init__(self, *, id: str | None = None, show_palette: bool = True) -> None:
        super().__init__(id=id)
        self.show_palette = show_palette
        """Whether the command palette's key is listed (last)."""
        self._spans: list[tuple[int, int, KeyItem]] = []

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def _bindings_changed(self, screen: Screen[Any]) -> None:
        self.refresh()

    def items(self) -> list[KeyItem]:
        """What the bar lists, in order (bindings of one group become one entry such as ``1234 Panels``)."""
        items: list[KeyItem] = []
        seen_actions: set[str] = set()
        group_keys: dict[str, list[str]] = {}
        group_order: list[tuple[Binding.Group, int]] = []
        palette_item: KeyItem | None = None
        # The steering keys (pause, skip, retry) where they cannot act: a read-only view, an ended sweep (the app
        # says so through ``can_steer``; other apps have no such keys).
        hidden = STEERING_ACTIONS if not getattr(self.app, "can_steer", True) else frozenset()
        for node, binding, enabled, _ in self.screen.active_bindings.values():
            if binding.action == "app.command_palette" or binding.action == "command_palette":
                palette_item = KeyItem(self.app.get_key_display(binding), "Palette", binding.action, node, enabled)
                continue
            if not binding.show or binding.action in seen_actions or binding.action in hidden:
                continue
            seen_actions.add(binding.action)
            group = binding.group
            if group is not None:
                if group.description not in group_keys:
                    group_keys[group.description] = []
                    group_order.append((group, len(items)))
                    items.append(KeyItem("", group.description, None, None, True))
                group_keys[group.description].append(self.app.get_key_display(binding))
                continue
            items.append(KeyItem(self.app.get_key_display(binding), binding.description, binding.action, node,
                                 enabled))
        for group, index in group_order:
            items[index] = items[index]._replace(key="".join(group_keys[group.description]))
        if palette_item is not None and self.show_palette and self.app.ENABLE_COMMAND_PALETTE:
            items.append(palette_item)
        return items

    def render_line(self, y: int) -> Strip:
        """The bar as one strip of segments (the line API: a Rich ``Text`` would go through Textual's content
        pipeline, ~1.5 ms for this one line on every full repaint, a theme change's included)."""
        base = self.rich_style
        if y:
            return Strip.blank(self.size.width, base)
        segments = [Segment(text, base + style if style is not None else base) for text, style in self._pieces()]
        return Strip(segments).crop_extend(0, self.size.width, base)

    def plain(self) -> str:
        """The bar's text as drawn at the current width."""
        return "".join(text for text, _ in self._pieces())

    def _pieces(self) -> list[tuple[str, Style | None]]:
        """The bar's pieces of text and their looks (None: the bar's own), the keys that fit the width (the
        first always); records where each key is drawn, for clicks."""
        width = self.size.width
        key_style = self.get_component_rich_style("key-bar--key")
        description_style = self.get_component_rich_style("key-bar--description")
        disabled_style = self.get_component_rich_style("key-bar--disabled")
        pieces: list[tuple[str, Style | None]] = []
        length = 0
        self._spans = []
        for position, item in enumerate(self.items()):
            separator = SEPARATOR if position else ""
            item_length = cell_len(item.key) + 1 + cell_len(item.description)
            if position and length + len(separator) + item_length > width:
                break
            if separator:
                pieces.append((separator, None))
            start = length + len(separator)
            dim = disabled_style if not item.enabled else Style()
            pieces += [(item.key, key_style + dim), (" ", None), (item.description, description_style + dim)]
            length = start + item_length
            self._spans.append((start, length, item))
        return pieces

    def shown_keys(self) -> list[str]:
        """The keys drawn at the last render (for tests)."""
        return [item.key for _, _, item in self._spans]

    async def on_click(self, event: events.Click) -> None:
        for start, end, item in self._spans:
            if start <= event.x < end and item.action is not None and item.enabled:
                event.stop()
                await self.app.run_action(item.action, item.node)
                return
