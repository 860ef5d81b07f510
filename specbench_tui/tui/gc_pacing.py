"""Full garbage collections when nobody is typing, instead of whenever the collector decides.

A full (generation 2) collection walks every object it tracks; on the live screen that is ~100,000 objects
(cached strips and segments of the panels, the latest analysis), about 100-200 ms on a slow core, and under a
log flood the collector ran one every ~2 s, a pause that landed on whatever key was pressed then. While the app
runs, automatic full collections are off (generation 2's threshold is set out of reach; the young generations
are collected as usual) and :class:`GarbagePacer` runs one itself from the app's 1 s tick: once
:data:`IDLE_S` have passed without a key, at most every :data:`EVERY_S` (the first one :data:`FIRST_S` after
start), and at the latest after :data:`AT_MOST_S` whatever the keyboard does, so cyclic garbage never piles up
for long. One that is overdue while someone types runs the moment a key's answer has been drawn (its
:data:`HOLD_S` over), the point furthest from the next key for a steady typist, not at the 1 s tick's phase:
there it landed on a key (on a bench pressing a key every 0.8 s for a minute, one press in twenty waited
200-300 ms for it). What is alive after that collection is then frozen (``gc.freeze``: still freed by reference counting
when dropped), so the next one walks only what was made since; the price is that a reference cycle alive at a
freeze and dropped later is never collected (a few hundred objects per freeze on the live screen: 5 s of flood
leave ~400 objects of cyclic garbage). Within :data:`HOLD_S` of a key no collection runs at all, young
generations included: the key's answer is drawn first.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

IDLE_S = 1.5
"""No key for this long: a full collection cannot delay an answer the user waits for."""
FIRST_S = 3.0
"""The first collection, the only one that walks the whole heap (Textual, the app, the filled panels: ~370,000
objects, 100-250 ms), is due this soon after start, so that it runs before anyone types, not at
:data:`AT_MOST_S` into a session of keys."""
EVERY_S = 20.0
HOLD_S = 0.3
"""After a key, no automatic collection at all (the young generations' included) for this long: the key's answer
is drawn first and what it allocated is collected after (a theme change allocates enough for ~10 ms of young
collections, a sixth of its cost)."""
AT_MOST_S = 45.0
OVERDUE_GRACE_S = 5.0
"""An overdue collection waits this long for a key's answer to be drawn (the moment it runs while someone types)
before the tick runs it anyway (no key came, or the app gives the pacer no timer)."""
OUT_OF_REACH = 1_000_000
"""Generation 2's threshold while the pacer runs (counts generation-1 collections)."""


class GarbagePacer:
    """Decides when the app runs a full garbage collection (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, collect: Callable[[], object] = gc.collect,
                 freeze: Callable[[], object] = gc.freeze,
                 schedule: Callable[[float, Callable[[], None]], object] | None = None) -> None:
        self.clock = clock
        self.collect = collect
        self.freeze = freeze
        self.schedule = schedule
        """``schedule(delay_s, callback)`` runs ``callback`` later (the app's timer); None: keys hold nothing."""
        self.held = False
        """Automatic collections are off until the last key's answer had its :data:`HOLD_S`."""
        self._held_until = float("-inf")
        self.collections = 0
        """Full collections run so far."""
        self._saved: tuple[int, int, int] | None = None
        self._key_at = float("-inf")
        self._collected_at = clock()

    @property
    def running(self) -> bool:
        return self._saved is not None

    def start(self) -> None:
        """Turn automatic full collections off (until :meth:`stop`)."""
        if self._saved is None:
            self._saved = gc.get_threshold()
            gc.set_threshold(self._saved[0], self._saved[1], OUT_OF_REACH)
            self._collected_at = self.clock()

    def stop(self) -> None:
        """Give the collector its own thresholds back, and the frozen objects."""
        self._release(force=True)
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None
            if self.collections:
                gc.unfreeze()

    def key_pressed(self) -> None:
        """A key: no automatic collection until its answer is drawn (:data:`HOLD_S`)."""
        now = self._key_at = self.clock()
        if self._saved is None or self.schedule is None:
            return
        self._held_until = now + HOLD_S
        if not self.held and gc.isenabled():
            gc.disable()
            self.held = True
            self.schedule(HOLD_S, self._release)

    def key_hold_left(self) -> float:
        """Seconds left until the last key's answer has had its :data:`HOLD_S` (0 when none is held): background
        work that would compete with the answer for the GIL (an analysis, a chart drawing) waits as long."""
        return max(0.0, self._key_at + HOLD_S - self.clock())

    def keys_idle(self) -> bool:
        """Whether :data:`IDLE_S` have passed since the last key (true before any): heavy background work that
        cannot be cut into small pieces (a full collection, parsing the themes' CSS again) waits for it."""
        return self.clock() - self._key_at >= IDLE_S

    def _release(self, force: bool = False) -> None:
        """Automatic collections on again, once the last key's hold is over (or at once with ``force``)."""
        if not self.held:
            return
        left = self._held_until - self.clock()
        if left > 0.005 and not force and self.schedule is not None:
            self.schedule(left, self._release)  # a later key extended the hold
            return
        self.held = False
        gc.enable()
        if not force and self._saved is not None and self._overdue(self.clock()):
            self._collect()  # overdue while someone types: now, with the answer drawn and the next key furthest

    def tick(self) -> bool:
        """Run a full collection if one is due now; True when it ran."""
        if self._saved is None:
            return False
        now = self.clock()
        since = now - self._collected_at
        idle = self.keys_idle()
        due = EVERY_S if self.collections else FIRST_S
        # Overdue while someone types: the end of a key's hold runs it (see _release), unless none comes.
        overdue = self._overdue(now) and (idle or self.schedule is None or self._overdue(now, OVERDUE_GRACE_S))
        if overdue or (since >= due and idle):
            self._collect()
            return True
        return False

    def _overdue(self, now: float, late_by: float = 0.0) -> bool:
        """Whether :data:`AT_MOST_S` (and ``late_by`` more) have passed since the last full collection."""
        return now - self._collected_at >= AT_MOST_S + late_by

    def _collect(self) -> None:
        self.collect()
        self.freeze()
        self.collections += 1
        self._collected_at = self.clock()

