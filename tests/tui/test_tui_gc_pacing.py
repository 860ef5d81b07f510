"""Full garbage collections run when nobody types (a full collection of the live screen's heap pauses ~150 ms)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specbench_tui.tui.gc_pacing import (AT_MOST_S, EVERY_S, FIRST_S, HOLD_S, IDLE_S, OUT_OF_REACH, OVERDUE_GRACE_S,
                                         GarbagePacer)


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


def test_an_overdue_collection_runs_when_a_keys_answer_is_drawn_not_at_the_ticks_phase() -> None:
    """Someone types a key every 0.8 s for longer than AT_MOST_S: the overdue collection runs at the end of a key's
    hold (its answer drawn, the next key furthest away), never from the tick, which lands anywhere, a key's
    answer included; the tick still runs it if no key's hold ends within OVERDUE_GRACE_S."""
    clock, runs = Clock(), []
    later: list[tuple[float, Callable[[], None]]] = []
    pacer = GarbagePacer(clock, lambda: runs.append(clock.now), lambda: None,
                         schedule=lambda delay, callback: later.append((clock.now + delay, callback)))
    pacer.start()
    try:
        start = clock.now
        for k in range(int((AT_MOST_S + 3) / 0.8)):
            clock.now = key_at = start + 0.8 * k
            pacer.key_pressed()
            clock.now = key_at + 0.1
            assert not pacer.tick()  # never while an answer is being drawn
            due, release = later.pop(0)
            clock.now = due
            release()
            if runs:
                break
            clock.now = key_at + 0.5
            assert not pacer.tick()  # nor between keys: the next hold's end comes first
        assert runs == [key_at + HOLD_S]  # at a hold's end …
        assert AT_MOST_S <= runs[0] - start < AT_MOST_S + 0.8 + HOLD_S  # … the first after it fell due
        # Keys whose holds never end (the app's timer is gone): the tick runs it once the grace is over.
        start = runs[0]
        while len(runs) == 1:
            clock.now += 0.8
            pacer.key_pressed()
            later.clear()
            clock.now += 0.5
            pacer.tick()
        assert AT_MOST_S + OVERDUE_GRACE_S <= runs[1] - start < AT_MOST_S + OVERDUE_GRACE_S + 1.3
    finally:
        pacer.stop()


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


def test_a_key_holds_every_automatic_collection_until_its_answer_is_drawn() -> None:
    """No collection (not even of the young generations) while a key's answer is being drawn: what it allocated
    is collected after. A later key extends the hold; stopping the pacer ends it."""
    clock = Clock()
    later: list[tuple[float, Callable[[], None]]] = []
    pacer = GarbagePacer(clock, lambda: None, lambda: None, schedule=lambda delay, callback: later.append(
        (clock.now + delay, callback)))
    assert gc.isenabled()
    pacer.start()
    try:
        pacer.key_pressed()
        assert not gc.isenabled() and pacer.held
        clock.now += HOLD_S / 2
        pacer.key_pressed()  # a second key before the hold is over
        due, release = later.pop(0)
        clock.now = due
        release()  # the first key's time is up, the second's is not: held on, asked again
        assert not gc.isenabled() and len(later) == 1
        due, release = later.pop(0)
        clock.now = due
        release()
        assert gc.isenabled() and not pacer.held
        pacer.key_pressed()
        assert not gc.isenabled()
    finally:
        pacer.stop()
    assert gc.isenabled() and not pacer.held  # stopping gives the collector back at once


def test_a_key_does_not_enable_a_collector_someone_else_turned_off() -> None:
    clock = Clock()
    pacer = GarbagePacer(clock, lambda: None, lambda: None, schedule=lambda delay, callback: callback())
    pacer.start()
    gc.disable()
    try:
        pacer.key_pressed()
        assert not pacer.held and not gc.isenabled()
    finally:
        gc.enable()
        pacer.stop()


def test_key_hold_left_counts_down_from_the_last_key() -> None:
    clock = Clock()
    pacer = GarbagePacer(clock)
    assert pacer.key_hold_left() == 0.0  # no key yet
    pacer.key_pressed()
    assert abs(pacer.key_hold_left() - HOLD_S) < 1e-9
    clock.now += HOLD_S / 2
    pacer.key_pressed()  # a later key starts its own hold
    assert abs(pacer.key_hold_left() - HOLD_S) < 1e-9
    clock.now += HOLD_S
    assert pacer.key_hold_left() == 0.0


async def test_an_analysis_asked_for_while_a_key_is_answered_starts_after_its_hold(tmp_path: Path,
                                                                                  monkeypatch: Any) -> None:
    """The analysis worker would take the GIL from the key's answer: it starts once the key's hold is over."""
    from test_tui_snapshots import make_app, ready, steady
    from tui_fakes import FakeEngine

    monkeypatch.chdir(tmp_path)
    engine = FakeEngine(tmp_path / "runs" / "2026-01-01_100000_demo")
    app = make_app(engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        engine.play_until_running()
        await steady(pilot)
        first = app.analysis
        app.gc_pacer.key_pressed()
        app._request_analysis()
        assert not app._analysis_running and not app.analysis_settled  # asked for, held
        assert app.gc_pacer.key_hold_left() > 0
        while not app.analysis_settled:
            await pilot.pause(0.05)
        assert app.analysis is not first  # it ran once the hold was over
