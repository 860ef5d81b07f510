"""The ETA learns from configurations that ran to their end; crashes and skips are their own class."""

from __future__ import annotations

from dataclasses import dataclass

from specbench_tui.core.eta import estimate
from specbench_tui.core.events import ConfigState


@dataclass
class V:
    state: ConfigState
    launched_at: float | None = None
    finished_at: float | None = None


def _done(seconds: float, at: float = 0.0) -> V:
    return V(ConfigState.DONE, at, at + seconds)


def test_nothing_to_learn_from_until_one_is_done() -> None:
    assert estimate([V(ConfigState.PENDING), V(ConfigState.CRASHED, 0.0, 1.0)], now=5.0) is None


def test_quick_crashes_do_not_halve_the_estimate() -> None:
    pending = [V(ConfigState.PENDING) for _ in range(4)]
    before = estimate([_done(60), _done(60), _done(60), *pending], now=200.0)
    crashes = [V(ConfigState.CRASHED, 10.0, 11.0), V(ConfigState.CRASHED, 20.0, 21.0)]
    after = estimate([_done(60), _done(60), _done(60), *crashes, V(ConfigState.SKIPPED), *pending], now=200.0)
    assert before is not None and after is not None
    assert after.likely == before.likely == 240.0


def test_a_range_while_learning_then_a_figure() -> None:
    pending = [V(ConfigState.PENDING) for _ in range(2)]
    learning = estimate([_done(30), _done(90), *pending], now=500.0)
    assert learning is not None and not learning.settled
    assert (learning.low, learning.high) == (60.0, 180.0)
    settled = estimate([_done(30), _done(60), _done(90), *pending], now=500.0)
    assert settled is not None and settled.settled and settled.likely == 120.0


def test_running_configurations_count_what_they_still_need() -> None:
    eta = estimate([_done(100), _done(100), _done(100), V(ConfigState.RUNNING, 1000.0)], now=1040.0)
    assert eta is not None and eta.likely == 60.0
    late = estimate([_done(100), _done(100), _done(100), V(ConfigState.RUNNING, 1000.0)], now=1500.0)
    assert late is not None and late.likely == 10.0  # past its expected time: a tenth more
