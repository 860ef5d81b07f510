"""Toasts that say one thing per event burst, never pile up, and are all kept for the notifications screen.

Every notification has a *topic* (``("zero", config_id)``, ``("crash", config_id)``, ``("queue",)``…). A new
notification on a topic whose toast is still up replaces that toast instead of stacking another one, and a burst
on one topic is merged into one sentence ("dflash-b32: zero output on 4 workloads (code, …)"). At most
:data:`MAX_SHOWN` toasts are up at once (the oldest goes first). Whatever was announced is in :attr:`history`,
newest last, for the notifications screen (key ``n``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TYPE_CHECKING, Literal

from textual.app import ScreenStackError
from textual.css.query import NoMatches
from textual.notifications import Notification

from specbench_tui.tui.textual_private import (
    begin_batch,
    end_batch,
    is_shown,
    retell,
    show_notification,
    take_down,
    toast_showing,
)

if TYPE_CHECKING:
    from textual.app import App

Severity = Literal["information", "warning", "error"]
MAX_SHOWN = 3
"""Toasts on screen at once (two on a terminal under 30 lines); older ones leave the screen, not the history."""
MAX_HISTORY = 1000
ANSWER_WAIT_S = 0.05
"""How long a key's answer holds the screen for its toast to mount (it takes a few turns of the event loop)."""


@dataclass
class Entry:
    """One announcement as the history screen lists it."""

    at: float
    severity: Severity
    title: str
    message: str
    topic: Hashable | None = None
    count: int = 1
    """How many events this entry stands for (a merged burst)."""
    items: list[str] = field(default_factory=list)
    """What the burst was about, in arrival order (workloads, lines…)."""


class Notifier:
    """Posts coalesced toasts on ``app`` and keeps the history."""

    def __init__(self, app: App[Any], clock: Callable[[], float] = time.time) -> None:
        self.app = app
        self.clock = clock
        self.history: list[Entry] = []
        """Every announcement, oldest first (merged bursts are one entry)."""
        self._live: dict[Hashable, tuple[Notification, Entry]] = {}
        self._shown: list[Notification] = []
        self._answer: Notification | None = None
        """The notification of the last key's answer (its toast may be gone since)."""

    def post(self, message: str, *, title: str = "", severity: Severity = "information", timeout: float = 6.0,
             topic: Hashable | None = None, record: bool = True, merges: Entry | None = None) -> Entry:
        """Show ``message`` (replacing the toast of the same topic, if it is still up) and record it.

        The history keeps every notification: a new one on a topic replaces the toast on screen, never the entry
        of an earlier one (a resume does not erase "paused"; a retry does not erase "skipped"). Only a burst's own
        growing sentence (``merges``, the entry it extends) takes the place of its earlier wording."""
        entry = Entry(self.clock(), severity, title, message, topic)
        if topic is not None and topic in self._live:
            old, _ = self._live.pop(topic)
            self._remove(old)
        if record:
            if merges is not None and merges in self.history:
                self.history.remove(merges)
            self.record(entry)
        self._show(entry, timeout, topic)
        return entry

    def answer(self, message: str, *, topic: Hashable, severity: Severity = "information",
               timeout: float = 4.0) -> Entry:
        """A key's answer: its toast and whatever else the key changes on screen are drawn in one frame.

        The keys' answers share one toast: while the last answer's toast is up, a new answer is written into it
        (:func:`~specbench_tui.tui.textual_private.retell`: nothing mounted, nothing laid out, drawn in the frame
        that draws the key's other changes) and its time starts over. Otherwise a toast is put up: Textual mounts
        it over a few turns of its event loop, and the screen's update timer drew the key's other changes (a
        paused header, a restyled table) in between, the toast one or two frames (16-50 ms) later; so repaints are
        held (Textual's batch update) from now until the toast is mounted, or at most :data:`ANSWER_WAIT_S`. What
        the caller changes after this call, in the same turn, is in that frame too."""
        slot = self._answer
        if slot is not None and retell(self.app, slot, message, severity, timeout):
            entry = Entry(self.clock(), severity, "", message, topic)
            for key, (notification, _) in list(self._live.items()):
                if notification is slot or key == topic:
                    del self._live[key]
                    if notification is not slot:
                        self._remove(notification)
            self._live[topic] = (slot, entry)
            return entry
        begin_batch(self.app)
        try:
            entry = self.post(message, severity=severity, timeout=timeout, topic=topic, record=False)
            self._answer = self._live[topic][0]
        finally:
            if not self.app.call_later(self._release_when_up, topic):
                end_batch(self.app)  # the app is closing: nothing would end the batch
        return entry

    async def _release_when_up(self, topic: Hashable) -> None:
        deadline = time.monotonic() + ANSWER_WAIT_S
        try:
            turns = 0
            while not self.toast_ready(topic) and time.monotonic() < deadline:
                turns += 1
                await asyncio.sleep(0 if turns < 20 else 0.002)  # the toast mounts in its own task
        finally:
            end_batch(self.app)

    def record(self, entry: Entry) -> None:
        """Keep ``entry`` in the history without showing a toast (what a key already said on screen)."""
        self.history.append(entry)
        del self.history[:-MAX_HISTORY]

    def is_up(self, topic: Hashable) -> bool:
        """Whether a toast of ``topic`` is on screen."""
        return topic in self._live

    def burst(self, topic: Hashable, item: str, render: Callable[[list[str]], str], *, title: str,
              severity: Severity = "warning", timeout: float = 12.0) -> Entry:
        """Add ``item`` to the burst on ``topic`` and show one toast for the whole burst (``render(items)``)."""
        live = self._live.get(topic)
        items = [*live[1].items] if live is not None else []
        if item not in items:
            items.append(item)
        entry = self.post(render(items), title=title, severity=severity, timeout=timeout, topic=topic,
                          merges=live[1] if live is not None else None)
        entry.items = items
        entry.count = len(items)
        return entry

    def dismiss(self, topic: Hashable) -> None:
        """Take the toast of ``topic`` off the screen (it stays in the history)."""
        live = self._live.pop(topic, None)
        if live is not None:
            self._remove(live[0])

    def toast_ready(self, topic: Hashable) -> bool:
        """Whether the toast of ``topic`` is mounted (true too when there is none to wait for)."""
        live = self._live.get(topic)
        if live is None:
            return True
        try:
            toast = toast_showing(self.app, live[0])
        except (NoMatches, ScreenStackError):
            return True  # notifications off (tests) or no screen yet
        return toast is not None and toast.is_mounted  # (none yet: the rack's ``show`` is queued)

    def _show(self, entry: Entry, timeout: float, topic: Hashable | None) -> None:
        notification = Notification(entry.message, entry.title, entry.severity, timeout, markup=False)
        self._shown = [n for n in self._shown if is_shown(self.app, n) and not n.has_expired]
        limit = MAX_SHOWN if self.app.size.height >= 30 else MAX_SHOWN - 1
        while len(self._shown) >= limit:
            oldest = self._shown.pop(0)
            self._remove(oldest, refresh=False)
            for key, (live, _) in list(self._live.items()):
                if live is oldest:
                    del self._live[key]
        self._shown.append(notification)
        if topic is not None:
            self._live[topic] = (notification, entry)
        show_notification(self.app, notification)

    def _remove(self, notification: Notification, refresh: bool = True) -> None:
        take_down(self.app, notification, refresh)
        if notification in self._shown:
            self._shown.remove(notification)
