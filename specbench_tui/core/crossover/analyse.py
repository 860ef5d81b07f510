"""The load half of the single analysis: every load point's row, the speedup over the matched baseline at the
same workload and load point (and the noise it adds), then the crossovers and the schedule."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from specbench_tui.core.crossover.bracket import crossover_of
from specbench_tui.core.crossover.points import point_row
from specbench_tui.core.crossover.results import Crossover, LoadAnalysis, PointRow, load_workloads
from specbench_tui.core.crossover.schedule import schedule_entry
from specbench_tui.core.crossover.stats import Stat, stat_of
from specbench_tui.core.events import Event, LoadPointFinished
from specbench_tui.core.load import AXIS_CONCURRENCY, AXIS_RATE
from specbench_tui.core.records import STATUS_OK, Measurement


def analyse_load(plan_json: Mapping[str, Any], measurements: Iterable[Measurement], events: Iterable[Event],
                 configs: Sequence[Any], lossy: Iterable[str] = ()) -> LoadAnalysis:
    """The load figures of a run. ``measurements``: one per key (as the analysis keeps them); ``configs``: the
    analysis' :class:`~specbench_tui.core.analysis.ConfigSummary` list; ``lossy``: names of configurations
    whose outputs differ from their baseline's (barred from the schedule)."""
    from specbench_tui.core.cells import acceptance, paired_speedup
    from specbench_tui.core.results import FAILED_STATES

    workloads = load_workloads(plan_json)
    if not workloads:
        return LoadAnalysis()
    names = {w.name: w for w in workloads}
    cells: dict[tuple[str, str, str], list[Measurement]] = defaultdict(list)
    for m in measurements:
        if m.workload in names:
            cells[(m.config_id, m.workload, m.load or "c1")].append(m)
    finished: dict[tuple[str, str, str], dict[int, LoadPointFinished]] = defaultdict(dict)
    for e in events:
        if isinstance(e, LoadPointFinished):
            finished[(e.config_id, e.workload, e.load)][e.repeat] = e
    items_of = {str(w.get("name")): w for w in plan_json.get("workloads", []) if isinstance(w, Mapping)}
    by_name = {c.name: c for c in configs}
    rows: list[PointRow] = []
    for config in configs:
        for workload in workloads:
            repeats = items_of.get(workload.name, {}).get("repeats")
            repeats = repeats if isinstance(repeats, int) and repeats > 0 else 1
            for label in workload.spec.points():
                ms = cells.get((config.id, workload.name, label))
                if not ms:
                    continue
                rows.append(point_row(config.id, config.name, workload, label, ms,
                                      finished.get((config.id, workload.name, label), {}),
                                      workload.spec.requests_at(label), repeats, acceptance))
    by_key = {(r.config_id, r.workload, r.load): r for r in rows}
    # the matched baseline at the same workload and load point
    final: list[PointRow] = []
    for row in rows:
        config = next(c for c in configs if c.id == row.config_id)
        base = by_name.get(config.baseline) if config.baseline else None
        if base is None or not config.speculative:
            final.append(row)
            continue
        base_row = by_key.get((base.id, row.workload, row.load))
        mine = [m for m in cells[(row.config_id, row.workload, row.load)] if m.status == STATUS_OK]
        theirs = [m for m in cells.get((base.id, row.workload, row.load), []) if m.status == STATUS_OK]
        central, ratios, pairs = paired_speedup(mine, theirs)
        speed = None
        if central is not None:
            s = stat_of(ratios) or Stat(central, None, central, central, 0)
            speed = Stat(central, s.mad, min(s.low, central), max(s.high, central), s.repeats)
        noise = row.noise
        threshold = names[row.workload].spec.noise_threshold
        if noise is None and speed is not None and speed.rel_spread is not None and speed.rel_spread > threshold:
            noise = f"speedup MAD is {speed.rel_spread:.0%} of its median"
        if noise is None and base_row is not None and base_row.noisy:
            noise = f"the baseline's point is noisy ({base_row.noise})"
        final.append(_with(row, speedup=speed, speedup_pairs=pairs, baseline=base.name, noisy=noise is not None,
                           noise=noise))
    crossovers: list[Crossover] = []
    final_by = {(r.config_id, r.workload, r.load): r for r in final}
    for config in configs:
        if not config.speculative or not config.baseline or config.baseline not in by_name:
            continue
        for workload in workloads:
            for axis in (AXIS_CONCURRENCY, AXIS_RATE):
                grid = workload.spec.axis_points(axis)
                if not grid:
                    continue
                pts = [final_by.get((config.id, workload.name, label)) for label in grid]
                crossovers.append(crossover_of(config, workload.name, axis, grid, pts))
    runnable = [c for c in configs if getattr(c, "in_plan", True) and c.state != "skipped"]
    grid_points = len(runnable) * sum(len(w.spec.points()) for w in workloads)
    lossy_set = set(lossy)
    schedule = [schedule_entry(workload.name, label, [final_by[k] for k in final_by if k[1] == workload.name
                                                       and k[2] == label], configs, FAILED_STATES, lossy_set)
                for workload in workloads for label in workload.spec.points()
                if any(k[1] == workload.name and k[2] == label for k in final_by)]
    return LoadAnalysis(workloads=tuple(workloads), points=tuple(final), crossovers=tuple(crossovers),
                        schedule=tuple(schedule), points_measured=len(final), grid_points=grid_points)


def _with(row: PointRow, **changes: Any) -> PointRow:
    data = {name: getattr(row, name) for name in row.__dataclass_fields__}
    data.update(changes)
    return PointRow(**data)
