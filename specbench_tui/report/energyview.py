"""The report's energy table (every format): joules per output token and per accepted token and the energy
speedup against the matched baseline, per configuration and workload (:mod:`specbench_tui.core.energy`)."""

from __future__ import annotations


from specbench_tui.core.energy import NO_COUNTER, EnergyCell
from specbench_tui.report.tables import Table, render_markdown_table, render_text_table

ENERGY_CSV_COLUMNS = ("energy_j", "energy_basis", "j_per_output_token", "j_per_accepted_token", "energy_speedup")
"""Columns the CSV gains when the run measured energy (empty for a cell without a window)."""


def _fmt(value: float | None, digits: int = 4) -> str:
    return "" if value is None else f"{value:.{digits}g}"


def energy_table(cells: tuple[EnergyCell, ...] | list[EnergyCell]) -> Table | None:
    """None for a run that measured no energy (recorded before it was, or every window empty)."""
    if not cells:
        return None
    table = Table("Energy per token (NVML total-energy counter of every GPU the configuration holds)",
                  ["config", "workload", "joules", "basis", "output tokens", "J/output token", "J/accepted token",
                   "energy speedup"], align="llrlrrrr")
    for cell in cells:
        table.rows.append([cell.config, cell.workload, _fmt(cell.joules), cell.basis, str(cell.output_tokens),
                           _fmt(cell.j_per_output_token) or "n/a", _fmt(cell.j_per_accepted_token) or "n/a",
                           f"{cell.energy_speedup:.2f}x" if cell.energy_speedup is not None else "n/a"])
    bases = {cell.basis for cell in cells}
    if "gross" in bases:
        table.notes.append("gross: the GPUs' whole draw over each measured window; idle power is not subtracted.")
    if "net of idle" in bases:
        table.notes.append("net of idle: the idle power measured before the sweep is subtracted over each window.")
    if NO_COUNTER in bases:
        table.notes.append(f"{NO_COUNTER}: the GPUs (or their backend) give no total-energy counter.")
    table.notes.append("energy speedup: the matched baseline's joules per output token over this one's.")
    return table


def energy_text(cells: tuple[EnergyCell, ...] | list[EnergyCell]) -> list[str]:
    """The txt report's lines of the energy table (none for a run without energy)."""
    table = energy_table(cells)
    return [] if table is None else ["", *render_text_table(table)]


def energy_markdown(cells: tuple[EnergyCell, ...] | list[EnergyCell]) -> list[str]:
    """The Markdown report's lines of the energy table (none for a run without energy)."""
    table = energy_table(cells)
    return [] if table is None else render_markdown_table(table, 2)


def energy_csv(cells: tuple[EnergyCell, ...] | list[EnergyCell]) -> dict[tuple[str, str], dict[str, str]]:
    """(config name, workload) -> the energy columns of its CSV row."""
    return {(c.config, c.workload): {"energy_j": _fmt(c.joules, 6), "energy_basis": c.basis,
                                     "j_per_output_token": _fmt(c.j_per_output_token, 6),
                                     "j_per_accepted_token": _fmt(c.j_per_accepted_token, 6),
                                     "energy_speedup": _fmt(c.energy_speedup, 6)} for c in cells}


def energy_json(cells: tuple[EnergyCell, ...] | list[EnergyCell]) -> list[dict[str, object]]:
    """The cells as JSON objects (a list), for the JSON report."""
    return [dict(cell.__dict__) for cell in cells]
