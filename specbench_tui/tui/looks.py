"""How a configuration's outcome looks: a glyph and a word for each class, readable without colour.

Crashed, zero output and partial are three different troubles and never share a look: ``✖ crashed`` (the server
died), ``▲ zero-out`` (it answered, with no tokens, on some workload), ``◐ partial`` (a workload was cut short,
its figures cover only the items it reached). The classes come from the ledger (the state's per-configuration
counts and the analysis' coverage); this module only names and orders them.
"""

from __future__ import annotations

from collections.abc import Iterable

from specbench_tui.core.results import RunAnalysis
from specbench_tui.core.state import ConfigView

ZERO_OUTPUT = "zero-out"
PARTIAL = "partial"
GLYPHS = {
    "pending": "·", "paused": "⏸", "launching": "◔", "ready": "◑", "running": "▶", "done": "✔",
    "crashed": "✖", "failed": "✖", "skipped": "↷", "node_lost": "⚠", ZERO_OUTPUT: "▲", PARTIAL: "◐",
}


def partial_configs(analysis: RunAnalysis | None) -> frozenset[str]:
    """Configurations with a workload cut short (analysis coverage ``partial``)."""
    if analysis is None:
        return frozenset()
    return frozenset(c.id for c in analysis.configs if any(row.partial for row in analysis.rows_of(c.id)))


def outcome_word(view: ConfigView, shown_state: str, partial: Iterable[str] | frozenset[str]) -> str:
    """The state word for ``view``: its state, or for a configuration that ended without crashing,
    ``zero-out`` when any answer had no tokens and ``partial`` when a workload was cut short."""
    if shown_state == "done":
        if view.zero_output:
            return ZERO_OUTPUT
        if view.config_id in partial:
            return PARTIAL
    return shown_state


def glyph(word: str) -> str:
    return GLYPHS.get(word, "?")
