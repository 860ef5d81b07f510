"""The load half of the single analysis: every load point's row, the speedup over the matched baseline at the
same workload and load point (and the noise it adds), then the crossovers and the schedule."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from specbench_tui.core.crossover.bracket import crossover_of
from specbench_tui.core.crossover.points import point_row
from specbench_tui.core.crossover.results import (
    Crossover,
    LoadAnalysis,
    LoadWorkload,
    PointRow,
    ScheduleEntry,
    load_workloads,
    plan_workloads,
)
from specbench_tui.core.crossover.schedule import schedule_entry
from specbench_tui.core.crossover.stats import Stat, stat_of
from specbench_tui.core.events import Event, LoadPointFinished
from specbench_tui.core.load import AXIS_CONCURRENCY, AXIS_RATE
from specbench_tui.core.records import CACHE_WARM, STATUS_OK, Measurement
from specbench_tui.core.results import FROM_MEMORY_TEXT, ConfigSummary


Cells = dict[tuple[str, str, str], list[Measurement]]


def analyse_load(plan_json: Mapping[str, object], measurements: Iterable[Measurement], events: Iterable[Event],
                 configs: Sequence[ConfigSummary], lossy: Iterable[str] = (), *, include_retracted: bool = False) -> LoadAnalysis:
    """The load figures of a run. ``measurements``: one per key (as the analysis keeps them); ``configs``: the
    analysis' :class:`~specbench_tui.core.analysis.ConfigSummary` list; ``lossy``: names of configurations
    whose outputs differ from their baseline's (barred from the schedule); ``include_retracted``: keep requests
    the server retracted in the latency percentiles."""
    from specbench_tui.core.results import FAILED_STATES

    workloads = load_workloads(plan_json)
    if not workloads:
        return LoadAnalysis()
    names = {w.name: w for w in workloads}
    cells: Cells = defaultdict(list)
    for m in measurements:
        if m.workload in names:
            cells[(m.config_id, m.workload, m.load or "c1")].append(m)
    finished: dict[tuple[str, str, str], dict[int, LoadPointFinished]] = defaultdict(dict)
    for e in events:
        if isinstance(e, LoadPointFinished):
            finished[(e.config_id, e.workload, e.load)][e.repeat] = e
    rows = _rows(plan_json, workloads, configs, cells, finished, include_retracted)
    by_key = {(r.config_id, r.workload, r.load): r for r in rows}
    by_name = {c.name: c for c in configs}
    by_id = {c.id: c for c in configs}
    final = [_against_baseline(row, by_id, by_name, by_key, cells, names) for row in rows]
    final_by = {(r.config_id, r.workload, r.load): r for r in final}
    crossovers = _crossovers(configs, workloads, by_name, final_by)
    runnable = [c for c in configs if getattr(c, "in_plan", True) and c.state != "skipped"]
    grid_points = len(runnable) * sum(len(w.spec.points()) for w in workloads)
    lossy_set = set(lossy)
    schedule = _schedule(workloads, list(final_by.values()), configs, FAILED_STATES, lossy_set)
    return LoadAnalysis(workloads=tuple(workloads), points=tuple(final), crossovers=tuple(crossovers),
                        schedule=tuple(schedule), points_measured=len(final), grid_points=grid_points)


def _rows(plan_json: Mapping[str, object], workloads: Sequence[LoadWorkload], configs: Sequence[ConfigSummary], cells: Cells,
          finished: Mapping[tuple[str, str, str], dict[int, LoadPointFinished]],
          include_retracted: bool) -> list[PointRow]:
    """Every measured point's own row (no baseline yet), a warm n-gram configuration's marked."""
    from specbench_tui.core.cells import acceptance, drafts_from_memory

    items_of = {str(w.get("name")): w for w in plan_workloads(plan_json)}
    rows: list[PointRow] = []
    for config in configs:
        for workload in workloads:
            repeats = items_of.get(workload.name, {}).get("repeats")
            repeats = repeats if isinstance(repeats, int) and repeats > 0 else 1
            for label in workload.spec.points():
                ms = cells.get((config.id, workload.name, label))
                if not ms:
                    continue
                row = point_row(config.id, config.name, workload, label, ms,
                                finished.get((config.id, workload.name, label), {}),
                                workload.spec.requests_at(label), repeats, acceptance,
                                include_retracted=include_retracted)
                if row.cache in (CACHE_WARM, "mixed") and drafts_from_memory(config):
                    row = _with(row, from_memory=FROM_MEMORY_TEXT)
                rows.append(row)
    return rows


def _against_baseline(row: PointRow, by_id: Mapping[str, ConfigSummary], by_name: Mapping[str, ConfigSummary],
                      by_key: Mapping[tuple[str, str, str], PointRow], cells: Cells,
                      names: Mapping[str, LoadWorkload]) -> PointRow:
    """The row with its speedup over the matched baseline at the same workload and load point, and the noise the
    baseline adds."""
    from specbench_tui.core.cells import paired_speedup

    config = by_id[row.config_id]
    base = by_name.get(config.baseline) if config.baseline else None
    if base is None or not config.speculative:
        return row
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
    return _with(row, speedup=speed, speedup_pairs=pairs, baseline=base.name, noisy=noise is not None, noise=noise)


def _crossovers(configs: Sequence[ConfigSummary], workloads: Sequence[LoadWorkload], by_name: Mapping[str, ConfigSummary],
                final_by: Mapping[tuple[str, str, str], PointRow]) -> list[Crossover]:
    """Each speculative configuration's crossover per workload and axis, with the capped points (its own or its
    baseline's) it rests on."""
    out: list[Crossover] = []
    for config in configs:
        if not config.speculative or not config.baseline or config.baseline not in by_name:
            continue
        base = by_name[config.baseline]
        for workload in workloads:
            for axis in (AXIS_CONCURRENCY, AXIS_RATE):
                grid = workload.spec.axis_points(axis)
                if not grid:
                    continue
                pts = [final_by.get((config.id, workload.name, label)) for label in grid]
                crossover = crossover_of(config, workload.name, axis, grid, pts)
                theirs = [final_by.get((base.id, workload.name, label)) for label in grid]
                capped = tuple(f"{p.config} {p.load} {p.capped}" for p in (*pts, *theirs)
                               if p is not None and p.capped)
                out.append(replace(crossover, capped=capped) if capped else crossover)
    return out


def _schedule(workloads: Sequence[LoadWorkload], final: Sequence[PointRow], configs: Sequence[ConfigSummary],
              failed_states: frozenset[str], lossy: set[str]) -> list[ScheduleEntry]:
    """Every measured point's entry, in the order the workload writes its points; each axis is walked from low
    load to high so that a point's choice can be kept from the point before it (see :mod:`.schedule`)."""
    at: dict[tuple[str, str], list[PointRow]] = defaultdict(list)
    for row in final:
        at[(row.workload, row.load)].append(row)
    out: list[ScheduleEntry] = []
    for workload in workloads:
        entries: dict[str, ScheduleEntry] = {}
        for axis in (AXIS_CONCURRENCY, AXIS_RATE):
            previous: tuple[str, str] | None = None
            for label in workload.spec.axis_points(axis):
                if (workload.name, label) not in at:
                    continue
                entry = _scheduled(workload.name, label, at[(workload.name, label)], configs, failed_states, lossy,
                                   previous)
                entries[label] = entry
                previous = (entry.best, label) if entry.best else previous
        out += [entries[label] for label in workload.spec.points() if label in entries]
    return out


def _scheduled(workload: str, label: str, rows: list[PointRow], configs: Sequence[ConfigSummary], failed_states: frozenset[str],
               lossy: set[str], previous: tuple[str, str] | None) -> ScheduleEntry:
    """The schedule entry of one point, with the candidates whose server capped it."""
    entry = schedule_entry(workload, label, rows, configs, failed_states, lossy, previous)
    capped = tuple((r.config, r.capped) for r in rows if r.capped and r.per_user_tps is not None)
    return replace(entry, capped=capped) if capped else entry


def _with(row: PointRow, **changes: object) -> PointRow:
    data = {name: getattr(row, name) for name in row.__dataclass_fields__}
    data.update(changes)
    return PointRow(**data)
