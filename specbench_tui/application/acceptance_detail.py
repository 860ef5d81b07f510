"""What the TUI's acceptance screen (key ``a``) shows for one configuration, picked out of the run's analysis.

:func:`acceptance_detail` turns the analysis the results table shows into an :class:`AcceptanceDetail`: per
workload the configuration's figures under their glossary names (:mod:`specbench_tui.core.acceptance`):
acceptance length, draft acceptance rate, accepted per verified, conditional acceptance by draft position, the
histogram of accepted drafts per verify step as shares, step cost ×, length ÷ cost against the measured
speedup, and for a workload with categories (a ``prompt_dataset``) its category × configuration matrices.
Pure data: the screen (:mod:`specbench_tui.tui.acceptance_screen`) only lays it out.
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench_tui.core.acceptance import (
    ACCEPTANCE_LENGTH,
    TOKENS_PER_TARGET_FORWARD,
    AcceptanceAnalysis,
    CategoryMatrix,
    CellAcceptance,
    Definition,
)
from specbench_tui.core.results import CellRow, RunAnalysis
from specbench_tui.core.verdicts import config_verdict, partial_configs, zero_output_configs


@dataclass(frozen=True)
class WorkloadAcceptance:
    """One workload of the configuration: its acceptance figures, the measured speedup and its matrices."""

    workload: str
    cell: CellAcceptance | None
    """None when the configuration has no figure on this workload (not measured yet, crashed before it)."""
    client: Definition
    """What ``cell.acceptance_length`` measures (acceptance length on SGLang, tokens per target forward on
    llama.cpp and vLLM)."""
    measured_speedup: float | None
    """The median paired speedup over the baseline (the results table's figure)."""
    shares: tuple[float, ...] = ()
    """The histogram as shares of the verify steps (accepted exactly 0, 1, … drafts)."""
    steps: int = 0
    """Verify steps behind the histogram."""
    positions: tuple[float | None, ...] = ()
    """Conditional acceptance by draft position 1.. (the histogram's, else the server counters')."""
    positions_from_server: bool = False
    matrix: CategoryMatrix | None = None
    why: str | None = None
    """Why the cell has no acceptance figure although it ran (every request zero-output or failed, not run)."""


@dataclass(frozen=True)
class AcceptanceDetail:
    """The acceptance screen's content for one configuration."""

    config_id: str
    config: str
    speculative: bool
    state: str
    """How it ended, in the queue's word (``zero-out`` or ``partial`` for a done one that is not what done says)."""
    workloads: tuple[WorkloadAcceptance, ...]
    index: int = 0
    """Where the configuration stands among :attr:`choices`."""
    choices: tuple[str, ...] = ()
    """Every configuration id the screen can step to (plan order; skipped ones left out)."""


def _client(cell: CellAcceptance) -> Definition:
    """What the cell's client-side figure measures (the cell names it: :attr:`CellAcceptance.client_definition`)."""
    return TOKENS_PER_TARGET_FORWARD if cell.client_definition == TOKENS_PER_TARGET_FORWARD.name else ACCEPTANCE_LENGTH


def _why_no_figure(row: CellRow | None) -> str | None:
    """What the results table says of a cell that ran without one ok request (its acceptance is not a zero)."""
    if row is None or row.n_ok:
        return None
    if row.not_run:
        return f"not run: {row.not_run}"
    if row.n_zero_output:
        return (f"no acceptance figure: {row.n_zero_output} of {row.n_zero_output + row.n_error} requests returned "
                "zero tokens (ZERO-OUTPUT)")
    if row.n_error:
        return f"no acceptance figure: all {row.n_error} requests failed"
    return None


def _workload(analysis: RunAnalysis, figures: AcceptanceAnalysis | None, config_id: str,
              workload: str) -> WorkloadAcceptance:
    cell = figures.cell(config_id, workload) if figures is not None else None
    row = analysis.row(config_id, workload)
    measured = (row.speedup.median if row is not None and row.speedup is not None and row.speedup_note != "baseline"
                else None)
    matrix = next((m for m in figures.categories if m.workload == workload), None) if figures is not None else None
    why = _why_no_figure(row)
    if cell is None:
        return WorkloadAcceptance(workload, None, ACCEPTANCE_LENGTH, measured, matrix=matrix, why=why)
    steps = sum(cell.histogram)
    shares = tuple(h / steps for h in cell.histogram) if steps else ()
    positions = cell.conditional or cell.server_conditional
    return WorkloadAcceptance(workload, cell, _client(cell), measured, shares, steps, positions,
                              not cell.conditional and bool(cell.server_conditional), matrix, why)


def acceptance_detail(analysis: RunAnalysis | None, config_id: str | None) -> AcceptanceDetail | None:
    """The figures of ``config_id`` on every workload of the run (None before the first analysis or for a
    configuration the run does not have). A configuration id that is not in the run falls back to the first
    speculative configuration."""
    if analysis is None or not analysis.configs:
        return None
    config = analysis.config(config_id) if config_id is not None else None
    if config is None:
        config = next((c for c in analysis.configs if c.speculative), analysis.configs[0])
    choices = tuple(c.id for c in analysis.configs if c.state != "skipped" or c.id == config.id)
    figures = analysis.acceptance if isinstance(analysis.acceptance, AcceptanceAnalysis) else None
    workloads = tuple(_workload(analysis, figures, config.id, w.name) for w in analysis.workloads
                      if analysis.row(config.id, w.name) is not None
                      or (figures is not None and figures.cell(config.id, w.name) is not None))
    state = config_verdict(config.state, zero_output=config.id in zero_output_configs(analysis),
                           partial=config.id in partial_configs(analysis))  # the queue's word: never a zero-out "done"
    return AcceptanceDetail(config.id, config.name, config.speculative, state, workloads,
                            choices.index(config.id), choices)


def step_choice(detail: AcceptanceDetail, step: int) -> str:
    """The configuration id ``step`` places from the shown one (wrapping around the run's configurations)."""
    if not detail.choices:
        return detail.config_id
    return detail.choices[(detail.index + step) % len(detail.choices)]
