"""The acceptance sections of every report: named figures, per-position acceptance and the histogram, the
draft cost (speedup = acceptance length ÷ step cost ×) and the category × configuration matrices.

Every figure is labelled by its definition in :mod:`specbench_tui.core.acceptance` (never a bare "accept").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench_tui.core.acceptance import (
    ACCEPTANCE_LENGTH,
    ACCEPTED_PER_VERIFIED,
    CONDITIONAL_ACCEPTANCE,
    DRAFT_ACCEPTANCE_RATE,
    GLOSSARY,
    STEP_COST,
    AcceptanceAnalysis,
    CategoryMatrix,
    CellAcceptance,
    client_definition,
    fmt_positions,
    server_length_figure,
    sparkline,
)
from specbench_tui.core.results import RunAnalysis, plain_json
from specbench_tui.core.intervals import Interval
from specbench_tui.report.tables import DASH, Table, fmt_num, fmt_pm

EXPLAIN = ("speedup = acceptance length ÷ step cost ×: acceptance length is tokens per verify step, step cost × "
           "the mean verify-step time over the baseline's step time on the same workload; 'limited by' names the "
           "factor that loses more of the ideal (every draft accepted at no extra cost)")


def _figures(analysis: RunAnalysis) -> AcceptanceAnalysis | None:
    figures = analysis.acceptance
    return figures if isinstance(figures, AcceptanceAnalysis) and figures.cells else None


def _speculative(analysis: RunAnalysis, cell: CellAcceptance) -> bool:
    config = analysis.config(cell.config_id)
    return bool(config and config.speculative)


def _name(analysis: RunAnalysis, config_id: str) -> str:
    config = analysis.config(config_id)
    return config.name if config else config_id


def _server_length(cell: CellAcceptance) -> str:
    text = fmt_num(cell.server_acceptance_length, 2)
    return text if cell.agree else f"{text} (differs)"


def _draft_rate(cell: CellAcceptance, interval: Interval | None = None) -> str:
    """The client's draft acceptance rate (with its bootstrap interval); the server counters' where the requests
    carry none, or beside it where the two differ by more than 1 %."""
    mine, theirs = cell.draft_acceptance_rate, cell.server_draft_acceptance_rate
    if mine is None and theirs is not None:
        return f"{fmt_num(theirs, 3)} (server)"
    if mine is not None and theirs is not None and abs(mine - theirs) > 0.01 * max(theirs, 1e-9):
        return f"{fmt_num(mine, 3)}{fmt_pm(interval, 3)} (server {fmt_num(theirs, 3)})"
    return fmt_num(mine, 3) + (fmt_pm(interval, 3) if mine is not None else "")


def _interval(analysis: RunAnalysis, cell: CellAcceptance, figure: str) -> Interval | None:
    """The cell's bootstrap interval of ``figure`` (``acceptance_length``, ``draft_acceptance_rate``), when the
    analysis has intervals (a report's does)."""
    intervals = analysis.intervals
    cells = intervals.cell(cell.config_id, cell.workload) if intervals is not None else None
    value = getattr(cells, figure, None)
    return value if isinstance(value, Interval) else None


def _positions(cell: CellAcceptance) -> list[str]:
    """The sparkline and values of conditional acceptance by position: the histogram's, else the server
    counters' (marked ``(server)``)."""
    if cell.conditional:
        return [sparkline(cell.conditional), fmt_positions(cell.conditional)]
    if cell.server_conditional:
        return [sparkline(cell.server_conditional), fmt_positions(cell.server_conditional) + " (server)"]
    return [DASH, DASH]


def acceptance_table(analysis: RunAnalysis, workload: str) -> Table | None:
    """Per speculative configuration on one workload: the named figures, per-position acceptance and the cost."""
    figures = _figures(analysis)
    if figures is None:
        return None
    cells = [c for c in figures.cells if c.workload == workload and _speculative(analysis, c)]
    if not cells:
        return None
    source = server_length_figure(figures.engine)
    per_draft = "" if source is None else ", per drafting step"
    table = Table(f"Acceptance: {workload}",
                  ["config", f"{client_definition(figures.engine).name} (client)",
                   f"{ACCEPTANCE_LENGTH.name} (server{per_draft})",
                   DRAFT_ACCEPTANCE_RATE.name, ACCEPTED_PER_VERIFIED.name, f"{CONDITIONAL_ACCEPTANCE.label} by k",
                   "", STEP_COST.name, "length ÷ cost", "measured speedup", "limited by"],
                  align="lrrrrlrrrrl")
    for cell in cells:
        row = analysis.row(cell.config_id, workload)
        measured = row.speedup.median if row is not None and row.speedup is not None else None
        table.rows.append([
            _name(analysis, cell.config_id),
            fmt_num(cell.acceptance_length, 2) + fmt_pm(_interval(analysis, cell, "acceptance_length"), 2),
            _server_length(cell), _draft_rate(cell, _interval(analysis, cell, "draft_acceptance_rate")),
            fmt_num(cell.accepted_per_verified, 2),
            *_positions(cell),
            fmt_num(cell.step_cost, 2), fmt_num(cell.predicted_speedup, 2), fmt_num(measured, 2),
            cell.limit or DASH])
    table.notes.append(EXPLAIN)
    if source is not None:
        table.notes.append(engine_note(figures.engine, source))
    return table


def engine_note(engine: str, source: str) -> str:
    """What the client's and the server's columns measure on an engine whose server counts drafting steps
    (llama.cpp, vLLM): two definitions, so they are shown side by side and never compared."""
    return (f"{engine}: {client_definition(engine).name} (client) = completion tokens ÷ (completion − accepted "
            f"draft tokens), every target forward counted; {ACCEPTANCE_LENGTH.name} (server, per drafting step) = "
            f"{source} over the workload, only the steps that drafted counted: two definitions, shown side by "
            f"side; the figures of one definition (tokens per target forward, draft acceptance rate) agree "
            f"with the server's counters, else marked (differs)")


def histogram_table(analysis: RunAnalysis, workload: str) -> Table | None:
    """Per speculative configuration: verify steps that accepted exactly 0, 1, … drafts (SGLang's
    ``spec_correct_drafts_histogram`` over the workload)."""
    figures = _figures(analysis)
    if figures is None:
        return None
    cells = [c for c in figures.cells if c.workload == workload and c.histogram]
    if not cells:
        return None
    width = max(len(c.histogram) for c in cells)
    table = Table(f"Accepted drafts per verify step (histogram): {workload}",
                  ["config", "steps", *(str(k) for k in range(width))], align="l" + "r" * (width + 1))
    for cell in cells:
        steps = sum(cell.histogram)
        shares = [f"{h / steps:.1%}" if steps else DASH for h in cell.histogram]
        table.rows.append([_name(analysis, cell.config_id), str(steps), *shares, *([""] * (width - len(shares)))])
    return table


def category_tables(analysis: RunAnalysis) -> list[Table]:
    """Per workload with categories: speedup and acceptance length, category × configuration."""
    figures = analysis.acceptance
    if not isinstance(figures, AcceptanceAnalysis):
        return []
    out: list[Table] = []
    for matrix in figures.categories:
        out += [_matrix_table(matrix, "speedup", matrix.speedup),
                _matrix_table(matrix, ACCEPTANCE_LENGTH.name, matrix.acceptance_length)]
    return out


def _matrix_table(matrix: CategoryMatrix, what: str, values: dict[tuple[str, str], float]) -> Table:
    table = Table(f"{what[0].upper() + what[1:]} by category: {matrix.workload}",
                  ["category", *(n for _, n in matrix.configs)], align="l" + "r" * len(matrix.configs))
    for category in matrix.categories:
        table.rows.append([category, *(fmt_num(values.get((category, i)), 2) for i, _ in matrix.configs)])
    return table


def acceptance_tables(analysis: RunAnalysis) -> list[Table]:
    """Every acceptance section, in report order."""
    out: list[Table] = []
    for workload in analysis.workloads:
        for table in (acceptance_table(analysis, workload.name), histogram_table(analysis, workload.name)):
            if table is not None:
                out.append(table)
    return out + category_tables(analysis)


def glossary_lines() -> list[str]:
    """One line per definition, for a report's legend."""
    return [f"{d.name}: {d.formula}" for d in GLOSSARY]


def acceptance_json(analysis: RunAnalysis) -> dict[str, object] | None:
    """The acceptance figures for the JSON report (None when no cell has any)."""
    figures = analysis.acceptance
    if not isinstance(figures, AcceptanceAnalysis) or not figures.cells:
        return None
    data = figures.to_json()
    names = {c.id: c.name for c in analysis.configs}
    for cell in data["cells"]:
        cell["config"] = names.get(cell["config_id"], cell["config_id"])
    cleaned: dict[str, object] = plain_json(data)
    return cleaned


@dataclass(frozen=True)
class PositionChange:
    """One cell's conditional acceptance by draft position in run A and in run B."""

    config: str
    workload: str
    a: tuple[float | None, ...]
    b: tuple[float | None, ...]

    @property
    def change(self) -> tuple[float | None, ...]:
        """B − A per position (None where either side never reached it)."""
        width = max(len(self.a), len(self.b))
        a = (*self.a, *([None] * (width - len(self.a))))
        b = (*self.b, *([None] * (width - len(self.b))))
        return tuple(None if x is None or y is None else y - x for x, y in zip(a, b))


def position_changes(a: RunAnalysis, b: RunAnalysis,
                     cells: Sequence[tuple[str, str, str]]) -> tuple[PositionChange, ...]:
    """For each (config id, name, workload) both runs hold a histogram of, the per-position acceptance."""
    fa, fb = a.acceptance, b.acceptance
    if not isinstance(fa, AcceptanceAnalysis) or not isinstance(fb, AcceptanceAnalysis):
        return ()
    out = []
    for config_id, name, workload in cells:
        ca, cb = fa.cell(config_id, workload), fb.cell(config_id, workload)
        if ca is not None and cb is not None and (ca.conditional or cb.conditional):
            out.append(PositionChange(name, workload, ca.conditional, cb.conditional))
    return tuple(out)


def position_change_table(changes: Sequence[PositionChange]) -> Table:
    table = Table(f"{CONDITIONAL_ACCEPTANCE.name[0].upper() + CONDITIONAL_ACCEPTANCE.name[1:]} (B vs A)",
                  ["config", "workload", "A by k", "B by k", "change by k"], align="lllll")
    for c in changes:
        delta = " ".join("-" if d is None else f"{d:+.2f}" for d in c.change)
        table.rows.append([c.config, c.workload, fmt_positions(c.a) or DASH, fmt_positions(c.b) or DASH,
                           delta or DASH])
    return table
