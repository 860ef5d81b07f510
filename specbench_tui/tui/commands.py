"""Command palette entries for every action, worded for the current state (Ctrl+P)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Protocol, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.fuzzy import Matcher

from specbench_tui.application.viewmodel import SweepView
from specbench_tui.core.events import ConfigState
from specbench_tui.core.state import ConfigView, RunState
from specbench_tui.tui.safe_text import clean


class CommandTarget(Protocol):
    """What the palette's commands read and call on the app (the app satisfies it; this module does not import
    the app, which imports it)."""

    state: RunState
    view: SweepView
    can_steer: bool
    specbench_themes: list[str]
    PANELS: tuple[tuple[str, str], ...]

    def selected_config(self) -> ConfigView | None: ...
    def acts(self, command: str, config_id: str) -> bool: ...
    def action_toggle_pause(self) -> None: ...
    def action_skip_selected(self) -> None: ...
    def action_retry_selected(self) -> None: ...
    def action_open_log(self) -> None: ...
    def skip_config(self, config_id: str) -> None: ...
    def retry_config(self, config_id: str) -> None: ...
    def open_log_of(self, config_id: str) -> None: ...
    def action_focus_panel(self, panel: str) -> None: ...
    def action_toggle_maximize(self) -> None: ...
    def action_notifications(self) -> None: ...
    def action_cycle_sort(self) -> None: ...
    def set_theme(self, name: str) -> None: ...
    def action_request_quit(self) -> None: ...


def highlight(matcher: Matcher, title: str) -> Content:
    """``title`` with the matched characters styled, never parsed as markup (names are untrusted)."""
    content = Content(title)
    _, offsets = matcher.fuzzy_search.match(matcher.query, title)
    for offset in offsets:
        if offset < len(title) and not title[offset].isspace():
            content = content.stylize(matcher.match_style, offset, offset + 1)
    return content


class SweepCommands(Provider):
    """``sweep:``, ``log:``, ``panel:``, ``results:`` and ``theme:`` commands."""

    def _commands(self, every_config: bool = True) -> Iterator[tuple[str, Callable[[], object], str]]:
        """The commands, worded for the current state; ``every_config`` adds one per configuration (for a
        search: the list shown before anything is typed stays short, whatever the size of the sweep)."""
        # Provider.app is typed App; this provider is registered on SpecbenchApp only (its COMMANDS).
        app = cast(CommandTarget, self.app)
        state = app.state
        steer = app.can_steer  # no pause, skip or retry in a read-only view, nor once the sweep has ended
        if steer:
            yield from self._queue_commands(app)
        selected = app.selected_config()
        if selected is not None:
            name = clean(selected.name, 60)
            # Offered only where they act (a running one's skip is "skip the running", above).
            if steer and not selected.state.active and app.acts("skip", selected.config_id):
                yield f"sweep: skip {name}", app.action_skip_selected, "skip the selected configuration (s)"
            if steer and app.acts("retry", selected.config_id):
                yield f"sweep: retry {name}", app.action_retry_selected, "queue the selected configuration again (r)"
            yield f"log: open the full log of {name}", app.action_open_log, "search, filter, crash jump (l)"
        for view in state.ordered_configs() if every_config else ():
            if selected is not None and view.config_id == selected.config_id:
                continue  # its commands are the selected one's, above
            name = clean(view.name, 60)
            if view.log_path:
                yield f"log: {name}", partial(app.open_log_of, view.config_id), "open this server's full log"
            if not steer:
                continue
            if app.acts("retry", view.config_id):
                yield f"sweep: retry {name}", partial(app.retry_config, view.config_id), "queue it again"
            elif view.state is ConfigState.PENDING:
                yield f"sweep: skip {name}", partial(app.skip_config, view.config_id), "do not run it"
        for number, (panel, label) in enumerate(app.PANELS, start=1):
            yield f"panel: focus {label}", partial(app.action_focus_panel, panel), f"({number})"
        yield "panel: maximise or restore the focused panel", app.action_toggle_maximize, "(m)"
        yield "notifications: show every notification of this session", app.action_notifications, "(n)"
        yield "results: sort by the next column", app.action_cycle_sort, "(o)"
        for theme in app.specbench_themes:
            yield f"theme: {theme}", partial(app.set_theme, theme), "switch colours (t cycles)"
        yield "quit", app.action_request_quit, "stop the sweep and tear the servers down (q)"

    @staticmethod
    def _queue_commands(app: CommandTarget) -> Iterator[tuple[str, Callable[[], object], str]]:
        """Pause or resume (as the header shows the queue: what p asked for, until the engine answers), and a skip
        per running configuration."""
        if app.view.paused:
            yield "sweep: resume the queue", app.action_toggle_pause, "launch the next configurations again (p)"
        else:
            yield "sweep: pause the queue", app.action_toggle_pause, "finish the request in flight, launch nothing new (p)"
        for view in app.state.active():
            yield f"sweep: skip the running {clean(view.name, 60)}", partial(app.skip_config, view.config_id), \
                "stop its server and mark it skipped (S)"

    async def discover(self) -> Hits:
        for title, callback, help_text in self._commands(every_config=False):
            yield DiscoveryHit(Content(title), callback, text=title, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, callback, help_text in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, highlight(matcher, title), callback, text=title, help=help_text)
