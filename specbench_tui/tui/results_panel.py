"""Results as they arrive: configuration × workload with decode tok/s, TTFT, acceptance and speedup.

Every figure is the run's :class:`~specbench_tui.core.analysis.RunAnalysis` (the app computes it off the UI
thread from the state's ledger), so the table shows what ``specbench report`` prints for the same run
directory: the same medians, item-paired speedups, acceptance, and partial cells. The state only adds what
the queue knows (crash signatures, live states)."""

from __future__ import annotations

import dataclasses

from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any

from rich.style import Style
from rich.text import Text
from textual import events, on
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist

from specbench_tui.application.viewmodel import point_marks
from specbench_tui.core.acceptance import (
    ACCEPTANCE_LENGTH,
    CONDITIONAL_ACCEPTANCE,
    AcceptanceAnalysis,
    Definition,
    client_definition,
    fmt_positions,
    sparkline,
)
from specbench_tui.core.results import (
    ACCEPT_FROM_SERVER,
    COVERAGE_NOT_RUN,
    FLAG_BURST,
    FLAG_IDLE,
    FLAG_MISMATCH,
    RunAnalysis,
)
from specbench_tui.core.events import ConfigState
from specbench_tui.core.verdicts import FLAG_NOTES
from specbench_tui.core.state import RunState
from specbench_tui.tui.palette import DEFAULT_PALETTE, Palette
from specbench_tui.tui.safe_text import clean
from specbench_tui.tui.key_hold import answer_held_for
from specbench_tui.tui.textual_private import CachedCellsTable, SlicedRestyle, rows_pending, update_row

ACCEPT_COLUMN = "accept"
"""The key of the acceptance column; its header is the glossary's short name of what the engine's client
measures (:func:`~specbench_tui.core.acceptance.client_definition`): ``acc.len`` on SGLang, ``tok/fwd`` on
llama.cpp and vLLM."""
COLUMNS = (("config", "config"), ("workload", "workload"), ("n", "n"), ("tps", "tok/s"), ("ttft", "TTFT ms"),
           (ACCEPT_COLUMN, ACCEPTANCE_LENGTH.short), ("speedup", "speedup"), ("note", "note"))
COLUMN_KEYS = tuple(key for key, _ in COLUMNS)
SORTS: tuple[tuple[str | None, str, bool], ...] = (
    (None, "plan order", False), ("tps", "tok/s", True), ("speedup", "speedup", True), ("ttft", "TTFT", False),
    (ACCEPT_COLUMN, ACCEPTANCE_LENGTH.short, True),
)
"""(column, label, descending) in the order the sort key cycles through them (the acceptance column's label is
the panel's :attr:`ResultsPanel.figure`)."""
_KEY_SEPARATOR = "\x1f"
_NO_WORKLOAD = "\x00"


class Cell(Text):
    """A table cell that carries the value it sorts by."""

    sort_value: Any = None
    cut: bool = False
    """The row's configuration crashed or its workload was cut short: sorted after every measured row."""


def _cell(text: str, style: Style | str = "", sort_value: Any = None) -> Cell:
    cell = Cell(text, style=style, no_wrap=True, overflow="ellipsis")
    cell.sort_value = sort_value
    return cell


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
        crashed = config.state in (ConfigState.CRASHED.value, ConfigState.FAILED.value)
        known_signature, known_reason = known.get(config.id, (None, None))
        signature = known_signature or config.signature
        reason = known_reason or config.reason
        crash_note = f"✖ {signature or config.state}" + (f": {reason}" if reason and not signature else "")
        cells = analysis.rows_of(config.id)
        for cell in cells:
            if cell.measured or (cell.coverage == COVERAGE_NOT_RUN and not crashed):
                rows[row_key(config.id, cell.workload)] = _with_positions(_cell_row(
                    config, cell, (order, workload_order.get(cell.workload, 1_000)), crashed,
                    crash_note if crashed else None), analysis, config.id, cell.workload)
        rows.update(_point_rows(analysis, config, order, crashed, f"✖ {signature or config.state}"))
        if crashed and not any(r.measured for r in cells):
            not_run = sum(1 for r in cells if r.coverage == COVERAGE_NOT_RUN)
            rows[row_key(config.id, None)] = ResultRow(
                config=config.name, workload="—", order=(order, -1), count=0, tps=None, all_zero=False,
                ttft_ms=None, accept=None, speedup=None, is_baseline=False, crashed=True, zero_output=0, errors=0,
                note=crash_note + (f" · {not_run} workload{'s' if not_run != 1 else ''} not run" if not_run else ""))
    return rows


def _cell_notes(cell: Any, crash_note: str | None) -> list[str]:
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


def _cell_row(config: Any, cell: Any, order: tuple[int, int], crashed: bool, crash_note: str | None) -> ResultRow:
    """The row of one (configuration, sequential workload)."""
    return ResultRow(
        config=config.name, workload=cell.workload, order=order,
        count=cell.n_ok + cell.n_zero_output + cell.n_error,
        tps=cell.decode_tps.median if cell.decode_tps else None,
        all_zero=cell.n_ok == 0 and cell.n_zero_output > 0,
        ttft_ms=cell.ttft_s.median * 1000 if cell.ttft_s else None, accept=cell.accept_length,
        speedup=cell.speedup.median if cell.speedup and cell.speedup_note != "baseline" else None,
        is_baseline=cell.speedup_note == "baseline", crashed=crashed, zero_output=cell.n_zero_output,
        errors=cell.n_error, note=" · ".join(_cell_notes(cell, crash_note)), partial=cell.partial)


def _point_rows(analysis: RunAnalysis, config: Any, order: int, crashed: bool,
                crash_note: str) -> dict[str, ResultRow]:
    """A row per measured load point of each load workload of ``config``."""
    rows: dict[str, ResultRow] = {}
    load = analysis.load
    for w_index, load_workload in enumerate(load.workloads if load is not None else ()):
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
                errors=point.n_error, note=" · ".join(notes))
    return rows


def _number(value: float | None, digits: int, sort_value: float | None, style: Style | str = "") -> Cell:
    if value is None:
        return _cell("–", style, None)
    return _cell(f"{value:.{digits}f}", style, sort_value if sort_value is not None else value)


class ResultsPanel(CachedCellsTable):
    """Configuration × workload medians (zero-output requests are kept out and flagged)."""

    ALLOW_MAXIMIZE = True

    def __init__(self, *, id: str | None = None, engine: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", classes="panel")
        self.figure: Definition = client_definition(engine or "sglang")
        """What the acceptance column shows: the engine's client figure, headed by its glossary short name."""
        self.border_title = "2 Results"
        self.palette: Palette = DEFAULT_PALETTE
        """Styles from the current theme (set by the app)."""
        self.sort_index = 0
        """Position in :data:`SORTS`."""
        self.sort_reverse: bool | None = None
        """Overrides the sort's natural direction after a header click."""
        self._shown: dict[str, ResultRow] = {}
        self._followed_y = 0.0
        """Where the table was last scrolled to follow a new row (the user scrolling elsewhere stops it)."""
        self._follow_key: str | None = None
        """The row to bring into view once the table has measured it."""
        self._followed_key: str | None = None
        """The row last brought into view (kept in view when the panel changes size)."""
        self._restyle = SlicedRestyle(self, COLUMN_KEYS, self._cells_of, wait=lambda: answer_held_for(self.app))

    def _cells_of(self, key: str) -> list[Cell] | None:
        row = self._shown.get(key)
        return self._cells(row) if row is not None else None

    def restyle(self) -> None:
        """Recolour every row with the current palette (rows on screen at once, the rest in slices)."""
        self._restyle.start()

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(self.figure.short if key == ACCEPT_COLUMN else label, key=key)
        self._update_subtitle()

    @property
    def selected_config_id(self) -> str | None:
        if self.row_count == 0:
            return None
        try:
            key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        except CellDoesNotExist:
            return None
        return config_of_row_key(key.value or "")

    def sync(self, state: RunState, force: bool = False, analysis: RunAnalysis | None = None,
             rows: dict[str, ResultRow] | None = None) -> None:
        """Add new rows and rewrite changed ones; the cursor and scroll position are kept (without an analysis
        yet, the rows shown stay as they are). ``rows``: already built from ``analysis`` (:func:`build_rows`)."""
        if analysis is None:
            return
        if rows is None:
            rows = build_rows(state, analysis)
        changed = False
        alarming: list[str] = []
        for key in [k for k in self._shown if k not in rows]:
            self.remove_row(key)
            del self._shown[key]
            changed = True
        for key, row in rows.items():
            if not force and self._shown.get(key) == row:
                continue
            cells = self._cells(row)
            before = self._shown.get(key)
            if key in self._shown:
                update_row(self, key, COLUMN_KEYS, cells)
            else:
                self.add_row(*cells, key=key)
            if self.look(row) in ("✖", "▲") and (before is None or self.look(before) != self.look(row)):
                alarming.append(key)
            self._shown[key] = row
            changed = True
        if changed:
            self.apply_sort()
        if alarming and not force:
            self.follow(alarming[-1])

    def follow(self, key: str) -> None:
        """Bring a new crash or zero-output row into view, unless the user has scrolled the table away
        (done once the table has measured its new rows: before that it cannot scroll down to them)."""
        if abs(self.scroll_y - self._followed_y) >= 1 and self.scroll_y > 0:
            return  # the user is reading elsewhere
        pending, self._follow_key = self._follow_key, key
        if pending is None:
            self.call_after_refresh(self._scroll_to_followed)

    @property
    def follow_pending(self) -> bool:
        """Whether a row is still to be brought into view (the tests wait for it)."""
        return self._follow_key is not None

    def _scroll_to_followed(self) -> None:
        key = self._follow_key
        if key is None:
            return
        if rows_pending(self):
            # Rows added but not measured yet (the table does that when its queue is empty): the scroll range
            # does not reach them, so wait for the next refresh rather than stop short of the row.
            self.call_after_refresh(self._scroll_to_followed)
            return
        self._follow_key = None
        try:
            index = self.get_row_index(key)
        except Exception:  # noqa: BLE001 - the row is gone again
            return
        visible = max(1, self.size.height - 3)  # border and header
        top = int(self.scroll_y)
        if not top <= index < top + visible:
            self.scroll_to(y=max(0, index - visible // 2), animate=False, immediate=True, force=True)
        self._followed_y = self.scroll_y
        self._followed_key = key

    def on_resize(self, event: events.Resize) -> None:
        """The panel changed size (a panel maximised, a line shown below it): the followed row stays in view,
        unless the user has scrolled away since (a follow done just before would otherwise be left cut off)."""
        self._follow_again()

    def watch_show_horizontal_scrollbar(self, shown: bool) -> None:
        """The horizontal scrollbar came or went: the rows' height changed without a resize (a follow done
        before it came, a frame late on a busy machine, was held one row short of the row by the old range)."""
        self._follow_again()

    def _follow_again(self) -> None:
        if (self._followed_key is not None and self._follow_key is None
                and abs(self.scroll_y - self._followed_y) < 1):
            self._follow_key = self._followed_key
            self.call_after_refresh(self._scroll_to_followed)

    def _cells(self, row: ResultRow) -> list[Cell]:
        cells = self._styled_cells(row)
        for cell in cells:
            cell.cut = row.crashed or row.partial
        return cells

    @staticmethod
    def look(row: ResultRow) -> str:
        """The row's class glyph, so that crashed, zero output and partial read apart without colour."""
        if row.crashed:
            return "✖"
        if row.zero_output:
            return "▲"
        if row.partial:
            return "◐"
        return ""

    def _styled_cells(self, row: ResultRow) -> list[Cell]:
        palette = self.palette
        base = palette.crash if row.crashed else (palette.warning if row.partial else "")
        zero = palette.zero_output
        config_style = base or (zero if row.zero_output else "")
        if row.all_zero:
            tps = _cell("zero output", zero, -1.0)
        else:
            tps = _number(row.tps, 1, None, base or (zero if row.zero_output else ""))
        if row.is_baseline and row.tps is not None:
            speedup = _cell("base", palette.muted if not base else base, 1.0)
        elif row.speedup is not None:
            style = base or (palette.success if row.speedup >= 1.0 else palette.warning)
            speedup = _cell(f"{row.speedup:.2f}×", style, row.speedup)
        else:
            speedup = _cell("–", base, None)
        return [
            _cell(f"{self.look(row)} {clean(row.config, 120)}" if self.look(row) else clean(row.config, 120),
                  config_style, row.order),
            _cell(clean(row.workload, 60), base, row.order[1]),
            _cell(str(row.count), base, row.count),
            tps,
            _number(row.ttft_ms, 0, None, base),
            _number(row.accept, 2, None, base),
            speedup,
            _cell(clean(row.note, 240), base or (zero if row.zero_output else palette.muted), row.note),
        ]

    def sort_label(self) -> str:
        """The current sort's label (the acceptance column's is the short name of the figure it shows)."""
        column, label, _ = SORTS[self.sort_index]
        return self.figure.short if column == ACCEPT_COLUMN else label

    def cycle_sort(self) -> str:
        """Sort by the next column in :data:`SORTS`; returns its label."""
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self.sort_reverse = None
        self.apply_sort()
        return self.sort_label()

    def sort_by_column(self, column: str) -> None:
        """Sort by ``column`` (a header click); a second click on it reverses the order."""
        if column == "config":
            column_index: int | None = 0
        else:
            column_index = next((i for i, (key, _, _) in enumerate(SORTS) if key == column), None)
        index = column_index
        if index is None:
            return
        if index == self.sort_index:
            current = SORTS[index][2] if self.sort_reverse is None else self.sort_reverse
            self.sort_reverse = not current
        else:
            self.sort_index = index
            self.sort_reverse = None
        self.apply_sort()

    def apply_sort(self) -> None:
        column, _, descending = SORTS[self.sort_index]
        reverse = descending if self.sort_reverse is None else self.sort_reverse
        if column is None:
            self.sort("config", key=lambda cell: cell.sort_value)
        else:
            def key(cell: Any) -> tuple[Any, ...]:
                # Measured rows first in either direction, then crashed or cut-short ones, then rows without
                # the figure: a crashed configuration's two partial measurements never top a ranking.
                value = getattr(cell, "sort_value", None)
                missing = value is None
                number = value if isinstance(value, (int, float)) else 0
                return (getattr(cell, "cut", False), missing, -number if reverse else number)

            self.sort(column, key=key)
        self._update_subtitle()

    def _update_subtitle(self) -> None:
        column, _, descending = SORTS[self.sort_index]
        label = self.sort_label()
        reverse = descending if self.sort_reverse is None else self.sort_reverse
        arrow = "" if column is None else (" ↓" if reverse else " ↑")
        self.border_subtitle = f"sort: {label}{arrow} (o)"

    @on(DataTable.HeaderSelected)
    def _header_clicked(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        self.sort_by_column(str(event.column_key.value))
