"""The schedule: per load point, the configuration with the highest per-user tok/s (noisy points, crashed and
lossy configurations excluded), its margin over the runner-up and whether that margin exceeds the spread."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specbench_tui.core.crossover.results import PointRow, ScheduleEntry
from specbench_tui.core.crossover.stats import MAD_SCALE
from specbench_tui.core.load import parse_label


def schedule_entry(workload: str, label: str, rows: list[PointRow], configs: Sequence[Any],
                   failed_states: frozenset[str], lossy: set[str]) -> ScheduleEntry:
    axis, value = parse_label(label)
    states = {c.id: c.state for c in configs}
    excluded: list[tuple[str, str]] = []
    candidates = []
    for row in rows:
        if row.per_user_tps is None:
            continue
        if states.get(row.config_id) in failed_states:
            excluded.append((row.config, str(states.get(row.config_id))))
        elif row.config in lossy:
            excluded.append((row.config, "outputs differ from the baseline's"))
        elif row.noisy:
            excluded.append((row.config, f"noisy: {row.noise}"))
        else:
            candidates.append(row)
    candidates.sort(key=lambda r: -(r.per_user_tps.median if r.per_user_tps else 0.0))
    if not candidates:
        return ScheduleEntry(workload, label, axis, value, None, None, None, None, None, None, 0, tuple(excluded))
    best = candidates[0]
    assert best.per_user_tps is not None
    if len(candidates) == 1:
        return ScheduleEntry(workload, label, axis, value, best.config, best.per_user_tps.median, None, None, None,
                             None, 1, tuple(excluded))
    second = candidates[1]
    assert second.per_user_tps is not None
    b, r = best.per_user_tps, second.per_user_tps
    margin = b.median / r.median - 1.0 if r.median > 0 else None
    if b.mad is not None and r.mad is not None:
        significant = (b.median - r.median) > MAD_SCALE * (b.mad + r.mad)
    else:
        significant = b.low > r.high
    return ScheduleEntry(workload, label, axis, value, best.config, b.median, second.config, r.median, margin,
                         significant, len(candidates), tuple(excluded))
