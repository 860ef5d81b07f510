"""The schedule: per load point, the configuration with the highest per-user tok/s (noisy points, crashed and
lossy configurations excluded), its margin over the runner-up and whether that margin exceeds the spread.

Along a load axis the choice is sticky: the previous point's choice is kept while another configuration beats it
only within the repeat spread (a speedup of 1.0 ± noise would otherwise read AR, EAGLE3, AR, EAGLE3 ...); the
entry says so in :attr:`~specbench_tui.core.crossover.results.ScheduleEntry.held`."""

from __future__ import annotations

from collections.abc import Sequence


from specbench_tui.core.crossover.results import PointRow, ScheduleEntry
from specbench_tui.core.crossover.stats import MAD_SCALE
from specbench_tui.core.load import parse_label
from specbench_tui.core.results import ConfigSummary


def schedule_entry(workload: str, label: str, rows: list[PointRow], configs: Sequence[ConfigSummary],
                   failed_states: frozenset[str], lossy: set[str],
                   previous: tuple[str, str] | None = None) -> ScheduleEntry:
    """The entry of one load point; ``previous``: (configuration, load label) chosen at the point before on the
    same axis, kept unless another candidate is faster beyond the repeat spread."""
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
    second, held = candidates[1], ""
    kept = next((r for r in candidates[1:] if previous and r.config == previous[0]), None)
    if kept is not None and previous and not _beyond_spread(best, kept):
        best, second = kept, best
        held = (f"kept {kept.config} from {previous[1]}: {second.config} is faster here only within the repeat "
                "spread")
    assert best.per_user_tps is not None and second.per_user_tps is not None
    b, r = best.per_user_tps, second.per_user_tps
    margin = b.median / r.median - 1.0 if r.median > 0 else None
    return ScheduleEntry(workload, label, axis, value, best.config, b.median, second.config, r.median, margin,
                         _beyond_spread(best, second), len(candidates), tuple(excluded), held=held)


def _beyond_spread(best: PointRow, other: PointRow) -> bool:
    """Whether ``best`` is faster than ``other`` by more than their repeat spreads (MAD with ≥ 3 repeats, else
    the ranges do not overlap)."""
    b, r = best.per_user_tps, other.per_user_tps
    assert b is not None and r is not None
    if b.mad is not None and r.mad is not None:
        return (b.median - r.median) > MAD_SCALE * (b.mad + r.mad)
    return b.low > r.high
