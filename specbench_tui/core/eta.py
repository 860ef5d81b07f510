"""The time left in a sweep, from what each configuration took, with a range while there is little to go on.

Configurations end in classes that take very different times: one that ran its workloads (``done``), one whose
server crashed or failed (often within seconds of its launch), one skipped (no time at all). Only the ``done``
ones say how long a configuration still to run will take, so a couple of quick crashes never halve the
estimate. With fewer than :data:`SETTLED_AFTER` of them the estimate is a range (their fastest to their
slowest); after that, their median with the range of their middle half. Running configurations count with
what they are expected to need beyond what they have already run.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from specbench_tui.core.events import ConfigState

SETTLED_AFTER = 3
"""Finished configurations from which the estimate is a single figure (with its middle-half range)."""
NEARLY_DONE = 0.1
"""A running configuration past its expected time is given this fraction of it more."""


@dataclass(frozen=True)
class Eta:
    """Seconds left: ``low`` to ``high``, ``likely`` the single figure once settled."""

    low: float
    high: float
    likely: float
    settled: bool
    samples: int


def _quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 4:
        return min(values), max(values)
    q1, _, q3 = statistics.quantiles(values, n=4)
    return q1, q3


class TimedConfig(Protocol):
    """What the estimate reads of a configuration (:class:`~specbench_tui.core.state.ConfigView` fits)."""

    @property
    def state(self) -> ConfigState: ...

    @property
    def launched_at(self) -> float | None: ...

    @property
    def finished_at(self) -> float | None: ...


def estimate(configs: Iterable[TimedConfig], now: float, slots: int | None = None) -> Eta | None:
    """The time left over ``configs`` (:class:`~specbench_tui.core.state.ConfigView`-like: ``state``,
    ``launched_at``, ``finished_at``); None while no configuration has run to its end."""
    views = list(configs)
    durations = [v.finished_at - v.launched_at for v in views
                 if v.state is ConfigState.DONE and v.launched_at is not None
                 and v.finished_at is not None and v.finished_at >= v.launched_at]
    if not durations:
        return None
    pending = sum(1 for v in views if v.state is ConfigState.PENDING)
    active = [v for v in views if v.state.active]
    parallel = max(1, slots if slots is not None else len(active))
    settled = len(durations) >= SETTLED_AFTER
    middle = statistics.median(durations)
    low_each, high_each = _quartiles(durations) if settled else (min(durations), max(durations))

    def left(each: float) -> float:
        running = sum(max(each - (now - (v.launched_at or now)), NEARLY_DONE * each) for v in active)
        return (pending * each + running) / parallel

    return Eta(low=left(low_each), high=left(high_each), likely=left(middle), settled=settled,
               samples=len(durations))


def clock(seconds: float) -> str:
    """``1:02:03`` / ``2:03``."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def describe(eta: Eta | None, *, left: int | None = None) -> str:
    """The estimate in words, the same in every view: ``learning`` (nothing finished yet), ``~5:49`` with its
    range when that is a minute or more (``~5:49 (5:10–6:40)``), a range while unsettled (``4:10–6:40``), one
    figure when the range is a point (never ``5:49–5:49``). ``left``: configurations still to run (0: ``0:00``)."""
    if left == 0:
        return clock(0)
    if eta is None:
        return "learning"
    low, high = clock(eta.low), clock(eta.high)
    if eta.settled:
        spread = f" ({low}–{high})" if eta.high - eta.low >= 60 and low != high else ""
        return f"~{clock(eta.likely)}{spread}"
    return low if low == high else f"{low}–{high}"
