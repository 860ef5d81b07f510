"""Full garbage collections run when nobody types (a full collection of the live screen's heap pauses ~150 ms)."""

from __future__ import annotations

import gc

from specbench_tui.tui.gc_pacing import AT_MOST_S, EVERY_S, FIRST_S, IDLE_S, OUT_OF_REACH, GarbagePacer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_collects_when_idle_and_due_and_at_the_latest_while_typing() -> None:
    clock, runs, freezes = Clock(), [], []
    pacer = GarbagePacer(clock, lambda: runs.append(clock.now), lambda: freezes.append(clock.now))
    saved = gc.get_threshold()
    pacer.start()
    try:
        assert gc.get_threshold() == (saved[0], saved[1], OUT_OF_REACH)  # no automatic full collections
        clock.now += FIRST_S - 1
        assert not pacer.tick()  # not due yet
        clock.now += 1
        assert pacer.tick() and runs == [clock.now]  # the first (the whole heap) soon after start, when idle
        clock.now += EVERY_S - 1
        assert not pacer.tick()  # the next ones: not due yet
        clock.now += 1
        assert pacer.tick() and runs[-1] == clock.now  # due and idle
        clock.now += EVERY_S
        pacer.key_pressed()
        clock.now += IDLE_S / 2
        assert not pacer.tick()  # due, but a key was just pressed
        while clock.now < runs[-1] + AT_MOST_S - 0.5:  # typing without a pause …
            clock.now += 0.5
            pacer.key_pressed()
            assert not pacer.tick()
        clock.now += 0.5
        assert pacer.tick()  # … yet never longer than AT_MOST_S without one
        assert pacer.collections == 3
        assert freezes == runs  # what survives a collection is frozen: the next one walks only what is new
    finally:
        pacer.stop()
    assert gc.get_threshold() == saved
    assert not pacer.tick()  # stopped: the collector decides again


def test_the_first_collection_waits_for_a_pause_in_typing_too() -> None:
    clock, runs = Clock(), []
    pacer = GarbagePacer(clock, lambda: runs.append(clock.now), lambda: None)
    pacer.start()
    try:
        clock.now += FIRST_S
        pacer.key_pressed()
        assert not pacer.tick()  # due, but a key was just pressed
        clock.now += IDLE_S
        assert pacer.tick() and len(runs) == 1
    finally:
        pacer.stop()
