"""The control side of a running sweep: a small command interface used by the TUI, tests and Ctrl-C.

Commands are plain methods on an object implementing :class:`SweepControl`; they only *request* a change
and return at once. The orchestrator acts on them at safe points and reports what happened as events.
Keeping this surface small lets a later TUI attached over a local socket drive the same engine.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class SweepControl(Protocol):
    """Requests a user can make of a running sweep."""

    def pause(self) -> None:
        """Finish the request in flight, then launch nothing new until :meth:`resume`."""

    def resume(self) -> None:
        """Continue after :meth:`pause`."""

    def skip(self, config_id: str) -> None:
        """Skip a pending configuration, or stop the running one and mark it skipped."""

    def retry(self, config_id: str) -> None:
        """Queue a crashed, failed or skipped configuration again (its completed measurements are kept)."""

    def abort(self, now: bool = False) -> None:
        """Stop the sweep: after the request in flight (``now=False``) or at once; servers are torn down."""

    @property
    def paused(self) -> bool:
        """Whether the queue is paused."""
