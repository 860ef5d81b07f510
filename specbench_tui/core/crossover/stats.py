"""Summaries of a load point's figures: a figure over repeats (:class:`Stat`: median, MAD with ≥ 3 repeats,
range) and a figure over requests (:class:`Pcts`: p50/p90/p99)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeGuard

from specbench_tui.core.metrics import percentile

MAD_SCALE = 1.4826
"""MAD × this estimates a normal standard deviation (vLLM's tune_speculative_k scores median − 1.4826·MAD)."""


@dataclass(frozen=True)
class Stat:
    """A figure over a point's repeats: median, MAD (≥ 3 repeats) and range."""

    median: float
    mad: float | None
    low: float
    high: float
    repeats: int

    @property
    def rel_spread(self) -> float | None:
        """MAD ÷ median (None with fewer than 3 repeats: no spread to judge)."""
        if self.mad is None or self.median == 0:
            return None
        return self.mad / abs(self.median)


def stat_of(values: Sequence[float]) -> Stat | None:
    vals = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if not vals:
        return None
    med = statistics.median(vals)
    mad = statistics.median(abs(v - med) for v in vals) if len(vals) >= 3 else None
    return Stat(med, mad, min(vals), max(vals), len(vals))


@dataclass(frozen=True)
class Pcts:
    p50: float | None
    p90: float | None
    p99: float | None


def pcts(values: Sequence[float]) -> Pcts | None:
    vals = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if not vals:
        return None
    return Pcts(percentile(vals, 50), percentile(vals, 90), percentile(vals, 99))


def finite(v: object) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
