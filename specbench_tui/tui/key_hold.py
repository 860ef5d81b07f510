"""When the last key was pressed: background work on the UI thread waits until the key's answer is drawn."""

from __future__ import annotations

import time
from collections.abc import Callable

HOLD_S = 0.3
"""After a key, work that would compete with its answer for the GIL (an analysis, a chart drawing, the server
log's new lines) waits this long."""


class KeyHold:
    """The time of the last key, and how long background work still waits for its answer."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        """The clock keys are stamped with (set by hand in tests)."""
        self._key_at = float("-inf")

    def key_pressed(self) -> None:
        self._key_at = self.clock()

    def key_hold_left(self) -> float:
        """Seconds left until the last key's answer has had its :data:`HOLD_S` (0 when none is held)."""
        return max(0.0, self._key_at + HOLD_S - self.clock())


def answer_held_for(app: object) -> float:
    """Seconds the last key's answer of ``app`` is still held for (0 for an app without a :class:`KeyHold`)."""
    hold = getattr(app, "key_hold", None)
    return hold.key_hold_left() if isinstance(hold, KeyHold) else 0.0
