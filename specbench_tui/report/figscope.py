"""Which configurations the figures draw: every one up to :data:`MAX_FIGURE_CONFIGS`; past it, the baselines and
the best of the others by speedup, with a note of what was left out (the tables keep every configuration).

A figure of 10,000 lines and legend entries says nothing and takes matplotlib hours to lay out; the best
configurations, plus one aggregate figure of every configuration's best speedup, read at any size.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict

from specbench_tui.core.results import RunAnalysis

MAX_FIGURE_CONFIGS = 64
"""Speculative configurations drawn by name in a figure (the baselines come in addition)."""


def best_speedups(analysis: RunAnalysis) -> dict[str, float]:
    """Configuration id → its best median speedup over its cells and load points (absent: no speedup measured)."""
    best: dict[str, float] = defaultdict(lambda: -math.inf)
    for row in analysis.rows:
        if row.speedup is not None and math.isfinite(row.speedup.median):
            best[row.config_id] = max(best[row.config_id], row.speedup.median)
    load = analysis.load
    for point in getattr(load, "points", ()) or ():
        median = getattr(point.speedup, "median", None) if point.speedup is not None else None
        if median is not None and math.isfinite(median) and not point.noisy:
            best[point.config_id] = max(best[point.config_id], median)
    return dict(best)


def _kept_ids(analysis: RunAnalysis, limit: int) -> set[str] | None:
    """The ids drawn, or None when every configuration is."""
    speculative = [c for c in analysis.configs if not c.is_baseline]
    if len(speculative) <= limit:
        return None
    scores = best_speedups(analysis)
    ranked = sorted(speculative, key=lambda c: (-scores.get(c.id, -math.inf), c.name))
    return {c.id for c in analysis.configs if c.is_baseline} | {c.id for c in ranked[:limit]}


def figure_scope(analysis: RunAnalysis, limit: int = MAX_FIGURE_CONFIGS) -> tuple[RunAnalysis, str | None]:
    """The analysis restricted to the configurations the figures draw, and the note saying what was left out
    (None when nothing was)."""
    kept = _kept_ids(analysis, limit)
    if kept is None:
        return analysis, None
    trimmed = _restricted(analysis, kept)
    left = len(analysis.configs) - len(trimmed.configs)
    note = (f"The figures draw the {limit} configurations with the best speedup and the baselines "
            f"({len(trimmed.configs):,} of {len(analysis.configs):,}); {left:,} more are left out of them (the "
            "tables list every configuration, and the figure of best speedups counts them all).")
    return trimmed, note


def _restricted(analysis: RunAnalysis, kept: set[str]) -> RunAnalysis:
    load = analysis.load
    if load is not None:
        load = dataclasses.replace(
            load, points=tuple(p for p in load.points if p.config_id in kept),
            crossovers=tuple(c for c in load.crossovers if c.config_id in kept), _rows={})
    return dataclasses.replace(
        analysis, configs=tuple(c for c in analysis.configs if c.id in kept),
        rows=tuple(r for r in analysis.rows if r.config_id in kept),
        best=tuple(b for b in analysis.best if b.config_id in kept),
        totals=tuple(t for t in analysis.totals if t.config_id in kept), load=load,
        _rows_by_key={}, _configs_by_id={}, _rows_by_config={}, _totals_by_config={})
