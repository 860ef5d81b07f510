"""The load half of a report: per-point tables, the crossovers, the schedule, terminal charts and the JSON/CSV
blocks, all read from ``RunAnalysis.load`` (:mod:`specbench_tui.core.crossover`); nothing is computed here."""

from __future__ import annotations

import math
from collections.abc import Sequence

from specbench_tui.core.crossover.results import Crossover, LoadAnalysis, Pcts, PointRow
from specbench_tui.core.crossover.stats import Stat
from specbench_tui.core.graphs import eager_text
from specbench_tui.core.results import RunAnalysis, plain_json
from specbench_tui.core.load import AXIS_CONCURRENCY, AXIS_RATE
from specbench_tui.report.charts import MARKERS, ChartSeries, render_chart
from specbench_tui.report.tables import Table, cache_note

AXIS_NAMES = {AXIS_CONCURRENCY: "concurrency", AXIS_RATE: "request rate (req/s)"}


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"


def _stat(s: Stat | None, digits: int = 1) -> str:
    if s is None:
        return "-"
    if s.mad is not None:
        return f"{s.median:.{digits}f} ±{s.mad:.{digits}f}"
    if s.repeats > 1 and s.high > s.low:
        return f"{s.median:.{digits}f} ({s.low:.{digits}f}–{s.high:.{digits}f})"
    return f"{s.median:.{digits}f}"


def b_star(c: Crossover) -> str:
    return c.text


def points_table(load: LoadAnalysis, workload: str) -> Table:
    spec = next(w.spec for w in load.workloads if w.name == workload)
    slo = spec.slo
    headers = ["configuration", "load", "ok/err", "out tok/s", "tok/s/user", "req/s", "TTFT p50/p99 ms",
               "ITL p99 ms", "e2e p99 ms", "accept len req/srv", "speedup"]
    if slo is not None:
        headers[-1:-1] = ["goodput req/s", "SLO"]
    headers.append("marks")
    table = Table(f"{workload} under load (median ± MAD over repeats; speedup vs the matched baseline at the same "
                  "point)", headers, align="llrrrrrrrrr" + ("rr" if slo else "") + "l")
    order = _config_order(load)
    for row in sorted((p for p in load.points if p.workload == workload),
                      key=lambda p: (order[p.config_id], p.axis, p.value)):
        table.rows.append(_point_cells(row, with_slo=slo is not None))
    if slo is not None:
        table.notes.append(f"SLO: {slo.describe()} (goodput counts requests that met it; 'met' when p{slo.percentile:g} "
                           "of each figure is within its limit, with the share of requests that met it)")
    table.notes.append(f"noisy: relative MAD over {spec.noise_threshold:.0%} (kept out of B* and the schedule)")
    table.notes += _point_notes([p for p in load.points if p.workload == workload])
    return table


def _point_cells(row: PointRow, *, with_slo: bool) -> list[str]:
    """One point's row of :func:`points_table`."""
    cells = [row.config, row.load, f"{row.n_ok}/{row.n_error + row.n_zero_output}", _stat(row.output_tps, 0),
             _stat(row.per_user_tps, 1), _stat(row.request_tps, 2),
             f"{_ms(row.ttft_s.p50 if row.ttft_s else None)}/{_ms(row.ttft_s.p99 if row.ttft_s else None)}",
             _ms(row.itl_s.p99 if row.itl_s else None), _ms(row.e2e_s.p99 if row.e2e_s else None),
             f"{_f(row.accept_length, 2)}/{_f(row.server_accept_length, 2)}"]
    if with_slo:
        cells += [_f(row.goodput_rps, 2),
                  "-" if row.meets_slo is None else ("met" if row.meets_slo else "missed")
                  + (f" {row.slo_attainment:.0%}" if row.slo_attainment is not None else "")]
    speed = _stat(row.speedup, 2) + "x" if row.speedup else "-"
    return [*cells, speed + (" noisy" if row.noisy else ""), point_marks(row)]


def _point_notes(mine: list[PointRow]) -> list[str]:
    """The notes the workload's points call for: their cache policy, capped points, retracted requests."""
    notes = []
    policy = cache_note(mine)
    if policy:
        notes.append(policy)
    if any(p.capped for p in mine):
        notes.append("capped: the point sends more requests at once than the server runs (its "
                     "max_running_requests); the rest queue on the server, so the point measures the cap")
    if any(p.n_retracted for p in mine):
        notes.append("retracted: requests the server retracted (KV cache full) are kept out of TTFT/ITL/e2e")
    if any(eager_text(p) for p in mine):
        notes.append("eager: some decode steps ran without a CUDA graph (the server's decode lines said "
                     "'cuda graph: False': the batch outgrew the captured graphs); the figure may be an artefact")
    return notes


def point_marks(row: PointRow) -> str:
    """What a reader must know about a point beyond its figures: capped, an adaptive server's steps, retracted
    requests, repeats drafted from memory."""
    marks = [m for m in (row.capped, row.steps_text, f"{row.n_retracted} retracted" if row.n_retracted else "",
                         row.from_memory, eager_text(row)) if m]
    return "; ".join(marks) if marks else "-"


def _config_order(load: LoadAnalysis) -> dict[str, int]:
    """Each configuration's place: the order its first point comes in (one pass, not one per row)."""
    order: dict[str, int] = {}
    for p in load.points:
        order.setdefault(p.config_id, len(order))
    return order


def _by_config(load: LoadAnalysis, workload: str) -> dict[str, list[PointRow]]:
    """The workload's points per configuration, configurations in the order of their first point."""
    out: dict[str, list[PointRow]] = {}
    for p in load.points:
        if p.workload == workload:
            out.setdefault(p.config_id, []).append(p)
    return out


def crossover_table(load: LoadAnalysis, workload: str) -> Table:
    table = Table(f"{workload}: where speculation stops paying (B*: speedup over the matched baseline falls below 1)",
                  ["configuration", "axis", "B* interval", "points measured", "evidence"], align="llllll")
    for c in load.crossovers:
        if c.workload != workload:
            continue
        ev = ", ".join(f"{e.load} {e.speedup:.2f}x" + ("?" if e.noisy else "")
                       for e in sorted(c.evidence, key=lambda e: e.value) if e.speedup is not None)
        table.rows.append([c.config, AXIS_NAMES.get(c.axis, c.axis), b_star(c),
                           f"{c.measured} of {c.grid}", ev])
        if c.capped:
            table.notes.append(f"{c.config}: B* {c.capped_text}; lift the cap (max-running-requests) to compare "
                               "equal servers")
    if load.grid_points:
        table.notes.append(f"the search measured {load.points_measured} of the full grid's {load.grid_points} "
                           f"(configuration, load point) pairs ({load.points_measured / load.grid_points:.0%}); "
                           "'?' marks a noisy point")
    return table


def schedule_table(load: LoadAnalysis, workload: str) -> Table:
    table = Table(f"{workload}: schedule (the fastest configuration per user at each load point)",
                  ["load", "best", "tok/s/user", "runner-up", "margin", "beyond the spread", "measured"],
                  align="llrlrll")
    for e in load.schedule:
        if e.workload != workload:
            continue
        table.rows.append([e.load, e.best or "-", _f(e.best_tps, 1), e.runner_up or "-",
                           f"{e.margin:+.1%}" if e.margin is not None else "-",
                           "-" if e.significant is None else ("yes" if e.significant else "no (within noise)"),
                           f"{e.candidates} configs" + (f", {len(e.excluded)} left out" if e.excluded else "")
                           + (" [capped]" if e.capped else "")])
        for config, text in e.capped:
            table.notes.append(f"{e.load}: {config} {text}: this choice rests on a capped point")
        if e.held:
            table.notes.append(f"{e.load}: {e.held}")
    return table


def speedup_series(load: LoadAnalysis, workload: str, axis: str = AXIS_CONCURRENCY) -> list[ChartSeries]:
    out = []
    for points in _by_config(load, workload).values():
        pts = [p for p in points if p.axis == axis and p.speedup is not None]
        if pts:
            out.append(ChartSeries(pts[0].config, tuple(sorted((p.value, p.speedup.median if p.speedup and not p.noisy
                                                                else None) for p in pts))))
    return out


def pareto_series(load: LoadAnalysis, workload: str) -> list[tuple[str, list[tuple[float, float, str]]]]:
    """Per configuration: (total output tok/s, per-user tok/s, load label) at each measured point."""
    out = []
    for points in _by_config(load, workload).values():
        pts = sorted((p for p in points if p.output_tps is not None and p.per_user_tps is not None),
                     key=lambda p: (p.axis, p.value))
        if pts:  # the filter above keeps only points with both figures; mypy does not narrow through it
            out.append((pts[0].config, [(p.output_tps.median, p.per_user_tps.median, p.load)  # type: ignore[union-attr]
                                        for p in pts]))
    return out


def pareto_front(series: Sequence[tuple[str, Sequence[tuple[float, float, str]]]]) -> list[tuple[str, str]]:
    """(configuration, load) of the points no other point beats on both total and per-user tok/s (at least as
    good on both, better on one), in the order given. One sort and one pass (n log n): by total tok/s
    descending, a point is on the front when its per-user tok/s is the best of its equal-total group and beats
    every point of a larger total."""
    pts = [(x, y, name, label) for name, ps in series for x, y, label in ps]
    ranked = sorted(range(len(pts)), key=lambda i: (-pts[i][0], -pts[i][1]))
    front: set[int] = set()
    best_above = -math.inf  # the best per-user tok/s among the points of a strictly larger total
    start = 0
    while start < len(ranked):
        end = start
        x = pts[ranked[start]][0]
        while end < len(ranked) and pts[ranked[end]][0] == x:
            end += 1
        top = pts[ranked[start]][1]  # the group's best (sorted by y descending within a total)
        if top > best_above:
            front.update(i for i in ranked[start:end] if pts[i][1] == top)
        best_above = max(best_above, top)
        start = end
    return [(name, label) for i, (_, _, name, label) in enumerate(pts) if i in front]


def render_scatter(series: Sequence[tuple[str, Sequence[tuple[float, float, str]]]], width: int = 72,
                   height: int = 12, title: str = "", x_label: str = "", y_label: str = "") -> list[str]:
    """ASCII scatter on linear axes, one marker per series."""
    xs = [x for _, ps in series for x, _, _ in ps]
    ys = [y for _, ps in series for _, y, _ in ps]
    lines = [title] if title else []
    if not xs:
        return [*lines, "(no data to chart)"]
    x0, x1 = 0.0, max(xs) * 1.05
    y0, y1 = 0.0, max(ys) * 1.05
    gutter = len(f"{y1:.0f}") + 1
    pw = max(20, width - gutter - 2)
    grid = [[" "] * pw for _ in range(height)]
    for index, (_, ps) in enumerate(series):
        marker = MARKERS[index % len(MARKERS)]
        for x, y, _ in ps:
            c = min(pw - 1, round((x - x0) / (x1 - x0) * (pw - 1)))
            r = min(height - 1, round((y1 - y) / (y1 - y0) * (height - 1)))
            grid[r][c] = marker if grid[r][c] == " " else "&"
    for r in range(height):
        tick = f"{y1:.0f}" if r == 0 else (f"{y0:.0f}" if r == height - 1 else "")
        lines.append(f"{tick.rjust(gutter - 1)} |{''.join(grid[r])}".rstrip())
    lines.append(" " * gutter + "+" + "-" * pw)
    lines.append(" " * (gutter + 1) + "0" + f"{x1:.0f}".rjust(pw - 1) + f"   {x_label}")
    legend = "  ".join(f"{MARKERS[i % len(MARKERS)]} {name}" for i, (name, _) in enumerate(series))
    lines.append(" " * gutter + legend + (f"   (y: {y_label})" if y_label else ""))
    return lines


def load_txt(analysis: RunAnalysis, width: int = 72, height: int = 10) -> list[str]:
    """The load sections of the txt report (empty for a run without a load axis)."""
    from specbench_tui.report.tables import render_text_table

    load: LoadAnalysis | None = analysis.load
    if load is None or load.empty:
        return []
    out: list[str] = []
    for w in load.workloads:
        out += ["", *render_text_table(crossover_table(load, w.name))]
        out += ["", *render_text_table(schedule_table(load, w.name))]
        out += ["", *render_text_table(points_table(load, w.name))]
        for axis in (AXIS_CONCURRENCY, AXIS_RATE):
            series = speedup_series(load, w.name, axis)
            if series:
                out += ["", *render_chart(series, width, height, f"{w.name}: speedup over the matched baseline vs "
                                          f"{AXIS_NAMES[axis]} (1.00 = break-even)", AXIS_NAMES[axis])]
        pareto = pareto_series(load, w.name)
        if pareto:
            out += ["", *render_scatter(pareto, width, height, f"{w.name}: per-user vs total output tok/s (Pareto; "
                                        "up and right is better)", "total output tok/s", "tok/s per user")]
            front = pareto_front(pareto)
            out.append("Pareto front: " + ", ".join(f"{n} at {label}" for n, label in front))
    return out


def load_json(analysis: RunAnalysis) -> dict[str, object] | None:
    """The report's ``load`` block: ``crossover_concurrency`` (and ``crossover_rate``) per speculative
    configuration and workload with its interval, the schedule and the search's cost; every point's figures are
    in ``analysis.load.points``."""
    load: LoadAnalysis | None = analysis.load
    if load is None or load.empty:
        return None

    def cross(c: Crossover) -> dict[str, object]:
        return {"config": c.config, "config_id": c.config_id, "workload": c.workload, "status": c.status,
                "interval": [c.low, c.high], "estimate": round(c.estimate, 4) if c.estimate is not None else None,
                "text": b_star(c), "points_measured": c.measured, "grid_points": c.grid,
                "evidence": [{"load": e.load, "value": e.value,
                              "speedup": round(e.speedup, 4) if e.speedup is not None else None, "noisy": e.noisy}
                             for e in sorted(c.evidence, key=lambda e: e.value)], "note": c.note,
                "capped": list(c.capped), "rests_on_capped": bool(c.capped)}

    return {
        "crossover_concurrency": [cross(c) for c in load.crossovers if c.axis == AXIS_CONCURRENCY],
        "crossover_rate": [cross(c) for c in load.crossovers if c.axis == AXIS_RATE],
        "schedule": plain_json(list(load.schedule)),
        "points_measured": load.points_measured,
        "grid_points": load.grid_points,
        "pareto_front": {w.name: [list(p) for p in pareto_front(pareto_series(load, w.name))] for w in load.workloads},
    }


LOAD_CSV_COLUMNS = (
    "load", "load_axis", "load_value", "output_tps", "output_tps_mad", "per_user_tps", "per_user_tps_mad",
    "request_tps", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "itl_p50_s", "itl_p90_s", "itl_p99_s", "e2e_p50_s",
    "e2e_p90_s", "e2e_p99_s", "server_accept_length", "goodput_rps", "goodput_tps", "slo_attainment", "meets_slo",
    "load_speedup", "load_speedup_mad", "noisy", "running_cap", "capped", "spec_steps", "speculation",
    "n_retracted", "cache", "from_memory", "graph_share", "eager_batches",
)


def _n(value: float | int | None, digits: int = 4) -> str:
    if value is None:
        return ""
    return str(value) if isinstance(value, int) else f"{value:.{digits}f}"


def load_csv_rows(analysis: RunAnalysis, base_columns: Sequence[str]) -> list[dict[str, str]]:
    load: LoadAnalysis | None = analysis.load
    if load is None:
        return []
    out = []
    for p in load.points:
        config = analysis.config(p.config_id)
        row = dict.fromkeys(base_columns, "")
        row.update({"sweep": analysis.sweep, "config_id": p.config_id, "config": p.config,
                    "algorithm": config.algorithm if config else "", "baseline": p.baseline or "",
                    "workload": p.workload, "state": config.state if config else "", "n_ok": str(p.n_ok),
                    "n_zero_output": str(p.n_zero_output), "n_error": str(p.n_error),
                    "decode_tps_median": _n(p.per_user_tps.median if p.per_user_tps else None, 3),
                    "accept_length": _n(p.accept_length), "repeats": str(p.repeats)})
        row.update(_point_figures(p))
        row.update(_point_facts(p))
        out.append(row)
    return out


def _point_figures(p: PointRow) -> dict[str, str]:
    """A point's rates and latency percentiles, as the CSV writes them."""
    def pc(x: Pcts | None, attr: str) -> str:
        return _n(getattr(x, attr) if x is not None else None, 5)

    return {
        "load": p.load, "load_axis": p.axis, "load_value": f"{p.value:g}",
        "output_tps": _n(p.output_tps.median if p.output_tps else None, 3),
        "output_tps_mad": _n(p.output_tps.mad if p.output_tps else None, 3),
        "per_user_tps": _n(p.per_user_tps.median if p.per_user_tps else None, 3),
        "per_user_tps_mad": _n(p.per_user_tps.mad if p.per_user_tps else None, 3),
        "request_tps": _n(p.request_tps.median if p.request_tps else None, 4),
        "ttft_p50_s": pc(p.ttft_s, "p50"), "ttft_p90_s": pc(p.ttft_s, "p90"), "ttft_p99_s": pc(p.ttft_s, "p99"),
        "itl_p50_s": pc(p.itl_s, "p50"), "itl_p90_s": pc(p.itl_s, "p90"), "itl_p99_s": pc(p.itl_s, "p99"),
        "e2e_p50_s": pc(p.e2e_s, "p50"), "e2e_p90_s": pc(p.e2e_s, "p90"), "e2e_p99_s": pc(p.e2e_s, "p99"),
    }


def _point_facts(p: PointRow) -> dict[str, str]:
    """A point's acceptance, goodput, SLO, speedup and marks, as the CSV writes them."""
    return {
        "server_accept_length": _n(p.server_accept_length), "goodput_rps": _n(p.goodput_rps),
        "goodput_tps": _n(p.goodput_tps, 3), "slo_attainment": _n(p.slo_attainment),
        "meets_slo": "" if p.meets_slo is None else ("yes" if p.meets_slo else "no"),
        "load_speedup": _n(p.speedup.median if p.speedup else None),
        "load_speedup_mad": _n(p.speedup.mad if p.speedup else None), "noisy": "yes" if p.noisy else "",
        "running_cap": _n(p.running_cap), "capped": p.capped or "",
        "spec_steps": " ".join(map(str, p.spec_steps)) if p.spec_steps else "", "speculation": p.speculation or "",
        "n_retracted": str(p.n_retracted), "cache": p.cache or "", "from_memory": p.from_memory or "",
        "graph_share": _n(p.graph_share), "eager_batches": " ".join(map(str, p.eager_batches)),
    }


def point_label(p: PointRow) -> str:
    return f"{p.config} @ {p.load}"
