"""Leaving when the terminal hangs up, even where SIGHUP is ignored.

Losing the terminal (the SSH session drops, the terminal window closes) sends SIGHUP, whose default action ends
the app: a client then simply goes (the sweep goes on in its engine), a ``--foreground`` sweep's keepers take its
servers down. A process that inherited SIGHUP as *ignored* (started under ``nohup``, or by a job runner that
ignores it) is never told; Textual's input thread then spins on the hung-up terminal (``select`` says readable,
``read`` returns nothing) at most of a core, forever, and a client counts as attached to its sweep for good.

:class:`HangupWatch` asks the kernel once a second whether the terminal hung up (``poll`` reports ``POLLHUP``
on a tty whose other side is gone) and then ends the process by SIGHUP's default action: the same ending as
without ``nohup``. Only an app drawing on a real terminal is watched (not headless tests, not a browser), on
Linux.
"""

from __future__ import annotations

import os
import select
import signal
import sys
from collections.abc import Callable
from typing import Any

from textual.app import App

EVERY_S = 1.0
"""How often the terminal is looked at (one ``poll`` with no wait: nothing measurable)."""
_GONE = select.POLLHUP | select.POLLERR | select.POLLNVAL


def terminal_fd() -> int | None:
    """The file descriptor of the terminal the app reads its keys from, or None when stdin is no terminal."""
    stream = sys.__stdin__
    try:
        fd = stream.fileno() if stream is not None else -1
    except (OSError, ValueError):
        return None
    return fd if fd >= 0 and os.isatty(fd) else None


def hung_up(fd: int) -> bool:
    """True when the terminal on ``fd`` hung up (or the descriptor is no longer usable)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    try:
        return any(events & _GONE for _, events in poller.poll(0))
    except OSError:
        return True


def end_as_hung_up() -> None:
    """End this process as an unignored SIGHUP would (exit status: killed by SIGHUP)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGHUP})
    os.kill(os.getpid(), signal.SIGHUP)
    os._exit(128 + signal.SIGHUP)  # only if the signal could not end it


class HangupWatch:
    """Checks the app's terminal every :data:`EVERY_S` seconds; ``on_hangup`` runs once it hung up."""

    def __init__(self, app: App[Any], on_hangup: Callable[[], None] = end_as_hung_up) -> None:
        self.app = app
        self.on_hangup = on_hangup
        self.fd: int | None = None

    def start(self) -> bool:
        """Start watching; False (and nothing watched) when the app does not draw on a real terminal."""
        if self.app.is_headless or self.app.is_web or not sys.platform.startswith("linux"):
            return False  # (macOS's poll() does not work on terminals: it would report every one as gone)
        self.fd = terminal_fd()
        if self.fd is None:
            return False
        self.app.set_interval(EVERY_S, self.check, name="hangup-watch")
        return True

    def check(self) -> None:
        if self.fd is not None and hung_up(self.fd):
            self.fd = None
            self.on_hangup()
