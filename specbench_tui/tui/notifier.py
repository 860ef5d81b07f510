"""Toasts that say one thing per event burst, never pile up, and are all kept for the notifications screen.

Every notification has a *topic* (``("zero", config_id)``, ``("crash", config_id)``, ``("queue",)``…). A new
notification on a topic whose toast is still up replaces that toast instead of stacking another one, and a burst
on one topic is merged into one sentence ("dflash-b32: zero output on 4 workloads (code, …)"). At most
:data:`MAX_SHOWN` toasts are up at once (the oldest goes first). Whatever was announced is in :attr:`history`,
newest last, for the notifications screen (key ``n``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TYPE_CHECKING, Literal

from textual.app import ScreenStackError
from textual.notifications import Notification, Notify
from textual.widget import Widget

if TYPE_CHECKING:
    from textual.app import App

Severity = Literal["information", "warning", "error"]
MAX_SHOWN = 3
"""Toasts on screen at once (two on a terminal under 30 lines); older ones leave the screen, not the history."""
MAX_HISTORY = 1000
ANSWER_HOLD_S = 0.15
"""The longest the screen waits for a key's answer to be up before it draws the key's effect without it."""
ANSWER_POLL_S = 0.002


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
        """A key's answer: shown in place of the last key's answer (one toast for the keys), not kept in the
        history (the key's effect is on screen)."""
        if self._answer is not None:
            self._remove(self._answer)
            for key, (notification, _) in list(self._live.items()):
                if notification is self._answer:
                    del self._live[key]
        entry = self.post(message, severity=severity, timeout=timeout, topic=topic, record=False)
        self._answer = self._live[topic][0]
        return entry

    def answer_with(self, message: str, effect: Callable[[], object], *, topic: Hashable,
                    timeout: float = 4.0) -> None:
        """A key's answer drawn in the same frame as the key's ``effect`` (a change the whole screen redraws for,
        such as a theme): the screen's updates are held (Textual's ``batch_update``) from the key until the
        answer's toast is mounted, at most :data:`ANSWER_HOLD_S`, then the screen is drawn once. Without the hold
        the effect is drawn first and the toast, mounted over the next few turns of the loop, a whole repaint
        later: on the 200-configuration table that was two full frames and ~50 ms more before the answer. The
        answer is posted once the effect's own callbacks have run (a theme is applied in one): a toast already
        coming while the new styles are laid out would have the screen draw, during the hold, a frame nobody
        sees. The hold holds layout too, so it ends at once when another screen comes (a key pressed meanwhile
        opened one), which is laid out and drawn as it would be without it."""
        app = self.app
        if not app.screen.query("ToastRack"):  # notifications off (a test), or a screen without toasts
            self.answer(message, topic=topic, timeout=timeout)
            effect()
            return
        screen = app.screen
        batch = app.batch_update()
        batch.__enter__()
        deadline = time.monotonic() + ANSWER_HOLD_S
        before: list[Widget] = []  # the toasts up before the answer (held, not their ids: a freed one's is reused)

        def release() -> None:
            batch.__exit__(None, None, None)
            with contextlib.suppress(ScreenStackError):  # (no screen left: the app is closing)
                app.screen.refresh()

        def check() -> None:
            try:  # (another screen came meanwhile, a key's: it is laid out and drawn at once, toast or not)
                shown = not app.is_running or app.screen is not screen or any(
                    toast.is_mounted and all(toast is not old for old in before) for toast in screen.query("Toast"))
            except ScreenStackError:  # the app is closing its last screen
                shown = True
            if shown or time.monotonic() >= deadline:
                release()
            else:
                app.set_timer(ANSWER_POLL_S, check)

        def post() -> None:
            before.extend(screen.query("Toast"))
            self.answer(message, topic=topic, timeout=timeout)
            app.set_timer(ANSWER_POLL_S, check)

        try:
            effect()
        except BaseException:
            release()
            raise
        app.call_next(post)

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

    def on_screen(self) -> list[Notification]:
        """The notifications whose toasts are up now, oldest first."""
        self._shown = [n for n in self._shown if not n.has_expired]
        return list(self._shown)

    def _show(self, entry: Entry, timeout: float, topic: Hashable | None) -> None:
        notification = Notification(entry.message, entry.title, entry.severity, timeout, markup=False)
        self._shown = [n for n in self._shown if not n.has_expired]
        limit = MAX_SHOWN if self.app.size.height >= 30 else MAX_SHOWN - 1
        while len(self._shown) >= limit:
            oldest = self._shown.pop(0)
            self._remove(oldest)
            for key, (live, _) in list(self._live.items()):
                if live is oldest:
                    del self._live[key]
        self._shown.append(notification)
        if topic is not None:
            self._live[topic] = (notification, entry)
        self._sweep_empty_holders()
        self.app.post_message(Notify(notification))  # what App.notify does, keeping the notification to take down

    def _sweep_empty_holders(self) -> None:
        """Remove the toast holders left empty on the current screen. Textual's toast rack mounts each toast in a
        ``ToastHolder``; a toast that expires removes its holder, but one the rack takes down because its
        notification was withdrawn (every toast this notifier replaces) goes alone and leaves the holder
        (Textual 8.2.8, ``ToastRack.show``): one empty node per replaced toast, restyled on every theme change
        and laid out on every layout, ~35 after 30 keys. Found by type name, through the public query API; a
        holder is removed only once mounted (before that its toast is not mounted in it yet)."""
        try:
            holders = self.app.screen.query("ToastHolder")
        except ScreenStackError:  # no screen yet (the app starting) or none any more (quitting)
            return
        for holder in holders:
            if holder.is_mounted and not holder.children:
                holder.remove()

    def _remove(self, notification: Notification) -> None:
        """Take ``notification``'s toast down: expired, Textual's toast rack drops it when it next shows the toasts
        (the next toast, which every caller but :meth:`dismiss` posts at once, or the next screen shown)."""
        notification.timeout = 0
        if notification in self._shown:
            self._shown.remove(notification)
