"""The terminal's own alerts: on a crash, a stall, a zero-output configuration, a pre-flight stop, a paused queue
that waits for a person and the sweep's end, every attached client rings the bell and sends a desktop notification
through the terminal (OSC 9 and OSC 777: they travel over SSH to the user's own terminal).

What to say and how often is :mod:`specbench_tui.core.alerts`'s (the engine's notification URLs get the same
alerts, grouped alike). The engine calls :meth:`TerminalAlerts.take` on its thread, which only queues; a timer on
the UI thread rate-limits them and writes the sequences, each with one ``write`` to the terminal Textual draws on
(a write to a terminal is not interleaved with another one). Only an app drawing on a real terminal writes (not
headless tests, not a browser tab); ``[notify] terminal = false`` turns it off.
"""

from __future__ import annotations

import os
import queue
import sys
import time
from collections.abc import Callable
from typing import Any

from textual.app import App

from specbench_tui.core.alerts import Alert, AlertGate, AlertWatch, terminal_sequences
from specbench_tui.core.events import Event

EVERY_S = 1.0
"""How often held alerts are looked at and queued ones written."""


def terminal_out() -> int | None:
    """The file descriptor Textual draws on (its Linux driver writes to standard error), when it is a terminal."""
    stream = sys.__stderr__
    try:
        fd = stream.fileno() if stream is not None else -1
    except (OSError, ValueError):
        return None
    return fd if fd >= 0 and os.isatty(fd) else None


class TerminalAlerts:
    """An event subscriber of the app's engine that writes each alert's bell and desktop notification."""

    def __init__(self, app: App[Any], *, interval_s: float, sweep: str = "sweep",
                 write: Callable[[str], None] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        self.watch = AlertWatch(sweep=sweep)
        self.gate = AlertGate(interval_s)
        self.clock = clock
        self.since = time.time() - 2.0
        """Events older than this are an attached client's replay of the past: no alert for them."""
        self._write = write
        self._queue: queue.SimpleQueue[Alert] = queue.SimpleQueue()
        self.written: list[Alert] = []

    def start(self) -> None:
        """Write from now on, when drawing on a real terminal (or with an explicit ``write``)."""
        if self._write is None:
            fd = terminal_out()
            if fd is None or self.app.is_headless:
                return
            self._write = lambda text: _write_all(fd, text.encode("utf-8", errors="replace"))
        self.app.set_interval(EVERY_S, self.flush)

    def take(self, event: Event) -> None:
        """The subscriber (any thread): the event's alerts queued."""
        if event.ts < self.since:
            return
        for alert in self.watch(event):
            self._queue.put(alert)

    def flush(self) -> None:
        """On the UI thread: queued alerts through the rate limit, written with what a closed window released."""
        now = self.clock()
        out: list[Alert] = []
        try:
            while True:
                out += self.gate.offer(self._queue.get_nowait(), now)
        except queue.Empty:
            pass
        out += self.gate.due(now)
        if out and self._write is not None:
            tmux = bool(os.environ.get("TMUX"))
            try:
                self._write("".join(terminal_sequences(alert, tmux=tmux) for alert in out))
            except OSError:
                return  # the terminal went away: the hang-up watch ends the app
            self.written += out


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
