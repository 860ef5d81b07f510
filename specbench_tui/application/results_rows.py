"""The results table's rows, built in the application layer: configuration × workload figures as plain records.

Every figure is the run's :class:`~specbench_tui.core.results.RunAnalysis`, so the table shows what
``specbench report`` prints for the same run directory: the same medians, item-paired speedups, acceptance and
partial cells. The state only adds what the queue knows (crash signatures, reasons). :func:`build_rows` gives a
:class:`ResultRow` of numbers per row; :func:`view_rows` words them into :class:`~specbench_tui.application.rows.ViewRow`
records of text with a semantic class each (crashed, zero-out, partial, capped, best, noisy, idle-draft): the
screen only draws them. Both run in the app's analysis worker, off the UI thread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specbench_tui.application.rows import Mark, ViewCell, ViewRow, clean_text
from specbench_tui.application.viewmodel import point_marks
from specbench_tui.core.acceptance import CONDITIONAL_ACCEPTANCE, ACCEPTANCE_LENGTH, AcceptanceAnalysis, fmt_positions, sparkline
from specbench_tui.core.events import ConfigState
from specbench_tui.core.results import (
    ACCEPT_FROM_SERVER,
    COVERAGE_NOT_RUN,
    FLAG_BURST,
    FLAG_IDLE,
    FLAG_MISMATCH,
    CellRow,
    ConfigSummary,
    RunAnalysis,
)
from specbench_tui.core.state import RunState
from specbench_tui.core.verdicts import FLAG_NOTES

RESULT_MARKS = frozenset({Mark.PLAIN, Mark.MUTED, Mark.CRASHED, Mark.ZERO_OUT, Mark.PARTIAL, Mark.CAPPED, Mark.NOISY,
                          Mark.IDLE_DRAFT, Mark.BEST, Mark.FASTER, Mark.SLOWER})
"""Every mark :func:`build_rows` gives a row or a cell."""
_KEY_SEPARATOR = "\x1f"
_NO_WORKLOAD = "\x00"

@dataclass(frozen=True)
class ResultRow:
    """The plain values of one row (compared to skip rewriting unchanged rows)."""

    config: str
    workload: str
    order: tuple[int, int]
    count: int
    tps: float | None
    all_zero: bool
    ttft_ms: float | None
    accept: float | None
    speedup: float | None
    is_baseline: bool
    crashed: bool
    zero_output: int
    errors: int
    note: str
    partial: bool = False
    """The workload was cut short (its figures are over the items it reached)."""
    capped: bool = False
    """A load point that sent more requests at once than the server runs."""
    noisy: bool = False
    """A load point whose figures spread too much to rank."""
    idle_draft: bool = False
    """The draft was idle (acceptance length about 1)."""


def row_key(config_id: str, workload: str | None) -> str:
    return f"{config_id}{_KEY_SEPARATOR}{workload if workload is not None else _NO_WORKLOAD}"


def config_of_row_key(key: str) -> str:
    return key.split(_KEY_SEPARATOR, 1)[0]


_FLAG_NOTES = {flag: FLAG_NOTES[flag] for flag in (FLAG_MISMATCH, FLAG_IDLE, FLAG_BURST)}
"""The flags a results row adds to its note (the others are said by its own cells), in core's words."""


ConfigNotes = Mapping[str, tuple[str | None, str | None]]
"""config id → (crash signature, reason) as the queue knows them."""


def config_notes(state: RunState) -> dict[str, tuple[str | None, str | None]]:
    """What :func:`build_rows` reads of the state, as a plain copy (for building the rows in another thread)."""
    return {config_id: (view.signature, view.reason) for config_id, view in state.configs.items()}


def build_rows(state: RunState | None, analysis: RunAnalysis | None,
               known: ConfigNotes | None = None) -> dict[str, ResultRow]:
    """Every row the table should show, keyed by its stable row key (none until the first analysis).

    ``known`` (from :func:`config_notes`) stands in for ``state``: the app builds the rows in its analysis
    worker, next to the analysis, so that a 1,600-row table costs the UI thread only the comparison."""
    rows: dict[str, ResultRow] = {}
    if analysis is None:
        return rows
    if known is None:
        known = config_notes(state) if state is not None else {}
    workload_order = {w.name: i for i, w in enumerate(analysis.workloads)}
    for order, config in enumerate(analysis.configs):
        rows.update(_config_rows(analysis, config, order, known.get(config.id, (None, None)), workload_order))
    return rows


def _config_rows(analysis: RunAnalysis, config: ConfigSummary, order: int, known: tuple[str | None, str | None],
                 workload_order: Mapping[str, int]) -> dict[str, ResultRow]:
    """The rows of one configuration: a row per measured (or still to run) workload, its points, and for a
    crash with nothing measured one row that says so."""
    crashed = config.state in (ConfigState.CRASHED.value, ConfigState.FAILED.value)
    known_signature, known_reason = known
    signature = known_signature or config.signature
    reason = known_reason or config.reason
    crash_note = f"✖ {signature or config.state}" + (f": {reason}" if reason and not signature else "")
    rows: dict[str, ResultRow] = {}
    cells = analysis.rows_of(config.id)
    for cell in cells:
        if cell.measured or (cell.coverage == COVERAGE_NOT_RUN and not crashed):
            rows[row_key(config.id, cell.workload)] = _with_positions(_cell_row(
                config, cell, (order, workload_order.get(cell.workload, 1_000)), crashed,
                crash_note if crashed else None), analysis, config.id, cell.workload)
    rows.update(_point_rows(analysis, config, order, crashed, f"✖ {signature or config.state}"))
    if crashed and not any(r.measured for r in cells):
        rows[row_key(config.id, None)] = _crash_row(config.name, order, crash_note, cells)
    return rows


def _crash_row(name: str, order: int, crash_note: str, cells: Sequence[CellRow]) -> ResultRow:
    """The one row of a configuration that crashed before measuring anything."""
    not_run = sum(1 for r in cells if r.coverage == COVERAGE_NOT_RUN)
    return ResultRow(
        config=name, workload="—", order=(order, -1), count=0, tps=None, all_zero=False,
        ttft_ms=None, accept=None, speedup=None, is_baseline=False, crashed=True, zero_output=0, errors=0,
        note=crash_note + (f" · {not_run} workload{'s' if not_run != 1 else ''} not run" if not_run else ""))


def _cell_notes(cell: CellRow, crash_note: str | None) -> list[str]:
    """What a workload's row says besides its figures: the crash, coverage, zero output, errors, flags."""
    notes = [crash_note] if crash_note else []
    coverage = cell.coverage_text()
    if coverage and cell.measured:
        notes.append(coverage)
    if cell.n_zero_output:
        notes.append(f"▲ {cell.n_zero_output}/{cell.n_ok + cell.n_zero_output + cell.n_error} zero output")
    if cell.n_error:
        notes.append(f"{cell.n_error} failed" + (" (in flight at the crash)" if cell.n_crash else ""))
    if cell.n_clamped:
        notes.append(f"{cell.n_clamped} clamped")
    if cell.not_run:
        notes.append(f"not run: {cell.not_run}")
    if cell.accept_method == ACCEPT_FROM_SERVER and cell.accept_length is not None:
        notes.append(f"{ACCEPTANCE_LENGTH.short} of the server's counters")
    notes.extend(_FLAG_NOTES[flag] for flag in cell.flags if flag in _FLAG_NOTES)
    return notes


def _with_positions(row: ResultRow, analysis: RunAnalysis, config_id: str, workload: str) -> ResultRow:
    """The row with its conditional acceptance by draft position as a sparkline in the note (from SGLang's
    histogram, else the server's per-position counters), when there is one."""
    figures = analysis.acceptance
    cell = figures.cell(config_id, workload) if isinstance(figures, AcceptanceAnalysis) else None
    positions = (cell.conditional or cell.server_conditional) if cell is not None else ()
    if not positions:
        return row
    shown = f"{CONDITIONAL_ACCEPTANCE.short} {sparkline(positions)} {fmt_positions(positions)}"
    return dataclasses.replace(row, note=" · ".join(n for n in (row.note, shown) if n))


def _cell_row(config: ConfigSummary, cell: CellRow, order: tuple[int, int], crashed: bool, crash_note: str | None) -> ResultRow:
    """The row of one (configuration, sequential workload)."""
    return ResultRow(
        config=config.name, workload=cell.workload, order=order,
        count=cell.n_ok + cell.n_zero_output + cell.n_error,
        tps=cell.decode_tps.median if cell.decode_tps else None,
        all_zero=cell.n_ok == 0 and cell.n_zero_output > 0,
        ttft_ms=cell.ttft_s.median * 1000 if cell.ttft_s else None, accept=cell.accept_length,
        speedup=cell.speedup.median if cell.speedup and cell.speedup_note != "baseline" else None,
        is_baseline=cell.speedup_note == "baseline", crashed=crashed, zero_output=cell.n_zero_output,
        errors=cell.n_error, note=" · ".join(_cell_notes(cell, crash_note)), partial=cell.partial,
        idle_draft=FLAG_IDLE in cell.flags)


def _point_rows(analysis: RunAnalysis, config: ConfigSummary, order: int, crashed: bool,
                crash_note: str) -> dict[str, ResultRow]:
    """A row per measured load point of each load workload of ``config``."""
    rows: dict[str, ResultRow] = {}
    load = analysis.load
    if load is None:
        return rows
    for w_index, load_workload in enumerate(load.workloads):
        crossover = load.crossover(config.id, load_workload.name)
        labels = load_workload.spec.points()
        for point in load.points_of(config.id, load_workload.name):
            notes = [crash_note] if crashed else []
            if point.noisy:
                notes.append(f"noisy: {point.noise}")
            if crossover is not None:
                notes.append(f"B* {crossover.text}")
            if point.meets_slo is not None:
                notes.append(f"SLO {'met' if point.meets_slo else 'missed'}")
            if point.n_error:
                notes.append(f"{point.n_error} failed")
            notes.extend(point_marks(point))  # capped, adaptive steps, retracted, drafted from memory
            rows[row_key(config.id, f"{load_workload.name}@{point.load}")] = ResultRow(
                config=config.name, workload=f"{load_workload.name} @{point.load}",
                order=(order, 2_000 + w_index * 100 + (labels.index(point.load) if point.load in labels else 99)),
                count=point.n_ok + point.n_zero_output + point.n_error,
                tps=point.per_user_tps.median if point.per_user_tps else None,
                all_zero=point.n_ok == 0 and point.n_zero_output > 0,
                ttft_ms=point.ttft_s.p50 * 1000 if point.ttft_s and point.ttft_s.p50 is not None else None,
                accept=point.accept_length, speedup=point.speedup.median if point.speedup else None,
                is_baseline=config.is_baseline, crashed=crashed, zero_output=point.n_zero_output,
                errors=point.n_error, note=" · ".join(notes), capped=bool(point.capped), noisy=bool(point.noisy))
    return rows




# ------------------------------------------------------------------------------------------ worded for the screen

COLUMN_KEYS = ("config", "workload", "n", "tps", "ttft", "accept", "speedup", "note")
"""The results table's columns, in the order :func:`view_row` gives its cells."""


def look(row: ResultRow) -> str:
    """The row's glyph, so that crashed, zero output and partial read apart without colour."""
    if row.crashed:
        return "✖"
    if row.zero_output:
        return "▲"
    if row.partial:
        return "◐"
    return ""


def row_mark(row: ResultRow, best: bool = False) -> Mark:
    """What the row means, the most serious first (as its glyph, :func:`look`)."""
    for flagged, mark in ((row.crashed, Mark.CRASHED), (row.zero_output, Mark.ZERO_OUT), (row.partial, Mark.PARTIAL),
                          (row.capped, Mark.CAPPED), (row.noisy, Mark.NOISY), (row.idle_draft, Mark.IDLE_DRAFT),
                          (best, Mark.BEST)):
        if flagged:
            return mark
    return Mark.PLAIN


def _number(value: float | None, digits: int, mark: Mark) -> ViewCell:
    if value is None:
        return ViewCell("–", mark, None)
    return ViewCell(f"{value:.{digits}f}", mark, value)


def _speedup(row: ResultRow, base: Mark | None, best: bool) -> ViewCell:
    if row.is_baseline and row.tps is not None:
        return ViewCell("base", base or Mark.MUTED, 1.0)
    if row.speedup is None:
        return ViewCell("–", base or Mark.PLAIN, None)
    mark = base or (Mark.BEST if best else Mark.FASTER if row.speedup >= 1.0 else Mark.SLOWER)
    return ViewCell(f"{row.speedup:.2f}×", mark, row.speedup)


def view_row(key: str, row: ResultRow, best: bool = False) -> ViewRow:
    """``row`` worded as the table shows it: the cells of :data:`COLUMN_KEYS`, each with its meaning."""
    base = Mark.CRASHED if row.crashed else (Mark.PARTIAL if row.partial else None)
    zero = Mark.ZERO_OUT if row.zero_output else None
    glyph = look(row)
    name = clean_text(row.config, 120)
    tps = ViewCell("zero output", Mark.ZERO_OUT, -1.0) if row.all_zero else _number(row.tps, 1, base or zero or Mark.PLAIN)
    note_mark = base or zero or {Mark.CAPPED: Mark.CAPPED, Mark.NOISY: Mark.NOISY,
                                 Mark.IDLE_DRAFT: Mark.IDLE_DRAFT}.get(row_mark(row), Mark.MUTED)
    cells = (
        ViewCell(f"{glyph} {name}" if glyph else name, base or zero or Mark.PLAIN, row.order),
        ViewCell(clean_text(row.workload, 60), base or Mark.PLAIN, row.order[1]),
        ViewCell(str(row.count), base or Mark.PLAIN, row.count),
        tps,
        _number(row.ttft_ms, 0, base or Mark.PLAIN),
        _number(row.accept, 2, base or Mark.PLAIN),
        _speedup(row, base, best),
        ViewCell(clean_text(row.note, 240), note_mark, row.note),
    )
    return ViewRow(key, cells, row_mark(row, best), cut=row.crashed or row.partial)


def best_rows(rows: Mapping[str, ResultRow]) -> set[str]:
    """The keys of the rows with the best speedup (above 1) of their workload, among rows neither crashed nor cut."""
    best: dict[str, tuple[float, str]] = {}
    for key, row in rows.items():
        if row.speedup is None or row.speedup <= 1.0 or row.crashed or row.partial or row.is_baseline:
            continue
        if row.workload not in best or row.speedup > best[row.workload][0]:
            best[row.workload] = (row.speedup, key)
    return {key for _, key in best.values()}


def view_rows(rows: Mapping[str, ResultRow]) -> dict[str, ViewRow]:
    """Every row worded (:func:`view_row`), the best of each workload marked."""
    best = best_rows(rows)
    return {key: view_row(key, row, key in best) for key, row in rows.items()}
